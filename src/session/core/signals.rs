//! Signals for the session's foreground job: `Signal` (aimed at the command just sent, see
//! `aim.rs`), `JobKill` (an interrupt that follows the job's command, see `kill.rs`), and the
//! send that comes right after a signal, held until the shell answered it.

use super::{Core, Cx};
use crate::error::{Error, Result};
use crate::marks::Integration;
use crate::session::kill::JobKill;
use crate::session::send::busy_error;
use crate::session::{JobStatus, SendInput, Sink};
use nix::sys::signal::Signal;
use tokio::sync::oneshot;

impl Core {
    /// A send arrives. One with input right after a signal waits for the shell's answer to it
    /// first: bash, interrupted at its prompt, reads on until it has handled the interrupt, then
    /// throws away the line it read (input written meanwhile loses its first bytes, or all of
    /// them); a command the signal ends still runs until its end mark (text for it would be
    /// refused as typeahead).
    pub(super) fn on_send(&mut self, cx: &mut Cx<'_>, input: SendInput, sink: Sink) {
        if let Some((_, waiting)) = &self.deferred {
            sink.refuse(busy_error(&self.spec.id, waiting.job_id()));
            return;
        }
        if self.active.is_none()
            && !self.exited()
            && !input.is_pure_wait()
            && self.shell.signal_gate(cx.now).is_some()
        {
            self.deferred = Some((input, sink));
            self.publish(cx);
            return;
        }
        self.begin_send(cx, input, sink);
    }

    /// Begins the send that waited for a signal's answer, once it came (or the grace passed, or
    /// the program exited); a caller that hung up meanwhile is forgotten.
    pub(super) fn begin_deferred_send(&mut self, cx: &mut Cx<'_>) {
        if self.deferred.is_none() || (!self.exited() && self.shell.signal_gate(cx.now).is_some()) {
            return;
        }
        let (input, sink) = self.deferred.take().expect("checked above");
        if sink.caller_gone() {
            self.publish(cx);
        } else {
            self.begin_send(cx, input, sink);
        }
    }

    pub(super) fn job_kill(
        &mut self,
        cx: &mut Cx<'_>,
        id: &str,
        reply: oneshot::Sender<Option<JobStatus>>,
    ) {
        let Some(status) = self.jobs.status(id) else {
            let _ = reply.send(None);
            return;
        };
        let Some(a) = self.active.as_mut().filter(|a| a.job_id() == Some(id)) else {
            let _ = reply.send(Some(status));
            return;
        };
        match a.killing.as_mut() {
            Some(kill) => kill.waiters.push(reply),
            None => {
                // An ended command has nothing left to interrupt: the kill just waits for it
                // to settle.
                let shell_is_command = self.spec.integration == Integration::None;
                let started = (shell_is_command || a.span.start.is_some()) && a.span.end.is_none();
                let mut kill = JobKill::new(reply, started, shell_is_command, cx.now);
                kill.step(cx.tty, cx.now);
                a.killing = Some(kill);
            }
        }
    }

    /// Delivers the waiting signals whose command is in place (or that waited long enough).
    pub(super) fn deliver_signals(&mut self, cx: &mut Cx<'_>) {
        if self.signals.is_empty() {
            return;
        }
        let mut signals = std::mem::take(&mut self.signals);
        if self.exited() {
            signals.deliver_all(|signal| self.signal(cx, signal));
        } else {
            // A child of the shell that has not exec'd its program yet still runs the shell's
            // signal handlers, which drop an interrupt: it counts as the shell.
            let shell = cx.tty.program();
            let shell_has_terminal = cx.tty.foreground_group().is_some_and(|group| {
                group == shell
                    || cx
                        .tty
                        .comm(group)
                        .is_some_and(|c| Some(c) == cx.tty.comm(shell))
            });
            let now = cx.now;
            let moment = self.shell.signal_moment(shell_has_terminal);
            signals.deliver_due(moment, now, |signal| {
                let delivered = self.signal(cx, signal);
                if delivered.is_ok() {
                    // The next send waits for the shell's answer (see `Shell::signal_gate`).
                    self.shell.signal_delivered(signal, shell_has_terminal, now);
                }
                delivered
            });
        }
        self.signals = signals;
    }

    /// Delivers `signal` to the terminal's foreground process group, read from the PTY master
    /// the actor owns, and only while the session's program runs: a pid from `/proc`, read
    /// elsewhere, could by then name a stranger's group.
    pub(super) fn signal(&self, cx: &mut Cx<'_>, signal: Signal) -> Result<i32> {
        if self.exited() {
            return Err(self.exited_error());
        }
        let group = cx
            .tty
            .foreground_group()
            .filter(|g| *g > 0)
            .ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "terminal session {} has no foreground process group",
                    self.spec.id
                ))
            })?;
        if signal == Signal::SIGKILL && group == cx.tty.program() {
            return Err(Error::FailedPrecondition(format!(
                "SIGKILL would kill the shell of terminal session {}; {}",
                self.spec.id,
                crate::error::advice::CLOSE
            )));
        }
        cx.tty.signal(group, signal).map_err(|e| {
            Error::FailedPrecondition(format!("delivering {} failed: {e}", signal.as_str()))
        })?;
        Ok(group)
    }

    pub(super) fn exited_error(&self) -> Error {
        Error::FailedPrecondition(format!("terminal session {} has exited", self.spec.id))
    }
}
