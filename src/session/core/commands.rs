//! Command records kept as the marks arrive (their saving is an effect: the log is the
//! actor's), and the requests that read them: `Commands`, `Read` of one command, `Search`.

use super::{Core, Cx, Effect};
use crate::error::{Error, Result};
use crate::marks::Integration;
use crate::screen::{MarkEvent, Position};
use crate::session::command_view::{self, CommandsOutcome, CommandsQuery, Viewed};
use crate::session::records::{MarkContext, TypedBy};
use crate::session::search::{self, SearchOutcome, SearchQuery};
use crate::session::{ReadOutcome, ReadQuery, view};

impl Core {
    /// Gives a mark to the records; saves what it changed.
    pub(super) fn record_mark(&mut self, cx: &mut Cx<'_>, event: &MarkEvent) {
        if self.spec.integration == Integration::None {
            return;
        }
        let terminal = &self.terminal;
        let tty = &*cx.tty;
        let cwd = || tty.cwd();
        let region = |start: u64, end: Position, end_line: Option<&str>| {
            view::region_extent(terminal, start, end, end_line)
        };
        let ctx = MarkContext {
            now_ms: cx.unix_ms,
            cwd: &cwd,
            typed_by: self.keyboard.typed_by(),
            region: &region,
        };
        let changed = self.commands.on_mark(event, &ctx);
        let records = self.commands.records();
        if changed > 0 {
            let newest = records.iter().skip(records.len().saturating_sub(changed));
            let numbers = newest.map(|r| r.number);
            cx.effect(Effect::SaveRecords(numbers.collect()));
        }
        // A start mark that made a record made the newest one.
        let started = changed > 0 && event.mark == crate::marks::Mark::CommandStart;
        if let Some(newest) = records
            .back()
            .filter(|r| started && r.typed_by == TypedBy::Person)
        {
            self.keyboard.person_ran(newest.number);
        }
    }

    /// What a view of a record needs; `home` (the daemon's, the user's own) shows as `~`.
    fn viewed<'a>(&'a self, now_ms: i64, home: Option<&'a str>) -> Viewed<'a> {
        Viewed {
            terminal: &self.terminal,
            now_ms,
            home,
        }
    }

    /// `Read`: a page of history, the screen, or one command's output.
    pub(super) fn read(&self, cx: &Cx<'_>, q: ReadQuery) -> Result<ReadOutcome> {
        let Some(id) = &q.command_id else {
            return Ok(view::read(&self.terminal, q));
        };
        let record = self
            .commands
            .find(id)
            .ok_or_else(|| Error::command_not_found(id))?;
        let home = std::env::var("HOME").ok();
        Ok(command_view::read(
            record,
            &self.viewed(cx.unix_ms, home.as_deref()),
            q.offset,
            q.count,
            q.max_result_bytes,
        ))
    }

    /// `Commands`.
    pub(super) fn list_commands(&self, cx: &Cx<'_>, q: CommandsQuery) -> CommandsOutcome {
        let home = std::env::var("HOME").ok();
        command_view::list(&self.commands, &self.viewed(cx.unix_ms, home.as_deref()), q)
    }

    /// `Search`.
    pub(super) fn search(&self, q: &SearchQuery) -> Result<SearchOutcome> {
        search::search(&self.terminal, &self.commands, q)
    }
}
