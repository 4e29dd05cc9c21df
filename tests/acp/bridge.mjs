//! ACP client bridge for tests/acp.rs. It starts the agent given on its command line (the real
//! `ptyd acp`), connects to it as a client with the official npm SDK (`@agentclientprotocol/sdk`),
//! and turns the conversation into JSON lines for the Rust test:
//!
//! - stdin, one command a line: `{"op":"request","id":N,"method":M,"params":P}` (the SDK sends
//!   the request; its result or error comes back as a `response` event),
//!   `{"op":"notify","method":M,"params":P}`, `{"op":"close_stdin"}` (ends the agent's stdin, as
//!   an editor that goes away does).
//! - stdout, one event a line, each with `t` (ms since start): `spawned {pid}`, `wire {line}` for
//!   every raw line the agent wrote (seen before the SDK parses it, so in wire order),
//!   `update {params}` for each `session/update` the SDK accepted, `response {id, result|error}`,
//!   `stderr {line}`, and `exit {code, signal}` when the agent ends (the bridge then exits).

import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Transform, Writable } from "node:stream";
import readline from "node:readline";

const [agentPath, ...agentArgs] = process.argv.slice(2);
const start = performance.now();

function emit(event) {
  process.stdout.write(JSON.stringify({ ...event, t: performance.now() - start }) + "\n");
}

/** Emits a `wire` event for each complete line passing through, then passes the bytes on. */
function wireTap() {
  let partial = "";
  const decoder = new TextDecoder();
  return new Transform({
    transform(chunk, _encoding, done) {
      partial += decoder.decode(chunk, { stream: true });
      const lines = partial.split("\n");
      partial = lines.pop();
      for (const line of lines) {
        if (line.trim() !== "") emit({ event: "wire", line });
      }
      done(null, chunk);
    },
  });
}

const child = spawn(agentPath, agentArgs, { stdio: ["pipe", "pipe", "pipe"] });
emit({ event: "spawned", pid: child.pid });
readline.createInterface({ input: child.stderr }).on("line", (line) => {
  emit({ event: "stderr", line });
});
child.on("exit", (code, signal) => {
  emit({ event: "exit", code, signal });
  process.exit(0);
});

const tapped = child.stdout.pipe(wireTap());
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(tapped));
const connection = acp
  .client({ name: "ptyd-test-bridge" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    emit({ event: "update", params });
  })
  .onRequest(acp.methods.client.session.requestPermission, () => ({
    outcome: { outcome: "cancelled" },
  }))
  .connect(stream);
const agent = connection.agent;

function errorOf(error) {
  return {
    code: error?.code ?? null,
    message: String(error?.message ?? error),
    data: error?.data ?? null,
  };
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "") return;
  const command = JSON.parse(line);
  switch (command.op) {
    case "request":
      agent.request(command.method, command.params).then(
        (result) => emit({ event: "response", id: command.id, result }),
        (error) => emit({ event: "response", id: command.id, error: errorOf(error) }),
      );
      break;
    case "notify":
      agent.notify(command.method, command.params).catch((error) => {
        emit({ event: "notify_failed", error: errorOf(error) });
      });
      break;
    case "close_stdin":
      child.stdin.end();
      break;
    default:
      emit({ event: "bad_command", line });
  }
}).on("close", () => {
  // The test went away: do not leave the agent behind.
  child.kill("SIGKILL");
});
