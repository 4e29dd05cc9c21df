//! The MCP handler: `initialize` (name, version, instructions), `tools/list`, and `tools/call`,
//! where each tool is one RPC of the contract (two for a send to the default terminal: List,
//! then Send, or Open on first use). The daemon's `rendered` text is the one text block (and in
//! `--structured` mode the typed result the `structuredContent`); a refusal by the daemon is an
//! `isError` result with its message in MCP's words, and so are arguments that do not fit the
//! schema (SEP-1303), naming the field; only a call that is no tool call (no such tool) is a
//! JSON-RPC error. A call the client cancels drops its RPC, which releases the session's
//! reservation as a gRPC caller hanging up does.

use super::daemon::Link;
use super::elicit;
use super::params::{self, BadParams};
use super::progress::{self, Reporter};
use super::results;
use super::sessions::{InFlight, Sessions};
use super::tools::{self, INSTRUCTIONS};
use crate::connection::Daemon;
use crate::error::advice;
use crate::pb;
use crate::render;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData,
    Implementation, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use tonic::Status;

/// The agent id an HTTP request was authenticated as (set by the HTTP layer on the request).
#[derive(Debug, Clone)]
pub(crate) struct AgentId(pub(crate) String);

/// What every MCP session of one server shares.
pub(crate) struct Shared {
    /// The daemon.
    pub(crate) link: Link,
    /// Owner of the sessions over stdio; over HTTP each request's token names it.
    pub(crate) agent_id: String,
    /// Whether the agent id comes from each request (HTTP) rather than `agent_id`.
    pub(crate) per_request_agent: bool,
    /// `max_result_bytes` of every RPC, and the cap on every text block.
    pub(crate) max_result_bytes: u32,
    /// Whether background sends (and the job tools) are offered.
    pub(crate) background: bool,
    /// Whether results carry `structuredContent` (and tools an `outputSchema`).
    pub(crate) structured: bool,
    /// The daemon's types with shell integration: a default terminal is one of these.
    pub(crate) shell_types: HashSet<String>,
    /// The tools as listed.
    pub(crate) tools: Vec<Tool>,
    /// Every MCP session's terminals, so a server that stops can close them all.
    pub(crate) every: Mutex<Vec<Weak<Sessions>>>,
}

impl Shared {
    /// Closes the terminals every MCP session of this server opened and did not close.
    pub(crate) async fn close_every_opened(self: &Arc<Self>) {
        let every: Vec<Arc<Sessions>> = {
            let mut every = self.every.lock().unwrap_or_else(|e| e.into_inner());
            every.retain(|s| s.strong_count() > 0);
            every.iter().filter_map(Weak::upgrade).collect()
        };
        let opened = every.iter().flat_map(|s| s.take_opened()).collect();
        close_sessions(self.clone(), opened).await;
    }
}

/// The handler of one MCP session.
#[derive(Clone)]
pub(crate) struct Terminals {
    shared: Arc<Shared>,
    held: Arc<Held>,
}

/// The terminal sessions of one MCP session, closed when its handler goes away (HTTP sessions)
/// if `close_on_drop` is set.
struct Held {
    sessions: Arc<Sessions>,
    close_on_drop: Option<Arc<Shared>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(shared) = self.close_on_drop.take() else {
            return;
        };
        let sessions = self.sessions.take_opened();
        if sessions.is_empty() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            tracing::info!(
                count = sessions.len(),
                "an MCP session ended; closing its terminals"
            );
            runtime.spawn(close_sessions(shared, sessions));
        }
    }
}

async fn close_sessions(shared: Arc<Shared>, sessions: Vec<(String, String)>) {
    let Ok(client) = shared.link.client().await else {
        return;
    };
    for (agent_id, session_id) in sessions {
        let request = pb::CloseRequest {
            agent_id,
            session_id: session_id.clone(),
        };
        if let Err(e) = client.clone().close(request).await {
            tracing::debug!(session_id, error = %e, "closing a terminal session");
        }
    }
}

/// Why a tool call did not succeed: the daemon refused it, or its arguments do not fit.
enum Failure {
    Refused(Status),
    Bad(BadParams),
}

impl From<Status> for Failure {
    fn from(status: Status) -> Failure {
        Failure::Refused(status)
    }
}

impl From<BadParams> for Failure {
    fn from(bad: BadParams) -> Failure {
        Failure::Bad(bad)
    }
}

type Outcome = Result<CallToolResult, Failure>;

impl Terminals {
    /// The daemon's client, connecting (again) when there is none.
    async fn daemon(&self) -> Result<Daemon, Status> {
        self.shared.link.client().await
    }

    /// A handler for one MCP session; with `close_on_drop`, the terminals it opened end when it
    /// is dropped.
    pub(crate) fn new(shared: Arc<Shared>, close_on_drop: bool) -> Terminals {
        let sessions = Arc::new(Sessions::default());
        let mut every = shared.every.lock().unwrap_or_else(|e| e.into_inner());
        every.retain(|s| s.strong_count() > 0);
        every.push(Arc::downgrade(&sessions));
        drop(every);
        Terminals {
            held: Arc::new(Held {
                sessions,
                close_on_drop: close_on_drop.then(|| shared.clone()),
            }),
            shared,
        }
    }

    fn sessions(&self) -> &Arc<Sessions> {
        &self.held.sessions
    }

    /// Closes every terminal this handler opened and did not close.
    pub(crate) async fn close_all(&self) {
        let sessions = self.sessions().take_opened();
        close_sessions(self.shared.clone(), sessions).await;
    }

    fn agent(&self, context: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
        if !self.shared.per_request_agent {
            return Ok(self.shared.agent_id.clone());
        }
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<AgentId>())
            .map(|agent| agent.0.clone())
            .ok_or_else(|| ErrorData::invalid_request("the request carries no agent id", None))
    }

    async fn call(
        &self,
        name: &str,
        arguments: JsonObject,
        agent_id: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // The job tools are not listed when background sends are off: no such tool then.
        let Some(tool) = self.shared.tools.iter().find(|t| t.name == name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}"),
                None,
            ));
        };
        let schema = tool.input_schema.clone();
        let outcome: Outcome = async {
            if name == tools::SEND
                && !self.shared.background
                && arguments.contains_key("run_in_background")
            {
                return Err(Failure::Bad(BadParams {
                    field: Some("run_in_background".into()),
                    message: "background sends are switched off on this server; send in the \
                              foreground"
                        .into(),
                }));
            }
            match name {
                tools::OPEN => {
                    self.open(params::parse(name, &schema, arguments)?, agent_id)
                        .await
                }
                tools::SEND => {
                    self.send(params::parse(name, &schema, arguments)?, agent_id, context)
                        .await
                }
                tools::READ => {
                    self.read(params::parse(name, &schema, arguments)?, agent_id)
                        .await
                }
                tools::SIGNAL => {
                    self.signal(params::parse(name, &schema, arguments)?, agent_id)
                        .await
                }
                tools::CLOSE => {
                    self.close(params::parse(name, &schema, arguments)?, agent_id)
                        .await
                }
                tools::LIST => {
                    params::parse::<params::ListArgs>(name, &schema, arguments)?;
                    self.list(agent_id).await
                }
                tools::JOB_OUTPUT => {
                    self.job_output(params::parse(name, &schema, arguments)?, agent_id, context)
                        .await
                }
                tools::JOB_KILL => {
                    self.job_kill(params::parse(name, &schema, arguments)?, agent_id)
                        .await
                }
                _ => Err(Failure::Bad(BadParams {
                    field: None,
                    message: format!("tool {name:?} is listed but not served"),
                })),
            }
        }
        .await;
        Ok(outcome.unwrap_or_else(|failure| match failure {
            Failure::Refused(status) => {
                self.shared.link.failed(&status);
                refused(&status)
            }
            Failure::Bad(bad) => error_result(format!("error: {bad}")),
        }))
    }

    async fn open(&self, args: params::OpenArgs, agent_id: String) -> Outcome {
        let request = pb::OpenRequest {
            agent_id: agent_id.clone(),
            r#type: args.type_name.unwrap_or_default(),
            name: args.name.unwrap_or_default(),
            cwd: args.cwd.unwrap_or_default(),
            env: args.env.unwrap_or_default().into_iter().collect(),
            cols: args.cols.unwrap_or(0),
            rows: args.rows.unwrap_or(0),
            max_result_bytes: self.shared.max_result_bytes,
            sandbox: args.sandbox.map(params::SandboxArgs::into_pb),
        };
        let response = self.daemon().await?.open(request).await?.into_inner();
        let result = results::OpenResult::from(&response);
        self.sessions().opened(&agent_id, &result.session_id);
        Ok(self.success(response.rendered, &result))
    }

    /// The session a send without `session_id` runs in (mcp.md, "The default session"): a
    /// foreground send goes to the idle shell this MCP session used last, a background send
    /// always to a new one (so the default stays free); with the line saying so when one was
    /// opened.
    async fn default_session(
        &self,
        agent_id: &str,
        background: bool,
    ) -> Result<(InFlight, Option<String>), Status> {
        let mut client = self.daemon().await?;
        if !background {
            let request = pb::ListRequest {
                agent_id: agent_id.to_owned(),
            };
            let listed = client.list(request).await?.into_inner().sessions;
            if let Some(picked) = self
                .sessions()
                .pick(agent_id, &listed, &self.shared.shell_types)
            {
                return Ok((picked, None));
            }
        }
        let request = pb::OpenRequest {
            agent_id: agent_id.to_owned(),
            max_result_bytes: self.shared.max_result_bytes,
            ..Default::default()
        };
        let session = client
            .open(request)
            .await?
            .into_inner()
            .session
            .unwrap_or_default();
        self.sessions().opened(agent_id, &session.session_id);
        let purpose = if background {
            "for this background job"
        } else {
            "as your default terminal"
        };
        let note = format!(
            "started terminal session {} [type: {}] {purpose}",
            session.session_id, session.r#type
        );
        Ok((
            self.sessions().sending(agent_id, &session.session_id),
            Some(note),
        ))
    }

    async fn send(
        &self,
        args: params::SendArgs,
        agent_id: String,
        context: &RequestContext<RoleServer>,
    ) -> Outcome {
        let background = args.run_in_background.unwrap_or(false);
        let (flight, opened) = match &args.session_id {
            Some(id) => (self.sessions().sending(&agent_id, id), None),
            None => self.default_session(&agent_id, background).await?,
        };
        let session_id = flight.session_id().to_owned();
        let cap = self.shared.max_result_bytes as usize;
        let naming = args.session_id.is_none().then(|| SessionNaming {
            session_id: session_id.clone(),
            opened,
        });
        // A password prompt may be handed to the client's user (elicit.rs): room for its line.
        let may_elicit = !background && elicit::supported(context);
        let room = naming.as_ref().map_or(0, SessionNaming::room)
            + if may_elicit { elicit::ROOM } else { 0 };
        let request = pb::SendRequest {
            agent_id: agent_id.clone(),
            session_id: session_id.clone(),
            text: args.text.clone().unwrap_or_default(),
            submit: Some(args.submit()),
            keys: args.keys.unwrap_or_default(),
            run_in_background: background,
            typeahead: args.typeahead.unwrap_or(false),
            timeout_ms: args.timeout_ms.unwrap_or(0),
            idle_ms: args.idle_ms.unwrap_or(0),
            max_result_bytes: (cap.saturating_sub(room) as u32)
                .max(crate::validate::MIN_RESULT_BYTES),
            background_wait_ms: None,
        };
        let mut client = self.daemon().await?;
        let response = match reporter(context) {
            Some(mut reporter) if !background => {
                let stream = client.send_stream(request).await?.into_inner();
                progress::follow_send(stream, &mut reporter).await?
            }
            _ => client.send(request).await?.into_inner(),
        };
        drop(flight);
        let mut rendered = match naming {
            Some(naming) => naming.apply(&response.rendered, cap),
            None => response.rendered.clone(),
        };
        let input_hidden = matches!(&response.result,
            Some(pb::send_response::Result::Foreground(f)) if f.input_hidden);
        if may_elicit
            && input_hidden
            && let Some(url) = crate::connection::page_link(&client, &agent_id, &session_id).await
        {
            rendered.push('\n');
            rendered.push_str(elicit::ask(context, &session_id, url).await);
        }
        Ok(self.success(rendered, &results::SendResult::new(&session_id, &response)))
    }

    async fn read(&self, args: params::ReadArgs, agent_id: String) -> Outcome {
        let mut daemon = self.daemon().await?;
        let command = args.command.unwrap_or_default();
        let max_result_bytes = self.shared.max_result_bytes;
        if let Some(pattern) = args.pattern {
            let request = pb::SearchRequest {
                agent_id,
                session_id: args.session_id,
                pattern,
                ignore_case: args.ignore_case.unwrap_or(false),
                command_id: command,
                from_line: args.from_line,
                max_matches: args.count.unwrap_or(0),
                context: args.context.unwrap_or(0),
                max_result_bytes,
            };
            let response = daemon.search(request).await?.into_inner();
            let result = results::ReadResult::from(&response);
            return Ok(self.success(response.rendered, &result));
        }
        if command == params::LIST_COMMANDS {
            let request = pb::CommandsRequest {
                agent_id,
                session_id: args.session_id,
                offset: args.offset.unwrap_or(0),
                count: args.count.unwrap_or(0),
                max_result_bytes,
            };
            let response = daemon.commands(request).await?.into_inner();
            let result = results::ReadResult::from(&response);
            return Ok(self.success(response.rendered, &result));
        }
        let request = pb::ReadRequest {
            agent_id,
            session_id: args.session_id,
            offset: args.offset.unwrap_or(0),
            count: args.count.unwrap_or(0),
            from_line: args.from_line,
            screen: args.screen.unwrap_or(false),
            max_result_bytes,
            command_id: command,
        };
        let response = daemon.read(request).await?.into_inner();
        Ok(self.success(
            response.rendered.clone(),
            &results::ReadResult::from(&response),
        ))
    }

    async fn signal(&self, args: params::SignalArgs, agent_id: String) -> Outcome {
        let request = pb::SignalRequest {
            agent_id,
            session_id: args.session_id,
            signal: args.signal,
        };
        let response = self.daemon().await?.signal(request).await?.into_inner();
        let result = results::SignalResult {
            delivered: response.delivered,
            target_pgid: response.target_pgid,
        };
        Ok(self.success(self.cap_line(response.rendered), &result))
    }

    async fn close(&self, args: params::CloseArgs, agent_id: String) -> Outcome {
        let request = pb::CloseRequest {
            agent_id: agent_id.clone(),
            session_id: args.session_id.clone(),
        };
        let response = self.daemon().await?.close(request).await?.into_inner();
        self.sessions().closed(&agent_id, &args.session_id);
        let result = results::CloseResult::from(&response);
        Ok(self.success(self.cap_line(response.rendered), &result))
    }

    async fn list(&self, agent_id: String) -> Outcome {
        let request = pb::ListRequest { agent_id };
        let response = self.daemon().await?.list(request).await?.into_inner();
        let lines: Vec<String> = if response.sessions.is_empty() {
            Vec::new()
        } else {
            response.rendered.lines().map(str::to_owned).collect()
        };
        let text = render::list(
            &lines,
            "(no terminal sessions)",
            self.shared.max_result_bytes as usize,
        );
        Ok(self.success(text, &results::ListResult::from(&response)))
    }

    async fn job_output(
        &self,
        args: params::JobOutputArgs,
        agent_id: String,
        context: &RequestContext<RoleServer>,
    ) -> Outcome {
        let wait_ms = args.wait_ms.unwrap_or(0);
        let request = pb::JobOutputRequest {
            agent_id,
            job_id: args.job_id,
            wait_ms,
            max_result_bytes: self.shared.max_result_bytes,
        };
        let mut client = self.daemon().await?;
        let call = client.job_output(request);
        let response = match reporter(context) {
            Some(mut reporter) if wait_ms > 0 => progress::while_waiting(call, &mut reporter).await,
            _ => call.await,
        }?
        .into_inner();
        Ok(self.success(
            response.rendered.clone(),
            &results::JobOutputResult::from(&response),
        ))
    }

    async fn job_kill(&self, args: params::JobKillArgs, agent_id: String) -> Outcome {
        let request = pb::JobKillRequest {
            agent_id,
            job_id: args.job_id,
        };
        let response = self.daemon().await?.job_kill(request).await?.into_inner();
        let result = results::JobKillResult::from(&response);
        Ok(self.success(self.cap_line(response.rendered), &result))
    }

    fn cap_line(&self, text: String) -> String {
        render::line(text, self.shared.max_result_bytes as usize)
    }

    /// A successful result: `text` as the one text block; in `--structured` mode `value` and
    /// `text` (as `rendered`) as `structuredContent`.
    fn success<T: Serialize>(&self, text: String, value: &T) -> CallToolResult {
        let structured = self.shared.structured.then(|| {
            serde_json::to_value(results::Structured {
                result: value,
                rendered: text.clone(),
            })
            .ok()
        });
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = structured.flatten();
        result
    }
}

/// How a send without `session_id` names the session it ran in: its status line says
/// `[session t2: running]`, and a first line says when it was opened for this send.
struct SessionNaming {
    session_id: String,
    /// "started terminal session t2 [type: shell] as your default terminal".
    opened: Option<String>,
}

impl SessionNaming {
    /// The bytes naming adds, which the daemon's cap leaves room for.
    fn room(&self) -> usize {
        self.session_id.len() + 1 + self.opened.as_ref().map_or(0, |line| line.len() + 1)
    }

    /// `rendered` (at most `cap` bytes) with the session named; the opened line is left out
    /// when it would not fit.
    fn apply(&self, rendered: &str, cap: usize) -> String {
        let named = name_status_line(rendered, &self.session_id);
        match &self.opened {
            Some(line) if line.len() + 1 + named.len() <= cap => format!("{line}\n{named}"),
            _ => named,
        }
    }
}

/// `[session: running]` (the last such line) as `[session t2: running]`.
fn name_status_line(rendered: &str, session_id: &str) -> String {
    const STATUS: &str = "[session: ";
    match rendered.rfind(STATUS) {
        Some(at) if at == 0 || rendered.as_bytes()[at - 1] == b'\n' => format!(
            "{}[session {session_id}: {}",
            &rendered[..at],
            &rendered[at + STATUS.len()..]
        ),
        _ => rendered.to_owned(),
    }
}

fn reporter(context: &RequestContext<RoleServer>) -> Option<Reporter> {
    let token = context.meta.get_progress_token()?;
    Some(Reporter::new(context.peer.clone(), token))
}

fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// What a model reads when the daemon refuses a call: `error: <the daemon's message>`, with what
/// to do in the tools' names.
fn refused(status: &Status) -> CallToolResult {
    let text = match status.code() {
        tonic::Code::Unavailable => format!(
            "error: the ptyd daemon is unavailable ({}); the next call connects again",
            status.message()
        ),
        _ => format!(
            "error: {}",
            advice::in_words(status.message(), &advice::MCP)
        ),
    };
    error_result(text)
}

impl ServerHandler for Terminals {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ptyd", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.shared.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let agent_id = self.agent(&context)?;
        let arguments = request.arguments.unwrap_or_default();
        let cancelled = context.ct.clone();
        // A cancelled call drops its RPC here: the daemon sees the caller hang up, stops the
        // wait and releases the session (what was typed stays typed).
        tokio::select! {
            result = self.call(&request.name, arguments, agent_id, &context) => result.map(Into::into),
            _ = cancelled.cancelled() => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                "the call was cancelled",
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_send_names_its_session() {
        let opened = |line: Option<&str>| SessionNaming {
            session_id: "t2".into(),
            opened: line.map(str::to_owned),
        };
        // (naming, the daemon's rendered, cap) -> what the model reads
        let cases = [
            (
                opened(None),
                "hi\n[wait: prompt]\n[exit code: 0]\n[session: running]",
                1000,
                "hi\n[wait: prompt]\n[exit code: 0]\n[session t2: running]",
            ),
            (
                opened(Some(
                    "started terminal session t2 [type: shell] as your default terminal",
                )),
                "(no new output)\n[wait: prompt]\n[session: exited code=0 signal=null]",
                1000,
                "started terminal session t2 [type: shell] as your default terminal\n\
                 (no new output)\n[wait: prompt]\n[session t2: exited code=0 signal=null]",
            ),
            (
                opened(Some(
                    "started terminal session t2 [type: shell] as your default terminal",
                )),
                "x\n[wait: prompt]\n[session: running]",
                60,
                "x\n[wait: prompt]\n[session t2: running]",
            ),
            (
                opened(None),
                "echo [session: fake]\n[wait: prompt]\n[session: running]",
                1000,
                "echo [session: fake]\n[wait: prompt]\n[session t2: running]",
            ),
            (
                opened(Some(
                    "started terminal session t3 [type: shell] for this background job",
                )),
                "started background job j1\n[job: j1 running]",
                1000,
                "started terminal session t3 [type: shell] for this background job\n\
                 started background job j1\n[job: j1 running]",
            ),
        ];
        for (naming, rendered, cap, want) in cases {
            let got = naming.apply(rendered, cap);
            assert_eq!(got, want);
            assert!(
                got.len() <= rendered.len() + naming.room(),
                "room covers it: {got}"
            );
        }
    }
}
