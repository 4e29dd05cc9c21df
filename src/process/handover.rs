//! Handing a session's PTY master from its helper to a daemon over the helper's Unix socket: one
//! message carrying the helper's report lines so far (the program's pid, its exit status once
//! known) as data and a duplicate of the master as `SCM_RIGHTS` ancillary data. Used by the
//! helper (sending) and by a daemon adopting the session (receiving); nothing else.

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// The most report bytes a handover carries (a few short lines).
const MAX_HELLO: usize = 512;

/// Sends `hello` and a duplicate of `master` on the connected socket `conn`.
pub(crate) fn send(conn: &impl AsRawFd, hello: &[u8], master: &impl AsRawFd) -> io::Result<()> {
    let fds = [master.as_raw_fd()];
    let control = [ControlMessage::ScmRights(&fds)];
    let iov = [IoSlice::new(hello)];
    let sent = sendmsg::<()>(
        conn.as_raw_fd(),
        &iov,
        &control,
        MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if sent != hello.len() {
        return Err(io::Error::other("the handover message was cut short"));
    }
    Ok(())
}

/// Receives what [`send`] sent: the report bytes and the master.
pub(crate) fn receive(conn: &impl AsFd) -> io::Result<(Vec<u8>, OwnedFd)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    use std::mem::MaybeUninit;
    let mut data = vec![0u8; MAX_HELLO];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = recvmsg(
        conn,
        &mut [IoSliceMut::new(&mut data)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fd = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for owned in fds {
                fd.get_or_insert(owned);
            }
        }
    }
    data.truncate(received.bytes);
    let fd = fd.ok_or_else(|| io::Error::other("the session helper sent no terminal"))?;
    Ok((data, fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_descriptor_and_the_reports_cross_the_socket() {
        let (helper, daemon) = UnixStream::pair().expect("socketpair");
        let (mut r, mut w) = UnixStream::pair().expect("a descriptor to pass");
        send(&helper, b"pid 42\nexit 3\n", &w).expect("send");
        let (hello, passed) = receive(&daemon).expect("receive");
        assert_eq!(hello, b"pid 42\nexit 3\n");
        // The received descriptor is the same socket end: writing through it reaches `r`.
        let mut passed = UnixStream::from(passed);
        passed.write_all(b"hi").unwrap();
        drop(w.flush());
        let mut buf = [0u8; 2];
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hi");
        // A message without a descriptor is refused.
        (&helper).write_all(b"pid 1\n").unwrap();
        assert!(receive(&daemon).is_err());
    }
}
