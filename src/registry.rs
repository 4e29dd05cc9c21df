//! Sessions keyed by id, each owned by one agent; id issuing and the session limits. A lookup
//! by another agent fails exactly like a lookup of an unknown id, so existence never leaks.
//!
//! Limits are held as slots: [`Registry::reserve`] checks and takes a slot in one step, before
//! the session starts, so concurrent `Open`s cannot all pass the check and then all insert. The
//! slot lives in the [`Reservation`] until the started session is registered with
//! [`Registry::insert`], then in the registry's entry; dropping either (a failed start, a caller
//! that hung up, a removed session) gives the slot back.

use crate::error::{Error, Result};
use crate::session::SessionHandle;
use crate::state::{Counters, StateDir};
use dashmap::DashMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A registered session and its owner.
struct Entry {
    /// The agent that opened it.
    owner: String,
    /// The session actor.
    handle: SessionHandle,
    /// The session's place under the limits, given back when the entry is removed.
    _slot: Slot,
}

/// A background job: which agent owns it and which session runs it.
#[derive(Clone)]
pub(crate) struct JobEntry {
    /// The agent that started it.
    owner: String,
    /// The session it runs in.
    pub(crate) handle: SessionHandle,
}

/// Sessions held or being started, per agent and in all: what the limits count.
#[derive(Default)]
struct SlotCounts {
    total: usize,
    per_agent: HashMap<String, usize>,
}

/// The slot counts behind a short-held std mutex: taken only to check and bump two counters,
/// never across an `.await`.
#[derive(Clone, Default)]
struct Slots(Arc<Mutex<SlotCounts>>);

impl Slots {
    fn lock(&self) -> MutexGuard<'_, SlotCounts> {
        // The counters stay consistent even if a holder panicked: each update is one statement.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a slot for `owner` when both limits allow it.
    fn take(&self, owner: &str, per_agent: usize, total: usize) -> Result<Slot> {
        let mut counts = self.lock();
        if counts.total >= total {
            return Err(Error::ResourceExhausted(format!(
                "the daemon already holds its limit of {total} sessions"
            )));
        }
        let mine = counts.per_agent.get(owner).copied().unwrap_or(0);
        if mine >= per_agent {
            return Err(Error::ResourceExhausted(format!(
                "agent_id {owner:?} already holds its limit of {per_agent} sessions; close one first"
            )));
        }
        counts.total += 1;
        counts.per_agent.insert(owner.to_owned(), mine + 1);
        Ok(Slot {
            slots: self.clone(),
            owner: owner.to_owned(),
        })
    }
}

/// One session's place under the limits; given back on drop.
struct Slot {
    slots: Slots,
    owner: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.slots.lock();
        counts.total = counts.total.saturating_sub(1);
        if let Some(mine) = counts.per_agent.get_mut(&self.owner) {
            *mine = mine.saturating_sub(1);
            if *mine == 0 {
                counts.per_agent.remove(&self.owner);
            }
        }
    }
}

/// A session slot taken under the limits and the id the session will have. Hand it to
/// [`Registry::insert`] once the session started; dropping it gives the slot back.
pub(crate) struct Reservation {
    id: String,
    slot: Slot,
}

impl Reservation {
    /// The id issued for the session.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }
}

/// All live sessions and retained jobs of the daemon.
#[derive(Default)]
pub(crate) struct Registry {
    sessions: DashMap<u64, Entry>,
    slots: Slots,
    jobs: DashMap<u64, JobEntry>,
    next_job: AtomicU64,
    /// Sessions being closed right now (so a second Close answers ALREADY_CLOSING).
    closing: DashMap<u64, String>,
    next_session: AtomicU64,
    /// Where the id counters are kept across daemons, when they are.
    state: Option<Arc<StateDir>>,
    /// Serialises counter saves, so a save never writes older values over newer ones.
    saving: Mutex<()>,
}

/// Parses "t12" into 12.
fn session_number(id: &str) -> Option<u64> {
    id_number(id, 't')
}

/// Parses "j12" into 12.
fn job_number(id: &str) -> Option<u64> {
    id_number(id, 'j')
}

/// The number of an id spelled as ptyd spells it: `prefix`, then a positive decimal without a
/// sign or leading zeros. `t01`, `t+1` and `t0001` are not `t1` (docs/security.md: one id, one
/// spelling), so a caller's typo never reaches another session.
fn id_number(id: &str, prefix: char) -> Option<u64> {
    let digits = id.strip_prefix(prefix)?;
    let canonical = digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0');
    canonical.then(|| digits.parse().ok()).flatten()
}

impl Registry {
    /// A registry whose ids continue after those the daemons before it issued from `state`
    /// (and are recorded there as they are issued).
    pub(crate) fn with_state(state: Arc<StateDir>) -> Registry {
        let counters = state.counters();
        Registry {
            next_session: AtomicU64::new(counters.sessions),
            next_job: AtomicU64::new(counters.jobs),
            state: Some(state),
            ..Registry::default()
        }
    }

    /// The state directory, when sessions are kept for a successor.
    pub(crate) fn state(&self) -> Option<&Arc<StateDir>> {
        self.state.as_ref()
    }

    /// Records the counters before an id they cover is handed out: a daemon killed right after
    /// cannot have its successor issue the same id.
    fn save_counters(&self) {
        if let Some(state) = &self.state {
            let _one_at_a_time = self.saving.lock().unwrap_or_else(|e| e.into_inner());
            let counters = Counters {
                sessions: self.next_session.load(Ordering::Relaxed),
                jobs: self.next_job.load(Ordering::Relaxed),
            };
            if let Err(e) = state.save_counters(counters) {
                tracing::warn!(error = %e, "could not record the id counters");
            }
        }
    }

    /// Serves a session adopted from a previous daemon under its id and owner (it takes a slot
    /// but is not refused by the limits: it exists already), with its jobs; ids issued later
    /// continue after it.
    pub(crate) fn adopt(&self, owner: &str, handle: SessionHandle, jobs: &[String]) {
        let Some(n) = session_number(&handle.spec.id) else {
            return;
        };
        self.next_session.fetch_max(n, Ordering::Relaxed);
        for job in jobs {
            if let Some(j) = job_number(job) {
                self.next_job.fetch_max(j, Ordering::Relaxed);
                self.jobs.insert(
                    j,
                    JobEntry {
                        owner: owner.to_owned(),
                        handle: handle.clone(),
                    },
                );
            }
        }
        self.save_counters();
        let Ok(slot) = self.slots.take(owner, usize::MAX, usize::MAX) else {
            return;
        };
        self.sessions.insert(
            n,
            Entry {
                owner: owner.to_owned(),
                handle,
                _slot: slot,
            },
        );
    }

    /// Takes a session slot for `owner` (at most `per_agent` for one agent, `total` in all,
    /// counting sessions still starting) and issues the new session's id, which is never reused
    /// during the daemon's lifetime.
    pub(crate) fn reserve(
        &self,
        owner: &str,
        per_agent: usize,
        total: usize,
    ) -> Result<Reservation> {
        let slot = self.slots.take(owner, per_agent, total)?;
        let n = self.next_session.fetch_add(1, Ordering::Relaxed) + 1;
        self.save_counters();
        Ok(Reservation {
            id: format!("t{n}"),
            slot,
        })
    }

    /// Registers a started session under its reservation (whose id it must carry).
    pub(crate) fn insert(&self, reservation: Reservation, handle: SessionHandle) {
        debug_assert_eq!(reservation.id, handle.spec.id);
        let Reservation { id, slot } = reservation;
        if let Some(n) = session_number(&id) {
            self.sessions.insert(
                n,
                Entry {
                    owner: slot.owner.clone(),
                    handle,
                    _slot: slot,
                },
            );
        }
    }

    /// The session `id` if `owner` owns it.
    pub(crate) fn get(&self, owner: &str, id: &str) -> Result<SessionHandle> {
        session_number(id)
            .and_then(|n| self.sessions.get(&n))
            .filter(|e| e.owner == owner)
            .map(|e| e.handle.clone())
            .ok_or_else(|| Error::session_not_found(id))
    }

    /// Whether `owner`'s session `id` is being closed by another request.
    pub(crate) fn is_closing(&self, owner: &str, id: &str) -> bool {
        session_number(id)
            .and_then(|n| self.closing.get(&n))
            .is_some_and(|o| o.value() == owner)
    }

    /// Marks `id` as closing; false when another close already did.
    pub(crate) fn begin_close(&self, owner: &str, id: &str) -> bool {
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
    pub(crate) fn remove(&self, id: &str) {
        if let Some(n) = session_number(id) {
            self.sessions.remove(&n);
            self.closing.remove(&n);
            self.jobs.retain(|_, j| j.handle.spec.id != id);
        }
    }

    /// `owner`'s sessions, oldest first.
    pub(crate) fn list(&self, owner: &str) -> Vec<SessionHandle> {
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
    pub(crate) fn insert_job(&self, owner: &str, handle: SessionHandle, keep: usize) -> String {
        let n = self.next_job.fetch_add(1, Ordering::Relaxed) + 1;
        self.save_counters();
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
    pub(crate) fn job(&self, owner: &str, id: &str) -> Result<JobEntry> {
        job_number(id)
            .and_then(|n| self.jobs.get(&n))
            .filter(|e| e.owner == owner)
            .map(|e| e.clone())
            .ok_or_else(|| Error::job_not_found(id))
    }

    /// Forgets a job whose send could not start.
    pub(crate) fn remove_job(&self, id: &str) {
        if let Some(n) = job_number(id) {
            self.jobs.remove(&n);
        }
    }

    /// Every session, for shutdown.
    pub(crate) fn all(&self) -> Vec<SessionHandle> {
        self.sessions.iter().map(|e| e.handle.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_canonical_spelling_names_an_id() {
        // (id, session number, job number)
        let cases = [
            ("t1", Some(1), None),
            ("t12", Some(12), None),
            ("j7", None, Some(7)),
            ("t01", None, None),
            ("t0001", None, None),
            ("t+1", None, None),
            ("t-1", None, None),
            ("t0", None, None),
            ("t", None, None),
            ("t 1", None, None),
            ("j+7", None, None),
            ("j07", None, None),
            ("T1", None, None),
            ("t99999999999999999999999", None, None),
        ];
        for (id, session, job) in cases {
            assert_eq!(session_number(id), session, "session {id:?}");
            assert_eq!(job_number(id), job, "job {id:?}");
        }
    }
}
