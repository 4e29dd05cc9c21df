//! The emulator's state and what reads it: vt100 with its recorder, the run of plain lines it
//! may be behind on, the main screen kept while the alternate one shows, and the numbered lines
//! (history, then the screen's logical lines) read from them.

use super::emulator::Emulator;
use super::recorder::cursor_position;
use super::rows::rows_text;
use super::run::Run;
use super::{Position, xterm};

/// The main screen as it was when a full-screen program switched to the alternate screen; it
/// does not change until the program switches back, and history readers keep seeing it.
pub(super) struct MainSnapshot {
    pub(super) lines: Vec<String>,
    pub(super) cursor: Position,
    /// The cursor's row and column on the screen (what a checkpoint redraws it at).
    pub(super) cell: (u16, u16),
}

/// A resting terminal's screen. The emulator's grid (32 bytes a cell: 150 KiB at 120x40) is
/// shrunk to one cell while a session is idle, and redrawn from these bytes (vt100's own
/// rendering of its contents, cursor and input modes) when output arrives or something reads.
/// What the session asks most while idle is kept too, so asking does not wake the screen.
pub(super) struct Resting {
    pub(super) redraw: Vec<u8>,
    pub(super) cols: u16,
    pub(super) rows: u16,
    pub(super) total_lines: u64,
    pub(super) cursor: Position,
    pub(super) bracketed_paste: bool,
}

pub(super) struct State {
    pub(super) parser: Emulator,
    pub(super) run: Run,
    /// The hidden main screen while the alternate screen shows.
    pub(super) main_snapshot: Option<MainSnapshot>,
    /// A scroll region or disabled autowrap is in effect: lines do not simply scroll through.
    pub(super) unusual_modes: bool,
    /// Whether runs of plain lines may bypass the emulator (always, except in tests that
    /// compare both paths).
    pub(super) fast_path: bool,
    /// The emulator's parser is between sequences: the last bytes it took ended a line (or were
    /// a complete special sequence). A run starts only then, so its first bytes cannot be the
    /// end of an escape sequence.
    pub(super) ground: bool,
    /// While the terminal rests: the bytes that redraw its screen, with the size to restore.
    pub(super) resting: Option<Resting>,
    /// Paints of the alternate screen not emulated yet (`deferred`).
    pub(super) deferred: super::deferred::Deferred,
    /// Bytes given to the emulator (tests of what the sequence layer drops read it).
    #[cfg(test)]
    pub(super) emulated: usize,
}

impl State {
    pub(super) fn alternate_screen(&self) -> bool {
        self.parser.screen().alternate_screen()
    }

    pub(super) fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (cols.get(), rows.get())
    }

    pub(super) fn cursor(&self) -> Position {
        match &self.main_snapshot {
            Some(snapshot) => snapshot.cursor,
            None => cursor_position(self.parser.screen(), self.parser.callbacks()),
        }
    }

    /// Gives complete sequences to the emulator directly, the run ended first.
    pub(super) fn raw(&mut self, bytes: &[u8]) {
        self.end_run();
        self.parser.process(bytes);
        self.ground = true;
        if !self.alternate_screen() {
            self.main_snapshot = None;
        }
    }

    /// The emulator's cursor (row, column; the column is one past the last after a character
    /// there), the run ended first.
    pub(super) fn cursor_cell(&mut self) -> (u16, u16) {
        self.end_run();
        self.parser.screen().cursor_position()
    }

    /// An answer to a query, after those the emulator gave so far.
    pub(super) fn reply(&mut self, bytes: &[u8]) {
        self.parser.callbacks_mut().replies.extend_from_slice(bytes);
    }

    /// Erase display: vt100 discards the rows on it; a real terminal keeps them in
    /// scrollback, so the visible lines are copied into history first.
    pub(super) fn erase_display(&mut self, seq: &[u8]) {
        self.end_run();
        self.keep_screen_in_history();
        self.raw(seq);
    }

    /// Before a switch to the alternate screen: remembers the main screen.
    pub(super) fn snapshot_main(&mut self) {
        self.end_run();
        self.main_snapshot = Some(MainSnapshot {
            lines: self.screen_lines(),
            cursor: self.cursor(),
            cell: self.parser.screen().cursor_position(),
        });
    }

    /// The line count, without bringing the emulator up to date.
    pub(super) fn total_lines(&self) -> u64 {
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
    pub(super) fn emulator_total_lines(&self) -> u64 {
        let rec = self.parser.callbacks();
        let base = rec.history.total_lines();
        if let Some(snapshot) = &self.main_snapshot {
            let continued = u64::from(rec.tail_wrapped() && !snapshot.lines.is_empty());
            return base + snapshot.lines.len() as u64 - continued;
        }
        let Some(last) = self.parser.last_content_row() else {
            return base;
        };
        let screen = self.parser.screen();
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

    /// Before an erase-display: pushes the visible main-screen lines into history.
    pub(super) fn keep_screen_in_history(&mut self) {
        if self.parser.screen().alternate_screen() {
            return;
        }
        let lines = self.screen_lines();
        self.push_screen_lines(lines);
    }

    /// Pushes lines taken from the screen into history, continuing a wrapped history tail.
    pub(super) fn push_screen_lines(&mut self, lines: Vec<String>) {
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
    pub(super) fn lines(&self, from: u64, to: u64) -> Vec<String> {
        let mut out = Vec::new();
        self.visit_lines(from, to, |_, text| out.push(text.to_owned()));
        out
    }

    /// Calls `visit` with each of lines `from..=to` (clamped to what is retained), oldest
    /// first, with its number: history lines as they are stored, without a copy each (a
    /// search reads the whole history this way).
    pub(super) fn visit_lines(&self, from: u64, to: u64, mut visit: impl FnMut(u64, &str)) {
        let history = &self.parser.callbacks().history;
        let base = history.total_lines();
        let from = from.max(history.first_line()).max(1);
        if from > to {
            return;
        }
        let tail_wrapped = self.parser.callbacks().tail_wrapped();
        let last = to.min(base);
        for (n, text) in (from..=last).zip(history.lines(from, last)) {
            if n == base && tail_wrapped {
                // The newest history line continues on the first screen row.
                let rest = self.first_screen_line();
                visit(n, format!("{text}{rest}").trim_end_matches(' '));
            } else {
                visit(n, text.trim_end_matches(' '));
            }
        }
        // Screen lines only when the range reaches them.
        let skip = usize::from(tail_wrapped);
        let first_screen_line = base + 1;
        if to < first_screen_line {
            return;
        }
        // Screen line i (counting a continued history line as 0) is line base + i + 1 - skip.
        let index = |n: u64| (n.max(first_screen_line) - base - 1) as usize + skip;
        let (first, last) = (index(from), index(to));
        let number = |i: usize| base + 1 + (i - skip) as u64;
        match &self.main_snapshot {
            Some(snapshot) => {
                for (i, text) in snapshot.lines.iter().enumerate().take(last + 1).skip(first) {
                    visit(number(i), text);
                }
            }
            None => {
                for (i, text) in (first..).zip(self.screen_lines_range(first, last)) {
                    visit(number(i), &text);
                }
            }
        }
    }

    /// The main screen's logical lines `first..=last` (as [`Self::screen_lines`] numbers them),
    /// rendering only their rows: a viewport is usually the screen's last few lines, and
    /// rendering all rows for it was the largest cost of settling a send.
    pub(super) fn screen_lines_range(&self, first: usize, last: usize) -> Vec<String> {
        let Some(last_row) = self.parser.last_content_row() else {
            return Vec::new();
        };
        let screen = self.parser.screen();
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
                let mut text = rows_text(screen, start, end);
                let len = text.trim_end_matches(' ').len();
                text.truncate(len);
                xterm::show_malformed(&mut text);
                Some(text)
            })
            .collect()
    }

    /// The first logical line on the main screen (or its snapshot).
    pub(super) fn first_screen_line(&self) -> String {
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
    pub(super) fn screen_lines(&self) -> Vec<String> {
        // Down to the last row `total_lines` counts (a row of spaces counts, and reads as an
        // empty line), so a page never names a line it does not hold.
        match self.parser.last_content_row() {
            Some(last) => self.logical_lines(last + 1),
            None => Vec::new(),
        }
    }

    /// The logical lines (wrapped rows joined, trailing spaces trimmed) of rows `0..rows`.
    pub(super) fn logical_lines(&self, rows: u16) -> Vec<String> {
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
            xterm::show_malformed(line);
        }
        lines
    }
}
