//! Upgrade in place: `SIGHUP` to `ptyd serve` re-executes the binary at the daemon's own path —
//! the new version after an install — in the same process (same pid), handing the listening
//! sockets over, so clients keep the socket and systemd keeps its main pid.
//!
//! - At start, [`Upgrade::prepare`] notes what to execute: `argv[0]` as the daemon was started
//!   (made absolute, or found on `PATH` as the shell found it) when it names the running file,
//!   else the running file's own path. Not `/proc/self/exe` at reload time: an install replaces
//!   the file, and that link then names the deleted old inode; and a resolved path would miss an
//!   install that moves a symlink (Homebrew, Nix profiles, `update-alternatives`).
//! - On each `SIGHUP` ([`Upgrade::run`]) the new binary first checks the configuration with the
//!   daemon's own arguments plus `--check-config`: that proves the file is valid for the code
//!   that will load it, and that the binary runs at all. A failure is logged and the running
//!   daemon carries on serving. Otherwise the termination signals are blocked (a `SIGTERM`
//!   between exec and the new image's handlers stays pending instead of killing the process),
//!   the listeners lose close-on-exec, and `execve` runs with their numbers in
//!   [`HANDOVER_ENV`]. Just before, every call in flight is answered `UNAVAILABLE`
//!   ([`Drain`]). Every other descriptor closes at exec: connections end (clients reconnect on
//!   their next call), and what outlives the daemon (sessions) is adopted by the new image as
//!   after a crash.
//! - The new image takes the listeners back ([`inherited`]) instead of binding, and unblocks the
//!   signals once its own handlers are installed ([`unblock_signals`]).

use super::drain::Drain;
use crate::config::daemon_env::{HANDOVER_ENV, is_handover_var};
use crate::error::{Error, Result};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use std::convert::Infallible;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Signals blocked across exec, so that they wait for the new image's handlers.
const HELD_SIGNALS: [Signal; 3] = [Signal::SIGHUP, Signal::SIGTERM, Signal::SIGINT];
/// How long the new binary may take to check the configuration.
const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// The listeners a daemon hands to its next image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handover {
    /// The Unix socket's listener.
    pub(crate) unix: RawFd,
    /// The TCP listener of `--listen-tcp`, when there is one.
    pub(crate) tcp: Option<RawFd>,
    /// The web page's listener of `--web`, when there is one.
    pub(crate) web: Option<RawFd>,
}

impl Handover {
    /// The value of [`HANDOVER_ENV`] naming these descriptors.
    fn encode(self) -> String {
        let mut value = format!("unix={}", self.unix);
        for (name, fd) in [("tcp", self.tcp), ("web", self.web)] {
            if let Some(fd) = fd {
                value.push_str(&format!(",{name}={fd}"));
            }
        }
        value
    }

    /// Parses a value of [`HANDOVER_ENV`].
    fn parse(value: &str) -> std::result::Result<Handover, String> {
        let mut unix = None;
        let mut tcp = None;
        let mut web = None;
        for part in value.split(',') {
            let (name, fd) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not NAME=FD"))?;
            let fd: RawFd =
                fd.parse().ok().filter(|fd| *fd > 2).ok_or_else(|| {
                    format!("{part:?}: {fd:?} is not a descriptor number above 2")
                })?;
            let slot = match name {
                "unix" => &mut unix,
                "tcp" => &mut tcp,
                "web" => &mut web,
                _ => return Err(format!("{part:?}: unknown listener {name:?}")),
            };
            if slot.replace(fd).is_some() {
                return Err(format!("{name} is named twice"));
            }
        }
        let unix = unix.ok_or("no unix= listener")?;
        let named = [Some(unix), tcp, web];
        let named: Vec<RawFd> = named.into_iter().flatten().collect();
        if (1..named.len()).any(|i| named[..i].contains(&named[i])) {
            return Err("two listeners name the same descriptor".into());
        }
        Ok(Handover { unix, tcp, web })
    }
}

/// What a previous image of this process handed over.
pub(crate) struct Inherited {
    pub(crate) unix: std::os::unix::net::UnixListener,
    pub(crate) tcp: Option<OwnedFd>,
    pub(crate) web: Option<OwnedFd>,
}

/// The listeners a previous image of this process handed over, taken back (close-on-exec again;
/// the Unix one non-blocking); none when this image was not started by an upgrade.
pub(crate) fn inherited() -> Result<Option<Inherited>> {
    let Some(value) = std::env::var_os(HANDOVER_ENV) else {
        return Ok(None);
    };
    let handover = Handover::parse(&value.to_string_lossy()).map_err(|e| {
        Error::FailedPrecondition(format!("{HANDOVER_ENV}={}: {e}", value.to_string_lossy()))
    })?;
    let take = |fd: RawFd| -> Result<OwnedFd> {
        // Only this process's previous image sets the variable, naming descriptors it left open
        // for this one; checking that the number is open keeps a stray value from adopting a
        // closed (later reused) number.
        nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).map_err(|e| {
            Error::FailedPrecondition(format!(
                "{HANDOVER_ENV} names descriptor {fd}, which is not open: {e}"
            ))
        })?;
        // SAFETY: the number is open (checked above) and was left open across exec by this
        // process's previous image for this one alone; nothing else in this image owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        crate::process::fd::set_cloexec(&fd)
            .map_err(Error::io("marking a handed-over listener close-on-exec"))?;
        Ok(fd)
    };
    let unix = std::os::unix::net::UnixListener::from(take(handover.unix)?);
    unix.local_addr()
        .map_err(Error::io("the handed-over descriptor is not a Unix socket"))?;
    unix.set_nonblocking(true)
        .map_err(Error::io("making the handed-over socket non-blocking"))?;
    let tcp = handover.tcp.map(take).transpose()?;
    let web = handover.web.map(take).transpose()?;
    Ok(Some(Inherited { unix, tcp, web }))
}

/// Unblocks the signals an upgrading image blocked for this one; a signal that arrived meanwhile
/// is delivered now. Call once the handlers are installed.
pub(crate) fn unblock_signals() -> Result<()> {
    pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&held_signals()), None)
        .map_err(|e| Error::io("unblocking signals")(std::io::Error::from(e)))
}

fn held_signals() -> SigSet {
    let mut set = SigSet::empty();
    for signal in HELD_SIGNALS {
        set.add(signal);
    }
    set
}

/// The `SIGHUP` handler, installed before the signals are unblocked.
pub(crate) fn hangups() -> Result<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::hangup()).map_err(Error::io("installing the SIGHUP handler"))
}

/// Everything an upgrade needs, noted at start: what to execute, with which arguments, and the
/// listeners to hand over.
pub(crate) struct Upgrade {
    binary: PathBuf,
    args: Vec<OsString>,
    unix: OwnedFd,
    tcp: Option<OwnedFd>,
    web: Option<OwnedFd>,
    hangups: tokio::signal::unix::Signal,
}

impl Upgrade {
    /// Notes the binary and arguments to re-execute and keeps a duplicate of each listener (the
    /// servers own the originals); upgrades on each of `hangups` (see [`hangups`]).
    pub(crate) fn prepare(
        hangups: tokio::signal::unix::Signal,
        unix: &impl AsFd,
        tcp: Option<&impl AsFd>,
        web: Option<&impl AsFd>,
    ) -> Result<Upgrade> {
        let args: Vec<OsString> = std::env::args_os().collect();
        let current =
            std::env::current_exe().map_err(Error::io("finding the running executable"))?;
        let invoked = args.first().and_then(|argv0| {
            let cwd = std::env::current_dir().ok()?;
            invoked_path(argv0, &cwd, std::env::var_os("PATH").as_deref(), |p| {
                p.is_file()
            })
        });
        let binary = match invoked {
            Some(path) if same_file(&path, &current) => path,
            _ => current,
        };
        let dup = |fd: &dyn AsFd| {
            fd.as_fd()
                .try_clone_to_owned()
                .map_err(Error::io("keeping a listener for upgrades"))
        };
        Ok(Upgrade {
            binary,
            args,
            unix: dup(unix)?,
            tcp: tcp.map(|t| dup(t)).transpose()?,
            web: web.map(|w| dup(w)).transpose()?,
            hangups,
        })
    }

    /// Upgrades on every `SIGHUP`; returns only by replacing the process. The calls in flight
    /// are answered through `drain` first. An upgrade that cannot go ahead is logged and the
    /// daemon keeps serving.
    pub(crate) async fn run(mut self, drain: &Drain) -> Infallible {
        loop {
            if self.hangups.recv().await.is_none() {
                return std::future::pending().await;
            }
            tracing::info!(binary = %self.binary.display(),
                "SIGHUP: upgrading in place; checking the binary and the configuration first");
            if let Err(why) = self.check().await {
                tracing::error!(binary = %self.binary.display(), "{why}; \
                    keeping the running daemon and its configuration");
                continue;
            }
            drain.begin().await;
            let error = self.exec();
            drain.end();
            tracing::error!(binary = %self.binary.display(), error = %error,
                "could not re-execute; keeping the running daemon and its configuration");
        }
    }

    /// Runs the binary with the daemon's arguments plus `--check-config`: it loads the
    /// configuration as the new image would, and fails when the file (or the binary) is bad.
    async fn check(&self) -> std::result::Result<(), String> {
        let mut command = tokio::process::Command::new(&self.binary);
        if let Some(argv0) = self.args.first() {
            command.arg0(argv0);
        }
        command
            .args(self.args.iter().skip(1))
            .arg("--check-config")
            .env_clear()
            .envs(handover_env(std::env::vars_os(), None))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let output = tokio::time::timeout(CHECK_TIMEOUT, command.output())
            .await
            .map_err(|_| format!("the configuration check did not finish in {CHECK_TIMEOUT:?}"))?
            .map_err(|e| format!("cannot run the binary to check the configuration: {e}"))?;
        if output.status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&output.stderr);
        Err(format!(
            "the configuration check failed ({}): {}",
            output.status,
            said.trim()
        ))
    }

    /// The listeners handed over.
    fn listeners(&self) -> impl Iterator<Item = &OwnedFd> {
        std::iter::once(&self.unix)
            .chain(&self.tcp)
            .chain(&self.web)
    }

    /// Replaces the process with the binary; returns only the reason it could not.
    fn exec(&self) -> std::io::Error {
        let held = held_signals();
        if let Err(e) = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&held), None) {
            return e.into();
        }
        let error = self.exec_with_signals_held();
        // Back to serving: the listeners close at the next exec of anything, and signals flow.
        for fd in self.listeners() {
            let _ = crate::process::fd::set_cloexec(fd);
        }
        let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&held), None);
        error
    }

    fn exec_with_signals_held(&self) -> std::io::Error {
        let handover = Handover {
            unix: self.unix.as_raw_fd(),
            tcp: self.tcp.as_ref().map(|t| t.as_raw_fd()),
            web: self.web.as_ref().map(|w| w.as_raw_fd()),
        };
        let c = |s: &OsStr| CString::new(s.as_bytes().to_vec());
        let Ok(path) = c(self.binary.as_os_str()) else {
            return std::io::Error::other("the binary's path holds a NUL byte");
        };
        let Ok(args) = self
            .args
            .iter()
            .map(|a| c(a))
            .collect::<std::result::Result<Vec<_>, _>>()
        else {
            return std::io::Error::other("an argument holds a NUL byte");
        };
        let env: Vec<CString> = handover_env(std::env::vars_os(), Some(handover))
            .into_iter()
            .filter_map(|(k, v)| {
                let mut entry = k.into_vec();
                entry.push(b'=');
                entry.extend(v.into_vec());
                CString::new(entry).ok()
            })
            .collect();
        tracing::info!(binary = %self.binary.display(), "re-executing in place");
        // Last, so that the window in which a process spawned by another thread would inherit
        // the listeners is as short as it can be.
        for fd in self.listeners() {
            if let Err(e) = crate::process::fd::clear_cloexec(fd) {
                return e;
            }
        }
        match nix::unistd::execve(&path, &args, &env) {
            Ok(never) => match never {},
            Err(e) => e.into(),
        }
    }
}

/// The next image's environment: the daemon's own, without the hand-over variables of this
/// image's start, plus [`HANDOVER_ENV`] for `handover` when given.
fn handover_env(
    own: impl IntoIterator<Item = (OsString, OsString)>,
    handover: Option<Handover>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = own
        .into_iter()
        .filter(|(name, _)| !name.to_str().is_some_and(is_handover_var))
        .collect();
    if let Some(handover) = handover {
        env.push((HANDOVER_ENV.into(), handover.encode().into()));
    }
    env
}

/// The file `argv0` names as an `execvp` would find it: relative to `cwd` when it holds a `/`,
/// else the first entry of `path_var` (an empty entry is the cwd) where `is_file` holds.
fn invoked_path(
    argv0: &OsStr,
    cwd: &Path,
    path_var: Option<&OsStr>,
    is_file: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    if argv0.is_empty() {
        return None;
    }
    // Joined by components, so a `./` inside is dropped (the same file, named plainly in logs).
    let absolute = |dir: &Path| cwd.join(dir).join(argv0).components().collect::<PathBuf>();
    if argv0.as_bytes().contains(&b'/') {
        return Some(absolute(Path::new("")));
    }
    std::env::split_paths(path_var?)
        .map(|dir| absolute(&dir))
        .find(|candidate| is_file(candidate))
}

/// Whether `a` and `b` are the same file (device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handover_variable_round_trips_and_rejects_what_it_cannot_trust() {
        let both = Handover {
            unix: 5,
            tcp: Some(7),
            web: None,
        };
        let all = Handover {
            unix: 5,
            tcp: Some(7),
            web: Some(8),
        };
        let web = Handover {
            unix: 3,
            tcp: None,
            web: Some(4),
        };
        let unix = Handover {
            unix: 9,
            tcp: None,
            web: None,
        };
        for handover in [both, all, web, unix] {
            assert_eq!(Handover::parse(&handover.encode()), Ok(handover));
        }
        for (value, says) in [
            ("", "not NAME=FD"),
            ("tcp=5", "no unix="),
            ("unix=2", "above 2"),
            ("unix=-1", "above 2"),
            ("unix=x", "above 2"),
            ("unix=4,unix=5", "named twice"),
            ("unix=4,tcp=4", "same descriptor"),
            ("unix=4,web=4", "same descriptor"),
            ("unix=4,tcp=5,web=5", "same descriptor"),
            ("unix=4,web=5,web=6", "named twice"),
            ("unix=4,udp=5", "unknown listener"),
        ] {
            let error = Handover::parse(value).expect_err(value);
            assert!(error.contains(says), "{value:?}: {error}");
        }
    }

    #[test]
    fn the_next_image_sees_no_variable_of_this_start_but_its_handover() {
        let own = [
            ("PATH", "/usr/bin"),
            ("LISTEN_FDS", "1"),
            ("LISTEN_PID", "42"),
            ("LISTEN_FDNAMES", "ptyd.socket"),
            (HANDOVER_ENV, "unix=3"),
            ("HOME", "/home/u"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let names = |env: Vec<(OsString, OsString)>| -> Vec<String> {
            env.into_iter()
                .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                .collect()
        };
        assert_eq!(
            names(handover_env(own.clone(), None)),
            ["PATH=/usr/bin", "HOME=/home/u"]
        );
        let handover = Handover {
            unix: 6,
            tcp: Some(8),
            web: None,
        };
        assert_eq!(
            names(handover_env(own, Some(handover))),
            [
                "PATH=/usr/bin",
                "HOME=/home/u",
                &format!("{HANDOVER_ENV}=unix=6,tcp=8")
            ]
        );
        for (name, hidden) in [
            ("LISTEN_FDS", true),
            (HANDOVER_ENV, true),
            ("LISTEN_FD", false),
            ("PATH", false),
        ] {
            assert_eq!(is_handover_var(name), hidden, "{name}");
        }
    }

    #[test]
    fn the_invoked_path_is_found_as_exec_finds_it() {
        let cwd = Path::new("/work/dir");
        let installed = |p: &Path| {
            ["/home/u/.cargo/bin/ptyd", "/usr/bin/ptyd", "/work/dir/ptyd"]
                .contains(&p.to_str().unwrap())
        };
        let path = "/nowhere:/home/u/.cargo/bin:/usr/bin";
        for (argv0, path_var, expected) in [
            ("/opt/ptyd/bin/ptyd", Some(path), Some("/opt/ptyd/bin/ptyd")),
            (
                "./target/debug/ptyd",
                Some(path),
                Some("/work/dir/target/debug/ptyd"),
            ),
            ("bin/ptyd", None, Some("/work/dir/bin/ptyd")),
            // The first PATH entry that has it, as the shell chose.
            ("ptyd", Some(path), Some("/home/u/.cargo/bin/ptyd")),
            (
                "ptyd",
                Some("/usr/bin:/home/u/.cargo/bin"),
                Some("/usr/bin/ptyd"),
            ),
            // An empty entry is the current directory.
            ("ptyd", Some(":/usr/bin"), Some("/work/dir/ptyd")),
            ("ptyd", Some("/nowhere"), None),
            ("ptyd", None, None),
            ("", Some(path), None),
        ] {
            assert_eq!(
                invoked_path(OsStr::new(argv0), cwd, path_var.map(OsStr::new), installed),
                expected.map(PathBuf::from),
                "{argv0} with PATH={path_var:?}"
            );
        }
    }

    #[test]
    fn same_file_compares_inodes_not_names() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, "x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let copy = dir.path().join("copy");
        std::fs::copy(&a, &copy).unwrap();
        assert!(same_file(&a, &link));
        assert!(!same_file(&a, &copy));
        assert!(!same_file(&a, &dir.path().join("missing")));
    }
}
