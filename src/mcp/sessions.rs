//! The terminal sessions of one MCP session: those it opened (closed when it ends, unless kept),
//! those it used, newest last, and those it has a send in flight to, from which the agent's
//! default terminal is picked (`terminal_send` without `session_id`, mcp.md "The default
//! session"): the idle shell this connection used last. The pick is pure; the daemon's List says
//! which sessions are idle.

use crate::pb;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// (agent id, session id): over HTTP one MCP session may carry requests of several agents.
type Key = (String, String);

/// What one MCP session knows of its terminal sessions.
#[derive(Default)]
pub(crate) struct Sessions {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Opened by this MCP session and not closed.
    opened: Vec<Key>,
    /// Used by this MCP session (opened or sent to), the most recent last.
    used: Vec<Key>,
    /// With a send of this MCP session in flight.
    in_flight: HashSet<Key>,
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `session` was opened here.
    pub(crate) fn opened(&self, agent: &str, session: &str) {
        let key = (agent.to_owned(), session.to_owned());
        let mut state = self.lock();
        state.opened.push(key.clone());
        state.touch(key);
    }

    /// `session` was closed: it is neither closed again nor picked.
    pub(crate) fn closed(&self, agent: &str, session: &str) {
        let mut state = self.lock();
        let is_it = |(a, s): &Key| a == agent && s == session;
        state.opened.retain(|k| !is_it(k));
        state.used.retain(|k| !is_it(k));
    }

    /// Takes the sessions opened here and not closed (to close them).
    pub(crate) fn take_opened(&self) -> Vec<Key> {
        let mut state = self.lock();
        let opened = std::mem::take(&mut state.opened);
        state.used.retain(|k| !opened.contains(k));
        opened
    }

    /// A send to `session` starts: until the returned guard drops, no default send picks it.
    pub(crate) fn sending(self: &Arc<Self>, agent: &str, session: &str) -> InFlight {
        let key = (agent.to_owned(), session.to_owned());
        let mut state = self.lock();
        state.in_flight.insert(key.clone());
        state.touch(key.clone());
        InFlight {
            sessions: self.clone(),
            key,
        }
    }

    /// The agent's default terminal among `listed` (the daemon's List of the agent's sessions):
    /// the shell this MCP session used last that runs, is not busy with a send or job, has no
    /// program in the foreground and has no send of this MCP session in flight. `shell_types`
    /// are the types with shell integration (a REPL session is never the default). Taken as in
    /// flight at once, so two concurrent default sends never pick the same session.
    pub(crate) fn pick(
        self: &Arc<Self>,
        agent: &str,
        listed: &[pb::SessionInfo],
        shell_types: &HashSet<String>,
    ) -> Option<InFlight> {
        let found = {
            let state = self.lock();
            state
                .used
                .iter()
                .rev()
                .filter(|(a, _)| a == agent)
                .filter(|k| !state.in_flight.contains(*k))
                .find_map(|(_, id)| {
                    listed
                        .iter()
                        .find(|s| &s.session_id == id && is_idle_shell(s, shell_types))
                        .map(|s| s.session_id.clone())
                })
        }?;
        Some(self.sending(agent, &found))
    }
}

impl State {
    /// `key` is now the most recently used.
    fn touch(&mut self, key: Key) {
        self.used.retain(|k| k != &key);
        self.used.push(key);
    }
}

/// Whether a default send may run in `session` now.
fn is_idle_shell(session: &pb::SessionInfo, shell_types: &HashSet<String>) -> bool {
    let running = session
        .status
        .as_ref()
        .is_none_or(|status| status.state == "running");
    running
        && !session.busy
        && session.foreground.is_empty()
        && shell_types.contains(&session.r#type)
}

/// A send of this MCP session in flight to one session; dropping it (the send settled or was
/// cancelled) makes the session available to default sends again.
pub(crate) struct InFlight {
    sessions: Arc<Sessions>,
    key: Key,
}

impl InFlight {
    /// The session the send goes to.
    pub(crate) fn session_id(&self) -> &str {
        &self.key.1
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.sessions.lock().in_flight.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, kind: &str, state: &str, busy: bool, foreground: &str) -> pb::SessionInfo {
        pb::SessionInfo {
            session_id: id.into(),
            r#type: kind.into(),
            status: Some(pb::SessionStatus {
                state: state.into(),
                ..Default::default()
            }),
            busy,
            foreground: foreground.into(),
            ..Default::default()
        }
    }

    fn shells() -> HashSet<String> {
        ["shell", "bash"].map(String::from).into()
    }

    #[test]
    fn the_default_is_the_idle_shell_used_last() {
        // (sessions as listed, used in this order) -> picked
        let idle = |id| info(id, "shell", "running", false, "");
        type Case<'a> = (&'a str, Vec<pb::SessionInfo>, Vec<&'a str>, Option<&'a str>);
        let cases: Vec<Case> = vec![
            ("nothing used yet", vec![idle("t1")], vec![], None),
            ("the one used", vec![idle("t1")], vec!["t1"], Some("t1")),
            (
                "the last used",
                vec![idle("t1"), idle("t2")],
                vec!["t2", "t1"],
                Some("t1"),
            ),
            (
                "busy with a send or job: the one before",
                vec![idle("t1"), info("t2", "shell", "running", true, "")],
                vec!["t1", "t2"],
                Some("t1"),
            ),
            (
                "a program in the foreground (a REPL, vim, sleep)",
                vec![info("t1", "shell", "running", false, "python3")],
                vec!["t1"],
                None,
            ),
            (
                "exited",
                vec![info("t1", "shell", "exited", false, "")],
                vec!["t1"],
                None,
            ),
            (
                "not a shell",
                vec![info("t1", "python", "running", false, "")],
                vec!["t1"],
                None,
            ),
            ("closed elsewhere: not listed", vec![], vec!["t1"], None),
        ];
        for (what, listed, used, want) in cases {
            let sessions = Arc::new(Sessions::default());
            for id in used {
                drop(sessions.sending("a", id));
            }
            let got = sessions.pick("a", &listed, &shells());
            assert_eq!(got.as_ref().map(InFlight::session_id), want, "{what}");
        }
    }

    #[test]
    fn a_session_with_a_send_in_flight_is_not_picked_until_it_settles() {
        let sessions = Arc::new(Sessions::default());
        let listed = [info("t1", "shell", "running", false, "")];
        drop(sessions.sending("a", "t1"));
        let first = sessions.pick("a", &listed, &shells()).expect("t1 is idle");
        assert!(
            sessions.pick("a", &listed, &shells()).is_none(),
            "a second concurrent default send gets another session"
        );
        drop(first);
        assert!(sessions.pick("a", &listed, &shells()).is_some());
        assert!(
            sessions.pick("b", &listed, &shells()).is_none(),
            "another agent's sessions are not this agent's default"
        );
    }

    #[test]
    fn closed_sessions_are_forgotten_and_opened_ones_taken_once() {
        let sessions = Arc::new(Sessions::default());
        sessions.opened("a", "t1");
        sessions.opened("a", "t2");
        sessions.closed("a", "t1");
        let listed = [
            info("t1", "shell", "running", false, ""),
            info("t2", "shell", "running", false, ""),
        ];
        let picked = sessions.pick("a", &listed, &shells()).expect("t2");
        assert_eq!(picked.session_id(), "t2");
        drop(picked);
        assert_eq!(sessions.take_opened(), [("a".to_owned(), "t2".to_owned())]);
        assert!(sessions.take_opened().is_empty());
        assert!(sessions.pick("a", &listed, &shells()).is_none());
    }
}
