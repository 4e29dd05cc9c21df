//! How a session's program ends: the helper's reports of its exit, and `terminate`, which ends
//! the session's whole process tree and reaps the helper.

use super::{ExitKind, Pty};
use crate::process::fd;
use crate::process::helper::Report;
use crate::process::reaper::{self, Tree};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Pty {
    /// Resolves once the program has exited (the helper reaped it and reported how).
    /// Cancel-safe: bytes already read are kept for the next call.
    pub(crate) async fn wait_exit(&self) -> io::Result<ExitKind> {
        if self.pid == 0 {
            return Ok(ExitKind::Lost);
        }
        while !self.helper_closed.load(Ordering::Relaxed) {
            match self.next_report().await? {
                Some(Report::Exited(code)) => return Ok(ExitKind::Code(code)),
                Some(Report::Killed(sig)) => {
                    return Ok(Signal::try_from(sig)
                        .map(ExitKind::Signal)
                        .unwrap_or(ExitKind::Code(128 + sig)));
                }
                Some(_) => {}
                None => break,
            }
        }
        // The helper died before the program (killed from inside its session): the program
        // was adopted by the daemon, a subreaper, and its status is ours to collect.
        if let Some(exit) = &self.program_exit {
            let _ = exit.readable().await?;
        }
        match waitpid(Pid::from_raw(self.pid as i32), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => Ok(ExitKind::Code(code)),
            Ok(WaitStatus::Signaled(_, sig, _)) => Ok(ExitKind::Signal(sig)),
            // Reaped elsewhere: report a plain exit rather than hang.
            _ => Ok(ExitKind::Code(0)),
        }
    }

    /// The next report of the helper; `None` once it closed the pipe.
    pub(super) async fn next_report(&self) -> io::Result<Option<Report>> {
        loop {
            if let Some(report) = self.take_line() {
                return Ok(Some(report));
            }
            if self.helper_closed.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let mut guard = self.status.readable().await?;
            let mut chunk = [0u8; 256];
            match guard.try_io(|status| fd::read(status, &mut chunk)) {
                Ok(Ok(0)) => self.helper_closed.store(true, Ordering::Relaxed),
                Ok(Ok(n)) => self
                    .status_buf
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&chunk[..n]),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
    }

    /// Parses one complete line out of the buffer.
    pub(super) fn take_line(&self) -> Option<Report> {
        let mut buf = self.status_buf.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let end = buf.iter().position(|&b| b == b'\n')?;
            let line: Vec<u8> = buf.drain(..=end).collect();
            if let Some(r) = std::str::from_utf8(&line[..end])
                .ok()
                .and_then(Report::parse)
            {
                return Some(r);
            }
        }
    }

    /// Ends every process of the session (see [`crate::process::reaper::escalate`]: SIGHUP, `grace`,
    /// SIGTERM, SIGKILL) and returns once none is left, the helper reaped and the cgroup
    /// removed.
    pub(crate) async fn terminate(&self, grace: Duration) {
        if self.pid == 0 && self.helper.is_none() && self.tag.is_none() {
            return; // lost, without a tag to find what it left
        }
        let helper_pid = self.helper_pid;
        let helper_alive = match &self.helper {
            Some(child) => child
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .try_wait()
                .is_ok_and(|s| s.is_none()),
            None => crate::process::procfs::is_alive(helper_pid),
        };
        let all_gone = match &self.cgroup {
            Some(cg) => reaper::escalate(cg, grace).await,
            None => {
                let tree = Tree {
                    helper: helper_pid,
                    helper_exit: self.helper_exit.as_ref().filter(|_| helper_alive),
                    shell: self.pid as i32,
                    tag: self.tag.as_deref(),
                };
                reaper::escalate(&tree, grace).await
            }
        };
        if !all_gone {
            tracing::warn!(
                pid = self.pid,
                "a session's processes outlived SIGKILL (stuck in the kernel?)"
            );
        }
        self.reap_helper().await;
        if self.pid != 0 {
            // Ours only when the helper died first; then nobody else may reap it.
            let _ = waitpid(Pid::from_raw(self.pid as i32), Some(WaitPidFlag::WNOHANG));
            reaper::unwatch(self.pid as i32);
        }
        // Whatever the helper's early death handed to the daemon.
        reaper::reap_adopted();
        if let Some(cg) = &self.cgroup
            && let Err(e) = cg.remove_async().await
        {
            tracing::warn!(cgroup = %cg.path().display(), error = %e,
                "could not remove a session cgroup");
        }
        self.terminated.store(true, Ordering::Relaxed);
    }

    /// Reaps the helper, which leaves once its descendants are gone; kills it when it does not
    /// within [`reaper::KILL_WAIT`] (a descendant stuck in the kernel).
    async fn reap_helper(&self) {
        if let Some(exit) = &self.helper_exit {
            let waited = tokio::time::timeout(reaper::KILL_WAIT, exit.readable()).await;
            if waited.is_err() {
                let pid = self.helper_pid;
                tracing::warn!(
                    helper = pid,
                    "a session helper outlived its session; killing it"
                );
                let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
                let _ = tokio::time::timeout(reaper::KILL_WAIT, exit.readable()).await;
            }
        }
        // Reaped here; one still running (only a bug allows that) is left to the daemon's
        // reaper, which takes it once it exits. An adopted helper is its parent's to reap.
        if let Some(helper) = &self.helper {
            let _ = helper.lock().unwrap_or_else(|e| e.into_inner()).try_wait();
        }
        reaper::unwatch(self.helper_pid);
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if self.terminated.load(Ordering::Relaxed) {
            return;
        }
        // Not closed through `terminate` (a panic): dropping the status pipe makes the helper
        // kill the session and exit; the daemon's reaper collects it.
        if self.pid != 0 {
            reaper::unwatch(self.pid as i32);
        }
        if let Some(helper) = &self.helper {
            let _ = helper.lock().unwrap_or_else(|e| e.into_inner()).try_wait();
        }
        reaper::unwatch(self.helper_pid);
    }
}
