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
    /// The session's jobs.
    #[serde(default)]
    pub(crate) jobs: Vec<JobRecord>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
            jobs: vec![JobRecord {
                id: "j2".into(),
                status: "running".into(),
                consumed: 12,
                start: Some((12, 0)),
                end: None,
                detail: String::new(),
                wait: Some((1_700_000_060_000, 5000)),
            }],
        };
        let json = serde_json::to_string(&record).unwrap();
        let back: SessionRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, record);
    }
}
