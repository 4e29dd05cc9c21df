//! Ending a session's processes, and the daemon's side of process ownership.
//!
//! Every session runs under its own helper process ([`crate::process::helper`]), a child subreaper: whatever the
//! session starts — background jobs, `nohup`, `setsid`, double-forked daemons, `env -i` — stays a
//! descendant of that helper, because orphans reparent to the nearest subreaper. Close then has
//! two ways to find everything ([`crate::process::ProcessTracking`]):
//! - `Cgroup`: the helper joins a fresh cgroup v2 before it runs anything ([`crate::process::cgroup`]);
//!   the cgroup's member list is complete by construction and `cgroup.kill` is atomic.
//! - `Subreaper`: the helper's descendants, found by walking `/proc/<pid>/task/*/children`;
//!   everything is stopped (SIGSTOP, rescanning until no new process appears) before it is
//!   signalled, so nothing forks between the scan and the signal.
//!
//! Either way Close escalates SIGHUP (what a closing terminal sends) → `close_grace` → SIGTERM →
//! `TERM_GRACE` → SIGKILL, continuing stopped processes so they can die, and returns once the
//! helper has exited: the helper leaves only when it has reaped every descendant, so "helper
//! gone" means "nothing of the session exists, not even a zombie".
//!
//! The daemon itself is a child subreaper too ([`become_subreaper`]), as a second line: if a
//! helper is killed from inside its session, its orphans come to the daemon instead of init. The
//! `Reaper` task reaps such adopted zombies on SIGCHLD without touching what others wait for:
//! the helpers and shells a session's `Pty` watches, and any other child of the process.
//! Once a helper is gone its session's members are found by the shell's Unix session and the
//! session's tag (`crate::process::tag`), which is also what a later daemon has to go on.

use crate::process::fd;
use crate::process::procfs;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::unix::AsyncFd;

/// Wait after SIGTERM before SIGKILL: programs that clean up on SIGTERM usually finish in well
/// under this.
pub(crate) const TERM_GRACE: Duration = Duration::from_millis(1000);
/// Wait after SIGKILL for the kernel to finish the exits (normally well under a millisecond;
/// only a process stuck in uninterruptible sleep, such as on a dead NFS server, takes longer).
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(5);

/// Makes this process a child subreaper: orphans of its descendants reparent to it rather than
/// to init. Idempotent; the attribute stays for the life of the process.
pub fn become_subreaper() -> std::io::Result<()> {
    Ok(nix::sys::prctl::set_child_subreaper(true)?)
}

/// Helpers and shells whose exit status belongs to their session's `Pty`, never to
/// [`reap_adopted`]. (A shell is a grandchild of the daemon and becomes its child only if its
/// helper dies first.)
static WATCHED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Keeps [`reap_adopted`] away from `pid` until [`unwatch`].
pub(crate) fn watch(pid: i32) {
    WATCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pid);
}

/// Ends `watch` for `pid`.
pub(crate) fn unwatch(pid: i32) {
    WATCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&pid);
}

/// Reaps every zombie this process adopted as a subreaper: children whose session id differs
/// from the daemon's and that nobody watches. Everything a PTY session starts lives in another
/// session, and so does each helper (it starts its own), while the daemon's other children
/// (anything else this process spawned) share its session. Helpers and shells are
/// watched (`watch`) while their `Pty` waits for them. Returns how many were reaped.
pub fn reap_adopted() -> usize {
    let me = std::process::id() as i32;
    let Some(own_sid) = procfs::sid(me) else {
        return 0;
    };
    let watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
    let mut reaped = 0;
    // The watched ones are passed over without a look in /proc: they are most of the children (every
    // session's helper), and this runs on every SIGCHLD.
    for child in procfs::children(me)
        .into_iter()
        .filter(|child| !watched.contains(child))
    {
        let Some(stat) = procfs::stat(child) else {
            continue;
        };
        if stat.state != 'Z' || stat.sid == own_sid {
            continue;
        }
        if let Ok(status) = waitpid(Pid::from_raw(child), Some(WaitPidFlag::WNOHANG))
            && status.pid().is_some()
        {
            reaped += 1;
        }
    }
    reaped
}

/// The daemon's SIGCHLD listener: reaps adopted zombies as they appear. Owned by `serve`, which
/// stops it by dropping it.
pub(crate) struct Reaper {
    task: tokio::task::JoinHandle<()>,
}

impl Reaper {
    /// Starts listening for SIGCHLD on the current runtime.
    pub(crate) fn start() -> std::io::Result<Reaper> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut sigchld = signal(SignalKind::child())?;
        let task = tokio::spawn(async move {
            reap_adopted();
            while sigchld.recv().await.is_some() {
                reap_adopted();
            }
        });
        Ok(Reaper { task })
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Every live process of a session whose helper is gone: those of the Unix session led by
/// `leader` (its shell) and those started with its `tag` (see [`crate::process::tag`]), plus
/// their descendants. The attribution used once the helper cannot be asked; it misses only a
/// `setsid` escape started with a cleared environment.
fn session_processes(leader: i32, tag: Option<&str>) -> Vec<i32> {
    let mut stack: Vec<i32> = tag.map(crate::process::tag::tagged).unwrap_or_default();
    // Leader 0 would match kernel threads, 1 init: no session of ours.
    if leader > 1 {
        stack.extend(
            procfs::pids()
                .into_iter()
                .filter(|&pid| procfs::sid(pid) == Some(leader)),
        );
        stack.push(leader);
    }
    let mut found = BTreeSet::new();
    while let Some(pid) = stack.pop() {
        if found.insert(pid) {
            stack.extend(procfs::children(pid));
        }
    }
    found.into_iter().filter(|&p| procfs::is_alive(p)).collect()
}

/// The processes of one session, as Close sees them.
pub(crate) trait Members {
    /// Stops every member so none can fork, and returns them (empty once all are gone).
    async fn freeze(&self) -> Vec<i32>;
    /// Lets the frozen members run again; pending signals are delivered then, and SIGCONT
    /// wakes jobs stopped by SIGTSTP so they can act on them.
    async fn thaw(&self, members: &[i32]);
    /// Kills every member, stopped, frozen or not.
    async fn kill_all(&self);
    /// Resolves true once no member is left, or false when `within` passes first.
    async fn wait_gone(&self, within: Duration) -> bool;
}

/// Ends every member: SIGHUP (what a closing terminal sends), `grace`, SIGTERM, `TERM_GRACE`,
/// then SIGKILL; each wait ends as soon as nothing is left. Returns whether everything was gone
/// within [`KILL_WAIT`] of the kill (false only for processes stuck in the kernel).
pub(crate) async fn escalate(members: &impl Members, grace: Duration) -> bool {
    for (signal, wait) in [(Signal::SIGHUP, grace), (Signal::SIGTERM, TERM_GRACE)] {
        let victims = members.freeze().await;
        for &pid in &victims {
            let _ = kill(Pid::from_raw(pid), signal);
        }
        members.thaw(&victims).await;
        if victims.is_empty() {
            // Only the helper (or nothing) is left; it leaves as soon as it sees that.
            return members.wait_gone(KILL_WAIT).await;
        }
        if members.wait_gone(wait).await {
            return true;
        }
    }
    members.kill_all().await;
    members.wait_gone(KILL_WAIT).await
}

/// A session's members found by walking its helper's descendants, frozen with SIGSTOP.
pub(crate) struct Tree<'a> {
    /// The helper: its descendants are the members; it exits once it has reaped them all.
    pub helper: i32,
    /// Readable once the helper has exited; `None` when it is already gone.
    pub helper_exit: Option<&'a AsyncFd<OwnedFd>>,
    /// The session's shell (0 when not known), whose Unix session is, with `tag`, the fallback
    /// attribution when the helper is gone (it was killed from inside its session).
    pub shell: i32,
    /// The session's tag (see [`crate::process::tag`]), when it has one.
    pub tag: Option<&'a str>,
}

impl Tree<'_> {
    fn scan(&self) -> Vec<i32> {
        match self.helper_exit {
            Some(_) => procfs::live_descendants(self.helper),
            None => session_processes(self.shell, self.tag),
        }
    }

    /// Stops every member (see [`stop_all`]).
    fn stop_all(&self) -> Vec<i32> {
        stop_all(|| self.scan())
    }
}

/// Stops (SIGSTOP) every process `scan` finds, rescanning until no new one appears, so nothing
/// can fork a new process between the scan and the signal; returns the last scan.
pub(crate) fn stop_all(scan: impl Fn() -> Vec<i32>) -> Vec<i32> {
    let mut frozen = BTreeSet::new();
    loop {
        let found = scan();
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

impl Members for Tree<'_> {
    async fn freeze(&self) -> Vec<i32> {
        self.stop_all()
    }

    async fn thaw(&self, members: &[i32]) {
        // Children before their parents: a shell that runs again while its job is still
        // stopped treats it as a stopped job and, exiting on the SIGHUP just sent, kills it with
        // SIGTERM (bash does), cutting short the grace a `nohup` job should get. Continued
        // first, the job is reported continued by the time its shell looks.
        for pid in deepest_first(members) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
    }

    async fn kill_all(&self) {
        for pid in self.stop_all() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }

    async fn wait_gone(&self, within: Duration) -> bool {
        if let Some(exit) = self.helper_exit {
            return tokio::time::timeout(within, exit.readable()).await.is_ok();
        }
        let watchers: Vec<_> = self.scan().into_iter().filter_map(fd::exit_watch).collect();
        let all_exited = async {
            for w in &watchers {
                let _ = w.readable().await;
            }
        };
        tokio::time::timeout(within, all_exited).await.is_ok()
    }
}

/// `members` ordered so that every process comes before its parent (deepest first; each
/// member's depth counted through its ancestors among `members`).
fn deepest_first(members: &[i32]) -> Vec<i32> {
    let set: BTreeSet<i32> = members.iter().copied().collect();
    let depth = |mut pid: i32| {
        let mut depth = 0;
        while let Some(parent) = procfs::ppid(pid).filter(|p| set.contains(p)) {
            depth += 1;
            pid = parent;
            if depth > set.len() {
                break; // a cycle cannot happen, but a bound costs nothing
            }
        }
        depth
    };
    let mut ordered: Vec<(usize, i32)> = members.iter().map(|&p| (depth(p), p)).collect();
    ordered.sort_by_key(|&(depth, _)| std::cmp::Reverse(depth));
    ordered.into_iter().map(|(_, p)| p).collect()
}
