//! ptyd: a daemon that owns persistent PTY sessions for AI agents, served over gRPC on a Unix
//! socket. Sessions are keyed by the owning agent's id; a send returns when something meaningful
//! happened (prompt, stdin read, idle, timeout, exit) with byte-capped, model-ready text.
//!
//! # Layout
//! - [`server`]: `ptyd serve`'s start-up ([`server::run`]: config, signals, socket activation or
//!   bind, the TCP token), the socket, the peer check and the refusal another user gets, the
//!   caller's deadline, upgrade in place on SIGHUP (`server/upgrade.rs`, the calls in flight
//!   answered by `server/drain.rs`; both cut streams short through `server/cut_body.rs`), and
//!   `serve(listener, config, shutdown)`.
//! - [`stop_post`]: `ptyd stop-post`, the systemd unit's `ExecStopPost=`: ends what a stopped
//!   daemon left unless it crashed.
//! - `h2_authority`: accepts clients that send the socket path as HTTP/2 `:authority`.
//! - `service`: the gRPC `Terminals` service (protocol only: validate, registry, session,
//!   `pb` response) and the error-to-status table.
//! - `registry`: sessions keyed by owner agent; ids; limits as reservations taken before a
//!   session starts.
//! - `session`: one actor task per PTY session: the loop and handlers (`session/actor.rs`,
//!   with `actor/output.rs`, `actor/signals.rs`, `actor/reader.rs`, `actor/adopt.rs` and
//!   `actor/compact.rs`), a signal's aim (`aim.rs`), the shell's state machine (`shell.rs`,
//!   pure), the send in flight (`send.rs`), jobs (`jobs.rs`, `kill.rs`), views over the terminal
//!   (`view.rs`, pure), the stdin probe's schedule (`probe.rs`), the Watch feed (`watchers.rs`),
//!   where output reads land
//!   (`capture.rs`: the journal) and the marks a compacted journal keeps (`shell_marks.rs`,
//!   pure).
//! - `state`: what outlives the daemon (the state directory and its lock, id counters, session
//!   records in `state/record.rs`, the mmap'd output journal in `state/journal.rs` and the
//!   checkpoint at its head in `state/journal_head.rs`).
//! - [`process`]: the OS side of a session: `process::pty` (spawning on a PTY, non-blocking
//!   master I/O), [`process::helper`] (the per-session helper, a subreaper that owns the
//!   process tree), [`process::cgroup`] (one cgroup v2 per session, under one parent per
//!   daemon), [`process::reaper`] (finding and ending a session's process tree),
//!   [`process::procfs`] (named `/proc` reads), `process::fd` (fd helpers on nix),
//!   `process::handover` (the PTY master passed from a helper to an adopting daemon).
//! - [`screen`]: the terminal model (pure): the `Terminal` API in `screen.rs`; in `screen/`, the
//!   control-sequence layer in front of vt100 (`sequences`, with xterm's semantics for what
//!   vt100 lacks in `xterm`), the emulator state and its line reads (`state`), history recording
//!   and query replies (`recorder`), the plain-line fast path (`fast_path`, its data in `run`),
//!   resting idle screens (`resting`) and checkpoints that rebuild a terminal (`checkpoint`).
//! - [`history`]: the paged, bounded line store (pure).
//! - [`marks`]: shell-integration wrappers and OSC 133/7 parsing.
//! - [`waiting`]: deciding the wait reason (pure).
//! - [`render`]: byte-capped model-facing text (pure).
//! - `memory`: one `malloc_trim` after a burst of sessions rests or closes.
//! - `validate`: request checks with messages that name the field, and the one rule for
//!   environment names (pure).
//! - [`config`]: terminal types, limits, defaults, the session environment policy; the config
//!   file's schema and checks in `config/file.rs`.
//! - [`acp`]: the ACP agent shim (`ptyd acp`) and its typed error.
//! - [`mcp`]: the MCP server (`ptyd mcp`): the model-facing tools over stdio or streamable HTTP.
//! - `connection`: the daemon a front-end (acp, mcp) talks to: on the socket, or in-process.
//! - `daemon_env`: the daemon's own start-up variables (listener hand-over, socket activation),
//!   which sessions never inherit.
//! - [`client`]: typed client over the socket.
//! - [`cli`]: the `ptyd` command line (client verbs; `--json` prints `pb`'s serialization).
//! - [`pb`]: protobuf glue: generated code, conversions, responses, JSON.
//! - [`error`]: the library's error type.
#![warn(missing_docs)]

pub mod acp;
pub mod cli;
pub mod client;
pub mod config;
pub(crate) mod connection;
pub(crate) mod daemon_env;
pub mod error;
pub(crate) mod h2_authority;
pub mod history;
pub mod marks;
pub mod mcp;
pub(crate) mod memory;
pub mod pb;
pub mod process;
pub(crate) mod registry;
pub mod render;
pub mod screen;
pub mod server;
pub(crate) mod service;
pub(crate) mod session;
pub(crate) mod state;
pub mod stop_post;
pub(crate) mod validate;
pub mod waiting;

pub use error::{Error, Result};
