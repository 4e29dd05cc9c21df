//! The per-session helper: a small process between the daemon and a session's program that
//! owns the session's whole process tree.
//!
//! The daemon starts its own executable (`/proc/self/exe`) with `argv[0]` = [`ARG0`] and
//! [`HELPER_ENV`] set, the session's terminal as stdin and stderr and the status pipe as stdout.
//! It needs no code between fork and exec, so the daemon spawns it with `posix_spawn` (a
//! `vfork`): forking the big, multi-threaded daemon would copy its page tables with its memory
//! map locked, stalling every daemon thread that touches memory meanwhile. Before `main` runs,
//! [`run_as_helper`] (an `.init_array` entry, so it works in every binary that links this
//! library: the daemon, tests, benchmarks) recognises that and becomes the helper:
//! - before anything else it joins the session's cgroup ([`CGROUP_ENV`]) when there is one, so
//!   everything it starts is born there;
//! - it makes itself a child subreaper, so every orphan of the session — `nohup`, `disown`,
//!   `setsid`, double-forked daemons, `env -i` (nothing it can do to its environment or session
//!   changes its ancestry) — reparents to it, never to init or the daemon;
//! - it starts the program as a new session leader with the terminal as its controlling tty (as
//!   a terminal emulator does), lets go of the terminal itself, and reports on the status pipe
//!   one line per [`Report`]: the program's pid, then its exit status;
//! - it reaps every child as it exits (woken by SIGCHLD through a self-pipe) and exits once it
//!   has none left: its exit means nothing of the session remains, not even a zombie;
//! - if the daemon dies (the status pipe's reader is gone), it kills the whole tree, so a crashed
//!   daemon leaves no session running.
//!
//! It ignores the polite signals (SIGHUP, SIGINT, SIGTERM, ...), so Close can signal the whole
//! session while it keeps reaping, and runs in a Unix session of its own, so nothing aimed at the
//! daemon's terminal (a Ctrl-C to a foreground `ptyd serve`) reaches it.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicI32, Ordering};

/// Environment variable set only on helpers (its value is not used).
pub(crate) const HELPER_ENV: &str = "PTYD_SESSION_HELPER";
/// Environment variable naming the cgroup directory the helper joins first, when set.
pub(crate) const CGROUP_ENV: &str = "PTYD_SESSION_HELPER_CGROUP";
/// `argv[0]` of a helper, which `ps` shows.
pub(crate) const ARG0: &str = "ptyd-session-helper";

/// Signals the helper ignores: the polite ones Close sends to every member, and the terminal
/// signals of the daemon's own terminal. The program gets their default dispositions back.
const IGNORED: [libc::c_int; 8] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGPIPE,
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
}

impl Report {
    fn line(self) -> String {
        match self {
            Report::Started(pid) => format!("pid {pid}\n"),
            Report::Exited(code) => format!("exit {code}\n"),
            Report::Killed(sig) => format!("signal {sig}\n"),
            Report::Failed(errno) => format!("error {errno}\n"),
        }
    }

    /// Parses one line (without its newline).
    pub(crate) fn parse(line: &str) -> Option<Report> {
        let (kind, n) = line.split_once(' ')?;
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

// The hook glibc (and musl) run before `main` in every binary linking this library.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static RUN_AS_HELPER: extern "C" fn() = run_as_helper;

/// Becomes the session helper when this process was started as one; returns at once otherwise.
extern "C" fn run_as_helper() {
    // SAFETY: getenv with a NUL-terminated name; before main no other thread exists.
    if unsafe { libc::getenv(c"PTYD_SESSION_HELPER".as_ptr()) }.is_null() {
        return;
    }
    let Ok(cmdline) = std::fs::read("/proc/self/cmdline") else {
        return;
    };
    let mut args = cmdline
        .split(|&b| b == 0)
        .map(|a| std::ffi::OsStr::from_bytes(a).to_os_string());
    if args.next().as_deref() != Some(std::ffi::OsStr::new(ARG0)) {
        return; // the variable leaked into some other process: not a helper
    }
    let mut argv: Vec<OsString> = args.collect();
    // cmdline ends with a NUL, which leaves one empty piece.
    if argv.last().is_some_and(|a| a.is_empty()) {
        argv.pop();
    }
    helper_main(argv)
}

/// `main` of the dedicated helper executable (`ptyd-session-helper`, installed beside `ptyd`):
/// the same helper, in a binary that links nothing else, so each session's helper maps a few
/// pages instead of the daemon's whole image (see README, Performance).
pub fn helper_executable_main() -> ! {
    run_as_helper();
    eprintln!("{ARG0} is started by `ptyd serve` for each terminal session; it is not run by hand");
    std::process::exit(2)
}

/// Write end of the SIGCHLD self-pipe.
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// The status pipe to the daemon (it arrives as stdout and is moved here).
static STATUS: AtomicI32 = AtomicI32::new(1);

extern "C" fn on_sigchld(_: libc::c_int) {
    // SAFETY: write(2) and errno access are async-signal-safe; errno is restored for the
    // interrupted code.
    unsafe {
        let errno = *libc::__errno_location();
        libc::write(WAKE.load(Ordering::Relaxed), [1u8].as_ptr().cast(), 1);
        *libc::__errno_location() = errno;
    }
}

/// Writes one report; false when the daemon is gone.
fn report(r: Report) -> bool {
    let line = r.line();
    // SAFETY: the buffer is valid for its length; a line is far below PIPE_BUF, so atomic.
    unsafe {
        libc::write(
            STATUS.load(Ordering::Relaxed),
            line.as_ptr().cast(),
            line.len(),
        ) == line.len() as isize
    }
}

fn helper_main(argv: Vec<OsString>) -> ! {
    // SAFETY: plain syscalls on this single-threaded process; the handler only writes a byte.
    unsafe {
        // The status pipe came as stdout: keep it above the standard fds, and give stdout back
        // to the terminal (stdin) for the program.
        let status = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if status >= 0 {
            STATUS.store(status, Ordering::Relaxed);
            libc::dup2(0, 1);
        }
        if let Some(dir) = std::env::var_os(CGROUP_ENV) {
            let procs = std::path::Path::new(&dir).join("cgroup.procs");
            if let Err(e) = std::fs::write(procs, "0") {
                report(Report::Failed(e.raw_os_error().unwrap_or(libc::EIO)));
                libc::_exit(127);
            }
        }
        for sig in IGNORED {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        // Leave the daemon's session and process group: a Ctrl-C or hang-up of the daemon's
        // terminal is not ours, and the daemon's reaper tells us from the rest of its children
        // by the session id (see `reaper::reap_adopted`), should the daemon stop waiting for us.
        libc::setsid();
        // `ps` would show the executable's name (`exe`, from /proc/self/exe).
        libc::prctl(libc::PR_SET_NAME, c"ptyd-helper".as_ptr(), 0, 0, 0);
        // Nothing the daemon left open reaches the program; a kernel without close_range
        // (before 5.11) relies on the daemon's own CLOEXEC fds.
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
        let mut wake = [0; 2];
        if libc::pipe2(wake.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) != 0 {
            report(Report::Failed(*libc::__errno_location()));
            libc::_exit(127);
        }
        WAKE.store(wake[1], Ordering::Relaxed);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigchld as *const () as usize;
        action.sa_flags = libc::SA_RESTART | libc::SA_NOCLDSTOP;
        libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
        let program = match start_program(&argv) {
            Ok(pid) => pid,
            Err(errno) => {
                report(Report::Failed(errno));
                libc::_exit(127);
            }
        };
        let mut daemon_gone = !report(Report::Started(program));
        // Let go of the terminal: only the session's processes hold it from now on.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
        }
        loop {
            loop {
                let mut status = 0;
                let pid = libc::waitpid(-1, &mut status, libc::WNOHANG);
                if pid == program && !daemon_gone {
                    let r = if libc::WIFSIGNALED(status) {
                        Report::Killed(libc::WTERMSIG(status))
                    } else {
                        Report::Exited(libc::WEXITSTATUS(status))
                    };
                    daemon_gone = !report(r);
                }
                if pid > 0 {
                    continue;
                }
                if pid == 0 {
                    break;
                }
                match *libc::__errno_location() {
                    libc::EINTR => continue,
                    // No child left: nothing of the session exists any more.
                    _ => libc::_exit(0),
                }
            }
            if daemon_gone {
                kill_tree();
            }
            let mut fds = [
                libc::pollfd {
                    fd: wake[0],
                    events: libc::POLLIN,
                    revents: 0,
                },
                // Events 0: only POLLERR/POLLHUP, raised once the daemon's read end is closed.
                libc::pollfd {
                    fd: if daemon_gone {
                        -1
                    } else {
                        STATUS.load(Ordering::Relaxed)
                    },
                    events: 0,
                    revents: 0,
                },
            ];
            libc::poll(fds.as_mut_ptr(), 2, -1);
            if fds[1].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                daemon_gone = true;
            }
            let mut drain = [0u8; 64];
            while libc::read(wake[0], drain.as_mut_ptr().cast(), drain.len()) > 0 {}
        }
    }
}

/// Starts the program as a session leader on the terminal (our stdin); returns its pid or the
/// errno of the failure.
fn start_program(argv: &[OsString]) -> Result<i32, i32> {
    use std::os::unix::process::CommandExt;
    let (program, args) = argv.split_first().ok_or(libc::EINVAL)?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).env_remove(HELPER_ENV).env_remove(CGROUP_ENV);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for sig in IGNORED.into_iter().chain([libc::SIGCHLD, libc::SIGALRM]) {
                libc::signal(sig, libc::SIG_DFL);
            }
            let empty: libc::sigset_t = std::mem::zeroed();
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            if libc::setsid() == -1 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
        .map(|child| child.id() as i32)
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// Kills every descendant, stopping them first (rescanning until no new one appears) so none
/// can fork in between. Used only once the daemon is gone.
fn kill_tree() {
    let me = std::process::id() as i32;
    let mut stopped = std::collections::BTreeSet::new();
    loop {
        let found = crate::process::reaper::live_descendants(me);
        let new: Vec<i32> = found
            .iter()
            .copied()
            .filter(|p| !stopped.contains(p))
            .collect();
        if new.is_empty() {
            for pid in found {
                // SAFETY: kill(2) with a pid and a signal number.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            return;
        }
        for pid in new {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            stopped.insert(pid);
        }
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
