//! What ptyd keeps of vt100's callbacks: rows scrolling off the main screen become history
//! lines (wrapped rows joined), shell-integration marks are recorded with their position, and
//! terminal queries (cursor position, device status and attributes, colours) are answered.

use super::xterm;
use super::{MarkEvent, Position};
use crate::history::History;
use crate::marks::{Mark, MarkKey};
use vt100::capture::{BasicFormattedCaptureState, RowContents, basic_formatted_to_plain};

/// The part of the emulator's callbacks that ptyd keeps: history and marks.
pub(super) struct Recorder {
    /// Lines that scrolled off the main screen.
    pub(super) history: History,
    /// Marks seen since the last `take_marks`.
    pub(super) marks: Vec<MarkEvent>,
    /// Only OSC 133 marks carrying this key are marks; others are output's and dropped.
    pub(super) mark_key: MarkKey,
    /// Capture state carried across scrolled rows; it knows whether the last row wrapped.
    pub(super) capture: BasicFormattedCaptureState,
    /// Whether the last scrolled row wrapped.
    pub(super) last_row_wrapped: bool,
    /// Scratch buffer for one formatted row.
    pub(super) row_buf: String,
    /// Scratch buffer for one plain row.
    pub(super) plain_buf: String,
    /// True when the newest history line was force-split (or pushed whole) and must not be
    /// continued.
    pub(super) tail_sealed: bool,
    /// Answers to terminal queries (cursor position, device attributes, colours) that the
    /// session must write back: programs such as vim wait for them.
    pub(super) replies: Vec<u8>,
    /// How many bytes of `replies` answer queries that came before the newest command-end mark:
    /// the program that asked them has ended.
    pub(super) replies_before_end: usize,
    /// A resting screen is being restored: rows it scrolls are not output.
    pub(super) waking: bool,
}

impl Recorder {
    /// A recorder whose history keeps `max_lines` lines / `max_bytes` bytes.
    pub(super) fn new(max_lines: u64, max_bytes: usize) -> Recorder {
        Recorder {
            history: History::new(max_lines, max_bytes),
            marks: Vec::new(),
            mark_key: MarkKey::unverified(),
            capture: BasicFormattedCaptureState::default(),
            last_row_wrapped: false,
            row_buf: String::new(),
            plain_buf: String::new(),
            tail_sealed: false,
            replies: Vec::new(),
            replies_before_end: 0,
            waking: false,
        }
    }

    /// Whether the last row that scrolled off wrapped onto the row now at the top of the screen.
    pub(super) fn tail_wrapped(&self) -> bool {
        if self.tail_sealed || self.history.total_lines() == 0 {
            return false;
        }
        self.last_row_wrapped
    }

    fn record_row(&mut self, row: RowContents<'_>) {
        self.row_buf.clear();
        // Writing into a String cannot fail.
        let _ = row.write_formatted_basic(&mut self.row_buf, &mut self.capture);
        self.last_row_wrapped = row_wrapped(&row, &self.capture);
        let (new_line, formatted) = match self.row_buf.strip_prefix('\n') {
            Some(rest) => (true, rest),
            None => (
                self.history.total_lines() == 0 || self.tail_sealed,
                self.row_buf.as_str(),
            ),
        };
        self.plain_buf.clear();
        self.plain_buf.extend(basic_formatted_to_plain(formatted));
        xterm::show_malformed(&mut self.plain_buf);
        if new_line {
            self.history.trim_last();
            self.history.push(&self.plain_buf);
            self.tail_sealed = false;
        } else if !self.history.extend_last(&self.plain_buf) {
            self.history.push(&self.plain_buf);
        }
    }
}

/// Whether `row`, just written with `capture`, wrapped onto the next row. vt100 keeps that in
/// the capture state's private `newline_pending`, which the next row's capture begins with (as
/// a newline) when the row did not wrap: writing the row again with a copy of the state shows
/// it, and the writer stops it at the first character.
fn row_wrapped(row: &RowContents<'_>, capture: &BasicFormattedCaptureState) -> bool {
    struct FirstChar(Option<char>);
    impl std::fmt::Write for FirstChar {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            match s.chars().next() {
                Some(c) => {
                    self.0 = Some(c);
                    Err(std::fmt::Error)
                }
                None => Ok(()),
            }
        }
    }
    let mut first = FirstChar(None);
    // Stopped on purpose at the first character: the error says only that.
    let _ = row.write_formatted_basic(&mut first, &mut capture.clone());
    first.0 != Some('\n')
}

impl vt100::Callbacks for Recorder {
    fn on_scroll(&mut self, row: RowContents<'_>, alternate_screen: bool) {
        if !alternate_screen && !self.waking {
            self.record_row(row);
        }
    }

    fn unhandled_osc(&mut self, screen: &mut vt100::Screen, params: &[&[u8]]) {
        match params {
            // Foreground / background colour queries: answer light grey on black.
            [b"10", b"?"] => self
                .replies
                .extend_from_slice(b"\x1b]10;rgb:c0c0/c0c0/c0c0\x1b\\"),
            [b"11", b"?"] => self
                .replies
                .extend_from_slice(b"\x1b]11;rgb:0000/0000/0000\x1b\\"),
            _ => {
                if let Some(mark) = self.mark_key.parse_osc(params) {
                    if matches!(mark, Mark::CommandEnd(_)) {
                        self.replies_before_end = self.replies.len();
                    }
                    let at = cursor_position(screen, self);
                    let line = (matches!(mark, Mark::CommandEnd(_)) && !screen.alternate_screen())
                        .then(|| cursor_line(screen, self));
                    self.marks.push(MarkEvent { mark, at, line });
                }
            }
        }
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, c, first) {
            // Device status report: "OK".
            (None, 'n', 5) => self.replies.extend_from_slice(b"\x1b[0n"),
            // Cursor position report (1-based; after a character in the last column the cursor
            // is still on it, as xterm reports).
            (None, 'n', 6) => {
                let (row, col) = screen.cursor_position();
                let col = col.min(screen.size().1.get() - 1);
                self.replies
                    .extend(format!("\x1b[{};{}R", row + 1, col + 1).bytes());
            }
            // Primary device attributes: a VT100 with advanced video.
            (None, 'c', 0) => self.replies.extend_from_slice(b"\x1b[?1;2c"),
            // Secondary device attributes.
            (Some(b'>'), 'c', 0) => self.replies.extend_from_slice(b"\x1b[>0;10;1c"),
            _ => {}
        }
    }
}

/// The text of the cursor's logical line (wrapped rows joined, a history line the screen's first
/// row continues included), trailing blanks trimmed: the line as `State::lines` would render it
/// now. Read when a command-end mark arrives, before the prompt that follows redraws the line.
pub(super) fn cursor_line(screen: &vt100::Screen, rec: &Recorder) -> String {
    let (row, _) = screen.cursor_position();
    let (height, cols) = screen.size();
    let mut first = row;
    while first > 0 && screen.row_wrapped(first - 1) {
        first -= 1;
    }
    let mut last = row;
    while last < height.get() - 1 && screen.row_wrapped(last) {
        last += 1;
    }
    let mut text = String::new();
    if first == 0 && rec.tail_wrapped() {
        text.push_str(
            rec.history
                .line(rec.history.total_lines())
                .unwrap_or_default(),
        );
    }
    text.push_str(&screen.contents_between(first, 0, last, cols.get()));
    let len = text.trim_end_matches(' ').len();
    text.truncate(len);
    xterm::show_malformed(&mut text);
    text
}

/// The cursor's logical position given the screen and what has scrolled into history.
pub(super) fn cursor_position(screen: &vt100::Screen, rec: &Recorder) -> Position {
    let (row, col) = screen.cursor_position();
    let cols = u32::from(screen.size().1.get());
    let mut line = rec.history.total_lines();
    // Rows of the cursor's logical line above the cursor row (wrapped continuations).
    let mut rows_before = 0;
    for r in 0..=row {
        let continues = if r == 0 {
            rec.tail_wrapped()
        } else {
            screen.row_wrapped(r - 1)
        };
        if continues {
            rows_before += 1;
        } else {
            line += 1;
            rows_before = 0;
        }
    }
    Position {
        line: line.max(1),
        col: rows_before * cols + u32::from(col),
    }
}
