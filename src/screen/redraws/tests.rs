//! The collapse of redraws: what it drops and keeps (tables), and terminals fed with and
//! without it reading the same, colours and cursor included.

use super::collapse;
use crate::screen::Terminal;

/// What a case says, the bytes, and what the collapse makes of them (`None`: nothing).
type Case = (&'static str, &'static [u8], Option<&'static [u8]>);

#[test]
fn earlier_paints_of_a_row_lose_their_text_and_keep_their_colours() {
    let cases: [Case; 12] = [
        (
            "dropped paints keep the colours from the last reset of the pen on",
            b"\r\x1b[K\x1b[1m\x1b[31ma\x1b[0;4mb\x1b[32mc\r\x1b[Kd",
            Some(b"\x1b[0;4m\x1b[32m\r\x1b[Kd"),
        ),
        (
            "without a reset every colour change stays",
            b"\r\x1b[K\x1b[1ma\x1b[31mb\r\x1b[K\x1b[4mc\r\x1b[Kd",
            Some(b"\x1b[1m\x1b[31m\x1b[4m\r\x1b[Kd"),
        ),
        (
            "progress frames: only the last one's text stays",
            b"\r\x1b[K\x1b[36m10%\x1b[0m\r\x1b[K\x1b[36m20%\x1b[0m\r\x1b[K\x1b[36m30%\x1b[0m",
            Some(b"\x1b[0m\r\x1b[K\x1b[36m30%\x1b[0m"),
        ),
        (
            "full-screen rows repainted: the first frame goes",
            b"\x1b[1;1Hone\x1b[K\x1b[2;1Htwo\x1b[K\x1b[1;1HONE\x1b[K\x1b[2;1HTWO\x1b[K",
            Some(b"\x1b[2;1H\x1b[1;1HONE\x1b[K\x1b[2;1HTWO\x1b[K"),
        ),
        (
            "a line feed ends the chain: nothing before it is dropped",
            b"\r\x1b[Ka\r\n\r\x1b[Kb",
            None,
        ),
        (
            "a paint that does not erase decides nothing",
            b"\rabc\rxy",
            None,
        ),
        (
            "a later paint that does not erase keeps the earlier one",
            b"\r\x1b[Kabc\rxy",
            None,
        ),
        (
            "a frame as wide as the row may wrap: kept whole",
            b"\r\x1b[K0123456789\r\x1b[Kb",
            None,
        ),
        (
            "a repeat anywhere forbids the collapse",
            b"\r\x1b[Kabc\r\x1b[K\x1b[3b",
            None,
        ),
        (
            "another sequence between the paints ends the chain",
            b"\r\x1b[Kabc\x1b[1A\r\x1b[Kdef",
            None,
        ),
        (
            "the cursor's row, numbered by the chain's first move, is the same row",
            b"\x1b[3;1Hold\x1b[K\rnew\x1b[K",
            Some(b"\x1b[3;1H\rnew\x1b[K"),
        ),
        (
            "text before the first paint is kept, and other rows are untouched",
            b"tail\x1b[2;1Hx\x1b[K\x1b[3Hy\x1b[K\x1b[2;1Hz\x1b[K",
            Some(b"tail\x1b[2;1H\x1b[3Hy\x1b[K\x1b[2;1Hz\x1b[K"),
        ),
    ];
    for (what, bytes, want) in cases {
        assert_eq!(collapse(bytes, 10).as_deref(), want, "{what}");
    }
}

/// A terminal fed `stream` in pieces, with the collapse (the fast path) or without.
fn fed(stream: &[u8], collapse: bool, piece: usize) -> Terminal {
    let mut t = Terminal::new(30, 6, 10_000, 1 << 20);
    t.state.get_mut().fast_path = collapse;
    for chunk in stream.chunks(piece) {
        t.feed(chunk);
    }
    t
}

/// What a reader could tell apart: every row with its colours, the cursor, the pen.
fn everything(t: &mut Terminal) -> (String, (u16, u16), String) {
    let state = t.state.get_mut();
    state.sync();
    let screen = state.parser.screen();
    (
        screen.contents_formatted(),
        screen.cursor_position(),
        screen.attributes_formatted(),
    )
}

#[test]
fn terminals_read_the_same_with_and_without_the_collapse() {
    let mut rng = crate::screen::fast_path_tests::XorShift(0x2545_F491_4F6C_DD1D);
    let mut collapsed = 0;
    for round in 0..60 {
        let mut stream = Vec::new();
        for _ in 0..300 {
            let n = rng.below(40) as usize;
            let text = "#".repeat(n);
            // Foreground, background, bold, resets (alone, empty, with more after): the pen
            // each paint leaves behind.
            let pen = ["31", "42", "1;33", "0", "7", "44;37", "", "0;4", "38;5;202"]
                [rng.below(9) as usize];
            let reset = if rng.below(2) == 0 { "\x1b[0m" } else { "" };
            match rng.below(12) {
                0..=3 => stream.extend(format!("\r\x1b[K\x1b[{pen}m{text}{reset} {n}%").bytes()),
                4..=6 => stream.extend(
                    format!("\x1b[{};1H\x1b[{pen}m{text}{reset}\x1b[K", 1 + rng.below(8)).bytes(),
                ),
                7 => stream
                    .extend(format!("\x1b[{}H\x1b[{pen}m\x1b[2K{text}", 1 + rng.below(6)).bytes()),
                8 => stream.extend_from_slice(b"\r\n"),
                9 => stream.extend(format!("\r{text}").bytes()),
                _ => stream.extend_from_slice(
                    [
                        &b"\x1b[?1049h"[..],
                        b"\x1b[?1049l",
                        b"\x1b[3b",
                        b"\x1b[1A",
                        b"\x1b[4h",
                        b"\x1b[4l",
                        b"\x1b[?7l",
                        b"\x1b[?7h",
                    ][rng.below(8) as usize],
                ),
            }
        }
        let piece = [7, 64, 1024, 1 << 20][round % 4];
        collapsed += stream
            .chunks(piece)
            .filter(|c| collapse(c, 30).is_some())
            .count();
        let mut with = fed(&stream, true, piece);
        let mut without = fed(&stream, false, piece);
        assert_eq!(
            everything(&mut with),
            everything(&mut without),
            "round {round}"
        );
        assert_eq!(with.total_lines(), without.total_lines(), "round {round}");
    }
    assert!(
        collapsed > 100,
        "the streams exercise the collapse: {collapsed} pieces"
    );
}

#[test]
fn strings_and_marks_forbid_the_collapse() {
    for bytes in [
        &b"\r\x1b[Ka\x1b]133;A\x07\r\x1b[Kb"[..],
        b"\r\x1b[Ka\x1bPq\x1b\\\r\x1b[Kb",
    ] {
        assert_eq!(collapse(bytes, 10), None, "{bytes:?}");
    }
}

#[test]
fn erase_lines_are_found_by_their_final_byte() {
    for (bytes, has) in [
        (&b"\x1b[K"[..], true),
        (b"ab\x1b[0K", true),
        (b"\x1b[2Kx", true),
        (b"\x1b[1K", false),
        (b"OK KiB [K", false),
        (b"K", false),
        (b"\x1b[31mred\x1b[0m\r\n", false),
    ] {
        assert_eq!(super::has_erase_line(bytes), has, "{bytes:?}");
    }
}

/// A full-screen program on the alternate screen: frames of rows placed, coloured and erased,
/// split anywhere (inside a sequence too), read now and then, and left at the end.
#[test]
fn deferred_full_screen_redraws_read_as_if_emulated() {
    let mut rng = crate::screen::fast_path_tests::XorShift(0x9FB2_1C65_1E98_DF25);
    for round in 0..30 {
        let mut stream = b"\x1b[?1049h\x1b[H\x1b[2J".to_vec();
        for frame in 0..40 {
            for row in 1..=6 {
                let n = rng.below(25) as usize;
                stream.extend(
                    format!(
                        "\x1b[{row};1H\x1b[3{}m{}{frame}\x1b[0m\x1b[K",
                        rng.below(8),
                        "=".repeat(n)
                    )
                    .bytes(),
                );
            }
            if rng.below(10) == 0 {
                // Something other than a paint: a move, a mark, a status line's wrap.
                stream.extend_from_slice(
                    [&b"\x1b[3;5H*"[..], b"\x1b]133;A\x07", b"\r\n", b"\x1b[5b"]
                        [rng.below(4) as usize],
                );
            }
        }
        stream.extend_from_slice(b"\x1b[?1049lback on the main screen\r\n");
        let mut with = Terminal::new(30, 6, 10_000, 1 << 20);
        let mut without = Terminal::new(30, 6, 10_000, 1 << 20);
        without.state.get_mut().fast_path = false;
        let mut pos = 0;
        while pos < stream.len() {
            let n = (1 + rng.below(700) as usize).min(stream.len() - pos);
            with.feed(&stream[pos..pos + n]);
            without.feed(&stream[pos..pos + n]);
            pos += n;
            assert_eq!(
                with.total_lines(),
                without.total_lines(),
                "round {round} at {pos}"
            );
            assert_eq!(with.cursor(), without.cursor(), "round {round} at {pos}");
            assert_eq!(
                with.take_marks(),
                without.take_marks(),
                "round {round} at {pos}"
            );
            if rng.below(8) == 0 {
                assert_eq!(
                    everything(&mut with),
                    everything(&mut without),
                    "round {round} at {pos}"
                );
            }
        }
        assert_eq!(
            everything(&mut with),
            everything(&mut without),
            "round {round}"
        );
        assert_eq!(
            crate::screen::tests::all_lines(&with),
            crate::screen::tests::all_lines(&without),
            "round {round}"
        );
    }
}

#[test]
fn a_sequence_cut_by_a_read_does_not_stop_the_collapse() {
    // Progress frames read in pieces that cut their colour sequences: the piece after a cut
    // begins with what the cut left unfinished, and is collapsed all the same.
    let mut stream = Vec::new();
    for i in 0..2_000 {
        stream.extend(
            format!(
                "\r\x1b[K\x1b[36mitem {i:>5}\x1b[0m \x1b[32m{}%\x1b[0m",
                i % 100
            )
            .bytes(),
        );
        if i % 100 == 99 {
            stream.extend_from_slice(b"\r\n");
        }
    }
    for piece in [997, 4096] {
        let mut t = fed(&stream, true, piece);
        let emulated = t.state.get_mut().emulated;
        assert!(
            emulated < stream.len() / 10,
            "pieces of {piece}: {emulated} of {} bytes reached the emulator",
            stream.len()
        );
        let mut plain = fed(&stream, false, piece);
        assert_eq!(
            everything(&mut t),
            everything(&mut plain),
            "pieces of {piece}"
        );
    }
}
