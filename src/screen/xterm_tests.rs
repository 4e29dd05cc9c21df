//! Tests of the sequences vt100 lacks and [`super::xterm`] implements, each read back as xterm
//! shows it, and of the modes the fast path must see in stream order.

use super::Terminal;
use super::fast_path_tests::XorShift;

fn term() -> Terminal {
    Terminal::new(80, 24, 10_000, 1 << 20)
}

fn screen_of(input: &[u8]) -> Vec<String> {
    let mut t = term();
    t.feed(input);
    t.visible_screen()
}

fn all_lines(t: &Terminal) -> Vec<String> {
    t.lines(1, t.total_lines())
}

/// Feeds `stream` in chunks of `size` bytes.
fn fed_in_chunks(stream: &[u8], size: usize, fast_path: bool) -> Terminal {
    let mut t = term();
    t.state.get_mut().fast_path = fast_path;
    for chunk in stream.chunks(size) {
        t.feed(chunk);
        t.total_lines();
    }
    t
}

/// Item 1's stream: a header, a scroll region below it, 40 numbered lines scrolling in the
/// region, and the region reset at the end.
fn region_stream() -> Vec<u8> {
    let mut s = b"HEADER\r\n\x1b[3;20r\x1b[20;1H".to_vec();
    for i in 1..=40 {
        s.extend(format!("{i}\r\n").bytes());
    }
    s.extend_from_slice(b"\x1b[r");
    s
}

#[test]
fn a_region_reset_in_the_same_read_leaves_history_alone() {
    let stream = region_stream();
    let plain = fed_in_chunks(&stream, 1, false);
    let want = all_lines(&plain);
    assert_eq!(want[0], "HEADER");
    assert_eq!(want[2], "24", "{want:?}");
    assert_eq!(want.last().map(String::as_str), Some("40"));
    assert_eq!(want.len(), 19, "{want:?}");
    let sizes = (1..=stream.len() + 1).chain([1024, 4096, 8192]);
    for size in sizes {
        let t = fed_in_chunks(&stream, size, true);
        assert_eq!(all_lines(&t), want, "chunks of {size}");
        assert_eq!(
            t.visible_screen(),
            plain.visible_screen(),
            "chunks of {size}"
        );
        assert_eq!(t.cursor(), plain.cursor(), "chunks of {size}");
    }
    // The region set by an earlier write, the lines and the reset in one later read.
    let split = stream.iter().position(|b| *b == b'1').unwrap_or(0);
    let mut t = term();
    t.feed(&stream[..split]);
    t.feed(&stream[split..]);
    assert_eq!(all_lines(&t), want);
}

#[test]
fn a_region_set_mid_read_stops_the_fast_path_there() {
    // Lines fill the screen (the fast path runs), then a region is set and more lines scroll
    // in it: the header kept above the region must stay.
    let mut stream = Vec::new();
    for i in 1..=30 {
        stream.extend(format!("flood {i}\r\n").bytes());
    }
    stream.extend_from_slice(b"\x1b[2J\x1b[HTOP\x1b[2;24r\x1b[24;1H");
    for i in 1..=30 {
        stream.extend(format!("region {i}\r\n").bytes());
    }
    stream.extend_from_slice(b"\x1b[r\x1b[24;1Hend");
    let plain = fed_in_chunks(&stream, 1, false);
    assert_eq!(plain.visible_screen()[0], "TOP");
    for size in [1, 2, 3, 7, 64, 300, 8192] {
        let t = fed_in_chunks(&stream, size, true);
        assert_eq!(all_lines(&t), all_lines(&plain), "chunks of {size}");
        assert_eq!(
            t.visible_screen(),
            plain.visible_screen(),
            "chunks of {size}"
        );
    }
}

#[test]
fn dec_special_graphics_draw_boxes() {
    let g0 = screen_of(b"\x1b(0lqqqqk\r\nx    x\r\nmqqqqj\x1b(B ok\r\n");
    assert_eq!(g0, ["┌────┐", "│    │", "└────┘ ok"]);
    // G1 designated, shifted in and out.
    let g1 = screen_of(b"\x1b)0a\x0elqk\x0fa\r\n");
    assert_eq!(g1, ["a┌─┐a"]);
    // Every glyph of the set.
    let all = screen_of(b"\x1b(0`abcdefghijklmnopqrstuvwxyz{|}~\x1b(B");
    assert_eq!(all, ["◆▒␉␌␍␊°±␤␋┘┐┌└┼⎺⎻─⎼⎽├┤┴┬│≤≥π≠£·"]);
    // A reset returns to ASCII.
    assert_eq!(screen_of(b"\x1b(0q\x1bcq"), ["q"]);
    // Saved and restored with the cursor.
    assert_eq!(screen_of(b"\x1b(0\x1b7\x1b(Bq\x1b8q"), ["─"]);
}

#[test]
fn autowrap_off_overwrites_the_last_column() {
    let line: String = "0123456789".repeat(10);
    let mut input = b"\x1b[?7l".to_vec();
    input.extend(line.as_bytes());
    input.push(b'Z');
    input.extend_from_slice(b"\r\n\x1b[?7h");
    input.extend(line.as_bytes());
    let screen = screen_of(&input);
    assert_eq!(screen[0], format!("{}Z", &line[..79]));
    // Autowrap back on: the next 100 characters wrap.
    assert_eq!(screen[1], line[..80]);
    assert_eq!(screen[2], line[80..]);
    // Wide characters keep whole at the end of the row.
    let mut t = term();
    t.feed(b"\x1b[?7l");
    t.feed("日".repeat(45).as_bytes());
    assert_eq!(t.visible_screen(), ["日".repeat(40)]);
}

#[test]
fn tab_stops_can_be_set_cleared_and_used() {
    // Clear all, set stops at columns 5 and 12 (1-based).
    let setup = b"\x1b[3g\x1b[5G\x1bH\x1b[12G\x1bH\r";
    let mut input = setup.to_vec();
    input.extend_from_slice(b"A\tB\tC\tD\r\n");
    let last = format!("A   B      C{}D", " ".repeat(79 - 12));
    assert_eq!(screen_of(&input)[0], last);
    // Clear the stop under the cursor.
    let mut input = setup.to_vec();
    input.extend_from_slice(b"\x1b[5G\x1b[g\rA\tB");
    assert_eq!(screen_of(&input)[0], format!("A{}B", " ".repeat(10)));
    // Forward and back by count, with the default stops.
    assert_eq!(screen_of(b"A\x1b[2IB")[0], format!("A{}B", " ".repeat(15)));
    let back = format!("{}Y{}X", " ".repeat(16), " ".repeat(12));
    assert_eq!(screen_of(b"\x1b[30GX\x1b[2ZY")[0], back);
}

#[test]
fn insert_mode_shifts_the_rest_of_the_line() {
    assert_eq!(screen_of(b"abcdef\x1b[1;3H\x1b[4hXY\x1b[4l!"), ["abXY!def"]);
    assert_eq!(
        screen_of("abc\x1b[1;2H\x1b[4h日\x1b[4l".as_bytes()),
        ["a日bc"]
    );
}

#[test]
fn index_next_line_and_alignment() {
    assert_eq!(screen_of(b"ab\x1bDc\x1bEd"), ["ab", "  c", "d"]);
    // At the bottom row both scroll, and the line scrolled off enters history.
    let mut t = Terminal::new(10, 3, 100, 1 << 16);
    t.feed(b"one\r\ntwo\r\nthree\x1bDx\x1bEy");
    assert_eq!(t.visible_screen(), ["three", "     x", "y"]);
    assert_eq!(all_lines(&t), ["one", "two", "three", "     x", "y"]);
    let mut t = Terminal::new(5, 3, 100, 1 << 16);
    t.feed(b"\x1b[2;3r\x1b#8");
    assert_eq!(t.visible_screen(), ["EEEEE"; 3]);
    assert_eq!(t.cursor().col, 0);
    assert_eq!(t.total_lines(), 3);
}

#[test]
fn cursor_save_and_restore_spellings() {
    assert_eq!(screen_of(b"ab\x1b[scd\x1b[uX"), ["abXd"]);
    assert_eq!(screen_of(b"ab\x1b[?1048hcd\x1b[?1048lX"), ["abXd"]);
}

#[test]
fn a_new_scroll_region_homes_the_cursor() {
    assert_eq!(screen_of(b"abc\x1b[5;10rX"), ["Xbc"]);
    // In origin mode, to the region's top.
    assert_eq!(screen_of(b"abc\x1b[?6h\x1b[2;10rX"), ["abc", "X"]);
}

#[test]
fn alternate_screens_share_the_cursor() {
    // 1049 keeps the position; leaving restores the saved cursor.
    let mut t = term();
    t.feed(b"hello\x1b[?1049hX");
    assert_eq!(t.visible_screen(), ["     X"]);
    t.feed(b"\x1b[5;5H\x1b[?1049lY");
    assert_eq!(t.visible_screen(), ["helloY"]);
    // 1047: switch, clear on leaving, cursor shared.
    let mut t = term();
    t.feed(b"main\x1b[?1047hX\x1b[2;3H\x1b[?1047lY");
    assert!(!t.alternate_screen());
    assert_eq!(t.visible_screen(), ["main", "  Y"]);
    t.feed(b"\x1b[?1047h");
    assert!(t.alternate_screen());
    assert_eq!(t.visible_screen(), Vec::<String>::new());
    // Leaving 47 does not restore a saved cursor.
    let mut t = term();
    t.feed(b"ab\x1b7\x1b[?47h\x1b[3;4H\x1b[?47lZ");
    assert_eq!(t.visible_screen(), ["ab", "", "   Z"]);
}

#[test]
fn a_pending_wrap_acts_on_the_last_column() {
    let line = "0123456789".repeat(8);
    let with = |tail: &[u8]| {
        let mut input = line.as_bytes().to_vec();
        input.extend_from_slice(tail);
        screen_of(&input)
    };
    assert_eq!(with(b"\x08X")[0], format!("{}X9", &line[..78]));
    assert_eq!(with(b"\x1b[DY")[0], format!("{}Y9", &line[..78]));
    assert_eq!(with(b"\x1b[K")[0], line[..79]);
    // Motion clears the pending wrap: the next character lands in the last column below.
    assert_eq!(with(b"\x1b[BQ")[1], format!("{}Q", " ".repeat(79)));
    // The cursor position report says the last column.
    let mut t = term();
    t.feed(line.as_bytes());
    t.feed(b"\x1b[6n");
    assert_eq!(t.take_replies(), b"\x1b[1;80R");
}

#[test]
fn malformed_utf8_shows_replacement_characters() {
    assert_eq!(
        screen_of(b"a\xffb\xc3(c\xe2\x82d\xf0\x9f\x98"),
        ["a\u{fffd}b\u{fffd}(c\u{fffd}d"]
    );
    // A U+FFFD the program printed is kept too.
    assert_eq!(screen_of("x\u{fffd}y".as_bytes()), ["x\u{fffd}y"]);
    // Characters split over reads are whole.
    let mut t = term();
    let text = "é日👍".as_bytes();
    for b in text {
        t.feed(&[*b]);
    }
    t.feed(b"\r\n");
    assert_eq!(t.visible_screen(), ["é日👍"]);
    // In history too.
    let mut t = Terminal::new(10, 2, 100, 1 << 16);
    t.feed(b"\xff\xfe\r\nx\r\ny\r\n");
    assert_eq!(all_lines(&t)[0], "\u{fffd}\u{fffd}");
}

#[test]
fn a_character_cut_after_malformed_bytes_waits_for_the_rest() {
    // Fuzzing found "\t\xaf\xf1" fed whole showing two replacement characters while fed byte
    // by byte it showed one and waited: a cut character at the end of a read is held back even
    // when malformed bytes come before it in the same run.
    for (stream, rest) in [
        (&b"\t\xaf\xf1"[..], &b"\x9f\x98\x80"[..]),
        (b"a\xff\xe2\x82", b"\xac"),
        (b"\xc3(\xf0\x9f", b"\x98\x80"),
    ] {
        let mut whole = term();
        whole.feed(stream);
        let bytewise = fed_in_chunks(stream, 1, true);
        assert_eq!(whole.cursor(), bytewise.cursor(), "{stream:?}");
        assert_eq!(
            whole.visible_screen(),
            bytewise.visible_screen(),
            "{stream:?}"
        );
        // And the rest completes the character.
        whole.feed(rest);
        let mut joined = stream.to_vec();
        joined.extend_from_slice(rest);
        assert_eq!(whole.visible_screen(), screen_of(&joined), "{stream:?}");
    }
}

#[test]
fn mode_requests_are_answered() {
    let mut t = term();
    t.feed(b"\x1b[?2004h\x1b[?7l\x1b[?2004$p\x1b[?7$p\x1b[?25$p\x1b[?9999$p\x1b[4h\x1b[4$p");
    assert_eq!(
        String::from_utf8(t.take_replies()).unwrap(),
        "\x1b[?2004;1$y\x1b[?7;2$y\x1b[?25;1$y\x1b[?9999;0$y\x1b[4;1$y"
    );
}

#[test]
fn the_modes_split_across_reads_take_effect() {
    // Every mode sequence cut at every byte.
    let stream: &[u8] = b"\x1b[3;5r\x1b[r\x1b(0q\x1b(B \x1b[4hX\x1b[4l\x1b[?7l\x1b[?7hdone";
    let want = screen_of(stream);
    assert_eq!(want, ["─ Xdone"]);
    for cut in 1..stream.len() {
        let mut t = term();
        t.feed(&stream[..cut]);
        t.feed(&stream[cut..]);
        assert_eq!(t.visible_screen(), want, "cut at {cut}");
    }
}

/// `below` in `usize`.
fn pick(rng: &mut XorShift, n: usize) -> usize {
    rng.below(n as u64) as usize
}

#[test]
fn how_the_stream_is_cut_makes_no_difference() {
    // Pieces of every kind the layer handles, between floods of plain lines.
    let pieces: &[&[u8]] = &[
        b"\x1b(0lqqk\x1b(B",
        b"\x1b)0\x0emqj\x0f",
        b"\x1b[?7l",
        b"\x1b[?7h",
        b"\x1b[4h",
        b"\x1b[4l",
        b"\x1b[3;10r",
        b"\x1b[r",
        b"\x1bD",
        b"\x1bE",
        b"\x1bH",
        b"\x1b[3g",
        b"\t",
        b"\x1b[2I",
        b"\x1b[Z",
        b"\x1b[s",
        b"\x1b[u",
        b"\x1b[?1048h",
        b"\x1b[?1048l",
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\x1b[?47h",
        b"\x1b[?47l",
        b"\x08",
        b"\x1b[K",
        b"\x1b[D",
        b"\x1b[2J",
        b"\xff\xc3(",
        "é日👍".as_bytes(),
        b"\x1b]133;C\x07",
        b"\x1b]0;title\x1b\\",
        b"\x1b[31mred\x1b[m",
        b"\x1b#8",
        b"\x1b[?3l",
    ];
    let mut rng = XorShift(0x5DEE_CE66_D1CE_4E5B);
    for round in 0..40 {
        let mut stream = Vec::new();
        for _ in 0..300 {
            match pick(&mut rng, 4) {
                0 => stream.extend_from_slice(pieces[pick(&mut rng, pieces.len())]),
                1 => stream.extend("x".repeat(pick(&mut rng, 100)).bytes()),
                _ => stream.extend(format!("line {}\r\n", pick(&mut rng, 1000)).bytes()),
            }
        }
        let mut whole = Terminal::new(40, 8, 10_000, 1 << 20);
        whole.state.get_mut().fast_path = false;
        whole.feed(&stream);
        let mut cut = Terminal::new(40, 8, 10_000, 1 << 20);
        let mut pos = 0;
        while pos < stream.len() {
            let n = (1 + pick(&mut rng, [3, 40, 2000][round % 3])).min(stream.len() - pos);
            cut.feed(&stream[pos..pos + n]);
            pos += n;
            // What the session asks after every chunk.
            cut.total_lines();
        }
        assert_eq!(all_lines(&cut), all_lines(&whole), "round {round}");
        assert_eq!(
            cut.visible_screen(),
            whole.visible_screen(),
            "round {round}"
        );
        assert_eq!(cut.cursor(), whole.cursor(), "round {round}");
        assert_eq!(cut.take_marks(), whole.take_marks(), "round {round}");
    }
}

#[test]
fn column_mode_clears_and_homes_but_keeps_the_width() {
    let mut t = Terminal::new(20, 4, 100, 1 << 16);
    t.feed(b"kept\r\n\x1b[2;3r\x1b[3;5H\x1b[?3hX");
    assert_eq!(t.visible_screen(), ["X"]);
    assert_eq!(t.size(), (20, 4));
    // The cleared screen is in history, and the margins are gone: lines scroll the screen.
    t.feed(b"\r\n1\r\n2\r\n3\r\n4\r\n");
    assert_eq!(all_lines(&t), ["kept", "X", "1", "2", "3", "4"]);
}

#[test]
fn bel_ends_an_osc_string_but_not_a_dcs_or_apc_one() {
    // Under insert mode this layer writes the text itself: inside a string it must pass it on
    // untouched, for the terminal to swallow, until the string really ends.
    let cases: &[(&[u8], &str)] = &[
        (b"xyz\x1b[1;1H\x1b[4h\x1b]0;title\x07ab\x1b[4l", "abxyz"),
        (b"xyz\x1b[1;1H\x1b[4h\x1bPq\x07ab\x1b\\\x1b[4l", "xyz"),
        (b"xyz\x1b[1;1H\x1b[4h\x1b_apc\x07ab\x1b\\\x1b[4l", "xyz"),
        (b"xyz\x1b[1;1H\x1b[4h\x1bPq\x07ab\x18cd\x1b[4l", "cdxyz"),
    ];
    for (input, want) in cases {
        assert_eq!(
            screen_of(input),
            [*want],
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn a_control_string_is_kept_up_to_64_kib_and_the_rest_dropped() {
    use super::sequences::MAX_STRING;
    // (introducer, terminator): every kind of string, each end it can have.
    let cases: &[(&[u8], &[u8])] = &[
        (b"\x1b]2;", b"\x07"),
        (b"\x1b]2;", b"\x1b\\"),
        (b"\x1bPq", b"\x1b\\"),
        (b"\x1b_", b"\x1b\\"),
        (b"\x1b^", b"\x18"),
        (b"\x1bX", b"\x1a"),
    ];
    for (intro, end) in cases {
        let mut t = term();
        t.feed(b"before\r\n");
        t.feed(intro);
        // 4 MiB of body in reads of 100 000 bytes, as a flood arrives.
        let chunk = vec![b'a'; 100_000];
        for _ in 0..42 {
            t.feed(&chunk);
        }
        t.feed(end);
        t.feed(b"after");
        let emulated = t.state.get_mut().emulated;
        assert!(
            emulated < MAX_STRING + 64,
            "{intro:?}: {emulated} bytes reached the emulator"
        );
        assert_eq!(t.visible_screen(), ["before", "after"], "{intro:?}");
    }
}

#[test]
fn a_string_of_64_kib_is_kept_whole() {
    let mut t = term();
    // The body is what follows `ESC ]`: `2;` and the title.
    let mut body = vec![b'x'; super::sequences::MAX_STRING - 3];
    body.extend_from_slice(b"y");
    t.feed(b"\x1b]2;");
    t.feed(&body);
    t.feed(b"\x07");
    assert_eq!(t.state.get_mut().emulated, 4 + body.len() + 1);
    t.feed(b"after");
    assert_eq!(t.visible_screen(), ["after"]);
}

#[test]
fn a_repeat_paints_at_most_the_row_it_is_on() {
    // (input, screen): REP counts past the row are cut at its end; after a pending wrap the
    // next row is the one it is on.
    let cases: &[(&[u8], &[&str])] = &[
        (b"ab\x1b[3b", &["abbbb"]),
        (b"a\x1b[b", &["aa"]),
        (b"a\x1b[0b", &["aa"]),
        (
            b"\x1b[1;75Hx\x1b[99999999b",
            &["                                                                          xxxxxx"],
        ),
        (
            b"\x1b[1;75Hx\x1b[99999999bz",
            &[
                "                                                                          xxxxxx",
                "z",
            ],
        ),
    ];
    for (input, want) in cases {
        let got = screen_of(input);
        assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(input));
    }
    // 6 000 of them paint 6 000 rows (not 6 000 x 65 535 cells, 9 s of work that held up every
    // session): each fills the row its character starts.
    let mut t = term();
    t.feed(&b"x\x1b[99999999b".repeat(6_000));
    assert_eq!(t.visible_screen(), vec!["x".repeat(80); 24]);
}
