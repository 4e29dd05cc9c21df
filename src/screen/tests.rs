//! The screen's tests: emulation cases, history numbering, resting screens and the answers
//! to terminal queries (the fast path and the marks have files of their own).

use super::resting::ends_between_sequences;
use super::*;

pub(super) fn term() -> Terminal {
    Terminal::new(40, 6, 10_000, 1 << 20)
}

pub(super) fn all_lines(t: &Terminal) -> Vec<String> {
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
fn visited_lines_carry_the_numbers_lines_reads_them_at() {
    let many: String = (1..=20).map(|i| format!("h{i}\r\n")).collect();
    let streams: &[(&str, String)] = &[
        ("history and screen", format!("{many}on screen")),
        (
            "the newest history line continues on the screen",
            format!("{many}{}", "w".repeat(100)),
        ),
        (
            "a full-screen program over the main screen",
            format!("{many}tail\r\n\x1b[?1049hfull screen"),
        ),
    ];
    for (name, stream) in streams {
        let mut t = term();
        t.feed(stream.as_bytes());
        let total = t.total_lines();
        for (from, to) in [(1, total), (3, 5), (total - 2, total), (total, total + 3)] {
            let mut numbers = Vec::new();
            let mut texts = Vec::new();
            t.visit_lines(from, to, |n, text| {
                numbers.push(n);
                texts.push(text.to_owned());
            });
            let want = t.lines(from, to);
            assert_eq!(texts, want, "{name} {from}..={to}");
            let first = from.max(t.first_line());
            let expected: Vec<u64> = (first..).take(want.len()).collect();
            assert_eq!(numbers, expected, "{name} {from}..={to}");
            assert!(!want.is_empty(), "{name} {from}..={to}");
        }
    }
}

#[test]
fn a_screen_that_grows_after_scrolling_adds_no_blank_lines_above_its_content() {
    let mut t = Terminal::new(40, 5, 1000, 1 << 20);
    for n in 0..12 {
        t.feed(format!("line {n}\r\n").as_bytes());
    }
    t.feed(b"$ ");
    let before = t.total_lines();
    t.resize(40, 3);
    t.resize(40, 9);
    assert_eq!(t.total_lines(), before, "{:?}", t.visible_screen());
    assert_eq!(
        t.visible_screen().first().map(String::as_str),
        Some("line 10"),
        "{:?}",
        t.visible_screen()
    );
    // And a terminal rebuilt from a checkpoint grows the same way.
    let checkpoint = t.checkpoint().unwrap();
    let mut rebuilt = Terminal::new(40, 9, 1000, 1 << 20);
    rebuilt.restore(&checkpoint);
    for term in [&mut t, &mut rebuilt] {
        term.resize(40, 4);
        term.resize(40, 12);
    }
    assert_eq!(t.total_lines(), rebuilt.total_lines());
    assert_eq!(t.visible_screen(), rebuilt.visible_screen());
}
