//! Acceptance tests of the MCP server. Each test runs the real `ptyd mcp` binary,
//! driven by the official npm MCP client SDK through the bridge in `tests/mcp/bridge.mjs`
//! (`npm ci --prefix tests/mcp` installs it; `.ci/run` does), over stdio or streamable HTTP. The
//! SDK checks every tool result's `structuredContent` against the tool's `outputSchema`, so each
//! successful call below is also a schema check.
//!
//! Unless a test starts a daemon itself, the server's socket points into an empty temp dir, so it
//! serves its own daemon in-process. Sessions get a HOME without rc files. Tests wait for events
//! and conditions with deadlines, never with fixed sleeps, and each runs under `support::timed`.

mod support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{process_is_running, timed, wait_until};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use support::bridge::EVENT_WAIT;
/// The stderr line of a server that runs its own daemon.
const IN_PROCESS_NOTE: &str = "running one inside this process";
/// JSON-RPC invalid params.
const INVALID_PARAMS: i64 = -32602;
/// The server option that gives results `structuredContent` (and tools an `outputSchema`).
const STRUCTURED: &[&str] = &["--structured"];

fn bridge_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// One MCP client (the SDK in the Node bridge) with every event it reported so far.
struct Bridge {
    node: support::bridge::NodeBridge,
    next_id: u64,
    /// tools/call requests made so far.
    tool_calls: usize,
    /// The server's pid (stdio).
    server_pid: Option<u32>,
}

/// A socket path where nothing listens, so `ptyd mcp` runs its own daemon.
fn nowhere() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("ptyd-mcp-test-")
        .tempdir()
        .expect("temp dir for the socket");
    let socket = dir.path().join("nothing-listens.sock");
    (dir, socket)
}

impl Bridge {
    /// `ptyd mcp ARGS` over stdio with `PTYD_SOCKET=socket`.
    async fn stdio(args: &[&str], socket: &Path) -> Bridge {
        Bridge::stdio_env(args, socket, &[]).await
    }

    /// `ptyd mcp ARGS` over stdio with `PTYD_SOCKET=socket` and `env` set.
    async fn stdio_env(args: &[&str], socket: &Path, env: &[(&str, &Path)]) -> Bridge {
        let mut bridge_args = vec![
            "stdio".to_owned(),
            env!("CARGO_BIN_EXE_ptyd").to_owned(),
            "mcp".to_owned(),
        ];
        bridge_args.extend(args.iter().map(|a| a.to_string()));
        Bridge::start_env(&bridge_args, socket, env).await
    }

    /// A client of the HTTP endpoint `url` with bearer `token` ("-" for none).
    async fn http(url: &str, token: &str) -> Bridge {
        let args = ["http".to_owned(), url.to_owned(), token.to_owned()];
        Bridge::start(&args, Path::new("/nonexistent")).await
    }

    async fn start(args: &[String], socket: &Path) -> Bridge {
        Bridge::start_env(args, socket, &[]).await
    }

    async fn start_env(args: &[String], socket: &Path, env: &[(&str, &Path)]) -> Bridge {
        let dir = bridge_dir();
        assert!(
            dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
            "the MCP client SDK is missing: run `npm ci --prefix tests/mcp` (.ci/run does)"
        );
        let mut command = Command::new("node");
        command
            .arg(dir.join("bridge.mjs"))
            .args(args)
            .env("PTYD_SOCKET", socket)
            .env("HOME", support::clean_home())
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stderr(Stdio::inherit());
        let mut bridge = Bridge {
            node: support::bridge::NodeBridge::spawn(command, "MCP bridge"),
            next_id: 1,
            tool_calls: 0,
            server_pid: None,
        };
        let connected = bridge
            .wait_event("the client connected", |e| {
                e["event"] == "connected" || e["event"] == "connect_failed"
            })
            .await;
        assert_eq!(connected["event"], "connected", "{connected}");
        bridge.server_pid = connected["pid"].as_u64().map(|p| p as u32);
        // The SDK validates structuredContent only for tools it has listed.
        bridge.list().await;
        bridge
    }

    async fn wait_event(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        self.node.wait_event(what, matches).await
    }

    async fn command(&mut self, command: Value) {
        self.node.command(command).await;
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    async fn response(&mut self, id: u64) -> Result<Value, Value> {
        let event = self
            .wait_event(&format!("the response to call {id}"), |e| {
                e["event"] == "response" && e["id"] == id
            })
            .await;
        match event.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(event["result"].clone()),
        }
    }

    async fn list(&mut self) -> Vec<Value> {
        let id = self.id();
        self.command(json!({"op": "list", "id": id})).await;
        let result = self.response(id).await.expect("tools/list");
        result["tools"].as_array().expect("tools").clone()
    }

    async fn info(&mut self) -> Value {
        self.command(json!({"op": "info"})).await;
        self.wait_event("server info", |e| e["event"] == "info")
            .await
    }

    /// Starts a tools/call; with `progress`, the SDK sends a progressToken and `timeout_ms`
    /// restarts at each progress notification.
    async fn start_call(
        &mut self,
        name: &str,
        arguments: Value,
        progress: bool,
        timeout_ms: u64,
    ) -> u64 {
        let id = self.id();
        self.tool_calls += 1;
        self.command(json!({
            "op": "call", "id": id, "name": name, "arguments": arguments,
            "progress": progress, "timeout": timeout_ms,
        }))
        .await;
        id
    }

    /// A tools/call's result (or the protocol error).
    async fn try_call(&mut self, name: &str, arguments: Value) -> Result<Value, Value> {
        let id = self.start_call(name, arguments, false, 120_000).await;
        self.response(id).await
    }

    /// A tools/call that succeeds (not `isError`).
    async fn call(&mut self, name: &str, arguments: Value) -> Value {
        let result = self
            .try_call(name, arguments.clone())
            .await
            .unwrap_or_else(|e| panic!("{name} {arguments}: protocol error {e}"));
        assert_ne!(result["isError"], true, "{name} {arguments}: {result}");
        result
    }

    /// A tools/call that the daemon refused: its one text block.
    async fn call_refused(&mut self, name: &str, arguments: Value) -> String {
        text(&self.call_refused_result(name, arguments).await)
    }

    /// A tools/call that the daemon refused: the whole result.
    async fn call_refused_result(&mut self, name: &str, arguments: Value) -> Value {
        let result = self
            .try_call(name, arguments.clone())
            .await
            .unwrap_or_else(|e| panic!("{name} {arguments}: protocol error {e}"));
        assert_eq!(result["isError"], true, "{name} {arguments}: {result}");
        result
    }

    /// A tools/call whose arguments do not fit: a tool execution error (SEP-1303) whose text
    /// names the argument.
    async fn call_bad_argument(&mut self, name: &str, arguments: Value) -> String {
        let refused = self.call_refused(name, arguments.clone()).await;
        assert!(
            refused.starts_with("error: invalid argument"),
            "{name} {arguments}: {refused}"
        );
        refused
    }

    /// Opens a session; its id, read from the text result.
    async fn open(&mut self) -> String {
        let result = self.call("terminal_open", json!({})).await;
        session_named(&text(&result))
    }

    async fn send(&mut self, session: &str, text: &str) -> Value {
        self.call(
            "terminal_send",
            json!({"session_id": session, "text": text}),
        )
        .await
    }

    /// The server's wire messages so far.
    fn wire(&self) -> impl Iterator<Item = &Value> {
        self.node
            .log()
            .iter()
            .filter(|e| e["event"] == "wire")
            .map(|e| &e["message"])
    }

    async fn close_client(&mut self) {
        self.command(json!({"op": "close"})).await;
        self.wait_event("the client closed", |e| e["event"] == "closed")
            .await;
    }
}

/// The one text block of a tool result.
fn text(result: &Value) -> String {
    let content = result["content"].as_array().expect("content");
    assert_eq!(content.len(), 1, "one text block: {result}");
    content[0]["text"].as_str().expect("text").to_owned()
}

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// The session id of "started terminal session t1 ...".
fn session_named(text: &str) -> String {
    text.split_whitespace()
        .skip_while(|w| *w != "session")
        .nth(1)
        .unwrap_or_else(|| panic!("no session named in {text:?}"))
        .to_owned()
}

#[tokio::test]
async fn initialize_reports_the_server_and_lists_eight_tools_with_schemas() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let info = mcp.info().await;
        assert_eq!(info["server"]["name"], "ptyd");
        assert_eq!(info["server"]["version"], env!("CARGO_PKG_VERSION"));
        assert!(info["capabilities"]["tools"].is_object(), "{info}");
        let instructions = info["instructions"].as_str().expect("instructions");
        assert!(instructions.contains("terminal_close") && instructions.contains("inferred_idle"));
        let tools = mcp.list().await;
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "terminal_open",
                "terminal_send",
                "terminal_read",
                "terminal_signal",
                "terminal_close",
                "terminal_list",
                "job_output",
                "job_kill"
            ]
        );
        for tool in &tools {
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
            assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
            assert!(tool["annotations"].is_object(), "{tool}");
        }
        let list = tools.iter().find(|t| t["name"] == "terminal_list").unwrap();
        assert_eq!(list["annotations"]["readOnlyHint"], true);
        let send = tools.iter().find(|t| t["name"] == "terminal_send").unwrap();
        assert_eq!(send["annotations"]["destructiveHint"], true);
        assert!(
            send["inputSchema"].get("required").is_none(),
            "session_id is optional (the default terminal): {send}"
        );
        let stderr: Vec<&Value> = mcp
            .node
            .log()
            .iter()
            .filter(|e| e["event"] == "stderr")
            .collect();
        assert!(
            stderr
                .iter()
                .any(|e| e["line"].as_str().unwrap_or("").contains(IN_PROCESS_NOTE)),
            "with no daemon on the socket the server runs its own: {stderr:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn echo_hi_reads_like_the_contract() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let session = mcp.open().await;
        let result = mcp.send(&session, "echo hi").await;
        assert_eq!(
            text(&result),
            "hi\n[wait: prompt]\n[exit code: 0]\n[session: running]"
        );
        let s = structured(&result);
        assert_eq!(s["wait_reason"], "prompt");
        assert_eq!(s["exit_code"], 0);
        assert_eq!(s["viewport"], "hi");
        assert_eq!(s["session_status"]["state"], "running");
        assert!(s["cwd"].as_str().is_some_and(|c| c.starts_with('/')), "{s}");
        // Every tool's result fits its schema (the SDK checks): read, list, signal, close.
        let read = mcp
            .call("terminal_read", json!({"session_id": session, "count": 5}))
            .await;
        assert!(text(&read).contains("[lines:"), "{read}");
        let list = mcp.call("terminal_list", json!({})).await;
        assert_eq!(
            structured(&list)["sessions"][0]["session_id"],
            session.as_str()
        );
        let closed = mcp
            .call("terminal_close", json!({"session_id": session}))
            .await;
        assert_eq!(structured(&closed)["outcome"], "closed");
        assert_eq!(text(&closed), format!("closed terminal session {session}"));
    })
    .await;
}

/// terminal_open's sandbox: what is in force is in the text and the structured result, a
/// denied write is the program's ordinary error, and a bad value names its argument.
#[tokio::test]
async fn terminal_open_takes_a_sandbox() {
    timed(async {
        let (dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let opened = mcp
            .call(
                "terminal_open",
                json!({"cwd": work, "sandbox": {"write": ["$CWD"], "network": "off"}}),
            )
            .await;
        let work_real = std::fs::canonicalize(&work).unwrap();
        let line = format!(
            "[sandboxed: write {}; read all; network off]",
            work_real.display()
        );
        assert!(text(&opened).contains(&line), "{}", text(&opened));
        assert_eq!(structured(&opened)["sandbox"], line[12..line.len() - 1]);
        let session = session_named(&text(&opened));
        let outside = dir.path().join("outside-file");
        let result = mcp
            .send(&session, &format!("touch {}", outside.display()))
            .await;
        assert!(
            text(&result).contains("Permission denied"),
            "{}",
            text(&result)
        );
        assert!(!outside.exists());
        let result = mcp.send(&session, "touch inside && echo ok").await;
        assert_eq!(structured(&result)["exit_code"], 0);
        let refused = mcp
            .call_bad_argument("terminal_open", json!({"sandbox": {"network": "wifi"}}))
            .await;
        assert!(refused.contains("sandbox"), "{refused}");
        let refused = mcp
            .call_bad_argument("terminal_open", json!({"sandbox": {"memory_max": "lots"}}))
            .await;
        assert!(refused.contains("sandbox.memory_max"), "{refused}");
    })
    .await;
}

#[tokio::test]
async fn wait_reasons_match_grpc() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let session = mcp.open().await;
        let read = mcp.send(&session, "read x").await;
        assert_eq!(structured(&read)["wait_reason"], "stdin_read", "{read}");
        let answered = mcp.send(&session, "value").await;
        assert_eq!(structured(&answered)["wait_reason"], "prompt", "{answered}");

        let repl = mcp.send(&session, "python3 -q").await;
        assert_eq!(structured(&repl)["wait_reason"], "stdin_read", "{repl}");
        let sum = mcp.send(&session, "1+1").await;
        assert_eq!(structured(&sum)["wait_reason"], "stdin_read", "{sum}");
        assert!(text(&sum).lines().any(|l| l == "2"), "{sum}");
        let quit = mcp.send(&session, "exit()").await;
        assert_eq!(structured(&quit)["wait_reason"], "prompt", "{quit}");

        let vim = mcp.send(&session, "vim -u NONE").await;
        assert_eq!(structured(&vim)["wait_reason"], "stdin_read", "{vim}");
        let escape = mcp
            .call(
                "terminal_send",
                json!({"session_id": session, "keys": ["Escape"]}),
            )
            .await;
        assert_eq!(structured(&escape)["wait_reason"], "stdin_read", "{escape}");
        let quit = mcp
            .call(
                "terminal_send",
                json!({"session_id": session, "text": ":q!", "submit": false, "keys": ["Enter"]}),
            )
            .await;
        assert_eq!(structured(&quit)["wait_reason"], "prompt", "{quit}");
    })
    .await;
}

#[tokio::test]
async fn text_for_a_running_command_is_refused_unless_sent_as_typeahead() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let session = mcp.open().await;
        let running = "echo one; sleep 3; echo two";
        let first = mcp
            .call(
                "terminal_send",
                json!({"session_id": session, "text": running, "idle_ms": 300}),
            )
            .await;
        assert_eq!(
            structured(&first)["wait_reason"],
            "inferred_idle",
            "{first}"
        );
        let refused = mcp
            .call_refused(
                "terminal_send",
                json!({"session_id": session, "text": "echo typed"}),
            )
            .await;
        assert!(
            refused.starts_with("error: ") && refused.contains(running),
            "{refused}"
        );
        let typed = mcp
            .call(
                "terminal_send",
                json!({"session_id": session, "text": "echo typed", "typeahead": true}),
            )
            .await;
        let result = structured(&typed);
        assert_eq!(result["wait_reason"], "prompt", "{typed}");
        assert_eq!(result["exit_code"], 0, "{typed}");
        assert_eq!(result["viewport"], "two\ntyped", "{typed}");
    })
    .await;
}

#[tokio::test]
async fn long_waits_report_progress_only_with_a_token() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let session = mcp.open().await;
        // A 3 s client timeout that restarts on progress: the 8 s command completes.
        let id = mcp
            .start_call(
                "terminal_send",
                json!({"session_id": session, "text": "sleep 8; echo done", "idle_ms": 20000}),
                true,
                3000,
            )
            .await;
        let result = mcp
            .response(id)
            .await
            .expect("the call outlives the 3 s timeout");
        assert_eq!(structured(&result)["wait_reason"], "prompt", "{result}");
        let progress: Vec<&Value> = mcp
            .node
            .log()
            .iter()
            .filter(|e| e["event"] == "progress" && e["id"] == id)
            .collect();
        assert!(progress.len() >= 2, "progress notifications: {progress:?}");
        let values: Vec<f64> = progress
            .iter()
            .map(|p| p["progress"].as_f64().unwrap())
            .collect();
        assert!(
            values.windows(2).all(|w| w[1] > w[0]),
            "increasing: {values:?}"
        );
        let times: Vec<f64> = progress.iter().map(|p| p["t"].as_f64().unwrap()).collect();
        assert!(
            times.windows(2).all(|w| w[1] - w[0] >= 900.0),
            "at most one a second: {times:?}"
        );

        let before = mcp.wire().count();
        let quiet = mcp.send(&session, "sleep 3; echo quiet").await;
        assert_eq!(structured(&quiet)["wait_reason"], "prompt");
        let stray: Vec<&Value> = mcp
            .wire()
            .skip(before)
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert!(stray.is_empty(), "no progress without a token: {stray:?}");
    })
    .await;
}

#[tokio::test]
async fn an_aborted_call_releases_the_session_while_its_command_runs() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let session = mcp.open().await;
        let id = mcp
            .start_call(
                "terminal_send",
                json!({"session_id": session, "text": "sleep 30"}),
                false,
                120_000,
            )
            .await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !is_busy(&mut mcp, &session).await {
            assert!(
                Instant::now() < deadline,
                "the send is in flight within 20 s"
            );
        }
        mcp.command(json!({"op": "abort", "id": id})).await;
        let response = mcp.response(id).await;
        assert!(response.is_err(), "the SDK reports the abort: {response:?}");
        // Released by the abort, not by the command's end: well before `sleep 30` is over. (How
        // fast is the benchmark's business, not this test's.)
        let deadline = Instant::now() + Duration::from_secs(20);
        while is_busy(&mut mcp, &session).await {
            assert!(
                Instant::now() < deadline,
                "the session is released after the abort, before the command ends"
            );
        }
        let signal = mcp
            .call(
                "terminal_signal",
                json!({"session_id": session, "signal": "SIGINT"}),
            )
            .await;
        assert_eq!(structured(&signal)["delivered"], true);
        let waited = mcp
            .call("terminal_send", json!({"session_id": session}))
            .await;
        assert_eq!(structured(&waited)["wait_reason"], "prompt", "{waited}");
        assert_eq!(structured(&waited)["exit_code"], 130, "{waited}");
    })
    .await;
}

/// Whether `terminal_list` shows `session` busy.
async fn is_busy(mcp: &mut Bridge, session: &str) -> bool {
    let list = mcp.call("terminal_list", json!({})).await;
    structured(&list)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["session_id"] == session && s["busy"] == true)
}

#[tokio::test]
async fn refusals_and_bad_arguments_are_error_results_the_model_reads() {
    timed(async {
        let daemon = support::start_daemon().await;
        let mut grpc = daemon.client();
        let foreign = support::open(&mut grpc, "someone-else").await;
        let mut mcp = Bridge::stdio(STRUCTURED, &daemon.socket).await;

        let unknown = mcp
            .call_refused("terminal_send", json!({"session_id": "t999", "text": "ls"}))
            .await;
        assert_eq!(
            unknown,
            "error: session_id \"t999\" does not name an open terminal session"
        );
        let other = mcp
            .call_refused("terminal_read", json!({"session_id": foreign}))
            .await;
        assert_eq!(
            other,
            format!("error: session_id {foreign:?} does not name an open terminal session"),
            "another agent's session looks unknown"
        );
        let session = mcp.open().await;
        let job = mcp
            .call(
                "terminal_send",
                json!({"session_id": session, "text": "sleep 30", "run_in_background": true}),
            )
            .await;
        let job_id = structured(&job)["job_id"].as_str().unwrap().to_owned();
        let busy = mcp
            .call_refused(
                "terminal_send",
                json!({"session_id": session, "text": "ls"}),
            )
            .await;
        assert!(
            busy.starts_with("error: ") && busy.contains(&job_id),
            "{busy}"
        );

        let cases = [
            (
                "terminal_read",
                json!({"session_id": session, "count": "ten"}),
                "count",
            ),
            (
                "terminal_read",
                json!({"session_id": session, "count": 0}),
                "count",
            ),
            (
                "terminal_read",
                json!({"session_id": session, "lines": 5}),
                "lines",
            ),
            (
                "terminal_send",
                json!({"session_id": "", "text": "ls"}),
                "session_id",
            ),
            (
                "terminal_send",
                json!({"session_id": session, "keys": ["Hyper"]}),
                "keys",
            ),
            (
                "terminal_signal",
                json!({"session_id": session, "signal": "SIGUSR1"}),
                "signal",
            ),
        ];
        for (tool, arguments, field) in cases {
            let message = mcp.call_bad_argument(tool, arguments.clone()).await;
            assert!(
                message.contains(&format!("`{field}")),
                "{tool} {arguments}: {message:?} names {field}"
            );
        }
        // A tool that does not exist is no tool call at all: the one JSON-RPC error left.
        let error = mcp
            .try_call("terminal_teleport", json!({}))
            .await
            .expect_err("no such tool");
        assert_eq!(error["code"], INVALID_PARAMS, "{error}");
        // Still serving.
        let killed = mcp.call("job_kill", json!({"job_id": job_id})).await;
        assert_eq!(structured(&killed)["status"], "killed");
        mcp.close_client().await;
        daemon.stop().await;
    })
    .await;
}

#[tokio::test]
async fn background_jobs_never_repeat_output() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let session = mcp.open().await;
        let job = mcp
            .call(
                "terminal_send",
                json!({
                    "session_id": session,
                    "text": "for i in 1 2 3 4; do echo line$i; sleep 0.3; done",
                    "run_in_background": true
                }),
            )
            .await;
        let job_id = structured(&job)["job_id"]
            .as_str()
            .expect("job_id")
            .to_owned();
        assert!(
            text(&job).starts_with(&format!("started background job {job_id}\n")),
            "{job}"
        );
        // The send returned with the job's first line, consumed as job_output consumes it.
        let mut output = structured(&job)["output"]
            .as_str()
            .expect("output")
            .to_owned();
        assert!(output.starts_with("line1"), "{job}");
        output.push('\n');
        let deadline = Instant::now() + EVENT_WAIT;
        let last = loop {
            let polled = mcp
                .call("job_output", json!({"job_id": job_id, "wait_ms": 500}))
                .await;
            output.push_str(structured(&polled)["output"].as_str().unwrap());
            output.push('\n');
            if structured(&polled)["status"] != "running" {
                break polled;
            }
            assert!(Instant::now() < deadline, "the job finishes");
        };
        assert_eq!(structured(&last)["status"], "completed", "{last}");
        assert_eq!(structured(&last)["wait_reason"], "prompt", "{last}");
        for n in 1..=4 {
            let line = format!("line{n}");
            assert_eq!(
                output.lines().filter(|l| *l == line).count(),
                1,
                "{line} exactly once in {output:?}"
            );
        }
        let sleeper = mcp
            .call(
                "terminal_send",
                json!({"session_id": session, "text": "sleep 100", "run_in_background": true}),
            )
            .await;
        let sleeper = structured(&sleeper)["job_id"].as_str().unwrap().to_owned();
        let killed = mcp.call("job_kill", json!({"job_id": sleeper})).await;
        assert_eq!(structured(&killed)["status"], "killed", "{killed}");
        assert_eq!(text(&killed), format!("[job: {sleeper} killed]"));
    })
    .await;
}

#[tokio::test]
async fn every_result_fits_the_cap() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let session = mcp.open().await;
        let flood = mcp
            .call(
                "terminal_send",
                json!({
                    "session_id": session,
                    "text": "head -c 10000000 /dev/zero | tr '\\0' x | fold -w 100; echo; echo END-OF-FLOOD",
                    "timeout_ms": 120000, "idle_ms": 60000
                }),
            )
            .await;
        let shown = text(&flood);
        assert!(shown.len() <= 65_536, "{} bytes", shown.len());
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines[lines.len() - 5..],
            [
                "END-OF-FLOOD",
                "[wait: prompt]",
                "[exit code: 0]",
                "[session: running]",
                "[output truncated]"
            ],
            "the tail and every metadata line"
        );
        assert_eq!(structured(&flood)["truncated"], true);
        let read = mcp
            .call("terminal_read", json!({"session_id": session, "count": 10000}))
            .await;
        assert!(text(&read).len() <= 65_536);
        assert!(text(&read).contains("[output truncated]"));
    })
    .await;
}

#[tokio::test]
async fn a_smaller_cap_and_no_background() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(
            &[
                "--structured",
                "--max-result-bytes",
                "300",
                "--no-background",
            ],
            &socket,
        )
        .await;
        let tools = mcp.list().await;
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert!(
            !names.contains(&"job_output") && !names.contains(&"job_kill"),
            "{names:?}"
        );
        let send = tools.iter().find(|t| t["name"] == "terminal_send").unwrap();
        assert!(
            send["inputSchema"]["properties"]
                .get("run_in_background")
                .is_none()
        );
        let session = mcp.open().await;
        let message = mcp
            .call_bad_argument(
                "terminal_send",
                json!({"session_id": session, "text": "ls", "run_in_background": true}),
            )
            .await;
        assert!(message.contains("run_in_background"), "{message}");
        let seq = mcp.send(&session, "seq 1 1000").await;
        assert!(text(&seq).len() <= 300, "{}", text(&seq));
        assert!(
            text(&seq).contains("1000\n[wait: prompt]"),
            "{}",
            text(&seq)
        );
    })
    .await;
}

#[tokio::test]
async fn the_daemon_can_switch_background_sends_off() {
    timed(async {
        let config = ptyd::config::Config {
            allow_background: false,
            ..Default::default()
        };
        let daemon = support::start_daemon_with(config).await;
        let mut grpc = daemon.client();
        let session = support::open(&mut grpc, "agent").await;
        let mut request = support::send_request("agent", &session, "true");
        request.run_in_background = true;
        support::expect_code(
            grpc.send(request).await,
            tonic::Code::FailedPrecondition,
            "a background send with allow_background = false",
        );
        let mut mcp = Bridge::stdio(STRUCTURED, &daemon.socket).await;
        let mine = mcp.open().await;
        let refused = mcp
            .call_refused(
                "terminal_send",
                json!({"session_id": mine, "text": "true", "run_in_background": true}),
            )
            .await;
        assert!(refused.contains("allow_background"), "{refused}");
        mcp.close_client().await;
        daemon.stop().await;

        // The in-process daemon's config switch also takes the job tools off the list.
        let config_home = tempfile::tempdir().unwrap();
        std::fs::create_dir(config_home.path().join("ptyd")).unwrap();
        std::fs::write(
            config_home.path().join("ptyd/config.toml"),
            "allow_background = false\n",
        )
        .unwrap();
        let (_dir, socket) = nowhere();
        let mut own = Bridge::stdio_env(
            STRUCTURED,
            &socket,
            &[("XDG_CONFIG_HOME", config_home.path())],
        )
        .await;
        let tools = own.list().await;
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert!(!names.contains(&"job_output"), "{names:?}");
        let send = tools.iter().find(|t| t["name"] == "terminal_send").unwrap();
        assert!(
            send["inputSchema"]["properties"]
                .get("run_in_background")
                .is_none()
        );
    })
    .await;
}

#[tokio::test]
async fn closing_stdin_leaves_no_process() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let opened = mcp.call("terminal_open", json!({})).await;
        let session = structured(&opened)["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let shell = structured(&opened)["pid"].as_u64().unwrap() as u32;
        let child = mcp.send(&session, "sleep 1000 & echo $!").await;
        let child: u32 = structured(&child)["viewport"]
            .as_str()
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .trim()
            .parse()
            .expect("the background pid");
        let server = mcp.server_pid.expect("the server's pid");
        mcp.close_client().await;
        wait_until(
            Duration::from_secs(10),
            "the server and its sessions are gone",
            || {
                let gone = ![server, shell, child].into_iter().any(process_is_running);
                async move { gone }
            },
        )
        .await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP

/// `ptyd mcp --listen 127.0.0.1:0 --token-file F` and its URL.
struct HttpServer {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl HttpServer {
    async fn start(tokens: &str) -> HttpServer {
        use std::os::unix::fs::PermissionsExt;
        let (dir, socket) = nowhere();
        let token_file = dir.path().join("tokens");
        std::fs::write(&token_file, tokens).unwrap();
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_ptyd"))
            .args([
                "mcp",
                "--structured",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
            ])
            .arg(&token_file)
            .env("PTYD_SOCKET", &socket)
            .env("HOME", support::clean_home())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start ptyd mcp --listen");
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = tokio::time::timeout(EVENT_WAIT, async {
            while let Ok(Some(line)) = stderr.next_line().await {
                if let Some(rest) = line.split("serving MCP on ").nth(1) {
                    return rest.split_whitespace().next().unwrap().to_owned();
                }
            }
            panic!("ptyd mcp --listen ended without serving");
        })
        .await
        .expect("the server announces its address");
        tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
        HttpServer {
            child,
            url,
            _dir: dir,
        }
    }
}

#[tokio::test]
async fn http_requires_a_token_and_keeps_agents_apart() {
    timed(async {
        let server = HttpServer::start("# two agents\ntoken-alice alice\ntoken-bob bob\n").await;
        let mut alice = Bridge::http(&server.url, "token-alice").await;
        let mut bob = Bridge::http(&server.url, "token-bob").await;
        let session = alice.open().await;
        let hi = alice.send(&session, "echo hi").await;
        assert_eq!(structured(&hi)["viewport"], "hi");
        let list = bob.call("terminal_list", json!({})).await;
        assert_eq!(
            structured(&list)["sessions"],
            json!([]),
            "bob sees none of alice's"
        );
        let refused = bob
            .call_refused(
                "terminal_send",
                json!({"session_id": session, "text": "ls"}),
            )
            .await;
        assert!(
            refused.contains("does not name an open terminal session"),
            "{refused}"
        );

        let initialize = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}
        })
        .to_string();
        let accept = "application/json, text/event-stream";
        let cases = [
            (
                json!({"content-type": "application/json", "accept": accept}),
                401,
            ),
            (
                json!({"content-type": "application/json", "accept": accept,
                       "authorization": "Bearer wrong"}),
                401,
            ),
            (
                json!({"content-type": "application/json", "accept": accept,
                       "authorization": "Bearer token-alice", "origin": "https://evil.example"}),
                403,
            ),
            (
                json!({"content-type": "application/json", "accept": accept,
                       "authorization": "Bearer token-alice", "origin": "http://localhost:3000"}),
                200,
            ),
        ];
        for (headers, status) in cases {
            let id = alice.id();
            alice
                .command(json!({"op": "fetch", "id": id, "url": server.url,
                                "headers": headers, "body": initialize}))
                .await;
            let response = alice.response(id).await.expect("fetch");
            assert_eq!(response["status"], status, "{headers}: {response}");
            if status == 401 {
                assert_eq!(
                    response["headers"]["www-authenticate"], "Bearer",
                    "{response}"
                );
            }
        }
        // A body that is not JSON is JSON-RPC's parse error, not a wrong content type.
        let id = alice.id();
        alice
            .command(json!({"op": "fetch", "id": id, "url": server.url,
                            "headers": {"content-type": "application/json", "accept": accept,
                                        "authorization": "Bearer token-alice"},
                            "body": "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\""}))
            .await;
        let response = alice.response(id).await.expect("fetch");
        assert_eq!(response["status"], 400, "{response}");
        let body: serde_json::Value =
            serde_json::from_str(response["body"].as_str().expect("a body")).expect("JSON");
        assert_eq!(body["error"]["code"], -32700, "{body}");
        assert_eq!(body["jsonrpc"], "2.0", "{body}");
        drop(server.child);
    })
    .await;
}

#[tokio::test]
async fn an_http_session_that_ends_closes_its_terminals() {
    timed(async {
        let server = HttpServer::start("token-carol carol\n").await;
        let mut first = Bridge::http(&server.url, "token-carol").await;
        let opened = first.call("terminal_open", json!({})).await;
        let shell = structured(&opened)["pid"].as_u64().unwrap() as u32;
        let id = first.id();
        first.command(json!({"op": "terminate", "id": id})).await;
        first.response(id).await.expect("DELETE of the MCP session");
        wait_until(
            Duration::from_secs(20),
            "the session's shell is gone",
            || {
                let running = process_is_running(shell);
                async move { !running }
            },
        )
        .await;
        let mut second = Bridge::http(&server.url, "token-carol").await;
        let list = second.call("terminal_list", json!({})).await;
        assert_eq!(structured(&list)["sessions"], json!([]), "{list}");
    })
    .await;
}

#[tokio::test]
async fn a_call_after_the_daemon_went_away_reconnects() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-mcp-reconnect-")
            .tempdir()
            .unwrap();
        let socket = dir.path().join("ptyd.sock");
        let serve = |socket: PathBuf| {
            let _ = std::fs::remove_file(&socket);
            let listener = tokio::net::UnixListener::bind(&socket).expect("bind the socket");
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            // Sessions get a HOME without rc files, as everywhere in these tests.
            let mut config = ptyd::config::Config::default();
            let home = support::clean_home().display().to_string();
            config.env_defaults.push(("HOME".into(), home));
            // A state directory of its own, not the machine user's (one daemon per directory).
            config.state_dir = Some(socket.with_file_name("state"));
            let task = tokio::spawn(ptyd::server::serve(listener, config, async move {
                let _ = stopped.await;
            }));
            (stop, task)
        };
        let (stop, task) = serve(socket.clone());
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        let before = mcp.call("terminal_list", json!({})).await;
        assert_eq!(structured(&before)["sessions"], json!([]));
        stop.send(()).unwrap();
        task.await.unwrap().expect("the daemon stopped cleanly");
        let gone = mcp.call_refused("terminal_list", json!({})).await;
        assert!(gone.contains("unavailable"), "{gone}");
        let (stop, task) = serve(socket.clone());
        let session = mcp.open().await;
        let hi = mcp.send(&session, "echo again").await;
        assert_eq!(structured(&hi)["viewport"], "again");
        mcp.close_client().await;
        stop.send(()).unwrap();
        task.await
            .unwrap()
            .expect("the second daemon stopped cleanly");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Passwords: a person types them, and nothing about them reaches the model

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_prompt_sends_the_user_to_the_web_page_when_the_client_can() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-mcp-elicit-")
            .tempdir()
            .unwrap();
        let (daemon, socket, address) =
            support::spawned::spawn_daemon_with_page(dir.path(), "a-web-token-for-the-test").await;
        // (what the client answers, or None for a client without URL-mode elicitation; the
        // line the model reads under the wait line)
        let cases = [
            (
                Some("accept"),
                Some("[your user was sent to the web page to type it; an empty send waits for the command]"),
            ),
            (Some("decline"), Some("[your user declined to type it on the web page]")),
            (None, None),
        ];
        for (answer, told) in cases {
            let mut mcp = match answer {
                Some(a) => Bridge::stdio_env(&[], &socket, &[("MCP_ELICITATION", Path::new(a))]).await,
                None => Bridge::stdio(&[], &socket).await,
            };
            let session = mcp.open().await;
            let result = mcp
                .send(&session, "read -rs secret && echo \"got ${#secret}\"")
                .await;
            let shown = text(&result);
            assert!(shown.contains("(input hidden: a password prompt;"), "{answer:?}: {shown}");
            assert!(shown.contains(&format!("on the web page http://{address}/#s=")), "{shown}");
            assert!(!shown.contains("code="), "no sign-in code reaches the model: {shown}");
            let asked: Vec<Value> = mcp
                .wire()
                .filter(|m| m["method"] == "elicitation/create")
                .cloned()
                .collect();
            match told {
                Some(line) => {
                    assert!(shown.ends_with(line), "{answer:?}: {shown}");
                    assert_eq!(asked.len(), 1, "one request: {asked:?}");
                    let params = &asked[0]["params"];
                    assert_eq!(params["mode"], "url", "{params}");
                    let url = params["url"].as_str().unwrap();
                    assert!(url.starts_with(&format!("http://{address}/#code=")), "{url}");
                    assert!(url.ends_with(&format!("%2F{session}")), "opened on the session: {url}");
                    let message = params["message"].as_str().unwrap();
                    assert!(message.contains(&session), "{message}");
                }
                None => {
                    assert!(asked.is_empty(), "not asked without the capability: {asked:?}");
                    assert!(!shown.contains("your user"), "{shown}");
                }
            }
            mcp.call("terminal_close", json!({"session_id": session})).await;
            mcp.close_client().await;
        }
        support::spawned::terminate(daemon).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// What the model receives (text by default), the default terminal, signals, protocol revisions

#[tokio::test]
async fn by_default_results_are_one_text_block_and_tools_have_no_output_schema() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(&[], &socket).await;
        let tools = mcp.list().await;
        let listed = serde_json::to_string(&json!({ "tools": tools })).unwrap();
        assert!(
            listed.len() < 10 * 1024,
            "tools/list is {} bytes",
            listed.len()
        );
        for tool in &tools {
            assert!(tool.get("outputSchema").is_none(), "{tool}");
        }
        let session = mcp.open().await;
        let results = [
            mcp.send(&session, "echo hi; false").await,
            mcp.call("terminal_read", json!({"session_id": session}))
                .await,
            mcp.call("terminal_list", json!({})).await,
            mcp.call_refused_result("terminal_send", json!({"session_id": "t99"}))
                .await,
        ];
        for result in &results {
            assert!(result.get("structuredContent").is_none(), "{result}");
            text(result);
        }
        assert_eq!(
            text(&results[0]),
            "hi\n[wait: prompt]\n[exit code: 1]\n[session: running]"
        );
    })
    .await;
}

#[tokio::test]
async fn structured_results_carry_the_rendered_text() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
        for tool in mcp.list().await {
            assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
        }
        let session = mcp.open().await;
        // The SDK validates each structuredContent against the tool's outputSchema.
        let results = [
            mcp.send(&session, "echo hi").await,
            mcp.call("terminal_read", json!({"session_id": session}))
                .await,
            mcp.call("terminal_list", json!({})).await,
        ];
        for result in &results {
            assert_eq!(structured(result)["rendered"], text(result), "{result}");
        }
        assert_eq!(structured(&results[0])["session_id"], session.as_str());
    })
    .await;
}

#[tokio::test]
async fn a_send_without_a_session_runs_in_the_default_terminal() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(&[], &socket).await;
        let first = text(
            &mcp.call(
                "terminal_send",
                json!({"text": "cd /tmp && export FOO=kept"}),
            )
            .await,
        );
        let lines: Vec<&str> = first.lines().collect();
        assert!(
            lines[0].starts_with("started terminal session ")
                && lines[0].ends_with(" as your default terminal"),
            "{first}"
        );
        let default = session_named(lines[0]);
        assert_eq!(
            lines.last().copied(),
            Some(format!("[session {default}: running]").as_str())
        );
        let again = text(
            &mcp.call("terminal_send", json!({"text": "echo $FOO; pwd"}))
                .await,
        );
        assert_eq!(
            again,
            format!("kept\n/tmp\n[wait: prompt]\n[exit code: 0]\n[session {default}: running]"),
            "the same terminal: its cwd and env stayed, and nothing was opened"
        );

        // A command still running there: the next default send gets a terminal of its own.
        let sleeping = text(
            &mcp.call("terminal_send", json!({"text": "sleep 30", "idle_ms": 200}))
                .await,
        );
        assert!(sleeping.contains("[wait: inferred_idle]"), "{sleeping}");
        let other = text(
            &mcp.call("terminal_send", json!({"text": "echo other"}))
                .await,
        );
        assert!(other.starts_with("started terminal session "), "{other}");
        let second = session_named(&other);
        assert_ne!(second, default);
        assert!(
            other.ends_with(&format!("[session {second}: running]")),
            "{other}"
        );

        // A background send always gets a session of its own, and shows its first line.
        let server = text(
            &mcp.call(
                "terminal_send",
                json!({"text": "python3 -u -m http.server 0 --bind 127.0.0.1",
                       "run_in_background": true}),
            )
            .await,
        );
        let lines: Vec<&str> = server.lines().collect();
        assert!(lines[0].ends_with(" for this background job"), "{server}");
        let job_session = session_named(lines[0]);
        assert!(![&default, &second].contains(&&job_session), "{server}");
        assert!(lines[1].starts_with("started background job j"), "{server}");
        assert!(
            server.contains("Serving HTTP on 127.0.0.1 port "),
            "the server's first line came back in the same call: {server}"
        );
        let job = lines[1].rsplit(' ').next().unwrap().to_owned();
        mcp.call("job_kill", json!({"job_id": job})).await;
        // An idle terminal used before takes the next default send; the sleeping one does not.
        let back = text(
            &mcp.call("terminal_send", json!({"text": "echo back"}))
                .await,
        );
        assert!(!back.starts_with("started terminal session"), "{back}");
        assert!(
            !back.ends_with(&format!("[session {default}: running]")),
            "{back}"
        );
    })
    .await;
}

#[tokio::test]
async fn refusals_say_what_to_do_in_tool_names() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(&[], &socket).await;
        let session = mcp.open().await;
        mcp.call(
            "terminal_send",
            json!({"session_id": session, "text": "sleep 30", "idle_ms": 200}),
        )
        .await;
        let typed = mcp
            .call_refused(
                "terminal_send",
                json!({"session_id": session, "text": "echo typed"}),
            )
            .await;
        for words in [
            "an empty terminal_send",
            "terminal_signal",
            "typeahead: true",
        ] {
            assert!(typed.contains(words), "{words:?} in {typed}");
        }
        assert!(
            !typed.contains("Signal") && !typed.contains("submit false"),
            "{typed}"
        );
        mcp.call(
            "terminal_signal",
            json!({"session_id": session, "signal": "INT"}),
        )
        .await;
        mcp.call("terminal_send", json!({"session_id": session}))
            .await;
        let job = text(
            &mcp.call(
                "terminal_send",
                json!({"session_id": session, "text": "sleep 30", "run_in_background": true,}),
            )
            .await,
        );
        assert!(job.starts_with("started background job "), "{job}");
        let busy = mcp
            .call_refused(
                "terminal_send",
                json!({"session_id": session, "text": "ls"}),
            )
            .await;
        assert!(
            busy.ends_with("wait for it with job_output or stop it with job_kill"),
            "{busy}"
        );
    })
    .await;
}

/// `ptyd mcp`, started by the SDK client (which keeps its stdin open), gets `signal`: it closes
/// the sessions it opened and exits.
async fn a_signal_ends_the_server(signal: nix::sys::signal::Signal) {
    let (_dir, socket) = nowhere();
    let mut mcp = Bridge::stdio(STRUCTURED, &socket).await;
    let opened = mcp.call("terminal_open", json!({})).await;
    let shell = structured(&opened)["pid"].as_u64().unwrap() as u32;
    let server = mcp.server_pid.expect("the server's pid");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(server as i32), signal).unwrap();
    wait_until(
        Duration::from_secs(10),
        &format!("the server exits on {signal} while its stdin is open"),
        || {
            let gone = ![server, shell].into_iter().any(process_is_running);
            async move { gone }
        },
    )
    .await;
}

#[tokio::test]
async fn sigterm_ends_the_server_with_stdin_open() {
    timed(a_signal_ends_the_server(nix::sys::signal::Signal::SIGTERM)).await;
}

#[tokio::test]
async fn sigint_ends_the_server_with_stdin_open() {
    timed(a_signal_ends_the_server(nix::sys::signal::Signal::SIGINT)).await;
}

#[tokio::test]
async fn sighup_ends_the_server_with_stdin_open() {
    timed(a_signal_ends_the_server(nix::sys::signal::Signal::SIGHUP)).await;
}

#[tokio::test]
async fn sigterm_ends_the_http_server() {
    timed(async {
        let mut server = HttpServer::start("token-dave dave\n").await;
        let mut client = Bridge::http(&server.url, "token-dave").await;
        let opened = client.call("terminal_open", json!({})).await;
        let shell = structured(&opened)["pid"].as_u64().unwrap() as u32;
        let pid = server.child.id().expect("the server runs");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = tokio::time::timeout(EVENT_WAIT, server.child.wait())
            .await
            .expect("the server exits")
            .expect("its status");
        assert!(status.success(), "{status}");
        wait_until(Duration::from_secs(10), "its session is gone", || {
            let running = process_is_running(shell);
            async move { !running }
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn every_protocol_revision_is_answered_by_a_client_that_speaks_it() {
    timed(async {
        for revision in ["2025-06-18", "2025-11-25"] {
            let (_dir, socket) = nowhere();
            let offered = Path::new(revision);
            let mut mcp =
                Bridge::stdio_env(&[], &socket, &[("MCP_PROTOCOL_VERSION", offered)]).await;
            let answered = mcp
                .wire()
                .find_map(|m| m["result"]["protocolVersion"].as_str().map(str::to_owned))
                .expect("the initialize answer");
            assert_eq!(answered, revision);
            let hi = mcp.call("terminal_send", json!({"text": "echo hi"})).await;
            assert!(text(&hi).starts_with("started terminal session"), "{hi}");
            mcp.close_client().await;
        }
        // 2026-07-28 (server/discover, stateless): the PyPI SDK `mcp` 2.x (.ci/run installs it).
        let (dir, socket) = nowhere();
        let output = Command::new("python3")
            .arg(bridge_dir().join("modern_client.py"))
            .arg(env!("CARGO_BIN_EXE_ptyd"))
            .arg("--socket")
            .arg(&socket)
            .env("HOME", support::clean_home())
            .current_dir(dir.path())
            .stderr(Stdio::inherit())
            .output()
            .await
            .expect("python3 runs the modern client");
        assert!(
            output.status.success(),
            "the PyPI MCP client (pip install 'mcp==2.3.0') failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
        assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
        assert_eq!(
            report["tools"].as_array().map(Vec::len),
            Some(8),
            "{report}"
        );
        assert!(
            report["first"]
                .as_str()
                .unwrap()
                .contains("modern\n[wait: prompt]"),
            "{report}"
        );
        assert!(
            report["second"].as_str().unwrap().starts_with("/\n"),
            "{report}"
        );
        assert!(report["structured"].is_null(), "{report}");
    })
    .await;
}

/// What one scripted agent step sends and what its text result must hold.
async fn step(mcp: &mut Bridge, arguments: Value, holds: &[&str]) -> String {
    let result = text(&mcp.call("terminal_send", arguments.clone()).await);
    for held in holds {
        assert!(result.contains(held), "{arguments}: {held:?} in {result:?}");
    }
    result
}

/// The fifteen-scenario agent run that needed 49 calls: one-shot commands, a REPL, a `read`, vim,
/// a background web server with curl and stop, an interrupt and a 200 000-line output, as a
/// model would drive them with the default terminal. The call count is the README's figure.
#[tokio::test]
async fn a_scripted_agent_needs_at_most_thirty_calls() {
    timed(async {
        let (_dir, socket) = nowhere();
        let mut mcp = Bridge::stdio(&[], &socket).await;
        let opened = step(&mut mcp, json!({"text": "cd /tmp && echo hello"}), &["hello\n[wait: prompt]"]).await;
        let t = session_named(&opened);
        step(&mut mcp, json!({"text": "ls / | grep -c ."}), &["[exit code: 0]"]).await;
        step(&mut mcp, json!({"text": "test -e /nonexistent"}), &["[exit code: 1]"]).await;
        // A REPL in the default terminal; the model names the session to answer it.
        step(&mut mcp, json!({"text": "python3 -q"}), &[">>>", "[wait: stdin_read]"]).await;
        step(&mut mcp, json!({"session_id": t, "text": "6*7"}), &["42", "[wait: stdin_read]"]).await;
        step(&mut mcp, json!({"session_id": t, "text": "exit()"}), &["[wait: prompt]"]).await;
        // A program that reads a line.
        step(&mut mcp, json!({"text": "read -p 'name? ' who"}), &["name?", "[wait: stdin_read]"]).await;
        step(&mut mcp, json!({"session_id": t, "text": "ptyd"}), &["[wait: prompt]"]).await;
        step(&mut mcp, json!({"text": "echo \"hi $who\""}), &["hi ptyd\n"]).await;
        // A full-screen editor.
        step(&mut mcp, json!({"text": "vim -u NONE -n notes.txt"}), &["[wait: stdin_read]"]).await;
        step(
            &mut mcp,
            json!({"session_id": t, "text": "iwritten in vim", "submit": false, "keys": ["Escape"]}),
            &["written in vim"],
        )
        .await;
        step(
            &mut mcp,
            json!({"session_id": t, "text": ":wq", "submit": false, "keys": ["Enter"]}),
            &["[wait: prompt]"],
        )
        .await;
        step(&mut mcp, json!({"text": "cat notes.txt"}), &["written in vim\n[wait: prompt]"]).await;
        // A web server in the background: its first line says it listens, in the same call.
        let server = step(
            &mut mcp,
            json!({"text": "python3 -u -m http.server 0 --bind 127.0.0.1", "run_in_background": true}),
            &["Serving HTTP on 127.0.0.1 port "],
        )
        .await;
        let port: u16 = server
            .split("port ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the server's port in {server:?}"));
        let job = server
            .lines()
            .find_map(|l| l.strip_prefix("started background job "))
            .expect("the job")
            .to_owned();
        step(
            &mut mcp,
            json!({"text": format!("curl -s -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{port}/")}),
            &["200\n[wait: prompt]"],
        )
        .await;
        let killed = text(&mcp.call("job_kill", json!({"job_id": job})).await);
        assert!(killed.ends_with("killed]"), "{killed}");
        // An interrupt.
        step(&mut mcp, json!({"text": "sleep 100", "idle_ms": 300}), &["[wait: inferred_idle]"]).await;
        mcp.call("terminal_signal", json!({"session_id": t, "signal": "SIGINT"}))
            .await;
        step(&mut mcp, json!({"session_id": t}), &["[wait: prompt]", "[exit code: 130]"]).await;
        // A big output: the tail comes back, and the middle is still in history.
        step(
            &mut mcp,
            json!({"text": "seq 1 200000", "timeout_ms": 120000}),
            &["200000\n[wait: prompt]", "[output truncated]"],
        )
        .await;
        // The model pages back to the middle of it (offsets count back from the newest line, the
        // prompt's).
        let middle = mcp
            .call("terminal_read", json!({"session_id": t, "offset": 99_998, "count": 5}))
            .await;
        assert!(
            text(&middle).contains("100000\n100001\n100002\n"),
            "{middle}"
        );
        assert!(mcp.tool_calls <= 30, "{} calls", mcp.tool_calls);
        eprintln!("the scripted agent made {} tool calls", mcp.tool_calls);
    })
    .await;
}

/// A raw HTTP/1.1 connection to an MCP HTTP server, to make requests by the thousand without a
/// client SDK (each SDK client is a Node process).
struct Http1 {
    stream: BufReader<tokio::net::TcpStream>,
}

/// An HTTP response: status, headers (lower-case names), body.
struct Answer {
    status: u16,
    headers: std::collections::HashMap<String, String>,
    body: String,
}

impl Http1 {
    async fn connect(url: &str) -> Http1 {
        let address = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .expect("an http:// URL");
        let stream = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect to the MCP server");
        Http1 {
            stream: BufReader::new(stream),
        }
    }

    /// A request on this connection (kept open); the body is read to its end, chunked or not.
    async fn request(
        &mut self,
        method: &str,
        token: &str,
        session: Option<&str>,
        body: &str,
    ) -> Answer {
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
             mcp-protocol-version: 2025-06-18\r\ncontent-length: {}\r\n",
            body.len()
        );
        if let Some(id) = session {
            head.push_str(&format!("mcp-session-id: {id}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        self.stream
            .get_mut()
            .write_all(head.as_bytes())
            .await
            .expect("write the request");
        let mut line = String::new();
        self.stream.read_line(&mut line).await.expect("status line");
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("a status line: {line:?}"));
        let mut headers = std::collections::HashMap::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line).await.expect("a header");
            let Some((name, value)) = line.trim_end().split_once(':') else {
                break;
            };
            headers.insert(name.to_ascii_lowercase(), value.trim().to_owned());
        }
        let mut body = Vec::new();
        if headers
            .get("transfer-encoding")
            .is_some_and(|v| v == "chunked")
        {
            loop {
                line.clear();
                self.stream
                    .read_line(&mut line)
                    .await
                    .expect("a chunk size");
                let size = usize::from_str_radix(line.trim(), 16).expect("a hex chunk size");
                let mut chunk = vec![0; size + 2];
                tokio::io::AsyncReadExt::read_exact(&mut self.stream, &mut chunk)
                    .await
                    .expect("a chunk");
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(length) = headers.get("content-length") {
            body.resize(length.parse().expect("a length"), 0);
            tokio::io::AsyncReadExt::read_exact(&mut self.stream, &mut body)
                .await
                .expect("the body");
        }
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    /// `initialize` on a new connection: the session id it made.
    async fn initialize(url: &str, token: &str) -> String {
        let answer = Http1::connect(url)
            .await
            .request("POST", token, None, &initialize_request())
            .await;
        assert_eq!(answer.status, 200, "initialize: {}", answer.body);
        answer.headers["mcp-session-id"].clone()
    }

    /// The status of the `initialized` notification on session `id`: 202 for a live session
    /// of this token, 404 for one that ended or is another token's.
    async fn initialized(url: &str, token: &str, id: &str) -> u16 {
        let body = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
        Http1::connect(url)
            .await
            .request("POST", token, Some(id), &body)
            .await
            .status
    }
}

/// An `initialize` request's body.
fn initialize_request() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}
    })
    .to_string()
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("the server's status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

#[tokio::test]
async fn http_sessions_are_bounded_per_token_and_cost_no_more_than_their_bound() {
    timed(async {
        let server = HttpServer::start("token-alice alice\ntoken-bob bob\n").await;
        let url = server.url.clone();
        let bobs = Http1::initialize(&url, "token-bob").await;
        let mut alices = Vec::new();
        for _ in 0..100 {
            alices.push(Http1::initialize(&url, "token-alice").await);
        }
        // The newest 64 of alice's live; the 36 before them were ended, and bob's is untouched.
        for (i, id) in alices.iter().enumerate() {
            let want = if i < 36 { 404 } else { 202 };
            assert_eq!(
                Http1::initialized(&url, "token-alice", id).await,
                want,
                "session {i}"
            );
        }
        assert_eq!(Http1::initialized(&url, "token-bob", &bobs).await, 202);
        // A session is its own token's.
        assert_eq!(
            Http1::initialized(&url, "token-bob", &alices[99]).await,
            404
        );
        assert_eq!(Http1::initialized(&url, "token-alice", &bobs).await, 404);

        // Thousands of sessions never ended by their client cost no more than 64 do.
        let pid = server.child.id().expect("runs");
        let before = rss_kib(pid);
        for _ in 0..2000 {
            alices.push(Http1::initialize(&url, "token-alice").await);
        }
        let grown = rss_kib(pid).saturating_sub(before);
        assert!(
            grown < 32 << 10,
            "2000 initializes grew the server by {grown} KiB"
        );
        // DELETE ends a session at once.
        let last = alices.last().unwrap();
        let answer = Http1::connect(&url)
            .await
            .request("DELETE", "token-alice", Some(last), "")
            .await;
        assert_eq!(answer.status, 202, "{}", answer.body);
        assert_eq!(Http1::initialized(&url, "token-alice", last).await, 404);
        drop(server.child);
    })
    .await;
}

#[tokio::test]
async fn idle_connections_without_a_token_cost_an_authenticated_client_nothing() {
    timed(async {
        let server = HttpServer::start("token-dan dan\n").await;
        let pid = server.child.id().expect("runs");
        let fds = || {
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .count()
        };
        // A client that made its first requests before the flood, on its one connection.
        let mut client = Http1::connect(&server.url).await;
        let answer = client
            .request("POST", "token-dan", None, &initialize_request())
            .await;
        let session = answer.headers["mcp-session-id"].clone();
        let notified = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let answer = client
            .request("POST", "token-dan", Some(&session), &notified.to_string())
            .await;
        assert_eq!(answer.status, 202);
        let before = fds();
        let address = server
            .url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap();
        // More than the gate lets in, fewer than it and the listen backlog hold together (a
        // connect beyond both would wait for the gate to close one, 10 s).
        let mut idle = Vec::new();
        for _ in 0..100 {
            idle.push(
                tokio::net::TcpStream::connect(address)
                    .await
                    .expect("connect"),
            );
        }
        wait_until(Duration::from_secs(5), "64 connections are let in", || {
            let n = fds();
            async move { n >= before + 64 }
        })
        .await;
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
        let answer = client
            .request("POST", "token-dan", Some(&session), &list)
            .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.body.contains("terminal_send"), "{}", answer.body);
        let held = fds() - before;
        assert!(
            held <= 64 + 2,
            "at most 64 unauthenticated connections held: {held}"
        );
        drop(idle);
        drop(server.child);
    })
    .await;
}
