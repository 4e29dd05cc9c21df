//! The tools' typed results: one struct per tool, whose JSON Schema (schemars) is the tool's
//! `outputSchema`, built from the daemon's response. Enumerated values are the lower-case names
//! the rendered text uses (`prompt`, `completed`, `closed`). Pure.

use crate::pb;
use schemars::JsonSchema;
use serde::Serialize;

/// The lower-case name of a proto enum value: `WAIT_REASON_PROMPT` -> `prompt`.
pub(crate) fn enum_name(full: &str, prefix: &str) -> String {
    full.strip_prefix(prefix)
        .unwrap_or(full)
        .to_ascii_lowercase()
}

fn wait_reason(value: i32) -> String {
    let reason = pb::WaitReason::try_from(value).unwrap_or(pb::WaitReason::Unspecified);
    enum_name(reason.as_str_name(), "WAIT_REASON_")
}

fn job_status(value: i32) -> String {
    let status = pb::JobStatus::try_from(value).unwrap_or(pb::JobStatus::Unspecified);
    enum_name(status.as_str_name(), "JOB_STATUS_")
}

/// Whether the session's program still runs.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub(crate) struct Status {
    /// "running" or "exited".
    pub(crate) state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) signal: Option<String>,
}

impl From<Option<pb::SessionStatus>> for Status {
    fn from(status: Option<pb::SessionStatus>) -> Status {
        let status = status.unwrap_or_default();
        Status {
            state: status.state,
            exit_code: status.exit_code,
            signal: status.signal,
        }
    }
}

/// `terminal_open`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OpenResult {
    pub(crate) session_id: String,
    pub(crate) name: String,
    #[serde(rename = "type")]
    pub(crate) type_name: String,
    pub(crate) pid: u32,
    pub(crate) cwd: String,
    /// Startup output.
    pub(crate) motd: String,
    pub(crate) motd_truncated: bool,
    /// The sandbox in force ("write ...; read ...; network ..."), absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sandbox: Option<String>,
}

impl From<&pb::OpenResponse> for OpenResult {
    fn from(r: &pb::OpenResponse) -> OpenResult {
        let s = r.session.clone().unwrap_or_default();
        OpenResult {
            session_id: s.session_id,
            name: s.name,
            type_name: s.r#type,
            pid: s.pid,
            cwd: s.cwd,
            motd: r.motd.clone(),
            motd_truncated: r.motd_truncated,
            sandbox: s.sandbox.as_ref().map(pb::sandbox::describe),
        }
    }
}

/// A result in `--structured` mode: the tool's typed fields and the text the model reads, so a
/// client that shows only the structured part loses nothing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Structured<T> {
    #[serde(flatten)]
    pub(crate) result: T,
    /// The text result, as the model reads it.
    pub(crate) rendered: String,
}

/// `terminal_send`: the session it ran in, then the foreground fields, or the background job's
/// id, status and first output.
#[derive(Debug, Default, Serialize, JsonSchema, PartialEq)]
pub(crate) struct SendResult {
    pub(crate) session_id: String,
    /// Background send: the job to read with job_output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) job_id: Option<String>,
    /// Background send: running, completed, killed or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<String>,
    /// Background send: what the job printed before the send returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) output: Option<String>,
    /// The command's output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) viewport: Option<String>,
    /// prompt, stdin_read, inferred_idle, timeout or session_exit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) wait_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) elapsed_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) truncated: Option<bool>,
    /// true: the program asks for a password; a person types it (never send it yourself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_hidden: Option<bool>,
}

impl SendResult {
    /// The result of a send to `session_id`.
    pub(crate) fn new(session_id: &str, r: &pb::SendResponse) -> SendResult {
        SendResult {
            session_id: session_id.to_owned(),
            ..SendResult::from(r)
        }
    }
}

impl From<&pb::SendResponse> for SendResult {
    fn from(r: &pb::SendResponse) -> SendResult {
        match &r.result {
            Some(pb::send_response::Result::Background(job)) => {
                let finished = job.wait_reason != pb::WaitReason::Unspecified as i32;
                SendResult {
                    job_id: Some(job.job_id.clone()),
                    status: Some(job_status(job.status)),
                    output: Some(job.output.clone()),
                    wait_reason: finished.then(|| wait_reason(job.wait_reason)),
                    exit_code: job.exit_code,
                    truncated: Some(job.truncated),
                    ..SendResult::default()
                }
            }
            Some(pb::send_response::Result::Foreground(f)) => SendResult {
                viewport: Some(f.viewport.clone()),
                wait_reason: Some(wait_reason(f.wait_reason)),
                exit_code: f.exit_code,
                session_status: Some(f.session_status.clone().into()),
                cwd: Some(f.cwd.clone()),
                elapsed_ms: Some(f.elapsed_ms),
                truncated: Some(f.truncated),
                input_hidden: f.input_hidden.then_some(true),
                ..SendResult::default()
            },
            None => SendResult::default(),
        }
    }
}

/// `terminal_read`.
#[derive(Debug, Default, Serialize, JsonSchema)]
pub(crate) struct ReadResult {
    pub(crate) text: String,
    pub(crate) total_lines: u64,
    /// Oldest retained line.
    pub(crate) first_line: u64,
    pub(crate) line_begin: u64,
    pub(crate) line_end: u64,
    pub(crate) truncated: bool,
    /// The command read (`command`), or the commands listed (`command: "list"`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) commands: Vec<CommandResult>,
    /// With `pattern`: the matches kept, and how many there were in all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) matches: Vec<MatchResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total_matches: Option<u64>,
}

/// One command's record: the shape agent UIs show a shell command in.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommandResult {
    pub(crate) command_id: String,
    pub(crate) command: String,
    pub(crate) cwd: String,
    /// Unset while it runs and for a refused line.
    pub(crate) exit_code: Option<i32>,
    pub(crate) running: bool,
    pub(crate) refused: bool,
    pub(crate) first_line: Option<u64>,
    pub(crate) last_line: Option<u64>,
    pub(crate) output_bytes: u64,
    /// False once history dropped the start of its output.
    pub(crate) output_retained: bool,
}

impl From<&pb::CommandRecord> for CommandResult {
    fn from(c: &pb::CommandRecord) -> CommandResult {
        CommandResult {
            command_id: c.command_id.clone(),
            command: c.command.clone(),
            cwd: c.cwd.clone(),
            exit_code: c.exit_code,
            running: c.ended_unix_ms.is_none(),
            refused: c.refused,
            first_line: c.first_line,
            last_line: c.last_line,
            output_bytes: c.output_bytes,
            output_retained: c.output_retained,
        }
    }
}

/// A line `pattern` matched.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MatchResult {
    pub(crate) line: u64,
    pub(crate) text: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) command_id: String,
}

impl From<&pb::ReadResponse> for ReadResult {
    fn from(r: &pb::ReadResponse) -> ReadResult {
        ReadResult {
            text: r.text.clone(),
            total_lines: r.total_lines,
            first_line: r.first_line,
            line_begin: r.line_begin,
            line_end: r.line_end,
            truncated: r.truncated,
            commands: r.command.iter().map(CommandResult::from).collect(),
            matches: Vec::new(),
            total_matches: None,
        }
    }
}

impl From<&pb::CommandsResponse> for ReadResult {
    fn from(r: &pb::CommandsResponse) -> ReadResult {
        ReadResult {
            truncated: r.truncated,
            commands: r.commands.iter().map(CommandResult::from).collect(),
            ..ReadResult::default()
        }
    }
}

impl From<&pb::SearchResponse> for ReadResult {
    fn from(r: &pb::SearchResponse) -> ReadResult {
        ReadResult {
            truncated: r.truncated,
            matches: r
                .matches
                .iter()
                .map(|m| MatchResult {
                    line: m.line,
                    text: m.text.clone(),
                    command_id: m.command_id.clone(),
                })
                .collect(),
            total_matches: Some(r.total_matches),
            ..ReadResult::default()
        }
    }
}

/// `terminal_signal`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SignalResult {
    pub(crate) delivered: bool,
    pub(crate) target_pgid: i32,
}

/// `terminal_close`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CloseResult {
    pub(crate) session_id: String,
    /// closed or already_closing.
    pub(crate) outcome: String,
}

impl From<&pb::CloseResponse> for CloseResult {
    fn from(r: &pb::CloseResponse) -> CloseResult {
        let outcome =
            pb::CloseOutcome::try_from(r.outcome).unwrap_or(pb::CloseOutcome::Unspecified);
        CloseResult {
            session_id: r.session_id.clone(),
            outcome: enum_name(outcome.as_str_name(), "CLOSE_OUTCOME_"),
        }
    }
}

/// One session of `terminal_list`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Session {
    pub(crate) session_id: String,
    pub(crate) name: String,
    #[serde(rename = "type")]
    pub(crate) type_name: String,
    pub(crate) pid: u32,
    pub(crate) status: Status,
    pub(crate) cwd: String,
    pub(crate) cols: u32,
    pub(crate) rows: u32,
    /// A send or job is in flight.
    pub(crate) busy: bool,
    /// The foreground program when it is not the shell.
    pub(crate) foreground: String,
    pub(crate) created_unix_ms: i64,
    pub(crate) last_output_unix_ms: i64,
    pub(crate) total_lines: u64,
}

/// `terminal_list`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListResult {
    pub(crate) sessions: Vec<Session>,
}

impl From<&pb::ListResponse> for ListResult {
    fn from(r: &pb::ListResponse) -> ListResult {
        let sessions = r
            .sessions
            .iter()
            .map(|s| Session {
                session_id: s.session_id.clone(),
                name: s.name.clone(),
                type_name: s.r#type.clone(),
                pid: s.pid,
                status: s.status.clone().into(),
                cwd: s.cwd.clone(),
                cols: s.cols,
                rows: s.rows,
                busy: s.busy,
                foreground: s.foreground.clone(),
                created_unix_ms: s.created_unix_ms,
                last_output_unix_ms: s.last_output_unix_ms,
                total_lines: s.total_lines,
            })
            .collect();
        ListResult { sessions }
    }
}

/// `job_output`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobOutputResult {
    pub(crate) job_id: String,
    pub(crate) session_id: String,
    /// running, completed, killed or failed.
    pub(crate) status: String,
    /// Output since the previous job_output.
    pub(crate) output: String,
    pub(crate) truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) wait_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
    pub(crate) detail: String,
}

impl From<&pb::JobOutputResponse> for JobOutputResult {
    fn from(r: &pb::JobOutputResponse) -> JobOutputResult {
        let finished = r.wait_reason != pb::WaitReason::Unspecified as i32;
        JobOutputResult {
            job_id: r.job_id.clone(),
            session_id: r.session_id.clone(),
            status: job_status(r.status),
            output: r.output.clone(),
            truncated: r.truncated,
            wait_reason: finished.then(|| wait_reason(r.wait_reason)),
            exit_code: r.exit_code,
            detail: r.detail.clone(),
        }
    }
}

/// `job_kill`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobKillResult {
    pub(crate) job_id: String,
    pub(crate) status: String,
}

impl From<&pb::JobKillResponse> for JobKillResult {
    fn from(r: &pb::JobKillResponse) -> JobKillResult {
        JobKillResult {
            job_id: r.job_id.clone(),
            status: job_status(r.status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_values_are_the_rendered_names() {
        let cases = [
            (wait_reason(pb::WaitReason::Prompt as i32), "prompt"),
            (wait_reason(pb::WaitReason::StdinRead as i32), "stdin_read"),
            (
                wait_reason(pb::WaitReason::InferredIdle as i32),
                "inferred_idle",
            ),
            (job_status(pb::JobStatus::Completed as i32), "completed"),
            (job_status(pb::JobStatus::Killed as i32), "killed"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        let close = pb::CloseResponse {
            session_id: "t1".into(),
            outcome: pb::CloseOutcome::AlreadyClosing as i32,
            rendered: String::new(),
        };
        assert_eq!(CloseResult::from(&close).outcome, "already_closing");
    }

    #[test]
    fn a_send_result_is_foreground_or_background() {
        let background = pb::SendResponse {
            result: Some(pb::send_response::Result::Background(
                pb::JobOutputResponse {
                    job_id: "j1".into(),
                    status: pb::JobStatus::Running as i32,
                    output: "Serving HTTP on 0.0.0.0 port 8000".into(),
                    ..Default::default()
                },
            )),
            job_id: "j1".into(),
            rendered: "started background job j1".into(),
        };
        let value = serde_json::to_value(SendResult::new("t2", &background)).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"session_id": "t2", "job_id": "j1", "status": "running",
                "output": "Serving HTTP on 0.0.0.0 port 8000", "truncated": false})
        );
        let foreground = pb::SendResponse {
            result: Some(pb::send_response::Result::Foreground(
                pb::ForegroundResult {
                    viewport: "hi".into(),
                    wait_reason: pb::WaitReason::Prompt as i32,
                    exit_code: Some(0),
                    cwd: "/tmp".into(),
                    session_status: Some(pb::SessionStatus {
                        state: "running".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )),
            job_id: String::new(),
            rendered: String::new(),
        };
        let result = SendResult::from(&foreground);
        assert_eq!(result.wait_reason.as_deref(), Some("prompt"));
        assert_eq!(result.exit_code, Some(0));
        assert_eq!(
            result.session_status.map(|s| s.state).as_deref(),
            Some("running")
        );
    }
}
