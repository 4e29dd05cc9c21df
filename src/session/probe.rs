//! When the stdin probe runs while someone waits, and what its findings are judged against:
//! the schedule counts of the threads that may take a send's input, taken just before the
//! input's first byte is written (a reader counts as blocked only once it has moved past them).

use crate::process::stdin_probe::Reader;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Delays between stdin probes while a send waits, restarted by every output chunk and write.
/// There is no kernel event for "a reader blocked", so detection latency is the probe step:
/// quick at first (most programs block at once), then backing off so a long wait costs nothing.
const PROBE_BACKOFF_MS: [u64; 8] = [1, 2, 4, 10, 25, 50, 100, 250];

pub(super) struct ProbeSchedule {
    /// Next probe and the back-off step that scheduled it.
    next: Option<Instant>,
    step: usize,
    /// Schedule counts of the foreground threads just before the input was written.
    switches_at_write: HashMap<i32, u64>,
}

impl ProbeSchedule {
    /// The first probe is due at once (a starting session).
    pub(super) fn new(now: Instant) -> ProbeSchedule {
        ProbeSchedule {
            next: Some(now),
            step: 0,
            switches_at_write: HashMap::new(),
        }
    }

    /// Output or a write happened: probe again soon.
    pub(super) fn rearm(&mut self, now: Instant) {
        self.step = 0;
        self.next = Some(now + Duration::from_millis(PROBE_BACKOFF_MS[0]));
    }

    /// When the next probe is due.
    pub(super) fn next(&self) -> Option<Instant> {
        self.next
    }

    /// A probe ran at `now`: the next one waits one step longer.
    pub(super) fn back_off(&mut self, now: Instant) {
        self.step = (self.step + 1).min(PROBE_BACKOFF_MS.len() - 1);
        self.next = Some(now + Duration::from_millis(PROBE_BACKOFF_MS[self.step]));
    }

    /// The schedule counts of the threads that may take the input about to be written (see
    /// `Tty::switches`).
    pub(super) fn before_write(&mut self, switches: HashMap<i32, u64>) {
        self.switches_at_write = switches;
    }

    /// The program asked the terminal something: until it has taken the answers, it waits for
    /// them, not for the agent (`switches`: its threads' schedule counts now).
    pub(super) fn before_replies(&mut self, switches: HashMap<i32, u64>) {
        self.switches_at_write = switches;
    }

    /// The reader has not been scheduled since the input was written: it has not taken it.
    pub(super) fn reader_has_not_taken_input(&self, reader: &Reader) -> bool {
        self.switches_before(reader)
            .is_some_and(|before| reader.switches <= before)
    }

    /// The reader's schedule count when the input was written, if it had one.
    pub(super) fn switches_before(&self, reader: &Reader) -> Option<u64> {
        self.switches_at_write.get(&reader.tid).copied()
    }
}
