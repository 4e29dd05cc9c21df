//! ptyd: a daemon that owns persistent PTY sessions for AI agents, served over gRPC on a Unix
//! socket. Sessions are keyed by the owning agent's id; a send returns when something meaningful
//! happened (prompt, stdin read, idle, timeout, exit) with byte-capped, model-ready text.
//!
//! # Layout
//! - [`server`]: the socket, peer check, and `serve(listener, config, shutdown)`.
//! - [`h2_authority`]: accepts clients that send the socket path as HTTP/2 `:authority`.
//! - [`service`]: the gRPC `Terminals` service and the error-to-status table.
//! - [`registry`]: sessions keyed by owner agent; ids; limits.
//! - [`session`]: one actor task per PTY session: the loop and handlers (`session/actor.rs`),
//!   the shell's state machine (`shell.rs`, pure), the send in flight (`send.rs`), jobs
//!   (`jobs.rs`, `kill.rs`), views over the terminal (`view.rs`, pure), the stdin probe's
//!   schedule (`probe.rs`) and the Watch feed (`watchers.rs`).
//! - [`process`]: the OS side of a session: `process::pty` (spawning on a PTY, non-blocking
//!   master I/O), [`process::helper`] (the per-session helper, a subreaper that owns the
//!   process tree), [`process::cgroup`] (one cgroup v2 per session, under one parent per
//!   daemon), [`process::reaper`] (finding and ending a session's process tree),
//!   [`process::procfs`] (named `/proc` reads), `process::fd` (fd helpers on nix).
//! - [`screen`]: the terminal emulator plus numbered line history (pure).
//! - [`history`]: the paged, bounded line store (pure).
//! - [`marks`]: shell-integration wrappers and OSC 133/7 parsing.
//! - [`waiting`]: deciding the wait reason (pure).
//! - [`render`]: byte-capped model-facing text (pure).
//! - `memory`: one `malloc_trim` after a burst of sessions rests or closes.
//! - [`validate`]: request checks with messages that name the field (pure).
//! - [`config`]: terminal types, limits, defaults, environment policy.
//! - [`acp`]: the ACP agent shim (`ptyd acp`).
//! - [`client`]: typed client over the socket.
//! - [`cli`]: the `ptyd` command line.
//! - [`pb`]: protobuf glue.
//! - [`error`]: the library's error type.
#![warn(missing_docs)]

pub mod acp;
pub mod cli;
pub mod client;
pub mod config;
pub mod error;
pub mod h2_authority;
pub mod history;
pub mod marks;
pub(crate) mod memory;
pub mod pb;
pub mod process;
pub mod registry;
pub mod render;
pub mod screen;
pub mod server;
pub mod service;
pub mod session;
pub mod validate;
pub mod waiting;

pub use error::{Error, Result};
