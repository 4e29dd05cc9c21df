//! Answers to a program's terminal queries: before its input, only in raw mode, dropped with its command.

use super::*;

#[test]
fn answers_to_a_programs_queries_go_out_before_its_input_and_die_with_its_command() {
    let query = b"\x1b[6n".to_vec();
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "a program in raw mode asks where the cursor is",
            vec![
                Send("vim"),
                WriteAll,
                Starts,
                Canonical(false),
                Out(query.clone()),
                WriteAll,
                Wrote(b"vim\r\x1b[2;1R"),
            ],
        ),
        (
            "in line mode nobody reads the answer: none goes out",
            vec![
                Send("printf '\\e[6n'"),
                WriteAll,
                Starts,
                Canonical(true),
                Out(query.clone()),
                WriteAll,
                Wrote(b"printf '\\e[6n'\r"),
            ],
        ),
        (
            "the command that asked ended in output already there: its answers are dropped",
            vec![
                Send("vim"),
                WriteAll,
                Starts,
                Canonical(false),
                Waiting([&end(0)[..], PROMPT].concat()),
                Out(query),
                WriteAll,
                Wrote(b"vim\r"),
                Answered(WaitReason::Prompt, Some(0), ""),
            ],
        ),
    ];
    for (name, steps) in cases {
        scenario(name, steps);
    }
}
