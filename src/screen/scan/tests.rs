//! The word-at-a-time scans against the bytewise ones they stand for: every byte value at
//! every place of runs across word boundaries, so no test of a word can stop early or run past
//! the byte.

use super::{escape_non_ascii_or, printable_run};

/// Lengths around the word size: none, within one word, at and across its edges.
const LENGTHS: [usize; 8] = [0, 1, 7, 8, 9, 16, 17, 23];

/// Runs `check(bytes, at, byte)` for every byte value planted at every place of a run of
/// `filler` of each length in `LENGTHS` (and once with nothing planted, `at` = the length).
fn every_byte_everywhere(filler: u8, check: impl Fn(&[u8], usize, u8)) {
    for len in LENGTHS {
        check(&vec![filler; len], len, filler);
        for at in 0..len {
            for byte in 0..=255u8 {
                let mut bytes = vec![filler; len];
                bytes[at] = byte;
                check(&bytes, at, byte);
            }
        }
    }
}

#[test]
fn printable_runs_end_at_the_first_byte_outside_ascii_text() {
    every_byte_everywhere(b'a', |bytes, at, byte| {
        let want = if (0x20..=0x7e).contains(&byte) {
            bytes.len()
        } else {
            at
        };
        assert_eq!(printable_run(bytes), want, "byte {byte:#04x} at {at}");
    });
    for (bytes, want) in [
        (&b" ~ edges ~ "[..], 11),
        (b"progress 10%|###   |\r", 20),
        (b"cafe\xc3\xa9 au lait", 4),
        (b"12345678\x1b[K", 8),
        (b"1234567\x7f9", 7),
    ] {
        assert_eq!(
            printable_run(bytes),
            want,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn escapes_non_ascii_and_the_named_controls_are_found_where_they_are() {
    let controls = [0x08, 0x09, 0x0e, 0x0f];
    every_byte_everywhere(b'x', |bytes, at, byte| {
        let wanted = byte == 0x1b || byte >= 0x80 || controls.contains(&byte);
        let want = (at < bytes.len() && wanted).then_some(at);
        assert_eq!(
            escape_non_ascii_or(bytes, &controls),
            want,
            "byte {byte:#04x} at {at}"
        );
    });
}
