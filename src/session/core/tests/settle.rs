//! When a send settles: its end mark, idle, timeout, exit, a pure wait, a busy session.

use super::*;

#[test]
fn a_send_settles_on_its_command_end_mark_with_the_exit_code() {
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "a command ends at the prompt",
            vec![
                Send("echo hi"),
                Busy(true),
                WriteAll,
                Wrote(b"echo hi\r"),
                Pending,
                Runs("hi", 0),
                Answered(WaitReason::Prompt, Some(0), "hi"),
                Busy(false),
            ],
        ),
        (
            "its exit code",
            vec![
                Send("false"),
                WriteAll,
                Runs("", 1),
                Answered(WaitReason::Prompt, Some(1), ""),
            ],
        ),
        (
            "an end mark before the input is all written belongs to what ran before",
            vec![
                Out(b"late\r\n".to_vec()),
                Out(end(0)),
                Send("true"),
                Pending,
                // The end mark above was the idle prompt's: the input waits for its prompt.
                Out(PROMPT.to_vec()),
                WriteAll,
                Wrote(b"true\r"),
                Runs("", 0),
                Answered(WaitReason::Prompt, Some(0), ""),
            ],
        ),
        (
            "a command that runs past the idle time",
            vec![
                Send("sleep 100"),
                WriteAll,
                Starts,
                Elapse(4_999),
                Pending,
                Elapse(1),
                Answered(WaitReason::InferredIdle, None, ""),
                Busy(false),
            ],
        ),
        (
            "output keeps a send from going idle; the deadline does not wait",
            vec![
                Send("yes"),
                WriteAll,
                Starts,
                Elapse(4_000),
                Out(b"y\r\n".to_vec()),
                Elapse(4_000),
                Out(b"y\r\n".to_vec()),
                Elapse(4_000),
                Pending,
                Out(b"y\r\n".to_vec()),
                Elapse(4_000),
                Out(b"y\r\n".to_vec()),
                Elapse(4_000),
                Out(b"y\r\n".to_vec()),
                Elapse(4_000),
                Out(b"y\r\n".to_vec()),
                Elapse(4_000),
                Out(b"y\r\n".to_vec()),
                Elapse(2_000),
                Answered(WaitReason::Timeout, None, "y"),
            ],
        ),
        (
            "the program exits",
            vec![
                Send("exit 3"),
                WriteAll,
                Starts,
                Exit(3),
                Answered(WaitReason::SessionExit, Some(3), ""),
            ],
        ),
        (
            "what the program wrote before it exited is read first",
            vec![
                Send("exit 3"),
                WriteAll,
                Starts,
                Waiting(b"last words\r\n".to_vec()),
                Exit(3),
                Answered(WaitReason::SessionExit, Some(3), "last words"),
            ],
        ),
        (
            "a pure wait reports a command that ended while nobody waited",
            vec![
                Send("sleep 1"),
                WriteAll,
                Starts,
                Elapse(5_000),
                Answered(WaitReason::InferredIdle, None, ""),
                Out(b"done\r\n".to_vec()),
                Out(end(0)),
                Out(PROMPT.to_vec()),
                Wait,
                Answered(WaitReason::Prompt, Some(0), "done"),
            ],
        ),
        (
            "a pure wait at an idle prompt returns at once, with nothing new",
            vec![
                Send("echo hi"),
                WriteAll,
                Runs("hi", 0),
                Answered(WaitReason::Prompt, Some(0), "hi"),
                Wait,
                Answered(WaitReason::Prompt, None, ""),
            ],
        ),
        (
            "a caller that hangs up frees the session; what it wrote runs on",
            vec![
                Send("sleep 60"),
                WriteAll,
                Starts,
                HangUp,
                Busy(false),
                Wait,
                Elapse(5_000),
                Answered(WaitReason::InferredIdle, None, ""),
                Out([&b"^C\r\n"[..], &end(130), PROMPT].concat()),
                Wait,
                Answered(WaitReason::Prompt, Some(130), "^C"),
            ],
        ),
        (
            "a second send while one waits is refused",
            vec![Send("sleep 100"), Send("true"), Refused("busy"), Pending],
        ),
    ];
    for (name, steps) in cases {
        scenario(name, steps);
    }
}
