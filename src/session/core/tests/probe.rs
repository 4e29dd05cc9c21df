//! The stdin probe: a program blocked reading the terminal, once it took the input.

use super::*;

#[test]
fn the_stdin_probe_tells_a_program_that_waits_for_input() {
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "a program blocked reading the terminal after taking the input",
            vec![
                Send("python3"),
                WriteAll,
                Starts,
                Foreground(CHILD),
                Reader(CHILD, false, 5),
                Elapse(1),
                Answered(WaitReason::StdinRead, None, ""),
            ],
        ),
        (
            "a reader not scheduled since the input was written has not taken it",
            vec![
                Send("python3"),
                WriteAll,
                Starts,
                Foreground(CHILD),
                Reader(CHILD, false, 1),
                Elapse(1),
                Answered(WaitReason::StdinRead, None, ""),
                Send("print(1)"),
                WriteAll,
                Elapse(300),
                Pending,
                // Scheduled since: it read the line, answered, and blocks again.
                Out(b"1\r\n>>> ".to_vec()),
                Reader(CHILD, false, 2),
                Elapse(10),
                Answered(WaitReason::StdinRead, None, ">>>"),
            ],
        ),
        (
            "the shell at its own prompt is settled by its marks, not the probe",
            vec![
                Send("true"),
                WriteAll,
                Out(b"true\r\n".to_vec()),
                Out(START.to_vec()),
                Out(end(0)),
                Reader(SHELL, true, 9),
                Elapse(5),
                Answered(WaitReason::Prompt, Some(0), ""),
            ],
        ),
        (
            "output already waiting is taken in before the probe decides",
            vec![
                Send("true"),
                WriteAll,
                Starts,
                Foreground(CHILD),
                Reader(CHILD, false, 5),
                Waiting([&b"out\r\n"[..], &end(0), PROMPT].concat()),
                Elapse(1),
                Answered(WaitReason::Prompt, Some(0), "out"),
            ],
        ),
        (
            "a password prompt is a reader too",
            vec![
                Send("sudo -k true"),
                WriteAll,
                Starts,
                Out(b"[sudo] password for agent: ".to_vec()),
                Foreground(CHILD),
                Canonical(true),
                Reader(CHILD, false, 5),
                Elapse(1),
                Answered(WaitReason::StdinRead, None, "[sudo] password for agent:"),
            ],
        ),
    ];
    for (name, steps) in cases {
        scenario(name, steps);
    }
}
