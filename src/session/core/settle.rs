//! A send's life in the core: begun (refused, or its input handed to the shell state), its
//! input written, its caller gone, and settled when the wait decision names a reason, with its
//! job's state kept for a successor.

use super::{Core, Cx, Effect, SPIN, Tty};
use crate::error::Error;
use crate::screen::Position;
use crate::session::input::FirstWrite;
use crate::session::send::{ActiveSend, ActiveSink, JobEnd, Notes, StreamSink, line_limit_refusal};
use crate::session::{JobStatus, SendInput, Sink};
use crate::waiting::{self, Observed, WaitReason};
use std::time::Instant;

impl Core {
    pub(super) fn begin_send(&mut self, cx: &mut Cx<'_>, input: SendInput, sink: Sink) {
        let mut types_ahead = false;
        let refusal = if let Some(a) = &self.active {
            Some(a.busy_error(&self.spec.id))
        } else if self.exited() {
            Some(self.exited_error())
        } else if let Some(holder) = self.keyboard.holder().filter(|_| !input.is_pure_wait()) {
            Some(Error::FailedPrecondition(format!(
                "a person is typing in {} ({holder}); retry after they detach",
                self.spec.id
            )))
        } else {
            let canonical = cx.tty.modes().is_some_and(|m| m.canonical);
            line_limit_refusal(&input.text, || canonical).or_else(|| {
                types_ahead = self.types_ahead(cx, &input);
                (types_ahead && !input.typeahead).then(|| self.typeahead_refusal(cx))
            })
        };
        if let Some(error) = refusal {
            sink.refuse(error);
            return;
        }
        let anchor = Position {
            line: self.last_seen.line.max(1),
            col: 0,
        };
        let sink = match sink {
            Sink::Reply(r) => ActiveSink::Reply(r),
            Sink::Stream(r, chunks) => {
                let key = self.spec.mark_key.clone();
                ActiveSink::Stream(r, StreamSink::new(chunks, self.spec.integration, key))
            }
            Sink::Job(id, confirm) => {
                self.jobs.start(id.clone(), anchor.line);
                let _ = confirm.send(Ok(()));
                ActiveSink::Job(id)
            }
        };
        let mut active = ActiveSend::new(input, sink, anchor, cx.now);
        if active.input.is_pure_wait() {
            // Report a command that ended meanwhile, or an idle prompt, at once.
            active.span.end = self.shell.begin_wait(self.last_seen);
        } else {
            let bracketed_paste =
                active.input.text.contains('\n') && self.terminal.bracketed_paste();
            active.input_len = self.shell.begin_input(&active.input, bracketed_paste);
            if types_ahead {
                self.shell.hold_input();
            }
        }
        let job = active.job_id().is_some();
        self.active = Some(active);
        if job {
            self.save_jobs(cx);
        }
        self.probe.rearm(cx.now);
        self.publish(cx);
    }

    /// Just before a send's first byte is written (its input may have waited for the prompt):
    /// takes the schedule counts the input is judged against, so that what ran meanwhile does
    /// not count as taking it, and encodes multi-line input again, since whether the shell's
    /// line editor takes bracketed paste is known only once its prompt is up.
    pub(super) fn before_first_write(&mut self, tty: &mut dyn Tty, to: FirstWrite) {
        self.probe.before_write(tty.switches(to.at_prompt));
        if let Some(a) = self.active.as_mut().filter(|a| a.input.text.contains('\n')) {
            a.input_len = self
                .shell
                .encode_again(&a.input, to, self.terminal.bracketed_paste());
        }
    }

    pub(super) fn on_written(&mut self, cx: &mut Cx<'_>, written: std::io::Result<usize>) {
        match written {
            Ok(n) => {
                if let Some(a) = self.active.as_mut() {
                    a.last_activity = cx.now;
                }
                self.probe.rearm(cx.now);
                if self.shell.input_written(n) {
                    self.spin_until = Some(cx.now + SPIN);
                }
            }
            Err(e) => {
                let error = Error::FailedPrecondition(format!(
                    "writing to terminal session {} failed: {e}",
                    self.spec.id
                ));
                self.shell.drop_input();
                if let Some(a) = self.active.take() {
                    self.end_send(cx, a.fail(error));
                }
            }
        }
    }

    /// The caller of the send in flight hung up (or its deadline passed): stop waiting and
    /// release the reservation; what was written stays written. Nobody saw the send's output, so
    /// the next send's viewport starts where this one's did: at its command's start mark when
    /// the command started (not before the prompt and the echoed line, where `last_seen` still
    /// is), as a settled send leaves `last_seen` where its viewport ended.
    pub(super) fn on_caller_gone(&mut self, cx: &mut Cx<'_>) {
        if let Some(a) = self.active.take()
            && let Some(start) = a.span.start
        {
            self.last_seen = start;
        }
        self.shell.drop_input();
        self.publish(cx);
    }

    pub(super) fn on_reply_written(&mut self, written: std::io::Result<usize>) {
        if let Err(e) = &written {
            tracing::debug!(session = %self.spec.id, error = %e, "answering a terminal query failed");
        }
        self.shell.replies_written(written.ok());
    }

    /// Settles readiness and the active send when their conditions hold.
    pub(super) fn evaluate(&mut self, cx: &mut Cx<'_>) {
        self.deliver_signals(cx);
        self.begin_deferred_send(cx);
        let now = cx.now;
        if self.lifecycle.wait_over(now, self.last_output) {
            self.become_ready(cx, "idle or deadline");
        }
        let Some(a) = self.active.as_ref() else {
            return;
        };
        let input_written = !self.shell.input_pending();
        let observed = Observed {
            exited: self.exited(),
            prompt_returned: a.span.end.is_some(),
            stdin_blocked: a.stdin_blocked,
            input_written,
        };
        let kill_gave_up = a.killing.as_ref().is_some_and(|k| k.gave_up(now));
        let reason = waiting::decide(&observed, &a.deadlines(), now)
            .or_else(|| kill_gave_up.then_some(WaitReason::Timeout));
        let Some(reason) = reason else { return };
        let mut a = self.active.take().expect("checked above");
        if !input_written {
            a.unwritten = self.shell.drop_input();
        }
        let notes = Notes {
            hidden_input: (reason == WaitReason::StdinRead && cx.tty.input_hidden())
                .then(|| self.how_a_person_answers(a.input.web_page.as_deref())),
            person_typed: self.keyboard.take_note(),
        };
        let (outcome, end, end_line) = a.outcome(
            reason,
            &self.terminal,
            &self.end_lines,
            self.status(),
            cx.tty.cwd(),
            notes,
        );
        self.last_seen = end;
        self.last_seen_line = end_line;
        self.end_send(cx, a.settle(outcome));
    }

    /// How a person types into this session: `ptyd attach t1` (the owner named when it is not
    /// the CLI's own agent), and the web page's address for it when one is served.
    fn how_a_person_answers(&self, web_page: Option<&str>) -> String {
        let attach = crate::session::attach_command(&self.spec.id, &self.spec.owner);
        match web_page {
            Some(page) => format!("{attach}, or on the web page {page}"),
            None => attach,
        }
    }

    /// Records a job's end (a kill in progress hears how it ended) and publishes that the
    /// session is free.
    pub(super) fn end_send(&mut self, cx: &mut Cx<'_>, ended: Option<JobEnd>) {
        if let Some(JobEnd { id, outcome, kill }) = ended {
            let status = match outcome {
                Ok(outcome) => {
                    let killed = kill.is_some();
                    let end_line = self.last_seen_line.take();
                    self.jobs
                        .finish(&id, killed, self.last_seen, end_line, outcome);
                    if killed {
                        JobStatus::Killed
                    } else {
                        JobStatus::Completed
                    }
                }
                Err(error) => {
                    self.jobs.fail(&id, error.to_string());
                    JobStatus::Failed
                }
            };
            if let Some(kill) = kill {
                kill.settled(status);
            }
            self.save_jobs(cx);
        } else {
            // A caller, not the job table, got the outcome.
            cx.effect(Effect::Answered);
        }
        self.publish(cx);
    }

    /// Keeps the jobs' state for a daemon adopting the session.
    pub(super) fn save_jobs(&mut self, cx: &mut Cx<'_>) {
        let mut records = self.jobs.records();
        if let Some(a) = &self.active
            && let Some(id) = a.job_id()
            && let Some(job) = records.iter_mut().find(|j| j.id == id)
        {
            let left = a.deadlines().timeout.saturating_duration_since(cx.now);
            job.wait = Some((
                cx.unix_ms + left.as_millis() as i64,
                a.input.idle.as_millis() as u64,
            ));
        }
        cx.effect(Effect::SaveJobs(records));
    }

    /// Whether the loop polls for output instead of sleeping: a send that just wrote its input
    /// waits for the answer.
    /// When the send whose answer a caller waits for began (none for a job, which nobody
    /// waits on).
    pub(in crate::session) fn answer_awaited_since(&self) -> Option<Instant> {
        self.active
            .as_ref()
            .filter(|a| !matches!(a.sink, ActiveSink::Job(_)))
            .map(|a| a.started)
    }

    pub(in crate::session) fn spinning(&self, now: Instant) -> bool {
        self.spin_until.is_some_and(|until| now < until)
            && self
                .active
                .as_ref()
                .is_some_and(|a| a.span.end.is_none() && !a.stdin_blocked)
    }
}
