//! The shim's state for one ACP connection: the daemon client and options, the capability
//! gate, tool call ids, the ACP sessions and the daemon session behind each, the prompt in
//! flight (for `session/cancel`), and the `Notifier` that sends `session/update`s.

use crate::pb::{CloseRequest, OpenRequest, SignalRequest};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    SessionId, SessionNotification, SessionUpdate, ToolCall, ToolCallUpdate,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;
use tonic::Status;

/// The daemon client type.
pub(crate) use crate::connection::Daemon;

/// Locks a std mutex, recovering the data if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Everything one ACP connection shares.
pub(crate) struct Shim {
    /// The daemon (tonic clients are cheap clones).
    pub(crate) client: Daemon,
    /// Owner of every daemon session and job the shim creates.
    pub(crate) agent_id: String,
    /// Terminal type of the sessions it opens.
    pub(crate) type_name: String,
    /// The sandbox of every terminal it opens (`--sandbox`).
    sandbox: Option<crate::pb::Sandbox>,
    /// `timeout_ms` of terminal sends.
    pub(crate) timeout_ms: u32,
    /// `idle_ms` of terminal sends.
    pub(crate) idle_ms: u32,
    terminal_mode: AtomicBool,
    next_call: AtomicU64,
    next_session: AtomicU64,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    opened: Mutex<Vec<String>>,
}

impl Shim {
    /// A shim for `agent_id` on `client`.
    pub(crate) fn new(
        client: Daemon,
        agent_id: String,
        type_name: String,
        timeout_ms: u32,
        idle_ms: u32,
        sandbox: Option<crate::pb::Sandbox>,
    ) -> Self {
        Shim {
            client,
            agent_id,
            type_name,
            sandbox,
            timeout_ms,
            idle_ms,
            terminal_mode: AtomicBool::new(false),
            next_call: AtomicU64::new(1),
            next_session: AtomicU64::new(1),
            sessions: Mutex::new(HashMap::new()),
            opened: Mutex::new(Vec::new()),
        }
    }

    /// Records the client's `_meta.terminal_output` capability.
    pub(crate) fn set_terminal_mode(&self, on: bool) {
        self.terminal_mode.store(on, Ordering::Relaxed);
    }

    /// Whether the client renders terminal cards (`_meta.terminal_output == true`).
    pub(crate) fn terminal_mode(&self) -> bool {
        self.terminal_mode.load(Ordering::Relaxed)
    }

    /// A tool call id unique in the connection (also the terminal id of a card).
    pub(crate) fn next_call_id(&self) -> String {
        format!("call_{}", self.next_call.fetch_add(1, Ordering::Relaxed))
    }

    /// Registers a new ACP session whose terminals open in `cwd`.
    pub(crate) fn add_session(&self, cwd: String) -> Arc<Session> {
        let n = self.next_session.fetch_add(1, Ordering::Relaxed);
        let session = Arc::new(Session::new(format!("session_{n}"), cwd));
        lock(&self.sessions).insert(session.id.clone(), session.clone());
        session
    }

    /// Forgets the ACP session `id` (its terminal never opened).
    pub(crate) fn remove_session(&self, id: &str) {
        lock(&self.sessions).remove(id);
    }

    /// The ACP session `id`, if this connection created it.
    pub(crate) fn session(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// The session's daemon terminal, opened (in the session's cwd) when none is open.
    pub(crate) async fn ensure_terminal(&self, session: &Session) -> Result<String, Status> {
        let mut terminal = session.terminal.lock().await;
        if let Some(id) = terminal.as_ref() {
            return Ok(id.clone());
        }
        let request = OpenRequest {
            agent_id: self.agent_id.clone(),
            r#type: self.type_name.clone(),
            cwd: session.requested_cwd.clone(),
            sandbox: self.sandbox.clone(),
            ..Default::default()
        };
        let info = self
            .client
            .clone()
            .open(request)
            .await?
            .into_inner()
            .session
            .ok_or_else(|| Status::internal("the daemon opened a session without describing it"))?;
        tracing::info!(
            session = %session.id,
            terminal = %info.session_id,
            "opened a terminal session"
        );
        lock(&self.opened).push(info.session_id.clone());
        session.set_cwd(if info.cwd.is_empty() {
            &session.requested_cwd
        } else {
            &info.cwd
        });
        *terminal = Some(info.session_id.clone());
        Ok(info.session_id)
    }

    /// Delivers SIGINT to the foreground process group of `terminal`.
    pub(crate) async fn interrupt(&self, terminal: &str) {
        let request = SignalRequest {
            agent_id: self.agent_id.clone(),
            session_id: terminal.to_owned(),
            signal: "SIGINT".to_owned(),
        };
        if let Err(e) = self.client.clone().signal(request).await {
            tracing::warn!(
                terminal,
                error = %e.message(),
                "interrupting the prompt's command failed"
            );
        }
    }

    /// Closes `terminal` (already gone is fine).
    pub(crate) async fn close_terminal(&self, terminal: &str) {
        let request = CloseRequest {
            agent_id: self.agent_id.clone(),
            session_id: terminal.to_owned(),
        };
        match self.client.clone().close(request).await {
            Ok(_) => tracing::info!(terminal, "closed a terminal session"),
            Err(e) if e.code() == tonic::Code::NotFound => {}
            Err(e) => {
                tracing::warn!(terminal, error = %e.message(), "closing a terminal session failed")
            }
        }
    }

    /// Closes every daemon session this shim opened (when the editor went away).
    pub(crate) async fn close_all(&self) {
        let opened = std::mem::take(&mut *lock(&self.opened));
        for terminal in opened {
            self.close_terminal(&terminal).await;
        }
    }
}

/// One ACP session: a daemon terminal opened on demand, its last known cwd, the latest
/// background job, and the prompt in flight.
pub(crate) struct Session {
    /// The ACP session id.
    pub(crate) id: String,
    requested_cwd: String,
    terminal: tokio::sync::Mutex<Option<String>>,
    cwd: Mutex<String>,
    last_job: Mutex<Option<String>>,
    prompt: Mutex<Option<CancellationToken>>,
}

impl Session {
    fn new(id: String, cwd: String) -> Self {
        Session {
            id,
            requested_cwd: cwd.clone(),
            terminal: tokio::sync::Mutex::new(None),
            cwd: Mutex::new(cwd),
            last_job: Mutex::new(None),
            prompt: Mutex::new(None),
        }
    }

    /// The open daemon terminal, if any.
    pub(crate) async fn terminal(&self) -> Option<String> {
        self.terminal.lock().await.clone()
    }

    /// Forgets `terminal` (closed or exited): the next prompt opens a fresh one.
    pub(crate) async fn forget_terminal(&self, terminal: &str) {
        let mut current = self.terminal.lock().await;
        if current.as_deref() == Some(terminal) {
            *current = None;
        }
    }

    /// The shell's last known current directory.
    pub(crate) fn cwd(&self) -> String {
        lock(&self.cwd).clone()
    }

    /// Records the shell's current directory (ignored when empty).
    pub(crate) fn set_cwd(&self, cwd: &str) {
        if !cwd.is_empty() {
            *lock(&self.cwd) = cwd.to_owned();
        }
    }

    /// The latest background job started with `/bg`.
    pub(crate) fn last_job(&self) -> Option<String> {
        lock(&self.last_job).clone()
    }

    /// Records the latest background job.
    pub(crate) fn set_last_job(&self, job: &str) {
        *lock(&self.last_job) = Some(job.to_owned());
    }

    /// Marks a prompt in flight; `session/cancel` cancels the returned token.
    pub(crate) fn begin_prompt(&self) -> CancellationToken {
        let token = CancellationToken::new();
        *lock(&self.prompt) = Some(token.clone());
        token
    }

    /// Clears the prompt in flight.
    pub(crate) fn end_prompt(&self) {
        *lock(&self.prompt) = None;
    }

    /// Cancels the prompt in flight, if any.
    pub(crate) fn cancel_prompt(&self) {
        if let Some(token) = lock(&self.prompt).as_ref() {
            token.cancel();
        }
    }
}

/// Sends `session/update` notifications for one ACP session. A send fails only when the client
/// is gone, and then nothing is left to tell it, so failures are logged and dropped.
pub(crate) struct Notifier {
    cx: ConnectionTo<Client>,
    session_id: SessionId,
}

impl Notifier {
    /// A notifier for `session_id` on `cx`.
    pub(crate) fn new(cx: ConnectionTo<Client>, session_id: &str) -> Self {
        Notifier {
            cx,
            session_id: SessionId::new(session_id.to_owned()),
        }
    }

    fn send(&self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.clone(), update);
        if let Err(e) = self.cx.send_notification(notification) {
            tracing::debug!(error = %e, "dropping a session update: the client is gone");
        }
    }

    /// A `tool_call`.
    pub(crate) fn tool_call(&self, call: ToolCall) {
        self.send(SessionUpdate::ToolCall(call));
    }

    /// A `tool_call_update`.
    pub(crate) fn tool_update(&self, update: ToolCallUpdate) {
        self.send(SessionUpdate::ToolCallUpdate(update));
    }

    /// An `agent_message_chunk`.
    pub(crate) fn message(&self, text: impl Into<String>) {
        self.send(SessionUpdate::AgentMessageChunk(super::wire::message(text)));
    }

    /// The `available_commands_update` listing the slash commands.
    pub(crate) fn commands(&self) {
        self.send(SessionUpdate::AvailableCommandsUpdate(
            super::wire::available_commands(),
        ));
    }
}
