//! The send in flight: what it waits for (its deadlines, the command marks it collected, a
//! program blocked reading the terminal, a JobKill in progress), where its result goes (a unary
//! caller, a streaming caller that also gets the raw output, or a background job), and the
//! metadata lines of its model-facing result.

use super::kill::JobKill;
use super::shell::{CommandEnd, CommandSpan};
use super::{SendInput, SendOutcome, Sink, Status, status_text, view};
use crate::error::{Error, Result};
use crate::marks::{Integration, MarkKey, RegionScanner, Utf8Splitter};
use crate::render;
use crate::screen::{Position, Terminal};
use crate::validate::{KERNEL_LINE_LIMIT, longest_line};
use crate::waiting::{Deadlines, WaitReason};
use std::collections::VecDeque;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// Raw bytes a streaming caller may fall behind by before the oldest are dropped.
const STREAM_BACKLOG: usize = 8 << 20;
/// The most raw output one stream event carries. Output a slow caller has not taken yet is
/// coalesced into events of at most this size (fewer, larger messages help a caller catch up),
/// well under the 4 MiB message limit gRPC clients have by default.
const STREAM_EVENT_MAX: usize = 256 << 10;

/// What a send's result says beyond its wait: how a person answers a prompt whose input is
/// hidden (`ptyd attach t1`), and what a person typed since the agent's last result.
#[derive(Debug, Default)]
pub(super) struct Notes {
    /// Set when the program reads a password: the command that reaches the session.
    pub hidden_input: Option<String>,
    /// `[a person typed in this session: c14]`.
    pub person_typed: Option<String>,
}

/// The send being waited on.
pub(super) struct ActiveSend {
    pub input: SendInput,
    pub sink: ActiveSink,
    pub started: Instant,
    /// Where the viewport starts when no command-start mark arrives.
    pub anchor: Position,
    /// The command marks seen during this send.
    pub span: CommandSpan,
    /// Last output or write.
    pub last_activity: Instant,
    /// The probe found a program blocked reading the terminal.
    pub stdin_blocked: bool,
    /// Bytes that could not be written before the deadline.
    pub unwritten: usize,
    /// Bytes the send writes in all (text, Enter, keys).
    pub input_len: usize,
    /// Set by JobKill: finish as killed when the command ends or the kill gives up.
    pub killing: Option<JobKill>,
}

/// Where the result of the send in flight goes.
pub(super) enum ActiveSink {
    /// A unary caller.
    Reply(oneshot::Sender<Result<SendOutcome>>),
    /// A streaming caller: its raw output while it runs, then the result.
    Stream(oneshot::Sender<Result<SendOutcome>>, StreamSink),
    /// The background job with this id.
    Job(String),
}

/// A job's send that ended, for the job table to record.
pub(super) struct JobEnd {
    pub id: String,
    pub outcome: std::result::Result<SendOutcome, Error>,
    /// The JobKill in progress, whose callers hear how the job ended.
    pub kill: Option<JobKill>,
}

impl ActiveSend {
    pub(super) fn new(input: SendInput, sink: ActiveSink, anchor: Position, now: Instant) -> Self {
        ActiveSend {
            span: CommandSpan {
                writes_input: !input.is_pure_wait(),
                ..CommandSpan::default()
            },
            input,
            sink,
            started: now,
            anchor,
            last_activity: now,
            stdin_blocked: false,
            unwritten: 0,
            input_len: 0,
            killing: None,
        }
    }

    /// The send's result for `reason`, where its viewport ended, and the end line as the
    /// command-end mark found it (`ends`: the lines the newest end marks found), when the
    /// viewport ends at a mark. `status` gives the program's exit code, once it exited.
    pub(super) fn outcome(
        &self,
        reason: WaitReason,
        terminal: &Terminal,
        ends: &view::EndLines,
        status: Status,
        cwd: String,
        notes: Notes,
    ) -> (SendOutcome, Position, Option<String>) {
        let exit_code = match status {
            Status::Exited(crate::process::pty::ExitKind::Code(c)) => Some(c),
            _ => None,
        };
        let (exit_code, end, end_line) = match (reason, self.span.end) {
            (WaitReason::Prompt, Some(CommandEnd { exit_code, at })) => {
                (exit_code, at, ends.at(at))
            }
            (WaitReason::SessionExit, _) => (exit_code, terminal.cursor(), None),
            _ => (None, terminal.cursor(), None),
        };
        let start = self.span.start.unwrap_or(self.anchor);
        let lines = match self.span.ran_before {
            // Typeahead: the rest of the command that ran when the send began, then the typed
            // command's output; never the prompt and the echoed text between them.
            Some(before) if !terminal.alternate_screen() => {
                let mut lines =
                    view::region_lines(terminal, self.anchor.line, before, ends.at(before));
                if self.span.start.is_some() {
                    lines.extend(view::region_lines(terminal, start.line, end, end_line));
                }
                lines
            }
            _ => view::viewport(terminal, start.line, end, end_line),
        };
        let input_hidden = notes.hidden_input.is_some();
        let meta = outcome_meta(
            Wait {
                reason,
                exit_code,
                status,
            },
            self.unwritten,
            self.input_len,
            notes,
        );
        let capped = render::with_meta(
            &lines.join("\n"),
            "(no new output)",
            &meta,
            self.input.max_result_bytes,
        );
        let outcome = SendOutcome {
            viewport: capped.body,
            reason,
            status,
            exit_code,
            truncated: capped.truncated,
            input_hidden,
            cwd,
            elapsed: self.started.elapsed(),
            rendered: capped.rendered,
        };
        (outcome, end, end_line.map(str::to_owned))
    }

    pub(super) fn deadlines(&self) -> Deadlines {
        Deadlines {
            timeout: self.started + self.input.timeout,
            idle: self.last_activity + self.input.idle,
        }
    }

    /// The nearest time the send must be looked at again.
    pub(super) fn next_deadline(&self, now: Instant) -> Instant {
        let d = self.deadlines();
        let kill = self.killing.as_ref().map(|k| k.next_check(now));
        kill.map_or(d.timeout.min(d.idle), |k| k.min(d.timeout).min(d.idle))
    }

    /// The id of the job this send is, if it is one.
    pub(super) fn job_id(&self) -> Option<&str> {
        match &self.sink {
            ActiveSink::Job(id) => Some(id),
            _ => None,
        }
    }

    /// Hands raw output to a streaming caller.
    pub(super) fn forward(&mut self, bytes: &[u8]) {
        if let ActiveSink::Stream(_, stream) = &mut self.sink {
            stream.forward(bytes);
        }
    }

    /// The refusal a second send gets while this one is in flight.
    pub(super) fn busy_error(&self, session: &str) -> Error {
        busy_error(session, self.job_id())
    }

    /// Hands the settled send's result to its caller; a job's goes back to the job table.
    pub(super) fn settle(self, outcome: SendOutcome) -> Option<JobEnd> {
        self.end(Ok(outcome))
    }

    /// The send could not be carried out.
    pub(super) fn fail(self, error: Error) -> Option<JobEnd> {
        self.end(Err(error))
    }

    fn end(self, outcome: std::result::Result<SendOutcome, Error>) -> Option<JobEnd> {
        match self.sink {
            ActiveSink::Reply(reply) => {
                let _ = reply.send(outcome);
            }
            ActiveSink::Stream(reply, mut stream) => {
                // Whatever is left of the stream goes out before the result.
                let rest = std::mem::take(&mut stream.backlog);
                if rest.is_empty() {
                    let _ = reply.send(outcome);
                } else {
                    let chunks = stream.chunks.clone();
                    tokio::spawn(async move {
                        for event in rest {
                            if chunks.send(event).await.is_err() {
                                break;
                            }
                        }
                        let _ = reply.send(outcome);
                    });
                }
            }
            ActiveSink::Job(id) => {
                return Some(JobEnd {
                    id,
                    outcome,
                    kill: self.killing,
                });
            }
        }
        None
    }
}

/// The refusal a send gets while another (background job `job`, if it is one) is in flight.
pub(super) fn busy_error(session: &str, job: Option<&str>) -> Error {
    match job {
        Some(id) => Error::FailedPrecondition(format!(
            "terminal session {session} is busy with background job {id}; {}",
            crate::error::advice::JOB
        )),
        None => Error::FailedPrecondition(format!(
            "terminal session {session} is busy with another send; wait for it to return"
        )),
    }
}

impl Sink {
    /// The caller of a send that has not begun hung up (never for a job).
    pub(super) fn caller_gone(&self) -> bool {
        match self {
            Sink::Reply(r) | Sink::Stream(r, _) => r.is_closed(),
            Sink::Job(..) => false,
        }
    }

    /// The background job a send that has not begun is, if it is one.
    pub(super) fn job_id(&self) -> Option<&str> {
        match self {
            Sink::Job(id, _) => Some(id),
            _ => None,
        }
    }

    /// Refuses a send before it starts.
    pub(super) fn refuse(self, error: Error) {
        match self {
            Sink::Reply(r) | Sink::Stream(r, _) => {
                let _ = r.send(Err(error));
            }
            Sink::Job(_, r) => {
                let _ = r.send(Err(error));
            }
        }
    }
}

/// Resolves when the caller of the send in flight hung up (never for a job).
pub(super) async fn caller_gone(active: &mut Option<ActiveSend>) {
    match active.as_mut().map(|a| &mut a.sink) {
        Some(ActiveSink::Reply(r)) | Some(ActiveSink::Stream(r, _)) => r.closed().await,
        _ => std::future::pending().await,
    }
}

/// Refuses text with a line that a program reading in line mode (`canonical`, asked only for
/// a long line) would lose past the kernel's limit.
pub(super) fn line_limit_refusal(text: &str, canonical: impl FnOnce() -> bool) -> Option<Error> {
    let longest = longest_line(text.as_bytes());
    (longest > KERNEL_LINE_LIMIT && canonical()).then(|| {
        Error::invalid(format!(
            "text has a line of {longest} bytes, but the program reads the terminal in line \
             mode, where the kernel keeps at most {KERNEL_LINE_LIMIT} bytes of a line; split \
             the line or write the data to a file"
        ))
    })
}

/// How a send's wait ended.
#[derive(Debug, Clone, Copy)]
struct Wait {
    reason: WaitReason,
    exit_code: Option<i32>,
    status: Status,
}

/// The metadata lines under a send's output: why it returned (and how a person answers a
/// hidden prompt), the exit code, the session's status, input the deadline cut short, and what
/// a person typed.
fn outcome_meta(wait: Wait, unwritten: usize, input_len: usize, notes: Notes) -> Vec<String> {
    let Wait {
        reason,
        exit_code,
        status,
    } = wait;
    let mut meta = vec![match notes.hidden_input {
        Some(how) => format!(
            "[wait: {} (input hidden: a password prompt; a person can type it: {how})]",
            reason.name()
        ),
        None => format!("[wait: {}]", reason.name()),
    }];
    if let Some(code) = exit_code {
        meta.push(format!("[exit code: {code}]"));
    }
    meta.push(format!("[session: {}]", status_text(status)));
    if unwritten > 0 {
        meta.push(format!(
            "[input incomplete: {unwritten} of {input_len} bytes were not written before the deadline]"
        ));
    }
    meta.extend(notes.person_typed);
    meta
}

/// Raw output forwarding for a streaming send.
pub(super) struct StreamSink {
    chunks: mpsc::Sender<Vec<u8>>,
    /// Only the command's output region for integrated shells.
    region: Option<RegionScanner>,
    utf8: Utf8Splitter,
    /// Output the caller has not taken yet, as events of at most `STREAM_EVENT_MAX` bytes,
    /// each ending on a character boundary.
    backlog: VecDeque<Vec<u8>>,
    backlog_bytes: usize,
}

impl StreamSink {
    /// A sink for a shell of `integration` whose marks carry `key`.
    pub(super) fn new(
        chunks: mpsc::Sender<Vec<u8>>,
        integration: Integration,
        key: MarkKey,
    ) -> StreamSink {
        StreamSink {
            chunks,
            region: (integration != Integration::None)
                .then(|| RegionScanner::new(integration, key)),
            utf8: Utf8Splitter::default(),
            backlog: VecDeque::new(),
            backlog_bytes: 0,
        }
    }

    /// Takes a chunk of raw PTY output: picks the command's region, holds back an incomplete
    /// character, and hands the caller as much as its channel has room for.
    fn forward(&mut self, bytes: &[u8]) {
        let piece = match self.region.as_mut() {
            Some(region) => {
                let mut picked = Vec::new();
                region.scan(bytes, &mut picked);
                self.utf8.split(&picked)
            }
            None => self.utf8.split(bytes),
        };
        self.push(piece);
        self.flush();
    }

    /// Queues `piece`, coalescing it into the newest waiting event while that has room; drops
    /// the oldest events when the caller falls more than `STREAM_BACKLOG` behind.
    fn push(&mut self, mut piece: Vec<u8>) {
        self.backlog_bytes += piece.len();
        while !piece.is_empty() {
            match self.backlog.back_mut() {
                Some(last) if last.len() + piece.len() <= STREAM_EVENT_MAX => {
                    last.extend_from_slice(&piece);
                    piece.clear();
                }
                _ if piece.len() <= STREAM_EVENT_MAX => {
                    self.backlog.push_back(std::mem::take(&mut piece));
                }
                _ => {
                    let cut = char_boundary_before(&piece, STREAM_EVENT_MAX);
                    let rest = piece.split_off(cut);
                    self.backlog.push_back(std::mem::replace(&mut piece, rest));
                }
            }
        }
        while self.backlog_bytes > STREAM_BACKLOG {
            match self.backlog.pop_front() {
                Some(dropped) => self.backlog_bytes -= dropped.len(),
                None => break,
            }
        }
    }

    /// Hands waiting events to the caller as far as its channel has room.
    fn flush(&mut self) {
        while let Some(event) = self.backlog.pop_front() {
            let len = event.len();
            match self.chunks.try_send(event) {
                Ok(()) => self.backlog_bytes -= len,
                Err(mpsc::error::TrySendError::Full(event)) => {
                    self.backlog.push_front(event);
                    break;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    // The caller is gone; the actor sees its hang-up next.
                    self.backlog.clear();
                    self.backlog_bytes = 0;
                    break;
                }
            }
        }
    }
}

/// The largest cut at most `max` that does not split a UTF-8 character (or `max` when the
/// bytes there are no UTF-8).
fn char_boundary_before(bytes: &[u8], max: usize) -> usize {
    (max.saturating_sub(3)..=max)
        .rev()
        .find(|&i| bytes.get(i).is_none_or(|b| b & 0xC0 != 0x80))
        .unwrap_or(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::pty::ExitKind;

    #[test]
    fn result_metadata_lines() {
        type Case = (
            WaitReason,
            Option<i32>,
            Status,
            usize,
            &'static [&'static str],
        );
        let cases: [Case; 3] = [
            (
                WaitReason::Prompt,
                Some(0),
                Status::Running,
                0,
                &["[wait: prompt]", "[exit code: 0]", "[session: running]"],
            ),
            (
                WaitReason::SessionExit,
                Some(3),
                Status::Exited(ExitKind::Code(3)),
                0,
                &[
                    "[wait: session_exit]",
                    "[exit code: 3]",
                    "[session: exited code=3 signal=null]",
                ],
            ),
            (
                WaitReason::Timeout,
                None,
                Status::Running,
                5,
                &[
                    "[wait: timeout]",
                    "[session: running]",
                    "[input incomplete: 5 of 9 bytes were not written before the deadline]",
                ],
            ),
        ];
        for (reason, exit_code, status, unwritten, want) in cases {
            let wait = Wait {
                reason,
                exit_code,
                status,
            };
            let meta = outcome_meta(wait, unwritten, 9, Notes::default());
            assert_eq!(meta, want);
        }
    }

    #[test]
    fn a_hidden_prompt_says_how_a_person_answers_and_a_persons_typing_is_told() {
        let wait = Wait {
            reason: WaitReason::StdinRead,
            exit_code: None,
            status: Status::Running,
        };
        let notes = Notes {
            hidden_input: Some("ptyd attach t1".into()),
            person_typed: Some("[a person typed in this session: c4]".into()),
        };
        assert_eq!(
            outcome_meta(wait, 0, 9, notes),
            [
                "[wait: stdin_read (input hidden: a password prompt; a person can type it: \
                 ptyd attach t1)]",
                "[session: running]",
                "[a person typed in this session: c4]",
            ]
        );
    }

    fn sink(capacity: usize) -> (StreamSink, mpsc::Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(capacity);
        (
            StreamSink::new(tx, Integration::None, MarkKey::unverified()),
            rx,
        )
    }

    #[test]
    fn a_slow_caller_gets_events_no_larger_than_the_bound_and_loses_nothing() {
        let (mut s, mut rx) = sink(2);
        // 3 MiB of output in 16 KiB reads, with a two-byte character across every read.
        let text: Vec<u8> = "é0123456789".repeat(300_000).into_bytes();
        let mut sent = Vec::new();
        for chunk in text.chunks(16 * 1024 + 1) {
            s.forward(chunk);
            sent.extend_from_slice(chunk);
        }
        assert!(s.backlog_bytes > 0, "the caller fell behind");
        let mut got = Vec::new();
        let mut events = 0;
        loop {
            while let Ok(event) = rx.try_recv() {
                assert!(
                    event.len() <= STREAM_EVENT_MAX,
                    "an event of {}",
                    event.len()
                );
                assert!(
                    std::str::from_utf8(&event).is_ok(),
                    "cut inside a character"
                );
                got.extend(event);
                events += 1;
            }
            if s.backlog.is_empty() {
                break;
            }
            s.flush();
        }
        assert_eq!(got, sent, "every byte once, in order");
        assert!(events < 40, "the backlog was coalesced ({events} events)");
    }

    #[test]
    fn a_caller_far_behind_loses_the_oldest_output_first() {
        let (mut s, _rx) = sink(1);
        let mut sent = Vec::new();
        for i in 0..1_000_000u32 {
            let line = format!("{i:07}\r\n");
            s.forward(line.as_bytes());
            sent.extend_from_slice(line.as_bytes());
        }
        assert!(s.backlog_bytes <= STREAM_BACKLOG);
        let kept: Vec<u8> = s.backlog.iter().flatten().copied().collect();
        assert_eq!(kept.len(), s.backlog_bytes);
        assert!(sent.ends_with(&kept), "the newest output is kept");
        assert!(kept.len() > STREAM_BACKLOG - STREAM_EVENT_MAX);
    }
}
