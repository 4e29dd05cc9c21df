//! vt100's parser behind the one door that changes its screen, so that what is asked of the
//! screen most (its last row with content) is found once per change, not once per question.

use super::recorder::Recorder;
use std::cell::Cell;
use std::num::NonZeroU16;

pub(super) struct Emulator {
    parser: vt100::Parser<Recorder>,
    /// The last row with content, kept while the screen has not changed since it was found.
    /// Every question about line numbers asks it (publishing after output, Read, List), and
    /// finding it looks at every cell of the blank rows below the prompt.
    last_content_row: Cell<Option<Option<u16>>>,
}

impl Emulator {
    pub(super) fn new(rows: NonZeroU16, cols: NonZeroU16, recorder: Recorder) -> Emulator {
        Emulator {
            parser: vt100::Parser::new_with_callbacks(rows, cols, 0, recorder),
            last_content_row: Cell::new(None),
        }
    }

    pub(super) fn screen(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    /// The screen to change (a resize, a cursor move while resting).
    pub(super) fn screen_mut(&mut self) -> &mut vt100::Screen {
        self.last_content_row.set(None);
        self.parser.screen_mut()
    }

    /// Resizes the screen the way the parser does, so the rows a shrink pushes off the top
    /// reach the recorder (history) like any scrolled row. vt100 also counts every row that
    /// ever scrolled off, though it keeps none, and when the screen grows inserts that many
    /// blank rows above the content; those rows are in history already, so the count is
    /// cleared first (a terminal rebuilt from a checkpoint has no such count either). While
    /// the alternate screen shows, history readers see the main screen as it was kept when it
    /// was hidden, so its rows are not recorded then (they would count twice).
    pub(super) fn set_size(&mut self, rows: NonZeroU16, cols: NonZeroU16) {
        self.last_content_row.set(None);
        if self.parser.screen().alternate_screen() {
            self.parser.screen_mut().set_size(rows, cols);
        } else {
            self.parser.screen_mut().clear_scrollback();
            self.parser.set_size(rows, cols);
        }
    }

    /// Interprets `bytes`.
    pub(super) fn process(&mut self, bytes: &[u8]) {
        self.last_content_row.set(None);
        self.parser.process(bytes);
    }

    pub(super) fn callbacks(&self) -> &Recorder {
        self.parser.callbacks()
    }

    /// The recorder, which holds no cells: changing it leaves the screen as it is. (vt100 calls
    /// it with the screen only from inside `process`.)
    pub(super) fn callbacks_mut(&mut self) -> &mut Recorder {
        self.parser.callbacks_mut()
    }

    /// The last row with any content (text or coloured blanks), if any.
    pub(super) fn last_content_row(&self) -> Option<u16> {
        if let Some(known) = self.last_content_row.get() {
            return known;
        }
        let found = find_last_content_row(self.parser.screen());
        self.last_content_row.set(Some(found));
        found
    }

    /// Whether rows `from..` are all blank (no text, no coloured blanks). Without a kept answer
    /// it stops at the first cell that shows something, so a cursor row with text costs one
    /// look.
    pub(super) fn blank_from(&self, from: u16) -> bool {
        if let Some(known) = self.last_content_row.get() {
            return known.is_none_or(|last| last < from);
        }
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        (from..rows.get()).all(|r| (0..cols.get()).all(|c| !screen.cell(r, c).is_some_and(shows)))
    }
}

fn find_last_content_row(screen: &vt100::Screen) -> Option<u16> {
    let (rows, cols) = screen.size();
    (0..rows.get())
        .rev()
        .find(|&r| (0..cols.get()).any(|c| screen.cell(r, c).is_some_and(shows)))
}

/// Whether a cell shows anything: text, or a coloured blank.
fn shows(cell: &vt100::Cell) -> bool {
    cell.has_contents() || cell.bgcolor() != vt100::Color::Default
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emulator(rows: u16) -> Emulator {
        let size = |n| NonZeroU16::new(n).expect("a size");
        Emulator::new(size(rows), size(20), Recorder::new(100, 10_000))
    }

    #[test]
    fn the_last_content_row_follows_every_change() {
        // (bytes fed, then the last row with content)
        let steps: &[(&[u8], Option<u16>)] = &[
            (b"", None),
            (b"one\r\ntwo", Some(1)),
            (b"\x1b[4;1H\x1b[41m \x1b[m", Some(3)),
            (b"\x1b[4;1H\x1b[2K", Some(1)),
            (b"\x1b[2J", None),
            (b"\x1b[5;3Hx", Some(4)),
        ];
        let mut e = emulator(6);
        for (bytes, want) in steps {
            e.process(bytes);
            assert_eq!(
                e.last_content_row(),
                *want,
                "after {:?}",
                String::from_utf8_lossy(bytes)
            );
            // Asked again without a change: the kept answer, still right.
            assert_eq!(e.last_content_row(), *want);
            for from in 0..6 {
                assert_eq!(e.blank_from(from), want.is_none_or(|last| last < from));
            }
        }
    }

    #[test]
    fn a_resize_that_cuts_the_content_is_seen() {
        let mut e = emulator(6);
        e.process(b"\x1b[6;1Hbottom");
        assert_eq!(e.last_content_row(), Some(5));
        let size = |n| NonZeroU16::new(n).expect("a size");
        e.screen_mut().set_size(size(3), size(20));
        assert_eq!(
            e.last_content_row(),
            find_last_content_row(e.screen()),
            "the kept answer is dropped on a resize"
        );
    }
}
