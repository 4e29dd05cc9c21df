//! Issue 3 acceptance tests for live output: `SendStream` (the command's raw output while it runs,
//! then the same result `Send` gives), `Watch` (a second client following a session live, and
//! `ptyd watch` for a person), and a streaming caller that hangs up. Each test starts its own
//! daemon.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ptyd::pb::{
    OpenRequest, SendRequest, SendResponse, SignalRequest, WaitReason, WatchRequest, send_event,
};
use support::*;
use tokio::io::AsyncReadExt;
use tonic::Code;

const A: &str = "a";
/// The stream tests' command: coloured output, then a plain line.
const RED: &str = r"printf '\033[31mred\033[0m\n'; echo done";
/// What `RED` writes to the terminal, byte for byte.
const RED_BYTES: &[u8] = b"\x1b[31mred\x1b[0m\r\ndone\r\n";
/// A prompt no command output contains, so a test can tell the prompt was not streamed.
const PS1_MARK: &str = "PS1MARK";

fn canonical(path: impl AsRef<Path>) -> String {
    std::fs::canonicalize(path)
        .expect("canonicalize")
        .to_string_lossy()
        .into_owned()
}

/// A bash session whose prompt is `PS1MARK$ ` (a temp HOME with its own .bashrc), with a UTF-8
/// locale. The HOME directory lives as long as the returned guard.
async fn open_marked_bash(c: &mut Client) -> (String, tempfile::TempDir) {
    let home = tempfile::Builder::new()
        .prefix("ptyd-home-")
        .tempdir()
        .unwrap();
    std::fs::write(
        home.path().join(".bashrc"),
        format!("PS1='{PS1_MARK}\\$ '\n"),
    )
    .unwrap();
    let home_str = canonical(home.path());
    let sid = open_with(
        c,
        OpenRequest {
            agent_id: A.into(),
            r#type: "bash".into(),
            cwd: home_str.clone(),
            env: [
                ("HOME".to_string(), home_str),
                ("LANG".to_string(), "C.UTF-8".to_string()),
            ]
            .into(),
            ..Default::default()
        },
    )
    .await
    .session
    .expect("session")
    .session_id;
    (sid, home)
}

/// Everything a `SendStream` call delivered.
struct Streamed {
    chunks: Vec<Vec<u8>>,
    done: SendResponse,
}

impl Streamed {
    fn bytes(&self) -> Vec<u8> {
        self.chunks.concat()
    }
}

/// Runs a `SendStream` to its end; asserts that exactly one `done` event comes, and last.
async fn stream_send(c: &mut Client, req: SendRequest) -> Streamed {
    let what = format!("SendStream {:?}", req.text);
    let mut stream = c
        .send_stream(req)
        .await
        .unwrap_or_else(|s| panic!("{what}: {s:?}"))
        .into_inner();
    let mut chunks = Vec::new();
    let mut done = None;
    while let Some(event) = stream
        .message()
        .await
        .unwrap_or_else(|s| panic!("{what}: stream failed: {s:?}"))
    {
        assert!(done.is_none(), "{what}: an event after done: {event:?}");
        match event.event {
            Some(send_event::Event::Output(bytes)) => chunks.push(bytes),
            Some(send_event::Event::Done(resp)) => done = Some(resp),
            None => panic!("{what}: an empty event"),
        }
    }
    Streamed {
        chunks,
        done: done.unwrap_or_else(|| panic!("{what}: the stream ended without done")),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// Collects a Watch stream's bytes in the background; `ended` turns true when the stream ends.
struct Watcher {
    bytes: Arc<Mutex<Vec<u8>>>,
    chunks_valid_utf8: Arc<Mutex<bool>>,
    ended: Arc<Mutex<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watcher {
    async fn start(socket: &Path, sid: &str, replay_lines: u32) -> Watcher {
        // A second client on its own connection, like a person running `ptyd watch`.
        let mut c = ptyd::client::connect(socket)
            .await
            .expect("connect a watcher");
        let mut stream = c
            .watch(WatchRequest {
                agent_id: A.into(),
                session_id: sid.into(),
                replay_lines,
            })
            .await
            .expect("Watch")
            .into_inner();
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let valid = Arc::new(Mutex::new(true));
        let ended = Arc::new(Mutex::new(false));
        let (b, v, e) = (bytes.clone(), valid.clone(), ended.clone());
        let task = tokio::spawn(async move {
            while let Ok(Some(event)) = stream.message().await {
                if std::str::from_utf8(&event.output).is_err() {
                    *v.lock().unwrap() = false;
                }
                b.lock().unwrap().extend_from_slice(&event.output);
            }
            *e.lock().unwrap() = true;
            drop(c);
        });
        Watcher {
            bytes,
            chunks_valid_utf8: valid,
            ended,
            task,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        self.bytes.lock().unwrap().clone()
    }

    async fn wait_for(&self, needle: &[u8], what: &str) {
        let bytes = self.bytes.clone();
        wait_until(Duration::from_secs(20), what, || {
            let found = contains(&bytes.lock().unwrap(), needle);
            async move { found }
        })
        .await;
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn signal_request(sid: &str, name: &str) -> SignalRequest {
    SignalRequest {
        agent_id: A.into(),
        session_id: sid.into(),
        signal: name.into(),
    }
}

fn pure_wait(sid: &str, timeout_ms: u32) -> SendRequest {
    SendRequest {
        submit: Some(false),
        timeout_ms,
        idle_ms: 600_000,
        ..send_request(A, sid, "")
    }
}

// ---------------------------------------------------------------------------------------------
// SendStream

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_delivers_the_raw_command_output_then_the_result_send_gives() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let (sid, _home) = open_marked_bash(c).await;
        let streamed = stream_send(c, send_request(A, &sid, RED)).await;
        let bytes = streamed.bytes();
        let shown = String::from_utf8_lossy(&bytes);
        assert!(
            contains(&bytes, b"\x1b[31mred\x1b[0m"),
            "the colour codes are kept: {shown:?}"
        );
        assert!(!shown.contains("printf"), "no echoed command: {shown:?}");
        assert!(!shown.contains(PS1_MARK), "no next prompt: {shown:?}");
        assert!(
            !shown.contains("133;"),
            "no shell-integration marks: {shown:?}"
        );
        assert_eq!(
            bytes, RED_BYTES,
            "exactly the command's output region: {shown:?}"
        );

        let (streamed_fr, streamed_rendered) = foreground(streamed.done);
        assert_eq!(streamed_fr.wait_reason(), WaitReason::Prompt);
        assert_eq!(streamed_fr.exit_code, Some(0));
        assert_eq!(
            streamed_fr.viewport, "red\ndone",
            "the viewport is clean text"
        );

        // The same command through Send gives the same result.
        let (sent_fr, sent_rendered) = send_with(c, send_request(A, &sid, RED)).await;
        assert_eq!(streamed_rendered, sent_rendered);
        assert_eq!(streamed_fr.viewport, sent_fr.viewport);
        assert_eq!(streamed_fr.wait_reason, sent_fr.wait_reason);
        assert_eq!(streamed_fr.exit_code, sent_fr.exit_code);
        assert_eq!(streamed_fr.session_status, sent_fr.session_status);
        assert_eq!(streamed_fr.cwd, sent_fr.cwd);
        assert_eq!(streamed_fr.truncated, sent_fr.truncated);

        // A failing command streams its output and reports its status the same way.
        let streamed = stream_send(c, send_request(A, &sid, "echo oops >&2; false")).await;
        assert_eq!(streamed.bytes(), b"oops\r\n");
        let (fr, rendered) = foreground(streamed.done);
        assert_eq!(fr.exit_code, Some(1), "{fr:?}");
        assert_eq!(
            rendered,
            "oops\n[wait: prompt]\n[exit code: 1]\n[session: running]"
        );
        d.stop().await;
    })
    .await;
}

/// The output region in zsh and fish is the same as in bash: the command's bytes only.
async fn region_in(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_with(
        c,
        OpenRequest {
            agent_id: A.into(),
            r#type: shell.into(),
            cwd: "/tmp".into(),
            ..Default::default()
        },
    )
    .await
    .session
    .unwrap()
    .session_id;
    let streamed = stream_send(c, send_request(A, &sid, RED)).await;
    assert_eq!(
        String::from_utf8_lossy(&streamed.bytes()),
        String::from_utf8_lossy(RED_BYTES),
        "{shell}: exactly the command's output"
    );
    let (fr, rendered) = foreground(streamed.done);
    assert_eq!(fr.exit_code, Some(0), "{shell}: {fr:?}");
    assert_eq!(
        rendered, "red\ndone\n[wait: prompt]\n[exit code: 0]\n[session: running]",
        "{shell}"
    );
    d.stop().await;
}

crate::shell_tests!(region_in:
    send_stream_in_zsh_streams_only_the_command_output => "zsh",
    send_stream_in_fish_streams_only_the_command_output => "fish",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_of_many_lines_streams_all_of_it_and_only_it() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let (sid, _home) = open_marked_bash(c).await;
        let streamed = stream_send(c, send_request(A, &sid, "seq 1 20000")).await;
        let want: String = (1..=20_000).map(|i| format!("{i}\r\n")).collect();
        assert_eq!(
            streamed.bytes(),
            want.as_bytes(),
            "every line once, in order, nothing else"
        );
        let (fr, _) = foreground(streamed.done);
        assert_eq!(fr.wait_reason(), WaitReason::Prompt);
        assert_eq!(fr.exit_code, Some(0));
        d.stop().await;
    })
    .await;
}

/// The most output one `SendStream` event carries (docs/decisions.md, "SendStream"): far under
/// the 4 MiB message limit gRPC clients have by default.
const STREAM_EVENT_MAX: usize = 256 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stream_reader_that_falls_behind_gets_bounded_events_and_every_byte() {
    timed(async {
        let d = start_daemon().await;
        let mut c = d.client();
        let (sid, _home) = open_marked_bash(&mut c).await;
        // About 10 MB of output.
        const LAST: u32 = 1_250_000;
        let req = SendRequest {
            timeout_ms: 600_000,
            idle_ms: 600_000,
            ..send_request(A, &sid, &format!("seq 1 {LAST}"))
        };
        let mut stream = c.send_stream(req).await.expect("SendStream").into_inner();
        let mut chunks = Vec::new();
        let mut done = None;
        let mut take = |event: ptyd::pb::SendEvent| match event.event {
            Some(send_event::Event::Output(bytes)) => chunks.push(bytes),
            Some(send_event::Event::Done(resp)) => done = Some(resp),
            None => panic!("an empty event"),
        };
        take(
            stream
                .message()
                .await
                .expect("stream")
                .expect("a first event"),
        );
        // Fall behind: read nothing more until the daemon has taken in about 4 MB of the
        // output (lines up to 450000), which then waits for this reader.
        let watcher = d.client();
        wait_until(
            Duration::from_secs(100),
            "4 MB of output reached the daemon",
            || {
                let (mut w, sid) = (watcher.clone(), sid.clone());
                async move {
                    session_info(&mut w, A, &sid)
                        .await
                        .is_some_and(|info| info.total_lines >= 450_000)
                }
            },
        )
        .await;
        while let Some(event) = stream.message().await.expect("stream") {
            take(event);
        }
        let largest = chunks.iter().map(Vec::len).max().unwrap_or(0);
        assert!(
            largest <= STREAM_EVENT_MAX,
            "an output event of {largest} bytes"
        );
        let got = chunks.concat();
        let want: String = (1..=LAST).map(|i| format!("{i}\r\n")).collect();
        assert!(
            got == want.as_bytes(),
            "every byte once, in order: {} of {} bytes in {} events",
            got.len(),
            want.len(),
            chunks.len()
        );
        let (fr, _) = foreground(done.expect("done"));
        assert_eq!(fr.wait_reason(), WaitReason::Prompt);
        assert_eq!(fr.exit_code, Some(0));
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_chunks_end_on_utf8_character_boundaries() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let (sid, _home) = open_marked_bash(c).await;
        // 25 bytes a line of 3- and 4-byte characters: reads split them anywhere.
        let unit = "日本語テキスト😀";
        let cmd = format!("for i in $(seq 1 3000); do echo \"{unit}$i\"; done");
        let watcher = Watcher::start(&d.socket, &sid, 0).await;
        let c = &mut d.client;
        let streamed = stream_send(c, send_request(A, &sid, &cmd)).await;
        for (i, chunk) in streamed.chunks.iter().enumerate() {
            assert!(
                std::str::from_utf8(chunk).is_ok(),
                "chunk {i} of {} is not valid UTF-8 on its own",
                streamed.chunks.len()
            );
        }
        let want: String = (1..=3000).map(|i| format!("{unit}{i}\r\n")).collect();
        assert_eq!(
            String::from_utf8_lossy(&streamed.bytes()),
            want,
            "the chunks add up to the output"
        );
        watcher
            .wait_for(
                format!("{unit}3000\r\n").as_bytes(),
                "the watcher saw it all",
            )
            .await;
        assert!(
            *watcher.chunks_valid_utf8.lock().unwrap(),
            "every Watch chunk is valid UTF-8 on its own"
        );
        drop(watcher);
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_to_a_repl_streams_its_raw_output() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_with(
            c,
            OpenRequest {
                agent_id: A.into(),
                r#type: "python".into(),
                ..Default::default()
            },
        )
        .await
        .session
        .unwrap()
        .session_id;
        let streamed = stream_send(
            c,
            SendRequest {
                idle_ms: 600_000,
                ..send_request(A, &sid, r"print('\x1b[32mgreen\x1b[0m')")
            },
        )
        .await;
        let bytes = streamed.bytes();
        assert!(
            contains(&bytes, b"\x1b[32mgreen\x1b[0m"),
            "raw bytes, colour kept: {:?}",
            String::from_utf8_lossy(&bytes)
        );
        let (fr, _) = foreground(streamed.done);
        assert_eq!(fr.wait_reason(), WaitReason::StdinRead, "{fr:?}");
        assert!(lines(&fr.viewport).contains(&"green"), "{fr:?}");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_stream_refuses_background_and_busy_sessions() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let (sid, _home) = open_marked_bash(c).await;
        let r = c
            .send_stream(SendRequest {
                run_in_background: true,
                ..send_request(A, &sid, "echo no")
            })
            .await;
        match r {
            Err(s) => {
                assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
                assert!(s.message().contains("run_in_background"), "{s:?}");
            }
            Ok(resp) => {
                let first = resp.into_inner().message().await;
                let s = first.expect_err("a background SendStream is refused");
                assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
                assert!(s.message().contains("run_in_background"), "{s:?}");
            }
        }

        // While a streaming send waits, another send is refused as busy.
        let mut streaming = d.client();
        let req = SendRequest {
            idle_ms: 600_000,
            timeout_ms: 60_000,
            ..send_request(A, &sid, "echo started; sleep 30")
        };
        let mut stream = streaming
            .send_stream(req)
            .await
            .expect("SendStream")
            .into_inner();
        let first = stream
            .message()
            .await
            .expect("first event")
            .expect("an event");
        assert!(
            matches!(first.event, Some(send_event::Event::Output(_))),
            "{first:?}"
        );
        let c = &mut d.client;
        let r = c.send(send_request(A, &sid, "echo other")).await;
        let s = expect_code(r, Code::FailedPrecondition, "a send while SendStream waits");
        assert!(s.message().contains(&sid), "{s:?}");
        // The first output comes from `echo`: interrupt once `sleep` has the terminal (a SIGINT
        // between the two reaches bash alone, and `sleep` would run its 30 s).
        let probe = d.client();
        wait_until(Duration::from_secs(10), "sleep in the foreground", || {
            let (mut probe, sid) = (probe.clone(), sid.clone());
            async move {
                session_info(&mut probe, A, &sid)
                    .await
                    .is_some_and(|info| info.foreground == "sleep")
            }
        })
        .await;
        let c = &mut d.client;
        c.signal(signal_request(&sid, "SIGINT"))
            .await
            .expect("Signal");
        let mut done = None;
        while let Some(event) = stream.message().await.expect("stream") {
            if let Some(send_event::Event::Done(resp)) = event.event {
                done = Some(resp);
            }
        }
        let (fr, _) = foreground(done.expect("done"));
        assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{fr:?}");
        assert_eq!(fr.exit_code, Some(130), "{fr:?}");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// A streaming caller that hangs up

/// Starts `cmd` through SendStream, hangs up after `events` events, and checks the session is
/// released at once: the next send waits normally instead of failing as busy.
async fn hang_up_after(events: usize, cmd: &str) {
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let (sid, _home) = open_marked_bash(c).await;
    {
        let mut streaming = d.client();
        let req = SendRequest {
            idle_ms: 600_000,
            timeout_ms: 120_000,
            ..send_request(A, &sid, cmd)
        };
        let mut stream = streaming
            .send_stream(req)
            .await
            .expect("SendStream")
            .into_inner();
        for _ in 0..events {
            let event = stream.message().await.expect("event").expect("an event");
            assert!(
                matches!(event.event, Some(send_event::Event::Output(_))),
                "{event:?}"
            );
        }
        let watching = d.client();
        wait_until(Duration::from_secs(20), "sleep runs", || {
            let (sid, mut c) = (sid.clone(), watching.clone());
            async move {
                session_info(&mut c, A, &sid)
                    .await
                    .is_some_and(|i| i.busy && i.foreground == "sleep")
            }
        })
        .await;
        // The caller hangs up mid-command.
        drop(stream);
        drop(streaming);
    }
    let watching = d.client();
    wait_until(
        Duration::from_secs(10),
        "the hung-up SendStream released the session",
        || {
            let (sid, mut c) = (sid.clone(), watching.clone());
            async move { session_info(&mut c, A, &sid).await.is_some_and(|i| !i.busy) }
        },
    )
    .await;
    let c = &mut d.client;
    // What was written stays written: sleep still runs, and a send may wait for it.
    let r = c.send(pure_wait(&sid, 500)).await;
    let (fr, _) = foreground(
        r.expect("a send after the hang-up is accepted")
            .into_inner(),
    );
    assert_eq!(fr.wait_reason(), WaitReason::Timeout, "{fr:?}");
    c.signal(signal_request(&sid, "SIGINT"))
        .await
        .expect("Signal");
    let (fr, _) = send_with(c, pure_wait(&sid, SEND_TIMEOUT_MS)).await;
    assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{fr:?}");
    assert_eq!(fr.exit_code, Some(130), "{fr:?}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stream_caller_hanging_up_mid_output_releases_the_session() {
    timed(hang_up_after(1, "echo started; sleep 60")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_stream_caller_hanging_up_before_any_output_releases_the_session() {
    timed(hang_up_after(0, "sleep 60")).await;
}

// ---------------------------------------------------------------------------------------------
// Watch

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_a_second_client_sees_the_same_bytes_live() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let (sid, _home) = open_marked_bash(c).await;
        let watcher = Watcher::start(&d.socket, &sid, 0).await;
        let c = &mut d.client;
        let streamed = stream_send(c, send_request(A, &sid, RED)).await;
        let bytes = streamed.bytes();
        watcher
            .wait_for(&bytes, "the watcher saw the streamed output, byte for byte")
            .await;
        // The watcher sees the whole terminal: the echoed command and the prompt too.
        watcher
            .wait_for(PS1_MARK.as_bytes(), "the watcher saw the prompt")
            .await;
        assert!(contains(&watcher.bytes(), RED.as_bytes()), "the echo");

        // Live: the watcher has a running command's output while the command still runs.
        let (fr, _) = send_with(
            c,
            SendRequest {
                idle_ms: 300,
                ..send_request(A, &sid, "echo live-output; sleep 60")
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::InferredIdle, "{fr:?}");
        watcher
            .wait_for(
                b"live-output\r\n",
                "the watcher saw output of a running command",
            )
            .await;
        let info = session_info(c, A, &sid).await.unwrap();
        assert_eq!(info.foreground, "sleep", "still running: {info:?}");
        c.signal(signal_request(&sid, "SIGINT"))
            .await
            .expect("Signal");
        let (fr, _) = send_with(c, pure_wait(&sid, SEND_TIMEOUT_MS)).await;
        assert_eq!(fr.exit_code, Some(130), "{fr:?}");
        drop(watcher);
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_shuts_down_while_a_watcher_is_attached() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let (sid, _home) = open_marked_bash(c).await;
        let watcher = Watcher::start(&d.socket, &sid, 0).await;
        let c = &mut d.client;
        run_ok(c, A, &sid, "echo watched").await;
        watcher
            .wait_for(b"watched", "the watcher is attached")
            .await;
        // A person following a session with `ptyd watch` must not keep the daemon from
        // stopping: shutdown closes the session, which ends the watch.
        d.stop().await;
        let ended = watcher.ended.clone();
        wait_until(Duration::from_secs(10), "the watch ended", || {
            let ended = *ended.lock().unwrap();
            async move { ended }
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_replays_history_first_and_ends_with_the_session() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let (sid, _home) = open_marked_bash(c).await;
        run_ok(c, A, &sid, "echo replayed-line").await;
        let watcher = Watcher::start(&d.socket, &sid, 5).await;
        watcher
            .wait_for(b"replayed-line", "the replayed history")
            .await;
        let c = &mut d.client;
        let (fr, _) = send_with(c, send_request(A, &sid, "echo after-watch; exit 3")).await;
        assert_eq!(fr.wait_reason(), WaitReason::SessionExit, "{fr:?}");
        watcher.wait_for(b"after-watch", "the live output").await;
        let ended = watcher.ended.clone();
        wait_until(
            Duration::from_secs(20),
            "the watch ends with the session",
            || {
                let ended = *ended.lock().unwrap();
                async move { ended }
            },
        )
        .await;
        let all = watcher.bytes();
        let replay_at = all.windows(13).position(|w| w == b"replayed-line");
        let live_at = all.windows(11).position(|w| w == b"after-watch");
        assert!(
            replay_at < live_at,
            "the replay comes before the live output: {:?}",
            String::from_utf8_lossy(&all)
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ptyd_watch_prints_a_session_live_for_a_person() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        // The CLI's default agent is "cli".
        let sid = open(c, "cli").await;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ptyd"))
            .args(["watch", "--socket"])
            .arg(&d.socket)
            .arg(&sid)
            .env_remove("PTYD_SOCKET")
            .env_remove("PTYD_AGENT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn ptyd watch");
        let mut stdout = child.stdout.take().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        // The watcher may attach after a first command: send until one shows up in its output.
        let mut round = 0;
        let c2 = d.client();
        let sid2 = sid.clone();
        wait_until(
            Duration::from_secs(30),
            "ptyd watch prints the output",
            || {
                round += 1;
                let mut c = c2.clone();
                let sid = sid2.clone();
                let seen = seen.clone();
                let marker = format!("watched-{round}");
                async move {
                    run_ok(&mut c, "cli", &sid, &format!("echo {marker}")).await;
                    let bytes = seen.lock().unwrap().clone();
                    contains(&bytes, b"watched-")
                }
            },
        )
        .await;
        let c = &mut d.client;
        close(c, "cli", &sid).await;
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .expect("ptyd watch exits when the session ends")
            .expect("wait for ptyd watch");
        assert!(status.success(), "{status}");
        let _ = reader.await;
        d.stop().await;
    })
    .await;
}
