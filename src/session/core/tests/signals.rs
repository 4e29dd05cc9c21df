//! A signal aimed at the command it is meant for, and the send that follows it.

use super::*;

#[test]
fn a_signal_waits_for_the_command_it_is_aimed_at() {
    use Signal::{SIGINT, SIGKILL};
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "the command holds the terminal: at once, to its group",
            vec![
                Send("sleep 100"),
                WriteAll,
                Starts,
                Foreground(CHILD),
                Signal(SIGINT),
                Signalled(&[(CHILD, SIGINT)]),
                SignalAnswer(Ok(CHILD)),
            ],
        ),
        (
            "a submitted line the shell has not answered yet: it waits for the start mark",
            vec![
                Send("sleep 100"),
                WriteAll,
                Signal(SIGINT),
                Signalled(&[]),
                Elapse(20),
                Signalled(&[]),
                Starts,
                Foreground(CHILD),
                Elapse(10),
                Signalled(&[(CHILD, SIGINT)]),
                SignalAnswer(Ok(CHILD)),
            ],
        ),
        (
            "the shell still holds the terminal after the start mark: it waits for the child",
            vec![
                Send("sleep 100"),
                WriteAll,
                Starts,
                Signal(SIGINT),
                Elapse(30),
                Signalled(&[]),
                Foreground(CHILD),
                Elapse(10),
                Signalled(&[(CHILD, SIGINT)]),
            ],
        ),
        (
            "never longer than the aim's limit",
            vec![
                Send("sleep 100"),
                WriteAll,
                Signal(SIGINT),
                Elapse(499),
                Signalled(&[]),
                Elapse(20),
                Signalled(&[(SHELL, SIGINT)]),
                SignalAnswer(Ok(SHELL)),
            ],
        ),
        (
            "at an idle prompt: at once, to the shell",
            vec![Signal(SIGINT), Signalled(&[(SHELL, SIGINT)])],
        ),
        (
            "SIGKILL for the shell itself is refused",
            vec![
                Signal(SIGKILL),
                Signalled(&[]),
                SignalAnswer(Err("would kill the shell")),
            ],
        ),
        (
            "after the program exited",
            vec![Exit(0), Signal(SIGINT), SignalAnswer(Err("has exited"))],
        ),
        (
            "a send right after a signal waits for the shell's answer to it",
            vec![
                Signal(SIGINT),
                Send("echo next"),
                WriteAll,
                Wrote(b""),
                Out([&b"^C\r\n"[..], &end(130), PROMPT].concat()),
                WriteAll,
                Wrote(b"echo next\r"),
            ],
        ),
    ];
    for (name, steps) in cases {
        scenario(name, steps);
    }
}
