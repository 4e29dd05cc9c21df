//! Who reads the terminal: the stdin probe that tells a program blocked on it, typeahead (text
//! for a running command nobody reads), the terminal's line mode, and output taken in before
//! a decision.

use super::Actor;
use crate::error::Error;
use crate::session::SendInput;
use crate::session::input::{printable, typeahead_refusal};

/// The most output one read of `take_waiting_output` takes.
const READ_AT_ONCE: usize = 64 * 1024;

impl Actor {
    /// Runs the stdin probe; a positive answer counts only once all output the program wrote
    /// before blocking has been read (a shell that printed its prompt mark and then blocked
    /// must be seen at its prompt, not as reading stdin).
    pub(super) fn run_probe(&mut self) {
        if self.shell.replies_pending() {
            return; // answers to the program's queries are still on their way
        }
        let Some(reader) = self.terminal_reader() else {
            return;
        };
        if self.shell.reader_opens_gate() {
            self.rearm_probe();
            return;
        }
        if self.pty.input_pending() {
            return;
        }
        if self.pacing.slice_spent() {
            self.rearm_probe();
            return; // output may wait unread: decide once the actor has yielded
        }
        let mut drained = false;
        while let Ok(Some(n)) = self.capture.try_read(&self.pty, self.pacing.read_limit()) {
            if n == 0 {
                break;
            }
            drained = true;
            self.take_output(n);
            if self.pacing.slice_spent() {
                break; // what is left is read after the yield; `take_output` rearmed the probe
            }
        }
        if drained {
            return; // decide again with the new output (and its marks) taken into account
        }
        if self.shell.reader_releases_hold() {
            self.rearm_probe();
            return; // held typeahead goes to the program that reads
        }
        if self.probe.reader_has_not_taken_input(&reader) {
            return; // it has not taken the input written since it blocked
        }
        if self.shell.reads_own_prompt(reader.is_shell) {
            return; // the shell's own prompt: the marks settle this
        }
        if !self.readiness.is_ready() {
            self.become_ready("terminal reader");
            return;
        }
        if let Some(a) = self.active.as_mut() {
            tracing::debug!(session = %self.spec.id, reader = %reader.comm, pid = reader.pid, tid = reader.tid, switches = reader.switches, before = ?self.probe.switches_before(&reader), "blocked on the terminal");
            a.stdin_blocked = true;
        }
    }

    /// A process of the terminal's foreground group blocked reading the terminal, if any.
    pub(super) fn terminal_reader(&self) -> Option<crate::process::stdin_probe::Reader> {
        let tty = self.pty.tty_path()?;
        let password_mode = self.pty.termios().is_some_and(|t| {
            use nix::sys::termios::LocalFlags;
            t.local_flags.contains(LocalFlags::ICANON) && !t.local_flags.contains(LocalFlags::ECHO)
        });
        // The group from the master (one ioctl), not from /proc/<shell>/stat: this runs at
        // every settle of a running command.
        let fg = self.pty.foreground_pgid()?;
        crate::process::stdin_probe::terminal_reader(self.pty.pid() as i32, fg, tty, password_mode)
    }

    /// Whether `input` would only be typed ahead (docs/api.md): text, not only control
    /// characters, while an integrated shell's command runs and nothing reads the terminal. A
    /// program that put the terminal in non-canonical mode reads keys (a TUI that polls with a
    /// short timeout does not look blocked on the terminal). Takes in the output already there
    /// first: the command may have ended.
    pub(super) fn types_ahead(&mut self, input: &SendInput) -> bool {
        if !(self.shell.command_running() && printable(&input.text)) {
            return false;
        }
        self.take_waiting_output(|_| true);
        self.shell.command_running() && !self.non_canonical() && self.terminal_reader().is_none()
    }

    /// Takes in the output that is already there, while `more` holds: what a decision made now
    /// (an answer goes out, input is typed ahead) must see. Bounded by what the terminal held
    /// when called, not by the time slice: cut short, it left a command-end mark unread, and
    /// the answers to that command's queries went to the shell's prompt as input. A flood
    /// cannot hold the actor here longer than the kernel's buffer lasts.
    pub(super) fn take_waiting_output(&mut self, more: impl Fn(&Self) -> bool) {
        let mut left = self.pty.output_waiting();
        while left > 0
            && more(self)
            && let Ok(Some(n)) = self.capture.try_read(&self.pty, left.min(READ_AT_ONCE))
            && n > 0
        {
            left = left.saturating_sub(n);
            self.take_output(n);
        }
    }

    pub(super) fn typeahead_refusal(&self) -> Error {
        let shell = self.pty.pid() as i32;
        let program = self
            .pty
            .foreground_pgid()
            .filter(|g| *g > 0 && *g != shell)
            .and_then(crate::process::procfs::comm);
        typeahead_refusal(
            &self.spec.id,
            self.shell.running_command(),
            program.as_deref(),
        )
    }

    /// Whether the terminal is in non-canonical mode (raw or cbreak, as vim, line editors at
    /// their prompt and programs that read keys or an answer set it). Answers to terminal queries
    /// go out only then: in line mode no program reads an answer before a newline, so the next
    /// line read, the shell's or a later command's, would take it, and the terminal would echo it
    /// into the output. (`printf '\e[6n'` at a shell prompt runs in line mode; a program that
    /// sets raw mode before it asks gets its answer.)
    pub(super) fn non_canonical(&self) -> bool {
        use nix::sys::termios::LocalFlags;
        self.pty
            .termios()
            .is_some_and(|t| !t.local_flags.contains(LocalFlags::ICANON))
    }
}
