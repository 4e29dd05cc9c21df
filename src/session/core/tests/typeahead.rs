//! Text for a running command that nothing reads: refused, held, or not typeahead at all.

use super::*;

#[test]
fn text_for_a_running_command_nobody_reads_is_refused_or_held() {
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "refused, naming the command",
            vec![
                Send("sleep 100"),
                WriteAll,
                Starts,
                Foreground(CHILD),
                Canonical(true),
                Elapse(5_000),
                Answered(WaitReason::InferredIdle, None, ""),
                Send("echo next"),
                Refused("sleep 100"),
                Wrote(b"sleep 100\r"),
            ],
        ),
        (
            "Enter alone is a key, never typeahead",
            went_quiet(
                "sleep 100",
                vec![
                    Send(""),
                    WriteAll,
                    Wrote(b"sleep 100\r\r"),
                    Elapse(5_000),
                    Answered(WaitReason::InferredIdle, None, ""),
                ],
            ),
        ),
        (
            "a program in raw mode reads keys: not typeahead",
            vec![
                Send("vim"),
                WriteAll,
                Starts,
                Foreground(CHILD),
                Canonical(false),
                Elapse(5_000),
                Answered(WaitReason::InferredIdle, None, ""),
                Send(":q"),
                WriteAll,
                Wrote(b"vim\r:q\r"),
            ],
        ),
        (
            "held with typeahead, written at the next prompt",
            went_quiet(
                "sleep 1",
                vec![
                    SendAhead("echo after"),
                    WriteAll,
                    Wrote(b"sleep 1\r"),
                    Out(end(0)),
                    Out(PROMPT.to_vec()),
                    WriteAll,
                    Wrote(b"echo after\r"),
                    Runs("after", 0),
                    Answered(WaitReason::Prompt, Some(0), "after"),
                ],
            ),
        ),
        (
            "held typeahead goes to a program that reads the terminal later",
            went_quiet(
                "sleep 1; read x; echo got $x",
                vec![
                    SendAhead("value"),
                    WriteAll,
                    Wrote(b"sleep 1; read x; echo got $x\r"),
                    // bash's `read` takes the terminal: the shell itself reads, past its prompt.
                    Reader(SHELL, true, 7),
                    Elapse(2),
                    WriteAll,
                    Wrote(b"value\r"),
                    Out(b"value\r\ngot value\r\n".to_vec()),
                    Out([&end(0)[..], PROMPT].concat()),
                    Answered(WaitReason::Prompt, Some(0), "got value"),
                ],
            ),
        ),
        (
            "the command ended in output not read yet: not typeahead",
            went_quiet(
                "sleep 1",
                vec![
                    Waiting([&end(0)[..], PROMPT].concat()),
                    Send("echo next"),
                    WriteAll,
                    Wrote(b"sleep 1\recho next\r"),
                ],
            ),
        ),
    ];
    for (name, steps) in cases {
        scenario(name, steps);
    }
}

/// A command started at a cooked terminal and the send left it quiet (answered
/// `inferred_idle`), then `after`.
fn went_quiet(command: &'static str, after: Vec<Step>) -> Vec<Step> {
    let mut steps = vec![
        Send(command),
        WriteAll,
        Starts,
        Canonical(true),
        Elapse(5_000),
        Answered(WaitReason::InferredIdle, None, ""),
    ];
    steps.extend(after);
    steps
}
