//! The session actor: one task owns the PTY master, the child, the terminal model and the send
//! in flight, and runs one `select!` over PTY output, pending input, commands, the child's exit,
//! the caller hanging up and the nearest deadline (send timeout, idle, stdin probe, startup).

mod adopt;
mod attach;
mod commands;
mod compact;
mod flood;
mod lifecycle;
mod output;
mod reader;
mod settle;
mod signals;
mod timers;

use super::aim::WaitingSignals;
use super::capture::Capture;
use super::jobs::Jobs;
use super::keyboard::Keyboard;
use super::pacing::Pacing;
use super::probe::ProbeSchedule;
use super::publish::PublishSchedule;
use super::send::{ActiveSend, caller_gone};
use super::shell::{Shell, Write};
use super::shell_marks::ShellMarks;
use super::startup::{Readiness, Startup};
use super::watchers::Watchers;
use super::{Command, Ready, SendInput, SessionSpec, SessionState, Sink, view};
use crate::error::Error;
use crate::marks::Integration;
use crate::process::pty::{ExitKind, Pty};
use crate::screen::{Position, Terminal};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc, oneshot, watch};

/// How long after writing a send's input the actor polls the terminal for output instead of
/// sleeping until the kernel wakes it. Most commands an agent runs answer within this; waking a
/// thread from idle (on a virtual machine, an idle vCPU) costs tens of microseconds on top. The
/// polling yields to every other task between reads, and ends when the send settles.
const SPIN: Duration = Duration::from_micros(250);
/// Idle time after which a session's screen rests, its emulator grid freed until the next
/// output or read (most of an idle session's memory; see `Terminal::rest`).
const REST_AFTER: Duration = Duration::from_secs(1);

/// One session's actor: everything it owns, each part named for what it is about.
pub(super) struct Actor {
    /// What the session was started with.
    spec: Arc<SessionSpec>,
    /// The session's terminal: its master, the program, the helper.
    pty: Pty,
    /// The terminal model: screen, history, modes.
    terminal: Terminal,
    /// The state `List` shows, published (see `publish.rs`).
    state: watch::Sender<SessionState>,
    /// How the program ended, once it has.
    exit: Option<ExitKind>,
    /// The master hung up: no process holds the terminal any more.
    eof: bool,
    /// The send in flight (foreground, streaming or a job's).
    active: Option<ActiveSend>,
    /// A send with input that came right after a signal: it begins (is judged, refused as
    /// typeahead or written) once the shell answered the signal, or the grace passed (see
    /// `Shell::signal_gate`).
    deferred: Option<(SendInput, Sink)>,
    /// Where the shell is and what input waits to be written.
    shell: Shell,
    /// When the stdin probe runs, and what it judges a reader against.
    probe: ProbeSchedule,
    /// How much output to read at a time, and when to yield (see `pacing.rs`).
    pacing: Pacing,
    /// Whether the session is ready (its first prompt, a program reading the terminal, its
    /// exit or the end of its startup wait), and who waits for it until then (see `startup.rs`).
    readiness: Readiness<oneshot::Sender<Ready>>,
    /// When output last came.
    last_output: Instant,
    /// When the idle terminal's screen may rest (see `Terminal::rest`); set by output and by
    /// every command, cleared once it rests.
    rest_due: Option<Instant>,
    /// Until when the actor polls for the answer to input it just wrote (see `SPIN`).
    spin_until: Option<Instant>,
    /// Where the previous send's viewport ended.
    last_seen: Position,
    /// That end line as the command-end mark found it, when the viewport ended at one.
    last_seen_line: Option<String>,
    /// The lines the newest command-end marks found the cursor on (see `view::EndLines`).
    end_lines: view::EndLines,
    /// When the state is published (see `publish.rs`).
    publishing: PublishSchedule,
    /// Raw output for `Watch` subscribers.
    watchers: Watchers,
    /// Output is being taken in before answers go out (see `take_output_before_replies`).
    taking_output: bool,
    /// Answers were queued by output just handled: take in what is already there first.
    replies_await_output: bool,
    /// The session's background jobs and their output cursors.
    jobs: Jobs,
    /// Where output reads land (the journal, when the session is kept for a successor).
    capture: Capture,
    /// The session's record in the state directory, when it is kept there.
    store: Option<crate::state::SessionStore>,
    /// What a daemon adopting the session replays before it serves it.
    replay: Option<super::Replay>,
    /// Signals that wait for the command they are aimed at (see `aim.rs`).
    signals: WaitingSignals,
    /// The marks a compacted journal keeps for a successor (see `shell_marks.rs`).
    shell_marks: ShellMarks,
    /// Journal output at which compaction is tried next (see `compact.rs`).
    compact_at: u64,
    /// The commands the shell ran, as records (see `records.rs`).
    commands: commands::CommandHistory,
    /// Who holds the keyboard: the agent, or a person attached (see `keyboard.rs`).
    keyboard: Keyboard,
    /// A flood taken in by turns on a worker thread (see `flood.rs`).
    flood: flood::Flood,
    /// A command that came during a turn, handled once the turn is back.
    held: Option<Command>,
}

impl Actor {
    pub(super) fn new(
        spec: Arc<SessionSpec>,
        pty: Pty,
        state: watch::Sender<SessionState>,
        kept: super::Kept,
    ) -> Actor {
        let now = Instant::now();
        let mut terminal =
            Terminal::new(spec.cols, spec.rows, spec.history_lines, spec.history_bytes);
        terminal.set_mark_key(spec.mark_key.clone());
        let compact_at = compact::journal_bound(spec.history_bytes);
        let commands = commands::CommandHistory::new(kept.store.as_ref(), spec.integration);
        Actor {
            terminal,
            readiness: Readiness::starting(Startup::new(
                now,
                spec.startup_timeout,
                (spec.integration == Integration::None).then_some(spec.startup_idle),
            )),
            shell: Shell::new(spec.integration),
            spec,
            pty,
            state,
            exit: None,
            eof: false,
            active: None,
            deferred: None,
            probe: ProbeSchedule::new(now),
            pacing: Pacing::default(),
            last_output: now,
            rest_due: None,
            spin_until: None,
            last_seen: Position::default(),
            last_seen_line: None,
            end_lines: view::EndLines::default(),
            publishing: PublishSchedule::new(now),
            watchers: Watchers::default(),
            taking_output: false,
            replies_await_output: false,
            jobs: Jobs::default(),
            capture: Capture::new(kept.journal),
            commands,
            store: kept.store,
            replay: kept.replay,
            signals: WaitingSignals::default(),
            shell_marks: ShellMarks::default(),
            compact_at,
            keyboard: Keyboard::default(),
            flood: flood::Flood::default(),
            held: None,
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::Receiver<Command>, stop: Arc<Notify>) {
        if let Some(replay) = self.replay.take() {
            self.adopt(replay);
        }
        loop {
            self.capture.prepare(&self.spec.id);
            // While the output side is on a worker (a flood), the actor only waits for it:
            // everything else may read the terminal model or the terminal.
            let home = !self.flood.away();
            let now = Instant::now();
            let deadline = if home { self.next_deadline(now) } else { None };
            // The shell decides when input may go in (see `shell.rs`).
            let write = if home {
                self.shell.next_write(now)
            } else {
                Write::Nothing
            };
            if write == Write::Input
                && let Some(to) = self.shell.take_first_write(self.terminal.cursor())
            {
                self.before_first_write(to);
            }
            let writing = write != Write::Nothing;
            let pending = self.shell.pending(write);
            // A person's keys go in between the shell's writes (an agent's input is refused
            // while a person holds the keyboard, but a send begun before may still write).
            let keys = if home { self.keyboard.pending() } else { &[] };
            tokio::select! {
                read = self.capture.read(&self.pty, self.pacing.read_limit()), if home && !self.eof => {
                    match read {
                        Ok(0) | Err(_) => self.eof = true,
                        Ok(n) => self.take_read(n),
                    }
                }
                turn = self.flood.back(), if !home => self.on_turn_back(turn),
                _ = std::future::ready(()), if self.flood.turn_due() => self.start_turn(),
                exit = self.pty.wait_exit(), if home && self.exit.is_none() => {
                    self.on_exit(exit.unwrap_or(ExitKind::Code(0)));
                }
                written = self.pty.write_some(pending), if writing => {
                    if write == Write::Replies {
                        self.on_reply_written(written);
                    } else {
                        self.on_written(written);
                    }
                }
                written = self.pty.write_some(keys), if !keys.is_empty() && !writing => {
                    self.on_keys_written(written);
                }
                cmd = commands.recv(), if self.held.is_none() => match cmd {
                    Some(cmd) if home => self.on_command(cmd),
                    Some(cmd) => {
                        self.held = Some(cmd);
                        self.flood.call_back();
                    }
                    None => break,
                },
                _ = caller_gone(&mut self.active), if home && self.active.is_some() => {
                    self.on_caller_gone();
                }
                _ = sleep_until(deadline), if deadline.is_some() => self.on_timer(),
                _ = tokio::task::yield_now(), if home && self.spinning() => self.read_now(),
                _ = stop.notified() => break,
            }
            if !self.flood.away() {
                self.evaluate();
            }
            if self.pacing.slice_used() {
                // A flood keeps the PTY always readable: let other sessions and RPCs run (tokio's
                // own budget would allow 128 reads).
                tokio::task::yield_now().await;
            }
        }
        self.shutdown().await;
        crate::process::memory::trim_soon();
    }

    fn on_command(&mut self, cmd: Command) {
        self.rest_due = Some(Instant::now() + REST_AFTER);
        match cmd {
            Command::Ready(reply) => {
                if let Some(reply) = self.readiness.wait_for(reply) {
                    let _ = reply.send(self.ready_info());
                }
            }
            Command::Read(query, reply) => {
                let _ = reply.send(self.read(query));
            }
            Command::Commands(query, reply) => {
                let _ = reply.send(self.list_commands(query));
            }
            Command::Search(query, reply) => {
                let _ = reply.send(self.search(&query));
            }
            Command::Send(input, sink) => self.on_send(input, sink),
            Command::Watch(replay, reply) => {
                let _ = reply.send(self.watch(replay));
            }
            Command::Screen(reply) => {
                let _ = reply.send(crate::session::PageScreen {
                    screen: self.terminal.styled_screen(),
                    password_prompt: self.pty.input_hidden(),
                });
            }
            Command::Attach(request, reply) => {
                let _ = reply.send(self.attach(request));
            }
            Command::Keys(token, keys) => self.keyboard.queue(token, &keys),
            Command::AttachSize(token, cols, rows) => self.attach_size(token, cols, rows),
            Command::Detach(token) => self.detach(token),
            Command::JobOutput(id, cap, reply) => {
                let integrated = self.spec.integration != Integration::None;
                let report = self.jobs.report(&id, cap, &self.terminal, integrated);
                let _ = reply.send(report);
                self.save_jobs();
            }
            Command::JobKill(id, reply) => self.job_kill(&id, reply),
            Command::Signal(signal, reply) => {
                self.signals.push(signal, reply, Instant::now());
                self.deliver_signals();
            }
        }
    }

    async fn shutdown(mut self) {
        self.flood_home().await;
        if let Some(a) = self.active.take() {
            let error = Error::session_not_found(&self.spec.id);
            self.end_send(a.fail(error));
        }
        if let Some((_, sink)) = self.deferred.take() {
            sink.refuse(Error::session_not_found(&self.spec.id));
        }
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
