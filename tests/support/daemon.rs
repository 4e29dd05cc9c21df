//! The daemon a test talks to: in this process, on a socket in a temp dir, with a state
//! directory and a sessions' HOME of its own, serving on its own thread and runtime.

use super::Client;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tempfile::TempDir;
use tokio::net::UnixListener;
use tokio::sync::oneshot;

/// How long `Daemon::stop` may take to close every session and return.
const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// A daemon serving on `<tmp>/ptyd.sock` in this test's process, on a thread of its own with a
/// current-thread runtime, as `ptyd serve` runs (the test's runtime is not the daemon's).
pub struct Daemon {
    pub socket: PathBuf,
    pub client: Client,
    pub shutdown: Option<oneshot::Sender<()>>,
    /// What `serve` returned, once it has.
    pub served: oneshot::Receiver<Result<(), ptyd::Error>>,
    /// The thread id of the daemon's one thread (for tests that read its scheduling stats).
    pub thread: i32,
    pub _dir: TempDir,
}

/// A HOME without rc files, for daemons the tests spawn as processes: the machine user's rc
/// files (plugin managers, shared lock files that a killed shell can leave behind) must not
/// decide whether a test passes.
pub fn clean_home() -> PathBuf {
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clean-home");
    std::fs::create_dir_all(&home).expect("create a clean HOME");
    home
}

/// Starts a daemon with the contract defaults.
pub async fn start_daemon() -> Daemon {
    start_daemon_with(ptyd::config::Config::default()).await
}

/// Starts a daemon with `config`. The listener is bound before `serve` is spawned, so the
/// client can connect at once. Dropping the `Daemon` without `stop` still triggers shutdown
/// (the oneshot sender is dropped), but only `stop` waits for it.
pub async fn start_daemon_with(mut config: ptyd::config::Config) -> Daemon {
    let dir = tempfile::Builder::new()
        .prefix("ptyd-test-")
        .tempdir()
        .expect("create temp dir for the daemon socket");
    // Sessions get an empty HOME unless the test chose one: the machine user's rc files (slow
    // plugin managers, shared lock files) must not decide whether a test passes. Tests about rc
    // files pass their own HOME in OpenRequest.env.
    if !config.env_defaults.iter().any(|(name, _)| name == "HOME") {
        let home = dir.path().join("home");
        std::fs::create_dir(&home).expect("create the sessions' HOME");
        config
            .env_defaults
            .push(("HOME".into(), home.display().to_string()));
    }
    // Each daemon keeps its sessions in a state directory of its own, and a session whose
    // test ended without stopping its daemon is gone a few seconds later, not 15 minutes.
    if config.state_dir.is_none() {
        config.state_dir = Some(dir.path().join("state"));
    }
    if config.adoption_grace == ptyd::config::Config::default().adoption_grace {
        config.adoption_grace = Duration::from_secs(5);
    }
    let socket = dir.path().join("ptyd.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind the daemon socket");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
    let (served_tx, served) = oneshot::channel();
    let (thread_tx, thread_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("ptyd-daemon".into())
        .spawn(move || {
            let _ = thread_tx.send(nix::unistd::gettid().as_raw());
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the daemon's runtime");
            let result = runtime.block_on(async move {
                let listener = UnixListener::from_std(listener).expect("register the listener");
                ptyd::server::serve(listener, config, async move {
                    // A send or a dropped sender both mean "shut down".
                    let _ = shutdown_rx.await;
                })
                .await
            });
            let _ = served_tx.send(result);
        })
        .expect("start the daemon's thread");
    let client = ptyd::client::connect(&socket)
        .await
        .expect("connect to the in-process daemon");
    let thread = thread_rx.await.expect("the daemon's thread runs");
    Daemon {
        socket,
        client,
        thread,
        shutdown: Some(shutdown_tx),
        served,
        _dir: dir,
    }
}

impl Daemon {
    /// A fresh handle on the daemon's channel (tonic clients are cheap clones).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The daemon's temp dir: a scratch directory the test may use as a session's cwd.
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// Triggers shutdown and waits until `serve` closed every session and returned `Ok`.
    pub async fn stop(self) {
        let Daemon {
            socket: _,
            client,
            mut shutdown,
            served,
            thread: _,
            _dir,
        } = self;
        drop(client);
        if let Some(tx) = shutdown.take() {
            let _ = tx.send(());
        }
        match tokio::time::timeout(STOP_DEADLINE, served).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => panic!("serve returned an error on shutdown: {e:?}"),
            Ok(Err(_)) => panic!("the daemon's thread panicked"),
            Err(_) => panic!("the daemon did not stop within {STOP_DEADLINE:?}"),
        }
        drop(_dir);
    }
}
