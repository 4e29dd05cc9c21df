//! The run of plain lines the fast path may be ahead of the emulator on: its lines, its window
//! on the screen and its colours (data only; `fast_path` drives it, `state` holds it).

use std::collections::VecDeque;

/// One complete line of a run.
#[derive(Clone, Copy)]
pub(super) struct RunLine {
    /// Bytes, CR LF included.
    pub(super) len: usize,
    /// Screen rows it takes (wrapped at the width).
    pub(super) rows: usize,
    /// It printed at least one character (its row is not blank).
    pub(super) text: bool,
    /// It has colour sequences.
    pub(super) sgr: bool,
}

/// A run of plain lines that started at column 0 on a blank bottom part of the main screen (a
/// new line, not a wrapped row's continuation), with nothing but plain lines since.
///
/// While not `lazy`, the emulator has seen every complete line and `window` lists the ones that
/// are (partly) on its screen. Once the window fills the screen above the cursor exactly, the
/// emulator's screen is blanked and the run goes `lazy`: new lines only join the window, and a
/// line leaves it straight into history once a screenful of rows follows it (by then it would
/// have scrolled off). `sync` gives the emulator the colours and the window, which rebuilds the
/// very screen emulating every byte would show.
#[derive(Default)]
pub(super) struct Run {
    pub(super) active: bool,
    pub(super) lazy: bool,
    /// The window's bytes, from `start` (plain lines are ASCII, so this is text).
    pub(super) text: String,
    pub(super) start: usize,
    pub(super) window: VecDeque<RunLine>,
    /// Rows the window's lines take.
    pub(super) rows: usize,
    /// Colour sequences that give the state at the window's first line.
    pub(super) colours: Vec<u8>,
    /// An unfinished last line, plain so far and narrower than the screen; the emulator has not
    /// seen it.
    pub(super) tail: Vec<u8>,
    /// Characters printed by `tail`.
    pub(super) tail_width: usize,
    /// Scratch list of the complete lines found in one piece of output.
    pub(super) found: Vec<Found>,
}

/// A complete plain line found by `scan_line`.
#[derive(Clone, Copy)]
pub(super) struct Found {
    pub(super) len: usize,
    pub(super) width: usize,
    pub(super) sgr: bool,
}
