//! Acceptance tests of the ACP shim. Each test runs the real `ptyd acp` binary over
//! stdio, driven by the official npm ACP client SDK through the bridge in `tests/acp/bridge.mjs`
//! (`npm ci --prefix tests/acp` installs it; `.ci/run` does), in terminal mode (Zed's
//! `clientCapabilities._meta.terminal_output`) and fallback mode. Assertions read the agent's raw
//! wire lines (exact keys, order, timing) and check that the SDK accepted every update.
//!
//! Unless a test starts a daemon itself, the shim's socket points into an empty temp dir, so it
//! serves its own daemon in-process. Tests wait for events and conditions with deadlines, never
//! with fixed sleeps, and each runs under `support::timed`.

mod support;

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{process_is_running, timed, wait_until};
use tokio::process::Command;

use support::bridge::EVENT_WAIT;
/// The per-command output cap of the shim.
const CAP: usize = 256 * 1024;
/// The note that ends capped output names this.
const CAP_NOTE: &str = "bytes left out; /read pages the full history]";
/// The stderr line of a shim that runs its own daemon.
const IN_PROCESS_NOTE: &str = "running one inside this process";

// ---------------------------------------------------------------------------------------------
// The bridge

/// Terminal mode sends Zed's capabilities; fallback sends none.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Terminal,
    Fallback,
}

/// One `ptyd acp` behind the Node bridge, with every event it reported so far.
struct Bridge {
    node: support::bridge::NodeBridge,
    next_id: u64,
    agent_pid: u32,
    _socket_dir: tempfile::TempDir,
}

/// What one prompt produced: the `session/update`s of its session in wire order (with the
/// bridge's receive times, ms) and its stop reason.
#[derive(Debug)]
struct Turn {
    stop: String,
    updates: Vec<Value>,
    times: Vec<f64>,
}

fn bridge_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp")
}

impl Bridge {
    /// Starts the shim with `args` after `acp`; its socket is a path where nothing listens.
    async fn start(args: &[&str]) -> Bridge {
        let socket_dir = tempfile::Builder::new()
            .prefix("ptyd-acp-test-")
            .tempdir()
            .expect("temp dir for the socket");
        let socket = socket_dir.path().join("nothing-listens.sock");
        Bridge::start_with(args, &socket, socket_dir).await
    }

    /// Starts the shim with `args`, pointing `PTYD_SOCKET` at `socket`.
    async fn start_with(args: &[&str], socket: &Path, socket_dir: tempfile::TempDir) -> Bridge {
        let dir = bridge_dir();
        assert!(
            dir.join("node_modules/@agentclientprotocol/sdk").is_dir(),
            "the ACP client SDK is missing: run `npm ci --prefix tests/acp` (.ci/run does)"
        );
        let mut command = Command::new("node");
        command
            .arg(dir.join("bridge.mjs"))
            .arg(env!("CARGO_BIN_EXE_ptyd"))
            .arg("acp")
            .args(args)
            .env("PTYD_SOCKET", socket)
            .env("RUST_LOG", "warn")
            .env_remove("PTYD_AGENT")
            .stderr(Stdio::inherit());
        let mut bridge = Bridge {
            node: support::bridge::NodeBridge::spawn(command, "ACP bridge"),
            next_id: 1,
            agent_pid: 0,
            _socket_dir: socket_dir,
        };
        let spawned = bridge
            .wait_event("the agent started", |e| e["event"] == "spawned")
            .await;
        bridge.agent_pid = spawned["pid"].as_u64().expect("agent pid") as u32;
        bridge
    }

    async fn next_event(&mut self, what: &str) -> Value {
        self.node.next_event(what).await
    }

    async fn wait_event(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        self.node.wait_event(what, matches).await
    }

    async fn command(&mut self, command: Value) {
        self.node.command(command).await;
    }

    /// Sends a request through the SDK; returns its bridge id.
    async fn start_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.command(json!({"op": "request", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The SDK's result (or error) for request `id`.
    async fn response(&mut self, id: u64) -> Result<Value, Value> {
        let event = self
            .wait_event(&format!("the response to request {id}"), |e| {
                e["event"] == "response" && e["id"] == id
            })
            .await;
        match event.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(event["result"].clone()),
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.start_request(method, params).await;
        self.response(id).await
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.command(json!({"op": "notify", "method": method, "params": params}))
            .await;
    }

    /// `initialize` with Zed's capabilities (terminal mode) or none (fallback).
    async fn initialize(&mut self, mode: Mode) -> Value {
        let capabilities = match mode {
            Mode::Terminal => json!({
                "fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true,
                "auth": {"terminal": true},
                "_meta": {"terminal_output": true, "terminal-auth": true}}),
            Mode::Fallback => json!({}),
        };
        let params = json!({"protocolVersion": 1, "clientCapabilities": capabilities,
                            "clientInfo": {"name": "ptyd-tests", "version": "0.0.1"}});
        self.request("initialize", params)
            .await
            .unwrap_or_else(|e| panic!("initialize failed: {e}"))
    }

    /// `session/new` in `cwd`; returns the session id.
    async fn new_session(&mut self, cwd: &Path) -> String {
        let result = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await
            .unwrap_or_else(|e| panic!("session/new failed: {e}"));
        let session = result["sessionId"]
            .as_str()
            .expect("sessionId is a string")
            .to_owned();
        self.wait_event("the slash command list", |e| {
            e["event"] == "update"
                && e["params"]["sessionId"] == session.as_str()
                && e["params"]["update"]["sessionUpdate"] == "available_commands_update"
        })
        .await;
        session
    }

    /// A started shim, initialized in `mode`, with one session in a fresh temp dir.
    async fn ready(mode: Mode, args: &[&str]) -> (Bridge, String, tempfile::TempDir) {
        let mut bridge = Bridge::start(args).await;
        bridge.initialize(mode).await;
        let cwd = tempfile::Builder::new()
            .prefix("ptyd-acp-cwd-")
            .tempdir()
            .expect("session cwd");
        let session = bridge.new_session(cwd.path()).await;
        (bridge, session, cwd)
    }

    /// The log position, for `turn_since`.
    fn mark(&self) -> usize {
        self.node.log().len()
    }

    /// Sends a prompt and waits for its answer.
    async fn prompt(&mut self, session: &str, text: &str) -> Turn {
        let mark = self.mark();
        let id = self.start_prompt(session, text).await;
        self.finish_prompt(session, id, mark).await
    }

    async fn start_prompt(&mut self, session: &str, text: &str) -> u64 {
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        self.start_request("session/prompt", params).await
    }

    /// Waits for prompt `id`'s answer and collects the turn from log position `mark`.
    async fn finish_prompt(&mut self, session: &str, id: u64, mark: usize) -> Turn {
        let result = self
            .response(id)
            .await
            .unwrap_or_else(|e| panic!("session/prompt failed: {e}"));
        let stop = result["stopReason"]
            .as_str()
            .expect("stopReason")
            .to_owned();
        self.sdk_caught_up().await;
        self.turn_since(session, mark, stop)
    }

    /// The session's updates on the wire since `mark`.
    fn turn_since(&self, session: &str, mark: usize, stop: String) -> Turn {
        let mut updates = Vec::new();
        let mut times = Vec::new();
        for (message, t) in wire_messages(&self.node.log()[mark..]) {
            if message["method"] == "session/update" && message["params"]["sessionId"] == session {
                updates.push(message["params"]["update"].clone());
                times.push(t);
            }
        }
        Turn {
            stop,
            updates,
            times,
        }
    }

    /// Waits until the SDK's handler has seen every `session/update` on the wire so far (it
    /// validates each against the schema, so a rejected one never arrives and this times out).
    async fn sdk_caught_up(&mut self) {
        loop {
            let on_wire = wire_messages(self.node.log())
                .filter(|(m, _)| m["method"] == "session/update")
                .count();
            let accepted = self
                .node
                .log()
                .iter()
                .filter(|e| e["event"] == "update")
                .count();
            assert!(
                accepted <= on_wire,
                "the SDK saw updates that were not on the wire"
            );
            if accepted == on_wire {
                return;
            }
            self.next_event("the SDK to accept every session/update")
                .await;
        }
    }

    /// Closes the agent's stdin and waits for it to exit; returns its exit code.
    async fn close_and_wait_exit(&mut self) -> Value {
        self.command(json!({"op": "close_stdin"})).await;
        let exit = self
            .wait_event("the agent exited", |e| e["event"] == "exit")
            .await;
        exit["code"].clone()
    }

    /// The agent's stderr lines so far.
    fn stderr_lines(&self) -> Vec<String> {
        self.node
            .log()
            .iter()
            .filter(|e| e["event"] == "stderr")
            .filter_map(|e| e["line"].as_str().map(str::to_owned))
            .collect()
    }
}

/// The JSON-RPC messages among `events`' wire lines, with their receive times.
fn wire_messages(events: &[Value]) -> impl Iterator<Item = (Value, f64)> + '_ {
    events.iter().filter(|e| e["event"] == "wire").map(|e| {
        let line = e["line"].as_str().expect("wire line");
        let message: Value = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("the agent wrote a non-JSON line {line:?}: {err}"));
        (message, e["t"].as_f64().unwrap_or(0.0))
    })
}

// ---------------------------------------------------------------------------------------------
// Reading turns

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn key_set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

impl Turn {
    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.updates
            .iter()
            .filter(|u| u["sessionUpdate"] == kind)
            .collect()
    }

    /// The turn's only tool call.
    fn tool_call(&self) -> &Value {
        let calls = self.of_kind("tool_call");
        assert_eq!(
            calls.len(),
            1,
            "one tool call per prompt: {:#?}",
            self.updates
        );
        calls[0]
    }

    /// The `terminal_output` updates, in order.
    fn output_updates(&self) -> Vec<&Value> {
        self.updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_none())
            .collect()
    }

    /// Everything the terminal-output updates carried, joined.
    fn streamed(&self) -> String {
        self.output_updates()
            .iter()
            .map(|u| {
                u["_meta"]["terminal_output"]["data"]
                    .as_str()
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The update that finished the tool call.
    fn final_update(&self) -> &Value {
        let finals: Vec<&Value> = self
            .updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_some())
            .collect();
        assert_eq!(finals.len(), 1, "one final update: {:#?}", self.updates);
        finals[0]
    }

    /// The agent messages' text, joined.
    fn messages(&self) -> String {
        self.of_kind("agent_message_chunk")
            .iter()
            .map(|u| u["content"]["text"].as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Position of the first update matching `matches`.
    fn position(&self, matches: impl Fn(&Value) -> bool) -> usize {
        self.updates
            .iter()
            .position(matches)
            .unwrap_or_else(|| panic!("update not found in {:#?}", self.updates))
    }

    /// The text of the final update's one text content item (generic calls, fallback mode).
    fn final_text(&self) -> String {
        let content = &self.final_update()["content"];
        assert_eq!(
            content.as_array().map(Vec::len),
            Some(1),
            "one content item: {content}"
        );
        assert_eq!(content[0]["type"], "content");
        assert_eq!(content[0]["content"]["type"], "text");
        content[0]["content"]["text"]
            .as_str()
            .expect("text")
            .to_owned()
    }
}

/// Asserts a terminal-mode command's card, as Zed reads it (acceptance 1): the tool call with
/// terminal content and `terminal_info`, updates carrying only `terminal_output`, a final update
/// with status, rawOutput and (when it ended) `terminal_exit`; no update with content.
#[track_caller]
fn assert_terminal_card(turn: &Turn, command: &str, cwd: &str) {
    let call = turn.tool_call();
    let id = call["toolCallId"].as_str().expect("toolCallId").to_owned();
    assert_eq!(
        *call,
        json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": command,
               "kind": "execute", "status": "in_progress",
               "content": [{"type": "terminal", "terminalId": id}],
               "rawInput": {"command": command, "cwd": cwd},
               "_meta": {"terminal_info": {"terminal_id": id, "cwd": cwd}}}),
        "the first notification of a terminal send"
    );
    assert_eq!(turn.position(|u| u["sessionUpdate"] == "tool_call"), 0);
    for update in turn.output_updates() {
        assert_eq!(
            keys(update),
            key_set(&["sessionUpdate", "toolCallId", "_meta"]),
            "a streaming update carries only _meta.terminal_output: {update}"
        );
        assert_eq!(update["toolCallId"], id.as_str());
        assert_eq!(keys(&update["_meta"]), key_set(&["terminal_output"]));
        assert_eq!(
            keys(&update["_meta"]["terminal_output"]),
            key_set(&["terminal_id", "data"])
        );
        assert_eq!(
            update["_meta"]["terminal_output"]["terminal_id"],
            id.as_str()
        );
    }
    let last = turn.final_update();
    assert_eq!(last["toolCallId"], id.as_str());
    assert!(
        keys(last).is_subset(&key_set(&[
            "sessionUpdate",
            "toolCallId",
            "status",
            "rawOutput",
            "_meta"
        ])),
        "the final update has no content in terminal mode: {last}"
    );
    assert_eq!(
        keys(&last["rawOutput"]),
        key_set(&["formatted_output", "exit_code", "wait_reason"])
    );
    if let Some(meta) = last.get("_meta") {
        assert_eq!(keys(meta), key_set(&["terminal_exit"]));
        assert_eq!(
            keys(&meta["terminal_exit"]),
            key_set(&["terminal_id", "exit_code", "signal"])
        );
        assert_eq!(meta["terminal_exit"]["terminal_id"], id.as_str());
    }
    let final_at =
        turn.position(|u| u.get("status").is_some() && u["sessionUpdate"] == "tool_call_update");
    assert!(
        turn.updates[1..final_at]
            .iter()
            .all(|u| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_none()),
        "only terminal_output updates between the tool call and its end: {:#?}",
        turn.updates
    );
    let with_info = turn
        .updates
        .iter()
        .filter(|u| u["_meta"].get("terminal_info").is_some())
        .count();
    assert_eq!(with_info, 1, "terminal_info only on the tool call");
    assert!(
        turn.updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update")
            .all(|u| u.get("content").is_none()),
        "no tool_call_update carries content: {:#?}",
        turn.updates
    );
}

/// Asserts a fallback-mode turn has no terminal fields at all and ends with one console block;
/// returns that block's text.
#[track_caller]
fn assert_fallback_card(turn: &Turn, command: &str, cwd: &str) -> String {
    let call = turn.tool_call();
    let id = call["toolCallId"].as_str().expect("toolCallId");
    assert_eq!(
        *call,
        json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": command,
               "kind": "execute", "status": "in_progress",
               "rawInput": {"command": command, "cwd": cwd}}),
    );
    assert!(
        turn.updates
            .iter()
            .all(|u| !u.to_string().contains("\"terminal_")),
        "no _meta.terminal_* in fallback mode: {:#?}",
        turn.updates
    );
    let last = turn.final_update();
    assert!(last.get("_meta").is_none(), "{last}");
    assert_eq!(
        turn.updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update")
            .count(),
        1,
        "fallback mode does not stream: {:#?}",
        turn.updates
    );
    turn.final_text()
}

fn cwd_of(dir: &tempfile::TempDir) -> String {
    std::fs::canonicalize(dir.path())
        .expect("canonical cwd")
        .to_string_lossy()
        .into_owned()
}

// ---------------------------------------------------------------------------------------------
// Processes

/// `(pid, ppid, comm)` of every process.
fn processes() -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let ppid = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        out.push((pid, ppid, comm));
    }
    out
}

/// Every live descendant of `root`, with its command name.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let all = processes();
    let mut found = vec![root];
    let mut out = Vec::new();
    while let Some(parent) = found.pop() {
        for (pid, ppid, comm) in &all {
            if *ppid == parent {
                found.push(*pid);
                out.push((*pid, comm.clone()));
            }
        }
    }
    out.retain(|(pid, _)| process_is_running(*pid));
    out
}

/// Pids whose command line contains `needle`.
fn pids_running(needle: &str) -> Vec<u32> {
    processes()
        .into_iter()
        .map(|(pid, _, _)| pid)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(needle)
                })
                .unwrap_or(false)
        })
        .filter(|pid| process_is_running(*pid))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// 1. The terminal card

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_and_session_new_answer_as_specified() {
    timed(async {
        let mut bridge = Bridge::start(&[]).await;
        let init = bridge.initialize(Mode::Terminal).await;
        assert_eq!(init["protocolVersion"], 1);
        assert_eq!(init["authMethods"], json!([]));
        assert_eq!(init["agentInfo"]["name"], "ptyd");
        assert_eq!(init["agentInfo"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(
            init["agentCapabilities"]["promptCapabilities"],
            json!({"image": false, "audio": false, "embeddedContext": false}),
            "text-only prompts"
        );
        let missing = tempfile::tempdir().expect("dir").path().join("missing");
        let error = bridge
            .request("session/new", json!({"cwd": missing, "mcpServers": []}))
            .await
            .expect_err("a session in a missing directory cannot open");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains("cwd"),
            "the daemon's reason: {error}"
        );
        assert_eq!(
            error["code"], -32602,
            "a bad cwd is the client's parameter: invalid params, not internal: {error}"
        );

        let cwd = tempfile::tempdir().expect("cwd");
        let mark = bridge.mark();
        let session = bridge.new_session(cwd.path()).await;
        let turn = bridge.turn_since(&session, mark, String::new());
        assert_eq!(turn.updates.len(), 1, "{:#?}", turn.updates);
        let names: Vec<&str> = turn.updates[0]["availableCommands"]
            .as_array()
            .expect("availableCommands")
            .iter()
            .map(|c| c["name"].as_str().expect("name"))
            .collect();
        assert_eq!(
            turn.updates[0]["sessionUpdate"],
            "available_commands_update"
        );
        assert_eq!(
            names,
            [
                "read", "screen", "history", "grep", "signal", "bg", "job", "kill", "list", "close"
            ]
        );
        // The response came before the update that names its session.
        let order: Vec<bool> = wire_messages(&bridge.node.log()[mark..])
            .map(|(m, _)| m.get("result").is_some())
            .collect();
        assert_eq!(
            order.first(),
            Some(&true),
            "session/new answered first: {order:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_mode_shows_a_command_as_the_terminal_card() {
    timed(async {
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &[]).await;
        std::fs::write(dir.path().join("alpha.txt"), "a").expect("file");
        std::fs::write(dir.path().join("beta.txt"), "b").expect("file");
        let cwd = cwd_of(&dir);
        let turn = bridge.prompt(&session, "ls").await;
        assert_eq!(turn.stop, "end_turn");
        assert_terminal_card(&turn, "ls", &cwd);
        assert!(!turn.output_updates().is_empty(), "ls output streams");
        let streamed = turn.streamed();
        assert!(
            streamed.contains("alpha.txt") && streamed.contains("beta.txt"),
            "{streamed:?}"
        );
        let last = turn.final_update();
        assert_eq!(last["status"], "completed");
        assert_eq!(last["rawOutput"]["exit_code"], 0);
        assert_eq!(last["rawOutput"]["wait_reason"], "prompt");
        assert!(
            last["rawOutput"]["formatted_output"]
                .as_str()
                .unwrap()
                .contains("alpha.txt")
        );
        assert_eq!(
            last["_meta"]["terminal_exit"],
            json!({"terminal_id": turn.tool_call()["toolCallId"], "exit_code": 0, "signal": null})
        );
        assert!(
            turn.of_kind("agent_message_chunk").is_empty(),
            "{:#?}",
            turn.updates
        );

        // A second command gets a new id and its own terminal_info; the cwd follows the shell.
        std::fs::create_dir(dir.path().join("sub")).expect("dir");
        let turn = bridge.prompt(&session, "cd sub").await;
        assert_terminal_card(&turn, "cd sub", &cwd);
        let turn = bridge.prompt(&session, "pwd").await;
        assert_terminal_card(&turn, "pwd", &format!("{cwd}/sub"));
        assert_ne!(turn.tool_call()["toolCallId"], "call_1");
    })
    .await;
}

// 2. Exit status

/// `ptyd acp --sandbox`: ACP has no field for a sandbox, so the shim's option contains every
/// terminal it opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shims_sandbox_option_contains_its_terminals() {
    timed(async {
        let args = ["--sandbox", "write=$CWD", "--sandbox", "network=off"];
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &args).await;
        let outside = tempfile::tempdir().expect("a directory outside");
        let turn = bridge.prompt(&session, "touch inside && echo made").await;
        assert_eq!(turn.final_update()["rawOutput"]["exit_code"], 0);
        assert!(dir.path().join("inside").exists());
        let escape = format!("touch {}/escaped", outside.path().display());
        let turn = bridge.prompt(&session, &escape).await;
        let last = turn.final_update();
        assert_eq!(last["status"], "failed");
        assert!(
            turn.streamed().contains("Permission denied"),
            "{:?}",
            turn.streamed()
        );
        assert!(!outside.path().join("escaped").exists());
        let turn = bridge
            .prompt(&session, "(exec 3<>/dev/tcp/127.0.0.1/9)")
            .await;
        assert_eq!(turn.final_update()["status"], "failed");
        assert!(
            turn.streamed().contains("Permission denied"),
            "{:?}",
            turn.streamed()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_set_the_status_and_the_exit_pill() {
    timed(async {
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &[]).await;
        let cwd = cwd_of(&dir);
        let turn = bridge.prompt(&session, "sh -c 'exit 3'").await;
        assert_terminal_card(&turn, "sh -c 'exit 3'", &cwd);
        let last = turn.final_update();
        assert_eq!(last["status"], "failed");
        assert_eq!(last["rawOutput"]["exit_code"], 3);
        assert_eq!(last["_meta"]["terminal_exit"]["exit_code"], 3);
        assert_eq!(last["_meta"]["terminal_exit"]["signal"], Value::Null);
        assert_eq!(
            turn.stop, "end_turn",
            "a failed command still ends the turn normally"
        );

        let turn = bridge.prompt(&session, "true").await;
        assert_terminal_card(&turn, "true", &cwd);
        let last = turn.final_update();
        assert_eq!(last["status"], "completed");
        assert_eq!(last["_meta"]["terminal_exit"]["exit_code"], 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_mode_fails_a_non_zero_exit() {
    timed(async {
        let (mut bridge, session, dir) = Bridge::ready(Mode::Fallback, &[]).await;
        let cwd = cwd_of(&dir);
        let turn = bridge.prompt(&session, "sh -c 'exit 3'").await;
        assert_fallback_card(&turn, "sh -c 'exit 3'", &cwd);
        assert_eq!(turn.final_update()["status"], "failed");
        assert_eq!(turn.final_update()["rawOutput"]["exit_code"], 3);
        let turn = bridge.prompt(&session, "true").await;
        assert_fallback_card(&turn, "true", &cwd);
        assert_eq!(turn.final_update()["status"], "completed");
    })
    .await;
}

// 3. ANSI and the fallback block

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_mode_keeps_ansi_and_fallback_strips_it() {
    timed(async {
        const RED: &str = r"printf '\033[31mred\033[0m\n'";
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &[]).await;
        let turn = bridge.prompt(&session, RED).await;
        assert_terminal_card(&turn, RED, &cwd_of(&dir));
        let streamed = turn.streamed();
        assert!(
            streamed.contains("\u{1b}[31mred\u{1b}[0m"),
            "raw bytes, ANSI kept: {streamed:?}"
        );
        assert_eq!(turn.final_update()["rawOutput"]["formatted_output"], "red");

        let (mut bridge, session, dir) = Bridge::ready(Mode::Fallback, &[]).await;
        let turn = bridge.prompt(&session, RED).await;
        let text = assert_fallback_card(&turn, RED, &cwd_of(&dir));
        assert_eq!(text, "```console\nred\n```");
        assert_eq!(turn.final_update()["status"], "completed");

        // Output with a backtick fence of its own gets a longer fence.
        let turn = bridge.prompt(&session, "echo '````'").await;
        let text = assert_fallback_card(&turn, "echo '````'", &cwd_of(&dir));
        assert_eq!(text, "`````console\n````\n`````");
    })
    .await;
}

// 4. A program waiting for input

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_reading_stdin_ends_the_turn_and_takes_the_next_prompt() {
    timed(async {
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &[]).await;
        let cwd = cwd_of(&dir);
        let turn = bridge.prompt(&session, "read x").await;
        assert_eq!(turn.stop, "end_turn");
        assert_terminal_card(&turn, "read x", &cwd);
        let last = turn.final_update();
        assert_eq!(last["rawOutput"]["wait_reason"], "stdin_read");
        assert_eq!(last["status"], "completed");
        assert!(
            last.get("_meta").is_none(),
            "the command did not end: no terminal_exit: {last}"
        );
        let final_at = turn.position(|u| u.get("status").is_some());
        let message_at = turn.position(|u| u["sessionUpdate"] == "agent_message_chunk");
        assert!(message_at > final_at, "the message follows the tool call");
        let message = turn.messages();
        assert!(message.contains("waiting for input"), "{message}");
        assert!(message.contains("next message"), "{message}");
        assert_eq!(message.lines().count(), 1, "one line: {message}");

        let turn = bridge.prompt(&session, "abc").await;
        let last = turn.final_update();
        assert_eq!(last["rawOutput"]["wait_reason"], "prompt", "{last}");
        assert_eq!(last["rawOutput"]["exit_code"], 0);
        assert_eq!(last["status"], "completed");
        assert!(last["_meta"].get("terminal_exit").is_some());
        assert!(turn.messages().is_empty());

        let turn = bridge.prompt(&session, "echo \"got $x\"").await;
        assert!(turn.streamed().contains("got abc"), "{:?}", turn.streamed());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_output_ends_the_turn_with_a_message() {
    timed(async {
        let (mut bridge, session, _dir) =
            Bridge::ready(Mode::Fallback, &["--idle-ms", "300"]).await;
        let turn = bridge.prompt(&session, "sleep 3").await;
        assert_eq!(
            turn.final_update()["rawOutput"]["wait_reason"],
            "inferred_idle"
        );
        let message = turn.messages();
        assert!(message.contains("may still be running"), "{message}");
    })
    .await;
}

// 5. Cancel

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_interrupts_the_command_and_the_shell_comes_back() {
    timed(async {
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &[]).await;
        let mark = bridge.mark();
        let id = bridge.start_prompt(&session, "sleep 100").await;
        bridge
            .wait_event("the tool call", |e| {
                e["event"] == "update" && e["params"]["update"]["sessionUpdate"] == "tool_call"
            })
            .await;
        let agent = bridge.agent_pid;
        wait_until(EVENT_WAIT, "sleep 100 runs in the session", || async move {
            descendants(agent).iter().any(|(_, comm)| comm == "sleep")
        })
        .await;

        let cancelled_at = Instant::now();
        bridge
            .notify("session/cancel", json!({"sessionId": session}))
            .await;
        let turn = bridge.finish_prompt(&session, id, mark).await;
        let took = cancelled_at.elapsed();
        assert_eq!(turn.stop, "cancelled", "{:#?}", turn.updates);
        assert!(took < Duration::from_secs(2), "cancel took {took:?}");
        assert_terminal_card(&turn, "sleep 100", &cwd_of(&dir));
        let last = turn.final_update();
        assert_eq!(
            last["status"], "failed",
            "an interrupted command failed: {last}"
        );
        assert_eq!(last["rawOutput"]["wait_reason"], "prompt", "{last}");
        assert!(last["_meta"].get("terminal_exit").is_some(), "{last}");
        assert!(
            !descendants(agent).iter().any(|(_, comm)| comm == "sleep"),
            "sleep was interrupted"
        );

        let started = Instant::now();
        let turn = bridge.prompt(&session, "echo back").await;
        assert_eq!(turn.stop, "end_turn");
        let last = turn.final_update();
        assert_eq!(
            last["rawOutput"]["wait_reason"], "prompt",
            "the shell is at its prompt: {last}"
        );
        assert_eq!(last["rawOutput"]["formatted_output"], "back");
        assert!(started.elapsed() < Duration::from_secs(10));
    })
    .await;
}

// 6. Large output

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_is_capped_with_a_note() {
    timed(async {
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &[]).await;
        let command = "yes | head -c 10000000";
        let turn = bridge.prompt(&session, command).await;
        assert_terminal_card(&turn, command, &cwd_of(&dir));
        let last = turn.final_update();
        assert_eq!(
            last["status"], "completed",
            "{}",
            last["rawOutput"]["wait_reason"]
        );
        assert_eq!(last["rawOutput"]["exit_code"], 0);
        let streamed = turn.streamed();
        let note_at = streamed.find("[ptyd: ").expect("the cap note");
        let shown = streamed[..note_at].trim_end_matches(['\r', '\n']).len();
        assert!(shown <= CAP, "at most the cap before the note: {shown}");
        assert!(
            shown >= CAP - 8,
            "the cap is filled before the note: {shown}"
        );
        let note = &streamed[note_at..];
        assert!(note.contains(CAP_NOTE), "{note:?}");
        assert_eq!(note.trim_end().lines().count(), 1, "one line: {note:?}");
        let left_out: u64 = note
            .split(" bytes left out")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a byte count in {note:?}"));
        // The PTY turns the 10 MB into 15 MB (CR before LF). The daemon may drop what a stream
        // falls behind by (its backlog bound), so the count is of what reached the shim.
        assert!(left_out > 1_000_000, "{left_out} bytes left out");
        assert!(
            streamed[..note_at]
                .chars()
                .all(|c| c == 'y' || c == '\r' || c == '\n'),
            "only yes's output before the note"
        );
        assert_rate_limited(&turn);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_is_coalesced_to_at_most_20_updates_a_second() {
    timed(async {
        let (mut bridge, session, _dir) = Bridge::ready(Mode::Terminal, &[]).await;
        let command = "for i in $(seq 1 120); do echo line$i; sleep 0.01; done";
        let turn = bridge.prompt(&session, command).await;
        let streamed = turn.streamed();
        for i in 1..=120 {
            assert!(
                streamed.contains(&format!("line{i}\r\n")),
                "line{i} in {streamed:?}"
            );
        }
        assert!(turn.output_updates().len() < 120, "chunks are coalesced");
        assert_rate_limited(&turn);
    })
    .await;
}

/// At most about 20 `terminal_output` updates a second: overall, and in any one-second window
/// (with slack for the receiving side's scheduling).
#[track_caller]
fn assert_rate_limited(turn: &Turn) {
    let times: Vec<f64> = turn
        .updates
        .iter()
        .zip(&turn.times)
        .filter(|(u, _)| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_none())
        .map(|(_, t)| *t)
        .collect();
    let start = turn.times[0];
    let end = *turn.times.last().expect("updates");
    let seconds = (end - start) / 1000.0;
    assert!(
        times.len() as f64 <= 20.0 * seconds + 2.0,
        "{} output updates in {seconds:.2} s",
        times.len()
    );
    for (i, t) in times.iter().enumerate() {
        let in_window = times[i..].iter().take_while(|u| **u < t + 1000.0).count();
        assert!(
            in_window <= 24,
            "{in_window} output updates within one second"
        );
    }
}

// 7. Slash commands

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_generic_tool_calls() {
    timed(async {
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &[]).await;
        bridge.prompt(&session, "echo marker-one").await;

        let expect_call = |turn: &Turn, kind: &str, title: &str, input: &str| {
            assert_eq!(turn.stop, "end_turn");
            let call = turn.tool_call();
            let id = call["toolCallId"].clone();
            assert_eq!(
                *call,
                json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": title,
                       "kind": kind, "status": "in_progress", "rawInput": {"command": input}}),
                "a generic tool call: no terminal card"
            );
            assert_eq!(turn.updates.len(), 2, "{:#?}", turn.updates);
            assert_eq!(turn.final_update()["toolCallId"], id);
        };
        let completed = |turn: &Turn| {
            assert_eq!(
                turn.final_update()["status"],
                "completed",
                "{:#?}",
                turn.updates
            );
            turn.final_text()
        };

        let turn = bridge.prompt(&session, "/list").await;
        expect_call(&turn, "read", "List terminal sessions", "/list");
        let text = completed(&turn);
        assert!(text.starts_with("t1 [shell] running pid="), "{text}");

        let turn = bridge.prompt(&session, "/read").await;
        expect_call(&turn, "read", "Read terminal t1", "/read");
        let text = completed(&turn);
        assert!(
            text.contains("marker-one") && text.contains("[lines: "),
            "{text}"
        );

        let turn = bridge.prompt(&session, "/read 0 1").await;
        expect_call(&turn, "read", "Read terminal t1", "/read 0 1");
        assert!(completed(&turn).contains("[lines: "));

        let turn = bridge.prompt(&session, "/screen").await;
        expect_call(&turn, "read", "Screen of terminal t1", "/screen");
        assert!(completed(&turn).contains("marker-one"));

        let turn = bridge.prompt(&session, "/bg sleep 30").await;
        expect_call(
            &turn,
            "execute",
            "Send to terminal t1 in background",
            "/bg sleep 30",
        );
        // Nothing printed within the background wait (1 s): the job runs on.
        assert_eq!(
            completed(&turn),
            "started background job j1\n[job: j1 running]"
        );

        let turn = bridge.prompt(&session, "/job").await;
        expect_call(&turn, "read", "Output of job j1", "/job");
        let text = completed(&turn);
        assert!(text.contains("[job: j1 running]"), "{text}");

        let turn = bridge.prompt(&session, "/kill").await;
        expect_call(&turn, "execute", "Kill job j1", "/kill");
        assert_eq!(completed(&turn), "[job: j1 killed]");

        let turn = bridge.prompt(&session, "/job j1").await;
        expect_call(&turn, "read", "Output of job j1", "/job j1");
        assert!(completed(&turn).contains("j1"));

        let turn = bridge.prompt(&session, "/signal").await;
        expect_call(&turn, "execute", "Signal terminal t1", "/signal");
        assert!(completed(&turn).starts_with("delivered SIGINT to foreground process group"));

        let turn = bridge.prompt(&session, "/close").await;
        expect_call(&turn, "delete", "Close terminal t1", "/close");
        assert_eq!(completed(&turn), "closed terminal session t1");

        // A later prompt opens a fresh session in the session's cwd.
        let turn = bridge.prompt(&session, "pwd").await;
        assert_terminal_card(&turn, "pwd", &cwd_of(&dir));
        assert_eq!(
            turn.final_update()["rawOutput"]["formatted_output"],
            cwd_of(&dir)
        );
        let turn = bridge.prompt(&session, "/list").await;
        let text = completed(&turn);
        assert!(
            text.starts_with("t2 [shell] running") && !text.contains("t1"),
            "{text}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_commands_and_daemon_errors_end_the_turn_normally() {
    timed(async {
        let (mut bridge, session, _dir) = Bridge::ready(Mode::Fallback, &[]).await;

        let turn = bridge.prompt(&session, "/x").await;
        assert_eq!(turn.stop, "end_turn");
        assert_eq!(turn.updates.len(), 1, "only a message: {:#?}", turn.updates);
        let message = turn.messages();
        for command in [
            "/read", "/screen", "/signal", "/bg", "/job", "/kill", "/list", "/close",
        ] {
            assert!(message.contains(command), "{command} in {message}");
        }
        let turn = bridge.prompt(&session, "/list").await;
        assert!(
            turn.final_text().starts_with("t1 "),
            "/x was not sent to the shell"
        );
        let turn = bridge.prompt(&session, "/read 0 1").await;
        assert!(!turn.final_text().contains("/x"), "/x was not typed");

        // A path is a command for the shell, not a slash command.
        let turn = bridge.prompt(&session, "/bin/echo via-path").await;
        assert_eq!(
            turn.final_update()["rawOutput"]["formatted_output"],
            "via-path"
        );

        for (input, kind) in [
            ("/signal BOGUS", "execute"),
            ("/job j99", "read"),
            ("/kill j98", "execute"),
        ] {
            let turn = bridge.prompt(&session, input).await;
            assert_eq!(turn.stop, "end_turn", "{input}");
            assert_eq!(turn.tool_call()["kind"], kind);
            let last = turn.final_update();
            assert_eq!(last["status"], "failed", "{input}: {last}");
            let text = turn.final_text();
            assert!(
                text.starts_with("error: ") && !text.contains('\n'),
                "{input}: {text:?}"
            );
        }

        let turn = bridge.prompt(&session, "/job").await;
        assert!(turn.of_kind("tool_call").is_empty());
        assert!(turn.messages().contains("/bg"), "{}", turn.messages());
        let turn = bridge.prompt(&session, "/read x").await;
        assert!(
            turn.messages().starts_with("usage: /read"),
            "{}",
            turn.messages()
        );
    })
    .await;
}

// 8. No daemon, and nothing left behind

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_daemon_it_serves_one_and_leaves_no_process_behind() {
    timed(async {
        let (mut bridge, session, dir) = Bridge::ready(Mode::Terminal, &[]).await;
        let turn = bridge.prompt(&session, "echo alive").await;
        assert_eq!(
            turn.final_update()["rawOutput"]["formatted_output"],
            "alive"
        );
        bridge.prompt(&session, "sleep 731 &").await;
        bridge.prompt(&session, "(sleep 732 &)").await;
        bridge.prompt(&session, "/bg sleep 733").await;
        let second = bridge.new_session(dir.path()).await;
        bridge.prompt(&second, "sleep 734 &").await;

        let agent = bridge.agent_pid;
        wait_until(EVENT_WAIT, "every sleep runs", || async {
            (731..=734).all(|n| !pids_running(&format!("sleep {n}")).is_empty())
        })
        .await;
        let mut session_pids: Vec<u32> = descendants(agent).into_iter().map(|(p, _)| p).collect();
        for n in 731..=734 {
            session_pids.extend(pids_running(&format!("sleep {n}")));
        }
        assert!(
            session_pids.len() >= 6,
            "two shells and four sleeps: {session_pids:?}"
        );

        let code = bridge.close_and_wait_exit().await;
        assert_eq!(code, 0, "the shim exits cleanly when stdin closes");
        let leftover: Vec<u32> = session_pids
            .iter()
            .copied()
            .filter(|p| process_is_running(*p))
            .collect();
        assert!(leftover.is_empty(), "processes left behind: {leftover:?}");
        let notes = bridge
            .stderr_lines()
            .iter()
            .filter(|l| l.contains(IN_PROCESS_NOTE))
            .count();
        assert_eq!(notes, 1, "said once on stderr: {:?}", bridge.stderr_lines());
    })
    .await;
}

/// A password prompt: the one-line message names `ptyd attach`, and with the daemon's web page
/// a one-time link to it on that terminal, for the editor's user to open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_prompt_says_how_a_person_types_it() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-acp-page-")
            .tempdir()
            .unwrap();
        let (daemon, socket, address) =
            support::spawned::spawn_daemon_with_page(dir.path(), "an-acp-web-token").await;
        let socket_dir = tempfile::tempdir().expect("unused dir");
        let args = ["--agent-id", "acp-page"];
        let mut bridge = Bridge::start_with(&args, &socket, socket_dir).await;
        bridge.initialize(Mode::Terminal).await;
        let session = bridge.new_session(dir.path()).await;
        let turn = bridge.prompt(&session, "read -rs secret").await;
        let message = turn.messages();
        assert!(message.contains("(its input is hidden)"), "{message}");
        let mut c = support::Client::new(support::unix_channel(&socket).await);
        let terminal = support::list(&mut c, "acp-page").await.sessions[0]
            .session_id
            .clone();
        assert!(
            message.contains(&format!("`ptyd attach {terminal} --agent acp-page`, or on the web page http://{address}/#code=")),
            "{message}"
        );
        assert!(message.contains(&format!("&s=acp-page%2F{terminal} (the link")), "{message}");
        assert_eq!(bridge.close_and_wait_exit().await, 0);
        support::spawned::terminate(daemon).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_daemon_it_uses_it_and_closes_its_sessions_on_disconnect() {
    timed(async {
        for keep in [false, true] {
            let mut daemon = support::start_daemon().await;
            let agent = if keep { "acp-keep" } else { "acp-close" };
            let mut args = vec!["--agent-id", agent];
            if keep {
                args.push("--keep-sessions");
            }
            let socket_dir = tempfile::tempdir().expect("unused dir");
            let mut bridge = Bridge::start_with(&args, &daemon.socket, socket_dir).await;
            bridge.initialize(Mode::Terminal).await;
            let session = bridge.new_session(daemon.dir()).await;
            let turn = bridge.prompt(&session, "echo over-the-socket").await;
            assert_eq!(
                turn.final_update()["rawOutput"]["formatted_output"],
                "over-the-socket"
            );
            let sessions = support::list(&mut daemon.client, agent).await.sessions;
            assert_eq!(sessions.len(), 1, "owned by the --agent-id");
            let shell = sessions[0].pid;

            assert_eq!(bridge.close_and_wait_exit().await, 0);
            let remaining = support::list(&mut daemon.client, agent).await.sessions;
            if keep {
                assert_eq!(remaining.len(), 1, "--keep-sessions keeps them");
                assert!(process_is_running(shell));
            } else {
                assert!(remaining.is_empty(), "closed on disconnect: {remaining:?}");
                assert!(!process_is_running(shell));
            }
            assert!(
                !bridge
                    .stderr_lines()
                    .iter()
                    .any(|l| l.contains(IN_PROCESS_NOTE)),
                "a daemon answered: {:?}",
                bridge.stderr_lines()
            );
            daemon.stop().await;
        }
    })
    .await;
}

/// A daemon on `socket` inside this test, with its state in `state` (its sessions get a HOME
/// without rc files), and the sender that stops it.
fn serve_on(
    socket: &Path,
    state: &Path,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), ptyd::Error>>,
) {
    let _ = std::fs::remove_file(socket);
    let listener = tokio::net::UnixListener::bind(socket).expect("bind the socket");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut config = ptyd::config::Config::default();
    let home = support::clean_home().display().to_string();
    config.env_defaults.push(("HOME".into(), home));
    config.state_dir = Some(state.to_owned());
    let task = tokio::spawn(ptyd::server::serve(listener, config, async move {
        let _ = stopped.await;
    }));
    (stop, task)
}

/// The daemon on the socket restarts between two prompts (its sessions gone with it): a prompt
/// while none answers fails, and the next one reconnects, says the old terminal is gone, and runs
/// in a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_after_the_daemon_restarted_reconnects() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-acp-reconnect-")
            .tempdir()
            .unwrap();
        let socket = dir.path().join("ptyd.sock");
        let (stop, task) = serve_on(&socket, &dir.path().join("state"));
        let socket_dir = tempfile::tempdir().expect("unused dir");
        let mut bridge = Bridge::start_with(&[], &socket, socket_dir).await;
        bridge.initialize(Mode::Terminal).await;
        let session = bridge.new_session(dir.path()).await;
        let turn = bridge.prompt(&session, "echo before").await;
        assert_eq!(
            turn.final_update()["rawOutput"]["formatted_output"],
            "before"
        );

        stop.send(()).unwrap();
        task.await.unwrap().expect("the daemon stopped cleanly");
        // While no daemon answers, a prompt ends normally with the error.
        let turn = bridge.prompt(&session, "echo nobody").await;
        assert_eq!(turn.stop, "end_turn");
        assert_eq!(
            turn.final_update()["status"],
            "failed",
            "{:#?}",
            turn.updates
        );
        let (stop, task) = serve_on(&socket, &dir.path().join("state"));

        let turn = bridge.prompt(&session, "echo after").await;
        assert_eq!(turn.stop, "end_turn");
        assert_eq!(
            turn.final_update()["rawOutput"]["formatted_output"],
            "after",
            "{:#?}",
            turn.updates
        );
        assert!(
            turn.messages()
                .contains("terminal session of this conversation is gone"),
            "{}",
            turn.messages()
        );
        assert_eq!(bridge.close_and_wait_exit().await, 0);
        stop.send(()).unwrap();
        task.await
            .unwrap()
            .expect("the second daemon stopped cleanly");
    })
    .await;
}
