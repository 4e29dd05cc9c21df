//! Who reads the terminal: the stdin probe that tells a program blocked on it, typeahead (text
//! for a running command nobody reads), and the terminal's line mode.

use super::{Core, Cx};
use crate::error::Error;
use crate::session::SendInput;
use crate::session::input::{printable, typeahead_refusal};

impl Core {
    /// Runs the stdin probe; a positive answer counts only once all output the program wrote
    /// before blocking has been read (a shell that printed its prompt mark and then blocked
    /// must be seen at its prompt, not as reading stdin).
    pub(super) fn run_probe(&mut self, cx: &mut Cx<'_>) {
        if self.shell.replies_pending() {
            return; // answers to the program's queries are still on their way
        }
        let Some(reader) = cx.tty.reader() else {
            return;
        };
        if self.shell.reader_opens_gate() {
            self.probe.rearm(cx.now);
            return;
        }
        if cx.tty.input_pending() {
            return;
        }
        if cx.tty.slice_spent() {
            self.probe.rearm(cx.now);
            return; // output may wait unread: decide once the actor has yielded
        }
        let mut drained = false;
        while let Some(bytes) = cx.tty.read_now(usize::MAX) {
            drained = true;
            self.take_output(cx, &bytes);
            if cx.tty.slice_spent() {
                break; // what is left is read after the yield; `take_output` rearmed the probe
            }
        }
        if drained {
            return; // decide again with the new output (and its marks) taken into account
        }
        if self.shell.reader_releases_hold() {
            self.probe.rearm(cx.now);
            return; // held typeahead goes to the program that reads
        }
        if self.probe.reader_has_not_taken_input(&reader) {
            return; // it has not taken the input written since it blocked
        }
        if self.shell.reads_own_prompt(reader.is_shell) {
            return; // the shell's own prompt: the marks settle this
        }
        if !self.lifecycle.is_ready() {
            self.become_ready(cx, "terminal reader");
            return;
        }
        if let Some(a) = self.active.as_mut() {
            tracing::debug!(session = %self.spec.id, reader = %reader.comm, pid = reader.pid, tid = reader.tid, switches = reader.switches, before = ?self.probe.switches_before(&reader), "blocked on the terminal");
            a.stdin_blocked = true;
        }
    }

    /// Whether `input` would only be typed ahead (docs/api.md): text, not only control
    /// characters, while an integrated shell's command runs and nothing reads the terminal. A
    /// program that put the terminal in non-canonical mode reads keys (a TUI that polls with a
    /// short timeout does not look blocked on the terminal). Takes in the output already there
    /// first: the command may have ended.
    pub(super) fn types_ahead(&mut self, cx: &mut Cx<'_>, input: &SendInput) -> bool {
        if !(self.shell.command_running() && printable(&input.text)) {
            return false;
        }
        self.take_waiting_output(cx, |_| true);
        self.shell.command_running() && !self.non_canonical(cx) && cx.tty.reader().is_none()
    }

    pub(super) fn typeahead_refusal(&self, cx: &Cx<'_>) -> Error {
        let shell = cx.tty.program();
        let program = cx
            .tty
            .foreground_group()
            .filter(|g| *g > 0 && *g != shell)
            .and_then(|g| cx.tty.comm(g));
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
    pub(super) fn non_canonical(&self, cx: &Cx<'_>) -> bool {
        cx.tty.modes().is_some_and(|m| !m.canonical)
    }
}
