//! The tag every process of a session inherits in its environment: how Close still finds what a
//! session started once its helper, which otherwise tracks the whole tree, is gone.
//!
//! In subreaper mode the helper's descendants are the session's processes. When the helper is
//! killed from inside its session, what it had adopted comes to the daemon, and after a daemon
//! crash on top of that everything goes to init: neither tree nor Unix session names it any
//! more (`setsid` leaves the shell's session, a double fork leaves its tree). What every such
//! process still carries is the environment it was started with, and so `PTYD_SESSION_TAG`, a
//! random value per session that the record keeps for the next daemon. Only a process started
//! with a cleared environment (`env -i`) escapes it; its parent, if tagged, still leads to it.

use crate::process::procfs;

/// The environment variable that carries a session's tag. Nothing a request sets overrides it.
pub(crate) const TAG_ENV: &str = "PTYD_SESSION_TAG";

/// A fresh tag: 128 random bits as 32 hex digits, so that no two sessions, of this daemon or of
/// any other, share one.
pub(crate) fn generate() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `env` with `tag` set as the session's tag, in place of any value it had.
pub(crate) fn apply(env: &[(String, String)], tag: &str) -> Vec<(String, String)> {
    let mut tagged: Vec<(String, String)> =
        env.iter().filter(|(k, _)| k != TAG_ENV).cloned().collect();
    tagged.push((TAG_ENV.to_owned(), tag.to_owned()));
    tagged
}

/// Whether an environment block as `/proc/<pid>/environ` holds it (`NAME=value`, each ended by
/// a NUL) carries `tag`.
fn carries(environ: &[u8], tag: &str) -> bool {
    let entry = format!("{TAG_ENV}={tag}");
    environ
        .split(|&b| b == 0)
        .any(|variable| variable == entry.as_bytes())
}

/// Every live process started with `tag` in its environment (those whose environment this
/// process may read: its own user's, or every one as root).
pub(crate) fn tagged(tag: &str) -> Vec<i32> {
    procfs::pids()
        .into_iter()
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| carries(&env, tag))
        })
        .filter(|&pid| procfs::is_alive(pid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_carries_a_tag_only_as_a_whole_variable() {
        let tag = "0123abcd";
        let cases: &[(&[u8], bool)] = &[
            (b"PTYD_SESSION_TAG=0123abcd\0", true),
            (b"A=1\0PTYD_SESSION_TAG=0123abcd\0B=2\0", true),
            (b"PTYD_SESSION_TAG=0123abcd", true),
            (b"PTYD_SESSION_TAG=0123abcde\0", false),
            (b"PTYD_SESSION_TAG=0123abc\0", false),
            (b"XPTYD_SESSION_TAG=0123abcd\0", false),
            (b"A=PTYD_SESSION_TAG=0123abcd\0", false),
            (b"", false),
        ];
        for (environ, want) in cases {
            assert_eq!(
                carries(environ, tag),
                *want,
                "{}",
                String::from_utf8_lossy(environ)
            );
        }
    }

    #[test]
    fn a_tag_replaces_any_value_the_environment_had() {
        let env = vec![
            ("A".to_owned(), "1".to_owned()),
            (TAG_ENV.to_owned(), "forged".to_owned()),
        ];
        let tagged = apply(&env, "t4g");
        assert_eq!(
            tagged,
            vec![
                ("A".to_owned(), "1".to_owned()),
                (TAG_ENV.to_owned(), "t4g".to_owned())
            ]
        );
        let (a, b) = (generate().unwrap(), generate().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn the_processes_started_with_a_tag_are_found_by_it_and_no_others() {
        let (tag, other) = (generate().unwrap(), generate().unwrap());
        let start = |tag: &str| {
            std::process::Command::new("sleep")
                .arg("60")
                .env(TAG_ENV, tag)
                .spawn()
                .expect("start sleep")
        };
        let mut children = [start(&tag), start(&tag), start(&other)];
        let mut want: Vec<i32> = children[..2].iter().map(|c| c.id() as i32).collect();
        want.sort_unstable();
        // `spawn` returns during the child's `exec`, a moment before the kernel shows the new
        // environment in `/proc`: look again until it does.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let found = loop {
            let mut found = tagged(&tag);
            found.sort_unstable();
            if found == want || std::time::Instant::now() >= deadline {
                break found;
            }
            std::thread::yield_now();
        };
        for child in &mut children {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert_eq!(found, want);
        assert!(tagged(&generate().unwrap()).is_empty());
    }
}
