//! cgroup v2 containment: one cgroup per session under the daemon's own (delegated) cgroup.
//!
//! At start-up [`hierarchy`] finds the daemon's cgroup (`/proc/self/cgroup`, the `0::` line)
//! under the cgroup2 mount (`/proc/self/mountinfo`; pure v2 or the `unified` mount of a hybrid
//! setup), checks it can create a child there that has `cgroup.kill` (Linux 5.14+), moves the
//! daemon into the leaf `<own>/daemon` unless it sits at the hierarchy's root (a cgroup with
//! children should hold no processes of its own), and removes the session cgroups a crashed
//! predecessor left behind. Under systemd, `Delegate=yes` on the unit gives it this subtree.
//!
//! Session cgroups are named `ptyd-<daemon pid>-<daemon start time>-<n>-<session id>`: the pid
//! and start time (field 22 of `/proc/<pid>/stat`) identify the daemon that made them even after
//! its pid is reused, so a daemon removes exactly the ones whose owner is gone. The session's
//! helper joins its cgroup before it runs anything (see [`crate::process::helper`]), so everything the
//! session starts is a member, whatever it does to its session, parent or environment.

use crate::process::reaper::{Members, stat_field};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Name prefix of every cgroup ptyd creates for a session.
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
    /// Directory of the daemon's cgroup: session cgroups are its children.
    base: PathBuf,
    /// `ptyd-<pid>-<start time>-`: the prefix of this daemon's session cgroups.
    own_prefix: String,
}

static HIERARCHY: OnceLock<Result<Hierarchy, String>> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(1);

/// The daemon's usable cgroup v2 subtree, detected (and prepared) once per process; the error
/// says why there is none.
pub fn hierarchy() -> Result<&'static Hierarchy, String> {
    HIERARCHY.get_or_init(detect).as_ref().map_err(Clone::clone)
}

impl Hierarchy {
    /// The directory under which session cgroups are created (the daemon's own cgroup).
    pub fn base(&self) -> &Path {
        &self.base
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
    let (base, relative) = current_dir()?;
    let me = std::process::id();
    let start = stat_field(me as i32, 22).ok_or("cannot read this process's start time")?;
    let own_prefix = format!("{PREFIX}{me}-{start}-");
    let probe = base.join(format!("{own_prefix}probe"));
    std::fs::create_dir(&probe).map_err(|e| {
        format!(
            "cannot create a cgroup under {} ({e}); run the daemon with a delegated cgroup \
             (systemd: Delegate=yes)",
            base.display()
        )
    })?;
    let has_kill = probe.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&probe);
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
    remove_stale(&base);
    tracing::info!(cgroup = %base.display(), "one cgroup v2 per session");
    Ok(Hierarchy { base, own_prefix })
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

/// Kills and removes the session cgroups of daemons that no longer run.
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
        if stat_field(pid, 22) == Some(start) {
            continue; // its daemon still runs
        }
        let path = entry.path();
        let _ = std::fs::write(path.join("cgroup.kill"), "1");
        let emptied = poll_event(&path, "populated", "0", STALE_WAIT);
        match remove_tree(&path) {
            Ok(()) => {
                tracing::info!(cgroup = %path.display(), "removed a session cgroup left by a previous daemon")
            }
            Err(e) => tracing::warn!(cgroup = %path.display(), error = %e, emptied,
                "could not remove a session cgroup left by a previous daemon"),
        }
    }
}

/// The owning daemon's pid and start time encoded in a session cgroup's name.
fn owner(name: &str) -> Option<(i32, i64)> {
    let mut parts = name.strip_prefix(PREFIX)?.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    parts.next()?;
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
        let mut fds = [libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        }];
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                1,
                left.as_millis().min(i32::MAX as u128) as i32,
            )
        };
    }
}

/// One session's cgroup.
#[derive(Debug)]
pub struct SessionCgroup {
    path: PathBuf,
}

impl SessionCgroup {
    /// Creates a fresh cgroup for the session `label` (its id, for people reading the tree).
    pub fn create(hierarchy: &Hierarchy, label: &str) -> io::Result<SessionCgroup> {
        let label: String = label
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(32)
            .collect();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = hierarchy
            .base
            .join(format!("{}{n}-{label}", hierarchy.own_prefix));
        std::fs::create_dir(&path)?;
        Ok(SessionCgroup { path })
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every process in the cgroup and in any cgroup below it.
    pub fn processes(&self) -> Vec<i32> {
        let mut out = Vec::new();
        let mut dirs = vec![self.path.clone()];
        while let Some(dir) = dirs.pop() {
            if let Ok(text) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|s| s.parse::<i32>().ok()),
                );
            }
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

    /// Whether any live process is in the cgroup (or below it).
    pub fn populated(&self) -> bool {
        event_value(&self.path, "populated").is_none_or(|v| v != "0")
    }

    /// Waits until `cgroup.events` shows `key value`, woken by the kernel's POLLPRI on every
    /// change of the file; false when `within` passes first.
    async fn wait_event(&self, key: &str, value: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        let events = std::fs::File::open(self.path.join("cgroup.events"))
            .map(OwnedFd::from)
            .and_then(|fd| {
                // SAFETY: the AsyncFd owns the fd for its whole life.
                unsafe { AsyncFd::register_with_interest(fd, Interest::PRIORITY) }
                    .map_err(|e| e.into_parts().1)
            });
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
    pub fn remove(&self) -> io::Result<()> {
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
    pub async fn remove_async(&self) -> io::Result<()> {
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
    fn owners_are_parsed_from_session_cgroup_names() {
        assert_eq!(owner("ptyd-4242-123456-7-t3"), Some((4242, 123456)));
        assert_eq!(owner("ptyd-4242-123456-probe"), Some((4242, 123456)));
        assert_eq!(owner("ptyd-4242-123456"), None);
        assert_eq!(owner("daemon"), None);
        assert_eq!(owner("ptyd-x-1-2"), None);
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(r"/sys/fs/a\040b"), "/sys/fs/a b");
        assert_eq!(unescape_mountinfo(r"/plain"), "/plain");
        assert_eq!(unescape_mountinfo(r"\0"), r"\0");
    }
}
