//! The daemon process: the socket (default path, 0700 directory, 0600 socket, stale-socket
//! replacement, a clear refusal when another daemon serves it, systemd socket activation), the
//! peer-uid check on every connection, and `serve`, which runs the `Terminals` service next to
//! `grpc.health.v1` and server reflection until shutdown, then closes every session.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::marks::IntegrationFiles;
use crate::pb;
use crate::registry::Registry;
use crate::service::Terminals;
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::UnixListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;

/// The socket path: `--socket`/`PTYD_SOCKET` when given, else `$XDG_RUNTIME_DIR/ptyd/ptyd.sock`,
/// else `/tmp/ptyd-$UID/ptyd.sock`.
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os("PTYD_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("ptyd").join("ptyd.sock"),
        None => PathBuf::from(format!("/tmp/ptyd-{}", nix::unistd::getuid())).join("ptyd.sock"),
    }
}

/// Binds the daemon's socket at `path`: creates the directory 0700, refuses when a live daemon
/// answers there, replaces a stale socket file, and sets the socket to 0600.
pub fn bind(path: &Path) -> Result<UnixListener> {
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(Error::io(format!(
                "creating socket directory {}",
                dir.display()
            )))?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(Error::FailedPrecondition(format!(
                "another ptyd is already serving {}; stop it first or pass --socket",
                path.display()
            )));
        }
        std::fs::remove_file(path).map_err(Error::io(format!(
            "removing stale socket {}",
            path.display()
        )))?;
    }
    let std_listener = std::os::unix::net::UnixListener::bind(path)
        .map_err(Error::io(format!("binding {}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(Error::io(
        format!("setting permissions of {}", path.display()),
    ))?;
    std_listener
        .set_nonblocking(true)
        .map_err(Error::io("making the socket non-blocking"))?;
    UnixListener::from_std(std_listener).map_err(Error::io("registering the socket"))
}

/// The socket passed by systemd socket activation (`LISTEN_FDS=1`, fd 3), if any.
pub fn activated_listener() -> Result<Option<UnixListener>> {
    use std::os::fd::FromRawFd;
    let pid_matches = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        .is_none_or(|p| p == std::process::id());
    if std::env::var("LISTEN_FDS").ok().as_deref() != Some("1") || !pid_matches {
        return Ok(None);
    }
    // SAFETY: systemd passes the listening socket as fd 3 and nobody else owns it.
    let std_listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(3) };
    std_listener
        .set_nonblocking(true)
        .map_err(Error::io("making the activated socket non-blocking"))?;
    UnixListener::from_std(std_listener)
        .map(Some)
        .map_err(Error::io("registering the activated socket"))
}

/// Serves ptyd on `listener` until `shutdown` resolves, then closes every session (process trees
/// included) and returns.
pub async fn serve(
    listener: UnixListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let integration_dir = tempfile::Builder::new()
        .prefix("ptyd-integration-")
        .tempdir()
        .map_err(Error::io("creating the shell-integration directory"))?;
    let integration = IntegrationFiles::install(integration_dir.path())
        .map_err(Error::io("writing the shell-integration files"))?;
    let config = Arc::new(config);
    let terminals = Terminals::new(Arc::new(Registry::default()), config.clone(), integration);

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<pb::terminals_server::TerminalsServer<Terminals>>()
        .await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| Error::Internal(format!("building reflection: {e}")))?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(|e| Error::Internal(format!("building reflection: {e}")))?;

    let allow_root = config.allow_root;
    let own_uid = nix::unistd::getuid().as_raw();
    let incoming = UnixListenerStream::new(listener).filter(move |conn| match conn {
        Ok(stream) => peer_allowed(stream, own_uid, allow_root),
        Err(_) => true,
    });

    tracing::info!("serving");
    let result = tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(pb::terminals_server::TerminalsServer::new(
            terminals.clone(),
        ))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    tracing::info!("shutting down: closing every session");
    terminals.close_all().await;
    drop(integration_dir);
    result.map_err(Error::from)
}

/// Peer-credential check: only the daemon's own uid (and root when configured) may connect.
fn peer_allowed(stream: &tokio::net::UnixStream, own_uid: u32, allow_root: bool) -> bool {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == own_uid || (allow_root && cred.uid() == 0) => true,
        Ok(cred) => {
            tracing::warn!(uid = cred.uid(), "refused a connection from another user");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "refused a connection without peer credentials");
            false
        }
    }
}
