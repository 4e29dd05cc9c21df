//! How a `Pty` comes to be: spawned on a new terminal under a new helper, adopted from the
//! helper a previous daemon left, or lost (the helper vanished while no daemon ran).

use super::terminal::{locale_is_utf8, open_pty, open_slave_probe, pts_path};
use super::{Master, Pty};
use crate::process::ProcessTracking;
use crate::process::cgroup::SessionCgroup;
use crate::process::fd;
use crate::process::helper::{self, Report};
use crate::process::reaper;
use crate::process::sandbox::Step;
use crate::sandbox::Sandbox;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::Interest;

/// How long the helper may take to start the program and report its pid. Normally a few
/// milliseconds (one exec of the daemon's executable, one of the program); generous because a
/// loaded 2-core machine opening dozens of sessions at once is far slower.
const HELPER_START: Duration = Duration::from_secs(20);

/// How long a helper may take to hand its session over (normally microseconds).
const ADOPT_WAIT: Duration = Duration::from_secs(5);

/// What a new session's program is started with.
pub(crate) struct Launch<'a> {
    /// Program and arguments.
    pub(crate) argv: &'a [String],
    /// Exactly its environment (nothing inherited).
    pub(crate) env: &'a [(String, String)],
    pub(crate) cwd: &'a Path,
    pub(crate) cols: u16,
    pub(crate) rows: u16,
    /// How its processes are tracked (`Auto` is resolved here).
    pub(crate) tracking: ProcessTracking,
    /// Where a later daemon adopts it; `None`: it ends with this daemon.
    pub(crate) adoption: Option<AdoptionSocket>,
    /// Its sandbox and the helper's plan of it.
    pub(crate) sandbox: Option<(&'a Sandbox, &'a str)>,
}

impl Pty {
    /// Starts `launch.argv` on a new PTY under a new helper, in its sandbox when it has one:
    /// the cgroup limits set before the helper joins the cgroup, the rest entered by the
    /// helper before the program runs.
    pub(crate) async fn spawn(launch: Launch<'_>) -> io::Result<Pty> {
        let Launch {
            argv,
            env,
            cwd,
            cols,
            rows,
            tracking,
            adoption,
            sandbox,
        } = launch;
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
        let io = Master::new(master)?;
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
        let limits = sandbox.map(|(s, _)| s.clone()).filter(Sandbox::has_limits);
        if limits.is_some() && tracking != ProcessTracking::Cgroup {
            return Err(io::Error::other(
                "sandbox: memory_max, pids_max and cpu_max need cgroup process tracking",
            ));
        }
        let plan = sandbox.map(|(_, plan)| plan.to_owned());
        let started = tokio::task::spawn_blocking(move || {
            let cgroup = match tracking {
                ProcessTracking::Cgroup => {
                    let hierarchy =
                        crate::process::cgroup::hierarchy().map_err(io::Error::other)?;
                    let cgroup = SessionCgroup::create(hierarchy, &label)?;
                    if let Some(limits) = &limits
                        && let Err(why) = cgroup.limit(hierarchy, limits)
                    {
                        let _ = cgroup.remove();
                        return Err(io::Error::other(why));
                    }
                    Some(cgroup)
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
                HelperTold {
                    cgroup: dir.as_deref(),
                    adoption: adoption.as_ref(),
                    sandbox: plan.as_deref(),
                },
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
            Ok(Ok(Some(Report::Unenforceable(step, errno)))) => io::Error::other(format!(
                "the sandbox cannot be enforced here: {} failed: {}",
                Step::from_number(step).map_or("a step of the helper", Step::doing),
                io::Error::from_raw_os_error(errno)
            )),
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
        let io = Master::new(master)?;
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

    /// A session whose helper vanished while no daemon ran: a terminal that has hung up and a
    /// program that has exited, how is not known. What it started may still run (the helper was
    /// killed from inside the session, then the daemon): `terminate` ends what carries `tag`.
    pub(crate) fn lost(tag: Option<String>) -> io::Result<Pty> {
        let (master, slave) = open_pty(80, 24, false)?;
        drop(slave);
        let (status_read, status_write) = fd::pipe()?;
        drop(status_write);
        Ok(Pty {
            io: Master::new(master)?,
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

/// What a helper is told besides the program: the cgroup it joins first, the socket it serves
/// for an adopting daemon, the sandbox plan it enters before the program runs.
struct HelperTold<'a> {
    cgroup: Option<&'a Path>,
    adoption: Option<&'a AdoptionSocket>,
    sandbox: Option<&'a str>,
}

/// Starts the helper `executable` with the slave as stdin, the status pipe as stdout and a copy
/// of the master as stderr, told what `told` says. No code runs between fork and exec, so std
/// uses `posix_spawn`.
fn spawn_helper(
    executable: &Path,
    fds: HelperFds,
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    told: HelperTold<'_>,
) -> io::Result<std::process::Child> {
    let HelperTold {
        cgroup,
        adoption,
        sandbox,
    } = told;
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
    if let Some(plan) = sandbox {
        cmd.env(crate::process::sandbox::SANDBOX_ENV, plan);
    }
    // Dropping `cmd` afterwards closes our copies of the slave and the write end, or neither
    // hang-up nor EOF would ever arrive.
    cmd.spawn()
}
