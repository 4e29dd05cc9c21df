//! The core's clock: the nearest deadline the actor sleeps until (startup, the send's
//! deadlines, a signal's grace, the stdin probe, a publish owed, resting), and what each does
//! when it comes.

use super::{Core, Cx, Effect};
use std::time::Instant;

impl Core {
    /// When the actor should hand the core a `Tick`, if ever.
    pub(in crate::session) fn next_deadline(&self, now: Instant) -> Option<Instant> {
        let startup = self.lifecycle.wait_ends(self.last_output);
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
        if !self.lifecycle.is_ready()
            || (self.shell.input_gated() && self.shell.input_pending())
            || self.shell.input_held()
        {
            return true;
        }
        self.active.as_ref().is_some_and(|a| {
            !a.stdin_blocked && !self.shell.input_pending() && a.span.end.is_none()
        }) && !self.exited()
    }

    pub(super) fn on_timer(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now;
        if self.active.is_none() && self.rest_due.is_some_and(|at| now >= at) {
            self.rest_due = None;
            let trim = self.terminal.rest();
            cx.effect(Effect::Rest { trim });
        }
        if self.publishing.is_due(now) {
            self.publish(cx);
        }
        if let Some(a) = self.active.as_mut().filter(|a| a.span.end.is_none())
            && let Some(kill) = a.killing.as_mut()
        {
            kill.step(cx.tty, now);
        }
        if self.probe.next().is_some_and(|at| now >= at) && self.wants_probe() {
            self.run_probe(cx);
            self.probe.back_off(now);
        }
    }
}
