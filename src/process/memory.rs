//! Handing freed memory back to the system after sessions rest or close.
//!
//! A resting session frees its emulator grid (see `Terminal::rest`), but the allocator keeps
//! freed memory in its heap, where it still counts as the daemon's resident memory until
//! another allocation reuses it. After a burst of sessions (1000 opened at once), most of it
//! would stay. `trim_soon` asks for one `malloc_trim` a moment later, however many sessions
//! asked meanwhile: a heap walk per burst, and no timer at all while nothing rests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long requests gather before the one trim they share.
const GATHER: Duration = Duration::from_millis(500);

/// A trim is scheduled.
static PENDING: AtomicBool = AtomicBool::new(false);

/// Schedules a trim of the allocator's free memory, unless one is already scheduled. Needs a
/// tokio runtime; does nothing without one.
pub(crate) fn trim_soon() {
    if tokio::runtime::Handle::try_current().is_err() || PENDING.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::spawn(async {
        tokio::time::sleep(GATHER).await;
        PENDING.store(false, Ordering::Release);
        trim();
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
