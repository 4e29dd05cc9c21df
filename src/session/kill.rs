//! JobKill in progress: the interrupt follows the job's command into whichever process group
//! holds its terminal, and escalates to SIGKILL when the command ignores it.

use super::JobStatus;
use super::core::Tty;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long the interrupted command gets to end before its process group is killed, and how
/// long after that before the job is reported killed anyway (the shell itself ignored it).
const SETTLE: Duration = Duration::from_secs(2);
/// How often the foreground group is looked at while a kill is in progress. The group changes
/// under the kill: bash prints its command-start mark before it forks, and its child takes the
/// terminal a moment later, so a SIGINT sent at the mark reaches only the shell.
const RECHECK: Duration = Duration::from_millis(10);
/// How long an integrated shell may hold the terminal after a command started before the
/// interrupt goes to the shell itself (a builtin or loop running in the shell). Sooner, it
/// would reach bash between its command-start mark and its child taking the terminal, where
/// bash keeps the interrupt pending and its line editor later throws away typed input.
const SHELL_GRACE: Duration = Duration::from_millis(50);

pub(super) struct JobKill {
    /// JobKill callers waiting for the status after the kill settles.
    pub waiters: Vec<oneshot::Sender<Option<JobStatus>>>,
    /// Signals go out only once the command has started (an interrupt at the prompt would be
    /// lost and the command would run after all); this is when it did.
    armed_at: Option<Instant>,
    /// The session's own process is the command (no shell integration): it is interrupted
    /// at once.
    shell_is_command: bool,
    /// Foreground process groups already sent SIGINT, with their leader's command name then.
    /// A group is interrupted again only when its leader has exec'd since: a child of bash
    /// that is signalled before its exec runs bash's handler, which drops the interrupt. A
    /// program that handles SIGINT and goes on gets SIGKILL at `escalate_at`, not a stream of
    /// interrupts.
    interrupted: Vec<(i32, Option<String>)>,
    escalate_at: Instant,
    give_up_at: Instant,
    escalated: bool,
}

impl JobKill {
    pub fn new(
        reply: oneshot::Sender<Option<JobStatus>>,
        started: bool,
        shell_is_command: bool,
        now: Instant,
    ) -> Self {
        JobKill {
            waiters: vec![reply],
            armed_at: started.then_some(now),
            shell_is_command,
            interrupted: Vec::new(),
            escalate_at: now + SETTLE,
            give_up_at: now + 2 * SETTLE,
            escalated: false,
        }
    }

    /// The command has started: signals may go out from now on.
    pub fn arm(&mut self, now: Instant) {
        self.armed_at.get_or_insert(now);
    }

    /// Signals the terminal's foreground group (from the PTY the actor owns) if it is new to
    /// this kill, or kills it once the settle time has passed. The session's shell is never
    /// SIGKILLed.
    pub fn step(&mut self, tty: &mut dyn Tty, now: Instant) {
        let Some(armed_at) = self.armed_at else {
            return;
        };
        let Some(foreground) = tty.foreground_group() else {
            return;
        };
        let shell = tty.program();
        // The shell leads its own Unix session, so its process group is its pid.
        let at_shell = foreground == shell;
        if at_shell && !self.shell_is_command && now < armed_at + SHELL_GRACE {
            return;
        }
        if now >= self.escalate_at {
            if !self.escalated && !at_shell {
                self.escalated = true;
                tracing::debug!(group = foreground, "job ignored SIGINT; killing its group");
                let _ = tty.signal(foreground, Signal::SIGKILL);
            }
        } else {
            let target = (foreground, tty.comm(foreground));
            if !self.interrupted.contains(&target) {
                self.interrupted.push(target);
                let _ = tty.signal(foreground, Signal::SIGINT);
            }
        }
    }

    /// When `step` should run next.
    pub fn next_check(&self, now: Instant) -> Instant {
        (now + RECHECK).min(self.give_up_at)
    }

    /// The command outlived the interrupt and the kill: the job is reported killed anyway so
    /// the caller is not held forever (whatever still runs keeps the terminal).
    pub fn gave_up(&self, now: Instant) -> bool {
        now >= self.give_up_at
    }

    /// The kill settled: every JobKill caller hears the job's status.
    pub fn settled(self, status: JobStatus) {
        for waiter in self.waiters {
            let _ = waiter.send(Some(status));
        }
    }
}
