//! The session without I/O: everything a session decides, in one value. The actor
//! (`actor.rs`) owns the terminal's OS side; it turns what happens there (output read, input
//! written, the program's exit, a request, a deadline) into an [`Event`] for [`Core::handle`],
//! and carries out the [`Effect`]s that come back (publish the state, save the jobs and the
//! command records, let the journal rest). What a decision must know of the OS, and the signal
//! and resize whose outcome it needs at once, go through the [`Tty`] port (`core/tty.rs`); the
//! time is an argument. Unit tests drive it with scripted events and a scripted `Tty`.
//!
//! Its parts, by concern: a send begun, written and settled (`settle.rs`), the nearest
//! deadline and what each does (`timers.rs`), exit, readiness and the published state
//! (`lifecycle.rs`), output taken in, its marks and query answers (`output.rs`), signals and
//! `JobKill` (`signals.rs`), who reads the terminal: the stdin probe, typeahead, line mode
//! (`reader.rs`), each request (`requests.rs`), command records and the requests that read them (`commands.rs`), a person at
//! the keyboard and watchers (`attach.rs`), and taking over a predecessor's journal
//! (`adopt.rs`). The pure state machines they drive are beside the core: the shell's
//! (`shell.rs`), the send in flight (`send.rs`), jobs, the probe's schedule, the startup wait.

mod adopt;
mod attach;
mod commands;
mod lifecycle;
mod output;
mod reader;
mod requests;
mod settle;
mod signals;
mod timers;
mod tty;

#[cfg(test)]
mod tests;

use super::aim::WaitingSignals;
use super::jobs::Jobs;
use super::keyboard::Keyboard;
use super::probe::ProbeSchedule;
use super::publish::PublishSchedule;
use super::records::CommandBook;
use super::send::ActiveSend;
use super::shell::{Shell, Write};
use super::shell_marks::ShellMarks;
use super::startup::{Lifecycle, Startup};
use super::watchers::Watchers;
use super::{Command, Ready, Replay, SendInput, SessionSpec, SessionState, Sink, view};
use crate::error::Error;
use crate::marks::Integration;
use crate::process::pty::ExitKind;
use crate::screen::{MarkEvent, Position, Terminal};
use crate::state::record::JobRecord;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
pub(super) use tty::{Modes, Tty};

/// How long after writing a send's input the actor polls the terminal for output instead of
/// sleeping until the kernel wakes it. Most commands an agent runs answer within this; waking a
/// thread from idle (on a virtual machine, an idle vCPU) costs tens of microseconds on top. The
/// polling yields to every other task between reads, and ends when the send settles.
const SPIN: Duration = Duration::from_micros(250);
/// Idle time after which a session's screen rests, its emulator grid freed until the next
/// output or read (most of an idle session's memory; see `Terminal::rest`).
const REST_AFTER: Duration = Duration::from_secs(1);

/// What happened, for the core to handle.
pub(super) enum Event<'a> {
    /// Output read from the terminal (it is in the journal already).
    Output(&'a [u8]),
    /// A flood's turn (`actor/flood.rs`) took this output in: the terminal model, back in its
    /// place (`swap_terminal`), has emulated it.
    TurnBack(&'a [u8]),
    /// Part of the send's input went out (or the write failed).
    InputWritten(io::Result<usize>),
    /// Part of the answers to the program's queries went out.
    RepliesWritten(io::Result<usize>),
    /// Part of a person's keys went out.
    KeysWritten(io::Result<usize>),
    /// The program exited.
    Exited(ExitKind),
    /// A caller's request.
    Request(Command),
    /// The caller of the send in flight hung up.
    CallerGone,
    /// A deadline came (see `Core::next_deadline`).
    Tick,
    /// The session was adopted from a previous daemon: its journal and jobs.
    Adopted(Replay),
}

/// What the actor carries out after an event.
#[derive(Debug, PartialEq)]
pub(super) enum Effect {
    /// The state `List` and waiters see.
    Publish(SessionState),
    /// The jobs' state, for a daemon adopting the session.
    SaveJobs(Vec<JobRecord>),
    /// These command records (by number, oldest first) changed: save them.
    SaveRecords(Vec<u64>),
    /// The session rests: its journal window may leave memory; `trim`: the terminal gave back
    /// enough for the allocator to return memory to the system.
    Rest { trim: bool },
    /// A send's caller was handed its answer in this event: the actor lets it go out before
    /// it takes in more output (the event's other effects, saving the command's record among
    /// them, are carried out before: the answer never runs ahead of what a successor adopts).
    Answered,
}

/// What one event is handled with: the port, the time, and the effects it produces.
pub(super) struct Cx<'a> {
    pub(super) tty: &'a mut dyn Tty,
    /// The time of the event.
    pub(super) now: Instant,
    /// The same moment in milliseconds since the epoch.
    pub(super) unix_ms: i64,
    effects: Vec<Effect>,
}

impl Cx<'_> {
    fn effect(&mut self, effect: Effect) {
        self.effects.push(effect);
    }
}

/// One session's state and decisions.
pub(super) struct Core {
    /// What the session was started with.
    spec: Arc<SessionSpec>,
    /// The terminal model: screen, history, modes.
    terminal: Terminal,
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
    /// Starting (and who waits for it to be ready: its first prompt, a program reading the
    /// terminal, its exit or the end of its startup wait), running, or exited and how (see
    /// `startup.rs`).
    lifecycle: Lifecycle<oneshot::Sender<Ready>>,
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
    /// Signals that wait for the command they are aimed at (see `aim.rs`).
    signals: WaitingSignals,
    /// The marks a compacted journal keeps for a successor (see `shell_marks.rs`).
    shell_marks: ShellMarks,
    /// The commands the shell ran, as records (see `records.rs`).
    commands: CommandBook,
    /// Who holds the keyboard: the agent, or a person attached (see `keyboard.rs`).
    keyboard: Keyboard,
}

impl Core {
    /// A starting session's core; `commands`: the records a predecessor saved.
    pub(super) fn new(spec: Arc<SessionSpec>, commands: CommandBook, now: Instant) -> Core {
        let mut terminal =
            Terminal::new(spec.cols, spec.rows, spec.history_lines, spec.history_bytes);
        terminal.set_mark_key(spec.mark_key.clone());
        Core {
            terminal,
            lifecycle: Lifecycle::starting(Startup::new(
                now,
                spec.startup_timeout,
                (spec.integration == Integration::None).then_some(spec.startup_idle),
            )),
            shell: Shell::new(spec.integration),
            spec,
            active: None,
            deferred: None,
            probe: ProbeSchedule::new(now),
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
            signals: WaitingSignals::default(),
            shell_marks: ShellMarks::default(),
            commands,
            keyboard: Keyboard::default(),
        }
    }

    /// Handles `event` at `now` (`unix_ms`: the same moment on the wall clock), asking `tty`
    /// what it must know; returns what the actor carries out.
    pub(super) fn handle(
        &mut self,
        event: Event<'_>,
        now: Instant,
        unix_ms: i64,
        tty: &mut dyn Tty,
    ) -> Vec<Effect> {
        let mut cx = Cx {
            tty,
            now,
            unix_ms,
            effects: Vec::new(),
        };
        match event {
            Event::Output(bytes) => self.take_output(&mut cx, bytes),
            Event::TurnBack(bytes) => {
                if !bytes.is_empty() {
                    self.before_emulation(&mut cx, bytes);
                    self.after_emulation(&mut cx);
                }
                self.after_taking_output(&mut cx);
            }
            Event::InputWritten(written) => self.on_written(&mut cx, written),
            Event::RepliesWritten(written) => self.on_reply_written(written),
            Event::KeysWritten(written) => self.on_keys_written(&mut cx, written),
            Event::Exited(kind) => self.on_exit(&mut cx, kind),
            Event::Request(cmd) => self.on_command(&mut cx, cmd),
            Event::CallerGone => self.on_caller_gone(&mut cx),
            Event::Tick => self.on_timer(&mut cx),
            Event::Adopted(replay) => self.adopt(&mut cx, replay),
        }
        self.evaluate(&mut cx);
        cx.effects
    }

    /// What may be written now: answers to the program's queries, the send's input (its
    /// first byte taken as written now, see `before_first_write`), or nothing.
    pub(super) fn next_write(&mut self, now: Instant, tty: &mut dyn Tty) -> Write {
        let write = self.shell.next_write(now);
        if write == Write::Input
            && let Some(to) = self.shell.take_first_write(self.terminal.cursor())
        {
            self.before_first_write(tty, to);
        }
        write
    }

    /// What the actor's loop waits on besides the terminal, borrowed together: the bytes
    /// `write` (from `next_write`) puts out, a person's keys waiting to go in, and the send in
    /// flight (whose caller may hang up).
    pub(super) fn waits(&mut self, write: Write) -> (&[u8], &[u8], &mut Option<ActiveSend>) {
        (
            self.shell.pending(write),
            self.keyboard.pending(),
            &mut self.active,
        )
    }

    /// Puts `terminal` in the terminal model's place and gives back the one that was there: a
    /// flood's turn takes the model away with a stand-in in its place (nothing reads that: the
    /// actor hands the core no event until the turn is back) and puts it back before
    /// `Event::TurnBack`.
    pub(super) fn swap_terminal(&mut self, terminal: Terminal) -> Terminal {
        std::mem::replace(&mut self.terminal, terminal)
    }

    /// The marks that bring a new shell state where this one is: what a compacted journal
    /// restores beside the terminal's checkpoint.
    pub(super) fn kept_marks(&self) -> Vec<MarkEvent> {
        self.shell_marks.kept()
    }

    /// The command records, to save (see `Effect::SaveRecords`).
    pub(super) fn records(&self) -> &CommandBook {
        &self.commands
    }

    /// Whether the program exited.
    pub(super) fn exited(&self) -> bool {
        self.lifecycle.exit().is_some()
    }

    /// The session ends: its send and the send waiting for a signal's answer hear that it is
    /// gone (what is saved no longer matters: the session's state goes with it).
    pub(super) fn shutdown(&mut self, now: Instant, unix_ms: i64, tty: &mut dyn Tty) {
        let mut cx = Cx {
            tty,
            now,
            unix_ms,
            effects: Vec::new(),
        };
        if let Some(a) = self.active.take() {
            let error = Error::session_not_found(&self.spec.id);
            self.end_send(&mut cx, a.fail(error));
        }
        if let Some((_, sink)) = self.deferred.take() {
            sink.refuse(Error::session_not_found(&self.spec.id));
        }
    }
}
