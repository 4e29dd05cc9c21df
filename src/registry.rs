//! Sessions keyed by id, each owned by one agent; id issuing and the session limits. A lookup
//! by another agent fails exactly like a lookup of an unknown id, so existence never leaks.

use crate::error::{Error, Result};
use crate::session::SessionHandle;
use dashmap::DashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A registered session and its owner.
#[derive(Clone)]
pub struct Entry {
    /// The agent that opened it.
    pub owner: String,
    /// The session actor.
    pub handle: SessionHandle,
}

/// All live sessions of the daemon.
#[derive(Default)]
pub struct Registry {
    sessions: DashMap<u64, Entry>,
    /// Sessions being closed right now (so a second Close answers ALREADY_CLOSING).
    closing: DashMap<u64, String>,
    next_session: AtomicU64,
}

/// Parses "t12" into 12.
fn session_number(id: &str) -> Option<u64> {
    id.strip_prefix('t')?.parse().ok().filter(|n| *n > 0)
}

impl Registry {
    /// A fresh session id; never reused during the daemon's lifetime.
    pub fn issue_session_id(&self) -> String {
        format!("t{}", self.next_session.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Checks the limits for a new session of `owner`.
    pub fn check_limits(&self, owner: &str, per_agent: usize, total: usize) -> Result<()> {
        if self.sessions.len() >= total {
            return Err(Error::ResourceExhausted(format!(
                "the daemon already holds its limit of {total} sessions"
            )));
        }
        let mine = self.sessions.iter().filter(|e| e.owner == owner).count();
        if mine >= per_agent {
            return Err(Error::ResourceExhausted(format!(
                "agent_id {owner:?} already holds its limit of {per_agent} sessions; close one first"
            )));
        }
        Ok(())
    }

    /// Registers a started session.
    pub fn insert(&self, owner: &str, handle: SessionHandle) {
        if let Some(n) = session_number(&handle.spec.id) {
            self.sessions.insert(
                n,
                Entry {
                    owner: owner.to_owned(),
                    handle,
                },
            );
        }
    }

    /// The session `id` if `owner` owns it.
    pub fn get(&self, owner: &str, id: &str) -> Result<SessionHandle> {
        session_number(id)
            .and_then(|n| self.sessions.get(&n))
            .filter(|e| e.owner == owner)
            .map(|e| e.handle.clone())
            .ok_or_else(|| Error::session_not_found(id))
    }

    /// Whether `owner`'s session `id` is being closed by another request.
    pub fn is_closing(&self, owner: &str, id: &str) -> bool {
        session_number(id)
            .and_then(|n| self.closing.get(&n))
            .is_some_and(|o| o.value() == owner)
    }

    /// Marks `id` as closing; false when another close already did.
    pub fn begin_close(&self, owner: &str, id: &str) -> bool {
        let Some(n) = session_number(id) else {
            return false;
        };
        match self.closing.entry(n) {
            dashmap::Entry::Occupied(_) => false,
            dashmap::Entry::Vacant(v) => {
                v.insert(owner.to_owned());
                true
            }
        }
    }

    /// Forgets a closed session.
    pub fn remove(&self, id: &str) {
        if let Some(n) = session_number(id) {
            self.sessions.remove(&n);
            self.closing.remove(&n);
        }
    }

    /// `owner`'s sessions, oldest first.
    pub fn list(&self, owner: &str) -> Vec<SessionHandle> {
        let mut mine: Vec<(u64, SessionHandle)> = self
            .sessions
            .iter()
            .filter(|e| e.owner == owner)
            .map(|e| (*e.key(), e.handle.clone()))
            .collect();
        mine.sort_by_key(|(n, _)| *n);
        mine.into_iter().map(|(_, h)| h).collect()
    }

    /// Every session, for shutdown.
    pub fn all(&self) -> Vec<SessionHandle> {
        self.sessions.iter().map(|e| e.handle.clone()).collect()
    }
}
