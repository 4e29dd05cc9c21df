//! `Search`: a regular expression over a session's retained history and screen (or one
//! command's output), answered like `grep -n` with the command each match belongs to. Pure: it
//! reads the terminal and the records.

use super::records::CommandBook;
use crate::render;
use crate::screen::Terminal;
use std::collections::VecDeque;

/// What `Search` asks for.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    /// The compiled pattern (case folding already in it).
    pub pattern: regex::Regex,
    /// Only this command's output (`c12` or `last`).
    pub command_id: Option<String>,
    /// Only lines from this one on.
    pub from_line: Option<u64>,
    /// Matches kept: the newest this many.
    pub max_matches: usize,
    /// Lines shown before and after each match.
    pub context: u64,
    /// Cap on the rendered result.
    pub max_result_bytes: usize,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchMatch {
    /// Its line number.
    pub line: u64,
    /// Its text.
    pub text: String,
    /// The command whose output holds it.
    pub command_id: Option<String>,
}

/// What `Search` found.
#[derive(Debug, Clone, Default)]
pub struct SearchOutcome {
    /// The matches kept, in line order (those the byte cap left in `rendered`).
    pub matches: Vec<SearchMatch>,
    /// Every match in the range, kept or not.
    pub total_matches: u64,
    /// `rendered` was cut to fit.
    pub truncated: bool,
    /// `grep -n`-like lines, then `[matches: K of N]`.
    pub rendered: String,
}

/// Runs `q` over `terminal`'s retained lines.
pub(crate) fn search(
    terminal: &Terminal,
    book: &CommandBook,
    q: &SearchQuery,
) -> crate::error::Result<SearchOutcome> {
    let total = terminal.total_lines();
    let (mut lo, mut hi) = (terminal.first_line().max(1), total);
    if let Some(id) = &q.command_id {
        let r = book
            .find(id)
            .ok_or_else(|| crate::error::Error::command_not_found(id))?;
        match (r.running(), r.first_line, r.last_line) {
            (true, ..) => lo = lo.max(r.start.0),
            (false, Some(first), Some(last)) => (lo, hi) = (lo.max(first), hi.min(last)),
            // A command that printed nothing has nothing to find.
            (false, ..) => hi = 0,
        }
    }
    if let Some(from) = q.from_line {
        lo = lo.max(from);
    }
    // Only the newest max_matches line numbers are held during the scan; their texts and
    // commands are looked up once it is done (a pattern can match every line of 16 MiB).
    let mut newest: VecDeque<u64> = VecDeque::new();
    let mut found = 0u64;
    if lo <= hi {
        terminal.visit_lines(lo, hi, |n, text| {
            if q.pattern.is_match(text) {
                found += 1;
                if newest.len() == q.max_matches {
                    newest.pop_front();
                }
                newest.push_back(n);
            }
        });
    }
    let kept = kept_matches(terminal, book, &newest);
    let (lines, is_match) = with_context(terminal, &kept, q.context, (lo, hi));
    let meta = |_| {
        let left_out = if (kept.len() as u64) < found {
            ", newest kept"
        } else {
            ""
        };
        vec![format!("[matches: {} of {found}{left_out}]", kept.len())]
    };
    let (capped, dropped) =
        render::lines_with_meta(&lines, "(no matches)", meta, q.max_result_bytes);
    let cut = is_match[..dropped].iter().filter(|m| **m).count();
    Ok(SearchOutcome {
        matches: kept.into_iter().skip(cut).collect(),
        total_matches: found,
        truncated: capped.truncated,
        rendered: capped.rendered,
    })
}

/// The matches on lines `numbers` (ascending), with their texts and commands.
fn kept_matches(
    terminal: &Terminal,
    book: &CommandBook,
    numbers: &VecDeque<u64>,
) -> Vec<SearchMatch> {
    let (Some(&first), Some(&last)) = (numbers.front(), numbers.back()) else {
        return Vec::new();
    };
    let mut kept = Vec::with_capacity(numbers.len());
    let mut wanted = numbers.iter().peekable();
    terminal.visit_lines(first, last, |n, text| {
        if wanted.next_if_eq(&&n).is_some() {
            kept.push(SearchMatch {
                line: n,
                text: text.to_owned(),
                command_id: book.holding_line(n).map(|r| r.id()),
            });
        }
    });
    kept
}

/// The rendered lines: each match (`1234: text  (c12)`) with `context` lines around it
/// (`1233- text`), groups that do not touch split by `--`; and which lines are matches.
fn with_context(
    terminal: &Terminal,
    kept: &[SearchMatch],
    context: u64,
    (lo, hi): (u64, u64),
) -> (Vec<String>, Vec<bool>) {
    let mut lines = Vec::new();
    let mut is_match = Vec::new();
    let mut shown_to = 0u64;
    let mut i = 0;
    while i < kept.len() {
        // A group: matches whose context windows touch.
        let first = kept[i].line.saturating_sub(context).max(lo);
        let mut j = i;
        while j + 1 < kept.len()
            && kept[j + 1].line.saturating_sub(context) <= kept[j].line + context + 1
        {
            j += 1;
        }
        let last = (kept[j].line + context).min(hi);
        if context > 0 && shown_to > 0 && first > shown_to + 1 {
            lines.push("--".to_owned());
            is_match.push(false);
        }
        let texts = if context > 0 {
            terminal.lines(first, last)
        } else {
            Vec::new()
        };
        let mut next = i;
        for n in first..=last {
            if next <= j && kept[next].line == n {
                let m = &kept[next];
                let owner = m
                    .command_id
                    .as_ref()
                    .map(|c| format!("  ({c})"))
                    .unwrap_or_default();
                lines.push(format!("{n}: {}{owner}", m.text));
                is_match.push(true);
                next += 1;
            } else if let Some(text) = texts.get((n - first) as usize) {
                lines.push(format!("{n}- {text}"));
                is_match.push(false);
            }
        }
        shown_to = last;
        i = j + 1;
    }
    (lines, is_match)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terminal(lines: &[&str]) -> Terminal {
        let mut t = Terminal::new(40, 5, 10_000, 1 << 20);
        for l in lines {
            t.feed(format!("{l}\r\n").as_bytes());
        }
        t
    }

    fn query(pattern: &str, context: u64, max_matches: usize) -> SearchQuery {
        SearchQuery {
            pattern: regex::Regex::new(pattern).unwrap(),
            command_id: None,
            from_line: None,
            max_matches,
            context,
            max_result_bytes: 1 << 20,
        }
    }

    #[test]
    fn matches_render_like_grep_with_their_context() {
        let t = terminal(&[
            "a",
            "error one",
            "b",
            "c",
            "d",
            "e",
            "error two",
            "f",
            "error three",
        ]);
        let book = CommandBook::default();
        let cases = [
            (
                query("error", 0, 100),
                "2: error one\n7: error two\n9: error three\n[matches: 3 of 3]",
            ),
            (
                query("error", 1, 100),
                "1- a\n2: error one\n3- b\n--\n6- e\n7: error two\n8- f\n9: error three\n[matches: 3 of 3]",
            ),
            (
                query("error", 0, 2),
                "7: error two\n9: error three\n[matches: 2 of 3, newest kept]",
            ),
            (
                query("(?i)ERROR T", 0, 100),
                "7: error two\n9: error three\n[matches: 2 of 2]",
            ),
            (query("nothing", 2, 100), "(no matches)\n[matches: 0 of 0]"),
        ];
        for (q, want) in cases {
            let got = search(&t, &book, &q).unwrap();
            assert_eq!(got.rendered, want, "{:?}", q.pattern);
            let is_match = |l: &&str| {
                l.split_once(": ")
                    .is_some_and(|(n, _)| n.parse::<u64>().is_ok())
            };
            assert_eq!(
                got.matches.len(),
                got.rendered.lines().filter(is_match).count()
            );
        }
    }

    #[test]
    fn a_cap_keeps_the_newest_matches_and_says_so() {
        let lines: Vec<String> = (0..50)
            .map(|i| format!("hit {i:02} {}", "x".repeat(30)))
            .collect();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let t = terminal(&refs);
        let mut q = query("hit", 0, 100);
        q.max_result_bytes = 200;
        let got = search(&t, &CommandBook::default(), &q).unwrap();
        assert!(
            got.truncated && got.rendered.len() <= 200,
            "{}",
            got.rendered
        );
        assert_eq!(got.total_matches, 50);
        assert_eq!(got.matches.last().unwrap().line, 50);
        assert!(got.matches.len() < 50 && got.rendered.contains("hit 49"));
        assert!(
            got.rendered
                .ends_with("[matches: 50 of 50]\n[output truncated]"),
            "{}",
            got.rendered
        );
    }

    #[test]
    fn a_range_starts_at_from_line_and_an_unknown_command_is_an_error() {
        let t = terminal(&["x1", "x2", "x3"]);
        let book = CommandBook::default();
        let mut q = query("x", 0, 100);
        q.from_line = Some(2);
        assert_eq!(
            search(&t, &book, &q).unwrap().rendered,
            "2: x2\n3: x3\n[matches: 2 of 2]"
        );
        q.command_id = Some("c4".into());
        let error = search(&t, &book, &q).unwrap_err().to_string();
        assert!(error.contains("command_id \"c4\""), "{error}");
    }
}
