//! What ptyd keeps of vt100's callbacks: rows scrolling off the main screen become history
//! lines (wrapped rows joined), shell-integration marks are recorded with their position, and
//! terminal queries (cursor position, device status and attributes, colours) are answered.

use super::rows::rows_text;
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
    /// Where the newest input-start mark left the cursor, until a command starts or the input
    /// ends: the command line is what follows it.
    pub(super) input_start: Option<Position>,
    /// The command line the shell reported (`OSC 133;E`) for the command about to start.
    pub(super) command_line: Option<String>,
    /// Marks at the front of `marks` whose place in the stream is known (`MarkEvent::bytes`).
    pub(super) stamped: usize,
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
            input_start: None,
            command_line: None,
            stamped: 0,
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

impl Recorder {
    fn on_mark(&mut self, screen: &vt100::Screen, mark: Mark) {
        if matches!(mark, Mark::CommandEnd(_)) {
            self.replies_before_end = self.replies.len();
        }
        let at = cursor_position(screen, self);
        let main_screen = !screen.alternate_screen();
        let line =
            (matches!(mark, Mark::CommandEnd(_)) && main_screen).then(|| cursor_line(screen, self));
        let command = match mark {
            Mark::InputStart => {
                self.input_start = Some(at);
                self.command_line = None;
                None
            }
            Mark::CommandStart => {
                let typed = self.input_start.take().filter(|_| main_screen);
                let reported = self.command_line.take();
                reported.or_else(|| typed.map(|from| typed_text(screen, self, from, at, false)))
            }
            Mark::CommandEnd(_) | Mark::LineRejected => {
                let typed = self.input_start.take().filter(|_| main_screen);
                let reported = self.command_line.take();
                reported.or_else(|| typed.map(|from| typed_text(screen, self, from, at, true)))
            }
            Mark::PromptStart | Mark::Cwd(_) => None,
        };
        self.marks.push(MarkEvent {
            mark,
            at,
            line,
            command,
            bytes: (0, 0),
        });
    }

    /// Gives the marks reported since the last stamp their place in the stream.
    pub(super) fn stamp_marks(&mut self, bytes: (u64, u64)) {
        for event in &mut self.marks[self.stamped..] {
            event.bytes = bytes;
        }
        self.stamped = self.marks.len();
    }
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
                if let Some(line) = self.mark_key.parse_command_line(params) {
                    self.command_line = Some(line);
                } else if let Some(mark) = self.mark_key.parse_osc(params) {
                    self.on_mark(screen, mark);
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
    let height = screen.size().0;
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
    text.push_str(&rows_text(screen, first, last));
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

/// What was typed from `from` (an input-start mark) up to `to` (the cursor at the mark that
/// ended the input): the logical lines before `to`'s, the first from `from`'s column on, joined
/// by newlines, trailing blanks trimmed. `first_only`: just the first of them (a refused line's
/// error messages follow it). Lines that scrolled into history are read from there.
fn typed_text(
    screen: &vt100::Screen,
    rec: &Recorder,
    from: Position,
    to: Position,
    first_only: bool,
) -> String {
    let last = if first_only {
        from.line
    } else {
        to.line.saturating_sub(1).max(from.line)
    };
    let mut lines = Vec::new();
    for n in from.line..=last {
        let mut text = logical_line(screen, rec, n).unwrap_or_default();
        if n == from.line {
            text = skip_cells(&text, from.col as usize);
        }
        let len = text.trim_end().len();
        text.truncate(len);
        lines.push(text);
    }
    let mut text = lines.join("\n");
    xterm::show_malformed(&mut text);
    text
}

/// Logical line `n`, from history or the main screen (wrapped rows joined).
fn logical_line(screen: &vt100::Screen, rec: &Recorder, n: u64) -> Option<String> {
    let in_history = rec.history.total_lines();
    if n <= in_history && !(n == in_history && rec.tail_wrapped()) {
        return rec.history.line(n).map(str::to_owned);
    }
    let height = screen.size().0;
    let mut line = in_history;
    let mut text: Option<String> = None;
    if rec.tail_wrapped() && n == in_history {
        text = rec.history.line(n).map(str::to_owned);
    }
    for row in 0..height.get() {
        let continues = if row == 0 {
            rec.tail_wrapped()
        } else {
            screen.row_wrapped(row - 1)
        };
        if !continues {
            line += 1;
        }
        if line == n {
            text.get_or_insert_with(String::new)
                .push_str(&rows_text(screen, row, row));
        } else if line > n {
            break;
        }
    }
    text
}

/// `text` without its first `cells` columns (a wide character counts two).
fn skip_cells(text: &str, cells: usize) -> String {
    let mut seen = 0;
    for (i, c) in text.char_indices() {
        if seen >= cells {
            return text[i..].to_owned();
        }
        seen += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
    }
    String::new()
}
