//! What a session keeps for a daemon that may adopt it, and what an adopted one takes over
//! from its predecessor: the state directory's files, the journal, and the jobs to resume.

use super::{SendInput, unix_ms};
use crate::process::pty::ExitKind;
use std::time::{Duration, SystemTime};

/// Where a session is kept for a daemon that may adopt it: its files in the state directory,
/// and how long its helper waits for a new daemon once this one is gone.
pub(crate) struct Persist {
    pub(crate) files: crate::state::SessionFiles,
    pub(crate) grace: Duration,
}

/// What the actor keeps for a successor, and what it takes over from a predecessor.
#[derive(Default)]
pub(crate) struct Kept {
    pub(super) journal: Option<crate::state::journal::Journal>,
    pub(super) store: Option<crate::state::SessionStore>,
    pub(super) replay: Option<Replay>,
}

/// What an adopted session's actor replays before it serves: the journal's content, the jobs,
/// and how the program ended when that was known at adoption.
pub(crate) struct Replay {
    /// What the journal restores before its output, once it was compacted.
    pub(super) restored: Option<crate::state::journal_head::Restored>,
    pub(super) output: Vec<u8>,
    pub(super) jobs: Vec<crate::state::record::JobRecord>,
    pub(super) exit: Option<ExitKind>,
}

/// The pure wait that resumes a job an adopted session was running when its daemon died, until
/// the deadline and with the idle time its send had (`wait`, as recorded); a record without
/// them gets the longest wait a send may have.
pub(crate) fn resumed_wait(wait: Option<(i64, u64)>) -> SendInput {
    let (timeout, idle) = match wait {
        Some((deadline_ms, idle_ms)) => (
            Duration::from_millis(
                deadline_ms
                    .saturating_sub(unix_ms(SystemTime::now()))
                    .max(1) as u64,
            ),
            Duration::from_millis(idle_ms),
        ),
        None => (Duration::from_secs(600), Duration::from_secs(5)),
    };
    SendInput {
        text: String::new(),
        submit: false,
        keys: Vec::new(),
        timeout,
        idle,
        max_result_bytes: crate::validate::DEFAULT_MAX_RESULT_BYTES,
        // An empty wait types nothing, so there is nothing to hold for a prompt.
        typeahead: false,
        web_page: None,
    }
}

/// An adopted session's journal, opened to go on, and what it holds. A journal that cannot go
/// on (a full disk) still gives what it holds: the session keeps its history and screen, and
/// only what it prints from now on is not kept for a later daemon, as when a journal cannot
/// grow while a session runs.
pub(super) fn read_journal(
    path: &std::path::Path,
    session: &str,
) -> (
    Option<crate::state::journal::Journal>,
    crate::state::journal::Content,
) {
    use crate::state::journal::Journal;
    let content = match Journal::read(path) {
        Ok(content) => content,
        Err(e) => {
            tracing::warn!(session, error = %e, "the session's journal is unreadable");
            return (None, Default::default());
        }
    };
    match Journal::resume(path, &content) {
        Ok(journal) => (Some(journal), content),
        Err(e) => {
            tracing::warn!(session, error = %e,
                "the output journal cannot grow; the session keeps what it had, and a daemon adopting it later will miss what follows");
            (None, content)
        }
    }
}
