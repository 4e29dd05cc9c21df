//! Upgrade in place: `SIGHUP` to a real `ptyd serve` re-executes the binary at its
//! path in the same process, on the same socket. Each test installs its own copy of the binaries
//! in a temp dir (so it can replace them as `cargo install` does: a new file renamed over the
//! old), with its own socket, config file and state directory, and reads the daemon's log from a
//! file.

mod support;

use ptyd::pb::{SendRequest, TypesRequest};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use support::five_sessions::FiveSessions;
use support::{Client, open_in, send_request, send_with, timed, wait_until};
use tonic::Code;

/// Longest wait for a daemon to start, re-execute or exit on a loaded CI machine.
const PROCESS_DEADLINE: Duration = Duration::from_secs(30);

/// `ptyd serve` run from its own copy of the binaries.
struct Installed {
    dir: tempfile::TempDir,
    child: tokio::process::Child,
}

impl Installed {
    /// Copies `ptyd` and its helper into `<tmp>/bin`, writes `config` to `<tmp>/config.toml`,
    /// and starts `<tmp>/bin/ptyd --socket <tmp>/ptyd.sock serve --config <tmp>/config.toml`;
    /// returns once it answers.
    async fn start(config: &str) -> Installed {
        Installed::start_with(config, |_| Vec::new()).await
    }

    /// Like [`start`](Self::start), with the `serve` arguments `args` makes from the temp dir.
    async fn start_with(config: &str, args: impl FnOnce(&Path) -> Vec<String>) -> Installed {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-upgrade-")
            .tempdir()
            .unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let built = Path::new(env!("CARGO_BIN_EXE_ptyd"));
        for name in ["ptyd", "ptyd-session-helper"] {
            let from = built.with_file_name(name);
            std::fs::copy(&from, bin.join(name))
                .unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        }
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let socket = dir.path().join("ptyd.sock");
        let child = tokio::process::Command::new(bin.join("ptyd"))
            .arg("--socket")
            .arg(&socket)
            .arg("serve")
            .arg("--config")
            .arg(dir.path().join("config.toml"))
            .args(args(dir.path()))
            .env_remove("PTYD_SOCKET")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env("HOME", support::clean_home())
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start ptyd serve");
        let installed = Installed { dir, child };
        let s = installed.socket();
        wait_until(PROCESS_DEADLINE, "the daemon answers", move || {
            let s = s.clone();
            async move { ptyd::client::connect(&s).await.is_ok() }
        })
        .await;
        installed
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("ptyd.sock")
    }

    fn binary(&self) -> PathBuf {
        self.dir.path().join("bin/ptyd")
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("the daemon runs")
    }

    async fn client(&self) -> Client {
        ptyd::client::connect(&self.socket())
            .await
            .expect("connect")
    }

    /// What the daemon logged so far.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// Installs a different build at the binary's path as installers do (a new file renamed
    /// over the old one, which the running daemon keeps as a deleted inode): the built binary
    /// with `marker` appended, which the loader ignores. Returns nothing; [`runs_marker`] tells
    /// which file the daemon runs.
    fn replace_binary(&self, contents: &[u8]) {
        let staged = self.dir.path().join("bin/.ptyd.new");
        std::fs::write(&staged, contents).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&staged, self.binary()).unwrap();
    }

    fn write_config(&self, config: &str) {
        let staged = self.dir.path().join(".config.new");
        std::fs::write(&staged, config).unwrap();
        std::fs::rename(&staged, self.dir.path().join("config.toml")).unwrap();
    }

    fn sighup(&self) {
        signal(self.pid(), nix::sys::signal::Signal::SIGHUP);
    }

    /// Installs another build (named `name` and a nonce), SIGHUPs the daemon and waits until it
    /// runs that build.
    async fn upgrade_to_a_new_build(&self, name: &str) {
        let marker = format!("{name}-{}", nonce());
        self.replace_binary(&rebuilt(&marker));
        self.sighup();
        let pid = self.pid();
        wait_until(PROCESS_DEADLINE, "the daemon runs the new binary", || {
            let marker = marker.clone();
            async move { runs_marker(pid, &marker) }
        })
        .await;
    }

    /// The address the log names right after `after`, the first time.
    fn logged_address(&self, after: &str) -> String {
        self.log()
            .split(after)
            .nth(1)
            .and_then(|rest| rest.split(|c: char| c.is_whitespace() || c == '/').next())
            .unwrap_or_else(|| panic!("the log names an address after {after:?}"))
            .to_owned()
    }

    /// Waits until the log shows `needle` `times` times.
    async fn wait_log(&self, needle: &str, times: usize) {
        let log = self.dir.path().join("log");
        let what = format!("the daemon logs {needle:?} {times} time(s)");
        wait_until(PROCESS_DEADLINE, &what, move || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            async move { text.matches(needle).count() >= times }
        })
        .await;
    }

    /// SIGTERMs the daemon and asserts it exits 0.
    async fn terminate(mut self) {
        signal(self.pid(), nix::sys::signal::Signal::SIGTERM);
        let status = tokio::time::timeout(PROCESS_DEADLINE, self.child.wait())
            .await
            .expect("the daemon exits after SIGTERM")
            .expect("wait for the daemon");
        assert!(status.success(), "exit 0 after SIGTERM: {status}");
    }
}

fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal)
        .unwrap_or_else(|e| panic!("{signal} to {pid}: {e}"));
}

/// The built `ptyd` with `marker` appended: a different file that runs the same.
fn rebuilt(marker: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(env!("CARGO_BIN_EXE_ptyd")).unwrap();
    bytes.extend_from_slice(marker.as_bytes());
    bytes
}

/// Whether the process `pid` runs the file whose contents end with `marker`, and that file is
/// the one at its path now (its `/proc/<pid>/exe` is not a deleted inode).
fn runs_marker(pid: u32, marker: &str) -> bool {
    let exe = format!("/proc/{pid}/exe");
    let Ok(link) = std::fs::read_link(&exe) else {
        return false;
    };
    !link.to_string_lossy().ends_with(" (deleted)")
        && std::fs::read(&exe).is_ok_and(|b| b.ends_with(marker.as_bytes()))
}

/// `serve` arguments: `flag ADDRESS` on port 0 of loopback, then `token_flag` and the file
/// `name` in `dir`, written with `token` (mode 0600).
fn listening_with_token(
    dir: &Path,
    flag: &str,
    token_flag: &str,
    name: &str,
    token: &str,
) -> Vec<String> {
    let file = dir.join(name);
    std::fs::write(&file, format!("{token}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    [flag, "127.0.0.1:0", token_flag]
        .map(String::from)
        .into_iter()
        .chain([file.display().to_string()])
        .collect()
}

/// A unique token for process names and markers.
fn nonce() -> String {
    format!(
        "{}{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    )
}

/// Whether a process runs with exactly `cmdline` (arguments joined by spaces).
fn runs(cmdline: &str) -> bool {
    ptyd::process::procfs::pids().into_iter().any(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
            let args: Vec<String> = raw
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.join(" ") == cmdline
        })
    })
}

/// The daemon keeps its pid and socket, runs the new file at its path, breaks the call in flight
/// with UNAVAILABLE, and the same client channel works again once the new image serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_runs_the_new_binary_in_the_same_process_on_the_same_socket() {
    timed(async {
        let daemon = Installed::start("").await;
        let pid = daemon.pid();
        let socket_inode = std::fs::metadata(daemon.socket()).unwrap().ino();
        let mut c = daemon.client().await;
        let sid = open_in(&mut c, "agent", daemon.dir.path()).await;
        let n = nonce();
        let sleeper = format!("sleep 60.{n}");
        let mut in_flight = {
            let mut c = c.clone();
            let request = SendRequest {
                timeout_ms: 60_000,
                ..send_request("agent", &sid, &sleeper)
            };
            tokio::spawn(async move { c.send(request).await })
        };
        wait_until(PROCESS_DEADLINE, "the send's command runs", || {
            let sleeper = sleeper.clone();
            async move { runs(&sleeper) }
        })
        .await;

        let marker = format!("ptyd-rebuilt-{n}");
        daemon.replace_binary(&rebuilt(&marker));
        daemon.sighup();
        let broken = tokio::time::timeout(PROCESS_DEADLINE, &mut in_flight)
            .await
            .expect("the call in flight ends")
            .expect("the send task");
        let broken = broken.expect_err("the call in flight breaks");
        assert_eq!(broken.code(), Code::Unavailable, "{broken:?}");
        wait_until(PROCESS_DEADLINE, "the daemon runs the new binary", || {
            let marker = marker.clone();
            async move { runs_marker(pid, &marker) }
        })
        .await;
        let types = c.clone();
        wait_until(
            PROCESS_DEADLINE,
            "the same client is served again",
            move || {
                let mut c = types.clone();
                async move { c.types(TypesRequest {}).await.is_ok() }
            },
        )
        .await;
        assert_eq!(daemon.pid(), pid, "the same process");
        assert_eq!(
            std::fs::metadata(daemon.socket()).unwrap().ino(),
            socket_inode,
            "the socket was handed over, not bound again"
        );
        let log = daemon.log();
        assert!(
            log.contains("serving the listeners the previous image handed over"),
            "{log}"
        );
        daemon.terminate().await;
    })
    .await;
}

/// A config file that does not load keeps the running daemon, with its configuration, and says
/// why; so does a binary at the path that cannot run. Fixed, the next SIGHUP applies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_config_or_binary_on_sighup_keeps_the_daemon_serving_its_old_config() {
    timed(async {
        let daemon = Installed::start("[defaults]\ncols = 100\n").await;
        let pid = daemon.pid();
        let mut c = daemon.client().await;
        let home = daemon.dir.path().to_owned();
        let cols = |c: &mut Client| {
            let mut c = c.clone();
            let home = home.clone();
            async move {
                let sid = open_in(&mut c, "agent", &home).await;
                let info = support::session_info(&mut c, "agent", &sid)
                    .await
                    .expect("listed");
                support::close(&mut c, "agent", &sid).await;
                info.cols
            }
        };
        assert_eq!(cols(&mut c).await, 100);

        daemon.write_config("[defaults]\ncols = 1\n");
        daemon.sighup();
        daemon
            .wait_log("keeping the running daemon and its configuration", 1)
            .await;
        let log = daemon.log();
        assert!(log.contains("defaults.cols"), "the log says why: {log}");
        assert!(!log.contains("re-executing"), "{log}");
        assert_eq!(daemon.pid(), pid);
        assert_eq!(cols(&mut c).await, 100, "still the old configuration");

        // A file at the binary's path that is no ptyd: refused the same way.
        daemon.write_config("[defaults]\ncols = 90\n");
        daemon.replace_binary(b"#!/bin/sh\necho 'not ptyd' >&2\nexit 3\n");
        daemon.sighup();
        daemon
            .wait_log("keeping the running daemon and its configuration", 2)
            .await;
        let log = daemon.log();
        assert!(log.contains("not ptyd"), "the log says what it said: {log}");
        assert_eq!(cols(&mut c).await, 100, "still the old configuration");

        daemon.replace_binary(&rebuilt("fixed"));
        daemon.sighup();
        wait_until(
            PROCESS_DEADLINE,
            "the daemon runs the fixed binary",
            || async move { runs_marker(pid, "fixed") },
        )
        .await;
        let mut fresh = daemon.client().await;
        assert_eq!(
            cols(&mut fresh).await,
            90,
            "the fixed configuration applies"
        );
        daemon.terminate().await;
    })
    .await;
}

/// A new `[[types]]` entry is usable by Open after SIGHUP, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_change_takes_effect_on_sighup() {
    timed(async {
        let daemon = Installed::start("").await;
        let mut c = daemon.client().await;
        let names = |c: &Client| {
            let mut c = c.clone();
            async move {
                match c.types(TypesRequest {}).await {
                    Ok(r) => r.into_inner().types.into_iter().map(|t| t.name).collect(),
                    Err(_) => Vec::<String>::new(),
                }
            }
        };
        assert!(!names(&c).await.contains(&"cat".to_owned()));
        daemon.write_config(
            "[[types]]\nname = \"cat\"\nargv = [\"cat\"]\ndescription = \"echoes its input\"\n",
        );
        daemon.sighup();
        let listed = c.clone();
        wait_until(PROCESS_DEADLINE, "Types lists the new type", move || {
            let c = listed.clone();
            async move { names(&c).await.contains(&"cat".to_owned()) }
        })
        .await;
        let opened = support::open_with(
            &mut c,
            ptyd::pb::OpenRequest {
                agent_id: "agent".into(),
                r#type: "cat".into(),
                cwd: daemon.dir.path().display().to_string(),
                ..Default::default()
            },
        )
        .await;
        let sid = opened.session.expect("a session").session_id;
        let (result, _) = send_with(
            &mut c,
            SendRequest {
                idle_ms: 300,
                ..send_request("agent", &sid, "meow")
            },
        )
        .await;
        assert!(
            result.viewport.contains("meow"),
            "the cat session echoes: {result:?}"
        );
        daemon.terminate().await;
    })
    .await;
}

/// `--listen-tcp` survives the upgrade too, on the same port, and the token file is read again
/// (a rotated token applies).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tcp_listener_is_handed_over_and_the_token_file_read_again() {
    timed(async {
        let daemon = Installed::start_with("", |dir| {
            listening_with_token(dir, "--listen-tcp", "--token-file", "token", "first-token")
        })
        .await;
        daemon.wait_log("also listening on tcp ", 1).await;
        let address = daemon.logged_address("also listening on tcp ");
        let types_with = |token: &'static str| {
            let address = address.clone();
            async move {
                let Ok(channel) =
                    tonic::transport::Endpoint::from_shared(format!("http://{address}"))
                        .unwrap()
                        .connect()
                        .await
                else {
                    return Err(Code::Unavailable);
                };
                let mut client = ptyd::pb::terminals_client::TerminalsClient::with_interceptor(
                    channel,
                    move |mut req: tonic::Request<()>| {
                        let value = format!("Bearer {token}").parse().unwrap();
                        req.metadata_mut().insert("authorization", value);
                        Ok(req)
                    },
                );
                client
                    .types(TypesRequest {})
                    .await
                    .map(|_| ())
                    .map_err(|s| s.code())
            }
        };
        assert_eq!(types_with("first-token").await, Ok(()));

        std::fs::write(daemon.dir.path().join("token"), "second-token\n").unwrap();
        daemon.upgrade_to_a_new_build("ptyd-tcp").await;
        wait_until(
            PROCESS_DEADLINE,
            "the TCP listener serves the new token",
            move || async move { types_with("second-token").await == Ok(()) },
        )
        .await;
        assert_eq!(types_with("first-token").await, Err(Code::Unauthenticated));
        daemon.terminate().await;
    })
    .await;
}

/// `--web` survives the upgrade on the same listener: a page asked for on port 0 keeps its port
/// (so the links already handed out stay valid), the token file is read again, and `WebLink`
/// knows the page in the new image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_listener_is_handed_over() {
    timed(async {
        let daemon = Installed::start_with("", |dir| {
            listening_with_token(
                dir,
                "--web",
                "--web-token-file",
                "web-token",
                "first-web-token",
            )
        })
        .await;
        daemon.wait_log("web page on http://", 1).await;
        let address = daemon.logged_address("web page on http://");
        let sessions_with = |token: &'static str| {
            let address = address.clone();
            async move {
                let head = format!(
                    "GET /api/sessions HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}"
                );
                support::plain_http::http(&address, &head, "").await.0
            }
        };
        assert_eq!(sessions_with("first-web-token").await, 200);

        std::fs::write(daemon.dir.path().join("web-token"), "second-web-token\n").unwrap();
        daemon.upgrade_to_a_new_build("ptyd-web").await;
        daemon.wait_log("web page on http://", 2).await;
        assert_eq!(
            daemon
                .log()
                .matches(&format!("web page on http://{address}/"))
                .count(),
            2,
            "the same address after the upgrade: {}",
            daemon.log()
        );
        assert_eq!(sessions_with("second-web-token").await, 200);
        assert_eq!(sessions_with("first-web-token").await, 401);
        let link = daemon
            .client()
            .await
            .web_link(ptyd::pb::WebLinkRequest {
                agent_id: "cli".into(),
                session_id: String::new(),
            })
            .await
            .expect("WebLink after the upgrade")
            .into_inner();
        assert!(
            link.url.starts_with(&format!("http://{address}/#code=")),
            "{link:?}"
        );
        daemon.terminate().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Acceptance 2: five sessions of two agents through an upgrade in place

/// A flood at the moment of the SIGHUP, vim with unsaved text, python with `x = 42`, a shell
/// after `cd /tmp; export FOO=bar` and a background job, with the binary replaced by another
/// build in between: all kept with their ids and owners, no output lost, the same pid, the new
/// binary running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_sessions_of_two_agents_survive_an_upgrade_in_place() {
    timed(async {
        let daemon = Installed::start("").await;
        let pid = daemon.pid();
        let work = daemon.dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let mut c = daemon.client().await;
        let sessions = FiveSessions::set_up(&mut c, &work).await;

        daemon.upgrade_to_a_new_build("ptyd-rebuilt").await;
        let mut c = daemon.client().await;
        assert_eq!(daemon.pid(), pid, "the same process");
        sessions.check(&mut c).await;
        // Stop still stops after an upgrade: SIGTERM ends every session's processes.
        let shells = sessions.shells(&mut c).await;
        daemon.terminate().await;
        let running: Vec<u32> = shells
            .into_iter()
            .filter(|&p| support::process_is_running(p))
            .collect();
        assert!(running.is_empty(), "sessions outlived SIGTERM: {running:?}");
    })
    .await;
}
