//! A styled screen as HTML for the web page: one `<div>` a row, a `<span>` a run with its
//! colours resolved to CSS (inverse applied here, so the page needs no palette), the cursor as
//! a `cur` span. Everything the program printed is escaped: a session's output can never become
//! markup on the person's page.

use crate::screen::{Color, Style, StyledRun, StyledScreen};
use std::fmt::Write;
use unicode_width::UnicodeWidthChar;

/// The page's own foreground and background (the program's "default" colours).
const DEFAULT_FG: (u8, u8, u8) = (0xd4, 0xd4, 0xd4);
const DEFAULT_BG: (u8, u8, u8) = (0x1e, 0x1e, 0x1e);
/// The 16 ANSI colours (xterm's defaults).
const ANSI: [(u8, u8, u8); 16] = [
    (0x00, 0x00, 0x00),
    (0xcd, 0x00, 0x00),
    (0x00, 0xcd, 0x00),
    (0xcd, 0xcd, 0x00),
    (0x00, 0x00, 0xee),
    (0xcd, 0x00, 0xcd),
    (0x00, 0xcd, 0xcd),
    (0xe5, 0xe5, 0xe5),
    (0x7f, 0x7f, 0x7f),
    (0xff, 0x00, 0x00),
    (0x00, 0xff, 0x00),
    (0xff, 0xff, 0x00),
    (0x5c, 0x5c, 0xff),
    (0xff, 0x00, 0xff),
    (0x00, 0xff, 0xff),
    (0xff, 0xff, 0xff),
];

/// The RGB of an indexed colour: the ANSI 16, the 6x6x6 cube, then the 24 greys.
fn indexed(i: u8) -> (u8, u8, u8) {
    match i {
        0..=15 => ANSI[usize::from(i)],
        16..=231 => {
            let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            let i = i - 16;
            (level(i / 36), level(i / 6 % 6), level(i % 6))
        }
        _ => {
            let grey = 8 + (i - 232) * 10;
            (grey, grey, grey)
        }
    }
}

fn rgb(color: Color, default: (u8, u8, u8)) -> (u8, u8, u8) {
    match color {
        Color::Default => default,
        Color::Indexed(i) => indexed(i),
        Color::Rgb(r, g, b) => (r, g, b),
    }
}

/// The `style` and `class` attributes of a run (empty for the page's default look).
fn attributes(style: &Style) -> String {
    let (mut fg, mut bg) = (rgb(style.fg, DEFAULT_FG), rgb(style.bg, DEFAULT_BG));
    if style.inverse {
        std::mem::swap(&mut fg, &mut bg);
    }
    let mut css = String::new();
    if fg != DEFAULT_FG {
        let _ = write!(css, "color:#{:02x}{:02x}{:02x};", fg.0, fg.1, fg.2);
    }
    if bg != DEFAULT_BG {
        let _ = write!(css, "background:#{:02x}{:02x}{:02x};", bg.0, bg.1, bg.2);
    }
    let classes: Vec<&str> = [
        (style.bold, "b"),
        (style.dim, "d"),
        (style.italic, "i"),
        (style.underline, "u"),
    ]
    .into_iter()
    .filter_map(|(on, class)| on.then_some(class))
    .collect();
    let mut out = String::new();
    if !classes.is_empty() {
        let _ = write!(out, " class=\"{}\"", classes.join(" "));
    }
    if !css.is_empty() {
        let _ = write!(out, " style=\"{css}\"");
    }
    out
}

/// Appends `text` with `<`, `>`, `&` and quotes escaped.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

fn span(out: &mut String, attrs: &str, text: &str) {
    if text.is_empty() {
        return;
    }
    if attrs.is_empty() {
        escape_into(out, text);
    } else {
        let _ = write!(out, "<span{attrs}>");
        escape_into(out, text);
        out.push_str("</span>");
    }
}

/// One row's runs, with the cursor's cell (`cursor_col`) in its own `cur` span.
fn row_html(out: &mut String, runs: &[StyledRun], cursor_col: Option<u16>) {
    let mut col = 0u16;
    for run in runs {
        let attrs = attributes(&run.style);
        let inside = cursor_col.filter(|&c| c >= col && c < col + run.columns);
        let Some(cursor) = inside else {
            span(out, &attrs, &run.text);
            col += run.columns;
            continue;
        };
        // Split the run around the character the cursor is on.
        let (mut before, mut at, mut after) = (String::new(), String::new(), String::new());
        let mut c = col;
        for ch in run.text.chars() {
            let width = ch.width().unwrap_or(1).max(1) as u16;
            let part = if c + width <= cursor {
                &mut before
            } else if at.is_empty() {
                &mut at
            } else {
                &mut after
            };
            part.push(ch);
            c += width;
        }
        span(out, &attrs, &before);
        let _ = write!(out, "<span class=\"cur\">");
        span(out, &attrs, &at);
        out.push_str("</span>");
        span(out, &attrs, &after);
        col += run.columns;
    }
}

/// The screen's rows as HTML (see the module's header).
pub(crate) fn render(screen: &StyledScreen) -> String {
    let mut out = String::new();
    for (number, runs) in screen.rows.iter().enumerate() {
        let cursor_col = (!screen.cursor_hidden && usize::from(screen.cursor.0) == number)
            .then_some(screen.cursor.1);
        out.push_str("<div class=\"row\">");
        row_html(&mut out, runs, cursor_col);
        out.push_str("</div>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, style: Style) -> StyledRun {
        StyledRun {
            style,
            text: text.to_owned(),
            columns: text.chars().map(|c| c.width().unwrap_or(1) as u16).sum(),
        }
    }

    fn one_row(runs: Vec<StyledRun>, cursor: (u16, u16), hidden: bool) -> String {
        render(&StyledScreen {
            cols: 10,
            rows: vec![runs],
            cursor,
            cursor_hidden: hidden,
            alternate: false,
        })
    }

    #[test]
    fn output_is_escaped_and_styled() {
        let plain = Style::default();
        let red_bold = Style {
            fg: Color::Indexed(1),
            bold: true,
            ..plain
        };
        let inverse = Style {
            inverse: true,
            ..plain
        };
        let cube = Style {
            bg: Color::Indexed(196),
            ..plain
        };
        for (runs, want) in [
            (
                vec![run("<script>&'\"", plain)],
                "<div class=\"row\">&lt;script&gt;&amp;&#39;&quot;</div>",
            ),
            (
                vec![run("err", red_bold)],
                "<div class=\"row\"><span class=\"b\" style=\"color:#cd0000;\">err</span></div>",
            ),
            (
                vec![run("sel", inverse)],
                "<div class=\"row\"><span style=\"color:#1e1e1e;background:#d4d4d4;\">sel</span></div>",
            ),
            (
                vec![run("  ", cube)],
                "<div class=\"row\"><span style=\"background:#ff0000;\">  </span></div>",
            ),
        ] {
            assert_eq!(one_row(runs, (0, 0), true), want);
        }
    }

    #[test]
    fn the_cursor_is_its_own_span_unless_hidden() {
        let plain = Style::default();
        for (runs, cursor, hidden, want) in [
            (
                vec![run("abc", plain)],
                (0, 1),
                false,
                "<div class=\"row\">a<span class=\"cur\">b</span>c</div>",
            ),
            (
                vec![run("a界b", plain)],
                (0, 1),
                false,
                "<div class=\"row\">a<span class=\"cur\">界</span>b</div>",
            ),
            (
                vec![run("a界b", plain)],
                (0, 3),
                false,
                "<div class=\"row\">a界<span class=\"cur\">b</span></div>",
            ),
            (
                vec![run("abc", plain)],
                (0, 1),
                true,
                "<div class=\"row\">abc</div>",
            ),
            (
                vec![run("abc", plain)],
                (1, 1),
                false,
                "<div class=\"row\">abc</div>",
            ),
        ] {
            assert_eq!(one_row(runs, cursor, hidden), want, "{cursor:?}");
        }
    }

    #[test]
    fn indexed_colours_follow_xterm() {
        for (index, want) in [
            (0, (0, 0, 0)),
            (9, (0xff, 0, 0)),
            (16, (0, 0, 0)),
            (196, (0xff, 0, 0)),
            (231, (0xff, 0xff, 0xff)),
            (232, (8, 8, 8)),
            (255, (238, 238, 238)),
        ] {
            assert_eq!(indexed(index), want, "{index}");
        }
    }
}
