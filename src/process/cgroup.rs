//! cgroup v2 containment: one cgroup per session, all of a daemon's below one parent cgroup of
//! its own, under the daemon's (delegated) cgroup.
//!
//! At start-up [`hierarchy`] finds the daemon's cgroup (`/proc/self/cgroup`, the `0::` line)
//! under the cgroup2 mount (`/proc/self/mountinfo`; pure v2 or the `unified` mount of a hybrid
//! setup), removes the cgroups a crashed predecessor left behind, creates this daemon's parent
//! cgroup there and checks it has `cgroup.kill` (Linux 5.14+), and moves the daemon into the
//! leaf `<own>/daemon` unless it sits at the hierarchy's root (a cgroup with children should
//! hold no processes of its own); a daemon re-executed by an upgrade in place is there already,
//! and takes the leaf's parent as its own cgroup. Under systemd, `Delegate=yes` on the unit gives it this
//! subtree; run as root outside systemd, the daemon's cgroup is the hierarchy's root, and the
//! parent keeps its sessions in one directory there instead of beside the machine's own.
//!
//! The parent is named `ptyd-<daemon pid>-<daemon start time>`: the pid and start time identify
//! the daemon that made it even after its pid is reused, so a daemon removes exactly the ones
//! whose owner is gone. Session cgroups inside it are `<n>-<session id>`. The first session
//! creates the parent, and `ReleaseOnDrop`, held by `serve`, removes it when the daemon stops. The session's helper joins its cgroup before it runs
//! anything (see [`crate::process::helper`]), so everything the session starts is a member,
//! whatever it does to its session, parent or environment.

use crate::process::reaper::Members;
use crate::process::{fd, procfs};
use nix::poll::{PollFd, PollFlags, ppoll};
use nix::sys::signal::{Signal, kill};
use nix::sys::time::TimeSpec;
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

mod limits;
use std::time::{Duration, Instant};
use tokio::io::Interest;

/// Name prefix of every daemon's parent cgroup (and of the session cgroups older versions put
/// directly beside it).
const PREFIX: &str = "ptyd-";
/// The leaf the daemon moves itself into (a cgroup with children holds no processes).
const DAEMON_LEAF: &str = "daemon";
/// How long the freezer may take to stop every member before the signals go out anyway
/// (normally microseconds; a task in uninterruptible sleep freezes only when it wakes).
const FREEZE_WAIT: Duration = Duration::from_millis(200);
/// How long start-up waits for a dead predecessor's session cgroup to empty after
/// `cgroup.kill` (normally well under a millisecond).
const STALE_WAIT: Duration = Duration::from_secs(2);

/// The daemon's delegated cgroup v2 subtree, where session cgroups are created.
#[derive(Debug)]
pub struct Hierarchy {
    /// This daemon's parent cgroup, `ptyd-<pid>-<start time>` in the daemon's own cgroup:
    /// session cgroups are its children.
    parent: PathBuf,
}

static HIERARCHY: OnceLock<Result<Hierarchy, String>> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(1);

/// The daemon's usable cgroup v2 subtree, detected (and prepared) once per process; the error
/// says why there is none.
pub fn hierarchy() -> Result<&'static Hierarchy, String> {
    HIERARCHY.get_or_init(detect).as_ref().map_err(Clone::clone)
}

/// Removes this daemon's parent cgroup, once `serve` has closed its sessions. It is only
/// removed when empty (another `serve` in the same process may still hold sessions there); a
/// session opened later creates it again.
fn release() {
    let Some(Ok(hierarchy)) = HIERARCHY.get() else {
        return;
    };
    match std::fs::remove_dir(&hierarchy.parent) {
        Ok(()) => {
            tracing::debug!(cgroup = %hierarchy.parent.display(), "removed the daemon's parent cgroup")
        }
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ResourceBusy
            ) => {}
        Err(e) => tracing::warn!(cgroup = %hierarchy.parent.display(), error = %e,
            "could not remove the daemon's parent cgroup"),
    }
}

/// The directory of this process's current cgroup v2 and its path relative to the mount.
pub fn current_dir() -> Result<(PathBuf, PathBuf), String> {
    let own = own_cgroup()
        .ok_or("this process is in no cgroup v2 (no `0::` line in /proc/self/cgroup)")?;
    let (mount, mount_root) =
        cgroup2_mount().ok_or("no cgroup2 filesystem is mounted (see /proc/self/mountinfo)")?;
    let relative = Path::new(&own).strip_prefix(&mount_root).map_err(|_| {
        format!(
            "the daemon's cgroup {own} is outside the cgroup2 mount at {}",
            mount.display()
        )
    })?;
    Ok((mount.join(relative), relative.to_path_buf()))
}

fn detect() -> Result<Hierarchy, String> {
    let (base, relative) = daemon_cgroup(current_dir()?);
    let me = std::process::id();
    let start = procfs::start_time(me as i32).ok_or("cannot read this process's start time")?;
    remove_stale(&base);
    // The parent doubles as the probe; it is made again by the first session (a process that
    // only asks whether cgroups work, as `ptyd serve --check-config` or a test does, leaves
    // nothing behind).
    let parent = base.join(format!("{PREFIX}{me}-{start}"));
    create_parent(&parent).map_err(|e| {
        format!(
            "cannot create a cgroup under {} ({e}); run the daemon with a delegated cgroup \
             (systemd: Delegate=yes)",
            base.display()
        )
    })?;
    let has_kill = parent.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&parent);
    if !has_kill {
        return Err("this kernel's cgroup v2 has no cgroup.kill (Linux 5.14 or later)".into());
    }
    // The hierarchy's root may hold processes next to children; any other cgroup should not.
    if relative != Path::new("")
        && let Err(e) = move_into_leaf(&base)
    {
        tracing::warn!(cgroup = %base.display(), error = %e,
            "could not move the daemon into its own leaf cgroup; continuing in place");
    }
    tracing::info!(cgroup = %parent.display(), "one cgroup v2 per session");
    Ok(Hierarchy { parent })
}

/// The daemon's own cgroup from the one this process is in: the parent of its leaf when the
/// process already sits in one (it moved there before an upgrade in place re-executed it, same
/// process); else the one it is in.
fn daemon_cgroup((dir, relative): (PathBuf, PathBuf)) -> (PathBuf, PathBuf) {
    match (dir.parent(), relative.parent()) {
        (Some(base), Some(base_relative)) if relative.file_name() == Some(DAEMON_LEAF.as_ref()) => {
            (base.to_owned(), base_relative.to_owned())
        }
        _ => (dir, relative),
    }
}

/// Removes this daemon's parent cgroup ([`release`]) when dropped: `serve` holds one from
/// start-up on, so the parent goes however `serve` ends.
pub(crate) struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        release();
    }
}

/// Creates the daemon's parent cgroup unless it exists.
fn create_parent(parent: &Path) -> io::Result<()> {
    match std::fs::create_dir(parent) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// The `0::<path>` entry of `/proc/self/cgroup`.
fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end_matches(" (deleted)").to_owned())
}

/// The cgroup2 mount point and the cgroup path at its root, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<(PathBuf, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = left.split_whitespace().collect();
        let root = unescape_mountinfo(fields.get(3)?);
        let point = unescape_mountinfo(fields.get(4)?);
        Some((PathBuf::from(point), PathBuf::from(root)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let digit = |k: usize| u32::from(bytes[i + k] - b'0');
            out.push((digit(1) * 64 + digit(2) * 8 + digit(3)) as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn move_into_leaf(base: &Path) -> io::Result<()> {
    let leaf = base.join(DAEMON_LEAF);
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())
}

/// Kills and removes the cgroups of daemons that no longer run (their parent cgroups, and the
/// session cgroups older versions made directly in the daemon's cgroup), except the sessions
/// whose helper still waits for a daemon to adopt them: those are the helper's to end, when its
/// adoption grace is over.
fn remove_stale(base: &Path) {
    let Ok(dir) = std::fs::read_dir(base) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((pid, start)) = owner(name) else {
            continue;
        };
        if procfs::start_time(pid) == Some(start) {
            continue; // its daemon still runs
        }
        let path = entry.path();
        if sweep(&path) {
            tracing::info!(cgroup = %path.display(), "removed a cgroup left by a previous daemon");
        } else {
            tracing::info!(cgroup = %path.display(),
                "kept a previous daemon's cgroup: sessions in it wait to be adopted");
        }
    }
}

/// Kills and removes `path` and its child cgroups, deepest first, except those holding a live
/// session helper (a session that outlives its daemon); true when all of it was removed.
fn sweep(path: &Path) -> bool {
    if holds_a_helper(path) {
        return false;
    }
    let mut all = true;
    if let Ok(dir) = std::fs::read_dir(path) {
        for entry in dir.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                all &= sweep(&entry.path());
            }
        }
    }
    if !all {
        return false;
    }
    let _ = std::fs::write(path.join("cgroup.kill"), "1");
    let emptied = poll_event(path, "populated", "0", STALE_WAIT);
    match remove_tree(path) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(cgroup = %path.display(), error = %e, emptied,
                "could not remove a cgroup left by a previous daemon");
            false
        }
    }
}

/// The processes directly in the cgroup at `path` (none when it cannot be read).
pub(crate) fn members(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect()
}

/// The processes in the cgroup at `path` and in every cgroup below it.
pub(crate) fn members_below(path: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    let mut dirs = vec![path.to_owned()];
    while let Some(dir) = dirs.pop() {
        out.extend(members(&dir));
        if let Ok(entries) = std::fs::read_dir(&dir) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    out
}

/// Whether a live session helper is a member of the cgroup at `path` (not of its children).
fn holds_a_helper(path: &Path) -> bool {
    members(path).into_iter().any(|pid| {
        procfs::is_alive(pid)
            && procfs::comm(pid).is_some_and(|c| c == crate::process::helper::COMM)
    })
}

/// The owning daemon's pid and start time encoded in a cgroup's name: `ptyd-<pid>-<start>`
/// (a daemon's parent) or `ptyd-<pid>-<start>-<rest>` (a session cgroup of an older version).
fn owner(name: &str) -> Option<(i32, u64)> {
    let mut parts = name.strip_prefix(PREFIX)?.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    Some((pid, start))
}

/// Removes a cgroup and its child cgroups, deepest first (cgroupfs removes only empty
/// directories, whose control files go with them).
fn remove_tree(path: &Path) -> io::Result<()> {
    if let Ok(dir) = std::fs::read_dir(path) {
        for entry in dir.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path())?;
            }
        }
    }
    match std::fs::remove_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The value of `key` in a cgroup's `cgroup.events`.
fn event_value(path: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path.join("cgroup.events")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.to_owned())
    })
}

/// Waits (blocking, for start-up only) until `cgroup.events` shows `key value`: the kernel
/// signals every change of the file as POLLPRI.
fn poll_event(path: &Path, key: &str, value: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let Ok(file) = std::fs::File::open(path.join("cgroup.events")) else {
        return false;
    };
    loop {
        match event_value(path, key) {
            Some(v) if v == value => return true,
            None => return false,
            _ => {}
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLPRI)];
        // ppoll: poll's milliseconds would make the last sub-millisecond wait a spin.
        let _ = ppoll(&mut fds, Some(TimeSpec::from_duration(left)), None);
    }
}

/// One session's cgroup.
#[derive(Debug)]
pub(crate) struct SessionCgroup {
    path: PathBuf,
}

impl SessionCgroup {
    /// Creates a fresh cgroup for the session `label` (its id, for people reading the tree).
    pub(crate) fn create(hierarchy: &Hierarchy, label: &str) -> io::Result<SessionCgroup> {
        let label: String = label
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(32)
            .collect();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = hierarchy.parent.join(format!("{n}-{label}"));
        // The parent is made by the first session, and removed when a `serve` ends; another
        // `serve` in the same process may remove it between the two calls, hence the retries.
        let mut attempts = 3;
        loop {
            create_parent(&hierarchy.parent)?;
            match std::fs::create_dir(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts > 1 => attempts -= 1,
                done => return done.map(|()| SessionCgroup { path }),
            }
        }
    }

    /// The cgroup's directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Every process in the cgroup and in any cgroup below it.
    fn processes(&self) -> Vec<i32> {
        members_below(&self.path)
    }

    /// Waits until `cgroup.events` shows `key value`, woken by the kernel's POLLPRI on every
    /// change of the file; false when `within` passes first.
    async fn wait_event(&self, key: &str, value: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        let events = std::fs::File::open(self.path.join("cgroup.events"))
            .map(OwnedFd::from)
            .and_then(|events| fd::async_fd(events, Interest::PRIORITY));
        let events = match events {
            Ok(fd) => fd,
            // Gone already (removed) or not pollable: report what the file says now.
            Err(_) => return event_value(&self.path, key).is_some_and(|v| v == value),
        };
        loop {
            match event_value(&self.path, key) {
                Some(v) if v == value => return true,
                None => return false,
                _ => {}
            }
            match tokio::time::timeout_at(deadline, events.ready(Interest::PRIORITY)).await {
                Ok(Ok(mut guard)) => guard.clear_ready(),
                Ok(Err(_)) | Err(_) => {
                    return event_value(&self.path, key).is_some_and(|v| v == value);
                }
            }
        }
    }

    /// Removes the (empty) cgroup and any child cgroups.
    pub(crate) fn remove(&self) -> io::Result<()> {
        remove_tree(&self.path)
    }

    /// Writes a control file off the async workers: cgroupfs writes take kernel-wide cgroup
    /// locks, which a concurrent migration elsewhere may hold for an RCU grace period.
    async fn write(&self, file: &str, value: &'static str) -> io::Result<()> {
        let path = self.path.join(file);
        tokio::task::spawn_blocking(move || std::fs::write(path, value))
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e)))
    }

    /// [`SessionCgroup::remove`] off the async workers.
    pub(crate) async fn remove_async(&self) -> io::Result<()> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || remove_tree(&path))
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e)))
    }
}

impl Members for SessionCgroup {
    async fn freeze(&self) -> Vec<i32> {
        if self.write("cgroup.freeze", "1").await.is_ok() {
            self.wait_event("frozen", "1", FREEZE_WAIT).await;
        }
        self.processes()
    }

    async fn thaw(&self, members: &[i32]) {
        for &pid in members {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }
        let _ = self.write("cgroup.freeze", "0").await;
    }

    async fn kill_all(&self) {
        if let Err(e) = self.write("cgroup.kill", "1").await {
            tracing::warn!(cgroup = %self.path.display(), error = %e, "cgroup.kill failed");
        }
    }

    async fn wait_gone(&self, within: Duration) -> bool {
        self.wait_event("populated", "0", within).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_already_in_its_leaf_uses_the_leafs_parent() {
        let mount = Path::new("/sys/fs/cgroup");
        for (relative, expected) in [
            (
                "user.slice/app.slice/ptyd.service/daemon",
                "user.slice/app.slice/ptyd.service",
            ),
            (
                "user.slice/app.slice/ptyd.service",
                "user.slice/app.slice/ptyd.service",
            ),
            ("daemons.slice", "daemons.slice"),
            ("", ""),
        ] {
            let (dir, rel) = daemon_cgroup((mount.join(relative), PathBuf::from(relative)));
            assert_eq!(rel, Path::new(expected), "{relative}");
            assert_eq!(dir, mount.join(expected), "{relative}");
        }
    }

    #[test]
    fn owners_are_parsed_from_session_cgroup_names() {
        for (name, want) in [
            ("ptyd-4242-123456", Some((4242, 123456))),
            ("ptyd-4242-123456-7-t3", Some((4242, 123456))),
            ("ptyd-4242-123456-probe", Some((4242, 123456))),
            ("ptyd-4242", None),
            ("ptyd-4242-", None),
            ("daemon", None),
            ("1-t1", None),
            ("ptyd-x-1-2", None),
            ("ptyd-1-x", None),
        ] {
            assert_eq!(owner(name), want, "{name}");
        }
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(r"/sys/fs/a\040b"), "/sys/fs/a b");
        assert_eq!(unescape_mountinfo(r"/plain"), "/plain");
        assert_eq!(unescape_mountinfo(r"\0"), r"\0");
    }
}
