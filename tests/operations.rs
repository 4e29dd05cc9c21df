//! The six operations over gRPC against an in-process daemon: command output and exit
//! codes, history paging, terminal emulation, byte caps, agent isolation, malformed requests,
//! signals, close and exit, and the health service. Each test starts its own daemon.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ptyd::pb::{
    CloseOutcome, CloseRequest, JobKillRequest, JobOutputRequest, JobStatus, ListRequest,
    OpenRequest, ReadRequest, SendRequest, SignalRequest, WaitReason, WatchRequest, send_response,
};
use support::*;
use tonic::{Code, Status};

const A: &str = "a";

fn canonical(path: impl AsRef<std::path::Path>) -> String {
    std::fs::canonicalize(path)
        .expect("canonicalize")
        .to_string_lossy()
        .into_owned()
}

/// Every request the service takes, so tables can mix RPCs. The `Ok` side is a debug dump of the
/// response, for failure messages.
enum Call {
    Open(OpenRequest),
    Send(SendRequest),
    Read(ReadRequest),
    Signal(SignalRequest),
    Close(CloseRequest),
    List(ListRequest),
    Watch(WatchRequest),
    JobOutput(JobOutputRequest),
    JobKill(JobKillRequest),
}

async fn call(client: &mut Client, call: Call) -> Result<String, Status> {
    fn dump<T: std::fmt::Debug>(r: tonic::Response<T>) -> String {
        format!("{:?}", r.into_inner())
    }
    match call {
        Call::Open(r) => client.open(r).await.map(dump),
        Call::Send(r) => client.send(r).await.map(dump),
        Call::Read(r) => client.read(r).await.map(dump),
        Call::Signal(r) => client.signal(r).await.map(dump),
        Call::Close(r) => client.close(r).await.map(dump),
        Call::List(r) => client.list(r).await.map(dump),
        Call::JobOutput(r) => client.job_output(r).await.map(dump),
        Call::JobKill(r) => client.job_kill(r).await.map(dump),
        Call::Watch(r) => {
            // A refused watch may fail at the call or as the stream's first item.
            let mut stream = client.watch(r).await?.into_inner();
            match tokio::time::timeout(Duration::from_secs(5), stream.message()).await {
                Ok(Ok(item)) => Ok(format!("watch stream item {item:?}")),
                Ok(Err(status)) => Err(status),
                Err(_) => Ok("watch stream stayed open".into()),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Commands, exit codes, cwd

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_returns_only_the_command_output() {
    timed(async {
        let mut d = start_daemon().await;
        let sid = open(&mut d.client, A).await;
        let (fr, rendered) = send_with(&mut d.client, send_request(A, &sid, "echo hi")).await;
        assert_eq!(fr.viewport, "hi", "no echoed command, no prompt: {fr:?}");
        assert_eq!(fr.wait_reason(), WaitReason::Prompt);
        assert_eq!(fr.exit_code, Some(0));
        assert!(!fr.truncated);
        assert_eq!(
            fr.session_status.as_ref().map(|s| s.state.as_str()),
            Some("running")
        );
        assert_eq!(
            rendered,
            "hi\n[wait: prompt]\n[exit code: 0]\n[session: running]"
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_reports_the_session_and_list_and_types_show_it() {
    timed(async {
        let mut d = start_daemon().await;
        let cwd = canonical(d.dir());
        let opened = open_with(
            &mut d.client,
            OpenRequest {
                agent_id: A.into(),
                name: "main".into(),
                cwd: cwd.clone(),
                ..Default::default()
            },
        )
        .await;
        let info = opened.session.expect("session info");
        let sid = info.session_id.clone();
        assert!(sid.starts_with('t'), "session ids are t1, t2, ...: {sid}");
        assert_eq!(info.name, "main");
        assert_eq!(info.r#type, "shell");
        assert_eq!((info.cols, info.rows), (120, 40), "default size");
        assert_eq!(info.cwd, cwd);
        assert!(info.pid > 0);
        assert_eq!(
            info.status.as_ref().map(|s| s.state.as_str()),
            Some("running")
        );
        assert!(
            opened.rendered.starts_with(&format!(
                "started terminal session {sid} (main) [type: shell]\n"
            )),
            "{:?}",
            opened.rendered
        );

        let listed = list(&mut d.client, A).await;
        assert_eq!(listed.sessions.len(), 1);
        assert_eq!(listed.sessions[0].session_id, sid);
        assert_eq!(
            listed.rendered,
            format!("{sid} (main) [shell] running pid={}", info.pid)
        );

        let types = d
            .client
            .types(ptyd::pb::TypesRequest {})
            .await
            .expect("Types")
            .into_inner();
        let shell = types
            .types
            .iter()
            .find(|t| t.name == "shell")
            .expect("the built-in shell type is registered");
        assert!(
            ["bash", "zsh", "fish"].contains(&shell.integration.as_str()),
            "shell is integrated: {shell:?}"
        );
        assert!(!shell.argv.is_empty());
        assert!(types.rendered.contains("shell"), "{:?}", types.rendered);
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_are_reported() {
    timed(async {
        let mut d = start_daemon().await;
        let sid = open(&mut d.client, A).await;
        for (cmd, code) in [("true", 0), ("false", 1), ("(exit 42)", 42)] {
            let (fr, rendered) = send_with(&mut d.client, send_request(A, &sid, cmd)).await;
            assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{cmd}: {fr:?}");
            assert_eq!(fr.exit_code, Some(code), "{cmd}: {fr:?}");
            assert_eq!(fr.viewport, "", "{cmd} prints nothing: {fr:?}");
            assert_eq!(
                rendered,
                format!("(no new output)\n[wait: prompt]\n[exit code: {code}]\n[session: running]")
            );
        }
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_changes_the_reported_cwd() {
    timed(async {
        let mut d = start_daemon().await;
        let sid = open(&mut d.client, A).await;
        let tmp = canonical("/tmp");
        let fr = send(&mut d.client, A, &sid, "cd /tmp").await;
        assert_eq!(fr.exit_code, Some(0));
        assert_eq!(fr.cwd, tmp, "ForegroundResult.cwd follows cd");
        let info = session_info(&mut d.client, A, &sid).await.expect("listed");
        assert_eq!(info.cwd, tmp, "SessionInfo.cwd is read live");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// History paging

/// Lines that are exactly a decimal number, in page order.
fn numbers(text: &str) -> Vec<u64> {
    text.split('\n').filter_map(|l| l.parse().ok()).collect()
}

fn numbered_lines(range: std::ops::RangeInclusive<u64>) -> String {
    range.map(|n| n.to_string()).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_pages_follow_the_contract_arithmetic() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open(c, A).await;
        let out = run_ok(c, A, &sid, "seq 1 5000").await;
        assert_eq!(
            out,
            numbered_lines(1..=5000),
            "the viewport holds all of seq's output"
        );

        // Newest page: ends at the newest line.
        let page = read_page(c, A, &sid, 0, 100).await;
        let total = page.total_lines;
        assert_eq!(page.first_line, 1, "nothing dropped yet");
        assert_eq!(page.line_end, total);
        assert_eq!(page.line_begin, total - 99);
        assert!(!page.truncated);
        assert_eq!(lines(&page.text).len(), 100, "{:?}", page.text);
        assert_eq!(
            page.rendered,
            format!(
                "{}\n[lines: {}-{} of {}]",
                page.text, page.line_begin, page.line_end, total
            )
        );
        let nums = numbers(&page.text);
        assert!(
            nums.len() >= 90,
            "the newest page is mostly seq output (blank rows below the cursor are not lines): {:?}",
            page.text
        );
        assert_eq!(*nums.last().unwrap(), 5000);
        assert!(
            nums.windows(2).all(|w| w[1] == w[0] + 1),
            "in order: {nums:?}"
        );

        // Where seq's lines sit in absolute numbering.
        let idx = lines(&page.text).iter().position(|l| *l == "5000").unwrap() as u64;
        let line_of_5000 = page.line_begin + idx;
        let line_of_1 = line_of_5000 - 4999;
        assert!(line_of_1 >= 1);

        // offset pages end `offset` lines before the newest.
        let offset = total - line_of_5000;
        let back = read_page(c, A, &sid, offset, 100).await;
        assert_eq!(back.line_end, total - offset);
        assert_eq!(back.line_begin, back.line_end - 99);
        assert_eq!(back.text, numbered_lines(4901..=5000));

        // count beyond the history starts at first_line: max(first_line, end - count + 1).
        let all = read_page(c, A, &sid, 0, 10000).await;
        assert_eq!(all.line_begin, all.first_line);
        assert_eq!(all.line_end, total);
        assert_eq!(lines(&all.text).len() as u64, total - all.first_line + 1);

        // from_line pages by absolute number and stays stable while output arrives.
        let fixed = read_from(c, A, &sid, line_of_1, 100).await;
        assert_eq!(fixed.text, numbered_lines(1..=100));
        assert_eq!(
            (fixed.line_begin, fixed.line_end),
            (line_of_1, line_of_1 + 99)
        );
        assert_eq!(
            fixed.rendered,
            format!(
                "{}\n[lines: {}-{} of {}]",
                fixed.text,
                line_of_1,
                line_of_1 + 99,
                total
            )
        );
        run_ok(c, A, &sid, "seq 1 300").await;
        let later = read_from(c, A, &sid, line_of_1, 100).await;
        assert!(
            later.total_lines >= total + 300,
            "{} -> {}",
            total,
            later.total_lines
        );
        assert_eq!(later.text, fixed.text);
        assert_eq!(
            (later.line_begin, later.line_end),
            (fixed.line_begin, fixed.line_end)
        );

        // Pages outside the history are empty, not errors.
        let beyond = read_from(c, A, &sid, later.total_lines + 10, 100).await;
        assert_eq!(beyond.text, "");
        assert_eq!((beyond.line_begin, beyond.line_end), (0, 0));
        assert!(
            beyond.rendered.contains("(no retained output)"),
            "{:?}",
            beyond.rendered
        );
        let too_far_back = read_page(c, A, &sid, later.total_lines + 5, 100).await;
        assert_eq!(too_far_back.text, "");
        assert!(too_far_back.rendered.contains("(no retained output)"));
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Terminal emulation

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_are_applied_like_a_terminal() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_utf8(c, A).await;
        let cases: &[(&str, &str, &str)] = &[
            ("colour is dropped", r"printf '\033[31mred\033[0m\n'", "red"),
            (
                "carriage return overwrites",
                r"printf 'a 10%%\rb 100%%\n'",
                "b 100%",
            ),
            (
                "cursor-up rewrite",
                r"printf 'line1 ....\nline2 ....\n\033[2A\rline1 DONE\n\n'",
                "line1 DONE\nline2 ....",
            ),
            ("backspace", r"printf 'abc\b\bX\n'", "aXc"),
            ("erase line", r"printf 'hello\r\033[Kbye\n'", "bye"),
            ("trailing spaces trimmed", r"printf 'pad   \n'", "pad"),
            (
                "wide and combining characters kept",
                r"printf 'cafe\xcc\x81 日本\n'",
                "cafe\u{301} 日本",
            ),
        ];
        for (what, cmd, want) in cases {
            let (fr, rendered) = send_with(c, send_request(A, &sid, cmd)).await;
            assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{what}: {fr:?}");
            assert_eq!(fr.viewport, *want, "{what}: {cmd}");
            assert!(
                !rendered.contains('\u{1b}'),
                "{what}: no ESC in {rendered:?}"
            );
        }

        // A line wider than the terminal wraps on screen but reads back as one line.
        let wide = run_ok(c, A, &sid, r"printf 'x%.0s' $(seq 1 300); echo").await;
        assert_eq!(wide, "x".repeat(300), "wrapped lines are joined");
        let page = read_page(c, A, &sid, 0, 50).await;
        assert!(
            lines(&page.text).contains(&"x".repeat(300).as_str()),
            "{:?}",
            page.text
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_keeps_the_screen_in_history() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open(c, A).await;
        run_ok(c, A, &sid, "echo before; clear").await;
        let history = read_page(c, A, &sid, 0, 500).await;
        assert!(
            lines(&history.text).contains(&"before"),
            "history keeps what clear wiped: {:?}",
            history.text
        );
        let screen = read_screen(c, A, &sid).await;
        assert!(
            !lines(&screen.text).contains(&"before"),
            "the screen itself was cleared: {:?}",
            screen.text
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_screen_program_shows_on_screen_but_not_in_history() {
    timed(async {
        let mut d = start_daemon().await;
        let cwd = canonical(d.dir());
        let c = &mut d.client;
        let sid = open_with(
            c,
            OpenRequest {
                agent_id: A.into(),
                cwd,
                ..Default::default()
            },
        )
        .await
        .session
        .unwrap()
        .session_id;
        // seq writes to the file, not the terminal: no numbers reach the history this way.
        run_ok(c, A, &sid, "seq 1 200 > f").await;

        let (fr, _) = send_with(
            c,
            SendRequest {
                idle_ms: 500,
                ..send_request(A, &sid, "less f")
            },
        )
        .await;
        assert!(
            matches!(
                fr.wait_reason(),
                WaitReason::StdinRead | WaitReason::InferredIdle
            ),
            "less waits for a key: {fr:?}"
        );
        assert_eq!(
            numbers(&fr.viewport).first(),
            Some(&1),
            "the viewport is the visible screen: {:?}",
            fr.viewport
        );
        let screen = read_screen(c, A, &sid).await;
        let shown = lines(&screen.text);
        assert!(shown.len() >= 30, "{:?}", screen.text);
        assert_eq!(
            shown[..30].join("\n"),
            numbered_lines(1..=30),
            "less's screen"
        );

        let (fr, _) = send_with(
            c,
            SendRequest {
                submit: Some(false),
                ..send_request(A, &sid, "q")
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::Prompt, "q quits less: {fr:?}");

        let history = read_page(c, A, &sid, 0, 10000).await;
        for line in lines(&history.text) {
            assert!(
                line.parse::<u64>().is_err()
                    && line != "f"
                    && line != ":"
                    && !line.contains("(END)"),
                "the pager's screen leaked into history: {line:?} in {:?}",
                history.text
            );
        }
        let screen = read_screen(c, A, &sid).await;
        assert!(
            numbers(&screen.text).is_empty(),
            "primary screen restored: {:?}",
            screen.text
        );
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Byte caps

/// 25 UTF-8 bytes: CJK (3 bytes each) and an emoji (4 bytes); 16 columns on screen.
const UNIT: &str = "日本語テキスト😀";
const UNIT_CMD: &str = r"printf '日本語テキスト😀%.0s' $(seq 1 200); echo";
const META: [&str; 3] = ["[wait: prompt]", "[exit code: 0]", "[session: running]"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_results_fit_every_cap_and_keep_the_tail() {
    // Strings here are Rust `String`s decoded by prost: invalid UTF-8 would fail the RPC itself.
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_utf8(c, A).await;
        let full = UNIT.repeat(200);
        for cap in [64u32, 65, 100, 1000, 16 * 1024 * 1024] {
            let (fr, rendered) = send_with(
                c,
                SendRequest {
                    max_result_bytes: cap,
                    ..send_request(A, &sid, UNIT_CMD)
                },
            )
            .await;
            let cap = cap as usize;
            assert_eq!(fr.wait_reason(), WaitReason::Prompt, "cap {cap}: {fr:?}");
            assert!(
                rendered.len() <= cap,
                "cap {cap}: rendered is {} bytes",
                rendered.len()
            );
            assert!(
                fr.viewport.len() <= cap,
                "cap {cap}: viewport is {} bytes",
                fr.viewport.len()
            );
            assert!(
                rendered.contains("[wait: prompt]"),
                "cap {cap}: {rendered:?}"
            );
            assert!(
                full.ends_with(&fr.viewport),
                "cap {cap}: the tail is kept: {:?}",
                fr.viewport
            );
            if cap >= full.len() + 100 {
                assert!(!fr.truncated, "cap {cap}");
                assert_eq!(fr.viewport, full, "wide characters survive wrapping");
                assert_eq!(rendered, format!("{full}\n{}", META.join("\n")));
            } else {
                assert!(
                    fr.truncated,
                    "cap {cap}: a {}-byte output was cut",
                    full.len()
                );
            }
            if fr.truncated && cap >= 100 {
                for meta in META {
                    assert!(
                        rendered.contains(meta),
                        "cap {cap}: {meta} kept in {rendered:?}"
                    );
                }
                assert!(
                    rendered.ends_with("\n[output truncated]"),
                    "cap {cap}: {rendered:?}"
                );
                assert!(
                    rendered.starts_with(&fr.viewport),
                    "cap {cap}: {rendered:?}"
                );
            }
            if cap == 1000 {
                assert!(
                    fr.viewport.len() >= cap / 2,
                    "room left unused: {:?}",
                    fr.viewport
                );
            }
        }

        // Below the minimum is refused, naming the field.
        let r = c
            .send(SendRequest {
                max_result_bytes: 63,
                ..send_request(A, &sid, "echo no")
            })
            .await;
        expect_invalid(r, "max_result_bytes", "Send with max_result_bytes 63");

        // Open's rendering fits the minimum cap and keeps the id.
        let opened = open_with(
            c,
            OpenRequest {
                agent_id: A.into(),
                max_result_bytes: 64,
                ..Default::default()
            },
        )
        .await;
        let sid2 = opened.session.unwrap().session_id;
        assert!(opened.rendered.len() <= 64, "{:?}", opened.rendered);
        assert!(opened.rendered.contains(&sid2), "{:?}", opened.rendered);
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_cut_at_every_position_stays_valid_and_within_the_cap() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_utf8(c, A).await;
        run_ok(c, A, &sid, UNIT_CMD).await;
        let full = UNIT.repeat(200);
        let page = read_page(c, A, &sid, 0, 50).await;
        let idx = lines(&page.text)
            .iter()
            .position(|l| *l == full)
            .expect("the joined output line is in history") as u64;
        let line = page.line_begin + idx;

        for cap in 64u32..=200 {
            let r = read_with(
                c,
                ReadRequest {
                    agent_id: A.into(),
                    session_id: sid.clone(),
                    from_line: Some(line),
                    count: 1,
                    max_result_bytes: cap,
                    ..Default::default()
                },
            )
            .await;
            let cap = cap as usize;
            assert!(
                r.rendered.len() <= cap,
                "cap {cap}: {} bytes",
                r.rendered.len()
            );
            assert!(r.text.len() <= cap, "cap {cap}");
            assert!(r.truncated, "cap {cap}");
            assert!(
                full.ends_with(&r.text),
                "cap {cap}: tail kept: {:?}",
                r.text
            );
            assert_eq!((r.line_begin, r.line_end), (line, line), "cap {cap}");
            assert!(
                r.rendered.contains("[lines: "),
                "cap {cap}: {:?}",
                r.rendered
            );
            assert!(
                r.rendered.ends_with("[output truncated]"),
                "cap {cap}: {:?}",
                r.rendered
            );
        }
        let r = c
            .read(ReadRequest {
                agent_id: A.into(),
                session_id: sid.clone(),
                max_result_bytes: 63,
                ..Default::default()
            })
            .await;
        expect_invalid(r, "max_result_bytes", "Read with max_result_bytes 63");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Isolation

fn session_calls(agent: &str, sid: &str) -> Vec<(&'static str, Call)> {
    vec![
        (
            "Send",
            Call::Send(send_request(agent, sid, "echo intruder")),
        ),
        (
            "Read",
            Call::Read(ReadRequest {
                agent_id: agent.into(),
                session_id: sid.into(),
                ..Default::default()
            }),
        ),
        (
            "Signal",
            Call::Signal(SignalRequest {
                agent_id: agent.into(),
                session_id: sid.into(),
                signal: "SIGINT".into(),
            }),
        ),
        (
            "Watch",
            Call::Watch(WatchRequest {
                agent_id: agent.into(),
                session_id: sid.into(),
                replay_lines: 10,
            }),
        ),
        (
            "Close",
            Call::Close(CloseRequest {
                agent_id: agent.into(),
                session_id: sid.into(),
            }),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_reach_another_agents_session() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open(c, "a").await;
        let unknown = "t999";
        let foreign = session_calls("b", &sid);
        let missing = session_calls("b", unknown);
        for ((rpc, f), (_, m)) in foreign.into_iter().zip(missing) {
            let f = expect_code(call(c, f).await, Code::NotFound, &format!("{rpc} by b"));
            let m = expect_code(
                call(c, m).await,
                Code::NotFound,
                &format!("{rpc} of {unknown}"),
            );
            assert_same_not_found(&f, &sid, &m, unknown);
        }
        let b = list(c, "b").await;
        assert!(b.sessions.is_empty(), "{b:?}");
        assert_eq!(b.rendered, "(no terminal sessions)");

        // The owner's session is untouched, including by b's Close and Signal.
        assert_eq!(run_ok(c, "a", &sid, "echo mine").await, "mine");
        assert_eq!(list(c, "a").await.sessions.len(), 1);
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_cannot_reach_another_agents_job() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open(c, "a").await;
        let job = finished_job(c, "a", &sid, "echo done").await;

        let out = |agent: &str, id: &str| {
            Call::JobOutput(JobOutputRequest {
                agent_id: agent.into(),
                job_id: id.into(),
                ..Default::default()
            })
        };
        let kill = |agent: &str, id: &str| {
            Call::JobKill(JobKillRequest {
                agent_id: agent.into(),
                job_id: id.into(),
            })
        };
        let f = expect_code(
            call(c, out("b", &job)).await,
            Code::NotFound,
            "JobOutput by b",
        );
        let m = expect_code(
            call(c, out("b", "j999")).await,
            Code::NotFound,
            "JobOutput j999",
        );
        assert_same_not_found(&f, &job, &m, "j999");
        let f = expect_code(
            call(c, kill("b", &job)).await,
            Code::NotFound,
            "JobKill by b",
        );
        let m = expect_code(
            call(c, kill("b", "j999")).await,
            Code::NotFound,
            "JobKill j999",
        );
        assert_same_not_found(&f, &job, &m, "j999");

        // The owner still reaches its job.
        call(c, out("a", &job))
            .await
            .expect("JobOutput by the owner");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Malformed requests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_name_the_field_and_change_nothing() {
    timed(async {
        let mut d = start_daemon().await;
        let dir = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open(c, A).await;
        let a_file = dir.join("a-file");
        std::fs::write(&a_file, "not a directory").unwrap();

        let open_req = |f: &dyn Fn(&mut OpenRequest)| {
            let mut r = OpenRequest {
                agent_id: A.into(),
                ..Default::default()
            };
            f(&mut r);
            Call::Open(r)
        };
        let send_req = |f: &dyn Fn(&mut SendRequest)| {
            let mut r = send_request(A, &sid, "echo should-not-run");
            f(&mut r);
            Call::Send(r)
        };
        let read_req = |f: &dyn Fn(&mut ReadRequest)| {
            let mut r = ReadRequest {
                agent_id: A.into(),
                session_id: sid.clone(),
                ..Default::default()
            };
            f(&mut r);
            Call::Read(r)
        };
        let signal_req = |signal: &str| {
            Call::Signal(SignalRequest {
                agent_id: A.into(),
                session_id: sid.clone(),
                signal: signal.into(),
            })
        };
        let env = |name: &str| HashMap::from([(name.to_string(), "v".to_string())]);

        let table: Vec<(&str, Call, &str)> = vec![
            (
                "empty agent_id",
                open_req(&|r| r.agent_id.clear()),
                "agent_id",
            ),
            (
                "129-byte agent_id",
                open_req(&|r| r.agent_id = "x".repeat(129)),
                "agent_id",
            ),
            (
                "agent_id with BEL",
                open_req(&|r| r.agent_id = "a\u{7}b".into()),
                "agent_id",
            ),
            (
                "agent_id with newline",
                open_req(&|r| r.agent_id = "a\nb".into()),
                "agent_id",
            ),
            (
                "List with empty agent_id",
                Call::List(ListRequest {
                    agent_id: String::new(),
                }),
                "agent_id",
            ),
            (
                "Send with empty agent_id",
                send_req(&|r| r.agent_id.clear()),
                "agent_id",
            ),
            (
                "unknown type",
                open_req(&|r| r.r#type = "nosuchtype".into()),
                "type",
            ),
            (
                "missing cwd",
                open_req(&|r| r.cwd = "/nonexistent/ptyd-test".into()),
                "cwd",
            ),
            (
                "cwd is a file",
                open_req(&|r| r.cwd = a_file.to_string_lossy().into_owned()),
                "cwd",
            ),
            (
                "env name with '='",
                open_req(&|r| r.env = env("A=B")),
                "env",
            ),
            ("empty env name", open_req(&|r| r.env = env("")), "env"),
            (
                "env name with NUL",
                open_req(&|r| r.env = env("A\0B")),
                "env",
            ),
            // One rule for names, the config file's: letters, digits and _, not a digit first.
            (
                "env name with '-'",
                open_req(&|r| r.env = env("A-B")),
                "env",
            ),
            (
                "env name starting with a digit",
                open_req(&|r| r.env = env("1X")),
                "env",
            ),
            (
                "env value with NUL",
                open_req(&|r| r.env = HashMap::from([("A".to_string(), "x\0y".to_string())])),
                "env",
            ),
            (
                "129-byte name",
                open_req(&|r| r.name = "n".repeat(129)),
                "name",
            ),
            ("cols 19", open_req(&|r| r.cols = 19), "cols"),
            ("cols 1001", open_req(&|r| r.cols = 1001), "cols"),
            ("rows 4", open_req(&|r| r.rows = 4), "rows"),
            ("rows 1001", open_req(&|r| r.rows = 1001), "rows"),
            (
                "Open max_result_bytes 63",
                open_req(&|r| r.max_result_bytes = 63),
                "max_result_bytes",
            ),
            (
                "Open max_result_bytes 16 MiB + 1",
                open_req(&|r| r.max_result_bytes = 16 * 1024 * 1024 + 1),
                "max_result_bytes",
            ),
            (
                "Send empty session_id",
                send_req(&|r| r.session_id.clear()),
                "session_id",
            ),
            (
                "timeout_ms 600001",
                send_req(&|r| r.timeout_ms = 600_001),
                "timeout_ms",
            ),
            ("idle_ms 49", send_req(&|r| r.idle_ms = 49), "idle_ms"),
            (
                "idle_ms 600001",
                send_req(&|r| r.idle_ms = 600_001),
                "idle_ms",
            ),
            (
                "Send max_result_bytes 63",
                send_req(&|r| r.max_result_bytes = 63),
                "max_result_bytes",
            ),
            (
                "unknown key",
                send_req(&|r| {
                    r.text.clear();
                    r.submit = Some(false);
                    r.keys = vec!["Bogus".into()];
                }),
                "keys",
            ),
            (
                "text over 1 MiB",
                send_req(&|r| {
                    r.text = "x".repeat(1024 * 1024 + 1);
                    r.submit = Some(false);
                }),
                "text",
            ),
            (
                "Read empty session_id",
                read_req(&|r| r.session_id.clear()),
                "session_id",
            ),
            ("count 10001", read_req(&|r| r.count = 10_001), "count"),
            (
                "Read max_result_bytes 63",
                read_req(&|r| r.max_result_bytes = 63),
                "max_result_bytes",
            ),
            ("unknown signal", signal_req("SIGFOO"), "signal"),
            ("empty signal", signal_req(""), "signal"),
            (
                "Signal empty session_id",
                Call::Signal(SignalRequest {
                    agent_id: A.into(),
                    session_id: String::new(),
                    signal: "SIGINT".into(),
                }),
                "session_id",
            ),
            (
                "Close empty session_id",
                Call::Close(CloseRequest {
                    agent_id: A.into(),
                    session_id: String::new(),
                }),
                "session_id",
            ),
            (
                "Watch empty session_id",
                Call::Watch(WatchRequest {
                    agent_id: A.into(),
                    session_id: String::new(),
                    replay_lines: 0,
                }),
                "session_id",
            ),
        ];
        for (what, req, field) in table {
            expect_invalid(call(c, req).await, field, what);
        }

        // The type error lists the known types.
        let s = expect_code(
            call(c, open_req(&|r| r.r#type = "nosuchtype".into())).await,
            Code::InvalidArgument,
            "unknown type",
        );
        assert!(
            s.message().contains("shell"),
            "lists known types: {:?}",
            s.message()
        );

        // The bounds themselves are accepted.
        let edge = open_with(
            c,
            OpenRequest {
                agent_id: "x".repeat(128),
                cols: 20,
                rows: 5,
                ..Default::default()
            },
        )
        .await
        .session
        .unwrap();
        assert_eq!((edge.cols, edge.rows), (20, 5));
        close(c, &"x".repeat(128), &edge.session_id).await;

        // Nothing was created, nothing ran, and the session still works.
        let listed = list(c, A).await;
        assert_eq!(
            listed.sessions.len(),
            1,
            "failed Opens leave nothing: {listed:?}"
        );
        assert_eq!(run_ok(c, A, &sid, "echo still-ok").await, "still-ok");
        let history = read_page(c, A, &sid, 0, 10000).await;
        assert!(
            !lines(&history.text).contains(&"should-not-run"),
            "a refused Send wrote nothing: {:?}",
            history.text
        );
        d.stop().await;
    })
    .await;
}

/// Starts `cmd` as a background job of `sid` and waits until the job settled; returns its id.
async fn finished_job(c: &mut Client, agent: &str, sid: &str, cmd: &str) -> String {
    let resp = c
        .send(SendRequest {
            run_in_background: true,
            background_wait_ms: Some(0),
            ..send_request(agent, sid, cmd)
        })
        .await
        .expect("background send")
        .into_inner();
    let Some(send_response::Result::Background(_)) = resp.result else {
        panic!("expected a job: {resp:?}");
    };
    let job = resp.job_id.clone();
    assert!(
        resp.rendered
            .starts_with(&format!("started background job {job}\n")),
        "{resp:?}"
    );
    let (client, agent, id) = (c.clone(), agent.to_string(), job.clone());
    wait_until(Duration::from_secs(30), "the job completes", move || {
        let (mut client, agent, job) = (client.clone(), agent.clone(), id.clone());
        async move {
            let r = client
                .job_output(JobOutputRequest {
                    agent_id: agent,
                    job_id: job,
                    wait_ms: 1000,
                    ..Default::default()
                })
                .await
                .expect("JobOutput by the owner")
                .into_inner();
            r.status() == JobStatus::Completed
        }
    })
    .await;
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_job_requests_name_the_field() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open(c, A).await;
        let job = finished_job(c, A, &sid, "echo out").await;
        let output = |f: &dyn Fn(&mut JobOutputRequest)| {
            let mut r = JobOutputRequest {
                agent_id: A.into(),
                job_id: job.clone(),
                ..Default::default()
            };
            f(&mut r);
            Call::JobOutput(r)
        };
        let table: Vec<(&str, Call, &str)> = vec![
            (
                "JobOutput empty agent_id",
                output(&|r| r.agent_id.clear()),
                "agent_id",
            ),
            (
                "JobOutput empty job_id",
                output(&|r| r.job_id.clear()),
                "job_id",
            ),
            (
                "wait_ms 600001",
                output(&|r| r.wait_ms = 600_001),
                "wait_ms",
            ),
            (
                "JobOutput max_result_bytes 63",
                output(&|r| r.max_result_bytes = 63),
                "max_result_bytes",
            ),
            (
                "JobKill empty job_id",
                Call::JobKill(JobKillRequest {
                    agent_id: A.into(),
                    job_id: String::new(),
                }),
                "job_id",
            ),
        ];
        for (what, req, field) in table {
            expect_invalid(call(c, req).await, field, what);
        }
        // A well-formed request still works.
        call(c, output(&|_| {}))
            .await
            .expect("JobOutput after malformed requests");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_longer_than_the_kernel_limit_is_delivered_whole_or_refused() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open(c, A).await;
        let (fr, _) = send_with(
            c,
            SendRequest {
                idle_ms: 500,
                ..send_request(A, &sid, "read x")
            },
        )
        .await;
        assert!(
            matches!(
                fr.wait_reason(),
                WaitReason::StdinRead | WaitReason::InferredIdle
            ),
            "read waits for input: {fr:?}"
        );
        let long = "y".repeat(5000);
        let want = match c.send(send_request(A, &sid, &long)).await {
            Ok(resp) => {
                let (fr, _) = foreground(resp.into_inner());
                assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{fr:?}");
                "5000"
            }
            Err(s) => {
                assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
                assert!(s.message().contains("text"), "{:?}", s.message());
                // Refused means nothing was written: read still waits for its line.
                let fr = send(c, A, &sid, "short").await;
                assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{fr:?}");
                "5"
            }
        };
        assert_eq!(
            run_ok(c, A, &sid, "echo ${#x}").await,
            want,
            "no input silently lost"
        );
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Signals

fn signal(agent: &str, sid: &str, sig: &str) -> SignalRequest {
    SignalRequest {
        agent_id: agent.into(),
        session_id: sid.into(),
        signal: sig.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_reach_the_foreground_program() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let opened = open_with(
            c,
            OpenRequest {
                agent_id: A.into(),
                ..Default::default()
            },
        )
        .await;
        let info = opened.session.unwrap();
        let (sid, shell_pid) = (info.session_id, info.pid as i32);

        for (name, canonical_name, code) in [("SIGINT", "SIGINT", 130), ("term", "SIGTERM", 143)] {
            let started = Instant::now();
            let (fr, _) = send_with(
                c,
                SendRequest {
                    idle_ms: 300,
                    ..send_request(A, &sid, "sleep 30")
                },
            )
            .await;
            assert_eq!(fr.wait_reason(), WaitReason::InferredIdle, "{fr:?}");
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{:?}",
                started.elapsed()
            );
            let info = session_info(c, A, &sid).await.unwrap();
            assert_eq!(info.foreground, "sleep", "{info:?}");

            let sent = c
                .signal(signal(A, &sid, name))
                .await
                .expect("Signal")
                .into_inner();
            assert!(sent.delivered);
            assert!(
                sent.target_pgid > 0 && sent.target_pgid != shell_pid,
                "{sent:?}"
            );
            assert_eq!(
                sent.rendered,
                format!(
                    "delivered {canonical_name} to foreground process group {}",
                    sent.target_pgid
                )
            );

            // An empty send only waits: the shell reports how sleep ended.
            let (fr, _) = send_with(
                c,
                SendRequest {
                    submit: Some(false),
                    ..send_request(A, &sid, "")
                },
            )
            .await;
            assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{fr:?}");
            assert_eq!(fr.exit_code, Some(code), "{name}: {fr:?}");
        }

        // SIGKILL at the shell itself is refused; the shell lives on.
        for name in ["SIGKILL", "kill"] {
            let r = c.signal(signal(A, &sid, name)).await;
            let s = expect_code(r, Code::FailedPrecondition, &format!("{name} at the shell"));
            assert!(!s.message().is_empty());
        }
        assert_eq!(run_ok(c, A, &sid, "echo alive").await, "alive");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_while_the_shell_exits_reach_its_group_or_are_refused() {
    timed(async {
        let d = start_daemon().await;
        let mut c = d.client();
        let opened = open_with(
            &mut c,
            OpenRequest {
                agent_id: A.into(),
                ..Default::default()
            },
        )
        .await;
        let info = opened.session.unwrap();
        let (sid, shell) = (info.session_id, info.pid as i32);
        // An interactive bash ignores SIGTERM: signals keep arriving while it exits.
        let mut sender = d.client();
        let exit_req = send_request(A, &sid, "exit 0");
        let exiting = tokio::spawn(async move { send_with(&mut sender, exit_req).await });
        let mut delivered = 0;
        let refusal = loop {
            match c.signal(signal(A, &sid, "SIGTERM")).await {
                Ok(sent) => {
                    let sent = sent.into_inner();
                    assert_eq!(sent.target_pgid, shell, "only the shell's group: {sent:?}");
                    delivered += 1;
                }
                Err(status) => break status,
            }
        };
        assert_eq!(refusal.code(), Code::FailedPrecondition, "{refusal:?}");
        assert!(
            refusal.message().contains("has exited")
                || refusal
                    .message()
                    .contains("has no foreground process group"),
            "the contract's refusal, not a failed delivery: {refusal:?} after {delivered} delivered"
        );
        let (fr, _) = exiting.await.expect("the exit send");
        assert_eq!(fr.wait_reason(), WaitReason::SessionExit, "{fr:?}");
        let after = c.signal(signal(A, &sid, "SIGINT")).await;
        let s = expect_code(after, Code::FailedPrecondition, "Signal after the exit");
        assert!(s.message().contains("has exited"), "{s:?}");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Close and exit

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_the_session_and_everything_it_started() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open(c, A).await;
        let shell_pid = session_info(c, A, &sid).await.unwrap().pid;
        let out = run_ok(c, A, &sid, "sleep 300 >/dev/null 2>&1 & echo bg=$!").await;
        let bg_pid: u32 = out
            .lines()
            .find_map(|l| l.strip_prefix("bg="))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("background pid in {out:?}"));
        assert!(process_is_running(bg_pid));

        let closed = close(c, A, &sid).await;
        assert_eq!(closed.session_id, sid);
        assert_eq!(closed.outcome(), CloseOutcome::Closed);
        assert_eq!(closed.rendered, format!("closed terminal session {sid}"));
        // Close returns only when the processes are gone.
        assert!(
            !process_is_running(shell_pid),
            "shell {shell_pid} still runs"
        );
        assert!(
            !process_is_running(bg_pid),
            "background sleep {bg_pid} still runs"
        );

        let again = call(
            c,
            Call::Close(CloseRequest {
                agent_id: A.into(),
                session_id: sid.clone(),
            }),
        )
        .await;
        let again = expect_code(again, Code::NotFound, "second Close");
        let unknown = expect_code(
            call(
                c,
                Call::Close(CloseRequest {
                    agent_id: A.into(),
                    session_id: "t999".into(),
                }),
            )
            .await,
            Code::NotFound,
            "Close t999",
        );
        assert_same_not_found(&again, &sid, &unknown, "t999");
        expect_code(
            call(c, Call::Send(send_request(A, &sid, "echo gone"))).await,
            Code::NotFound,
            "Send after Close",
        );
        let listed = list(c, A).await;
        assert!(listed.sessions.is_empty(), "{listed:?}");
        assert_eq!(listed.rendered, "(no terminal sessions)");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exited_shell_stays_listed_until_closed() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open(c, A).await;
        let (fr, rendered) = send_with(c, send_request(A, &sid, "exit 3")).await;
        assert_eq!(fr.wait_reason(), WaitReason::SessionExit, "{fr:?}");
        assert_eq!(fr.exit_code, Some(3));
        let status = fr.session_status.clone().expect("session_status");
        assert_eq!(
            (status.state.as_str(), status.exit_code),
            ("exited", Some(3))
        );
        assert_eq!(status.signal, None);
        assert!(
            rendered.ends_with(
                "[wait: session_exit]\n[exit code: 3]\n[session: exited code=3 signal=null]"
            ),
            "{rendered:?}"
        );

        let listed = list(c, A).await;
        assert_eq!(listed.sessions.len(), 1);
        let st = listed.sessions[0].status.clone().unwrap();
        assert_eq!((st.state.as_str(), st.exit_code), ("exited", Some(3)));
        assert_eq!(
            listed.rendered,
            format!("{sid} [shell] exited code=3 signal=null")
        );

        // Still readable; no longer writable or signalable.
        let history = read_page(c, A, &sid, 0, 100).await;
        assert!(history.text.contains("exit 3"), "{:?}", history.text);
        expect_code(
            call(c, Call::Send(send_request(A, &sid, "echo late"))).await,
            Code::FailedPrecondition,
            "Send to an exited session",
        );
        expect_code(
            call(c, Call::Signal(signal(A, &sid, "SIGINT"))).await,
            Code::FailedPrecondition,
            "Signal to an exited session",
        );

        assert_eq!(close(c, A, &sid).await.outcome(), CloseOutcome::Closed);
        assert!(list(c, A).await.sessions.is_empty());
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Health

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_check_answers_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    timed(async {
        let d = start_daemon().await;
        let mut health = HealthClient::new(unix_channel(&d.socket).await);
        let r = health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect("Health/Check")
            .into_inner();
        assert_eq!(r.status(), ServingStatus::Serving);
        drop(health);
        d.stop().await;
    })
    .await;
}
