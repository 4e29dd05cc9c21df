//! Is a foreground program blocked reading the terminal? The stdin probe's `/proc` reads
//! (each thread's syscall, its arguments and its wait channel, and its schedule counts), for
//! the session actor to judge a send by (`session/probe.rs` says when it runs, and what a
//! finding is judged against).

use crate::process::procfs;
use std::fs;

/// How a waiting syscall passes its timeout: which argument, in what form.
#[derive(Clone, Copy)]
enum TimeoutArg {
    /// An int in milliseconds (negative: none).
    Millis(usize),
    /// A pointer to a `struct timespec` (NULL: none).
    TimeSpec(usize),
    /// A pointer to a `struct timeval` (NULL: none).
    TimeVal(usize),
}

/// Syscall numbers of the calls that can wait on a terminal.
#[cfg(target_arch = "x86_64")]
mod nr {
    use super::TimeoutArg::{self, *};
    pub const READ: &[i64] = &[0, 17, 19];
    pub const SELECT: &[i64] = &[23, 270];
    pub const POLL: &[i64] = &[7, 271];
    pub const EPOLL: &[i64] = &[232, 281, 441];
    pub const TIMEOUTS: &[(i64, TimeoutArg)] = &[
        (23, TimeVal(4)),
        (270, TimeSpec(4)),
        (7, Millis(2)),
        (271, TimeSpec(2)),
        (232, Millis(3)),
        (281, Millis(3)),
        (441, TimeSpec(3)),
    ];
}
/// Syscall numbers of the calls that can wait on a terminal.
#[cfg(target_arch = "aarch64")]
mod nr {
    use super::TimeoutArg::{self, *};
    pub const READ: &[i64] = &[63, 65, 67];
    pub const SELECT: &[i64] = &[72];
    pub const POLL: &[i64] = &[73];
    pub const EPOLL: &[i64] = &[22, 441];
    pub const TIMEOUTS: &[(i64, TimeoutArg)] = &[
        (72, TimeSpec(4)),
        (73, TimeSpec(2)),
        (22, Millis(3)),
        (441, TimeSpec(3)),
    ];
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod nr {
    use super::TimeoutArg;
    pub const READ: &[i64] = &[];
    pub const SELECT: &[i64] = &[];
    pub const POLL: &[i64] = &[];
    pub const EPOLL: &[i64] = &[];
    pub const TIMEOUTS: &[(i64, TimeoutArg)] = &[];
}

/// A wait on the terminal with a timeout shorter than this is a pause, not a wait for the
/// user: vim waits 100 ms while it restores the terminal on exit, and programs wait briefly
/// for answers to terminal queries. Editors and REPLs wait without a timeout or with seconds.
const SHORT_WAIT_NS: u64 = 500_000_000;

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    /// Process id of the reader.
    pub pid: i32,
    /// The thread blocked on the terminal.
    pub tid: i32,
    /// How often that thread has been scheduled so far (see `task_switches`).
    pub switches: u64,
    /// Its command name.
    pub comm: String,
    /// True when the reader is the session's shell itself (its prompt, PS2, or a builtin
    /// such as `read`).
    pub is_shell: bool,
}

/// Looks for a process in the terminal's foreground group `fg` blocked reading the terminal
/// `tty` (a `/dev/pts/N` path). `password_mode` is the termios fallback for processes whose
/// `/proc` entries are hidden (setuid): line mode on and echo off.
pub fn terminal_reader(shell: i32, fg: i32, tty: &str, password_mode: bool) -> Option<Reader> {
    for pid in foreground_members(shell, fg) {
        if procfs::state(pid) != Some('S') {
            continue;
        }
        let mut hidden = false;
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let path = task.path();
            let tid = task
                .file_name()
                .to_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(pid);
            match fs::read_to_string(path.join("syscall")) {
                Ok(line) => {
                    if waits_on_tty(pid, &line, tty) {
                        return Some(reader(pid, tid, shell));
                    }
                }
                Err(_) => hidden = true,
            }
        }
        if hidden && password_mode {
            return Some(reader(pid, pid, shell));
        }
    }
    None
}

/// Schedule counts of every thread in the terminal's foreground group, by thread id. A
/// thread that was blocked on the terminal when input was written has taken that input only
/// once its count moved (it has run since): until then the input may still sit in the
/// kernel's buffers, where no `/proc` file shows it.
pub fn task_switches(shell: i32) -> std::collections::HashMap<i32, u64> {
    let mut out = std::collections::HashMap::new();
    let Some(fg) = procfs::tpgid(shell) else {
        return out;
    };
    // At its prompt the shell is the foreground: skip the walk of its descendants (this
    // runs before every write, so it is on the send-latency path).
    let members = if fg == shell {
        vec![shell]
    } else {
        foreground_members(shell, fg)
    };
    for pid in members {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Some(tid) = task.file_name().to_str().and_then(|s| s.parse().ok()) {
                out.insert(tid, switches(pid, tid));
            }
        }
    }
    out
}

/// One thread's schedule count read through a file kept open: a single `pread` where
/// `switches` opens, reads and closes (each /proc syscall costs microseconds, and the count
/// of a shell at its prompt is taken before every write).
pub struct ScheduleCounter(fs::File);

impl ScheduleCounter {
    /// The counter of process `pid`'s main thread; `None` without scheduler statistics.
    pub fn open(pid: i32) -> Option<ScheduleCounter> {
        let file = fs::File::open(format!("/proc/{pid}/task/{pid}/schedstat")).ok()?;
        let counter = ScheduleCounter(file);
        counter.read().map(|_| counter)
    }

    /// The current count; `None` once the thread is gone.
    pub fn read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        procfs::schedstat_runs(std::str::from_utf8(&buf[..n]).ok()?)
    }
}

/// How many times one thread has been put on a CPU (0 when unreadable). `schedstat`'s third
/// field is a third of the cost of formatting `status` for its context-switch counts, and
/// this runs before every write; kernels without scheduler statistics fall back to those.
fn switches(pid: i32, tid: i32) -> u64 {
    if let Some(count) = procfs::runs(pid, tid) {
        return count;
    }
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")) else {
        return 0;
    };
    status
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches:")
                || l.starts_with("nonvoluntary_ctxt_switches:")
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

fn reader(pid: i32, tid: i32, shell: i32) -> Reader {
    Reader {
        pid,
        tid,
        switches: switches(pid, tid),
        comm: procfs::comm(pid).unwrap_or_default(),
        is_shell: pid == shell,
    }
}

/// The shell and its descendants whose process group is `fg`.
fn foreground_members(shell: i32, fg: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![shell];
    let mut seen = 0;
    while let Some(pid) = stack.pop() {
        seen += 1;
        if seen > 4096 {
            break;
        }
        if procfs::pgid(pid) == Some(fg) {
            out.push(pid);
        }
        stack.extend(procfs::children(pid));
    }
    out
}

/// Whether one task's `/proc/.../syscall` line shows a wait on the terminal.
fn waits_on_tty(pid: i32, line: &str, tty: &str) -> bool {
    let mut fields = line.split_whitespace();
    let Some(nr) = fields.next().and_then(|s| s.parse::<i64>().ok()) else {
        return false;
    };
    let args: Vec<u64> = fields
        .take(6)
        .filter_map(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .collect();
    let arg = |i: usize| args.get(i).copied().unwrap_or(0);
    if brief_wait(pid, nr, &arg) {
        return false;
    }
    let is_tty = |fd: u64| {
        fs::read_link(format!("/proc/{pid}/fd/{fd}"))
            .is_ok_and(|p| p.as_os_str() == tty || p.as_os_str() == "/dev/tty")
    };
    if nr::READ.contains(&nr) {
        return is_tty(arg(0));
    }
    if nr::SELECT.contains(&nr) {
        let nfds = arg(0).min(1024);
        let Some(set) = read_mem(pid, arg(1), nfds.div_ceil(8) as usize) else {
            return false;
        };
        return (0..nfds).any(|fd| set[(fd / 8) as usize] & (1 << (fd % 8)) != 0 && is_tty(fd));
    }
    if nr::POLL.contains(&nr) {
        let n = arg(1).min(1024) as usize;
        let Some(raw) = read_mem(pid, arg(0), n * 8) else {
            return false;
        };
        return raw.chunks_exact(8).any(|pfd| {
            let fd = i32::from_ne_bytes([pfd[0], pfd[1], pfd[2], pfd[3]]);
            let events = i16::from_ne_bytes([pfd[4], pfd[5]]);
            fd >= 0 && events & libc::POLLIN != 0 && is_tty(fd as u64)
        });
    }
    if nr::EPOLL.contains(&nr) {
        let Ok(info) = fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", arg(0))) else {
            return false;
        };
        return info.lines().any(|l| {
            let mut parts = l.split_whitespace();
            if parts.next() != Some("tfd:") {
                return false;
            }
            let fd = parts.next().and_then(|s| s.parse::<u64>().ok());
            let events = parts
                .skip_while(|p| *p != "events:")
                .nth(1)
                .and_then(|s| u32::from_str_radix(s, 16).ok());
            matches!((fd, events), (Some(fd), Some(ev)) if ev & 1 != 0 && is_tty(fd))
        });
    }
    false
}

/// Whether a waiting syscall asked for a timeout shorter than `SHORT_WAIT_NS`.
fn brief_wait(pid: i32, nr: i64, arg: &dyn Fn(usize) -> u64) -> bool {
    let Some(&(_, how)) = nr::TIMEOUTS.iter().find(|(n, _)| *n == nr) else {
        return false;
    };
    let nanos = match how {
        TimeoutArg::Millis(i) => {
            let ms = arg(i) as i32;
            if ms < 0 {
                return false;
            }
            ms as u64 * 1_000_000
        }
        TimeoutArg::TimeSpec(i) | TimeoutArg::TimeVal(i) => {
            let Some(raw) = (arg(i) != 0).then(|| read_mem(pid, arg(i), 16)).flatten() else {
                return false;
            };
            let secs = u64::from_ne_bytes(raw[..8].try_into().expect("8 bytes"));
            let frac = u64::from_ne_bytes(raw[8..].try_into().expect("8 bytes"));
            let unit = if matches!(how, TimeoutArg::TimeVal(_)) {
                1_000
            } else {
                1
            };
            secs.saturating_mul(1_000_000_000)
                .saturating_add(frac.saturating_mul(unit))
        }
    };
    nanos < SHORT_WAIT_NS
}

fn read_mem(pid: i32, addr: u64, len: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    if len == 0 {
        return None;
    }
    let file = fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, addr).ok()?;
    Some(buf)
}
