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

use crate::process::ProcessTracking;
use crate::process::cgroup::SessionCgroup;
use crate::process::fd;
use crate::process::helper::{self, Report};
use crate::process::reaper::{self, Tree};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::sys::termios::{InputFlags, SetArg, tcgetattr, tcsetattr};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
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
    /// Not known: the session's helper vanished while no daemon ran (a session adopted in that
    /// state is readable, but how its program ended was lost with the helper).
    Lost,
}

/// How long a helper may take to hand its session over (normally microseconds).
const ADOPT_WAIT: Duration = Duration::from_secs(5);

/// The PTY master plus the program running on its slave.
pub(crate) struct Pty {
    /// The master, non-blocking, for reads, writes and terminal ioctls.
    io: AsyncFd<OwnedFd>,
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
    /// Starts `argv` with exactly `env` (nothing inherited) in `cwd` on a new PTY of
    /// `cols`x`rows`, its processes tracked as `tracking` says (`Auto` is resolved here).
    pub(crate) async fn spawn(
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
        cols: u16,
        rows: u16,
        tracking: ProcessTracking,
        adoption: Option<AdoptionSocket>,
    ) -> io::Result<Pty> {
        if argv.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
        }
        let tracking = tracking.resolve().map_err(io::Error::other)?;
        let executable = helper::executable().map_err(io::Error::other)?;
        let (master, slave) = open_pty(cols, rows, locale_is_utf8(env))?;
        let tty_path = nix::unistd::ttyname(&slave)
            .ok()
            .map(|p| p.display().to_string());
        let (status_read, status_write) = fd::pipe()?;
        // Everything that can fail goes before the helper exists.
        let io = fd::async_fd(fd::set_nonblocking(master)?, Interest::READABLE)?;
        let status = fd::async_fd(fd::set_nonblocking(status_read)?, Interest::READABLE)?;
        let slave_probe = tty_path.as_deref().and_then(open_slave_probe);
        let label = env
            .iter()
            .find(|(k, _)| k == "PTYD_SESSION_ID")
            .map_or(String::new(), |(_, v)| v.clone());
        // cgroupfs takes kernel-wide locks (a migration waits for an RCU grace period while
        // holding them), and the spawn waits for the exec: neither on an async worker.
        let tag = crate::process::tag::generate()?;
        let (argv, env, cwd) = (
            argv.to_vec(),
            crate::process::tag::apply(env, &tag),
            cwd.to_path_buf(),
        );
        let helper_path = executable.clone();
        let master_copy = io.get_ref().try_clone()?;
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
            let started = spawn_helper(
                &helper_path,
                HelperFds {
                    slave,
                    master: master_copy,
                    status: status_write,
                },
                &argv,
                &env,
                &cwd,
                dir.as_deref(),
                adoption.as_ref(),
            );
            match started {
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
        let helper_pid = helper.id() as i32;
        let helper_exit = fd::exit_watch(helper_pid);
        let mut pty = Pty {
            io,
            status,
            status_buf: Mutex::new(Vec::new()),
            helper_closed: AtomicBool::new(false),
            helper: Some(Mutex::new(helper)),
            helper_pid,
            helper_exit,
            program_exit: None,
            pid: 0,
            tty_path,
            slave_probe,
            cgroup,
            tag: Some(tag),
            terminated: AtomicBool::new(false),
        };
        let first = tokio::time::timeout(HELPER_START, pty.next_report()).await;
        let failure = match first {
            Ok(Ok(Some(Report::Started(pid)))) => {
                pty.pid = pid as u32;
                reaper::watch(pid);
                pty.program_exit = fd::exit_watch(pid);
                return Ok(pty);
            }
            Ok(Ok(Some(Report::Failed(errno)))) => io::Error::from_raw_os_error(errno),
            Ok(Ok(Some(other))) => {
                io::Error::other(format!("the session helper reported {other:?} first"))
            }
            Ok(Ok(None)) => io::Error::other(format!(
                "the session helper {} exited without starting the program",
                executable.display()
            )),
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

    /// Takes over a session another daemon started: connects to its helper's socket at
    /// `socket`, receives the terminal's master and the helper's reports so far, and from then
    /// on hears the rest on that connection. Blocking (a local connect and one message): call
    /// it off the async workers. Fails when the helper is gone. `tag` is the session's (see
    /// [`crate::process::tag`]), as its record kept it.
    pub(crate) fn adopt(socket: &Path, tag: Option<String>) -> io::Result<Pty> {
        let conn = std::os::unix::net::UnixStream::connect(socket)?;
        conn.set_read_timeout(Some(ADOPT_WAIT))?;
        let (hello, master) = crate::process::handover::receive(&conn)?;
        let helper_pid =
            nix::sys::socket::getsockopt(&conn, nix::sys::socket::sockopt::PeerCredentials)
                .map_err(io::Error::from)?
                .pid();
        conn.set_read_timeout(None)?;
        let tty_path = pts_path(&master);
        let slave_probe = tty_path.as_deref().and_then(open_slave_probe);
        let io = fd::async_fd(fd::set_nonblocking(master)?, Interest::READABLE)?;
        let status = fd::async_fd(
            fd::set_nonblocking(OwnedFd::from(conn))?,
            Interest::READABLE,
        )?;
        let mut pty = Pty {
            io,
            status,
            status_buf: Mutex::new(hello),
            helper_closed: AtomicBool::new(false),
            helper: None,
            helper_pid,
            helper_exit: fd::exit_watch(helper_pid),
            program_exit: None,
            pid: 0,
            tty_path,
            slave_probe,
            cgroup: None,
            tag,
            terminated: AtomicBool::new(false),
        };
        match pty.take_line() {
            Some(Report::Started(pid)) => {
                pty.pid = pid as u32;
                pty.program_exit = fd::exit_watch(pid);
                Ok(pty)
            }
            other => {
                // Nothing of it is ours yet: leave the session to its helper and its grace.
                pty.terminated.store(true, Ordering::Relaxed);
                Err(io::Error::other(format!(
                    "the session helper reported {other:?} first"
                )))
            }
        }
    }

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
    ) -> io::Result<usize> {
        loop {
            let mut guard = self.io.readable().await?;
            let read = guard.try_io(|master| {
                buf.with_borrow_mut(|b| {
                    let end = limit.min(b.len());
                    fd::read(master, &mut b[..end])
                })
            });
            match read {
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Reads output that is already there without waiting: `Ok(None)` when there is none.
    pub(crate) fn try_read(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match fd::read(self.io.get_ref(), buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(Some(0)),
            Err(e) => Err(e),
        }
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

    /// A session whose helper vanished while no daemon ran: a terminal that has hung up and a
    /// program that has exited, how is not known. What it started may still run (the helper was
    /// killed from inside the session, then the daemon): `terminate` ends what carries `tag`.
    pub(crate) fn lost(tag: Option<String>) -> io::Result<Pty> {
        let (master, slave) = open_pty(80, 24, false)?;
        drop(slave);
        let (status_read, status_write) = fd::pipe()?;
        drop(status_write);
        Ok(Pty {
            io: fd::async_fd(fd::set_nonblocking(master)?, Interest::READABLE)?,
            status: fd::async_fd(fd::set_nonblocking(status_read)?, Interest::READABLE)?,
            status_buf: Mutex::new(Vec::new()),
            helper_closed: AtomicBool::new(true),
            helper: None,
            helper_pid: 0,
            helper_exit: None,
            program_exit: None,
            pid: 0,
            tty_path: None,
            slave_probe: None,
            cgroup: None,
            tag,
            terminated: AtomicBool::new(true),
        })
    }

    /// Reads available output into `buf`, waiting for some; `Ok(0)` means the master hung up.
    pub(crate) async fn read_into(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.io.readable().await?;
            match guard.try_io(|master| fd::read(master, buf)) {
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Resolves once the program has exited (the helper reaped it and reported how).
    /// Cancel-safe: bytes already read are kept for the next call.
    pub(crate) async fn wait_exit(&self) -> io::Result<ExitKind> {
        if self.pid == 0 {
            return Ok(ExitKind::Lost);
        }
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
            match guard.try_io(|status| fd::read(status, &mut chunk)) {
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

    /// Ends every process of the session (see [`crate::process::reaper::escalate`]: SIGHUP, `grace`,
    /// SIGTERM, SIGKILL) and returns once none is left, the helper reaped and the cgroup
    /// removed.
    pub(crate) async fn terminate(&self, grace: Duration) {
        if self.pid == 0 && self.helper.is_none() && self.tag.is_none() {
            return; // lost, without a tag to find what it left
        }
        let helper_pid = self.helper_pid;
        let helper_alive = match &self.helper {
            Some(child) => child
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .try_wait()
                .is_ok_and(|s| s.is_none()),
            None => crate::process::procfs::is_alive(helper_pid),
        };
        let all_gone = match &self.cgroup {
            Some(cg) => reaper::escalate(cg, grace).await,
            None => {
                let tree = Tree {
                    helper: helper_pid,
                    helper_exit: self.helper_exit.as_ref().filter(|_| helper_alive),
                    shell: self.pid as i32,
                    tag: self.tag.as_deref(),
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

    /// Reaps the helper, which leaves once its descendants are gone; kills it when it does not
    /// within [`reaper::KILL_WAIT`] (a descendant stuck in the kernel).
    async fn reap_helper(&self) {
        if let Some(exit) = &self.helper_exit {
            let waited = tokio::time::timeout(reaper::KILL_WAIT, exit.readable()).await;
            if waited.is_err() {
                let pid = self.helper_pid;
                tracing::warn!(
                    helper = pid,
                    "a session helper outlived its session; killing it"
                );
                let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
                let _ = tokio::time::timeout(reaper::KILL_WAIT, exit.readable()).await;
            }
        }
        // Reaped here; one still running (only a bug allows that) is left to the daemon's
        // reaper, which takes it once it exits. An adopted helper is its parent's to reap.
        if let Some(helper) = &self.helper {
            let _ = helper.lock().unwrap_or_else(|e| e.into_inner()).try_wait();
        }
        reaper::unwatch(self.helper_pid);
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
        if let Some(helper) = &self.helper {
            let _ = helper.lock().unwrap_or_else(|e| e.into_inner()).try_wait();
        }
        reaper::unwatch(self.helper_pid);
    }
}

/// Where a session's helper waits for a daemon adopting the session, and for how long.
#[derive(Debug, Clone)]
pub(crate) struct AdoptionSocket {
    /// The per-session socket path (in the state directory).
    pub(crate) path: std::path::PathBuf,
    /// How long the session outlives a daemon that does not come back (zero: forever).
    pub(crate) grace: Duration,
}

/// What the helper starts with: the terminal's slave (stdin), its status pipe (stdout) and a
/// copy of the master (stderr).
struct HelperFds {
    slave: OwnedFd,
    master: OwnedFd,
    status: OwnedFd,
}

/// Starts the helper `executable` with the slave as stdin, the status pipe as stdout and a copy
/// of the master as stderr, told to join `cgroup` first and to serve `adoption`'s socket. No
/// code runs between fork and exec, so std uses `posix_spawn`.
fn spawn_helper(
    executable: &Path,
    fds: HelperFds,
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    cgroup: Option<&Path>,
    adoption: Option<&AdoptionSocket>,
) -> io::Result<std::process::Child> {
    let mut cmd = std::process::Command::new(executable);
    cmd.arg0(helper::ARG0)
        .args(argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(helper::HELPER_ENV, "1")
        .current_dir(cwd)
        .stdin(Stdio::from(fds.slave))
        .stdout(Stdio::from(fds.status))
        .stderr(Stdio::from(fds.master));
    if let Some(dir) = cgroup {
        cmd.env(helper::CGROUP_ENV, dir);
    }
    if let Some(a) = adoption {
        cmd.env(helper::SOCKET_ENV, &a.path)
            .env(helper::GRACE_ENV, a.grace.as_millis().to_string());
    }
    // Dropping `cmd` afterwards closes our copies of the slave and the write end, or neither
    // hang-up nor EOF would ever arrive.
    cmd.spawn()
}

/// Whether the locale `env` gives its programs is UTF-8: the first of `LC_ALL`, `LC_CTYPE` and
/// `LANG` that is set and not empty decides, as in setlocale(3); none means the C locale.
fn locale_is_utf8(env: &[(String, String)]) -> bool {
    let get = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    let Some(locale) = get("LC_ALL")
        .or_else(|| get("LC_CTYPE"))
        .or_else(|| get("LANG"))
    else {
        return false;
    };
    // `lang_TERRITORY.codeset@modifier`: the codeset names the encoding.
    let codeset = locale
        .split_once('.')
        .map_or("", |(_, rest)| rest.split('@').next().unwrap_or(""));
    let normalized: String = codeset
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    normalized == "utf8"
}

/// A new PTY pair of the given size, both ends close-on-exec; the line discipline treats input
/// as UTF-8 (IUTF8: erase takes a whole character) when `utf8`.
fn open_pty(cols: u16, rows: u16, utf8: bool) -> io::Result<(OwnedFd, OwnedFd)> {
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pair = nix::pty::openpty(&size, None)?;
    fd::set_cloexec(&pair.master)?;
    fd::set_cloexec(&pair.slave)?;
    if utf8 {
        let mut termios = tcgetattr(&pair.slave)?;
        termios.input_flags.insert(InputFlags::IUTF8);
        tcsetattr(&pair.slave, SetArg::TCSANOW, &termios)?;
    }
    Ok((pair.master, pair.slave))
}

/// The slave device of the master `master` (`/dev/pts/N`).
fn pts_path(master: &OwnedFd) -> Option<String> {
    let name = rustix::pty::ptsname(master, Vec::new()).ok()?;
    name.into_string().ok()
}

/// A non-controlling, non-blocking handle on the slave at `path` (std opens it close-on-exec).
fn open_slave_probe(path: &str) -> Option<OwnedFd> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .ok()
        .map(OwnedFd::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_utf8_locale_is_recognised_as_setlocale_picks_it() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        for (pairs, want) in [
            (env(&[]), false),
            (env(&[("LANG", "C.UTF-8")]), true),
            (env(&[("LANG", "en_US.utf8")]), true),
            (env(&[("LANG", "de_DE.UTF-8@euro")]), true),
            (env(&[("LANG", "C")]), false),
            (env(&[("LANG", "POSIX")]), false),
            (env(&[("LANG", "en_US.ISO-8859-1")]), false),
            (env(&[("LANG", "UTF-8")]), false),
            (env(&[("LANG", "C.UTF-8"), ("LC_ALL", "C")]), false),
            (env(&[("LANG", "C"), ("LC_CTYPE", "C.UTF-8")]), true),
            (env(&[("LC_CTYPE", "C"), ("LC_ALL", "en_GB.UTF-8")]), true),
            (env(&[("LC_ALL", ""), ("LANG", "C.UTF-8")]), true),
            (env(&[("LC_MESSAGES", "C.UTF-8")]), false),
        ] {
            assert_eq!(locale_is_utf8(&pairs), want, "{pairs:?}");
        }
    }

    #[test]
    fn the_pty_takes_iutf8_from_the_locale() {
        for utf8 in [true, false] {
            let (_master, slave) = open_pty(80, 24, utf8).expect("openpty");
            let termios = tcgetattr(&slave).expect("tcgetattr");
            assert_eq!(
                termios.input_flags.contains(InputFlags::IUTF8),
                utf8,
                "utf8 = {utf8}"
            );
        }
    }
}
