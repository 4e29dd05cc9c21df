//! JobKill: the interrupt follows the command, escalates, and never kills the shell.

use super::*;

#[test]
fn a_job_kill_interrupts_the_command_where_it_runs_and_kills_it_if_it_holds_on() {
    use Signal::{SIGINT, SIGKILL};
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "the command ends on the interrupt",
            vec![
                Job("sleep 100"),
                WriteAll,
                Starts,
                Foreground(CHILD),
                KillJob,
                Signalled(&[(CHILD, SIGINT)]),
                Out([&b"^C\r\n"[..], &end(130), PROMPT].concat()),
                KillAnswer(Some(JobStatus::Killed)),
            ],
        ),
        (
            "a command that ignores it is killed after the settle time",
            vec![
                Job("sleep 100"),
                WriteAll,
                Starts,
                Foreground(CHILD),
                KillJob,
                Elapse(1_990),
                Signalled(&[(CHILD, SIGINT)]),
                Elapse(20),
                Signalled(&[(CHILD, SIGINT), (CHILD, SIGKILL)]),
                Out([&end(137)[..], PROMPT].concat()),
                KillAnswer(Some(JobStatus::Killed)),
            ],
        ),
        (
            "the interrupt follows the command into the group that takes the terminal",
            vec![
                Job("make"),
                WriteAll,
                Starts,
                KillJob,
                // The shell holds the terminal right after the start mark: not yet.
                Signalled(&[]),
                Foreground(CHILD),
                Elapse(10),
                Signalled(&[(CHILD, SIGINT)]),
            ],
        ),
        (
            "the shell itself is never killed",
            vec![
                Job("while :; do :; done"),
                WriteAll,
                Starts,
                KillJob,
                Elapse(100),
                Signalled(&[(SHELL, SIGINT)]),
                Elapse(3_000),
                Signalled(&[(SHELL, SIGINT)]),
                Elapse(1_000),
                KillAnswer(Some(JobStatus::Killed)),
            ],
        ),
    ];
    for (name, steps) in cases {
        scenario(name, steps);
    }
}
