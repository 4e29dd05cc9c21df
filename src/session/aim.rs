//! Aiming a `Signal` at the command it is meant for: a signal that arrives just after a
//! submitted line, before the shell has started its command, waits (briefly) for the command.
//!
//! An agent that sends `sleep 30`, gives up on the send and asks for SIGINT means the `sleep`.
//! Delivered at once, the interrupt can reach bash's line editor while it is still reading the
//! line: readline throws away what it had read of it (the command then runs with its first
//! characters missing, `leep: command not found`), or bash keeps the interrupt pending and the
//! command runs on uninterrupted. So the signal waits while the shell has the submitted line but
//! shows no sign of it (no start, end or prompt mark yet), and, once the command started, while
//! the shell itself still holds the terminal in the moment between its start mark and its child
//! taking the terminal over. Never longer than `AIM_LIMIT`: a shell without marks, or a line
//! that never starts, still gets its signal promptly.

use crate::error::Result;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The longest a signal waits for its command: far above the milliseconds bash takes from
/// reading a line to its child holding the terminal, and short enough to read as "at once".
pub(super) const AIM_LIMIT: Duration = Duration::from_millis(500);
/// How often a waiting signal looks at the terminal's foreground group again (it changes with
/// no output to wake the actor).
pub(super) const RECHECK: Duration = Duration::from_millis(10);

/// Where the session's shell is, as far as aiming a signal goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ShellMoment {
    /// A submitted line was written and the shell has not yet answered it with a mark.
    pub line_submitted: bool,
    /// The shell's command started and the shell itself (or its child before the exec) still
    /// holds the terminal.
    pub forking: bool,
}

/// Whether a signal asked for at `asked_at` goes out now.
pub(super) fn deliver_now(moment: ShellMoment, asked_at: Instant, now: Instant) -> bool {
    now >= asked_at + AIM_LIMIT || !(moment.line_submitted || moment.forking)
}

/// Signals that wait for their command, with the callers that wait for the answer.
#[derive(Default)]
pub(super) struct WaitingSignals {
    waiting: Vec<(Signal, oneshot::Sender<Result<i32>>, Instant)>,
}

impl WaitingSignals {
    pub fn push(&mut self, signal: Signal, reply: oneshot::Sender<Result<i32>>, now: Instant) {
        self.waiting.push((signal, reply, now));
    }

    /// Delivers, with `deliver`, every signal whose moment has come, in the order asked.
    pub fn deliver_due(
        &mut self,
        moment: ShellMoment,
        now: Instant,
        mut deliver: impl FnMut(Signal) -> Result<i32>,
    ) {
        while let Some((_, _, asked_at)) = self.waiting.first() {
            if !deliver_now(moment, *asked_at, now) {
                return;
            }
            let (signal, reply, _) = self.waiting.remove(0);
            let _ = reply.send(deliver(signal));
        }
    }

    /// Delivers every waiting signal now, whatever the moment (the program exited: each caller
    /// hears why not).
    pub fn deliver_all(&mut self, mut deliver: impl FnMut(Signal) -> Result<i32>) {
        for (signal, reply, _) in self.waiting.drain(..) {
            let _ = reply.send(deliver(signal));
        }
    }

    /// When the foreground group should be looked at again, while a signal waits.
    pub fn next_check(&self, now: Instant) -> Option<Instant> {
        (!self.waiting.is_empty()).then_some(now + RECHECK)
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_waits_only_while_its_command_is_on_the_way_and_never_past_the_limit() {
        let asked = Instant::now();
        let quiet = ShellMoment {
            line_submitted: false,
            forking: false,
        };
        let submitted = ShellMoment {
            line_submitted: true,
            ..quiet
        };
        let forking = ShellMoment {
            forking: true,
            ..quiet
        };
        let cases = [
            ("nothing on the way", quiet, Duration::ZERO, true),
            (
                "line read but not started",
                submitted,
                Duration::ZERO,
                false,
            ),
            (
                "started, the shell still holds the terminal",
                forking,
                Duration::ZERO,
                false,
            ),
            (
                "just under the limit",
                submitted,
                AIM_LIMIT - RECHECK,
                false,
            ),
            ("at the limit", submitted, AIM_LIMIT, true),
            ("forking at the limit", forking, AIM_LIMIT, true),
        ];
        for (what, moment, after, want) in cases {
            assert_eq!(deliver_now(moment, asked, asked + after), want, "{what}");
        }
    }

    #[test]
    fn waiting_signals_go_out_in_order_once_due_and_all_at_exit() {
        let now = Instant::now();
        let mut signals = WaitingSignals::default();
        let (tx1, mut rx1) = oneshot::channel();
        let (tx2, mut rx2) = oneshot::channel();
        signals.push(Signal::SIGINT, tx1, now);
        signals.push(Signal::SIGTERM, tx2, now);
        let waiting = ShellMoment {
            line_submitted: true,
            forking: false,
        };
        let mut sent = Vec::new();
        signals.deliver_due(waiting, now, |s| {
            sent.push(s);
            Ok(7)
        });
        assert!(
            sent.is_empty() && rx1.try_recv().is_err(),
            "nothing due yet"
        );
        assert_eq!(signals.next_check(now), Some(now + RECHECK));
        signals.deliver_due(waiting, now + AIM_LIMIT, |s| {
            sent.push(s);
            Ok(7)
        });
        assert_eq!(sent, [Signal::SIGINT, Signal::SIGTERM]);
        assert_eq!(rx1.try_recv().unwrap().unwrap(), 7);
        assert_eq!(rx2.try_recv().unwrap().unwrap(), 7);
        assert!(signals.is_empty() && signals.next_check(now).is_none());

        let (tx3, mut rx3) = oneshot::channel();
        signals.push(Signal::SIGINT, tx3, now);
        signals.deliver_all(|_| Err(crate::error::Error::FailedPrecondition("exited".into())));
        assert!(rx3.try_recv().unwrap().is_err(), "the caller hears why not");
    }
}
