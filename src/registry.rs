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

/// A background job: which agent owns it and which session runs it.
#[derive(Clone)]
pub struct JobEntry {
    /// The agent that started it.
    pub owner: String,
    /// The session it runs in.
    pub handle: SessionHandle,
}

/// All live sessions and retained jobs of the daemon.
#[derive(Default)]
pub struct Registry {
    sessions: DashMap<u64, Entry>,
    jobs: DashMap<u64, JobEntry>,
    next_job: AtomicU64,
    /// Sessions being closed right now (so a second Close answers ALREADY_CLOSING).
    closing: DashMap<u64, String>,
    next_session: AtomicU64,
}

/// Parses "t12" into 12.
fn session_number(id: &str) -> Option<u64> {
    id.strip_prefix('t')?.parse().ok().filter(|n| *n > 0)
}

/// Parses "j12" into 12.
fn job_number(id: &str) -> Option<u64> {
    id.strip_prefix('j')?.parse().ok().filter(|n| *n > 0)
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
            self.jobs.retain(|_, j| j.handle.spec.id != id);
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

    /// Registers a new job of `owner` in `handle`'s session and returns its id. Beyond `keep`
    /// jobs per agent the oldest finished ones are forgotten (only the newest job of a session
    /// can still be running: a session runs one send at a time).
    pub fn insert_job(&self, owner: &str, handle: SessionHandle, keep: usize) -> String {
        let n = self.next_job.fetch_add(1, Ordering::Relaxed) + 1;
        let mut mine: Vec<(u64, String)> = self
            .jobs
            .iter()
            .filter(|e| e.owner == owner)
            .map(|e| (*e.key(), e.handle.spec.id.clone()))
            .collect();
        mine.sort();
        let mut excess = (mine.len() + 1).saturating_sub(keep.max(1));
        for (i, (number, session)) in mine.iter().enumerate() {
            if excess == 0 {
                break;
            }
            let superseded = mine[i + 1..].iter().any(|(_, s)| s == session);
            if superseded || *session == handle.spec.id {
                self.jobs.remove(number);
                excess -= 1;
            }
        }
        self.jobs.insert(
            n,
            JobEntry {
                owner: owner.to_owned(),
                handle,
            },
        );
        format!("j{n}")
    }

    /// The job `id` if `owner` owns it.
    pub fn job(&self, owner: &str, id: &str) -> Result<JobEntry> {
        job_number(id)
            .and_then(|n| self.jobs.get(&n))
            .filter(|e| e.owner == owner)
            .map(|e| e.clone())
            .ok_or_else(|| Error::job_not_found(id))
    }

    /// Forgets a job whose send could not start.
    pub fn remove_job(&self, id: &str) {
        if let Some(n) = job_number(id) {
            self.jobs.remove(&n);
        }
    }

    /// Every session, for shutdown.
    pub fn all(&self) -> Vec<SessionHandle> {
        self.sessions.iter().map(|e| e.handle.clone()).collect()
    }
}
