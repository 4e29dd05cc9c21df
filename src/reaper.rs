//! Ending a session's processes: find every process that belongs to the session (its shell's
//! descendants and everything still in the shell's Unix session, which catches `nohup`, `disown`
//! and `(cmd &)` orphans), freeze them so nothing forks in between, then escalate SIGHUP ->
//! SIGTERM -> SIGKILL with named grace periods, waiting on pidfds rather than polling.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::time::Duration;
use tokio::io::unix::AsyncFd;

/// Wait after SIGTERM before SIGKILL: programs that clean up on SIGTERM usually finish in well
/// under this.
const TERM_GRACE: Duration = Duration::from_millis(1000);
/// Wait after SIGKILL for the kernel to finish the exits (normally well under a millisecond).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Every live process that belongs to the session led by `leader`.
pub fn session_processes(leader: i32) -> Vec<i32> {
    let mut found = BTreeSet::new();
    let mut stack = vec![leader];
    while let Some(pid) = stack.pop() {
        if !found.insert(pid) {
            continue;
        }
        stack.extend(children(pid));
    }
    // Orphans reparented away from the tree but still in the shell's session.
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if !found.contains(&pid) && stat_field(pid, 6) == Some(leader as i64) {
                found.insert(pid);
                stack.push(pid);
            }
        }
        while let Some(pid) = stack.pop() {
            for child in children(pid) {
                if found.insert(child) {
                    stack.push(child);
                }
            }
        }
    }
    found.into_iter().filter(|&p| is_alive(p)).collect()
}

/// Direct children of `pid`, from every thread's `children` list.
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|s| s.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// Field `n` (1-based, as in proc(5)) of `/proc/<pid>/stat`, for the numeric fields after the
/// command name.
pub fn stat_field(pid: i32, n: usize) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    // `rest` starts at field 3 (state).
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// The short command name of `pid` (`/proc/<pid>/comm`).
pub fn command_name(pid: i32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned())
}

fn is_alive(pid: i32) -> bool {
    // A zombie has exited; only its parent's wait is missing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// Ends every process of the session led by `leader`: SIGHUP (what a closing terminal sends),
/// `grace`, SIGTERM, `TERM_GRACE`, SIGKILL; stopped processes are continued so they can die.
/// Returns once none is alive (or `KILL_WAIT` after SIGKILL, which only a kernel bug exceeds).
pub async fn terminate_session(leader: i32, grace: Duration) {
    for (signal, wait) in [
        (Signal::SIGHUP, grace),
        (Signal::SIGTERM, TERM_GRACE),
        (Signal::SIGKILL, KILL_WAIT),
    ] {
        let victims = freeze_all(leader);
        if victims.is_empty() {
            return;
        }
        let watchers: Vec<_> = victims.iter().filter_map(|&p| pidfd(p)).collect();
        for &pid in &victims {
            let _ = kill(Pid::from_raw(pid), signal);
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
        let all_exited = async {
            for w in &watchers {
                let _ = w.readable().await;
            }
        };
        let _ = tokio::time::timeout(wait, all_exited).await;
    }
}

/// Stops every process of the session, rescanning until no new one appears, so nothing can fork
/// a new process between the scan and the signal.
fn freeze_all(leader: i32) -> Vec<i32> {
    let mut frozen = BTreeSet::new();
    loop {
        let found = session_processes(leader);
        let new: Vec<i32> = found
            .iter()
            .copied()
            .filter(|p| !frozen.contains(p))
            .collect();
        if new.is_empty() {
            return found;
        }
        for pid in new {
            let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
            frozen.insert(pid);
        }
    }
}

fn pidfd(pid: i32) -> Option<AsyncFd<OwnedFd>> {
    crate::pty::async_fd(crate::pty::pidfd_open(pid as u32).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stat_fields_of_this_process() {
        let me = std::process::id() as i32;
        assert_eq!(stat_field(me, 1), None);
        assert!(stat_field(me, 4).is_some(), "ppid");
        assert!(command_name(me).is_some());
    }
}
