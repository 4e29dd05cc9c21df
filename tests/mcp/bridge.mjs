//! MCP client bridge for tests/mcp.rs. It connects to an MCP server with the official npm SDK
//! (`@modelcontextprotocol/sdk`) and turns the conversation into JSON lines for the Rust test.
//!
//! Command line: `stdio PROGRAM ARGS...` (starts the real `ptyd mcp` and talks over its stdio)
//! or `http URL TOKEN` (streamable HTTP with `Authorization: Bearer TOKEN`; `-` for none).
//!
//! - stdin, one command a line: `{"op":"info"}` (server name, version, instructions,
//!   capabilities), `{"op":"list"}` (tools/list), `{"op":"call","id":N,"name":T,"arguments":A,
//!   "progress":bool,"timeout":MS}` (tools/call; with `progress` the SDK sends a progressToken
//!   and its timeout resets on each progress notification), `{"op":"abort","id":N}` (aborts that
//!   call: the SDK sends notifications/cancelled), `{"op":"raw","id":N,"method":M,"params":P}`
//!   (a request the SDK does not validate, answered with its error), `{"op":"fetch","id":N,
//!   "url":U,"headers":H,"body":B}` (a plain HTTP POST), `{"op":"terminate","id":N}` (HTTP: ends
//!   the MCP session with DELETE), `{"op":"close"}` (closes the transport: stdin of the server
//!   ends).
//! - environment: `MCP_PROTOCOL_VERSION` makes the client offer that revision in `initialize`
//!   instead of the SDK's newest (the SDK speaks each revision it lists as supported);
//!   `MCP_ELICITATION=accept|decline` declares URL-mode elicitation and answers each request so
//!   (each one is an `elicit {params}` event first).
//! - stdout, one event a line, each with `t` (ms since start): `connected {pid}`, `wire {message}`
//!   for every message the server sent, `progress {id, progress, message}`, `response {id,
//!   result|error}`, `stderr {line}`, `closed`.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import readline from "node:readline";

const [mode, ...rest] = process.argv.slice(2);
const start = performance.now();

function emit(event) {
  process.stdout.write(JSON.stringify({ ...event, t: performance.now() - start }) + "\n");
}

function errorOf(error) {
  return {
    code: error?.code ?? null,
    message: String(error?.message ?? error),
    data: error?.data ?? null,
  };
}

let transport;
if (mode === "stdio") {
  const [command, ...args] = rest;
  transport = new StdioClientTransport({ command, args, env: process.env, stderr: "pipe" });
  transport.stderr?.on("data", (chunk) => {
    for (const line of String(chunk).split("\n")) {
      if (line.trim() !== "") emit({ event: "stderr", line });
    }
  });
} else {
  const [url, token] = rest;
  const headers = token && token !== "-" ? { Authorization: `Bearer ${token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}

// Every message the server sends, before the SDK handles it (the initialize answer too).
let handler;
Object.defineProperty(transport, "onmessage", {
  get: () => handler,
  set: (handle) => {
    handler = (message, extra) => {
      emit({ event: "wire", message });
      handle?.(message, extra);
    };
  },
});
const offered = process.env.MCP_PROTOCOL_VERSION;
if (offered) {
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if (message.method === "initialize") {
      message = { ...message, params: { ...message.params, protocolVersion: offered } };
    }
    return send(message, options);
  };
}

const elicitation = process.env.MCP_ELICITATION;
const client = new Client(
  { name: "ptyd-test-bridge", version: "1.0.0" },
  elicitation ? { capabilities: { elicitation: { url: {} } } } : {},
);
if (elicitation) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    emit({ event: "elicit", params: request.params });
    return { action: elicitation };
  });
}
client.onerror = (error) => emit({ event: "client_error", error: errorOf(error) });
try {
  await client.connect(transport);
} catch (error) {
  emit({ event: "connect_failed", error: errorOf(error) });
  process.exit(0);
}
transport.onclose = () => emit({ event: "closed" });
emit({ event: "connected", pid: transport.pid ?? null });

const aborts = new Map();

function respond(id, promise) {
  promise.then(
    (result) => emit({ event: "response", id, result }),
    (error) => emit({ event: "response", id, error: errorOf(error) }),
  );
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (line.trim() === "") return;
  const command = JSON.parse(line);
  switch (command.op) {
    case "info":
      emit({
        event: "info",
        server: client.getServerVersion(),
        instructions: client.getInstructions() ?? null,
        capabilities: client.getServerCapabilities(),
      });
      break;
    case "list":
      respond(command.id, client.listTools());
      break;
    case "call": {
      const controller = new AbortController();
      aborts.set(command.id, controller);
      const options = { signal: controller.signal, timeout: command.timeout ?? 120000 };
      if (command.progress) {
        options.onprogress = (p) => emit({ event: "progress", id: command.id, ...p });
        options.resetTimeoutOnProgress = true;
      }
      respond(
        command.id,
        client.callTool(
          { name: command.name, arguments: command.arguments ?? {} },
          CallToolResultSchema,
          options,
        ),
      );
      break;
    }
    case "abort":
      aborts.get(command.id)?.abort("the test aborted it");
      break;
    case "raw":
      respond(
        command.id,
        client.request({ method: command.method, params: command.params }, z.any()),
      );
      break;
    case "fetch":
      respond(
        command.id,
        fetch(command.url, {
          method: "POST",
          headers: command.headers,
          body: command.body,
        }).then(async (response) => ({
          status: response.status,
          headers: Object.fromEntries(response.headers.entries()),
          body: await response.text(),
        })),
      );
      break;
    case "terminate":
      respond(command.id, transport.terminateSession().then(() => ({})));
      break;
    case "close":
      client.close().then(() => {
        emit({ event: "closed" });
        process.exit(0);
      });
      break;
    default:
      emit({ event: "bad_command", command });
  }
});
