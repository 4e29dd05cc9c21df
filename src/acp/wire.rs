//! The ACP messages the shim sends, built with the SDK's v1 schema types: the terminal card
//! sequence (`tool_call` with `_meta.terminal_info`, `terminal_output` updates, the final
//! update with `rawOutput` and `_meta.terminal_exit`), its fallback form, generic tool calls for
//! slash commands, agent messages, and the slash-command list.

use super::text::{console_block, strip_ansi, wait_reason_name};
use crate::pb::{ForegroundResult, WaitReason};
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock, ContentChunk,
    Meta, Terminal, TextContent, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind, UnstructuredCommandInput,
};
use serde_json::{Value, json};

/// `_meta` with one key.
fn meta(key: &str, value: Value) -> Meta {
    Meta::from_iter([(key.to_owned(), value)])
}

/// A text content item.
fn text_content(text: impl Into<String>) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::Text(TextContent::new(text.into())))
}

/// The first notification of a terminal send. In terminal mode it carries the terminal content
/// item and `_meta.terminal_info`, which makes Zed create the display terminal.
pub(crate) fn command_call(id: &str, command: &str, cwd: &str, terminal_mode: bool) -> ToolCall {
    let title = if command.is_empty() {
        "(Enter)"
    } else {
        command
    };
    let call = ToolCall::new(id.to_owned(), title)
        .kind(ToolKind::Execute)
        .status(ToolCallStatus::InProgress)
        .raw_input(json!({"command": command, "cwd": cwd}));
    if !terminal_mode {
        return call;
    }
    call.content(vec![ToolCallContent::Terminal(Terminal::new(
        id.to_owned(),
    ))])
    .meta(meta(
        "terminal_info",
        json!({"terminal_id": id, "cwd": cwd}),
    ))
}

/// A streaming update: only `_meta.terminal_output` (Zed appends `data`).
pub(crate) fn output_update(id: &str, data: String) -> ToolCallUpdate {
    ToolCallUpdate::new(id.to_owned(), ToolCallUpdateFields::new()).meta(meta(
        "terminal_output",
        json!({"terminal_id": id, "data": data}),
    ))
}

/// Whether a finished send counts as a failure: a non-zero exit code, or a session that
/// exited abnormally.
pub(crate) fn failed(result: &ForegroundResult) -> bool {
    if result.exit_code.is_some_and(|code| code != 0) {
        return true;
    }
    result.wait_reason() == WaitReason::SessionExit
        && result
            .session_status
            .as_ref()
            .is_some_and(|s| s.signal.is_some() || s.exit_code.is_some_and(|c| c != 0))
}

/// The final update of a terminal send that the daemon answered: status and `rawOutput`, then
/// `_meta.terminal_exit` (terminal mode, when the command really ended) or the console block
/// (fallback mode, with a first line saying when earlier output was left out).
pub(crate) fn command_result(
    id: &str,
    result: &ForegroundResult,
    terminal_mode: bool,
) -> ToolCallUpdate {
    let reason = result.wait_reason();
    let status = if failed(result) {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let raw_output = json!({
        "formatted_output": result.viewport,
        "exit_code": result.exit_code,
        "wait_reason": wait_reason_name(reason),
    });
    let fields = ToolCallUpdateFields::new()
        .status(status)
        .raw_output(raw_output);
    if !terminal_mode {
        let mut text = strip_ansi(&result.viewport);
        if result.truncated {
            text = format!("[earlier output left out; /read pages the full history]\n{text}");
        }
        let fields = fields.content(vec![text_content(console_block(&text))]);
        return ToolCallUpdate::new(id.to_owned(), fields);
    }
    let update = ToolCallUpdate::new(id.to_owned(), fields);
    match reason {
        WaitReason::Prompt | WaitReason::SessionExit => {
            update.meta(meta("terminal_exit", terminal_exit(id, result)))
        }
        _ => update,
    }
}

/// `_meta.terminal_exit` of a command that really ended.
fn terminal_exit(id: &str, result: &ForegroundResult) -> Value {
    let status = result.session_status.as_ref();
    let ended_session = result.wait_reason() == WaitReason::SessionExit;
    let exit_code = result
        .exit_code
        .or_else(|| status.filter(|_| ended_session).and_then(|s| s.exit_code));
    let signal = status
        .filter(|_| ended_session)
        .and_then(|s| s.signal.clone());
    json!({"terminal_id": id, "exit_code": exit_code, "signal": signal})
}

/// The final update of a terminal send that never got the daemon's answer: cancelled before it
/// started, or abandoned after an interrupt that did not bring the shell back.
pub(crate) fn command_unfinished(id: &str, output: &str, terminal_mode: bool) -> ToolCallUpdate {
    let raw_output =
        json!({"formatted_output": output, "exit_code": null, "wait_reason": "cancelled"});
    let mut fields = ToolCallUpdateFields::new()
        .status(ToolCallStatus::Failed)
        .raw_output(raw_output);
    if !terminal_mode {
        fields = fields.content(vec![text_content(console_block(&strip_ansi(output)))]);
    }
    ToolCallUpdate::new(id.to_owned(), fields)
}

/// The final update of a tool call the daemon refused: failed, with the one-line error.
pub(crate) fn call_error(id: &str, error: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Failed)
            .content(vec![text_content(error)]),
    )
}

/// The first notification of a slash command: a generic tool call (no terminal card).
pub(crate) fn generic_call(id: &str, kind: ToolKind, title: &str, input: &str) -> ToolCall {
    ToolCall::new(id.to_owned(), title)
        .kind(kind)
        .status(ToolCallStatus::InProgress)
        .raw_input(json!({"command": input}))
}

/// The final update of a slash command that worked: the daemon's `rendered` text.
pub(crate) fn generic_result(id: &str, rendered: String) -> ToolCallUpdate {
    ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Completed)
            .content(vec![text_content(rendered)]),
    )
}

/// An agent message.
pub(crate) fn message(text: impl Into<String>) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text.into())))
}

/// The slash commands, as `available_commands_update` lists them.
pub(crate) fn available_commands() -> AvailableCommandsUpdate {
    let command = |name: &str, description: &str, hint: Option<&str>| {
        let c = AvailableCommand::new(name, description);
        match hint {
            Some(h) => c.input(AvailableCommandInput::Unstructured(
                UnstructuredCommandInput::new(h),
            )),
            None => c,
        }
    };
    AvailableCommandsUpdate::new(vec![
        command(
            "read",
            "Page the terminal's history (newest lines by default)",
            Some("[offset] [count]"),
        ),
        command("screen", "Show the terminal's visible screen", None),
        command(
            "history",
            "List the commands the terminal's shell ran, with exit codes and output lines",
            Some("[count]"),
        ),
        command(
            "grep",
            "Search everything the terminal printed for a regular expression",
            Some("[-i] PATTERN"),
        ),
        command(
            "signal",
            "Send a signal to the foreground program (default INT)",
            Some("[INT|TERM|KILL|TSTP|HUP]"),
        ),
        command("bg", "Run a command as a background job", Some("<command>")),
        command(
            "job",
            "Show new output of a background job (the latest by default)",
            Some("[id]"),
        ),
        command(
            "kill",
            "Interrupt a background job (the latest by default)",
            Some("[id]"),
        ),
        command("list", "List this agent's terminal sessions", None),
        command(
            "close",
            "Close the terminal; the next message opens a fresh one",
            None,
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::SessionStatus;
    use agent_client_protocol::v1::schema::SessionUpdate;

    fn to_json(update: SessionUpdate) -> Value {
        serde_json::to_value(update).expect("serialize")
    }

    fn result(reason: WaitReason, exit_code: Option<i32>) -> ForegroundResult {
        ForegroundResult {
            viewport: "out".into(),
            wait_reason: reason as i32,
            exit_code,
            session_status: Some(SessionStatus {
                state: "running".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn terminal_mode_call_carries_terminal_content_and_info() {
        let v = to_json(SessionUpdate::ToolCall(command_call(
            "call_1", "ls", "/w", true,
        )));
        assert_eq!(
            v,
            json!({"sessionUpdate": "tool_call", "toolCallId": "call_1", "title": "ls",
                   "kind": "execute", "status": "in_progress",
                   "content": [{"type": "terminal", "terminalId": "call_1"}],
                   "rawInput": {"command": "ls", "cwd": "/w"},
                   "_meta": {"terminal_info": {"terminal_id": "call_1", "cwd": "/w"}}})
        );
    }

    #[test]
    fn fallback_call_has_no_terminal_fields() {
        let v = to_json(SessionUpdate::ToolCall(command_call(
            "call_1", "ls", "/w", false,
        )));
        assert!(
            v.get("content").is_none() && v.get("_meta").is_none(),
            "{v}"
        );
    }

    #[test]
    fn output_update_carries_only_terminal_output() {
        let v = to_json(SessionUpdate::ToolCallUpdate(output_update(
            "c",
            "x\r\n".into(),
        )));
        assert_eq!(
            v,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c",
                   "_meta": {"terminal_output": {"terminal_id": "c", "data": "x\r\n"}}})
        );
    }

    #[test]
    fn final_update_in_terminal_mode_has_exit_and_no_content() {
        let v = to_json(SessionUpdate::ToolCallUpdate(command_result(
            "c",
            &result(WaitReason::Prompt, Some(3)),
            true,
        )));
        assert_eq!(
            v,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "failed",
                   "rawOutput": {"formatted_output": "out", "exit_code": 3, "wait_reason": "prompt"},
                   "_meta": {"terminal_exit": {"terminal_id": "c", "exit_code": 3, "signal": null}}})
        );
    }

    #[test]
    fn final_update_without_an_end_has_no_terminal_exit() {
        let v = to_json(SessionUpdate::ToolCallUpdate(command_result(
            "c",
            &result(WaitReason::StdinRead, None),
            true,
        )));
        assert_eq!(v["status"], "completed");
        assert!(
            v.get("_meta").is_none() && v.get("content").is_none(),
            "{v}"
        );
    }

    #[test]
    fn fallback_final_update_is_one_console_block() {
        let v = to_json(SessionUpdate::ToolCallUpdate(command_result(
            "c",
            &result(WaitReason::Prompt, Some(0)),
            false,
        )));
        assert_eq!(v["status"], "completed");
        assert_eq!(
            v["content"],
            json!([{"type": "content", "content": {"type": "text", "text": "```console\nout\n```"}}])
        );
        assert!(v.get("_meta").is_none(), "{v}");
    }

    #[test]
    fn abnormal_session_exit_fails_with_the_signal() {
        let mut r = result(WaitReason::SessionExit, None);
        r.session_status = Some(SessionStatus {
            state: "exited".into(),
            exit_code: None,
            signal: Some("SIGKILL".into()),
        });
        assert!(failed(&r));
        let v = to_json(SessionUpdate::ToolCallUpdate(command_result("c", &r, true)));
        assert_eq!(
            v["_meta"]["terminal_exit"],
            json!({"terminal_id": "c", "exit_code": null, "signal": "SIGKILL"})
        );
    }
}
