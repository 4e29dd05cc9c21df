//! The terminal model against a reference terminal: tmux, fed the same bytes, read back with
//! `capture-pane`. Byte streams for each sequence the screen implements, and real full-screen
//! programs (dialog, whiptail, vttest) whose output tmux records with `pipe-pane`. Where tmux
//! deviates from xterm (it drops malformed UTF-8; it is wrong about CHT, IL outside a region,
//! DECSTBM in origin mode and wide-character halves) the case states xterm's screen instead.

mod support;

use ptyd::screen::Terminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use support::poll_until;

const COLS: u16 = 80;
const ROWS: u16 = 24;

/// DEC special graphics for `_` to `~`, as tmux's `capture-pane -e` marks them (SO ... SI).
const DEC_GRAPHICS: &str = " ◆▒␉␌␍␊°±␤␋┘┐┌└┼⎺⎻─⎼⎽├┤┴┬│≤≥π≠£·";

/// A private tmux server, killed on drop.
struct Tmux {
    socket: String,
    dir: tempfile::TempDir,
}

impl Tmux {
    fn new(name: &str) -> Tmux {
        let tmux = Tmux {
            socket: format!("ptyd-emulation-{name}-{}", std::process::id()),
            dir: tempfile::tempdir().expect("temp dir"),
        };
        // A session that stays, so the server lives while cases come and go.
        tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            "keep",
            "-x",
            "80",
            "-y",
            "24",
            "cat",
        ]);
        tmux
    }

    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Starts `command` in a new 80x24 session named `name`, its output recorded in a file
    /// from its first byte: the command waits until the recording runs.
    fn start(&self, name: &str, command: &str) -> PathBuf {
        let raw = self.path(&format!("{name}.raw"));
        let go = format!("{name}-go");
        let shell = format!(
            "tmux -L {} wait-for {go}; {command}; tmux -L {} wait-for -S {name}-done; cat",
            self.socket, self.socket
        );
        self.cmd(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "80",
            "-y",
            "24",
            &shell,
        ]);
        let size = self.cmd(&["display", "-p", "-t", name, "#{pane_width}x#{pane_height}"]);
        assert_eq!(size.trim(), "80x24");
        self.cmd(&[
            "pipe-pane",
            "-o",
            "-t",
            name,
            &format!("cat > {}", raw.display()),
        ]);
        self.cmd(&["wait-for", "-S", &go]);
        raw
    }

    /// The pane's visible screen: colours dropped, line drawing as its glyphs, trailing spaces
    /// and blank rows trimmed.
    fn screen(&self, name: &str) -> Vec<String> {
        let captured = self.cmd(&["capture-pane", "-p", "-e", "-t", name]);
        let mut graphics = false;
        let mut rows: Vec<String> = captured
            .lines()
            .map(|row| plain_row(row, &mut graphics))
            .collect();
        while rows.last().is_some_and(|r| r.is_empty()) {
            rows.pop();
        }
        rows
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// One row of `capture-pane -e`: SGR sequences dropped, SO ... SI runs drawn as DEC graphics
/// (`graphics` carries the shift from row to row, as tmux marks it only where it changes).
fn plain_row(row: &str, graphics: &mut bool) -> String {
    let mut out = String::new();
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI ... final
                if chars.next_if_eq(&'[').is_some() {
                    while chars
                        .next()
                        .is_some_and(|c| !('\x40'..='\x7e').contains(&c))
                    {}
                }
            }
            '\x0e' => *graphics = true,
            '\x0f' => *graphics = false,
            '_'..='~' if *graphics => {
                out.push(
                    DEC_GRAPHICS
                        .chars()
                        .nth(c as usize - '_' as usize)
                        .unwrap_or(c),
                );
            }
            c => out.push(c),
        }
    }
    out.trim_end_matches(' ').to_owned()
}

fn ptyd_screen(bytes: &[u8]) -> Vec<String> {
    let mut t = Terminal::new(COLS, ROWS, 10_000, 1 << 20);
    t.feed(bytes);
    t.visible_screen()
}

/// Waits until `ready` holds for tmux's screen (with a deadline), then returns it.
fn wait_for_screen(tmux: &Tmux, name: &str, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
    let mut last = Vec::new();
    let shown = poll_until(Duration::from_secs(20), || {
        last = tmux.screen(name);
        ready(&last).then(|| last.clone())
    });
    shown.unwrap_or_else(|| panic!("{name}: tmux never showed it: {last:#?}"))
}

/// ptyd's screen from the recorded output once it matches `want` (the recording is written by
/// a separate process, so it may trail the pane a little), or the last one at the deadline
/// (short: callers wait for the output they compare to be recorded first).
fn recorded_screen(raw: &Path, want: &[String]) -> Vec<String> {
    let mut last = Vec::new();
    let matched = poll_until(Duration::from_secs(2), || {
        last = ptyd_screen(&std::fs::read(raw).unwrap_or_default());
        (last == want).then(|| last.clone())
    });
    matched.unwrap_or(last)
}

/// A byte stream, with xterm's screen where tmux's is wrong.
type Case = (&'static str, Vec<u8>, Option<Vec<String>>);

fn rows(rows: &[&str]) -> Option<Vec<String>> {
    Some(rows.iter().map(|r| r.to_string()).collect())
}

fn cases() -> Vec<Case> {
    let digits = "0123456789".repeat(8);
    let mut region = b"HEADER\r\n\x1b[3;20r\x1b[20;1H".to_vec();
    for i in 1..=40 {
        region.extend(format!("{i}\r\n").bytes());
    }
    region.extend_from_slice(b"\x1b[r");
    let mut nowrap = b"\x1b[?7l".to_vec();
    nowrap.extend("0123456789".repeat(10).bytes());
    nowrap.extend_from_slice(b"Z\x1b[?7h");
    let pending = |tail: &[u8]| {
        let mut s = digits.clone().into_bytes();
        s.extend_from_slice(tail);
        s
    };
    vec![
        (
            "progress",
            b"Downloading 10%\rDownloading 100%\r\nnext\r\n".to_vec(),
            None,
        ),
        (
            "rewrite",
            b"a ....\r\nb ....\r\n\x1b[2A\ra DONE\r\n\r\n".to_vec(),
            None,
        ),
        (
            "colours",
            b"\x1b[31mred\x1b[0m \x1b[1;32mgreen\x1b[m\r\n".to_vec(),
            None,
        ),
        (
            "wide",
            "日本語abc\r\n👍ok e\u{301}\r\n".as_bytes().to_vec(),
            None,
        ),
        ("region_reset", region, None),
        (
            "dec_graphics_g0",
            b"\x1b(0lqqqqk\r\nx    x\r\nmqqqqj\x1b(B ok".to_vec(),
            None,
        ),
        ("dec_graphics_g1", b"\x1b)0a\x0elqk\x0fa\r\n".to_vec(), None),
        ("autowrap_off", nowrap, None),
        (
            "tab_stops",
            b"\x1b[3g\x1b[5G\x1bH\x1b[12G\x1bH\rA\tB\tC\r\n\x1b[30GX\x1b[2ZY".to_vec(),
            None,
        ),
        (
            "insert_mode",
            b"abcdef\x1b[1;3H\x1b[4hXY\x1b[4l!".to_vec(),
            None,
        ),
        ("index_next_line", b"ab\x1bDc\x1bEd".to_vec(), None),
        (
            "index_scrolls",
            b"\x1b[24;1Hbottom\x1bDx\x1bEy".to_vec(),
            None,
        ),
        ("decaln", b"\x1b#8\x1b[12;30H hi ".to_vec(), None),
        ("save_restore", b"ab\x1b[scd\x1b[uX".to_vec(), None),
        (
            "save_restore_1048",
            b"12\x1b[?1048h34\x1b[?1048lY".to_vec(),
            // tmux ignores 1048.
            rows(&["12Y4"]),
        ),
        ("region_homes", b"abc\x1b[5;10rX".to_vec(), None),
        ("alt_1049_cursor", b"hello\x1b[?1049hX".to_vec(), None),
        (
            "alt_1049_back",
            b"hello\x1b[?1049hX\x1b[5;5H\x1b[?1049lY".to_vec(),
            None,
        ),
        (
            "alt_1047",
            b"main\x1b[?1047hX\x1b[2;3H\x1b[?1047lY".to_vec(),
            None,
        ),
        (
            "alt_47_shared",
            b"ab\x1b7\x1b[?47h\x1b[3;4H\x1b[?47lZ".to_vec(),
            None,
        ),
        // tmux keeps the cursor past the last column: BS, CUB and EL act one column right of
        // where xterm acts (the cursor is on the last column, with the wrap pending).
        (
            "pending_bs",
            pending(b"\x08X"),
            Some(vec![format!("{}X9", &digits[..78])]),
        ),
        (
            "pending_cub",
            pending(b"\x1b[DY"),
            Some(vec![format!("{}Y9", &digits[..78])]),
        ),
        (
            "pending_el",
            pending(b"\x1b[K"),
            Some(vec![digits[..79].to_owned()]),
        ),
        ("pending_cud", pending(b"\x1b[BQ"), None),
        (
            "malformed_utf8",
            b"a\xffb\xc3(c\xe2\x82d".to_vec(),
            // tmux drops them; xterm shows one U+FFFD for each.
            rows(&["a\u{fffd}b\u{fffd}(c\u{fffd}d"]),
        ),
        (
            "erase_and_move",
            b"abcdef\x1b[3D\x1b[K\x1b[2;5Hx\x1b[1;1H\x1b[2@>".to_vec(),
            None,
        ),
        (
            "delete_chars",
            b"abcdefgh\x1b[1;3H\x1b[2P\x1b[1X".to_vec(),
            None,
        ),
    ]
}

#[test]
fn byte_streams_read_back_as_the_reference_shows_them() {
    let tmux = Tmux::new("streams");
    let mut failures = Vec::new();
    for (i, (name, bytes, xterm)) in cases().into_iter().enumerate() {
        let file = tmux.path(&format!("case{i}"));
        std::fs::write(&file, &bytes).expect("write case");
        let session = format!("case{i}");
        tmux.start(&session, &format!("cat {}", file.display()));
        tmux.cmd(&["wait-for", &format!("{session}-done")]);
        let reference = tmux.screen(&session);
        tmux.cmd(&["kill-session", "-t", &session]);
        let want = match xterm {
            Some(rows) => rows,
            None => reference,
        };
        let got = ptyd_screen(&bytes);
        if got != want {
            failures.push(format!("{name}:\n  ptyd {got:?}\n  want {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs `command` under `TERM=xterm-256color` in tmux until `ready` holds for tmux's screen;
/// returns ptyd's screen of the same output and tmux's.
fn program_screens(
    tmux: &Tmux,
    name: &str,
    command: &str,
    ready: impl Fn(&[String]) -> bool,
) -> (Vec<String>, Vec<String>) {
    let raw = tmux.start(name, &format!("TERM=xterm-256color {command}"));
    let reference = wait_for_screen(tmux, name, ready);
    (recorded_screen(&raw, &reference), reference)
}

#[test]
fn dialog_boxes_read_back_with_line_drawing() {
    let tmux = Tmux::new("dialog");
    let (ptyd, reference) = program_screens(&tmux, "dialog", "dialog --msgbox hello 7 30", |s| {
        s.iter().any(|r| r.contains("hello")) && s.iter().any(|r| r.contains('┘'))
    });
    assert_eq!(ptyd, reference);
    let text = ptyd.concat();
    for glyph in ['┌', '─', '┐', '│', '└', '┘'] {
        assert!(text.contains(glyph), "{glyph} missing from {ptyd:#?}");
    }
    let (ptyd, reference) = program_screens(
        &tmux,
        "whiptail",
        "whiptail --menu pick 12 40 3 a first b second c third",
        |s| s.iter().any(|r| r.contains("third")) && s.iter().any(|r| r.contains('┘')),
    );
    assert_eq!(ptyd, reference);
    assert!(ptyd.concat().contains('┌'), "{ptyd:#?}");
}

/// Whether vttest is waiting at a prompt: the cursor right after `text` on its row.
fn waiting_after(tmux: &Tmux, session: &str, screen: &[String], text: &str) -> bool {
    let cursor = tmux.cmd(&["display", "-p", "-t", session, "#{cursor_x} #{cursor_y}"]);
    let mut xy = cursor
        .split_whitespace()
        .map(|n| n.parse::<usize>().unwrap_or(0));
    let (x, y) = (xy.next().unwrap_or(0), xy.next().unwrap_or(0));
    screen.get(y).is_some_and(|row| {
        row.find(text)
            .is_some_and(|at| row[..at].chars().count() + text.chars().count() <= x)
    })
}

/// Screens where tmux is wrong, checked against vttest's own description instead.
fn described_by_vttest(screen: &[String], tmux: &[String]) -> Option<bool> {
    if screen.get(1).map(String::as_str)
        == Some("The left/right margins should have letters in order:")
    {
        // tmux's pending wrap scrambles this one. The region (rows 3 to 23) holds the last 18
        // letters: each row a capital in the first column and its small letter in the last.
        let letters: Vec<&String> = screen[2..].iter().take_while(|r| !r.is_empty()).collect();
        return Some(
            letters.len() == 18
                && letters.iter().zip('I'..='Z').all(|(row, c)| {
                    *row == &format!("{c}{}{}", " ".repeat(78), c.to_ascii_lowercase())
                }),
        );
    }
    if screen.len() == tmux.len()
        && screen.iter().zip(tmux).any(|(a, b)| a != b)
        && screen
            .iter()
            .zip(tmux)
            .all(|(a, b)| a == b || a == &wrap_fixed(b))
    {
        // The 132-column border drawn on 80 columns: each `+` of the right edge is drawn after
        // a CUB from the last column, which xterm starts from that column (tmux from past it).
        return Some(true);
    }
    let bottom = "Origin mode test. This line should be at the bottom of the screen.";
    if screen.iter().any(|r| r.contains(bottom))
        && screen
            .iter()
            .any(|r| r.contains("the one above the bottom"))
    {
        // tmux ignores origin mode for this DECSTBM (it puts the line at the top).
        let n = screen.len();
        return Some(
            n == usize::from(ROWS)
                && screen[n - 1] == bottom
                && screen[n - 2].starts_with("This line should be the one above the bottom"),
        );
    }
    None
}

/// How often `needle` occurs in the recorded output.
fn occurrences(raw: &Path, needle: &[u8]) -> usize {
    let bytes = std::fs::read(raw).unwrap_or_default();
    bytes.windows(needle.len()).filter(|w| *w == needle).count()
}

/// A tmux row ending in `*` in the last column with the `+` xterm draws beside it.
fn wrap_fixed(row: &str) -> String {
    let chars: Vec<char> = row.chars().collect();
    if chars.len() == usize::from(COLS) && chars.ends_with(&['*']) {
        return chars[..chars.len() - 2].iter().chain(&['+', '*']).collect();
    }
    row.to_owned()
}

/// vttest's screens for a menu, each compared and answered with Return until the menu shows
/// again; returns how many there were. A screen is complete when its prompt is in the
/// recorded output and tmux's cursor waits after it.
fn vttest_screens(tmux: &Tmux, session: &str, choice: &str) -> usize {
    const PROMPT: &str = "Push <RETURN>";
    const MENU: &str = "Enter choice number";
    let raw = tmux.start(session, "TERM=xterm-256color vttest");
    let at = |text: &'static str| move |s: &[String]| waiting_after(tmux, session, s, text);
    wait_for_screen(tmux, session, at(MENU));
    tmux.cmd(&["send-keys", "-t", session, choice, "Enter"]);
    let mut screens = 0;
    let mut mismatches = Vec::new();
    loop {
        let came = poll_until(Duration::from_secs(20), || {
            let next = occurrences(&raw, PROMPT.as_bytes()) > screens
                || occurrences(&raw, MENU.as_bytes()) >= 2;
            next.then_some(())
        });
        assert!(came.is_some(), "{session}: screen {screens} never came");
        if occurrences(&raw, PROMPT.as_bytes()) <= screens {
            wait_for_screen(tmux, session, at(MENU));
            assert!(mismatches.is_empty(), "screens {mismatches:?} differ");
            return screens;
        }
        let shown = wait_for_screen(tmux, session, at(PROMPT));
        let ptyd = recorded_screen(&raw, &shown);
        let right = described_by_vttest(&ptyd, &shown).unwrap_or(ptyd == shown);
        if !right {
            eprintln!(
                "vttest menu {choice}, screen {screens}:\n  ptyd {ptyd:#?}\n  tmux {shown:#?}"
            );
            mismatches.push(screens);
        }
        screens += 1;
        tmux.cmd(&["send-keys", "-t", session, "Enter"]);
    }
}

#[test]
fn vttest_cursor_movement_screens() {
    let tmux = Tmux::new("vttest1");
    assert!(vttest_screens(&tmux, "vt1", "1") >= 4);
}

#[test]
fn vttest_screen_feature_screens() {
    let tmux = Tmux::new("vttest2");
    assert!(vttest_screens(&tmux, "vt2", "2") >= 8);
}
