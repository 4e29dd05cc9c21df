//! File-descriptor plumbing shared by the PTY, the reaper and the cgroup code: close-on-exec
//! pipes, non-blocking mode, reads and writes that report `WouldBlock`, registration with
//! tokio's reactor, and pidfds. Built on nix's safe calls; `unsafe` remains only where no safe
//! call exists (tokio's registration contract, `pidfd_open`, which nix 0.28 lacks).

use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC)?)
}

/// Marks `fd` close-on-exec.
pub(crate) fn set_cloexec(fd: &impl AsRawFd) -> io::Result<()> {
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok(())
}

/// Lets `fd` stay open across exec (the listeners an upgrade hands to the next image).
pub(crate) fn clear_cloexec(fd: &impl AsRawFd) -> io::Result<()> {
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::empty()))?;
    Ok(())
}

/// Puts `fd` in non-blocking mode.
pub(crate) fn set_nonblocking(fd: OwnedFd) -> io::Result<OwnedFd> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(fd)
}

/// One `read(2)`; a non-blocking fd with nothing to read gives `WouldBlock`.
pub(crate) fn read(fd: &impl AsRawFd, buf: &mut [u8]) -> io::Result<usize> {
    Ok(nix::unistd::read(fd.as_raw_fd(), buf)?)
}

/// One `write(2)`; a non-blocking fd without room gives `WouldBlock`.
pub(crate) fn write(fd: impl AsFd, data: &[u8]) -> io::Result<usize> {
    Ok(nix::unistd::write(fd, data)?)
}

/// Registers an owned fd with tokio's reactor for the readiness in `interest` only.
pub(crate) fn async_fd(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd stays open and refers to the same file description until dropped, and
    // the AsyncFd owns it for its whole life.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
}

/// A pidfd for `pid`: readable once the process has exited.
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid).ok_or(io::ErrorKind::InvalidInput)?;
    Ok(rustix::process::pidfd_open(
        pid,
        rustix::process::PidfdFlags::empty(),
    )?)
}

/// A pidfd for `pid` registered with tokio: readable once the process has exited.
pub(crate) fn exit_watch(pid: i32) -> Option<AsyncFd<OwnedFd>> {
    async_fd(pidfd_open(pid).ok()?, Interest::READABLE).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_carries_bytes_and_reports_an_empty_read_as_would_block() {
        let (r, w) = pipe().expect("pipe");
        let r = set_nonblocking(r).expect("non-blocking");
        let mut buf = [0u8; 8];
        let empty = read(&r, &mut buf).expect_err("nothing written yet");
        assert_eq!(empty.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(write(&w, b"hi").expect("write"), 2);
        assert_eq!(read(&r, &mut buf).expect("read"), 2);
        assert_eq!(&buf[..2], b"hi");
        drop(w);
        assert_eq!(read(&r, &mut buf).expect("end of file"), 0);
        let flags = fcntl(r.as_raw_fd(), FcntlArg::F_GETFD).expect("F_GETFD");
        assert!(FdFlag::from_bits_retain(flags).contains(FdFlag::FD_CLOEXEC));
    }
}
