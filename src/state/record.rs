//! A session's record in the state directory: everything a new daemon needs to serve the
//! session again besides its output (which the journal holds) and its terminal (which the helper
//! hands over). Written when the session opens and whenever one of its jobs changes.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a new daemon needs to know of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SessionRecord {
    /// `t<n>`.
    pub(crate) id: String,
    /// The agent that owns it.
    pub(crate) owner: String,
    /// Display name.
    pub(crate) name: String,
    /// Terminal type name.
    pub(crate) type_name: String,
    /// Size.
    pub(crate) cols: u16,
    /// Size.
    pub(crate) rows: u16,
    /// Milliseconds since the epoch when it opened.
    pub(crate) created_unix_ms: i64,
    /// The working directory it started in.
    pub(crate) cwd: PathBuf,
    /// The shell integration's name (`Integration::name`).
    pub(crate) integration: String,
    /// The secret the integration's marks carry (the shell keeps printing it).
    pub(crate) mark_key: Option<String>,
    /// History bounds.
    pub(crate) history_lines: u64,
    /// History bounds.
    pub(crate) history_bytes: usize,
    /// Close's grace between the polite signal and the next.
    pub(crate) close_grace_ms: u64,
    /// The program's pid.
    pub(crate) pid: u32,
    /// The tag in the environment of the session's processes (`process::tag`), by which Close
    /// finds them once the helper is gone. Absent in the records of older daemons.
    #[serde(default)]
    pub(crate) process_tag: Option<String>,
    /// The session's jobs.
    #[serde(default)]
    pub(crate) jobs: Vec<JobRecord>,
    /// The sandbox its processes hold (they keep it whatever the daemon does).
    #[serde(default)]
    pub(crate) sandbox: Option<crate::sandbox::Sandbox>,
}

/// A job of the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobRecord {
    /// `j<n>`.
    pub(crate) id: String,
    /// `JobStatus::name`.
    pub(crate) status: String,
    /// Lines before this one were returned by JobOutput.
    pub(crate) consumed: u64,
    /// Where its output starts (line, column), once its command started.
    pub(crate) start: Option<(u64, u32)>,
    /// Where its output ends, once it finished.
    pub(crate) end: Option<(u64, u32)>,
    /// Why it failed.
    #[serde(default)]
    pub(crate) detail: String,
    /// While it runs: when its send gives up (milliseconds since the epoch) and the silence
    /// that counts as idle, so an adopting daemon waits for it as the caller asked.
    #[serde(default)]
    pub(crate) wait: Option<(i64, u64)>,
}

/// The sizes a record may hold: those `Open` accepts.
use crate::validate::{COLS, ROWS};

impl SessionRecord {
    /// Makes a record that parsed but holds what no daemon writes usable: a size `Open` would
    /// refuse (a zero one drew every character on a row of its own) becomes 80x24, and empty
    /// history bounds the defaults. Returns what it changed, for the log.
    pub(crate) fn repair(&mut self) -> Vec<&'static str> {
        let mut repaired = Vec::new();
        if !COLS.contains(&self.cols) || !ROWS.contains(&self.rows) {
            (self.cols, self.rows) = (80, 24);
            repaired.push("size");
        }
        if self.history_lines == 0 || self.history_bytes == 0 {
            self.history_lines = crate::config::DEFAULT_HISTORY_LINES;
            self.history_bytes = crate::config::DEFAULT_HISTORY_BYTES;
            repaired.push("history bounds");
        }
        repaired
    }

    /// What stands for the record of session `id` when its own cannot be read: enough to take
    /// the session over from its helper and end it at once (no agent owns it, so none can
    /// reach it; leaving it running would keep processes nobody sees).
    pub(crate) fn stand_in(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.to_string(),
            owner: String::new(),
            name: id.to_string(),
            type_name: String::new(),
            cols: 80,
            rows: 24,
            created_unix_ms: 0,
            cwd: PathBuf::from("/"),
            integration: String::new(),
            mark_key: None,
            history_lines: 1000,
            history_bytes: 1 << 20,
            close_grace_ms: 500,
            pid: 0,
            process_tag: None,
            jobs: Vec::new(),
            sandbox: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_no_daemon_writes_is_repaired_not_used_as_it_is() {
        // (cols, rows, history lines, what is repaired)
        let cases: [(u16, u16, u64, &[&str]); 6] = [
            (120, 40, 1000, &[]),
            // The largest size Open accepts is kept as it is.
            (1000, 1000, 1000, &[]),
            (0, 0, 1000, &["size"]),
            (120, 0, 1000, &["size"]),
            (5000, 40, 1000, &["size"]),
            (120, 40, 0, &["history bounds"]),
        ];
        for (cols, rows, lines, want) in cases {
            let mut record = SessionRecord {
                cols,
                rows,
                history_lines: lines,
                ..SessionRecord::stand_in("t1")
            };
            assert_eq!(record.repair(), want, "{cols}x{rows} {lines}");
            assert!(COLS.contains(&record.cols) && ROWS.contains(&record.rows));
            assert!(record.history_lines > 0);
        }
    }

    #[test]
    fn a_record_round_trips_through_json() {
        let record = SessionRecord {
            id: "t3".into(),
            owner: "agent-a".into(),
            name: "build".into(),
            type_name: "shell".into(),
            cols: 100,
            rows: 30,
            created_unix_ms: 1_700_000_000_000,
            cwd: "/tmp".into(),
            integration: "bash".into(),
            mark_key: Some("00ff".into()),
            history_lines: 1000,
            history_bytes: 1 << 20,
            close_grace_ms: 500,
            pid: 4242,
            process_tag: Some("9f3c".into()),
            jobs: vec![JobRecord {
                id: "j2".into(),
                status: "running".into(),
                consumed: 12,
                start: Some((12, 0)),
                end: None,
                detail: String::new(),
                wait: Some((1_700_000_060_000, 5000)),
            }],
            sandbox: Some(crate::sandbox::Sandbox {
                write: Some(vec!["/tmp".into()]),
                read: None,
                network: crate::sandbox::Network::Loopback,
                memory_max: Some(1 << 30),
                pids_max: Some(64),
                cpu_max: None,
            }),
        };
        let json = serde_json::to_string(&record).unwrap();
        let back: SessionRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, record);
        // An older daemon's record has neither jobs nor a process tag.
        let mut older: serde_json::Value = serde_json::from_str(&json).unwrap();
        let fields = older.as_object_mut().unwrap();
        fields.remove("jobs");
        fields.remove("process_tag");
        let back: SessionRecord = serde_json::from_value(older).unwrap();
        assert_eq!((back.jobs.len(), back.process_tag), (0, None));
    }
}
