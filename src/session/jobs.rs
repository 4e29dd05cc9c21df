//! Background sends as jobs: each job's status, the output `JobOutput` has returned so far
//! (consumed output is never repeated), and its settled send, kept after it finished so
//! `JobOutput` can still report it.

use super::view::region_lines;
use super::{JobReport, JobStatus, SendOutcome};
use crate::render;
use crate::screen::{Position, Terminal};
use crate::state::record::JobRecord;
use std::collections::BTreeMap;

/// A job's bookkeeping.
struct JobState {
    status: JobStatus,
    /// Lines before this one have been returned by JobOutput.
    consumed: u64,
    /// The settled send, once finished.
    outcome: Option<SendOutcome>,
    /// Why it failed.
    detail: String,
    /// Where its output starts (the command-start mark, or the input line).
    start: Option<Position>,
    /// Where its output ends, once finished.
    end: Option<Position>,
    /// Its end line as the command-end mark found it (the prompt has redrawn it since).
    end_line: Option<String>,
}

/// The session's jobs by id.
#[derive(Default)]
pub(super) struct Jobs {
    records: BTreeMap<String, JobState>,
}

impl Jobs {
    /// Job `id` starts; its output starts at line `from` until a command-start mark says where.
    pub(super) fn start(&mut self, id: String, from: u64) {
        self.records.insert(
            id,
            JobState {
                status: JobStatus::Running,
                consumed: from,
                outcome: None,
                detail: String::new(),
                start: None,
                end: None,
                end_line: None,
            },
        );
    }

    /// Its command started at `at`: its output starts there (the first start mark only).
    pub(super) fn command_started(&mut self, id: &str, at: Position) {
        if let Some(job) = self.records.get_mut(id)
            && job.start.is_none()
        {
            job.start = Some(at);
            job.consumed = at.line;
        }
    }

    /// Its send settled at `end`, whose line the end mark found reading `end_line` (`killed`:
    /// a JobKill was in progress).
    pub(super) fn finish(
        &mut self,
        id: &str,
        killed: bool,
        end: Position,
        end_line: Option<String>,
        outcome: SendOutcome,
    ) {
        if let Some(job) = self.records.get_mut(id) {
            job.status = if killed {
                JobStatus::Killed
            } else {
                JobStatus::Completed
            };
            job.end = Some(end);
            job.end_line = end_line;
            job.outcome = Some(outcome);
        }
    }

    /// Its send could not be carried out.
    pub(super) fn fail(&mut self, id: &str, detail: String) {
        if let Some(job) = self.records.get_mut(id) {
            job.status = JobStatus::Failed;
            job.detail = detail;
        }
    }

    /// The status of job `id`, if the session has it.
    pub(super) fn status(&self, id: &str) -> Option<JobStatus> {
        self.records.get(id).map(|job| job.status)
    }

    /// New output of job `id` since the last report, capped at `cap` bytes, and its status.
    /// While it runs, only complete lines; an integrated shell's output starts at its start mark.
    pub(super) fn report(
        &mut self,
        id: &str,
        cap: usize,
        terminal: &Terminal,
        integrated: bool,
    ) -> Option<JobReport> {
        let job = self.records.get_mut(id)?;
        let (status, consumed) = (job.status, job.consumed);
        let lines = match (status, job.end) {
            (JobStatus::Running, _) if integrated && job.start.is_none() => Vec::new(),
            (JobStatus::Running, _) => {
                let last = terminal.cursor().line.saturating_sub(1);
                if last >= consumed {
                    terminal.lines(consumed, last)
                } else {
                    Vec::new()
                }
            }
            (_, Some(end)) => region_lines(terminal, consumed, end, job.end_line.as_deref()),
            (_, None) => Vec::new(),
        };
        let now_consumed = match status {
            JobStatus::Running => consumed + lines.len() as u64,
            _ => job.end.map_or(consumed, |e| e.line + 1),
        };
        job.consumed = now_consumed.max(consumed);
        // The contract's format; the exit code is in the typed `exit_code` field.
        let meta = match (&job.outcome, status) {
            (Some(o), JobStatus::Completed) => {
                vec![format!("[job: {id} completed: wait: {}]", o.reason.name())]
            }
            (_, JobStatus::Failed) => vec![format!("[job: {id} failed: {}]", job.detail)],
            (_, s) => vec![format!("[job: {id} {}]", s.name())],
        };
        let capped = render::with_meta(&lines.join("\n"), "", &meta, cap);
        let rendered = capped.rendered.trim_start_matches('\n').to_owned();
        Some(JobReport {
            status,
            output: capped.body,
            truncated: capped.truncated,
            detail: job.detail.clone(),
            outcome: job.outcome.clone(),
            rendered,
        })
    }

    /// What a daemon adopting the session needs of its jobs (the settled sends' results stay
    /// behind: a job finished before the adoption reports its status without them).
    pub(super) fn records(&self) -> Vec<JobRecord> {
        let at = |p: Option<Position>| p.map(|p| (p.line, p.col));
        self.records
            .iter()
            .map(|(id, job)| JobRecord {
                id: id.clone(),
                status: job.status.name().to_owned(),
                consumed: job.consumed,
                start: at(job.start),
                end: at(job.end),
                detail: job.detail.clone(),
                wait: None,
            })
            .collect()
    }

    /// Takes over the jobs a previous daemon recorded, replacing any of the same id.
    pub(super) fn restore(&mut self, records: &[JobRecord]) {
        let at = |p: Option<(u64, u32)>| p.map(|(line, col)| Position { line, col });
        for r in records {
            let status = match r.status.as_str() {
                "running" => JobStatus::Running,
                "completed" => JobStatus::Completed,
                "killed" => JobStatus::Killed,
                _ => JobStatus::Failed,
            };
            self.records.insert(
                r.id.clone(),
                JobState {
                    status,
                    consumed: r.consumed,
                    outcome: None,
                    detail: r.detail.clone(),
                    start: at(r.start),
                    end: at(r.end),
                    // Not saved: an adopted job's end line reads as the screen has it.
                    end_line: None,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Status;
    use crate::waiting::WaitReason;
    use std::time::Duration;

    fn outcome() -> SendOutcome {
        SendOutcome {
            viewport: String::new(),
            reason: WaitReason::Prompt,
            status: Status::Running,
            exit_code: Some(0),
            truncated: false,
            input_hidden: false,
            cwd: String::new(),
            elapsed: Duration::ZERO,
            rendered: String::new(),
        }
    }

    #[test]
    fn job_output_is_never_repeated() {
        let mut t = Terminal::new(80, 10, 1000, 1 << 20);
        let mut jobs = Jobs::default();
        t.feed(b"$ make\r\n");
        jobs.start("j1".into(), 1);
        jobs.command_started("j1", Position { line: 2, col: 0 });
        t.feed(b"one\r\ntwo\r\nthr");
        let first = jobs.report("j1", 65536, &t, true).expect("j1");
        assert_eq!(first.status, JobStatus::Running);
        assert_eq!(
            first.output, "one\ntwo",
            "complete lines only while it runs"
        );
        t.feed(b"ee\r\n");
        let end = t.cursor();
        t.feed(b"$ ");
        jobs.finish("j1", false, end, None, outcome());
        let second = jobs.report("j1", 65536, &t, true).expect("j1");
        assert_eq!(second.status, JobStatus::Completed);
        assert_eq!(second.output, "three");
        assert!(
            second
                .rendered
                .ends_with("[job: j1 completed: wait: prompt]")
        );
        let third = jobs.report("j1", 65536, &t, true).expect("j1");
        assert_eq!(third.output, "", "nothing twice");
        assert!(jobs.report("j2", 65536, &t, true).is_none());
    }

    #[test]
    fn jobs_survive_their_records() {
        let mut jobs = Jobs::default();
        jobs.start("j1".into(), 3);
        jobs.command_started("j1", Position { line: 4, col: 2 });
        jobs.start("j2".into(), 9);
        jobs.fail("j2", "writing failed".into());
        let records = jobs.records();
        let mut adopted = Jobs::default();
        adopted.restore(&records);
        assert_eq!(adopted.records(), records);
        assert_eq!(adopted.status("j1"), Some(JobStatus::Running));
        assert_eq!(adopted.status("j2"), Some(JobStatus::Failed));
    }

    #[test]
    fn statuses_after_a_kill_or_a_failure() {
        let t = Terminal::new(80, 10, 1000, 1 << 20);
        let mut jobs = Jobs::default();
        jobs.start("j1".into(), 1);
        jobs.finish("j1", true, Position::default(), None, outcome());
        assert_eq!(jobs.status("j1"), Some(JobStatus::Killed));
        jobs.start("j2".into(), 1);
        jobs.fail("j2", "writing failed".into());
        let report = jobs.report("j2", 65536, &t, false).expect("j2");
        assert_eq!(report.status, JobStatus::Failed);
        assert_eq!(report.rendered, "[job: j2 failed: writing failed]");
    }
}
