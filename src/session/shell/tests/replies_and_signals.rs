//! Answers to terminal queries, input written in parts, and signals that wait for the marks that answer them.

use super::*;

#[test]
fn answers_to_queries_go_before_input_and_never_wait() {
    let mut shell = Shell::new(Integration::Bash);
    let now = Instant::now();
    shell.begin_input(&input("echo hi"), false);
    shell.queue_replies(b"\x1b[1;1R");
    assert_eq!(
        shell.next_write(now),
        Write::Replies,
        "even before a prompt"
    );
    assert_eq!(shell.pending(Write::Replies), b"\x1b[1;1R");
    shell.replies_written(Some(3));
    assert_eq!(shell.pending(Write::Replies), b";1R");
    shell.replies_written(None);
    assert!(!shell.replies_pending());
    assert_eq!(
        shell.next_write(now),
        Write::Nothing,
        "the input still waits"
    );
}

#[test]
fn answers_a_command_left_unread_are_dropped_when_it_ends() {
    let now = Instant::now();
    let at = Position::default();
    let mut shell = Shell::new(Integration::Bash);
    shell.on_mark(&Mark::CommandStart, at, now, None);
    shell.queue_replies(b"\x1b[1;1R");
    shell.on_mark(&Mark::CommandEnd(Some(0)), at, now, None);
    assert!(!shell.replies_pending(), "the command that asked ended");
    // Answers queued after the end (the shell's own query at its prompt) stay.
    shell.queue_replies(b"\x1b[0n");
    shell.on_mark(&Mark::PromptStart, at, now, None);
    assert_eq!(shell.pending(Write::Replies), b"\x1b[0n");
}

#[test]
fn input_written_in_parts_settles_only_once_all_of_it_is_written() {
    let mut shell = Shell::new(Integration::Bash);
    let now = Instant::now();
    let at = Position::default();
    shell.on_mark(&Mark::PromptStart, at, now, None);
    assert_eq!(shell.begin_input(&input("echo hi"), false), 8);
    let mut span = CommandSpan {
        writes_input: true,
        ..CommandSpan::default()
    };
    assert!(!shell.input_written(3));
    assert_eq!(shell.pending(Write::Input), b"o hi\r");
    shell.on_mark(&Mark::CommandEnd(Some(0)), at, now, Some(&mut span));
    assert_eq!(span.end, None, "an end mark while input is still unwritten");
    assert!(shell.input_written(5));
    assert!(!shell.input_pending());
    assert_eq!(shell.drop_input(), 0);
}

#[test]
fn a_send_after_a_signal_waits_for_the_marks_that_answer_it() {
    let now = Instant::now();
    let at = Position::default();
    let later = now + SIGNAL_SETTLE;
    let mut shell = Shell::new(Integration::Bash);
    shell.on_mark(&Mark::PromptStart, at, now, None);
    // An interrupt at bash's prompt: its end mark (then the prompt, `PROMPT_SETTLE`).
    shell.signal_delivered(Signal::SIGINT, true, now);
    assert_eq!(shell.signal_gate(now), Some(later));
    assert_eq!(shell.signal_gate(later), None, "never past the grace");
    shell.on_mark(&Mark::Cwd("file:///".into()), at, now, None);
    assert_eq!(
        shell.signal_gate(now),
        Some(later),
        "a cwd mark is no answer"
    );
    shell.on_mark(&Mark::CommandEnd(Some(130)), at, now, None);
    assert_eq!(shell.signal_gate(now), None, "the end mark answered it");
    shell.on_mark(&Mark::PromptStart, at, now, None);
    // Signals nothing answers at the prompt.
    for (signal, shell_has_terminal) in [
        (Signal::SIGTERM, true),
        (Signal::SIGWINCH, true),
        (Signal::SIGINT, false),
    ] {
        shell.signal_delivered(signal, shell_has_terminal, now);
        assert_eq!(shell.signal_gate(now), None, "{signal:?}");
    }
    // A running command: the end mark of what the signal ends.
    shell.on_mark(&Mark::CommandStart, at, now, None);
    shell.signal_delivered(Signal::SIGWINCH, false, now);
    assert_eq!(shell.signal_gate(now), None, "a resize ends nothing");
    shell.signal_delivered(Signal::SIGTERM, false, now);
    assert_eq!(shell.signal_gate(now), Some(later));
    shell.on_mark(&Mark::CommandEnd(Some(143)), at, now, None);
    assert_eq!(shell.signal_gate(now), None);
    // fish draws nothing after an interrupt at its prompt.
    let mut fish = Shell::new(Integration::Fish);
    fish.on_mark(&Mark::PromptStart, at, now, None);
    fish.signal_delivered(Signal::SIGINT, true, now);
    assert_eq!(fish.signal_gate(now), None);
}

#[test]
fn a_signal_waits_while_a_submitted_line_has_not_become_a_command() {
    const SHELL: bool = true;
    const PROGRAM: bool = false;
    let waits = |shell_has_terminal| SignalWaits {
        shell_has_terminal,
        want: true,
    };
    let goes = |shell_has_terminal| SignalWaits {
        shell_has_terminal,
        want: false,
    };
    let mut steps = BASH_START.to_vec();
    steps.extend([
        goes(SHELL), // idle at the prompt: the signal is for the shell
        Send("sleep 30"),
        goes(SHELL), // nothing written yet
        WriteAll,
        waits(SHELL), // bash is reading the line
        C,
        waits(SHELL), // started, not yet forked
        goes(PROGRAM),
        end(130),
        goes(SHELL),
        // Input to a program that reads the terminal (no prompt): nothing to wait for.
        Send("python3"),
        WriteAll,
        C,
        goes(PROGRAM),
        Send("1+1"),
        WriteAll,
        goes(PROGRAM),
    ]);
    run("signal aim", Integration::Bash, &steps);
    // Without integration there are no marks to wait for.
    run(
        "plain",
        Integration::None,
        &[Send("sleep 30"), WriteAll, goes(SHELL)],
    );
}
