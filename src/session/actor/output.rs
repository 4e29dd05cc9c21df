//! Output taken in: every read of the terminal goes through the capture (the journal) to the
//! terminal model; the marks it holds go to the shell state, the answers to queries it asked
//! are queued, raw bytes reach watchers and a streaming caller, and the journal is compacted
//! once due.

use super::{Actor, REST_AFTER};
use crate::marks::Mark;
use crate::screen::Position;
use crate::session::send::ActiveSend;
use crate::session::shell::MarkEffect;
use std::time::Instant;

impl Actor {
    /// Takes whatever output is there, without waiting.
    pub(super) fn read_now(&mut self) {
        if let Ok(Some(n)) = self.capture.try_read(&self.pty, self.pacing.read_limit())
            && n > 0
        {
            self.take_read(n);
        }
    }

    /// Handles the `n` bytes the last read took.
    pub(super) fn take_output(&mut self, n: usize) {
        let mut capture = std::mem::take(&mut self.capture);
        let started = Instant::now();
        capture.take(n, |bytes| self.on_output(bytes));
        self.pacing.took(n, started.elapsed());
        self.capture = capture;
        // Only now, with the capture back, may more be read (a read inside `on_output` would
        // bypass the journal).
        self.after_taking_output();
    }

    /// What follows output taken in, once the capture is back: output already waiting before
    /// answers go out, and the journal's compaction.
    pub(super) fn after_taking_output(&mut self) {
        if std::mem::take(&mut self.replies_await_output) && !self.taking_output {
            self.take_output_before_replies();
        }
        if !self.taking_output {
            self.compact_journal_if_due();
        }
    }

    pub(super) fn on_output(&mut self, bytes: &[u8]) {
        self.before_emulation(bytes);
        self.terminal.feed(bytes);
        self.after_emulation();
    }

    /// What output means before the terminal model takes it in: activity, and the raw bytes
    /// for watchers and a streaming caller.
    pub(super) fn before_emulation(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        self.last_output = now;
        self.rest_due = Some(now + REST_AFTER);
        if let Some(a) = self.active.as_mut() {
            a.last_activity = now;
            a.stdin_blocked = false;
        }
        self.rearm_probe();
        self.forward(bytes);
    }

    /// What the terminal model found in output it took in: marks, answers to queries, modes.
    pub(super) fn after_emulation(&mut self) {
        // Marks first: a command-end mark drops the answers its command left unwritten.
        for mut event in self.terminal.take_marks() {
            self.record_mark(&event);
            // The line the end mark found goes to the viewport; the prompt drawn after the mark,
            // in this very read, may have changed it on the screen already.
            if let Some(line) = event.line.take() {
                self.end_lines.push(event.at, line);
            }
            self.shell_marks.push(&event);
            self.on_mark(&event.mark, event.at);
        }
        let replies = self.terminal.take_replies_after_end();
        if !replies.is_empty() && self.non_canonical() {
            // The program waits for these answers: it is not waiting for the agent until it
            // has taken them.
            self.probe.before_replies(self.pty.pid() as i32);
            self.shell.queue_replies(&replies);
            self.replies_await_output = true;
        }
        let terminal = &self.terminal;
        self.shell.after_output(|| terminal.bracketed_paste());
        self.publish_output();
    }

    /// Takes in the output already there before answers go out: a command-end mark in it means
    /// the command that asked has ended (its shell may have put the terminal in raw mode for
    /// its prompt since), and drops them. Read after the mode was checked, so such a mark,
    /// printed before the shell's editor set raw mode, is in what is read.
    pub(super) fn take_output_before_replies(&mut self) {
        if std::mem::replace(&mut self.taking_output, true) {
            return;
        }
        self.take_waiting_output(|actor| actor.shell.replies_pending());
        self.taking_output = false;
    }

    /// Sends raw output to watchers and to a streaming caller.
    pub(super) fn forward(&mut self, bytes: &[u8]) {
        self.watchers.forward(bytes);
        if let Some(a) = self.active.as_mut() {
            a.forward(bytes);
        }
    }

    pub(super) fn on_mark(&mut self, mark: &Mark, at: Position) {
        let now = Instant::now();
        let span = self.active.as_mut().map(|a| &mut a.span);
        match self.shell.on_mark(mark, at, now, span) {
            MarkEffect::None => {}
            MarkEffect::CommandStarted(at) => {
                let shell = self.pty.pid() as i32;
                if let Some(kill) = self.active.as_mut().and_then(|a| a.killing.as_mut()) {
                    kill.arm(now);
                    kill.step(shell, self.pty.foreground_pgid(), now);
                }
                self.set_job_start(at);
            }
            MarkEffect::Prompt => {
                if !self.readiness.is_ready() {
                    self.become_ready("prompt mark");
                }
            }
        }
    }

    pub(super) fn set_job_start(&mut self, at: Position) {
        if let Some(id) = self.active.as_ref().and_then(ActiveSend::job_id) {
            self.jobs.command_started(id, at);
            self.save_jobs();
        }
    }
}
