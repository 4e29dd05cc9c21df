//! A program running on its own PTY: spawned by portable-pty (new session, controlling tty),
//! with the master driven through a dup'd non-blocking fd in tokio's `AsyncFd` (no thread per
//! session), and the child's exit observed through a pidfd rather than end-of-file on the master
//! (a surviving background process keeps the master open forever).

use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use tokio::io::unix::AsyncFd;

/// How the session's program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Exited with a status code.
    Code(i32),
    /// Killed by a signal.
    Signal(Signal),
}

/// The PTY master plus the child running on its slave.
pub struct Pty {
    /// Kept for resize; never used for I/O (its writer would send EOF when dropped). The mutex
    /// only makes it `Sync` (portable-pty's master is not); it is never contended.
    master: std::sync::Mutex<Box<dyn MasterPty + Send>>,
    /// Non-blocking dup of the master, for reads and writes.
    io: AsyncFd<OwnedFd>,
    /// Readable once the child exits.
    pidfd: AsyncFd<OwnedFd>,
    /// The child's pid (also its session id and process group id).
    pid: u32,
    /// Path of the slave device, to recognise reads on it in /proc.
    tty_path: Option<String>,
    /// A non-controlling handle on the slave, only to ask how much input waits unread.
    slave_probe: Option<OwnedFd>,
    /// Kept so the child is not reaped behind our back; we reap with waitpid ourselves.
    _child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Pty {
    /// Starts `argv` with exactly `env` (nothing inherited) in `cwd` on a new PTY.
    pub fn spawn(
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
        cols: u16,
        rows: u16,
    ) -> io::Result<Pty> {
        let size = PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        let pair = native_pty_system()
            .openpty(size)
            .map_err(io::Error::other)?;
        let mut cmd = CommandBuilder::from_argv(argv.iter().map(Into::into).collect());
        cmd.env_clear();
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.cwd(cwd);
        let child = pair.slave.spawn_command(cmd).map_err(io::Error::other)?;
        // Keep no copy of the slave, or the master never sees the hangup.
        drop(pair.slave);
        let pid = child
            .process_id()
            .ok_or_else(|| io::Error::other("spawned child has no pid"))?;
        let master = pair.master;
        let raw = master
            .as_raw_fd()
            .ok_or_else(|| io::Error::other("pty master has no fd"))?;
        let io = async_fd(dup_nonblocking(raw)?)?;
        let pidfd = async_fd(pidfd_open(pid)?)?;
        let tty_path = master.tty_name().map(|p| p.display().to_string());
        let slave_probe = tty_path.as_deref().and_then(open_slave_probe);
        Ok(Pty {
            master: std::sync::Mutex::new(master),
            io,
            pidfd,
            pid,
            tty_path,
            slave_probe,
            _child: child,
        })
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The slave device path, such as `/dev/pts/3`.
    pub fn tty_path(&self) -> Option<&str> {
        self.tty_path.as_deref()
    }

    /// The terminal's foreground process group (`tcgetpgrp` on the master).
    pub fn foreground_pgid(&self) -> Option<i32> {
        nix::unistd::tcgetpgrp(self.io.get_ref())
            .ok()
            .map(|p| p.as_raw())
    }

    /// The terminal's current line discipline settings.
    pub fn termios(&self) -> Option<nix::sys::termios::Termios> {
        nix::sys::termios::tcgetattr(self.io.get_ref()).ok()
    }

    /// Reads available output; `Ok(0)` means the master hung up (no process holds the slave).
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.io.readable().await?;
            match guard.try_io(|fd| read_fd(fd.as_raw_fd(), buf)) {
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Reads output that is already there without waiting: `Ok(None)` when there is none.
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match read_fd(self.io.get_ref().as_raw_fd(), buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(Some(0)),
            Err(e) => Err(e),
        }
    }

    /// True when input written to the terminal waits unread by the program (in line mode only
    /// complete lines count), so a program that looks blocked on the terminal is about to wake.
    pub fn input_pending(&self) -> bool {
        let Some(fd) = &self.slave_probe else {
            return false;
        };
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n) };
        rc == 0 && n > 0
    }

    /// Writes as much of `data` as the PTY accepts now, waiting for room when it accepts none.
    pub async fn write_some(&self, data: &[u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.io.writable().await?;
            match guard.try_io(|fd| write_fd(fd.as_raw_fd(), data)) {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Resolves once the child has exited, then reaps it.
    pub async fn wait_exit(&self) -> io::Result<ExitKind> {
        loop {
            let mut guard = self.pidfd.readable().await?;
            match reap(self.pid)? {
                Some(kind) => return Ok(kind),
                None => guard.clear_ready(),
            }
        }
    }

    /// Resizes the terminal (the foreground program gets SIGWINCH).
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let size = PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        let master = self
            .master
            .lock()
            .map_err(|_| io::Error::other("pty master lock poisoned"))?;
        master.resize(size).map_err(io::Error::other)
    }
}

fn open_slave_probe(path: &str) -> Option<OwnedFd> {
    let c_path = std::ffi::CString::new(path).ok()?;
    // SAFETY: open with a valid C string; O_NOCTTY keeps the daemon from acquiring it.
    let fd = unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    // SAFETY: a new descriptor owned by us.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reaps `pid` if it has exited.
fn reap(pid: u32) -> io::Result<Option<ExitKind>> {
    match waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Ok(Some(ExitKind::Code(code))),
        Ok(WaitStatus::Signaled(_, sig, _)) => Ok(Some(ExitKind::Signal(sig))),
        Ok(_) => Ok(None),
        // Someone else reaped it: report a plain exit rather than hang.
        Err(nix::errno::Errno::ECHILD) => Ok(Some(ExitKind::Code(0))),
        Err(e) => Err(e.into()),
    }
}

fn dup_nonblocking(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor that we own.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` is a fresh descriptor owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(new) };
    // SAFETY: plain fcntl flag manipulation on a valid fd.
    unsafe {
        let flags = libc::fcntl(new, libc::F_GETFL);
        if flags < 0 || libc::fcntl(new, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(owned)
}

/// Registers an owned fd with tokio's reactor.
pub fn async_fd(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd stays open and refers to the same file description until dropped, and
    // the AsyncFd owns it for its whole life.
    unsafe { AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)
}

/// A pidfd for `pid`: readable once the process has exited.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new descriptor that we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn write_fd(fd: RawFd, data: &[u8]) -> io::Result<usize> {
    // SAFETY: data is valid for reads of data.len() bytes.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
