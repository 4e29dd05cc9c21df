//! A send's life in the actor: begun (refused, or its input handed to the shell state), its
//! input written, its caller gone, and settled when the wait decision names a reason, with its
//! job's state kept for a successor.

use super::{Actor, SPIN};
use crate::error::Error;
use crate::screen::Position;
use crate::session::input::FirstWrite;
use crate::session::send::{ActiveSend, ActiveSink, JobEnd, Notes, StreamSink, line_limit_refusal};
use crate::session::{JobStatus, SendInput, Sink, unix_ms};
use crate::waiting::{self, Observed, WaitReason};
use std::time::{Instant, SystemTime};

impl Actor {
    pub(super) fn begin_send(&mut self, input: SendInput, sink: Sink) {
        let mut types_ahead = false;
        let refusal = if let Some(a) = &self.active {
            Some(a.busy_error(&self.spec.id))
        } else if self.exit.is_some() {
            Some(self.exited_error())
        } else if let Some(holder) = self.keyboard.holder().filter(|_| !input.is_pure_wait()) {
            Some(Error::FailedPrecondition(format!(
                "a person is typing in {} ({holder}); retry after they detach",
                self.spec.id
            )))
        } else {
            line_limit_refusal(&input.text, || {
                use nix::sys::termios::LocalFlags;
                self.pty
                    .termios()
                    .is_some_and(|t| t.local_flags.contains(LocalFlags::ICANON))
            })
            .or_else(|| {
                types_ahead = self.types_ahead(&input);
                (types_ahead && !input.typeahead).then(|| self.typeahead_refusal())
            })
        };
        if let Some(error) = refusal {
            sink.refuse(error);
            return;
        }
        let now = Instant::now();
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
        let mut active = ActiveSend::new(input, sink, anchor, now);
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
            self.save_jobs();
        }
        self.rearm_probe();
        self.publish();
    }

    /// Just before a send's first byte is written (its input may have waited for the prompt):
    /// takes the schedule counts the input is judged against, so that what ran meanwhile does
    /// not count as taking it, and encodes multi-line input again, since whether the shell's
    /// line editor takes bracketed paste is known only once its prompt is up.
    pub(super) fn before_first_write(&mut self, to: FirstWrite) {
        self.probe.before_write(self.pty.pid() as i32, to.at_prompt);
        if let Some(a) = self.active.as_mut().filter(|a| a.input.text.contains('\n')) {
            a.input_len = self
                .shell
                .encode_again(&a.input, to, self.terminal.bracketed_paste());
        }
    }

    pub(super) fn on_written(&mut self, written: std::io::Result<usize>) {
        match written {
            Ok(n) => {
                if let Some(a) = self.active.as_mut() {
                    a.last_activity = Instant::now();
                }
                self.rearm_probe();
                if self.shell.input_written(n) {
                    self.spin_until = Some(Instant::now() + SPIN);
                }
            }
            Err(e) => {
                let error = Error::FailedPrecondition(format!(
                    "writing to terminal session {} failed: {e}",
                    self.spec.id
                ));
                self.shell.drop_input();
                if let Some(a) = self.active.take() {
                    self.end_send(a.fail(error));
                }
            }
        }
    }

    /// The caller of the send in flight hung up (or its deadline passed): stop waiting and
    /// release the reservation; what was written stays written. Nobody saw the send's output, so
    /// the next send's viewport starts where this one's did: at its command's start mark when
    /// the command started (not before the prompt and the echoed line, where `last_seen` still
    /// is), as a settled send leaves `last_seen` where its viewport ended.
    pub(super) fn on_caller_gone(&mut self) {
        if let Some(a) = self.active.take()
            && let Some(start) = a.span.start
        {
            self.last_seen = start;
        }
        self.shell.drop_input();
        self.publish();
    }

    pub(super) fn on_reply_written(&mut self, written: std::io::Result<usize>) {
        if let Err(e) = &written {
            tracing::debug!(session = %self.spec.id, error = %e, "answering a terminal query failed");
        }
        self.shell.replies_written(written.ok());
    }

    /// Settles readiness and the active send when their conditions hold.
    pub(super) fn evaluate(&mut self) {
        self.deliver_signals();
        let now = Instant::now();
        self.begin_deferred_send(now);
        if !self.readiness.is_ready()
            && (self.exit.is_some() || self.readiness.wait_over(now, self.last_output))
        {
            self.become_ready("exit, idle or deadline");
        }
        let Some(a) = self.active.as_ref() else {
            return;
        };
        let input_written = !self.shell.input_pending();
        let observed = Observed {
            exited: self.exit.is_some(),
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
            hidden_input: (reason == WaitReason::StdinRead && self.pty.input_hidden())
                .then(|| self.how_a_person_answers(a.input.web_page.as_deref())),
            person_typed: self.keyboard.take_note(),
        };
        let (outcome, end, end_line) = a.outcome(
            reason,
            &self.terminal,
            &self.end_lines,
            self.status(),
            self.cwd(),
            notes,
        );
        self.last_seen = end;
        self.last_seen_line = end_line;
        self.end_send(a.settle(outcome));
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
    pub(super) fn end_send(&mut self, ended: Option<JobEnd>) {
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
            self.save_jobs();
        }
        self.publish();
    }

    /// Keeps the jobs' state for a daemon adopting the session.
    pub(super) fn save_jobs(&mut self) {
        let Some(store) = &mut self.store else {
            return;
        };
        let mut records = self.jobs.records();
        if let Some(a) = &self.active
            && let Some(id) = a.job_id()
            && let Some(job) = records.iter_mut().find(|j| j.id == id)
        {
            let left = a
                .deadlines()
                .timeout
                .saturating_duration_since(Instant::now());
            job.wait = Some((
                unix_ms(SystemTime::now() + left),
                a.input.idle.as_millis() as u64,
            ));
        }
        store.set_jobs(records);
    }
}
