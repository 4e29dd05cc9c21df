//! Where ptyd's socket and state may live: only in a directory no other user can change, since
//! whoever can rename entries there can swap the daemon's socket for their own and read the
//! next client's requests (docs/security.md). The daemon checks before it serves, a client
//! before it connects.

use crate::error::{Error, Result};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Why a directory owned by `owner` with permission bits `mode` is no place for ptyd's files
/// when the daemon (or client) runs as `me`, if it is not. Root may own it (root can do anything
/// anyway); group or others may write only where the sticky bit keeps them from renaming or
/// removing what is not theirs (as in `/tmp`).
pub(crate) fn unsafe_because(owner: u32, mode: u32, me: u32) -> Option<&'static str> {
    if owner != me && owner != 0 {
        return Some("another user owns it");
    }
    let sticky = mode & 0o1000 != 0;
    if mode & 0o002 != 0 && !sticky {
        return Some("every user can write to it");
    }
    if mode & 0o020 != 0 && !sticky {
        return Some("its group can write to it");
    }
    None
}

/// Checks that `dir` (the `what`: "socket directory", "state directory") is safe for ptyd's
/// files; one that does not exist yet is (it will be made 0700). A symbolic link is judged by
/// who owns it and by where it leads.
pub(crate) fn check(dir: &Path, what: &str) -> Result<()> {
    let me = nix::unistd::getuid().as_raw();
    let Ok(link) = std::fs::symlink_metadata(dir) else {
        return Ok(());
    };
    let mut verdict = unsafe_because(link.uid(), 0, me).map(|why| (why, link.uid(), link.mode()));
    if verdict.is_none() {
        let meta = std::fs::metadata(dir)
            .map_err(Error::io(format!("reading the {what} {}", dir.display())))?;
        verdict =
            unsafe_because(meta.uid(), meta.mode(), me).map(|why| (why, meta.uid(), meta.mode()));
    }
    match verdict {
        None => Ok(()),
        Some((why, owner, mode)) => Err(Error::FailedPrecondition(format!(
            "refusing the {what} {}: {why} (owner {}, mode {:04o}), so another user could swap \
             ptyd's files there; remove it, or choose another place (--socket, state_dir)",
            dir.display(),
            owner_name(owner),
            mode & 0o7777
        ))),
    }
}

/// Checks the socket file a client is about to connect to: in a safe directory, and made by
/// this user or root (not a socket another user bound there).
pub(crate) fn check_socket(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        check(dir, "socket directory")?;
    }
    let me = nix::unistd::getuid().as_raw();
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.uid() != me && meta.uid() != 0 => Err(Error::FailedPrecondition(format!(
            "refusing the socket {}: it belongs to {}, not to you, so it is not your ptyd",
            path.display(),
            owner_name(meta.uid())
        ))),
        _ => Ok(()),
    }
}

/// `uid 1002 (alice)`, or `uid 1002` for a uid without a name.
fn owner_name(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

/// The name the user database gives `uid`, if any.
pub(crate) fn user_name(uid: u32) -> Option<String> {
    nix::unistd::User::from_uid(uid.into())
        .ok()
        .flatten()
        .map(|user| user.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_directory_no_other_user_can_change_is_safe() {
        const ME: u32 = 1000;
        // (owner, mode, the reason it is refused)
        let cases = [
            (ME, 0o700, None),
            (ME, 0o755, None),
            (0, 0o755, None),
            (0, 0o1777, None),
            (ME, 0o1777, None),
            (1002, 0o700, Some("another user owns it")),
            (1002, 0o777, Some("another user owns it")),
            (ME, 0o777, Some("every user can write to it")),
            (ME, 0o703, Some("every user can write to it")),
            (ME, 0o770, Some("its group can write to it")),
            (0, 0o777, Some("every user can write to it")),
        ];
        for (owner, mode, want) in cases {
            assert_eq!(unsafe_because(owner, mode, ME), want, "{owner} {mode:o}");
        }
    }
}
