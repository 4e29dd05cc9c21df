//! Resting screens: an idle session's emulator grid (32 bytes a cell: 150 KiB at 120x40) shrunk
//! to one cell, and redrawn from vt100's own rendering of its contents when output arrives or
//! something reads; what the session asks most while idle is answered from memory.

use super::state::{Resting, State};
use super::{Terminal, nonzero};
use std::num::NonZeroU16;

impl Terminal {
    /// Lets an idle terminal's screen rest (see `Resting`): frees the emulator's grid until
    /// the next output or read. Returns whether it rests. It does not while a full-screen
    /// program shows, a run of plain lines or a scroll region is in effect, or the last output
    /// ended inside an escape sequence or character, whose rest would be lost.
    pub fn rest(&mut self) -> bool {
        let state = self.state.get_mut();
        if state.resting.is_some() {
            return true;
        }
        // An idle full-screen program keeps no deferred paints (nor their buffer).
        state.emulate_deferred();
        if !self.sequences.is_idle()
            || state.run.active
            || state.main_snapshot.is_some()
            || state.unusual_modes
            || !ends_between_sequences(&self.recent, !self.recent_cut)
            || state.alternate_screen()
        {
            return false;
        }
        let (cols, rows) = state.size();
        let (total_lines, cursor) = (state.total_lines(), state.cursor());
        let bracketed_paste = state.parser.screen().bracketed_paste();
        let Some(redraw) = state.take_redraw() else {
            return false;
        };
        let resting = Resting {
            redraw: redraw.into_bytes(),
            cols,
            rows,
            total_lines,
            cursor,
            bracketed_paste,
        };
        // From the top row, shrinking scrolls nothing: vt100's count of rows scrolled off (which
        // decides where the cursor lands when the screen grows) stays as it was.
        state.parser.process(b"\x1b[H");
        state
            .parser
            .screen_mut()
            .set_size(NonZeroU16::MIN, NonZeroU16::MIN);
        state.resting = Some(resting);
        true
    }

    /// Keeps the newest `RECENT` bytes of output.
    pub(super) fn remember(&mut self, bytes: &[u8]) {
        let keep = RECENT.saturating_sub(bytes.len()).min(self.recent.len());
        let drop = self.recent.len() - keep;
        self.recent_cut |= drop > 0 || bytes.len() > RECENT;
        self.recent.drain(..drop);
        self.recent
            .extend_from_slice(&bytes[bytes.len().saturating_sub(RECENT)..]);
    }

    /// Whether the screen rests (see [`Terminal::rest`]).
    pub fn is_resting(&self) -> bool {
        self.state.borrow().resting.is_some()
    }
}

impl State {
    /// The bytes that redraw the emulator's screen as it is (vt100's own rendering of its
    /// contents, cursor and input modes, after the cursor the program saved with DECSC),
    /// leaving the screen to be redrawn from them: the saved cursor is read by restoring it.
    /// `None`, changing nothing, when vt100's rendering itself saves the cursor, which would
    /// replace the program's.
    pub(super) fn take_redraw(&mut self) -> Option<String> {
        let contents = self.parser.screen().state_formatted();
        if contents.contains("\x1b7") {
            return None;
        }
        // What the program saved with DECSC (position and colours), read by restoring it: the
        // screen is redrawn from `contents` anyway. The redraw saves it again first.
        self.parser.process(b"\x1b8");
        let screen = self.parser.screen();
        let (row, col) = screen.cursor_position();
        let mut redraw = format!("\x1b[{};{}H\x1b[{}m\x1b7", row + 1, col + 1, sgr(screen));
        redraw.push_str(&contents);
        Some(redraw)
    }

    /// Restores a resting screen: back to its size, redrawn by its own rendering.
    pub(super) fn wake(&mut self) {
        if let Some(rest) = self.resting.take() {
            let screen = self.parser.screen_mut();
            screen.set_size(nonzero(rest.rows), nonzero(rest.cols));
            // Growing pulled that many rows back from the count of rows scrolled off (the
            // cursor moved down with them): scroll them off again, as no output.
            let (pulled, _) = self.parser.screen().cursor_position();
            if pulled > 0 {
                self.parser.callbacks_mut().waking = true;
                let scroll = format!("\x1b[{};1H{}", rest.rows, "\n".repeat(pulled.into()));
                self.parser.process(scroll.as_bytes());
                self.parser.callbacks_mut().waking = false;
            }
            self.parser.process(&rest.redraw);
        }
    }
}

/// SGR parameters that set `screen`'s current colours and text modes from a reset.
fn sgr(screen: &vt100::Screen) -> String {
    fn colour(out: &mut String, c: vt100::Color, base: u8, bright: u8, extended: u8) {
        match c {
            vt100::Color::Default => {}
            vt100::Color::Idx(n) if n < 8 => out.push_str(&format!(";{}", base + n)),
            vt100::Color::Idx(n) if n < 16 => out.push_str(&format!(";{}", bright + n - 8)),
            vt100::Color::Idx(n) => out.push_str(&format!(";{extended};5;{n}")),
            vt100::Color::Rgb(r, g, b) => out.push_str(&format!(";{extended};2;{r};{g};{b}")),
        }
    }
    let mut out = String::from("0");
    for (on, code) in [
        (screen.bold(), ";1"),
        (screen.dim(), ";2"),
        (screen.italic(), ";3"),
        (screen.underline(), ";4"),
        (screen.inverse(), ";7"),
    ] {
        if on {
            out.push_str(code);
        }
    }
    colour(&mut out, screen.fgcolor(), 30, 90, 38);
    colour(&mut out, screen.bgcolor(), 40, 100, 48);
    out
}

/// How much of the newest output `ends_between_sequences` looks at.
pub(super) const RECENT: usize = 512;

/// Whether the output whose newest bytes are `recent` ends between escape sequences and UTF-8
/// characters, where the emulator's parser holds nothing of them; `whole` when `recent` is
/// all the output there was. Conservative: `false` when unsure (a sequence that may have begun
/// before `recent` and that no final byte has ended since, stray bytes inside a sequence,
/// invalid UTF-8 or C1 controls after it). Strings (OSC, DCS, ...) longer than `recent` are
/// not seen here: the control-sequence layer tracks them.
pub(super) fn ends_between_sequences(recent: &[u8], whole: bool) -> bool {
    let text = match recent.iter().rposition(|b| *b == 0x1b) {
        // A byte that ends any escape or control sequence (as its final byte) ends whatever
        // began before `recent`; the text after it must be clean.
        None if !whole => match recent.iter().position(|b| (0x40..=0x7e).contains(b)) {
            Some(end) => &recent[end..],
            None => return false,
        },
        None => recent,
        Some(esc) => match sequence_len(&recent[esc + 1..]) {
            Some(len) => &recent[esc + 1 + len..],
            None => return false,
        },
    };
    std::str::from_utf8(text).is_ok_and(|t| !t.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)))
}

/// Length of the complete escape sequence that `seq` (what follows an ESC) starts with, if it
/// is complete and made only of the bytes such a sequence may hold.
fn sequence_len(seq: &[u8]) -> Option<usize> {
    match *seq.first()? {
        // CSI: parameter and intermediate bytes, then a final byte.
        b'[' => {
            let end = seq[1..].iter().position(|b| !(0x20..=0x3f).contains(b))? + 1;
            (0x40..=0x7e).contains(&seq[end]).then_some(end + 1)
        }
        // OSC, ended by BEL (ESC \ would be the newest escape).
        b']' => {
            let end = seq.iter().position(|b| *b < 0x20)?;
            (seq[end] == 0x07).then_some(end + 1)
        }
        // DCS, SOS, PM and APC strings end only with ESC \, which would be the newest escape.
        b'P' | b'_' | b'^' | b'X' => None,
        // Intermediate bytes, then a final byte.
        _ => {
            let end = seq.iter().position(|b| !(0x20..=0x2f).contains(b))?;
            (0x30..=0x7e).contains(&seq[end]).then_some(end + 1)
        }
    }
}
