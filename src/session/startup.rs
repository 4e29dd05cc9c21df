//! A session's life: starting, running, exited. A starting session is ready though no prompt
//! came at its startup deadline, or, for a type without shell integration, after output has
//! been silent for the startup idle time. An integrated shell waits for its first prompt mark
//! (or a program reading the terminal, or the deadline): a slow rc file is not a prompt, and
//! input typed before the line editor starts would be lost or mis-settled. `Lifecycle` keeps
//! that wait and those waiting for it (`Open`) until the session is ready, and how the program
//! ended once it has. Pure.

use crate::process::pty::ExitKind;
use std::time::{Duration, Instant};

/// A session's startup wait.
#[derive(Debug)]
pub(super) struct Startup {
    deadline: Instant,
    /// Output silence that counts as ready; `None` for an integrated shell.
    idle: Option<Duration>,
}

impl Startup {
    pub(super) fn new(now: Instant, timeout: Duration, idle: Option<Duration>) -> Startup {
        Startup {
            deadline: now + timeout,
            idle,
        }
    }

    /// When the wait ends unless output comes after `last_output`.
    pub(super) fn ends(&self, last_output: Instant) -> Instant {
        match self.idle {
            Some(idle) => self.deadline.min(last_output + idle),
            None => self.deadline,
        }
    }

    /// Whether the wait is over at `now`, the last output having come at `last_output`.
    pub(super) fn is_over(&self, now: Instant, last_output: Instant) -> bool {
        now >= self.ends(last_output)
    }
}

/// Where a session is in its life, and who waits for it to be ready until it is.
#[derive(Debug)]
pub(super) enum Lifecycle<W> {
    /// Starting: the wait that ends it, and those waiting (`Open`).
    Starting { wait: Startup, waiters: Vec<W> },
    /// Ready, its program running: its first prompt, a program reading the terminal, or the
    /// end of its wait.
    Running,
    /// The program exited (a session that exits while starting is ready then).
    Exited(ExitKind),
}

impl<W> Lifecycle<W> {
    pub(super) fn starting(wait: Startup) -> Lifecycle<W> {
        Lifecycle::Starting {
            wait,
            waiters: Vec::new(),
        }
    }

    pub(super) fn is_ready(&self) -> bool {
        !matches!(self, Lifecycle::Starting { .. })
    }

    /// How the program ended, once it has.
    pub(super) fn exit(&self) -> Option<ExitKind> {
        match self {
            Lifecycle::Exited(kind) => Some(*kind),
            _ => None,
        }
    }

    /// When a starting session's wait ends unless output comes after `last_output`; `None`
    /// once it is ready.
    pub(super) fn wait_ends(&self, last_output: Instant) -> Option<Instant> {
        match self {
            Lifecycle::Starting { wait, .. } => Some(wait.ends(last_output)),
            _ => None,
        }
    }

    /// Whether a starting session's wait is over at `now` (never once it is ready).
    pub(super) fn wait_over(&self, now: Instant, last_output: Instant) -> bool {
        match self {
            Lifecycle::Starting { wait, .. } => wait.is_over(now, last_output),
            _ => false,
        }
    }

    /// Adds one who waits for readiness; gives it back when the session is ready already, to
    /// be answered at once.
    pub(super) fn wait_for(&mut self, waiter: W) -> Option<W> {
        match self {
            Lifecycle::Starting { waiters, .. } => {
                waiters.push(waiter);
                None
            }
            _ => Some(waiter),
        }
    }

    /// A starting session is ready: those who waited, to be answered (none once ready).
    pub(super) fn become_ready(&mut self) -> Vec<W> {
        match self {
            Lifecycle::Starting { waiters, .. } => {
                let waiters = std::mem::take(waiters);
                *self = Lifecycle::Running;
                waiters
            }
            _ => Vec::new(),
        }
    }

    /// The program exited: those who waited for a starting session to be ready, to be
    /// answered.
    pub(super) fn end(&mut self, kind: ExitKind) -> Vec<W> {
        let waiters = self.become_ready();
        *self = Lifecycle::Exited(kind);
        waiters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_starting_session_waits_for_its_deadline_or_silence_without_integration() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let timeout = Duration::from_millis(1000);
        let idle = Some(Duration::from_millis(300));
        // (idle, last output, now, over)
        let cases = [
            (idle, 0, 299, false),
            (idle, 0, 300, true),
            // Output restarts the silence.
            (idle, 500, 799, false),
            (idle, 500, 800, true),
            // The deadline holds however recent the output.
            (idle, 990, 1000, true),
            // An integrated shell: silence is not readiness.
            (None, 0, 999, false),
            (None, 0, 1000, true),
        ];
        for (idle, last, now, over) in cases {
            let startup = Startup::new(start, timeout, idle);
            assert_eq!(
                startup.is_over(ms(now), ms(last)),
                over,
                "{idle:?}, output at {last}, now {now}"
            );
        }
    }

    #[test]
    fn waiters_wait_until_ready_and_are_answered_once() {
        let start = Instant::now();
        let later = start + Duration::from_secs(5);
        let wait = || Startup::new(start, Duration::from_secs(1), None);
        let mut r: Lifecycle<&str> = Lifecycle::starting(wait());
        assert!(!r.is_ready());
        assert_eq!(r.wait_ends(start), Some(start + Duration::from_secs(1)));
        assert!(r.wait_over(later, start));
        assert_eq!(
            r.wait_for("open 1"),
            None,
            "a starting session keeps its waiter"
        );
        assert_eq!(r.wait_for("open 2"), None);
        assert_eq!(r.become_ready(), ["open 1", "open 2"]);
        assert!(r.is_ready());
        assert_eq!(r.become_ready(), Vec::<&str>::new(), "answered once");
        assert_eq!(
            r.wait_for("open 3"),
            Some("open 3"),
            "ready: answered at once"
        );
        assert_eq!(r.wait_ends(start), None, "no startup deadline once ready");
        assert!(!r.wait_over(later, start));
        assert_eq!(r.exit(), None);
        assert_eq!(
            r.end(ExitKind::Code(3)),
            Vec::<&str>::new(),
            "answered already"
        );
        assert_eq!(r.exit(), Some(ExitKind::Code(3)));
        assert!(r.is_ready());
        // Exiting while starting: the session is ready then, its waiters answered.
        let mut r: Lifecycle<&str> = Lifecycle::starting(wait());
        assert_eq!(r.wait_for("open"), None);
        assert_eq!(r.end(ExitKind::Code(1)), ["open"]);
        assert!(r.is_ready());
        assert_eq!(r.wait_ends(start), None);
        assert_eq!(r.wait_for("late open"), Some("late open"));
    }
}
