//! The screen's tests: emulation cases, history numbering, resting screens and the fast path
//! against plain emulation.

use super::fast_path::{LineScan, scan_line};
use super::resting::ends_between_sequences;
use super::*;

fn term() -> Terminal {
    Terminal::new(40, 6, 10_000, 1 << 20)
}

fn all_lines(t: &Terminal) -> Vec<String> {
    t.lines(1, t.total_lines())
}

#[test]
fn emulation_cases() {
    let cases: &[(&[u8], &[&str])] = &[
        (
            b"Downloading 10%\rDownloading 100%\r\n",
            &["Downloading 100%"],
        ),
        (b"abc\x08\x08X\r\n", &["aXc"]),
        (b"hello\r\x1b[Kbye\r\n", &["bye"]),
        (b"abcdef\x1b[3DXY\r\n", &["abcXYf"]),
        (
            b"line1 ....\r\nline2 ....\r\n\x1b[2A\rline1 DONE\r\n\r\n",
            &["line1 DONE", "line2 ...."],
        ),
        (
            b"\x1b[31mred\x1b[0m \x1b[32mgreen\x1b[0m\r\n",
            &["red green"],
        ),
        ("日本語abc\r\n👍ok\r\n".as_bytes(), &["日本語abc", "👍ok"]),
        (
            b"before\r\n\x1b[?1049hfull screen\x1b[?1049lafter\r\n",
            &["before", "after"],
        ),
    ];
    for (input, want) in cases {
        let mut t = term();
        t.feed(input);
        assert_eq!(
            all_lines(&t),
            *want,
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn wrapped_lines_are_joined_on_screen_and_in_history() {
    let mut t = term();
    let long = "x".repeat(100);
    t.feed(format!("{long}\r\n").as_bytes());
    assert_eq!(all_lines(&t), vec![long.clone()]);
    for i in 0..10 {
        t.feed(format!("{i}\r\n").as_bytes());
    }
    let lines = all_lines(&t);
    assert_eq!(lines[0], long);
    assert_eq!(lines.len(), 11);
    assert_eq!(t.total_lines(), 11);
}

#[test]
fn sequence_ends_are_recognised() {
    for (bytes, clean) in [
        (&b"plain text"[..], true),
        (b"$ \x1b]133;B\x07", true),
        (b"\x1b[31mred\x1b[0m", true),
        (b"\x1b[31", false),
        (b"\x1b", false),
        (b"\x1b]0;title", false),
        (b"\x1b]0;title\x1b\\", true),
        (b"\x1b(B", true),
        (b"\x1b(", false),
        ("日本".as_bytes(), true),
        (&"日本".as_bytes()[..5], false),
        (b"ok\xf0\x9f", false),
        (b"\x1b\xff\xff=", false),
        (b"stray \xff byte", false),
        ("C1 \u{9b}".as_bytes(), false),
        (b"\x1b[3\x18m", false),
        (b"\x1b_apc string\x07", false),
        (b"\x1bPq dcs\x07", false),
        (b"\x1b_apc\x1b\\", true),
    ] {
        assert_eq!(ends_between_sequences(bytes, true), clean, "{bytes:?}");
        assert!(
            !ends_between_sequences(bytes, false)
                || bytes
                    .iter()
                    .any(|b| (0x40..=0x7e).contains(b) || *b == 0x1b)
        );
    }
    // The newest bytes of a longer output, whatever came before them.
    for (bytes, clean) in [
        (&b"1;2;3;4"[..], false),
        (b"line 9\r\n$ ", true),
        (b"9\r\nline 10\r\n", true),
        (&"\u{2500}box\r\n".as_bytes()[1..], true),
        (&"\u{2500}\u{2500}".as_bytes()[1..], false),
        ("12m C1 \u{9b}".as_bytes(), false),
        (b"0;0;0;0 ", false),
    ] {
        assert_eq!(ends_between_sequences(bytes, false), clean, "{bytes:?}");
    }
}

#[test]
fn a_rested_screen_wakes_as_it_was() {
    // Pieces of output; after each, one terminal rests (when it may) and another does not:
    // every read and everything fed after must agree.
    let pieces: &[&[u8]] = &[
        b"\x1b]133;A\x07user@host:~$ \x1b]133;B\x07",
        b"ls --color\r\n\x1b]133;C\x07",
        b"\x1b[01;34mdir\x1b[0m  file\r\n",
        "日本語のテキスト 👍\r\n".as_bytes(),
        b"\x1b[1;33;44mbold colours\x1b[0m and \x1b[7minverse\x1b[27m\r\n",
        &[b'w'; 95],
        b"\r\n\x1b]133;D;0\x07\x1b]133;A\x07$ \x1b]133;B\x07",
        b"\x1b[?2004h\x1b[?1h",
        b"partial line, cursor mid-row",
        b"\x1b[3;5Hmoved\x1b[K",
        b"\x1b[?25l",
        b"\x1b[31",
        b"m still red after a split sequence\r\n",
        &"é".as_bytes()[..1],
        &"é".as_bytes()[1..],
        b"\r\nend\x1b[?25h",
        // Found by fuzzing: an escape sequence split over pieces, with bytes it ignores.
        b"\xff\x03",
        b"\x1b",
        b"\xff",
        b"\xff",
        b"=",
        b"after\r\n",
        // A cursor restored across a rest: never saved, then saved with colours.
        b"\x1b8here",
        b"\x1b[5;7H\x1b[1;32;44m\x1b7\x1b[m\x1b[10;1Hbelow",
        b"\x1b8restored in colour\x1b[m\r\n",
    ];
    let mut resting = term();
    let mut plain = term();
    let mut rested = 0;
    let agree = |resting: &Terminal, plain: &Terminal, when: &str| {
        // What a resting screen answers from memory, then what wakes it.
        assert_eq!(resting.total_lines(), plain.total_lines(), "{when}");
        assert_eq!(resting.cursor(), plain.cursor(), "{when}");
        assert_eq!(resting.bracketed_paste(), plain.bracketed_paste(), "{when}");
        assert_eq!(resting.size(), plain.size(), "{when}");
        assert_eq!(
            resting.alternate_screen(),
            plain.alternate_screen(),
            "{when}"
        );
        assert_eq!(all_lines(resting), all_lines(plain), "{when}");
        assert_eq!(resting.visible_screen(), plain.visible_screen(), "{when}");
        let (a, b) = (resting.state.borrow(), plain.state.borrow());
        assert_eq!(
            a.parser.screen().state_formatted(),
            b.parser.screen().state_formatted(),
            "{when}: formatted screen and input modes"
        );
    };
    for (i, piece) in pieces.iter().enumerate() {
        // Fed while resting (from the second piece on), then read.
        resting.feed(piece);
        plain.feed(piece);
        agree(&resting, &plain, &format!("piece {i} fed"));
        if resting.rest() {
            rested += 1;
            assert!(resting.is_resting());
            if i % 3 == 0 {
                // Woken by a read, then back to rest for the next piece.
                agree(&resting, &plain, &format!("piece {i} read"));
                assert!(resting.rest());
            }
        }
    }
    assert!(rested >= 10, "rested after {rested} pieces");
}

#[test]
fn a_rested_screen_resizes_like_an_awake_one() {
    // Found by fuzzing: growing the screen pulls rows back from vt100's count of rows
    // scrolled off, which resting must leave as it was.
    let mut resting = Terminal::new(82, 5, 1, 1 << 16);
    let mut plain = Terminal::new(82, 5, 1, 1 << 16);
    for (i, byte) in b"\n\n\n\n\n\n\n\x08\n\n\n\n\n\n\xf1\n\n\n"
        .iter()
        .enumerate()
    {
        for t in [&mut resting, &mut plain] {
            t.feed(&[*byte]);
            if i % 10 == 9 {
                let (c, r) = t.size();
                t.resize(c + 27, r + 8);
            }
        }
        assert_eq!(resting.total_lines(), plain.total_lines(), "after byte {i}");
        assert_eq!(resting.cursor(), plain.cursor(), "after byte {i}");
        resting.rest();
    }
    assert_eq!(all_lines(&resting), all_lines(&plain));
}

#[test]
fn every_range_reads_what_the_whole_screen_holds() {
    // Wrapped lines (one continuing from history), wide characters across a row end, a
    // row of coloured blanks and blank rows between lines: any sub-range reads the same
    // lines as a read of everything.
    let mut t = term();
    t.feed("h".repeat(70).as_bytes());
    t.feed(b"\r\n");
    t.feed("日本語".repeat(8).as_bytes());
    t.feed(b"\r\nshort\r\n\x1b[44m   \x1b[0m\r\n\r\nlast line  ");
    let total = t.total_lines();
    let all = all_lines(&t);
    assert_eq!(all.len() as u64, total);
    {
        // The row-by-row range rendering agrees with rendering every row.
        let state = t.synced();
        let every = state.screen_lines();
        assert_eq!(state.screen_lines_range(0, every.len() + 3), every);
        for (i, line) in every.iter().enumerate() {
            assert_eq!(
                state.screen_lines_range(i, i),
                std::slice::from_ref(line),
                "line {i}"
            );
        }
    }
    for from in 1..=total {
        for to in from..=total {
            let want = &all[(from - 1) as usize..to as usize];
            assert_eq!(t.lines(from, to), want, "lines {from}..={to}");
        }
    }
}

#[test]
fn numbering_is_stable_while_a_wrapped_line_scrolls_off() {
    let mut t = term();
    t.feed(b"a\r\nb\r\nc\r\nd\r\n");
    t.feed("y".repeat(100).as_bytes());
    let before = all_lines(&t);
    t.feed(b"\r\n");
    for i in 0..3 {
        t.feed(format!("{i}\r\n").as_bytes());
        let now = all_lines(&t);
        assert_eq!(now[..5], before[..5], "after {i}");
    }
}

#[test]
fn clear_keeps_screen_in_history() {
    let mut t = term();
    t.feed(b"old1\r\nold2\r\n\x1b[H\x1b");
    t.feed(b"[2Jnew\r\n");
    assert_eq!(all_lines(&t), vec!["old1", "old2", "new"]);
}

#[test]
fn scrolling_feeds_history_with_numbers() {
    let mut t = term();
    for i in 1..=1000 {
        t.feed(format!("{i}\r\n").as_bytes());
    }
    assert_eq!(t.total_lines(), 1000);
    assert_eq!(t.lines(998, 1000), vec!["998", "999", "1000"]);
    assert_eq!(t.lines(1, 2), vec!["1", "2"]);
}

#[test]
fn marks_carry_positions() {
    let mut t = term();
    t.feed(b"$ echo hi\r\n\x1b]133;C\x07hi\r\n\x1b]133;D;0\x07$ ");
    let marks = t.take_marks();
    assert_eq!(marks.len(), 2);
    assert_eq!(marks[0].mark, Mark::CommandStart);
    assert_eq!(marks[0].at, Position { line: 2, col: 0 });
    assert_eq!(marks[1].mark, Mark::CommandEnd(Some(0)));
    assert_eq!(marks[1].at, Position { line: 3, col: 0 });
}

/// The command each command-start (or input-ending) mark carries, by shell and input shape.
#[test]
fn marks_carry_the_command_line_typed_or_reported() {
    const B: &str = "\x1b]133;B\x07";
    const C: &str = "\x1b]133;C\x07";
    const D: &str = "\x1b]133;D;0\x07";
    let cases: &[(&str, String, &[Option<&str>])] = &[
        // bash: what was typed after the input start, up to the line the command starts on.
        (
            "typed",
            format!("$ {B}echo hi\r\n{C}hi\r\n{D}"),
            &[None, Some("echo hi"), None],
        ),
        // A continuation line comes with its prompt, as bash drew it.
        (
            "continued",
            format!("$ {B}for i in 1; do\r\n> echo $i; done\r\n{C}1\r\n{D}"),
            &[None, Some("for i in 1; do\n> echo $i; done"), None],
        ),
        // zsh and fish report the line themselves (percent-encoded) just before the start.
        (
            "reported",
            format!("% {B}ls\r\n\x1b]133;E;a%3Bb\x07{C}{D}"),
            &[None, Some("a;b"), None],
        ),
        // An input ended without a command: the first line typed (a refused one), or nothing.
        (
            "refused",
            format!("$ {B}if then\r\nbash: syntax error\r\n\x1b]133;D;2\x07"),
            &[None, Some("if then")],
        ),
        ("empty", format!("$ {B}\r\n{D}"), &[None, Some("")]),
        // A wide character counts two cells before the input starts.
        (
            "wide",
            format!("\u{4f60}> {B}pwd\r\n{C}"),
            &[None, Some("pwd")],
        ),
        // A line longer than the screen is wide wraps; its rows are one line.
        (
            "wrapped",
            format!("$ {B}{}\r\n{C}", "x".repeat(100)),
            &[None, Some("x".repeat(100).leak())],
        ),
    ];
    for (name, stream, want) in cases {
        let mut t = term();
        t.feed(stream.as_bytes());
        let got: Vec<Option<String>> = t.take_marks().into_iter().map(|m| m.command).collect();
        let want: Vec<Option<String>> = want.iter().map(|w| w.map(str::to_owned)).collect();
        assert_eq!(got, want, "{name}");
    }
}

/// Each mark knows where its sequence lies in the stream, however the reads cut it.
#[test]
fn marks_know_their_place_in_the_stream() {
    let stream = b"$ \x1b]133;B\x07ls\r\n\x1b]133;C\x07a\r\nb\r\n\x1b]133;D;0\x07$ ";
    let at = |needle: &[u8]| {
        let start = stream
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap() as u64;
        (start, start + needle.len() as u64)
    };
    let want = vec![
        at(b"\x1b]133;B\x07"),
        at(b"\x1b]133;C\x07"),
        at(b"\x1b]133;D;0\x07"),
    ];
    for cut in 0..stream.len() {
        let mut t = term();
        t.feed(&stream[..cut]);
        let mut marks = t.take_marks();
        t.feed(&stream[cut..]);
        marks.extend(t.take_marks());
        let got: Vec<(u64, u64)> = marks.iter().map(|m| m.bytes).collect();
        assert_eq!(got, want, "cut at {cut}");
        assert_eq!(t.output_bytes(), stream.len() as u64);
    }
}

#[test]
fn with_a_key_only_signed_marks_count_and_forged_ones_leave_no_text() {
    let mut t = term();
    t.set_mark_key(MarkKey::from_text("k3y"));
    t.feed(b"x\x1b]133;D;3\x07\x1b]133;A\x07\x1b]133;C;ptyd=forged\x07y\r\n");
    assert_eq!(t.take_marks(), vec![], "marks without the key are no marks");
    t.feed(b"\x1b]133;D;0;ptyd=k3y\x07$ ");
    let marks: Vec<Mark> = t.take_marks().into_iter().map(|m| m.mark).collect();
    assert_eq!(marks, vec![Mark::CommandEnd(Some(0))]);
    assert_eq!(t.lines(1, 2), vec!["xy", "$"], "no mark prints anything");
}

#[test]
fn alternate_screen_stays_out_of_history() {
    let mut t = term();
    t.feed(b"keep\r\n\x1b[?1049h");
    for i in 0..20 {
        t.feed(format!("pager {i}\r\n").as_bytes());
    }
    assert!(t.alternate_screen());
    assert!(t.visible_screen().iter().any(|l| l.starts_with("pager 19")));
    t.feed(b"\x1b[?1049l");
    assert_eq!(all_lines(&t), vec!["keep"]);
}
#[test]
fn cursor_line_counts_a_partial_prompt() {
    let mut t = term();
    t.feed(b"$ echo \"x\r\n> ");
    assert_eq!(t.cursor(), Position { line: 2, col: 2 });
    assert_eq!(t.lines(1, 2), vec!["$ echo \"x", ">"]);
}

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

#[test]
fn history_reads_see_the_main_screen_while_a_pager_shows() {
    let mut t = term();
    t.feed(b"one\r\ntwo\r\n$ less f\r\n\x1b[?1049h\x1b[Hpage 1\r\npage 2");
    assert!(t.alternate_screen());
    assert_eq!(all_lines(&t), vec!["one", "two", "$ less f"]);
    assert_eq!(t.total_lines(), 3);
    t.feed(b"\x1b[?1049l$ ");
    assert_eq!(all_lines(&t), vec!["one", "two", "$ less f", "$"]);
}

#[test]
fn terminal_queries_get_answers() {
    let mut t = term();
    t.feed(b"ab\x1b[6n\x1b[c\x1b[>c\x1b]11;?\x07");
    let replies = String::from_utf8(t.take_replies()).unwrap();
    assert_eq!(
        replies,
        "\x1b[1;3R\x1b[?1;2c\x1b[>0;10;1c\x1b]11;rgb:0000/0000/0000\x1b\\"
    );
    assert!(t.take_replies().is_empty());
}

#[test]
fn answers_to_queries_of_an_ended_command_are_left_out() {
    // (output fed before one take, answers kept): a query before a command-end mark was asked
    // by the command that ended; one after it by the shell at its prompt.
    let cases: [(&[u8], &[u8]); 5] = [
        (b"\x1b[5n", b"\x1b[0n"),
        (b"\x1b[5n\x1b]133;D;0\x07", b""),
        (
            b"\x1b[5n\x1b]133;D;0\x07\x1b]133;A\x07\x1b[c",
            b"\x1b[?1;2c",
        ),
        (
            b"\x1b]133;D;0\x07\x1b[5n\x1b]133;C\x07\x1b[c\x1b]133;D;1\x07",
            b"",
        ),
        (b"\x1b]133;A\x07\x1b[5n", b"\x1b[0n"),
    ];
    for (output, want) in cases {
        let mut t = term();
        t.feed(output);
        assert_eq!(
            t.take_replies_after_end(),
            want,
            "{:?}",
            String::from_utf8_lossy(output)
        );
    }
    // The cut is per take: an end mark fed after a take leaves earlier answers alone.
    let mut t = term();
    t.feed(b"\x1b[5n");
    assert_eq!(t.take_replies_after_end(), b"\x1b[0n");
    t.feed(b"\x1b]133;D;0\x07\x1b[5n");
    assert_eq!(t.take_replies_after_end(), b"\x1b[0n");
}

#[test]
fn private_rejected_mark_is_reported() {
    let mut t = term();
    t.feed(b"x\r\n\x1b]133;ptyd-rejected\x07$ ");
    let marks: Vec<Mark> = t.take_marks().into_iter().map(|m| m.mark).collect();
    assert_eq!(marks, vec![Mark::LineRejected]);
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
