//! The shell's state machine: where an integrated shell is (starting, at its prompt, running a
//! command, keeping a line it refused), which command marks a send collects, and when the
//! send's input may be written. Pure: the actor feeds it marks, writes and probe findings with
//! the time, and asks it what to write next; nothing here touches the terminal or the clock.
//!
//! The rules it keeps, each learnt from a shell that broke a simpler one:
//! - Input waits for an integrated shell's first prompt (or a program reading the terminal):
//!   typed while the rc files run, the line editor would never see it.
//! - A command-end mark settles a send only once all of the send's input is written; one that
//!   arrives earlier belongs to what ran before.
//! - After a command-end mark the next input waits for the prompt mark (at most
//!   `PROMPT_SETTLE`): typed before the line editor is up, the terminal echoes it twice, and the
//!   late prompt marks would be taken for the next command's. fish's prompt mark comes before its
//!   editor has the terminal; the editor is up once bracketed paste is on.
//! - A prompt mark that arrives while input still waits is the previous command's prompt: once
//!   the input is written, the shell is busy with it, not idle.
//! - A refused line (bash: an end mark without a start mark; fish: ptyd's rejected mark) settles
//!   the send without an exit code; fish keeps the line, so the next input clears it first.
//! - A command that ends while no send waits is kept for the next pure wait to report.

use super::SendInput;
use super::aim::ShellMoment;
use crate::marks::{Integration, Mark};
use crate::screen::Position;
use std::time::{Duration, Instant};

/// After a command-end mark, how long the next input waits for the prompt mark that follows
/// it before it is written anyway (a prompt without marks, such as a theme that rebuilt PS1
/// late).
pub(super) const PROMPT_SETTLE: Duration = Duration::from_millis(200);

/// Ctrl-U: clears the line a shell kept in its editor.
const CLEAR_LINE: u8 = 0x15;
/// Input buffer capacity kept between sends; a larger one (a big paste) is freed, so an idle
/// session does not hold it.
const OUTBOX_KEEP: usize = 4096;

/// A command's end as the marks told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CommandEnd {
    /// The exit status, when a start mark preceded the end (a refused line has none).
    pub exit_code: Option<i32>,
    /// Where the end mark (or the refusal) arrived.
    pub at: Position,
}

/// The marks a waiting send has collected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct CommandSpan {
    /// The send writes input (a pure wait collects no start: its command began earlier).
    pub writes_input: bool,
    /// The first command-start mark after the send began (a multi-line paste may run several
    /// commands: its output starts at the first).
    pub start: Option<Position>,
    /// The end that settles the send.
    pub end: Option<CommandEnd>,
}

/// What a mark means for the actor beyond the state kept here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MarkEffect {
    /// Nothing more.
    None,
    /// A command started here (a pending JobKill may signal it, a job's output starts here).
    CommandStarted(Position),
    /// A prompt is drawn (a starting session is ready).
    Prompt,
}

/// Where a send's input goes, as it was when the send began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FirstWrite {
    /// To an integrated shell's line editor at its prompt.
    pub at_prompt: bool,
    /// The shell kept a line it refused: clear it first.
    pub clear_kept_line: bool,
}

/// What the actor writes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Write {
    /// Nothing may be written now.
    Nothing,
    /// Answers to the terminal's queries (before any input: the program waits for them).
    Replies,
    /// The send's input.
    Input,
}

/// One integrated (or plain) shell's state, with the input that waits to be written.
pub(super) struct Shell {
    integration: Integration,
    /// The integrated shell is idle at its prompt (an end or prompt mark and no input since).
    at_prompt: bool,
    /// The shell refused the last line and keeps it in its editor: clear it before new input.
    line_kept: bool,
    /// An integrated shell has shown its first prompt (its line editor takes input).
    prompt_seen: bool,
    /// The probe found the program reading the terminal before any prompt mark (a shell whose
    /// rc file replaced it, or asks a question): input may go in.
    reader_seen: bool,
    /// Position of the latest command-start mark whose end has not been seen.
    command_start: Option<Position>,
    /// The input in the outbox goes to the integrated shell at its prompt (not to a program).
    input_for_prompt: bool,
    /// A submitted line (input ending in Enter) was written to the integrated shell at its
    /// prompt and no mark has answered it yet: the shell is reading it, its command not started.
    line_submitted: bool,
    /// A command that ended while no send was waiting for it.
    unreported: Option<CommandEnd>,
    /// When a command-end mark arrived whose prompt mark has not followed yet.
    prompt_pending: Option<Instant>,
    /// fish's prompt mark came; `prompt_pending` ends when its line editor is up.
    editor_pending: bool,
    /// Input still to be written for the send in flight, and how much of it is written.
    outbox: Vec<u8>,
    outbox_pos: usize,
    /// The send's input is about to be written for the first time.
    first_write: Option<FirstWrite>,
    /// Answers to terminal queries, written before any pending input.
    replies: Vec<u8>,
}

impl Shell {
    pub(super) fn new(integration: Integration) -> Shell {
        Shell {
            integration,
            at_prompt: false,
            line_kept: false,
            prompt_seen: false,
            reader_seen: false,
            command_start: None,
            input_for_prompt: false,
            line_submitted: false,
            unreported: None,
            prompt_pending: None,
            editor_pending: false,
            outbox: Vec::new(),
            outbox_pos: 0,
            first_write: None,
            replies: Vec::new(),
        }
    }

    fn integrated(&self) -> bool {
        self.integration != Integration::None
    }

    /// Takes a mark the terminal saw at `at`; `send` is the waiting send's span, if one waits.
    pub(super) fn on_mark(
        &mut self,
        mark: &Mark,
        at: Position,
        now: Instant,
        send: Option<&mut CommandSpan>,
    ) -> MarkEffect {
        if !matches!(mark, Mark::Cwd(_)) {
            self.line_submitted = false;
        }
        match mark {
            Mark::CommandStart => {
                self.at_prompt = false;
                self.command_start = Some(at);

                if let Some(span) = send.filter(|s| s.writes_input && s.start.is_none()) {
                    span.start = Some(at);
                }
                MarkEffect::CommandStarted(at)
            }
            Mark::CommandEnd(code) => {
                let had_command = self.command_start.take().is_some();

                let end = CommandEnd {
                    exit_code: if had_command { *code } else { None },
                    at,
                };
                self.at_prompt = true;
                self.prompt_pending = Some(now);
                self.editor_pending = false;
                let input_written = !self.input_pending();
                match send {
                    Some(span) if span.end.is_none() && input_written => span.end = Some(end),
                    Some(_) => {}
                    None if had_command => self.unreported = Some(end),
                    None => {}
                }
                MarkEffect::None
            }
            Mark::PromptStart | Mark::InputStart => {
                if self.integration == Integration::Fish && self.prompt_pending.is_some() {
                    // fish sends its prompt mark from the `fish_prompt` event, before its line
                    // editor has the terminal; the editor turns bracketed paste on once it has.
                    self.editor_pending = true;
                } else {
                    self.prompt_pending = None;
                }
                self.prompt_seen = true;
                if self.command_start.is_none() && !self.input_pending() {
                    self.at_prompt = true;
                }
                MarkEffect::Prompt
            }
            Mark::Cwd(_) => MarkEffect::None,
            Mark::LineRejected => {
                self.line_kept = true;
                self.at_prompt = true;
                self.prompt_pending = None;
                self.command_start = None;

                if let Some(span) = send.filter(|s| s.end.is_none()) {
                    span.end = Some(CommandEnd {
                        exit_code: None,
                        at,
                    });
                }
                MarkEffect::None
            }
        }
    }

    /// After each output chunk: whether the terminal has bracketed paste on now (asked only
    /// while fish's editor is awaited).
    pub(super) fn after_output(&mut self, bracketed_paste: impl FnOnce() -> bool) {
        if self.editor_pending && bracketed_paste() {
            self.editor_pending = false;
            self.prompt_pending = None;
        }
    }

    /// A send that writes nothing begins: the end it reports at once, if any (a command that
    /// ended meanwhile, or an idle prompt, whose viewport ends at `last_seen`).
    pub(super) fn begin_wait(&mut self, last_seen: Position) -> Option<CommandEnd> {
        if let Some(done) = self.unreported.take() {
            return Some(done);
        }
        (self.at_prompt && self.integrated()).then_some(CommandEnd {
            exit_code: None,
            at: last_seen,
        })
    }

    /// A send with input begins: queues its bytes (see `encode_input`); returns how many.
    pub(super) fn begin_input(&mut self, input: &SendInput, bracketed_paste: bool) -> usize {
        let to = FirstWrite {
            at_prompt: self.at_prompt && self.integrated(),
            clear_kept_line: self.line_kept,
        };
        self.outbox.clear();
        encode_input(input, to, bracketed_paste, &mut self.outbox);
        self.outbox_pos = 0;
        self.first_write = Some(to);
        self.input_for_prompt = to.at_prompt;
        self.line_kept = false;
        self.at_prompt = false;
        self.unreported = None;
        self.outbox.len()
    }

    /// What may be written now. Input waits for an integrated shell's first prompt and, after
    /// a command, for its next prompt (see the module doc); answers to queries never wait.
    pub(super) fn next_write(&self, now: Instant) -> Write {
        if !self.replies.is_empty() {
            Write::Replies
        } else if self.input_pending() && !self.input_gated() && self.prompt_gate(now).is_none() {
            Write::Input
        } else {
            Write::Nothing
        }
    }

    /// Where the input goes, once, just before its first byte is written.
    pub(super) fn take_first_write(&mut self) -> Option<FirstWrite> {
        self.first_write.take()
    }

    /// Encodes the input again before its first byte is written (whether the line editor takes
    /// bracketed paste is known only once its prompt is up); returns the new length.
    pub(super) fn encode_again(
        &mut self,
        input: &SendInput,
        to: FirstWrite,
        bracketed_paste: bool,
    ) -> usize {
        if self.outbox_pos == 0 {
            self.outbox.clear();
            encode_input(input, to, bracketed_paste, &mut self.outbox);
        }
        self.outbox.len()
    }

    /// The bytes `write` writes.
    pub(super) fn pending(&self, write: Write) -> &[u8] {
        match write {
            Write::Replies => &self.replies,
            Write::Input => &self.outbox[self.outbox_pos..],
            Write::Nothing => &[],
        }
    }

    /// `n` bytes of input were written; true once all of it is.
    pub(super) fn input_written(&mut self, n: usize) -> bool {
        self.outbox_pos += n;
        let done = !self.input_pending();
        if done {
            self.line_submitted = self.input_for_prompt && self.outbox.last() == Some(&b'\r');
            self.drop_input();
        }
        done
    }

    /// Where the shell is for a signal aimed at its command (see `aim.rs`); `shell_has_terminal`:
    /// the shell's own process group is the terminal's foreground group.
    pub(super) fn signal_moment(&self, shell_has_terminal: bool) -> ShellMoment {
        ShellMoment {
            line_submitted: self.line_submitted,
            forking: shell_has_terminal && self.integrated() && self.command_start.is_some(),
        }
    }

    /// Forgets the unwritten input (the send ended or failed); returns how many bytes it had.
    pub(super) fn drop_input(&mut self) -> usize {
        let unwritten = self.outbox.len() - self.outbox_pos.min(self.outbox.len());
        if self.outbox.capacity() > OUTBOX_KEEP {
            self.outbox = Vec::new();
        }
        self.outbox.clear();
        self.outbox_pos = 0;
        self.first_write = None;
        unwritten
    }

    /// Some input still waits to be written.
    pub(super) fn input_pending(&self) -> bool {
        self.outbox_pos < self.outbox.len()
    }

    /// Queues answers to the terminal's queries.
    pub(super) fn queue_replies(&mut self, replies: &[u8]) {
        self.replies.extend_from_slice(replies);
    }

    /// `written` of the replies went out (an error drops them: nobody can read them).
    pub(super) fn replies_written(&mut self, written: Option<usize>) {
        match written {
            Some(n) => drop(self.replies.drain(..n.min(self.replies.len()))),
            None => self.replies.clear(),
        }
    }

    /// Answers to the program's queries are still on their way.
    pub(super) fn replies_pending(&self) -> bool {
        !self.replies.is_empty()
    }

    /// Whether input must wait: an integrated shell still running its rc files (no prompt mark
    /// yet, nobody reading the terminal).
    pub(super) fn input_gated(&self) -> bool {
        self.integrated() && !self.prompt_seen && !self.reader_seen
    }

    /// Until when input must wait for the prompt that follows a command-end mark; `None` when
    /// it need not wait.
    fn prompt_gate(&self, now: Instant) -> Option<Instant> {
        self.prompt_pending
            .map(|at| at + PROMPT_SETTLE)
            .filter(|until| now < *until)
    }

    /// When waiting input may be written without a mark (the prompt settle time ends).
    pub(super) fn write_deadline(&self, now: Instant) -> Option<Instant> {
        self.prompt_gate(now).filter(|_| self.input_pending())
    }

    /// The probe found a program reading the terminal. True when that opened the gate of a
    /// shell that showed no prompt yet (the finding says nothing else then).
    pub(super) fn reader_opens_gate(&mut self) -> bool {
        let gated = self.input_gated();
        if gated {
            self.reader_seen = true;
        }
        gated
    }

    /// A reader that is the integrated shell at its own prompt: the marks settle this, not the
    /// probe.
    pub(super) fn reads_own_prompt(&self, reader_is_shell: bool) -> bool {
        reader_is_shell && self.integrated() && self.at_prompt
    }

    /// Where the next input would go: to an integrated shell's line editor at its prompt.
    #[cfg(test)]
    fn at_prompt(&self) -> bool {
        self.at_prompt
    }
}

/// The bytes a send writes into `out`: ^U first when the shell kept a refused line, the text
/// (one bracketed paste when it is multi-line input to an integrated shell's editor that enabled
/// it; otherwise newlines as Enter, CR), Enter when it submits, then the keys.
pub(super) fn encode_input(
    input: &SendInput,
    to: FirstWrite,
    bracketed_paste: bool,
    out: &mut Vec<u8>,
) {
    out.reserve(input.text.len() + input.keys.len() + 16);
    if to.clear_kept_line && !input.text.is_empty() {
        // Clear the refused line the shell kept, so the text is not appended to it.
        out.push(CLEAR_LINE);
    }
    let multiline = input.text.contains('\n');
    if to.at_prompt && multiline && bracketed_paste {
        out.extend_from_slice(b"\x1b[200~");
        out.extend_from_slice(input.text.as_bytes());
        out.extend_from_slice(b"\x1b[201~");
    } else if multiline {
        // A terminal sends Enter as CR; programs in line mode see each line end.
        out.extend(
            input
                .text
                .bytes()
                .map(|b| if b == b'\n' { b'\r' } else { b }),
        );
    } else {
        out.extend_from_slice(input.text.as_bytes());
    }
    if input.submit {
        out.push(b'\r');
    }
    out.extend_from_slice(&input.keys);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of a scenario: something that happens to the shell, or a check.
    #[derive(Debug, Clone)]
    enum Step {
        /// The terminal saw a mark (on the next line of output).
        Saw(Mark),
        /// A send with this text (submitted) begins; it waits until settled.
        Send(&'static str),
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
        /// Time passes.
        Elapse(u64),
        /// Checks: what may be written now.
        MayWrite(Write),
        /// Checks: the shell is idle at its prompt.
        AtPrompt(bool),
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
        SendInput {
            text: text.to_owned(),
            submit: true,
            keys: Vec::new(),
            timeout: Duration::from_secs(30),
            idle: Duration::from_secs(5),
            max_result_bytes: 65536,
        }
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
                Send(text) => {
                    let text = text.to_string();
                    let input = input(&text);
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
                    let to = shell.take_first_write().expect("a first write");
                    let (input, _) = send.as_ref().expect("a send");
                    shell.encode_again(input, to, paste);
                }
                WriteAll => loop {
                    let write = shell.next_write(now);
                    if write == Write::Input
                        && let Some(to) = shell.take_first_write()
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
                Elapse(ms) => now += Duration::from_millis(*ms),
                MayWrite(want) => assert_eq!(shell.next_write(now), *want, "{ctx}"),
                AtPrompt(want) => assert_eq!(shell.at_prompt(), *want, "{ctx}"),
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
        let mut steps = BASH_START.to_vec();
        steps.extend([
            Send("echo ("),
            WriteAll,
            end(2),
            Settled(Some(None)),
            AtPrompt(true),
        ]);
        run("bash syntax error", Integration::Bash, &steps);
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
    fn input_encoding() {
        let at_prompt = FirstWrite {
            at_prompt: true,
            clear_kept_line: false,
        };
        let elsewhere = FirstWrite {
            at_prompt: false,
            clear_kept_line: false,
        };
        let kept = FirstWrite {
            at_prompt: true,
            clear_kept_line: true,
        };
        let keys = |text: &str, submit: bool, keys: &[u8]| SendInput {
            submit,
            keys: keys.to_vec(),
            ..input(text)
        };
        let cases: [(SendInput, FirstWrite, bool, &[u8]); 7] = [
            (input("ls"), at_prompt, true, b"ls\r"),
            (input("a\nb"), at_prompt, true, b"\x1b[200~a\nb\x1b[201~\r"),
            (input("a\nb"), at_prompt, false, b"a\rb\r"),
            (input("a\nb"), elsewhere, true, b"a\rb\r"),
            (input("ls"), kept, false, b"\x15ls\r"),
            (keys("", false, b"\x1b"), kept, false, b"\x1b"),
            (keys("q", false, b"\r"), elsewhere, false, b"q\r"),
        ];
        for (input, to, paste, want) in cases {
            let mut out = Vec::new();
            encode_input(&input, to, paste, &mut out);
            assert_eq!(out, want, "{:?} {to:?} paste={paste}", input.text);
        }
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
}
