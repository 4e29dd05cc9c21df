//! Views over the session's terminal model: `Read`'s pages of history or the screen, the
//! lines of a send's or a job's output region, the startup text (MOTD) and a watcher's replay.
//! Pure: each reads the terminal and returns text.

use super::{ReadOutcome, ReadQuery};
use crate::render;
use crate::screen::{Position, Terminal};

/// Most lines a watcher may ask to have replayed.
const MAX_REPLAY: u32 = 10_000;

/// A page of history (or the visible screen), capped, with its metadata line.
pub(super) fn read(terminal: &Terminal, q: ReadQuery) -> ReadOutcome {
    let total = terminal.total_lines();
    let first = terminal.first_line().min(total + 1);
    if q.screen {
        let lines = terminal.visible_screen();
        let meta = |_| {
            vec![format!(
                "[screen: {} rows; history has {total} lines]",
                lines.len()
            )]
        };
        let (capped, _) =
            render::lines_with_meta(&lines, "(empty screen)", meta, q.max_result_bytes);
        return ReadOutcome {
            text: capped.body,
            total_lines: total,
            first_line: first,
            truncated: capped.truncated,
            rendered: capped.rendered,
            ..ReadOutcome::default()
        };
    }
    let (begin, end) = page_bounds(total, first, &q);
    let lines = if begin <= end && end >= 1 {
        terminal.lines(begin, end)
    } else {
        Vec::new()
    };
    let retained = retained_note(first, total, asked_begin(total, &q), lines.is_empty());
    if lines.is_empty() {
        let meta = vec![format!("[lines: none of {total}{retained}]")];
        let capped = render::with_meta("", "(no retained output)", &meta, q.max_result_bytes);
        return ReadOutcome {
            total_lines: total,
            first_line: first,
            rendered: capped.rendered,
            ..ReadOutcome::default()
        };
    }
    let meta = |dropped: usize| {
        vec![format!(
            "[lines: {}-{end} of {total}{retained}]",
            begin + dropped as u64
        )]
    };
    let (capped, dropped) =
        render::lines_with_meta(&lines, "(no retained output)", meta, q.max_result_bytes);
    ReadOutcome {
        text: capped.body,
        total_lines: total,
        first_line: first,
        line_begin: begin + dropped as u64,
        line_end: end,
        truncated: capped.truncated,
        rendered: capped.rendered,
        command: None,
    }
}

/// The first and last line of a page (docs/api.md): `from_line` pages forward by
/// absolute number; otherwise the page ends `offset` lines before the newest. Empty when
/// `begin > end`.
fn page_bounds(total: u64, first: u64, q: &ReadQuery) -> (u64, u64) {
    match q.from_line {
        Some(from) => (from.max(first), from.saturating_add(q.count - 1).min(total)),
        None => {
            let end = total.saturating_sub(q.offset);
            (first.max(end.saturating_sub(q.count - 1)).max(1), end)
        }
    }
}

/// The first line a page asked for, before retention bounded it.
fn asked_begin(total: u64, q: &ReadQuery) -> u64 {
    match q.from_line {
        Some(from) => from,
        None => total
            .saturating_sub(q.offset)
            .saturating_sub(q.count - 1)
            .max(1),
    }
}

/// What `[lines: …]` adds once the history bounds dropped old lines (`first > 1`) and the page
/// is `empty` or was cut by them (it asked for lines from `asked` on): where retained history
/// lies, so a model paging back knows where to look (docs/api.md).
fn retained_note(first: u64, total: u64, asked: u64, empty: bool) -> String {
    let dropped_some = first > 1;
    if !dropped_some || !(empty || asked < first) {
        return String::new();
    }
    if first > total {
        "; none retained".to_owned()
    } else {
        format!("; retained {first}-{total}")
    }
}

/// Lines from `start` up to `end` (the end line only when the cursor had left column 0),
/// trailing blank lines dropped. `end_line` is the end line as the command-end mark found it
/// (`MarkEvent::line`): when known, it stands for the end line, which the prompt drawn after the
/// mark may have overwritten (zsh) or extended (bash, fish) since.
pub(super) fn region_lines(
    terminal: &Terminal,
    start: u64,
    end: Position,
    end_line: Option<&str>,
) -> Vec<String> {
    if end.col == 0 && end.line <= start {
        return Vec::new();
    }
    let mut lines = match end_line {
        Some(text) if end.col > 0 => {
            let mut lines = terminal.lines(start, end.line - 1);
            if end.line >= start {
                lines.push(text.to_owned());
            }
            lines
        }
        _ => {
            let last = if end.col == 0 { end.line - 1 } else { end.line };
            terminal.lines(start, last)
        }
    };
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// The first and last line of the region `region_lines` would give, without rendering it:
/// `None` when it holds nothing.
pub(super) fn region_extent(
    terminal: &Terminal,
    start: u64,
    end: Position,
    end_line: Option<&str>,
) -> Option<(u64, u64)> {
    if end.col == 0 && end.line <= start {
        return None;
    }
    let mut last = if end.col == 0 { end.line - 1 } else { end.line };
    // Trailing blank lines are not the region's.
    while last >= start.max(1) {
        let text = match end_line {
            Some(text) if end.col > 0 && last == end.line => text.to_owned(),
            _ => terminal.lines(last, last).pop().unwrap_or_default(),
        };
        if !text.is_empty() {
            return Some((start, last));
        }
        last -= 1;
    }
    None
}

/// A send's viewport: its output region, or the visible screen while a full-screen program
/// shows.
pub(super) fn viewport(
    terminal: &Terminal,
    start: u64,
    end: Position,
    end_line: Option<&str>,
) -> Vec<String> {
    if terminal.alternate_screen() {
        terminal.visible_screen()
    } else {
        region_lines(terminal, start, end, end_line)
    }
}

/// The lines the newest command-end marks found the cursor on (`MarkEvent::line`), by the
/// mark's position: a send settles on an end mark (or, typing ahead, also reports the end of
/// the command that ran before it; a pure wait reports one that ended unwatched), and its
/// viewport ends with that line as the mark found it, not as the prompt redrew it.
#[derive(Debug, Default)]
pub(super) struct EndLines(std::collections::VecDeque<(Position, String)>);

impl EndLines {
    /// Ends kept: a send needs at most two (the one it settles on, the one it typed ahead of).
    const KEEP: usize = 4;

    /// A command-end mark at `at` found the cursor's line reading `text`.
    pub(super) fn push(&mut self, at: Position, text: String) {
        if self.0.len() == Self::KEEP {
            self.0.pop_front();
        }
        self.0.push_back((at, text));
    }

    /// The line the newest command-end mark at `at` found, if it is kept.
    pub(super) fn at(&self, at: Position) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(p, _)| *p == at)
            .map(|(_, text)| text.as_str())
    }
}

/// What came before the prompt line (`prompt_on_cursor_line`: an integrated shell at its
/// first prompt, whose prompt is the cursor's line).
pub(super) fn motd(terminal: &Terminal, prompt_on_cursor_line: bool) -> String {
    let cursor = terminal.cursor();
    let upto = if prompt_on_cursor_line {
        cursor.line.saturating_sub(1)
    } else {
        cursor.line
    };
    let mut lines = terminal.lines(1, upto);
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

/// The newest `replay` lines (at most `MAX_REPLAY`) a watcher starts with.
pub(super) fn replay(terminal: &Terminal, replay: u32) -> Vec<String> {
    if replay == 0 {
        return Vec::new();
    }
    let total = terminal.total_lines();
    let from = total.saturating_sub(u64::from(replay.min(MAX_REPLAY))) + 1;
    terminal.lines(from, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terminal(output: &str) -> Terminal {
        let mut t = Terminal::new(80, 5, 1000, 1 << 20);
        t.feed(output.as_bytes());
        t
    }

    fn query(offset: u64, count: u64, from_line: Option<u64>) -> ReadQuery {
        ReadQuery {
            offset,
            count,
            from_line,
            screen: false,
            max_result_bytes: 65536,
            command_id: None,
        }
    }

    #[test]
    fn pages_follow_the_contract_formula() {
        // (total, first retained, offset, count, from_line) -> (begin, end)
        let cases = [
            ((100, 1, 0, 10, None), (91, 100)),
            ((100, 1, 5, 10, None), (86, 95)),
            ((100, 1, 0, 500, None), (1, 100)),
            ((100, 60, 0, 500, None), (60, 100)),
            ((100, 1, 200, 10, None), (1, 0)),
            ((100, 1, 0, 10, Some(95)), (95, 100)),
            ((100, 50, 0, 10, Some(20)), (50, 29)),
            ((0, 1, 0, 10, None), (1, 0)),
        ];
        for ((total, first, offset, count, from), want) in cases {
            let got = page_bounds(total, first, &query(offset, count, from));
            assert_eq!(
                got, want,
                "total={total} first={first} offset={offset} count={count} from={from:?}"
            );
        }
    }

    #[test]
    fn reads_name_their_lines() {
        let t = terminal("one\r\ntwo\r\nthree\r\n");
        let page = read(&t, query(0, 2, None));
        assert_eq!((page.line_begin, page.line_end), (2, 3));
        assert_eq!(page.text, "two\nthree");
        assert!(
            page.rendered.contains("[lines: 2-3 of 3]"),
            "{}",
            page.rendered
        );
        let none = read(&t, query(10, 2, None));
        assert_eq!(none.text, "");
        assert!(
            none.rendered.contains("[lines: none of 3]"),
            "{}",
            none.rendered
        );
    }

    #[test]
    fn the_retained_range_is_named_where_the_bounds_cut_a_page() {
        // (first retained, total, first line asked for, page empty) -> note
        let cases = [
            ((1, 100, 1, false), ""),
            ((1, 100, 500, true), ""),
            ((60, 100, 70, false), ""),
            ((60, 100, 20, false), "; retained 60-100"),
            ((60, 100, 1, true), "; retained 60-100"),
            ((60, 100, 500, true), "; retained 60-100"),
            ((101, 100, 1, true), "; none retained"),
        ];
        for ((first, total, asked, empty), want) in cases {
            assert_eq!(
                retained_note(first, total, asked, empty),
                want,
                "first={first} total={total} asked={asked} empty={empty}"
            );
        }
    }

    #[test]
    fn a_page_before_retained_history_says_where_it_starts() {
        let mut t = Terminal::new(80, 5, 100, 1 << 20);
        let output: String = (1..=300).map(|n| format!("{n}\r\n")).collect();
        t.feed(output.as_bytes());
        let first = t.first_line();
        assert!(first > 1, "the 100-line bound dropped lines");
        let total = t.total_lines();
        let none = read(&t, query(0, 1, Some(2)));
        assert_eq!(none.text, "");
        assert!(
            none.rendered.ends_with(&format!(
                "[lines: none of {total}; retained {first}-{total}]"
            )),
            "{}",
            none.rendered
        );
        let cut = read(&t, query(0, 10, Some(first - 5)));
        assert_eq!(cut.line_begin, first);
        assert!(
            cut.rendered.ends_with(&format!(
                "[lines: {first}-{} of {total}; retained {first}-{total}]",
                first + 4
            )),
            "{}",
            cut.rendered
        );
        let inside = read(&t, query(0, 10, None));
        assert!(
            inside
                .rendered
                .ends_with(&format!("[lines: {}-{total} of {total}]", total - 9)),
            "{}",
            inside.rendered
        );
    }

    /// The region from the start mark to the end mark of `stream`, fed as one read (the prompt
    /// drawn after the end mark is in the terminal before anything reads it), at `cols`.
    fn region_of(stream: &[u8], cols: u16) -> Vec<String> {
        use crate::marks::Mark;
        let mut t = Terminal::new(cols, 5, 1000, 1 << 20);
        t.feed(stream);
        let marks = t.take_marks();
        let start = marks.iter().find(|e| e.mark == Mark::CommandStart).unwrap();
        let end = marks
            .iter()
            .find(|e| matches!(e.mark, Mark::CommandEnd(_)))
            .unwrap();
        region_lines(&t, start.at.line, end.at, end.line.as_deref())
    }

    #[test]
    fn output_without_a_final_newline_ends_where_its_end_mark_found_it() {
        // (shell, what it wrote for `printf 002`, as read from a PTY): the prompt after the end
        // mark shares the output's row (bash), returns to its start and overwrites it (zsh's
        // PROMPT_CR), or follows a missing-newline sign that wraps onto the next row (fish).
        let cases: &[(&str, &[u8])] = &[
            (
                "bash",
                b"$ printf 002\r\n\x1b[?2004l\r\x1b]133;C\x07002\x1b]133;D;0\x07\x1b]7;file://vm/root\x07\x1b[?2004h\x1b]133;A\x07root@vm:~# \x1b]133;B\x07",
            ),
            (
                "zsh",
                b"vm# printf 002\x1b[?1l\x1b>\x1b[?2004l\r\r\n\x1b]133;C\x07002\x1b]133;D;0\x07\x1b]7;file://vm/root\x07\r\x1b[0m\x1b[27m\x1b[24m\x1b[J\x1b]133;A\x07vm# \x1b]133;B\x07\x1b[K\x1b[?1h\x1b=\x1b[?2004h",
            ),
            (
                "fish",
                b"# printf 002\r\n\x1b]133;C\x07\x1b[?2004l\x1b]0;printf 002\x07\x1b[30m\x1b(B\x1b[m\r002\x1b]133;D;0\x07\x1b[2m\xe2\x8f\x8e\x1b(B\x1b[m                                       \r\xe2\x8f\x8e \r\x1b[K\x1b]133;A\x07\x1b]7;file://vm/root\x07\x1b[?2004h\x1b]0;~\x07root@vm ~# \x1b[K",
            ),
        ];
        for (shell, stream) in cases {
            assert_eq!(region_of(stream, 40), ["002"], "{shell}");
        }
        // A last line longer than the screen is wide, and lines before it, stay whole.
        let long = "x".repeat(50);
        let stream = format!(
            "$ cmd\r\n\x1b]133;C\x07first\r\n{long}\x1b]133;D;0\x07\x1b]133;A\x07$ \x1b]133;B\x07"
        );
        assert_eq!(region_of(stream.as_bytes(), 40), ["first", long.as_str()]);
        let stream = format!("$ cmd\r\n\x1b]133;C\x07{long}\x1b]133;D;0\x07\r\x1b[J$ ");
        assert_eq!(region_of(stream.as_bytes(), 40), [long.as_str()]);
        // Output that ends with a newline is as before: the prompt's line is not the output's.
        let stream: &[u8] =
            b"$ cmd\r\n\x1b]133;C\x07002\r\n\x1b]133;D;0\x07\r\x1b[J\x1b]133;A\x07$ \x1b]133;B\x07";
        assert_eq!(region_of(stream, 40), ["002"]);
    }

    #[test]
    fn end_lines_are_found_by_their_mark() {
        let at = |line, col| Position { line, col };
        let mut ends = EndLines::default();
        for n in 1..=6 {
            ends.push(at(n, 3), format!("line {n}"));
        }
        assert_eq!(ends.at(at(6, 3)), Some("line 6"));
        assert_eq!(ends.at(at(3, 3)), Some("line 3"));
        assert_eq!(ends.at(at(2, 3)), None, "only the newest are kept");
        assert_eq!(ends.at(at(6, 0)), None);
        ends.push(at(6, 3), "again".into());
        assert_eq!(
            ends.at(at(6, 3)),
            Some("again"),
            "the newest end at a place"
        );
    }

    #[test]
    fn regions_end_before_an_untouched_cursor_line() {
        let t = terminal("$ ls\r\na\r\nb\r\n\r\n");
        let at = |line, col| Position { line, col };
        assert_eq!(
            region_lines(&t, 2, at(5, 0), None),
            ["a", "b"],
            "blank tail dropped"
        );
        assert_eq!(
            region_lines(&t, 2, at(3, 1), None),
            ["a", "b"],
            "cursor off column 0"
        );
        assert_eq!(region_lines(&t, 2, at(2, 0), None), Vec::<String>::new());
        assert_eq!(replay(&t, 1), ["b"]);
        assert_eq!(replay(&t, 0), Vec::<String>::new());
        assert_eq!(motd(&terminal("hello\r\n$ "), true), "hello");
        assert_eq!(motd(&terminal("hello\r\n>>> "), false), "hello\n>>>");
    }
}
