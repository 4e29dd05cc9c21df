//! A sandbox's cgroup v2 limits on a session's cgroup (contract section 12): the controllers
//! enabled down from the daemon's delegated cgroup, then `memory.max`, `pids.max` and
//! `cpu.max` set before the helper joins, so the limits hold from the first process on. A
//! controller this daemon was not given fails the start, naming it.

use super::{Hierarchy, SessionCgroup};
use crate::sandbox::Sandbox;
use std::path::Path;

/// `cpu.max`'s period, microseconds (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

/// One limit: the sandbox key, its controller, its file and the value written.
struct Limit {
    key: &'static str,
    controller: &'static str,
    file: &'static str,
    value: String,
}

/// The limits `sandbox` asks for.
fn limits(sandbox: &Sandbox) -> Vec<Limit> {
    let mut out = Vec::new();
    if let Some(bytes) = sandbox.memory_max {
        out.push(Limit {
            key: "memory_max",
            controller: "memory",
            file: "memory.max",
            value: bytes.to_string(),
        });
    }
    if let Some(n) = sandbox.pids_max {
        out.push(Limit {
            key: "pids_max",
            controller: "pids",
            file: "pids.max",
            value: n.to_string(),
        });
    }
    if let Some(percent) = sandbox.cpu_max {
        out.push(Limit {
            key: "cpu_max",
            controller: "cpu",
            file: "cpu.max",
            value: format!(
                "{} {CPU_PERIOD_US}",
                u64::from(percent) * CPU_PERIOD_US / 100
            ),
        });
    }
    out
}

impl SessionCgroup {
    /// Sets `sandbox`'s limits on this (still empty) cgroup; the error says which limit this
    /// daemon cannot set and why.
    pub(crate) fn limit(&self, hierarchy: &Hierarchy, sandbox: &Sandbox) -> Result<(), String> {
        let limits = limits(sandbox);
        hierarchy.enable(&limits)?;
        for l in &limits {
            std::fs::write(self.path.join(l.file), &l.value).map_err(|e| {
                format!(
                    "sandbox.{}: cannot set {} of the session's cgroup: {e}",
                    l.key, l.file
                )
            })?;
        }
        Ok(())
    }
}

impl Hierarchy {
    /// Enables the limits' controllers for session cgroups: in the daemon's own cgroup's and
    /// its parent cgroup's `cgroup.subtree_control`.
    fn enable(&self, limits: &[Limit]) -> Result<(), String> {
        let base = self.parent.parent().unwrap_or(Path::new("/"));
        let given = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
        let given: Vec<&str> = given.split_whitespace().collect();
        for l in limits {
            if !given.contains(&l.controller) {
                return Err(format!(
                    "sandbox.{}: needs the cgroup v2 {} controller, which this daemon's cgroup \
                     {} was not given (it has: {}); under systemd, Delegate=yes on the unit \
                     delegates it",
                    l.key,
                    l.controller,
                    base.display(),
                    if given.is_empty() {
                        "none".to_owned()
                    } else {
                        given.join(" ")
                    }
                ));
            }
        }
        super::create_parent(&self.parent).map_err(|e| {
            format!(
                "cannot create the daemon's cgroup {}: {e}",
                self.parent.display()
            )
        })?;
        for dir in [base, self.parent.as_path()] {
            let control = dir.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&control).unwrap_or_default();
            for l in limits {
                if enabled.split_whitespace().any(|c| c == l.controller) {
                    continue;
                }
                std::fs::write(&control, format!("+{}", l.controller)).map_err(|e| {
                    format!(
                        "sandbox.{}: cannot enable the {} controller in {}: {e}",
                        l.key,
                        l.controller,
                        control.display()
                    )
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_goes_to_its_controllers_file_in_the_kernels_units() {
        let sandbox = Sandbox {
            write: None,
            read: None,
            network: crate::sandbox::Network::On,
            memory_max: Some(512 << 20),
            pids_max: Some(64),
            cpu_max: Some(150),
        };
        let got: Vec<(&str, &str, String)> = limits(&sandbox)
            .into_iter()
            .map(|l| (l.controller, l.file, l.value))
            .collect();
        assert_eq!(
            got,
            vec![
                ("memory", "memory.max", "536870912".to_owned()),
                ("pids", "pids.max", "64".to_owned()),
                ("cpu", "cpu.max", "150000 100000".to_owned()),
            ]
        );
    }
}
