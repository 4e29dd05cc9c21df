//! A session's raw output journal: every byte the daemon reads from the session's terminal, in
//! order, so a new daemon rebuilds history and screen by replaying it through the terminal
//! model.
//!
//! Nothing read may be lost, even to a `kill -9` just after a read: the daemon reads the
//! terminal straight into a shared mapping of the journal file (`spare`, then `commit`), so the
//! bytes are in the file's page cache the moment `read` returns, with no window between taking
//! them from the kernel and recording them, and no copy or syscall on the output path. The file
//! is extended a window at a time, preallocated (`fallocate`, so a full disk is an error at
//! extension, never a SIGBUS at a store) and zero-filled; its content is everything up to the
//! last non-zero byte. The zeros after it are what was never written, and a NUL written by the
//! program at the very end is dropped harmlessly: terminals ignore NUL.
//!
//! The file starts with a head (see `journal_head`). Output the terminal model no longer needs
//! is dropped by compaction: a new file is written beside the journal with a checkpoint of the
//! terminal as its head, and renamed over it; the output read after that goes into the new
//! file. A new daemon restores the checkpoint, then replays the output after it.
//!
//! The first window is mapped lazily (an idle session touches a page or two); later ones, once
//! the session produces output in bulk, are populated up front, which costs one call instead of
//! a page fault per 4 KiB. Windows behind the write position are unmapped, so the daemon holds
//! at most one window per session.

use super::journal_head::{self, Restored};
use memmap2::{Advice, MmapMut, MmapOptions, UncheckedAdvice};
use nix::fcntl::{FallocateFlags, fallocate};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Bytes mapped at a time (a multiple of the page size).
const WINDOW: usize = 256 << 10;
/// Room a read gets at least; less left in the window moves it on.
const MIN_SPARE: usize = 16 << 10;
/// Alignment of a window's start (the largest page size in use on Linux's 4 KiB-page targets
/// and 64 KiB arm64 kernels alike).
const ALIGN: u64 = 64 << 10;

/// The journal being written.
pub(crate) struct Journal {
    file: File,
    /// Where it is, to be replaced by a compacted one.
    path: PathBuf,
    /// The mapped window (WINDOW bytes).
    map: MmapMut,
    /// File offset of the window's first byte.
    window_start: u64,
    /// Bytes of the window already written.
    used: usize,
    /// File offset of the output's first byte (after the head).
    output_start: u64,
}

/// What a journal holds: what to restore first, then the output.
#[derive(Default)]
pub(crate) struct Content {
    pub(crate) restored: Option<Restored>,
    pub(crate) output: Vec<u8>,
    /// Bytes of the file's head, before the output.
    head: u64,
}

impl Journal {
    /// A new, empty journal at `path` (replacing any file there).
    pub(crate) fn create(path: &Path) -> io::Result<Journal> {
        Journal::with_head(path, path, &journal_head::encode(None))
    }

    /// What the journal at `path` a previous daemon wrote holds. Reading needs no space: on a
    /// full disk a session keeps what it had even when its journal cannot go on (`resume`).
    pub(crate) fn read(path: &Path) -> io::Result<Content> {
        let mut bytes = std::fs::read(path)?;
        bytes.truncate(content_len(&bytes));
        let (restored, head) = journal_head::decode(&bytes)?;
        bytes.drain(..head);
        Ok(Content {
            restored,
            output: bytes,
            head: head as u64,
        })
    }

    /// The journal at `path` whose content `read` gave, opened to go on after it (which needs
    /// room for a window on the disk).
    pub(crate) fn resume(path: &Path, content: &Content) -> io::Result<Journal> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let end = content.head + content.output.len() as u64;
        let mut journal = Journal::at(file, path, end, false)?;
        journal.output_start = content.head;
        Ok(journal)
    }

    /// Replaces this journal by one that restores `restored` and holds no output yet: the new
    /// file is written beside this one and renamed over it, so that a daemon killed meanwhile
    /// leaves one of the two whole.
    pub(crate) fn compact(&self, restored: &Restored) -> io::Result<Journal> {
        let mut beside = self.path.clone().into_os_string();
        beside.push(".new");
        let beside = PathBuf::from(beside);
        let made = Journal::with_head(&beside, &self.path, &journal_head::encode(Some(restored)))
            .and_then(|journal| std::fs::rename(&beside, &self.path).map(|()| journal));
        if made.is_err() {
            let _ = std::fs::remove_file(&beside);
        }
        made
    }

    /// Bytes of output written since the journal's head.
    pub(crate) fn output_len(&self) -> u64 {
        self.window_start + self.used as u64 - self.output_start
    }

    /// A journal file at `at` holding `head`, to go on after it, that will be known as `path`.
    fn with_head(at: &Path, path: &Path, head: &[u8]) -> io::Result<Journal> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(at)?;
        file.write_all(head)?;
        let mut journal = Journal::at(file, path, head.len() as u64, false)?;
        journal.output_start = head.len() as u64;
        Ok(journal)
    }

    /// Maps the window holding file offset `pos`, the write position.
    fn at(file: File, path: &Path, pos: u64, populate: bool) -> io::Result<Journal> {
        let window_start = pos - pos % ALIGN;
        let map = map_window(&file, window_start, populate)?;
        Ok(Journal {
            file,
            path: path.to_owned(),
            map,
            window_start,
            used: (pos - window_start) as usize,
            output_start: 0,
        })
    }

    /// Room for the next read, straight in the journal; pass what was read to `commit`.
    pub(crate) fn spare(&mut self) -> io::Result<&mut [u8]> {
        if WINDOW - self.used < MIN_SPARE {
            let pos = self.window_start + self.used as u64;
            let next = pos - pos % ALIGN;
            // The old window is unmapped as it is replaced.
            self.map = map_window(&self.file, next, true)?;
            self.window_start = next;
            self.used = (pos - next) as usize;
        }
        Ok(&mut self.map[self.used..])
    }

    /// Records that the first `n` bytes of the last `spare` were written; returns them.
    pub(crate) fn commit(&mut self, n: usize) -> &[u8] {
        let start = self.used;
        self.used = (self.used + n).min(WINDOW);
        &self.map[start..self.used]
    }

    /// Lets the kernel take back the window's pages from this process (an idle session): the
    /// bytes stay in the file's page cache, and the next read maps them in again.
    pub(crate) fn rest(&mut self) {
        // SAFETY: MADV_DONTNEED on a shared file mapping only drops this process's page-table
        // entries: the file keeps its content, and the next access maps it in again, so no
        // byte the mapping shows changes (memmap2 marks it unchecked for private mappings,
        // whose pages it would zero).
        let _ = unsafe { self.map.unchecked_advise(UncheckedAdvice::DontNeed) };
    }
}

/// Preallocates and maps the WINDOW bytes of `file` from `start`.
fn map_window(file: &File, start: u64, populate: bool) -> io::Result<MmapMut> {
    fallocate(
        file.as_raw_fd(),
        FallocateFlags::empty(),
        start as libc::off_t,
        WINDOW as libc::off_t,
    )?;
    let mut options = MmapOptions::new();
    options.offset(start).len(WINDOW);
    // SAFETY: a shared mapping of a range the file now has (just preallocated, so a store never
    // meets a hole on a full disk); only the journal writes or truncates the file (it never
    // truncates), and the state directory is the daemon's own (0700).
    let map = unsafe { options.map_mut(file) }?;
    if populate {
        // Writable from the start: MAP_POPULATE maps a shared file's pages read-only (so as not
        // to dirty them), and the first store to each then faults once more to make it
        // writable. The kernel refusing (before 5.14) costs only those faults.
        let _ = map.advise(Advice::PopulateWrite);
    }
    Ok(map)
}

/// The length of a journal's content: up to its last non-zero byte.
fn content_len(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_ends_at_the_last_non_zero_byte() {
        for (bytes, want) in [
            (&b""[..], 0),
            (b"\0\0\0", 0),
            (b"abc", 3),
            (b"abc\0\0", 3),
            (b"a\0b\0", 3),
        ] {
            assert_eq!(content_len(bytes), want, "{bytes:?}");
        }
    }

    /// Reads the journal at `path` and opens it to go on, as an adopting daemon does.
    fn reopen(path: &Path) -> io::Result<(Journal, Content)> {
        let content = Journal::read(path)?;
        Ok((Journal::resume(path, &content)?, content))
    }

    /// Writes `chunks` through `spare`/`commit` as the daemon's reads do.
    fn write(journal: &mut Journal, data: &[u8]) {
        let mut left = data;
        while !left.is_empty() {
            let room = journal.spare().expect("room");
            let n = room.len().min(left.len()).min(4000);
            room[..n].copy_from_slice(&left[..n]);
            assert_eq!(journal.commit(n), &left[..n]);
            left = &left[n..];
        }
    }

    #[test]
    fn what_was_committed_is_in_the_file_across_windows_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let first: Vec<u8> = (0..3 * WINDOW + 123).map(|i| (i % 251 + 1) as u8).collect();
        let mut journal = Journal::create(&path).unwrap();
        write(&mut journal, &first);
        // No flush and no drop: the bytes are in the file as soon as they are committed, as
        // they are for a daemon killed right after a read.
        let (mut again, content) = reopen(&path).unwrap();
        assert_eq!(content.output, first);
        assert_eq!(again.output_len(), first.len() as u64);
        drop(journal);
        again.rest();
        write(&mut again, b"more");
        drop(again);
        let (_, content) = reopen(&path).unwrap();
        assert_eq!(&content.output[..first.len()], &first[..]);
        assert_eq!(&content.output[first.len()..], b"more");
        assert_eq!(content.restored, None);
    }

    #[test]
    fn a_compacted_journal_restores_its_checkpoint_then_the_output_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let mut journal = Journal::create(&path).unwrap();
        write(&mut journal, &vec![b'x'; WINDOW + 5]);
        let restored = Restored {
            terminal: crate::screen::Checkpoint {
                line_base: 7,
                history: "kept\n".into(),
                screen: b"\x1b[H$ ".to_vec(),
                cols: 80,
                rows: 24,
                dropping_string: None,
                output_bytes: 0,
            },
            marks: Vec::new(),
        };
        let mut compacted = journal.compact(&restored).unwrap();
        assert_eq!(compacted.output_len(), 0);
        // The old journal's file is gone from the directory: nothing but the new one is found.
        drop(journal);
        write(&mut compacted, b"after");
        let (again, content) = reopen(&path).unwrap();
        assert_eq!(content.restored, Some(restored));
        assert_eq!(content.output, b"after");
        assert_eq!(again.output_len(), 5);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["journal"]);
    }
}
