//! The MCP server (`ptyd mcp`): persistent terminals as model-facing tools, on the official Rust
//! SDK (`rmcp`), over stdio or streamable HTTP. A client of the daemon like `ptyd acp`: every
//! tool is one RPC (a send to the default terminal two), and the daemon's `rendered` text is
//! what the model reads.
//!
//! - `server`: the MCP handler (initialize, tools/list, tools/call, cancellation).
//! - `sessions`: the terminals one MCP session opened and used, and its default terminal.
//! - `tools`: instructions, descriptions, annotations and schemas; `params`: the typed
//!   arguments and their checks; `results`: the typed results.
//! - `stdio`: the stdio transport (pipes or the socket pairs Node clients give).
//! - `progress`: progress notifications while a call waits.
//! - `daemon`: the link to the daemon, reconnecting after it went away.
//! - `http`: streamable HTTP behind the bearer-token and `Origin` guard.

mod daemon;
mod elicit;
mod http;
mod http_sessions;
mod params;
mod progress;
mod results;
mod server;
mod sessions;
mod stdio;
mod tools;

use rmcp::ServiceExt;
use server::{Shared, Terminals};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Default `--max-result-bytes`: what most MCP clients take from one tool result without
/// warning.
pub const DEFAULT_MAX_RESULT_BYTES: u32 = 65_536;

/// Options of `ptyd mcp`.
#[derive(Debug, clap::Args)]
pub struct McpOptions {
    /// Agent id that owns the sessions (stdio; over HTTP the token file names one per token)
    #[arg(long = "agent-id", default_value = "mcp")]
    pub agent_id: String,
    /// Cap on the text of every tool result, in bytes (64..=16777216)
    #[arg(long = "max-result-bytes", default_value_t = DEFAULT_MAX_RESULT_BYTES,
          value_parser = clap::value_parser!(u32).range(64..=16_777_216))]
    pub max_result_bytes: u32,
    /// Leave the sessions open when the client goes away (with a running daemon)
    #[arg(long)]
    pub keep_sessions: bool,
    /// Offer no background sends: no run_in_background, no job_output or job_kill
    #[arg(long)]
    pub no_background: bool,
    /// Give results `structuredContent` and tools an `outputSchema` (for hosts that read
    /// results in code; most clients then show the model only the JSON, so the default is text)
    #[arg(long)]
    pub structured: bool,
    /// Serve streamable HTTP on this address (at /mcp) instead of stdio, such as
    /// 127.0.0.1:8765 (needs --token-file)
    #[arg(long, value_name = "ADDR", requires = "token_file")]
    pub listen: Option<std::net::SocketAddr>,
    /// File (mode 0600) of `TOKEN AGENT_ID` lines: the bearer tokens HTTP clients send and the
    /// agent id each acts as (only with --listen)
    #[arg(long, value_name = "PATH", requires = "listen")]
    pub token_file: Option<PathBuf>,
    /// A browser origin allowed besides loopback ones, such as <https://app.example.com>
    /// (repeatable; HTTP only)
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// An HTTP MCP session without a request for this many seconds ends (and its terminals
    /// with it, unless --keep-sessions)
    #[arg(
        long = "session-idle-timeout",
        value_name = "SECONDS",
        default_value_t = 1800
    )]
    pub session_idle_timeout: u64,
}

/// Runs the server against the daemon on `socket` (or one inside this process when none answers
/// there) until the client goes away (stdio: stdin closes; or a signal), then closes the
/// sessions it opened (unless `--keep-sessions` with a running daemon) and stops the in-process
/// daemon if it started one.
pub async fn run(socket: &Path, options: McpOptions) -> Result<(), String> {
    crate::validate::agent_id(&options.agent_id).map_err(|e| format!("--agent-id: {e}"))?;
    let tokens = match &options.token_file {
        Some(path) => Some(http::read_tokens(path)?),
        None => None,
    };
    let connection = crate::connection::Connection::establish(socket, "mcp", "the MCP client")
        .await
        .map_err(|e| format!("starting the in-process daemon: {e}"))?;
    let types = connection
        .client
        .clone()
        .types(crate::pb::TypesRequest {})
        .await
        .map(|r| r.into_inner().types)
        .unwrap_or_default();
    let names: Vec<String> = types.iter().map(|t| t.name.clone()).collect();
    let shell_types = types
        .iter()
        .filter(|t| t.integration != "none" && !t.integration.is_empty())
        .map(|t| t.name.clone())
        .collect();
    let background = !options.no_background && connection.allow_background;
    let shared = Arc::new(Shared {
        link: daemon::Link::new(connection.socket.clone(), connection.client.clone()),
        agent_id: options.agent_id.clone(),
        per_request_agent: options.listen.is_some(),
        max_result_bytes: options.max_result_bytes,
        background,
        structured: options.structured,
        shell_types,
        tools: tools::list(&names, background, options.structured),
        every: Default::default(),
    });
    let keep = options.keep_sessions && !connection.is_in_process();
    let served = match (options.listen, tokens) {
        (Some(address), Some(tokens)) => {
            let http_options = http::HttpOptions {
                address,
                guard: http::Guard::new(tokens, options.allow_origin.clone()),
                session_idle_timeout: Duration::from_secs(options.session_idle_timeout.max(1)),
                keep_sessions: keep,
            };
            http::serve(shared, http_options, async {
                let signal = crate::connection::terminated().await;
                tracing::info!(signal, "stopping on a signal");
            })
            .await
        }
        _ => serve_stdio(shared, keep).await,
    };
    connection.stop().await;
    served
}

async fn serve_stdio(shared: Arc<Shared>, keep: bool) -> Result<(), String> {
    let terminals = Terminals::new(shared, false);
    let served = async {
        let running = terminals
            .clone()
            .serve(stdio::transport())
            .await
            .map_err(|e| format!("MCP initialization: {e}"))?;
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| format!("MCP connection: {e}"))
    };
    let result = tokio::select! {
        result = served => result,
        signal = crate::connection::terminated() => {
            tracing::info!(signal, "stopping on a signal");
            Ok(())
        }
    };
    if keep {
        tracing::info!("the MCP client went away; keeping its terminal sessions");
    } else {
        tracing::info!("the MCP client went away; closing its terminal sessions");
        terminals.close_all().await;
    }
    result
}
