//! The core driven by scenarios in a small step language: what the program prints (bash's
//! marks included), what callers ask, what the scripted terminal says when asked (its modes,
//! foreground group, a blocked reader), time passing; and checks of what the core answered,
//! wrote, signalled and published. No process, no PTY: every decision of the session core is
//! here, as the integration tests in `tests/` see it through a real shell.

use super::*;
use crate::error::Result;
use crate::process::stdin_probe::Reader;
use crate::session::{JobStatus, SendOutcome};
use crate::waiting::WaitReason;
use nix::sys::signal::Signal;
use std::collections::{HashMap, VecDeque};

/// The session's shell.
const SHELL: i32 = 100;
/// A command the shell runs (its own process group).
const CHILD: i32 = 200;

/// The terminal's OS side, as a scenario sets it.
struct Script {
    foreground: Option<i32>,
    canonical: bool,
    echo: bool,
    hidden: bool,
    input_pending: bool,
    /// Output already there for `read_now`.
    waiting: VecDeque<Vec<u8>>,
    reader: Option<Reader>,
    /// Schedule counts now, by thread.
    switches: HashMap<i32, u64>,
    comms: HashMap<i32, String>,
    /// Signals sent, in order.
    signalled: Vec<(i32, Signal)>,
    resized: Vec<(u16, u16)>,
}

impl Default for Script {
    fn default() -> Script {
        Script {
            foreground: Some(SHELL),
            canonical: false,
            echo: false,
            hidden: false,
            input_pending: false,
            waiting: VecDeque::new(),
            reader: None,
            switches: HashMap::from([(SHELL, 1)]),
            comms: HashMap::from([(SHELL, "bash".into()), (CHILD, "sleep".into())]),
            signalled: Vec::new(),
            resized: Vec::new(),
        }
    }
}

impl Tty for Script {
    fn program(&self) -> i32 {
        SHELL
    }
    fn foreground_group(&self) -> Option<i32> {
        self.foreground
    }
    fn modes(&self) -> Option<Modes> {
        Some(Modes {
            canonical: self.canonical,
            echo: self.echo,
        })
    }
    fn input_hidden(&self) -> bool {
        self.hidden
    }
    fn input_pending(&self) -> bool {
        self.input_pending
    }
    fn output_waiting(&self) -> usize {
        self.waiting.iter().map(Vec::len).sum()
    }
    fn read_now(&mut self, _limit: usize) -> Option<Vec<u8>> {
        self.waiting.pop_front()
    }
    fn slice_spent(&self) -> bool {
        false
    }
    fn reader(&self) -> Option<Reader> {
        self.reader.clone()
    }
    fn switches(&mut self, _shell_at_prompt: bool) -> HashMap<i32, u64> {
        self.switches.clone()
    }
    fn comm(&self, pid: i32) -> Option<String> {
        self.comms.get(&pid).cloned()
    }
    fn cwd(&self) -> String {
        "/work".into()
    }
    fn signal(&mut self, group: i32, signal: Signal) -> nix::Result<()> {
        self.signalled.push((group, signal));
        Ok(())
    }
    fn resize(&mut self, cols: u16, rows: u16) -> std::io::Result<()> {
        self.resized.push((cols, rows));
        Ok(())
    }
}

/// bash's marks as ptyd's integration prints them (a test session reports every mark).
const PROMPT: &[u8] = b"\x1b]133;A\x07$ \x1b]133;B\x07";
const START: &[u8] = b"\x1b]133;C\x07";
fn end(code: i32) -> Vec<u8> {
    format!("\x1b]133;D;{code}\x07").into_bytes()
}

/// One step of a scenario.
enum Step {
    /// The program prints this.
    Out(Vec<u8>),
    /// bash answers the line just written: echo, start mark, `output`, end mark, next prompt.
    Runs(&'static str, i32),
    /// bash starts the line just written: echo and start mark (the command keeps running).
    Starts,
    /// A send of this text (submitted) arrives.
    Send(&'static str),
    /// The same, with typeahead allowed.
    SendAhead(&'static str),
    /// An `Open` waits for the session to be ready.
    AwaitReady,
    /// A pure wait arrives.
    Wait,
    /// The caller of the send in flight hangs up.
    HangUp,
    /// A `Signal` request arrives.
    Signal(Signal),
    /// A background send of this text arrives, as job `j1`.
    Job(&'static str),
    /// `JobKill` of job `j1` arrives.
    KillJob,
    /// The actor writes whatever the core lets it write now, all of it.
    WriteAll,
    /// Time passes (ms), and the core's deadline, if it came, ticks.
    Elapse(u64),
    /// The terminal now: its foreground group, line mode, a reader blocked on it (pid, whether
    /// it is the shell, its schedule count).
    Foreground(i32),
    Canonical(bool),
    Reader(i32, bool, u64),
    /// Output the program wrote that the core finds when it reads (before deciding).
    Waiting(Vec<u8>),
    /// The program exits.
    Exit(i32),
    /// Checks: the oldest unchecked answer (reason, exit code, text its output holds; an
    /// integrated shell's output starts after the echoed command).
    Answered(WaitReason, Option<i32>, &'static str),
    /// Checks: the newest send is refused, its message holding this.
    Refused(&'static str),
    /// Checks: no unchecked send has its answer yet.
    Pending,
    /// Checks: what was written to the terminal since the last check.
    Wrote(&'static [u8]),
    /// Checks: the signals sent so far.
    Signalled(&'static [(i32, Signal)]),
    /// Checks: the oldest unchecked `Signal` answer (the group, or an error holding this).
    SignalAnswer(std::result::Result<i32, &'static str>),
    /// Checks: the oldest unchecked `JobKill` answer.
    KillAnswer(Option<JobStatus>),
    /// Checks: whether the `Open` waiting is answered (the oldest unanswered one).
    ReadyNow(bool),
    /// Checks: the newest published state says the program exited.
    ExitedNow(bool),
    /// Checks: the newest published state says the session is busy.
    Busy(bool),
}
use Step::*;

/// A session core and its scripted terminal, with the time and what came out.
struct Session {
    core: Core,
    tty: Script,
    now: Instant,
    answers: VecDeque<oneshot::Receiver<Result<SendOutcome>>>,
    signal_answers: VecDeque<oneshot::Receiver<Result<i32>>>,
    kill_answers: VecDeque<oneshot::Receiver<Option<JobStatus>>>,
    ready_answers: VecDeque<oneshot::Receiver<Ready>>,
    written: Vec<u8>,
    published: Option<SessionState>,
    /// `Effect::Answered` seen and not yet matched by an `Answered` step.
    answered: usize,
}

fn spec() -> SessionSpec {
    SessionSpec {
        id: "t1".into(),
        owner: "agent".into(),
        name: String::new(),
        type_name: "bash".into(),
        argv: vec!["bash".into()],
        env: Vec::new(),
        cwd: "/work".into(),
        cols: 80,
        rows: 24,
        integration: Integration::Bash,
        mark_key: crate::marks::MarkKey::unverified(),
        history_lines: 10_000,
        history_bytes: 1 << 20,
        startup_timeout: Duration::from_secs(10),
        startup_idle: Duration::from_millis(300),
        close_grace: Duration::from_millis(100),
        process_tracking: crate::process::ProcessTracking::Subreaper,
        sandbox: None,
        sandbox_plan: None,
    }
}

impl Session {
    /// A bash session at its first prompt.
    fn at_prompt() -> Session {
        let mut s = Session::starting();
        s.event(Event::Output(PROMPT));
        s
    }

    /// A bash session whose rc files still run.
    fn starting() -> Session {
        let now = Instant::now();
        Session {
            core: Core::new(Arc::new(spec()), CommandBook::default(), now),
            tty: Script::default(),
            now,
            answers: VecDeque::new(),
            signal_answers: VecDeque::new(),
            kill_answers: VecDeque::new(),
            ready_answers: VecDeque::new(),
            written: Vec::new(),
            published: None,
            answered: 0,
        }
    }

    fn event(&mut self, event: Event<'_>) {
        for effect in self.core.handle(event, self.now, 0, &mut self.tty) {
            match effect {
                Effect::Publish(state) => self.published = Some(state),
                Effect::Answered => self.answered += 1,
                _ => {}
            }
        }
    }

    fn send(&mut self, input: SendInput) {
        let (tx, rx) = oneshot::channel();
        self.answers.push_back(rx);
        self.event(Event::Request(Command::Send(input, Sink::Reply(tx))));
    }

    /// Writes what may be written, as the actor's loop does, until nothing may.
    fn write_all(&mut self) {
        loop {
            let write = self.core.next_write(self.now, &mut self.tty);
            let (pending, _, _) = self.core.waits(write);
            if write == Write::Nothing || pending.is_empty() {
                return;
            }
            let n = pending.len();
            self.written.extend_from_slice(pending);
            self.event(if write == Write::Replies {
                Event::RepliesWritten(Ok(n))
            } else {
                Event::InputWritten(Ok(n))
            });
        }
    }

    fn elapse(&mut self, ms: u64) {
        let until = self.now + Duration::from_millis(ms);
        while let Some(at) = self.core.next_deadline(self.now).filter(|at| *at <= until) {
            self.now = at.max(self.now);
            self.event(Event::Tick);
        }
        self.now = until;
    }

    /// The line last written, without its Enter.
    fn last_line(&self) -> String {
        let text = String::from_utf8_lossy(&self.written);
        let text = text.trim_end_matches('\r');
        text.rsplit('\r').next().unwrap_or_default().to_owned()
    }

    fn run(&mut self, name: &str, steps: Vec<Step>) {
        for (i, step) in steps.into_iter().enumerate() {
            let at = format!("{name}, step {i}");
            match step {
                Out(bytes) => self.event(Event::Output(&bytes)),
                Runs(output, code) => {
                    let line = self.last_line();
                    let mut bytes = format!("{line}\r\n").into_bytes();
                    bytes.extend_from_slice(START);
                    bytes.extend(format!("{output}\r\n").bytes());
                    bytes.extend(end(code));
                    bytes.extend_from_slice(PROMPT);
                    self.event(Event::Output(&bytes));
                }
                Starts => {
                    let mut bytes = format!("{}\r\n", self.last_line()).into_bytes();
                    bytes.extend_from_slice(START);
                    self.event(Event::Output(&bytes));
                }
                Send(text) => self.send(SendInput::typed(text)),
                SendAhead(text) => self.send(SendInput {
                    typeahead: true,
                    ..SendInput::typed(text)
                }),
                AwaitReady => {
                    let (tx, rx) = oneshot::channel();
                    self.ready_answers.push_back(rx);
                    self.event(Event::Request(Command::Ready(tx)));
                }
                ReadyNow(want) => {
                    let answer = self.ready_answers.front_mut().expect("an Open to check");
                    let answered = answer.try_recv().is_ok();
                    assert_eq!(answered, want, "{at}");
                    if answered {
                        self.ready_answers.pop_front();
                    }
                }
                ExitedNow(want) => assert_eq!(
                    self.published
                        .as_ref()
                        .map(|s| matches!(s.status, crate::session::Status::Exited(_))),
                    Some(want),
                    "{at}"
                ),
                Wait => self.send(SendInput {
                    submit: false,
                    ..SendInput::typed("")
                }),
                HangUp => {
                    drop(self.answers.pop_back());
                    self.event(Event::CallerGone);
                }
                Signal(signal) => {
                    let (tx, rx) = oneshot::channel();
                    self.signal_answers.push_back(rx);
                    self.event(Event::Request(Command::Signal(signal, tx)));
                }
                Job(text) => {
                    let (confirm, _) = oneshot::channel();
                    let sink = Sink::Job("j1".into(), confirm);
                    self.event(Event::Request(Command::Send(SendInput::typed(text), sink)));
                }
                KillJob => {
                    let (tx, rx) = oneshot::channel();
                    self.kill_answers.push_back(rx);
                    self.event(Event::Request(Command::JobKill("j1".into(), tx)));
                }
                WriteAll => self.write_all(),
                Elapse(ms) => self.elapse(ms),
                Foreground(group) => self.tty.foreground = Some(group),
                Canonical(on) => self.tty.canonical = on,
                Reader(pid, is_shell, switches) => {
                    self.tty.switches.insert(pid, switches);
                    self.tty.reader = Some(Reader {
                        pid,
                        tid: pid,
                        switches,
                        comm: self.tty.comm(pid).unwrap_or_default(),
                        is_shell,
                    });
                }
                Waiting(bytes) => self.tty.waiting.push_back(bytes),
                Exit(code) => self.event(Event::Exited(ExitKind::Code(code))),
                Answered(reason, exit, line) => {
                    let mut answer = self.answers.pop_front().expect("a send to check");
                    let outcome = answer
                        .try_recv()
                        .unwrap_or_else(|_| panic!("{at}: no answer yet"))
                        .unwrap_or_else(|e| panic!("{at}: refused: {e}"));
                    // The actor lets the answer go out before the rest of the event's effects.
                    assert!(self.answered > 0, "{at}: answered without Effect::Answered");
                    self.answered -= 1;
                    assert_eq!(
                        (outcome.reason, outcome.exit_code),
                        (reason, exit),
                        "{at}: {}",
                        outcome.rendered
                    );
                    assert!(
                        outcome.viewport.contains(line),
                        "{at}: no {line:?} in {:?}",
                        outcome.viewport
                    );
                }
                Refused(message) => {
                    let mut answer = self.answers.pop_back().expect("a send to check");
                    match answer.try_recv() {
                        Ok(Err(e)) => assert!(e.to_string().contains(message), "{at}: {e}"),
                        other => panic!("{at}: not refused: {:?}", other.map(|r| r.is_ok())),
                    }
                }
                Pending => {
                    for answer in &mut self.answers {
                        assert!(answer.try_recv().is_err(), "{at}: answered already");
                    }
                }
                Wrote(bytes) => {
                    assert_eq!(
                        String::from_utf8_lossy(&self.written),
                        String::from_utf8_lossy(bytes),
                        "{at}"
                    );
                    self.written.clear();
                }
                Signalled(want) => assert_eq!(self.tty.signalled, want, "{at}"),
                SignalAnswer(want) => {
                    let mut answer = self.signal_answers.pop_front().expect("a signal to check");
                    match (answer.try_recv(), want) {
                        (Ok(Ok(group)), Ok(want)) => assert_eq!(group, want, "{at}"),
                        (Ok(Err(e)), Err(want)) => {
                            assert!(e.to_string().contains(want), "{at}: {e}")
                        }
                        (got, _) => panic!("{at}: {:?}", got.map(|r| r.map_err(|e| e.to_string()))),
                    }
                }
                KillAnswer(want) => {
                    let mut answer = self.kill_answers.pop_front().expect("a kill to check");
                    let got = answer.try_recv();
                    assert_eq!(got.ok(), Some(want), "{at}");
                }
                Busy(busy) => {
                    assert_eq!(self.published.as_ref().map(|s| s.busy), Some(busy), "{at}")
                }
            }
        }
    }
}

fn scenario(name: &str, steps: Vec<Step>) {
    Session::at_prompt().run(name, steps);
}

/// A scenario that starts while the shell's rc files run.
fn from_start(name: &str, steps: Vec<Step>) {
    Session::starting().run(name, steps);
}

mod kill;
mod lifecycle;
mod probe;
mod replies;
mod settle;
mod signals;
mod typeahead;
