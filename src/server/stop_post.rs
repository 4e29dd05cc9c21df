//! `ptyd stop-post`: what the systemd unit's `ExecStopPost=` runs once the daemon has stopped.
//! Session helpers outlive a daemon that dies (so a restarted one adopts them), and the unit's
//! `KillMode=process` leaves them alone; this ends them when the stop was one someone asked for
//! (`systemctl stop`/`restart`, a clean exit), and leaves them for the restarted daemon after a
//! crash. systemd says which in `$SERVICE_RESULT` ([`verdict`]).
//!
//! Ending them: every cgroup below the unit's (the daemon's session cgroups and its own leaf),
//! except the one this command runs in, is killed with `cgroup.kill`, and every other process
//! still in the unit's own cgroup gets SIGKILL — which also covers the subreaper mode, where
//! sessions have no cgroup of their own but are still in the unit's. It acts only inside a
//! `ptyd*.service` cgroup, so run by hand it cannot touch anything else.

use crate::process::cgroup;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the killed processes get to be gone.
const GONE_WAIT: Duration = Duration::from_secs(5);

/// What to do with the processes a stopped daemon left, from systemd's `$SERVICE_RESULT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The stop was asked for (or the daemon exited cleanly): end what is left.
    End,
    /// The daemon failed: systemd restarts it (`Restart=on-failure`), and the new one adopts
    /// the sessions (a helper whose daemon never returns ends its tree after the adoption grace).
    Keep,
}

/// The verdict for `$SERVICE_RESULT`: `success` is a clean exit (the daemon closed its
/// sessions on SIGTERM; whatever is left is stray), `timeout` a stop that took too long (the
/// operator asked for the stop, so it ends the sessions all the same). Every other result —
/// `exit-code`, `signal`, `core-dump`, `oom-kill`, `watchdog`, ... — is a crash.
pub fn verdict(service_result: &str) -> Verdict {
    match service_result {
        "success" | "timeout" => Verdict::End,
        _ => Verdict::Keep,
    }
}

/// Runs the command: reads systemd's variables, ends or keeps what the daemon left, and says
/// which on stderr (the journal). An error when not run by systemd's `ExecStopPost=`.
pub fn run() -> Result<(), String> {
    let result = std::env::var("SERVICE_RESULT").map_err(|_| {
        "SERVICE_RESULT is not set: `ptyd stop-post` is run by the systemd unit's ExecStopPost="
            .to_owned()
    })?;
    let exit = format!(
        "SERVICE_RESULT={result} EXIT_CODE={} EXIT_STATUS={}",
        std::env::var("EXIT_CODE").unwrap_or_default(),
        std::env::var("EXIT_STATUS").unwrap_or_default()
    );
    if verdict(&result) == Verdict::Keep {
        eprintln!(
            "ptyd stop-post: the daemon failed ({exit}); leaving its sessions for the \
             restarted daemon to adopt"
        );
        return Ok(());
    }
    let (own, _) = cgroup::current_dir()?;
    let unit = unit_cgroup(&own).ok_or_else(|| {
        format!(
            "this process's cgroup {} is not a systemd service's; ending nothing",
            own.display()
        )
    })?;
    let ended = end_all_but(&unit, &own);
    eprintln!(
        "ptyd stop-post: the daemon stopped ({exit}); ended {ended} leftover process(es) of {}",
        unit.display()
    );
    Ok(())
}

/// The unit's cgroup for a command running in `own`: `own` itself when it is a ptyd service's
/// (`ptyd*.service`), or its parent when `own` is that unit's `.control` child (where systemd
/// runs the control commands of a delegated unit). Anything else — a terminal's cgroup when
/// run by hand, another service — is none, so nothing else is ever killed.
fn unit_cgroup(own: &Path) -> Option<PathBuf> {
    let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_owned);
    let is_ptyd_service =
        |p: &Path| name(p).is_some_and(|n| n.starts_with("ptyd") && n.ends_with(".service"));
    if is_ptyd_service(own) {
        return Some(own.to_owned());
    }
    if name(own).as_deref() != Some(".control") {
        return None;
    }
    own.parent()
        .filter(|p| is_ptyd_service(p))
        .map(Path::to_owned)
}

/// Kills everything in the cgroup tree `unit` except `spare` (this process's cgroup) and this
/// process; waits until it is gone. Returns how many processes there were.
fn end_all_but(unit: &Path, spare: &Path) -> usize {
    let me = std::process::id() as i32;
    let mut victims = Vec::new();
    let mut cgroups = Vec::new();
    if let Ok(dir) = std::fs::read_dir(unit) {
        for entry in dir.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) && path != spare {
                victims.extend(cgroup::members_below(&path));
                let _ = std::fs::write(path.join("cgroup.kill"), "1");
                cgroups.push(path);
            }
        }
    }
    if unit != spare {
        for pid in cgroup::members(unit).into_iter().filter(|&p| p != me) {
            victims.push(pid);
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    let deadline = Instant::now() + GONE_WAIT;
    while victims.iter().any(|&p| crate::process::procfs::is_alive(p)) && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    victims.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stop_that_was_asked_for_ends_the_sessions() {
        for (result, expected) in [
            ("success", Verdict::End),
            ("timeout", Verdict::End),
            ("exit-code", Verdict::Keep),
            ("signal", Verdict::Keep),
            ("core-dump", Verdict::Keep),
            ("oom-kill", Verdict::Keep),
            ("watchdog", Verdict::Keep),
            ("resources", Verdict::Keep),
            ("", Verdict::Keep),
        ] {
            assert_eq!(verdict(result), expected, "{result:?}");
        }
    }

    #[test]
    fn the_unit_cgroup_is_the_service_or_the_parent_of_its_control_cgroup() {
        let unit =
            "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/ptyd.service";
        for (own, expected) in [
            (unit.to_owned(), Some(unit)),
            (format!("{unit}/.control"), Some(unit)),
            ("/sys/fs/cgroup/user.slice/session-2.scope".to_owned(), None),
            (format!("{unit}/ptyd-1-2/3-t1"), None),
            (format!("{unit}/daemon"), None),
            (
                "/sys/fs/cgroup/user.slice/user@1000.service/app.slice/gnome-terminal.service"
                    .to_owned(),
                None,
            ),
            (
                "/sys/fs/cgroup/user.slice/user@1000.service/app.slice/other.service/.control"
                    .to_owned(),
                None,
            ),
            (
                "/sys/fs/cgroup/system.slice/ptyd@agents.service".to_owned(),
                Some("/sys/fs/cgroup/system.slice/ptyd@agents.service"),
            ),
            ("/".to_owned(), None),
        ] {
            assert_eq!(
                unit_cgroup(Path::new(&own)),
                expected.map(PathBuf::from),
                "{own}"
            );
        }
    }
}
