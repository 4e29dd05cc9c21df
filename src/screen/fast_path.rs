//! The plain-line fast path. A flood of plain lines (printable ASCII and colours, each ended by
//! CR LF) is not parsed cell by cell: once such a run has filled the screen, its lines are kept
//! as bytes (the lines a screen would show) and the ones that scroll off go straight to history;
//! the emulator is given the last screenful only when something reads the screen or other
//! output arrives (`sync`), so the result is the same as emulating every byte (differential
//! tests compare both).

use super::run::{Found, Run, RunLine};
use super::scan::printable_run;
use super::state::State;
use std::num::NonZeroU16;

/// Resets the colours, homes the cursor and erases the screen without keeping it in history:
/// how a run hands its screen over to the run's own bookkeeping.
const BLANK_SCREEN: &[u8] = b"\x1b[m\x1b[H\x1b[2J";

/// Colour sequences kept for replay beyond this many bytes are folded into one equivalent
/// sequence, so a stream that never resets its colours cannot grow them without bound.
const MAX_COLOURS: usize = 1024;

/// What `scan_line` found at the start of some bytes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LineScan {
    /// A plain line ended by CR LF: its length (CR LF included), printed width, and whether it
    /// has colour sequences.
    Complete { len: usize, width: usize, sgr: bool },
    /// Plain bytes up to the end without CR LF (possibly ending inside a colour sequence or
    /// with the CR): their printed width.
    Partial { width: usize },
    /// Something else comes first.
    NotPlain,
}

impl State {
    /// Gives output bytes to the emulator.
    pub(super) fn emulate(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() {
            #[cfg(test)]
            {
                self.emulated += bytes.len();
            }
            self.parser.process(bytes);
            self.ground =
                bytes.ends_with(b"\r\n") && !super::sequences::leaves_a_sequence_open(bytes);
        }
    }

    /// Runs bytes through the emulator, letting runs of plain lines skip it.
    pub(super) fn process(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            if !self.run.active && !self.start_run(rest) {
                // Emulate up to the next line start, where a run may begin.
                let upto = find_line_end(rest).map_or(rest.len(), |p| p + 2);
                self.emulate(&rest[..upto]);
                rest = &rest[upto..];
                continue;
            }
            rest = self.extend_run(rest);
        }
        if !self.alternate_screen() {
            self.main_snapshot = None;
        }
    }

    /// Starts a run when `bytes` begin with a whole plain line (ended by CR LF) and the cursor is
    /// at column 0 of a new line with only blank rows from it to the bottom of the main screen.
    /// Plain text without its line end does not start one: a progress bar redraws its line
    /// between erase-line sequences, and a run begun for each frame would only be ended by the
    /// next one, after a look at every row below the cursor.
    pub(super) fn start_run(&mut self, bytes: &[u8]) -> bool {
        let (_, rows) = self.size();
        if !self.fast_path || !self.ground || self.unusual_modes || self.alternate_screen() {
            return false;
        }
        if rows < 2 {
            return false;
        }
        if !matches!(scan_line(bytes), LineScan::Complete { .. }) {
            return false;
        }
        let screen = self.parser.screen();
        let (row, col) = screen.cursor_position();
        let continuation = if row == 0 {
            self.parser.callbacks().tail_wrapped()
        } else {
            screen.row_wrapped(row - 1)
        };
        if col != 0 || continuation || !self.parser.blank_from(row) {
            return false;
        }
        self.run = Run {
            active: true,
            colours: screen.attributes_formatted().into_bytes(),
            ..Run::default()
        };
        true
    }

    /// Takes the plain lines at the start of `bytes` into the run; returns what follows them.
    /// Ends the run (the emulator up to date) when something else comes.
    pub(super) fn extend_run<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let (cols, rows) = self.size();
        let (cols, screen_rows) = (usize::from(cols), usize::from(rows));
        let mut rest = bytes;
        if !self.run.tail.is_empty() {
            // Complete the unfinished line first.
            let upto = memchr::memchr(b'\n', rest).map_or(rest.len(), |p| p + 1);
            let mut line = std::mem::take(&mut self.run.tail);
            let before = line.len();
            line.extend_from_slice(&rest[..upto]);
            match scan_line(&line) {
                LineScan::Complete { len, width, sgr } if len == line.len() => {
                    // Plain lines are ASCII.
                    let text = std::str::from_utf8(&line).unwrap_or_default();
                    self.push_line(text, width, sgr, cols, screen_rows);
                    rest = &rest[upto..];
                }
                LineScan::Partial { width } if upto == rest.len() && width < cols => {
                    self.run.tail = line;
                    self.run.tail_width = width;
                    return &[];
                }
                _ => {
                    // Not plain after all: the emulator takes the unfinished line as it was.
                    line.truncate(before);
                    self.run.tail = line;
                    self.end_run();
                    return rest;
                }
            }
        }
        // The complete lines first, then what ends them.
        let mut found = std::mem::take(&mut self.run.found);
        found.clear();
        let mut upto = 0;
        let end = loop {
            match scan_line(&rest[upto..]) {
                LineScan::Complete { len, width, sgr } => {
                    found.push(Found { len, width, sgr });
                    upto += len;
                }
                other => break other,
            }
        };
        // Plain lines are ASCII: one check covers them all.
        let text = std::str::from_utf8(&rest[..upto]).unwrap_or_default();
        let mut at = 0;
        for line in &found {
            let piece = &text[at..at + line.len];
            self.push_line(piece, line.width, line.sgr, cols, screen_rows);
            at += line.len;
        }
        self.run.found = found;
        rest = &rest[upto..];
        match end {
            LineScan::Partial { width } if width < cols => {
                self.run.tail.extend_from_slice(rest);
                self.run.tail_width = width;
                &[]
            }
            _ => {
                self.end_run();
                rest
            }
        }
    }

    /// Adds one complete plain line (CR LF included) to the run.
    pub(super) fn push_line(
        &mut self,
        line: &str,
        width: usize,
        sgr: bool,
        cols: usize,
        screen_rows: usize,
    ) {
        let entry = RunLine {
            len: line.len(),
            rows: width.div_ceil(cols).max(1),
            text: width > 0,
            sgr,
        };
        if !self.run.lazy {
            self.emulate(line.as_bytes());
        }
        self.run.text.push_str(line);
        self.run.window.push_back(entry);
        self.run.rows += entry.rows;
        // Lines followed by a screenful of rows have scrolled off (or would have).
        while let Some(front) = self.run.window.front().copied() {
            if self.run.rows - front.rows < screen_rows - 1 {
                break;
            }
            self.run.window.pop_front();
            self.run.rows -= front.rows;
            let start = self.run.start;
            self.run.start += front.len;
            let line = &self.run.text[start..start + front.len - 2];
            let lazy = self.run.lazy;
            let rec = self.parser.callbacks_mut();
            if !front.sgr {
                if lazy {
                    rec.history.push(line.trim_end_matches(' '));
                }
                continue;
            }
            let mut plain = std::mem::take(&mut rec.plain_buf);
            plain.clear();
            strip_sgr(line.as_bytes(), &mut plain, &mut self.run.colours);
            if lazy {
                rec.history.push(plain.trim_end_matches(' '));
            }
            rec.plain_buf = plain;
        }
        if self.run.lazy {
            self.parser.callbacks_mut().tail_sealed = true;
        }
        if self.run.colours.len() > MAX_COLOURS {
            self.run.colours = fold_colours(&self.run.colours);
        }
        if self.run.start > 64 * 1024 && self.run.start * 2 > self.run.text.len() {
            self.run.text.drain(..self.run.start);
            self.run.start = 0;
        }
        if !self.run.lazy && self.run.rows == screen_rows - 1 {
            // The window is exactly the screen above the cursor: hand the screen over.
            let rec = self.parser.callbacks_mut();
            rec.history.trim_last();
            rec.tail_sealed = true;
            self.parser.process(BLANK_SCREEN);
            self.run.lazy = true;
        }
    }

    /// Brings the emulator up to date, keeping the run going when it can.
    pub(super) fn sync(&mut self) {
        self.emulate_deferred();
        if !self.run.active {
            return;
        }
        if self.run.lazy {
            self.parser.process(&self.run.colours);
            let window = std::mem::take(&mut self.run.text);
            self.emulate(&window.as_bytes()[self.run.start..]);
            self.run.text = window;
            self.run.lazy = false;
        }
        if !self.run.tail.is_empty() {
            // The cursor leaves column 0: the run cannot go on.
            let tail = std::mem::take(&mut self.run.tail);
            self.emulate(&tail);
            self.run = Run::default();
        }
    }

    /// Brings the emulator up to date and ends the run.
    pub(super) fn end_run(&mut self) {
        self.sync();
        self.run = Run::default();
    }
}

/// Offset of the first CR LF.
fn find_line_end(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = memchr::memchr(b'\n', &bytes[from..]) {
        let at = from + p;
        if at > 0 && bytes[at - 1] == b'\r' {
            return Some(at - 1);
        }
        from = at + 1;
    }
    None
}

/// Classifies the line at the start of `bytes`: printable ASCII with SGR colour sequences
/// (`ESC [ digits ; m`) allowed, ended by CR LF.
pub(super) fn scan_line(bytes: &[u8]) -> LineScan {
    let mut width = 0;
    let mut sgr = false;
    let mut i = 0;
    while i < bytes.len() {
        let text = printable_run(&bytes[i..]);
        width += text;
        i += text;
        let Some(&b) = bytes.get(i) else {
            break;
        };
        match b {
            b'\r' => {
                return match bytes.get(i + 1) {
                    Some(b'\n') => LineScan::Complete {
                        len: i + 2,
                        width,
                        sgr,
                    },
                    None => LineScan::Partial { width },
                    Some(_) => LineScan::NotPlain,
                };
            }
            0x1b => {
                match bytes.get(i + 1) {
                    Some(b'[') => {}
                    None => return LineScan::Partial { width },
                    Some(_) => return LineScan::NotPlain,
                }
                let params = bytes[i + 2..]
                    .iter()
                    .position(|b| !(b.is_ascii_digit() || *b == b';'));
                match params.map(|n| bytes[i + 2 + n]) {
                    Some(b'm') => {
                        sgr = true;
                        i += params.unwrap_or(0) + 3;
                    }
                    Some(_) => return LineScan::NotPlain,
                    None => return LineScan::Partial { width },
                }
            }
            _ => return LineScan::NotPlain,
        }
    }
    LineScan::Partial { width }
}

/// Appends the text of a plain line to `text` and its SGR sequences to `colours` (only those
/// since the last reset matter, so a reset clears the list).
fn strip_sgr(line: &[u8], text: &mut String, colours: &mut Vec<u8>) {
    let mut i = 0;
    while i < line.len() {
        if line[i] == 0x1b {
            let end = i + memchr::memchr(b'm', &line[i..]).unwrap_or(line.len() - i - 1);
            let seq = &line[i..=end];
            if seq == b"\x1b[m" || seq == b"\x1b[0m" {
                colours.clear();
            }
            colours.extend_from_slice(seq);
            i = end + 1;
        } else {
            let end = i + memchr::memchr(0x1b, &line[i..]).unwrap_or(line.len() - i);
            // Plain lines are ASCII, so this is valid UTF-8.
            text.push_str(std::str::from_utf8(&line[i..end]).unwrap_or_default());
            i = end;
        }
    }
}

/// One sequence that sets the colours `colours` leave behind.
fn fold_colours(colours: &[u8]) -> Vec<u8> {
    let mut scratch = vt100::Parser::new(NonZeroU16::MIN, NonZeroU16::MIN, 0);
    scratch.process(colours);
    scratch.screen().attributes_formatted().into_bytes()
}
