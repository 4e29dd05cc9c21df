//! The session actor: one task owns the session's OS side (the PTY master and the program on
//! it, the output journal, the session's place in the state directory, the state it
//! publishes) and runs one `select!` over PTY output, input to write, requests, the program's
//! exit, the caller hanging up and the core's nearest deadline. Whatever happens becomes an
//! event for the session's core (`core.rs`), which decides; the actor carries out its effects.
//! Output that floods is taken in by turns on worker threads (`actor/flood.rs`).

mod compact;
mod flood;
mod give_way;
mod tty;

use super::capture::Capture;
use super::core::{Core, Effect, Event};
use super::pacing::Pacing;
use super::records::CommandBook;
use super::send::caller_gone;
use super::shell::Write;
use super::{Command, SessionSpec, SessionState, unix_ms};
use crate::marks::Integration;
use crate::process::pty::{ExitKind, MasterRead, Pty};
use crate::process::stdin_probe::ScheduleCounter;
use crate::state::SessionStore;
use crate::state::commands::CommandLog;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use tokio::sync::{Notify, mpsc, watch};
use tty::Os;

/// One session's actor: its core, and the OS side the core's events come from.
pub(super) struct Actor {
    /// What the session was started with.
    spec: Arc<SessionSpec>,
    /// The session's decisions and state (see `core.rs`).
    core: Core,
    /// The session's terminal: its master, the program, the helper.
    pty: Pty,
    /// The state `List` shows, as the core publishes it.
    state: watch::Sender<SessionState>,
    /// The master hung up: no process holds the terminal any more.
    eof: bool,
    /// How much output to read at a time, and when to yield (see `pacing.rs`).
    pacing: Pacing,
    /// Where output reads land (the journal, when the session is kept for a successor).
    capture: Capture,
    /// The session's record in the state directory, when it is kept there.
    store: Option<SessionStore>,
    /// The log the command records are saved in, when the session is kept there.
    log: Option<CommandLog>,
    /// What a daemon adopting the session replays before it serves it.
    replay: Option<super::Replay>,
    /// Journal output at which compaction is tried next (see `compact.rs`).
    compact_at: u64,
    /// The shell's schedule count, kept open for the stdin probe (see `tty.rs`).
    shell_counter: Option<ScheduleCounter>,
    /// A flood taken in by turns on a worker thread (see `flood.rs`).
    flood: flood::Flood,
    /// A command that came during a turn, handled once the turn is back.
    held: Option<Command>,
    /// A send's caller was handed its answer: the actor yields before it goes on (see `run`).
    answered: bool,
    /// This session's send whose answer a caller waits for, which floods elsewhere give way to.
    awaited: give_way::Awaited,
}

impl Actor {
    pub(super) fn new(
        spec: Arc<SessionSpec>,
        pty: Pty,
        state: watch::Sender<SessionState>,
        kept: super::Kept,
    ) -> Actor {
        // An adopted session's records as they were saved; a type without shell integration
        // has none.
        let (log, records) = match &kept.store {
            Some(store) if spec.integration != Integration::None => {
                let (log, records) = store.command_log();
                (Some(log), CommandBook::restored(records))
            }
            _ => (None, CommandBook::default()),
        };
        Actor {
            core: Core::new(spec.clone(), records, Instant::now()),
            compact_at: compact::journal_bound(spec.history_bytes),
            spec,
            pty,
            state,
            eof: false,
            pacing: Pacing::default(),
            capture: Capture::new(kept.journal),
            store: kept.store,
            log,
            replay: kept.replay,
            shell_counter: None,
            flood: flood::Flood::default(),
            held: None,
            answered: false,
            awaited: give_way::Awaited::default(),
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::Receiver<Command>, stop: Arc<Notify>) {
        if let Some(replay) = self.replay.take() {
            self.handle(Event::Adopted(replay));
        }
        loop {
            self.capture.prepare(&self.spec.id);
            // While the output side is on a worker (a flood), the actor only waits for it:
            // the core reads the terminal model in every event.
            let home = !self.flood.away();
            let now = Instant::now();
            let (deadline, write, spinning) = if home {
                let (core, mut os) = self.parts();
                let deadline = core.next_deadline(now);
                (deadline, core.next_write(now, &mut os), core.spinning(now))
            } else {
                (None, Write::Nothing, false)
            };
            let writing = write != Write::Nothing;
            let watch_exit = home && !self.core.exited();
            let turn_due = self.turn_due();
            let flooding = self.flood.is_on();
            self.awaited
                .set(self.core.answer_awaited_since().filter(|_| !flooding));
            let (pending, keys, active) = self.core.waits(write);
            // A person's keys go in between the shell's writes (an agent's input is refused
            // while a person holds the keyboard, but a send begun before may still write).
            let keys = if home { keys } else { &[] };
            let caller = home && active.is_some();
            tokio::select! {
                read = self.capture.read(&self.pty, self.pacing.read_limit()), if home && !self.eof => {
                    match read {
                        Ok(MasterRead { len: 0, .. }) | Err(_) => self.eof = true,
                        Ok(MasterRead { len, waited }) => self.take_read(len, waited),
                    }
                }
                turn = self.flood.back(), if !home => self.on_turn_back(turn),
                _ = std::future::ready(()), if turn_due => self.start_turn(),
                exit = self.pty.wait_exit(), if watch_exit => {
                    self.handle(Event::Exited(exit.unwrap_or(ExitKind::Code(0))));
                }
                written = self.pty.write_some(pending), if writing => {
                    self.handle(if write == Write::Replies {
                        Event::RepliesWritten(written)
                    } else {
                        Event::InputWritten(written)
                    });
                }
                written = self.pty.write_some(keys), if !keys.is_empty() && !writing => {
                    self.handle(Event::KeysWritten(written));
                }
                cmd = commands.recv(), if self.held.is_none() => match cmd {
                    Some(cmd) if home => self.handle(Event::Request(cmd)),
                    Some(cmd) => {
                        self.held = Some(cmd);
                        self.flood.call_back();
                    }
                    None => break,
                },
                _ = caller_gone(active), if caller => self.handle(Event::CallerGone),
                _ = sleep_until(deadline), if deadline.is_some() => self.handle(Event::Tick),
                _ = tokio::task::yield_now(), if home && spinning => self.read_now(),
                _ = stop.notified() => break,
            }
            // A flood keeps the PTY always readable: let other sessions and RPCs run (tokio's
            // own budget would allow 128 reads). A send's answer was handed over: let its RPC
            // write it out before anything else here (a yielding task runs again only once
            // every other task has run).
            let slice_used = self.pacing.slice_used();
            if slice_used || std::mem::take(&mut self.answered) {
                tokio::task::yield_now().await;
                self.pacing.new_slice();
            }
        }
        self.shutdown().await;
        crate::process::memory::trim_soon();
    }

    /// The core and the OS side it asks, borrowed apart.
    fn parts(&mut self) -> (&mut Core, Os<'_>) {
        let os = Os {
            pty: &self.pty,
            capture: &mut self.capture,
            pacing: &mut self.pacing,
            shell_counter: &mut self.shell_counter,
        };
        (&mut self.core, os)
    }

    /// Hands `event` to the core, and carries out what it decided.
    fn handle(&mut self, event: Event<'_>) {
        let unix_ms = unix_ms(SystemTime::now());
        let (core, mut os) = self.parts();
        let effects = core.handle(event, Instant::now(), unix_ms, &mut os);
        self.apply(effects);
    }

    fn apply(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Answered => self.answered = true,
                Effect::Publish(state) => {
                    self.state.send_replace(state);
                }
                Effect::SaveJobs(jobs) => {
                    if let Some(store) = &mut self.store {
                        store.set_jobs(jobs);
                    }
                }
                Effect::SaveRecords(numbers) => {
                    if let Some(log) = &mut self.log {
                        // Looked up by number: a session keeps up to 10 000 records, and a
                        // scan of them all for each mark made a send at 10 000 records 1.6x
                        // slower than in a fresh session.
                        let book = self.core.records();
                        for record in numbers.iter().filter_map(|&n| book.by_number(n)) {
                            log.save(record, || book.records().iter().collect());
                        }
                    }
                }
                Effect::Rest { trim } => {
                    self.capture.rest();
                    if trim {
                        crate::process::memory::trim_soon();
                    }
                }
            }
        }
    }

    /// Hands the `n` bytes the last read took to the core (they are in the journal), and
    /// starts a flood when the slice is used up by them and a backlog of output waits already
    /// (`Pacing::flooding`): the program writes faster than the actor takes in. One dear read
    /// alone (a send's answer rendered, a resting terminal woken) is no flood, and a turn would
    /// only wait for more.
    /// `yielded`: the actor let the runtime run since the read before (it waited for this
    /// output, or polled for it between other tasks), so a new slice begins. Without that, the
    /// reads of a few sends added up to a slice, and a send's prompt, waiting to be read, was
    /// taken for a flood: a worker thread and an emulating thread started for a few bytes.
    fn take_read(&mut self, n: usize, yielded: bool) {
        if yielded {
            self.pacing.new_slice();
        }
        let started = Instant::now();
        let bytes = self.capture.take(n, <[u8]>::to_vec);
        self.handle(Event::Output(&bytes));
        self.pacing.took(n, started.elapsed());
        if !self.eof && self.pacing.flooding(|| self.pty.output_waiting()) {
            self.flood.start();
        }
    }

    /// Takes whatever output is there, without waiting.
    fn read_now(&mut self) {
        if let Ok(Some(n)) = self.capture.try_read(&self.pty, self.pacing.read_limit())
            && n > 0
        {
            // Called after a yield (the spin's turn of the loop).
            self.take_read(n, true);
        }
    }

    async fn shutdown(mut self) {
        self.flood_home().await;
        let unix_ms = unix_ms(SystemTime::now());
        let (core, mut os) = self.parts();
        core.shutdown(Instant::now(), unix_ms, &mut os);
        // Every process of the session, its helper included, is gone when this returns.
        self.pty.terminate(self.spec.close_grace).await;
        if let Some(store) = &self.store {
            store.remove();
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
