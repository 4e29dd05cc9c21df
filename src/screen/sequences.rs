//! The control-sequence layer in front of the emulator: it reads PTY output in stream order,
//! passes what vt100 gets right through untouched, and handles the rest itself by giving vt100
//! equivalent sequences it does implement (or by doing the work around it).
//!
//! It is also where the modes that change how lines scroll (scroll regions, autowrap, insert
//! mode, a graphics character set) are tracked: each takes effect exactly where it occurs in
//! the stream, so the plain-line fast path never sees a line under a mode that was set or reset
//! later in the same read. A sequence cut by a read's end is held back until it is complete.

use super::State;
use super::scan;
use super::xterm::{self, Modes};

/// A held-back incomplete escape sequence longer than this is passed on as it is (vte drops
/// what it cannot use; nothing real is this long).
const MAX_HELD: usize = 256;

/// The most bytes of a control string's body (OSC, DCS, APC, PM, SOS) passed to the emulator;
/// the rest, up to the string's end, is dropped (docs/security.md). vte keeps a whole OSC in
/// memory until it ends, and keeps the room after, so an endless title would grow the daemon
/// without bound; nothing real (a title, a hyperlink, a clipboard copy of a page) is longer.
pub(super) const MAX_STRING: usize = 64 << 10;

/// The layer's state: what it holds back and the modes it implements.
#[derive(Default)]
pub(super) struct Sequences {
    /// The incomplete sequence or character the previous chunk ended with.
    carry: Vec<u8>,
    /// Inside an OSC, DCS, APC, PM or SOS string: bytes pass through until it ends.
    in_string: bool,
    /// The string is an OSC, which BEL ends too (the others end only with ST, CAN or SUB).
    string_ends_at_bel: bool,
    /// Bytes of the current string's body passed on so far (at most `MAX_STRING`).
    string_kept: usize,
    /// The emulator's parser may be inside a sequence this layer passed on without reading it
    /// (an ESC before a control, an incomplete sequence too long to hold), until a byte that
    /// ends every sequence arrives.
    unsure: bool,
    /// The modes and tab stops this layer implements around vt100.
    pub(super) modes: Modes,
    /// Bytes of output taken since the session started (a restored terminal goes on from its
    /// checkpoint's count): where in the stream each mark lies.
    pub(super) fed: u64,
    /// Where the current control string began in the stream.
    string_began: u64,
}

/// What follows an ESC.
enum Escape<'a> {
    /// The input ends inside it.
    Incomplete,
    /// `CSI` with its private marker (`?`, `>`, ...), parameters, intermediates and final byte.
    Csi {
        private: Option<u8>,
        params: &'a [u8],
        intermediates: &'a [u8],
        final_byte: u8,
        len: usize,
    },
    /// A string (OSC, DCS, APC, PM, SOS) starts: `len` is its introducer.
    String { len: usize },
    /// `ESC intermediates final`.
    Esc {
        intermediates: &'a [u8],
        final_byte: u8,
        len: usize,
    },
    /// Not a sequence (ESC before a control or a byte no sequence holds): the ESC alone.
    Stray,
}

/// Parses the escape sequence at the start of `seq` (which begins with ESC).
fn parse_escape(seq: &[u8]) -> Escape<'_> {
    match seq.get(1) {
        None => Escape::Incomplete,
        Some(b'[') => {
            let body = &seq[2..];
            let params_len = body
                .iter()
                .position(|b| !(0x30..=0x3f).contains(b))
                .unwrap_or(body.len());
            let inter_len = body[params_len..]
                .iter()
                .position(|b| !(0x20..=0x2f).contains(b))
                .unwrap_or(body.len() - params_len);
            let end = params_len + inter_len;
            match body.get(end) {
                None => Escape::Incomplete,
                Some(&final_byte) if (0x40..=0x7e).contains(&final_byte) => {
                    let mut params = &body[..params_len];
                    let private = match params.first() {
                        Some(&p) if (b'<'..=b'?').contains(&p) => {
                            params = &params[1..];
                            Some(p)
                        }
                        _ => None,
                    };
                    Escape::Csi {
                        private,
                        params,
                        intermediates: &body[params_len..end],
                        final_byte,
                        len: 2 + end + 1,
                    }
                }
                // A control or stray byte inside: vte's business; pass the ESC on.
                Some(_) => Escape::Stray,
            }
        }
        Some(b']' | b'P' | b'X' | b'^' | b'_') => Escape::String { len: 2 },
        Some(_) => {
            let body = &seq[1..];
            let inter_len = body
                .iter()
                .position(|b| !(0x20..=0x2f).contains(b))
                .unwrap_or(body.len());
            match body.get(inter_len) {
                None => Escape::Incomplete,
                Some(&final_byte) if (0x30..=0x7e).contains(&final_byte) => Escape::Esc {
                    intermediates: &body[..inter_len],
                    final_byte,
                    len: 1 + inter_len + 1,
                },
                Some(_) => Escape::Stray,
            }
        }
    }
}

impl Sequences {
    /// Whether nothing is held back or half-read: the emulator has seen a whole stream.
    pub(super) fn is_idle(&self) -> bool {
        self.carry.is_empty() && !self.in_string && !self.unsure
    }

    /// Inside a control string past its bound, with nothing else held back: `Some(whether BEL
    /// ends it)`. What is left of the string is dropped, so a terminal that was not inside it
    /// reads the same from here on, once told to drop it too ([`Sequences::drop_string`]); the
    /// string's kept head only ever sets a title, which ptyd does not show.
    pub(super) fn dropping_string(&self) -> Option<bool> {
        let dropping = self.in_string && self.string_kept == MAX_STRING;
        (dropping && self.carry.is_empty() && !self.unsure).then_some(self.string_ends_at_bel)
    }

    /// Drops output up to the end of a control string (BEL ends it too when `ends_at_bel`), as
    /// a terminal that was inside one past its bound does.
    pub(super) fn drop_string(&mut self, ends_at_bel: bool) {
        self.in_string = true;
        self.string_ends_at_bel = ends_at_bel;
        self.string_kept = MAX_STRING;
    }

    /// Interprets one chunk of output, driving `state`.
    pub(super) fn feed(&mut self, bytes: &[u8], state: &mut State) {
        // `input` starts this far into the stream (the carried bytes came before `bytes`).
        let base = self.fed - self.carry.len() as u64;
        self.fed += bytes.len() as u64;
        // Redraws that a later paint of the same row overwrites in these bytes are not
        // emulated (`redraws`), when no string is open: the bytes, after what an earlier chunk
        // left unfinished, then begin at ground, and hold no string (a mark's place in the
        // stream stays exact).
        let at_ground = !self.in_string && !self.unsure;
        if at_ground && state.fast_path && !state.unusual_modes {
            let cols = usize::from(state.size().0);
            let collapsed = if self.carry.is_empty() {
                super::redraws::collapse(bytes, cols)
            } else {
                let mut joined = self.carry.clone();
                joined.extend_from_slice(bytes);
                let collapsed = super::redraws::collapse(&joined, cols);
                if collapsed.is_some() {
                    self.carry.clear();
                }
                collapsed
            };
            if let Some(collapsed) = collapsed {
                self.feed_input(&collapsed, base, state);
                self.stamp_string_marks(state);
                return;
            }
        }
        self.feed_input(bytes, base, state);
        self.stamp_string_marks(state);
    }

    /// Marks in strings ended otherwise than by BEL: placed at the end of the chunk fed.
    fn stamp_string_marks(&self, state: &mut State) {
        state
            .parser
            .callbacks_mut()
            .stamp_marks((self.fed, self.fed));
    }

    fn feed_input(&mut self, bytes: &[u8], base: u64, state: &mut State) {
        let joined;
        let input: &[u8] = if self.carry.is_empty() {
            bytes
        } else {
            let mut v = std::mem::take(&mut self.carry);
            v.extend_from_slice(bytes);
            joined = v;
            &joined
        };
        let n = input.len();
        if self.unsure {
            self.unsure = still_unsure(input);
        }
        // Bytes `pending..i` are yet to be passed on as they are.
        let mut pending = 0;
        let mut i = 0;
        while i < n {
            if self.in_string {
                let bel = self.string_ends_at_bel;
                let end = input[i..]
                    .iter()
                    .position(|&b| matches!(b, 0x18 | 0x1a | 0x1b) || (bel && b == 0x07));
                let body = end.unwrap_or(n - i);
                let room = MAX_STRING - self.string_kept;
                if body > room {
                    // Past the bound: what fits goes on, the rest of the body is dropped.
                    state.process(&input[pending..i + room]);
                    pending = i + body;
                }
                self.string_kept += body.min(room);
                match end {
                    None => break,
                    Some(p) => {
                        i += p;
                        self.in_string = false;
                        if bel && input[i] == 0x07 {
                            // An OSC that BEL ends (every mark of ptyd's integration): the
                            // emulator reports it now, so its place in the stream is exact.
                            state.process(&input[pending..=i]);
                            pending = i + 1;
                            let at = (self.string_began, base + pending as u64);
                            state.parser.callbacks_mut().stamp_marks(at);
                        }
                        // An ESC ends the string and begins the next sequence.
                        if input[i] != 0x1b {
                            i += 1;
                        }
                        continue;
                    }
                }
            }
            let per_char = self.modes.per_char();
            let next = if per_char {
                input[i..].iter().position(|&b| interesting(b, per_char))
            } else {
                scan::escape_non_ascii_or(&input[i..], &HANDLED_CONTROLS)
            };
            let Some(p) = next else {
                break;
            };
            i += p;
            let b = input[i];
            if b == 0x1b {
                match parse_escape(&input[i..]) {
                    Escape::Incomplete if n - i <= MAX_HELD => {
                        state.process(&input[pending..i]);
                        self.carry.extend_from_slice(&input[i..]);
                        self.modes.apply_to(state);
                        return;
                    }
                    // Too long to hold: the input ends inside it.
                    Escape::Incomplete => {
                        i += 1;
                        self.unsure = true;
                    }
                    Escape::Stray => {
                        // Unsure while what follows leaves the emulator's parser inside a
                        // sequence (controls run inside one; an introducer ends nothing).
                        self.unsure = leaves_a_sequence_open(&input[i..]);
                        i += 1;
                    }
                    Escape::String { len } => {
                        self.in_string = true;
                        self.string_began = base + i as u64;
                        self.string_kept = 0;
                        self.string_ends_at_bel = input[i + 1] == b']';
                        i += len;
                    }
                    Escape::Csi {
                        private,
                        params,
                        intermediates,
                        final_byte,
                        len,
                    } => {
                        let seq = &input[i..i + len];
                        let csi = xterm::Csi {
                            private,
                            params,
                            intermediates,
                            final_byte,
                        };
                        if self.modes.handles_csi(&csi) {
                            state.process(&input[pending..i]);
                            self.modes.csi(&csi, seq, state);
                            self.modes.apply_to(state);
                            pending = i + len;
                        }
                        i += len;
                    }
                    Escape::Esc {
                        intermediates,
                        final_byte,
                        len,
                    } => {
                        if self.modes.handles_esc(intermediates, final_byte) {
                            state.process(&input[pending..i]);
                            self.modes
                                .esc(intermediates, final_byte, &input[i..i + len], state);
                            self.modes.apply_to(state);
                            pending = i + len;
                        }
                        i += len;
                    }
                }
                continue;
            }
            if b >= 0x80 {
                // A run of non-ASCII bytes: whole characters pass; malformed ones are shown.
                let run = input[i..]
                    .iter()
                    .position(|b| *b < 0x80)
                    .map_or(n - i, |p| p);
                let at_end = i + run == n;
                match xterm::check_utf8(&input[i..i + run], at_end) {
                    xterm::Utf8::Valid => {
                        if per_char {
                            state.process(&input[pending..i]);
                            self.modes.text(&input[i..i + run], state);
                            pending = i + run;
                        }
                        i += run;
                    }
                    xterm::Utf8::Incomplete { valid } => {
                        state.process(&input[pending..i]);
                        if per_char {
                            self.modes.text(&input[i..i + valid], state);
                        } else {
                            state.process(&input[i..i + valid]);
                        }
                        self.carry.extend_from_slice(&input[i + valid..]);
                        self.modes.apply_to(state);
                        return;
                    }
                    xterm::Utf8::Replace => {
                        state.process(&input[pending..i]);
                        let cut = if at_end {
                            xterm::cut_tail(&input[i..i + run])
                        } else {
                            0
                        };
                        let fixed = xterm::replace_malformed(&input[i..i + run - cut]);
                        if per_char {
                            self.modes.text(&fixed, state);
                        } else {
                            state.process(&fixed);
                        }
                        if cut > 0 {
                            self.carry.extend_from_slice(&input[i + run - cut..]);
                            self.modes.apply_to(state);
                            return;
                        }
                        i += run;
                        pending = i;
                    }
                }
                continue;
            }
            if (0x20..0x7f).contains(&b) {
                // Printable ASCII under a per-character mode.
                let run = scan::printable_run(&input[i..]);
                state.process(&input[pending..i]);
                self.modes.text(&input[i..i + run], state);
                i += run;
                pending = i;
                continue;
            }
            // A control this layer handles.
            if self.modes.handles_control(b) {
                state.process(&input[pending..i]);
                self.modes.control(b, state);
                self.modes.apply_to(state);
                pending = i + 1;
            }
            i += 1;
        }
        state.process(&input[pending..n]);
        self.modes.apply_to(state);
    }

    /// After the screen's size changed.
    pub(super) fn resized(&mut self) {
        self.modes.resized();
    }
}

/// Whether the emulator's parser may still be inside a sequence after `bytes`, when it may have
/// been before them, in a sequence of unknown kind. An ESC begins a sequence from any state,
/// so what follows the last one decides (`leaves_a_sequence_open`); without one, only CAN or
/// SUB is sure to end it. A final byte is not: after a lone ESC and bytes vte ignores, `[`,
/// `]`, `P`, `X`, `^` and `_` begin a sequence or a string rather than end one, and a string
/// ends at neither.
pub(super) fn still_unsure(bytes: &[u8]) -> bool {
    match memchr::memrchr(0x1b, bytes) {
        Some(esc) => leaves_a_sequence_open(&bytes[esc..]),
        None => !bytes.iter().any(|b| matches!(b, 0x18 | 0x1a)),
    }
}

/// Whether the emulator's parser is still inside an escape sequence after `bytes`: controls
/// (CR, LF, ...) run inside a sequence without ending it, so `ESC CR LF [0m` is a colour
/// change, not text, and a line end is not enough to tell that the parser is at ground. Only
/// what follows the last ESC matters; a string (OSC, DCS, ...) counts as open unless it ends.
pub(super) fn leaves_a_sequence_open(bytes: &[u8]) -> bool {
    let Some(esc) = memchr::memrchr(0x1b, bytes) else {
        return false;
    };
    let tail = &bytes[esc + 1..];
    let runs_inside = |b: &u8| matches!(b, 0x00..=0x17 | 0x19 | 0x1c..=0x1f);
    let Some(start) = tail.iter().position(|b| !runs_inside(b)) else {
        return true;
    };
    let (kind, body) = (tail[start], &tail[start + 1..]);
    let aborted = |b: &u8| matches!(b, 0x18 | 0x1a);
    match kind {
        // CAN and SUB abort a sequence.
        0x18 | 0x1a => false,
        b'[' => !body.iter().any(|b| (0x40..=0x7e).contains(b) || aborted(b)),
        // A string ends at BEL (OSC) or ST, which begins with an ESC, the last one here.
        b']' | b'P' | b'_' | b'^' | b'X' => !body.iter().any(|b| *b == 0x07 || aborted(b)),
        0x20..=0x2f => !body.iter().any(|b| (0x30..=0x7e).contains(b) || aborted(b)),
        // An ESC and its final byte; digits and the like count as open (unsure is safe).
        _ => !(0x40..=0x7e).contains(&kind),
    }
}

/// The controls the scan stops at (in ground state): backspace, tab, shift out and in.
const HANDLED_CONTROLS: [u8; 4] = [0x08, 0x09, 0x0e, 0x0f];

/// Whether the scan stops at byte `b` (in ground state).
fn interesting(b: u8, per_char: bool) -> bool {
    match b {
        0x1b | 0x80..=0xff => true,
        _ if HANDLED_CONTROLS.contains(&b) => true,
        0x20..=0x7e => per_char,
        _ => false,
    }
}
