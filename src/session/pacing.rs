//! How much output an actor takes in before it lets other sessions and RPCs run: a slice of
//! time, not of bytes, and reads small enough that one read's emulation fits in a slice.
//!
//! Every session's actor shares the daemon's thread, and a flooding terminal is always
//! readable. What a byte costs to emulate varies a thousandfold: plain text a few nanoseconds,
//! `CSI 99999999 b` (REP) a whole row per 11 bytes, about 1.5 µs a byte. A budget of bytes
//! (64 KiB was about 0.2 ms of plain text) let one REP stream hold the thread for 100 ms; a
//! budget of time holds for every kind of output. One read cannot be cut once taken, so its size
//! follows what the last reads cost per byte. The old budget of bytes stays beside it, for what
//! the clock around the emulation does not see (the reads themselves).

use std::time::Duration;

/// Output handling an actor does before it yields to every other task (about 30 KB of plain
/// text): short enough that another session's send, which needs a few turns of its own actor,
/// waits at most a few of these. 250 µs measured twice the wait of 100 µs for another
/// session's send during a flood (`agent-streams` rows), for no throughput the noise showed.
pub(super) const SLICE: Duration = Duration::from_micros(100);
/// Output an actor takes in before it yields however cheap it was: reading it (a copy into
/// the journal's fresh pages, say) costs time that `took` does not see.
pub(super) const SLICE_BYTES: usize = 64 * 1024;
/// The smallest read: under it the read's own system call starts to cost more than the
/// emulation of what it brings.
pub(super) const MIN_READ: usize = 256;
/// The longest turn of a flood on a worker thread (see `actor/flood.rs`): the timers (a send's
/// deadline, the stdin probe) wait for the turn, so at most about this; a command ends it.
pub(super) const TURN: Duration = Duration::from_millis(10);
/// The most output one read of a flood's turn takes however cheap it is to emulate.
pub(super) const BATCH_MAX: usize = 1 << 20;
/// Output waiting after a spent slice that makes it a flood: half of what the kernel holds for
/// a terminal's reader (4 KiB). A shell writes its prompt in a few small pieces, and a few
/// reads of them in a row can spend a slice while the next piece (tens of bytes) waits: a
/// flood's turn for that started two threads to read a prompt. A program that floods keeps
/// the kernel's buffer full.
pub(super) const FLOOD_BACKLOG: usize = 2048;

/// What the output taken in since the last yield cost.
#[derive(Debug, Default)]
pub(super) struct Pacing {
    /// Time spent on output since the last yield.
    spent: Duration,
    /// Bytes taken in since the last yield.
    taken: usize,
    /// What a byte of the latest output cost to take in, in nanoseconds (0: not measured yet).
    nanos_per_byte: f64,
}

impl Pacing {
    /// The most bytes the next read should take: what fits in a slice at the latest cost.
    pub(super) fn read_limit(&self) -> usize {
        if self.nanos_per_byte <= 0.0 {
            return usize::MAX;
        }
        let fits = SLICE.as_nanos() as f64 / self.nanos_per_byte;
        if fits >= usize::MAX as f64 {
            usize::MAX
        } else {
            (fits as usize).max(MIN_READ)
        }
    }

    /// `bytes` of output took `spent` to take in. A dearer cost counts at once (the next read
    /// must fit); a cheaper one is followed over a few reads (one cheap read, such as a prompt
    /// after a flood, says little).
    pub(super) fn took(&mut self, bytes: usize, spent: Duration) {
        self.spent += spent;
        self.taken += bytes;
        self.follow_cost(bytes, spent);
    }

    /// A worker emulated `bytes` in `spent`: the actor's thread spent nothing on it, so the
    /// slice is not charged, but the cost is followed all the same.
    pub(super) fn emulated_elsewhere(&mut self, bytes: usize, spent: Duration) {
        self.follow_cost(bytes, spent);
    }

    /// The most bytes one read of a flood's turn should take (and one piece its emulating
    /// thread takes at once): what `TURN` emulates at the latest cost, within
    /// `MIN_READ..=BATCH_MAX`.
    pub(super) fn batch_limit(&self) -> usize {
        if self.nanos_per_byte <= 0.0 {
            return BATCH_MAX;
        }
        let fits = TURN.as_nanos() as f64 / self.nanos_per_byte;
        (fits.min(BATCH_MAX as f64) as usize).max(MIN_READ)
    }

    fn follow_cost(&mut self, bytes: usize, spent: Duration) {
        if bytes == 0 {
            return;
        }
        let cost = spent.as_nanos() as f64 / bytes as f64;
        self.nanos_per_byte = if cost >= self.nanos_per_byte {
            cost
        } else {
            0.75 * self.nanos_per_byte + 0.25 * cost
        };
    }

    /// Whether output comes faster than the actor takes it in: the slice is spent and
    /// `waiting()` (bytes to read now, asked only then) says a backlog remains.
    pub(super) fn flooding(&self, waiting: impl FnOnce() -> usize) -> bool {
        self.slice_spent() && waiting() >= FLOOD_BACKLOG
    }

    /// Whether the slice is used up: take in nothing more before the actor yields.
    pub(super) fn slice_spent(&self) -> bool {
        self.spent >= SLICE || self.taken >= SLICE_BYTES
    }

    /// Whether the slice is used up; if so the actor yields now and a new slice begins.
    pub(super) fn slice_used(&mut self) -> bool {
        let used = self.slice_spent();
        if used {
            self.new_slice();
        }
        used
    }

    /// The actor let every other task run: what it spent before no longer counts.
    pub(super) fn new_slice(&mut self) {
        self.spent = Duration::ZERO;
        self.taken = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fit_a_slice_at_the_latest_cost_and_the_slice_is_time() {
        let us = Duration::from_micros;
        // What a slice holds at `nanos` a byte (never under MIN_READ).
        let fits = |nanos: f64| ((SLICE.as_nanos() as f64 / nanos) as usize).max(MIN_READ);
        // (bytes taken, time spent, read limit after, slice used after)
        let steps: &[(usize, Duration, usize, bool)] = &[
            // Plain text: 4 KiB in 12 µs (3 ns a byte).
            (4096, us(12), fits(12_000.0 / 4096.0), false),
            // REP: 4 KiB in 6 ms (1.5 µs a byte): the next read fits at once, slice used.
            (4096, us(6_000), MIN_READ, true),
            (256, us(384), MIN_READ, true),
            // Cheap again (3 ns a byte): the cost followed falls by a quarter of the way each
            // read, so the limit grows over a few reads, not at one.
            (256, Duration::from_nanos(768), fits(1125.75), false),
            (341, Duration::from_nanos(1023), fits(845.0625), false),
            (454, Duration::from_nanos(1362), fits(634.546875), false),
        ];
        let mut pacing = Pacing::default();
        assert_eq!(pacing.read_limit(), usize::MAX, "nothing measured yet");
        for (i, &(bytes, spent, limit, used)) in steps.iter().enumerate() {
            pacing.took(bytes, spent);
            assert_eq!(pacing.read_limit(), limit, "step {i}");
            assert_eq!(pacing.slice_used(), used, "step {i}");
        }
        // Slices add up: enough reads of 24 µs use one, and so do 64 KiB however cheap.
        let reads = SLICE.as_micros().div_ceil(24) as usize;
        let mut pacing = Pacing::default();
        for i in 0..reads {
            pacing.took(4096, us(24));
            assert_eq!(pacing.slice_used(), i == reads - 1, "read {i}");
        }
        for i in 0..16 {
            pacing.took(4096, Duration::from_nanos(100));
            assert_eq!(pacing.slice_used(), i == 15, "cheap read {i}");
        }
    }

    #[test]
    fn a_flood_is_a_spent_slice_with_a_backlog_waiting() {
        let us = Duration::from_micros;
        // (time spent in the slice, bytes waiting, a flood)
        let cases: &[(Duration, usize, bool)] = &[
            (us(20), 4096, false),
            (us(150), 0, false),
            // A prompt's next piece waiting after a few dear reads.
            (us(150), 60, false),
            (us(150), FLOOD_BACKLOG - 1, false),
            (us(150), FLOOD_BACKLOG, true),
            (us(150), 4096, true),
        ];
        for &(spent, waiting, flood) in cases {
            let mut pacing = Pacing::default();
            pacing.took(100, spent);
            assert_eq!(
                pacing.flooding(|| waiting),
                flood,
                "{spent:?} spent, {waiting} waiting"
            );
        }
        // The backlog is asked only once the slice is spent (it costs system calls).
        let pacing = Pacing::default();
        assert!(!pacing.flooding(|| panic!("asked with a slice left")));
    }

    #[test]
    fn a_yield_between_reads_begins_a_new_slice() {
        let us = Duration::from_micros;
        // Reads of a send's output, each after the actor waited for it: none adds to the
        // next, however many come.
        let mut pacing = Pacing::default();
        for i in 0..20 {
            pacing.new_slice();
            pacing.took(200, us(30));
            assert!(!pacing.slice_spent(), "read {i} after a wait");
        }
        // The same reads back to back add up to a slice.
        let mut pacing = Pacing::default();
        let spent: Vec<bool> = (0..4)
            .map(|_| {
                pacing.took(200, us(30));
                pacing.slice_spent()
            })
            .collect();
        assert_eq!(spent, [false, false, false, true]);
    }

    #[test]
    fn a_turn_reads_what_it_emulates_in_its_time_and_charges_no_slice() {
        let mut pacing = Pacing::default();
        assert_eq!(pacing.batch_limit(), BATCH_MAX, "nothing measured yet");
        // Emulated elsewhere: the cost is followed, the actor's slice is not charged.
        pacing.emulated_elsewhere(1 << 20, Duration::from_millis(20));
        assert!(!pacing.slice_spent());
        let per_byte = 20_000_000.0 / f64::from(1 << 20);
        assert_eq!(
            pacing.batch_limit(),
            (TURN.as_nanos() as f64 / per_byte) as usize
        );
        // REP-like output (1.5 µs a byte): a read of at least MIN_READ all the same.
        pacing.emulated_elsewhere(1000, Duration::from_micros(1500));
        assert_eq!(pacing.batch_limit(), (10_000_000.0 / 1500.0) as usize);
        pacing.emulated_elsewhere(10, Duration::from_millis(100));
        assert_eq!(pacing.batch_limit(), MIN_READ);
    }
}
