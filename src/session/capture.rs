//! Where the actor's reads of the session's terminal land: straight in the session's output
//! journal when the session is kept in a state directory (so nothing read can be lost to the
//! daemon's death, see `state::journal`), else in the thread's shared read buffer. Every read
//! of the master goes through here.

use crate::process::pty::{MasterRead, OutputReader, Pty};
use crate::state::journal::Journal;
use crate::state::journal_head::Restored;
use std::cell::RefCell;
use std::io;

/// PTY read buffer: a master read rarely returns more than a few KiB.
const READ_BUF: usize = 16 * 1024;

thread_local! {
    /// The read buffer of every unjournaled session on this thread: an actor uses what it read
    /// before it awaits anything else, so one buffer serves them all and an idle session holds
    /// none.
    static READ_BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_BUF]);
}

/// The first `limit` bytes of `buf` (all of it when shorter).
fn up_to(buf: &mut [u8], limit: usize) -> &mut [u8] {
    let end = limit.min(buf.len());
    &mut buf[..end]
}

/// The session's journal, if it has one.
#[derive(Default)]
pub(super) struct Capture {
    journal: Option<Journal>,
}

impl Capture {
    pub(super) fn new(journal: Option<Journal>) -> Capture {
        Capture { journal }
    }

    /// Makes sure the journal has room for the next read; a journal that cannot grow (a full
    /// disk) is given up, with a warning, rather than the session's output.
    pub(super) fn prepare(&mut self, session: &str) {
        if let Some(journal) = &mut self.journal
            && let Err(e) = journal.spare()
        {
            tracing::warn!(session, error = %e,
                "the output journal cannot grow; a daemon adopting this session will miss what follows");
            self.journal = None;
        }
    }

    /// Waits for output and reads at most `limit` bytes of it. Use the bytes with `take`.
    pub(super) async fn read(&mut self, pty: &Pty, limit: usize) -> io::Result<MasterRead> {
        match &mut self.journal {
            Some(journal) => pty.read_into(up_to(journal.spare()?, limit)).await,
            None => pty.read_shared(&READ_BUFFER, limit).await,
        }
    }

    /// Reads at most `limit` bytes of output that is already there: `Ok(None)` when there is
    /// none.
    pub(super) fn try_read(&mut self, pty: &Pty, limit: usize) -> io::Result<Option<usize>> {
        match &mut self.journal {
            Some(journal) => pty.try_read(up_to(journal.spare()?, limit)),
            None => READ_BUFFER.with_borrow_mut(|buf| pty.try_read(up_to(buf, limit))),
        }
    }

    /// Like `try_read`, through a reader on another thread (whose own shared buffer `take`
    /// then uses).
    pub(super) fn try_read_from(
        &mut self,
        reader: &OutputReader,
        limit: usize,
    ) -> io::Result<Option<usize>> {
        match &mut self.journal {
            Some(journal) => reader.try_read(up_to(journal.spare()?, limit)),
            None => READ_BUFFER.with_borrow_mut(|buf| reader.try_read(up_to(buf, limit))),
        }
    }

    /// Bytes of output in the journal since its head (`None`: the session keeps no journal).
    pub(super) fn journal_output(&self) -> Option<u64> {
        self.journal.as_ref().map(Journal::output_len)
    }

    /// Replaces the journal by one that starts from `restored`; the old one stays if that fails.
    /// Dropping the old one gives its file's pages back, milliseconds of the kernel's time for a
    /// journal of tens of megabytes: called on a turn's worker (`actor/compact.rs`).
    pub(super) fn compact(&mut self, restored: &Restored) -> io::Result<()> {
        if let Some(journal) = &mut self.journal {
            *journal = journal.compact(restored)?;
        }
        Ok(())
    }

    /// The session went idle: its journal window need not stay resident.
    pub(super) fn rest(&mut self) {
        if let Some(journal) = &mut self.journal {
            journal.rest();
        }
    }

    /// Hands the `n` bytes the last read took to `use_them` (and records them in the journal).
    pub(super) fn take<R>(&mut self, n: usize, use_them: impl FnOnce(&[u8]) -> R) -> R {
        match &mut self.journal {
            Some(journal) => use_them(journal.commit(n)),
            None => READ_BUFFER.with_borrow(|buf| use_them(&buf[..n])),
        }
    }
}
