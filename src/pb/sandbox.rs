//! A sandbox's protobuf form: an `OpenRequest.sandbox` read into a request (every field
//! checked, the error naming it), and the sandbox in force written into `SessionInfo.sandbox`.

use super::{Sandbox, SandboxPaths};
use crate::sandbox::{self, Network, SandboxRequest};

/// The request an `OpenRequest.sandbox` makes; empty strings and 0 leave a key to the type.
pub(crate) fn request(s: &Sandbox) -> Result<SandboxRequest, String> {
    let network = match s.network.as_str() {
        "" => None,
        name => Some(Network::from_name(name).ok_or_else(|| {
            format!("sandbox.network: must be on, loopback or off, got {name:?}")
        })?),
    };
    let memory_max = match s.memory_max.as_str() {
        "" => None,
        text => Some(sandbox::parse_size("sandbox.memory_max", text)?),
    };
    let cpu_max = match s.cpu_max.as_str() {
        "" => None,
        text => Some(sandbox::parse_cpu("sandbox.cpu_max", text)?),
    };
    Ok(SandboxRequest {
        write: s.write.as_ref().map(|p| p.paths.clone()),
        read: s.read.as_ref().map(|p| p.paths.clone()),
        network,
        memory_max,
        pids_max: (s.pids_max > 0).then_some(s.pids_max),
        cpu_max,
    })
}

/// The `--sandbox KEY=VALUE` arguments of `ptyd open` and `ptyd acp` as an
/// `OpenRequest.sandbox` (`None` without any); each was checked by `sandbox::check_flag`.
pub fn from_flags(flags: &[String]) -> Result<Option<Sandbox>, String> {
    if flags.is_empty() {
        return Ok(None);
    }
    Ok(Some(of_request(&SandboxRequest::from_flags(flags)?)))
}

/// A request (a type's, or the command line's) in its protobuf form.
pub(crate) fn of_request(req: &SandboxRequest) -> Sandbox {
    let paths = |p: &Option<Vec<String>>| p.clone().map(|paths| SandboxPaths { paths });
    Sandbox {
        write: paths(&req.write),
        read: paths(&req.read),
        network: req.network.map(|n| n.name().to_owned()).unwrap_or_default(),
        memory_max: req.memory_max.map(sandbox::format_size).unwrap_or_default(),
        pids_max: req.pids_max.unwrap_or(0),
        cpu_max: req.cpu_max.map(|c| format!("{c}%")).unwrap_or_default(),
    }
}

/// The sandbox in force, as `SessionInfo.sandbox` reports it.
pub(crate) fn in_force(s: &sandbox::Sandbox) -> Sandbox {
    let paths = |roots: &Option<Vec<std::path::PathBuf>>| {
        roots.as_ref().map(|r| SandboxPaths {
            paths: r.iter().map(|p| p.display().to_string()).collect(),
        })
    };
    Sandbox {
        write: paths(&s.write),
        read: paths(&s.read),
        network: s.network.name().to_owned(),
        memory_max: s.memory_max.map(sandbox::format_size).unwrap_or_default(),
        pids_max: s.pids_max.unwrap_or(0),
        cpu_max: s.cpu_max.map(|c| format!("{c}%")).unwrap_or_default(),
    }
}

/// The line people read for a `SessionInfo.sandbox` (`Sandbox::describe`).
pub(crate) fn describe(s: &Sandbox) -> String {
    let roots = |p: &Option<SandboxPaths>| {
        p.as_ref()
            .map(|p| p.paths.iter().map(std::path::PathBuf::from).collect())
    };
    sandbox::Sandbox {
        write: roots(&s.write),
        read: roots(&s.read),
        network: Network::from_name(&s.network).unwrap_or(Network::On),
        memory_max: sandbox::parse_size("", &s.memory_max).ok(),
        pids_max: (s.pids_max > 0).then_some(s.pids_max),
        cpu_max: sandbox::parse_cpu("", &s.cpu_max).ok(),
    }
    .describe()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_every_field_and_names_a_bad_one() {
        let s = Sandbox {
            write: Some(SandboxPaths {
                paths: vec!["$CWD".into()],
            }),
            read: Some(SandboxPaths { paths: vec![] }),
            network: "off".into(),
            memory_max: "256M".into(),
            pids_max: 32,
            cpu_max: "25%".into(),
        };
        let req = request(&s).unwrap();
        assert_eq!(of_request(&req), s, "a request round-trips");
        assert_eq!(
            req,
            SandboxRequest {
                write: Some(vec!["$CWD".into()]),
                read: Some(vec![]),
                network: Some(Network::Off),
                memory_max: Some(256 << 20),
                pids_max: Some(32),
                cpu_max: Some(25),
            }
        );
        assert_eq!(
            request(&Sandbox::default()).unwrap(),
            SandboxRequest::default()
        );
        for (bad, key) in [
            (
                Sandbox {
                    network: "none".into(),
                    ..Default::default()
                },
                "sandbox.network",
            ),
            (
                Sandbox {
                    memory_max: "lots".into(),
                    ..Default::default()
                },
                "sandbox.memory_max",
            ),
            (
                Sandbox {
                    cpu_max: "0%".into(),
                    ..Default::default()
                },
                "sandbox.cpu_max",
            ),
        ] {
            assert!(request(&bad).unwrap_err().starts_with(key));
        }
    }
}
