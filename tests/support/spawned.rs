//! A real `ptyd serve` process for the tests that need one (signals, TCP, the web page):
//! started with a clean environment in a directory of its own, and stopped with SIGTERM.

use super::wait_until;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// How long a spawned daemon may take to answer, or to exit once told to.
pub const PROCESS_DEADLINE: Duration = Duration::from_secs(60);

/// The real binary, with nothing of the test's client settings inherited.
pub fn ptyd_command(dir: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ptyd"));
    cmd.env_remove("PTYD_SOCKET")
        .env_remove("PTYD_AGENT")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_RUNTIME_DIR", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Starts `ptyd serve` on `<dir>/ptyd.sock` with `args`; returns it once it answers.
pub async fn spawn_daemon(
    dir: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
) -> (tokio::process::Child, std::path::PathBuf) {
    let socket = dir.join("ptyd.sock");
    let mut cmd = ptyd_command(dir);
    cmd.arg("--socket").arg(&socket).arg("serve").args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("start ptyd serve");
    let s = socket.clone();
    wait_until(PROCESS_DEADLINE, "the spawned daemon answers", move || {
        let s = s.clone();
        async move { ptyd::client::connect(&s).await.is_ok() }
    })
    .await;
    (child, socket)
}

/// Starts `ptyd serve` on `<dir>/ptyd.sock` serving the web page too, on a free loopback port,
/// with `token` in `<dir>/web-token`; returns it, its socket and the page's address once the
/// page listens.
pub async fn spawn_daemon_with_page(
    dir: &Path,
    token: &str,
) -> (tokio::process::Child, std::path::PathBuf, String) {
    use std::os::unix::fs::PermissionsExt;
    let token_file = dir.join("web-token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let address = format!("127.0.0.1:{}", free_port());
    let tf = token_file.display().to_string();
    let (daemon, socket) =
        spawn_daemon(dir, &["--web", &address, "--web-token-file", &tf], &[]).await;
    let page = address.clone();
    wait_until(PROCESS_DEADLINE, "the page listens", move || {
        let page = page.clone();
        async move { tokio::net::TcpStream::connect(&page).await.is_ok() }
    })
    .await;
    (daemon, socket, address)
}

/// SIGTERMs `child` and asserts it exits 0 within the deadline.
pub async fn terminate(mut child: tokio::process::Child) {
    let pid = child.id().expect("the daemon runs") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM the daemon");
    let status = tokio::time::timeout(PROCESS_DEADLINE, child.wait())
        .await
        .expect("the daemon exits after SIGTERM")
        .expect("wait for the daemon");
    assert!(
        status.success(),
        "the daemon exits 0 after SIGTERM: {status}"
    );
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}
