//! The session's own life: the program's exit, readiness at startup (its waiters answered),
//! and the state published for `List` and job waiters.

use super::Actor;
use crate::marks::Integration;
use crate::process::pty::ExitKind;
use crate::screen::Position;
use crate::session::{Ready, Status, unix_ms, view};
use std::time::{Instant, SystemTime};

impl Actor {
    pub(super) fn on_exit(&mut self, kind: ExitKind) {
        // What the program wrote before it exited is in the terminal already: take it in
        // first, or the send would settle (and a Read answer) without the program's last words.
        self.take_waiting_output(|_| true);
        self.exit = Some(kind);
        // Watchers see the stream end with the program.
        self.watchers.end();
        self.publish();
    }

    pub(super) fn become_ready(&mut self, why: &str) {
        tracing::debug!(session = %self.spec.id, why, "ready");
        let waiters = self.readiness.become_ready();
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
        self.publish();
    }

    pub(super) fn ready_info(&self) -> Ready {
        // The MOTD is what came before the prompt line.
        let at_prompt = self.spec.integration != Integration::None && self.exit.is_none();
        Ready {
            motd: view::motd(&self.terminal, at_prompt),
        }
    }

    pub(super) fn status(&self) -> Status {
        match self.exit {
            Some(kind) => Status::Exited(kind),
            None => Status::Running,
        }
    }

    pub(super) fn cwd(&self) -> String {
        crate::process::procfs::cwd(self.pty.pid() as i32)
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// Publishes after output, as the schedule allows (see `publish.rs`).
    pub(super) fn publish_output(&mut self) {
        if self.publishing.after_output(Instant::now()) {
            self.publish();
        }
    }

    pub(super) fn publish(&mut self) {
        self.publishing.published(Instant::now());
        let total_lines = self.terminal.total_lines();
        let busy = self.active.is_some() || self.deferred.is_some();
        let status = self.status();
        let last = unix_ms(SystemTime::now() - self.last_output.elapsed());
        self.state.send_modify(|s| {
            s.total_lines = total_lines;
            s.busy = busy;
            s.status = status;
            s.last_output_unix_ms = last;
        });
    }
}
