//! Tables for the sandbox model: sizes, the command-line form, path resolution and tightening.

use super::*;

fn places() -> Places<'static> {
    Places {
        cwd: Path::new("/work/proj"),
        home: Some(Path::new("/home/u")),
        tmpdir: Path::new("/tmp"),
    }
}

/// Canonical as given (the tables use made-up paths), failing for `/missing`.
fn as_given(p: &Path) -> std::io::Result<PathBuf> {
    if p.starts_with("/missing") {
        Err(std::io::Error::from_raw_os_error(libc::ENOENT))
    } else {
        Ok(p.to_path_buf())
    }
}

fn resolved(req: &SandboxRequest) -> Sandbox {
    req.resolve("sandbox", places(), as_given).unwrap()
}

#[test]
fn sizes_and_shares_parse_with_their_suffixes() {
    let cases: [(&str, Result<u64, &str>); 7] = [
        ("512M", Ok(512 << 20)),
        ("1G", Ok(1 << 30)),
        ("8192K", Ok(8 << 20)),
        ("16777216", Ok(16 << 20)),
        ("1K", Err("below the smallest")),
        ("12X", Err("byte count")),
        ("", Err("byte count")),
    ];
    for (text, want) in cases {
        match (parse_size("memory_max", text), want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
            (Err(e), Err(part)) => {
                assert!(
                    e.contains(part) && e.starts_with("memory_max"),
                    "{text}: {e}"
                )
            }
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }
    assert_eq!(parse_cpu("cpu_max", "150%"), Ok(150));
    assert_eq!(parse_cpu("cpu_max", "50"), Ok(50));
    for bad in ["0%", "-5%", "lots", "100001%"] {
        assert!(parse_cpu("cpu_max", bad).is_err(), "{bad}");
    }
    for (bytes, text) in [
        (512 << 20, "512M"),
        (1 << 30, "1G"),
        (5000, "5000"),
        (3 << 10, "3K"),
    ] {
        assert_eq!(format_size(bytes), text);
    }
}

#[test]
fn the_command_line_form_names_every_key() {
    let req = SandboxRequest::from_flags(&[
        "write=$CWD".into(),
        "write=/tmp".into(),
        "read=".into(),
        "network=loopback".into(),
        "memory_max=1G".into(),
        "pids_max=64".into(),
        "cpu_max=50%".into(),
    ])
    .unwrap();
    assert_eq!(
        req,
        SandboxRequest {
            write: Some(vec!["$CWD".into(), "/tmp".into()]),
            read: Some(vec![]),
            network: Some(Network::Loopback),
            memory_max: Some(1 << 30),
            pids_max: Some(64),
            cpu_max: Some(50),
        }
    );
    for (flag, part) in [
        ("network=sideways", "on, loopback or off"),
        ("colour=red", "unknown key"),
        ("write", "KEY=VALUE"),
        ("pids_max=0", "at least 1"),
    ] {
        let e = SandboxRequest::from_flags(&[flag.into()]).unwrap_err();
        assert!(e.contains(part), "{flag}: {e}");
    }
}

#[test]
fn paths_name_the_sessions_places_and_must_be_absolute_and_there() {
    let req = SandboxRequest {
        write: Some(vec![
            "$CWD".into(),
            "$HOME/.cache".into(),
            "$TMPDIR".into(),
            "/tmp".into(),
        ]),
        ..Default::default()
    };
    let s = resolved(&req);
    assert_eq!(
        s.write,
        Some(vec![
            PathBuf::from("/work/proj"),
            "/home/u/.cache".into(),
            "/tmp".into()
        ]),
        "duplicates fold"
    );
    assert_eq!((s.read, s.network), (None, Network::On));
    let cases = [
        (
            "relative/dir",
            "sandbox.write[0]: \"relative/dir\" must be an absolute path",
        ),
        ("$PWD/x", "names \"$PWD\"; only $CWD, $HOME and $TMPDIR"),
        (
            "/missing/dir",
            "sandbox.write[0]: /missing/dir cannot be used",
        ),
    ];
    for (raw, part) in cases {
        let req = SandboxRequest {
            write: Some(vec![raw.into()]),
            ..Default::default()
        };
        let e = req.resolve("sandbox", places(), as_given).unwrap_err();
        assert!(e.contains(part), "{raw}: {e}");
    }
    let homeless = Places {
        home: None,
        ..places()
    };
    let req = SandboxRequest {
        read: Some(vec!["$HOME".into()]),
        ..Default::default()
    };
    let e = req
        .resolve("types[1].sandbox", homeless, as_given)
        .unwrap_err();
    assert!(
        e.starts_with("types[1].sandbox.read[0]") && e.contains("no HOME"),
        "{e}"
    );
}

#[test]
fn a_request_only_tightens_its_types_sandbox() {
    let ty = resolved(&SandboxRequest {
        write: Some(vec!["$CWD".into(), "/tmp".into()]),
        read: Some(vec!["/data".into()]),
        network: Some(Network::Loopback),
        memory_max: Some(1 << 30),
        pids_max: Some(100),
        cpu_max: None,
    });
    // (request, network asked for, Ok(describe) or Err(part))
    let cases: Vec<(SandboxRequest, Option<Network>, Result<&str, &str>)> = vec![
        (
            SandboxRequest::default(),
            None,
            Ok("write /work/proj, /tmp; read /data; network loopback; memory_max 1G; pids_max 100"),
        ),
        (
            SandboxRequest {
                write: Some(vec!["$CWD/src".into()]),
                read: Some(vec!["/data/a".into(), "/tmp/x".into()]),
                memory_max: Some(512 << 20),
                cpu_max: Some(50),
                ..Default::default()
            },
            Some(Network::Off),
            Ok(
                "write /work/proj/src; read /data/a, /tmp/x; network off; memory_max 512M; pids_max 100; cpu_max 50%",
            ),
        ),
        (
            SandboxRequest {
                write: Some(vec!["/etc".into()]),
                ..Default::default()
            },
            None,
            Err("sandbox.write: /etc would loosen the type's sandbox (write: /work/proj, /tmp)"),
        ),
        (
            SandboxRequest {
                read: Some(vec!["/home/u".into()]),
                ..Default::default()
            },
            None,
            Err("sandbox.read: /home/u would loosen"),
        ),
        (
            SandboxRequest::default(),
            Some(Network::On),
            Err("sandbox.network: \"on\" would loosen the type's sandbox (network: loopback)"),
        ),
        (
            SandboxRequest {
                memory_max: Some(2 << 30),
                ..Default::default()
            },
            None,
            Err("sandbox.memory_max: 2G would loosen the type's sandbox (memory_max: 1G)"),
        ),
        (
            SandboxRequest {
                pids_max: Some(101),
                ..Default::default()
            },
            None,
            Err("sandbox.pids_max: 101 would loosen"),
        ),
    ];
    for (req, network, want) in cases {
        let mine = resolved(&req);
        let got = combine(Some(&ty), Some(&mine), network).map(|s| s.unwrap().describe());
        match (got, want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want),
            (Err(e), Err(part)) => assert!(e.contains(part), "{e}"),
            (got, want) => panic!("{req:?}: got {got:?}, want {want:?}"),
        }
    }
    // Without the type's sandbox the request stands as it is, and neither means none.
    let mine = resolved(&SandboxRequest {
        network: Some(Network::Off),
        ..Default::default()
    });
    assert_eq!(
        combine(None, Some(&mine), Some(Network::Off))
            .unwrap()
            .unwrap()
            .describe(),
        "write all; read all; network off"
    );
    assert_eq!(combine(None, None, None).unwrap(), None);
    // A type without write roots takes any request's.
    let open = resolved(&SandboxRequest::default());
    let mine = resolved(&SandboxRequest {
        write: Some(vec![]),
        ..Default::default()
    });
    assert_eq!(
        combine(Some(&open), Some(&mine), None)
            .unwrap()
            .unwrap()
            .write,
        Some(vec![])
    );
}

#[test]
fn the_daemons_places_are_covered_unless_the_session_needs_what_holds_them() {
    let s = resolved(&SandboxRequest {
        write: Some(vec!["/run/user/1/work".into()]),
        network: Some(Network::Off),
        ..Default::default()
    });
    let hidden: Vec<PathBuf> = [
        "/run/user/1",
        "/run/user/1/ptyd.sock",
        "/home/u/.local/state/ptyd",
        "/home/u/.local/state/ptyd/sessions",
    ]
    .map(PathBuf::from)
    .to_vec();
    let lines = s.helper_lines(&hidden, &[], Path::new("/work/proj"));
    assert_eq!(
        lines,
        "write /run/user/1/work\nnetwork off\nhide /run/user/1/ptyd.sock\nhide /home/u/.local/state/ptyd\n",
        "the runtime directory holds a write root: its socket is covered alone; the state \
         directory's own contents go with it"
    );
}
