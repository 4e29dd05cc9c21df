//! The session's own life: the program's exit, readiness at startup (its waiters answered),
//! and the state published for `List` and job waiters.

use super::{Core, Cx, Effect};
use crate::marks::Integration;
use crate::process::pty::ExitKind;
use crate::screen::Position;
use crate::session::{Ready, SessionState, Status, view};
use tokio::sync::oneshot;

impl Core {
    pub(super) fn on_exit(&mut self, cx: &mut Cx<'_>, kind: ExitKind) {
        // What the program wrote before it exited is in the terminal already: take it in
        // first, or the send would settle (and a Read answer) without the program's last words.
        self.take_waiting_output(cx, |_| true);
        let starting = !self.lifecycle.is_ready();
        let waiters = self.lifecycle.end(kind);
        // Watchers see the stream end with the program.
        self.watchers.end();
        if starting {
            self.ready(cx, waiters, "exit");
        }
        self.publish(cx);
    }

    pub(super) fn become_ready(&mut self, cx: &mut Cx<'_>, why: &str) {
        let waiters = self.lifecycle.become_ready();
        self.ready(cx, waiters, why);
    }

    /// The session became ready: `waiters` hear what came before its prompt.
    fn ready(&mut self, cx: &mut Cx<'_>, waiters: Vec<oneshot::Sender<Ready>>, why: &str) {
        tracing::debug!(session = %self.spec.id, why, "ready");
        let info = self.ready_info();
        for w in waiters {
            let _ = w.send(info.clone());
        }
        let cursor = self.terminal.cursor();
        // An integrated shell's first prompt is no one's output: an empty send right after
        // Open reports nothing new, as it does after any command.
        self.last_seen = if self.spec.integration == Integration::None {
            cursor
        } else {
            Position { col: 0, ..cursor }
        };
        // List shows the startup output (line count, time) as soon as Open has returned.
        self.publish(cx);
    }

    pub(super) fn ready_info(&self) -> Ready {
        // The MOTD is what came before the prompt line.
        let at_prompt = self.spec.integration != Integration::None && !self.exited();
        Ready {
            motd: view::motd(&self.terminal, at_prompt),
        }
    }

    pub(super) fn status(&self) -> Status {
        match self.lifecycle.exit() {
            Some(kind) => Status::Exited(kind),
            None => Status::Running,
        }
    }

    /// Publishes after output, as the schedule allows (see `publish.rs`).
    pub(super) fn publish_output(&mut self, cx: &mut Cx<'_>) {
        if self.publishing.after_output(cx.now) {
            self.publish(cx);
        }
    }

    pub(super) fn publish(&mut self, cx: &mut Cx<'_>) {
        self.publishing.published(cx.now);
        let (cols, rows) = self.terminal.size();
        let since_output = cx.now.saturating_duration_since(self.last_output);
        cx.effect(Effect::Publish(SessionState {
            status: self.status(),
            busy: self.active.is_some() || self.deferred.is_some(),
            total_lines: self.terminal.total_lines(),
            last_output_unix_ms: cx.unix_ms - since_output.as_millis() as i64,
            cols,
            rows,
            attached: self.keyboard.holder().map(str::to_owned),
        }));
    }
}
