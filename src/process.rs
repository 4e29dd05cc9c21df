//! Everything that touches the OS for a session's processes: the PTY, the per-session helper
//! that owns the process tree, one cgroup v2 per session, and finding and ending process trees.
//! Nothing here knows about a session's text.

pub mod cgroup;
pub mod helper;
pub mod pty;
pub mod reaper;
