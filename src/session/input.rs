//! What a send writes into the terminal: its text (one bracketed paste where the editor takes
//! it, newlines as Enter elsewhere), Enter, then its keys; and when text would only be typed
//! ahead for whichever program reads next. Pure.

use super::SendInput;

/// Starts a bracketed paste.
pub(super) const PASTE_START: &[u8] = b"\x1b[200~";
/// Ctrl-U: clears the line a shell kept in its editor.
pub(super) const CLEAR_LINE: u8 = 0x15;

/// Where a send's input goes, as it was when the send began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FirstWrite {
    /// To an integrated shell's line editor at its prompt.
    pub(crate) at_prompt: bool,
    /// The shell kept a line it refused: clear it first.
    pub(crate) clear_kept_line: bool,
}

/// Whether `text` holds something other than control characters: text made only of them
/// (`\u0003` is Ctrl-C, `\u0004` EOF) interrupts or ends a program, and is never typeahead.
pub(crate) fn printable(text: &str) -> bool {
    text.chars().any(|c| !c.is_control())
}

/// The refusal of text that would only be typed ahead: a command still runs in session
/// `session` (`command`, when a send typed it; `program`, the foreground program, when it is
/// not the shell) and nothing reads the terminal.
pub(crate) fn typeahead_refusal(
    session: &str,
    command: Option<&str>,
    program: Option<&str>,
) -> crate::error::Error {
    let running = match (command, program) {
        (Some(c), Some(p)) => format!("`{c}` (foreground program {p})"),
        (Some(c), None) => format!("`{c}`"),
        (None, Some(p)) => format!("a command (foreground program {p})"),
        (None, None) => "a command".to_owned(),
    };
    use crate::error::advice::{INTERRUPT, TYPEAHEAD, WAIT};
    crate::error::Error::FailedPrecondition(format!(
        "terminal session {session} is still running {running} and nothing reads the \
         terminal: this text would only be typed ahead, for whichever program reads next. \
         {WAIT}, {INTERRUPT}{TYPEAHEAD}"
    ))
}

/// The bytes a send writes into `out`: ^U first when the shell kept a refused line, the text
/// (one bracketed paste when it is multi-line input to an integrated shell's editor that enabled
/// it; otherwise newlines as Enter, CR), Enter when it submits, then the keys.
pub(crate) fn encode_input(
    input: &SendInput,
    to: FirstWrite,
    bracketed_paste: bool,
    out: &mut Vec<u8>,
) {
    out.reserve(input.text.len() + input.keys.len() + 16);
    if to.clear_kept_line && !input.text.is_empty() {
        // Clear the refused line the shell kept, so the text is not appended to it.
        out.push(CLEAR_LINE);
    }
    let multiline = input.text.contains('\n');
    if to.at_prompt && multiline && bracketed_paste {
        out.extend_from_slice(PASTE_START);
        out.extend_from_slice(input.text.as_bytes());
        out.extend_from_slice(b"\x1b[201~");
    } else if multiline {
        // A terminal sends Enter as CR; programs in line mode see each line end.
        out.extend(
            input
                .text
                .bytes()
                .map(|b| if b == b'\n' { b'\r' } else { b }),
        );
    } else {
        out.extend_from_slice(input.text.as_bytes());
    }
    if input.submit {
        out.push(b'\r');
    }
    out.extend_from_slice(&input.keys);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(text: &str) -> SendInput {
        SendInput::typed(text)
    }

    #[test]
    fn typeahead_is_text_with_something_besides_control_characters() {
        let cases = [
            ("echo typed", true),
            ("\u{3}", false),
            ("\u{4}", false),
            ("\u{1b}\r\n", false),
            ("", false),
            ("\u{3}q", true),
            ("é", true),
        ];
        for (text, want) in cases {
            assert_eq!(printable(text), want, "{text:?}");
        }
        let cases = [
            (
                Some("sleep 5"),
                Some("sleep"),
                "running `sleep 5` (foreground program sleep)",
            ),
            (Some("sleep 5"), None, "running `sleep 5` and"),
            (
                None,
                Some("make"),
                "running a command (foreground program make)",
            ),
            (None, None, "running a command and"),
        ];
        for (command, program, want) in cases {
            let message = typeahead_refusal("t1", command, program).to_string();
            assert!(message.contains(want), "{message}");
            assert!(message.contains("terminal session t1"), "{message}");
            assert!(message.contains("typeahead"), "{message}");
        }
    }

    #[test]
    fn the_typeahead_refusal_reads_in_each_front_ends_words() {
        use crate::error::advice::{ACP, CLI, MCP, in_words};
        let message = typeahead_refusal("t1", Some("sleep 100"), None).to_string();
        // (front-end, what it must say, what it must not)
        let cases = [
            (
                &MCP,
                [
                    "an empty terminal_send",
                    "terminal_signal",
                    "typeahead: true",
                ],
                "Signal",
            ),
            (&ACP, ["/read", "/signal INT", "sleep 100"], "typeahead"),
            (
                &CLI,
                ["--no-submit", "ptyd signal", "--typeahead"],
                "Signal",
            ),
        ];
        for (words, says, not) in cases {
            let text = in_words(&message, words);
            for said in says {
                assert!(text.contains(said), "{said:?} in {text:?}");
            }
            assert!(!text.contains(not), "{not:?} left in {text:?}");
            assert!(!text.contains("submit false"), "{text}");
        }
    }

    #[test]
    fn input_encoding() {
        let at_prompt = FirstWrite {
            at_prompt: true,
            clear_kept_line: false,
        };
        let elsewhere = FirstWrite {
            at_prompt: false,
            clear_kept_line: false,
        };
        let kept = FirstWrite {
            at_prompt: true,
            clear_kept_line: true,
        };
        let keys = |text: &str, submit: bool, keys: &[u8]| SendInput {
            submit,
            keys: keys.to_vec(),
            ..input(text)
        };
        let cases: [(SendInput, FirstWrite, bool, &[u8]); 7] = [
            (input("ls"), at_prompt, true, b"ls\r"),
            (input("a\nb"), at_prompt, true, b"\x1b[200~a\nb\x1b[201~\r"),
            (input("a\nb"), at_prompt, false, b"a\rb\r"),
            (input("a\nb"), elsewhere, true, b"a\rb\r"),
            (input("ls"), kept, false, b"\x15ls\r"),
            (keys("", false, b"\x1b"), kept, false, b"\x1b"),
            (keys("q", false, b"\r"), elsewhere, false, b"q\r"),
        ];
        for (input, to, paste, want) in cases {
            let mut out = Vec::new();
            encode_input(&input, to, paste, &mut out);
            assert_eq!(out, want, "{:?} {to:?} paste={paste}", input.text);
        }
    }
}
