//! The text of a run of screen rows, read in one pass. vt100's way to read a single row
//! (`contents_between` with one row, `rows().nth(row)`) renders every row above it into a
//! string first: with the cursor at the bottom of a 40-row screen, each read of the cursor's
//! line rendered 40 rows, and reading the lines at a send's marks was most of what the daemon
//! did for a send of `true` beside HTTP/2.

/// The text of rows `first..=last` as vt100 renders a row (blanks between characters kept,
/// blank cells after the last one not): a row that does not wrap into the next ends in a
/// newline, except `last`.
pub(super) fn rows_text(screen: &vt100::Screen, first: u16, last: u16) -> String {
    // With the end one row past `last` at column 0, vt100 skips to `first` without rendering,
    // writes `first..=last` in full, and nothing of the row after.
    let mut text = screen.contents_between(first, 0, last.saturating_add(1), 0);
    if text.ends_with('\n') {
        text.pop();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::rows_text;
    use std::num::NonZeroU16;

    fn parser(rows: u16, cols: u16) -> vt100::Parser {
        let size = |n| NonZeroU16::new(n).expect("a size of at least 1");
        vt100::Parser::new(size(rows), size(cols), 0)
    }

    /// vt100's own rendering of row `row`, the slow way.
    fn reference(screen: &vt100::Screen, row: u16) -> String {
        let cols = screen.size().1.get();
        screen
            .rows(0, cols)
            .nth(usize::from(row))
            .unwrap_or_default()
    }

    #[test]
    fn each_row_reads_as_vt100_renders_it() {
        // (what the screen was fed, rows, cols)
        let cases: &[(&[u8], u16, u16)] = &[
            (b"", 3, 10),
            (b"one\r\ntwo\r\n\r\nfour", 4, 10),
            // A line wrapped over three rows, then a short one; blanks inside kept.
            (b"abcdefghijklmnopqrstuvw\r\nx  y", 5, 10),
            // Wide characters (two cells each), one wrapped to the next row.
            ("日本語のテキスト\r\nok".as_bytes(), 4, 7),
            // Scrolled: the cursor ends on the last row.
            (b"1\r\n2\r\n3\r\n4\r\n5\r\n6", 3, 10),
            // Text placed away from column 1, trailing blanks after it.
            (b"\x1b[2;5Hmid\x1b[3;1Hend   ", 3, 12),
        ];
        for (i, &(input, rows, cols)) in cases.iter().enumerate() {
            let mut parser = parser(rows, cols);
            parser.process(input);
            let screen = parser.screen();
            for row in 0..rows {
                assert_eq!(
                    rows_text(screen, row, row),
                    reference(screen, row),
                    "case {i} row {row}"
                );
            }
        }
    }

    #[test]
    fn a_run_of_rows_joins_wrapped_rows_and_breaks_the_others() {
        let mut parser = parser(5, 4);
        // "abcdef" wraps from row 0 to row 1; "gh" is its own line on row 2.
        parser.process(b"abcdef\r\ngh");
        let screen = parser.screen();
        // (first, last, text)
        let cases: &[(u16, u16, &str)] = &[
            (0, 1, "abcdef"),
            (0, 2, "abcdef\ngh"),
            (1, 2, "ef\ngh"),
            (2, 4, "gh\n\n"),
            (4, 4, ""),
        ];
        for &(first, last, text) in cases {
            assert_eq!(
                rows_text(screen, first, last),
                text,
                "rows {first}..={last}"
            );
        }
    }
}
