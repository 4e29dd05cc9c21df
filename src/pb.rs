//! All protobuf glue: the code generated from `proto/ptyd/v1/ptyd.proto` (package `ptyd.v1`),
//! its encoded descriptor for server reflection, the conversions from domain types to messages,
//! the responses the service answers with (their `rendered` text included), and how messages
//! print as JSON (`json`, used by the CLI's `--json` through the derives `build.rs` adds), and
//! the codec (`codec`: a request that does not decode is `INVALID_ARGUMENT`).

/// The generated code, unlinted: it is prost's and tonic's, not ours.
#[allow(missing_docs, clippy::all)]
mod generated {
    tonic::include_proto!("ptyd.v1");
}
pub use generated::*;

/// The encoded file descriptor set, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("ptyd_descriptor");

pub mod codec;
mod responses;
pub(crate) mod sandbox;
pub(crate) use responses::*;

use crate::process::pty::ExitKind;
use crate::session::{self, Status};
use crate::waiting;

impl From<Status> for SessionStatus {
    fn from(status: Status) -> SessionStatus {
        match status {
            Status::Running => SessionStatus {
                state: "running".into(),
                exit_code: None,
                signal: None,
            },
            Status::Exited(ExitKind::Code(c)) => SessionStatus {
                state: "exited".into(),
                exit_code: Some(c),
                signal: None,
            },
            Status::Exited(ExitKind::Signal(s)) => SessionStatus {
                state: "exited".into(),
                exit_code: None,
                signal: Some(s.as_str().to_owned()),
            },
            Status::Exited(ExitKind::Lost) => SessionStatus {
                state: "exited".into(),
                exit_code: None,
                signal: None,
            },
        }
    }
}

impl From<waiting::WaitReason> for WaitReason {
    fn from(reason: waiting::WaitReason) -> WaitReason {
        match reason {
            waiting::WaitReason::Prompt => WaitReason::Prompt,
            waiting::WaitReason::StdinRead => WaitReason::StdinRead,
            waiting::WaitReason::InferredIdle => WaitReason::InferredIdle,
            waiting::WaitReason::Timeout => WaitReason::Timeout,
            waiting::WaitReason::SessionExit => WaitReason::SessionExit,
        }
    }
}

impl From<session::JobStatus> for JobStatus {
    fn from(status: session::JobStatus) -> JobStatus {
        match status {
            session::JobStatus::Running => JobStatus::Running,
            session::JobStatus::Completed => JobStatus::Completed,
            session::JobStatus::Killed => JobStatus::Killed,
            session::JobStatus::Failed => JobStatus::Failed,
        }
    }
}

impl From<session::SendOutcome> for ForegroundResult {
    fn from(outcome: session::SendOutcome) -> ForegroundResult {
        ForegroundResult {
            viewport: outcome.viewport,
            wait_reason: WaitReason::from(outcome.reason) as i32,
            session_status: Some(outcome.status.into()),
            truncated: outcome.truncated,
            exit_code: outcome.exit_code,
            input_hidden: outcome.input_hidden,
            cwd: outcome.cwd,
            elapsed_ms: outcome.elapsed.as_millis() as u64,
        }
    }
}

impl From<session::SendOutcome> for SendResponse {
    fn from(outcome: session::SendOutcome) -> SendResponse {
        SendResponse {
            rendered: outcome.rendered.clone(),
            job_id: String::new(),
            result: Some(send_response::Result::Foreground(outcome.into())),
        }
    }
}

impl From<session::ReadOutcome> for ReadResponse {
    fn from(page: session::ReadOutcome) -> ReadResponse {
        ReadResponse {
            text: page.text,
            total_lines: page.total_lines,
            first_line: page.first_line,
            line_begin: page.line_begin,
            line_end: page.line_end,
            truncated: page.truncated,
            rendered: page.rendered,
            command: page.command.map(CommandRecord::from),
        }
    }
}

impl From<session::CommandInfo> for CommandRecord {
    fn from(c: session::CommandInfo) -> CommandRecord {
        CommandRecord {
            command_id: c.id,
            command: c.command,
            cwd: c.cwd,
            started_unix_ms: c.started_unix_ms,
            ended_unix_ms: c.ended_unix_ms,
            exit_code: c.exit_code,
            refused: c.refused,
            first_line: c.first_line,
            last_line: c.last_line,
            output_bytes: c.output_bytes,
            output_retained: c.output_retained,
            typed_by: c.typed_by.to_owned(),
        }
    }
}

impl From<session::CommandsOutcome> for CommandsResponse {
    fn from(page: session::CommandsOutcome) -> CommandsResponse {
        CommandsResponse {
            commands: page.commands.into_iter().map(CommandRecord::from).collect(),
            total: page.total,
            truncated: page.truncated,
            rendered: page.rendered,
        }
    }
}

impl From<session::SearchOutcome> for SearchResponse {
    fn from(found: session::SearchOutcome) -> SearchResponse {
        SearchResponse {
            matches: found
                .matches
                .into_iter()
                .map(|m| SearchMatch {
                    line: m.line,
                    text: m.text,
                    command_id: m.command_id.unwrap_or_default(),
                })
                .collect(),
            total_matches: found.total_matches,
            truncated: found.truncated,
            rendered: found.rendered,
        }
    }
}

impl From<&crate::config::TerminalType> for TerminalType {
    fn from(t: &crate::config::TerminalType) -> TerminalType {
        TerminalType {
            name: t.name.clone(),
            argv: t.argv.clone(),
            integration: t.integration.name().to_owned(),
            description: t.description.clone(),
            sandbox: t.sandbox.as_ref().map(sandbox::of_request),
        }
    }
}

impl WaitReason {
    /// The contract's name: `prompt`, `stdin_read`, ... (empty for an unset reason).
    pub fn contract_name(self) -> &'static str {
        match self {
            WaitReason::Unspecified => "",
            WaitReason::Prompt => "prompt",
            WaitReason::StdinRead => "stdin_read",
            WaitReason::InferredIdle => "inferred_idle",
            WaitReason::Timeout => "timeout",
            WaitReason::SessionExit => "session_exit",
        }
    }
}

/// How the enum fields print as JSON: by the names the contract uses (`prompt`, `RUNNING`,
/// `CLOSED`) rather than as numbers; a number the proto does not know prints as itself.
pub mod json {
    use serde::Serializer;

    /// `WaitReason` as `prompt`, `stdin_read`, ... (lower case, as rendered).
    pub fn wait_reason<S: Serializer>(value: &i32, s: S) -> Result<S::Ok, S::Error> {
        match super::WaitReason::try_from(*value) {
            Ok(reason) => s.serialize_str(reason.contract_name()),
            Err(_) => s.serialize_i32(*value),
        }
    }

    /// `JobStatus` as `RUNNING`, `COMPLETED`, `KILLED`, `FAILED`.
    pub fn job_status<S: Serializer>(value: &i32, s: S) -> Result<S::Ok, S::Error> {
        match super::JobStatus::try_from(*value) {
            Ok(status) => s.serialize_str(status.as_str_name().trim_start_matches("JOB_STATUS_")),
            Err(_) => s.serialize_i32(*value),
        }
    }

    /// `CloseOutcome` as `CLOSED` or `ALREADY_CLOSING`.
    pub fn close_outcome<S: Serializer>(value: &i32, s: S) -> Result<S::Ok, S::Error> {
        match super::CloseOutcome::try_from(*value) {
            Ok(outcome) => {
                s.serialize_str(outcome.as_str_name().trim_start_matches("CLOSE_OUTCOME_"))
            }
            Err(_) => s.serialize_i32(*value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_print_as_json_with_contract_names() {
        let foreground = SendResponse {
            rendered: "r".into(),
            job_id: String::new(),
            result: Some(send_response::Result::Foreground(ForegroundResult {
                viewport: "v".into(),
                wait_reason: WaitReason::StdinRead as i32,
                session_status: Some(Status::Running.into()),
                truncated: false,
                exit_code: None,
                input_hidden: false,
                cwd: "/".into(),
                elapsed_ms: 3,
            })),
        };
        assert_eq!(
            serde_json::to_value(&foreground).unwrap(),
            json!({"rendered": "r", "foreground": {
                "viewport": "v", "wait_reason": "stdin_read",
                "session_status": {"state": "running", "exit_code": null, "signal": null},
                "truncated": false, "exit_code": null, "cwd": "/", "elapsed_ms": 3,
                "input_hidden": false,
            }})
        );
        let job = SendResponse {
            rendered: "started background job j1\n[job: j1 running]".into(),
            job_id: "j1".into(),
            result: Some(send_response::Result::Background(JobOutputResponse {
                job_id: "j1".into(),
                session_id: "t1".into(),
                status: JobStatus::Running as i32,
                ..JobOutputResponse::default()
            })),
        };
        assert_eq!(
            serde_json::to_value(&job).unwrap(),
            json!({"rendered": "started background job j1\n[job: j1 running]", "job_id": "j1",
                "background": {"job_id": "j1", "session_id": "t1", "status": "RUNNING",
                    "output": "", "truncated": false, "detail": "", "wait_reason": "",
                    "exit_code": null, "session_status": null, "rendered": ""}})
        );
        let table = [
            (
                serde_json::to_value(JobKillResponse {
                    job_id: "j1".into(),
                    status: JobStatus::Killed as i32,
                    rendered: String::new(),
                }),
                "status",
                json!("KILLED"),
            ),
            (
                serde_json::to_value(CloseResponse {
                    session_id: "t1".into(),
                    outcome: CloseOutcome::AlreadyClosing as i32,
                    rendered: String::new(),
                }),
                "outcome",
                json!("ALREADY_CLOSING"),
            ),
            (
                serde_json::to_value(JobKillResponse {
                    job_id: "j1".into(),
                    status: 99,
                    rendered: String::new(),
                }),
                "status",
                json!(99),
            ),
            (
                serde_json::to_value(SessionInfo {
                    r#type: "shell".into(),
                    ..Default::default()
                }),
                "type",
                json!("shell"),
            ),
        ];
        for (value, field, expected) in table {
            assert_eq!(value.unwrap()[field], expected, "{field}");
        }
    }
}
