//! The shell-integration marks a successor needs once a session's journal is compacted: the
//! marks of the output the journal drops are gone with it, so the newest ones that decide the
//! shell state are kept with the checkpoint. Replayed into a new shell state, they put it where
//! replaying all the output would have: the state a mark leaves depends only on the marks since
//! the command before the newest one started (its end sets what a send that comes later reports;
//! the prompt after it, that the shell takes input). Pure.

use crate::marks::Mark;
use crate::screen::MarkEvent;
use std::collections::VecDeque;

/// At most this many marks are kept: between two command starts a shell prints a handful (a
/// prompt, its end, a cwd), unless lines are refused or empty ones entered again and again.
const MAX_KEPT: usize = 64;

/// The marks since the start of the command before the newest one.
#[derive(Debug, Default)]
pub(super) struct ShellMarks {
    kept: VecDeque<MarkEvent>,
}

impl ShellMarks {
    /// Takes the next mark the terminal reported.
    pub(super) fn push(&mut self, event: &MarkEvent) {
        if event.mark == Mark::CommandStart
            && let Some(newest_start) = self.kept.iter().rposition(|e| e.mark == Mark::CommandStart)
        {
            self.kept.drain(..newest_start);
        }
        if self.kept.len() == MAX_KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back(event.clone());
    }

    /// The marks kept, oldest first.
    pub(super) fn kept(&self) -> Vec<MarkEvent> {
        self.kept.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marks::Integration;
    use crate::screen::Position;
    use crate::session::shell::Shell;
    use std::time::Instant;

    const A: Mark = Mark::PromptStart;
    const B: Mark = Mark::InputStart;
    const C: Mark = Mark::CommandStart;
    const R: Mark = Mark::LineRejected;
    const fn end(code: i32) -> Mark {
        Mark::CommandEnd(Some(code))
    }

    fn events(marks: &[Mark]) -> Vec<MarkEvent> {
        marks
            .iter()
            .enumerate()
            .map(|(i, mark)| MarkEvent {
                mark: mark.clone(),
                at: Position {
                    line: i as u64 + 1,
                    col: 2,
                },
                line: None,
                command: None,
                bytes: (0, 0),
            })
            .collect()
    }

    /// The shell state `marks` leave, as an adopting daemon replays them (no send waits).
    fn replayed(integration: Integration, marks: &[MarkEvent], now: Instant) -> String {
        let mut shell = Shell::new(integration);
        for e in marks {
            shell.on_mark(&e.mark, e.at, now, None);
        }
        format!("{shell:?}")
    }

    #[test]
    fn the_kept_marks_leave_the_shell_state_all_the_marks_leave() {
        let cwd = || Mark::Cwd("file://host/tmp".into());
        let cases: &[(&str, Integration, Vec<Mark>)] = &[
            (
                "bash at its prompt",
                Integration::Bash,
                vec![A, B, C, end(0), cwd(), A, B, C, end(3), cwd(), A, B],
            ),
            (
                "bash running a command",
                Integration::Bash,
                vec![A, B, C, end(0), A, B, C, end(1), A, B, C],
            ),
            (
                "bash, a command printing its end only",
                Integration::Bash,
                vec![A, B, C, end(0), A, B, C, end(2)],
            ),
            (
                "zsh, empty lines entered",
                Integration::Zsh,
                vec![A, B, C, end(0), A, B, end(0), A, B, end(0), A, B],
            ),
            (
                "fish, a refused line",
                Integration::Fish,
                vec![A, B, C, end(0), A, B, R, A, B],
            ),
            (
                "fish running",
                Integration::Fish,
                vec![A, B, C, end(0), A, B, C],
            ),
            ("nothing run yet", Integration::Bash, vec![A, B]),
            ("one command", Integration::Zsh, vec![A, B, C, end(5), A, B]),
        ];
        for (name, integration, marks) in cases {
            let all = events(marks);
            let mut kept = ShellMarks::default();
            for e in &all {
                kept.push(e);
            }
            let now = Instant::now();
            assert_eq!(
                replayed(*integration, &kept.kept(), now),
                replayed(*integration, &all, now),
                "{name}"
            );
        }
    }

    #[test]
    fn it_keeps_the_marks_since_the_start_before_the_newest() {
        let mut kept = ShellMarks::default();
        let all = events(&[A, B, C, end(0), A, B, C, end(0), A, B, C]);
        for e in &all {
            kept.push(e);
        }
        assert_eq!(kept.kept(), &all[6..]);
        // However long no command starts, what is kept stays bounded.
        let many: Vec<Mark> = (0..100).flat_map(|_| [A, B]).collect();
        for e in events(&many) {
            kept.push(&e);
        }
        assert_eq!(kept.kept().len(), MAX_KEPT);
    }
}
