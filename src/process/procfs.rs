//! Named reads of `/proc`: a process's parent, group, session, terminal foreground group, start
//! time, state and name, its children and descendants, its working directory.
//!
//! `/proc/<pid>/stat` is parsed in one place, [`Stat::parse`]: the command name (field 2) is
//! written in parentheses and may itself contain spaces and parentheses, so the fields after it
//! are found from the *last* `)` of the line. Every accessor returns `None` (or an empty list)
//! once the process is gone; a pid can be reused at any time, so callers that act on what they
//! read (signals) must hold something that pins the process, such as the terminal it owns.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// The fields of `/proc/<pid>/stat` that ptyd reads (numbers as in proc(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Field 2: the command name, without its parentheses (at most 15 bytes, truncated by the
    /// kernel).
    pub comm: String,
    /// Field 3: `R` running, `S` sleeping, `D` disk sleep, `T` stopped, `Z` zombie, ...
    pub state: char,
    /// Field 4: the parent's pid.
    pub ppid: i32,
    /// Field 5: the process group id.
    pub pgid: i32,
    /// Field 6: the session id.
    pub sid: i32,
    /// Field 8: the foreground process group of the controlling terminal (-1 without one).
    pub tpgid: i32,
    /// Fields 14 and 15: CPU time in user and kernel mode, in clock ticks.
    pub cpu_ticks: u64,
    /// Field 22: when the process started, in clock ticks after boot; with the pid it
    /// identifies a process even after its pid is reused.
    pub start_time: u64,
}

impl Stat {
    /// Parses one `/proc/<pid>/stat` line; `None` when it is not one.
    pub fn parse(line: &str) -> Option<Stat> {
        let open = line.find('(')?;
        let close = line.rfind(')')?;
        let comm = line.get(open + 1..close)?.to_owned();
        // Fields from 3 (state) on.
        let rest: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
        let field = |n: usize| rest.get(n - 3).copied();
        let number = |n: usize| field(n)?.parse::<i32>().ok();
        let mut state = field(3)?.chars();
        let (Some(letter), None) = (state.next(), state.next()) else {
            return None;
        };
        Some(Stat {
            comm,
            state: letter,
            ppid: number(4)?,
            pgid: number(5)?,
            sid: number(6)?,
            tpgid: number(8)?,
            cpu_ticks: field(14)?.parse::<u64>().ok()? + field(15)?.parse::<u64>().ok()?,
            start_time: field(22)?.parse().ok()?,
        })
    }
}

/// The stat fields of `pid`.
pub fn stat(pid: i32) -> Option<Stat> {
    Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The parent of `pid`.
pub fn ppid(pid: i32) -> Option<i32> {
    stat(pid).map(|s| s.ppid)
}

/// The process group of `pid`.
pub fn pgid(pid: i32) -> Option<i32> {
    stat(pid).map(|s| s.pgid)
}

/// The session id of `pid`.
pub fn sid(pid: i32) -> Option<i32> {
    stat(pid).map(|s| s.sid)
}

/// The foreground process group of `pid`'s controlling terminal; `None` without a terminal or
/// a foreground group.
pub fn tpgid(pid: i32) -> Option<i32> {
    stat(pid).map(|s| s.tpgid).filter(|&g| g > 0)
}

/// The CPU time `pid` has used, user and kernel (clock ticks).
pub fn cpu_ticks(pid: i32) -> Option<u64> {
    stat(pid).map(|s| s.cpu_ticks)
}

/// When `pid` started (clock ticks after boot).
pub fn start_time(pid: i32) -> Option<u64> {
    stat(pid).map(|s| s.start_time)
}

/// The state letter of `pid` (`R`, `S`, `T`, `Z`, ...).
pub fn state(pid: i32) -> Option<char> {
    stat(pid).map(|s| s.state)
}

/// The short command name of `pid` (`/proc/<pid>/comm`).
pub fn comm(pid: i32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_owned())
}

/// The working directory of `pid`.
pub fn cwd(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// How many times a thread has been put on a CPU, from the text of its
/// `/proc/<pid>/task/<tid>/schedstat` (time on CPU, time waiting, run count).
pub fn schedstat_runs(text: &str) -> Option<u64> {
    text.split_whitespace().nth(2)?.parse().ok()
}

/// The run count of thread `tid` of `pid` ([`schedstat_runs`]); `None` once it is gone or
/// without scheduler statistics.
pub fn runs(pid: i32, tid: i32) -> Option<u64> {
    schedstat_runs(&std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?)
}

/// Whether `pid` exists and has not exited (a zombie has exited; only its parent's wait is
/// missing).
pub fn is_alive(pid: i32) -> bool {
    state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// Every pid in `/proc`.
pub fn pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Direct children of `pid`, from every thread's `children` list (zombies included).
pub fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|s| s.parse::<i32>().ok()),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Every live (non-zombie) descendant of `root`, without `root` itself.
pub fn live_descendants(root: i32) -> Vec<i32> {
    let mut found = BTreeSet::new();
    let mut stack = children(root);
    while let Some(pid) = stack.pop() {
        if found.insert(pid) {
            stack.extend(children(pid));
        }
    }
    found.into_iter().filter(|&p| is_alive(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_parsed_after_the_last_parenthesis() {
        // The tail shared by the cases: fields 3.. with state S, ppid 1, pgid 42, sid 42,
        // tty 34816, tpgid 77, utime 1 and stime 2 (fields 14, 15), start time 12345 (22).
        let tail = "S 1 42 42 34816 77 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 200";
        let cases: Vec<(String, Option<&str>)> = vec![
            (format!("42 (bash) {tail}"), Some("bash")),
            (format!("42 (with space) {tail}"), Some("with space")),
            (format!("42 ((sd-pam)) {tail}"), Some("(sd-pam)")),
            (format!("42 (a) S 1 (b) {tail}"), Some("a) S 1 (b")),
            (format!("42 () {tail}"), Some("")),
            (format!("42 (x)) {tail}\n"), Some("x)")),
        ];
        for (line, comm) in cases {
            let parsed = Stat::parse(&line);
            assert_eq!(parsed.as_ref().map(|s| s.comm.as_str()), comm, "{line:?}");
            let s = parsed.expect("parsed");
            assert_eq!(
                (
                    s.state,
                    s.ppid,
                    s.pgid,
                    s.sid,
                    s.tpgid,
                    s.cpu_ticks,
                    s.start_time
                ),
                ('S', 1, 42, 42, 77, 3, 12345),
                "{line:?}"
            );
        }
    }

    #[test]
    fn what_is_not_a_stat_line_is_refused() {
        for line in [
            "",
            "42 bash S 1 42 42",
            "42 (bash)",
            "42 (bash) S 1 42 42 34816",
            "42 (bash) S x 42 42 34816 77 0 0 0 0 0 0 0 0 0 0 0 0 0 12345",
            "42 (bash) SS 1 42 42 34816 77 0 0 0 0 0 0 0 0 0 0 0 0 0 12345",
            "42 (bash) S 1 42 42 34816 77 0 0 0 0 0 0 0 0 0 0 0 0 0 -5",
        ] {
            assert_eq!(Stat::parse(line), None, "{line:?}");
        }
    }

    #[test]
    fn run_counts_are_the_third_schedstat_field() {
        for (text, want) in [
            ("1234567 89012 42\n", Some(42)),
            ("0 0 0", Some(0)),
            ("1 2", None),
            ("1 2 x", None),
            ("", None),
        ] {
            assert_eq!(schedstat_runs(text), want, "{text:?}");
        }
    }

    #[test]
    fn this_process_reads_as_itself() {
        let me = std::process::id() as i32;
        let s = stat(me).expect("our own stat");
        assert_eq!(ppid(me), Some(nix::unistd::getppid().as_raw()));
        assert_eq!(pgid(me), Some(nix::unistd::getpgrp().as_raw()));
        assert_eq!(sid(me), nix::unistd::getsid(None).ok().map(|p| p.as_raw()));
        assert!(is_alive(me));
        assert_eq!(comm(me), Some(s.comm));
        assert_eq!(cwd(me), std::env::current_dir().ok());
        assert!(pids().contains(&me));
        assert!(runs(me, me).is_some_and(|n| n > 0), "we have run");
        assert!(children(me).is_empty() || children(me).iter().all(|&c| ppid(c) == Some(me)));
    }

    #[test]
    fn a_child_is_listed_until_it_is_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("start sleep");
        let pid = child.id() as i32;
        let me = std::process::id() as i32;
        assert!(children(me).contains(&pid));
        assert!(live_descendants(me).contains(&pid));
        assert_eq!(ppid(pid), Some(me));
        child.kill().expect("kill sleep");
        child.wait().expect("reap sleep");
        assert!(!children(me).contains(&pid));
    }
}
