//! Output taken in: the bytes go to watchers and a streaming caller, then to the terminal model;
//! the marks it finds go to the shell state and the records, the answers to queries it asked
//! are queued, and the state is published as its schedule allows.

use super::{Core, Cx, REST_AFTER};
use crate::marks::Mark;
use crate::screen::Position;
use crate::session::send::ActiveSend;
use crate::session::shell::MarkEffect;

/// The most output one read of `take_waiting_output` takes.
const READ_AT_ONCE: usize = 64 * 1024;

impl Core {
    /// Takes in output read from the terminal.
    pub(super) fn take_output(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) {
        self.before_emulation(cx, bytes);
        self.terminal.feed(bytes);
        self.after_emulation(cx);
        self.after_taking_output(cx);
    }

    /// What follows output taken in: output already waiting before answers go out.
    pub(super) fn after_taking_output(&mut self, cx: &mut Cx<'_>) {
        if std::mem::take(&mut self.replies_await_output) && !self.taking_output {
            self.take_output_before_replies(cx);
        }
    }

    /// What output means before the terminal model takes it in: activity, and the raw bytes
    /// for watchers and a streaming caller.
    pub(super) fn before_emulation(&mut self, cx: &mut Cx<'_>, bytes: &[u8]) {
        self.last_output = cx.now;
        self.rest_due = Some(cx.now + REST_AFTER);
        if let Some(a) = self.active.as_mut() {
            a.last_activity = cx.now;
            a.stdin_blocked = false;
        }
        self.probe.rearm(cx.now);
        self.watchers.forward(bytes);
        if let Some(a) = self.active.as_mut() {
            a.forward(bytes);
        }
    }

    /// What the terminal model found in output it took in: marks, answers to queries, modes.
    pub(super) fn after_emulation(&mut self, cx: &mut Cx<'_>) {
        // Marks first: a command-end mark drops the answers its command left unwritten.
        for mut event in self.terminal.take_marks() {
            self.record_mark(cx, &event);
            // The line the end mark found goes to the viewport; the prompt drawn after the mark,
            // in this very read, may have changed it on the screen already.
            if let Some(line) = event.line.take() {
                self.end_lines.push(event.at, line);
            }
            self.shell_marks.push(&event);
            self.on_mark(cx, &event.mark, event.at);
        }
        let replies = self.terminal.take_replies_after_end();
        if !replies.is_empty() && self.non_canonical(cx) {
            // The program waits for these answers: it is not waiting for the agent until it
            // has taken them.
            self.probe.before_replies(cx.tty.switches(false));
            self.shell.queue_replies(&replies);
            self.replies_await_output = true;
        }
        let terminal = &self.terminal;
        self.shell.after_output(|| terminal.bracketed_paste());
        self.publish_output(cx);
    }

    /// Takes in the output already there before answers go out: a command-end mark in it means
    /// the command that asked has ended (its shell may have put the terminal in raw mode for
    /// its prompt since), and drops them. Read after the mode was checked, so such a mark,
    /// printed before the shell's editor set raw mode, is in what is read.
    pub(super) fn take_output_before_replies(&mut self, cx: &mut Cx<'_>) {
        if std::mem::replace(&mut self.taking_output, true) {
            return;
        }
        self.take_waiting_output(cx, |core| core.shell.replies_pending());
        self.taking_output = false;
    }

    /// Takes in the output that is already there, while `more` holds: what a decision made now
    /// (an answer goes out, input is typed ahead) must see. Bounded by what the terminal held
    /// when called, not by the time slice: cut short, it left a command-end mark unread, and
    /// the answers to that command's queries went to the shell's prompt as input. A flood
    /// cannot hold the actor here longer than the kernel's buffer lasts.
    pub(super) fn take_waiting_output(&mut self, cx: &mut Cx<'_>, more: impl Fn(&Self) -> bool) {
        let mut left = cx.tty.output_waiting();
        while left > 0 && more(self) {
            let Some(bytes) = cx.tty.read_now(left.min(READ_AT_ONCE)) else {
                break;
            };
            left = left.saturating_sub(bytes.len());
            self.take_output(cx, &bytes);
        }
    }

    pub(super) fn on_mark(&mut self, cx: &mut Cx<'_>, mark: &Mark, at: Position) {
        let now = cx.now;
        let span = self.active.as_mut().map(|a| &mut a.span);
        match self.shell.on_mark(mark, at, now, span) {
            MarkEffect::None => {}
            MarkEffect::CommandStarted(at) => {
                if let Some(kill) = self.active.as_mut().and_then(|a| a.killing.as_mut()) {
                    kill.arm(now);
                    kill.step(cx.tty, now);
                }
                self.set_job_start(cx, at);
            }
            MarkEffect::Prompt => {
                if !self.lifecycle.is_ready() {
                    self.become_ready(cx, "prompt mark");
                }
            }
        }
    }

    pub(super) fn set_job_start(&mut self, cx: &mut Cx<'_>, at: Position) {
        if let Some(id) = self.active.as_ref().and_then(ActiveSend::job_id) {
            self.jobs.command_started(id, at);
            self.save_jobs(cx);
        }
    }
}
