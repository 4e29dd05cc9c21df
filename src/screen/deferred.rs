//! Full-screen redraws deferred until something reads the screen. A full-screen program (top,
//! a progress dashboard, `watch`) repaints the alternate screen row by row many times a
//! second; nobody reads the alternate screen but a Read, the web page or a checkpoint, and
//! the line count and cursor the session reports while it shows come from the main screen
//! kept aside (`MainSnapshot`). So while the output is nothing but paints (see `redraws`), it
//! is kept as bytes, and emulated, collapsed to the last paint of each row, only when the
//! screen is read (`State::sync`), other output comes, or a bound of bytes is reached: the
//! screen then reads exactly as if every byte had been emulated.

use super::redraws::{self, PaintState};
use super::state::State;

/// Deferred bytes emulated at once beyond this (a few hundred frames of a 120x40 screen).
const MAX_DEFERRED: usize = 32 << 10;

/// The deferred paints.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    /// Complete paints, in stream order.
    paints: Vec<u8>,
    /// An escape sequence the last bytes ended inside (it continues in the next chunk).
    unfinished: Vec<u8>,
    /// Where the paints stand after `paints` and `unfinished`'s start.
    state: PaintState,
}

/// What [`State::defer`] did with a chunk.
pub(super) enum Deferral {
    /// Kept: nothing goes to the sequence layer.
    Kept,
    /// Not kept: the deferred paints were emulated, and the chunk goes through the sequence
    /// layer, after the unfinished sequence kept from before, if any.
    Refused(Option<Vec<u8>>),
}

impl State {
    /// Keeps `bytes` with the deferred paints when the alternate screen shows, the fast path
    /// is on, the sequence layer is between sequences (`at_ground`) and the deferred paints
    /// with `bytes` are nothing but paints.
    pub(super) fn defer(&mut self, bytes: &[u8], at_ground: bool) -> Deferral {
        let cols = usize::from(self.size().0);
        let deferrable = at_ground && self.fast_path && !self.unusual_modes;
        if deferrable && self.alternate_screen() {
            let mut joined = std::mem::take(&mut self.deferred.unfinished);
            joined.extend_from_slice(bytes);
            if let Some((complete, state)) =
                redraws::only_paints(&joined, self.deferred.state, cols)
            {
                self.deferred.paints.extend_from_slice(&joined[..complete]);
                self.deferred.unfinished = joined[complete..].to_vec();
                self.deferred.state = state;
                if self.deferred.paints.len() >= MAX_DEFERRED {
                    self.emulate_deferred();
                }
                return Deferral::Kept;
            }
            self.deferred.unfinished = joined[..joined.len() - bytes.len()].to_vec();
        }
        self.emulate_deferred();
        self.deferred.state = PaintState::Outside;
        let unfinished = std::mem::take(&mut self.deferred.unfinished);
        Deferral::Refused((!unfinished.is_empty()).then_some(unfinished))
    }

    /// Emulates the deferred complete paints, collapsed (an unfinished sequence stays
    /// deferred: it is not on the screen yet).
    pub(super) fn emulate_deferred(&mut self) {
        if self.deferred.paints.is_empty() {
            return;
        }
        // Taken, not cleared: an idle session showing a full-screen program keeps no buffer.
        let paints = std::mem::take(&mut self.deferred.paints);
        let cols = usize::from(self.size().0);
        match redraws::collapse(&paints, cols) {
            Some(collapsed) => self.emulate(&collapsed),
            None => self.emulate(&paints),
        }
    }

    /// Bytes deferred but not given to the sequence layer, the unfinished sequence included
    /// (a checkpoint waits until there are none).
    pub(super) fn deferred_bytes(&self) -> usize {
        self.deferred.paints.len() + self.deferred.unfinished.len()
    }
}
