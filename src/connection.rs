//! Reaching a daemon for the front-ends (`ptyd acp`, `ptyd mcp`): the one answering on the
//! socket, or, when none answers, a daemon served inside the front-end's own process on a socket
//! in a private temp dir (its sessions live as long as the front-end).

use crate::error::Error;
use crate::pb::TypesRequest;
use crate::pb::terminals_client::TerminalsClient;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// The daemon client type (tonic clients are cheap clones).
pub type Daemon = TerminalsClient<Channel>;

/// A one-time link to the daemon's web page opened on session `session_id` of `agent_id`, when
/// the daemon serves the page (for a person: a front-end hands it to its user, never to a model).
pub(crate) async fn page_link(client: &Daemon, agent_id: &str, session_id: &str) -> Option<String> {
    let request = crate::pb::WebLinkRequest {
        agent_id: agent_id.to_owned(),
        session_id: session_id.to_owned(),
    };
    match client.clone().web_link(request).await {
        Ok(link) => Some(link.into_inner().url),
        Err(status) => {
            // FAILED_PRECONDITION when no page is served: the wait line names `ptyd attach`.
            tracing::debug!(session = session_id, error = %status.message(), "no web page link");
            None
        }
    }
}

/// How long a daemon on the socket gets to answer before the front-end runs its own.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the in-process daemon gets to close its sessions when the front-end exits.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The daemon a front-end talks to.
pub struct Connection {
    /// The client.
    pub client: Daemon,
    /// The socket the client is connected to (a private one for the in-process daemon).
    pub socket: PathBuf,
    /// Whether the daemon allows background sends: its config's `allow_background` when it runs
    /// in this process; assumed true for a daemon on the socket (no RPC reports it; a refused
    /// background send then says why).
    pub allow_background: bool,
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
    /// there (and says so once on stderr, naming the front-end `verb` and its `client`, such as
    /// "acp" and "the editor").
    pub async fn establish(socket: &Path, verb: &str, client: &str) -> crate::Result<Connection> {
        if let Some(client) = probe(socket).await {
            tracing::info!(socket = %socket.display(), "using the daemon on the socket");
            return Ok(Connection {
                client,
                socket: socket.to_owned(),
                allow_background: true,
                in_process: None,
            });
        }
        let connection = start_in_process(verb).await?;
        eprintln!(
            "ptyd {verb}: no daemon answers on {}; running one inside this process \
             (its terminal sessions end when {client} disconnects)",
            socket.display()
        );
        Ok(connection)
    }

    /// Whether the daemon runs inside this process.
    pub fn is_in_process(&self) -> bool {
        self.in_process.is_some()
    }

    /// Stops the in-process daemon (closing every session it still has) and waits for it.
    pub async fn stop(self) {
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
pub async fn probe(socket: &Path) -> Option<Daemon> {
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
async fn start_in_process(verb: &str) -> crate::Result<Connection> {
    let mut config = crate::config::Config::load(None)?;
    // A private daemon: its sessions end with this process, and it claims no state directory
    // (another front-end's private daemon, or `ptyd serve`, may use it).
    config.outlive_daemon = false;
    let allow_background = config.allow_background;
    let dir = tempfile::Builder::new()
        .prefix(&format!("ptyd-{verb}-"))
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
        socket,
        allow_background,
        in_process: Some(InProcess {
            shutdown,
            task,
            _dir: dir,
        }),
    })
}

/// Resolves when a front-end is asked to stop (SIGTERM, SIGINT or SIGHUP), so it still closes
/// its sessions when its client ends it instead of closing its stdin. Names the signal.
pub async fn terminated() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}
