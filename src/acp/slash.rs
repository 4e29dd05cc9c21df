//! Slash commands: parsing a prompt that starts with `/name`, and running each command as one
//! generic tool call whose content is the daemon's `rendered` text (or its one-line error).

use super::state::{Notifier, Session, Shim};
use super::text::{error_line, unknown_command_message};
use super::wire;
use crate::pb::{
    CloseRequest, CommandsRequest, JobKillRequest, JobOutputRequest, ListRequest, ReadRequest,
    SearchRequest, SendRequest, SignalRequest,
};
use agent_client_protocol::v1::schema::ToolKind;
use std::future::Future;
use tonic::{Code, Status};

/// One parsed slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slash {
    /// `/read [offset] [count]`
    Read {
        /// Newest-relative line offset.
        offset: u64,
        /// Lines in the page (0: the daemon's default).
        count: u32,
    },
    /// `/screen`
    Screen,
    /// `/history [count]`: the commands the shell ran.
    History(u32),
    /// `/grep [-i] PATTERN`: the lines that match, with the commands they came from.
    Grep {
        /// The regular expression (the rest of the line).
        pattern: String,
        /// `-i`: ignore case.
        ignore_case: bool,
    },
    /// `/signal [NAME]` (default INT)
    Signal(String),
    /// `/bg <command>`
    Bg(String),
    /// `/job [id]`
    Job(Option<String>),
    /// `/kill [id]`
    Kill(Option<String>),
    /// `/list`
    List,
    /// `/close`
    Close,
}

/// What a prompt's input is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// Text for the terminal (anything that does not start with `/name`).
    Terminal,
    /// A known slash command with valid arguments.
    Command(Slash),
    /// A known slash command with bad arguments: the usage line.
    Usage(String),
    /// `/name` that names no command.
    Unknown(String),
}

/// Classifies a prompt's input. A slash command is `/` followed by a name of letters, digits,
/// `-` or `_` and then whitespace or the end, so a path such as `/usr/bin/env` or `/tmp/x.sh`
/// still goes to the terminal.
pub(crate) fn parse(input: &str) -> Input {
    let Some(rest) = input.strip_prefix('/') else {
        return Input::Terminal;
    };
    let name_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (name, args) = rest.split_at(name_end);
    let is_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !is_name {
        return Input::Terminal;
    }
    let words: Vec<&str> = args.split_whitespace().collect();
    match parse_command(name, args.trim(), &words) {
        Some(Ok(slash)) => Input::Command(slash),
        Some(Err(usage)) => Input::Usage(usage.to_owned()),
        None => Input::Unknown(name.to_owned()),
    }
}

/// The command `name` with its arguments; `None` for an unknown name, `Err(usage)` for bad
/// arguments.
fn parse_command(name: &str, rest: &str, words: &[&str]) -> Option<Result<Slash, &'static str>> {
    let optional_word = |usage| match words {
        [] => Ok(None),
        [w] => Ok(Some((*w).to_owned())),
        _ => Err(usage),
    };
    let no_words = |slash, usage| {
        if words.is_empty() {
            Ok(slash)
        } else {
            Err(usage)
        }
    };
    Some(match name {
        "read" => parse_read(words),
        "screen" => no_words(Slash::Screen, "usage: /screen"),
        "history" => parse_history(words),
        "grep" => parse_grep(rest),
        "signal" => optional_word("usage: /signal [INT|TERM|KILL|TSTP|HUP]")
            .map(|w| Slash::Signal(w.unwrap_or_else(|| "INT".to_owned()))),
        "bg" if rest.is_empty() => Err("usage: /bg <command>"),
        "bg" => Ok(Slash::Bg(rest.to_owned())),
        "job" => optional_word("usage: /job [id]").map(Slash::Job),
        "kill" => optional_word("usage: /kill [id]").map(Slash::Kill),
        "list" => no_words(Slash::List, "usage: /list"),
        "close" => no_words(Slash::Close, "usage: /close"),
        _ => return None,
    })
}

fn parse_read(words: &[&str]) -> Result<Slash, &'static str> {
    const USAGE: &str = "usage: /read [offset] [count] \
        (whole numbers: lines back from the newest, lines in the page)";
    let number = |w: Option<&&str>| w.map(|w| w.parse::<u64>()).transpose().map_err(|_| USAGE);
    if words.len() > 2 {
        return Err(USAGE);
    }
    let offset = number(words.first())?.unwrap_or(0);
    let count = number(words.get(1))?.unwrap_or(0);
    let count = u32::try_from(count).map_err(|_| USAGE)?;
    Ok(Slash::Read { offset, count })
}

fn parse_history(words: &[&str]) -> Result<Slash, &'static str> {
    const USAGE: &str = "usage: /history [count] (a whole number: the newest commands shown)";
    match words {
        [] => Ok(Slash::History(0)),
        [count] => count.parse().map(Slash::History).map_err(|_| USAGE),
        _ => Err(USAGE),
    }
}

fn parse_grep(rest: &str) -> Result<Slash, &'static str> {
    const USAGE: &str = "usage: /grep [-i] PATTERN (a regular expression: the rest of the line)";
    let (ignore_case, pattern) = match rest.strip_prefix("-i") {
        Some(after) if after.starts_with(char::is_whitespace) => (true, after.trim_start()),
        _ => (false, rest),
    };
    if pattern.is_empty() {
        return Err(USAGE);
    }
    Ok(Slash::Grep {
        pattern: pattern.to_owned(),
        ignore_case,
    })
}

/// Runs a slash command as one generic tool call (or an agent message when there is nothing to
/// call, such as `/job` before any `/bg`).
pub(crate) async fn run(shim: &Shim, session: &Session, slash: Slash, input: &str, out: &Notifier) {
    match slash {
        Slash::List => {
            let request = ListRequest {
                agent_id: shim.agent_id.clone(),
            };
            let mut client = shim.client.clone();
            let work = async move { Ok(client.list(request).await?.into_inner().rendered) };
            call(
                shim,
                out,
                ToolKind::Read,
                "List terminal sessions",
                input,
                work,
            )
            .await;
        }
        Slash::Job(id) | Slash::Kill(id) if id.is_none() && session.last_job().is_none() => {
            out.message("No background job yet: start one with /bg <command>.");
        }
        Slash::Job(id) => {
            let job = id.or_else(|| session.last_job()).unwrap_or_default();
            let title = format!("Output of job {job}");
            call(
                shim,
                out,
                ToolKind::Read,
                &title,
                input,
                job_output(shim, job),
            )
            .await;
        }
        Slash::Kill(id) => {
            let job = id.or_else(|| session.last_job()).unwrap_or_default();
            let title = format!("Kill job {job}");
            call(
                shim,
                out,
                ToolKind::Execute,
                &title,
                input,
                job_kill(shim, job),
            )
            .await;
        }
        Slash::Close => close(shim, session, input, out).await,
        terminal_command => on_terminal(shim, session, terminal_command, input, out).await,
    }
}

/// The commands that act on the session's terminal (opened first when none is open).
async fn on_terminal(shim: &Shim, session: &Session, slash: Slash, input: &str, out: &Notifier) {
    let (kind, what) = match &slash {
        Slash::Read { .. } => (ToolKind::Read, "Read terminal"),
        Slash::Screen => (ToolKind::Read, "Screen of terminal"),
        Slash::History(_) => (ToolKind::Read, "Commands of terminal"),
        Slash::Grep { .. } => (ToolKind::Search, "Search terminal"),
        Slash::Signal(_) => (ToolKind::Execute, "Signal terminal"),
        _ => (ToolKind::Execute, "Send to terminal"),
    };
    let suffix = if matches!(slash, Slash::Bg(_)) {
        " in background"
    } else {
        ""
    };
    let terminal = match shim.ensure_terminal(session).await {
        Ok(t) => t,
        Err(e) => {
            let title = format!("{what}{suffix}");
            return call(shim, out, kind, &title, input, async move { Err(e) }).await;
        }
    };
    let title = format!("{what} {terminal}{suffix}");
    let mut client = shim.client.clone();
    let agent_id = shim.agent_id.clone();
    let session_id = terminal.clone();
    match slash {
        Slash::Read { offset, count } => {
            let request = ReadRequest {
                agent_id,
                session_id,
                offset,
                count,
                ..Default::default()
            };
            let work = async move { Ok(client.read(request).await?.into_inner().rendered) };
            call(shim, out, kind, &title, input, work).await;
        }
        Slash::Screen => {
            let request = ReadRequest {
                agent_id,
                session_id,
                screen: true,
                ..Default::default()
            };
            let work = async move { Ok(client.read(request).await?.into_inner().rendered) };
            call(shim, out, kind, &title, input, work).await;
        }
        Slash::History(count) => {
            let request = CommandsRequest {
                agent_id,
                session_id,
                count,
                ..Default::default()
            };
            let work = async move { Ok(client.commands(request).await?.into_inner().rendered) };
            call(shim, out, kind, &title, input, work).await;
        }
        Slash::Grep {
            pattern,
            ignore_case,
        } => {
            let request = SearchRequest {
                agent_id,
                session_id,
                pattern,
                ignore_case,
                ..Default::default()
            };
            let work = async move { Ok(client.search(request).await?.into_inner().rendered) };
            call(shim, out, kind, &title, input, work).await;
        }
        Slash::Signal(signal) => {
            let request = SignalRequest {
                agent_id,
                session_id,
                signal,
            };
            let work = async move { Ok(client.signal(request).await?.into_inner().rendered) };
            call(shim, out, kind, &title, input, work).await;
        }
        Slash::Bg(command) => {
            let request = SendRequest {
                agent_id,
                session_id,
                text: command,
                run_in_background: true,
                timeout_ms: shim.timeout_ms,
                idle_ms: shim.idle_ms,
                ..Default::default()
            };
            let work = async move {
                let response = client.send(request).await?.into_inner();
                if !response.job_id.is_empty() {
                    session.set_last_job(&response.job_id);
                }
                Ok(response.rendered)
            };
            call(shim, out, kind, &title, input, work).await;
        }
        _ => {}
    }
}

fn job_output(shim: &Shim, job_id: String) -> impl Future<Output = Result<String, Status>> {
    let request = JobOutputRequest {
        agent_id: shim.agent_id.clone(),
        job_id,
        ..Default::default()
    };
    let mut client = shim.client.clone();
    async move { Ok(client.job_output(request).await?.into_inner().rendered) }
}

fn job_kill(shim: &Shim, job_id: String) -> impl Future<Output = Result<String, Status>> {
    let request = JobKillRequest {
        agent_id: shim.agent_id.clone(),
        job_id,
    };
    let mut client = shim.client.clone();
    async move { Ok(client.job_kill(request).await?.into_inner().rendered) }
}

/// `/close`: closes the session's terminal; the next prompt opens a fresh one.
async fn close(shim: &Shim, session: &Session, input: &str, out: &Notifier) {
    let Some(terminal) = session.terminal().await else {
        let work = async { Ok("no terminal session is open".to_owned()) };
        return call(shim, out, ToolKind::Delete, "Close terminal", input, work).await;
    };
    let title = format!("Close terminal {terminal}");
    let request = CloseRequest {
        agent_id: shim.agent_id.clone(),
        session_id: terminal.clone(),
    };
    let mut client = shim.client.clone();
    let work = async move {
        let result = client.close(request).await;
        let gone = match &result {
            Ok(_) => true,
            Err(status) => status.code() == Code::NotFound,
        };
        if gone {
            session.forget_terminal(&terminal).await;
        }
        Ok(result?.into_inner().rendered)
    };
    call(shim, out, ToolKind::Delete, &title, input, work).await;
}

/// One generic tool call: announced in progress, then completed with `work`'s text or failed
/// with its one-line error.
async fn call(
    shim: &Shim,
    out: &Notifier,
    kind: ToolKind,
    title: &str,
    input: &str,
    work: impl Future<Output = Result<String, Status>>,
) {
    let id = shim.next_call_id();
    out.tool_call(wire::generic_call(&id, kind, title, input));
    match work.await {
        Ok(text) => out.tool_update(wire::generic_result(&id, text)),
        Err(status) => out.tool_update(wire::call_error(&id, &error_line(&status))),
    }
}

/// The agent message for input that is not a runnable command.
pub(crate) fn explain(input: &Input) -> Option<String> {
    match input {
        Input::Usage(usage) => Some(usage.clone()),
        Input::Unknown(name) => Some(unknown_command_message(name)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_command() {
        let cases = [
            (
                "/read",
                Slash::Read {
                    offset: 0,
                    count: 0,
                },
            ),
            (
                "/read 10 50",
                Slash::Read {
                    offset: 10,
                    count: 50,
                },
            ),
            ("/screen", Slash::Screen),
            ("/history", Slash::History(0)),
            ("/history 20", Slash::History(20)),
            (
                "/grep error\\[E0308\\] here",
                Slash::Grep {
                    pattern: "error\\[E0308\\] here".into(),
                    ignore_case: false,
                },
            ),
            (
                "/grep -i  warning: ",
                Slash::Grep {
                    pattern: "warning:".into(),
                    ignore_case: true,
                },
            ),
            ("/signal", Slash::Signal("INT".into())),
            ("/signal TERM", Slash::Signal("TERM".into())),
            (
                "/bg sleep 5 && echo  x",
                Slash::Bg("sleep 5 && echo  x".into()),
            ),
            ("/job", Slash::Job(None)),
            ("/job j2", Slash::Job(Some("j2".into()))),
            ("/kill j1", Slash::Kill(Some("j1".into()))),
            ("/list", Slash::List),
            ("/close", Slash::Close),
        ];
        for (text, slash) in cases {
            assert_eq!(parse(text), Input::Command(slash), "{text}");
        }
    }

    #[test]
    fn paths_and_plain_text_go_to_the_terminal() {
        for text in [
            "ls",
            "/usr/bin/env true",
            "/tmp/x.sh",
            "/",
            "// x",
            " /read",
        ] {
            assert_eq!(parse(text), Input::Terminal, "{text}");
        }
    }

    #[test]
    fn bad_arguments_give_usage_and_unknown_names_are_named() {
        assert!(matches!(parse("/read x"), Input::Usage(u) if u.starts_with("usage: /read")));
        assert!(matches!(parse("/bg"), Input::Usage(u) if u == "usage: /bg <command>"));
        assert!(matches!(parse("/list all"), Input::Usage(_)));
        assert_eq!(parse("/x"), Input::Unknown("x".into()));
        let message = explain(&parse("/x")).unwrap();
        assert!(
            message.contains("/read") && message.contains("/close"),
            "{message}"
        );
    }
}
