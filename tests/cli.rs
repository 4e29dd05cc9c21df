//! The `ptyd` binary as users run it: client verbs against an in-process daemon, and `ptyd serve`
//! as a process (environment isolation, socket permissions, one daemon per socket, stale socket
//! replaced, clean exit on SIGTERM).

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use ptyd::pb::ListRequest;
use support::*;

/// The real binary with no client settings inherited from the test's environment.
fn ptyd() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ptyd"));
    cmd.env("HOME", clean_home())
        .env_remove("PTYD_SOCKET")
        .env_remove("PTYD_AGENT")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

async fn run(cmd: &mut tokio::process::Command) -> Output {
    cmd.output().await.expect("run the ptyd binary")
}

/// Asserts the verb succeeded; returns its stdout.
#[track_caller]
fn ok_stdout(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed with {}: stdout {:?} stderr {:?}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_verbs_print_the_rendered_text() {
    timed(async {
        let mut d = start_daemon().await;
        let s = d.socket.to_str().unwrap().to_string();

        let out = ok_stdout(&run(ptyd().args(["open", "--socket", &s])).await, "open");
        let first = out.lines().next().unwrap_or_default();
        let sid = first
            .strip_prefix("started terminal session ")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("open prints the Open rendering: {out:?}"))
            .to_string();
        assert_eq!(sid, "t1", "the first session of a fresh daemon");
        assert!(first.ends_with("[type: shell]"), "{out:?}");

        let out = ok_stdout(
            &run(ptyd().args(["send", "--socket", &s, &sid, "echo hi"])).await,
            "send",
        );
        assert!(
            out.contains("hi\n[wait: prompt]\n[exit code: 0]\n[session: running]"),
            "{out:?}"
        );

        let out = ok_stdout(&run(ptyd().args(["list", "--socket", &s])).await, "list");
        assert!(
            out.contains(&format!("{sid} [shell] running pid=")),
            "{out:?}"
        );

        // The default agent is "cli": the session is visible to that agent over gRPC too.
        let sessions = d
            .client
            .list(ListRequest {
                agent_id: "cli".into(),
            })
            .await
            .expect("List")
            .into_inner()
            .sessions;
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].session_id, sid);

        // Another agent, by flag or by environment, sees nothing.
        let out = ok_stdout(
            &run(ptyd().args(["list", "--socket", &s, "--agent", "other"])).await,
            "list --agent other",
        );
        assert!(out.contains("(no terminal sessions)"), "{out:?}");
        let out = ok_stdout(
            &run(ptyd()
                .args(["list", "--socket", &s])
                .env("PTYD_AGENT", "other"))
            .await,
            "list with PTYD_AGENT",
        );
        assert!(out.contains("(no terminal sessions)"), "{out:?}");

        // --json prints machine-readable output.
        let out = ok_stdout(
            &run(ptyd().args(["list", "--socket", &s, "--json"])).await,
            "list --json",
        );
        let json: serde_json::Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("list --json is JSON ({e}): {out:?}"));
        assert_eq!(json["sessions"][0]["session_id"], sid.as_str(), "{json}");
        assert_eq!(json["sessions"][0]["type"], "shell", "{json}");
        assert_eq!(json["sessions"][0]["status"]["state"], "running", "{json}");
        assert!(
            json["rendered"]
                .as_str()
                .is_some_and(|r| r.contains(sid.as_str())),
            "{json}"
        );
        // Enums print by the contract's names, a oneof as its one set field.
        let out = ok_stdout(
            &run(ptyd().args(["send", &sid, "true", "--socket", &s, "--json"])).await,
            "send --json",
        );
        let json: serde_json::Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("send --json is JSON ({e}): {out:?}"));
        assert_eq!(json["foreground"]["wait_reason"], "prompt", "{json}");
        assert_eq!(json["foreground"]["exit_code"], 0, "{json}");
        assert!(json["rendered"].is_string(), "{json}");

        // PTYD_SOCKET replaces --socket.
        let out = ok_stdout(
            &run(ptyd().arg("types").env("PTYD_SOCKET", &s)).await,
            "types",
        );
        assert!(out.contains("shell"), "{out:?}");

        let out = ok_stdout(
            &run(ptyd().args(["read", "--socket", &s, &sid])).await,
            "read",
        );
        assert!(out.lines().any(|l| l == "hi"), "{out:?}");
        assert!(out.contains("[lines: "), "{out:?}");

        // Errors exit non-zero and name the id.
        let out = run(ptyd().args(["send", "--socket", &s, "t999", "echo x"])).await;
        assert!(
            !out.status.success(),
            "send to an unknown session must fail"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("t999"),
            "stderr names the id: {:?}",
            String::from_utf8_lossy(&out.stderr)
        );

        // Text for a command that still runs is refused, unless --typeahead.
        let out = ok_stdout(
            &run(ptyd()
                .args(["send", "--socket", &s, "--idle-ms", "300", &sid])
                .arg("sleep 2; echo late"))
            .await,
            "send leaving a command running",
        );
        assert!(out.contains("[wait: inferred_idle]"), "{out:?}");
        let out = run(ptyd().args(["send", "--socket", &s, &sid, "echo typed"])).await;
        assert_eq!(out.status.code(), Some(2), "typeahead refused: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("FAILED_PRECONDITION") && stderr.contains("`sleep 2; echo late`"),
            "{stderr:?}"
        );
        let out = ok_stdout(
            &run(ptyd().args(["send", "--socket", &s, "--typeahead", &sid, "echo typed"])).await,
            "send --typeahead",
        );
        assert!(
            out.starts_with("late\ntyped\n[wait: prompt]\n[exit code: 0]"),
            "{out:?}"
        );

        // Keys alone press just the keys: the Backspace edits the typed line, no Enter runs it.
        ok_stdout(
            &run(ptyd()
                .args([
                    "send",
                    "--socket",
                    &s,
                    "--no-submit",
                    "--idle-ms",
                    "300",
                    &sid,
                ])
                .arg("echo abc"))
            .await,
            "send --no-submit",
        );
        ok_stdout(
            &run(ptyd().args([
                "send",
                "--socket",
                &s,
                "--key",
                "Backspace",
                "--idle-ms",
                "300",
                &sid,
            ]))
            .await,
            "send --key Backspace",
        );
        let out = ok_stdout(
            &run(ptyd().args(["send", "--socket", &s, "--key", "Enter", &sid])).await,
            "send --key Enter",
        );
        assert!(
            out.starts_with("ab\n[wait: prompt]\n[exit code: 0]"),
            "the line ran once, edited: {out:?}"
        );

        let out = ok_stdout(
            &run(ptyd().args(["close", "--socket", &s, &sid])).await,
            "close",
        );
        assert!(
            out.contains(&format!("closed terminal session {sid}")),
            "{out:?}"
        );
        let out = ok_stdout(&run(ptyd().args(["list", "--socket", &s])).await, "list");
        assert!(out.contains("(no terminal sessions)"), "{out:?}");
        d.stop().await;
    })
    .await;
}

/// `ptyd serve` as its own process, logging to a file in `dir`.
fn spawn_serve(dir: &Path, socket: &Path, log: &str) -> tokio::process::Child {
    let log = std::fs::File::create(dir.join(log)).expect("create the serve log");
    ptyd()
        .arg("serve")
        .arg("--socket")
        .arg(socket)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_RUNTIME_DIR", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("PTYD_TEST_SECRET", "hunter2")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("spawn ptyd serve")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_process_isolates_env_guards_its_socket_and_exits_cleanly() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-serve-")
            .tempdir()
            .unwrap();
        let socket = dir.path().join("ptyd.sock");
        // A stale socket file (nobody listening) is replaced.
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        assert!(socket.exists());

        let mut child = spawn_serve(dir.path(), &socket, "serve.log");
        let log_path = dir.path().join("serve.log");
        {
            let socket = socket.clone();
            let log_path = log_path.clone();
            wait_until(
                Duration::from_secs(30),
                "ptyd serve answers on its socket",
                || {
                    if let Some(status) = child.try_wait().expect("try_wait") {
                        panic!(
                            "ptyd serve exited early with {status}: {}",
                            std::fs::read_to_string(&log_path).unwrap_or_default()
                        );
                    }
                    let socket = socket.clone();
                    async move {
                        match ptyd::client::connect(&socket).await {
                            Ok(mut c) => c
                                .list(ListRequest {
                                    agent_id: "probe".into(),
                                })
                                .await
                                .is_ok(),
                            Err(_) => false,
                        }
                    }
                },
            )
            .await;
        }
        let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the socket is private to its user");

        let mut c = ptyd::client::connect(&socket).await.expect("connect");
        let opened = open_with(
            &mut c,
            ptyd::pb::OpenRequest {
                agent_id: "a".into(),
                ..Default::default()
            },
        )
        .await;
        let info = opened.session.unwrap();
        let out = run_ok(
            &mut c,
            "a",
            &info.session_id,
            "echo \"secret=${PTYD_TEST_SECRET:-unset}\"",
        )
        .await;
        assert_eq!(
            out, "secret=unset",
            "the daemon's environment does not leak into sessions"
        );

        // A second daemon on a live socket exits with a message instead of stealing it.
        let second = spawn_serve(dir.path(), &socket, "second.log");
        let status = tokio::time::timeout(Duration::from_secs(30), second.wait_with_output())
            .await
            .expect("a second daemon on a live socket must exit")
            .expect("wait for the second daemon")
            .status;
        assert!(!status.success(), "second daemon: {status}");
        let message = std::fs::read_to_string(dir.path().join("second.log")).unwrap();
        assert!(
            !message.trim().is_empty(),
            "the second daemon says why it exits"
        );
        assert!(
            c.list(ListRequest {
                agent_id: "a".into()
            })
            .await
            .is_ok(),
            "the first daemon still serves"
        );

        // SIGTERM: close every session, exit 0.
        drop(c);
        let pid = child.id().expect("serve pid") as i32;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM ptyd serve");
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .expect("ptyd serve exits after SIGTERM")
            .expect("wait for ptyd serve");
        assert!(
            status.success(),
            "exit 0 after SIGTERM, got {status}: {}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        assert!(
            !process_is_running(info.pid),
            "the session's shell {} is gone",
            info.pid
        );
    })
    .await;
}
