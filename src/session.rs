//! One PTY session: its rooms and what they offer outside. A `SessionHandle` (`handle.rs`) is a
//! cheap clone holding a command channel and a `watch` of the state `List` shows; the actor task
//! (`actor.rs`) owns the PTY, the child, the terminal model and the in-flight send. The
//! session's settings are derived in `spec.rs`; the actor's state is split by what it is about
//! (the module map in `lib.rs` lists the rooms).

mod actor;
mod aim;
mod api;
mod capture;
mod command;
mod command_view;
mod core;
mod handle;
mod input;
mod jobs;
mod keyboard;
mod kill;
mod pacing;
mod probe;
mod publish;
pub(crate) mod records;
mod search;
mod send;
mod shell;
mod shell_marks;
mod spec;
mod startup;
mod succession;
mod view;
mod watchers;

pub use api::{
    AttachRequest, AttachStart, JobReport, JobStatus, PageScreen, ReadOutcome, ReadQuery, Ready,
    SendInput, SendOutcome, SessionState, Status, WatchStart, exited_text, status_text, unix_ms,
};
pub(crate) use command::{Command, Sink};
pub use command_view::{CommandInfo, CommandsOutcome, CommandsQuery, DEFAULT_COMMANDS};
pub use handle::SessionHandle;
pub(crate) use keyboard::attach_command;
pub use search::{SearchOutcome, SearchQuery};
pub(crate) use spec::OpenParams;
pub use spec::SessionSpec;
pub(crate) use succession::{Kept, Persist, Replay, resumed_wait};
