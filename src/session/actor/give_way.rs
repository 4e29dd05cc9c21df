//! Answers before floods. While a caller waits for a send's answer in a session that is not
//! flooding, in the first moments of that send, a flood's turn (`flood.rs`) gives way: its reader
//! sleeps instead of reading, for at most a share of the turn's time.
//!
//! Why: on a machine with few cores a flood keeps all of them busy (the program, the kernel's
//! workers moving its output, the turn's reader and emulating threads), and every step of another
//! session's send (the daemon, the kernel's worker each way, the shell, the client) waits for a
//! core. A reader that stops reading soon stops the flood's program too, once the terminal's
//! buffer is full. The window keeps a long command elsewhere from slowing a flood for nothing
//! (its answer is not waiting for a core), and the share keeps a session that sends without
//! pause from stopping a flood.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long after a send began a flood gives way to it: most commands an agent runs to look at
/// something answer within it.
const WINDOW: Duration = Duration::from_millis(5);
/// The most of a turn's time its reader spends giving way, in percent: the flood keeps a fifth.
/// Measured (`agent-streams`, 2 cores, four interleaved pairs): another session's `Send("true")`
/// during a flood 0.37-0.50 ms p50 at 80, 0.52-0.65 without giving way; 50 and 95 measured no
/// better than 80. The emulating thread giving way too measured the same.
const SHARE_PERCENT: u32 = 80;
/// How long the reader sleeps each time it gives way.
pub(super) const STEP: Duration = Duration::from_micros(50);

/// The sessions whose caller waits for a send's answer (and that are not flooding).
struct Waiting {
    /// How many.
    count: AtomicUsize,
    /// When the newest of their sends began, in microseconds since `epoch()`.
    newest: AtomicU64,
}

/// The daemon's: every session's actor and every flood's reader use this one.
static WAITING: Waiting = Waiting {
    count: AtomicUsize::new(0),
    newest: AtomicU64::new(0),
};

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn micros_since_epoch(at: Instant) -> u64 {
    at.saturating_duration_since(epoch()).as_micros() as u64
}

impl Waiting {
    /// How long ago the newest awaited send began; none when no caller waits.
    fn newest_age(&self) -> Option<Duration> {
        (self.count.load(Ordering::Relaxed) > 0).then(|| {
            let at = Duration::from_micros(self.newest.load(Ordering::Relaxed));
            epoch().elapsed().saturating_sub(at)
        })
    }
}

/// One session's place among the awaited: the start of the send whose caller waits, if one does.
pub(super) struct Awaited {
    waiting: &'static Waiting,
    since: Option<Instant>,
}

impl Default for Awaited {
    fn default() -> Self {
        Awaited {
            waiting: &WAITING,
            since: None,
        }
    }
}

impl Awaited {
    /// The send whose answer a caller now waits for began at `since` (none: no caller waits,
    /// or the session floods).
    pub(super) fn set(&mut self, since: Option<Instant>) {
        if since == self.since {
            return;
        }
        match (self.since, since) {
            (None, Some(_)) => {
                self.waiting.count.fetch_add(1, Ordering::Relaxed);
            }
            (Some(_), None) => {
                self.waiting.count.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if let Some(at) = since {
            let at = micros_since_epoch(at);
            self.waiting.newest.fetch_max(at, Ordering::Relaxed);
        }
        self.since = since;
    }
}

impl Drop for Awaited {
    fn drop(&mut self) {
        self.set(None);
    }
}

/// Whether a flood's reader, `elapsed` into its turn of which it gave way for `given`, gives way
/// now.
pub(super) fn now(elapsed: Duration, given: Duration) -> bool {
    decide(WAITING.newest_age(), elapsed, given)
}

/// The rule: the newest awaited send began `newest` ago (none: no caller waits elsewhere).
fn decide(newest: Option<Duration>, elapsed: Duration, given: Duration) -> bool {
    newest.is_some_and(|age| age < WINDOW) && given * 100 < elapsed * SHARE_PERCENT
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_flood_gives_way_to_a_fresh_send_elsewhere_within_its_share() {
        let rows: &[(Option<Duration>, Duration, Duration, bool, &str)] = &[
            (None, 5 * MS, Duration::ZERO, false, "nobody waits"),
            (
                Some(MS),
                5 * MS,
                Duration::ZERO,
                true,
                "a send began 1 ms ago",
            ),
            (
                Some(WINDOW),
                5 * MS,
                Duration::ZERO,
                false,
                "the send is past the window",
            ),
            (
                Some(10 * MS),
                5 * MS,
                Duration::ZERO,
                false,
                "a long command waits",
            ),
            (
                Some(MS),
                5 * MS,
                3 * MS,
                true,
                "3 of 5 ms given: under the share",
            ),
            (
                Some(MS),
                5 * MS,
                4 * MS,
                false,
                "4 of 5 ms given: the share is used",
            ),
            (
                Some(MS),
                Duration::ZERO,
                Duration::ZERO,
                false,
                "the turn has not read yet",
            ),
        ];
        for &(newest, elapsed, given, want, why) in rows {
            assert_eq!(decide(newest, elapsed, given), want, "{why}");
        }
    }

    #[test]
    fn a_session_counts_while_its_caller_waits_and_the_newest_send_is_kept() {
        let waiting: &'static Waiting = Box::leak(Box::new(Waiting {
            count: AtomicUsize::new(0),
            newest: AtomicU64::new(0),
        }));
        let mut one = Awaited {
            waiting,
            since: None,
        };
        assert_eq!(waiting.newest_age(), None, "nobody waits yet");
        let older = Instant::now();
        let newer = older + MS;
        one.set(Some(older));
        one.set(Some(older));
        assert_eq!(waiting.count.load(Ordering::Relaxed), 1, "once per session");
        let mut two = Awaited {
            waiting,
            since: None,
        };
        two.set(Some(newer));
        assert_eq!(waiting.count.load(Ordering::Relaxed), 2);
        one.set(Some(older));
        assert_eq!(
            waiting.newest.load(Ordering::Relaxed),
            micros_since_epoch(newer),
            "the newest send is kept"
        );
        drop(two);
        assert_eq!(waiting.count.load(Ordering::Relaxed), 1, "a session gone");
        one.set(None);
        one.set(None);
        assert_eq!(waiting.count.load(Ordering::Relaxed), 0);
        assert_eq!(waiting.newest_age(), None);
    }
}
