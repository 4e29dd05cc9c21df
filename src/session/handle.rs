//! `SessionHandle`: a cheap clone holding the actor's command channel and a `watch` of the
//! state `List` shows; starting a session (or adopting one) spawns its actor.

use super::command::{Command, Sink};
use super::succession::{Kept, Persist, Replay, read_journal};
use super::{
    AttachRequest, AttachStart, CommandsOutcome, CommandsQuery, JobReport, JobStatus, PageScreen,
    ReadOutcome, ReadQuery, Ready, SearchOutcome, SearchQuery, SendInput, SendOutcome, SessionSpec,
    SessionState, Status, WatchStart, actor, unix_ms,
};
use crate::error::{Error, Result};
use crate::process::pty::{ExitKind, Pty};
use nix::sys::signal::Signal;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{mpsc, oneshot, watch};

/// Commands queued per session before callers wait.
const COMMAND_QUEUE: usize = 32;

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
        let spawned = Pty::spawn(crate::process::pty::Launch {
            argv: &spec.argv,
            env: &spec.env,
            cwd: &spec.cwd,
            cols: spec.cols,
            rows: spec.rows,
            tracking: spec.process_tracking,
            adoption,
            sandbox: spec.sandbox.as_ref().zip(spec.sandbox_plan.as_deref()),
        })
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
    pub async fn page_screen(&self) -> Result<PageScreen> {
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
