//! The session actor: one task owns the PTY master, the child, the terminal model and the send
//! in flight, and runs one `select!` over PTY output, pending input, commands, the child's exit,
//! the caller hanging up and the nearest deadline (send timeout, idle, stdin probe, startup).

mod adopt;
mod compact;
mod output;
mod reader;
mod signals;

use super::aim::WaitingSignals;
use super::capture::Capture;
use super::jobs::Jobs;
use super::kill::JobKill;
use super::pacing::Pacing;
use super::probe::ProbeSchedule;
use super::send::{
    ActiveSend, ActiveSink, JobEnd, StreamSink, busy_error, caller_gone, line_limit_refusal,
};
use super::shell::{FirstWrite, MarkEffect, Shell, Write, printable, typeahead_refusal};
use super::shell_marks::ShellMarks;
use super::watchers::Watchers;
use super::{
    Command, JobStatus, Ready, SendInput, SessionSpec, SessionState, Sink, Status, unix_ms, view,
};
use crate::error::{Error, Result};
use crate::marks::{Integration, Mark};
use crate::process::procfs;
use crate::process::pty::{ExitKind, Pty};
use crate::screen::{Position, Terminal};
use crate::waiting::{self, Observed, WaitReason};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, mpsc, oneshot, watch};

/// How long after writing a send's input the actor polls the terminal for output instead of
/// sleeping until the kernel wakes it. Most commands an agent runs answer within this; waking a
/// thread from idle (on a virtual machine, an idle vCPU) costs tens of microseconds on top. The
/// polling yields to every other task between reads, and ends when the send settles.
const SPIN: Duration = Duration::from_micros(250);
/// Idle time after which a session's screen rests, its emulator grid freed until the next
/// output or read (most of an idle session's memory; see `Terminal::rest`).
const REST_AFTER: Duration = Duration::from_secs(1);
/// How often output updates the state `List` and `JobOutput` waiters see (line count, last
/// output time) while output keeps coming.
const PUBLISH_INTERVAL: Duration = Duration::from_millis(50);

pub(super) struct Actor {
    spec: Arc<SessionSpec>,
    pty: Pty,
    terminal: Terminal,
    state: watch::Sender<SessionState>,
    exit: Option<ExitKind>,
    /// The master hung up: no process holds the terminal any more.
    eof: bool,
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
    ready_waiters: Vec<oneshot::Sender<Ready>>,
    ready: bool,
    startup_deadline: Instant,
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
    /// When the state was last published, and when a skipped update is due.
    last_publish: Instant,
    publish_due: Option<Instant>,
    /// Raw output for `Watch` subscribers.
    watchers: Watchers,
    /// Output is being taken in before answers go out (see `take_output_before_replies`).
    taking_output: bool,
    /// Answers were queued by output just handled: take in what is already there first.
    replies_await_output: bool,
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
        Actor {
            terminal,
            startup_deadline: now + spec.startup_timeout,
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
            ready_waiters: Vec::new(),
            ready: false,
            last_output: now,
            rest_due: None,
            spin_until: None,
            last_seen: Position::default(),
            last_seen_line: None,
            end_lines: view::EndLines::default(),
            last_publish: now,
            publish_due: None,
            watchers: Watchers::default(),
            taking_output: false,
            replies_await_output: false,
            jobs: Jobs::default(),
            capture: Capture::new(kept.journal),
            store: kept.store,
            replay: kept.replay,
            signals: WaitingSignals::default(),
            shell_marks: ShellMarks::default(),
            compact_at,
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::Receiver<Command>, stop: Arc<Notify>) {
        if let Some(replay) = self.replay.take() {
            self.adopt(replay);
        }
        loop {
            self.capture.prepare(&self.spec.id);
            let now = Instant::now();
            let deadline = self.next_deadline(now);
            // The shell decides when input may go in (see `shell.rs`).
            let write = self.shell.next_write(now);
            if write == Write::Input
                && let Some(to) = self.shell.take_first_write(self.terminal.cursor())
            {
                self.before_first_write(to);
            }
            let writing = write != Write::Nothing;
            let pending = self.shell.pending(write);
            tokio::select! {
                read = self.capture.read(&self.pty, self.pacing.read_limit()), if !self.eof => {
                    match read {
                        Ok(0) | Err(_) => self.eof = true,
                        Ok(n) => self.take_output(n),
                    }
                }
                exit = self.pty.wait_exit(), if self.exit.is_none() => {
                    self.on_exit(exit.unwrap_or(ExitKind::Code(0)));
                }
                written = self.pty.write_some(pending), if writing => {
                    if write == Write::Replies {
                        self.on_reply_written(written);
                    } else {
                        self.on_written(written);
                    }
                }
                cmd = commands.recv() => match cmd {
                    Some(cmd) => self.on_command(cmd),
                    None => break,
                },
                _ = caller_gone(&mut self.active), if self.active.is_some() => {
                    self.on_caller_gone();
                }
                _ = sleep_until(deadline), if deadline.is_some() => self.on_timer(),
                _ = tokio::task::yield_now(), if self.spinning() => self.read_now(),
                _ = stop.notified() => break,
            }
            self.evaluate();
            if self.pacing.slice_used() {
                // A flood keeps the PTY always readable: let other sessions and RPCs run (tokio's
                // own budget would allow 128 reads).
                tokio::task::yield_now().await;
            }
        }
        self.shutdown().await;
        crate::process::memory::trim_soon();
    }

    fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let startup = (!self.ready).then(|| match self.startup_idle_deadline() {
            Some(idle) => self.startup_deadline.min(idle),
            None => self.startup_deadline,
        });
        let send = self.active.as_ref().map(|a| a.next_deadline(now));
        let probe = self.probe.next().filter(|_| self.wants_probe());
        let prompt_gate = self.shell.write_deadline(now);
        let rest = self.rest_due.filter(|_| self.active.is_none());
        let signals = self.signals.next_check(now);
        let deferred = self
            .deferred
            .as_ref()
            .and_then(|_| self.shell.signal_gate(now));
        [
            startup,
            send,
            deferred,
            probe,
            self.publish_due,
            prompt_gate,
            rest,
            signals,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// When output silence makes a starting session ready. Integrated shells are ready at their
    /// first prompt mark (or a program reading the terminal, or the deadline): a slow rc file is
    /// not a prompt, and input typed before the line editor starts would be lost or mis-settled.
    fn startup_idle_deadline(&self) -> Option<Instant> {
        (self.spec.integration == Integration::None)
            .then(|| self.last_output + self.spec.startup_idle)
    }

    /// Probes run only while someone waits: a send whose input is written, or startup.
    fn wants_probe(&self) -> bool {
        if !self.ready
            || (self.shell.input_gated() && self.shell.input_pending())
            || self.shell.input_held()
        {
            return true;
        }
        self.active.as_ref().is_some_and(|a| {
            !a.stdin_blocked && !self.shell.input_pending() && a.span.end.is_none()
        }) && self.exit.is_none()
    }

    /// Polls for output while a send that just wrote its input waits for the answer.
    fn spinning(&self) -> bool {
        self.spin_until.is_some_and(|until| Instant::now() < until)
            && self
                .active
                .as_ref()
                .is_some_and(|a| a.span.end.is_none() && !a.stdin_blocked)
    }

    fn rearm_probe(&mut self) {
        self.probe.rearm(Instant::now());
    }

    /// Keeps the jobs' state for a daemon adopting the session.
    fn save_jobs(&mut self) {
        let Some(store) = &mut self.store else {
            return;
        };
        let mut records = self.jobs.records();
        if let Some(a) = &self.active
            && let Some(id) = a.job_id()
            && let Some(job) = records.iter_mut().find(|j| j.id == id)
        {
            let left = a
                .deadlines()
                .timeout
                .saturating_duration_since(Instant::now());
            job.wait = Some((
                unix_ms(SystemTime::now() + left),
                a.input.idle.as_millis() as u64,
            ));
        }
        store.set_jobs(records);
    }

    fn on_exit(&mut self, kind: ExitKind) {
        // What the program wrote before it exited is in the terminal already: take it in
        // first, or the send would settle (and a Read answer) without the program's last words.
        self.take_waiting_output(|_| true);
        self.exit = Some(kind);
        // Watchers see the stream end with the program.
        self.watchers.end();
        self.publish();
    }

    fn on_written(&mut self, written: std::io::Result<usize>) {
        match written {
            Ok(n) => {
                if let Some(a) = self.active.as_mut() {
                    a.last_activity = Instant::now();
                }
                self.rearm_probe();
                if self.shell.input_written(n) {
                    self.spin_until = Some(Instant::now() + SPIN);
                }
            }
            Err(e) => {
                let error = Error::FailedPrecondition(format!(
                    "writing to terminal session {} failed: {e}",
                    self.spec.id
                ));
                self.shell.drop_input();
                if let Some(a) = self.active.take() {
                    self.end_send(a.fail(error));
                }
            }
        }
    }

    /// The caller of the send in flight hung up (or its deadline passed): stop waiting and
    /// release the reservation; what was written stays written. Nobody saw the send's output, so
    /// the next send's viewport starts where this one's did: at its command's start mark when
    /// the command started (not before the prompt and the echoed line, where `last_seen` still
    /// is), as a settled send leaves `last_seen` where its viewport ended.
    fn on_caller_gone(&mut self) {
        if let Some(a) = self.active.take()
            && let Some(start) = a.span.start
        {
            self.last_seen = start;
        }
        self.shell.drop_input();
        self.publish();
    }

    fn on_reply_written(&mut self, written: std::io::Result<usize>) {
        if let Err(e) = &written {
            tracing::debug!(session = %self.spec.id, error = %e, "answering a terminal query failed");
        }
        self.shell.replies_written(written.ok());
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        if self.active.is_none() && self.rest_due.is_some_and(|at| now >= at) {
            self.rest_due = None;
            self.capture.rest();
            if self.terminal.rest() {
                crate::process::memory::trim_soon();
            }
        }
        if self.publish_due.is_some_and(|at| now >= at) {
            self.publish();
        }
        let shell = self.pty.pid() as i32;
        if let Some(a) = self.active.as_mut().filter(|a| a.span.end.is_none())
            && let Some(kill) = a.killing.as_mut()
        {
            kill.step(shell, self.pty.foreground_pgid(), now);
        }
        if self.probe.next().is_some_and(|at| now >= at) && self.wants_probe() {
            self.run_probe();
            self.probe.back_off(now);
        }
    }

    fn on_command(&mut self, cmd: Command) {
        self.rest_due = Some(Instant::now() + REST_AFTER);
        match cmd {
            Command::Ready(reply) => {
                if self.ready {
                    let _ = reply.send(self.ready_info());
                } else {
                    self.ready_waiters.push(reply);
                }
            }
            Command::Read(query, reply) => {
                let _ = reply.send(view::read(&self.terminal, query));
            }
            Command::Send(input, sink) => self.on_send(input, sink),
            Command::Watch(replay, reply) => {
                let lines = view::replay(&self.terminal, replay);
                let _ = reply.send((lines, self.watchers.subscribe()));
            }
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

    pub(super) fn begin_send(&mut self, input: SendInput, sink: Sink) {
        let mut types_ahead = false;
        let refusal = if let Some(a) = &self.active {
            Some(a.busy_error(&self.spec.id))
        } else if self.exit.is_some() {
            Some(self.exited_error())
        } else {
            line_limit_refusal(&input.text, || {
                use nix::sys::termios::LocalFlags;
                self.pty
                    .termios()
                    .is_some_and(|t| t.local_flags.contains(LocalFlags::ICANON))
            })
            .or_else(|| {
                types_ahead = self.types_ahead(&input);
                (types_ahead && !input.typeahead).then(|| self.typeahead_refusal())
            })
        };
        if let Some(error) = refusal {
            sink.refuse(error);
            return;
        }
        let now = Instant::now();
        let anchor = Position {
            line: self.last_seen.line.max(1),
            col: 0,
        };
        let sink = match sink {
            Sink::Reply(r) => ActiveSink::Reply(r),
            Sink::Stream(r, chunks) => {
                let key = self.spec.mark_key.clone();
                ActiveSink::Stream(r, StreamSink::new(chunks, self.spec.integration, key))
            }
            Sink::Job(id, confirm) => {
                self.jobs.start(id.clone(), anchor.line);
                let _ = confirm.send(Ok(()));
                ActiveSink::Job(id)
            }
        };
        let mut active = ActiveSend::new(input, sink, anchor, now);
        if active.input.is_pure_wait() {
            // Report a command that ended meanwhile, or an idle prompt, at once.
            active.span.end = self.shell.begin_wait(self.last_seen);
        } else {
            let bracketed_paste =
                active.input.text.contains('\n') && self.terminal.bracketed_paste();
            active.input_len = self.shell.begin_input(&active.input, bracketed_paste);
            if types_ahead {
                self.shell.hold_input();
            }
        }
        let job = active.job_id().is_some();
        self.active = Some(active);
        if job {
            self.save_jobs();
        }
        self.rearm_probe();
        self.publish();
    }

    /// Just before a send's first byte is written (its input may have waited for the prompt):
    /// takes the schedule counts the input is judged against, so that what ran meanwhile does
    /// not count as taking it, and encodes multi-line input again, since whether the shell's
    /// line editor takes bracketed paste is known only once its prompt is up.
    fn before_first_write(&mut self, to: FirstWrite) {
        self.probe.before_write(self.pty.pid() as i32, to.at_prompt);
        if let Some(a) = self.active.as_mut().filter(|a| a.input.text.contains('\n')) {
            a.input_len = self
                .shell
                .encode_again(&a.input, to, self.terminal.bracketed_paste());
        }
    }

    /// Settles readiness and the active send when their conditions hold.
    fn evaluate(&mut self) {
        self.deliver_signals();
        let now = Instant::now();
        self.begin_deferred_send(now);
        if !self.ready
            && (self.exit.is_some()
                || now >= self.startup_deadline
                || self.startup_idle_deadline().is_some_and(|idle| now >= idle))
        {
            self.become_ready("exit, idle or deadline");
        }
        let Some(a) = self.active.as_ref() else {
            return;
        };
        let input_written = !self.shell.input_pending();
        let observed = Observed {
            exited: self.exit.is_some(),
            prompt_returned: a.span.end.is_some(),
            stdin_blocked: a.stdin_blocked,
            input_written,
        };
        let kill_gave_up = a.killing.as_ref().is_some_and(|k| k.gave_up(now));
        let reason = waiting::decide(&observed, &a.deadlines(), now)
            .or_else(|| kill_gave_up.then_some(WaitReason::Timeout));
        let Some(reason) = reason else { return };
        let mut a = self.active.take().expect("checked above");
        if !input_written {
            a.unwritten = self.shell.drop_input();
        }
        let exit_code = match self.exit {
            Some(ExitKind::Code(c)) => Some(c),
            _ => None,
        };
        let (outcome, end, end_line) = a.outcome(
            reason,
            &self.terminal,
            &self.end_lines,
            exit_code,
            self.status(),
            self.cwd(),
        );
        self.last_seen = end;
        self.last_seen_line = end_line;
        self.end_send(a.settle(outcome));
    }

    /// Records a job's end (a kill in progress hears how it ended) and publishes that the
    /// session is free.
    fn end_send(&mut self, ended: Option<JobEnd>) {
        if let Some(JobEnd { id, outcome, kill }) = ended {
            let status = match outcome {
                Ok(outcome) => {
                    let killed = kill.is_some();
                    let end_line = self.last_seen_line.take();
                    self.jobs
                        .finish(&id, killed, self.last_seen, end_line, outcome);
                    if killed {
                        JobStatus::Killed
                    } else {
                        JobStatus::Completed
                    }
                }
                Err(error) => {
                    self.jobs.fail(&id, error.to_string());
                    JobStatus::Failed
                }
            };
            if let Some(kill) = kill {
                kill.settled(status);
            }
            self.save_jobs();
        }
        self.publish();
    }

    fn become_ready(&mut self, why: &str) {
        tracing::debug!(session = %self.spec.id, why, "ready");
        self.ready = true;
        let info = self.ready_info();
        for w in self.ready_waiters.drain(..) {
            let _ = w.send(info.clone());
        }
        let cursor = self.terminal.cursor();
        // An integrated shell's first prompt is no one's output: an empty send right after
        // Open reports nothing new, as it does after any command.
        self.last_seen = if self.spec.integration == Integration::None {
            cursor
        } else {
            Position { col: 0, ..cursor }
        };
        // List shows the startup output (line count, time) as soon as Open has returned.
        self.publish();
    }

    fn ready_info(&self) -> Ready {
        // The MOTD is what came before the prompt line.
        let at_prompt = self.spec.integration != Integration::None && self.exit.is_none();
        Ready {
            motd: view::motd(&self.terminal, at_prompt),
        }
    }

    fn status(&self) -> Status {
        match self.exit {
            Some(kind) => Status::Exited(kind),
            None => Status::Running,
        }
    }

    fn cwd(&self) -> String {
        crate::process::procfs::cwd(self.pty.pid() as i32)
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// Publishes after output, at most once per `PUBLISH_INTERVAL`: under a flood, counting
    /// lines for every read would cost the daemon's other sessions and RPCs their CPU. A skipped
    /// update is made up by a timer, so readers of the state never miss the last one.
    fn publish_output(&mut self) {
        let now = Instant::now();
        if now >= self.last_publish + PUBLISH_INTERVAL {
            self.publish();
        } else if self.publish_due.is_none() {
            self.publish_due = Some(self.last_publish + PUBLISH_INTERVAL);
        }
    }

    fn publish(&mut self) {
        self.last_publish = Instant::now();
        self.publish_due = None;
        let total_lines = self.terminal.total_lines();
        let busy = self.active.is_some() || self.deferred.is_some();
        let status = self.status();
        let last = unix_ms(SystemTime::now() - self.last_output.elapsed());
        self.state.send_modify(|s| {
            s.total_lines = total_lines;
            s.busy = busy;
            s.status = status;
            s.last_output_unix_ms = last;
        });
    }

    async fn shutdown(mut self) {
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
