//! A program running on its own PTY, under its session helper ([`crate::process::helper`]).
//!
//! `spawn` opens the PTY pair (with IUTF8 set when the session's locale is UTF-8, as terminal
//! emulators do, so the line discipline erases a whole character on Backspace), starts the
//! helper on the slave (with `posix_spawn`; the helper joins the session's fresh cgroup, when it
//! has one, before it starts anything), and learns the
//! program's pid from the helper's first report. The master is driven non-blocking through
//! tokio's `AsyncFd` (no thread per session). The program's exit comes from the helper's report
//! (it reaps the program), not from end-of-file on the master, which a surviving background
//! process keeps open forever. `terminate` ends the session's whole tree (see
//! [`crate::process::reaper`]) and returns once nothing of it is left.
//!
//! Rooms: this file holds the `Pty` and its terminal I/O; `start.rs` how one comes to be
//! (spawned, adopted, lost), `ending.rs` how its program ends and is cleaned up, and
//! `terminal.rs` the terminal pair itself.

use crate::process::cgroup::SessionCgroup;
use crate::process::fd;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll, ppoll};
use nix::sys::signal::Signal;
use nix::sys::termios::tcgetattr;
use nix::sys::time::TimeSpec;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

mod ending;
mod start;
mod terminal;

pub(crate) use start::{AdoptionSocket, Launch};

/// How the session's program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Exited with a status code.
    Code(i32),
    /// Killed by a signal.
    Signal(Signal),
    /// Not known: the session's helper vanished while no daemon ran (a session adopted in that
    /// state is readable, but how its program ended was lost with the helper).
    Lost,
}

/// Reads output that is already on `master`: `Ok(None)` when there is none, `Ok(Some(0))` once
/// no process holds the slave.
fn try_read_master(master: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    match fd::read(master, buf) {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(Some(0)),
        Err(e) => Err(e),
    }
}

/// The master's output read off the runtime, by a thread that may wait for it (see
/// [`Pty::output_reader`]).
pub(crate) struct OutputReader(OwnedFd);

impl OutputReader {
    /// Reads output that is already there: as [`Pty::try_read`].
    pub(crate) fn try_read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        try_read_master(&self.0, buf)
    }

    /// Waits at most `timeout` for output (or a hang-up) to read; whether it came. `ppoll`, for
    /// its nanoseconds: `poll` counts milliseconds, and a wait under one would not wait at all.
    pub(crate) fn wait(&self, timeout: std::time::Duration) -> bool {
        let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
        ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None).is_ok_and(|n| n > 0)
    }
}

/// The master, and a duplicate of it registered with tokio for read readiness while the
/// runtime reads it: a worker thread that reads it itself (a flood, see [`Pty::unwatch_output`])
/// would otherwise wake the runtime's thread for every 4 KiB the kernel hands over.
pub(super) struct Master {
    fd: OwnedFd,
    watch: Option<AsyncFd<OwnedFd>>,
}

impl Master {
    /// `fd`, non-blocking, watched for output.
    pub(super) fn new(fd: OwnedFd) -> io::Result<Master> {
        let fd = fd::set_nonblocking(fd)?;
        let watch = Some(fd::async_fd(fd.try_clone()?, Interest::READABLE)?);
        Ok(Master { fd, watch })
    }

    pub(super) fn get_ref(&self) -> &OwnedFd {
        &self.fd
    }

    /// Waits until the master may have output to read (never, while it is not watched), and
    /// reads it with `read`.
    async fn read_with(
        &self,
        mut read: impl FnMut(&OwnedFd) -> io::Result<usize>,
    ) -> io::Result<MasterRead> {
        let Some(watch) = &self.watch else {
            return std::future::pending().await;
        };
        let mut waited = false;
        loop {
            let mut guard = watch.readable().await?;
            let len = match guard.try_io(|_| read(&self.fd)) {
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => 0,
                Ok(result) => result?,
                Err(_would_block) => {
                    // Readiness is only cleared here, so a read that finds output on its
                    // first try found it there when the caller came back.
                    waited = true;
                    continue;
                }
            };
            return Ok(MasterRead { len, waited });
        }
    }
}

/// What one read of the master brought.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MasterRead {
    /// Bytes read; 0 means the master hung up (no process holds the slave).
    pub(crate) len: usize,
    /// The terminal was empty when the read began: it waited for the program's next output.
    pub(crate) waited: bool,
}

/// The PTY master plus the program running on its slave.
pub(crate) struct Pty {
    /// The master, non-blocking, for reads, writes and terminal ioctls.
    io: Master,
    /// The helper's reports (read end of its status pipe).
    status: AsyncFd<OwnedFd>,
    /// Report bytes received but not yet parsed.
    status_buf: Mutex<Vec<u8>>,
    /// The helper closed its status pipe (it exited).
    helper_closed: AtomicBool,
    /// The helper process: our child, unless the session was adopted from another daemon.
    helper: Option<Mutex<std::process::Child>>,
    /// The helper's pid.
    helper_pid: i32,
    /// Readable once the helper has exited.
    helper_exit: Option<AsyncFd<OwnedFd>>,
    /// Readable once the program has exited (used only if the helper dies before it).
    program_exit: Option<AsyncFd<OwnedFd>>,
    /// The program's pid (also its session id and process group id).
    pid: u32,
    /// Path of the slave device, to recognise reads on it in /proc.
    tty_path: Option<String>,
    /// A non-controlling handle on the slave, only to ask how much input waits unread.
    slave_probe: Option<OwnedFd>,
    /// The session's cgroup, when it is tracked by cgroup.
    cgroup: Option<SessionCgroup>,
    /// The tag in the environment of every process of the session (see
    /// [`crate::process::tag`]); `None` for a session a daemon without tags started.
    tag: Option<String>,
    /// `terminate` has run to the end.
    terminated: AtomicBool,
}

impl Pty {
    /// The program's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The session's tag (see [`crate::process::tag`]), for its record.
    pub(crate) fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The slave device path, such as `/dev/pts/3`.
    pub(crate) fn tty_path(&self) -> Option<&str> {
        self.tty_path.as_deref()
    }

    /// The terminal's foreground process group (`tcgetpgrp` on the master). Unlike a read of
    /// `/proc/<shell>/stat`, it cannot name a stranger's group: the master pins the terminal,
    /// and a group is its foreground only while it exists.
    pub(crate) fn foreground_pgid(&self) -> Option<i32> {
        nix::unistd::tcgetpgrp(self.io.get_ref())
            .ok()
            .map(|p| p.as_raw())
            .filter(|&g| g > 0)
    }

    /// Gives the terminal a new window size; the kernel tells its foreground group (SIGWINCH).
    pub(crate) fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let size = rustix::termios::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(self.io.get_ref(), size).map_err(io::Error::from)
    }

    /// Whether the program reading the terminal hides what is typed: the echo is off while it
    /// reads in line mode, as a password or passphrase prompt does (a full-screen program or a
    /// line editor reads raw, with the echo off too, and is not one).
    pub(crate) fn input_hidden(&self) -> bool {
        use nix::sys::termios::LocalFlags;
        self.termios().is_some_and(|t| {
            t.local_flags.contains(LocalFlags::ICANON) && !t.local_flags.contains(LocalFlags::ECHO)
        })
    }

    /// The terminal's current line discipline settings.
    pub(crate) fn termios(&self) -> Option<nix::sys::termios::Termios> {
        tcgetattr(self.io.get_ref()).ok()
    }

    /// Reads at most `limit` bytes of available output into `buf`, borrowed only for the read
    /// itself (a thread's buffer shared by every session on it: the caller uses the bytes
    /// before it awaits anything else); `Ok(0)` means the master hung up (no process holds the
    /// slave).
    pub(crate) async fn read_shared(
        &self,
        buf: &'static std::thread::LocalKey<std::cell::RefCell<Vec<u8>>>,
        limit: usize,
    ) -> io::Result<MasterRead> {
        self.io
            .read_with(|master| {
                buf.with_borrow_mut(|b| {
                    let end = limit.min(b.len());
                    fd::read(master, &mut b[..end])
                })
            })
            .await
    }

    /// Reads output that is already there without waiting: `Ok(None)` when there is none.
    pub(crate) fn try_read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        try_read_master(self.io.get_ref(), buf)
    }

    /// A handle that reads the master's output on another thread (a duplicate of the master:
    /// it stays valid whatever becomes of this `Pty`).
    pub(crate) fn output_reader(&self) -> io::Result<OutputReader> {
        Ok(OutputReader(self.io.get_ref().try_clone()?))
    }

    /// Bytes of output there to be read now. A zero-timeout poll first: it hands over what the
    /// kernel still moves from the terminal's side to the master (a deferred work item), so
    /// output the program wrote before any later change of its terminal's mode is counted.
    pub(crate) fn output_waiting(&self) -> usize {
        let master = self.io.get_ref();
        let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLIN)];
        let _ = poll(&mut fds, PollTimeout::ZERO);
        rustix::io::ioctl_fionread(master).map_or(0, |n| n as usize)
    }

    /// True when input written to the terminal waits unread by the program (in line mode only
    /// complete lines count), so a program that looks blocked on the terminal is about to wake.
    /// A zero-timeout poll rather than FIONREAD: the kernel hands input from the master to the
    /// slave in a deferred work item, and polling the slave flushes that work first, so input
    /// still in flight is seen too.
    pub(crate) fn input_pending(&self) -> bool {
        let Some(slave) = &self.slave_probe else {
            return false;
        };
        let mut fds = [PollFd::new(slave.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n > 0)
            && fds[0]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLIN))
    }

    /// Writes as much of `data` as the PTY accepts now, waiting for room when it accepts none.
    ///
    /// The master is registered for reading only: the kernel signals room to write on the
    /// master every time the program reads its terminal (a line editor reads one key at a
    /// time), and each signal would wake the daemon while the program works. Only a write that
    /// finds the input buffer full waits, through a duplicate of the master registered for
    /// writability for just that wait.
    pub(crate) async fn write_some(&self, data: &[u8]) -> io::Result<usize> {
        let master = self.io.get_ref();
        loop {
            match fd::write(master, data) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            let room = fd::async_fd(master.try_clone()?, Interest::WRITABLE)?;
            // Registration reports room that appeared since the failed write, so this cannot
            // miss it.
            room.writable().await?.retain_ready();
        }
    }

    /// Reads available output into `buf`, waiting for some.
    pub(crate) async fn read_into(&self, buf: &mut [u8]) -> io::Result<MasterRead> {
        self.io.read_with(|master| fd::read(master, buf)).await
    }

    /// Stops watching for output: a worker thread reads it (`output_reader`) until
    /// `watch_output`, and the runtime's reads wait until then.
    pub(crate) fn unwatch_output(&mut self) {
        self.io.watch = None;
    }

    /// Watches for output again after `unwatch_output`.
    pub(crate) fn watch_output(&mut self) -> io::Result<()> {
        if self.io.watch.is_none() {
            self.io.watch = Some(fd::async_fd(self.io.fd.try_clone()?, Interest::READABLE)?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A flood's reader waits 100 µs at a time for the program's next output; a wait that
    /// returned at once would end the flood's turn as if the output had paused.
    #[test]
    fn a_wait_under_a_millisecond_waits_until_output_comes_or_it_is_up() {
        let (master, slave) = terminal::open_pty(80, 24, true).expect("openpty");
        let reader = OutputReader(fd::set_nonblocking(master).expect("non-blocking"));
        for step in [Duration::from_micros(100), Duration::from_micros(700)] {
            let started = Instant::now();
            assert!(!reader.wait(step), "no output yet");
            assert!(
                started.elapsed() >= step,
                "waited {:?} of {step:?}",
                started.elapsed()
            );
        }
        nix::unistd::write(&slave, b"x").expect("write to the slave");
        assert!(
            reader.wait(Duration::from_secs(10)),
            "the output is there to read"
        );
    }
}
