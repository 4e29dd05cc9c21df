//! A session's command records in the state directory: one JSON line per change (a command's
//! start, its end), appended with one write each so a daemon killed at any moment leaves every
//! whole line it wrote; read back by number, the newest line of each record winning. Rewritten
//! whole, atomically, once it holds twice the lines the records need.

use crate::session::records::{CommandRecord, MAX_RECORDS};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// The append-only file of one session's records.
pub(crate) struct CommandLog {
    path: PathBuf,
    /// Open for appending, once the first line is written.
    file: Option<File>,
    /// Lines in the file.
    lines: usize,
    /// A write failed and was logged; later failures are not.
    failed: bool,
}

impl CommandLog {
    /// The log at `path` and the records it holds, oldest first (none when it does not exist).
    /// A line that does not parse (cut by a full disk) is skipped with a warning.
    pub(crate) fn open(path: PathBuf) -> (CommandLog, Vec<CommandRecord>) {
        let mut by_number = BTreeMap::new();
        let mut lines = 0;
        match std::fs::read(&path) {
            Ok(bytes) => {
                for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                    lines += 1;
                    match serde_json::from_slice::<CommandRecord>(line) {
                        Ok(record) => {
                            by_number.insert(record.number, record);
                        }
                        Err(e) => tracing::warn!(path = %path.display(), error = %e,
                            "skipping a command record that does not parse"),
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), error = %e,
                "the session's command records are unreadable; it starts without them"),
        }
        let mut records: Vec<CommandRecord> = by_number.into_values().collect();
        let over = records.len().saturating_sub(MAX_RECORDS);
        records.drain(..over);
        let log = CommandLog {
            path,
            file: None,
            lines,
            failed: false,
        };
        (log, records)
    }

    /// Appends `record` as it is now; rewrites the file from `all` once it is twice as long as
    /// the records need.
    pub(crate) fn save<'a>(
        &mut self,
        record: &CommandRecord,
        all: impl FnOnce() -> Vec<&'a CommandRecord>,
    ) {
        let outcome = if self.lines >= 2 * MAX_RECORDS {
            self.rewrite(all())
        } else {
            self.append(record)
        };
        match outcome {
            Ok(()) => self.failed = false,
            Err(e) if !self.failed => {
                self.failed = true;
                tracing::warn!(path = %self.path.display(), error = %e,
                    "could not save a command record; a daemon adopting the session will miss it");
            }
            Err(_) => {}
        }
    }

    fn append(&mut self, record: &CommandRecord) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        if self.file.is_none() {
            self.file = Some(open_append(&self.path)?);
        }
        let file = self.file.as_mut().expect("opened above");
        // One write: a line is in the file whole or (cut by a full disk) skipped on reading.
        file.write_all(&line)?;
        self.lines += 1;
        Ok(())
    }

    fn rewrite(&mut self, all: Vec<&CommandRecord>) -> io::Result<()> {
        let mut bytes = Vec::new();
        for record in &all {
            serde_json::to_writer(&mut bytes, record).map_err(io::Error::other)?;
            bytes.push(b'\n');
        }
        super::write_atomically(&self.path, &bytes)?;
        self.file = None;
        self.lines = all.len();
        Ok(())
    }
}

fn open_append(path: &std::path::Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::records::TypedBy;

    fn record(number: u64, exit: Option<i32>) -> CommandRecord {
        CommandRecord {
            number,
            command: format!("echo {number}"),
            cwd: "/tmp".into(),
            started_unix_ms: 1,
            ended_unix_ms: exit.map(|_| 2),
            exit_code: exit,
            refused: false,
            start: (number, 0),
            end: exit.map(|_| (number + 1, 0)),
            end_line: None,
            first_line: None,
            last_line: None,
            start_byte: 0,
            output_bytes: 0,
            typed_by: TypedBy::Agent,
        }
    }

    #[test]
    fn records_read_back_with_their_newest_change_and_a_cut_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("commands");
        let (mut log, none) = CommandLog::open(path.clone());
        assert!(none.is_empty());
        let (running, ended, other) = (record(1, None), record(1, Some(3)), record(2, None));
        log.save(&running, Vec::new);
        log.save(&ended, Vec::new);
        log.save(&other, Vec::new);
        // A daemon killed (or a disk filled) in the middle of a line.
        let mut file = open_append(&path).unwrap();
        file.write_all(b"{\"number\":3,\"comm").unwrap();
        let (_, back) = CommandLog::open(path);
        assert_eq!(back, vec![ended, other]);
    }

    #[test]
    fn a_long_log_is_rewritten_with_the_records_it_needs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("commands");
        let (mut log, _) = CommandLog::open(path.clone());
        log.lines = 2 * MAX_RECORDS;
        let kept = [record(7, Some(0)), record(8, None)];
        log.save(&kept[1], || kept.iter().collect());
        assert_eq!(log.lines, 2);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        log.save(&record(8, Some(1)), Vec::new);
        let (_, back) = CommandLog::open(path);
        assert_eq!(back, vec![kept[0].clone(), record(8, Some(1))]);
    }
}
