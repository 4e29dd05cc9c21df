//! One PTY session: the public face of its actor. A `SessionHandle` is a cheap clone holding a
//! command channel and a `watch` of the state `List` shows; the actor task (`session/actor.rs`)
//! owns the PTY, the child, the terminal model and the in-flight send. The session's settings
//! are derived in `spec.rs`; the actor's state is split by what it is about (the module map in
//! `lib.rs` lists the rooms).

mod actor;
mod aim;
mod capture;
mod command_view;
mod jobs;
mod keyboard;
mod kill;
mod pacing;
mod probe;
mod publish;
pub(crate) mod records;
mod search;
mod send;
mod shell;
mod shell_marks;
mod spec;
mod startup;
mod view;
mod watchers;

use crate::error::{Error, Result};
use crate::process::pty::{ExitKind, Pty};
use crate::waiting::WaitReason;
use nix::sys::signal::Signal;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// Commands queued per session before callers wait.
const COMMAND_QUEUE: usize = 32;

pub use command_view::{CommandInfo, CommandsOutcome, CommandsQuery, DEFAULT_COMMANDS};
pub(crate) use keyboard::attach_command;
pub use search::{SearchOutcome, SearchQuery};
pub(crate) use spec::OpenParams;
pub use spec::SessionSpec;

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
    /// A send or job is in flight.
    pub busy: bool,
    /// Lines since the session started.
    pub total_lines: u64,
    /// Milliseconds since the epoch of the last output (0: none yet).
    pub last_output_unix_ms: i64,
    /// Current size.
    pub cols: u16,
    /// Current size.
    pub rows: u16,
    /// Who holds the keyboard (`Attach`), if anyone.
    pub attached: Option<String>,
}

/// A validated send.
#[derive(Debug, Clone)]
pub struct SendInput {
    /// Text typed as given.
    pub text: String,
    /// Press Enter after the text.
    pub submit: bool,
    /// Bytes of the named keys, sent last.
    pub keys: Vec<u8>,
    /// Overall deadline.
    pub timeout: Duration,
    /// Output silence that counts as idle.
    pub idle: Duration,
    /// Cap on the rendered result.
    pub max_result_bytes: usize,
    /// Text for a command that still runs is held until the shell's next prompt instead of
    /// refused (docs/api.md).
    pub typeahead: bool,
    /// The web page's address for this session, when the daemon serves one: a wait at a
    /// password prompt names it beside `ptyd attach` (without a sign-in code: the line goes to
    /// the model, and a person signs in on the page).
    pub web_page: Option<String>,
}

impl SendInput {
    /// True when the send writes nothing and only waits.
    pub fn is_pure_wait(&self) -> bool {
        self.text.is_empty() && !self.submit && self.keys.is_empty()
    }
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
    /// The program waits for a password: what is typed is not echoed.
    pub input_hidden: bool,
    /// The shell's cwd.
    pub cwd: String,
    /// Wall time.
    pub elapsed: Duration,
    /// The model-facing text.
    pub rendered: String,
}

/// What `Read` asks for.
#[derive(Debug, Clone)]
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
    /// One command's output (`c12` or `last`) instead of the whole history; `offset` and
    /// `count` page inside it.
    pub command_id: Option<String>,
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
    /// The command whose output this is, for a read of one.
    pub command: Option<CommandInfo>,
}

/// What `Open` gets back once the session is ready.
#[derive(Debug, Clone)]
pub struct Ready {
    /// Startup output before the first prompt.
    pub motd: String,
}

/// The lifecycle of a background job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Its send still waits.
    Running,
    /// Its send settled.
    Completed,
    /// JobKill ended it.
    Killed,
    /// It could not be carried out.
    Failed,
}

impl JobStatus {
    /// The lower-case name used in rendered text.
    pub fn name(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Killed => "killed",
            JobStatus::Failed => "failed",
        }
    }
}

/// New output and status of a job.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// Status now.
    pub status: JobStatus,
    /// Clean output not returned before (capped).
    pub output: String,
    /// `output` was cut.
    pub truncated: bool,
    /// Why it failed, when it did.
    pub detail: String,
    /// The settled send, once finished.
    pub outcome: Option<SendOutcome>,
    /// The model-facing text.
    pub rendered: String,
}

/// Where a send's result goes.
pub(crate) enum Sink {
    /// A unary caller.
    Reply(oneshot::Sender<Result<SendOutcome>>),
    /// A streaming caller: raw output chunks, then the result.
    Stream(oneshot::Sender<Result<SendOutcome>>, mpsc::Sender<Vec<u8>>),
    /// A background job with this id; the oneshot confirms the reservation.
    Job(String, oneshot::Sender<Result<()>>),
}

/// What a watcher starts with.
pub struct WatchStart {
    /// The history lines asked for.
    pub replay: Vec<String>,
    /// Draws the current screen on the watcher's terminal.
    pub redraw: Vec<u8>,
    /// The session's raw output from the redraw on (none once the program exited).
    pub live: Option<broadcast::Receiver<Arc<[u8]>>>,
}

/// A person taking a session's keyboard: who they are and their window's size, if known.
#[derive(Debug, Clone)]
pub struct AttachRequest {
    /// How a second attach's refusal and `List` name them.
    pub holder: String,
    /// Their window's columns and rows.
    pub size: Option<(u16, u16)>,
}

/// What an attached person starts with: their token (for keys, sizes and the detach), the
/// redraw of the current screen, and the live feed of raw output.
pub struct AttachStart {
    /// Names this holder to the actor; a later holder's differs.
    pub token: u64,
    /// Draws the screen as it is on the person's terminal.
    pub redraw: Vec<u8>,
    /// The session's output from the redraw on.
    pub live: broadcast::Receiver<Arc<[u8]>>,
}

pub(crate) enum Command {
    Ready(oneshot::Sender<Ready>),
    Send(SendInput, Sink),
    Read(ReadQuery, oneshot::Sender<Result<ReadOutcome>>),
    Commands(CommandsQuery, oneshot::Sender<CommandsOutcome>),
    Search(Box<SearchQuery>, oneshot::Sender<Result<SearchOutcome>>),
    Watch(u32, oneshot::Sender<WatchStart>),
    /// The screen as styled runs, for the web page.
    Screen(oneshot::Sender<crate::screen::StyledScreen>),
    Attach(AttachRequest, oneshot::Sender<Result<AttachStart>>),
    /// The attached person's keys, for the holder of the token.
    Keys(u64, Vec<u8>),
    /// The attached person's window size (cols, rows), for the holder of the token.
    AttachSize(u64, u16, u16),
    /// The holder of the token lets go of the keyboard.
    Detach(u64),
    JobOutput(String, usize, oneshot::Sender<Option<JobReport>>),
    JobKill(String, oneshot::Sender<Option<JobStatus>>),
    Signal(Signal, oneshot::Sender<Result<i32>>),
}

/// Where a session is kept for a daemon that may adopt it: its files in the state directory,
/// and how long its helper waits for a new daemon once this one is gone.
pub(crate) struct Persist {
    pub(crate) files: crate::state::SessionFiles,
    pub(crate) grace: Duration,
}

/// What the actor keeps for a successor, and what it takes over from a predecessor.
#[derive(Default)]
pub(crate) struct Kept {
    journal: Option<crate::state::journal::Journal>,
    store: Option<crate::state::SessionStore>,
    replay: Option<Replay>,
}

/// What an adopted session's actor replays before it serves: the journal's content, the jobs,
/// and how the program ended when that was known at adoption.
pub(crate) struct Replay {
    /// What the journal restores before its output, once it was compacted.
    restored: Option<crate::state::journal_head::Restored>,
    output: Vec<u8>,
    jobs: Vec<crate::state::record::JobRecord>,
    exit: Option<ExitKind>,
}

/// The pure wait that resumes a job an adopted session was running when its daemon died, until
/// the deadline and with the idle time its send had (`wait`, as recorded); a record without
/// them gets the longest wait a send may have.
fn resumed_wait(wait: Option<(i64, u64)>) -> SendInput {
    let (timeout, idle) = match wait {
        Some((deadline_ms, idle_ms)) => (
            Duration::from_millis(
                deadline_ms
                    .saturating_sub(unix_ms(SystemTime::now()))
                    .max(1) as u64,
            ),
            Duration::from_millis(idle_ms),
        ),
        None => (Duration::from_secs(600), Duration::from_secs(5)),
    };
    SendInput {
        text: String::new(),
        submit: false,
        keys: Vec::new(),
        timeout,
        idle,
        max_result_bytes: crate::validate::DEFAULT_MAX_RESULT_BYTES,
        // An empty wait types nothing, so there is nothing to hold for a prompt.
        typeahead: false,
        web_page: None,
    }
}

/// An adopted session's journal, opened to go on, and what it holds. A journal that cannot go
/// on (a full disk) still gives what it holds: the session keeps its history and screen, and
/// only what it prints from now on is not kept for a later daemon, as when a journal cannot
/// grow while a session runs.
fn read_journal(
    path: &std::path::Path,
    session: &str,
) -> (
    Option<crate::state::journal::Journal>,
    crate::state::journal::Content,
) {
    use crate::state::journal::Journal;
    let content = match Journal::read(path) {
        Ok(content) => content,
        Err(e) => {
            tracing::warn!(session, error = %e, "the session's journal is unreadable");
            return (None, Default::default());
        }
    };
    match Journal::resume(path, &content) {
        Ok(journal) => (Some(journal), content),
        Err(e) => {
            tracing::warn!(session, error = %e,
                "the output journal cannot grow; the session keeps what it had, and a daemon adopting it later will miss what follows");
            (None, content)
        }
    }
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
    /// Adopted at start from a previous daemon.
    pub adopted: bool,
    commands: mpsc::Sender<Command>,
    state: watch::Receiver<SessionState>,
    /// Ends the actor (and so the session's processes).
    shutdown: Arc<tokio::sync::Notify>,
    /// Becomes true when the actor has finished and every process is gone.
    finished: watch::Receiver<bool>,
}

impl SessionHandle {
    /// Spawns the program and its actor, kept in the state directory as `persist` says (when it
    /// is given, or the journal cannot be made, the session simply ends with this daemon; the
    /// second value then says why it could not be kept). Fails when the program cannot be
    /// started.
    pub(crate) async fn start(
        spec: SessionSpec,
        persist: Option<Persist>,
    ) -> Result<(SessionHandle, Option<String>)> {
        // Files and mappings are made off the async workers: a burst of Opens must not stall
        // the daemon's other sessions and RPCs on the filesystem.
        let id = spec.id.clone();
        let (persist, journal, not_kept) = match persist {
            Some(p) => tokio::task::spawn_blocking(move || {
                let made = p
                    .files
                    .create()
                    .and_then(|()| crate::state::journal::Journal::create(&p.files.journal()));
                match made {
                    Ok(journal) => (Some(p), Some(journal), None),
                    Err(e) => {
                        tracing::warn!(session = %id, error = %e,
                            "cannot keep the session in the state directory; it ends with this daemon");
                        p.files.remove();
                        (None, None, Some(e.to_string()))
                    }
                }
            })
            .await
            .unwrap_or_else(|e| (None, None, Some(e.to_string()))),
            None => (None, None, None),
        };
        let adoption = persist
            .as_ref()
            .map(|p| crate::process::pty::AdoptionSocket {
                path: p.files.socket(),
                grace: p.grace,
            });
        let spawned = Pty::spawn(
            &spec.argv,
            &spec.env,
            &spec.cwd,
            spec.cols,
            spec.rows,
            spec.process_tracking,
            adoption,
        )
        .await;
        let pty = match spawned {
            Ok(pty) => pty,
            Err(e) => {
                if let Some(p) = &persist {
                    p.files.remove();
                }
                return Err(Error::FailedPrecondition(format!(
                    "type {:?} could not be started ({}): {e}",
                    spec.type_name,
                    spec.argv.first().map(String::as_str).unwrap_or("")
                )));
            }
        };
        let pid = pty.pid();
        let created_unix_ms = unix_ms(SystemTime::now());
        let store = persist.map(|p| {
            let record = spec.record(created_unix_ms, pid, pty.tag().map(str::to_owned));
            (p.files, record)
        });
        let store = match store {
            Some((files, record)) => {
                tokio::task::spawn_blocking(move || crate::state::SessionStore::new(files, record))
                    .await
                    .ok()
            }
            None => None,
        };
        let kept = Kept {
            journal,
            store,
            replay: None,
        };
        Ok((
            SessionHandle::run(spec, pty, created_unix_ms, kept),
            not_kept,
        ))
    }

    /// Serves a session a previous daemon left in the state directory: takes its terminal over
    /// from its helper (or, when the helper is gone, serves what its journal kept, as exited),
    /// and replays its journal before the actor serves anything. `None` when not even its
    /// journal is readable.
    pub(crate) async fn adopt(
        files: crate::state::SessionFiles,
        record: crate::state::record::SessionRecord,
        tracking: crate::process::ProcessTracking,
    ) -> Option<SessionHandle> {
        let socket = files.socket();
        let tag = record.process_tag.clone();
        let kept_tag = tag.clone();
        let taken = tokio::task::spawn_blocking(move || Pty::adopt(&socket, kept_tag))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        let (pty, exit) = match taken {
            Ok(pty) => (pty, None),
            Err(e) => {
                tracing::info!(session = %record.id, error = %e,
                    "the session's helper is gone; it is served as exited, with what was kept");
                (Pty::lost(tag).ok()?, Some(ExitKind::Lost))
            }
        };
        let (journal, content) = read_journal(&files.journal(), &record.id);
        let spec = SessionSpec::from_record(&record, tracking);
        let created_unix_ms = record.created_unix_ms;
        let replay = Replay {
            restored: content.restored,
            output: content.output,
            jobs: record.jobs.clone(),
            exit,
        };
        let kept = Kept {
            journal,
            store: Some(crate::state::SessionStore::new(files, record)),
            replay: Some(replay),
        };
        Some(SessionHandle::run(spec, pty, created_unix_ms, kept))
    }

    /// Starts the actor of a session whose terminal is `pty`.
    fn run(spec: SessionSpec, pty: Pty, created_unix_ms: i64, kept: Kept) -> SessionHandle {
        let pid = pty.pid();
        let (commands, rx) = mpsc::channel(COMMAND_QUEUE);
        let (state_tx, state) = watch::channel(SessionState {
            status: Status::Running,
            busy: false,
            total_lines: 0,
            last_output_unix_ms: 0,
            cols: spec.cols,
            rows: spec.rows,
            attached: None,
        });
        let shutdown = Arc::new(tokio::sync::Notify::new());
        let (finished_tx, finished) = watch::channel(false);
        let spec = Arc::new(spec);
        let adopted = kept.replay.is_some();
        let actor = actor::Actor::new(spec.clone(), pty, state_tx, kept);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            actor.run(rx, stop).await;
            let _ = finished_tx.send(true);
        });
        SessionHandle {
            adopted,
            spec,
            pid,
            created_unix_ms,
            commands,
            state,
            shutdown,
            finished,
        }
    }

    /// The published state, to follow its changes.
    pub(crate) fn state_changes(&self) -> watch::Receiver<SessionState> {
        self.state.clone()
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
        self.call(Command::Send(input, Sink::Reply(tx)), rx).await?
    }

    /// A foreground send whose raw output arrives on `chunks` while it runs.
    pub async fn send_stream(
        &self,
        input: SendInput,
        chunks: mpsc::Sender<Vec<u8>>,
    ) -> Result<SendOutcome> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Send(input, Sink::Stream(tx, chunks)), rx)
            .await?
    }

    /// Starts a background send as job `job_id`; returns once the session is reserved for it.
    pub async fn send_background(&self, input: SendInput, job_id: String) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Send(input, Sink::Job(job_id, tx)), rx)
            .await?
    }

    /// A page of history or the screen.
    pub async fn read(&self, query: ReadQuery) -> Result<ReadOutcome> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Read(query, tx), rx).await?
    }

    /// A page of the session's command records.
    pub async fn commands(&self, query: CommandsQuery) -> Result<CommandsOutcome> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Commands(query, tx), rx).await
    }

    /// Lines of the session's history and screen that match a pattern.
    pub async fn search(&self, query: SearchQuery) -> Result<SearchOutcome> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Search(Box::new(query), tx), rx).await?
    }

    /// The last `replay` lines, the current screen and a live feed of raw output.
    pub async fn watch(&self, replay: u32) -> Result<WatchStart> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Watch(replay, tx), rx).await
    }

    /// The visible screen as styled runs (the web page draws it).
    pub async fn styled_screen(&self) -> Result<crate::screen::StyledScreen> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Screen(tx), rx).await
    }

    /// Takes the session's keyboard for a person (see `keyboard.rs`).
    pub async fn attach(&self, request: AttachRequest) -> Result<AttachStart> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Attach(request, tx), rx).await?
    }

    /// The attached person (`token`) typed `keys`.
    pub async fn keys(&self, token: u64, keys: Vec<u8>) -> Result<()> {
        self.commands
            .send(Command::Keys(token, keys))
            .await
            .map_err(|_| Error::session_not_found(&self.spec.id))
    }

    /// The attached person's (`token`) window is now `cols` x `rows`.
    pub async fn attach_size(&self, token: u64, cols: u16, rows: u16) -> Result<()> {
        self.commands
            .send(Command::AttachSize(token, cols, rows))
            .await
            .map_err(|_| Error::session_not_found(&self.spec.id))
    }

    /// The attached person (`token`) lets go of the keyboard. Never waits: a full command
    /// queue hands the detach to a task, so that a hung-up stream's guard can call it.
    pub fn detach(&self, token: u64) {
        if let Err(mpsc::error::TrySendError::Full(cmd)) =
            self.commands.try_send(Command::Detach(token))
        {
            let commands = self.commands.clone();
            tokio::spawn(async move { commands.send(cmd).await });
        }
    }

    /// New output of job `job_id`, waiting up to `wait` for some (or for its end).
    pub async fn job_output(&self, job_id: &str, wait: Duration, cap: usize) -> Result<JobReport> {
        let deadline = Instant::now() + wait;
        let mut state = self.state.clone();
        loop {
            state.borrow_and_update();
            let (tx, rx) = oneshot::channel();
            let report = self
                .call(Command::JobOutput(job_id.to_owned(), cap, tx), rx)
                .await?
                .ok_or_else(|| Error::job_not_found(job_id))?;
            let waiting = report.status == JobStatus::Running && report.output.is_empty();
            if !waiting || Instant::now() >= deadline {
                return Ok(report);
            }
            // Output or a status change publishes new state; wake on it or the deadline.
            let changed = tokio::time::timeout_at(deadline.into(), state.changed()).await;
            if matches!(changed, Ok(Err(_))) {
                return Ok(report);
            }
        }
    }

    /// Interrupts job `job_id`; returns its status once the kill settled.
    pub async fn job_kill(&self, job_id: &str) -> Result<JobStatus> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::JobKill(job_id.to_owned(), tx), rx)
            .await?
            .ok_or_else(|| Error::job_not_found(job_id))
    }

    /// Delivers `signal` to the terminal's foreground process group; returns the group. Fails
    /// once the session's program has exited, and for SIGKILL aimed at the shell itself.
    pub async fn signal(&self, signal: Signal) -> Result<i32> {
        let (tx, rx) = oneshot::channel();
        self.call(Command::Signal(signal, tx), rx).await?
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

/// "running" or "exited code=0 signal=null".
pub fn status_text(status: Status) -> String {
    match status {
        Status::Running => "running".to_owned(),
        Status::Exited(ExitKind::Code(c)) => exited_text(Some(c), None),
        Status::Exited(ExitKind::Signal(s)) => exited_text(None, Some(s.as_str())),
        Status::Exited(ExitKind::Lost) => exited_text(None, None),
    }
}

/// "exited code=0 signal=null": how an exited session's status reads in rendered text.
pub fn exited_text(code: Option<i32>, signal: Option<&str>) -> String {
    let code = code.map_or_else(|| "null".to_owned(), |c| c.to_string());
    format!("exited code={code} signal={}", signal.unwrap_or("null"))
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
