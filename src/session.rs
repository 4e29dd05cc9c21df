//! One PTY session as an actor: a single tokio task owns the PTY, the child, the terminal model
//! and the in-flight send, and runs one `select!` over PTY output, pending input, commands, the
//! child's exit and the send's deadlines. Everyone else holds a `SessionHandle`: a command
//! channel plus a `watch` of the state that `List` shows.

use crate::error::{Error, Result};
use crate::marks::{Integration, Mark};
use crate::pty::{ExitKind, Pty};
use crate::render;
use crate::screen::{Position, Terminal};
use crate::waiting::{self, Deadlines, Observed, WaitReason};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot, watch};

/// PTY read buffer: large enough that a flood is read in few syscalls.
const READ_BUF: usize = 64 * 1024;
/// Commands queued per session before callers wait.
const COMMAND_QUEUE: usize = 32;

/// Everything needed to start a session.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    /// Session id ("t1").
    pub id: String,
    /// Display name (may be empty).
    pub name: String,
    /// Terminal type name.
    pub type_name: String,
    /// Program and arguments, integration already applied.
    pub argv: Vec<String>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// Prompt-mark recipe in use.
    pub integration: Integration,
    /// History bound in lines.
    pub history_lines: u64,
    /// History bound in bytes.
    pub history_bytes: usize,
    /// Deadline for the session to become ready.
    pub startup_timeout: Duration,
    /// Output silence that counts as ready.
    pub startup_idle: Duration,
    /// Grace period of the polite close signal.
    pub close_grace: Duration,
}

/// How the session's program is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still running.
    Running,
    /// Ended.
    Exited(ExitKind),
}

/// What `List` shows without asking the actor.
#[derive(Debug, Clone)]
pub struct SessionState {
    /// Running or exited.
    pub status: Status,
    /// A send is in flight.
    pub busy: bool,
    /// Lines since the session started.
    pub total_lines: u64,
    /// Milliseconds since the epoch of the last output (0: none yet).
    pub last_output_unix_ms: i64,
    /// Current size.
    pub cols: u16,
    /// Current size.
    pub rows: u16,
}

/// A send as the actor receives it (validated).
#[derive(Debug, Clone)]
pub struct SendInput {
    /// Bytes to write: text, Enter, keys.
    pub bytes: Vec<u8>,
    /// Overall deadline.
    pub timeout: Duration,
    /// Output silence that counts as idle.
    pub idle: Duration,
    /// Cap on the rendered result.
    pub max_result_bytes: usize,
}

/// The result of a foreground send.
#[derive(Debug, Clone)]
pub struct SendOutcome {
    /// Clean output of the send (capped).
    pub viewport: String,
    /// Why it returned.
    pub reason: WaitReason,
    /// Session status when it returned.
    pub status: Status,
    /// The command's exit status when known.
    pub exit_code: Option<i32>,
    /// The viewport was cut.
    pub truncated: bool,
    /// The shell's cwd.
    pub cwd: String,
    /// Wall time.
    pub elapsed: Duration,
    /// The model-facing text.
    pub rendered: String,
}

/// What `Read` asks for.
#[derive(Debug, Clone, Copy)]
pub struct ReadQuery {
    /// Newest-relative offset.
    pub offset: u64,
    /// Lines wanted.
    pub count: u64,
    /// Absolute start line, overriding `offset`.
    pub from_line: Option<u64>,
    /// The visible screen instead of history.
    pub screen: bool,
    /// Cap on the rendered result.
    pub max_result_bytes: usize,
}

/// A page of history or the screen.
#[derive(Debug, Clone, Default)]
pub struct ReadOutcome {
    /// The page text (capped).
    pub text: String,
    /// Lines since the session started.
    pub total_lines: u64,
    /// Oldest retained line.
    pub first_line: u64,
    /// First line in `text` (0 when empty).
    pub line_begin: u64,
    /// Last line in `text` (0 when empty).
    pub line_end: u64,
    /// The page was cut.
    pub truncated: bool,
    /// The model-facing text.
    pub rendered: String,
}

/// What `Open` gets back once the session is ready.
#[derive(Debug, Clone)]
pub struct Ready {
    /// Startup output before the first prompt.
    pub motd: String,
}

enum Command {
    Ready(oneshot::Sender<Ready>),
    Send(SendInput, oneshot::Sender<Result<SendOutcome>>),
    Read(ReadQuery, oneshot::Sender<ReadOutcome>),
}

/// A cheap handle to a session actor.
#[derive(Clone)]
pub struct SessionHandle {
    /// The immutable facts.
    pub spec: Arc<SessionSpec>,
    /// The shell's pid.
    pub pid: u32,
    /// Milliseconds since the epoch when it opened.
    pub created_unix_ms: i64,
    commands: mpsc::Sender<Command>,
    state: watch::Receiver<SessionState>,
    /// Ends the actor (and so the session's processes).
    shutdown: Arc<tokio::sync::Notify>,
    /// Resolves when the actor has finished and every process is gone.
    finished: watch::Receiver<bool>,
}

impl SessionHandle {
    /// Spawns the program and its actor. Fails when the program cannot be started.
    pub fn start(spec: SessionSpec) -> Result<SessionHandle> {
        let pty =
            Pty::spawn(&spec.argv, &spec.env, &spec.cwd, spec.cols, spec.rows).map_err(|e| {
                Error::FailedPrecondition(format!(
                    "type {:?} could not be started ({}): {e}",
                    spec.type_name,
                    spec.argv.first().map(String::as_str).unwrap_or("")
                ))
            })?;
        let pid = pty.pid();
        let terminal = Terminal::new(spec.cols, spec.rows, spec.history_lines, spec.history_bytes);
        let (commands, rx) = mpsc::channel(COMMAND_QUEUE);
        let (state_tx, state) = watch::channel(SessionState {
            status: Status::Running,
            busy: false,
            total_lines: 0,
            last_output_unix_ms: 0,
            cols: spec.cols,
            rows: spec.rows,
        });
        let shutdown = Arc::new(tokio::sync::Notify::new());
        let (finished_tx, finished) = watch::channel(false);
        let spec = Arc::new(spec);
        let actor = Actor {
            spec: spec.clone(),
            pty,
            terminal,
            state: state_tx,
            exit: None,
            eof: false,
            active: None,
            ready_waiters: Vec::new(),
            ready: false,
            startup_deadline: Instant::now() + spec.startup_timeout,
            last_output: Instant::now(),
            shell_at_prompt: false,
            command_start: None,
            unreported: None,
            last_seen: Position::default(),
        };
        let stop = shutdown.clone();
        tokio::spawn(async move {
            actor.run(rx, stop).await;
            let _ = finished_tx.send(true);
        });
        Ok(SessionHandle {
            spec,
            pid,
            created_unix_ms: unix_ms(SystemTime::now()),
            commands,
            state,
            shutdown,
            finished,
        })
    }

    /// The latest published state.
    pub fn state(&self) -> SessionState {
        self.state.borrow().clone()
    }

    /// Waits until the session is ready (first prompt, input wait, idle or startup deadline).
    pub async fn ready(&self) -> Result<Ready> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Ready(tx), rx).await
    }

    /// A foreground send.
    pub async fn send(&self, input: SendInput) -> Result<SendOutcome> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Send(input, tx), rx).await?
    }

    /// A page of history or the screen.
    pub async fn read(&self, query: ReadQuery) -> Result<ReadOutcome> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Read(query, tx), rx).await
    }

    /// Ends the session and every process it started; returns when they are gone.
    pub async fn close(&self) {
        self.shutdown.notify_one();
        let mut finished = self.finished.clone();
        let _ = finished.wait_for(|done| *done).await;
    }

    async fn call<T>(&self, cmd: Command, rx: oneshot::Receiver<T>) -> Result<T> {
        let gone = || Error::session_not_found(&self.spec.id);
        self.commands.send(cmd).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }
}

/// The send being waited on.
struct ActiveSend {
    input: SendInput,
    reply: oneshot::Sender<Result<SendOutcome>>,
    started: Instant,
    /// Bytes of `input.bytes` written so far.
    written: usize,
    /// Where the viewport starts when no command-start mark arrives.
    anchor: Position,
    /// Position of the command-start mark seen during this send.
    command_start: Option<Position>,
    /// Exit status and position of the command-end mark seen after the input.
    command_end: Option<(Option<i32>, Position)>,
    /// Last output or write.
    last_activity: Instant,
}

/// A command that ended while no send was waiting for it; the next send reports it at once.
#[derive(Clone, Copy)]
struct UnreportedEnd {
    exit_code: Option<i32>,
    end: Position,
}

struct Actor {
    spec: Arc<SessionSpec>,
    pty: Pty,
    terminal: Terminal,
    state: watch::Sender<SessionState>,
    exit: Option<ExitKind>,
    /// The master hung up: no process holds the terminal any more.
    eof: bool,
    active: Option<ActiveSend>,
    ready_waiters: Vec<oneshot::Sender<Ready>>,
    ready: bool,
    startup_deadline: Instant,
    last_output: Instant,
    /// The integrated shell is idle at its prompt (a D or A mark and no input since).
    shell_at_prompt: bool,
    /// Position of the latest command-start mark whose end has not been seen.
    command_start: Option<Position>,
    unreported: Option<UnreportedEnd>,
    /// Where the previous send's viewport ended.
    last_seen: Position,
}

impl Actor {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>, stop: Arc<tokio::sync::Notify>) {
        let mut buf = vec![0u8; READ_BUF];
        loop {
            let deadline = self.next_deadline();
            let pending_write = self
                .active
                .as_ref()
                .filter(|a| a.written < a.input.bytes.len())
                .map(|a| a.input.bytes[a.written..].to_vec());
            tokio::select! {
                read = self.pty.read(&mut buf), if !self.eof => match read {
                    Ok(0) | Err(_) => self.eof = true,
                    Ok(n) => self.on_output(&buf[..n]),
                },
                exit = self.pty.wait_exit(), if self.exit.is_none() => {
                    self.on_exit(exit.unwrap_or(ExitKind::Code(0)));
                }
                written = write_pending(&self.pty, pending_write.as_deref()), if pending_write.is_some() => {
                    self.on_written(written);
                }
                cmd = commands.recv() => match cmd {
                    Some(cmd) => self.on_command(cmd),
                    None => break,
                },
                _ = reply_closed(&mut self.active), if self.active.is_some() => {
                    // The caller hung up: stop waiting, release the reservation.
                    self.active = None;
                    self.publish();
                }
                _ = sleep_until(deadline), if deadline.is_some() => {}
                _ = stop.notified() => break,
            }
            self.evaluate();
        }
        self.shutdown().await;
    }

    fn next_deadline(&self) -> Option<Instant> {
        let startup = (!self.ready).then_some(
            self.startup_deadline
                .min(self.last_output + self.spec.startup_idle),
        );
        let send = self.active.as_ref().map(|a| {
            let d = self.deadlines(a);
            d.timeout.min(d.idle)
        });
        match (startup, send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn deadlines(&self, a: &ActiveSend) -> Deadlines {
        Deadlines {
            timeout: a.started + a.input.timeout,
            idle: a.last_activity + a.input.idle,
        }
    }

    fn on_output(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        self.last_output = now;
        if let Some(a) = self.active.as_mut() {
            a.last_activity = now;
        }
        self.terminal.feed(bytes);
        for event in self.terminal.take_marks() {
            self.on_mark(event.mark, event.at);
        }
        self.publish();
    }

    fn on_mark(&mut self, mark: Mark, at: Position) {
        match mark {
            Mark::CommandStart => {
                self.shell_at_prompt = false;
                self.command_start = Some(at);
                if let Some(a) = self.active.as_mut().filter(|a| a.written > 0) {
                    a.command_start = Some(at);
                }
            }
            Mark::CommandEnd(code) => {
                let had_command = self.command_start.take().is_some();
                let exit_code = if had_command { code } else { None };
                self.shell_at_prompt = true;
                match self.active.as_mut().filter(|a| a.written > 0) {
                    Some(a) => a.command_end = Some((exit_code, at)),
                    None if had_command => {
                        self.unreported = Some(UnreportedEnd { exit_code, end: at })
                    }
                    None => {}
                }
            }
            Mark::PromptStart | Mark::InputStart => {
                self.shell_at_prompt = true;
                if !self.ready {
                    self.become_ready();
                }
            }
            Mark::Cwd(_) => {}
        }
    }

    fn on_exit(&mut self, kind: ExitKind) {
        self.exit = Some(kind);
        self.publish();
    }

    fn on_written(&mut self, written: std::io::Result<usize>) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        match written {
            Ok(n) => {
                a.written += n;
                a.last_activity = Instant::now();
            }
            Err(e) => {
                let reply = self.active.take().expect("checked above").reply;
                let _ = reply.send(Err(Error::FailedPrecondition(format!(
                    "writing to terminal session {} failed: {e}",
                    self.spec.id
                ))));
            }
        }
    }

    fn on_command(&mut self, cmd: Command) {
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
            Command::Send(input, reply) => self.begin_send(input, reply),
        }
    }

    fn begin_send(&mut self, input: SendInput, reply: oneshot::Sender<Result<SendOutcome>>) {
        if self.active.is_some() {
            let _ = reply.send(Err(Error::FailedPrecondition(format!(
                "terminal session {} is busy with another send",
                self.spec.id
            ))));
            return;
        }
        if self.exit.is_some() {
            let _ = reply.send(Err(Error::FailedPrecondition(format!(
                "terminal session {} has exited",
                self.spec.id
            ))));
            return;
        }
        let now = Instant::now();
        let writes = !input.bytes.is_empty();
        if writes {
            self.shell_at_prompt = false;
            self.unreported = None;
        }
        let mut active = ActiveSend {
            input,
            reply,
            started: now,
            written: 0,
            anchor: Position {
                line: self.last_seen.line.max(1),
                col: 0,
            },
            command_start: None,
            command_end: None,
            last_activity: now,
        };
        if !writes {
            // A pure wait: report a command that ended meanwhile, or an idle prompt, at once.
            if let Some(done) = self.unreported.take() {
                active.command_end = Some((done.exit_code, done.end));
            } else if self.shell_at_prompt && self.spec.integration != Integration::None {
                active.command_end = Some((None, self.terminal.cursor()));
            }
        }
        self.active = Some(active);
        self.publish();
    }

    /// Settles the active send and readiness when their conditions hold.
    fn evaluate(&mut self) {
        let now = Instant::now();
        if !self.ready
            && (self.exit.is_some()
                || now >= self.startup_deadline
                || now >= self.last_output + self.spec.startup_idle)
        {
            self.become_ready();
        }
        let Some(a) = self.active.as_ref() else {
            return;
        };
        let observed = Observed {
            exited: self.exit.is_some(),
            prompt_returned: a.command_end.is_some(),
            stdin_blocked: false,
            input_written: a.written >= a.input.bytes.len(),
        };
        if let Some(reason) = waiting::decide(&observed, &self.deadlines(a), now) {
            let a = self.active.take().expect("checked above");
            let outcome = self.outcome(&a, reason);
            let _ = a.reply.send(Ok(outcome));
            self.publish();
        }
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
            let last = if end.col == 0 && end.line > start.line {
                end.line - 1
            } else {
                end.line
            };
            let mut lines = self.terminal.lines(start.line, last);
            while lines.last().is_some_and(|l| l.is_empty()) {
                lines.pop();
            }
            lines
        };
        self.last_seen = end;
        let status = self.status();
        let mut meta = vec![format!("[wait: {}]", reason.name())];
        if let Some(code) = exit_code {
            meta.push(format!("[exit code: {code}]"));
        }
        meta.push(format!("[session: {}]", status_text(status)));
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

    fn read(&self, q: ReadQuery) -> ReadOutcome {
        let total = self.terminal.total_lines();
        let first = self.terminal.first_line().min(total + 1);
        if q.screen {
            let lines = self.terminal.visible_screen();
            let meta = |_| vec![format!("[screen: {} rows of {} lines]", lines.len(), total)];
            let (capped, _) =
                render::lines_with_meta(&lines, "(empty screen)", meta, q.max_result_bytes);
            return ReadOutcome {
                text: capped.body,
                total_lines: total,
                first_line: first,
                line_begin: 0,
                line_end: 0,
                truncated: capped.truncated,
                rendered: capped.rendered,
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

    fn become_ready(&mut self) {
        self.ready = true;
        let info = self.ready_info();
        for w in self.ready_waiters.drain(..) {
            let _ = w.send(info.clone());
        }
        self.last_seen = self.terminal.cursor();
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
        std::fs::read_link(format!("/proc/{}/cwd", self.pty.pid()))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    fn publish(&self) {
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
            let _ = a.reply.send(Err(Error::session_not_found(&self.spec.id)));
        }
        crate::reaper::terminate_session(self.pty.pid() as i32, self.spec.close_grace).await;
        if self.exit.is_none() {
            // The shell is our child: reap it so no zombie is left.
            let _ = tokio::time::timeout(Duration::from_secs(1), self.pty.wait_exit()).await;
        }
    }
}

/// "running" or "exited code=0 signal=null".
pub fn status_text(status: Status) -> String {
    match status {
        Status::Running => "running".to_owned(),
        Status::Exited(ExitKind::Code(c)) => format!("exited code={c} signal=null"),
        Status::Exited(ExitKind::Signal(s)) => format!("exited code=null signal={}", s.as_str()),
    }
}

async fn write_pending(pty: &Pty, data: Option<&[u8]>) -> std::io::Result<usize> {
    match data {
        Some(d) => pty.write_some(d).await,
        None => std::future::pending().await,
    }
}

async fn reply_closed(active: &mut Option<ActiveSend>) {
    match active {
        Some(a) => a.reply.closed().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
