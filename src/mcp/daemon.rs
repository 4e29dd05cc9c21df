//! The MCP server's link to the daemon: a client on the socket the server started with, dropped
//! when a call finds the daemon gone (`UNAVAILABLE`) and connected again on the next call. It
//! never falls back to another daemon mid-session.

use crate::connection::Daemon;
use std::path::PathBuf;
use std::sync::Mutex;
use tonic::{Code, Status};

/// A client that reconnects after the daemon went away.
pub(crate) struct Link {
    socket: PathBuf,
    client: Mutex<Option<Daemon>>,
}

impl Link {
    /// A link that starts with `client`, connected to `socket`.
    pub(crate) fn new(socket: PathBuf, client: Daemon) -> Link {
        Link {
            socket,
            client: Mutex::new(Some(client)),
        }
    }

    /// The client, connecting again if the last call found the daemon gone.
    pub(crate) async fn client(&self) -> Result<Daemon, Status> {
        if let Some(client) = self.lock().clone() {
            return Ok(client);
        }
        let client = crate::client::connect(&self.socket).await.map_err(|e| {
            Status::unavailable(format!(
                "no ptyd daemon answers on {}: {e}",
                self.socket.display()
            ))
        })?;
        *self.lock() = Some(client.clone());
        tracing::info!(socket = %self.socket.display(), "reconnected to the daemon");
        Ok(client)
    }

    /// Notes a call's failure: after `UNAVAILABLE` the next call connects afresh.
    pub(crate) fn failed(&self, status: &Status) {
        if status.code() == Code::Unavailable {
            *self.lock() = None;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Daemon>> {
        self.client.lock().unwrap_or_else(|e| e.into_inner())
    }
}
