//! Views over a session's command records: `Commands`' page of records, and `Read`'s page of
//! one command's output. Pure: each reads the terminal and the records and returns text.

use super::records::{CommandBook, CommandRecord, RenderContext, render_line};
use super::{ReadOutcome, view};
use crate::render;
use crate::screen::{Position, Terminal};

/// Records a `Commands` page holds unless asked otherwise.
pub const DEFAULT_COMMANDS: u64 = 100;

/// What `Commands` asks for.
#[derive(Debug, Clone, Copy)]
pub struct CommandsQuery {
    /// Newest-relative offset: 0 ends the page at the newest record.
    pub offset: u64,
    /// Records wanted.
    pub count: u64,
    /// Cap on the rendered result.
    pub max_result_bytes: usize,
}

/// One command as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    /// `c12`.
    pub id: String,
    /// The command line.
    pub command: String,
    /// The working directory at its start.
    pub cwd: String,
    /// Milliseconds since the epoch.
    pub started_unix_ms: i64,
    /// Unset while it runs.
    pub ended_unix_ms: Option<i64>,
    /// Unset while it runs and for a refused line.
    pub exit_code: Option<i32>,
    /// The shell refused the line.
    pub refused: bool,
    /// History lines of its output (while it runs: up to the newest so far).
    pub first_line: Option<u64>,
    /// See `first_line`.
    pub last_line: Option<u64>,
    /// Raw bytes of output between its marks (so far, while it runs).
    pub output_bytes: u64,
    /// False once the history bounds dropped its first line.
    pub output_retained: bool,
    /// `agent` or `person`.
    pub typed_by: &'static str,
    /// Its line as `Commands` renders it.
    pub rendered: String,
}

/// A page of records.
#[derive(Debug, Clone, Default)]
pub struct CommandsOutcome {
    /// Oldest first, the newest last.
    pub commands: Vec<CommandInfo>,
    /// Records the session holds.
    pub total: u64,
    /// The rendered text was cut to fit (its newest lines kept).
    pub truncated: bool,
    /// One line per record, then `[commands: A-B of N]`.
    pub rendered: String,
}

/// Everything about the session a record's view needs besides the record.
pub(crate) struct Viewed<'a> {
    pub(crate) terminal: &'a Terminal,
    pub(crate) now_ms: i64,
    pub(crate) home: Option<&'a str>,
}

impl Viewed<'_> {
    /// The record's output region: `(first, last)` history lines and where it ends.
    fn region(&self, r: &CommandRecord) -> Option<(u64, u64, Position)> {
        match r.end_position() {
            Some(end) => Some((r.first_line?, r.last_line?, end)),
            None => {
                // Running: from its start up to the newest line it printed so far.
                let cursor = self.terminal.cursor();
                let printed = self.terminal.output_bytes() > r.start_byte;
                let last = if cursor.col == 0 {
                    cursor.line.saturating_sub(1)
                } else {
                    cursor.line
                };
                (printed && last >= r.start.0).then_some((r.start.0, last, cursor))
            }
        }
    }

    /// The record as the API shows it.
    pub(crate) fn info(&self, r: &CommandRecord) -> CommandInfo {
        let region = self.region(r);
        let output_bytes = match r.running() {
            true => self.terminal.output_bytes().saturating_sub(r.start_byte),
            false => r.output_bytes,
        };
        let ctx = RenderContext {
            now_ms: self.now_ms,
            home: self.home,
            printed: r.running() && region.is_some(),
        };
        CommandInfo {
            id: r.id(),
            command: r.command.clone(),
            cwd: r.cwd.clone(),
            started_unix_ms: r.started_unix_ms,
            ended_unix_ms: r.ended_unix_ms,
            exit_code: r.exit_code,
            refused: r.refused,
            first_line: region.map(|g| g.0),
            last_line: region.map(|g| g.1),
            output_bytes,
            output_retained: region.is_none_or(|g| g.0 >= self.terminal.first_line()),
            typed_by: r.typed_by.name(),
            rendered: render_line(r, &ctx),
        }
    }
}

/// `Commands`: records newest-relative, newest last.
pub(crate) fn list(book: &CommandBook, v: &Viewed<'_>, q: CommandsQuery) -> CommandsOutcome {
    let records = book.records();
    let total = records.len() as u64;
    let end = total.saturating_sub(q.offset);
    let begin = end.saturating_sub(q.count.max(1));
    let commands: Vec<CommandInfo> = records
        .range(begin as usize..end as usize)
        .map(|r| v.info(r))
        .collect();
    let lines: Vec<String> = commands.iter().map(|c| c.rendered.clone()).collect();
    let meta = |dropped: usize| match commands.len() {
        0 => vec![format!("[commands: none of {total}]")],
        _ => vec![format!(
            "[commands: {}-{end} of {total}]",
            begin + 1 + dropped as u64
        )],
    };
    let (capped, dropped) =
        render::lines_with_meta(&lines, "(no commands)", meta, q.max_result_bytes);
    CommandsOutcome {
        commands: commands.into_iter().skip(dropped).collect(),
        total,
        truncated: capped.truncated,
        rendered: capped.rendered,
    }
}

/// `Read` with a command: its output region, paged by `offset`/`count` inside it, numbered as
/// the session's lines, then its record line.
pub(crate) fn read(
    r: &CommandRecord,
    v: &Viewed<'_>,
    offset: u64,
    count: u64,
    max_result_bytes: usize,
) -> ReadOutcome {
    let terminal = v.terminal;
    let total = terminal.total_lines();
    let retained = terminal.first_line().min(total + 1);
    let info = v.info(r);
    let record_line = info.rendered.clone();
    let page = v.region(r).and_then(|(first, last, end)| {
        let page_end = last.checked_sub(offset).filter(|&e| e >= first)?;
        let page_begin = page_end
            .saturating_sub(count.max(1) - 1)
            .max(first)
            .max(retained);
        // The region's own end (its last line as the end mark found it) only on its last page.
        let lines = if page_end == last {
            view::region_lines(terminal, page_begin, end, r.end_line.as_deref())
        } else {
            terminal.lines(page_begin, page_end)
        };
        (!lines.is_empty()).then_some((page_begin, lines))
    });
    let Some((begin, lines)) = page else {
        let why = match (r.refused, info.output_retained) {
            (true, _) => "(refused: it ran nothing)",
            (false, false) => "(its output is no longer retained)",
            (false, true) => "(no output)",
        };
        let meta = vec![format!("[lines: none of {total}]"), record_line];
        let capped = render::with_meta("", why, &meta, max_result_bytes);
        return ReadOutcome {
            total_lines: total,
            first_line: retained,
            rendered: capped.rendered,
            command: Some(info),
            ..ReadOutcome::default()
        };
    };
    let end = begin + lines.len() as u64 - 1;
    let meta = |dropped: usize| {
        vec![
            format!("[lines: {}-{end} of {total}]", begin + dropped as u64),
            record_line.clone(),
        ]
    };
    let (capped, dropped) = render::lines_with_meta(&lines, "(no output)", meta, max_result_bytes);
    ReadOutcome {
        text: capped.body,
        total_lines: total,
        first_line: retained,
        line_begin: begin + dropped as u64,
        line_end: end,
        truncated: capped.truncated,
        rendered: capped.rendered,
        command: Some(info),
    }
}
