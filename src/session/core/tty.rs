//! The core's port to the terminal's OS side: what a decision must know now (the terminal's
//! modes and foreground group, whether a program is blocked reading it, output already
//! waiting) and the two things done to the terminal whose outcome the decision needs at once
//! (a signal, whose caller hears which group got it; a resize). The actor answers with the PTY
//! and `/proc`; tests answer with a script.

use crate::process::stdin_probe::Reader;
use nix::sys::signal::Signal;
use std::collections::HashMap;
use std::io;

/// The terminal's line discipline, as far as decisions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::session) struct Modes {
    /// Line mode (`ICANON`): the program reads whole lines.
    pub canonical: bool,
    /// What is typed is echoed (`ECHO`).
    pub echo: bool,
}

/// The terminal's OS side, as the core sees it.
pub(in crate::session) trait Tty {
    /// The session's program (an integrated shell): its pid, also its process group.
    fn program(&self) -> i32;
    /// The terminal's foreground process group.
    fn foreground_group(&self) -> Option<i32>;
    /// The terminal's modes; `None` when they cannot be read (the terminal hung up).
    fn modes(&self) -> Option<Modes>;
    /// Whether what is typed is hidden (a password prompt, as the PTY tells it).
    fn input_hidden(&self) -> bool;
    /// Whether input written waits unread by the program.
    fn input_pending(&self) -> bool;
    /// Bytes of output there to be read now.
    fn output_waiting(&self) -> usize;
    /// Reads at most `limit` bytes of output already there, through the journal (`None`:
    /// none was there).
    fn read_now(&mut self, limit: usize) -> Option<Vec<u8>>;
    /// Whether the actor has taken in its slice of output and lets other sessions run before
    /// it reads more (see `pacing.rs`).
    fn slice_spent(&self) -> bool;
    /// A process of the foreground group blocked reading the terminal (the stdin probe).
    fn reader(&self) -> Option<Reader>;
    /// Schedule counts of the threads that may take the input about to be written: the
    /// shell's alone when it is at its prompt, else the foreground group's.
    fn switches(&mut self, shell_at_prompt: bool) -> HashMap<i32, u64>;
    /// A process's command name.
    fn comm(&self, pid: i32) -> Option<String>;
    /// The program's working directory (empty when unknown).
    fn cwd(&self) -> String;
    /// Sends `signal` to process group `group`.
    fn signal(&mut self, group: i32, signal: Signal) -> nix::Result<()>;
    /// Gives the terminal a new size (the kernel tells the program).
    fn resize(&mut self, cols: u16, rows: u16) -> io::Result<()>;
}
