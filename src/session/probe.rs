//! When the stdin probe runs while someone waits, and what its findings are judged against:
//! the schedule counts of the threads that may take a send's input, taken just before the
//! input's first byte is written (a reader counts as blocked only once it has moved past them).

use crate::process::stdin_probe::{self as probe, Reader, ScheduleCounter};
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
    /// The shell's schedule count, opened on first use (see `before_write`).
    shell_counter: Option<ScheduleCounter>,
}

impl ProbeSchedule {
    /// The first probe is due at once (a starting session).
    pub(super) fn new(now: Instant) -> ProbeSchedule {
        ProbeSchedule {
            next: Some(now),
            step: 0,
            switches_at_write: HashMap::new(),
            shell_counter: None,
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

    /// Takes the schedule counts of the threads that may take the input about to be written.
    /// A shell at its prompt (`shell_at_prompt`) is the terminal's foreground and reads on its
    /// main thread: one read of a file kept open instead of a walk of /proc (this is on every
    /// send's path).
    pub(super) fn before_write(&mut self, shell: i32, shell_at_prompt: bool) {
        if shell_at_prompt {
            if self.shell_counter.is_none() {
                self.shell_counter = ScheduleCounter::open(shell);
            }
            if let Some(count) = self.shell_counter.as_ref().and_then(ScheduleCounter::read) {
                self.switches_at_write = HashMap::from([(shell, count)]);
                return;
            }
        }
        self.switches_at_write = probe::task_switches(shell);
    }

    /// The program asked the terminal something: until it has taken the answers, it waits for
    /// them, not for the agent.
    pub(super) fn before_replies(&mut self, shell: i32) {
        self.switches_at_write = probe::task_switches(shell);
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
