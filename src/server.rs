//! The daemon process: the socket (default path, 0700 directory, 0600 socket, stale-socket
//! replacement, a clear refusal when another daemon serves it, systemd socket activation), the
//! peer-uid check on every connection, and `serve`, which runs the `Terminals` service next to
//! `grpc.health.v1` and server reflection (v1 and v1alpha) until shutdown, then closes every
//! session.
//!
//! - `startup`: `ptyd serve` from its flags ([`run`]): config, signals, listeners.
//! - `upgrade`: upgrade in place on SIGHUP (re-exec, listeners handed over).
//! - `drain`: the calls in flight answered `UNAVAILABLE` before that exec.
//! - `refusal`: the answer to a connection from another user.
//! - `deadline`: the caller's `grpc-timeout`, answered `DEADLINE_EXCEEDED`.

mod cut_body;
mod deadline;
mod drain;
mod h2;
pub(crate) mod login_gate;
mod startup;
pub mod stop_post;
mod upgrade;

pub use startup::{ServeOptions, run};

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
use tokio::net::{TcpListener, UnixListener};
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

/// Binds the daemon's socket at `path`: creates the directory 0700, refuses a directory another
/// user could change (`private_dir`) and one where a live daemon answers, replaces a stale
/// socket file, and sets the socket to 0600.
pub(crate) fn bind(path: &Path) -> Result<UnixListener> {
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
    // Checked once it exists: a directory someone made first (recursive creation accepts
    // one) is judged as well.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::private_dir::check(dir, "socket directory")?;
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
pub(crate) fn activated_listener() -> Result<Option<UnixListener>> {
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
    serve_with(listener, None, None, config, shutdown, None).await
}

/// A TCP listener next to the socket, and the bearer token its clients must send.
pub(crate) struct TcpServing {
    /// The bound listener.
    pub(crate) listener: TcpListener,
    /// What clients send as `authorization: Bearer <token>`.
    pub(crate) token: String,
}

/// Reads the bearer token for `--listen-tcp` from `path`: its trimmed content, which must not
/// be empty, in a file only its owner can read.
pub(crate) fn read_token_file(path: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(Error::io(format!(
        "reading the token file {}",
        path.display()
    )))?;
    if meta.mode() & 0o077 != 0 {
        return Err(Error::invalid(format!(
            "token file {} is readable by others (mode {:o}); chmod 600 it",
            path.display(),
            meta.mode() & 0o777
        )));
    }
    let text = std::fs::read_to_string(path).map_err(Error::io(format!(
        "reading the token file {}",
        path.display()
    )))?;
    let token = text.trim();
    if token.is_empty() || token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(Error::invalid(format!(
            "token file {} must hold one token: non-empty, without spaces or control characters",
            path.display()
        )));
    }
    Ok(token.to_owned())
}

/// What a sandboxed session must not reach, covered inside it, besides the token and config
/// files start-up names: this daemon's socket, its state directory (every session's helper
/// socket is there) and its runtime directory (the user's service manager, bus and agents
/// listen there).
fn sandbox_hidden(listener: &UnixListener, state: Option<&Path>) -> Vec<PathBuf> {
    let socket = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(Path::to_path_buf));
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    [runtime, state.map(Path::to_path_buf), socket]
        .into_iter()
        .flatten()
        .filter(|p| p.is_absolute())
        .collect()
}

/// Like [`serve`], and also on `tcp` when given, where every call must carry the bearer token;
/// with `upgrade` (`ptyd serve`), SIGHUP upgrades the daemon in place. Sets up process
/// ownership first: resolves `config.process_tracking` (a forced `cgroup`
/// without a usable cgroup is an error), makes the daemon a child subreaper and reaps what it
/// adopts.
pub(crate) async fn serve_with(
    listener: UnixListener,
    tcp: Option<TcpServing>,
    web: Option<crate::web::WebServing>,
    mut config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
    upgrade: Option<upgrade::Upgrade>,
) -> Result<()> {
    crate::process::helper::executable().map_err(Error::FailedPrecondition)?;
    config.process_tracking = config
        .process_tracking
        .resolve()
        .map_err(Error::FailedPrecondition)?;
    let _parent_cgroup = crate::process::cgroup::ReleaseOnDrop;
    crate::process::reaper::become_subreaper().map_err(Error::io("becoming a child subreaper"))?;
    let _reaper =
        crate::process::reaper::Reaper::start().map_err(Error::io("listening for SIGCHLD"))?;
    tracing::info!(process_tracking = %config.process_tracking, "process tracking");
    let integration_dir = tempfile::Builder::new()
        .prefix("ptyd-integration-")
        .tempdir()
        .map_err(Error::io("creating the shell-integration directory"))?;
    let integration = IntegrationFiles::install(integration_dir.path())
        .map_err(Error::io("writing the shell-integration files"))?;
    // One daemon per state directory: a second one stops here, before it serves anything.
    let root = config
        .state_dir
        .clone()
        .or_else(crate::state::default_root)
        .filter(|_| config.outlive_daemon);
    let registry = match root {
        Some(root) => {
            let state = crate::state::StateDir::open(&root)?;
            tracing::info!(state_dir = %state.root().display(), "state directory");
            Registry::with_state(Arc::new(state))
        }
        None if !config.outlive_daemon => Registry::default(),
        None => {
            tracing::warn!(
                "no state directory (neither XDG_STATE_HOME nor HOME is set): sessions end \
                 with this daemon"
            );
            Registry::default()
        }
    };
    config.sandbox_hidden.extend(sandbox_hidden(
        &listener,
        registry.state().map(|s| s.root()),
    ));
    let config = Arc::new(config);
    let terminals = Terminals::new(Arc::new(registry), config.clone(), integration);
    let adopted = terminals.adopt_all().await;
    if adopted > 0 {
        tracing::info!(adopted, "adopted the sessions a previous daemon left");
    }

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<pb::terminals_server::TerminalsServer<Terminals>>()
        .await;

    let allow_root = config.allow_root;
    let own_uid = nix::unistd::getuid().as_raw();
    let refusals = Arc::new(tokio::sync::Semaphore::new(
        h2::refusal::MAX_CONCURRENT_REFUSALS,
    ));
    // A connection from another user is answered by `refusal` and goes no further. Each other
    // one goes through `AuthorityFix`, so clients that send the socket path as the HTTP/2
    // `:authority` (grpcio, grpc-java, grpc-swift, grpcurl) are accepted as they are.
    let incoming = UnixListenerStream::new(listener).filter_map(move |conn| match conn {
        Ok(stream) => match peer_check(&stream, own_uid, allow_root) {
            Ok(()) => Some(Ok(h2::authority::AuthorityFix::new(stream))),
            Err(message) => {
                if let Ok(permit) = refusals.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        h2::refusal::refuse(stream, message).await;
                        drop(permit);
                    });
                }
                None
            }
        },
        Err(e) => Some(Err(e)),
    });

    // One stop for both listeners: the caller's shutdown, or either server failing.
    let stop = tokio_util::sync::CancellationToken::new();
    let drain = drain::Drain::default();
    let routes = routes(health_service, terminals.clone())?;
    let unix = async {
        let result = tonic::transport::Server::builder()
            .layer(drain::DrainLayer(drain.clone()))
            .layer(deadline::DeadlineLayer)
            .add_routes(routes.clone())
            .serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned())
            .await;
        stop.cancel();
        result
    };
    let tcp = async {
        let Some(TcpServing { listener, token }) = tcp else {
            return Ok(());
        };
        let address = listener.local_addr().ok();
        tracing::info!(?address, "also serving on TCP (bearer token required)");
        let expected = token;
        let gate = login_gate::LoginGate::default();
        let authenticated = gate.clone();
        let result = tonic::transport::Server::builder()
            .layer(tonic::service::InterceptorLayer::new(
                move |request: tonic::Request<()>| {
                    let request = check_bearer(request, &expected)?;
                    authenticated.authenticated(request.remote_addr());
                    Ok(request)
                },
            ))
            .layer(drain::DrainLayer(drain.clone()))
            .layer(deadline::DeadlineLayer)
            .add_routes(routes.clone())
            .serve_with_incoming_shutdown(
                login_gate::incoming(gate, listener),
                stop.clone().cancelled_owned(),
            )
            .await;
        stop.cancel();
        result.map_err(Error::from)
    };
    let web = async {
        let Some(web) = web else {
            return Ok(());
        };
        let loopback = web
            .listener
            .local_addr()
            .is_ok_and(|a| a.ip().is_loopback());
        let access = Arc::new(crate::web::Access::new(web.token.clone(), loopback));
        if let Ok(address) = web.listener.local_addr() {
            terminals.serve_web(access.clone(), crate::web::page_url(address));
        }
        let result = crate::web::serve(web, terminals.clone(), access, stop.clone()).await;
        stop.cancel();
        result.map_err(Error::io("serving the web page"))
    };
    let upgrades = async {
        match upgrade {
            Some(upgrade) => upgrade.run(&drain).await,
            None => std::future::pending().await,
        }
    };
    let watch = async {
        tokio::select! {
            _ = shutdown => stop.cancel(),
            _ = stop.cancelled() => {}
            never = upgrades => match never {},
        }
        // Close the sessions while the servers drain their connections: open streams (Watch,
        // SendStream) and long sends end with their sessions, so draining cannot hang on them.
        tracing::info!("shutting down: closing every session");
        terminals.close_all().await;
    };
    tracing::info!("serving");
    let (unix_result, tcp_result, web_result, ()) = tokio::join!(unix, tcp, web, watch);
    // A session opened on a connection that was still draining is closed too.
    terminals.close_all().await;
    drop(integration_dir);
    unix_result.map_err(Error::from)?;
    tcp_result?;
    web_result
}

/// What both listeners serve: health, the `Terminals` service, and gRPC server reflection v1
/// and v1alpha, each listing both reflection services, so a client that lists with one finds the
/// other.
fn routes(
    health: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health,
    >,
    terminals: Terminals,
) -> Result<tonic::service::Routes> {
    let v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| Error::Internal(format!("building reflection: {e}")))?;
    let v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .map_err(|e| Error::Internal(format!("building reflection: {e}")))?;
    Ok(tonic::service::Routes::new(health)
        .add_service(v1)
        .add_service(v1alpha)
        .add_service(pb::terminals_server::TerminalsServer::new(terminals)))
}

/// The TCP listener's interceptor: the `authorization` metadata must be `Bearer <token>` with
/// the daemon's token (the scheme in any case, RFC 7235), the token compared in constant time.
fn check_bearer(
    request: tonic::Request<()>,
    expected: &str,
) -> std::result::Result<tonic::Request<()>, tonic::Status> {
    let value = request
        .metadata()
        .get("authorization")
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    let token = match value.split_at_checked(7) {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case(b"bearer ") => token,
        _ => b"",
    };
    if !token.is_empty() && constant_time_eq(token, expected.as_bytes()) {
        Ok(request)
    } else {
        Err(tonic::Status::unauthenticated(
            "this TCP listener needs `authorization: Bearer <token>` with the daemon's token",
        ))
    }
}

/// Whether two tokens are equal, in time that does not depend on where they differ (a
/// length that differs answers at once: only the content is secret).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Peer-credential check: only the daemon's own uid (and root when configured) may connect.
/// A refused peer gets the refusal's words.
fn peer_check(
    stream: &tokio::net::UnixStream,
    own_uid: u32,
    allow_root: bool,
) -> std::result::Result<(), String> {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == own_uid || (allow_root && cred.uid() == 0) => Ok(()),
        Ok(cred) => {
            tracing::warn!(uid = cred.uid(), "refused a connection from another user");
            Err(h2::refusal::message(
                own_uid,
                Some(cred.uid()),
                cred.uid() == 0,
            ))
        }
        Err(e) => {
            tracing::warn!(error = %e, "refused a connection without peer credentials");
            Err(h2::refusal::message(own_uid, None, false))
        }
    }
}
