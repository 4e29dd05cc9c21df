//! The core's port answered for real: the PTY master (its modes, foreground group, output
//! already there), `/proc` (the stdin probe, command names, the working directory) and the
//! signals and resizes the core asks for.

use crate::process::procfs;
use crate::process::pty::Pty;
use crate::process::stdin_probe::{self, Reader, ScheduleCounter};
use crate::session::capture::Capture;
use crate::session::core::{Modes, Tty};
use crate::session::pacing::Pacing;
use nix::sys::signal::{Signal, killpg};
use nix::sys::termios::LocalFlags;
use nix::unistd::Pid;
use std::collections::HashMap;
use std::io;

/// The actor's OS side, borrowed for one event.
pub(super) struct Os<'a> {
    pub(super) pty: &'a Pty,
    /// Reads go through the journal, as every read of the master does.
    pub(super) capture: &'a mut Capture,
    pub(super) pacing: &'a mut Pacing,
    /// The shell's schedule count, opened on first use (see `switches`).
    pub(super) shell_counter: &'a mut Option<ScheduleCounter>,
}

impl Tty for Os<'_> {
    fn program(&self) -> i32 {
        self.pty.pid() as i32
    }

    fn foreground_group(&self) -> Option<i32> {
        self.pty.foreground_pgid()
    }

    fn modes(&self) -> Option<Modes> {
        self.pty.termios().map(|t| Modes {
            canonical: t.local_flags.contains(LocalFlags::ICANON),
            echo: t.local_flags.contains(LocalFlags::ECHO),
        })
    }

    fn input_hidden(&self) -> bool {
        self.pty.input_hidden()
    }

    fn input_pending(&self) -> bool {
        self.pty.input_pending()
    }

    fn output_waiting(&self) -> usize {
        self.pty.output_waiting()
    }

    fn read_now(&mut self, limit: usize) -> Option<Vec<u8>> {
        let limit = limit.min(self.pacing.read_limit());
        match self.capture.try_read(self.pty, limit) {
            Ok(Some(n)) if n > 0 => {
                self.pacing.took(n, std::time::Duration::ZERO);
                Some(self.capture.take(n, <[u8]>::to_vec))
            }
            _ => None,
        }
    }

    fn slice_spent(&self) -> bool {
        self.pacing.slice_spent()
    }

    fn reader(&self) -> Option<Reader> {
        let tty = self.pty.tty_path()?;
        let password_mode = self.modes().is_some_and(|m| m.canonical && !m.echo);
        // The group from the master (one ioctl), not from /proc/<shell>/stat: this runs at
        // every settle of a running command.
        let fg = self.pty.foreground_pgid()?;
        stdin_probe::terminal_reader(self.program(), fg, tty, password_mode)
    }

    /// A shell at its prompt is the terminal's foreground and reads on its main thread: one
    /// read of a file kept open instead of a walk of /proc (this is on every send's path).
    fn switches(&mut self, shell_at_prompt: bool) -> HashMap<i32, u64> {
        let shell = self.program();
        if shell_at_prompt {
            if self.shell_counter.is_none() {
                *self.shell_counter = ScheduleCounter::open(shell);
            }
            if let Some(count) = self.shell_counter.as_ref().and_then(ScheduleCounter::read) {
                return HashMap::from([(shell, count)]);
            }
        }
        stdin_probe::task_switches(shell)
    }

    fn comm(&self, pid: i32) -> Option<String> {
        procfs::comm(pid)
    }

    fn cwd(&self) -> String {
        procfs::cwd(self.program())
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    fn signal(&mut self, group: i32, signal: Signal) -> nix::Result<()> {
        killpg(Pid::from_raw(group), signal)
    }

    fn resize(&mut self, cols: u16, rows: u16) -> io::Result<()> {
        self.pty.resize(cols, rows)
    }
}
