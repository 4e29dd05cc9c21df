//! How Close finds every process of a session: one cgroup v2 per session, or the session
//! helper's process tree (see [`crate::process::reaper`]), chosen once at start-up.

/// How Close finds every process of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcessTracking {
    /// `Cgroup` when the daemon finds a writable cgroup v2 subtree at start-up, else `Subreaper`.
    #[default]
    Auto,
    /// One cgroup v2 per session; the daemon refuses to start without a writable subtree.
    Cgroup,
    /// The per-session helper's process tree, without cgroups.
    Subreaper,
}

impl ProcessTracking {
    /// The name used in the config file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ProcessTracking::Auto => "auto",
            ProcessTracking::Cgroup => "cgroup",
            ProcessTracking::Subreaper => "subreaper",
        }
    }

    /// The mode actually used: `Auto` becomes `Cgroup` when a writable cgroup v2 subtree exists.
    /// A forced `Cgroup` without one is an error that says why.
    pub fn resolve(self) -> Result<ProcessTracking, String> {
        match self {
            ProcessTracking::Auto => Ok(match crate::process::cgroup::hierarchy() {
                Ok(_) => ProcessTracking::Cgroup,
                Err(_) => ProcessTracking::Subreaper,
            }),
            ProcessTracking::Cgroup => crate::process::cgroup::hierarchy()
                .map(|_| ProcessTracking::Cgroup)
                .map_err(|why| format!("process_tracking = \"cgroup\" is not available: {why}")),
            ProcessTracking::Subreaper => Ok(ProcessTracking::Subreaper),
        }
    }
}

impl std::str::FromStr for ProcessTracking {
    type Err = String;

    fn from_str(s: &str) -> Result<ProcessTracking, String> {
        match s {
            "auto" => Ok(ProcessTracking::Auto),
            "cgroup" => Ok(ProcessTracking::Cgroup),
            "subreaper" => Ok(ProcessTracking::Subreaper),
            other => Err(format!(
                "process_tracking {other:?} is not one of auto, cgroup, subreaper"
            )),
        }
    }
}

impl std::fmt::Display for ProcessTracking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_names_round_trip() {
        for t in [
            ProcessTracking::Auto,
            ProcessTracking::Cgroup,
            ProcessTracking::Subreaper,
        ] {
            assert_eq!(t.name().parse::<ProcessTracking>(), Ok(t));
        }
        assert!("cgroups".parse::<ProcessTracking>().is_err());
    }
}
