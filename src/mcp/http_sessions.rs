//! Which MCP HTTP sessions each token holds, so that no token holds more than
//! `MAX_SESSIONS_PER_TOKEN`: a client that initializes again and again (and never sends
//! `DELETE`) ends its own least recently used idle sessions, never another token's, and never
//! one with a request in flight. Pure bookkeeping; the HTTP layer (`http.rs`) ends the sessions
//! it names.
//!
//! A session belongs to the token (the agent id) whose `initialize` made it; a request of
//! another token that names it is answered as for an unknown session.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The most MCP sessions one token holds at once. One client holds one; a harness running
/// many subagents on one token holds a few dozen at most, and each costs about 60 KB.
pub(crate) const MAX_SESSIONS_PER_TOKEN: usize = 64;

/// One session's use.
#[derive(Debug)]
struct Use {
    agent: String,
    /// When a request on it last started or ended.
    last_used: Instant,
    /// Requests in flight on it (a response body being streamed, an open event stream).
    in_flight: usize,
}

/// Every session the HTTP server made, by session id.
#[derive(Debug)]
pub(crate) struct SessionBook {
    sessions: HashMap<String, Use>,
    bound: usize,
}

impl Default for SessionBook {
    fn default() -> SessionBook {
        SessionBook::with_bound(MAX_SESSIONS_PER_TOKEN)
    }
}

impl SessionBook {
    /// A book that lets each token hold `bound` sessions.
    pub(crate) fn with_bound(bound: usize) -> SessionBook {
        SessionBook {
            sessions: HashMap::new(),
            bound: bound.max(1),
        }
    }

    /// Whether `agent` may use session `id`: false only for a session another token made (an
    /// unknown one is for the MCP layer to refuse).
    pub(crate) fn may_use(&self, agent: &str, id: &str) -> bool {
        self.sessions.get(id).is_none_or(|u| u.agent == agent)
    }

    /// Whether `agent` may make another session: under the bound, or with an idle one to end.
    pub(crate) fn has_room(&self, agent: &str) -> bool {
        let mut held = 0;
        for session in self.sessions.values().filter(|u| u.agent == agent) {
            if session.in_flight == 0 {
                return true;
            }
            held += 1;
        }
        held < self.bound
    }

    /// Records session `id`, just made by `agent`; returns the sessions to end: `agent`'s least
    /// recently used idle ones beyond the bound, and any session idle for `idle_timeout` (which
    /// the MCP layer has stopped serving already).
    pub(crate) fn add(
        &mut self,
        agent: &str,
        id: &str,
        now: Instant,
        idle_timeout: Duration,
    ) -> Vec<String> {
        let mut ended: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, u)| u.in_flight == 0 && now.duration_since(u.last_used) >= idle_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        self.sessions.insert(
            id.to_owned(),
            Use {
                agent: agent.to_owned(),
                last_used: now,
                in_flight: 0,
            },
        );
        let mut idle: Vec<(&String, Instant)> = self
            .sessions
            .iter()
            .filter(|(other, u)| u.agent == agent && u.in_flight == 0 && *other != id)
            .filter(|(other, _)| !ended.contains(other))
            .map(|(other, u)| (other, u.last_used))
            .collect();
        let held = self
            .sessions
            .iter()
            .filter(|(other, u)| u.agent == agent && !ended.contains(other))
            .count();
        idle.sort_by_key(|&(_, last_used)| last_used);
        let over = held.saturating_sub(self.bound);
        ended.extend(idle.into_iter().take(over).map(|(id, _)| id.clone()));
        for id in &ended {
            self.sessions.remove(id);
        }
        ended
    }

    /// A request on session `id` started.
    pub(crate) fn begin(&mut self, id: &str, now: Instant) {
        if let Some(u) = self.sessions.get_mut(id) {
            u.in_flight += 1;
            u.last_used = now;
        }
    }

    /// A request on session `id` ended (its response's body was sent or dropped).
    pub(crate) fn end(&mut self, id: &str, now: Instant) {
        if let Some(u) = self.sessions.get_mut(id) {
            u.in_flight = u.in_flight.saturating_sub(1);
            u.last_used = now;
        }
    }

    /// Session `id` was ended (`DELETE`).
    pub(crate) fn remove(&mut self, id: &str) {
        self.sessions.remove(id);
    }

    /// The sessions `agent` holds (tests read it).
    #[cfg(test)]
    fn held(&self, agent: &str) -> Vec<&str> {
        let mut ids: Vec<&str> = self
            .sessions
            .iter()
            .filter(|(_, u)| u.agent == agent)
            .map(|(id, _)| id.as_str())
            .collect();
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(1800);

    /// One step of a client's use of the book, at `at` seconds.
    enum Step {
        Add(&'static str, &'static str, &'static [&'static str]),
        Begin(&'static str),
        End(&'static str),
        Remove(&'static str),
    }
    use Step::*;

    fn run(bound: usize, steps: &[(u64, Step)]) -> SessionBook {
        let start = Instant::now();
        let mut book = SessionBook::with_bound(bound);
        for (i, (at, step)) in steps.iter().enumerate() {
            let now = start + Duration::from_secs(*at);
            match step {
                Add(agent, id, want) => {
                    let mut ended = book.add(agent, id, now, LONG);
                    ended.sort_unstable();
                    assert_eq!(ended, *want, "step {i}: adding {id}");
                }
                Begin(id) => book.begin(id, now),
                End(id) => book.end(id, now),
                Remove(id) => book.remove(id),
            }
        }
        book
    }

    #[test]
    fn a_token_over_its_bound_ends_its_least_recently_used_idle_sessions() {
        let book = run(
            2,
            &[
                (0, Add("a", "a1", &[])),
                (1, Add("a", "a2", &[])),
                (2, Add("b", "b1", &[])),
                // a1 was used after a2: a2 is the least recently used.
                (3, Begin("a1")),
                (4, End("a1")),
                (5, Add("a", "a3", &["a2"])),
                // a3 has a request in flight: a1 goes, though a3 is older than the request.
                (6, Begin("a3")),
                (7, Add("a", "a4", &["a1"])),
                // Nothing of b's is touched, and a DELETE makes room.
                (8, Remove("a4")),
                (9, Add("a", "a5", &[])),
            ],
        );
        assert_eq!(book.held("a"), ["a3", "a5"]);
        assert_eq!(book.held("b"), ["b1"]);
    }

    #[test]
    fn a_token_whose_sessions_are_all_in_use_has_no_room() {
        let start = Instant::now();
        let mut book = SessionBook::with_bound(2);
        assert!(book.has_room("a"));
        for id in ["a1", "a2"] {
            assert!(book.add("a", id, start, LONG).is_empty());
            book.begin(id, start);
        }
        assert!(!book.has_room("a"), "two in flight");
        assert!(book.has_room("b"), "another token is not bound by a's");
        book.end("a2", start);
        assert!(book.has_room("a"), "an idle one can be ended");
    }

    #[test]
    fn sessions_idle_past_the_timeout_are_ended_by_the_next_add() {
        let start = Instant::now();
        let mut book = SessionBook::with_bound(8);
        book.add("a", "old", start, LONG);
        book.add("b", "busy", start, LONG);
        book.begin("busy", start);
        let later = start + LONG;
        assert_eq!(book.add("a", "new", later, LONG), ["old"]);
        assert_eq!(book.held("b"), ["busy"], "a request in flight keeps it");
    }

    #[test]
    fn a_session_is_used_only_by_the_token_that_made_it() {
        let mut book = SessionBook::default();
        book.add("a", "s1", Instant::now(), LONG);
        assert!(book.may_use("a", "s1"));
        assert!(!book.may_use("b", "s1"));
        assert!(book.may_use("b", "unknown"), "the MCP layer refuses it");
    }
}
