//! The shell's state machine, driven by scenarios in a small step language.

use super::*;

/// One step of a scenario: something that happens to the shell, or a check.
#[derive(Debug, Clone)]
enum Step {
    /// The terminal saw a mark (on the next line of output).
    Saw(Mark),
    /// A send with this text (submitted) begins; it waits until settled.
    Send(&'static str),
    /// A send with this text, not submitted, begins.
    Type(&'static str),
    /// A pure wait begins.
    Wait,
    /// The waiting send ended without its end mark (timeout, idle, hang-up).
    Abandon,
    /// The actor writes whatever it may write now, all of it.
    WriteAll,
    /// The actor is about to write the input's first byte.
    BeforeFirstWrite,
    /// The terminal's bracketed-paste mode after an output chunk.
    Paste(bool),
    /// The probe found a program reading the terminal.
    Reader,
    /// The actor holds the send's input as typeahead.
    Hold,
    /// The probe found a program reading the terminal, all output taken in.
    ReaderAfterOutput,
    /// Checks: the running command a refusal names.
    Running(Option<&'static str>),
    /// Checks: where the command that ran before the send ended.
    RanBefore(Option<u64>),
    /// Time passes.
    Elapse(u64),
    /// Checks: what may be written now.
    MayWrite(Write),
    /// Checks: the shell is idle at its prompt.
    AtPrompt(bool),
    /// Checks: where the shell is between its marks.
    InPhase(Phase),
    /// Checks: the waiting send's span (start line, settled with this exit code).
    Settled(Option<Option<i32>>),
    /// Checks: the waiting send's output starts at this line.
    StartLine(Option<u64>),
    /// Checks: the pending input's bytes.
    Bytes(&'static [u8]),
    /// Checks: a signal would wait for the command (with the shell holding the terminal
    /// or not).
    SignalWaits {
        shell_has_terminal: bool,
        want: bool,
    },
}
use Step::*;

const fn end(code: i32) -> Step {
    Saw(Mark::CommandEnd(Some(code)))
}
const A: Step = Saw(Mark::PromptStart);
const B: Step = Saw(Mark::InputStart);
const C: Step = Saw(Mark::CommandStart);
const REJECTED: Step = Saw(Mark::LineRejected);

fn input(text: &str) -> SendInput {
    SendInput::typed(text)
}

/// Runs a scenario; the line numbers of marks count up from 1, one per step.
fn run(name: &str, integration: Integration, steps: &[Step]) {
    let mut shell = Shell::new(integration);
    let start = Instant::now();
    let mut now = start;
    let mut paste = false;
    let mut send: Option<(SendInput, CommandSpan)> = None;
    for (i, step) in steps.iter().enumerate() {
        let at = Position {
            line: i as u64 + 1,
            col: 0,
        };
        let ctx = format!("{name}: step {i} ({step:?})");
        match step {
            Saw(mark) => {
                let span = send.as_mut().map(|(_, s)| s);
                shell.on_mark(mark, at, now, span);
            }
            Send(text) | Type(text) => {
                let text = text.to_string();
                let input = SendInput {
                    submit: matches!(step, Send(_)),
                    ..input(&text)
                };
                shell.begin_input(&input, paste);
                let span = CommandSpan {
                    writes_input: true,
                    ..CommandSpan::default()
                };
                send = Some((input, span));
            }
            Wait => {
                let span = CommandSpan {
                    end: shell.begin_wait(at),
                    ..CommandSpan::default()
                };
                send = Some((input(""), span));
            }
            Abandon => {
                send = None;
                shell.drop_input();
            }
            BeforeFirstWrite => {
                let to = shell.take_first_write(at).expect("a first write");
                let (input, _) = send.as_ref().expect("a send");
                shell.encode_again(input, to, paste);
            }
            WriteAll => loop {
                let write = shell.next_write(now);
                if write == Write::Input
                    && let Some(to) = shell.take_first_write(at)
                    && let Some((input, _)) = &send
                {
                    shell.encode_again(input, to, paste);
                }
                let n = shell.pending(write).len();
                match write {
                    Write::Nothing => break,
                    Write::Replies => shell.replies_written(Some(n)),
                    Write::Input => {
                        shell.input_written(n);
                    }
                }
            },
            Paste(on) => {
                paste = *on;
                shell.after_output(|| paste);
            }
            Reader => {
                shell.reader_opens_gate();
            }
            Hold => shell.hold_input(),
            ReaderAfterOutput => {
                shell.reader_releases_hold();
            }
            Running(want) => {
                assert_eq!(shell.running_command(), *want, "{ctx}");
            }
            RanBefore(want) => {
                let got = send
                    .as_ref()
                    .and_then(|(_, s)| s.ran_before)
                    .map(|p| p.line);
                assert_eq!(got, *want, "{ctx}");
            }
            Elapse(ms) => now += Duration::from_millis(*ms),
            MayWrite(want) => assert_eq!(shell.next_write(now), *want, "{ctx}"),
            AtPrompt(want) => assert_eq!(shell.at_prompt(), *want, "{ctx}"),
            InPhase(want) => assert_eq!(shell.phase(), *want, "{ctx}"),
            Settled(want) => {
                let got = send.as_ref().and_then(|(_, s)| s.end).map(|e| e.exit_code);
                assert_eq!(got, *want, "{ctx}");
            }
            StartLine(want) => {
                let got = send.as_ref().and_then(|(_, s)| s.start).map(|p| p.line);
                assert_eq!(got, *want, "{ctx}");
            }
            Bytes(want) => {
                let got = shell.pending(Write::Input);
                assert_eq!(got, *want, "{ctx}");
            }
            SignalWaits {
                shell_has_terminal,
                want,
            } => {
                let moment = shell.signal_moment(*shell_has_terminal);
                let waits = !crate::session::aim::deliver_now(moment, now, now);
                assert_eq!(waits, *want, "{ctx}");
            }
        }
    }
}

/// bash: PROMPT_COMMAND prints D (with the cwd) before every prompt, the first included;
/// PS1 carries A and B; PS0 prints C when a line is accepted.
const BASH_START: [Step; 3] = [end(0), A, B];
/// zsh: precmd prints D then the prompt with A and B; preexec prints C.
const ZSH_START: [Step; 3] = [end(0), A, B];

#[test]
fn the_phase_follows_the_marks_and_the_input() {
    use Phase::{AtPrompt as Idle, Busy, LineSubmitted, Running as Runs};
    let cwd = Saw(Mark::Cwd("file:///tmp".into()));
    let rows: Vec<(&str, Integration, Vec<Step>)> = vec![
        (
            "busy while the rc files run, idle at the first prompt",
            Integration::Bash,
            vec![InPhase(Busy), end(0), InPhase(Idle), A, B, InPhase(Idle)],
        ),
        (
            "a submitted line until its start mark, running until its end",
            Integration::Bash,
            vec![
                end(0),
                A,
                B,
                Send("ls"),
                InPhase(Busy),
                WriteAll,
                InPhase(LineSubmitted),
                cwd.clone(),
                InPhase(LineSubmitted),
                C,
                InPhase(Runs),
                end(0),
                InPhase(Idle),
            ],
        ),
        (
            "text typed without Enter leaves the editor busy",
            Integration::Zsh,
            vec![end(0), A, B, Type("ls /u"), WriteAll, InPhase(Busy)],
        ),
        (
            "a prompt drawn again answers a submitted line",
            Integration::Bash,
            vec![end(0), A, B, Send("!nope"), WriteAll, A, InPhase(Idle)],
        ),
        (
            "a refused line leaves fish idle, its line kept",
            Integration::Fish,
            vec![
                A,
                Paste(true),
                Send("echo ("),
                WriteAll,
                REJECTED,
                InPhase(Idle),
            ],
        ),
        (
            "typeahead written at the next prompt is a submitted line",
            Integration::Bash,
            vec![
                end(0),
                A,
                B,
                Send("sleep 5"),
                WriteAll,
                C,
                Abandon,
                Send("echo typed"),
                Hold,
                InPhase(Runs),
                end(0),
                InPhase(Idle),
                A,
                B,
                InPhase(Idle),
                WriteAll,
                InPhase(LineSubmitted),
            ],
        ),
        (
            "a plain shell is always busy",
            Integration::None,
            vec![Send("ls"), WriteAll, InPhase(Busy)],
        ),
    ];
    for (name, integration, steps) in rows {
        run(name, integration, &steps);
    }
}

#[test]
fn bash_and_zsh_commands_settle_at_their_end_mark_with_the_exit_code() {
    for (name, integration, start) in [
        ("bash", Integration::Bash, BASH_START),
        ("zsh", Integration::Zsh, ZSH_START),
    ] {
        let mut steps = start.to_vec();
        steps.extend([
            AtPrompt(true),
            Send("false"),
            AtPrompt(false),
            MayWrite(Write::Input),
            Bytes(b"false\r"),
            WriteAll,
            C,
            AtPrompt(false),
            StartLine(Some(start.len() as u64 + 7)),
            Settled(None),
            end(1),
            Settled(Some(Some(1))),
            AtPrompt(true),
        ]);
        run(name, integration, &steps);
    }
}

#[test]
fn input_waits_for_the_first_prompt_or_a_reader() {
    // Before the first prompt mark the rc files run: nothing is written.
    run(
        "bash startup",
        Integration::Bash,
        &[
            Send("echo hi"),
            MayWrite(Write::Nothing),
            Elapse(1000),
            MayWrite(Write::Nothing),
            end(0),
            A,
            MayWrite(Write::Input),
        ],
    );
    // An rc file that asks a question: the reader opens the gate.
    run(
        "reader first",
        Integration::Zsh,
        &[
            Send("y"),
            MayWrite(Write::Nothing),
            Reader,
            MayWrite(Write::Input),
        ],
    );
    // Without integration there are no marks to wait for.
    run(
        "plain",
        Integration::None,
        &[Send("1+1"), MayWrite(Write::Input)],
    );
}

#[test]
fn a_slow_prompt_command_holds_the_next_input_until_its_prompt() {
    // D settles the first send; the prompt marks come late (a slow PROMPT_COMMAND). The
    // next input waits for them, and their arrival does not make the busy shell idle.
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Send("true"),
        WriteAll,
        C,
        end(0),
        Settled(Some(Some(0))),
        Abandon,
        Send("echo next"),
        MayWrite(Write::Nothing),
        Elapse(100),
        MayWrite(Write::Nothing),
        A,
        B,
        AtPrompt(false),
        MayWrite(Write::Input),
        WriteAll,
        Settled(None),
        C,
        end(0),
        Settled(Some(Some(0))),
    ]);
    run("slow PROMPT_COMMAND", Integration::Bash, &steps);
    // A prompt drawn without marks: the input goes after the settle time.
    let mut steps = BASH_START.to_vec();
    steps.extend([
        Send("true"),
        WriteAll,
        C,
        end(0),
        Abandon,
        Send("echo next"),
        Elapse(PROMPT_SETTLE.as_millis() as u64 - 1),
        MayWrite(Write::Nothing),
        Elapse(1),
        MayWrite(Write::Input),
    ]);
    run("prompt without marks", Integration::Bash, &steps);
}

#[test]
fn an_end_mark_before_the_input_is_written_belongs_to_what_ran_before() {
    run(
        "early end",
        Integration::Bash,
        &[
            Send("echo hi"),
            end(0),
            Settled(None),
            A,
            WriteAll,
            Settled(None),
            C,
            end(0),
            Settled(Some(Some(0))),
        ],
    );
}

#[test]
fn fish_input_waits_for_its_line_editor_to_enable_bracketed_paste() {
    // fish prints A from `fish_prompt`, then its editor turns bracketed paste on; it turns
    // it off while a command runs.
    run(
        "fish",
        Integration::Fish,
        &[
            A,
            Paste(true),
            AtPrompt(true),
            Send("echo hi"),
            WriteAll,
            Paste(false),
            C,
            end(0),
            Settled(Some(Some(0))),
            Abandon,
            Send("echo next"),
            A,
            MayWrite(Write::Nothing),
            Paste(true),
            MayWrite(Write::Input),
        ],
    );
}

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
