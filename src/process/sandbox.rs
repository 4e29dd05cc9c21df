//! A session's sandbox, enforced by its helper on the program it starts, so that it holds for
//! everything the session ever runs: what the daemon checks before it starts a sandboxed
//! session (the kernel's Landlock ABI), and the helper's side: the plan read from
//! [`SANDBOX_ENV`] (`Sandbox::helper_lines`), prepared before the fork (the Landlock ruleset,
//! every path and buffer), and entered between fork and exec with system calls only:
//! 1. a user namespace of the session's own (the user mapped to itself), with a mount
//!    namespace, and a network namespace unless the network is `on`;
//! 2. the daemon's places (its socket, state and runtime directories) covered: an empty
//!    read-only file system over a directory, `/dev/null` over a file, so nothing in the
//!    session can reach the daemon or another session's helper to lift its sandbox;
//! 3. for `loopback`, the namespace's `lo` brought up;
//! 4. no new privileges (setuid binaries gain nothing), then the Landlock ruleset: the file
//!    rules, TCP bind and connect denied for `off`, and the signal and abstract-socket scopes
//!    (nothing outside the session can be signalled or reached through an abstract socket;
//!    ptrace of a process outside is refused by Landlock itself). The ruleset always handles
//!    device creation, which no rule grants, so Landlock refuses every mount and unmount in
//!    the session too: the covers cannot be lifted from inside.
//!
//! Landlock runs with every right this kernel knows handled as a hard requirement: a rule it
//! cannot enforce fails the start, never quietly less.

use crate::sandbox::{DEVICES, Network, SYSTEM_READ, line};
use landlock::{
    ABI, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Environment variable carrying the helper's plan, a `key value` line each.
pub(crate) const SANDBOX_ENV: &str = "PTYD_SESSION_HELPER_SANDBOX";

/// The Landlock ABI a sandbox needs: 6 (Linux 6.12) for the signal and abstract-socket scopes.
pub(crate) const LANDLOCK_ABI_NEEDED: i32 = 6;

/// The running kernel's Landlock ABI version (0: none, or disabled at boot).
pub(crate) fn landlock_abi() -> i32 {
    const VERSION: libc::c_uint = 1; // LANDLOCK_CREATE_RULESET_VERSION
    // SAFETY: with a null attribute and size 0 the call only returns the version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            VERSION,
        )
    };
    v.max(0) as i32
}

/// Why this kernel cannot hold a sandbox at all, checked by the daemon before it starts one.
pub(crate) fn kernel_refusal() -> Option<String> {
    let abi = landlock_abi();
    (abi < LANDLOCK_ABI_NEEDED).then(|| {
        format!(
            "this kernel cannot enforce a sandbox: it needs Landlock ABI {LANDLOCK_ABI_NEEDED} \
             (Linux 6.12) or later, and this kernel has {}",
            if abi == 0 {
                "no Landlock (not built in, or not in the lsm= boot parameter)".to_owned()
            } else {
                format!("ABI {abi}")
            }
        )
    })
}

/// What the helper enforces, read from its plan lines.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    write: Option<Vec<PathBuf>>,
    read: Option<Vec<PathBuf>>,
    network: Option<Network>,
    hide: Vec<PathBuf>,
}

impl Plan {
    /// Parses the plan lines; a line it does not know is an error (a newer daemon's plan is
    /// never enforced partly).
    pub(crate) fn parse(text: &str) -> Result<Plan, String> {
        let mut plan = Plan::default();
        for l in text.lines().filter(|l| !l.is_empty()) {
            let (key, value) = l.split_once(' ').ok_or(format!("bad plan line {l:?}"))?;
            let path = || PathBuf::from(value);
            match key {
                line::WRITE => plan.write.get_or_insert_with(Vec::new).push(path()),
                line::READ => plan.read.get_or_insert_with(Vec::new).push(path()),
                line::WRITE_NONE => {
                    plan.write.get_or_insert_with(Vec::new);
                }
                line::READ_NONE => {
                    plan.read.get_or_insert_with(Vec::new);
                }
                line::NETWORK => {
                    plan.network =
                        Some(Network::from_name(value).ok_or(format!("bad network {value:?}"))?)
                }
                line::HIDE => plan.hide.push(path()),
                _ => return Err(format!("unknown plan line {l:?}")),
            }
        }
        if plan.network.is_none() {
            return Err("the plan names no network".into());
        }
        Ok(plan)
    }
}

/// The step of entering a sandbox that failed, reported to the daemon with its errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    /// Reading the plan, or a path in it.
    Plan = 1,
    /// Building the Landlock ruleset.
    Ruleset = 2,
    /// `unshare` of the user, mount (and network) namespaces.
    Namespaces = 3,
    /// Writing the user and group maps.
    UserMap = 4,
    /// Covering the daemon's places.
    Cover = 5,
    /// Bringing `lo` up.
    Loopback = 6,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs = 7,
    /// `landlock_restrict_self`.
    Restrict = 8,
}

impl Step {
    /// From its number on the report line.
    pub(crate) fn from_number(n: u8) -> Option<Step> {
        use Step::*;
        [
            Plan, Ruleset, Namespaces, UserMap, Cover, Loopback, NoNewPrivs, Restrict,
        ]
        .into_iter()
        .find(|s| *s as u8 == n)
    }

    /// What the step does, for the error an `Open` gets.
    pub(crate) fn doing(self) -> &'static str {
        match self {
            Step::Plan => "opening the sandbox's paths",
            Step::Ruleset => "building the Landlock ruleset",
            Step::Namespaces => {
                "creating the session's user, mount and network namespaces (are unprivileged \
                 user namespaces allowed? see kernel.unprivileged_userns_clone, \
                 user.max_user_namespaces and AppArmor's restrict_unprivileged_userns)"
            }
            Step::UserMap => "mapping the user into the session's user namespace",
            Step::Cover => "covering the daemon's socket and directories inside the session",
            Step::Loopback => "bringing up the session's loopback interface",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Restrict => "applying the Landlock ruleset",
        }
    }
}

/// A failed step and its errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) step: Step,
    pub(crate) errno: i32,
}

/// A place to cover inside the session.
struct Cover {
    path: CString,
    /// A directory gets an empty file system, anything else `/dev/null`.
    directory: bool,
}

/// Everything the child needs, made before the fork (it may allocate; the child may not).
pub(crate) struct Prepared {
    ruleset: OwnedFd,
    network: Network,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    covers: Vec<Cover>,
}

/// The helper's sandbox, from its environment: `None` without one.
pub(crate) fn from_env() -> Result<Option<Prepared>, Failure> {
    let Some(text) = std::env::var_os(SANDBOX_ENV) else {
        return Ok(None);
    };
    let plan = text.to_str().map(Plan::parse);
    match plan {
        Some(Ok(plan)) => prepare(&plan).map(Some),
        _ => Err(Failure {
            step: Step::Plan,
            errno: libc::EINVAL,
        }),
    }
}

/// Builds the ruleset and every buffer for `plan`.
pub(crate) fn prepare(plan: &Plan) -> Result<Prepared, Failure> {
    let abi = ABI::from(landlock_abi());
    let plan_error = |_| Failure {
        step: Step::Ruleset,
        errno: libc::EOPNOTSUPP,
    };
    let network = plan.network.unwrap_or(Network::On);
    // Device creation is handled always (and granted nowhere): it keeps the domain a file
    // system one, under which Landlock refuses mount and umount.
    let mut handled: BitFlags<AccessFs> = AccessFs::MakeChar | AccessFs::MakeBlock;
    if plan.write.is_some() {
        handled |= AccessFs::from_write(abi);
    }
    if plan.read.is_some() {
        handled |= AccessFs::from_read(abi);
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(plan_error)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(plan_error)?;
    if network == Network::Off {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(plan_error)?;
    }
    let mut created = ruleset.create().map_err(plan_error)?;
    let readable = handled & AccessFs::from_read(abi);
    let devices = handled & (AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::IoctlDev);
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>, bool)> = Vec::new();
    for root in plan.write.iter().flatten() {
        // Everything handled, beneath a writable root (the user's own permissions still apply).
        rules.push((root.clone(), handled, true));
    }
    if plan.read.is_some() {
        for root in plan.read.iter().flatten() {
            rules.push((root.clone(), readable, true));
        }
        for dir in SYSTEM_READ {
            rules.push((dir.into(), readable, false));
        }
    }
    if plan.write.is_some() || plan.read.is_some() {
        for dev in DEVICES {
            rules.push((dev.into(), devices, false));
        }
    }
    for (path, access, required) in rules {
        if access.is_empty() {
            continue;
        }
        let fd = match PathFd::new(&path) {
            Ok(fd) => fd,
            // A system directory this machine lacks grants nothing; a root the session asked
            // for must be there.
            Err(_) if !required => continue,
            Err(_) => {
                return Err(Failure {
                    step: Step::Plan,
                    errno: libc::ENOENT,
                });
            }
        };
        // A root that is a file takes only the rights a file has.
        let is_dir = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(plan_error)?;
    }
    let ruleset: Option<OwnedFd> = created.into();
    let ruleset = ruleset.ok_or(Failure {
        step: Step::Ruleset,
        errno: libc::EOPNOTSUPP,
    })?;
    let mut covers = Vec::new();
    for path in &plan.hide {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        covers.push(Cover {
            path: CString::new(path.as_os_str().as_bytes()).map_err(|_| Failure {
                step: Step::Plan,
                errno: libc::EINVAL,
            })?,
            directory: meta.is_dir(),
        });
    }
    let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    Ok(Prepared {
        ruleset,
        network,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        covers,
    })
}

/// Writes `data` to the file at `path` (a `/proc/self` map). Async-signal-safe: `open`,
/// `write` and `close` on a C string and a buffer made before the fork.
fn write_file(path: &CStr, data: &[u8]) -> rustix::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    match rustix::io::write(&fd, data)? {
        n if n == data.len() => Ok(()),
        _ => Err(rustix::io::Errno::IO),
    }
}

/// Enters the sandbox: call between fork and exec, after the terminal is the controlling one.
/// System calls only, on what [`prepare`] made: nothing allocates.
///
/// # Safety
/// The caller is a child between fork and exec (single-threaded, its file table its own):
/// unsharing the namespaces affects nothing else.
pub(crate) unsafe fn enter(p: &Prepared) -> Result<(), Failure> {
    use rustix::mount::{MountFlags, MountPropagationFlags};
    let at = |step: Step| {
        move |e: rustix::io::Errno| Failure {
            step,
            errno: e.raw_os_error(),
        }
    };
    let mut flags = rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWNS;
    if p.network != Network::On {
        flags |= rustix::thread::UnshareFlags::NEWNET;
    }
    // SAFETY: no FILES flag, and this process is single-threaded (see the function's contract).
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(at(Step::Namespaces))?;
    let maps: [(&CStr, &[u8]); 3] = [
        (c"/proc/self/setgroups", b"deny"),
        (c"/proc/self/uid_map", &p.uid_map),
        (c"/proc/self/gid_map", &p.gid_map),
    ];
    for (path, data) in maps {
        write_file(path, data).map_err(at(Step::UserMap))?;
    }
    // Nothing mounted here propagates anywhere (the namespace is already a slave of the
    // host's, being owned by a new user namespace; private says so outright).
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(at(Step::Cover))?;
    for cover in &p.covers {
        if cover.directory {
            rustix::mount::mount(
                c"ptyd-hidden",
                cover.path.as_c_str(),
                c"tmpfs",
                MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                c"size=4k,mode=0500",
            )
        } else {
            rustix::mount::mount_bind(c"/dev/null", cover.path.as_c_str())
        }
        .map_err(at(Step::Cover))?;
    }
    if p.network == Network::Loopback {
        loopback_up().map_err(|errno| Failure {
            step: Step::Loopback,
            errno,
        })?;
    }
    rustix::thread::set_no_new_privs(true).map_err(at(Step::NoNewPrivs))?;
    // SAFETY: landlock_restrict_self takes an fd (ours, open) and flags; rustix has no wrapper.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, p.ruleset.as_raw_fd(), 0) } != 0 {
        return Err(Failure {
            step: Step::Restrict,
            errno: errno(),
        });
    }
    Ok(())
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Sets `lo` up in the (new) network namespace (`SIOCSIFFLAGS`, which neither rustix nor nix
/// wraps). Async-signal-safe: `socket`, `ioctl`, `close`.
fn loopback_up() -> Result<(), i32> {
    use rustix::net::{AddressFamily, SocketType};
    let sock = rustix::net::socket(AddressFamily::INET, SocketType::DGRAM, None)
        .map_err(|e| e.raw_os_error())?;
    // SAFETY: an all-zero ifreq is a valid value of the plain-data struct.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name[0] = b'l' as libc::c_char;
    req.ifr_name[1] = b'o' as libc::c_char;
    req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_LOOPBACK | libc::IFF_RUNNING) as i16;
    // SAFETY: SIOCSIFFLAGS reads only the ifreq it is given, which lives across the call.
    match unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } {
        0 => Ok(()),
        _ => Err(errno()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_back_what_the_daemon_wrote() {
        let sandbox = crate::sandbox::Sandbox {
            write: Some(vec!["/w".into(), "/tmp".into()]),
            read: Some(vec![]),
            network: Network::Loopback,
            memory_max: Some(1 << 30),
            pids_max: None,
            cpu_max: None,
        };
        let text = sandbox.helper_lines(&["/run/user/1".into()], &["/i".into()], "/w".as_ref());
        let plan = Plan::parse(&text).unwrap();
        assert_eq!(
            plan,
            Plan {
                write: Some(vec!["/w".into(), "/tmp".into()]),
                read: Some(vec!["/i".into()]),
                network: Some(Network::Loopback),
                hide: vec!["/run/user/1".into()],
            }
        );
        let nothing = crate::sandbox::Sandbox {
            write: Some(vec![]),
            read: Some(vec![]),
            network: Network::Off,
            memory_max: None,
            pids_max: None,
            cpu_max: None,
        };
        let plan = Plan::parse(&nothing.helper_lines(&[], &[], "/".as_ref())).unwrap();
        assert_eq!(plan.write, Some(vec![]));
        assert_eq!(plan.read, Some(vec![]));
    }

    #[test]
    fn a_plan_with_a_line_it_does_not_know_is_refused_whole() {
        for bad in [
            "network on\nseccomp strict\n",
            "write /a\n",
            "network sideways\n",
            "network\n",
        ] {
            assert!(Plan::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_step_reads_back_from_its_number() {
        for n in 0..=10u8 {
            if let Some(step) = Step::from_number(n) {
                assert_eq!(step as u8, n);
                assert!(!step.doing().is_empty());
            }
        }
        assert_eq!(Step::from_number(3), Some(Step::Namespaces));
        assert_eq!(Step::from_number(0), None);
        assert_eq!(Step::from_number(9), None);
    }
}
