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
//! The first window is mapped lazily (an idle session touches a page or two); later ones, once
//! the session produces output in bulk, are populated up front, which costs one call instead of
//! a page fault per 4 KiB. Windows behind the write position are unmapped, so the daemon holds
//! at most one window per session.

use nix::fcntl::{FallocateFlags, fallocate};
use nix::sys::mman::{MapFlags, MmapAdvise, ProtFlags, madvise, mmap, munmap};
use std::fs::{File, OpenOptions};
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;

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
    /// The mapped window.
    map: NonNull<u8>,
    /// File offset of the window's first byte.
    window_start: u64,
    /// Bytes of the window already written.
    used: usize,
}

// SAFETY: the mapping is owned by the journal alone (no other pointer to it is handed out but
// borrows of `self`), so moving the journal to another thread moves its only user.
unsafe impl Send for Journal {}

impl Journal {
    /// A new, empty journal at `path` (replacing any file there).
    pub(crate) fn create(path: &Path) -> io::Result<Journal> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        Journal::at(file, 0, false)
    }

    /// The journal at `path` a previous daemon wrote, opened to go on after its content, and
    /// that content.
    pub(crate) fn reopen(path: &Path) -> io::Result<(Journal, Vec<u8>)> {
        let mut bytes = std::fs::read(path)?;
        bytes.truncate(content_len(&bytes));
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let journal = Journal::at(file, bytes.len() as u64, false)?;
        Ok((journal, bytes))
    }

    /// Maps the window holding file offset `pos`, the write position.
    fn at(file: File, pos: u64, populate: bool) -> io::Result<Journal> {
        let window_start = pos - pos % ALIGN;
        let (map, used) = map_window(&file, window_start, populate)?;
        Ok(Journal {
            file,
            map,
            window_start,
            used: used + (pos - window_start) as usize,
        })
    }

    /// Room for the next read, straight in the journal; pass what was read to `commit`.
    pub(crate) fn spare(&mut self) -> io::Result<&mut [u8]> {
        if WINDOW - self.used < MIN_SPARE {
            let pos = self.window_start + self.used as u64;
            let next = pos - pos % ALIGN;
            let (map, _) = map_window(&self.file, next, true)?;
            self.unmap();
            self.map = map;
            self.window_start = next;
            self.used = (pos - next) as usize;
        }
        // SAFETY: the window is WINDOW bytes mapped read-write and owned by `self`; `used` is at
        // most WINDOW, and the borrow of `self` keeps anyone else from touching it meanwhile.
        Ok(unsafe {
            std::slice::from_raw_parts_mut(self.map.as_ptr().add(self.used), WINDOW - self.used)
        })
    }

    /// Records that the first `n` bytes of the last `spare` were written; returns them.
    pub(crate) fn commit(&mut self, n: usize) -> &[u8] {
        let start = self.used;
        self.used = (self.used + n).min(WINDOW);
        // SAFETY: `start..used` lies in the mapped window (see `spare`).
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(start), self.used - start) }
    }

    /// Lets the kernel take back the window's pages from this process (an idle session): the
    /// bytes stay in the file's page cache, and the next read maps them in again.
    pub(crate) fn rest(&mut self) {
        // SAFETY: `map` is a live WINDOW-byte shared file mapping; MADV_DONTNEED on it only
        // drops this process's page-table entries (the file keeps its content), and no borrow
        // of the mapping outlives `&mut self`.
        let _ = unsafe { madvise(self.map.cast(), WINDOW, MmapAdvise::MADV_DONTNEED) };
    }

    fn unmap(&mut self) {
        // SAFETY: `map` is a live WINDOW-byte mapping made by `map_window`; no borrow of it
        // outlives the `&mut self` this runs under.
        let _ = unsafe { munmap(self.map.cast(), WINDOW) };
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.unmap();
    }
}

/// Preallocates and maps the WINDOW bytes of `file` from `start`; returns the mapping and 0.
fn map_window(file: &File, start: u64, populate: bool) -> io::Result<(NonNull<u8>, usize)> {
    fallocate(
        file.as_raw_fd(),
        FallocateFlags::empty(),
        start as libc::off_t,
        WINDOW as libc::off_t,
    )?;
    let mut flags = MapFlags::MAP_SHARED;
    if populate {
        flags |= MapFlags::MAP_POPULATE;
    }
    let length = NonZeroUsize::new(WINDOW).expect("a non-empty window");
    // SAFETY: a fresh shared mapping of a range the file now has (just preallocated); nothing
    // else maps it in this process, and only the journal truncates the file (it never does).
    let map = unsafe {
        mmap(
            None,
            length,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            flags,
            file,
            start as libc::off_t,
        )
    }?;
    Ok((map.cast(), 0))
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
        let (mut again, content) = Journal::reopen(&path).unwrap();
        assert_eq!(content, first);
        drop(journal);
        again.rest();
        write(&mut again, b"more");
        drop(again);
        let (_, content) = Journal::reopen(&path).unwrap();
        assert_eq!(&content[..first.len()], &first[..]);
        assert_eq!(&content[first.len()..], b"more");
    }
}
