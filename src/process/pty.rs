//! A program running on its own PTY, under its session helper ([`crate::process::helper`]).
//!
//! `spawn` opens the PTY pair, starts the helper on the slave (with `posix_spawn`; the helper
//! joins the session's fresh cgroup, when it has one, before it starts anything), and learns the
//! program's pid from the helper's first report. The master is driven non-blocking through
//! tokio's `AsyncFd` (no thread per session). The program's exit comes from the helper's report
//! (it reaps the program), not from end-of-file on the master, which a surviving background
//! process keeps open forever. `terminate` ends the session's whole tree (see
//! [`crate::process::reaper`]) and returns once nothing of it is left.

use crate::process::cgroup::SessionCgroup;
use crate::process::helper::{self, Report};
use crate::process::reaper::{self, ProcessTracking, Tree};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// How long the helper may take to start the program and report its pid. Normally a few
/// milliseconds (one exec of the daemon's executable, one of the program); generous because a
/// loaded 2-core machine opening dozens of sessions at once is far slower.
const HELPER_START: Duration = Duration::from_secs(20);

/// How the session's program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Exited with a status code.
    Code(i32),
    /// Killed by a signal.
    Signal(Signal),
}

/// The PTY master plus the program running on its slave.
pub struct Pty {
    /// The master, non-blocking, for reads, writes and terminal ioctls.
    io: AsyncFd<OwnedFd>,
    /// The helper's reports (read end of its status pipe).
    status: AsyncFd<OwnedFd>,
    /// Report bytes received but not yet parsed.
    status_buf: Mutex<Vec<u8>>,
    /// The helper closed its status pipe (it exited).
    helper_closed: AtomicBool,
    /// The helper process, our child.
    helper: Mutex<std::process::Child>,
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
    /// `terminate` has run to the end.
    terminated: AtomicBool,
}

impl Pty {
    /// Starts `argv` with exactly `env` (nothing inherited) in `cwd` on a new PTY of
    /// `cols`x`rows`, its processes tracked as `tracking` says (`Auto` is resolved here).
    pub async fn spawn(
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
        cols: u16,
        rows: u16,
        tracking: ProcessTracking,
    ) -> io::Result<Pty> {
        if argv.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
        }
        let tracking = tracking.resolve().map_err(io::Error::other)?;
        let (master, slave) = open_pty(cols, rows)?;
        let tty_path = nix::unistd::ttyname(&slave)
            .ok()
            .map(|p| p.display().to_string());
        let (status_read, status_write) = pipe()?;
        // Everything that can fail goes before the helper exists.
        let io = async_fd_for(set_nonblocking(master)?, Interest::READABLE)?;
        let status = async_fd(set_nonblocking(status_read)?)?;
        let slave_probe = tty_path.as_deref().and_then(open_slave_probe);
        let label = env
            .iter()
            .find(|(k, _)| k == "PTYD_SESSION_ID")
            .map_or(String::new(), |(_, v)| v.clone());
        // cgroupfs takes kernel-wide locks (a migration waits for an RCU grace period while
        // holding them), and the spawn waits for the exec: neither on an async worker.
        let (argv, env, cwd) = (argv.to_vec(), env.to_vec(), cwd.to_path_buf());
        let started = tokio::task::spawn_blocking(move || {
            let cgroup = match tracking {
                ProcessTracking::Cgroup => {
                    let hierarchy =
                        crate::process::cgroup::hierarchy().map_err(io::Error::other)?;
                    Some(SessionCgroup::create(hierarchy, &label)?)
                }
                _ => None,
            };
            let dir = cgroup.as_ref().map(|cg| cg.path().to_path_buf());
            match spawn_helper(&argv, &env, &cwd, slave, status_write, dir.as_deref()) {
                Ok(helper) => Ok((helper, cgroup)),
                Err(e) => {
                    if let Some(cg) = &cgroup {
                        let _ = cg.remove();
                    }
                    Err(e)
                }
            }
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)));
        let (helper, cgroup) = started?;
        // Were this call cancelled before here, the helper, unwatched, would end its session as
        // soon as the status pipe closed, and the daemon's reaper would collect it.
        reaper::watch(helper.id() as i32);
        let helper_exit = reaper::pidfd(helper.id() as i32);
        let mut pty = Pty {
            io,
            status,
            status_buf: Mutex::new(Vec::new()),
            helper_closed: AtomicBool::new(false),
            helper: Mutex::new(helper),
            helper_exit,
            program_exit: None,
            pid: 0,
            tty_path,
            slave_probe,
            cgroup,
            terminated: AtomicBool::new(false),
        };
        let first = tokio::time::timeout(HELPER_START, pty.next_report()).await;
        let failure = match first {
            Ok(Ok(Some(Report::Started(pid)))) => {
                pty.pid = pid as u32;
                reaper::watch(pid);
                pty.program_exit = reaper::pidfd(pid);
                return Ok(pty);
            }
            Ok(Ok(Some(Report::Failed(errno)))) => io::Error::from_raw_os_error(errno),
            Ok(Ok(Some(other))) => {
                io::Error::other(format!("the session helper reported {other:?} first"))
            }
            Ok(Ok(None)) => io::Error::other(
                "the session helper exited without starting the program (is the ptyd \
                 executable still in place?)",
            ),
            Ok(Err(e)) => e,
            Err(_) => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the program did not start within {HELPER_START:?}"),
            ),
        };
        // Nothing may be left behind: the helper ends whatever it started, then itself.
        pty.terminate(Duration::ZERO).await;
        Err(failure)
    }

    /// The program's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The session's cgroup directory, when it is tracked by cgroup.
    pub fn cgroup_path(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(SessionCgroup::path)
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

    /// Reads available output into `buf`, borrowed only for the read itself (a thread's buffer
    /// shared by every session on it: the caller uses the bytes before it awaits anything
    /// else); `Ok(0)` means the master hung up (no process holds the slave).
    pub async fn read_shared(
        &self,
        buf: &'static std::thread::LocalKey<std::cell::RefCell<Vec<u8>>>,
    ) -> io::Result<usize> {
        loop {
            let mut guard = self.io.readable().await?;
            let read = guard.try_io(|fd| buf.with_borrow_mut(|b| read_fd(fd.as_raw_fd(), b)));
            match read {
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
    /// A zero-timeout poll rather than FIONREAD: the kernel hands input from the master to the
    /// slave in a deferred work item, and polling the slave flushes that work first, so input
    /// still in flight is seen too.
    pub fn input_pending(&self) -> bool {
        let Some(fd) = &self.slave_probe else {
            return false;
        };
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        rc > 0 && pfd.revents & libc::POLLIN != 0
    }

    /// Writes as much of `data` as the PTY accepts now, waiting for room when it accepts none.
    ///
    /// The master is registered for reading only: the kernel signals room to write on the
    /// master every time the program reads its terminal (a line editor reads one key at a
    /// time), and each signal would wake the daemon while the program works. Only a write that
    /// finds the input buffer full waits, through a duplicate of the master registered for
    /// writability for just that wait.
    pub async fn write_some(&self, data: &[u8]) -> io::Result<usize> {
        let master = self.io.get_ref();
        loop {
            match write_fd(master.as_raw_fd(), data) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            let room = async_fd_for(master.try_clone()?, Interest::WRITABLE)?;
            // Registration reports room that appeared since the failed write, so this cannot
            // miss it.
            room.writable().await?.retain_ready();
        }
    }

    /// Resolves once the program has exited (the helper reaped it and reported how).
    /// Cancel-safe: bytes already read are kept for the next call.
    pub async fn wait_exit(&self) -> io::Result<ExitKind> {
        while !self.helper_closed.load(Ordering::Relaxed) {
            match self.next_report().await? {
                Some(Report::Exited(code)) => return Ok(ExitKind::Code(code)),
                Some(Report::Killed(sig)) => {
                    return Ok(Signal::try_from(sig)
                        .map(ExitKind::Signal)
                        .unwrap_or(ExitKind::Code(128 + sig)));
                }
                Some(_) => {}
                None => break,
            }
        }
        // The helper died before the program (killed from inside its session): the program
        // was adopted by the daemon, a subreaper, and its status is ours to collect.
        if let Some(exit) = &self.program_exit {
            let _ = exit.readable().await?;
        }
        match waitpid(Pid::from_raw(self.pid as i32), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => Ok(ExitKind::Code(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => Ok(ExitKind::Signal(sig)),
            // Reaped elsewhere: report a plain exit rather than hang.
            _ => Ok(ExitKind::Code(0)),
        }
    }

    /// The next report of the helper; `None` once it closed the pipe.
    async fn next_report(&self) -> io::Result<Option<Report>> {
        loop {
            if let Some(report) = self.take_line() {
                return Ok(Some(report));
            }
            if self.helper_closed.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let mut guard = self.status.readable().await?;
            let mut chunk = [0u8; 256];
            match guard.try_io(|fd| read_fd(fd.as_raw_fd(), &mut chunk)) {
                Ok(Ok(0)) => self.helper_closed.store(true, Ordering::Relaxed),
                Ok(Ok(n)) => self
                    .status_buf
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&chunk[..n]),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
    }

    /// Parses one complete line out of the buffer.
    fn take_line(&self) -> Option<Report> {
        let mut buf = self.status_buf.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let end = buf.iter().position(|&b| b == b'\n')?;
            let line: Vec<u8> = buf.drain(..=end).collect();
            if let Some(r) = std::str::from_utf8(&line[..end])
                .ok()
                .and_then(Report::parse)
            {
                return Some(r);
            }
        }
    }

    /// Resizes the terminal (the foreground program gets SIGWINCH).
    pub fn resize(&self, cols: u16, rows: u16) -> io::Result<()> {
        let size = winsize(cols, rows);
        // SAFETY: TIOCSWINSZ reads one winsize through the pointer.
        let rc = unsafe { libc::ioctl(self.io.get_ref().as_raw_fd(), libc::TIOCSWINSZ, &size) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Ends every process of the session (see [`crate::process::reaper::escalate`]: SIGHUP, `grace`,
    /// SIGTERM, SIGKILL) and returns once none is left, the helper reaped and the cgroup
    /// removed.
    pub async fn terminate(&self, grace: Duration) {
        let helper_pid = self.helper_pid();
        let helper_alive = self
            .helper
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .try_wait()
            .is_ok_and(|s| s.is_none());
        let all_gone = match &self.cgroup {
            Some(cg) => reaper::escalate(cg, grace).await,
            None => {
                let tree = Tree {
                    helper: helper_pid,
                    helper_exit: self.helper_exit.as_ref().filter(|_| helper_alive),
                    shell: self.pid as i32,
                };
                reaper::escalate(&tree, grace).await
            }
        };
        if !all_gone {
            tracing::warn!(
                pid = self.pid,
                "a session's processes outlived SIGKILL (stuck in the kernel?)"
            );
        }
        self.reap_helper().await;
        if self.pid != 0 {
            // Ours only when the helper died first; then nobody else may reap it.
            let _ = waitpid(Pid::from_raw(self.pid as i32), Some(WaitPidFlag::WNOHANG));
            reaper::unwatch(self.pid as i32);
        }
        // Whatever the helper's early death handed to the daemon.
        reaper::reap_adopted();
        if let Some(cg) = &self.cgroup
            && let Err(e) = cg.remove_async().await
        {
            tracing::warn!(cgroup = %cg.path().display(), error = %e,
                "could not remove a session cgroup");
        }
        self.terminated.store(true, Ordering::Relaxed);
    }

    fn helper_pid(&self) -> i32 {
        self.helper.lock().unwrap_or_else(|e| e.into_inner()).id() as i32
    }

    /// Reaps the helper, which leaves once its descendants are gone; kills it when it does not
    /// within [`reaper::KILL_WAIT`] (a descendant stuck in the kernel).
    async fn reap_helper(&self) {
        if let Some(exit) = &self.helper_exit {
            let waited = tokio::time::timeout(reaper::KILL_WAIT, exit.readable()).await;
            if waited.is_err() {
                let pid = self.helper_pid();
                tracing::warn!(
                    helper = pid,
                    "a session helper outlived its session; killing it"
                );
                let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
                let _ = tokio::time::timeout(reaper::KILL_WAIT, exit.readable()).await;
            }
        }
        let mut helper = self.helper.lock().unwrap_or_else(|e| e.into_inner());
        // Reaped here; one still running (only a bug allows that) is left to the daemon's
        // reaper, which takes it once it exits.
        let _ = helper.try_wait();
        reaper::unwatch(helper.id() as i32);
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if self.terminated.load(Ordering::Relaxed) {
            return;
        }
        // Not closed through `terminate` (a panic): dropping the status pipe makes the helper
        // kill the session and exit; the daemon's reaper collects it.
        if self.pid != 0 {
            reaper::unwatch(self.pid as i32);
        }
        let mut helper = self.helper.lock().unwrap_or_else(|e| e.into_inner());
        let _ = helper.try_wait();
        reaper::unwatch(helper.id() as i32);
    }
}

/// Starts the helper with the slave as stdin and stderr and the status pipe as stdout, told to
/// The executable a session helper runs: `ptyd-session-helper` beside the running
/// executable (or one directory up, where cargo puts binaries next to test executables), else
/// the running executable itself, which becomes the helper before its `main` (see [`helper`]).
fn helper_executable() -> PathBuf {
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let own = std::env::current_exe().ok();
            let dir = own.as_deref().and_then(Path::parent);
            [dir, dir.and_then(Path::parent)]
                .into_iter()
                .flatten()
                .map(|d| d.join(helper::ARG0))
                .find(|p| p.is_file())
                .unwrap_or_else(|| PathBuf::from("/proc/self/exe"))
        })
        .clone()
}

/// join `cgroup` first. No code runs between fork and exec, so std uses `posix_spawn`.
fn spawn_helper(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    slave: OwnedFd,
    status_write: OwnedFd,
    cgroup: Option<&Path>,
) -> io::Result<std::process::Child> {
    let mut cmd = std::process::Command::new(helper_executable());
    cmd.arg0(helper::ARG0)
        .args(argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(helper::HELPER_ENV, "1")
        .current_dir(cwd)
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(status_write))
        .stderr(Stdio::from(slave));
    if let Some(dir) = cgroup {
        cmd.env(helper::CGROUP_ENV, dir);
    }
    // Dropping `cmd` afterwards closes our copies of the slave and the write end, or neither
    // hang-up nor EOF would ever arrive.
    cmd.spawn()
}

fn winsize(cols: u16, rows: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// A new PTY pair of the given size, both ends close-on-exec.
fn open_pty(cols: u16, rows: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut master: RawFd = -1;
    let mut slave: RawFd = -1;
    let size = winsize(cols, rows);
    // SAFETY: openpty writes two fds through the pointers; the name buffer and termios are
    // optional (null).
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new descriptors owned by nobody else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [&master, &slave] {
        // SAFETY: fcntl flag manipulation on a valid fd.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((master, slave))
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
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

fn set_nonblocking(fd: OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: plain fcntl flag manipulation on a valid fd.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fd)
}

/// Registers an owned fd with tokio's reactor, for reading and writing.
pub fn async_fd(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    async_fd_for(fd, Interest::READABLE | Interest::WRITABLE)
}

/// Registers an owned fd with tokio's reactor for the readiness in `interest` only.
fn async_fd_for(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an OwnedFd stays open and refers to the same file description until dropped, and
    // the AsyncFd owns it for its whole life.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
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
