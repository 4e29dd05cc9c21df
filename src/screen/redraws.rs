//! Redraws nobody will see (pure): a progress bar rewriting its line (`\r`, erase-line, the
//! frame) or a full-screen program repainting its rows (`CUP row;1`, the row, erase-line)
//! paints the same rows many times in one read, and only the last paint of each row is left
//! on the screen. [`collapse`] drops the text and erases of the earlier paints, keeping their
//! colour changes (the pen state) and moves to a row, so the emulator is spared the cells that
//! the next paint of the same row overwrites anyway; the screen, the cursor and the pen come
//! out exactly as if every byte had been emulated (differential tests compare both).
//!
//! Of a run of dropped paints only the pen and the cursor they leave matter: their last move to
//! a row, and their colour changes from the last one that resets the pen (`CSI m`, `CSI 0;...m`)
//! on, which give the same pen as all of them.
//!
//! A paint is a move to column 1 (`\r` on the current row, or `CSI row;1 H`) followed only by
//! printable ASCII, colour (`SGR`) and erase-line (`CSI K`, `0K`, `2K`) sequences, printing
//! less than a row's width (so nothing wraps and no row but its own is touched). It fully
//! decides its row when it erases to the end of the row. A paint is dropped when a later paint
//! of the same row in the same unbroken chain of paints decides that row: nothing between
//! them can read or move it. Anything else (a line feed, another control, a sequence that is
//! not one of these) ends the chain and is kept as it is. A repeat of the last character (`CSI
//! b`) anywhere in the bytes disables the collapse, since it would repeat a dropped character,
//! and so does a string sequence (OSC, DCS, ...): its body is not ground, and a shell mark's
//! place in the stream is counted in bytes.

use super::scan::printable_run;
use std::ops::Range;

/// What a piece of the bytes is, for the collapse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// `\r`: column 1 of the current row.
    ToLineStart,
    /// `CSI row ; 1 H` (or `f`): column 1 of that row.
    ToRow(u32),
    /// A colour sequence.
    Colour,
    /// Erase to the end of the row (`CSI K`, `CSI 0K`) or the whole row (`CSI 2K`).
    EraseLine,
    /// This many printable ASCII characters.
    Text(usize),
    /// Anything else: ends a chain of paints.
    Other,
    /// `CSI b`: repeat the last character.
    Repeat,
    /// The start of a string sequence.
    String,
    /// An escape sequence the bytes end inside.
    Unfinished,
}

/// The next token at the start of `bytes` and its length.
fn token(bytes: &[u8]) -> (Token, usize) {
    match bytes[0] {
        b'\r' => (Token::ToLineStart, 1),
        0x20..=0x7e => {
            let n = printable_run(bytes);
            (Token::Text(n), n)
        }
        0x1b if bytes.len() == 1 => (Token::Unfinished, 1),
        0x1b if bytes.get(1) == Some(&b'[') => csi(bytes),
        // A string (OSC, DCS, APC, PM, SOS) may hold anything, a mark among them, whose
        // place in the stream must stay exact.
        0x1b if matches!(bytes.get(1), Some(b']' | b'P' | b'_' | b'^' | b'X')) => {
            (Token::String, 2)
        }
        _ => (Token::Other, 1),
    }
}

/// Classifies the CSI sequence at the start of `bytes` (which begin `ESC [`).
fn csi(bytes: &[u8]) -> (Token, usize) {
    let params_len = bytes[2..]
        .iter()
        .position(|b| !(0x30..=0x3f).contains(b))
        .unwrap_or(bytes.len() - 2);
    let end = 2 + params_len;
    let Some(&last) = bytes.get(end) else {
        return (Token::Unfinished, bytes.len());
    };
    if !(0x40..=0x7e).contains(&last) {
        return (Token::Other, end + 1);
    }
    let params = &bytes[2..end];
    let len = end + 1;
    let kind = match last {
        b'm' if params
            .iter()
            .all(|b| b.is_ascii_digit() || *b == b';' || *b == b':') =>
        {
            Token::Colour
        }
        b'K' if matches!(params, b"" | b"0" | b"2") => Token::EraseLine,
        b'H' | b'f' => to_row(params).map_or(Token::Other, Token::ToRow),
        b'b' => Token::Repeat,
        _ => Token::Other,
    };
    (kind, len)
}

/// The row of a `CUP` whose column is 1 (`row;1`, `row;`, `row` or nothing).
fn to_row(params: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(params).ok()?;
    let (row, col) = text.split_once(';').unwrap_or((text, ""));
    if !matches!(col, "" | "0" | "1") || !row.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let row: u32 = if row.is_empty() { 1 } else { row.parse().ok()? };
    Some(row.max(1))
}

/// Which row a paint paints, as far as the bytes tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    /// This row of the screen (as the program numbered it).
    Numbered(u32),
    /// The row the cursor was on when the chain began (the `n`th chain).
    Unknown(usize),
}

/// One paint: where its bytes are, the row, whether it decides the row, and what of it stays
/// when it is dropped: a move to a numbered row (a later `\r` paints the row it moved to) and
/// the colour sequences (indices into the list of every paint's colours).
#[derive(Debug)]
struct Paint {
    bytes: Range<usize>,
    row: Row,
    decides: bool,
    moved: Option<Range<usize>>,
    colours: Range<usize>,
}

/// What a run of dropped paints leaves: its last move to a row and the colour changes that
/// decide the pen (from the last one that resets it).
#[derive(Default)]
struct Left {
    moved: Option<Range<usize>>,
    colours: Vec<Range<usize>>,
}

impl Left {
    fn absorb(&mut self, paint: &Paint, colours: &[Range<usize>], bytes: &[u8]) {
        if paint.moved.is_some() {
            self.moved.clone_from(&paint.moved);
        }
        for colour in &colours[paint.colours.clone()] {
            if resets_the_pen(&bytes[colour.clone()]) {
                self.colours.clear();
            }
            self.colours.push(colour.clone());
        }
    }

    fn put(&mut self, out: &mut Vec<u8>, bytes: &[u8]) {
        if let Some(moved) = self.moved.take() {
            out.extend_from_slice(&bytes[moved]);
        }
        for colour in self.colours.drain(..) {
            out.extend_from_slice(&bytes[colour]);
        }
    }
}

/// Whether a colour sequence (`ESC [ params m`) begins by resetting the pen: no parameters, or
/// a first parameter of 0 (empty counts as 0) without sub-parameters.
fn resets_the_pen(sgr: &[u8]) -> bool {
    let params = &sgr[2..sgr.len() - 1];
    let first = params.split(|&b| b == b';').next().unwrap_or_default();
    matches!(first, b"" | b"0")
}

/// A piece of the bytes: kept as it is, or a paint.
#[derive(Debug)]
enum Piece {
    Kept(Range<usize>),
    Paint(Paint),
}

/// The bytes with every paint dropped that a later paint of its row overwrites, or `None`
/// when there is none (the bytes go to the emulator as they are). `cols` is the screen's
/// width.
pub(crate) fn collapse(bytes: &[u8], cols: usize) -> Option<Vec<u8>> {
    // Cheap refusal for the common case (plain and coloured lines): no erase-line, no paint
    // that decides a row.
    if !has_erase_line(bytes) {
        return None;
    }
    let (pieces, colours) = pieces(bytes, cols)?;
    let mut chain_rows: Vec<Row> = Vec::new();
    let mut dropped = vec![false; pieces.len()];
    let mut any = false;
    // Backwards: a paint is dropped when a later paint of its row in the chain decides it.
    for (i, piece) in pieces.iter().enumerate().rev() {
        match piece {
            Piece::Kept(_) => chain_rows.clear(),
            Piece::Paint(p) => {
                if chain_rows.contains(&p.row) {
                    dropped[i] = true;
                    any = true;
                }
                if p.decides {
                    chain_rows.push(p.row);
                }
            }
        }
    }
    if !any {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut left = Left::default();
    for (piece, dropped) in pieces.iter().zip(dropped) {
        match piece {
            Piece::Paint(p) if dropped => left.absorb(p, &colours, bytes),
            Piece::Kept(r) => {
                left.put(&mut out, bytes);
                out.extend_from_slice(&bytes[r.clone()]);
            }
            Piece::Paint(p) => {
                left.put(&mut out, bytes);
                out.extend_from_slice(&bytes[p.bytes.clone()]);
            }
        }
    }
    left.put(&mut out, bytes);
    Some(out)
}

/// Where a stream of paints stands at the end of some bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum PaintState {
    /// Between paints (or before the first): the next must begin with a move to column 1.
    #[default]
    Outside,
    /// Inside a paint that has printed this wide so far.
    Inside { width: usize },
}

/// Whether `bytes`, following `state`, are nothing but paints up to, at most, an escape
/// sequence they end inside: `Some((complete, state))`, where `complete` bytes come before
/// that unfinished sequence and `state` is where the paints stand after them; `None` when
/// anything else comes (and for a repeat, or a string).
pub(super) fn only_paints(
    bytes: &[u8],
    mut state: PaintState,
    cols: usize,
) -> Option<(usize, PaintState)> {
    let mut at = 0;
    while at < bytes.len() {
        let (tok, len) = token(&bytes[at..]);
        state = match (tok, state) {
            (Token::ToLineStart | Token::ToRow(_), _) => PaintState::Inside { width: 0 },
            (Token::Colour | Token::EraseLine, PaintState::Inside { .. }) => state,
            (Token::Text(n), PaintState::Inside { width }) if width + n < cols => {
                PaintState::Inside { width: width + n }
            }
            (Token::Unfinished, _) => return Some((at, state)),
            _ => return None,
        };
        at += len;
    }
    Some((at, state))
}

/// Whether `bytes` hold an erase-line sequence (`CSI K`, `0K`, `2K`), found by its final byte.
fn has_erase_line(bytes: &[u8]) -> bool {
    memchr::memchr_iter(b'K', bytes).any(|i| match i {
        0 | 1 => false,
        _ if &bytes[i - 2..i] == b"\x1b[" => true,
        2 => false,
        _ => matches!(bytes[i - 1], b'0' | b'2') && &bytes[i - 3..i - 1] == b"\x1b[",
    })
}

/// Splits `bytes` into paints and kept pieces, with every paint's colour sequences; `None`
/// when a repeat sequence forbids the collapse.
fn pieces(bytes: &[u8], cols: usize) -> Option<(Vec<Piece>, Vec<Range<usize>>)> {
    let mut pieces = Vec::new();
    let mut colours = Vec::new();
    let mut chains = 0;
    let mut paint: Option<Paint> = None;
    let mut width = 0;
    let mut at = 0;
    // The row the cursor is on within the current chain.
    let mut current: Option<Row> = None;
    while at < bytes.len() {
        let (tok, len) = token(&bytes[at..]);
        let range = at..at + len;
        at += len;
        let start_row = match tok {
            Token::Repeat | Token::String => return None,
            Token::ToLineStart => Some(current.unwrap_or(Row::Unknown(chains))),
            Token::ToRow(r) => Some(Row::Numbered(r)),
            _ => None,
        };
        if let Some(row) = start_row {
            if let Some(p) = paint.take() {
                pieces.push(Piece::Paint(p));
            }
            current = Some(row);
            width = 0;
            let moved = matches!(tok, Token::ToRow(_)).then(|| range.clone());
            paint = Some(Paint {
                bytes: range,
                row,
                decides: false,
                moved,
                colours: colours.len()..colours.len(),
            });
            continue;
        }
        match (&mut paint, tok) {
            (Some(p), Token::Colour) => {
                colours.push(range.clone());
                p.colours.end = colours.len();
                p.bytes.end = range.end;
            }
            (Some(p), Token::EraseLine) => {
                p.decides = true;
                p.bytes.end = range.end;
            }
            (Some(p), Token::Text(n)) if width + n < cols => {
                width += n;
                p.bytes.end = range.end;
            }
            _ => {
                // Not part of a paint: the chain ends here. A paint that would wrap is kept
                // whole, as a piece of its own.
                if let Some(mut p) = paint.take() {
                    if matches!(tok, Token::Text(_)) {
                        p.bytes.end = range.end;
                        pieces.push(Piece::Kept(p.bytes));
                        chains += 1;
                        current = None;
                        continue;
                    }
                    pieces.push(Piece::Paint(p));
                }
                pieces.push(Piece::Kept(range));
                chains += 1;
                current = None;
            }
        }
    }
    if let Some(p) = paint {
        pieces.push(Piece::Paint(p));
    }
    Some((pieces, colours))
}

#[cfg(test)]
mod tests;
