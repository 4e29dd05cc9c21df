//! The screen's fast path against plain emulation: a terminal with it and one without, fed
//! the same random streams (floods of plain lines, agents' output shapes, anything at all), must
//! read the same; and the line scan that decides what the fast path may take.

use super::fast_path::{LineScan, scan_line};
use super::tests::{all_lines, term};
use super::*;

/// A small deterministic generator for the differential test.
pub(super) struct XorShift(pub(super) u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_stream(rng: &mut XorShift) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..2000 {
        match rng.below(20) {
            0 => out.extend_from_slice(b"progress 10%\rprogress 100%\r\n"),
            1 => out.extend_from_slice(b"\x1b]133;C\x07"),
            2 => out.extend_from_slice(b"a\x1b[1Ab\r\n"),
            3 => out.extend_from_slice(&b"x".repeat(rng.below(130) as usize)),
            4 if rng.below(10) == 0 => out.extend_from_slice(b"\x1b[H\x1b[2J"),
            5 => out.extend_from_slice(b"\x1b[31mred\x1b[0m and \x1b[1;32mgreen\x1b[m\r\n"),
            6 => out.extend_from_slice(b"\r\n"),
            _ => {
                let n = rng.below(90);
                out.extend(format!("line {n} {}\r\n", "y".repeat(n as usize)).bytes());
            }
        }
    }
    out
}

/// A terminal with the fast path and one without, fed the same bytes.
struct Twins {
    fast: Terminal,
    slow: Terminal,
}

impl Twins {
    fn new(max_lines: u64) -> Twins {
        let mut slow = Terminal::new(40, 6, max_lines, 1 << 24);
        slow.state.get_mut().fast_path = false;
        Twins {
            fast: Terminal::new(40, 6, max_lines, 1 << 24),
            slow,
        }
    }

    /// Feeds `stream` to both in random pieces of at most `max_chunk` bytes, asserting after
    /// each what the session actor reads then, the line count and the marks (and, with
    /// `cursor`, the cursor, which brings the fast path's emulator up to date).
    fn feed(
        &mut self,
        stream: &[u8],
        rng: &mut XorShift,
        max_chunk: u64,
        cursor: bool,
        round: usize,
    ) {
        let Twins { fast, slow } = self;
        let mut pos = 0;
        while pos < stream.len() {
            let n = (1 + rng.below(max_chunk) as usize).min(stream.len() - pos);
            fast.feed(&stream[pos..pos + n]);
            slow.feed(&stream[pos..pos + n]);
            pos += n;
            assert_eq!(
                fast.total_lines(),
                slow.total_lines(),
                "round {round} at {pos}"
            );
            assert_eq!(
                fast.take_marks(),
                slow.take_marks(),
                "round {round} at {pos}"
            );
            if cursor {
                assert_eq!(fast.cursor(), slow.cursor(), "round {round} at {pos}");
            }
        }
    }

    /// Asserts that both read the same: numbering, cursor, history and screen.
    fn assert_same(&self, what: &str) {
        let Twins { fast, slow } = self;
        assert_eq!(fast.first_line(), slow.first_line(), "{what}");
        assert_eq!(fast.cursor(), slow.cursor(), "{what}");
        assert_eq!(all_lines(fast), all_lines(slow), "{what}");
        assert_eq!(fast.visible_screen(), slow.visible_screen(), "{what}");
    }
}

#[test]
fn fast_path_matches_the_emulator() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for round in 0..20 {
        let stream = random_stream(&mut rng);
        let mut twins = Twins::new(100_000);
        twins.feed(&stream, &mut rng, 8000, true, round);
        twins.assert_same(&format!("round {round}"));
    }
}

/// What agents' commands print, in random order: progress frames redrawn with `\r` and
/// erase-line (a newline ending some), coloured build-log lines, and full-screen redraws on the
/// alternate screen (a row placed, coloured and erased to its end).
fn agent_output_stream(rng: &mut XorShift) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..400 {
        match rng.below(6) {
            0 | 1 => {
                let done = rng.below(101);
                out.extend(
                    format!(
                        "\r\x1b[K\x1b[36mitem\x1b[0m \x1b[32m{done:>3}%\x1b[0m|{:<10}|",
                        "#".repeat(done as usize / 10)
                    )
                    .bytes(),
                );
                if done > 90 {
                    out.extend_from_slice(b"\r\n");
                }
            }
            2 | 3 => out.extend(
                format!(
                    "\x1b[1m\x1b[32m   Compiling\x1b[0m crate-{} v0.1.0\r\n",
                    rng.below(99)
                )
                .bytes(),
            ),
            4 => out.extend_from_slice(b"test a::b ... \x1b[31mFAILED\x1b[0m\r\n"),
            _ => {
                out.extend_from_slice(b"\x1b[?1049h");
                for row in 1..=6 {
                    out.extend(format!("\x1b[{row};1H\x1b[3{row}mrow {row}\x1b[0m\x1b[K").bytes());
                }
                out.extend_from_slice(b"\x1b[?1049l");
            }
        }
    }
    out
}

#[test]
fn agent_output_shapes_match_the_emulator() {
    let mut rng = XorShift(0x5851_F42D_4C95_7F2D);
    for round in 0..20 {
        let stream = agent_output_stream(&mut rng);
        let mut twins = Twins::new(100_000);
        // As the session actor reads: no sync between pieces.
        twins.feed(
            &stream,
            &mut rng,
            [5, 90, 1024, 8000][round % 4],
            false,
            round,
        );
        twins.assert_same(&format!("round {round}"));
    }
}

/// Streams that are mostly floods of plain lines (long, wrapped, blank, coloured), with a
/// little of everything else in between.
fn flood_stream(rng: &mut XorShift) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..3000 {
        match rng.below(40) {
            0 => out.extend_from_slice("naïve café\r\n".as_bytes()),
            1 => out.extend_from_slice(b"\x1b]133;D;0\x07\x1b]133;A\x07$ \x1b]133;B\x07"),
            2 => out.extend_from_slice(b"line1 ....\r\nline2 ....\r\n\x1b[2A\rline1 DONE\r\n\r\n"),
            3 if rng.below(4) == 0 => out.extend_from_slice(b"\x1b[H\x1b[2J"),
            4 => out.extend_from_slice(b"progress 10%\rprogress 100%\r\n"),
            5 => out.extend_from_slice(b"\x1b[41m   \r\n"),
            6 => out.extend_from_slice(b"\x1b[0m\r\n"),
            7 => out.extend_from_slice(b"    \r\n"),
            8 => out.extend_from_slice(b"\r\n"),
            9 => out.extend_from_slice(b"tab\there\r\n"),
            10 => out.extend_from_slice(b"\x1b[01;34mdir\x1b[0m \x1b[37;41msetuid\x1b[0m\r\n"),
            11 => out.extend(format!("{}", rng.below(1000)).bytes()),
            _ => {
                let n = rng.below(130) as usize;
                let c = b'a' + rng.below(26) as u8;
                out.extend(std::iter::repeat_n(c, n));
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out
}

#[test]
fn lazy_runs_match_the_emulator() {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    for round in 0..30 {
        let stream = flood_stream(&mut rng);
        let max_lines = if round % 3 == 0 { 700 } else { 100_000 };
        let mut twins = Twins::new(max_lines);
        // Only what the session actor asks after every chunk: no sync.
        twins.feed(
            &stream,
            &mut rng,
            [7, 64, 600, 5000][round % 4],
            false,
            round,
        );
        twins.assert_same(&format!("round {round}"));
        let Twins { fast, slow } = &mut twins;
        // And the emulator picks up where the run left off.
        fast.feed(b"\x1b[3Aup\r\nend\r\n");
        slow.feed(b"\x1b[3Aup\r\nend\r\n");
        assert_eq!(all_lines(fast), all_lines(slow), "round {round} after");
        assert_eq!(
            fast.visible_screen(),
            slow.visible_screen(),
            "round {round} after"
        );
    }
}

#[test]
fn a_flood_stays_lazy_between_chunks() {
    let mut t = Terminal::new(80, 24, 100_000, 1 << 24);
    let stream: Vec<u8> = (1..=20_000)
        .flat_map(|i| format!("{i}\r\n").into_bytes())
        .collect();
    for chunk in stream.chunks(500) {
        t.feed(chunk);
        t.total_lines();
    }
    assert!(
        t.state.borrow().run.lazy,
        "the run should not have been synced"
    );
    assert_eq!(t.total_lines(), 20_000);
    assert_eq!(t.lines(19_999, 20_000), vec!["19999", "20000"]);
    assert_eq!(
        t.cursor(),
        Position {
            line: 20_001,
            col: 0
        }
    );
}

#[test]
fn scan_line_classifies() {
    assert_eq!(
        scan_line(b"ab\r\nc"),
        LineScan::Complete {
            len: 4,
            width: 2,
            sgr: false
        }
    );
    assert_eq!(
        scan_line(b"\x1b[01;34mab\x1b[m\r\n"),
        LineScan::Complete {
            len: 15,
            width: 2,
            sgr: true
        }
    );
    assert_eq!(scan_line(b"ab\x1b[01"), LineScan::Partial { width: 2 });
    assert_eq!(scan_line(b"ab\r"), LineScan::Partial { width: 2 });
    assert_eq!(scan_line(b"ab\x1b"), LineScan::Partial { width: 2 });
    assert_eq!(scan_line(b"ab\rc"), LineScan::NotPlain);
    assert_eq!(scan_line(b"a\x1b[2Ab\r\n"), LineScan::NotPlain);
    assert_eq!(scan_line("é\r\n".as_bytes()), LineScan::NotPlain);
}

#[test]
fn every_counted_line_can_be_read() {
    let mut t = term();
    t.feed(b" ");
    assert_eq!(t.total_lines(), 1);
    assert_eq!(t.lines(1, 1), vec![""]);
}

#[test]
fn a_line_end_inside_an_escape_sequence_does_not_start_a_run() {
    use super::sequences::leaves_a_sequence_open;
    for (bytes, open) in [
        (&b"plain\r\n"[..], false),
        (b"warning\x1b\r\n", true),
        (b"a\x1b[3\r\n", true),
        (b"a\x1b[31m\r\n", false),
        (b"a\x1b(\r\n", true),
        (b"a\x1b(B\r\n", false),
        (b"a\x1b]0;title\r\n", true),
        (b"a\x1b]0;title\x07\r\n", false),
        (b"a\x1b\x18\r\n", false),
        (b"a\x1bc\r\n", false),
        (b"\x1b[3\x87\x87", true),
        (b"\x1b\r\n[", true),
    ] {
        assert_eq!(leaves_a_sequence_open(bytes), open, "{bytes:?}");
    }
    // Found by the fuzz target (its input is kept among the seeds): a run of coloured build
    // lines, then `ESC CR LF [0m`, where the line end left the parser inside the sequence.
    let data = include_bytes!("../../fuzz/seeds/terminal_render/escape-across-a-line-end");
    let (header, stream) = data.split_at(8);
    let read = |fast: bool| {
        let mut t = Terminal::new(
            20 + u16::from(header[0]) % 200,
            5 + u16::from(header[1]) % 60,
            1 + u64::from(header[2]) * 4,
            64 + usize::from(header[3]) * 64,
        );
        t.state.get_mut().fast_path = fast;
        t.feed(stream);
        t.lines(1, u64::MAX)
    };
    assert_eq!(read(true), read(false));
    assert!(read(true).contains(&": unused `x3`".to_string()));
}

#[test]
fn a_sequence_of_unknown_kind_ends_only_where_every_kind_would() {
    use super::sequences::still_unsure;
    // What a chunk holds after one that left the parser possibly inside a sequence.
    for (bytes, unsure) in [
        (&b"plain text"[..], true),
        // After a lone ESC and bytes vte ignores, `[` begins a CSI: its final byte is in the
        // next chunk (the fuzz finding kept as `collapse-after-a-held-sequence`).
        (b"\xff\xff[32", true),
        (b"m then text", true),
        (b"text\x18more", false),
        (b"text\x1a", false),
        (b"x\x1b[31mtext", false),
        (b"x\x1b[31", true),
        (b"x\x1b]0;title", true),
        (b"x\x1b]0;title\x07text", false),
    ] {
        assert_eq!(still_unsure(bytes), unsure, "{bytes:?}");
    }
}
