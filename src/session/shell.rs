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
//! - A refused line settles the send without an exit code, its output being the shell's message
//!   alone (from the line after the echoed input): bash and zsh print an end mark without a start
//!   mark (a syntax error, zsh's failed history expansion); bash draws its prompt again without
//!   either after a failed history expansion (a prompt mark after a submitted line, with no start
//!   mark, when the input went to a prompt already drawn); fish prints ptyd's rejected mark and
//!   keeps the line, so the next input clears it first.
//! - A command that ends while no send waits is kept for the next pure wait to report.
//! - Answers to terminal queries go out before any input; those still unwritten when the
//!   command ends are dropped (the program that asked is gone; the shell would read them).
//! - Text for a command that still runs, with nothing reading the terminal, would only be typed
//!   ahead: the actor refuses it, or with `typeahead` holds it here until the command ends (then
//!   it waits for the prompt like any input) or a program reads the terminal. Typed ahead into
//!   the kernel instead, the terminal would echo it into the running command's output, and the
//!   command's end mark would settle the send that typed it.
//! - After a signal the next send waits for the marks that answer it (at most
//!   `SIGNAL_SETTLE`): the end mark of the command it ends, or bash's and zsh's end and prompt
//!   marks after an interrupt at their prompt. Written before bash has handled the interrupt,
//!   input goes into the line readline then throws away (`cho: command not found`, or the
//!   whole line gone); text for a command that is about to end would be refused as typeahead.

use super::SendInput;
use super::aim::ShellMoment;
use super::input::{CLEAR_LINE, FirstWrite, PASTE_START, encode_input, printable};
use crate::marks::{Integration, Mark};
use crate::screen::Position;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

/// After a command-end mark, how long the next input waits for the prompt mark that follows
/// it before it is written anyway (a prompt without marks, such as a theme that rebuilt PS1
/// late).
pub(super) const PROMPT_SETTLE: Duration = Duration::from_millis(200);
/// After a signal, how long the next send waits for the marks that answer it before it is
/// judged and written anyway (a program that handled the signal and runs on prints none). Far
/// above what bash takes to redraw its prompt or report a command's end on a busy machine.
pub(super) const SIGNAL_SETTLE: Duration = Duration::from_millis(500);

/// The most characters of a command line a refusal quotes.
const COMMAND_NAME_CHARS: usize = 80;
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
    /// Where the command that still ran when the send began ended, its input held until then
    /// (typeahead): the send's output is the rest of that command's, then its own command's.
    pub ran_before: Option<Position>,
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

/// Where a send's input went, recorded at its first write: what a refused line's output is
/// told apart by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Echo {
    /// The line the echo of the input starts on (the cursor's when the input was written).
    line: u64,
    /// Lines the echo takes (a bracketed paste echoes each of its lines; typed lines are each a
    /// command of their own, the first one alone is this send's).
    lines: u64,
    /// The input went to an integrated shell's prompt that was drawn already.
    to_drawn_prompt: bool,
    /// The input ends with Enter: it submits a line the shell may refuse.
    submits: bool,
}

impl Echo {
    /// Where the output of a line the shell refused starts: after the echoed input.
    fn output_start(self) -> Position {
        Position {
            line: self.line + self.lines,
            col: 0,
        }
    }
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

/// Where an integrated shell is between its marks. A plain shell (no marks) stays `Busy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing the marks settle: the rc files run, or input went to the line editor or to a
    /// program.
    Busy,
    /// Idle at its prompt: an end, prompt or rejected-line mark, and no input since.
    AtPrompt,
    /// A line (input ending in Enter) was written to the shell at its prompt and no mark has
    /// answered it yet: the shell is reading it, its command not started.
    LineSubmitted,
    /// A command's start mark came and its end has not.
    Running,
}

/// How far an integrated shell's start-up is: input waits while its rc files run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Startup {
    /// No prompt mark yet and nobody found reading the terminal.
    RcFiles,
    /// The first prompt was shown: the line editor takes input.
    Prompted,
    /// The probe found the program reading the terminal before any prompt mark (a shell whose
    /// rc file replaced it, or asks a question): input may go in.
    ReaderFound,
}

/// The prompt that follows a command-end mark, which the next input waits for (at most
/// `PROMPT_SETTLE` from the end mark).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PromptWait {
    /// Nothing is awaited.
    Nothing,
    /// An end mark came at this time; its prompt mark has not.
    Mark(Instant),
    /// fish's prompt mark came after the end mark of this time; its line editor is up once it
    /// turns bracketed paste on.
    FishEditor(Instant),
}

/// One integrated (or plain) shell's state, with the input that waits to be written.
#[derive(Debug)]
pub(super) struct Shell {
    integration: Integration,
    /// Where the shell is between its marks.
    phase: Phase,
    startup: Startup,
    prompt_wait: PromptWait,
    /// The shell refused the last line and keeps it in its editor: clear it before new input.
    line_kept: bool,
    /// The input in the outbox goes to the integrated shell at its prompt (not to a program).
    input_for_prompt: bool,
    /// A command that ended while no send was waiting for it.
    unreported: Option<CommandEnd>,
    /// When a signal went to the terminal whose answering marks have not come yet (see
    /// `SIGNAL_SETTLE`).
    signalled: Option<Instant>,
    /// Input still to be written for the send in flight, and how much of it is written.
    outbox: Vec<u8>,
    outbox_pos: usize,
    /// The send's input is about to be written for the first time.
    first_write: Option<FirstWrite>,
    /// A prompt mark arrived since the last command-start or command-end mark: the line editor
    /// has drawn its prompt.
    prompt_drawn: bool,
    /// Where the input of the send in flight went, once its first byte is written.
    echo: Option<Echo>,
    /// The input is typeahead for a command that still runs: held until it ends or a program
    /// reads the terminal.
    held: bool,
    /// The first line of the latest submitted text, and of the text that started the command
    /// running now (what a refusal names).
    submitted: Option<String>,
    running: Option<String>,
    /// Answers to terminal queries, written before any pending input.
    replies: Vec<u8>,
}

impl Shell {
    pub(super) fn new(integration: Integration) -> Shell {
        Shell {
            integration,
            phase: Phase::Busy,
            startup: Startup::RcFiles,
            prompt_wait: PromptWait::Nothing,
            line_kept: false,
            input_for_prompt: false,
            unreported: None,
            signalled: None,
            outbox: Vec::new(),
            outbox_pos: 0,
            first_write: None,
            prompt_drawn: false,
            echo: None,
            held: false,
            submitted: None,
            running: None,
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
            // Any mark but the cwd answers a submitted line.
            if self.phase == Phase::LineSubmitted {
                self.phase = Phase::Busy;
            }
            // The shell answered the signal (an end mark, or the prompt drawn again).
            self.signalled = None;
        }
        match mark {
            Mark::CommandStart => {
                // A command started since an end no send saw: a wait is for this one now.
                self.unreported = None;
                self.phase = Phase::Running;
                self.prompt_drawn = false;
                self.running = self.submitted.take();
                if let Some(span) = send.filter(|s| s.writes_input && s.start.is_none()) {
                    span.start = Some(at);
                }
                MarkEffect::CommandStarted(at)
            }
            Mark::CommandEnd(code) => {
                let had_command = self.phase == Phase::Running;
                self.running = None;
                // Typeahead held for this command goes in at the next prompt.
                self.held = false;
                // Answers not yet written were asked by a program of the command that ended:
                // the shell would read them.
                self.replies.clear();
                let end = CommandEnd {
                    exit_code: if had_command { *code } else { None },
                    at,
                };
                self.phase = Phase::AtPrompt;
                self.prompt_wait = PromptWait::Mark(now);
                self.prompt_drawn = false;
                let input_written = !self.input_pending();
                match send {
                    Some(span) if span.end.is_none() && input_written => {
                        if !had_command {
                            // The shell ran nothing: the line was refused (or empty).
                            self.refused_output(span);
                        }
                        span.end = Some(end);
                    }
                    Some(span) if had_command && span.writes_input && span.start.is_none() => {
                        span.ran_before = Some(at);
                    }
                    Some(_) => {}
                    None if had_command => self.unreported = Some(end),
                    None => {}
                }
                MarkEffect::None
            }
            Mark::PromptStart | Mark::InputStart => {
                if *mark == Mark::PromptStart {
                    if let Some(span) = send.filter(|s| s.end.is_none())
                        && self.reprompted_without_running(span, at)
                    {
                        // bash after a failed history expansion: no start, no end, a prompt.
                        self.refused_output(span);
                        span.end = Some(CommandEnd {
                            exit_code: None,
                            at,
                        });
                    }
                    self.prompt_drawn = true;
                }
                self.prompt_wait = match self.prompt_wait {
                    // fish sends its prompt mark from the `fish_prompt` event, before its line
                    // editor has the terminal; the editor turns bracketed paste on once it has.
                    PromptWait::Mark(since) | PromptWait::FishEditor(since)
                        if self.integration == Integration::Fish =>
                    {
                        PromptWait::FishEditor(since)
                    }
                    _ => PromptWait::Nothing,
                };
                self.startup = Startup::Prompted;
                if self.phase != Phase::Running && !self.input_pending() {
                    self.phase = Phase::AtPrompt;
                }
                MarkEffect::Prompt
            }
            Mark::Cwd(_) => MarkEffect::None,
            Mark::LineRejected => {
                self.line_kept = true;
                self.phase = Phase::AtPrompt;
                self.prompt_wait = PromptWait::Nothing;

                if let Some(span) = send.filter(|s| s.end.is_none()) {
                    self.refused_output(span);
                    span.end = Some(CommandEnd {
                        exit_code: None,
                        at,
                    });
                }
                MarkEffect::None
            }
        }
    }

    /// A line the shell refused: the send's output starts after the echoed input, so that it
    /// holds the shell's message alone.
    fn refused_output(&self, span: &mut CommandSpan) {
        if span.writes_input
            && span.start.is_none()
            && let Some(echo) = self.echo
        {
            span.start = Some(echo.output_start());
        }
    }

    /// Whether a prompt mark at `at` means the shell drew its prompt again for the line the
    /// send submitted, without running it: all of the input is written, to a prompt that was
    /// drawn, no command started since, and the new prompt is below the echoed input (readline
    /// redraws its prompt in place, on the echo's lines, when a paste spans several lines).
    fn reprompted_without_running(&self, span: &CommandSpan, at: Position) -> bool {
        span.writes_input
            && span.start.is_none()
            && self.phase != Phase::Running
            && !self.input_pending()
            && self
                .echo
                .is_some_and(|e| e.to_drawn_prompt && e.submits && at.line >= e.output_start().line)
    }

    /// After each output chunk: whether the terminal has bracketed paste on now (asked only
    /// while fish's editor is awaited).
    pub(super) fn after_output(&mut self, bracketed_paste: impl FnOnce() -> bool) {
        if matches!(self.prompt_wait, PromptWait::FishEditor(_)) && bracketed_paste() {
            self.prompt_wait = PromptWait::Nothing;
        }
    }

    /// A send that writes nothing begins: the end it reports at once, if any (a command that
    /// ended meanwhile, or an idle prompt, whose viewport is empty: it ends at the start of
    /// `last_seen`'s line, which holds the prompt after output that had no final newline).
    pub(super) fn begin_wait(&mut self, last_seen: Position) -> Option<CommandEnd> {
        if let Some(done) = self.unreported.take() {
            return Some(done);
        }
        self.at_prompt().then_some(CommandEnd {
            exit_code: None,
            at: Position {
                col: 0,
                ..last_seen
            },
        })
    }

    /// A send with input begins: queues its bytes (see `encode_input`); returns how many.
    pub(super) fn begin_input(&mut self, input: &SendInput, bracketed_paste: bool) -> usize {
        let to = FirstWrite {
            at_prompt: self.at_prompt(),
            clear_kept_line: self.line_kept,
        };
        self.outbox.clear();
        encode_input(input, to, bracketed_paste, &mut self.outbox);
        self.outbox_pos = 0;
        self.first_write = Some(to);
        self.input_for_prompt = to.at_prompt;
        self.echo = None;
        self.held = false;
        if input.submit && printable(&input.text) {
            let line = input.text.lines().next().unwrap_or_default();
            self.submitted = Some(line.chars().take(COMMAND_NAME_CHARS).collect());
        }
        self.line_kept = false;
        self.leave_prompt();
        self.unreported = None;
        self.outbox.len()
    }

    /// What may be written now. Input waits for an integrated shell's first prompt and, after
    /// a command, for its next prompt (see the module doc); answers to queries never wait.
    pub(super) fn next_write(&self, now: Instant) -> Write {
        if !self.replies.is_empty() {
            Write::Replies
        } else if self.input_pending()
            && !self.input_gated()
            && !self.held
            && self.prompt_gate(now).is_none()
        {
            Write::Input
        } else {
            Write::Nothing
        }
    }

    /// Where the input goes, once, just before its first byte is written with the cursor at
    /// `cursor`.
    pub(super) fn take_first_write(&mut self, cursor: Position) -> Option<FirstWrite> {
        let mut to = self.first_write.take()?;
        // Input that waited (typeahead, a slow prompt) goes to the prompt drawn meanwhile; from
        // now on the shell is busy with it.
        to.at_prompt |= self.prompt_drawn && self.integrated();
        self.input_for_prompt = to.at_prompt;
        self.leave_prompt();
        self.echo = Some(Echo {
            line: cursor.line,
            lines: 1,
            to_drawn_prompt: self.prompt_drawn && self.integrated(),
            submits: false,
        });
        Some(to)
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
            let submits_line = self.input_for_prompt && self.outbox.last() == Some(&b'\r');
            match self.phase {
                // A command started while the input was written: its end mark is what counts.
                Phase::Running => {}
                _ if submits_line => self.phase = Phase::LineSubmitted,
                Phase::LineSubmitted => self.phase = Phase::Busy,
                Phase::Busy | Phase::AtPrompt => {}
            }
            if let Some(echo) = self.echo.as_mut() {
                // Known only now: the input may have been encoded again at its first write.
                let text = self
                    .outbox
                    .strip_prefix(&[CLEAR_LINE])
                    .unwrap_or(&self.outbox);
                let pasted = text.starts_with(PASTE_START);
                echo.lines = if pasted {
                    1 + self.outbox.iter().filter(|&&b| b == b'\n').count() as u64
                } else {
                    1
                };
                echo.submits = self.outbox.last() == Some(&b'\r');
            }
            self.drop_input();
        }
        done
    }

    /// Where the shell is for a signal aimed at its command (see `aim.rs`); `shell_has_terminal`:
    /// the shell's own process group is the terminal's foreground group.
    pub(super) fn signal_moment(&self, shell_has_terminal: bool) -> ShellMoment {
        ShellMoment {
            line_submitted: self.phase == Phase::LineSubmitted,
            forking: shell_has_terminal && self.command_running(),
        }
    }

    /// A signal went to the terminal's foreground group (`shell_has_terminal`: the shell's
    /// own). The next send waits for the marks that answer it, where some are sure to come: the
    /// end mark of the running command it ends or stops (any signal but those whose default is
    /// to ignore it or to continue), or the end and prompt marks bash and zsh print when an
    /// interrupt throws away the line at their prompt (fish redraws nothing; bash ignores
    /// SIGTERM and SIGQUIT there).
    pub(super) fn signal_delivered(
        &mut self,
        signal: Signal,
        shell_has_terminal: bool,
        now: Instant,
    ) {
        let answered = if self.command_running() {
            !matches!(
                signal,
                Signal::SIGCONT | Signal::SIGWINCH | Signal::SIGCHLD | Signal::SIGURG
            )
        } else {
            shell_has_terminal
                && signal == Signal::SIGINT
                && matches!(self.integration, Integration::Bash | Integration::Zsh)
        };
        if answered {
            self.signalled = Some(now);
        }
    }

    /// Until when a send waits for the marks that answer the signal just delivered; `None` once
    /// they came, or `SIGNAL_SETTLE` passed.
    pub(super) fn signal_gate(&self, now: Instant) -> Option<Instant> {
        self.signalled
            .map(|at| at + SIGNAL_SETTLE)
            .filter(|until| now < *until)
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
        self.integrated() && self.startup == Startup::RcFiles
    }

    /// Until when input must wait for the prompt that follows a command-end mark; `None` when
    /// it need not wait.
    fn prompt_gate(&self, now: Instant) -> Option<Instant> {
        match self.prompt_wait {
            PromptWait::Mark(since) | PromptWait::FishEditor(since) => {
                Some(since + PROMPT_SETTLE).filter(|until| now < *until)
            }
            PromptWait::Nothing => None,
        }
    }

    /// When waiting input may be written without a mark (the prompt settle time ends).
    pub(super) fn write_deadline(&self, now: Instant) -> Option<Instant> {
        self.prompt_gate(now).filter(|_| self.input_pending())
    }

    /// A command of the integrated shell runs (its start mark came, its end has not): text sent
    /// now is typed ahead unless a program reads the terminal.
    pub(super) fn command_running(&self) -> bool {
        self.integrated() && self.phase == Phase::Running
    }

    /// The first line of the text that started the running command, when a send typed it.
    pub(super) fn running_command(&self) -> Option<&str> {
        self.running.as_deref().filter(|_| self.command_running())
    }

    /// Holds the send's input (typeahead) until the running command ends or a program reads the
    /// terminal.
    pub(super) fn hold_input(&mut self) {
        self.held = self.input_pending();
    }

    /// Typeahead input is held.
    pub(super) fn input_held(&self) -> bool {
        self.held && self.input_pending()
    }

    /// The probe found a program reading the terminal, with all output taken in (the shell at
    /// its prompt would have printed its end mark first): held typeahead goes to it. True when
    /// that released held input.
    pub(super) fn reader_releases_hold(&mut self) -> bool {
        std::mem::take(&mut self.held) && self.input_pending()
    }

    /// The probe found a program reading the terminal. True when that opened the gate of a
    /// shell that showed no prompt yet (the finding says nothing else then).
    pub(super) fn reader_opens_gate(&mut self) -> bool {
        let gated = self.input_gated();
        if gated {
            self.startup = Startup::ReaderFound;
        }
        gated
    }

    /// A reader that is the integrated shell at its own prompt: the marks settle this, not the
    /// probe.
    pub(super) fn reads_own_prompt(&self, reader_is_shell: bool) -> bool {
        reader_is_shell && self.at_prompt()
    }

    /// Where the next input would go: to an integrated shell's line editor at its prompt.
    fn at_prompt(&self) -> bool {
        self.integrated() && self.phase == Phase::AtPrompt
    }

    /// Input went in: the shell is no longer idle at its prompt.
    fn leave_prompt(&mut self) {
        if self.phase == Phase::AtPrompt {
            self.phase = Phase::Busy;
        }
    }

    /// Where the shell is between its marks.
    #[cfg(test)]
    fn phase(&self) -> Phase {
        self.phase
    }
}

#[cfg(test)]
mod tests;
