//! Command records kept as the marks arrive (and saved in the state directory), and the
//! requests that read them: `Commands`, `Read` of one command, `Search`.

use super::Actor;
use crate::error::{Error, Result};
use crate::marks::Integration;
use crate::screen::{MarkEvent, Position};
use crate::session::command_view::{self, CommandsOutcome, CommandsQuery, Viewed};
use crate::session::records::{CommandBook, MarkContext, TypedBy};
use crate::session::search::{self, SearchOutcome, SearchQuery};
use crate::session::{ReadOutcome, ReadQuery, unix_ms, view};
use crate::state::commands::CommandLog;
use std::time::SystemTime;

/// The session's records and where they are saved.
#[derive(Default)]
pub(in crate::session) struct CommandHistory {
    book: CommandBook,
    /// The state directory's log, when the session is kept there.
    log: Option<CommandLog>,
}

impl CommandHistory {
    /// The records of a session kept in `store` (an adopted session's as they were saved); a
    /// type without shell integration has none.
    pub(in crate::session) fn new(
        store: Option<&crate::state::SessionStore>,
        integration: Integration,
    ) -> CommandHistory {
        match store {
            Some(store) if integration != Integration::None => {
                let (log, records) = store.command_log();
                CommandHistory {
                    book: CommandBook::restored(records),
                    log: Some(log),
                }
            }
            _ => CommandHistory::default(),
        }
    }
}

impl Actor {
    /// Gives a mark to the records; saves what it changed.
    pub(super) fn record_mark(&mut self, event: &MarkEvent) {
        if self.spec.integration == Integration::None {
            return;
        }
        let terminal = &self.terminal;
        let pid = self.pty.pid() as i32;
        let cwd = || {
            crate::process::procfs::cwd(pid)
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        let region = |start: u64, end: Position, end_line: Option<&str>| {
            view::region_extent(terminal, start, end, end_line)
        };
        let ctx = MarkContext {
            now_ms: unix_ms(SystemTime::now()),
            cwd: &cwd,
            typed_by: self.keyboard.typed_by(),
            region: &region,
        };
        let CommandHistory { book, log } = &mut self.commands;
        let changed = book.on_mark(event, &ctx);
        let records = book.records();
        if let Some(log) = log {
            for record in records.iter().skip(records.len() - changed) {
                log.save(record, || records.iter().collect());
            }
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
    fn viewed<'a>(&'a self, home: Option<&'a str>) -> Viewed<'a> {
        Viewed {
            terminal: &self.terminal,
            now_ms: unix_ms(SystemTime::now()),
            home,
        }
    }

    /// `Read`: a page of history, the screen, or one command's output.
    pub(super) fn read(&self, q: ReadQuery) -> Result<ReadOutcome> {
        let Some(id) = &q.command_id else {
            return Ok(view::read(&self.terminal, q));
        };
        let record = self
            .commands
            .book
            .find(id)
            .ok_or_else(|| Error::command_not_found(id))?;
        let home = std::env::var("HOME").ok();
        Ok(command_view::read(
            record,
            &self.viewed(home.as_deref()),
            q.offset,
            q.count,
            q.max_result_bytes,
        ))
    }

    /// `Commands`.
    pub(super) fn list_commands(&self, q: CommandsQuery) -> CommandsOutcome {
        let home = std::env::var("HOME").ok();
        command_view::list(&self.commands.book, &self.viewed(home.as_deref()), q)
    }

    /// `Search`.
    pub(super) fn search(&self, q: &SearchQuery) -> Result<SearchOutcome> {
        search::search(&self.terminal, &self.commands.book, q)
    }
}
