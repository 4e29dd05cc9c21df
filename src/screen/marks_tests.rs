//! The screen's tests of shell-integration marks: where each arrives, the command line it
//! carries, its place in the output stream, and which marks count.

use super::tests::term;
use super::*;

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
fn private_rejected_mark_is_reported() {
    let mut t = term();
    t.feed(b"x\r\n\x1b]133;ptyd-rejected\x07$ ");
    let marks: Vec<Mark> = t.take_marks().into_iter().map(|m| m.mark).collect();
    assert_eq!(marks, vec![Mark::LineRejected]);
}
