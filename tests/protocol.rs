//! The protocol's edges, against an in-process daemon: session limits under concurrent Opens,
//! the caller's deadline answered `DEADLINE_EXCEEDED`, both reflection protocols, and the
//! refusal a client run by another user gets.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use ptyd::pb::{OpenRequest, WatchRequest};
use support::*;
use tonic::Code;

const AGENT: &str = "protocol-test";

/// An Open of a plain shell in `home` (no rc files), as a request.
fn open_request(agent: &str, home: &std::path::Path) -> OpenRequest {
    let home = home.display().to_string();
    OpenRequest {
        agent_id: agent.into(),
        cwd: home.clone(),
        env: [("HOME".to_string(), home)].into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_opens_never_exceed_the_limits() {
    timed(async {
        let mut config = ptyd::config::Config::default();
        config.limits.sessions_per_agent = 3;
        config.limits.sessions_total = 5;
        config.types.push(ptyd::config::TerminalType {
            name: "missing".into(),
            argv: vec!["/nonexistent/ptyd-test-program".into()],
            integration: ptyd::marks::Integration::None,
            history_expansion: false,
            description: "a program that is not there".into(),
            env: Vec::new(),
            sandbox: None,
        });
        let d = start_daemon_with(config).await;
        let home = d.dir().to_path_buf();

        // Eight Opens at once: the slots are taken before the sessions start, so exactly three
        // succeed, however the starts interleave.
        let opens: Vec<_> = (0..8)
            .map(|_| {
                let mut c = d.client();
                let request = open_request(AGENT, &home);
                tokio::spawn(async move { c.open(request).await })
            })
            .collect();
        let mut opened = Vec::new();
        let mut refused = 0;
        for open in opens {
            match open.await.expect("the Open task") {
                Ok(r) => opened.push(r.into_inner().session.expect("session").session_id),
                Err(status) => {
                    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                    assert!(status.message().contains("limit of 3"), "{status:?}");
                    refused += 1;
                }
            }
        }
        assert_eq!((opened.len(), refused), (3, 5), "opened {opened:?}");
        assert_eq!(list(&mut d.client(), AGENT).await.sessions.len(), 3);

        // A start that fails gives its slot back: after a close, failed Opens of a missing
        // program leave room for exactly one more session.
        close(&mut d.client(), AGENT, &opened[0]).await;
        for _ in 0..3 {
            let mut request = open_request(AGENT, &home);
            request.r#type = "missing".into();
            let status = d.client().open(request).await.expect_err("missing program");
            assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
        }
        d.client()
            .open(open_request(AGENT, &home))
            .await
            .expect("the slot of the closed session is free again");
        let status = d
            .client()
            .open(open_request(AGENT, &home))
            .await
            .expect_err("the agent is at its limit again");
        assert_eq!(status.code(), Code::ResourceExhausted);

        // The daemon-wide limit counts every agent: two more for another agent, then none.
        for _ in 0..2 {
            d.client()
                .open(open_request("other-agent", &home))
                .await
                .expect("room in the daemon");
        }
        let status = d
            .client()
            .open(open_request("other-agent", &home))
            .await
            .expect_err("the daemon is full");
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.message().contains("limit of 5"), "{status:?}");
        d.stop().await;
    })
    .await;
}

/// One gRPC call made by hand over HTTP/2 with `grpc-timeout: {timeout_ms}m`, so no client-side
/// timer interferes (tonic's client enforces the header itself and reports its own expiry as
/// CANCELLED): the `grpc-status` and `grpc-message` the daemon answered with, after any
/// messages it streamed.
async fn call_with_deadline(
    socket: &std::path::Path,
    method: &str,
    message: &impl prost::Message,
    timeout_ms: u32,
) -> (String, String) {
    let io = tokio::net::UnixStream::connect(socket)
        .await
        .expect("connect");
    let (client, connection) = h2::client::handshake(io).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let mut client = client.ready().await.expect("ready");
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost/ptyd.v1.Terminals/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", format!("{timeout_ms}m"))
        .body(())
        .unwrap();
    let (response, mut body) = client
        .send_request(request, false)
        .expect("send the request");
    let encoded = message.encode_to_vec();
    let mut frame = vec![0u8];
    frame.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    frame.extend_from_slice(&encoded);
    body.send_data(tonic::codegen::Bytes::from(frame), true)
        .expect("send the message");
    let (head, mut answer) = response.await.expect("response headers").into_parts();
    let status = |headers: &http::HeaderMap| {
        let get = |name: &str| {
            headers
                .get(name)
                .map(|v| v.to_str().unwrap_or_default().to_owned())
        };
        get("grpc-status").map(|code| (code, get("grpc-message").unwrap_or_default()))
    };
    if let Some(found) = status(&head.headers) {
        return found; // trailers-only
    }
    while let Some(chunk) = answer.data().await {
        let chunk = chunk.expect("response data");
        let _ = answer.flow_control().release_capacity(chunk.len());
    }
    let trailers = answer
        .trailers()
        .await
        .expect("trailers")
        .expect("some trailers");
    status(&trailers).expect("grpc-status in the trailers")
}

/// Waits until `sid` runs no send: the session takes back a send whose caller is gone as soon as
/// it notices, and a send before that is refused as busy.
async fn until_free(d: &Daemon, sid: &str) {
    wait_until(Duration::from_secs(10), "the session is free", || {
        let mut c = d.client();
        let sid = sid.to_owned();
        async move {
            session_info(&mut c, AGENT, &sid)
                .await
                .is_some_and(|s| !s.busy)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_deadline_is_answered_deadline_exceeded() {
    timed(async {
        let d = start_daemon().await;
        let mut c = d.client();
        let sid = open_in(&mut c, AGENT, d.dir()).await;
        // A command that runs on, so the waits below only end at the caller's deadline.
        let mut start = send_request(AGENT, &sid, "sleep 60");
        start.timeout_ms = 200;
        c.send(start)
            .await
            .expect("the send returns at its timeout");
        let mut wait = send_request(AGENT, &sid, "");
        wait.submit = Some(false);
        wait.timeout_ms = 600_000;
        wait.idle_ms = 600_000;
        const DEADLINE_EXCEEDED: &str = "4";
        for round in 0..10 {
            until_free(&d, &sid).await;
            let (code, message) = call_with_deadline(&d.socket, "Send", &wait, 100).await;
            assert_eq!(code, DEADLINE_EXCEEDED, "round {round}: {message}");
            assert!(message.contains("deadline"), "{message}");
        }
        // A stream whose headers went out in time ends at the deadline, with the same code.
        until_free(&d, &sid).await;
        let (code, message) = call_with_deadline(&d.socket, "SendStream", &wait, 300).await;
        assert_eq!(code, DEADLINE_EXCEEDED, "SendStream: {message}");
        let watch = WatchRequest {
            agent_id: AGENT.into(),
            session_id: sid.clone(),
            replay_lines: 0,
        };
        let (code, message) = call_with_deadline(&d.socket, "Watch", &watch, 300).await;
        assert_eq!(code, DEADLINE_EXCEEDED, "Watch: {message}");
        // A call that finishes in time is answered as usual.
        let list = ptyd::pb::ListRequest {
            agent_id: AGENT.into(),
        };
        let (code, message) = call_with_deadline(&d.socket, "List", &list, 10_000).await;
        assert_eq!(code, "0", "{message}");

        // The session was released each time: a send with room to finish still works.
        let mut interrupt = send_request(AGENT, &sid, "");
        interrupt.keys = vec!["C-c".into()];
        c.send(interrupt).await.expect("C-c");
        let (done, _) = foreground(
            c.send(send_request(AGENT, &sid, "echo after"))
                .await
                .expect("send")
                .into_inner(),
        );
        assert!(done.viewport.contains("after"), "{done:?}");
        d.stop().await;
    })
    .await;
}

/// The names `ListServices` returns over one reflection protocol: `$version` is the module of
/// `tonic_reflection::pb` (`v1` or `v1alpha`, whose generated types differ only in package).
macro_rules! listed_services {
    ($version:ident, $channel:expr) => {{
        use tonic_reflection::pb::$version as r;
        let mut client = r::server_reflection_client::ServerReflectionClient::new($channel);
        let request = r::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(r::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            )),
        };
        let mut answers = client
            .server_reflection_info(tokio_stream::iter([request]))
            .await
            .expect(concat!("reflection ", stringify!($version), " answers"))
            .into_inner();
        match answers
            .message()
            .await
            .expect("an answer")
            .expect("one message")
            .message_response
        {
            Some(r::server_reflection_response::MessageResponse::ListServicesResponse(l)) => l
                .service
                .into_iter()
                .map(|s| s.name)
                .collect::<Vec<String>>(),
            other => panic!("not a service list: {other:?}"),
        }
    }};
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_reflection_protocols_list_every_service() {
    timed(async {
        let d = start_daemon().await;
        let listings = [
            ("v1", listed_services!(v1, unix_channel(&d.socket).await)),
            (
                "v1alpha",
                listed_services!(v1alpha, unix_channel(&d.socket).await),
            ),
        ];
        for (version, listed) in listings {
            for service in [
                "ptyd.v1.Terminals",
                "grpc.health.v1.Health",
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection",
            ] {
                assert!(
                    listed.iter().any(|s| s == service),
                    "reflection {version} lists {service}: {listed:?}"
                );
            }
        }

        // grpcurl (when installed) describes the service through reflection.
        let socket = d.socket.to_str().expect("UTF-8 socket path");
        match tokio::process::Command::new("grpcurl")
            .args([
                "-plaintext",
                "-unix",
                socket,
                "describe",
                "ptyd.v1.Terminals",
            ])
            .output()
            .await
        {
            Ok(out) => {
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(out.status.success(), "grpcurl describe: {out:?}");
                assert!(text.contains("rpc Open"), "{text}");
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!(
                    "grpcurl is not installed; checked with the tonic reflection clients only"
                )
            }
            Err(e) => panic!("running grpcurl: {e}"),
        }
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_user_is_refused_with_a_reason_and_reaches_nothing() {
    timed(async {
        if !nix::unistd::getuid().is_root() {
            // Switching to another uid needs root; CI runs the tests as root.
            cannot_run_here(
                "another_user_is_refused_with_a_reason_and_reaches_nothing",
                "switching to another uid needs root",
            );
            return;
        }
        let d = start_daemon().await;
        // The socket is the boundary in production (0700 directory, 0600 socket); opened up
        // here so the peer check behind it is what answers.
        std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        let socket = d.socket.display().to_string();
        // The binary from where nobody can reach it whatever the checkout's mode (CI clones into
        // a 0700 directory): a link in the daemon's directory, or a copy across filesystems.
        let binary = d.dir().join("ptyd");
        std::fs::hard_link(env!("CARGO_BIN_EXE_ptyd"), &binary)
            .or_else(|_| std::fs::copy(env!("CARGO_BIN_EXE_ptyd"), &binary).map(drop))
            .expect("put the binary where nobody reaches it");
        let as_nobody = |args: &[&str]| {
            let mut cmd = tokio::process::Command::new(&binary);
            cmd.args(args)
                .args(["--socket", &socket, "--agent", "intruder"])
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .current_dir("/")
                .uid(65534)
                .gid(65534)
                .kill_on_drop(true);
            cmd
        };
        for args in [&["list"][..], &["open"][..], &["types", "--json"][..]] {
            let out = as_nobody(args).output().await.expect("run ptyd as nobody");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
            assert!(
                stderr.starts_with("error: PERMISSION_DENIED: "),
                "{args:?}: {stderr}"
            );
            assert!(stderr.contains("belongs to root (uid 0)"), "{stderr}");
            assert!(stderr.contains("uid 65534"), "{stderr}");
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
            assert!(out.stdout.is_empty(), "{out:?}");
        }
        // The refused Open reached nothing: no session exists for that agent.
        assert!(list(&mut d.client(), "intruder").await.sessions.is_empty());
        // And the owner is still served.
        list(&mut d.client(), AGENT).await;
        d.stop().await;
    })
    .await;
}
