//! Deciding when a send returns and why. The decision (`decide`) is pure: it takes what the
//! session has observed (prompt marks, whether a program waits on the terminal, the child's exit,
//! the deadlines) and names the wait reason. What tells whether a program waits on the terminal
//! is the stdin probe, `process::stdin_probe`.

use std::time::Instant;

/// Why a send returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// The shell is back at its prompt.
    Prompt,
    /// A foreground program is blocked reading the terminal.
    StdinRead,
    /// No output for `idle_ms`, and nothing better is known.
    InferredIdle,
    /// `timeout_ms` passed first.
    Timeout,
    /// The session's program exited.
    SessionExit,
}

impl WaitReason {
    /// The lower-case name used in rendered text.
    pub fn name(self) -> &'static str {
        match self {
            WaitReason::Prompt => "prompt",
            WaitReason::StdinRead => "stdin_read",
            WaitReason::InferredIdle => "inferred_idle",
            WaitReason::Timeout => "timeout",
            WaitReason::SessionExit => "session_exit",
        }
    }
}

/// What a waiting send has observed so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observed {
    /// The session's program has exited.
    pub exited: bool,
    /// The shell reported the end of a command (OSC 133;D) after the send's input was written.
    pub prompt_returned: bool,
    /// The probe found a foreground program (or the shell's continuation prompt) reading the
    /// terminal.
    pub stdin_blocked: bool,
    /// All of the send's input has been written.
    pub input_written: bool,
}

/// The deadlines of a waiting send.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// When the send gives up (`timeout_ms`).
    pub timeout: Instant,
    /// When output silence counts as idle (`idle_ms` after the last output or write).
    pub idle: Instant,
}

/// The reason the send should return now, or `None` to keep waiting. Stronger evidence wins:
/// an exit or a prompt beats a blocked reader, which beats idleness; a deadline that passed wins
/// over idleness because it was asked for explicitly.
pub fn decide(observed: &Observed, deadlines: &Deadlines, now: Instant) -> Option<WaitReason> {
    if observed.exited {
        return Some(WaitReason::SessionExit);
    }
    if observed.prompt_returned {
        return Some(WaitReason::Prompt);
    }
    if observed.stdin_blocked && observed.input_written {
        return Some(WaitReason::StdinRead);
    }
    if now >= deadlines.timeout {
        return Some(WaitReason::Timeout);
    }
    if now >= deadlines.idle && observed.input_written {
        return Some(WaitReason::InferredIdle);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stronger_evidence_wins() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        let passed = Deadlines {
            timeout: now,
            idle: now,
        };
        let pending = Deadlines {
            timeout: later,
            idle: later,
        };
        let base = Observed {
            input_written: true,
            ..Observed::default()
        };
        let cases = [
            (
                Observed {
                    exited: true,
                    prompt_returned: true,
                    ..base
                },
                passed,
                Some(WaitReason::SessionExit),
            ),
            (
                Observed {
                    prompt_returned: true,
                    ..base
                },
                passed,
                Some(WaitReason::Prompt),
            ),
            (
                Observed {
                    stdin_blocked: true,
                    ..base
                },
                passed,
                Some(WaitReason::StdinRead),
            ),
            (base, passed, Some(WaitReason::Timeout)),
            (
                base,
                Deadlines {
                    timeout: later,
                    idle: now,
                },
                Some(WaitReason::InferredIdle),
            ),
            (base, pending, None),
            (
                Observed::default(),
                Deadlines {
                    timeout: later,
                    idle: now,
                },
                None,
            ),
        ];
        for (observed, deadlines, want) in cases {
            assert_eq!(decide(&observed, &deadlines, now), want, "{observed:?}");
        }
    }
}
