//! The terminal model of one session: a vt100 screen (the emulator, built on vte) plus the
//! bounded line history fed by rows scrolling off it. Lines are numbered from 1 since the session
//! started; the screen's lines are the newest ones. Shell-integration marks (OSC 133/7) are
//! reported in stream order with the line and column where they occurred. Pure: bytes in, lines
//! out.
//!
//! Speed: a flood of plain lines (printable ASCII and colours, each ended by CR LF) is not parsed
//! cell by cell. Once such a run has filled the screen, its lines are kept as bytes (the lines a
//! screen would show) and the ones that scroll off go straight to history; the emulator is given
//! the last screenful only when something reads the screen or other output arrives (`sync`), so
//! the result is the same as emulating every byte (a differential test compares both).

use crate::history::History;
use crate::marks::{Mark, MarkKey};
use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::num::NonZeroU16;
use vt100::capture::{BasicFormattedCaptureState, RowContents, basic_formatted_to_plain};

/// Bytes that erase the whole screen. vt100 discards the rows on it; a real terminal keeps them
/// in scrollback, so the visible lines are copied into history first.
const ERASE_DISPLAY: &[u8] = b"\x1b[2J";

/// Resets the colours, homes the cursor and erases the screen without keeping it in history:
/// how a run hands its screen over to the run's own bookkeeping.
const BLANK_SCREEN: &[u8] = b"\x1b[m\x1b[H\x1b[2J";

/// Colour sequences kept for replay beyond this many bytes are folded into one equivalent
/// sequence, so a stream that never resets its colours cannot grow them without bound.
const MAX_COLOURS: usize = 1024;

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
    /// Only OSC 133 marks carrying this key are marks; others are output's and dropped.
    mark_key: MarkKey,
    /// Capture state carried across scrolled rows; it knows whether the last row wrapped.
    capture: BasicFormattedCaptureState,
    /// Whether the last scrolled row wrapped, read from `capture` once per scrolled row at most.
    last_row_wrapped: Cell<Option<bool>>,
    /// Scratch buffer for one formatted row.
    row_buf: String,
    /// Scratch buffer for one plain row.
    plain_buf: String,
    /// True when the newest history line was force-split (or pushed whole) and must not be
    /// continued.
    tail_sealed: bool,
    /// Answers to terminal queries (cursor position, device attributes, colours) that the
    /// session must write back: programs such as vim wait for them.
    replies: Vec<u8>,
    /// A resting screen is being restored: rows it scrolls are not output.
    waking: bool,
}

impl Recorder {
    /// Whether the last row that scrolled off wrapped onto the row now at the top of the screen.
    fn tail_wrapped(&self) -> bool {
        if self.tail_sealed || self.history.total_lines() == 0 {
            return false;
        }
        match self.last_row_wrapped.get() {
            Some(wrapped) => wrapped,
            None => {
                // vt100 keeps the flag private; its Debug output is the only way to read it.
                let wrapped = !format!("{:?}", self.capture).ends_with("newline_pending: true }");
                self.last_row_wrapped.set(Some(wrapped));
                wrapped
            }
        }
    }

    fn record_row(&mut self, row: RowContents<'_>) {
        self.row_buf.clear();
        // Writing into a String cannot fail.
        let _ = row.write_formatted_basic(&mut self.row_buf, &mut self.capture);
        self.last_row_wrapped.set(None);
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
                    let at = cursor_position(screen, self);
                    self.marks.push(MarkEvent { mark, at });
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
            // Cursor position report (1-based).
            (None, 'n', 6) => {
                let (row, col) = screen.cursor_position();
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

/// The main screen as it was when a full-screen program switched to the alternate screen; it
/// does not change until the program switches back, and history readers keep seeing it.
struct MainSnapshot {
    lines: Vec<String>,
    cursor: Position,
}

/// A control sequence `feed` handles around the emulator.
#[derive(Clone, Copy)]
enum Special {
    /// Erase display: keep the visible lines in history first.
    EraseDisplay,
    /// Switch to the alternate screen: remember the main screen first.
    AlternateScreen,
}

const SPECIALS: [(&[u8], Special); 4] = [
    (ERASE_DISPLAY, Special::EraseDisplay),
    (b"\x1b[?1049h", Special::AlternateScreen),
    (b"\x1b[?1047h", Special::AlternateScreen),
    (b"\x1b[?47h", Special::AlternateScreen),
];

/// One complete line of a run.
#[derive(Clone, Copy)]
struct RunLine {
    /// Bytes, CR LF included.
    len: usize,
    /// Screen rows it takes (wrapped at the width).
    rows: usize,
    /// It printed at least one character (its row is not blank).
    text: bool,
    /// It has colour sequences.
    sgr: bool,
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
struct Run {
    active: bool,
    lazy: bool,
    /// The window's bytes, from `start` (plain lines are ASCII, so this is text).
    text: String,
    start: usize,
    window: VecDeque<RunLine>,
    /// Rows the window's lines take.
    rows: usize,
    /// Colour sequences that give the state at the window's first line.
    colours: Vec<u8>,
    /// An unfinished last line, plain so far and narrower than the screen; the emulator has not
    /// seen it.
    tail: Vec<u8>,
    /// Characters printed by `tail`.
    tail_width: usize,
    /// Scratch list of the complete lines found in one piece of output.
    found: Vec<Found>,
}

/// A complete plain line found by `scan_line`.
#[derive(Clone, Copy)]
struct Found {
    len: usize,
    width: usize,
    sgr: bool,
}

/// What `scan_line` found at the start of some bytes.
#[derive(Debug, PartialEq, Eq)]
enum LineScan {
    /// A plain line ended by CR LF: its length (CR LF included), printed width, and whether it
    /// has colour sequences.
    Complete { len: usize, width: usize, sgr: bool },
    /// Plain bytes up to the end without CR LF (possibly ending inside a colour sequence or
    /// with the CR): their printed width.
    Partial { width: usize },
    /// Something else comes first.
    NotPlain,
}

/// One session's terminal: feed it output, read lines and the screen.
pub struct Terminal {
    /// The emulator and the run it may be behind on. In a cell so that reads (`&self`) can bring
    /// the emulator up to date first.
    state: RefCell<State>,
    /// Tail of the previous chunk that may be the start of a special sequence.
    carry: Vec<u8>,
    /// The newest output (at most `RECENT` bytes): whether the parser is between sequences.
    recent: Vec<u8>,
    /// Older output was dropped from `recent`.
    recent_cut: bool,
}

struct State {
    parser: vt100::Parser<Recorder>,
    run: Run,
    /// The hidden main screen while the alternate screen shows.
    main_snapshot: Option<MainSnapshot>,
    /// A scroll region or disabled autowrap is in effect: lines do not simply scroll through.
    unusual_modes: bool,
    /// Whether runs of plain lines may bypass the emulator (always, except in tests that
    /// compare both paths).
    fast_path: bool,
    /// The emulator's parser is between sequences: the last bytes it took ended a line (or were
    /// a complete special sequence). A run starts only then, so its first bytes cannot be the
    /// end of an escape sequence.
    ground: bool,
    /// While the terminal rests: the bytes that redraw its screen, with the size to restore.
    resting: Option<Resting>,
}

/// A resting terminal's screen. The emulator's grid (32 bytes a cell: 150 KiB at 120x40) is
/// shrunk to one cell while a session is idle, and redrawn from these bytes (vt100's own
/// rendering of its contents, cursor and input modes) when output arrives or something reads.
/// What the session asks most while idle is kept too, so asking does not wake the screen.
struct Resting {
    redraw: Vec<u8>,
    cols: u16,
    rows: u16,
    total_lines: u64,
    cursor: Position,
    bracketed_paste: bool,
}

impl Terminal {
    /// A terminal of `cols` x `rows` whose history keeps `max_lines` lines / `max_bytes` bytes.
    pub fn new(cols: u16, rows: u16, max_lines: u64, max_bytes: usize) -> Terminal {
        let recorder = Recorder {
            history: History::new(max_lines, max_bytes),
            marks: Vec::new(),
            mark_key: MarkKey::unverified(),
            capture: BasicFormattedCaptureState::default(),
            last_row_wrapped: Cell::new(None),
            row_buf: String::new(),
            plain_buf: String::new(),
            tail_sealed: false,
            replies: Vec::new(),
            waking: false,
        };
        Terminal {
            state: RefCell::new(State {
                parser: vt100::Parser::new_with_callbacks(
                    nonzero(rows),
                    nonzero(cols),
                    0,
                    recorder,
                ),
                run: Run::default(),
                main_snapshot: None,
                unusual_modes: false,
                fast_path: true,
                ground: true,
                resting: None,
            }),
            carry: Vec::new(),
            recent: Vec::new(),
            recent_cut: false,
        }
    }

    /// The state with the emulator up to date.
    fn synced(&self) -> RefMut<'_, State> {
        let mut state = self.awake();
        state.sync();
        state
    }

    /// The state with its screen in place (woken from rest).
    fn awake(&self) -> RefMut<'_, State> {
        let mut state = self.state.borrow_mut();
        state.wake();
        state
    }

    /// Lets an idle terminal's screen rest (see [`Resting`]): frees the emulator's grid until
    /// the next output or read. Returns whether it rests. It does not while a full-screen
    /// program shows, a run of plain lines or a scroll region is in effect, or the last output
    /// ended inside an escape sequence or character, whose rest would be lost.
    pub fn rest(&mut self) -> bool {
        let state = self.state.get_mut();
        if state.resting.is_some() {
            return true;
        }
        if !self.carry.is_empty()
            || state.run.active
            || state.main_snapshot.is_some()
            || state.unusual_modes
            || !ends_between_sequences(&self.recent, !self.recent_cut)
            || state.alternate_screen()
        {
            return false;
        }
        let (cols, rows) = state.size();
        let screen = state.parser.screen();
        let contents = screen.state_formatted();
        if contents.contains("\x1b7") {
            return false; // its own cursor save would replace the program's
        }
        let (total_lines, cursor) = (state.total_lines(), state.cursor());
        let bracketed_paste = screen.bracketed_paste();
        // What the program saved with DECSC (position and colours), read by restoring it: the
        // screen is redrawn from `contents` anyway. The redraw saves it again first.
        state.parser.process(b"\x1b8");
        let screen = state.parser.screen();
        let (row, col) = screen.cursor_position();
        let mut redraw = format!("\x1b[{};{}H\x1b[{}m\x1b7", row + 1, col + 1, sgr(screen));
        redraw.push_str(&contents);
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
    fn remember(&mut self, bytes: &[u8]) {
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

    /// Interprets a chunk of PTY output.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.remember(bytes);
        let joined;
        let mut input: &[u8] = bytes;
        if !self.carry.is_empty() {
            let mut v = std::mem::take(&mut self.carry);
            v.extend_from_slice(bytes);
            joined = v;
            input = &joined;
        }
        let state = self.state.get_mut();
        state.wake();
        while let Some((at, pattern, special)) = find_special(input) {
            state.process(&input[..at]);
            state.end_run();
            match special {
                Special::EraseDisplay => state.keep_screen_in_history(),
                Special::AlternateScreen if !state.alternate_screen() => {
                    state.main_snapshot = Some(MainSnapshot {
                        lines: state.screen_lines(),
                        cursor: state.cursor(),
                    });
                }
                Special::AlternateScreen => {}
            }
            state.parser.process(pattern);
            state.ground = true;
            input = &input[at + pattern.len()..];
        }
        // Hold back a possible partial special sequence at the end of the chunk.
        let keep = SPECIALS
            .iter()
            .map(|(p, _)| partial_suffix(input, p))
            .max()
            .unwrap_or(0);
        state.process(&input[..input.len() - keep]);
        self.carry.extend_from_slice(&input[input.len() - keep..]);
    }

    /// Answers to terminal queries seen since the last call, to be written to the program.
    pub fn take_replies(&mut self) -> Vec<u8> {
        // Runs hold no queries: every one so far went through the emulator.
        std::mem::take(&mut self.state.get_mut().parser.callbacks_mut().replies)
    }

    /// From now on, only OSC 133 marks carrying `key` are reported (a new terminal reports every
    /// mark).
    pub fn set_mark_key(&mut self, key: MarkKey) {
        self.state.get_mut().parser.callbacks_mut().mark_key = key;
    }

    /// Shell-integration marks seen since the last call, in stream order.
    pub fn take_marks(&mut self) -> Vec<MarkEvent> {
        // Runs hold no marks: every mark the stream had so far went through the emulator.
        std::mem::take(&mut self.state.get_mut().parser.callbacks_mut().marks)
    }

    /// The cursor's position in the line numbering (on the main screen: while a full-screen
    /// program runs, where the cursor was when it started).
    pub fn cursor(&self) -> Position {
        if let Some(rest) = &self.state.borrow().resting {
            return rest.cursor;
        }
        self.synced().cursor()
    }

    /// True while a full-screen program shows the alternate screen.
    pub fn alternate_screen(&self) -> bool {
        let state = self.state.borrow();
        state.resting.is_none() && state.alternate_screen()
    }

    /// True when the program enabled bracketed paste.
    pub fn bracketed_paste(&self) -> bool {
        let state = self.state.borrow();
        match &state.resting {
            Some(rest) => rest.bracketed_paste,
            None => state.parser.screen().bracketed_paste(),
        }
    }

    /// Columns and rows.
    pub fn size(&self) -> (u16, u16) {
        let state = self.state.borrow();
        match &state.resting {
            Some(rest) => (rest.cols, rest.rows),
            None => state.size(),
        }
    }

    /// The visible screen as lines (wrapped rows kept as separate rows), trailing blank rows
    /// dropped, trailing spaces trimmed.
    pub fn visible_screen(&self) -> Vec<String> {
        let state = self.synced();
        let screen = state.parser.screen();
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
        self.synced().parser.callbacks().history.first_line()
    }

    /// Number of the newest line: history plus the main screen up to its last non-blank row.
    /// Cheap: counts rows without building strings, and a run need not be given to the emulator.
    pub fn total_lines(&self) -> u64 {
        let state = self.state.borrow();
        match &state.resting {
            Some(rest) => rest.total_lines,
            None => state.total_lines(),
        }
    }

    /// Lines `from..=to` (clamped to what is retained), oldest first.
    pub fn lines(&self, from: u64, to: u64) -> Vec<String> {
        self.synced().lines(from, to)
    }

    /// Resizes the screen.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let state = self.state.get_mut();
        state.wake();
        state.end_run();
        state
            .parser
            .screen_mut()
            .set_size(nonzero(rows), nonzero(cols));
    }

    /// Bytes of history text retained (for memory accounting).
    pub fn history_heap_bytes(&self) -> usize {
        self.state.borrow().parser.callbacks().history.heap_bytes()
    }
}

impl State {
    /// Restores a resting screen: back to its size, redrawn by its own rendering.
    fn wake(&mut self) {
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

    fn alternate_screen(&self) -> bool {
        self.parser.screen().alternate_screen()
    }

    fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (cols.get(), rows.get())
    }

    fn cursor(&self) -> Position {
        match &self.main_snapshot {
            Some(snapshot) => snapshot.cursor,
            None => cursor_position(self.parser.screen(), self.parser.callbacks()),
        }
    }

    /// Gives output bytes to the emulator.
    fn emulate(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.parser.process(bytes);
            self.ground = bytes.ends_with(b"\r\n");
        }
    }

    /// Runs bytes through the emulator, letting runs of plain lines skip it.
    fn process(&mut self, bytes: &[u8]) {
        self.scan_modes(bytes);
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

    /// Starts a run when `bytes` begin with plain text and the cursor is at column 0 of a new
    /// line with only blank rows from it to the bottom of the main screen.
    fn start_run(&mut self, bytes: &[u8]) -> bool {
        let (cols, rows) = self.size();
        if !self.fast_path || !self.ground || self.unusual_modes || self.alternate_screen() {
            return false;
        }
        if rows < 2 {
            return false;
        }
        match scan_line(bytes) {
            LineScan::Complete { .. } => {}
            LineScan::Partial { width } if width < usize::from(cols) => {}
            _ => return false,
        }
        let screen = self.parser.screen();
        let (row, col) = screen.cursor_position();
        let continuation = if row == 0 {
            self.parser.callbacks().tail_wrapped()
        } else {
            screen.row_wrapped(row - 1)
        };
        if col != 0 || continuation || last_content_row(screen).is_some_and(|last| last >= row) {
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
    fn extend_run<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let (cols, rows) = self.size();
        let (cols, screen_rows) = (usize::from(cols), usize::from(rows));
        let mut rest = bytes;
        if !self.run.tail.is_empty() {
            // Complete the unfinished line first.
            let upto = rest
                .iter()
                .position(|b| *b == b'\n')
                .map_or(rest.len(), |p| p + 1);
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
    fn push_line(&mut self, line: &str, width: usize, sgr: bool, cols: usize, screen_rows: usize) {
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
    fn sync(&mut self) {
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
    fn end_run(&mut self) {
        self.sync();
        self.run = Run::default();
    }

    /// The line count, without bringing the emulator up to date.
    fn total_lines(&self) -> u64 {
        let run = &self.run;
        if !run.active {
            return self.emulator_total_lines();
        }
        if !run.lazy {
            let base = self.emulator_total_lines();
            return if run.tail_width > 0 {
                base.max(self.cursor().line)
            } else {
                base
            };
        }
        // The emulator's screen is blank; the window's lines follow history, and the cursor's
        // line (the tail) follows them. Rows beyond a screenful have scrolled into history: only
        // the first window line can have some (its first rows count it there).
        let screen_rows = usize::from(self.size().1);
        let base = self.parser.callbacks().history.total_lines();
        let scrolled = u64::from(run.rows > screen_rows - 1);
        let mut last = base + scrolled;
        if run.tail_width > 0 {
            last = last.max(base + 1 + run.window.len() as u64);
        } else if let Some(i) = run.window.iter().rposition(|l| l.text) {
            last = last.max(base + 1 + i as u64);
        }
        last
    }

    /// The line count of the emulator's state (history plus the screen down to its last
    /// non-blank row).
    fn emulator_total_lines(&self) -> u64 {
        let rec = self.parser.callbacks();
        let base = rec.history.total_lines();
        if let Some(snapshot) = &self.main_snapshot {
            let continued = u64::from(rec.tail_wrapped() && !snapshot.lines.is_empty());
            return base + snapshot.lines.len() as u64 - continued;
        }
        let screen = self.parser.screen();
        let Some(last) = last_content_row(screen) else {
            return base;
        };
        let mut lines = base;
        for r in 0..=last {
            let continues = if r == 0 {
                rec.tail_wrapped()
            } else {
                screen.row_wrapped(r - 1)
            };
            if !continues {
                lines += 1;
            }
        }
        lines
    }

    /// Tracks modes that change how lines scroll (scroll regions, autowrap).
    fn scan_modes(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while let Some(p) = bytes[i..].iter().position(|b| *b == 0x1b) {
            let at = i + p;
            i = at + 1;
            if bytes.get(at + 1) != Some(&b'[') {
                if bytes.get(at + 1) == Some(&b'c') {
                    self.unusual_modes = false; // full reset
                }
                continue;
            }
            let params_start = at + 2;
            let len = bytes[params_start..]
                .iter()
                .position(|b| !(b.is_ascii_digit() || *b == b';' || *b == b'?'))
                .unwrap_or(bytes.len() - params_start);
            let params = &bytes[params_start..params_start + len];
            match bytes.get(params_start + len) {
                Some(b'r') if !params.starts_with(b"?") => self.unusual_modes = !params.is_empty(),
                Some(b'l') if params == b"?7" => self.unusual_modes = true,
                Some(b'h') if params == b"?7" => self.unusual_modes = false,
                _ => {}
            }
        }
    }

    /// Before an erase-display: pushes the visible main-screen lines into history.
    fn keep_screen_in_history(&mut self) {
        if self.parser.screen().alternate_screen() {
            return;
        }
        let lines = self.screen_lines();
        self.push_screen_lines(lines);
    }

    /// Pushes lines taken from the screen into history, continuing a wrapped history tail.
    fn push_screen_lines(&mut self, lines: Vec<String>) {
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

    /// Lines `from..=to` (clamped to what is retained), oldest first.
    fn lines(&self, from: u64, to: u64) -> Vec<String> {
        let history = &self.parser.callbacks().history;
        let base = history.total_lines();
        let from = from.max(history.first_line()).max(1);
        let mut out = Vec::new();
        if from > to {
            return out;
        }
        let tail_wrapped = self.parser.callbacks().tail_wrapped();
        let last = to.min(base);
        if from <= last {
            out.reserve((last - from + 1) as usize);
        }
        for (n, text) in (from..=last).zip(history.lines(from, last)) {
            if n == base && tail_wrapped {
                // The newest history line continues on the first screen row.
                let rest = self.first_screen_line();
                out.push(format!("{text}{rest}").trim_end_matches(' ').to_owned());
            } else {
                out.push(text.trim_end_matches(' ').to_owned());
            }
        }
        // Screen lines only when the range reaches them.
        let skip = usize::from(tail_wrapped);
        let first_screen_line = base + 1;
        if to < first_screen_line {
            return out;
        }
        // Screen line i (counting a continued history line as 0) is line base + i + 1 - skip.
        let index = |n: u64| (n.max(first_screen_line) - base - 1) as usize + skip;
        let (first, last) = (index(from), index(to));
        match &self.main_snapshot {
            Some(snapshot) => out.extend(snapshot.lines.iter().take(last + 1).skip(first).cloned()),
            None => out.extend(self.screen_lines_range(first, last)),
        }
        out
    }

    /// The main screen's logical lines `first..=last` (as [`Self::screen_lines`] numbers them),
    /// rendering only their rows: a viewport is usually the screen's last few lines, and
    /// rendering all rows for it was the largest cost of settling a send.
    fn screen_lines_range(&self, first: usize, last: usize) -> Vec<String> {
        let screen = self.parser.screen();
        let Some(last_row) = last_content_row(screen) else {
            return Vec::new();
        };
        let height = screen.size().0.get();
        // The row each logical line starts on, joined as `logical_lines` joins them.
        let mut starts = Vec::new();
        let mut row = 0;
        while row <= last_row {
            starts.push(row);
            while row < last_row && row < height - 1 && screen.row_wrapped(row) {
                row += 1;
            }
            row += 1;
        }
        (first..=last.min(starts.len().saturating_sub(1)))
            .filter_map(|i| {
                let start = *starts.get(i)?;
                let end = starts.get(i + 1).map_or(last_row, |next| next - 1);
                // Rows start..=end in full; the row after contributes nothing (width 0).
                let mut text = screen.contents_between(start, 0, end + 1, 0);
                if text.ends_with('\n') {
                    text.pop();
                }
                let len = text.trim_end_matches(' ').len();
                text.truncate(len);
                Some(text)
            })
            .collect()
    }

    /// The first logical line on the main screen (or its snapshot).
    fn first_screen_line(&self) -> String {
        match &self.main_snapshot {
            Some(snapshot) => snapshot.lines.first().cloned().unwrap_or_default(),
            None => self
                .screen_lines_range(0, 0)
                .into_iter()
                .next()
                .unwrap_or_default(),
        }
    }

    /// The main screen's logical lines (wrapped rows joined), trailing blank lines dropped.
    fn screen_lines(&self) -> Vec<String> {
        // Down to the last row `total_lines` counts (a row of spaces counts, and reads as an
        // empty line), so a page never names a line it does not hold.
        match last_content_row(self.parser.screen()) {
            Some(last) => self.logical_lines(last + 1),
            None => Vec::new(),
        }
    }

    /// The logical lines (wrapped rows joined, trailing spaces trimmed) of rows `0..rows`.
    fn logical_lines(&self, rows: u16) -> Vec<String> {
        let screen = self.parser.screen();
        let (height, cols) = screen.size();
        let mut lines: Vec<String> = Vec::new();
        let mut joining = false;
        for (r, text) in screen
            .rows(0, cols.get())
            .take(usize::from(rows))
            .enumerate()
        {
            if joining {
                lines
                    .last_mut()
                    .expect("joining implies a line")
                    .push_str(&text);
            } else {
                lines.push(text);
            }
            joining = (r as u16) < height.get() - 1 && screen.row_wrapped(r as u16);
        }
        for line in &mut lines {
            let len = line.trim_end_matches(' ').len();
            line.truncate(len);
        }
        lines
    }
}

/// The last row with any content (text or coloured blanks), if any.
fn last_content_row(screen: &vt100::Screen) -> Option<u16> {
    let (rows, cols) = screen.size();
    (0..rows.get()).rev().find(|&r| {
        (0..cols.get()).any(|c| {
            screen
                .cell(r, c)
                .is_some_and(|cell| cell.has_contents() || cell.bgcolor() != vt100::Color::Default)
        })
    })
}

/// The earliest special sequence in `input`: its offset, bytes and kind.
fn find_special(input: &[u8]) -> Option<(usize, &'static [u8], Special)> {
    let mut from = 0;
    while let Some(p) = input[from..].iter().position(|b| *b == 0x1b) {
        let at = from + p;
        for (pattern, special) in SPECIALS {
            if input[at..].starts_with(pattern) {
                return Some((at, pattern, special));
            }
        }
        from = at + 1;
    }
    None
}

/// Offset of the first CR LF.
fn find_line_end(bytes: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = bytes[from..].iter().position(|b| *b == b'\n') {
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
fn scan_line(bytes: &[u8]) -> LineScan {
    let mut width = 0;
    let mut sgr = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x20..=0x7e => {
                width += 1;
                i += 1;
            }
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
            let end = i + line[i..]
                .iter()
                .position(|b| *b == b'm')
                .unwrap_or(line.len() - i - 1);
            let seq = &line[i..=end];
            if seq == b"\x1b[m" || seq == b"\x1b[0m" {
                colours.clear();
            }
            colours.extend_from_slice(seq);
            i = end + 1;
        } else {
            let end = i + line[i..]
                .iter()
                .position(|b| *b == 0x1b)
                .unwrap_or(line.len() - i);
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
const RECENT: usize = 512;

/// Whether the output whose newest bytes are `recent` ends between escape sequences and UTF-8
/// characters, where the emulator's parser holds nothing of them; `whole` when `recent` is
/// all the output there was. Conservative: `false` when unsure (a sequence that may have begun
/// before `recent`, stray bytes inside a sequence, invalid UTF-8 or C1 controls after it).
fn ends_between_sequences(recent: &[u8], whole: bool) -> bool {
    let text = match recent.iter().rposition(|b| *b == 0x1b) {
        None if !whole => return false,
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

fn nonzero(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
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
    fn sequence_ends_are_recognised() {
        for (bytes, clean) in [
            (&b"plain text"[..], true),
            (b"$ \x1b]133;B\x07", true),
            (b"\x1b[31mred\x1b[0m", true),
            (b"\x1b[31", false),
            (b"\x1b", false),
            (b"\x1b]0;title", false),
            (b"\x1b]0;title\x1b\\", true),
            (b"\x1b(B", true),
            (b"\x1b(", false),
            ("日本".as_bytes(), true),
            (&"日本".as_bytes()[..5], false),
            (b"ok\xf0\x9f", false),
            (b"\x1b\xff\xff=", false),
            (b"stray \xff byte", false),
            ("C1 \u{9b}".as_bytes(), false),
            (b"\x1b[3\x18m", false),
            (b"\x1b_apc string\x07", false),
            (b"\x1bPq dcs\x07", false),
            (b"\x1b_apc\x1b\\", true),
        ] {
            assert_eq!(ends_between_sequences(bytes, true), clean, "{bytes:?}");
            assert!(!ends_between_sequences(bytes, false) || bytes.contains(&0x1b));
        }
    }

    #[test]
    fn a_rested_screen_wakes_as_it_was() {
        // Pieces of output; after each, one terminal rests (when it may) and another does not:
        // every read and everything fed after must agree.
        let pieces: &[&[u8]] = &[
            b"\x1b]133;A\x07user@host:~$ \x1b]133;B\x07",
            b"ls --color\r\n\x1b]133;C\x07",
            b"\x1b[01;34mdir\x1b[0m  file\r\n",
            "日本語のテキスト 👍\r\n".as_bytes(),
            b"\x1b[1;33;44mbold colours\x1b[0m and \x1b[7minverse\x1b[27m\r\n",
            &[b'w'; 95],
            b"\r\n\x1b]133;D;0\x07\x1b]133;A\x07$ \x1b]133;B\x07",
            b"\x1b[?2004h\x1b[?1h",
            b"partial line, cursor mid-row",
            b"\x1b[3;5Hmoved\x1b[K",
            b"\x1b[?25l",
            b"\x1b[31",
            b"m still red after a split sequence\r\n",
            &"é".as_bytes()[..1],
            &"é".as_bytes()[1..],
            b"\r\nend\x1b[?25h",
            // Found by fuzzing: an escape sequence split over pieces, with bytes it ignores.
            b"\xff\x03",
            b"\x1b",
            b"\xff",
            b"\xff",
            b"=",
            b"after\r\n",
            // A cursor restored across a rest: never saved, then saved with colours.
            b"\x1b8here",
            b"\x1b[5;7H\x1b[1;32;44m\x1b7\x1b[m\x1b[10;1Hbelow",
            b"\x1b8restored in colour\x1b[m\r\n",
        ];
        let mut resting = term();
        let mut plain = term();
        let mut rested = 0;
        let agree = |resting: &Terminal, plain: &Terminal, when: &str| {
            // What a resting screen answers from memory, then what wakes it.
            assert_eq!(resting.total_lines(), plain.total_lines(), "{when}");
            assert_eq!(resting.cursor(), plain.cursor(), "{when}");
            assert_eq!(resting.bracketed_paste(), plain.bracketed_paste(), "{when}");
            assert_eq!(resting.size(), plain.size(), "{when}");
            assert_eq!(
                resting.alternate_screen(),
                plain.alternate_screen(),
                "{when}"
            );
            assert_eq!(all_lines(resting), all_lines(plain), "{when}");
            assert_eq!(resting.visible_screen(), plain.visible_screen(), "{when}");
            let (a, b) = (resting.state.borrow(), plain.state.borrow());
            assert_eq!(
                a.parser.screen().state_formatted(),
                b.parser.screen().state_formatted(),
                "{when}: formatted screen and input modes"
            );
        };
        for (i, piece) in pieces.iter().enumerate() {
            // Fed while resting (from the second piece on), then read.
            resting.feed(piece);
            plain.feed(piece);
            agree(&resting, &plain, &format!("piece {i} fed"));
            if resting.rest() {
                rested += 1;
                assert!(resting.is_resting());
                if i % 3 == 0 {
                    // Woken by a read, then back to rest for the next piece.
                    agree(&resting, &plain, &format!("piece {i} read"));
                    assert!(resting.rest());
                }
            }
        }
        assert!(rested >= 10, "rested after {rested} pieces");
    }

    #[test]
    fn a_rested_screen_resizes_like_an_awake_one() {
        // Found by fuzzing: growing the screen pulls rows back from vt100's count of rows
        // scrolled off, which resting must leave as it was.
        let mut resting = Terminal::new(82, 5, 1, 1 << 16);
        let mut plain = Terminal::new(82, 5, 1, 1 << 16);
        for (i, byte) in b"\n\n\n\n\n\n\n\x08\n\n\n\n\n\n\xf1\n\n\n"
            .iter()
            .enumerate()
        {
            for t in [&mut resting, &mut plain] {
                t.feed(&[*byte]);
                if i % 10 == 9 {
                    let (c, r) = t.size();
                    t.resize(c + 27, r + 8);
                }
            }
            assert_eq!(resting.total_lines(), plain.total_lines(), "after byte {i}");
            assert_eq!(resting.cursor(), plain.cursor(), "after byte {i}");
            resting.rest();
        }
        assert_eq!(all_lines(&resting), all_lines(&plain));
    }

    #[test]
    fn every_range_reads_what_the_whole_screen_holds() {
        // Wrapped lines (one continuing from history), wide characters across a row end, a
        // row of coloured blanks and blank rows between lines: any sub-range reads the same
        // lines as a read of everything.
        let mut t = term();
        t.feed("h".repeat(70).as_bytes());
        t.feed(b"\r\n");
        t.feed("日本語".repeat(8).as_bytes());
        t.feed(b"\r\nshort\r\n\x1b[44m   \x1b[0m\r\n\r\nlast line  ");
        let total = t.total_lines();
        let all = all_lines(&t);
        assert_eq!(all.len() as u64, total);
        {
            // The row-by-row range rendering agrees with rendering every row.
            let state = t.synced();
            let every = state.screen_lines();
            assert_eq!(state.screen_lines_range(0, every.len() + 3), every);
            for (i, line) in every.iter().enumerate() {
                assert_eq!(
                    state.screen_lines_range(i, i),
                    std::slice::from_ref(line),
                    "line {i}"
                );
            }
        }
        for from in 1..=total {
            for to in from..=total {
                let want = &all[(from - 1) as usize..to as usize];
                assert_eq!(t.lines(from, to), want, "lines {from}..={to}");
            }
        }
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
    fn with_a_key_only_signed_marks_count_and_forged_ones_leave_no_text() {
        let mut t = term();
        t.set_mark_key(MarkKey::from_text("k3y"));
        t.feed(b"x\x1b]133;D;3\x07\x1b]133;A\x07\x1b]133;C;ptyd=forged\x07y\r\n");
        assert_eq!(t.take_marks(), vec![], "marks without the key are no marks");
        t.feed(b"\x1b]133;D;0;ptyd=k3y\x07$ ");
        let marks: Vec<Mark> = t.take_marks().into_iter().map(|m| m.mark).collect();
        assert_eq!(marks, vec![Mark::CommandEnd(Some(0))]);
        assert_eq!(t.lines(1, 2), vec!["xy", "$"], "no mark prints anything");
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

    /// A small deterministic generator for the differential test.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_stream(rng: &mut XorShift) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..2000 {
            match rng.below(20) {
                0 => out.extend_from_slice(b"progress 10%\rprogress 100%\r\n"),
                1 => out.extend_from_slice(b"\x1b]133;C\x07"),
                2 => out.extend_from_slice(b"a\x1b[1Ab\r\n"),
                3 => out.extend_from_slice(&b"x".repeat(rng.below(130) as usize)),
                4 if rng.below(10) == 0 => out.extend_from_slice(b"\x1b[H\x1b[2J"),
                5 => out.extend_from_slice(b"\x1b[31mred\x1b[0m and \x1b[1;32mgreen\x1b[m\r\n"),
                6 => out.extend_from_slice(b"\r\n"),
                _ => {
                    let n = rng.below(90);
                    out.extend(format!("line {n} {}\r\n", "y".repeat(n as usize)).bytes());
                }
            }
        }
        out
    }

    #[test]
    fn fast_path_matches_the_emulator() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for round in 0..20 {
            let stream = random_stream(&mut rng);
            let mut fast = Terminal::new(40, 6, 100_000, 1 << 24);
            let mut slow = Terminal::new(40, 6, 100_000, 1 << 24);
            slow.state.get_mut().fast_path = false;
            let mut pos = 0;
            while pos < stream.len() {
                let n = (1 + rng.below(8000) as usize).min(stream.len() - pos);
                fast.feed(&stream[pos..pos + n]);
                slow.feed(&stream[pos..pos + n]);
                pos += n;
                assert_eq!(
                    fast.total_lines(),
                    slow.total_lines(),
                    "round {round} at {pos}"
                );
                assert_eq!(fast.cursor(), slow.cursor(), "round {round} at {pos}");
            }
            assert_eq!(all_lines(&fast), all_lines(&slow), "round {round}");
            assert_eq!(
                fast.visible_screen(),
                slow.visible_screen(),
                "round {round}"
            );
            assert_eq!(fast.take_marks(), slow.take_marks(), "round {round}");
        }
    }

    #[test]
    fn history_reads_see_the_main_screen_while_a_pager_shows() {
        let mut t = term();
        t.feed(b"one\r\ntwo\r\n$ less f\r\n\x1b[?1049h\x1b[Hpage 1\r\npage 2");
        assert!(t.alternate_screen());
        assert_eq!(all_lines(&t), vec!["one", "two", "$ less f"]);
        assert_eq!(t.total_lines(), 3);
        t.feed(b"\x1b[?1049l$ ");
        assert_eq!(all_lines(&t), vec!["one", "two", "$ less f", "$"]);
    }

    #[test]
    fn terminal_queries_get_answers() {
        let mut t = term();
        t.feed(b"ab\x1b[6n\x1b[c\x1b[>c\x1b]11;?\x07");
        let replies = String::from_utf8(t.take_replies()).unwrap();
        assert_eq!(
            replies,
            "\x1b[1;3R\x1b[?1;2c\x1b[>0;10;1c\x1b]11;rgb:0000/0000/0000\x1b\\"
        );
        assert!(t.take_replies().is_empty());
    }

    #[test]
    fn private_rejected_mark_is_reported() {
        let mut t = term();
        t.feed(b"x\r\n\x1b]133;ptyd-rejected\x07$ ");
        let marks: Vec<Mark> = t.take_marks().into_iter().map(|m| m.mark).collect();
        assert_eq!(marks, vec![Mark::LineRejected]);
    }

    /// Streams that are mostly floods of plain lines (long, wrapped, blank, coloured), with a
    /// little of everything else in between.
    fn flood_stream(rng: &mut XorShift) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..3000 {
            match rng.below(40) {
                0 => out.extend_from_slice("naïve café\r\n".as_bytes()),
                1 => out.extend_from_slice(b"\x1b]133;D;0\x07\x1b]133;A\x07$ \x1b]133;B\x07"),
                2 => out
                    .extend_from_slice(b"line1 ....\r\nline2 ....\r\n\x1b[2A\rline1 DONE\r\n\r\n"),
                3 if rng.below(4) == 0 => out.extend_from_slice(b"\x1b[H\x1b[2J"),
                4 => out.extend_from_slice(b"progress 10%\rprogress 100%\r\n"),
                5 => out.extend_from_slice(b"\x1b[41m   \r\n"),
                6 => out.extend_from_slice(b"\x1b[0m\r\n"),
                7 => out.extend_from_slice(b"    \r\n"),
                8 => out.extend_from_slice(b"\r\n"),
                9 => out.extend_from_slice(b"tab\there\r\n"),
                10 => out.extend_from_slice(b"\x1b[01;34mdir\x1b[0m \x1b[37;41msetuid\x1b[0m\r\n"),
                11 => out.extend(format!("{}", rng.below(1000)).bytes()),
                _ => {
                    let n = rng.below(130) as usize;
                    let c = b'a' + rng.below(26) as u8;
                    out.extend(std::iter::repeat_n(c, n));
                    out.extend_from_slice(b"\r\n");
                }
            }
        }
        out
    }

    #[test]
    fn lazy_runs_match_the_emulator() {
        let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
        for round in 0..30 {
            let stream = flood_stream(&mut rng);
            let max_lines = if round % 3 == 0 { 700 } else { 100_000 };
            let mut fast = Terminal::new(40, 6, max_lines, 1 << 24);
            let mut slow = Terminal::new(40, 6, max_lines, 1 << 24);
            slow.state.get_mut().fast_path = false;
            let max_chunk = [7, 64, 600, 5000][round % 4];
            let mut pos = 0;
            while pos < stream.len() {
                let n = (1 + rng.below(max_chunk) as usize).min(stream.len() - pos);
                fast.feed(&stream[pos..pos + n]);
                slow.feed(&stream[pos..pos + n]);
                pos += n;
                // Only what the session actor asks after every chunk: no sync.
                assert_eq!(
                    fast.total_lines(),
                    slow.total_lines(),
                    "round {round} at {pos}"
                );
                assert_eq!(
                    fast.take_marks(),
                    slow.take_marks(),
                    "round {round} at {pos}"
                );
            }
            assert_eq!(fast.first_line(), slow.first_line(), "round {round}");
            assert_eq!(fast.cursor(), slow.cursor(), "round {round}");
            assert_eq!(all_lines(&fast), all_lines(&slow), "round {round}");
            assert_eq!(
                fast.visible_screen(),
                slow.visible_screen(),
                "round {round}"
            );
            // And the emulator picks up where the run left off.
            fast.feed(b"\x1b[3Aup\r\nend\r\n");
            slow.feed(b"\x1b[3Aup\r\nend\r\n");
            assert_eq!(all_lines(&fast), all_lines(&slow), "round {round} after");
            assert_eq!(
                fast.visible_screen(),
                slow.visible_screen(),
                "round {round} after"
            );
        }
    }

    #[test]
    fn a_flood_stays_lazy_between_chunks() {
        let mut t = Terminal::new(80, 24, 100_000, 1 << 24);
        let stream: Vec<u8> = (1..=20_000)
            .flat_map(|i| format!("{i}\r\n").into_bytes())
            .collect();
        for chunk in stream.chunks(500) {
            t.feed(chunk);
            t.total_lines();
        }
        assert!(
            t.state.borrow().run.lazy,
            "the run should not have been synced"
        );
        assert_eq!(t.total_lines(), 20_000);
        assert_eq!(t.lines(19_999, 20_000), vec!["19999", "20000"]);
        assert_eq!(
            t.cursor(),
            Position {
                line: 20_001,
                col: 0
            }
        );
    }

    #[test]
    fn scan_line_classifies() {
        assert_eq!(
            scan_line(b"ab\r\nc"),
            LineScan::Complete {
                len: 4,
                width: 2,
                sgr: false
            }
        );
        assert_eq!(
            scan_line(b"\x1b[01;34mab\x1b[m\r\n"),
            LineScan::Complete {
                len: 15,
                width: 2,
                sgr: true
            }
        );
        assert_eq!(scan_line(b"ab\x1b[01"), LineScan::Partial { width: 2 });
        assert_eq!(scan_line(b"ab\r"), LineScan::Partial { width: 2 });
        assert_eq!(scan_line(b"ab\x1b"), LineScan::Partial { width: 2 });
        assert_eq!(scan_line(b"ab\rc"), LineScan::NotPlain);
        assert_eq!(scan_line(b"a\x1b[2Ab\r\n"), LineScan::NotPlain);
        assert_eq!(scan_line("é\r\n".as_bytes()), LineScan::NotPlain);
    }

    #[test]
    fn every_counted_line_can_be_read() {
        let mut t = term();
        t.feed(b" ");
        assert_eq!(t.total_lines(), 1);
        assert_eq!(t.lines(1, 1), vec![""]);
    }
}
