//! The actor's clock: the nearest deadline its loop sleeps until (startup, the send's
//! deadlines, a signal's grace, the stdin probe, a publish owed, resting), what each does when it
//! comes, and when the loop polls instead of sleeping (`SPIN`).

use super::Actor;
use std::time::Instant;

impl Actor {
    pub(super) fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let startup = self.readiness.wait_ends(self.last_output);
        let send = self.active.as_ref().map(|a| a.next_deadline(now));
        let probe = self.probe.next().filter(|_| self.wants_probe());
        let prompt_gate = self.shell.write_deadline(now);
        let rest = self.rest_due.filter(|_| self.active.is_none());
        let signals = self.signals.next_check(now);
        let deferred = self
            .deferred
            .as_ref()
            .and_then(|_| self.shell.signal_gate(now));
        [
            startup,
            send,
            deferred,
            probe,
            self.publishing.due(),
            prompt_gate,
            rest,
            signals,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Probes run only while someone waits: a send whose input is written, or startup.
    pub(super) fn wants_probe(&self) -> bool {
        if !self.readiness.is_ready()
            || (self.shell.input_gated() && self.shell.input_pending())
            || self.shell.input_held()
        {
            return true;
        }
        self.active.as_ref().is_some_and(|a| {
            !a.stdin_blocked && !self.shell.input_pending() && a.span.end.is_none()
        }) && self.exit.is_none()
    }

    /// Polls for output while a send that just wrote its input waits for the answer.
    pub(super) fn spinning(&self) -> bool {
        self.spin_until.is_some_and(|until| Instant::now() < until)
            && self
                .active
                .as_ref()
                .is_some_and(|a| a.span.end.is_none() && !a.stdin_blocked)
    }

    pub(super) fn rearm_probe(&mut self) {
        self.probe.rearm(Instant::now());
    }

    pub(super) fn on_timer(&mut self) {
        let now = Instant::now();
        if self.active.is_none() && self.rest_due.is_some_and(|at| now >= at) {
            self.rest_due = None;
            self.capture.rest();
            if self.terminal.rest() {
                crate::process::memory::trim_soon();
            }
        }
        if self.publishing.is_due(now) {
            self.publish();
        }
        let shell = self.pty.pid() as i32;
        if let Some(a) = self.active.as_mut().filter(|a| a.span.end.is_none())
            && let Some(kill) = a.killing.as_mut()
        {
            kill.step(shell, self.pty.foreground_pgid(), now);
        }
        if self.probe.next().is_some_and(|at| now >= at) && self.wants_probe() {
            self.run_probe();
            self.probe.back_off(now);
        }
    }
}
