//! Session sandboxes (contract §12), the pure part: what a type or an `Open` asks for, the
//! paths resolved for one session, how a request may only tighten its type's, the text forms of
//! sizes and shares, the line every surface shows, and the lines that tell a session's helper
//! what to enforce (`process::sandbox` enforces them).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a sandboxed session may reach of the network. Ordered from tightest to loosest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// No network at all: a network namespace of its own without even a loopback interface
    /// up, and no TCP bind or connect; only Unix sockets.
    Off,
    /// A network namespace of its own with only its loopback interface: servers the session
    /// starts answer at 127.0.0.1 and ::1, nothing outside (the host's loopback included).
    Loopback,
    /// The host's network.
    On,
}

impl Network {
    /// The config and API spelling.
    pub fn name(self) -> &'static str {
        match self {
            Network::Off => "off",
            Network::Loopback => "loopback",
            Network::On => "on",
        }
    }

    /// Parses `on`, `loopback` or `off`.
    pub fn from_name(name: &str) -> Option<Network> {
        [Network::Off, Network::Loopback, Network::On]
            .into_iter()
            .find(|n| n.name() == name)
    }
}

/// A sandbox as a type's config or an `Open` gives it: paths may name `$CWD`, `$HOME` and
/// `$TMPDIR`; `None` leaves that key to the type (or unrestricted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxRequest {
    /// The only paths the session may write (beneath each); `Some(empty)`: none.
    pub write: Option<Vec<String>>,
    /// The only paths it may read, besides what a shell needs to start.
    pub read: Option<Vec<String>>,
    /// The network it may reach.
    pub network: Option<Network>,
    /// The cgroup's `memory.max`, bytes.
    pub memory_max: Option<u64>,
    /// The cgroup's `pids.max`.
    pub pids_max: Option<u64>,
    /// The cgroup's `cpu.max`, in percent of one CPU.
    pub cpu_max: Option<u32>,
}

/// The sandbox in force for one session: every path absolute and canonical (symlinks
/// resolved, as the kernel's rules see them). A session's record keeps it (serde), so that an
/// adopting daemon shows what its processes still hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sandbox {
    /// Writable roots; `None`: everything the user may write.
    pub write: Option<Vec<PathBuf>>,
    /// Readable roots (plus [`SYSTEM_READ`]); `None`: everything the user may read.
    pub read: Option<Vec<PathBuf>>,
    /// The network it reaches.
    pub network: Network,
    /// `memory.max` in bytes.
    pub memory_max: Option<u64>,
    /// `pids.max`.
    pub pids_max: Option<u64>,
    /// `cpu.max`, percent of one CPU.
    pub cpu_max: Option<u32>,
}

/// What a shell needs to start, readable (and executable) in every sandbox that restricts
/// reading: the system's programs, libraries and configuration, devices and `/proc`.
pub const SYSTEM_READ: [&str; 11] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/dev", "/proc",
];

/// Device files every sandboxed session may write and use (`ioctl`): a shell's own terminal,
/// new terminals, and the data sinks and sources programs open by name.
pub const DEVICES: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Smallest `memory_max`: below it not even a shell starts.
const MEMORY_FLOOR: u64 = 4 << 20;

/// The session's places that sandbox paths may name.
#[derive(Debug, Clone, Copy)]
pub struct Places<'a> {
    /// `$CWD`: the session's start directory.
    pub cwd: &'a Path,
    /// `$HOME` (the session's), when it has one.
    pub home: Option<&'a Path>,
    /// `$TMPDIR` (the session's, else `/tmp`).
    pub tmpdir: &'a Path,
}

/// Parses a byte count: digits with an optional `K`, `M` or `G` suffix (powers of 1024).
pub fn parse_size(key: &str, text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "{key}: must be a byte count, optionally with a K, M or G suffix (\"512M\"), got {text:?}"
        )
    };
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let bytes = n.checked_mul(1 << shift).ok_or_else(bad)?;
    if bytes < MEMORY_FLOOR {
        return Err(format!(
            "{key}: {text:?} is below the smallest limit a shell runs in, 4M"
        ));
    }
    Ok(bytes)
}

/// Parses a share of one CPU: `"150%"` (the `%` may be left out), 1 to 100000.
pub fn parse_cpu(key: &str, text: &str) -> Result<u32, String> {
    let t = text.trim();
    let digits = t.strip_suffix('%').unwrap_or(t);
    match digits.parse::<u32>() {
        Ok(n) if (1..=100_000).contains(&n) => Ok(n),
        _ => Err(format!(
            "{key}: must be a percentage of one CPU from 1% to 100000% (\"150%\"), got {text:?}"
        )),
    }
}

/// Checks a `pids_max`: at least 1.
pub fn check_pids(key: &str, n: u64) -> Result<u64, String> {
    if n == 0 {
        return Err(format!(
            "{key}: must be at least 1 (the session's shell is a process)"
        ));
    }
    Ok(n)
}

/// A byte count in its shortest exact form (`"512M"`).
pub fn format_size(bytes: u64) -> String {
    for (shift, suffix) in [(30, 'G'), (20, 'M'), (10, 'K')] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A `--sandbox KEY=VALUE` argument, checked alone (a clap value parser).
pub fn check_flag(flag: &str) -> Result<String, String> {
    SandboxRequest::from_flags(&[flag.to_owned()]).map(|_| flag.to_owned())
}

impl SandboxRequest {
    /// Parses the command-line form, one `KEY=VALUE` each (`ptyd open --sandbox`, `ptyd acp
    /// --sandbox`): `write` and `read` repeat to add paths (`write=` alone: no path at all),
    /// `network=on|loopback|off`, `memory_max=512M`, `pids_max=64`, `cpu_max=50%`.
    pub fn from_flags(flags: &[String]) -> Result<SandboxRequest, String> {
        let mut req = SandboxRequest::default();
        for flag in flags {
            let (key, value) = flag.split_once('=').ok_or_else(|| {
                format!("--sandbox {flag:?}: must be KEY=VALUE (write, read, network, memory_max, pids_max, cpu_max)")
            })?;
            let at = format!("--sandbox {key}");
            match key {
                "write" | "read" => {
                    let list = if key == "write" {
                        &mut req.write
                    } else {
                        &mut req.read
                    };
                    let list = list.get_or_insert_with(Vec::new);
                    if !value.is_empty() {
                        list.push(value.to_owned());
                    }
                }
                "network" => {
                    req.network = Some(Network::from_name(value).ok_or_else(|| {
                        format!("{at}: must be on, loopback or off, got {value:?}")
                    })?)
                }
                "memory_max" => req.memory_max = Some(parse_size(&at, value)?),
                "pids_max" => {
                    let n = value
                        .parse()
                        .map_err(|_| format!("{at}: must be a count, got {value:?}"))?;
                    req.pids_max = Some(check_pids(&at, n)?);
                }
                "cpu_max" => req.cpu_max = Some(parse_cpu(&at, value)?),
                _ => {
                    return Err(format!(
                        "--sandbox {key:?}: unknown key; known: write, read, network, memory_max, pids_max, cpu_max"
                    ));
                }
            }
        }
        Ok(req)
    }

    /// Checks every path's form (`key` is the prefix of the error's key), as a config file is
    /// read: absolute once `$CWD`, `$HOME` and `$TMPDIR` are replaced, no other variable.
    pub fn check_paths(&self, key: &str) -> Result<(), String> {
        let places = Places {
            cwd: Path::new("/cwd"),
            home: Some(Path::new("/home")),
            tmpdir: Path::new("/tmp"),
        };
        for (field, list) in [("write", &self.write), ("read", &self.read)] {
            for (i, raw) in list.iter().flatten().enumerate() {
                expand(&format!("{key}.{field}[{i}]"), raw, places)?;
            }
        }
        Ok(())
    }

    /// The sandbox this asks for in one session: each path with `$CWD`, `$HOME` and
    /// `$TMPDIR` replaced, absolute, and made canonical by `canonical` (which fails for a path
    /// that does not exist). Errors name the key (`key` is its prefix, `sandbox` or
    /// `types[0].sandbox`).
    pub fn resolve(
        &self,
        key: &str,
        places: Places<'_>,
        canonical: impl Fn(&Path) -> std::io::Result<PathBuf>,
    ) -> Result<Sandbox, String> {
        let paths = |field: &str, list: &Option<Vec<String>>| -> Result<_, String> {
            let Some(list) = list else { return Ok(None) };
            let mut out = Vec::with_capacity(list.len());
            for (i, raw) in list.iter().enumerate() {
                let at = format!("{key}.{field}[{i}]");
                let path = expand(&at, raw, places)?;
                let real = canonical(&path)
                    .map_err(|e| format!("{at}: {} cannot be used: {e}", path.display()))?;
                if real.to_str().is_none_or(|s| s.contains('\n')) {
                    return Err(format!(
                        "{at}: {} is not valid UTF-8 or holds a newline",
                        real.display()
                    ));
                }
                if !out.contains(&real) {
                    out.push(real);
                }
            }
            Ok(Some(out))
        };
        Ok(Sandbox {
            write: paths("write", &self.write)?,
            read: paths("read", &self.read)?,
            network: self.network.unwrap_or(Network::On),
            memory_max: self.memory_max,
            pids_max: self.pids_max,
            cpu_max: self.cpu_max,
        })
    }
}

/// Replaces `$CWD`, `$HOME` and `$TMPDIR` in `raw`; the result must be absolute.
fn expand(at: &str, raw: &str, places: Places<'_>) -> Result<PathBuf, String> {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let name_len = tail
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        let value = match &tail[..name_len] {
            "CWD" => Some(places.cwd),
            "HOME" => Some(places.home.ok_or_else(|| {
                format!("{at}: {raw:?} names $HOME, but the session has no HOME")
            })?),
            "TMPDIR" => Some(places.tmpdir),
            _ => None,
        };
        let value = value.ok_or_else(|| {
            format!(
                "{at}: {raw:?} names {:?}; only $CWD, $HOME and $TMPDIR may be named",
                &rest[i..i + 1 + name_len]
            )
        })?;
        out.push_str(&value.to_string_lossy());
        rest = &tail[name_len..];
    }
    out.push_str(rest);
    let path = PathBuf::from(out);
    if !path.is_absolute() {
        return Err(format!(
            "{at}: {raw:?} must be an absolute path (or start with $CWD, $HOME or $TMPDIR)"
        ));
    }
    Ok(path)
}

/// Whether `path` lies beneath one of `roots` (or is one).
fn within(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// The sandbox of a session whose type carries `of_type` and whose `Open` asks for
/// `requested`: the request may only tighten the type's (a subset of its paths, a network no
/// looser, limits no larger), and what it leaves out the type decides. The error names the
/// request's key and the type's value.
pub fn combine(
    of_type: Option<&Sandbox>,
    requested: Option<&Sandbox>,
    requested_network: Option<Network>,
) -> Result<Option<Sandbox>, String> {
    let (ty, req) = match (of_type, requested) {
        (None, None) => return Ok(None),
        (Some(ty), None) => return Ok(Some(ty.clone())),
        (None, Some(req)) => return Ok(Some(req.clone())),
        (Some(ty), Some(req)) => (ty, req),
    };
    let show = |roots: &[PathBuf]| -> String {
        if roots.is_empty() {
            return "none".into();
        }
        roots
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let loosens = |key: &str, what: String, theirs: String| {
        format!(
            "sandbox.{key}: {what} would loosen the type's sandbox ({key}: {theirs}); a request may only tighten it"
        )
    };
    if let (Some(theirs), Some(mine)) = (&ty.write, &req.write)
        && let Some(p) = mine.iter().find(|p| !within(p, theirs))
    {
        return Err(loosens("write", p.display().to_string(), show(theirs)));
    }
    if let (Some(theirs), Some(mine)) = (&ty.read, &req.read) {
        let readable: Vec<PathBuf> = theirs
            .iter()
            .chain(ty.write.iter().flatten())
            .cloned()
            .collect();
        if let Some(p) = mine.iter().find(|p| !within(p, &readable)) {
            return Err(loosens("read", p.display().to_string(), show(theirs)));
        }
    }
    if let Some(n) = requested_network
        && n > ty.network
    {
        return Err(loosens(
            "network",
            format!("{:?}", n.name()),
            ty.network.name().into(),
        ));
    }
    let limit = |key: &str, mine: Option<u64>, theirs: Option<u64>, show: fn(u64) -> String| match (
        mine, theirs,
    ) {
        (Some(m), Some(t)) if m > t => Err(loosens(key, show(m), show(t))),
        (Some(m), _) => Ok(Some(m)),
        (None, t) => Ok(t),
    };
    Ok(Some(Sandbox {
        write: req.write.clone().or_else(|| ty.write.clone()),
        read: req.read.clone().or_else(|| ty.read.clone()),
        network: requested_network.unwrap_or(ty.network),
        memory_max: limit("memory_max", req.memory_max, ty.memory_max, format_size)?,
        pids_max: limit("pids_max", req.pids_max, ty.pids_max, |n| n.to_string())?,
        cpu_max: limit(
            "cpu_max",
            req.cpu_max.map(u64::from),
            ty.cpu_max.map(u64::from),
            |n| format!("{n}%"),
        )?
        .map(|n| n as u32),
    }))
}

/// Keys of the helper's lines.
pub(crate) mod line {
    /// A writable root.
    pub(crate) const WRITE: &str = "write";
    /// A readable root (reading is restricted once one is given).
    pub(crate) const READ: &str = "read";
    /// Reading is restricted, to no path of the session's own.
    pub(crate) const READ_NONE: &str = "read-none";
    /// Writing is restricted, to no path of the session's own.
    pub(crate) const WRITE_NONE: &str = "write-none";
    /// `on`, `loopback` or `off`.
    pub(crate) const NETWORK: &str = "network";
    /// A directory an empty file system covers inside the session.
    pub(crate) const HIDE: &str = "hide";
}

impl Sandbox {
    /// One line for people: `write /a, /b; read all; network off; memory_max 512M`.
    pub fn describe(&self) -> String {
        let roots = |roots: &Option<Vec<PathBuf>>| match roots {
            None => "all".to_owned(),
            Some(r) if r.is_empty() => "none".to_owned(),
            Some(r) => r
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        };
        let mut parts = vec![
            format!("write {}", roots(&self.write)),
            format!("read {}", roots(&self.read)),
            format!("network {}", self.network.name()),
        ];
        if let Some(m) = self.memory_max {
            parts.push(format!("memory_max {}", format_size(m)));
        }
        if let Some(p) = self.pids_max {
            parts.push(format!("pids_max {p}"));
        }
        if let Some(c) = self.cpu_max {
            parts.push(format!("cpu_max {c}%"));
        }
        parts.join("; ")
    }

    /// Whether it needs cgroup limits.
    pub fn has_limits(&self) -> bool {
        self.memory_max.is_some() || self.pids_max.is_some() || self.cpu_max.is_some()
    }

    /// What the helper enforces, a `key value` line each: the file and network rules, and
    /// `hidden`: the daemon's own places (socket, state and runtime directories) the session
    /// must not reach, covered inside it, except one that holds `cwd` or a root of the
    /// sandbox (the session needs them; the places inside it are covered one by one) or lies
    /// in another covered one. `extra_read` (the shell integration's files) is readable when
    /// reading is restricted.
    pub(crate) fn helper_lines(
        &self,
        hidden: &[PathBuf],
        extra_read: &[PathBuf],
        cwd: &Path,
    ) -> String {
        let needed: Vec<&Path> = [cwd]
            .into_iter()
            .chain(self.write.iter().flatten().map(PathBuf::as_path))
            .chain(self.read.iter().flatten().map(PathBuf::as_path))
            .chain(extra_read.iter().map(PathBuf::as_path))
            .collect();
        let covered: Vec<&PathBuf> = hidden
            .iter()
            .filter(|h| !needed.iter().any(|n| n.starts_with(h)))
            .collect();
        let covered: Vec<&PathBuf> = covered
            .iter()
            .filter(|h| !covered.iter().any(|o| o != *h && h.starts_with(o)))
            .copied()
            .collect();
        let mut out = String::new();
        let mut push = |key: &str, value: &str| {
            out.push_str(key);
            out.push(' ');
            out.push_str(value);
            out.push('\n');
        };
        match &self.write {
            Some(roots) if roots.is_empty() => push(line::WRITE_NONE, "-"),
            Some(roots) => roots
                .iter()
                .for_each(|p| push(line::WRITE, &p.to_string_lossy())),
            None => {}
        }
        match &self.read {
            Some(roots) if roots.is_empty() && extra_read.is_empty() => push(line::READ_NONE, "-"),
            Some(roots) => roots
                .iter()
                .chain(extra_read)
                .for_each(|p| push(line::READ, &p.to_string_lossy())),
            None => {}
        }
        push(line::NETWORK, self.network.name());
        for p in covered {
            push(line::HIDE, &p.to_string_lossy());
        }
        out
    }
}

#[cfg(test)]
mod tests;
