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

mod checkpoint;
mod deferred;
mod emulator;
mod fast_path;
mod recorder;
mod redraws;
mod resting;
mod rows;
mod run;
mod scan;
mod sequences;
mod state;
mod styled;
mod xterm;

use crate::marks::{Mark, MarkKey};
pub use checkpoint::{Checkpoint, NoCheckpoint};
use emulator::Emulator;
use recorder::Recorder;
use run::Run;
use sequences::Sequences;
use state::State;
use std::cell::{RefCell, RefMut};
use std::num::NonZeroU16;
pub use styled::{Color, Style, StyledRun, StyledScreen};

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
    /// For a command-end mark: the cursor's logical line as it stood when the mark arrived
    /// (wrapped rows joined, trailing blanks trimmed). What the shell draws after the mark can
    /// change that line before anything reads it: bash draws its prompt on it after output that
    /// did not end in a newline, zsh returns to its start and draws the prompt over it, fish's
    /// missing-newline sign follows the output and wraps onto the next row. `None` for other
    /// marks, on the alternate screen, and for marks restored from a journal head.
    pub line: Option<String>,
    /// For a command-start mark: the command line, as the shell reported it (zsh, fish) or as
    /// typed after the input-start mark (bash: the screen's text, continuation prompts
    /// included). For a command-end or rejected-line mark that ended an input without a
    /// command start (an empty or refused line): the first line typed after the input-start
    /// mark. `None` otherwise, and for marks restored from a journal head.
    pub command: Option<String>,
    /// Where the sequence that carried the mark lies in the output stream: bytes the terminal
    /// took before its first byte, and through its last (both 0 for restored marks).
    pub bytes: (u64, u64),
}

/// One session's terminal: feed it output, read lines and the screen.
pub struct Terminal {
    /// The emulator and the run it may be behind on. In a cell so that reads (`&self`) can bring
    /// the emulator up to date first.
    state: RefCell<State>,
    /// The control-sequence layer: what vt100 lacks, and modes in stream order.
    sequences: Sequences,
    /// The newest output (at most `RECENT` bytes): whether the parser is between sequences.
    recent: Vec<u8>,
    /// Older output was dropped from `recent`.
    recent_cut: bool,
}

impl Terminal {
    /// A terminal of `cols` x `rows` whose history keeps `max_lines` lines / `max_bytes` bytes.
    pub fn new(cols: u16, rows: u16, max_lines: u64, max_bytes: usize) -> Terminal {
        let recorder = Recorder::new(max_lines, max_bytes);
        Terminal {
            state: RefCell::new(State {
                parser: Emulator::new(nonzero(rows), nonzero(cols), recorder),
                run: Run::default(),
                main_snapshot: None,
                unusual_modes: false,
                fast_path: true,
                ground: true,
                resting: None,
                deferred: Default::default(),
                #[cfg(test)]
                emulated: 0,
            }),
            sequences: Sequences::default(),
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

    /// Interprets a chunk of PTY output.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.remember(bytes);
        let state = self.state.get_mut();
        state.wake();
        match state.defer(bytes, self.sequences.is_idle()) {
            // Counted as the sequence layer would count them: marks' places stay exact.
            deferred::Deferral::Kept => self.sequences.fed += bytes.len() as u64,
            deferred::Deferral::Refused(None) => self.sequences.feed(bytes, state),
            deferred::Deferral::Refused(Some(mut unfinished)) => {
                // The unfinished sequence kept was counted when it came.
                self.sequences.fed -= unfinished.len() as u64;
                unfinished.extend_from_slice(bytes);
                self.sequences.feed(&unfinished, state);
            }
        }
    }

    /// Answers to terminal queries seen since the last call, to be written to the program.
    pub fn take_replies(&mut self) -> Vec<u8> {
        // Runs hold no queries: every one so far went through the emulator.
        let recorder = self.state.get_mut().parser.callbacks_mut();
        recorder.replies_before_end = 0;
        std::mem::take(&mut recorder.replies)
    }

    /// Like `take_replies`, but only the answers to queries that came after the newest
    /// command-end mark among them: a query before it was asked by a command that has ended, and
    /// an answer written now would be read by the shell or the next command.
    pub fn take_replies_after_end(&mut self) -> Vec<u8> {
        let recorder = self.state.get_mut().parser.callbacks_mut();
        let before_end = std::mem::take(&mut recorder.replies_before_end);
        let mut replies = std::mem::take(&mut recorder.replies);
        replies.drain(..before_end.min(replies.len()));
        replies
    }

    /// From now on, only OSC 133 marks carrying `key` are reported (a new terminal reports every
    /// mark).
    pub fn set_mark_key(&mut self, key: MarkKey) {
        self.state.get_mut().parser.callbacks_mut().mark_key = key;
    }

    /// Shell-integration marks seen since the last call, in stream order.
    pub fn take_marks(&mut self) -> Vec<MarkEvent> {
        // Runs hold no marks: every mark the stream had so far went through the emulator.
        let recorder = self.state.get_mut().parser.callbacks_mut();
        recorder.stamped = 0;
        std::mem::take(&mut recorder.marks)
    }

    /// Whether the output taken in since the last `take_marks` and `take_replies` holds a
    /// shell-integration mark or an answer to a query: something a session acts on before it
    /// takes in more.
    pub fn has_marks_or_replies(&self) -> bool {
        let state = self.state.borrow();
        let recorder = state.parser.callbacks();
        !recorder.marks.is_empty() || !recorder.replies.is_empty()
    }

    /// Bytes of output taken since the session started.
    pub fn output_bytes(&self) -> u64 {
        self.sequences.fed
    }

    /// A terminal restored from a checkpoint taken while the shell took input that began at
    /// `at` (its input-start mark, kept with the checkpoint): the command line that follows is
    /// read from there.
    pub fn resume_input_at(&mut self, at: Position) {
        self.state.get_mut().parser.callbacks_mut().input_start = Some(at);
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
            .map(|r| {
                let mut row = r.trim_end_matches(' ').to_owned();
                xterm::show_malformed(&mut row);
                row
            })
            .collect();
        while rows.last().is_some_and(|r| r.is_empty()) {
            rows.pop();
        }
        rows
    }

    /// The bytes that draw the screen as it is now on a person's terminal: the alternate screen
    /// entered when a full-screen program shows, the cells with their colours and attributes,
    /// the cursor, and the input modes the program set (keypad, bracketed paste, mouse).
    pub fn redraw(&self) -> Vec<u8> {
        let state = self.synced();
        let screen = state.parser.screen();
        let mut out = Vec::new();
        if screen.alternate_screen() {
            out.extend_from_slice(b"\x1b[?1049h");
        }
        out.extend_from_slice(screen.state_formatted().as_bytes());
        out
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

    /// Calls `visit` with each of lines `from..=to` and its number, without a copy of each
    /// history line: what a scan of the whole history uses.
    pub(crate) fn visit_lines(&self, from: u64, to: u64, visit: impl FnMut(u64, &str)) {
        self.synced().visit_lines(from, to, visit);
    }

    /// Resizes the screen.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let state = self.state.get_mut();
        state.wake();
        state.end_run();
        if state.size() != (cols.max(1), rows.max(1)) {
            // vt100, like xterm, resets the scroll region on a resize.
            self.sequences.resized();
        }
        state.parser.set_size(nonzero(rows), nonzero(cols));
        self.sequences.modes.apply_to(state);
    }

    /// Bytes of history text retained (for memory accounting).
    pub fn history_heap_bytes(&self) -> usize {
        self.state.borrow().parser.callbacks().history.heap_bytes()
    }
}

fn nonzero(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

#[cfg(test)]
mod fast_path_tests;
#[cfg(test)]
mod marks_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod xterm_tests;
