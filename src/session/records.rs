//! Command records: each command an integrated shell ran, made from its marks (the command-start
//! mark with its command line, the end mark with its status, a refused line), with where its
//! output lies in the history, and rendered one line each for `Commands`. Pure: marks and times
//! in, records out.

use crate::marks::Mark;
use crate::screen::{MarkEvent, Position};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Records kept per session: the newest this many.
pub(crate) const MAX_RECORDS: usize = 10_000;

/// The most bytes of a command's first line a rendered record shows.
const MAX_SHOWN_COMMAND: usize = 200;

/// A status the shell reports for a line abandoned with Ctrl-C at its prompt: no command ran.
const INTERRUPTED_AT_PROMPT: i32 = 130;

/// Who typed a command's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TypedBy {
    /// The owner agent, through a send.
    #[default]
    Agent,
    /// A person holding the keyboard through `Attach`.
    Person,
}

impl TypedBy {
    /// The name the API gives it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TypedBy::Agent => "agent",
            TypedBy::Person => "person",
        }
    }
}

/// One command, as the state directory keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CommandRecord {
    /// `c<number>`, from 1 per session.
    pub(crate) number: u64,
    /// The command line as the shell received it.
    pub(crate) command: String,
    /// The working directory at its start (empty when unknown).
    pub(crate) cwd: String,
    /// Milliseconds since the epoch.
    pub(crate) started_unix_ms: i64,
    /// Unset while it runs.
    pub(crate) ended_unix_ms: Option<i64>,
    /// Unset while it runs, for a refused line and when the shell gave none.
    pub(crate) exit_code: Option<i32>,
    /// The shell refused the line (a syntax error); it ran nothing.
    pub(crate) refused: bool,
    /// Where its output starts: the command-start mark (line, column).
    pub(crate) start: (u64, u32),
    /// Where its output ends: the end mark, once it ended.
    pub(crate) end: Option<(u64, u32)>,
    /// The end line as the end mark found it (the prompt drawn after may change it).
    pub(crate) end_line: Option<String>,
    /// History lines of its output region, once it ended; unset when it printed nothing.
    pub(crate) first_line: Option<u64>,
    /// See `first_line`.
    pub(crate) last_line: Option<u64>,
    /// Where its output starts in the stream (bytes since the session started).
    pub(crate) start_byte: u64,
    /// Raw bytes between its start and end marks, once it ended.
    pub(crate) output_bytes: u64,
    /// Who typed it.
    #[serde(default)]
    pub(crate) typed_by: TypedBy,
}

impl CommandRecord {
    /// `c12`.
    pub(crate) fn id(&self) -> String {
        format!("c{}", self.number)
    }

    /// Whether it still runs.
    pub(crate) fn running(&self) -> bool {
        self.ended_unix_ms.is_none()
    }

    fn start_position(&self) -> Position {
        Position {
            line: self.start.0,
            col: self.start.1,
        }
    }

    /// Where its output ends, once it ended.
    pub(crate) fn end_position(&self) -> Option<Position> {
        self.end.map(|(line, col)| Position { line, col })
    }
}

/// The history lines `(first, last)` of the output region from a start line to an end mark
/// (with the end line as the end mark found it), `None` when it holds nothing.
pub(crate) type RegionOf<'a> = &'a dyn Fn(u64, Position, Option<&str>) -> Option<(u64, u64)>;

/// What the caller knows of the session when a mark arrives.
pub(crate) struct MarkContext<'a> {
    /// Milliseconds since the epoch.
    pub(crate) now_ms: i64,
    /// The shell's working directory, when no cwd mark told it yet.
    pub(crate) cwd: &'a dyn Fn() -> String,
    /// Who typed what the shell reads now.
    pub(crate) typed_by: TypedBy,
    /// Where a command's output lies.
    pub(crate) region: RegionOf<'a>,
}

/// A session's command records, oldest first.
#[derive(Debug, Default)]
pub(crate) struct CommandBook {
    records: VecDeque<CommandRecord>,
    /// The number the next record gets.
    next: u64,
    /// The cwd the newest cwd mark reported (the shell prints one at every prompt).
    cwd: Option<String>,
    /// A prompt was drawn: command lines before the first are the rc files', not commands.
    prompted: bool,
}

impl CommandBook {
    /// A book holding `records` (as a previous daemon saved them, oldest first).
    pub(crate) fn restored(records: Vec<CommandRecord>) -> CommandBook {
        let next = records.last().map_or(1, |r| r.number + 1);
        let mut records: VecDeque<CommandRecord> = records.into();
        while records.len() > MAX_RECORDS {
            records.pop_front();
        }
        CommandBook {
            prompted: !records.is_empty(),
            records,
            next,
            cwd: None,
        }
    }

    /// The records, oldest first.
    pub(crate) fn records(&self) -> &VecDeque<CommandRecord> {
        &self.records
    }

    /// Record `id` (`c12`), or the newest for `last`.
    pub(crate) fn find(&self, id: &str) -> Option<&CommandRecord> {
        if id == "last" {
            return self.records.back();
        }
        self.by_number(id.strip_prefix('c')?.parse().ok()?)
    }

    /// Record number `number`, if it is kept (the records are in number order).
    pub(crate) fn by_number(&self, number: u64) -> Option<&CommandRecord> {
        let i = self
            .records
            .binary_search_by_key(&number, |r| r.number)
            .ok()?;
        self.records.get(i)
    }

    /// The record whose output region holds history line `line`.
    pub(crate) fn holding_line(&self, line: u64) -> Option<&CommandRecord> {
        // Records are in stream order: the last one starting at or before the line.
        let after = self.records.partition_point(|r| r.start.0 <= line);
        let r = self.records.get(after.checked_sub(1)?)?;
        let last = match (r.first_line, r.last_line) {
            (Some(first), Some(last)) if first <= line => last,
            (_, None) if r.running() => u64::MAX,
            _ => return None,
        };
        (line <= last).then_some(r)
    }

    /// Takes the next mark; returns how many of the newest records it made or changed (to be
    /// saved). A mark the book already holds (an adopting daemon replays output a previous one
    /// recorded) changes nothing.
    pub(crate) fn on_mark(&mut self, event: &MarkEvent, ctx: &MarkContext<'_>) -> usize {
        self.take_mark(event, ctx).unwrap_or(0)
    }

    fn take_mark(&mut self, event: &MarkEvent, ctx: &MarkContext<'_>) -> Option<usize> {
        let at = (event.at.line, event.at.col);
        match &event.mark {
            Mark::Cwd(url) => {
                self.cwd = Some(path_of_file_url(url));
                None
            }
            Mark::PromptStart | Mark::InputStart => {
                self.prompted = true;
                None
            }
            Mark::CommandStart => {
                let command = event.command.clone()?;
                if !self.prompted || self.seen(event) {
                    return None;
                }
                let mut changed = 1;
                if let Some(open) = self.records.back_mut().filter(|r| r.running()) {
                    // A start without the previous command's end: it ended unreported.
                    open.ended_unix_ms = Some(ctx.now_ms);
                    changed = 2;
                }
                self.push(CommandRecord {
                    number: 0,
                    command,
                    cwd: self.cwd.clone().unwrap_or_else(ctx.cwd),
                    started_unix_ms: ctx.now_ms,
                    ended_unix_ms: None,
                    exit_code: None,
                    refused: false,
                    start: at,
                    end: None,
                    end_line: None,
                    first_line: None,
                    last_line: None,
                    start_byte: event.bytes.1,
                    output_bytes: 0,
                    typed_by: ctx.typed_by,
                });
                Some(changed)
            }
            Mark::CommandEnd(_) | Mark::LineRejected if self.seen(event) => None,
            Mark::CommandEnd(code) => {
                if let Some(open) = self.records.back_mut().filter(|r| r.running()) {
                    let start = open.start_position();
                    open.ended_unix_ms = Some(ctx.now_ms.max(open.started_unix_ms));
                    open.exit_code = *code;
                    open.end = Some(at);
                    open.end_line = event.line.clone();
                    open.output_bytes = event.bytes.0.saturating_sub(open.start_byte);
                    let region = (ctx.region)(start.line, event.at, event.line.as_deref());
                    open.first_line = region.map(|r| r.0);
                    open.last_line = region.map(|r| r.1);
                    return Some(1);
                }
                // An input ended without a command: an empty line, one abandoned, or refused.
                let refused = event.command.as_deref().filter(|c| !c.trim().is_empty())?;
                if *code == Some(INTERRUPTED_AT_PROMPT) || refused.ends_with("^C") {
                    return None;
                }
                self.refused(refused.to_owned(), event, ctx)
            }
            Mark::LineRejected => {
                let line = event.command.clone().filter(|c| !c.trim().is_empty())?;
                self.refused(line, event, ctx)
            }
        }
    }

    fn refused(
        &mut self,
        command: String,
        event: &MarkEvent,
        ctx: &MarkContext<'_>,
    ) -> Option<usize> {
        let at = (event.at.line, event.at.col);
        if !self.prompted {
            return None;
        }
        self.push(CommandRecord {
            number: 0,
            command,
            cwd: self.cwd.clone().unwrap_or_else(ctx.cwd),
            started_unix_ms: ctx.now_ms,
            ended_unix_ms: Some(ctx.now_ms),
            exit_code: None,
            refused: true,
            start: at,
            end: Some(at),
            end_line: None,
            first_line: None,
            last_line: None,
            start_byte: event.bytes.1,
            output_bytes: 0,
            typed_by: ctx.typed_by,
        });
        Some(1)
    }

    /// Whether the book took this mark already: a daemon adopting a session replays output a
    /// previous one recorded, and a mark that ends at or before the newest record's own is old.
    /// Stream places, not line numbers: those only grow (`clear` moves the cursor back up).
    fn seen(&self, event: &MarkEvent) -> bool {
        self.records
            .back()
            .is_some_and(|r| event.bytes.1 <= r.start_byte)
    }

    fn push(&mut self, mut record: CommandRecord) {
        record.number = self.next.max(1);
        self.next = record.number + 1;
        if self.records.len() == MAX_RECORDS {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }
}

/// The path of an OSC 7 `file://host/path` URL, `%XX` escapes decoded.
fn path_of_file_url(url: &str) -> String {
    let rest = url.strip_prefix("file://").unwrap_or(url);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    crate::marks::percent_decode(path.as_bytes())
}

/// What a rendered record line needs beyond the record.
pub(crate) struct RenderContext<'a> {
    /// Milliseconds since the epoch (a running command's duration so far).
    pub(crate) now_ms: i64,
    /// The home directory, shown as `~`.
    pub(crate) home: Option<&'a str>,
    /// Whether a running command has printed anything yet.
    pub(crate) printed: bool,
}

/// One line for `Commands`: `c12 [exit 1] 4.2s ~/src/app$ cargo test  (lines 3120-3380)`.
pub(crate) fn render_line(r: &CommandRecord, ctx: &RenderContext<'_>) -> String {
    let outcome = match (r.refused, r.ended_unix_ms, r.exit_code) {
        (true, ..) => "[refused]".to_owned(),
        (false, None, _) => "[running]".to_owned(),
        (false, Some(_), Some(code)) => format!("[exit {code}]"),
        (false, Some(_), None) => "[ended]".to_owned(),
    };
    let ended = r.ended_unix_ms.unwrap_or(ctx.now_ms);
    let duration = duration((ended - r.started_unix_ms).max(0) as u64);
    let cwd = match ctx.home {
        Some(home) if !home.is_empty() && r.cwd == home => "~".to_owned(),
        Some(home) if !home.is_empty() && r.cwd.starts_with(&format!("{home}/")) => {
            format!("~{}", &r.cwd[home.len()..])
        }
        _ => r.cwd.clone(),
    };
    let first = r.command.lines().next().unwrap_or("");
    let shown = crate::render::head_fit(first, MAX_SHOWN_COMMAND);
    let cut = if shown.len() < first.len() { "…" } else { "" };
    let lines = match (r.running(), r.first_line, r.last_line) {
        (false, Some(a), Some(b)) => format!("(lines {a}-{b})"),
        (false, ..) => "(no output)".to_owned(),
        (true, ..) if ctx.printed => format!("(lines {}-)", r.start.0),
        (true, ..) => "(no output yet)".to_owned(),
    };
    format!(
        "{} {outcome} {duration} {cwd}$ {shown}{cut}  {lines}",
        r.id()
    )
}

/// `0.3s`, `4.2s`, `3m05s`, `1h02m`.
fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{}.{}s", s, ms % 1000 / 100),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Mark = Mark::PromptStart;
    const B: Mark = Mark::InputStart;

    /// A mark at line `line` carrying `command`, at stream byte `byte`.
    fn ev(mark: Mark, line: u64, command: Option<&str>, byte: u64) -> MarkEvent {
        MarkEvent {
            mark,
            at: Position { line, col: 0 },
            line: None,
            command: command.map(str::to_owned),
            bytes: (byte, byte + 10),
        }
    }

    fn start(line: u64, command: &str, byte: u64) -> MarkEvent {
        ev(Mark::CommandStart, line, Some(command), byte)
    }

    fn end(line: u64, code: i32, byte: u64) -> MarkEvent {
        ev(Mark::CommandEnd(Some(code)), line, None, byte)
    }

    /// A record as the tables check it: id, command, exit, refused, region, output bytes.
    type Seen = (String, String, Option<i32>, bool, Option<(u64, u64)>, u64);

    /// Feeds `marks` (one millisecond apart from 1000) and returns the records.
    fn book(marks: &[MarkEvent]) -> Vec<Seen> {
        let mut book = CommandBook::default();
        feed(&mut book, marks);
        book.records
            .iter()
            .map(|r| {
                let region = r.first_line.zip(r.last_line);
                (
                    r.id(),
                    r.command.clone(),
                    r.exit_code,
                    r.refused,
                    region,
                    r.output_bytes,
                )
            })
            .collect()
    }

    fn feed(book: &mut CommandBook, marks: &[MarkEvent]) {
        // The region as view::region_lines finds it: from the start line up to the end's.
        let region = |start: u64, end: Position, _: Option<&str>| {
            let last = if end.col == 0 { end.line - 1 } else { end.line };
            (last >= start).then_some((start, last))
        };
        let cwd = || "/proc/cwd".to_owned();
        for (i, m) in marks.iter().enumerate() {
            let ctx = MarkContext {
                now_ms: 1000 + i as i64,
                cwd: &cwd,
                typed_by: TypedBy::Agent,
                region: &region,
            };
            book.on_mark(m, &ctx);
        }
    }

    #[test]
    fn marks_make_records() {
        let s = |id: &str, cmd: &str, exit, refused, region, bytes| {
            (id.to_owned(), cmd.to_owned(), exit, refused, region, bytes)
        };
        let cases: &[(&str, Vec<MarkEvent>, Vec<_>)] = &[
            (
                "a command, its status, its region and its bytes",
                vec![ev(A, 1, None, 0), start(2, "ls", 20), end(5, 0, 130)],
                vec![s("c1", "ls", Some(0), false, Some((2, 4)), 100)],
            ),
            (
                "numbered in order; a failing one keeps its status; no output, no region",
                vec![
                    ev(A, 1, None, 0),
                    start(2, "true", 20),
                    end(2, 0, 30),
                    start(3, "false", 50),
                    end(3, 1, 60),
                ],
                vec![
                    s("c1", "true", Some(0), false, None, 0),
                    s("c2", "false", Some(1), false, None, 0),
                ],
            ),
            (
                "a command line before the first prompt is the rc files'",
                vec![
                    start(1, "rc", 0),
                    end(2, 0, 10),
                    ev(A, 2, None, 20),
                    start(3, "ls", 30),
                    end(4, 0, 50),
                ],
                vec![s("c1", "ls", Some(0), false, Some((3, 3)), 10)],
            ),
            (
                "an input ended without a start: refused when it held text, else nothing",
                vec![
                    ev(B, 1, None, 0),
                    ev(Mark::CommandEnd(Some(2)), 3, Some("if then"), 10),
                    ev(B, 3, None, 20),
                    ev(Mark::CommandEnd(Some(0)), 4, Some("  "), 30),
                ],
                vec![s("c1", "if then", None, true, None, 0)],
            ),
            (
                "a line abandoned with Ctrl-C is no command",
                vec![
                    ev(B, 1, None, 0),
                    ev(Mark::CommandEnd(Some(130)), 2, Some("echo x^C"), 10),
                ],
                vec![],
            ),
            (
                "fish's rejected line",
                vec![
                    ev(A, 1, None, 0),
                    ev(Mark::LineRejected, 1, Some("echo (("), 10),
                ],
                vec![s("c1", "echo ((", None, true, None, 0)],
            ),
            (
                "a start with no start text (a restored mark) makes nothing",
                vec![ev(A, 1, None, 0), ev(Mark::CommandStart, 2, None, 10)],
                vec![],
            ),
            (
                "marks replayed on adoption change nothing",
                vec![
                    ev(A, 1, None, 0),
                    start(2, "ls", 20),
                    end(5, 0, 130),
                    start(2, "ls", 20),
                    end(5, 0, 130),
                ],
                vec![s("c1", "ls", Some(0), false, Some((2, 4)), 100)],
            ),
        ];
        for (name, marks, want) in cases {
            assert_eq!(&book(marks), want, "{name}");
        }
    }

    #[test]
    fn a_running_command_restored_is_not_ended_by_the_older_marks_replayed() {
        let mut first = CommandBook::default();
        feed(&mut first, &[ev(A, 1, None, 0), start(9, "sleep 1", 500)]);
        let mut b = CommandBook::restored(first.records.iter().cloned().collect());
        // The journal replayed from its start: the shell's first prompt ends no command.
        feed(
            &mut b,
            &[
                ev(Mark::CommandEnd(Some(0)), 1, None, 0),
                ev(A, 1, None, 20),
                start(9, "sleep 1", 500),
            ],
        );
        assert!(b.records[0].running(), "{:?}", b.records);
        feed(&mut b, &[end(10, 0, 600)]);
        assert_eq!(b.records.len(), 1);
        assert_eq!(
            (b.records[0].exit_code, b.records[0].output_bytes),
            (Some(0), 90)
        );
    }

    #[test]
    fn a_record_keeps_the_cwd_its_shell_reported_at_the_prompt_before_it() {
        let mut b = CommandBook::default();
        feed(
            &mut b,
            &[
                ev(A, 1, None, 0),
                start(2, "cd /tmp", 10),
                end(2, 0, 20),
                ev(Mark::Cwd("file://host/tmp/a%20b".into()), 2, None, 30),
                start(3, "ls", 40),
            ],
        );
        let cwds: Vec<&str> = b.records.iter().map(|r| r.cwd.as_str()).collect();
        assert_eq!(cwds, ["/proc/cwd", "/tmp/a b"]);
        assert!(b.records[1].running());
    }

    #[test]
    fn the_newest_ten_thousand_are_kept_and_numbering_goes_on() {
        let mut b = CommandBook::default();
        let mut marks = vec![ev(A, 1, None, 0)];
        for n in 0..(MAX_RECORDS as u64 + 5) {
            marks.push(start(2 * n + 2, "x", 100 * n));
            marks.push(end(2 * n + 3, 0, 100 * n + 50));
        }
        feed(&mut b, &marks);
        assert_eq!(b.records.len(), MAX_RECORDS);
        assert_eq!(b.records[0].id(), "c6");
        assert_eq!(b.find("last").unwrap().id(), "c10005");
        assert_eq!(b.find("c6").unwrap().number, 6);
        assert!(b.find("c5").is_none() && b.find("6").is_none() && b.find("cx").is_none());
        let restored = CommandBook::restored(b.records.iter().cloned().collect());
        let mut restored = restored;
        feed(&mut restored, &[start(99_999, "y", 100 * 99_999)]);
        assert_eq!(restored.find("last").unwrap().id(), "c10006");
    }

    #[test]
    fn lines_are_found_in_their_command() {
        let mut b = CommandBook::default();
        feed(
            &mut b,
            &[
                ev(A, 1, None, 0),
                start(2, "a", 10),
                end(5, 0, 20),
                start(6, "b", 30),
                end(6, 0, 40),
                start(7, "c", 50),
            ],
        );
        let holder = |line| b.holding_line(line).map(CommandRecord::id);
        let got: Vec<Option<String>> = (1..=9).map(holder).collect();
        let c = |id: &str| Some(id.to_owned());
        assert_eq!(
            got,
            [
                None,
                c("c1"),
                c("c1"),
                c("c1"),
                None,
                None,
                c("c3"),
                c("c3"),
                c("c3")
            ]
        );
    }

    #[test]
    fn record_lines_render_as_the_contract_shows() {
        let record =
            |command: &str, cwd: &str, ms: Option<i64>, exit, region: Option<(u64, u64)>| {
                CommandRecord {
                    number: 12,
                    command: command.into(),
                    cwd: cwd.into(),
                    started_unix_ms: 0,
                    ended_unix_ms: ms,
                    exit_code: exit,
                    refused: false,
                    start: (3120, 0),
                    end: ms.map(|_| (3381, 0)),
                    end_line: None,
                    first_line: region.map(|r| r.0),
                    last_line: region.map(|r| r.1),
                    start_byte: 0,
                    output_bytes: 0,
                    typed_by: TypedBy::Agent,
                }
            };
        let ctx = |printed| RenderContext {
            now_ms: 185_000,
            home: Some("/home/u"),
            printed,
        };
        let long = "x".repeat(300);
        let cases = [
            (
                record(
                    "cargo test",
                    "/home/u/src/app",
                    Some(4_200),
                    Some(1),
                    Some((3120, 3380)),
                ),
                false,
                "c12 [exit 1] 4.2s ~/src/app$ cargo test  (lines 3120-3380)",
            ),
            (
                record("true", "/home/u", Some(300), Some(0), None),
                false,
                "c12 [exit 0] 0.3s ~$ true  (no output)",
            ),
            (
                record("make", "/home/user2", None, None, None),
                true,
                "c12 [running] 3m05s /home/user2$ make  (lines 3120-)",
            ),
            (
                record("sleep 9", "/", None, None, None),
                false,
                "c12 [running] 3m05s /$ sleep 9  (no output yet)",
            ),
            (
                record("for i in 1\n> do", "/", Some(3_720_000), Some(0), None),
                false,
                "c12 [exit 0] 1h02m /$ for i in 1  (no output)",
            ),
        ];
        for (r, printed, want) in &cases {
            assert_eq!(render_line(r, &ctx(*printed)), *want);
        }
        let cut = render_line(&record(&long, "/", Some(0), Some(0), None), &ctx(false));
        assert_eq!(
            cut,
            format!("c12 [exit 0] 0.0s /$ {}…  (no output)", "x".repeat(200))
        );
        let mut refused = record("if then", "/", Some(0), None, None);
        refused.refused = true;
        assert_eq!(
            render_line(&refused, &ctx(false)),
            "c12 [refused] 0.0s /$ if then  (no output)"
        );
    }
}
