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

mod refused;
mod replies_and_signals;
mod typeahead;
