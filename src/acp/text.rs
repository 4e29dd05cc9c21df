//! Pure text helpers of the ACP shim: the prompt's input text, ANSI stripping and the fenced
//! `console` block of fallback mode, wait-reason names, and the one-line messages the shim
//! shows in the editor.

use crate::pb::WaitReason;
use agent_client_protocol::v1::schema::ContentBlock;

/// The input a prompt carries: its text blocks joined, without the trailing newlines an editor
/// may add (the send presses Enter itself). Other blocks (images, links) are ignored: the shim
/// announces text-only prompts.
pub(crate) fn prompt_input(blocks: &[ContentBlock]) -> String {
    let joined: String = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    joined.trim_end_matches(['\n', '\r']).to_owned()
}

/// `text` without escape sequences and control characters (newlines and tabs kept): what a
/// markdown view can show. The daemon's viewport is already clean text; this guards the
/// fallback block against anything that still carries an escape.
pub(crate) fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            '\u{9b}' => skip_csi(&mut chars),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Skips what follows an ESC: a CSI, a string command (OSC, DCS, ...) up to its terminator, or
/// intermediate bytes and one final character.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => skip_csi(chars),
        Some(']' | 'P' | 'X' | '^' | '_') => skip_string_command(chars),
        Some(c) if ('\u{20}'..='\u{2f}').contains(&c) => {
            // Intermediates (for example `ESC ( B`), then the final character.
            while chars
                .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
                .is_some()
            {}
            chars.next();
        }
        _ => {}
    }
}

/// Skips a CSI's parameters and intermediates up to and including its final byte.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            break;
        }
    }
}

/// Skips an OSC/DCS/... body up to BEL or ST (`ESC \`).
fn skip_string_command(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' => {
                chars.next_if_eq(&'\\');
                break;
            }
            _ => {}
        }
    }
}

/// `text` in a fenced `console` block whose fence is longer than any backtick run inside it.
pub(crate) fn console_block(text: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(text).max(2) + 1);
    format!("{fence}console\n{text}\n{fence}")
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// The largest index `<= max` that is a char boundary of `text`.
pub(crate) fn floor_char_boundary(text: &str, max: usize) -> usize {
    if max >= text.len() {
        return text.len();
    }
    (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// The contract's lower-case name of a wait reason (`prompt`, `stdin_read`, ...).
pub(crate) fn wait_reason_name(reason: WaitReason) -> &'static str {
    match reason {
        WaitReason::Prompt => "prompt",
        WaitReason::StdinRead => "stdin_read",
        WaitReason::InferredIdle => "inferred_idle",
        WaitReason::Timeout => "timeout",
        WaitReason::SessionExit => "session_exit",
        WaitReason::Unspecified => "unspecified",
    }
}

/// The one-line agent message after a send that did not see the command end, or `None` when it
/// did (`prompt`, `session_exit`).
pub(crate) fn wait_message(reason: WaitReason, idle_ms: u32, timeout_ms: u32) -> Option<String> {
    const NEXT: &str = "your next message is typed into it, and /signal INT interrupts it.";
    match reason {
        WaitReason::StdinRead => Some(format!("The program is waiting for input: {NEXT}")),
        WaitReason::InferredIdle => Some(format!(
            "No output for {} and no prompt: the command may still be running; {NEXT}",
            seconds(idle_ms)
        )),
        WaitReason::Timeout => Some(format!(
            "Stopped waiting after {}: the command is still running; {NEXT}",
            seconds(timeout_ms)
        )),
        _ => None,
    }
}

/// The one-line agent message after a send that ended at a password prompt (its input hidden):
/// a person types the secret, never the model; `attach` is the command that reaches the
/// session, `page` a one-time link to the web page on it when the daemon serves one (the
/// message goes to the editor's user, who may open it).
pub(crate) fn hidden_input_message(attach: &str, page: Option<&str>) -> String {
    let on_page = page.map_or_else(String::new, |url| {
        format!(", or on the web page {url} (the link works once, for 5 minutes)")
    });
    format!(
        "The program asks for a password (its input is hidden): a person can type it in the \
         terminal with `{attach}`{on_page}; do not send the secret yourself."
    )
}

/// The message after a command that ended the session's shell.
pub(crate) fn session_ended_message(exit: &str) -> String {
    format!("The terminal session ended ({exit}); your next message starts a new one.")
}

/// The note that ends a command's streamed output when the per-command cap cut it.
pub(crate) fn cap_note(cap_bytes: usize, omitted_bytes: u64) -> String {
    format!(
        "[ptyd: output past {} KiB not shown here: {omitted_bytes} bytes left out; \
         /read pages the full history]",
        cap_bytes / 1024
    )
}

/// The agent message for an unknown slash command.
pub(crate) fn unknown_command_message(name: &str) -> String {
    format!(
        "Unknown command /{name}. Commands: /read [offset] [count], /screen, /history [count], \
         /grep [-i] PATTERN, \
         /signal [INT|TERM|KILL|TSTP|HUP], /bg <command>, /job [id], /kill [id], /list, /close. \
         Anything else is typed into the terminal."
    )
}

fn seconds(ms: u32) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", f64::from(ms) / 1000.0)
    }
}

/// A daemon error as one line for the editor.
pub(crate) fn error_line(status: &tonic::Status) -> String {
    // What to do, in the slash commands a person can type here.
    let message = crate::error::advice::in_words(status.message(), &crate::error::advice::ACP);
    let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if message.is_empty() {
        format!("error: {}", status.code().description())
    } else {
        format!("error: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::TextContent;

    #[test]
    fn refusals_name_slash_commands() {
        let busy = tonic::Status::failed_precondition(format!(
            "terminal session t1 is busy with background job j1; {}",
            crate::error::advice::JOB
        ));
        assert_eq!(
            error_line(&busy),
            "error: terminal session t1 is busy with background job j1; see its output with /job \
             or stop it with /kill"
        );
    }

    #[test]
    fn prompt_input_joins_text_blocks_and_drops_trailing_newlines() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("echo ")),
            ContentBlock::Text(TextContent::new("hi\n")),
        ];
        assert_eq!(prompt_input(&blocks), "echo hi");
    }

    #[test]
    fn strip_ansi_removes_sgr_osc_and_charset_sequences() {
        assert_eq!(strip_ansi("\u{1b}[31mred\u{1b}[0m\n"), "red\n");
        assert_eq!(strip_ansi("\u{1b}]0;title\u{7}a\u{1b}(Bb\r"), "ab");
        assert_eq!(strip_ansi("\u{1b}]133;A\u{1b}\\x\ty"), "x\ty");
    }

    #[test]
    fn console_block_fence_outgrows_backtick_runs() {
        assert_eq!(console_block("red"), "```console\nred\n```");
        assert_eq!(console_block("a ```` b"), "`````console\na ```` b\n`````");
    }

    #[test]
    fn floor_char_boundary_never_splits_a_character() {
        assert_eq!(floor_char_boundary("aé", 2), 1);
        assert_eq!(floor_char_boundary("aé", 3), 3);
        assert_eq!(floor_char_boundary("aé", 10), 3);
    }

    #[test]
    fn wait_messages_only_for_unfinished_commands() {
        assert!(wait_message(WaitReason::Prompt, 1, 1).is_none());
        assert!(wait_message(WaitReason::SessionExit, 1, 1).is_none());
        let m = wait_message(WaitReason::StdinRead, 1, 1).unwrap();
        assert!(m.contains("waiting for input"), "{m}");
        let m = wait_message(WaitReason::Timeout, 1000, 600_000).unwrap();
        assert!(m.contains("600 s"), "{m}");
        let m = hidden_input_message("ptyd attach t1 --agent zed", None);
        assert!(
            m.contains("password") && m.contains("`ptyd attach t1 --agent zed`;"),
            "{m}"
        );
        let m = hidden_input_message("ptyd attach t1", Some("http://127.0.0.1:1/#code=x"));
        assert!(
            m.contains("`ptyd attach t1`, or on the web page http://127.0.0.1:1/#code=x (the"),
            "{m}"
        );
    }
}
