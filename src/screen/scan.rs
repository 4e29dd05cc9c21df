//! Word-at-a-time byte scans (pure): most of what a busy terminal prints is runs of plain
//! text between its sequences, and finding where a run ends byte by byte was the largest cost
//! of the layers that look at every byte before the emulator (the collapse of redraws, the
//! plain-line fast path, the sequence layer). These look at eight bytes at once and scan
//! bytewise only the word that holds the byte looked for.

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Whether a byte of `word` is below `n` (at most 0x80). Exact for the word as a whole (a
/// borrow only spreads from a byte that is itself below `n`), not for where.
fn any_below(word: u64, n: u8) -> bool {
    word.wrapping_sub(ONES * u64::from(n)) & !word & HIGHS != 0
}

/// Whether a byte of `word` is 0x7f or above (it has its high bit set, or gains it by adding
/// 1; a carry only spreads from a byte that is 0xff).
fn any_above_ascii_text(word: u64) -> bool {
    (word.wrapping_add(ONES) | word) & HIGHS != 0
}

/// Whether a byte of `word` is `byte`.
fn any_equal(word: u64, byte: u8) -> bool {
    any_below(word ^ (ONES * u64::from(byte)), 1)
}

/// The first byte of `bytes` that `is` finds, looking bytewise only in the words that
/// `may_hold` says may hold one (it must say so of every word that does).
fn find(bytes: &[u8], may_hold: impl Fn(u64) -> bool, is: impl Fn(u8) -> bool) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        if may_hold(u64::from_ne_bytes(word.try_into().expect("eight bytes")))
            && let Some(p) = word.iter().position(|&b| is(b))
        {
            return Some(at + p);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| is(b))
        .map(|p| at + p)
}

/// How many bytes at the start of `bytes` are printable ASCII (`0x20..=0x7e`).
pub(super) fn printable_run(bytes: &[u8]) -> usize {
    find(
        bytes,
        |word| any_below(word, 0x20) || any_above_ascii_text(word),
        |b| !(0x20..=0x7e).contains(&b),
    )
    .unwrap_or(bytes.len())
}

/// The first byte of `bytes` that is ESC, not ASCII, or one of `controls` (each below 0x10).
pub(super) fn escape_non_ascii_or(bytes: &[u8], controls: &[u8]) -> Option<usize> {
    find(
        bytes,
        |word| any_below(word, 0x10) || any_equal(word, 0x1b) || word & HIGHS != 0,
        |b| b == 0x1b || b >= 0x80 || controls.contains(&b),
    )
}

#[cfg(test)]
mod tests;
