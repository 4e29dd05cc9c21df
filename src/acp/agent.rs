//! The ACP agent on stdio, built on the official SDK's v1 builder: `initialize` (protocol v1,
//! name and version, no auth, text-only prompts; records the terminal-card capability),
//! `session/new` (opens the daemon session, lists the slash commands), `session/prompt` (a
//! slash command or a terminal send, run off the dispatch loop) and `session/cancel`.

use super::error::acp_error;
use super::slash::{self, Input};
use super::state::{Notifier, Session, Shim};
use super::terminal;
use super::text::prompt_input;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Stdio};
use std::sync::Arc;

/// Serves ACP on stdin/stdout until the client closes stdin.
pub(crate) async fn serve(shim: Arc<Shim>) -> Result<(), agent_client_protocol::Error> {
    let (on_init, on_new, on_prompt, on_cancel) = (shim.clone(), shim.clone(), shim.clone(), shim);
    Agent
        .v1()
        .name("ptyd")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                responder.respond(initialize(&on_init, &request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                let shim = on_new.clone();
                cx.clone()
                    .spawn(async move { new_session(&shim, request, responder, cx).await })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                let Some(session) = on_prompt.session(&request.session_id.0) else {
                    return responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(format!("unknown session {}", request.session_id.0)),
                    );
                };
                let shim = on_prompt.clone();
                cx.clone().spawn(async move {
                    let out = Notifier::new(cx, &session.id);
                    let stop = prompt(&shim, &session, &request, &out).await;
                    respond(responder.respond(PromptResponse::new(stop)));
                    Ok(())
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                if let Some(session) = on_cancel.session(&notification.session_id.0) {
                    session.cancel_prompt();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await
}

/// Answers `initialize` and records whether the client renders terminal cards.
fn initialize(shim: &Shim, request: &InitializeRequest) -> InitializeResponse {
    let terminal_output = request
        .client_capabilities
        .meta
        .as_ref()
        .and_then(|m| m.get("terminal_output"))
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    shim.set_terminal_mode(terminal_output);
    tracing::info!(terminal_output, "ACP client initialized");
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(AgentCapabilities::new().prompt_capabilities(PromptCapabilities::new()))
        .agent_info(Implementation::new("ptyd", env!("CARGO_PKG_VERSION")).title("ptyd terminal"))
}

/// Answers `session/new`: opens the session's terminal in the requested cwd, answers with the
/// session id, then lists the slash commands. A terminal that cannot open is an error of
/// `session/new`, mapped by `acp_error` (a bad cwd is invalid params).
async fn new_session(
    shim: &Shim,
    request: NewSessionRequest,
    responder: Responder<NewSessionResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), agent_client_protocol::Error> {
    let session = shim.add_session(request.cwd.to_string_lossy().into_owned());
    match shim.ensure_terminal(&session).await {
        Ok(_) => {
            respond(responder.respond(NewSessionResponse::new(session.id.clone())));
            Notifier::new(cx, &session.id).commands();
        }
        Err(status) => {
            shim.remove_session(&session.id);
            respond(responder.respond_with_error(acp_error(&status)));
        }
    }
    Ok(())
}

/// Runs one prompt and returns its stop reason.
async fn prompt(
    shim: &Shim,
    session: &Session,
    request: &PromptRequest,
    out: &Notifier,
) -> StopReason {
    let cancel = session.begin_prompt();
    let input = prompt_input(&request.prompt);
    match slash::parse(&input) {
        Input::Terminal => terminal::run(shim, session, &input, &cancel, out).await,
        Input::Command(command) => slash::run(shim, session, command, &input, out).await,
        other => {
            if let Some(message) = slash::explain(&other) {
                out.message(message);
            }
        }
    }
    session.end_prompt();
    if cancel.is_cancelled() {
        StopReason::Cancelled
    } else {
        StopReason::EndTurn
    }
}

/// Logs a response that could not be sent (the client is gone).
fn respond(result: Result<(), agent_client_protocol::Error>) {
    if let Err(e) = result {
        tracing::debug!(error = %e, "dropping a response: the client is gone");
    }
}
