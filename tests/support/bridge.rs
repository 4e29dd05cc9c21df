//! A Node.js bridge that drives an official client SDK (the ACP SDK in `tests/acp`, the MCP SDK
//! in `tests/mcp`): commands go in as JSON lines on its stdin, events come out as JSON lines on
//! its stdout. The ACP and MCP tests share it.

use serde_json::Value;
use std::collections::VecDeque;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// Longest wait for one expected event (a shell start or a command on a loaded CI machine).
pub const EVENT_WAIT: Duration = Duration::from_secs(60);

/// A running bridge and the events it has written.
pub struct NodeBridge {
    child: Child,
    stdin: ChildStdin,
    events: mpsc::UnboundedReceiver<Value>,
    /// Every event so far, in order (for failure messages, and for tests that read the wire).
    log: Vec<Value>,
    /// Events read while waiting for another one, not yet returned.
    unclaimed: VecDeque<Value>,
}

impl NodeBridge {
    /// Starts `command` (a `node bridge.mjs ...`) with its stdin and stdout piped to the test.
    pub fn spawn(mut command: Command, what: &str) -> NodeBridge {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start node with the {what} (Node.js is required): {e}"));
        let stdin = child.stdin.take().expect("bridge stdin");
        let stdout = child.stdout.take().expect("bridge stdout");
        NodeBridge {
            child,
            stdin,
            events: json_lines(stdout),
            log: Vec::new(),
            unclaimed: VecDeque::new(),
        }
    }

    /// Every event the bridge has written so far.
    pub fn log(&self) -> &[Value] {
        &self.log
    }

    /// The bridge's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The next event not yet returned (one read while waiting for another comes first).
    pub async fn next_event(&mut self, what: &str) -> Value {
        match self.unclaimed.pop_front() {
            Some(event) => event,
            None => self.read(what).await,
        }
    }

    /// The first event not yet returned that `matches`: each event is returned once, and one
    /// that arrived while the test waited for another is not lost.
    pub async fn wait_event(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(at) = self.unclaimed.iter().position(&matches) {
            return self.unclaimed.remove(at).expect("found above");
        }
        loop {
            let event = self.read(what).await;
            if matches(&event) {
                return event;
            }
            self.unclaimed.push_back(event);
        }
    }

    /// Writes one command line.
    pub async fn command(&mut self, command: Value) {
        let mut line = command.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("write to the bridge");
        self.stdin.flush().await.expect("flush the bridge's stdin");
    }

    /// Reads the next event from the bridge, logged.
    async fn read(&mut self, what: &str) -> Value {
        match tokio::time::timeout(EVENT_WAIT, self.events.recv()).await {
            Ok(Some(event)) => {
                self.log.push(event.clone());
                event
            }
            Ok(None) => panic!(
                "the bridge ended while waiting for {what}; events: {:#?}",
                self.log
            ),
            Err(_) => panic!(
                "no event within {EVENT_WAIT:?} while waiting for {what}; events: {:#?}",
                self.log
            ),
        }
    }
}

/// The JSON lines a child writes on stdout, as they come.
pub fn json_lines(stdout: tokio::process::ChildStdout) -> mpsc::UnboundedReceiver<Value> {
    use tokio::io::AsyncBufReadExt;
    let (tx, events) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let event: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("bridge wrote a bad line {line:?}: {e}"));
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    events
}
