//! The MCP handler: `initialize` (name, version, instructions), `tools/list`, and `tools/call`,
//! where each tool is one RPC of the contract. The daemon's `rendered` text is the text content
//! and the typed result the `structuredContent`; a refusal by the daemon is an `isError` result
//! with its message; arguments that do not fit the schema are invalid params naming the field. A
//! call the client cancels drops its RPC, which releases the session's reservation as a gRPC
//! caller hanging up does.

use super::daemon::Link;
use super::params::{self, BadParams};
use super::progress::{self, Reporter};
use super::results;
use super::tools::{self, INSTRUCTIONS};
use crate::connection::Daemon;
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
use std::sync::{Arc, Mutex};
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
    /// The tools as listed.
    pub(crate) tools: Vec<Tool>,
}

/// The handler of one MCP session.
#[derive(Clone)]
pub(crate) struct Terminals {
    shared: Arc<Shared>,
    opened: Arc<Opened>,
}

/// The terminal sessions one MCP session opened and has not closed: (agent id, session id).
pub(crate) struct Opened {
    sessions: Mutex<Vec<(String, String)>>,
    /// Close them when the MCP session's handler goes away (HTTP sessions).
    close_on_drop: Option<Arc<Shared>>,
}

impl Opened {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, String)>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        let Some(shared) = self.close_on_drop.take() else {
            return;
        };
        let sessions = std::mem::take(&mut *self.lock());
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

impl Terminals {
    /// The daemon's client, connecting (again) when there is none.
    async fn daemon(&self) -> Result<Daemon, Status> {
        self.shared.link.client().await
    }

    /// A handler for one MCP session; with `close_on_drop`, the terminals it opened end when it
    /// is dropped.
    pub(crate) fn new(shared: Arc<Shared>, close_on_drop: bool) -> Terminals {
        Terminals {
            opened: Arc::new(Opened {
                sessions: Mutex::new(Vec::new()),
                close_on_drop: close_on_drop.then(|| shared.clone()),
            }),
            shared,
        }
    }

    /// Closes every terminal this handler opened and did not close.
    pub(crate) async fn close_all(&self) {
        let sessions = std::mem::take(&mut *self.opened.lock());
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
        let background_tool = name == tools::JOB_OUTPUT || name == tools::JOB_KILL;
        if background_tool && !self.shared.background {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {name:?}: background jobs are switched off"),
                None,
            ));
        }
        let outcome = match name {
            tools::OPEN => self.open(parse(arguments)?, agent_id).await,
            tools::SEND => {
                if !self.shared.background && arguments.contains_key("run_in_background") {
                    return Err(ErrorData::invalid_params(
                        "run_in_background: background sends are switched off on this server",
                        None,
                    ));
                }
                self.send(parse(arguments)?, agent_id, context).await
            }
            tools::READ => self.read(parse(arguments)?, agent_id).await,
            tools::SIGNAL => self.signal(parse(arguments)?, agent_id).await,
            tools::CLOSE => self.close(parse(arguments)?, agent_id).await,
            tools::LIST => {
                parse::<params::ListArgs>(arguments)?;
                self.list(agent_id).await
            }
            tools::JOB_OUTPUT => self.job_output(parse(arguments)?, agent_id, context).await,
            tools::JOB_KILL => self.job_kill(parse(arguments)?, agent_id).await,
            _ => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {name:?}"),
                    None,
                ));
            }
        };
        Ok(outcome.unwrap_or_else(|status| {
            self.shared.link.failed(&status);
            refused(&status)
        }))
    }

    async fn open(
        &self,
        args: params::OpenArgs,
        agent_id: String,
    ) -> Result<CallToolResult, Status> {
        let request = pb::OpenRequest {
            agent_id: agent_id.clone(),
            r#type: args.type_name.unwrap_or_default(),
            name: args.name.unwrap_or_default(),
            cwd: args.cwd.unwrap_or_default(),
            env: args.env.unwrap_or_default().into_iter().collect(),
            cols: args.cols.unwrap_or(0),
            rows: args.rows.unwrap_or(0),
            max_result_bytes: self.shared.max_result_bytes,
        };
        let response = self.daemon().await?.open(request).await?.into_inner();
        let result = results::OpenResult::from(&response);
        self.opened
            .lock()
            .push((agent_id, result.session_id.clone()));
        Ok(success(response.rendered, &result))
    }

    async fn send(
        &self,
        args: params::SendArgs,
        agent_id: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, Status> {
        let submit = args.submit();
        let request = pb::SendRequest {
            agent_id,
            session_id: args.session_id,
            text: args.text.unwrap_or_default(),
            submit: Some(submit),
            keys: args.keys.unwrap_or_default(),
            run_in_background: args.run_in_background.unwrap_or(false),
            typeahead: args.typeahead.unwrap_or(false),
            timeout_ms: args.timeout_ms.unwrap_or(0),
            idle_ms: args.idle_ms.unwrap_or(0),
            max_result_bytes: self.shared.max_result_bytes,
        };
        let mut client = self.daemon().await?;
        let response = match reporter(context) {
            Some(mut reporter) if !request.run_in_background => {
                let stream = client.send_stream(request).await?.into_inner();
                progress::follow_send(stream, &mut reporter).await?
            }
            _ => client.send(request).await?.into_inner(),
        };
        Ok(success(
            response.rendered.clone(),
            &results::SendResult::from(&response),
        ))
    }

    async fn read(
        &self,
        args: params::ReadArgs,
        agent_id: String,
    ) -> Result<CallToolResult, Status> {
        let request = pb::ReadRequest {
            agent_id,
            session_id: args.session_id,
            offset: args.offset.unwrap_or(0),
            count: args.count.unwrap_or(0),
            from_line: args.from_line,
            screen: args.screen.unwrap_or(false),
            max_result_bytes: self.shared.max_result_bytes,
        };
        let response = self.daemon().await?.read(request).await?.into_inner();
        Ok(success(
            response.rendered.clone(),
            &results::ReadResult::from(&response),
        ))
    }

    async fn signal(
        &self,
        args: params::SignalArgs,
        agent_id: String,
    ) -> Result<CallToolResult, Status> {
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
        Ok(success(self.cap_line(response.rendered), &result))
    }

    async fn close(
        &self,
        args: params::CloseArgs,
        agent_id: String,
    ) -> Result<CallToolResult, Status> {
        let request = pb::CloseRequest {
            agent_id: agent_id.clone(),
            session_id: args.session_id.clone(),
        };
        let response = self.daemon().await?.close(request).await?.into_inner();
        self.opened
            .lock()
            .retain(|(agent, id)| !(agent == &agent_id && id == &args.session_id));
        let result = results::CloseResult::from(&response);
        Ok(success(self.cap_line(response.rendered), &result))
    }

    async fn list(&self, agent_id: String) -> Result<CallToolResult, Status> {
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
        Ok(success(text, &results::ListResult::from(&response)))
    }

    async fn job_output(
        &self,
        args: params::JobOutputArgs,
        agent_id: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, Status> {
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
        Ok(success(
            response.rendered.clone(),
            &results::JobOutputResult::from(&response),
        ))
    }

    async fn job_kill(
        &self,
        args: params::JobKillArgs,
        agent_id: String,
    ) -> Result<CallToolResult, Status> {
        let request = pb::JobKillRequest {
            agent_id,
            job_id: args.job_id,
        };
        let response = self.daemon().await?.job_kill(request).await?.into_inner();
        let result = results::JobKillResult::from(&response);
        Ok(success(self.cap_line(response.rendered), &result))
    }

    fn cap_line(&self, text: String) -> String {
        render::line(text, self.shared.max_result_bytes as usize)
    }
}

fn parse<T: serde::de::DeserializeOwned + params::Checked>(
    arguments: JsonObject,
) -> Result<T, ErrorData> {
    params::parse(arguments).map_err(|BadParams(message)| ErrorData::invalid_params(message, None))
}

fn reporter(context: &RequestContext<RoleServer>) -> Option<Reporter> {
    let token = context.meta.get_progress_token()?;
    Some(Reporter::new(context.peer.clone(), token))
}

/// A successful result: `text` as the one text block and `value` as `structuredContent`.
fn success<T: Serialize>(text: String, value: &T) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = serde_json::to_value(value).ok();
    result
}

/// What a model reads when the daemon refuses a call: `error: <the daemon's message>`.
fn refused(status: &Status) -> CallToolResult {
    let text = match status.code() {
        tonic::Code::Unavailable => format!(
            "error: the ptyd daemon is unavailable ({}); the next call connects again",
            status.message()
        ),
        _ => format!("error: {}", status.message()),
    };
    CallToolResult::error(vec![ContentBlock::text(text)])
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
