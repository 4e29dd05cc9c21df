//! A session's start and end: ready at its first prompt, at its exit, at its startup deadline;
//! input waits for the first prompt.

use super::*;

#[test]
fn a_starting_session_is_ready_at_its_first_prompt_its_exit_or_its_deadline() {
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "its first prompt mark",
            vec![
                AwaitReady,
                Out(b"motd\r\n".to_vec()),
                ReadyNow(false),
                Out(PROMPT.to_vec()),
                ReadyNow(true),
            ],
        ),
        (
            "its exit",
            vec![AwaitReady, Exit(1), ReadyNow(true), ExitedNow(true)],
        ),
        (
            "its startup deadline, however busy its rc files",
            vec![
                AwaitReady,
                Elapse(9_000),
                Out(b"still loading\r\n".to_vec()),
                Elapse(999),
                ReadyNow(false),
                Elapse(1),
                ReadyNow(true),
                ExitedNow(false),
            ],
        ),
        (
            "a program reading the terminal before any prompt",
            vec![
                AwaitReady,
                Out(b"Continue? [y/N] ".to_vec()),
                Reader(SHELL, true, 3),
                // The first probe opens the gate for input, the next finds the reader.
                Elapse(1),
                ReadyNow(false),
                Elapse(2),
                ReadyNow(true),
            ],
        ),
        (
            "input waits for the first prompt",
            vec![
                Send("echo hi"),
                WriteAll,
                Wrote(b""),
                Out(PROMPT.to_vec()),
                WriteAll,
                Wrote(b"echo hi\r"),
            ],
        ),
    ];
    for (name, steps) in cases {
        from_start(name, steps);
    }
}
