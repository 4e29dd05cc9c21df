//! Compacting the session's output journal: once it holds more output than the terminal model
//! needs, it is replaced by a checkpoint of the terminal and the marks that decide the shell
//! state, so that what a session keeps on disk stays bounded by its history, however long it
//! runs. Done between reads, with everything read so far in the terminal: the checkpoint is
//! exactly what the journal's output rebuilt.

use super::Actor;
use crate::screen::NoCheckpoint;

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

impl Actor {
    /// Compacts the journal once it holds its bound of output. A moment a checkpoint cannot be
    /// taken at (the output stopped inside an escape sequence, a scroll region is set) is tried
    /// again after a sixteenth of the bound more; a checkpoint that would not rebuild the
    /// terminal, after a whole bound.
    pub(super) fn compact_journal_if_due(&mut self) {
        let Some(output) = self.capture.journal_output() else {
            return;
        };
        if output < self.compact_at {
            return;
        }
        let bound = journal_bound(self.spec.history_bytes);
        let restored = match self.core.checkpoint() {
            Ok(restored) => restored,
            Err(NoCheckpoint::NotNow) => {
                self.compact_at = output + bound / 16;
                return;
            }
            Err(NoCheckpoint::Differs) => {
                // Costly to find out: not again before another bound of output.
                tracing::warn!(session = %self.spec.id, output,
                    "the terminal's checkpoint would not rebuild it; the output journal grows on");
                self.compact_at = output + bound;
                return;
            }
        };
        match self.capture.compact(&restored) {
            Ok(()) => self.compact_at = bound,
            Err(e) => {
                tracing::warn!(session = %self.spec.id, error = %e,
                    "cannot compact the output journal; it grows on");
                self.compact_at = output + bound / 4;
            }
        }
    }
}
