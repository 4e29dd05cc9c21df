//! What a refusal tells its caller to do, in each front-end's words. The daemon's messages name
//! the gRPC calls and fields (`JobOutput`, `Signal`, an empty send, `typeahead`); each
//! front-end puts its own words in their place (MCP its tool names, ACP its slash commands, the
//! CLI its verbs and flags), so a model or a person is told something it can actually do. One
//! table per front-end, each covering every phrase the daemon uses. Pure.

/// Wait for a running command (the daemon's words: an empty `Send`).
pub(crate) const WAIT: &str = "Wait for the command with an empty send (text \"\", submit false)";
/// Interrupt a running command.
pub(crate) const INTERRUPT: &str = "interrupt it with keys [\"C-c\"] or Signal";
/// Hold the text until the prompt is back (starts with its joining comma: a front-end without
/// typeahead drops the whole clause).
pub(crate) const TYPEAHEAD: &str =
    ", or set typeahead to have the text written once the shell is back at its prompt";
/// Wait for or stop a background job.
pub(crate) const JOB: &str = "wait for it with JobOutput or stop it with JobKill";
/// End a session instead of killing its shell.
pub(crate) const CLOSE: &str = "use Close to end the session";

/// Every phrase above, for the tables' completeness test.
#[cfg(test)]
const ALL: [&str; 5] = [WAIT, INTERRUPT, TYPEAHEAD, JOB, CLOSE];

/// A front-end's words for each phrase: (the daemon's phrase, the front-end's).
pub(crate) type Words = [(&'static str, &'static str); 5];

/// `ptyd mcp`: the tools a model calls.
pub(crate) const MCP: Words = [
    (
        WAIT,
        "Wait for the command with an empty terminal_send (no text)",
    ),
    (
        INTERRUPT,
        "interrupt it with keys [\"C-c\"] or terminal_signal",
    ),
    (
        TYPEAHEAD,
        ", or set typeahead: true to have the text written once the shell is back at its prompt",
    ),
    (JOB, "wait for it with job_output or stop it with job_kill"),
    (CLOSE, "use terminal_close to end the session"),
];

/// `ptyd acp`: the slash commands a person types in the editor (ACP has no typeahead).
pub(crate) const ACP: Words = [
    (WAIT, "See how far the command got with /read or /screen"),
    (INTERRUPT, "interrupt it with /signal INT"),
    (TYPEAHEAD, ""),
    (JOB, "see its output with /job or stop it with /kill"),
    (CLOSE, "use /close to end the session"),
];

/// The `ptyd` command line: its verbs and flags.
pub(crate) const CLI: Words = [
    (
        WAIT,
        "Wait for the command with `ptyd send SESSION '' --no-submit`",
    ),
    (
        INTERRUPT,
        "interrupt it with `ptyd send SESSION --key C-c` or `ptyd signal SESSION INT`",
    ),
    (
        TYPEAHEAD,
        ", or pass --typeahead to have the text written once the shell is back at its prompt",
    ),
    (
        JOB,
        "wait for it with `ptyd job-output JOB` or stop it with `ptyd job-kill JOB`",
    ),
    (CLOSE, "use `ptyd close SESSION` to end the session"),
];

/// `message` with the daemon's phrases in `words`' terms.
pub(crate) fn in_words(message: &str, words: &Words) -> String {
    words
        .iter()
        .fold(message.to_owned(), |text, (daemon, own)| {
            text.replace(daemon, own)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gRPC names a front-end's user cannot call.
    const GRPC_WORDS: [&str; 6] = [
        "JobOutput",
        "JobKill",
        "Signal",
        "Close",
        "submit false",
        "set typeahead to",
    ];

    #[test]
    fn every_front_end_has_words_for_every_phrase() {
        for (name, words) in [("mcp", &MCP), ("acp", &ACP), ("cli", &CLI)] {
            for (daemon, (listed, own)) in ALL.iter().zip(words.iter()) {
                assert_eq!(daemon, listed, "{name}: the table follows ALL's order");
                for grpc in GRPC_WORDS {
                    assert!(!own.contains(grpc), "{name} says {grpc:?}: {own:?}");
                }
            }
        }
    }

    #[test]
    fn a_busy_job_reads_in_each_front_ends_words() {
        let busy = format!("terminal session t1 is busy with background job j1; {JOB}");
        assert_eq!(
            in_words(&busy, &MCP),
            "terminal session t1 is busy with background job j1; \
             wait for it with job_output or stop it with job_kill"
        );
        assert!(in_words(&busy, &CLI).contains("`ptyd job-kill JOB`"));
        assert!(in_words(&busy, &ACP).contains("/kill"));
    }
}
