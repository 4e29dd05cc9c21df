//! Text for after a running command (typeahead), multi-line input as one paste, and a command that ended while nobody watched.

use super::*;

#[test]
fn typeahead_waits_for_the_running_command_and_its_prompt() {
    // A command runs; typeahead is held through its output, goes in at the prompt after its
    // end, and settles at its own end; the send's output is the command's rest (up to its
    // end, line 14) and then its own (from its start, line 24).
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Send("sleep 5"),
        WriteAll,
        C,
        Running(Some("sleep 5")),
        Abandon,
        Send("echo typed"),
        Hold,
        MayWrite(Write::Nothing),
        Elapse(10_000),
        MayWrite(Write::Nothing),
        end(0),
        Settled(None),
        RanBefore(Some(14)),
        Running(None),
        MayWrite(Write::Nothing),
        A,
        B,
        MayWrite(Write::Input),
        WriteAll,
        AtPrompt(false),
        C,
        Running(Some("echo typed")),
        end(0),
        Settled(Some(Some(0))),
        StartLine(Some(24)),
    ]);
    run("held until the prompt", Integration::Bash, &steps);
    // A program of the command reads the terminal: the typeahead is its input.
    let mut steps = ZSH_START.to_vec();
    steps.extend([
        Send("sleep 1; read x"),
        WriteAll,
        C,
        Abandon,
        Send("value"),
        Hold,
        MayWrite(Write::Nothing),
        ReaderAfterOutput,
        MayWrite(Write::Input),
        WriteAll,
        end(0),
        Settled(Some(Some(0))),
        RanBefore(None),
    ]);
    run("held until a reader", Integration::Zsh, &steps);
    // Text that only answered a program names no command.
    run(
        "no typed command",
        Integration::Fish,
        &[A, Paste(true), Running(None), C, Running(None)],
    );
}

#[test]
fn multi_line_input_is_one_paste_when_the_editor_takes_it() {
    // Bracketed paste on at the prompt: one paste, one command.
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Paste(true),
        Send("echo a\necho b"),
        Bytes(b"\x1b[200~echo a\necho b\x1b[201~\r"),
        WriteAll,
        C,
        end(0),
        Settled(Some(Some(0))),
    ]);
    run("bash paste", Integration::Bash, &steps);
    // No bracketed paste: lines go as Enter, and each runs as its own command; the output
    // starts at the first command and the send settles at the first end after the input.
    let mut steps = ZSH_START.to_vec();
    steps.extend([
        Send("echo a\necho b"),
        Bytes(b"echo a\recho b\r"),
        WriteAll,
        C,
        end(0),
        A,
        B,
        C,
        end(0),
        StartLine(Some(ZSH_START.len() as u64 + 4)),
        Settled(Some(Some(0))),
    ]);
    run("zsh lines", Integration::Zsh, &steps);
    // The prompt came only after the send began: bracketed paste is judged at the first
    // write, not when the send began.
    run(
        "paste enabled late",
        Integration::Bash,
        &[
            end(0),
            A,
            Send("echo a\necho b"),
            Bytes(b"echo a\recho b\r"),
            Paste(true),
            BeforeFirstWrite,
            Bytes(b"\x1b[200~echo a\necho b\x1b[201~\r"),
        ],
    );
}

#[test]
fn a_command_that_ended_unwatched_is_reported_by_the_next_pure_wait() {
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Send("sleep 1; exit 3"),
        WriteAll,
        C,
        Abandon,
        Wait,
        Settled(None),
        Abandon,
        end(3),
        Wait,
        Settled(Some(Some(3))),
        Abandon,
        // Reported once: the next wait finds the idle prompt, without an exit code.
        Wait,
        Settled(Some(None)),
    ]);
    run("unreported end", Integration::Bash, &steps);
    // An end no send saw is stale once another command starts: a wait is for that one.
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Send("true"),
        WriteAll,
        C,
        Abandon,
        end(0),
        A,
        B,
        C,
        Wait,
        Settled(None),
    ]);
    run(
        "an unreported end, then a command",
        Integration::Bash,
        &steps,
    );
    // A plain program has no prompt to report.
    run("plain wait", Integration::None, &[Wait, Settled(None)]);
}
