//! The terminal model of one session: a vt100 screen (the emulator, built on vte) plus the
//! bounded line history fed by rows scrolling off it. Lines are numbered from 1 since the session
//! started; the screen's lines are the newest ones. Shell-integration marks (OSC 133/7) are
//! reported in stream order with the line and column where they occurred. Pure: bytes in, lines
//! out.

use crate::history::History;
use crate::marks::{Mark, parse_osc};
use std::num::NonZeroU16;
use vt100::capture::{BasicFormattedCaptureState, RowContents, basic_formatted_to_plain};

/// Bytes that erase the whole screen. vt100 discards the rows on it; a real terminal keeps them
/// in scrollback, so the visible lines are copied into history first.
const ERASE_DISPLAY: &[u8] = b"\x1b[2J";

/// A position in the line numbering: line number (1-based) and column within the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Position {
    /// Logical line number (wrapped rows joined).
    pub line: u64,
    /// Column within the logical line, in cells.
    pub col: u32,
}

/// A shell-integration mark and where the cursor was when it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkEvent {
    /// The mark.
    pub mark: Mark,
    /// Cursor position at the mark.
    pub at: Position,
}

/// The part of the emulator's callbacks that ptyd keeps: history and marks.
struct Recorder {
    /// Lines that scrolled off the main screen.
    history: History,
    /// Marks seen since the last `take_marks`.
    marks: Vec<MarkEvent>,
    /// Capture state carried across scrolled rows; it knows whether the last row wrapped.
    capture: BasicFormattedCaptureState,
    /// Scratch buffer for one formatted row.
    row_buf: String,
    /// Scratch buffer for one plain row.
    plain_buf: String,
    /// True when the newest history line was force-split and must not be continued.
    tail_sealed: bool,
}

impl Recorder {
    /// Whether the last row that scrolled off wrapped onto the row now at the top of the screen.
    fn tail_wrapped(&self) -> bool {
        if self.tail_sealed || self.history.total_lines() == 0 {
            return false;
        }
        // vt100 keeps the flag private; its Debug output is the only way to read it.
        !format!("{:?}", self.capture).ends_with("newline_pending: true }")
    }

    fn record_row(&mut self, row: RowContents<'_>) {
        self.row_buf.clear();
        // Writing into a String cannot fail.
        let _ = row.write_formatted_basic(&mut self.row_buf, &mut self.capture);
        let (new_line, formatted) = match self.row_buf.strip_prefix('\n') {
            Some(rest) => (true, rest),
            None => (
                self.history.total_lines() == 0 || self.tail_sealed,
                self.row_buf.as_str(),
            ),
        };
        self.plain_buf.clear();
        self.plain_buf.extend(basic_formatted_to_plain(formatted));
        if new_line {
            self.history.trim_last();
            self.history.push(&self.plain_buf);
            self.tail_sealed = false;
        } else if !self.history.extend_last(&self.plain_buf) {
            self.history.push(&self.plain_buf);
        }
    }
}

impl vt100::Callbacks for Recorder {
    fn on_scroll(&mut self, row: RowContents<'_>, alternate_screen: bool) {
        if !alternate_screen {
            self.record_row(row);
        }
    }

    fn unhandled_osc(&mut self, screen: &mut vt100::Screen, params: &[&[u8]]) {
        if let Some(mark) = parse_osc(params) {
            let at = cursor_position(screen, self);
            self.marks.push(MarkEvent { mark, at });
        }
    }
}

/// One session's terminal: feed it output, read lines and the screen.
pub struct Terminal {
    parser: vt100::Parser<Recorder>,
    /// Tail of the previous chunk that may be the start of `ERASE_DISPLAY`.
    carry: Vec<u8>,
}

impl Terminal {
    /// A terminal of `cols` x `rows` whose history keeps `max_lines` lines / `max_bytes` bytes.
    pub fn new(cols: u16, rows: u16, max_lines: u64, max_bytes: usize) -> Terminal {
        let recorder = Recorder {
            history: History::new(max_lines, max_bytes),
            marks: Vec::new(),
            capture: BasicFormattedCaptureState::default(),
            row_buf: String::new(),
            plain_buf: String::new(),
            tail_sealed: false,
        };
        Terminal {
            parser: vt100::Parser::new_with_callbacks(nonzero(rows), nonzero(cols), 0, recorder),
            carry: Vec::new(),
        }
    }

    /// Interprets a chunk of PTY output.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut input: &[u8] = bytes;
        let joined;
        if !self.carry.is_empty() {
            let mut v = std::mem::take(&mut self.carry);
            v.extend_from_slice(bytes);
            joined = v;
            input = &joined;
        }
        while let Some(at) = find(input, ERASE_DISPLAY) {
            self.parser.process(&input[..at]);
            self.keep_screen_in_history();
            self.parser.process(ERASE_DISPLAY);
            input = &input[at + ERASE_DISPLAY.len()..];
        }
        // Hold back a possible partial erase sequence at the end of the chunk.
        let keep = partial_suffix(input, ERASE_DISPLAY);
        self.parser.process(&input[..input.len() - keep]);
        self.carry.extend_from_slice(&input[input.len() - keep..]);
    }

    /// Before an erase-display: pushes the visible main-screen lines into history.
    fn keep_screen_in_history(&mut self) {
        if self.parser.screen().alternate_screen() {
            return;
        }
        let lines = self.screen_lines();
        let rec = self.parser.callbacks_mut();
        let mut lines = lines.into_iter();
        if rec.tail_wrapped()
            && let Some(first) = lines.next()
            && !rec.history.extend_last(&first)
        {
            rec.history.push(&first);
        }
        for line in lines {
            rec.history.trim_last();
            rec.history.push(&line);
        }
        rec.history.trim_last();
        // The rows pushed here are complete lines: whatever comes next starts a new one.
        rec.tail_sealed = true;
    }

    /// Shell-integration marks seen since the last call, in stream order.
    pub fn take_marks(&mut self) -> Vec<MarkEvent> {
        std::mem::take(&mut self.parser.callbacks_mut().marks)
    }

    /// The cursor's position in the line numbering.
    pub fn cursor(&self) -> Position {
        cursor_position(self.parser.screen(), self.parser.callbacks())
    }

    /// True while a full-screen program shows the alternate screen.
    pub fn alternate_screen(&self) -> bool {
        self.parser.screen().alternate_screen()
    }

    /// True when the program enabled bracketed paste.
    pub fn bracketed_paste(&self) -> bool {
        self.parser.screen().bracketed_paste()
    }

    /// Columns and rows.
    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (cols.get(), rows.get())
    }

    /// The visible screen as lines (wrapped rows kept as separate rows), trailing blank rows
    /// dropped, trailing spaces trimmed.
    pub fn visible_screen(&self) -> Vec<String> {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        let mut rows: Vec<String> = screen
            .rows(0, cols.get())
            .map(|r| r.trim_end_matches(' ').to_owned())
            .collect();
        while rows.last().is_some_and(|r| r.is_empty()) {
            rows.pop();
        }
        rows
    }

    /// Number of the oldest retained line.
    pub fn first_line(&self) -> u64 {
        self.parser.callbacks().history.first_line()
    }

    /// Number of the newest line: history plus the screen up to its last non-blank row.
    pub fn total_lines(&self) -> u64 {
        let (base, lines) = self.screen_layout();
        let continued = u64::from(self.parser.callbacks().tail_wrapped() && !lines.is_empty());
        base + lines.len() as u64 - continued
    }

    /// Lines `from..=to` (clamped to what is retained), oldest first.
    pub fn lines(&self, from: u64, to: u64) -> Vec<String> {
        let (base, screen) = self.screen_layout();
        let history = &self.parser.callbacks().history;
        let from = from.max(history.first_line()).max(1);
        let mut out = Vec::new();
        if from > to {
            return out;
        }
        let tail_wrapped = self.parser.callbacks().tail_wrapped();
        for n in from..=to.min(history.total_lines()) {
            let text = history.line(n).unwrap_or_default();
            if n == history.total_lines() && tail_wrapped {
                // The newest history line continues on the first screen row.
                let rest = screen.first().map(String::as_str).unwrap_or_default();
                out.push(format!("{text}{rest}").trim_end_matches(' ').to_owned());
            } else {
                out.push(text.trim_end_matches(' ').to_owned());
            }
        }
        let skip = usize::from(tail_wrapped);
        for (i, line) in screen.into_iter().enumerate().skip(skip) {
            let n = base + i as u64 + 1 - skip as u64;
            if n >= from && n <= to {
                out.push(line);
            }
        }
        out
    }

    /// History's line count before the screen, and the screen's logical lines (wrapped rows
    /// joined) up to the last non-blank row. When the newest history line wraps onto the screen,
    /// the first screen line is its continuation and `base` counts it already.
    fn screen_layout(&self) -> (u64, Vec<String>) {
        let history = &self.parser.callbacks().history;
        (history.total_lines(), self.screen_lines())
    }

    /// The main screen's logical lines, trailing blank lines dropped.
    fn screen_lines(&self) -> Vec<String> {
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let mut lines: Vec<String> = Vec::new();
        let mut joining = false;
        for (r, text) in screen.rows(0, cols.get()).enumerate() {
            if joining {
                lines
                    .last_mut()
                    .expect("joining implies a line")
                    .push_str(&text);
            } else {
                lines.push(text);
            }
            joining = (r as u16) < rows.get() - 1 && screen.row_wrapped(r as u16);
        }
        for line in &mut lines {
            let len = line.trim_end_matches(' ').len();
            line.truncate(len);
        }
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        lines
    }

    /// Resizes the screen.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.parser
            .screen_mut()
            .set_size(nonzero(rows), nonzero(cols));
    }

    /// Bytes of history text retained (for memory accounting).
    pub fn history_heap_bytes(&self) -> usize {
        self.parser.callbacks().history.heap_bytes()
    }
}

/// The cursor's logical position given the screen and what has scrolled into history.
fn cursor_position(screen: &vt100::Screen, rec: &Recorder) -> Position {
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

fn nonzero(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Length of the longest proper prefix of `needle` that ends `haystack`.
fn partial_suffix(haystack: &[u8], needle: &[u8]) -> usize {
    (1..needle.len())
        .rev()
        .find(|&k| haystack.ends_with(&needle[..k]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term() -> Terminal {
        Terminal::new(40, 6, 10_000, 1 << 20)
    }

    fn all_lines(t: &Terminal) -> Vec<String> {
        t.lines(1, t.total_lines())
    }

    #[test]
    fn emulation_cases() {
        let cases: &[(&[u8], &[&str])] = &[
            (
                b"Downloading 10%\rDownloading 100%\r\n",
                &["Downloading 100%"],
            ),
            (b"abc\x08\x08X\r\n", &["aXc"]),
            (b"hello\r\x1b[Kbye\r\n", &["bye"]),
            (b"abcdef\x1b[3DXY\r\n", &["abcXYf"]),
            (
                b"line1 ....\r\nline2 ....\r\n\x1b[2A\rline1 DONE\r\n\r\n",
                &["line1 DONE", "line2 ...."],
            ),
            (
                b"\x1b[31mred\x1b[0m \x1b[32mgreen\x1b[0m\r\n",
                &["red green"],
            ),
            ("日本語abc\r\n👍ok\r\n".as_bytes(), &["日本語abc", "👍ok"]),
            (
                b"before\r\n\x1b[?1049hfull screen\x1b[?1049lafter\r\n",
                &["before", "after"],
            ),
        ];
        for (input, want) in cases {
            let mut t = term();
            t.feed(input);
            assert_eq!(
                all_lines(&t),
                *want,
                "input {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn wrapped_lines_are_joined_on_screen_and_in_history() {
        let mut t = term();
        let long = "x".repeat(100);
        t.feed(format!("{long}\r\n").as_bytes());
        assert_eq!(all_lines(&t), vec![long.clone()]);
        for i in 0..10 {
            t.feed(format!("{i}\r\n").as_bytes());
        }
        let lines = all_lines(&t);
        assert_eq!(lines[0], long);
        assert_eq!(lines.len(), 11);
        assert_eq!(t.total_lines(), 11);
    }

    #[test]
    fn numbering_is_stable_while_a_wrapped_line_scrolls_off() {
        let mut t = term();
        t.feed(b"a\r\nb\r\nc\r\nd\r\n");
        t.feed("y".repeat(100).as_bytes());
        let before = all_lines(&t);
        t.feed(b"\r\n");
        for i in 0..3 {
            t.feed(format!("{i}\r\n").as_bytes());
            let now = all_lines(&t);
            assert_eq!(now[..5], before[..5], "after {i}");
        }
    }

    #[test]
    fn clear_keeps_screen_in_history() {
        let mut t = term();
        t.feed(b"old1\r\nold2\r\n\x1b[H\x1b");
        t.feed(b"[2Jnew\r\n");
        assert_eq!(all_lines(&t), vec!["old1", "old2", "new"]);
    }

    #[test]
    fn scrolling_feeds_history_with_numbers() {
        let mut t = term();
        for i in 1..=1000 {
            t.feed(format!("{i}\r\n").as_bytes());
        }
        assert_eq!(t.total_lines(), 1000);
        assert_eq!(t.lines(998, 1000), vec!["998", "999", "1000"]);
        assert_eq!(t.lines(1, 2), vec!["1", "2"]);
    }

    #[test]
    fn marks_carry_positions() {
        let mut t = term();
        t.feed(b"$ echo hi\r\n\x1b]133;C\x07hi\r\n\x1b]133;D;0\x07$ ");
        let marks = t.take_marks();
        assert_eq!(marks.len(), 2);
        assert_eq!(marks[0].mark, Mark::CommandStart);
        assert_eq!(marks[0].at, Position { line: 2, col: 0 });
        assert_eq!(marks[1].mark, Mark::CommandEnd(Some(0)));
        assert_eq!(marks[1].at, Position { line: 3, col: 0 });
    }

    #[test]
    fn alternate_screen_stays_out_of_history() {
        let mut t = term();
        t.feed(b"keep\r\n\x1b[?1049h");
        for i in 0..20 {
            t.feed(format!("pager {i}\r\n").as_bytes());
        }
        assert!(t.alternate_screen());
        assert!(t.visible_screen().iter().any(|l| l.starts_with("pager 19")));
        t.feed(b"\x1b[?1049l");
        assert_eq!(all_lines(&t), vec!["keep"]);
    }
    #[test]
    fn cursor_line_counts_a_partial_prompt() {
        let mut t = term();
        t.feed(b"$ echo \"x\r\n> ");
        assert_eq!(t.cursor(), Position { line: 2, col: 2 });
        assert_eq!(t.lines(1, 2), vec!["$ echo \"x", ">"]);
    }
}
