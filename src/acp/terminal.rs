//! A terminal send: the prompt's text typed into the session's terminal with `SendStream`,
//! shown as the editor's terminal card (tool call, coalesced `terminal_output` chunks, final
//! update) or as a console block, plus `session/cancel` handling: SIGINT to the foreground
//! process group, repeated once, and a bounded wait for the shell to come back.

use super::pump::{COMMAND_OUTPUT_CAP, OutputPump, UPDATE_INTERVAL};
use super::state::{Notifier, Session, Shim};
use super::text::{error_line, hidden_input_message, session_ended_message, wait_message};
use super::wire;
use crate::pb::{ForegroundResult, SendEvent, SendRequest, WaitReason, send_event, send_response};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tonic::Status;

/// After `session/cancel`, SIGINT is repeated once if the shell is not back by then...
const INTERRUPT_RETRY: Duration = Duration::from_millis(1000);
/// ...and the shim stops waiting for the command after this long, so the prompt ends promptly.
const INTERRUPT_GIVE_UP: Duration = Duration::from_millis(1700);

/// Said when the session's terminal is gone and the command runs in a new one.
const TERMINAL_GONE: &str = "The terminal session of this conversation is gone (the ptyd daemon \
    restarted without it, or it was closed); running the command in a new terminal, so the \
    shell's directory, variables and programs start afresh.";

/// How a send ended.
enum Outcome {
    /// The daemon answered.
    Done(ForegroundResult),
    /// Cancelled: before it started, or the shell did not come back after the interrupts.
    Unfinished,
    /// The daemon refused the send or the stream broke.
    Failed(Status),
}

/// Runs `command` in the session's terminal and reports it as one tool call.
pub(crate) async fn run(
    shim: &Shim,
    session: &Session,
    command: &str,
    cancel: &CancellationToken,
    out: &Notifier,
) {
    let id = shim.next_call_id();
    let terminal_mode = shim.terminal_mode();
    let terminal = shim.ensure_terminal(session).await;
    out.tool_call(wire::command_call(
        &id,
        command,
        &session.cwd(),
        terminal_mode,
    ));
    let mut terminal = match terminal {
        Ok(t) => t,
        Err(e) => return out.tool_update(wire::call_error(&id, &error_line(&e))),
    };
    let mut pump = OutputPump::new(COMMAND_OUTPUT_CAP, UPDATE_INTERVAL);
    let mut emit = |data: String| out.tool_update(wire::output_update(&id, data));
    // The terminal is gone (a daemon restarted without it, or it was closed elsewhere): nothing
    // was typed, so the command runs once more, in a fresh terminal, rather than every prompt
    // failing.
    let mut in_fresh_terminal = false;
    let outcome = loop {
        if !in_fresh_terminal && cancel.is_cancelled() {
            break Outcome::Unfinished;
        }
        let outcome = LiveSend {
            shim,
            terminal: &terminal,
            cancel,
            terminal_mode,
            pump: &mut pump,
            emit: &mut emit,
        }
        .run(command)
        .await;
        let gone = matches!(&outcome, Outcome::Failed(s) if s.code() == tonic::Code::NotFound);
        if in_fresh_terminal || !gone || cancel.is_cancelled() {
            break outcome;
        }
        session.forget_terminal(&terminal).await;
        out.message(TERMINAL_GONE);
        match shim.ensure_terminal(session).await {
            Ok(fresh) => {
                terminal = fresh;
                in_fresh_terminal = true;
            }
            Err(e) => break Outcome::Failed(e),
        }
    };
    if let Some(last) = pump.finish().filter(|_| terminal_mode) {
        out.tool_update(wire::output_update(&id, last));
    }
    match outcome {
        Outcome::Done(result) => finish(shim, session, &terminal, &id, &result, out).await,
        Outcome::Unfinished => {
            out.tool_update(wire::command_unfinished(&id, "", terminal_mode));
            out.message(
                "Stopped waiting: the command did not return to the prompt after the interrupt \
                 and may still be running; /signal TERM or /signal KILL ends it.",
            );
        }
        Outcome::Failed(status) => out.tool_update(wire::call_error(&id, &error_line(&status))),
    }
}

/// Reports a send the daemon answered: the final update, a message when the command did not
/// end, and a fresh start when the session's shell exited.
async fn finish(
    shim: &Shim,
    session: &Session,
    terminal: &str,
    id: &str,
    result: &ForegroundResult,
    out: &Notifier,
) {
    session.set_cwd(&result.cwd);
    out.tool_update(wire::command_result(id, result, shim.terminal_mode()));
    let reason = result.wait_reason();
    if result.input_hidden {
        let attach = crate::session::attach_command(terminal, &shim.agent_id);
        let page = crate::connection::page_link(&shim.client, &shim.agent_id, terminal).await;
        out.message(hidden_input_message(&attach, page.as_deref()));
    } else if let Some(message) = wait_message(reason, shim.idle_ms, shim.timeout_ms) {
        out.message(message);
    }
    if reason == WaitReason::SessionExit {
        shim.close_terminal(terminal).await;
        session.forget_terminal(terminal).await;
        let exit = match (&result.exit_code, result.session_status.as_ref()) {
            (_, Some(s)) if s.signal.is_some() => {
                format!("signal {}", s.signal.as_deref().unwrap_or_default())
            }
            (Some(code), _) => format!("exit code {code}"),
            _ => "exited".to_owned(),
        };
        out.message(session_ended_message(&exit));
    }
}

/// One terminal send in flight: where its output goes and what cancels it.
struct LiveSend<'a> {
    shim: &'a Shim,
    terminal: &'a str,
    cancel: &'a CancellationToken,
    terminal_mode: bool,
    pump: &'a mut OutputPump,
    emit: &'a mut (dyn FnMut(String) + Send),
}

impl LiveSend<'_> {
    /// Drives one `SendStream` of `text` (Enter follows): output into the pump (terminal mode),
    /// pump flushes at its pace, and the interrupt schedule once `cancel` fires.
    async fn run(&mut self, text: &str) -> Outcome {
        let request = SendRequest {
            agent_id: self.shim.agent_id.clone(),
            session_id: self.terminal.to_owned(),
            text: text.to_owned(),
            submit: Some(true),
            timeout_ms: self.shim.timeout_ms,
            idle_ms: self.shim.idle_ms,
            max_result_bytes: COMMAND_OUTPUT_CAP as u32,
            ..Default::default()
        };
        let mut events = match self.shim.client.clone().send_stream(request).await {
            Ok(response) => response.into_inner(),
            Err(status) => return Outcome::Failed(status),
        };
        let mut interrupted_at: Option<Instant> = None;
        let mut retried = false;
        loop {
            let flush_at = self.pump.due(Instant::now());
            let nudge_at = interrupted_at.map(|t| {
                t + if retried {
                    INTERRUPT_GIVE_UP
                } else {
                    INTERRUPT_RETRY
                }
            });
            tokio::select! {
                event = events.message() => match event {
                    Ok(Some(SendEvent { event: Some(send_event::Event::Output(bytes)) })) => {
                        if self.terminal_mode {
                            self.pump.push(&bytes);
                        }
                    }
                    Ok(Some(SendEvent { event: Some(send_event::Event::Done(response)) })) => {
                        return match response.result {
                            Some(send_response::Result::Foreground(result)) => Outcome::Done(result),
                            _ => Outcome::Failed(Status::internal(
                                "the daemon answered without a foreground result",
                            )),
                        };
                    }
                    Ok(Some(SendEvent { event: None })) => {}
                    Ok(None) => {
                        return Outcome::Failed(Status::internal(
                            "the daemon ended the stream without a result",
                        ));
                    }
                    Err(status) => return Outcome::Failed(status),
                },
                _ = sleep_until(flush_at), if flush_at.is_some() => {
                    if let Some(data) = self.pump.take(Instant::now()) {
                        (self.emit)(data);
                    }
                }
                _ = self.cancel.cancelled(), if interrupted_at.is_none() => {
                    interrupted_at = Some(Instant::now());
                    self.shim.interrupt(self.terminal).await;
                }
                _ = sleep_until(nudge_at), if nudge_at.is_some() => {
                    if retried {
                        return Outcome::Unfinished;
                    }
                    retried = true;
                    self.shim.interrupt(self.terminal).await;
                }
            }
        }
    }
}

/// Sleeps until `at` (a guard of the `select!` keeps `None` from being polled).
async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
    }
}
