//! The screen as styled runs, for a viewer that draws it itself (the web page): each row a list
//! of runs of cells that share colours and attributes, the cursor, and which screen shows.
//! Wide characters are one run cell that covers two columns; their continuation cells are left
//! out, so a run's text is what a person reads.

use super::Terminal;

/// A colour as the program set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Color {
    /// The terminal's own foreground or background.
    Default,
    /// One of the 256 indexed colours (0-15 the ANSI ones).
    Indexed(u8),
    /// A 24-bit colour.
    Rgb(u8, u8, u8),
}

/// What a run of cells looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Foreground colour.
    pub fg: Color,
    /// Background colour.
    pub bg: Color,
    /// Bold (SGR 1).
    pub bold: bool,
    /// Faint (SGR 2).
    pub dim: bool,
    /// Italic (SGR 3).
    pub italic: bool,
    /// Underlined (SGR 4).
    pub underline: bool,
    /// Colours swapped (SGR 7).
    pub inverse: bool,
}

impl Default for Style {
    fn default() -> Style {
        Style {
            fg: Color::Default,
            bg: Color::Default,
            bold: false,
            dim: false,
            italic: false,
            underline: false,
            inverse: false,
        }
    }
}

/// Cells of one style: their text and the columns they cover (a wide character covers two).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StyledRun {
    /// How the cells look.
    pub style: Style,
    /// Their characters.
    pub text: String,
    /// Columns covered.
    pub columns: u16,
}

/// The visible screen, styled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StyledScreen {
    /// Columns.
    pub cols: u16,
    /// Each row's runs, top to bottom.
    pub rows: Vec<Vec<StyledRun>>,
    /// Row and column of the cursor (0-based).
    pub cursor: (u16, u16),
    /// Whether the program hid the cursor.
    pub cursor_hidden: bool,
    /// Whether a full-screen program's alternate screen shows.
    pub alternate: bool,
}

impl Terminal {
    /// The visible screen as styled runs (see the module's header).
    pub fn styled_screen(&self) -> StyledScreen {
        let state = self.synced();
        let screen = state.parser.screen();
        let (rows, cols) = screen.size();
        let (rows, cols) = (rows.get(), cols.get());
        let styled_rows = (0..rows)
            .map(|row| {
                let mut runs: Vec<StyledRun> = Vec::new();
                for col in 0..cols {
                    let Some(cell) = screen.cell(row, col) else {
                        continue;
                    };
                    if cell.is_wide_continuation() {
                        continue;
                    }
                    let style = Style {
                        fg: color(cell.fgcolor()),
                        bg: color(cell.bgcolor()),
                        bold: cell.bold(),
                        dim: cell.dim(),
                        italic: cell.italic(),
                        underline: cell.underline(),
                        inverse: cell.inverse(),
                    };
                    let text = match cell.contents() {
                        "" => " ",
                        text => text,
                    };
                    let columns = if cell.is_wide() { 2 } else { 1 };
                    match runs.last_mut() {
                        Some(run) if run.style == style => {
                            run.text.push_str(text);
                            run.columns += columns;
                        }
                        _ => runs.push(StyledRun {
                            style,
                            text: text.to_owned(),
                            columns,
                        }),
                    }
                }
                runs
            })
            .collect();
        StyledScreen {
            cols,
            rows: styled_rows,
            cursor: screen.cursor_position(),
            cursor_hidden: screen.hide_cursor(),
            alternate: screen.alternate_screen(),
        }
    }
}

fn color(c: vt100::Color) -> Color {
    match c {
        vt100::Color::Default => Color::Default,
        vt100::Color::Idx(i) => Color::Indexed(i),
        vt100::Color::Rgb(r, g, b) => Color::Rgb(r, g, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen_of(bytes: &[u8]) -> StyledScreen {
        let mut t = Terminal::new(10, 3, 100, 1 << 20);
        t.feed(bytes);
        t.styled_screen()
    }

    fn texts(row: &[StyledRun]) -> Vec<&str> {
        row.iter().map(|r| r.text.as_str()).collect()
    }

    #[test]
    fn cells_of_one_style_are_one_run_and_each_change_starts_another() {
        let red = Style {
            fg: Color::Indexed(1),
            ..Style::default()
        };
        let bold_on_rgb = Style {
            bold: true,
            bg: Color::Rgb(1, 2, 3),
            ..Style::default()
        };
        for (bytes, want) in [
            (&b"plain"[..], vec![("plain     ", Style::default())]),
            (
                b"\x1b[31mab\x1b[0mc",
                vec![("ab", red), ("c       ", Style::default())],
            ),
            (
                b"\x1b[1;48;2;1;2;3mX\x1b[m",
                vec![("X", bold_on_rgb), ("         ", Style::default())],
            ),
        ] {
            let screen = screen_of(bytes);
            let got: Vec<(&str, Style)> = screen.rows[0]
                .iter()
                .map(|r| (r.text.as_str(), r.style))
                .collect();
            assert_eq!(got, want, "{bytes:?}");
            let columns: u16 = screen.rows[0].iter().map(|r| r.columns).sum();
            assert_eq!(columns, 10, "every row covers the width: {bytes:?}");
        }
    }

    #[test]
    fn a_wide_character_is_one_cell_of_two_columns() {
        let screen = screen_of("a界b".as_bytes());
        assert_eq!(texts(&screen.rows[0]), vec!["a界b      "]);
        assert_eq!(screen.rows[0][0].columns, 10);
        assert_eq!(screen.cursor, (0, 4));
    }

    #[test]
    fn the_cursor_and_the_alternate_screen_are_reported() {
        let screen = screen_of(b"\x1b[?1049h\x1b[2;3Hx\x1b[?25l");
        assert!(screen.alternate);
        assert!(screen.cursor_hidden);
        assert_eq!(screen.cursor, (1, 3));
        assert_eq!(texts(&screen.rows[1]), vec!["  x       "]);
        let plain = screen_of(b"ok");
        assert!(!plain.alternate && !plain.cursor_hidden);
    }
}
