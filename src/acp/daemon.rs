//! Reaching a daemon for the shim: the one answering on the socket, or, when none answers, a
//! daemon served inside the shim's own process on a socket in a private temp dir (its sessions
//! live as long as the shim).

use super::error::AcpError;
use super::state::Daemon;
use crate::error::Error;
use crate::pb::TypesRequest;
use std::path::Path;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long a daemon on the socket gets to answer before the shim runs its own.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the in-process daemon gets to close its sessions when the shim exits.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The daemon the shim talks to.
pub(crate) struct Connection {
    /// The client.
    pub(crate) client: Daemon,
    in_process: Option<InProcess>,
}

/// A daemon served by this process.
struct InProcess {
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<crate::Result<()>>,
    _dir: tempfile::TempDir,
}

impl Connection {
    /// Connects to the daemon on `socket`, or starts one in this process when none answers
    /// there (and says so once on stderr).
    pub(crate) async fn establish(socket: &Path) -> Result<Connection, AcpError> {
        if let Some(client) = probe(socket).await {
            tracing::info!(socket = %socket.display(), "using the daemon on the socket");
            return Ok(Connection {
                client,
                in_process: None,
            });
        }
        let connection = start_in_process()
            .await
            .map_err(AcpError::InProcessDaemon)?;
        eprintln!(
            "ptyd acp: no daemon answers on {}; running one inside this process \
             (its terminal sessions end when the editor disconnects)",
            socket.display()
        );
        Ok(connection)
    }

    /// Whether the daemon runs inside this process.
    pub(crate) fn is_in_process(&self) -> bool {
        self.in_process.is_some()
    }

    /// Stops the in-process daemon (closing every session it still has) and waits for it.
    pub(crate) async fn stop(self) {
        let Some(daemon) = self.in_process else {
            return;
        };
        drop(self.client);
        let _ = daemon.shutdown.send(());
        match tokio::time::timeout(STOP_TIMEOUT, daemon.task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "the in-process daemon stopped with an error")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "the in-process daemon task failed"),
            Err(_) => tracing::warn!("the in-process daemon did not stop in {STOP_TIMEOUT:?}"),
        }
    }
}

/// A client for the daemon on `socket` if one answers a cheap request in time.
async fn probe(socket: &Path) -> Option<Daemon> {
    let attempt = async {
        let mut client = crate::client::connect(socket).await.ok()?;
        client.types(TypesRequest {}).await.ok()?;
        Some(client)
    };
    tokio::time::timeout(PROBE_TIMEOUT, attempt)
        .await
        .ok()
        .flatten()
}

/// Serves a daemon in this process on `<private temp dir>/ptyd.sock` and connects to it.
async fn start_in_process() -> crate::Result<Connection> {
    let config = crate::config::Config::load(None)?;
    let dir = tempfile::Builder::new()
        .prefix("ptyd-acp-")
        .tempdir()
        .map_err(Error::io("creating a directory for the in-process daemon"))?;
    let socket = dir.path().join("ptyd.sock");
    let listener = tokio::net::UnixListener::bind(&socket)
        .map_err(Error::io(format!("binding {}", socket.display())))?;
    let (shutdown, stop) = oneshot::channel::<()>();
    let task = tokio::spawn(crate::server::serve(listener, config, async move {
        let _ = stop.await;
    }));
    let client = crate::client::connect(&socket).await?;
    Ok(Connection {
        client,
        in_process: Some(InProcess {
            shutdown,
            task,
            _dir: dir,
        }),
    })
}
