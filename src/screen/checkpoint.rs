//! Checkpoints: a terminal's state as what rebuilds it, its history lines and the bytes that
//! redraw its screen, so that a session's output journal can drop the output that came before
//! (see `state::journal`). A checkpoint is only given out once a terminal rebuilt from its
//! screen's redraw was found to read as the live one (the history is copied line by line); at a
//! moment when that cannot be (inside an escape sequence, a scroll region or another mode the
//! redraw would not carry), there is none, and the caller tries again later.

use super::state::State;
use super::{Position, Terminal};

/// Why no checkpoint was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCheckpoint {
    /// Not at this moment: the output stopped inside an escape sequence or character, a mode
    /// the redraw would not carry is on, or the newest history line goes on on the screen.
    NotNow,
    /// A terminal rebuilt from it would read differently (what the redraw misses).
    Differs,
}

/// What rebuilds a terminal: restore it into a fresh one with [`Terminal::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The lines numbered before the oldest retained one (dropped from history).
    pub line_base: u64,
    /// The retained history lines, oldest first, each ended by `\n`.
    pub history: String,
    /// The output that redraws the screen (and the main screen under a full-screen program)
    /// on a terminal that holds the history.
    pub screen: Vec<u8>,
    /// The size the screen is redrawn at: columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// Taken inside a control string past its bound: what follows is dropped up to its end
    /// (`Some(whether BEL ends it)`), so an endless string does not keep the journal growing.
    pub dropping_string: Option<bool>,
    /// Bytes of output the terminal had taken (`Terminal::output_bytes`); a restored one counts
    /// on from here.
    pub output_bytes: u64,
}

impl Terminal {
    /// A checkpoint of this terminal as it is now, if one can be taken (see the module doc).
    /// Brings the emulator up to date first.
    pub fn checkpoint(&mut self) -> Result<Checkpoint, NoCheckpoint> {
        let state = self.state.get_mut();
        state.wake();
        state.end_run();
        // An idle control-sequence layer has seen every sequence end: the emulator's parser
        // holds nothing of one (a rebuilt parser would not hold it either).
        let dropping_string = self.sequences.dropping_string();
        if !(self.sequences.is_idle() || dropping_string.is_some())
            || state.deferred_bytes() > 0
            || state.unusual_modes
            // The newest history line goes on on the screen: the rebuilt history's would not.
            || state.parser.callbacks().tail_wrapped()
        {
            return Err(NoCheckpoint::NotNow);
        }
        let (cols, rows) = state.size();
        let history = &state.parser.callbacks().history;
        let (max_lines, max_bytes) = history.bounds();
        let history_lines = history.total_lines();
        let screen = screen_redraw(state).ok_or(NoCheckpoint::NotNow)?;
        // The history is copied line by line, so only the screen's redraw needs trying: on a
        // terminal whose (empty) history numbers on from the same line.
        let mut trial = Checkpoint {
            line_base: history_lines,
            history: String::new(),
            screen,
            cols,
            rows,
            dropping_string,
            output_bytes: self.sequences.fed,
        };
        let mut rebuilt = Terminal::new(cols, rows, max_lines, max_bytes);
        rebuilt.restore(&trial);
        if !self.same_screen_as(&rebuilt) {
            return Err(NoCheckpoint::Differs);
        }
        let history = &self.state.get_mut().parser.callbacks().history;
        let first = history.first_line();
        let mut text = String::with_capacity(history.retained_bytes() + 1024);
        for line in history.lines(first, history_lines) {
            if line.contains('\n') {
                return Err(NoCheckpoint::Differs);
            }
            text.push_str(line.trim_end_matches(' '));
            text.push('\n');
        }
        Ok(Checkpoint {
            line_base: first - 1,
            history: text,
            screen: std::mem::take(&mut trial.screen),
            cols,
            rows,
            dropping_string,
            output_bytes: trial.output_bytes,
        })
    }

    /// Rebuilds a fresh terminal (one that was given no output yet) from `checkpoint`.
    pub fn restore(&mut self, checkpoint: &Checkpoint) {
        if self.size() != (checkpoint.cols, checkpoint.rows) {
            self.resize(checkpoint.cols, checkpoint.rows);
        }
        let recorder = self.state.get_mut().parser.callbacks_mut();
        recorder.history.continue_after(checkpoint.line_base);
        for line in checkpoint.history.split_terminator('\n') {
            recorder.history.push(line);
        }
        // The screen's first row starts a line of its own (a checkpoint is taken only then).
        recorder.tail_sealed = true;
        self.feed(&checkpoint.screen);
        if let Some(ends_at_bel) = checkpoint.dropping_string {
            self.sequences.drop_string(ends_at_bel);
        }
        self.sequences.fed = checkpoint.output_bytes;
    }

    /// Whether `other` reads as this terminal does from its history's end on: the numbering,
    /// the screen (contents, colours, cursor, input modes), the main screen under a full-screen
    /// program, and the modes of the control-sequence layer.
    fn same_screen_as(&self, other: &Terminal) -> bool {
        if self.sequences.modes != other.sequences.modes {
            return false;
        }
        let (a, b) = (self.synced(), other.synced());
        let (ha, hb) = (&a.parser.callbacks().history, &b.parser.callbacks().history);
        let screen_from = ha.total_lines() + 1;
        let (total, cursor) = (a.total_lines(), a.cursor());
        ha.total_lines() == hb.total_lines()
            && (total, cursor) == (b.total_lines(), b.cursor())
            && a.alternate_screen() == b.alternate_screen()
            && a.parser.screen().state_formatted() == b.parser.screen().state_formatted()
            && main_screen(&a) == main_screen(&b)
            && a.lines(screen_from, total) == b.lines(screen_from, total)
    }
}

/// The main screen kept while the alternate one shows: its lines and cursor.
fn main_screen(state: &State) -> Option<(&[String], Position, (u16, u16))> {
    let snapshot = state.main_snapshot.as_ref()?;
    Some((&snapshot.lines, snapshot.cursor, snapshot.cell))
}

/// The output that redraws the screen of `state` on a blank one, the main screen first when a
/// full-screen program shows (as its plain lines: its colours are not kept). Leaves the screen
/// as it was.
fn screen_redraw(state: &mut State) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    if state.alternate_screen() {
        let snapshot = state.main_snapshot.as_ref()?;
        out.extend_from_slice(b"\x1b[H");
        out.extend_from_slice(snapshot.lines.join("\r\n").as_bytes());
        let (row, col) = snapshot.cell;
        out.extend_from_slice(format!("\x1b[{};{}H\x1b[?1049h", row + 1, col + 1).as_bytes());
    }
    let redraw = state.take_redraw()?;
    // The saved cursor was read by restoring it; the redraw puts everything back.
    state.parser.process(redraw.as_bytes());
    out.extend_from_slice(redraw.as_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: (u64, usize) = (300, 1 << 20);

    fn terminal() -> Terminal {
        Terminal::new(80, 24, BOUNDS.0, BOUNDS.1)
    }

    fn numbered(from: u32, to: u32) -> Vec<u8> {
        (from..=to)
            .flat_map(|i| format!("line {i}\r\n").into_bytes())
            .collect()
    }

    /// What a reader of `t` sees: numbering, every line, the screen, the cursor.
    fn reading(t: &Terminal) -> (u64, u64, Vec<String>, Vec<String>, Position, bool, bool) {
        let (first, total) = (t.first_line(), t.total_lines());
        (
            first,
            total,
            t.lines(first, total),
            t.visible_screen(),
            t.cursor(),
            t.alternate_screen(),
            t.bracketed_paste(),
        )
    }

    #[test]
    fn a_terminal_rebuilt_from_a_checkpoint_goes_on_as_the_live_one_does() {
        let flood = numbered(1, 1000);
        let cases: &[(&str, Vec<u8>, &[u8])] = &[
            (
                "a prompt after a flood that dropped history",
                [&flood[..], b"$ "].concat(),
                b"ls\r\nfile\r\n$ ",
            ),
            ("a short screen", b"hello\r\n$ ".to_vec(), b"x\r\n"),
            ("nothing yet", Vec::new(), b"first\r\n"),
            (
                "colours and a cursor the program saved",
                [
                    &numbered(1, 40)[..],
                    b"\x1b[31mred\x1b[0m\r\n\x1b[5;10H\x1b[1;32m\x1b7\x1b[m\x1b[1;1Hx",
                ]
                .concat(),
                b"\x1b8y\r\n\r\n",
            ),
            (
                "a wrapped line on the screen",
                [&numbered(1, 30)[..], "w".repeat(200).as_bytes(), b"\r\n$ "].concat(),
                &numbered(31, 60),
            ),
            (
                "a cleared screen",
                [&numbered(1, 50)[..], b"\x1b[H\x1b[2J$ "].concat(),
                b"echo\r\n$ ",
            ),
            (
                "a full-screen program over the main screen",
                [
                    &numbered(1, 30)[..],
                    b"$ vim\r\n\x1b[?1049h\x1b[H~\r\n~\r\n\x1b[1;1H\x1b[7mtext\x1b[m",
                ]
                .concat(),
                b"more\x1b[?1049l$ done\r\n",
            ),
            (
                "in a flood of digits",
                (1..=3000)
                    .flat_map(|i| format!("{i}\r\n").into_bytes())
                    .collect(),
                b"3001\r\n3002",
            ),
            (
                "a title set",
                b"\x1b]0;title\x07$ ".to_vec(),
                b"\x1b]0;other\x1b\\x\r\n",
            ),
            (
                "inside a title past its bound",
                [&b"$ \x1b]0;"[..], &[b'a'; 100_000]].concat(),
                &[&[b'a'; 70_000][..], b"\x07x\r\n"].concat(),
            ),
            (
                "inside a DCS past its bound",
                [&b"$ \x1bPq"[..], &[b'#'; 70_000]].concat(),
                &[&[b'#'; 10][..], b"\x07\x1b\\x\r\n"].concat(),
            ),
            (
                "bracketed paste and cursor keys",
                b"\x1b[?2004h\x1b[?1h$ ".to_vec(),
                b"\x1b[?2004l\r\n",
            ),
            (
                "wide characters",
                "日本語\r\n$ ".as_bytes().to_vec(),
                "é\u{301}\r\n".as_bytes(),
            ),
        ];
        for (name, before, after) in cases {
            let mut straight = terminal();
            straight.feed(before);
            straight.feed(after);

            let mut live = terminal();
            live.feed(before);
            let checkpoint = live
                .checkpoint()
                .unwrap_or_else(|e| panic!("{name}: {e:?}"));
            let mut rebuilt = terminal();
            rebuilt.restore(&checkpoint);
            assert_eq!(reading(&rebuilt).0, reading(&live).0, "{name}: first line");
            rebuilt.feed(after);
            live.feed(after);
            assert_eq!(reading(&rebuilt), reading(&straight), "{name}: rebuilt");
            assert_eq!(
                reading(&live),
                reading(&straight),
                "{name}: the live one after it"
            );
            assert!(
                straight.same_screen_as(&rebuilt),
                "{name}: the screens' state"
            );
        }
    }

    /// Inputs the fuzz target found, replayed as it runs them: fed in pieces (resized as the
    /// header says), one terminal straight and one replaced by its checkpoint after every
    /// piece that allows one.
    #[test]
    fn fuzz_findings_read_the_same_rebuilt_from_checkpoints() {
        let findings: [&[u8]; 4] = [
            include_bytes!("../../fuzz/seeds/terminal_render/escape-across-a-line-end"),
            include_bytes!("../../fuzz/seeds/terminal_render/stray-bytes-inside-a-sequence"),
            include_bytes!("../../fuzz/seeds/terminal_render/grow-after-scrolling"),
            include_bytes!("../../fuzz/seeds/terminal_render/collapse-after-a-held-sequence"),
        ];
        for (n, data) in findings.into_iter().enumerate() {
            let (header, stream) = data.split_at(8);
            let new = || {
                Terminal::new(
                    20 + u16::from(header[0]) % 200,
                    5 + u16::from(header[1]) % 60,
                    1 + u64::from(header[2]) * 4,
                    64 + usize::from(header[3]) * 64,
                )
            };
            let (mut straight, mut rebuilt) = (new(), new());
            let resize_every = usize::from(header[7]);
            for (i, piece) in stream.chunks(1 + usize::from(header[6])).enumerate() {
                for t in [&mut straight, &mut rebuilt] {
                    t.feed(piece);
                    if resize_every > 0 && i % resize_every == resize_every - 1 {
                        let (c, r) = t.size();
                        t.resize(20 + (c + 7) % 200, 5 + (r + 3) % 60);
                    }
                }
                assert_eq!(
                    straight.total_lines(),
                    rebuilt.total_lines(),
                    "finding {n}, piece {i}"
                );
                if let Ok(checkpoint) = rebuilt.checkpoint() {
                    rebuilt = new();
                    rebuilt.restore(&checkpoint);
                }
            }
            assert_eq!(
                straight.lines(1, u64::MAX),
                rebuilt.lines(1, u64::MAX),
                "finding {n}"
            );
        }
    }

    #[test]
    fn no_checkpoint_is_taken_where_a_rebuilt_terminal_would_differ() {
        let cases: &[(&str, Vec<u8>)] = &[
            ("inside an escape sequence", b"$ \x1b[".to_vec()),
            ("inside a string", b"$ \x1b]0;title".to_vec()),
            ("a scroll region", b"\x1b[2;10r$ ".to_vec()),
            ("an ESC before a control", b"$ \x1b\r\n0123".to_vec()),
            (
                "a DCS that BEL does not end",
                b"\x1bPq dcs\x07 text".to_vec(),
            ),
            (
                "a sequence too long to hold",
                [&b"\x1b["[..], "1;".repeat(400).as_bytes()].concat(),
            ),
            (
                "the newest history line goes on on the screen",
                [&numbered(1, 30)[..], "w".repeat(2000).as_bytes()].concat(),
            ),
        ];
        for (name, bytes) in cases {
            let mut t = terminal();
            t.feed(bytes);
            assert_eq!(t.checkpoint(), Err(NoCheckpoint::NotNow), "{name}");
        }
    }

    #[test]
    fn a_checkpoint_keeps_the_numbering_of_dropped_history() {
        let mut t = terminal();
        t.feed(&numbered(1, 1000));
        let checkpoint = t.checkpoint().expect("a checkpoint");
        assert!(checkpoint.line_base > 0);
        assert_eq!(checkpoint.line_base + 1, t.first_line());
        let mut rebuilt = terminal();
        rebuilt.restore(&checkpoint);
        let last = rebuilt.total_lines();
        assert_eq!(rebuilt.lines(last - 1, last), ["line 999", "line 1000"]);
    }
}
