//! Taking over a session a previous daemon left: its journal (the checkpoint at its head, then
//! its output) replayed through the terminal model and the shell state, its exit and its
//! running job restored.

use super::{Core, Cx};
use crate::marks::Mark;
use crate::screen::Position;
use crate::session::shell::MarkEffect;
use crate::session::{JobStatus, Sink};
use tokio::sync::oneshot;

impl Core {
    /// Rebuilds the terminal of a session adopted from a previous daemon: replays its journal
    /// (the answers to queries in it were given long ago; the shell's marks put the shell state
    /// where it was), takes over its jobs, and resumes waiting for a job that was running.
    pub(super) fn adopt(&mut self, cx: &mut Cx<'_>, replay: crate::session::Replay) {
        // A compacted journal: its checkpoint first, with the marks of the output it dropped.
        let mut marks = Vec::new();
        if let Some(restored) = &replay.restored {
            self.terminal.restore(&restored.terminal);
            marks.extend(restored.marks.iter().cloned());
            // At a prompt: the command line that comes next is read from its input start.
            let input = restored
                .marks
                .iter()
                .rev()
                .find(|e| !matches!(e.mark, Mark::Cwd(_)));
            if let Some(e) = input.filter(|e| e.mark == Mark::InputStart) {
                self.terminal.resume_input_at(e.at);
            }
        }
        self.terminal.feed(&replay.output);
        drop(self.terminal.take_replies());
        let replayed = self.terminal.take_marks();
        // The records know the output a previous daemon saw; marks it had no time to record
        // are taken now.
        for event in &replayed {
            self.record_mark(cx, event);
        }
        marks.extend(replayed);
        let now = cx.now;
        let mut last_start = None;
        for event in &mut marks {
            if let Some(line) = event.line.take() {
                self.end_lines.push(event.at, line);
            }
            self.shell_marks.push(event);
            if let MarkEffect::CommandStarted(at) =
                self.shell.on_mark(&event.mark, event.at, now, None)
            {
                last_start = Some(at);
            }
        }
        if let Some(kind) = replay.exit {
            self.lifecycle.end(kind);
            self.watchers.end();
        }
        self.become_ready(cx, "adopted");
        let running = replay
            .jobs
            .iter()
            .find(|j| j.status == JobStatus::Running.name());
        if let Some(job) = running
            && !self.exited()
        {
            if let Some((line, col)) = job.start {
                self.last_seen = Position { line, col };
            }
            let (confirm, _) = oneshot::channel();
            let wait = crate::session::resumed_wait(job.wait);
            self.begin_send(cx, wait, Sink::Job(job.id.clone(), confirm));
        }
        self.jobs.restore(&replay.jobs);
        // A job whose command started while no daemon read: its output starts at that mark.
        if let Some(job) = replay
            .jobs
            .iter()
            .find(|j| j.status == JobStatus::Running.name())
            && let Some(at) = last_start.filter(|at| at.line >= job.consumed)
        {
            self.jobs.command_started(&job.id, at);
        }
        self.save_jobs(cx);
        self.publish(cx);
    }
}
