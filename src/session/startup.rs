//! When a starting session is ready though no prompt came: at its startup deadline, or, for a
//! type without shell integration, after output has been silent for the startup idle time. An
//! integrated shell waits for its first prompt mark (or a program reading the terminal, or the
//! deadline): a slow rc file is not a prompt, and input typed before the line editor starts
//! would be lost or mis-settled. Pure.

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
}
