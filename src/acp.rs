//! The ACP shim (`ptyd acp`): an Agent Client Protocol agent on stdio that turns each prompt
//! into terminal operations on a ptyd session and renders them as the editor's terminal card.
//!
//! - `agent`: the ACP handlers (initialize, session/new, session/prompt, session/cancel) on the
//!   official SDK.
//! - `terminal`: a terminal send and its card; `pump`: coalescing and capping its output.
//! - `slash`: slash commands; `wire`: the messages; `text`: pure text helpers.
//! - `state`: per-connection state. The daemon it talks to comes from `crate::connection`.
//! - `error`: the shim's error and the one status-to-ACP-error mapping.

mod agent;
mod error;
mod pump;
mod slash;
mod state;
mod terminal;
mod text;
mod wire;

pub use error::AcpError;
use std::path::Path;
use std::sync::Arc;

/// Longest a terminal send waits: the contract's maximum `timeout_ms` (10 minutes).
pub const DEFAULT_TIMEOUT_MS: u32 = 600_000;

/// Options of `ptyd acp`.
#[derive(Debug, clap::Args)]
pub struct AcpOptions {
    /// Agent id that owns the shim's sessions
    #[arg(long = "agent-id", default_value = "acp")]
    pub agent_id: String,
    /// Terminal type of the sessions it opens
    #[arg(long = "type", default_value = "shell")]
    pub type_name: String,
    /// Leave the sessions open when the editor disconnects
    #[arg(long)]
    pub keep_sessions: bool,
    /// How long a prompt waits for its command to end or ask for input, in milliseconds
    #[arg(long = "timeout-ms", default_value_t = DEFAULT_TIMEOUT_MS,
          value_parser = clap::value_parser!(u32).range(1..=600_000))]
    pub timeout_ms: u32,
    /// Output silence after which a prompt stops waiting (inferred_idle), in milliseconds
    #[arg(long = "idle-ms", default_value_t = DEFAULT_TIMEOUT_MS,
          value_parser = clap::value_parser!(u32).range(50..=600_000))]
    pub idle_ms: u32,
    /// Contain the terminals it opens, one KEY=VALUE each (repeatable): write=PATH, read=PATH,
    /// network=on|loopback|off, memory_max=512M, pids_max=N, cpu_max=50%; may only tighten the
    /// type's sandbox ($CWD, $HOME and $TMPDIR may be named in paths)
    #[arg(long = "sandbox", value_name = "KEY=VALUE", value_parser = crate::sandbox::check_flag)]
    pub sandbox: Vec<String>,
}

/// Runs the shim against the daemon on `socket` (or one inside this process when none answers
/// there) until the client closes stdin, then closes the sessions it opened (unless
/// `--keep-sessions`) and stops the in-process daemon if it started one.
pub async fn run(socket: &Path, options: AcpOptions) -> Result<(), AcpError> {
    // Each flag was checked alone; together they cannot fail, and the shim never opens a
    // terminal with less than it was told to.
    let sandbox = crate::pb::sandbox::from_flags(&options.sandbox)
        .map_err(|e| AcpError::InProcessDaemon(crate::Error::InvalidArgument(e)))?;
    let connection = crate::connection::Connection::establish(socket, "acp", "the editor")
        .await
        .map_err(AcpError::InProcessDaemon)?;
    let shim = Arc::new(state::Shim::new(
        connection.client.clone(),
        options.agent_id,
        options.type_name,
        options.timeout_ms,
        options.idle_ms,
        sandbox,
    ));
    let served = tokio::select! {
        served = agent::serve(shim.clone()) => served,
        signal = crate::connection::terminated() => {
            tracing::info!(signal, "stopping on a signal");
            Ok(())
        }
    };
    if options.keep_sessions && !connection.is_in_process() {
        tracing::info!("the editor disconnected; keeping its terminal sessions");
    } else {
        tracing::info!("the editor disconnected; closing its terminal sessions");
        shim.close_all().await;
    }
    connection.stop().await;
    Ok(served?)
}
