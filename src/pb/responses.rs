//! The responses the service answers with, built from domain values: the typed fields and the
//! model-facing `rendered` text beside them, capped where the request gave a cap.

use super::*;
use crate::render;
use crate::session::{JobReport, SessionHandle, SessionState};
use crate::validate::DEFAULT_MAX_RESULT_BYTES;

/// A session's `SessionInfo`: the handle's facts and state, and the two facts read live from
/// the system (`cwd` and the `foreground` program's name, empty when it is the shell).
pub(crate) fn session_info(
    handle: &SessionHandle,
    state: SessionState,
    cwd: String,
    foreground: String,
) -> SessionInfo {
    SessionInfo {
        session_id: handle.spec.id.clone(),
        name: handle.spec.name.clone(),
        r#type: handle.spec.type_name.clone(),
        pid: handle.pid,
        status: Some(state.status.into()),
        cwd,
        cols: u32::from(state.cols),
        rows: u32::from(state.rows),
        busy: state.busy,
        foreground,
        created_unix_ms: handle.created_unix_ms,
        last_output_unix_ms: state.last_output_unix_ms,
        total_lines: state.total_lines,
        adopted: handle.adopted,
        attached: state.attached.unwrap_or_default(),
        sandbox: handle.spec.sandbox.as_ref().map(super::sandbox::in_force),
    }
}

/// `Open`'s answer: "started terminal session t1 (name) [type: shell]", a warning when the
/// session could not be kept in the state directory (`not_kept`: why), then the startup output,
/// whose tail is kept within what `cap` leaves after them.
pub(crate) fn open_response(
    session: SessionInfo,
    sandbox: Option<&crate::sandbox::Sandbox>,
    full_motd: &str,
    not_kept: Option<&str>,
    cap: usize,
) -> OpenResponse {
    let mut header = format!("started terminal session {}", session.session_id);
    if !session.name.is_empty() {
        header.push_str(&format!(" ({})", session.name));
    }
    header.push_str(&format!(" [type: {}]", session.r#type));
    if let Some(sandbox) = sandbox {
        header.push_str(&format!("\n[sandboxed: {}]", sandbox.describe()));
    }
    if let Some(why) = not_kept {
        header.push_str(&format!(
            "\n[warning: the state directory cannot keep this session ({why}); it ends with \
             this daemon]"
        ));
    }
    let budget = cap.saturating_sub(header.len() + 1);
    let motd = render::tail_fit(full_motd, budget).to_owned();
    let motd_truncated = motd.len() < full_motd.len();
    let body = if full_motd.is_empty() {
        "(no startup output)"
    } else {
        motd.as_str()
    };
    OpenResponse {
        rendered: render::line(format!("{header}\n{body}"), cap),
        session: Some(session),
        motd,
        motd_truncated,
        not_kept: not_kept.unwrap_or_default().to_owned(),
    }
}

/// The first line of a background send's answer: "started background job j1".
pub(crate) fn background_header(job_id: &str) -> String {
    format!("started background job {job_id}")
}

/// `Send`'s answer for a background send: `header`, then what JobOutput answered when the send
/// returned (its output and `[job: j1 running]`, capped to what the header left of the cap).
pub(crate) fn background_response(header: String, mut first: JobOutputResponse) -> SendResponse {
    let rendered = format!("{header}\n{}", std::mem::take(&mut first.rendered));
    SendResponse {
        rendered,
        job_id: first.job_id.clone(),
        result: Some(send_response::Result::Background(first)),
    }
}

/// `List`'s answer: one line per session, oldest first.
pub(crate) fn list_response(sessions: Vec<SessionInfo>) -> ListResponse {
    let lines: Vec<String> = sessions.iter().map(list_line).collect();
    ListResponse {
        rendered: render::list(&lines, "(no terminal sessions)", DEFAULT_MAX_RESULT_BYTES),
        sessions,
    }
}

/// "t1 (main) [shell] running pid=4242", or "... exited code=0 signal=null".
fn list_line(s: &SessionInfo) -> String {
    let name = if s.name.is_empty() {
        String::new()
    } else {
        format!(" ({})", s.name)
    };
    let status = match &s.status {
        Some(st) if st.state == "exited" => {
            crate::session::exited_text(st.exit_code, st.signal.as_deref())
        }
        _ => format!("running pid={}", s.pid),
    };
    // A session this daemon took over from its predecessor says so (docs/lifecycle.md).
    let adopted = if s.adopted { " (adopted)" } else { "" };
    let sandboxed = if s.sandbox.is_some() {
        " [sandboxed]"
    } else {
        ""
    };
    let attached = if s.attached.is_empty() {
        String::new()
    } else {
        format!(" (attached: {})", s.attached)
    };
    format!(
        "{}{name} [{}]{sandboxed} {status}{adopted}{attached}",
        s.session_id, s.r#type
    )
}

/// `Types`' answer: "shell [bash] /bin/bash: the user's login shell", one line per type
/// ("box [bash] [sandboxed] bash: ..." for a type with a sandbox).
pub(crate) fn types_response(types: &[crate::config::TerminalType]) -> TypesResponse {
    let types: Vec<TerminalType> = types.iter().map(TerminalType::from).collect();
    let lines: Vec<String> = types
        .iter()
        .map(|t| {
            format!(
                "{} [{}]{} {}: {}",
                t.name,
                t.integration,
                if t.sandbox.is_some() {
                    " [sandboxed]"
                } else {
                    ""
                },
                t.argv.join(" "),
                t.description
            )
        })
        .collect();
    TypesResponse {
        rendered: render::list(&lines, "(no terminal types)", DEFAULT_MAX_RESULT_BYTES),
        types,
    }
}

/// `Close`'s answer.
pub(crate) fn close_response(session_id: String, outcome: CloseOutcome) -> CloseResponse {
    let rendered = match outcome {
        CloseOutcome::AlreadyClosing => {
            format!("terminal session {session_id} was already closing")
        }
        _ => format!("closed terminal session {session_id}"),
    };
    CloseResponse {
        session_id,
        outcome: outcome as i32,
        rendered,
    }
}

/// `JobOutput`'s answer for `job_id` in `session_id`.
pub(crate) fn job_output_response(
    job_id: String,
    session_id: String,
    report: JobReport,
) -> JobOutputResponse {
    let outcome = report.outcome;
    JobOutputResponse {
        job_id,
        session_id,
        status: JobStatus::from(report.status) as i32,
        output: report.output,
        truncated: report.truncated,
        detail: report.detail,
        wait_reason: outcome
            .as_ref()
            .map_or(WaitReason::Unspecified, |o| WaitReason::from(o.reason))
            as i32,
        exit_code: outcome.as_ref().and_then(|o| o.exit_code),
        session_status: outcome.map(|o| o.status.into()),
        rendered: report.rendered,
    }
}

/// `JobKill`'s answer: "[job: j1 killed]".
pub(crate) fn job_kill_response(
    job_id: String,
    status: crate::session::JobStatus,
) -> JobKillResponse {
    JobKillResponse {
        rendered: format!("[job: {job_id} {}]", status.name()),
        job_id,
        status: JobStatus::from(status) as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, name: &str, status: Option<SessionStatus>) -> SessionInfo {
        SessionInfo {
            session_id: id.into(),
            name: name.into(),
            r#type: "shell".into(),
            pid: 42,
            status,
            ..Default::default()
        }
    }

    #[test]
    fn list_lines_name_the_session_and_its_state() {
        let exited = SessionStatus {
            state: "exited".into(),
            exit_code: Some(3),
            signal: None,
        };
        let table = [
            (info("t1", "", None), "t1 [shell] running pid=42"),
            (info("t2", "main", None), "t2 (main) [shell] running pid=42"),
            (
                info("t3", "", Some(exited)),
                "t3 [shell] exited code=3 signal=null",
            ),
            (
                SessionInfo {
                    adopted: true,
                    ..info("t4", "", None)
                },
                "t4 [shell] running pid=42 (adopted)",
            ),
            (
                SessionInfo {
                    attached: "ptyd attach on /dev/pts/3".into(),
                    ..info("t5", "", None)
                },
                "t5 [shell] running pid=42 (attached: ptyd attach on /dev/pts/3)",
            ),
            (
                SessionInfo {
                    sandbox: Some(Sandbox::default()),
                    ..info("t6", "", None)
                },
                "t6 [shell] [sandboxed] running pid=42",
            ),
        ];
        for (session, line) in table {
            assert_eq!(list_line(&session), line);
        }
        assert_eq!(list_response(vec![]).rendered, "(no terminal sessions)");
    }

    #[test]
    fn the_open_header_comes_first_and_the_motd_keeps_its_tail() {
        let table = [
            (
                "",
                1000,
                "started terminal session t1 (main) [type: shell]\n(no startup output)",
                false,
            ),
            (
                "hello",
                1000,
                "started terminal session t1 (main) [type: shell]\nhello",
                false,
            ),
            (
                "0123456789",
                55,
                "started terminal session t1 (main) [type: shell]\n456789",
                true,
            ),
        ];
        for (motd, cap, rendered, truncated) in table {
            let r = open_response(info("t1", "main", None), None, motd, None, cap);
            assert_eq!(r.rendered, rendered, "{motd:?} in {cap}");
            assert_eq!(r.motd_truncated, truncated, "{motd:?} in {cap}");
            assert!(r.rendered.len() <= cap);
        }
    }

    #[test]
    fn close_answers_say_what_happened() {
        let closed = close_response("t1".into(), CloseOutcome::Closed);
        assert_eq!(closed.rendered, "closed terminal session t1");
        assert_eq!(closed.outcome, CloseOutcome::Closed as i32);
        let already = close_response("t1".into(), CloseOutcome::AlreadyClosing);
        assert_eq!(already.rendered, "terminal session t1 was already closing");
    }
}
