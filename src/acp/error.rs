//! The shim's errors: what can stop `ptyd acp` ([`AcpError`]), and the one mapping from a
//! daemon's gRPC status to the ACP (JSON-RPC) error a request answers with.

use super::text::error_line;
use agent_client_protocol::ErrorCode;
use tonic::Code;

/// What ends `ptyd acp` with an error.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// No daemon answered on the socket and none could be started inside the shim.
    #[error("starting the in-process daemon: {0}")]
    InProcessDaemon(#[source] crate::Error),
    /// The ACP connection on stdio failed.
    #[error("ACP connection: {0}")]
    Connection(#[from] agent_client_protocol::Error),
}

/// The ACP error for a request the daemon refused: a field the client sent that the daemon
/// rejected (a `cwd` that is not a directory) is invalid params, an id it does not know is
/// resource-not-found, and anything else (limits, a type whose program is missing, a daemon
/// that went away) is an internal error of the agent. The message is the daemon's reason.
pub(crate) fn acp_error(status: &tonic::Status) -> agent_client_protocol::Error {
    let code = match status.code() {
        Code::InvalidArgument | Code::OutOfRange => ErrorCode::INVALID_PARAMS,
        Code::NotFound => ErrorCode::RESOURCE_NOT_FOUND,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    agent_client_protocol::Error::new(code, error_line(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_statuses_map_to_acp_codes() {
        let table = [
            (Code::InvalidArgument, ErrorCode::INVALID_PARAMS),
            (Code::NotFound, ErrorCode::RESOURCE_NOT_FOUND),
            (Code::FailedPrecondition, ErrorCode::INTERNAL_ERROR),
            (Code::ResourceExhausted, ErrorCode::INTERNAL_ERROR),
            (Code::Unavailable, ErrorCode::INTERNAL_ERROR),
            (Code::Internal, ErrorCode::INTERNAL_ERROR),
        ];
        for (code, expected) in table {
            let error = acp_error(&tonic::Status::new(code, "cwd \"/x\" is not a directory"));
            assert_eq!(error.code, expected, "{code:?}");
            assert_eq!(error.message, "error: cwd \"/x\" is not a directory");
        }
    }
}
