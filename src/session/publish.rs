//! When the actor publishes the state `List` and `JobOutput` waiters see: at once after a
//! command, a send's end or an exit, but after output at most once per `PUBLISH_INTERVAL`.
//! Under a flood, counting lines for every read would cost the daemon's other sessions and RPCs
//! their CPU; a skipped update is made up at the end of the interval, so readers of the state
//! never miss the last one. Pure: the actor asks it, and publishes.

use std::time::{Duration, Instant};

/// How often output updates the published state while output keeps coming.
pub(super) const PUBLISH_INTERVAL: Duration = Duration::from_millis(50);

/// The last publication, and the update a skipped one owes.
#[derive(Debug)]
pub(super) struct PublishSchedule {
    last: Instant,
    due: Option<Instant>,
}

impl PublishSchedule {
    pub(super) fn new(now: Instant) -> PublishSchedule {
        PublishSchedule {
            last: now,
            due: None,
        }
    }

    /// Output came at `now`: whether to publish now. When not, an update is due at the end of
    /// the interval.
    pub(super) fn after_output(&mut self, now: Instant) -> bool {
        let next = self.last + PUBLISH_INTERVAL;
        if now >= next {
            return true;
        }
        self.due.get_or_insert(next);
        false
    }

    /// The state was published at `now`: nothing is owed.
    pub(super) fn published(&mut self, now: Instant) {
        self.last = now;
        self.due = None;
    }

    /// When a skipped update is owed.
    pub(super) fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Whether a skipped update is owed by `now`.
    pub(super) fn is_due(&self, now: Instant) -> bool {
        self.due.is_some_and(|at| now >= at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_publishes_once_an_interval_and_a_skipped_update_is_owed() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let mut schedule = PublishSchedule::new(start);
        // (output at, published then, owed after it)
        let steps = [
            (10, false, Some(50)),
            (30, false, Some(50)),
            (50, true, None),
            (60, false, Some(100)),
        ];
        for (at, publishes, owed) in steps {
            let now = ms(at);
            assert_eq!(schedule.after_output(now), publishes, "at {at} ms");
            if publishes {
                schedule.published(now);
            }
            assert_eq!(schedule.due(), owed.map(ms), "at {at} ms");
        }
        assert!(!schedule.is_due(ms(99)));
        assert!(schedule.is_due(ms(100)));
        // A command publishes at once, and settles what was owed.
        schedule.published(ms(70));
        assert_eq!(schedule.due(), None);
        assert!(!schedule.after_output(ms(80)));
        assert_eq!(schedule.due(), Some(ms(120)));
    }
}
