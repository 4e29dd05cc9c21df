//! ptyd: a daemon that owns persistent PTY sessions for AI agents, served over gRPC on a Unix
//! socket. Sessions are keyed by the owning agent's id; a send returns when something meaningful
//! happened (prompt, stdin read, idle, timeout, exit) with byte-capped, model-ready text.
//!
//! # Layout
//! This is the one module map of the repository; `HACKING.md` points here.
//!
//! - [`server`]: `ptyd serve`'s start-up (`server/startup.rs`, [`server::run`]: config, signals,
//!   socket activation or bind, the TCP token), the socket and its TCP listener, reflection v1
//!   and v1alpha, the peer check, HTTP/2 spoken by hand in `server/h2/` (the refusal another
//!   user gets in `refusal.rs`: `PERMISSION_DENIED`, then GOAWAY; the rewrite of an
//!   `:authority` that is the socket path, as grpcio and grpcurl send it, to `localhost` in
//!   `authority.rs`; the framing they share in `frame.rs`), the caller's `grpc-timeout`
//!   answered `DEADLINE_EXCEEDED` (`server/deadline.rs`), upgrade in place on SIGHUP
//!   (`server/upgrade.rs`: the new binary's config check, the listeners and sessions handed over
//!   across `exec`; the calls in flight answered `UNAVAILABLE` first by `server/drain.rs`; both
//!   cut streams short through `server/cut_body.rs`), and `serve(listener, config, shutdown)`.
//!   [`server::stop_post`] is `ptyd stop-post`, the systemd unit's `ExecStopPost=`: it ends what
//!   a stopped daemon left (`SERVICE_RESULT` success or timeout), never after a crash.
//! - `service`: the gRPC `Terminals` service (protocol only: validate, registry, session,
//!   `pb` response) and the error-to-status table.
//! - `registry`: sessions and jobs keyed by owner agent; ids; limits as reservations taken before
//!   a session starts.
//! - `session`: one actor task per PTY session. `session/handle.rs` is its public face
//!   (`SessionHandle`: a command channel and a `watch` of its state), `session/api.rs` the types
//!   callers give and get back, `session/command.rs` the actor's mailbox, and
//!   `session/succession.rs` what a session keeps for a successor and takes over from a
//!   predecessor; `session/spec.rs` derives a session's settings once (an `Open`'s checks, the
//!   record a successor adopts). `session/core.rs` is the session without I/O: its state and
//!   every decision behind one `Core::handle(event, now, tty) -> effects`, the OS questions it
//!   must ask going through the `Tty` port (`core/tty.rs`); its parts by concern in
//!   `core/settle.rs` (a send begun, written and settled), `core/timers.rs` (the nearest
//!   deadline and what each does), `core/lifecycle.rs` (exit, readiness, the published state),
//!   `core/output.rs` (output taken in, marks to the shell state, query answers queued),
//!   `core/signals.rs` (`Signal`, aimed at the foreground group, and `JobKill`),
//!   `core/reader.rs` (who reads the terminal: the stdin probe, typeahead, line mode),
//!   `core/requests.rs`, `core/commands.rs` (command records and the requests that read them),
//!   `core/attach.rs` (a person at the keyboard, watchers) and `core/adopt.rs` (replaying a
//!   predecessor's journal). `session/actor.rs` is the `select!` loop that owns the OS side,
//!   feeds the core events and carries out its effects; `actor/tty.rs` answers the port with
//!   the PTY and `/proc`, `actor/compact.rs` compacts the journal at its bound, and
//!   `actor/flood.rs` takes a flood in by turns on worker threads (one reads into the journal,
//!   one emulates, while the actor's thread stays free), and a turn's reader gives way to
//!   another session's fresh send (`actor/give_way.rs`). Beside them, pure: the shell's state
//!   machine (`shell.rs`: marks, prompt, kept line, refused lines, when input may be written),
//!   what a send writes and when text would only be typed ahead (`input.rs`), a signal's aim
//!   (`aim.rs`), views over the terminal (`view.rs`: Read pages, viewports, MOTD, Watch replay),
//!   the startup wait (`startup.rs`), when state is published (`publish.rs`), output pacing and
//!   the flood's turns (`pacing.rs`) and the marks a compacted journal keeps (`shell_marks.rs`);
//!   and the send in flight (`send.rs`: deadlines, collected marks, its reply, stream or job
//!   sink), jobs (`jobs.rs`, and `kill.rs` for `JobKill`), the stdin probe's schedule
//!   (`probe.rs`), the Watch feed (`watchers.rs`) and where output reads land (`capture.rs`:
//!   the journal, or the thread's shared buffer).
//! - `state`: what outlives the daemon (the state directory and its lock, id counters, session
//!   records in `state/record.rs`, the mmap'd output journal in `state/journal.rs` and the
//!   checkpoint at its head in `state/journal_head.rs`).
//! - [`process`]: the OS side of a session: `process::pty` (the PTY, IUTF8 from the locale,
//!   spawning through the helper, non-blocking master I/O, the foreground group),
//!   [`process::helper`] (the per-session helper: a subreaper and session leader that owns and
//!   reaps the process tree and keeps the session while no daemon runs), [`process::cgroup`]
//!   (one cgroup v2 per session, under one parent per daemon), [`process::reaper`] (finding and
//!   ending a session's process tree), `process::tracking` (which of cgroup and subreaper tracks
//!   processes), [`process::procfs`] (named `/proc` reads), [`process::stdin_probe`] (whether
//!   a foreground program is blocked reading the terminal, from `/proc`), `process::fd` (pipes, non-blocking
//!   fds and pidfds on nix), `process::handover` (the PTY master and the helper's reports passed
//!   to an adopting daemon with `SCM_RIGHTS`), `process::sandbox` (a session's sandbox as its
//!   helper enters it between fork and exec: namespaces, the daemon's places covered,
//!   no_new_privs, the Landlock ruleset; and the kernel's Landlock check), the cgroup limits of
//!   a sandbox in `process/cgroup/limits.rs`, `process::memory` (one `malloc_trim` after a
//!   burst of sessions rests or closes), and `process::slice` (the short scheduler slice the
//!   daemon's thread asks for).
//! - [`screen`]: the terminal model (pure): the `Terminal` API in `screen.rs`; in `screen/`, the
//!   control-sequence layer in front of vt100 (`sequences`, with xterm's semantics for what
//!   vt100 lacks in `xterm`), the emulator state and its line reads (`state`), history recording
//!   and query replies (`recorder`), the plain-line fast path (`fast_path`, its data in `run`),
//!   redraws a later paint of the same row overwrites, not emulated (`redraws`, pure), the
//!   alternate screen's repaints kept until something reads it (`deferred`), resting idle
//!   screens (`resting`) and checkpoints that rebuild a terminal (`checkpoint`).
//! - [`history`]: the paged, bounded, numbered line store (pure).
//! - [`marks`]: shell-integration wrappers (bash, zsh, fish), the per-session mark key, OSC 133/7
//!   parsing and output-region scanning.
//! - [`waiting`]: deciding the wait reason (pure).
//! - [`sandbox`]: session sandboxes (pure): a type's or an Open's request, its paths resolved,
//!   how a request may only tighten its type's, and the plan a helper enforces.
//! - [`render`]: byte-capped model-facing text (pure).
//! - `private_dir`: the check that no other user can change where the socket and state live.
//! - `validate`: request checks with messages that name the field, and the one rule for
//!   environment names (pure).
//! - [`config`]: terminal types, limits, defaults, the session environment policy
//!   (`Config::session_env`); the config file's schema, its checks and how it is read over the
//!   defaults in `config/file.rs`; the daemon's own start-up variables (listener hand-over,
//!   socket activation), which neither a session nor the next image inherits as they are, in
//!   `config/daemon_env.rs`.
//! - [`acp`]: the ACP agent shim (`ptyd acp`); `acp/error.rs` is its typed error and the one
//!   status-to-ACP-error mapping.
//! - [`mcp`]: the MCP server (`ptyd mcp`): the model-facing tools over stdio or streamable HTTP;
//!   the handler (`mcp/server.rs`), the tool list and schemas (`tools`, `params`, `results`),
//!   progress notifications (`progress`), the reconnecting daemon link (`daemon`), HTTP auth and
//!   the `Origin` guard (`http`).
//! - `connection`: the daemon a front-end (acp, mcp) talks to: on the socket, or in-process.
//! - [`client`]: typed client over the socket.
//! - [`cli`]: the `ptyd` command line (client verbs; `--json` prints `pb`'s serialization).
//! - [`pb`]: protobuf glue: generated code, conversions from domain types, the responses and
//!   their rendered text (`pb/responses.rs`), a sandbox's protobuf form (`pb/sandbox.rs`), JSON
//!   names of enums.
//! - [`error`]: the library's error type.
//!
//! Outside the library: `src/main.rs` only parses the command line and hands off;
//! `src/bin/ptyd-session-helper.rs` is the helper's own small executable, installed beside
//! `ptyd`.
#![warn(missing_docs)]

pub mod acp;
pub mod cli;
pub mod client;
pub mod config;
pub(crate) mod connection;
pub mod error;
pub mod history;
pub mod marks;
pub mod mcp;
pub mod pb;
pub(crate) mod private_dir;
pub mod process;
pub(crate) mod registry;
pub mod render;
pub mod sandbox;
pub mod screen;
pub mod server;
pub(crate) mod service;
pub(crate) mod session;
pub(crate) mod state;
pub(crate) mod validate;
pub mod waiting;
pub(crate) mod web;

pub use error::{Error, Result};
