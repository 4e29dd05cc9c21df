//! The output pump of one terminal send: collects the raw output chunks of `SendStream`,
//! coalesces them so the editor gets at most one `terminal_output` update per interval, and
//! caps what one command streams, counting what it left out. Pure: the caller owns the clock.

use super::text::{cap_note, floor_char_boundary};
use std::time::{Duration, Instant};

/// Output one command may stream to the editor (the daemon's default `max_result_bytes`).
pub(crate) const COMMAND_OUTPUT_CAP: usize = 256 * 1024;
/// Shortest gap between two `terminal_output` updates: at most 20 a second.
pub(crate) const UPDATE_INTERVAL: Duration = Duration::from_millis(50);

/// Pending output plus the bookkeeping of the cap and the update rate.
#[derive(Debug)]
pub(crate) struct OutputPump {
    cap: usize,
    interval: Duration,
    accepted: usize,
    omitted: u64,
    pending: String,
    last_sent: Option<Instant>,
    ends_with_newline: bool,
}

impl OutputPump {
    /// A pump streaming at most `cap` bytes, one update per `interval`.
    pub(crate) fn new(cap: usize, interval: Duration) -> Self {
        OutputPump {
            cap,
            interval,
            accepted: 0,
            omitted: 0,
            pending: String::new(),
            last_sent: None,
            ends_with_newline: true,
        }
    }

    /// Takes one raw chunk (valid UTF-8 from the daemon; anything else is replaced). What does
    /// not fit under the cap is counted, not kept.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let text = String::from_utf8_lossy(chunk);
        let room = self.cap.saturating_sub(self.accepted);
        let keep = floor_char_boundary(&text, room);
        if keep > 0 {
            self.pending.push_str(&text[..keep]);
            self.accepted += keep;
            self.ends_with_newline = text[..keep].ends_with('\n');
        }
        self.omitted += (text.len() - keep) as u64;
    }

    /// When the pending output should go out, or `None` when nothing is pending.
    pub(crate) fn due(&self, now: Instant) -> Option<Instant> {
        if self.pending.is_empty() {
            return None;
        }
        Some(match self.last_sent {
            Some(t) => (t + self.interval).max(now),
            None => now,
        })
    }

    /// The pending output, to be sent now (at `now`); `None` when nothing is pending.
    pub(crate) fn take(&mut self, now: Instant) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        self.last_sent = Some(now);
        Some(std::mem::take(&mut self.pending))
    }

    /// The last update of the command: what is still pending, followed by one line saying how
    /// much the cap left out (when it cut anything).
    pub(crate) fn finish(&mut self) -> Option<String> {
        let mut last = std::mem::take(&mut self.pending);
        if self.omitted > 0 {
            if !self.ends_with_newline {
                last.push_str("\r\n");
            }
            last.push_str(&cap_note(self.cap, self.omitted));
            last.push_str("\r\n");
        }
        (!last.is_empty()).then_some(last)
    }

    /// Bytes the cap left out so far.
    #[cfg(test)]
    pub(crate) fn omitted(&self) -> u64 {
        self.omitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_chunks_into_one_update_per_interval() {
        let t0 = Instant::now();
        let mut pump = OutputPump::new(1024, Duration::from_millis(50));
        assert_eq!(pump.due(t0), None);
        pump.push(b"a");
        assert_eq!(pump.due(t0), Some(t0), "the first update goes out at once");
        assert_eq!(pump.take(t0).as_deref(), Some("a"));
        pump.push(b"b");
        pump.push(b"c");
        assert_eq!(pump.due(t0), Some(t0 + Duration::from_millis(50)));
        let later = t0 + Duration::from_millis(60);
        assert_eq!(pump.due(later), Some(later));
        assert_eq!(pump.take(later).as_deref(), Some("bc"));
        assert_eq!(pump.take(later), None);
        assert_eq!(pump.finish(), None);
    }

    #[test]
    fn caps_the_output_and_names_what_it_left_out() {
        let mut pump = OutputPump::new(4, Duration::ZERO);
        pump.push(b"abc");
        pump.push("dé".as_bytes());
        pump.push(b"xyz");
        assert_eq!(pump.omitted(), 2 + 3, "the split é and xyz are left out");
        let last = pump.finish().unwrap();
        assert!(last.starts_with("abcd\r\n[ptyd: "), "{last:?}");
        assert!(last.contains("5 bytes left out"), "{last:?}");
        assert!(last.contains("/read"), "{last:?}");
        assert!(last.ends_with("]\r\n"), "{last:?}");
    }
}
