//! Everything that touches the OS for a session's processes: the PTY, the per-session helper
//! that owns the process tree, one cgroup v2 per session, finding and ending process trees, and
//! the `/proc` and file-descriptor calls they share. Nothing here knows about a session's text.
//!
//! Imports point one way: `pty` uses the others; `reaper` and `cgroup` use `procfs` and `fd`
//! (`cgroup` also implements `reaper`'s `Members`, and `reaper` uses `tag`, which uses
//! `procfs`); `tracking` uses `cgroup`; `helper` uses `procfs`, `fd`, `handover` and `reaper`'s
//! `stop_all`; `stdin_probe` uses `procfs`; `procfs`, `fd` and `slice` use nothing of the crate.

pub mod cgroup;
pub(crate) mod fd;
pub(crate) mod handover;
pub mod helper;
pub(crate) mod memory;
pub mod procfs;
pub(crate) mod pty;
pub mod reaper;
pub(crate) mod sandbox;
pub(crate) mod slice;
pub mod stdin_probe;
pub(crate) mod tag;
mod tracking;

pub use tracking::ProcessTracking;
