//! The library's one error type. Each variant corresponds to a row of the contract's error table;
//! `service.rs` is the only place that turns it into a gRPC status. `advice`: what a refusal
//! tells the caller to do, in each front-end's words.

pub(crate) mod advice;

/// Everything that can go wrong while serving a request or running the daemon.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A malformed request field; the message names the field and what is allowed.
    #[error("{0}")]
    InvalidArgument(String),
    /// An unknown, closed or foreign session or job id (indistinguishable on purpose).
    #[error("{0}")]
    NotFound(String),
    /// The request is well formed but the session's state does not allow it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A session or job limit was reached.
    #[error("{0}")]
    ResourceExhausted(String),
    /// A broken invariant: a bug in ptyd.
    #[error("internal error: {0}")]
    Internal(String),
    /// An operating-system call failed while starting or running the daemon.
    #[error("{context}: {source}")]
    Io {
        /// What the daemon was doing.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A gRPC transport failure (client side or while serving).
    #[error("transport: {0}")]
    Transport(#[from] tonic::transport::Error),
}

impl Error {
    /// An `Io` error with context, for `map_err`.
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }

    /// The message every unknown or foreign session id gets, so existence does not leak.
    pub fn session_not_found(id: &str) -> Error {
        Error::NotFound(format!(
            "session_id {} does not name an open terminal session",
            crate::validate::quoted(id)
        ))
    }

    /// The message every unknown or foreign job id gets.
    pub fn job_not_found(id: &str) -> Error {
        Error::NotFound(format!(
            "job_id {} does not name a job",
            crate::validate::quoted(id)
        ))
    }

    /// A `command_id` that names no record of the session.
    pub fn command_not_found(id: &str) -> Error {
        Error::NotFound(format!(
            "command_id {} does not name a command of this session (Commands lists them)",
            crate::validate::quoted(id)
        ))
    }

    /// Shorthand for an invalid-argument error.
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
