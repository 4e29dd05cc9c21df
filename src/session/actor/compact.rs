//! Compacting the session's output journal: once it holds more output than the terminal model
//! needs, it is replaced by a checkpoint of the terminal and the marks that decide the shell
//! state, so that what a session keeps on disk stays bounded by its history, however long it
//! runs. Done between reads, with everything read so far in the terminal: the checkpoint is
//! exactly what the journal's output rebuilt.
//!
//! It is done on a worker thread, with the output side, as a flood's turn is (`flood.rs`): a
//! checkpoint of a full history takes 15-30 ms, writing it 20-70 ms, and freeing the replaced
//! file's pages 7-16 ms (2 cores, a 16 MiB history). On the daemon's thread that held every
//! other session's requests for up to 100 ms, several times a second while one session flooded.

use super::Actor;
use crate::screen::{MarkEvent, NoCheckpoint, Terminal};
use crate::session::capture::Capture;
use crate::state::journal_head::Restored;
use std::io;

/// The least output a journal holds before it is compacted: a small history is not rewritten
/// more often than every this many bytes.
const MIN_BOUND: u64 = 4 << 20;

/// The output a journal holds before it is compacted: twice the history's byte bound (so the
/// checkpoint, at most a history's worth, is written at most once per that much output; a
/// flood's cost stays a few per cent), at least `MIN_BOUND`. With a checkpoint of at most the
/// history, a session's journal stays under about three times its history bound.
pub(super) fn journal_bound(history_bytes: usize) -> u64 {
    (2 * history_bytes as u64).max(MIN_BOUND)
}

/// A compaction to carry out on a worker, with the output side: the marks that decide the
/// shell state, as the core keeps them now.
pub(super) struct Compaction {
    marks: Vec<MarkEvent>,
}

/// How a compaction went.
pub(super) enum Compacted {
    Done,
    /// The output stopped where no checkpoint can be taken (inside an escape sequence, a
    /// scroll region set, marks the core has not handled yet).
    NotNow,
    /// The checkpoint would not rebuild the terminal.
    Differs,
    /// The new journal could not be written; the old one goes on.
    Failed(io::Error),
}

impl Compaction {
    /// Takes the terminal's checkpoint and starts the journal anew from it. The marks are the
    /// core's of the moment the turn began, so output holding marks the core has not seen yet
    /// cannot be compacted now.
    pub(super) fn run(self, terminal: &mut Terminal, capture: &mut Capture) -> Compacted {
        if terminal.has_marks_or_replies() {
            return Compacted::NotNow;
        }
        let restored = match terminal.checkpoint() {
            Ok(checkpoint) => Restored {
                terminal: checkpoint,
                marks: self.marks,
            },
            Err(NoCheckpoint::NotNow) => return Compacted::NotNow,
            Err(NoCheckpoint::Differs) => return Compacted::Differs,
        };
        // The replaced journal is dropped here too, off the daemon's thread.
        match capture.compact(&restored) {
            Ok(()) => Compacted::Done,
            Err(e) => Compacted::Failed(e),
        }
    }
}

impl Actor {
    /// Whether the journal holds its bound of output: the next turn compacts it (one starts
    /// for that alone when no flood is on).
    pub(super) fn compaction_due(&self) -> bool {
        self.capture
            .journal_output()
            .is_some_and(|output| output >= self.compact_at)
    }

    /// The compaction for a turn about to start, when one is due.
    pub(super) fn compaction(&self) -> Option<Compaction> {
        self.compaction_due().then(|| Compaction {
            marks: self.core.kept_marks(),
        })
    }

    /// A turn compacted the journal, or tried. A moment a checkpoint cannot be taken at is
    /// tried again after a sixteenth of the bound more; a checkpoint that would not rebuild the
    /// terminal, after a whole bound.
    pub(super) fn compacted(&mut self, outcome: Compacted) {
        let bound = journal_bound(self.spec.history_bytes);
        let output = self.capture.journal_output().unwrap_or(0);
        self.compact_at = match outcome {
            Compacted::Done => bound,
            Compacted::NotNow => output + bound / 16,
            Compacted::Differs => {
                // Costly to find out: not again before another bound of output.
                tracing::warn!(session = %self.spec.id, output,
                    "the terminal's checkpoint would not rebuild it; the output journal grows on");
                output + bound
            }
            Compacted::Failed(e) => {
                tracing::warn!(session = %self.spec.id, error = %e,
                    "cannot compact the output journal; it grows on");
                output + bound / 4
            }
        };
    }
}
