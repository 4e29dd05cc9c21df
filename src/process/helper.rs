//! The per-session helper: a small process between the daemon and a session's program that
//! owns the session's whole process tree.
//!
//! It is its own executable, `ptyd-session-helper` ([`main`]), installed beside `ptyd`
//! (`executable` finds it). A binary that links nothing but this keeps each idle session's
//! helper to the loader's and libc's pages: re-running the daemon's own image as the helper
//! would relocate the whole image's data for every session, about 250 KiB each, over the
//! memory bar. The daemon starts it with `argv[0]` = `ARG0` and `HELPER_ENV` set, the
//! session's terminal as stdin and stderr and the status pipe as stdout. It needs no code
//! between fork and exec, so the daemon spawns it with `posix_spawn` (a `vfork`): forking the
//! big, multi-threaded daemon would copy its page tables with its memory map locked, stalling
//! every daemon thread that touches memory meanwhile. The helper:
//! - before anything else joins the session's cgroup (`CGROUP_ENV`) when there is one, so
//!   everything it starts is born there;
//! - makes itself a child subreaper, so every orphan of the session — `nohup`, `disown`,
//!   `setsid`, double-forked daemons, `env -i` (nothing it can do to its environment or session
//!   changes its ancestry) — reparents to it, never to init or the daemon;
//! - starts the program as a new session leader with the terminal as its controlling tty (as
//!   a terminal emulator does), lets go of the terminal itself, and reports on the status pipe
//!   one line per `Report`: the program's pid, then its exit status;
//! - reaps every child as it exits (woken by SIGCHLD through a signalfd) and exits once it
//!   has none left: its exit means nothing of the session remains, not even a zombie;
//! - keeps a copy of the terminal's master (it came as stderr), so the kernel never hangs the
//!   terminal up when the daemon dies, and serves a per-session Unix socket (`SOCKET_ENV`) in
//!   the daemon's state directory: a daemon that connects gets the master (`SCM_RIGHTS`, see
//!   `crate::process::handover`) and every report so far, the program's exit included when
//!   it happened while no daemon ran, and hears the later ones on that connection;
//! - if the daemon dies (the status pipe's reader, or the adopting daemon's connection, is
//!   gone), keeps the session for the adoption grace (`GRACE_ENV`, 0 = forever) and then kills
//!   the whole tree, so a daemon that never comes back leaves nothing running. While no daemon
//!   reads, the program blocks on its full terminal: nothing it writes is lost. With no child
//!   left and no daemon attached, it waits for one (or the grace) before it exits, so the exit
//!   status and the last output still reach the next daemon.
//!
//! It ignores the polite signals (SIGHUP, SIGINT, SIGTERM, ...), so Close can signal the whole
//! session while it keeps reaping, and runs in a Unix session of its own, so nothing aimed at the
//! daemon's terminal (a Ctrl-C to a foreground `ptyd serve`) reaches it.

use crate::process::{fd, handover, procfs, reaper, sandbox};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigHandler, SigSet, Signal, kill, signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Environment variable set only on helpers (its value is not used).
pub(crate) const HELPER_ENV: &str = "PTYD_SESSION_HELPER";
/// Environment variable naming the cgroup directory the helper joins first, when set.
pub(crate) const CGROUP_ENV: &str = "PTYD_SESSION_HELPER_CGROUP";
/// Environment variable naming the per-session socket the helper serves for a daemon adopting
/// the session; without it the session ends with its daemon.
pub(crate) const SOCKET_ENV: &str = "PTYD_SESSION_HELPER_SOCKET";
/// Environment variable: milliseconds the helper waits for a new daemon (0: forever).
pub(crate) const GRACE_ENV: &str = "PTYD_SESSION_HELPER_GRACE_MS";
/// The helper's process name (`/proc/<pid>/comm`).
pub(crate) const COMM: &str = "ptyd-helper";
/// `argv[0]` of a helper, which `ps` shows.
pub(crate) const ARG0: &str = "ptyd-session-helper";

/// Signals the helper ignores: the polite ones Close sends to every member, and the terminal
/// signals of the daemon's own terminal. The program gets their default dispositions back.
const IGNORED: [Signal; 8] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGPIPE,
];

/// What a helper tells the daemon, one line each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// The program runs with this pid.
    Started(i32),
    /// The program exited with this status code.
    Exited(i32),
    /// The program was killed by this signal.
    Killed(i32),
    /// The program could not be started (this errno).
    Failed(i32),
    /// The session's sandbox could not be entered: this step failed with this errno.
    Unenforceable(u8, i32),
}

impl Report {
    fn line(self) -> String {
        match self {
            Report::Started(pid) => format!("pid {pid}\n"),
            Report::Exited(code) => format!("exit {code}\n"),
            Report::Killed(sig) => format!("signal {sig}\n"),
            Report::Failed(errno) => format!("error {errno}\n"),
            Report::Unenforceable(step, errno) => format!("sandbox {step} {errno}\n"),
        }
    }

    /// Parses one line (without its newline).
    pub(crate) fn parse(line: &str) -> Option<Report> {
        let (kind, n) = line.split_once(' ')?;
        if kind == "sandbox" {
            let (step, errno) = n.split_once(' ')?;
            return Some(Report::Unenforceable(
                step.parse().ok()?,
                errno.parse().ok()?,
            ));
        }
        let n: i32 = n.parse().ok()?;
        match kind {
            "pid" => Some(Report::Started(n)),
            "exit" => Some(Report::Exited(n)),
            "signal" => Some(Report::Killed(n)),
            "error" => Some(Report::Failed(n)),
            _ => None,
        }
    }
}

/// The helper executable: `ptyd-session-helper` beside the running executable, or one
/// directory up (where cargo puts binaries, next to the `deps/` of test executables). The error
/// says where it looked; found once per process.
pub(crate) fn executable() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let own = std::env::current_exe()
                .map_err(|e| format!("cannot tell where the running executable is: {e}"))?;
            let dir = own.parent().unwrap_or(Path::new("/"));
            let candidates: Vec<PathBuf> = [Some(dir), dir.parent()]
                .into_iter()
                .flatten()
                .map(|d| d.join(ARG0))
                .collect();
            candidates
                .iter()
                .find(|p| p.is_file())
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "the session helper {ARG0} is not installed beside {} (looked for {}); \
                     `cargo build` builds it (`cargo run` builds only `ptyd`), and \
                     `cargo install --path .` installs both",
                        own.display(),
                        candidates
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(" and ")
                    )
                })
        })
        .clone()
}

/// `main` of the helper executable (`ptyd-session-helper`): becomes the session helper when
/// the daemon started it as one, and refuses to run by hand.
pub fn main() -> ! {
    if std::env::var_os(HELPER_ENV).is_none() {
        eprintln!(
            "{ARG0} is started by `ptyd serve` for each terminal session; it is not run by hand"
        );
        std::process::exit(2);
    }
    helper_main(std::env::args_os().skip(1).collect())
}

/// Writes one report on the status pipe (or socket); false when the daemon is gone.
fn report(status: &OwnedFd, r: Report) -> bool {
    let line = r.line();
    // A line is far below PIPE_BUF, so the write is atomic.
    fd::write(status, line.as_bytes()).is_ok_and(|n| n == line.len())
}

/// Reports a failure to start and exits.
fn fail(status: &OwnedFd, errno: i32) -> ! {
    report(status, Report::Failed(errno));
    std::process::exit(127)
}

fn helper_main(argv: Vec<OsString>) -> ! {
    // The status pipe came as stdout and the terminal's master as stderr: keep both above the
    // standard fds (std duplicates with F_DUPFD_CLOEXEC from 3), and give stdout and stderr
    // back to the terminal (stdin) for the program.
    let Ok(status) = std::io::stdout().as_fd().try_clone_to_owned() else {
        std::process::exit(127)
    };
    let master = std::io::stderr().as_fd().try_clone_to_owned().ok();
    let _ = nix::unistd::dup2(0, 1);
    let _ = nix::unistd::dup2(0, 2);
    if let Some(dir) = std::env::var_os(CGROUP_ENV) {
        let procs = Path::new(&dir).join("cgroup.procs");
        if let Err(e) = std::fs::write(procs, "0") {
            fail(&status, e.raw_os_error().unwrap_or(libc::EIO));
        }
    }
    for sig in IGNORED {
        // SAFETY: SIG_IGN installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    let _ = nix::sys::prctl::set_child_subreaper(true);
    // Leave the daemon's session and process group: a Ctrl-C or hang-up of the daemon's
    // terminal is not ours, and the daemon's reaper tells us from the rest of its children by
    // the session id (see `reaper::reap_adopted`), should the daemon stop waiting for us.
    let _ = nix::unistd::setsid();
    // The name `ps` shows (the executable's own would be cut to 15 bytes).
    let _ = nix::sys::prctl::set_name(c"ptyd-helper");
    // Nothing the daemon left open reaches the program; a kernel without close_range (before
    // 5.11) relies on the daemon's own CLOEXEC fds.
    // SAFETY: close_range takes integers only and marks fds close-on-exec (no nix wrapper).
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    // A child's exit wakes the loop through a signalfd: SIGCHLD stays blocked (and pending
    // until read), so none is missed between a reap and the next wait, and no handler runs.
    // The program starts with an empty mask (see `start_program`).
    let mut child_exits = SigSet::empty();
    child_exits.add(Signal::SIGCHLD);
    if let Err(errno) = child_exits.thread_block() {
        fail(&status, errno as i32);
    }
    let mut wake =
        match SignalFd::with_flags(&child_exits, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC) {
            Ok(wake) => wake,
            Err(errno) => fail(&status, errno as i32),
        };
    // Where a new daemon takes the session over; without it the session ends with its daemon.
    let adoption = std::env::var_os(SOCKET_ENV).and_then(|path| {
        let grace_ms: u64 = std::env::var(GRACE_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let path = PathBuf::from(path);
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).ok()?;
        // Only the daemon's user may take the session over (its directory is 0700 as well).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).ok()?;
        Some(Adoption {
            listener,
            path,
            master: master?,
            grace: (grace_ms > 0).then(|| Duration::from_millis(grace_ms)),
        })
    });
    let started = match sandbox::from_env() {
        Ok(prepared) => start_program(&argv, prepared),
        Err(failure) => Err(Report::Unenforceable(failure.step as u8, failure.errno)),
    };
    let program = match started {
        Ok(pid) => pid,
        Err(r) => {
            if let Some(a) = &adoption {
                let _ = std::fs::remove_file(&a.path);
            }
            report(&status, r);
            std::process::exit(127)
        }
    };
    // Let go of the terminal: only the session's processes hold it from now on (and, for a
    // daemon to come, our copy of the master).
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            let _ = nix::unistd::dup2(null.as_raw_fd(), fd);
        }
    }
    let mut helper = Helper {
        daemon: Some(status),
        reports: vec![Report::Started(program)],
        detached_at: None,
        adoption,
    };
    if !helper.report(Report::Started(program)) {
        helper.detach();
    }
    let mut children_left = true;
    loop {
        loop {
            // Any child (`waitpid(-1)`; rustix's `waitpid(None)` is only this process group's).
            // rustix's status keeps the raw value: a realtime signal that ended the program is
            // reported as it is (nix's WaitStatus cannot hold one).
            let reaped = rustix::process::wait(rustix::process::WaitOptions::NOHANG);
            match reaped {
                Ok(Some((pid, status))) => {
                    if pid.as_raw_nonzero().get() == program {
                        let r = match status.terminating_signal() {
                            Some(signal) => Report::Killed(signal),
                            None => Report::Exited(status.exit_status().unwrap_or(0)),
                        };
                        helper.reports.push(r);
                        if !helper.report(r) {
                            helper.detach();
                        }
                    }
                }
                // Children left, none exited yet.
                Ok(None) => break,
                Err(rustix::io::Errno::INTR) => {}
                // No child left: nothing of the session exists any more.
                Err(_) => {
                    children_left = false;
                    break;
                }
            }
        }
        if !children_left && helper.may_leave() {
            helper.leave();
        }
        if helper.daemon.is_none() && helper.grace_over() {
            if !children_left {
                helper.leave();
            }
            kill_tree();
        }
        helper.wait(wake.as_fd());
        while wake.read_signal().is_ok_and(|s| s.is_some()) {}
    }
}

/// How a new daemon takes the session over once its daemon is gone.
struct Adoption {
    /// The per-session socket a new daemon connects to.
    listener: std::os::unix::net::UnixListener,
    path: PathBuf,
    /// Our copy of the terminal's master: the kernel never hangs the terminal up while we
    /// hold it, and it is what a new daemon gets.
    master: OwnedFd,
    /// How long the session waits for a new daemon; `None`: forever.
    grace: Option<Duration>,
}

/// The helper's state between events.
struct Helper {
    /// Where reports go: the status pipe, or the connection of the daemon that adopted us.
    daemon: Option<OwnedFd>,
    /// Every report so far, for a daemon that adopts the session.
    reports: Vec<Report>,
    /// When the daemon went away (for the grace).
    detached_at: Option<Instant>,
    adoption: Option<Adoption>,
}

impl Helper {
    /// Writes one report to the daemon; false when it is gone.
    fn report(&self, r: Report) -> bool {
        self.daemon.as_ref().is_some_and(|d| report(d, r))
    }

    fn detach(&mut self) {
        if self.daemon.take().is_some() {
            self.detached_at = Some(Instant::now());
        }
    }

    /// Whether the grace for a new daemon is over (at once when no daemon can adopt us).
    fn grace_over(&self) -> bool {
        let Some(a) = &self.adoption else {
            return true;
        };
        match (a.grace, self.detached_at) {
            (Some(grace), Some(at)) => at.elapsed() >= grace,
            _ => false,
        }
    }

    /// With no child left, the helper may exit once a daemon has heard how the program ended
    /// (or none ever can).
    fn may_leave(&self) -> bool {
        self.daemon.is_some() || self.grace_over()
    }

    fn leave(&self) -> ! {
        if let Some(a) = &self.adoption {
            let _ = std::fs::remove_file(&a.path);
        }
        std::process::exit(0)
    }

    /// Sleeps until a child changes state, the daemon goes away, a new daemon connects or the
    /// grace runs out.
    fn wait(&mut self, wake: std::os::fd::BorrowedFd<'_>) {
        let timeout = match (&self.adoption, self.detached_at, &self.daemon) {
            (Some(Adoption { grace: Some(g), .. }), Some(at), None) => {
                let left = g.saturating_sub(at.elapsed()).as_millis() + 1;
                PollTimeout::try_from(left.min(i32::MAX as u128) as i32)
                    .unwrap_or(PollTimeout::NONE)
            }
            _ => PollTimeout::NONE,
        };
        let mut fds = vec![PollFd::new(wake, PollFlags::POLLIN)];
        // Events empty on the daemon's end: only POLLERR/POLLHUP, raised once it is closed.
        match (&self.daemon, &self.adoption) {
            (Some(d), _) => fds.push(PollFd::new(d.as_fd(), PollFlags::empty())),
            (None, Some(a)) => fds.push(PollFd::new(a.listener.as_fd(), PollFlags::POLLIN)),
            (None, None) => {}
        }
        let _ = poll(&mut fds, timeout);
        let revents = fds
            .get(1)
            .and_then(|f| f.revents())
            .unwrap_or(PollFlags::empty());
        drop(fds);
        if self.daemon.is_some() {
            if revents.intersects(PollFlags::POLLERR | PollFlags::POLLHUP) {
                self.detach();
            }
        } else if revents.contains(PollFlags::POLLIN) {
            self.accept();
        }
    }

    /// A new daemon connected: hand it the master and every report so far.
    fn accept(&mut self) {
        let Some(a) = &self.adoption else { return };
        let Ok((conn, _)) = a.listener.accept() else {
            return;
        };
        let hello: String = self.reports.iter().map(|r| r.line()).collect();
        if handover::send(&conn, hello.as_bytes(), &a.master).is_ok() {
            self.daemon = Some(OwnedFd::from(conn));
            self.detached_at = None;
        }
    }
}

/// Starts the program as a session leader on the terminal (our stdin), inside `sandbox` when
/// there is one; returns its pid or the report of the failure.
fn start_program(argv: &[OsString], sandbox: Option<sandbox::Prepared>) -> Result<i32, Report> {
    use std::os::unix::process::CommandExt;
    let (program, args) = argv.split_first().ok_or(Report::Failed(libc::EINVAL))?;
    // The step a sandbox failed at comes back on this pipe (the child's errno alone, which
    // std passes back, would not say which).
    let (step_read, step_write) = crate::process::fd::pipe()
        .map_err(|e| Report::Failed(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env_remove(HELPER_ENV)
        .env_remove(CGROUP_ENV)
        .env_remove(SOCKET_ENV)
        .env_remove(GRACE_ENV)
        .env_remove(sandbox::SANDBOX_ENV);
    let step_fd = step_write.as_raw_fd();
    // SAFETY: only async-signal-safe calls between fork and exec (libc's, as nix's wrappers
    // are not documented to be).
    unsafe {
        cmd.pre_exec(move || {
            for sig in IGNORED
                .into_iter()
                .chain([Signal::SIGCHLD, Signal::SIGALRM])
            {
                libc::signal(sig as libc::c_int, libc::SIG_DFL);
            }
            let empty: libc::sigset_t = std::mem::zeroed();
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(prepared) = &sandbox
                && let Err(failure) = sandbox::enter(prepared)
            {
                let step = [failure.step as u8];
                libc::write(step_fd, step.as_ptr().cast(), 1);
                return Err(std::io::Error::from_raw_os_error(failure.errno));
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // Our write end closed, the read below ends at the child's exit.
    drop(cmd);
    drop(step_write);
    match spawned {
        Ok(child) => Ok(child.id() as i32),
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            let mut step = [0u8];
            match crate::process::fd::read(&step_read, &mut step) {
                Ok(1) => Err(Report::Unenforceable(step[0], errno)),
                _ => Err(Report::Failed(errno)),
            }
        }
    }
}

/// Kills every descendant, stopping them first so none can fork in between. Used only once
/// the daemon is gone and the grace for a new one is over.
fn kill_tree() {
    let me = std::process::id() as i32;
    for pid in reaper::stop_all(|| procfs::live_descendants(me)) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip_through_their_lines() {
        for r in [
            Report::Started(4242),
            Report::Exited(0),
            Report::Exited(130),
            Report::Killed(9),
            Report::Failed(2),
        ] {
            let line = r.line();
            assert!(line.ends_with('\n'));
            assert_eq!(Report::parse(line.trim_end()), Some(r));
        }
        assert_eq!(Report::parse("bogus 1"), None);
        assert_eq!(Report::parse("pid x"), None);
    }
}
