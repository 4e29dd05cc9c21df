//! xterm's semantics where vt100 lacks them, built from what vt100 does implement: DEC special
//! graphics (`ESC ( 0`, `ESC ) 0` with SO/SI), autowrap off (`CSI ?7l`), settable tab stops
//! (`ESC H`, `CSI g`, `CSI I`, `CSI Z`), insert mode (`CSI 4h`), index and next line (`ESC D`,
//! `ESC E`), DECALN, `CSI s`/`CSI u` and `CSI ?1048`, homing on a new scroll region, the
//! alternate screens' shared cursor (`?47`, `?1047`, `?1049`), the pending wrap (a cursor
//! after the last column acts on the last column), malformed UTF-8 shown as U+FFFD, and
//! DECRQM answers. [`super::sequences`] decides what reaches here, in stream order.

use super::State;

/// A CSI sequence, parsed.
pub(super) struct Csi<'a> {
    /// `?`, `>`, `<` or `=` before the parameters.
    pub(super) private: Option<u8>,
    pub(super) params: &'a [u8],
    pub(super) intermediates: &'a [u8],
    pub(super) final_byte: u8,
}

/// A character set designated into G0 or G1.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
enum Charset {
    #[default]
    Ascii,
    /// DEC special graphics: line drawing.
    DecGraphics,
}

impl Charset {
    /// Whether printable ASCII is drawn as DEC special graphics.
    fn is_graphics(self) -> bool {
        self == Charset::DecGraphics
    }
}

/// Stand-in for U+FFFD inside vt100, which drops U+FFFD: a noncharacter (no program prints
/// it as text), one cell wide, and as long in UTF-8 as U+FFFD, into which every read turns it.
pub(super) const MALFORMED: char = '\u{FFFF}';

/// The modes this layer implements, and the cursor state DECSC saves with them.
#[derive(Debug, PartialEq)]
pub(super) struct Modes {
    /// G0 and G1.
    charsets: [Charset; 2],
    /// SO: G1 is in use (SI: G0).
    shifted: bool,
    /// IRM (`CSI 4h`).
    insert: bool,
    /// DECAWM (`CSI ?7h`, the default).
    autowrap: bool,
    /// A scroll region smaller than the screen is set.
    region: bool,
    /// DECOM (`CSI ?6h`), which vt100 implements; kept for DECRQM.
    origin: bool,
    /// Tab stops by column once a program set or cleared one; `None`: every 8 columns.
    tabs: Option<Vec<bool>>,
    /// Character sets saved by DECSC.
    saved: ([Charset; 2], bool),
}

impl Default for Modes {
    fn default() -> Modes {
        Modes {
            charsets: [Charset::Ascii; 2],
            shifted: false,
            insert: false,
            autowrap: true,
            region: false,
            origin: false,
            tabs: None,
            saved: ([Charset::Ascii; 2], false),
        }
    }
}

/// The DEC special graphics glyphs for `_` (0x5f) to `~` (0x7e).
const DEC_GRAPHICS: [char; 32] = [
    ' ', '◆', '▒', '␉', '␌', '␍', '␊', '°', '±', '␤', '␋', '┘', '┐', '┌', '└', '┼', '⎺', '⎻', '─',
    '⎼', '⎽', '├', '┤', '┴', '┬', '│', '≤', '≥', 'π', '≠', '£', '·',
];

/// What a run of non-ASCII bytes holds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Utf8 {
    /// Whole, valid characters that vt100 shows as they are.
    Valid,
    /// Valid up to `valid`, then the start of a character cut by the end of the input.
    Incomplete { valid: usize },
    /// Malformed sequences (or a U+FFFD, which vt100 drops): see [`replace_malformed`].
    Replace,
}

/// Classifies a run of bytes >= 0x80; `at_end` when nothing follows it yet.
pub(super) fn check_utf8(run: &[u8], at_end: bool) -> Utf8 {
    const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();
    match std::str::from_utf8(run) {
        Ok(_) if run.windows(3).any(|w| w == REPLACEMENT) => Utf8::Replace,
        Ok(_) => Utf8::Valid,
        Err(e) if e.error_len().is_none() && at_end => {
            let valid = e.valid_up_to();
            if run[..valid].windows(3).any(|w| w == REPLACEMENT) {
                Utf8::Replace
            } else {
                Utf8::Incomplete { valid }
            }
        }
        Err(_) => Utf8::Replace,
    }
}

/// How many bytes at the end of `run` start a character that the end of the input cut (a valid
/// prefix of a sequence that needs more bytes), or 0: they wait for the next read even when
/// malformed bytes come before them.
pub(super) fn cut_tail(run: &[u8]) -> usize {
    // A sequence is at most 4 bytes, so a cut one starts among the last 3.
    for back in 1..=run.len().min(3) {
        let tail = &run[run.len() - back..];
        if tail[0] >= 0xC0 {
            return match std::str::from_utf8(tail) {
                Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => back,
                _ => 0,
            };
        }
    }
    0
}

/// `run` with each malformed sequence (as Rust and the WHATWG count them: the longest prefix
/// of a valid sequence, or one byte) and each U+FFFD replaced by [`MALFORMED`].
pub(super) fn replace_malformed(run: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(run.len() + 3);
    let mut mark = [0; 4];
    let mark = MALFORMED.encode_utf8(&mut mark).as_bytes();
    let mut rest = run;
    loop {
        let (valid, skip) = match std::str::from_utf8(rest) {
            Ok(text) => (text, None),
            Err(e) => (
                // The prefix up to the error is valid.
                std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
                Some(e.error_len().unwrap_or(rest.len() - e.valid_up_to())),
            ),
        };
        for piece in valid.split('\u{FFFD}').enumerate() {
            if piece.0 > 0 {
                out.extend_from_slice(mark);
            }
            out.extend_from_slice(piece.1.as_bytes());
        }
        let Some(skip) = skip else {
            return out;
        };
        out.extend_from_slice(mark);
        rest = &rest[valid.len() + skip..];
    }
}

/// Turns the stand-ins for malformed input back into U+FFFD in text read from vt100.
pub(super) fn show_malformed(text: &mut String) {
    if text.contains(MALFORMED) {
        *text = text.replace(MALFORMED, "\u{FFFD}");
    }
}

/// DECRQM's answer: 1 set, 2 reset, 0 not recognised.
fn mode_value(known: Option<bool>) -> u8 {
    match known {
        Some(true) => 1,
        Some(false) => 2,
        None => 0,
    }
}

impl Modes {
    /// Whether each printable character must pass through here (translated, inserted, or kept
    /// from wrapping).
    pub(super) fn per_char(&self) -> bool {
        self.insert || !self.autowrap || self.charsets[usize::from(self.shifted)].is_graphics()
    }

    /// After the screen's size changed: vt100, like xterm, resets the scroll region.
    pub(super) fn resized(&mut self) {
        self.region = false;
    }

    /// Tells the fast path whether lines may scroll through plainly.
    pub(super) fn apply_to(&self, state: &mut State) {
        state.unusual_modes = self.region || self.per_char();
    }

    /// Whether [`Modes::csi`] handles this sequence (otherwise it reaches vt100 as it is).
    pub(super) fn handles_csi(&self, csi: &Csi<'_>) -> bool {
        match (csi.private, csi.intermediates, csi.final_byte) {
            (None, b"", b'J') => csi.params == b"2",
            (None, b"", b'r' | b'g' | b'I' | b'Z') => true,
            (None, b"", b'h' | b'l') => numbers(csi.params).any(|p| p == 4),
            (None, b"", b's' | b'u') => csi.params.is_empty(),
            // Cursor motion and edits that start from the cursor's column.
            (None, b"", b'A' | b'B' | b'C' | b'D' | b'K' | b'X' | b'P' | b'@' | b'd') => true,
            (None, b"", b'b') => true,
            (Some(b'?'), b"", b'h' | b'l') => {
                numbers(csi.params).any(|p| matches!(p, 3 | 6 | 7 | 47 | 1047 | 1048 | 1049))
            }
            (None | Some(b'?'), b"$", b'p') => true,
            _ => false,
        }
    }

    /// Handles a sequence [`Modes::handles_csi`] accepted; `seq` is its bytes.
    pub(super) fn csi(&mut self, csi: &Csi<'_>, seq: &[u8], state: &mut State) {
        let set = csi.final_byte == b'h';
        match (csi.private, csi.intermediates, csi.final_byte) {
            (None, b"", b'J') => state.erase_display(seq),
            (None, b"", b'r') => {
                let rows = state.size().1;
                let mut n = numbers(csi.params);
                let top = n.next().filter(|&t| t > 0).unwrap_or(1);
                let bottom = n.next().filter(|&b| b > 0).unwrap_or(rows).min(rows);
                self.region = top < bottom && (top > 1 || bottom < rows);
                state.raw(seq);
                // xterm homes the cursor (to the region's top in origin mode); vt100 goes to
                // the region's top either way.
                state.raw(b"\x1b[H");
            }
            (None, b"", b'h' | b'l') => {
                for p in numbers(csi.params) {
                    if p == 4 {
                        self.insert = set;
                    } else {
                        state.raw(format!("\x1b[{p}{}", char::from(csi.final_byte)).as_bytes());
                    }
                }
            }
            (None, b"", b'b') => {
                // REP: vt100 paints the character as many times as asked (up to 65 535, a
                // cell each), so 14 bytes could cost a frame of work. Bounded by the columns
                // left on the row (all of the next row's after a pending wrap): a repeat never
                // paints more than the row it is on (docs/security.md).
                let (_, col) = state.cursor_cell();
                let cols = state.size().0;
                let left = if col >= cols { cols } else { cols - col };
                let count = first_or(csi.params, 1).min(left);
                state.raw(format!("\x1b[{count}b").as_bytes());
            }
            (None, b"", b's') => self.save_cursor(state),
            (None, b"", b'u') => self.restore_cursor(state),
            (None, b"", b'g') => {
                let (_, col) = self.column(state);
                let cols = state.size().0;
                match first_or(csi.params, 0) {
                    0 => self.tab_stops(cols)[usize::from(col)] = false,
                    3 => self.tab_stops(cols).fill(false),
                    _ => {}
                }
            }
            (None, b"", b'I' | b'Z') => {
                let (_, mut col) = self.column(state);
                let cols = state.size().0;
                for _ in 0..first_or(csi.params, 1).min(cols) {
                    col = if csi.final_byte == b'I' {
                        self.next_stop(col, cols)
                    } else {
                        self.previous_stop(col)
                    };
                }
                state.raw(format!("\x1b[{}G", col + 1).as_bytes());
            }
            (Some(b'?'), b"", b'h' | b'l') => {
                for p in numbers(csi.params) {
                    self.dec_mode(p, set, state);
                }
            }
            (private, b"$", b'p') => {
                let mode = first_or(csi.params, 0);
                let (prefix, value) = if private == Some(b'?') {
                    ("?", self.dec_mode_state(mode, state))
                } else {
                    ("", self.ansi_mode_state(mode))
                };
                let reply = format!("\x1b[{prefix}{mode};{}$y", mode_value(value));
                state.reply(reply.as_bytes());
            }
            // Motion and edits: from the last column while a wrap is pending.
            _ => {
                self.column(state);
                state.raw(seq);
            }
        }
    }

    /// One DEC private mode set or reset.
    fn dec_mode(&mut self, mode: u16, set: bool, state: &mut State) {
        match mode {
            7 => self.autowrap = set,
            // DECCOLM: the width stays (as in xterm by default), but the screen is cleared,
            // the margins reset and the cursor homed, as a VT100 and tmux do: programs that
            // switch expect a blank screen.
            3 => {
                self.region = false;
                state.erase_display(b"\x1b[2J");
                state.raw(b"\x1b[r\x1b[H");
            }
            6 => {
                self.origin = set;
                state.raw(if set { b"\x1b[?6h" } else { b"\x1b[?6l" });
            }
            1048 if set => self.save_cursor(state),
            1048 => self.restore_cursor(state),
            // The alternate screens share the cursor with the main one; 1049 saves it first.
            47 | 1047 | 1049 if set => {
                if !state.alternate_screen() {
                    state.snapshot_main();
                }
                let (row, col) = state.cursor_cell();
                state.raw(if mode == 1049 {
                    b"\x1b[?1049h"
                } else {
                    b"\x1b[?47h"
                });
                state.raw(format!("\x1b[{};{}H", row + 1, col + 1).as_bytes());
            }
            1049 => state.raw(b"\x1b[?1049l"),
            47 | 1047 => {
                if !state.alternate_screen() {
                    return;
                }
                if mode == 1047 {
                    state.raw(b"\x1b[2J");
                }
                let (row, col) = state.cursor_cell();
                state.raw(b"\x1b[?47l");
                state.raw(format!("\x1b[{};{}H", row + 1, col + 1).as_bytes());
            }
            _ => state.raw(format!("\x1b[?{mode}{}", if set { 'h' } else { 'l' }).as_bytes()),
        }
    }

    /// What DECRQM reports for a DEC private mode.
    fn dec_mode_state(&self, mode: u16, state: &mut State) -> Option<bool> {
        state.end_run();
        let screen = state.parser.screen();
        let mouse = screen.mouse_protocol_mode();
        let encoding = screen.mouse_protocol_encoding();
        Some(match mode {
            1 => screen.application_cursor(),
            3 => false,
            6 => self.origin,
            7 => self.autowrap,
            25 => !screen.hide_cursor(),
            47 | 1047 | 1049 => screen.alternate_screen(),
            9 => mouse == vt100::MouseProtocolMode::Press,
            1000 => mouse == vt100::MouseProtocolMode::PressRelease,
            1002 => mouse == vt100::MouseProtocolMode::ButtonMotion,
            1003 => mouse == vt100::MouseProtocolMode::AnyMotion,
            1005 => encoding == vt100::MouseProtocolEncoding::Utf8,
            1006 => encoding == vt100::MouseProtocolEncoding::Sgr,
            2004 => screen.bracketed_paste(),
            _ => return None,
        })
    }

    /// What DECRQM reports for an ANSI mode.
    fn ansi_mode_state(&self, mode: u16) -> Option<bool> {
        match mode {
            4 => Some(self.insert),
            // Keyboard action, send/receive and new-line modes: never set here.
            2 | 12 | 20 => Some(false),
            _ => None,
        }
    }

    /// Whether [`Modes::esc`] handles `ESC intermediates final`.
    pub(super) fn handles_esc(&self, intermediates: &[u8], final_byte: u8) -> bool {
        matches!(
            (intermediates, final_byte),
            (b"", b'D' | b'E' | b'H' | b'c' | b'7' | b'8') | (b"(" | b")", _) | (b"#", b'8')
        )
    }

    /// Handles an escape sequence [`Modes::handles_esc`] accepted; `seq` is its bytes.
    pub(super) fn esc(
        &mut self,
        intermediates: &[u8],
        final_byte: u8,
        seq: &[u8],
        state: &mut State,
    ) {
        match (intermediates, final_byte) {
            // IND: down a line, scrolling at the region's bottom (vt100's LF is exactly that).
            (b"", b'D') => state.raw(b"\n"),
            // NEL: CR then IND.
            (b"", b'E') => state.raw(b"\r\n"),
            (b"", b'H') => {
                let (_, col) = self.column(state);
                let cols = state.size().0;
                self.tab_stops(cols)[usize::from(col)] = true;
            }
            (b"", b'c') => {
                *self = Modes::default();
                state.raw(seq);
            }
            (b"", b'7') => self.save_cursor(state),
            (b"", b'8') => self.restore_cursor(state),
            (b"(", set) | (b")", set) => {
                let g = usize::from(intermediates == b")");
                self.charsets[g] = if set == b'0' {
                    Charset::DecGraphics
                } else {
                    Charset::Ascii
                };
            }
            (b"#", b'8') => {
                // DECALN: margins reset, the screen filled with E, the cursor home.
                self.region = false;
                let (cols, rows) = state.size();
                state.raw(b"\x1b[r");
                let row = "E".repeat(usize::from(cols));
                for r in 1..=rows {
                    state.raw(format!("\x1b[{r};1H{row}").as_bytes());
                }
                state.raw(b"\x1b[H");
            }
            _ => state.raw(seq),
        }
    }

    /// DECSC (and its `CSI s`, `?1048h` spellings): vt100 saves position and colours; the
    /// character sets are saved here.
    fn save_cursor(&mut self, state: &mut State) {
        self.saved = (self.charsets, self.shifted);
        state.raw(b"\x1b7");
    }

    fn restore_cursor(&mut self, state: &mut State) {
        (self.charsets, self.shifted) = self.saved;
        state.raw(b"\x1b8");
    }

    /// Whether [`Modes::control`] handles this C0 control.
    pub(super) fn handles_control(&self, b: u8) -> bool {
        match b {
            0x08 | 0x0e | 0x0f => true,
            0x09 => self.tabs.is_some(),
            _ => false,
        }
    }

    pub(super) fn control(&mut self, b: u8, state: &mut State) {
        match b {
            0x0e => self.shifted = true,
            0x0f => self.shifted = false,
            0x09 => {
                let (_, col) = self.column(state);
                let next = self.next_stop(col, state.size().0);
                state.raw(format!("\x1b[{}G", next + 1).as_bytes());
            }
            _ => {
                self.column(state);
                state.raw(&[b]);
            }
        }
    }

    /// Printable text (ASCII or whole UTF-8 characters) under a per-character mode.
    pub(super) fn text(&mut self, bytes: &[u8], state: &mut State) {
        let text = String::from_utf8_lossy(bytes);
        let graphics = self.charsets[usize::from(self.shifted)].is_graphics();
        let translate = |c: char| match c {
            '_'..='~' if graphics => DEC_GRAPHICS[usize::from(c as u8 - b'_')],
            c => c,
        };
        if !self.insert && self.autowrap {
            let drawn: String = text.chars().map(translate).collect();
            state.raw(drawn.as_bytes());
            return;
        }
        let mut buf = [0; 4];
        for c in text.chars().map(translate) {
            let width = unicode_width::UnicodeWidthChar::width(c).unwrap_or(1) as u16;
            if width > 0 && self.insert {
                state.raw(format!("\x1b[{width}@").as_bytes());
            }
            if width > 0 && !self.autowrap {
                let (_, col) = state.cursor_cell();
                let cols = state.size().0;
                if col + width > cols && width <= cols {
                    // No wrap: the character lands in the last columns.
                    state.raw(format!("\x1b[{}G", cols - width + 1).as_bytes());
                }
            }
            state.raw(c.encode_utf8(&mut buf).as_bytes());
        }
    }

    /// The cursor's row and column, with a pending wrap resolved as xterm has it: vt100 keeps
    /// the cursor one past the last column after a character there, xterm on the last column
    /// with a flag that any motion clears.
    fn column(&self, state: &mut State) -> (u16, u16) {
        let (row, col) = state.cursor_cell();
        let cols = state.size().0;
        if col >= cols {
            state.raw(format!("\x1b[{cols}G").as_bytes());
            return (row, cols - 1);
        }
        (row, col)
    }

    /// The tab stops, made explicit (every 8 columns) the first time a program changes them.
    fn tab_stops(&mut self, cols: u16) -> &mut Vec<bool> {
        let stops = self
            .tabs
            .get_or_insert_with(|| (0..cols).map(|c| c > 0 && c.is_multiple_of(8)).collect());
        if stops.len() < usize::from(cols) {
            let from = stops.len() as u16;
            stops.extend((from..cols).map(|c| c.is_multiple_of(8)));
        }
        stops
    }

    fn is_stop(&self, col: u16) -> bool {
        match &self.tabs {
            Some(stops) => stops
                .get(usize::from(col))
                .copied()
                .unwrap_or(col.is_multiple_of(8)),
            None => col > 0 && col.is_multiple_of(8),
        }
    }

    /// The next tab stop right of `col`, or the last column.
    fn next_stop(&self, col: u16, cols: u16) -> u16 {
        (col + 1..cols)
            .find(|&c| self.is_stop(c))
            .unwrap_or(cols.saturating_sub(1))
    }

    /// The previous tab stop left of `col`, or the first column.
    fn previous_stop(&self, col: u16) -> u16 {
        (1..col).rev().find(|&c| self.is_stop(c)).unwrap_or(0)
    }
}

/// The numeric parameters of a CSI (`;`-separated; empty ones are 0; sub-parameters after `:`
/// are ignored).
pub(super) fn numbers(params: &[u8]) -> impl Iterator<Item = u16> + '_ {
    params.split(|b| *b == b';').map(|p| {
        p.iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0u16, |n, d| {
                n.saturating_mul(10).saturating_add(u16::from(d - b'0'))
            })
    })
}

/// The first parameter, or `default` when it is absent or 0.
pub(super) fn first_or(params: &[u8], default: u16) -> u16 {
    match numbers(params).next() {
        Some(0) | None => default,
        Some(n) => n,
    }
}
