//! Lines the shell refuses (an unterminated quote, a syntax error): they settle without an exit code.

use super::*;

#[test]
fn rejected_lines_settle_without_an_exit_code() {
    // bash: a syntax error runs nothing (no C), and PROMPT_COMMAND prints D with status 2.
    // The output is the message alone: it starts on the line after the echoed input (the
    // input is written on line 5, the echo's line).
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Send("echo ("),
        WriteAll,
        end(2),
        Settled(Some(None)),
        StartLine(Some(6)),
        AtPrompt(true),
    ]);
    run("bash syntax error", Integration::Bash, &steps);
    // zsh: a failed history expansion (and a parse error) runs precmd without preexec.
    let mut steps = ZSH_START.to_vec();
    steps.extend([
        Send("echo !nonexistent"),
        WriteAll,
        end(1),
        Settled(Some(None)),
        StartLine(Some(6)),
    ]);
    run("zsh event not found", Integration::Zsh, &steps);
    // bash: a failed history expansion runs neither PS0 nor PROMPT_COMMAND; only the
    // prompt (A, B) is drawn again. The next line runs as usual.
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Send("echo !nonexistent"),
        WriteAll,
        Settled(None),
        A,
        Settled(Some(None)),
        StartLine(Some(6)),
        B,
        AtPrompt(true),
        Abandon,
        Send("echo ok"),
        Bytes(b"echo ok\r"),
        WriteAll,
        A,
        Settled(Some(None)),
        Abandon,
        Send("true"),
        WriteAll,
        C,
        A,
        Settled(None),
        end(0),
        Settled(Some(Some(0))),
    ]);
    run("bash event not found", Integration::Bash, &steps);
    // A multi-line paste echoes each of its lines before the message.
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Paste(true),
        Send("echo a\necho ("),
        WriteAll,
        end(2),
        Settled(Some(None)),
        StartLine(Some(8)),
    ]);
    run("bash pasted syntax error", Integration::Bash, &steps);
    // readline redraws its prompt on the echo's lines after a multi-line paste: the paste
    // (written on line 6, three lines) runs as usual.
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Paste(true),
        Send("for i in 1 2\ndo echo $i\ndone"),
        WriteAll,
        A,
        Settled(None),
        C,
        end(0),
        Settled(Some(Some(0))),
    ]);
    run("bash redraws a paste", Integration::Bash, &steps);
    // Prompt marks that are not a refusal: the B of the prompt the input went to (written
    // between A and B), a prompt drawn late (the input went in after the settle time,
    // before it), and a prompt drawn again for input that submitted nothing (Tab).
    run(
        "input between A and B",
        Integration::Bash,
        &[end(0), A, Send("sleep 1"), WriteAll, B, Settled(None)],
    );
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Send("true"),
        WriteAll,
        C,
        end(0),
        Abandon,
        Send("echo late"),
        Elapse(PROMPT_SETTLE.as_millis() as u64),
        WriteAll,
        A,
        B,
        Settled(None),
        C,
        end(0),
        Settled(Some(Some(0))),
    ]);
    run("late prompt", Integration::Bash, &steps);
    let mut steps = BASH_START.to_vec();
    steps.extend([Type("ls /u"), WriteAll, A, B, Settled(None)]);
    run("completion list", Integration::Bash, &steps);
    // fish keeps the refused line in its editor: the next input clears it first.
    run(
        "fish rejected",
        Integration::Fish,
        &[
            A,
            Paste(true),
            Send("echo ("),
            WriteAll,
            REJECTED,
            Settled(Some(None)),
            StartLine(Some(5)),
            AtPrompt(true),
            A,
            Abandon,
            Send("echo ok"),
            Bytes(b"\x15echo ok\r"),
        ],
    );
    // A rejected mark during a pure wait settles it too.
    run(
        "rejected while waiting",
        Integration::Fish,
        &[
            A,
            Send("echo ("),
            WriteAll,
            Abandon,
            Wait,
            REJECTED,
            Settled(Some(None)),
        ],
    );
}
