//! The session actor: one task owns the PTY master, the child, the terminal model and the send
//! in flight, and runs one `select!` over PTY output, pending input, commands, the child's exit,
//! the caller hanging up and the nearest deadline (send timeout, idle, stdin probe, startup).

use super::kill::JobKill;
use super::{
    Command, JobReport, JobStatus, ReadOutcome, ReadQuery, Ready, SendInput, SendOutcome,
    SessionSpec, SessionState, Sink, Status, status_text, unix_ms,
};
use crate::error::{Error, Result};
use crate::marks::{Integration, Mark, RegionScanner, Utf8Splitter};
use crate::process::pty::{ExitKind, Pty};
use crate::render;
use crate::screen::{Position, Terminal};
use crate::validate::{KERNEL_LINE_LIMIT, longest_line};
use crate::waiting::{self, Deadlines, Observed, WaitReason};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, broadcast, mpsc, oneshot, watch};

/// PTY read buffer: a master read rarely returns more than a few KiB.
const READ_BUF: usize = 16 * 1024;

thread_local! {
    /// The read buffer of every session on this thread: an actor uses what it read before it
    /// awaits anything else, so one buffer serves them all and an idle session holds none.
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; READ_BUF]);
}
/// Output an actor takes in before it lets other tasks run (about 0.2 ms of emulation): under
/// a flood the PTY is always readable, and tokio's own budget would allow 128 reads.
const YIELD_AFTER_BYTES: usize = 64 * 1024;
/// How long after writing a send's input the actor polls the terminal for output instead of
/// sleeping until the kernel wakes it. Most commands an agent runs answer within this; waking a
/// thread from idle (on a virtual machine, an idle vCPU) costs tens of microseconds on top. The
/// polling yields to every other task between reads, and ends when the send settles.
const SPIN: Duration = Duration::from_micros(250);
/// Idle time after which a session's screen rests, its emulator grid freed until the next
/// output or read (most of an idle session's memory; see `Terminal::rest`).
const REST_AFTER: Duration = Duration::from_secs(1);
/// Delays between stdin probes while a send waits, restarted by every output chunk and write.
/// There is no kernel event for "a reader blocked", so detection latency is the probe step:
/// quick at first (most programs block at once), then backing off so a long wait costs nothing.
const PROBE_BACKOFF_MS: [u64; 8] = [1, 2, 4, 10, 25, 50, 100, 250];
/// Raw-output chunks buffered for `Watch` subscribers before a slow one starts losing chunks.
const WATCH_BUFFER: usize = 1024;
/// After a command-end mark, how long the next input waits for the prompt mark that follows
/// it before it is written anyway (a prompt without marks, such as a theme that rebuilt PS1
/// late).
const PROMPT_SETTLE: Duration = Duration::from_millis(200);
/// How often output updates the state `List` and `JobOutput` waiters see (line count, last
/// output time) while output keeps coming.
const PUBLISH_INTERVAL: Duration = Duration::from_millis(50);
/// Raw bytes a streaming caller may fall behind by before the excess is dropped.
const STREAM_BACKLOG: usize = 8 << 20;

/// A job's bookkeeping, kept after it finished so JobOutput can report it.
struct JobRecord {
    status: JobStatus,
    /// Lines before this one have been returned by JobOutput.
    consumed: u64,
    /// The settled send, once finished.
    outcome: Option<SendOutcome>,
    /// Why it failed.
    detail: String,
    /// Where its output starts (the command-start mark, or the input line).
    start: Option<Position>,
    /// Where its output ends, once finished.
    end: Option<Position>,
}

/// Raw output forwarding for a streaming send.
struct StreamSink {
    chunks: mpsc::Sender<Vec<u8>>,
    /// Only the command's output region for integrated shells.
    region: Option<RegionScanner>,
    utf8: Utf8Splitter,
    /// Bytes the caller has not accepted yet.
    backlog: Vec<u8>,
}

/// The send being waited on.
struct ActiveSend {
    input: SendInput,
    sink: ActiveSink,
    started: Instant,
    /// Where the viewport starts when no command-start mark arrives.
    anchor: Position,
    /// Position of the command-start mark seen during this send.
    command_start: Option<Position>,
    /// Exit status and position of the command-end mark that settles this send.
    command_end: Option<(Option<i32>, Position)>,
    /// Last output or write.
    last_activity: Instant,
    /// The probe found a program blocked reading the terminal.
    stdin_blocked: bool,
    /// Bytes that could not be written before the deadline.
    unwritten: usize,
    /// Bytes the send writes in all (text, Enter, keys).
    input_len: usize,
    /// Set by JobKill: finish as killed when the command ends or the kill gives up.
    killing: Option<JobKill>,
}

enum ActiveSink {
    Reply(oneshot::Sender<Result<SendOutcome>>),
    Stream(oneshot::Sender<Result<SendOutcome>>, StreamSink),
    Job(String),
}

/// Where a send's input goes, as it was when the send began.
#[derive(Clone, Copy)]
struct FirstWrite {
    /// To an integrated shell's line editor at its prompt.
    at_prompt: bool,
    /// The shell kept a line it refused: clear it first.
    clear_kept_line: bool,
}

/// A command that ended while no send was waiting for it; the next pure wait reports it.
#[derive(Clone, Copy)]
struct UnreportedEnd {
    exit_code: Option<i32>,
    end: Position,
}

pub(super) struct Actor {
    spec: Arc<SessionSpec>,
    pty: Pty,
    terminal: Terminal,
    state: watch::Sender<SessionState>,
    exit: Option<ExitKind>,
    /// The master hung up: no process holds the terminal any more.
    eof: bool,
    active: Option<ActiveSend>,
    /// Input still to be written for the active send.
    outbox: Vec<u8>,
    outbox_pos: usize,
    /// Answers to terminal queries, written before any pending input.
    replies: Vec<u8>,
    /// Schedule counts of the foreground threads just before the send's input was written; a
    /// reader counts as blocked only once it has moved past them (it has taken the input).
    switches_at_write: std::collections::HashMap<i32, u64>,
    /// The shell's schedule count, opened on first use (see `schedule_counts`).
    shell_counter: Option<waiting::probe::ScheduleCounter>,
    /// A send's input is about to be written for the first time (see `before_first_write`).
    first_write: Option<FirstWrite>,
    ready_waiters: Vec<oneshot::Sender<Ready>>,
    ready: bool,
    startup_deadline: Instant,
    last_output: Instant,
    /// When the idle terminal's screen may rest (see `Terminal::rest`); set by output and by
    /// every command, cleared once it rests.
    rest_due: Option<Instant>,
    /// Until when the actor polls for the answer to input it just wrote (see `SPIN`).
    spin_until: Option<Instant>,
    /// The integrated shell is idle at its prompt (a D or A mark and no input since).
    shell_at_prompt: bool,
    /// The shell refused the last line and keeps it in its editor: clear it before new input.
    line_kept: bool,
    /// An integrated shell has shown its first prompt (its line editor takes input).
    prompt_seen: bool,
    /// The probe found the program reading the terminal before any prompt mark (a shell whose
    /// rc file replaced it, or asks a question): input may go in.
    reader_seen: bool,
    /// Position of the latest command-start mark whose end has not been seen.
    command_start: Option<Position>,
    unreported: Option<UnreportedEnd>,
    /// When a command-end mark arrived whose prompt mark has not followed yet. A send settles
    /// at the end mark, but the next input is written only once the prompt is drawn, so it
    /// finds the line editor ready (input typed earlier would be echoed twice) and the late
    /// prompt marks are not taken for the next command's.
    prompt_pending: Option<Instant>,
    /// fish's prompt mark came; `prompt_pending` ends when its line editor is up.
    editor_pending: bool,
    /// Where the previous send's viewport ended.
    last_seen: Position,
    /// When the state was last published, and when a skipped update is due.
    last_publish: Instant,
    publish_due: Option<Instant>,
    /// Next stdin probe and the back-off step that scheduled it.
    next_probe: Option<Instant>,
    probe_step: usize,
    /// Raw output for `Watch` subscribers (dropped once the program exited).
    watchers: Option<broadcast::Sender<Arc<[u8]>>>,
    /// The program exited: watchers get no live feed any more.
    watch_ended: bool,
    watch_utf8: Utf8Splitter,
    jobs: BTreeMap<String, JobRecord>,
}

impl Actor {
    pub(super) fn new(
        spec: Arc<SessionSpec>,
        pty: Pty,
        state: watch::Sender<SessionState>,
    ) -> Actor {
        let now = Instant::now();
        let mut terminal =
            Terminal::new(spec.cols, spec.rows, spec.history_lines, spec.history_bytes);
        terminal.set_mark_key(spec.mark_key.clone());
        Actor {
            terminal,
            startup_deadline: now + spec.startup_timeout,
            spec,
            pty,
            state,
            exit: None,
            eof: false,
            active: None,
            outbox: Vec::new(),
            outbox_pos: 0,
            replies: Vec::new(),
            switches_at_write: std::collections::HashMap::new(),
            shell_counter: None,
            first_write: None,
            ready_waiters: Vec::new(),
            ready: false,
            last_output: now,
            rest_due: None,
            spin_until: None,
            shell_at_prompt: false,
            line_kept: false,
            prompt_seen: false,
            reader_seen: false,
            command_start: None,
            unreported: None,
            prompt_pending: None,
            editor_pending: false,
            last_seen: Position::default(),
            next_probe: Some(now),
            last_publish: now,
            publish_due: None,
            probe_step: 0,
            watchers: None,
            watch_ended: false,
            watch_utf8: Utf8Splitter::default(),
            jobs: BTreeMap::new(),
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::Receiver<Command>, stop: Arc<Notify>) {
        let mut unyielded = 0usize;
        loop {
            let deadline = self.next_deadline();
            let replying = !self.replies.is_empty();
            // Input waits for an integrated shell's first prompt: typed earlier, while the rc
            // files run, the shell's line editor would not see it.
            // Input after a command waits for the next prompt to be drawn, so it meets a ready
            // line editor (typed earlier, the terminal would echo it twice).
            let writing = replying
                || (!self.input_gated()
                    && self.prompt_gate().is_none()
                    && self.outbox_pos < self.outbox.len());
            if writing && !replying {
                self.before_first_write();
            }
            let pending: &[u8] = if replying {
                &self.replies
            } else {
                &self.outbox[self.outbox_pos..]
            };
            tokio::select! {
                read = self.pty.read_shared(&READ_BUFFER), if !self.eof => match read {
                    Ok(0) | Err(_) => self.eof = true,
                    Ok(n) => {
                        READ_BUFFER.with_borrow(|buf| self.on_output(&buf[..n]));
                        unyielded += n;
                    }
                },
                exit = self.pty.wait_exit(), if self.exit.is_none() => {
                    self.on_exit(exit.unwrap_or(ExitKind::Code(0)));
                }
                written = self.pty.write_some(pending), if writing => {
                    if replying {
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
                    // The caller hung up: stop waiting and release the reservation; what was
                    // written stays written.
                    self.active = None;
                    self.clear_outbox();
                    self.publish();
                }
                _ = sleep_until(deadline), if deadline.is_some() => self.on_timer(),
                _ = tokio::task::yield_now(), if self.spinning() => self.read_now(),
                _ = stop.notified() => break,
            }
            self.evaluate();
            if unyielded >= YIELD_AFTER_BYTES {
                // A flood keeps the PTY always readable: let other sessions and RPCs run.
                unyielded = 0;
                tokio::task::yield_now().await;
            }
        }
        self.shutdown().await;
        crate::memory::trim_soon();
    }

    fn next_deadline(&self) -> Option<Instant> {
        let startup = (!self.ready).then(|| match self.startup_idle_deadline() {
            Some(idle) => self.startup_deadline.min(idle),
            None => self.startup_deadline,
        });
        let send = self.active.as_ref().map(|a| {
            let d = deadlines(a);
            let kill = a.killing.as_ref().map(|k| k.next_check(Instant::now()));
            [Some(d.timeout), Some(d.idle), kill]
                .into_iter()
                .flatten()
                .min()
                .expect("non-empty")
        });
        let probe = self.next_probe.filter(|_| self.wants_probe());
        let prompt_gate = self
            .prompt_gate()
            .filter(|_| self.outbox_pos < self.outbox.len());
        let rest = self.rest_due.filter(|_| self.active.is_none());
        [startup, send, probe, self.publish_due, prompt_gate, rest]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether input must wait: an integrated shell still running its rc files (no prompt mark
    /// yet, nobody reading the terminal). Typed then, it would be echoed and lost when the line
    /// editor starts.
    fn input_gated(&self) -> bool {
        self.spec.integration != Integration::None && !self.prompt_seen && !self.reader_seen
    }

    /// Until when input must wait for the prompt that follows a command-end mark (at most
    /// `PROMPT_SETTLE`, for a prompt drawn without marks); `None` when it need not wait.
    fn prompt_gate(&self) -> Option<Instant> {
        self.prompt_pending
            .map(|at| at + PROMPT_SETTLE)
            .filter(|until| Instant::now() < *until)
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
        if !self.ready || (self.input_gated() && self.outbox_pos < self.outbox.len()) {
            return true;
        }
        self.active.as_ref().is_some_and(|a| {
            !a.stdin_blocked && self.outbox_pos >= self.outbox.len() && a.command_end.is_none()
        }) && self.exit.is_none()
    }

    /// Polls for output while a send that just wrote its input waits for the answer.
    fn spinning(&self) -> bool {
        self.spin_until.is_some_and(|until| Instant::now() < until)
            && self
                .active
                .as_ref()
                .is_some_and(|a| a.command_end.is_none() && !a.stdin_blocked)
    }

    /// Takes whatever output is there, without waiting.
    fn read_now(&mut self) {
        let read = READ_BUFFER.with_borrow_mut(|buf| self.pty.try_read(buf));
        if let Ok(Some(n)) = read
            && n > 0
        {
            READ_BUFFER.with_borrow(|buf| self.on_output(&buf[..n]));
        }
    }

    fn rearm_probe(&mut self) {
        self.probe_step = 0;
        self.next_probe = Some(Instant::now() + Duration::from_millis(PROBE_BACKOFF_MS[0]));
    }

    fn on_output(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        self.last_output = now;
        self.rest_due = Some(now + REST_AFTER);
        if let Some(a) = self.active.as_mut() {
            a.last_activity = now;
            a.stdin_blocked = false;
        }
        self.rearm_probe();
        self.forward(bytes);
        self.terminal.feed(bytes);
        let replies = self.terminal.take_replies();
        if !replies.is_empty() {
            // The program waits for these answers: it is not waiting for the agent until it
            // has taken them.
            self.switches_at_write = waiting::probe::task_switches(self.pty.pid() as i32);
            self.replies.extend(replies);
        }
        for event in self.terminal.take_marks() {
            self.on_mark(event.mark, event.at);
        }
        if self.editor_pending && self.terminal.bracketed_paste() {
            self.editor_pending = false;
            self.prompt_pending = None;
        }
        self.publish_output();
    }

    /// Sends raw output to watchers and to a streaming caller.
    fn forward(&mut self, bytes: &[u8]) {
        if let Some(w) = &self.watchers
            && w.receiver_count() > 0
        {
            let piece = self.watch_utf8.split(bytes);
            if !piece.is_empty() {
                let _ = w.send(piece.into());
            }
        }
        if let Some(ActiveSend {
            sink: ActiveSink::Stream(_, s),
            ..
        }) = self.active.as_mut()
        {
            let mut picked = Vec::new();
            match s.region.as_mut() {
                Some(region) => region.scan(bytes, &mut picked),
                None => picked.extend_from_slice(bytes),
            }
            let piece = s.utf8.split(&picked);
            s.backlog.extend_from_slice(&piece);
            flush_stream(s);
        }
    }

    fn on_mark(&mut self, mark: Mark, at: Position) {
        match mark {
            Mark::CommandStart => {
                self.shell_at_prompt = false;
                self.command_start = Some(at);
                // A multi-line paste runs several commands: its output starts at the first.
                if let Some(a) = self.active.as_mut().filter(|a| !a.input.is_pure_wait())
                    && a.command_start.is_none()
                {
                    a.command_start = Some(at);
                }
                let shell = self.pty.pid() as i32;
                if let Some(kill) = self.active.as_mut().and_then(|a| a.killing.as_mut()) {
                    let now = Instant::now();
                    kill.arm(now);
                    kill.step(shell, self.pty.foreground_pgid(), now);
                }
                self.set_job_start(at);
            }
            Mark::CommandEnd(code) => {
                let had_command = self.command_start.take().is_some();
                let exit_code = if had_command { code } else { None };
                self.shell_at_prompt = true;
                self.prompt_pending = Some(Instant::now());
                self.editor_pending = false;
                // An end mark settles a send only once its input is all written: one that
                // arrives earlier belongs to what ran before (or to the first prompt).
                let input_written = self.outbox_pos >= self.outbox.len();
                match self.active.as_mut() {
                    Some(a) if a.command_end.is_none() && input_written => {
                        a.command_end = Some((exit_code, at))
                    }
                    Some(_) => {}
                    None if had_command => {
                        self.unreported = Some(UnreportedEnd { exit_code, end: at })
                    }
                    None => {}
                }
            }
            Mark::PromptStart | Mark::InputStart => {
                if self.spec.integration == Integration::Fish && self.prompt_pending.is_some() {
                    // fish sends its prompt mark from the `fish_prompt` event, before its line
                    // editor has the terminal; the editor turns bracketed paste on once it has.
                    self.editor_pending = true;
                } else {
                    self.prompt_pending = None;
                }
                self.prompt_seen = true;
                // With input still waiting to be written, this is the previous command's prompt
                // (the input waited for it): once written, the shell is busy with the input.
                if self.command_start.is_none() && self.outbox_pos >= self.outbox.len() {
                    self.shell_at_prompt = true;
                }
                if !self.ready {
                    self.become_ready("prompt mark");
                }
            }
            Mark::Cwd(_) => {}
            Mark::LineRejected => {
                // The shell refused the line and shows its prompt again with the line kept.
                self.line_kept = true;
                self.shell_at_prompt = true;
                self.prompt_pending = None;
                self.command_start = None;
                if let Some(a) = self.active.as_mut().filter(|a| a.command_end.is_none()) {
                    a.command_end = Some((None, at));
                }
            }
        }
    }

    fn set_job_start(&mut self, at: Position) {
        if let Some(ActiveSend {
            sink: ActiveSink::Job(id),
            ..
        }) = &self.active
            && let Some(job) = self.jobs.get_mut(id)
            && job.start.is_none()
        {
            job.start = Some(at);
            job.consumed = at.line;
        }
    }

    fn on_exit(&mut self, kind: ExitKind) {
        self.exit = Some(kind);
        // Watchers see the stream end with the program.
        self.watchers = None;
        self.watch_ended = true;
        self.publish();
    }

    fn on_written(&mut self, written: std::io::Result<usize>) {
        match written {
            Ok(n) => {
                self.outbox_pos += n;
                if let Some(a) = self.active.as_mut() {
                    a.last_activity = Instant::now();
                }
                self.rearm_probe();
                if self.outbox_pos >= self.outbox.len() {
                    self.clear_outbox();
                    self.spin_until = Some(Instant::now() + SPIN);
                }
            }
            Err(e) => {
                let error = Error::FailedPrecondition(format!(
                    "writing to terminal session {} failed: {e}",
                    self.spec.id
                ));
                self.clear_outbox();
                if let Some(a) = self.active.take() {
                    self.fail_active(a, error);
                }
            }
        }
    }

    fn on_reply_written(&mut self, written: std::io::Result<usize>) {
        match written {
            Ok(n) => {
                self.replies.drain(..n.min(self.replies.len()));
            }
            Err(e) => {
                tracing::debug!(session = %self.spec.id, error = %e, "answering a terminal query failed");
                self.replies.clear();
            }
        }
    }

    fn clear_outbox(&mut self) {
        self.outbox.clear();
        self.outbox_pos = 0;
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        if self.active.is_none() && self.rest_due.is_some_and(|at| now >= at) {
            self.rest_due = None;
            if self.terminal.rest() {
                crate::memory::trim_soon();
            }
        }
        if self.publish_due.is_some_and(|at| now >= at) {
            self.publish();
        }
        let shell = self.pty.pid() as i32;
        if let Some(a) = self.active.as_mut().filter(|a| a.command_end.is_none())
            && let Some(kill) = a.killing.as_mut()
        {
            kill.step(shell, self.pty.foreground_pgid(), now);
        }
        if self.next_probe.is_some_and(|at| now >= at) && self.wants_probe() {
            self.probe();
            self.probe_step = (self.probe_step + 1).min(PROBE_BACKOFF_MS.len() - 1);
            self.next_probe = Some(now + Duration::from_millis(PROBE_BACKOFF_MS[self.probe_step]));
        }
    }

    /// Runs the stdin probe; a positive answer counts only once all output the program wrote
    /// before blocking has been read (a shell that printed its prompt mark and then blocked
    /// must be seen at its prompt, not as reading stdin).
    fn probe(&mut self) {
        if !self.replies.is_empty() {
            return; // answers to the program's queries are still on their way
        }
        let Some(tty) = self.pty.tty_path().map(str::to_owned) else {
            return;
        };
        let password_mode = self.pty.termios().is_some_and(|t| {
            use nix::sys::termios::LocalFlags;
            t.local_flags.contains(LocalFlags::ICANON) && !t.local_flags.contains(LocalFlags::ECHO)
        });
        let shell = self.pty.pid() as i32;
        let Some(reader) = waiting::probe::terminal_reader(shell, &tty, password_mode) else {
            return;
        };
        if self.input_gated() {
            self.reader_seen = true;
            self.rearm_probe();
            return;
        }
        if self.pty.input_pending() {
            return;
        }
        let mut buf = [0u8; 4096];
        let mut drained = false;
        while let Ok(Some(n)) = self.pty.try_read(&mut buf) {
            if n == 0 {
                break;
            }
            drained = true;
            self.on_output(&buf[..n]);
        }
        if drained {
            return; // decide again with the new output (and its marks) taken into account
        }
        if self
            .switches_at_write
            .get(&reader.tid)
            .is_some_and(|before| reader.switches <= *before)
        {
            return; // it has not taken the input written since it blocked
        }
        if reader.is_shell && self.spec.integration != Integration::None && self.shell_at_prompt {
            return; // the shell's own prompt: the marks settle this
        }
        if !self.ready {
            self.become_ready("terminal reader");
            return;
        }
        if let Some(a) = self.active.as_mut() {
            tracing::debug!(session = %self.spec.id, reader = %reader.comm, pid = reader.pid, tid = reader.tid, switches = reader.switches, before = ?self.switches_at_write.get(&reader.tid), "blocked on the terminal");
            a.stdin_blocked = true;
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
                let _ = reply.send(self.read(query));
            }
            Command::Send(input, sink) => self.begin_send(input, sink),
            Command::Watch(replay, reply) => {
                let total = self.terminal.total_lines();
                let from = total.saturating_sub(u64::from(replay.min(10_000))) + 1;
                let lines = if replay == 0 {
                    Vec::new()
                } else {
                    self.terminal.lines(from, total)
                };
                // The channel is made for the first watcher: its buffer costs memory that idle
                // sessions need not pay.
                let live = (!self.watch_ended).then(|| {
                    self.watchers
                        .get_or_insert_with(|| broadcast::channel(WATCH_BUFFER).0)
                        .subscribe()
                });
                let _ = reply.send((lines, live));
            }
            Command::JobOutput(id, cap, reply) => {
                let _ = reply.send(self.job_output(&id, cap));
            }
            Command::JobKill(id, reply) => self.job_kill(&id, reply),
        }
    }

    fn busy_error(&self) -> Error {
        match &self.active {
            Some(ActiveSend {
                sink: ActiveSink::Job(id),
                ..
            }) => Error::FailedPrecondition(format!(
                "terminal session {} is busy with background job {id}; wait for it with JobOutput or stop it with JobKill",
                self.spec.id
            )),
            _ => Error::FailedPrecondition(format!(
                "terminal session {} is busy with another send; wait for it to return",
                self.spec.id
            )),
        }
    }

    fn begin_send(&mut self, input: SendInput, sink: Sink) {
        let refusal = if self.active.is_some() {
            Some(self.busy_error())
        } else if self.exit.is_some() {
            Some(Error::FailedPrecondition(format!(
                "terminal session {} has exited",
                self.spec.id
            )))
        } else {
            self.line_limit_refusal(&input)
        };
        if let Some(error) = refusal {
            match sink {
                Sink::Reply(r) | Sink::Stream(r, _) => {
                    let _ = r.send(Err(error));
                }
                Sink::Job(_, r) => {
                    let _ = r.send(Err(error));
                }
            }
            return;
        }
        let now = Instant::now();
        let pure_wait = input.is_pure_wait();
        let mut active = ActiveSend {
            sink: ActiveSink::Reply(oneshot::channel().0),
            started: now,
            anchor: Position {
                line: self.last_seen.line.max(1),
                col: 0,
            },
            command_start: None,
            command_end: None,
            last_activity: now,
            stdin_blocked: false,
            unwritten: 0,
            input_len: 0,
            killing: None,
            input,
        };
        if pure_wait {
            // Report a command that ended meanwhile, or an idle prompt, at once.
            if let Some(done) = self.unreported.take() {
                active.command_end = Some((done.exit_code, done.end));
            } else if self.shell_at_prompt && self.spec.integration != Integration::None {
                active.command_end = Some((None, self.last_seen));
            }
        } else {
            let first_write = FirstWrite {
                at_prompt: self.shell_at_prompt && self.spec.integration != Integration::None,
                clear_kept_line: self.line_kept,
            };
            self.outbox = self.input_bytes(&active.input, first_write);
            active.input_len = self.outbox.len();
            self.line_kept = false;
            self.outbox_pos = 0;
            self.first_write = Some(first_write);
            self.shell_at_prompt = false;
            self.unreported = None;
        }
        active.sink = match sink {
            Sink::Reply(r) => ActiveSink::Reply(r),
            Sink::Stream(r, chunks) => ActiveSink::Stream(
                r,
                StreamSink {
                    chunks,
                    region: (self.spec.integration != Integration::None).then(|| {
                        RegionScanner::new(self.spec.integration, self.spec.mark_key.clone())
                    }),
                    utf8: Utf8Splitter::default(),
                    backlog: Vec::new(),
                },
            ),
            Sink::Job(id, confirm) => {
                self.jobs.insert(
                    id.clone(),
                    JobRecord {
                        status: JobStatus::Running,
                        consumed: active.anchor.line,
                        outcome: None,
                        detail: String::new(),
                        start: None,
                        end: None,
                    },
                );
                let _ = confirm.send(Ok(()));
                ActiveSink::Job(id)
            }
        };
        self.active = Some(active);
        self.rearm_probe();
        self.publish();
    }

    /// Just before a send's first byte is written (its input may have waited for the prompt):
    /// takes the schedule counts the input is judged against, so that what ran meanwhile does
    /// not count as taking it, and encodes multi-line input again, since whether the shell's
    /// line editor takes bracketed paste is known only once its prompt is up.
    fn before_first_write(&mut self) {
        let Some(to) = self.first_write.take() else {
            return;
        };
        self.switches_at_write = self.schedule_counts(to.at_prompt);
        let bytes = self
            .active
            .as_ref()
            .filter(|a| a.input.text.contains('\n') && self.outbox_pos == 0)
            .map(|a| self.input_bytes(&a.input, to));
        if let (Some(bytes), Some(a)) = (bytes, self.active.as_mut()) {
            a.input_len = bytes.len();
            self.outbox = bytes;
        }
    }

    /// Schedule counts of the threads that may take the input about to be written. A shell at
    /// its prompt is the terminal's foreground and reads on its main thread: one read of a
    /// file kept open instead of a walk of /proc (this is on every send's path).
    fn schedule_counts(&mut self, at_prompt: bool) -> std::collections::HashMap<i32, u64> {
        let shell = self.pty.pid() as i32;
        if at_prompt && self.spec.integration != Integration::None {
            if self.shell_counter.is_none() {
                self.shell_counter = waiting::probe::ScheduleCounter::open(shell);
            }
            if let Some(count) = self.shell_counter.as_ref().and_then(|c| c.read()) {
                return std::collections::HashMap::from([(shell, count)]);
            }
        }
        waiting::probe::task_switches(shell)
    }

    /// Refuses a line that a program reading in line mode would lose past the kernel's limit.
    fn line_limit_refusal(&self, input: &SendInput) -> Option<Error> {
        use nix::sys::termios::LocalFlags;
        let longest = longest_line(input.text.as_bytes());
        let canonical = || {
            self.pty
                .termios()
                .is_some_and(|t| t.local_flags.contains(LocalFlags::ICANON))
        };
        (longest > KERNEL_LINE_LIMIT && canonical()).then(|| {
            Error::invalid(format!(
                "text has a line of {longest} bytes, but the program reads the terminal in line \
                 mode, where the kernel keeps at most {KERNEL_LINE_LIMIT} bytes of a line; split \
                 the line or write the data to a file"
            ))
        })
    }

    /// The bytes a send writes: text (as one bracketed paste when it is multi-line input to an
    /// integrated shell that enabled it), Enter, then the keys.
    fn input_bytes(&self, input: &SendInput, to: FirstWrite) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(input.text.len() + 16);
        let at_shell_prompt = to.at_prompt;
        if to.clear_kept_line && !input.text.is_empty() {
            // Clear the refused line the shell kept, so the text is not appended to it.
            bytes.push(0x15);
        }
        let multiline = input.text.contains('\n');
        if at_shell_prompt && multiline && self.terminal.bracketed_paste() {
            bytes.extend_from_slice(b"\x1b[200~");
            bytes.extend_from_slice(input.text.as_bytes());
            bytes.extend_from_slice(b"\x1b[201~");
        } else if multiline {
            // A terminal sends Enter as CR; programs in line mode see each line end.
            bytes.extend(
                input
                    .text
                    .bytes()
                    .map(|b| if b == b'\n' { b'\r' } else { b }),
            );
        } else {
            bytes.extend_from_slice(input.text.as_bytes());
        }
        if input.submit {
            bytes.push(b'\r');
        }
        bytes.extend_from_slice(&input.keys);
        bytes
    }

    /// Settles readiness and the active send when their conditions hold.
    fn evaluate(&mut self) {
        let now = Instant::now();
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
        let input_written = self.outbox_pos >= self.outbox.len();
        let observed = Observed {
            exited: self.exit.is_some(),
            prompt_returned: a.command_end.is_some(),
            stdin_blocked: a.stdin_blocked,
            input_written,
        };
        let kill_gave_up = a.killing.as_ref().is_some_and(|k| k.gave_up(now));
        let reason = waiting::decide(&observed, &deadlines(a), now)
            .or_else(|| kill_gave_up.then_some(WaitReason::Timeout));
        let Some(reason) = reason else { return };
        let mut a = self.active.take().expect("checked above");
        if !input_written {
            a.unwritten = self.outbox.len() - self.outbox_pos;
            self.clear_outbox();
        }
        let outcome = self.outcome(&a, reason);
        self.deliver(a, outcome);
        self.publish();
    }

    fn deliver(&mut self, a: ActiveSend, outcome: SendOutcome) {
        match a.sink {
            ActiveSink::Reply(r) => {
                let _ = r.send(Ok(outcome));
            }
            ActiveSink::Stream(r, mut s) => {
                // Whatever is left of the stream goes out before the result.
                let rest = std::mem::take(&mut s.backlog);
                if !rest.is_empty() {
                    let chunks = s.chunks.clone();
                    tokio::spawn(async move {
                        let _ = chunks.send(rest).await;
                        let _ = r.send(Ok(outcome));
                    });
                } else {
                    let _ = r.send(Ok(outcome));
                }
            }
            ActiveSink::Job(id) => {
                let killed = a.killing.is_some();
                if let Some(job) = self.jobs.get_mut(&id) {
                    job.status = if killed {
                        JobStatus::Killed
                    } else {
                        JobStatus::Completed
                    };
                    job.end = Some(self.last_seen);
                    job.outcome = Some(outcome);
                }
                if let Some(JobKill { waiters, .. }) = a.killing {
                    let status = if killed {
                        JobStatus::Killed
                    } else {
                        JobStatus::Completed
                    };
                    for w in waiters {
                        let _ = w.send(Some(status));
                    }
                }
            }
        }
    }

    fn fail_active(&mut self, a: ActiveSend, error: Error) {
        match a.sink {
            ActiveSink::Reply(r) | ActiveSink::Stream(r, _) => {
                let _ = r.send(Err(error));
            }
            ActiveSink::Job(id) => {
                if let Some(job) = self.jobs.get_mut(&id) {
                    job.status = JobStatus::Failed;
                    job.detail = error.to_string();
                }
            }
        }
        self.publish();
    }

    fn outcome(&mut self, a: &ActiveSend, reason: WaitReason) -> SendOutcome {
        let (exit_code, end) = match (reason, a.command_end) {
            (WaitReason::Prompt, Some((code, end))) => (code, end),
            (WaitReason::SessionExit, _) => (
                match self.exit {
                    Some(ExitKind::Code(c)) => Some(c),
                    _ => None,
                },
                self.terminal.cursor(),
            ),
            _ => (None, self.terminal.cursor()),
        };
        let lines = if self.terminal.alternate_screen() {
            self.terminal.visible_screen()
        } else {
            let start = a.command_start.unwrap_or(a.anchor);
            self.region_lines(start.line, end)
        };
        self.last_seen = end;
        let status = self.status();
        let mut meta = vec![format!("[wait: {}]", reason.name())];
        if let Some(code) = exit_code {
            meta.push(format!("[exit code: {code}]"));
        }
        meta.push(format!("[session: {}]", status_text(status)));
        if a.unwritten > 0 {
            meta.push(format!(
                "[input incomplete: {} of {} bytes were not written before the deadline]",
                a.unwritten, a.input_len
            ));
        }
        let capped = render::with_meta(
            &lines.join("\n"),
            "(no new output)",
            &meta,
            a.input.max_result_bytes,
        );
        SendOutcome {
            viewport: capped.body,
            reason,
            status,
            exit_code,
            truncated: capped.truncated,
            cwd: self.cwd(),
            elapsed: a.started.elapsed(),
            rendered: capped.rendered,
        }
    }

    /// Lines from `start` up to `end` (the end line only when the cursor had left column 0),
    /// trailing blank lines dropped.
    fn region_lines(&self, start: u64, end: Position) -> Vec<String> {
        if end.col == 0 && end.line <= start {
            return Vec::new();
        }
        let last = if end.col == 0 { end.line - 1 } else { end.line };
        let mut lines = self.terminal.lines(start, last);
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        lines
    }

    fn read(&self, q: ReadQuery) -> ReadOutcome {
        let total = self.terminal.total_lines();
        let first = self.terminal.first_line().min(total + 1);
        if q.screen {
            let lines = self.terminal.visible_screen();
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
        let (begin, end) = match q.from_line {
            Some(from) => (from.max(first), from.saturating_add(q.count - 1).min(total)),
            None => {
                let end = total.saturating_sub(q.offset);
                (first.max(end.saturating_sub(q.count - 1)).max(1), end)
            }
        };
        let lines = if begin <= end && end >= 1 {
            self.terminal.lines(begin, end)
        } else {
            Vec::new()
        };
        if lines.is_empty() {
            let meta = vec![format!("[lines: none of {total}]")];
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
                "[lines: {}-{end} of {total}]",
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
        }
    }

    fn job_output(&mut self, id: &str, cap: usize) -> Option<JobReport> {
        let integrated = self.spec.integration != Integration::None;
        let cursor = self.terminal.cursor();
        let job = self.jobs.get(id)?;
        let (status, consumed, start, end) = (job.status, job.consumed, job.start, job.end);
        // While running, only complete lines; an integrated shell's output starts at its C mark.
        let lines = match (status, end) {
            (JobStatus::Running, _) if integrated && start.is_none() => Vec::new(),
            (JobStatus::Running, _) => {
                let last = cursor.line.saturating_sub(1);
                if last >= consumed {
                    self.terminal.lines(consumed, last)
                } else {
                    Vec::new()
                }
            }
            (_, Some(end)) => self.region_lines(consumed, end),
            (_, None) => Vec::new(),
        };
        let new_consumed = match status {
            JobStatus::Running => consumed + lines.len() as u64,
            _ => end.map_or(consumed, |e| e.line + 1),
        };
        let job = self.jobs.get_mut(id)?;
        job.consumed = new_consumed.max(consumed);
        // The contract's format; the exit code is in the typed `exit_code` field.
        let meta = match (&job.outcome, status) {
            (Some(o), JobStatus::Completed) => {
                vec![format!("[job: {id} completed: wait: {}]", o.reason.name())]
            }
            (_, JobStatus::Failed) => vec![format!("[job: {id} failed: {}]", job.detail)],
            (_, s) => vec![format!("[job: {id} {}]", s.name())],
        };
        let capped = render::with_meta(&lines.join("\n"), "", &meta, cap);
        let rendered = capped.rendered.trim_start_matches('\n').to_owned();
        Some(JobReport {
            status,
            output: capped.body,
            truncated: capped.truncated,
            detail: job.detail.clone(),
            outcome: job.outcome.clone(),
            rendered,
        })
    }

    fn job_kill(&mut self, id: &str, reply: oneshot::Sender<Option<JobStatus>>) {
        let Some(job) = self.jobs.get(id) else {
            let _ = reply.send(None);
            return;
        };
        let status = job.status;
        let Some(a) = self
            .active
            .as_mut()
            .filter(|a| matches!(&a.sink, ActiveSink::Job(j) if j == id))
        else {
            let _ = reply.send(Some(status));
            return;
        };
        match a.killing.as_mut() {
            Some(kill) => kill.waiters.push(reply),
            None => {
                // An ended command has nothing left to interrupt: the kill just waits for it
                // to settle.
                let shell_is_command = self.spec.integration == Integration::None;
                let started =
                    (shell_is_command || a.command_start.is_some()) && a.command_end.is_none();
                let now = Instant::now();
                let mut kill = JobKill::new(reply, started, shell_is_command, now);
                kill.step(self.pty.pid() as i32, self.pty.foreground_pgid(), now);
                a.killing = Some(kill);
            }
        }
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
        let cursor = self.terminal.cursor();
        // The MOTD is what came before the prompt line.
        let upto = if self.spec.integration == Integration::None || self.exit.is_some() {
            cursor.line
        } else {
            cursor.line.saturating_sub(1)
        };
        let mut lines = self.terminal.lines(1, upto);
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        Ready {
            motd: lines.join("\n"),
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
        let busy = self.active.is_some();
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
            self.fail_active(a, error);
        }
        // Every process of the session, its helper included, is gone when this returns.
        self.pty.terminate(self.spec.close_grace).await;
    }
}

fn deadlines(a: &ActiveSend) -> Deadlines {
    Deadlines {
        timeout: a.started + a.input.timeout,
        idle: a.last_activity + a.input.idle,
    }
}

/// Hands the backlog to the streaming caller as far as its channel has room; drops the oldest
/// excess when the caller falls too far behind.
fn flush_stream(s: &mut StreamSink) {
    if s.backlog.is_empty() {
        return;
    }
    let piece = std::mem::take(&mut s.backlog);
    if let Err(mpsc::error::TrySendError::Full(piece)) = s.chunks.try_send(piece) {
        s.backlog = piece;
        if s.backlog.len() > STREAM_BACKLOG {
            let cut = s.backlog.len() - STREAM_BACKLOG;
            let cut = (cut..s.backlog.len())
                .find(|&i| s.backlog[i] & 0xC0 != 0x80)
                .unwrap_or(s.backlog.len());
            s.backlog.drain(..cut);
        }
    }
}

async fn caller_gone(active: &mut Option<ActiveSend>) {
    match active.as_mut().map(|a| &mut a.sink) {
        Some(ActiveSink::Reply(r)) | Some(ActiveSink::Stream(r, _)) => r.closed().await,
        _ => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
