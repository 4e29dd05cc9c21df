//! The ACP shim (`ptyd acp`): an Agent Client Protocol agent on stdio that turns each prompt
//! into terminal operations on a ptyd session and renders them as the editor's terminal card.

use crate::cli::Global;

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
}

/// Runs the shim until the client closes stdin.
pub async fn run(_global: &Global, _options: AcpOptions) -> Result<(), String> {
    Err("the ACP shim is not part of this build yet".to_owned())
}
