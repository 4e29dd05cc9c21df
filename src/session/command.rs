//! The actor's mailbox: what a `SessionHandle` asks of it, and where a send's result goes.

use super::{
    AttachRequest, AttachStart, CommandsOutcome, CommandsQuery, JobReport, JobStatus, PageScreen,
    ReadOutcome, ReadQuery, Ready, SearchOutcome, SearchQuery, SendInput, SendOutcome, WatchStart,
};
use crate::error::Result;
use nix::sys::signal::Signal;
use tokio::sync::{mpsc, oneshot};

/// Where a send's result goes.
pub(crate) enum Sink {
    /// A unary caller.
    Reply(oneshot::Sender<Result<SendOutcome>>),
    /// A streaming caller: raw output chunks, then the result.
    Stream(oneshot::Sender<Result<SendOutcome>>, mpsc::Sender<Vec<u8>>),
    /// A background job with this id; the oneshot confirms the reservation.
    Job(String, oneshot::Sender<Result<()>>),
}

pub(crate) enum Command {
    Ready(oneshot::Sender<Ready>),
    Send(SendInput, Sink),
    Read(ReadQuery, oneshot::Sender<Result<ReadOutcome>>),
    Commands(CommandsQuery, oneshot::Sender<CommandsOutcome>),
    Search(Box<SearchQuery>, oneshot::Sender<Result<SearchOutcome>>),
    Watch(u32, oneshot::Sender<WatchStart>),
    /// The screen as styled runs, for the web page.
    Screen(oneshot::Sender<PageScreen>),
    Attach(AttachRequest, oneshot::Sender<Result<AttachStart>>),
    /// The attached person's keys, for the holder of the token.
    Keys(u64, Vec<u8>),
    /// The attached person's window size (cols, rows), for the holder of the token.
    AttachSize(u64, u16, u16),
    /// The holder of the token lets go of the keyboard.
    Detach(u64),
    JobOutput(String, usize, oneshot::Sender<Option<JobReport>>),
    JobKill(String, oneshot::Sender<Option<JobStatus>>),
    Signal(Signal, oneshot::Sender<Result<i32>>),
}
