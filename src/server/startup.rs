//! `ptyd serve` from its flags to a serving daemon: the config file, the signal handlers, the
//! socket (handed over by the previous image after an upgrade in place, systemd's, or bound at
//! the path), the optional TCP listener with its token, then [`serve_with`](super::serve_with)
//! until SIGTERM or SIGINT, upgrading in place on SIGHUP. The binary only parses arguments and
//! calls [`run`].

use super::upgrade::{self, Upgrade};
use super::{TcpServing, activated_listener, bind, default_socket_path, read_token_file};
use crate::config::Config;
use crate::error::{Error, Result};
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use tokio::net::UnixListener;

/// What `ptyd serve` was asked to do.
#[derive(Debug, Default, Clone)]
pub struct ServeOptions {
    /// `--socket`/`PTYD_SOCKET`; else [`default_socket_path`].
    pub socket: Option<PathBuf>,
    /// `--config`; else the default path when a file exists there.
    pub config: Option<PathBuf>,
    /// `--check-config`: validate the config file and return without serving.
    pub check_config: bool,
    /// `--listen-tcp` (only with `token_file`).
    pub listen_tcp: Option<SocketAddr>,
    /// `--token-file` (only with `listen_tcp`).
    pub token_file: Option<PathBuf>,
    /// `--process-tracking`, over the config file's.
    pub process_tracking: Option<crate::process::ProcessTracking>,
    /// `--web`: serve the web page here (only with `web_token_file`).
    pub web: Option<SocketAddr>,
    /// `--web-token-file` (only with `web`).
    pub web_token_file: Option<PathBuf>,
}

/// Runs the daemon as `ptyd serve` does: until SIGTERM or SIGINT, then closes every session;
/// SIGHUP upgrades it in place (`server/upgrade.rs`). With `check_config` it only loads the
/// configuration and says whether it is valid.
pub async fn run(options: ServeOptions) -> Result<()> {
    let Some(config) = load_config(&options)? else {
        return Ok(());
    };
    // This thread answers every RPC and runs every session's actor (see `process/slice.rs`).
    if let Err(e) = crate::process::slice::prefer_short_slice() {
        tracing::debug!(error = %e, "no short scheduler slice for the daemon's thread");
    }
    // Handlers first: a SIGTERM that arrives once the socket is announced must shut down
    // cleanly, not kill the process with the default action. Then the signals a previous image
    // held across its exec (if this one comes from an upgrade) are let through.
    let shutdown = termination()?;
    let hangups = upgrade::hangups()?;
    upgrade::unblock_signals()?;
    let mut inherited = upgrade::inherited()?;
    let inherited_web = inherited.as_mut().and_then(|i| i.web.take());
    let (unix, tcp, bound) = listeners(&options, inherited).await?;
    let served = match web_listener(&options, inherited_web).await {
        Ok(web) => match Upgrade::prepare(
            hangups,
            &unix,
            tcp.as_ref().map(|t| &t.listener),
            web.as_ref().map(|w| &w.listener),
        ) {
            Ok(upgrades) => {
                super::serve_with(unix, tcp, web, config, shutdown, Some(upgrades)).await
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    // A daemon that could not start (its state directory locked or refused, ...) leaves no
    // socket file behind for clients to find dead.
    if served.is_err()
        && let Some(path) = bound
    {
        let _ = std::fs::remove_file(path);
    }
    served
}

/// The configuration `options` name, with `--process-tracking` applied; none when only a check
/// was asked for (the verdict is printed).
fn load_config(options: &ServeOptions) -> Result<Option<Config>> {
    let mut config = Config::load(options.config.as_deref())?;
    if let Some(tracking) = options.process_tracking {
        config.process_tracking = tracking;
    }
    let file = Config::file_to_load(options.config.as_deref());
    if options.check_config {
        match file {
            Some(file) => eprintln!("ptyd: configuration {} is valid", file.display()),
            None => eprintln!("ptyd: no configuration file; the built-in defaults apply"),
        }
        return Ok(None);
    }
    match &file {
        Some(file) => tracing::info!(file = %file.display(), "configuration loaded"),
        None => tracing::info!("no configuration file; using the built-in defaults"),
    }
    // A sandboxed session sees neither the tokens that open the TCP listener and the web page
    // (with them it could ask this daemon for an unsandboxed session) nor the config file.
    config.sandbox_hidden.extend(
        [&options.token_file, &options.web_token_file, &file]
            .into_iter()
            .flatten()
            .filter_map(|p| std::fs::canonicalize(p).ok()),
    );
    Ok(Some(config))
}

/// Resolves on the first SIGTERM or SIGINT; the handlers are installed when this returns.
pub(crate) fn termination() -> Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(Error::io("installing the SIGTERM handler"))?;
    let mut int =
        signal(SignalKind::interrupt()).map_err(Error::io("installing the SIGINT handler"))?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// The web page's listener and token, when `--web` asks for one: the listener the previous
/// image handed over (after an upgrade in place), else one bound at the address.
async fn web_listener(
    options: &ServeOptions,
    inherited: Option<OwnedFd>,
) -> Result<Option<crate::web::WebServing>> {
    let (Some(address), Some(token_file)) = (options.web, &options.web_token_file) else {
        return Ok(None);
    };
    let token = read_token_file(token_file)?;
    let listener = match inherited {
        // After an upgrade in place: the same listener, so the page's links stay valid and no
        // browser finds the port closed meanwhile.
        Some(fd) => tcp_listener_from(fd)?,
        None => tokio::net::TcpListener::bind(address)
            .await
            .map_err(Error::io(format!(
                "listening for the web page on {address}"
            )))?,
    };
    let bound = listener.local_addr().unwrap_or(address);
    eprintln!(
        "ptyd: web page on {} (sign in with `ptyd web-link` or the web token)",
        crate::web::page_url(bound)
    );
    Ok(Some(crate::web::WebServing { listener, token }))
}

/// A handed-over TCP listener, registered with the runtime.
fn tcp_listener_from(fd: OwnedFd) -> Result<tokio::net::TcpListener> {
    let listener = std::net::TcpListener::from(fd);
    listener
        .set_nonblocking(true)
        .map_err(Error::io("making a handed-over TCP listener non-blocking"))?;
    tokio::net::TcpListener::from_std(listener)
        .map_err(Error::io("registering a handed-over TCP listener"))
}

/// The listeners `options` ask for: the ones the previous image handed over (`inherited`,
/// after an upgrade in place), else the socket systemd passed (socket activation), else one
/// bound at the socket path (announced on stderr); and the TCP listener with its token when
/// `listen_tcp` and `token_file` are both given (the token file is read again after an
/// upgrade). The third is the socket path when this call bound it (and so may remove it when
/// starting fails).
pub(crate) async fn listeners(
    options: &ServeOptions,
    inherited: Option<upgrade::Inherited>,
) -> Result<(UnixListener, Option<TcpServing>, Option<PathBuf>)> {
    if let Some(upgrade::Inherited { unix, tcp, .. }) = inherited {
        tracing::info!("upgraded in place: serving the listeners the previous image handed over");
        let unix = UnixListener::from_std(unix).map_err(Error::io("registering the socket"))?;
        let tcp = match (options.listen_tcp, &options.token_file, tcp) {
            (Some(_), Some(token_file), Some(fd)) => {
                let token = read_token_file(token_file)?;
                Some(TcpServing {
                    listener: tcp_listener_from(fd)?,
                    token,
                })
            }
            _ => None,
        };
        return Ok((unix, tcp, None));
    }
    let (unix, bound) = match activated_listener()? {
        Some(listener) => {
            tracing::info!("serving the socket passed by systemd socket activation");
            (listener, None)
        }
        None => {
            let path = options.socket.clone().unwrap_or_else(default_socket_path);
            let listener = bind(&path).map_err(|e| starting_on(&path.display().to_string(), e))?;
            eprintln!("ptyd: listening on {}", path.display());
            (listener, Some(path))
        }
    };
    let unbind = |e: Error| {
        if let Some(path) = &bound {
            let _ = std::fs::remove_file(path);
        }
        e
    };
    let tcp = match (options.listen_tcp, &options.token_file) {
        (Some(address), Some(token_file)) => {
            let token = read_token_file(token_file).map_err(unbind)?;
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(Error::io(format!("listening on tcp {address}")))
                .map_err(unbind)?;
            eprintln!(
                "ptyd: also listening on tcp {} (bearer token required)",
                listener.local_addr().unwrap_or(address)
            );
            Some(TcpServing { listener, token })
        }
        _ => None,
    };
    Ok((unix, tcp, bound))
}

/// `error` with "starting on PATH: " in front, keeping its kind (and so its status code).
fn starting_on(path: &str, error: Error) -> Error {
    let context = format!("starting on {path}");
    match error {
        Error::FailedPrecondition(m) => Error::FailedPrecondition(format!("{context}: {m}")),
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{context}: {m}")),
        Error::Io {
            context: inner,
            source,
        } => Error::Io {
            context: format!("{context}: {inner}"),
            source,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_listeners_follow_the_options() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sub").join("ptyd.sock");
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "s3cret\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let options = ServeOptions {
            socket: Some(socket.clone()),
            listen_tcp: Some("127.0.0.1:0".parse().unwrap()),
            token_file: Some(token_file.clone()),
            ..Default::default()
        };
        let (unix, tcp, bound) = listeners(&options, None).await.expect("both listeners");
        assert_eq!(bound.as_deref(), Some(socket.as_path()), "bound here");
        assert_eq!(
            unix.local_addr().unwrap().as_pathname(),
            Some(socket.as_path())
        );
        let tcp = tcp.expect("a TCP listener with its token");
        assert_eq!(tcp.token, "s3cret");
        assert!(tcp.listener.local_addr().unwrap().port() > 0);

        // A second daemon on the same socket is refused, naming the path.
        let message = listeners(&options, None)
            .await
            .err()
            .expect("refused")
            .to_string();
        assert!(
            message.starts_with(&format!("starting on {}", socket.display())),
            "{message}"
        );
        assert!(message.contains("another ptyd"), "{message}");

        // A token file others can read is refused before anything listens on TCP.
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(unix);
        let message = listeners(
            &ServeOptions {
                socket: Some(dir.path().join("other.sock")),
                ..options
            },
            None,
        )
        .await
        .err()
        .expect("refused")
        .to_string();
        assert!(message.contains("readable by others"), "{message}");
        // ... and the socket it had bound is gone again.
        assert!(
            !dir.path().join("other.sock").exists(),
            "no socket file left"
        );
    }

    #[test]
    fn a_config_check_serves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "[defaults]\ncols = 100\n").unwrap();
        let check = ServeOptions {
            config: Some(file.clone()),
            check_config: true,
            ..Default::default()
        };
        assert!(load_config(&check).unwrap().is_none());
        let serve = ServeOptions {
            check_config: false,
            ..check
        };
        assert_eq!(load_config(&serve).unwrap().unwrap().cols, 100);
        std::fs::write(&file, "[defaults]\ncols = 1\n").unwrap();
        assert!(
            load_config(&serve)
                .unwrap_err()
                .to_string()
                .contains("defaults.cols")
        );
    }
}
