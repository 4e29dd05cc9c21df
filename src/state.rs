//! What outlives the daemon: the state directory (`$XDG_STATE_HOME/ptyd`, else
//! `~/.local/state/ptyd`, mode 0700) that lets a new `ptyd serve` adopt the sessions a previous
//! one left running (docs/lifecycle.md).
//!
//! Layout: `lock` (held with `flock` by the one daemon serving the directory; it holds that
//! daemon's pid), `counters` (the highest session and job numbers ever issued, so ids are never
//! reused, also after a clean stop), and one directory per session under `sessions/<id>/`:
//! `record.json` (see [`record`]), `journal` (the raw output, see [`journal`]) and `helper.sock`
//! (the session helper's socket). Small files are replaced atomically (written beside, then
//! renamed), never on the output path; nothing is fsynced, as what they guard against is the
//! daemon's death, not the machine's, and the page cache outlives the process.

pub(crate) mod commands;
pub(crate) mod journal;
pub(crate) mod journal_head;
pub(crate) mod record;

use crate::error::{Error, Result};
use nix::fcntl::{Flock, FlockArg};
use record::SessionRecord;
use serde::{Deserialize, Serialize};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Longest path a Unix socket address holds (`sun_path` less its NUL).
const SOCKET_PATH_MAX: usize = 107;

/// The state directory of this daemon's sessions: its path and the lock that makes this daemon
/// the only one serving it.
pub(crate) struct StateDir {
    root: PathBuf,
    _lock: Flock<File>,
}

/// The id numbers issued so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Counters {
    /// The highest session number issued (`t<n>`).
    pub(crate) sessions: u64,
    /// The highest job number issued (`j<n>`).
    pub(crate) jobs: u64,
}

/// The state directory the daemon uses when none is configured: `$XDG_STATE_HOME/ptyd` (an
/// absolute `XDG_STATE_HOME` only, as the XDG spec says), else `~/.local/state/ptyd`.
pub(crate) fn default_root() -> Option<PathBuf> {
    default_root_from(
        std::env::var_os("XDG_STATE_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn default_root_from(xdg: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    match xdg.filter(|p| p.is_absolute()) {
        Some(state) => Some(state.join("ptyd")),
        None => home.map(|h| h.join(".local/state/ptyd")),
    }
}

impl StateDir {
    /// Opens (creating it, 0700) the state directory `root` and takes its lock; a second
    /// daemon on the same directory gets an error naming the one that holds it.
    pub(crate) fn open(root: &Path) -> Result<StateDir> {
        let context = |what: &str| Error::io(format!("{what} {}", root.display()));
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root.join("sessions"))
            .map_err(context("creating the state directory"))?;
        // Once it exists, so that one someone made first is judged too.
        crate::private_dir::check(root, "state directory")?;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))
            .map_err(context("making the state directory private"))?;
        let longest = root.join("sessions/t18446744073709551615/helper.sock");
        if longest.as_os_str().len() > SOCKET_PATH_MAX {
            return Err(Error::FailedPrecondition(format!(
                "the state directory {} is too long a path for the sessions' Unix sockets \
                 (at most {} bytes with sessions/<id>/helper.sock); set state_dir to a shorter one",
                root.display(),
                SOCKET_PATH_MAX
            )));
        }
        let path = root.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(context("opening the lock file in"))?;
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let who = if holder.is_empty() {
                    "another ptyd serve".to_owned()
                } else {
                    format!("another ptyd serve (pid {holder})")
                };
                return Err(Error::FailedPrecondition(format!(
                    "{who} already serves the state directory {}: one daemon per state \
                     directory (give a second daemon its own with state_dir or XDG_STATE_HOME)",
                    root.display()
                )));
            }
            Err((_, errno)) => {
                return Err(Error::io(format!("locking {}", path.display()))(
                    io::Error::from(errno),
                ));
            }
        };
        lock.set_len(0)
            .map_err(context("writing the lock file in"))?;
        let _ = writeln!(*lock, "{}", std::process::id());
        Ok(StateDir {
            root: root.to_path_buf(),
            _lock: lock,
        })
    }

    /// The directory's path.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The id numbers issued by the daemons before this one (zero for a new directory).
    pub(crate) fn counters(&self) -> Counters {
        std::fs::read(self.root.join("counters"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Records the id numbers issued so far.
    pub(crate) fn save_counters(&self, counters: Counters) -> io::Result<()> {
        let json = serde_json::to_vec(&counters).map_err(io::Error::other)?;
        write_atomically(&self.root.join("counters"), &json)
    }

    /// The files of session `id` (not created yet).
    pub(crate) fn session(&self, id: &str) -> SessionFiles {
        SessionFiles {
            dir: self.root.join("sessions").join(id),
        }
    }

    /// Every session a previous daemon left, with its record, oldest first, and whether it is
    /// to be ended at once: one whose record cannot be read (a daemon killed while it wrote it,
    /// a damaged file) gets a stand-in record, so its helper and processes can be taken over
    /// and ended rather than left running unlisted. A directory not named as a session is
    /// removed.
    pub(crate) fn left_sessions(&self) -> Vec<(SessionFiles, SessionRecord, bool)> {
        let Ok(entries) = std::fs::read_dir(self.root.join("sessions")) else {
            return Vec::new();
        };
        let mut found: Vec<(u64, SessionFiles, SessionRecord, bool)> = Vec::new();
        for entry in entries.flatten() {
            let files = SessionFiles { dir: entry.path() };
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(n) = name.strip_prefix('t').and_then(|n| n.parse().ok()) else {
                tracing::warn!(dir = %files.dir.display(), "not a session's directory; removing it");
                files.remove();
                continue;
            };
            match files.load() {
                Ok(mut record) if record.id == name => {
                    let repaired = record.repair();
                    if !repaired.is_empty() {
                        tracing::warn!(session = %record.id, ?repaired,
                            "the session's record held values no daemon writes; repaired");
                    }
                    found.push((n, files, record, false));
                }
                outcome => {
                    let error = outcome.map_or_else(
                        |e| e.to_string(),
                        |r| format!("it names session {}", crate::validate::quoted(&r.id)),
                    );
                    tracing::warn!(session = %name, %error,
                        "the session's record is unreadable; ending the session");
                    found.push((n, files, SessionRecord::stand_in(&name), true));
                }
            }
        }
        found.sort_by_key(|(n, ..)| *n);
        found
            .into_iter()
            .map(|(_, f, r, end)| (f, r, end))
            .collect()
    }
}

/// The files of one session in the state directory.
#[derive(Debug, Clone)]
pub(crate) struct SessionFiles {
    dir: PathBuf,
}

impl SessionFiles {
    /// Creates the session's directory (0700).
    pub(crate) fn create(&self) -> io::Result<()> {
        DirBuilder::new().mode(0o700).create(&self.dir)
    }

    /// The raw output journal.
    pub(crate) fn journal(&self) -> PathBuf {
        self.dir.join("journal")
    }

    /// The session helper's socket.
    pub(crate) fn socket(&self) -> PathBuf {
        self.dir.join("helper.sock")
    }

    /// Replaces the record.
    pub(crate) fn save(&self, record: &SessionRecord) -> io::Result<()> {
        let json = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
        write_atomically(&self.dir.join("record.json"), &json)
    }

    /// Reads the record.
    pub(crate) fn load(&self) -> io::Result<SessionRecord> {
        let bytes = std::fs::read(self.dir.join("record.json"))?;
        serde_json::from_slice(&bytes).map_err(io::Error::other)
    }

    /// Removes everything of the session (it was closed).
    pub(crate) fn remove(&self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %self.dir.display(), error = %e,
                "could not remove a closed session's state");
        }
    }
}

/// A served session's place in the state directory: its files and its record as last saved.
pub(crate) struct SessionStore {
    files: SessionFiles,
    record: SessionRecord,
}

impl SessionStore {
    /// Saves `record` in `files` and keeps both.
    pub(crate) fn new(files: SessionFiles, record: SessionRecord) -> SessionStore {
        let store = SessionStore { files, record };
        store.save();
        store
    }

    /// Replaces the jobs in the record, saving it when they changed.
    pub(crate) fn set_jobs(&mut self, jobs: Vec<record::JobRecord>) {
        if jobs != self.record.jobs {
            self.record.jobs = jobs;
            self.save();
        }
    }

    /// Removes the session's state (it was closed).
    pub(crate) fn remove(&self) {
        self.files.remove();
    }

    /// The session's command records: their log, and what it holds (an adopted session's).
    pub(crate) fn command_log(
        &self,
    ) -> (
        commands::CommandLog,
        Vec<crate::session::records::CommandRecord>,
    ) {
        commands::CommandLog::open(self.files.dir.join("commands"))
    }

    fn save(&self) {
        if let Err(e) = self.files.save(&self.record) {
            tracing::warn!(session = %self.record.id, error = %e,
                "could not save the session's record; a daemon adopting it will miss the change");
        }
    }
}

/// Writes `bytes` to `path` so that a reader sees the old file or the new one, never a part.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(".new");
    let temp = PathBuf::from(temp);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)?;
    file.write_all(bytes)?;
    drop(file);
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_root_follows_the_xdg_rules() {
        let p = |s: &str| Some(PathBuf::from(s));
        for (xdg, home, want) in [
            (p("/x/state"), p("/home/u"), p("/x/state/ptyd")),
            (None, p("/home/u"), p("/home/u/.local/state/ptyd")),
            // A relative XDG_STATE_HOME is ignored, as the spec says.
            (p("rel"), p("/home/u"), p("/home/u/.local/state/ptyd")),
            (None, None, None),
        ] {
            assert_eq!(
                default_root_from(xdg.clone(), home.clone()),
                want,
                "{xdg:?} {home:?}"
            );
        }
    }

    #[test]
    fn one_daemon_holds_a_state_directory_and_its_counters_persist() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ptyd");
        let first = StateDir::open(&root).expect("the first daemon opens it");
        let mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let refused = StateDir::open(&root)
            .err()
            .expect("a second is refused")
            .to_string();
        assert!(
            refused.contains("already serves the state directory"),
            "{refused}"
        );
        assert!(
            refused.contains(&std::process::id().to_string()),
            "{refused}"
        );
        assert_eq!(first.counters(), Counters::default());
        let counters = Counters {
            sessions: 7,
            jobs: 3,
        };
        first.save_counters(counters).unwrap();
        drop(first);
        let second = StateDir::open(&root).expect("free once the first is gone");
        assert_eq!(second.counters(), counters);
    }
}
