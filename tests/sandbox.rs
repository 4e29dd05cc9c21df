//! Sandboxed sessions (contract section 12): every rule and the escapes a program inside
//! would try, in both process-tracking modes where the rule allows, after a `kill -9` of the
//! daemon and adoption, and everyday tools working inside a sandbox that allows their
//! directories.

mod support;

use ptyd::pb::{OpenRequest, Sandbox, SandboxPaths, SessionInfo};
use ptyd::process::ProcessTracking;
use std::path::{Path, PathBuf};
use support::*;
use tonic::Code;

const AGENT: &str = "sandboxed-agent";
/// The system's programs only: no tool from the machine user's home (pyenv shims and the
/// like) that a read-restricted sandbox would not see.
const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// One test per process-tracking mode.
macro_rules! in_both_modes {
    ($scenario:ident: $cgroup:ident, $subreaper:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $cgroup() {
            timed($scenario(ProcessTracking::Cgroup)).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $subreaper() {
            timed($scenario(ProcessTracking::Subreaper)).await;
        }
    };
}

fn paths(list: &[&str]) -> Option<SandboxPaths> {
    Some(SandboxPaths {
        paths: list.iter().map(|p| p.to_string()).collect(),
    })
}

/// A daemon tracking processes as `tracking` says, with `work` (the sessions' cwd) and
/// `outside` (which no sandbox allows) in its directory.
async fn daemon(tracking: ProcessTracking) -> (Daemon, PathBuf, PathBuf) {
    let config = ptyd::config::Config {
        process_tracking: tracking,
        ..Default::default()
    };
    let d = start_daemon_with(config).await;
    let work = d.dir().join("work");
    let outside = d.dir().join("outside");
    for dir in [&work, &outside] {
        std::fs::create_dir(dir).unwrap();
    }
    std::fs::write(outside.join("kept"), "original\n").unwrap();
    (d, work, outside)
}

fn request(cwd: &Path, sandbox: Option<Sandbox>) -> OpenRequest {
    OpenRequest {
        agent_id: AGENT.into(),
        cwd: cwd.display().to_string(),
        env: [
            ("PATH".to_string(), SYSTEM_PATH.to_string()),
            ("LANG".to_string(), "C.UTF-8".to_string()),
        ]
        .into(),
        sandbox,
        ..Default::default()
    }
}

/// Opens a session in `cwd` inside `sandbox`; returns its id and info.
async fn open_sandboxed(c: &mut Client, cwd: &Path, sandbox: Sandbox) -> (String, SessionInfo) {
    let r = open_with(c, request(cwd, Some(sandbox))).await;
    assert!(
        r.rendered
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("[sandboxed: ")),
        "the Open line says what is in force: {}",
        r.rendered
    );
    let info = r.session.expect("OpenResponse.session");
    (info.session_id.clone(), info)
}

/// Runs `cmd`; returns its exit code and its output.
async fn run(c: &mut Client, sid: &str, cmd: &str) -> (Option<i32>, String) {
    let fr = send(c, AGENT, sid, cmd).await;
    assert_eq!(
        fr.wait_reason(),
        ptyd::pb::WaitReason::Prompt,
        "{cmd:?} ends at the prompt: {fr:?}"
    );
    (fr.exit_code, fr.viewport)
}

/// What `outside` holds: its names and the content of `kept`.
fn outside_state(outside: &Path) -> (Vec<String>, String) {
    let mut names: Vec<String> = std::fs::read_dir(outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (
        names,
        std::fs::read_to_string(outside.join("kept")).unwrap_or_default(),
    )
}

async fn writes_stay_inside_the_write_roots(tracking: ProcessTracking) {
    let (d, work, outside) = daemon(tracking).await;
    let mut c = d.client();
    let (sid, info) = open_sandboxed(
        &mut c,
        &work,
        Sandbox {
            write: paths(&["$CWD"]),
            ..Default::default()
        },
    )
    .await;
    let in_force = info.sandbox.expect("SessionInfo.sandbox is set");
    let work_real = std::fs::canonicalize(&work).unwrap();
    assert_eq!(in_force.write, paths(&[&work_real.display().to_string()]));
    assert_eq!((in_force.read, in_force.network.as_str()), (None, "on"));
    // Inside the root everything works, renames and links included.
    let (code, out) = run(
        &mut c,
        &sid,
        "echo a > f && mkdir -p d/e && mv f d/e/g && ln d/e/g h && ln -s h s && cat s && rm -r d h s && echo inside-ok",
    )
    .await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("a\ninside-ok") || out.contains("inside-ok"),
        "{out}"
    );
    let o = outside.display();
    let escapes = [
        format!("echo x > {o}/new"),
        format!("echo x >> {o}/kept"),
        format!("touch {o}/touched"),
        format!("mkdir {o}/dir"),
        format!("rm {o}/kept"),
        format!("truncate -s 0 {o}/kept"),
        // Through a symlink planted inside: the kernel checks the file it reaches.
        format!("ln -sf {o}/kept via-link && echo x > via-link"),
        // A hard link would give the outside file the inside's rights: refused.
        format!("ln {o}/kept hard-link"),
        // Moving out of, or in from, the outside.
        format!("echo y > mine && mv mine {o}/moved"),
        format!("mv {o}/kept stolen"),
        format!("cp {o}/kept copy && mv copy {o}/kept"),
    ];
    for escape in &escapes {
        let (code, out) = run(&mut c, &sid, escape).await;
        assert_ne!(code, Some(0), "{escape:?} must fail: {out}");
        assert!(
            out.contains("Permission denied") || out.contains("Invalid cross-device link"),
            "{escape:?}: the program's ordinary error: {out}"
        );
    }
    assert_eq!(
        outside_state(&outside),
        (vec!["kept".to_string()], "original\n".to_string()),
        "nothing outside changed"
    );
    // The daemon and its other sessions are untouched: a plain session writes there.
    let plain = open_with(&mut c, request(&work, None))
        .await
        .session
        .unwrap();
    assert!(plain.sandbox.is_none(), "an unsandboxed session has none");
    run_ok(
        &mut c,
        AGENT,
        &plain.session_id,
        &format!("touch {o}/by-plain"),
    )
    .await;
    assert!(outside.join("by-plain").exists());
    let listed = list(&mut c, AGENT).await.rendered;
    assert!(
        listed.contains(&format!("{sid} [shell] [sandboxed] running")),
        "{listed}"
    );
    assert!(!listed.contains(&format!("{} [shell] [sandboxed]", plain.session_id)));
    d.stop().await;
}
in_both_modes!(writes_stay_inside_the_write_roots:
    writes_stay_inside_the_write_roots_cgroup, writes_stay_inside_the_write_roots_subreaper);

async fn reads_stay_inside_the_read_roots(tracking: ProcessTracking) {
    let (d, work, outside) = daemon(tracking).await;
    std::fs::write(work.join("mine"), "readable\n").unwrap();
    let mut c = d.client();
    let (sid, _) = open_sandboxed(
        &mut c,
        &work,
        Sandbox {
            write: paths(&["$CWD"]),
            read: paths(&[]),
            ..Default::default()
        },
    )
    .await;
    let (code, out) = run(&mut c, &sid, "cat mine && ls /usr/bin/env && echo ok").await;
    assert_eq!(
        code,
        Some(0),
        "the write root and the system stay readable: {out}"
    );
    // The daemon still sees a program inside wait for input (the stdin probe reads /proc).
    let fr = send(&mut c, AGENT, &sid, "read -r answer; echo got-$answer").await;
    assert_eq!(fr.wait_reason(), ptyd::pb::WaitReason::StdinRead, "{fr:?}");
    let (code, out) = run(&mut c, &sid, "yes").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("got-yes"), "{out}");
    let o = outside.display();
    for attempt in [
        format!("cat {o}/kept"),
        format!("ls {o}"),
        "ls /root".into(),
    ] {
        let (code, out) = run(&mut c, &sid, &attempt).await;
        assert_ne!(code, Some(0), "{attempt:?} must fail: {out}");
        assert!(out.contains("Permission denied"), "{attempt:?}: {out}");
    }
    d.stop().await;
}
in_both_modes!(reads_stay_inside_the_read_roots:
    reads_stay_inside_the_read_roots_cgroup, reads_stay_inside_the_read_roots_subreaper);

async fn no_privilege_or_namespace_lifts_the_sandbox(tracking: ProcessTracking) {
    let (d, work, outside) = daemon(tracking).await;
    let mut c = d.client();
    let (sid, _) = open_sandboxed(
        &mut c,
        &work,
        Sandbox {
            write: paths(&["$CWD"]),
            ..Default::default()
        },
    )
    .await;
    let (_, status) = run(&mut c, &sid, "grep NoNewPrivs /proc/self/status").await;
    assert!(
        status.split_whitespace().collect::<Vec<_>>() == ["NoNewPrivs:", "1"],
        "{status}"
    );
    let o = outside.display();
    let mut escapes = vec![
        // A user namespace of its own, with or without a mount namespace: the Landlock
        // domain goes along, and mounting is refused inside it.
        format!("unshare -r sh -c 'echo x > {o}/unshared'"),
        format!("unshare -rm sh -c 'mount -t tmpfs none {o}'"),
        format!("unshare -rm sh -c 'umount -l /proc'"),
        // Another process's namespaces are out of reach.
        "nsenter --target 1 --net true".to_string(),
        "nsenter --target 1 --mount --user true".to_string(),
    ];
    if needs("sudo") && needs("su") {
        // setuid binaries gain nothing (no_new_privs), whoever runs them.
        escapes.push(format!("sudo -n sh -c 'echo x > {o}/by-sudo'"));
        escapes.push(format!("su -c 'echo x > {o}/by-su' root < /dev/null"));
    }
    for escape in &escapes {
        let (code, out) = run(&mut c, &sid, escape).await;
        assert_ne!(code, Some(0), "{escape:?} must fail: {out}");
    }
    assert_eq!(
        outside_state(&outside).0,
        vec!["kept".to_string()],
        "nothing outside was written"
    );
    // A process outside the session: it can be neither traced nor signalled from inside.
    let mut outsider = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let pid = outsider.id();
    let ptrace = format!(
        "python3 -c 'import ctypes,os; l=ctypes.CDLL(None, use_errno=True); \
         r=l.ptrace(16, {pid}, 0, 0); print(\"ptrace\", r, os.strerror(ctypes.get_errno())); \
         r == 0 and l.ptrace(17, {pid}, 0, 0)'"
    );
    let (_, out) = run(&mut c, &sid, &ptrace).await;
    assert!(
        out.contains("ptrace -1 Operation not permitted"),
        "attaching to a process outside is refused: {out}"
    );
    let (code, out) = run(&mut c, &sid, &format!("kill -TERM {pid}")).await;
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("Operation not permitted"), "{out}");
    let daemon_pid = std::process::id();
    let (code, out) = run(&mut c, &sid, &format!("kill -KILL {daemon_pid}")).await;
    assert_ne!(
        code,
        Some(0),
        "the daemon cannot be killed from inside: {out}"
    );
    assert!(
        outsider.try_wait().unwrap().is_none(),
        "the outside process still runs"
    );
    // The same attach from a session without a sandbox works: the refusal is the sandbox's.
    let plain = open_with(&mut c, request(&work, None))
        .await
        .session
        .unwrap();
    let (_, out) = run(&mut c, &plain.session_id, &ptrace).await;
    assert!(out.contains("ptrace 0 "), "unsandboxed: {out}");
    outsider.kill().unwrap();
    outsider.wait().unwrap();
    d.stop().await;
}
in_both_modes!(no_privilege_or_namespace_lifts_the_sandbox:
    no_privilege_or_namespace_lifts_the_sandbox_cgroup,
    no_privilege_or_namespace_lifts_the_sandbox_subreaper);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_and_its_sessions_helpers_are_out_of_reach() {
    timed(async {
        let (d, work, _) = daemon(ProcessTracking::Subreaper).await;
        let mut c = d.client();
        let (sid, _) = open_sandboxed(&mut c, &work, Sandbox::default()).await;
        let socket = d.dir().join("ptyd.sock");
        let state = d.dir().join("state");
        let ptyd = env!("CARGO_BIN_EXE_ptyd");
        // From outside the socket answers; from inside there is nothing to connect to, so
        // no sandboxed program can open an unsandboxed session.
        let cmd = format!(
            "{ptyd} --socket {} --agent {AGENT} list; echo rc=$?; ls -A {} | wc -l",
            socket.display(),
            state.display()
        );
        let (_, out) = run(&mut c, &sid, &cmd).await;
        assert!(
            !out.contains("rc=0"),
            "the daemon's socket is covered: {out}"
        );
        assert!(
            out.trim_end().ends_with("\n0") || out.trim_end() == "0",
            "the state directory (every helper's socket) looks empty: {out}"
        );
        assert!(
            std::fs::read_dir(&state).unwrap().next().is_some(),
            "while outside it is not"
        );
        d.stop().await;
    })
    .await;
}

async fn networks_are_what_the_sandbox_says(tracking: ProcessTracking) {
    let (d, work, _) = daemon(tracking).await;
    let mut c = d.client();
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let to_host = format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo reached-host");
    let out_there = "(exec 3<>/dev/tcp/10.255.255.1/80) && echo reached-out";
    let own_server = "python3 -c 'import socket\n\
        for family, addr in ((socket.AF_INET, \"127.0.0.1\"), (socket.AF_INET6, \"::1\")):\n\
        \x20   s = socket.socket(family); s.bind((addr, 0)); s.listen()\n\
        \x20   socket.create_connection(s.getsockname()[:2], 2)\n\
        print(\"own-loopback-ok\")'";
    // on: the host's loopback answers.
    let (on, _) = open_sandboxed(
        &mut c,
        &work,
        Sandbox {
            network: "on".into(),
            ..Default::default()
        },
    )
    .await;
    let (code, out) = run(&mut c, &on, &to_host).await;
    assert_eq!(code, Some(0), "network on reaches the host: {out}");
    // loopback: its own servers answer on 127.0.0.1 and ::1; the host's do not, nor
    // anything further.
    let (lo, _) = open_sandboxed(
        &mut c,
        &work,
        Sandbox {
            network: "loopback".into(),
            ..Default::default()
        },
    )
    .await;
    let (code, out) = run(&mut c, &lo, own_server).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("own-loopback-ok"), "{out}");
    let (code, out) = run(&mut c, &lo, &to_host).await;
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains("Connection refused"),
        "not the host's loopback: {out}"
    );
    let (code, out) = run(&mut c, &lo, out_there).await;
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("Network is unreachable"), "{out}");
    // off: no TCP at all, not even its own; Unix sockets still work.
    let (off, _) = open_sandboxed(
        &mut c,
        &work,
        Sandbox {
            network: "off".into(),
            ..Default::default()
        },
    )
    .await;
    for attempt in [to_host.as_str(), out_there, own_server] {
        let (code, out) = run(&mut c, &off, attempt).await;
        assert_ne!(code, Some(0), "{attempt:?}: {out}");
        assert!(
            out.contains("Permission denied") || out.contains("Network is unreachable"),
            "{attempt:?}: {out}"
        );
    }
    let unix = "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"u\"); print(\"unix-\" + b.recv(1).decode())'";
    let (code, out) = run(&mut c, &off, unix).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("unix-u"), "{out}");
    drop(host);
    d.stop().await;
}
in_both_modes!(networks_are_what_the_sandbox_says:
    networks_are_what_the_sandbox_says_cgroup, networks_are_what_the_sandbox_says_subreaper);

/// Opens a session with `sandbox`'s limit: its id when this daemon enforces it, else `None`,
/// the refusal checked to be FAILED_PRECONDITION naming `key` and its `controller`.
async fn limited(
    c: &mut Client,
    work: &Path,
    sandbox: Sandbox,
    key: &str,
    controller: &str,
) -> Option<String> {
    match c.open(request(work, Some(sandbox))).await {
        Ok(r) => Some(r.into_inner().session.unwrap().session_id),
        Err(s) => {
            assert_eq!(s.code(), Code::FailedPrecondition, "{s:?}");
            let message = s.message();
            assert!(
                message.contains(key) && message.contains(&format!("{controller} controller")),
                "{s:?}"
            );
            None
        }
    }
}

/// The limits need cgroup tracking with their controller delegated: the session then gets
/// exactly them, or its Open fails naming what this daemon lacks (never less).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_inside_the_session_or_the_open_says_why_not() {
    timed(async {
        let (d, work, _) = daemon(ProcessTracking::Cgroup).await;
        let mut c = d.client();
        let bystander = open_with(&mut c, request(&work, None))
            .await
            .session
            .unwrap();
        let pids = Sandbox {
            pids_max: 16,
            ..Default::default()
        };
        if let Some(sid) = limited(&mut c, &work, pids, "sandbox.pids_max", "pids").await {
            let (_, out) = run(
                &mut c,
                &sid,
                "for i in $(seq 40); do sleep 30 & done 2>/dev/null; jobs -r | wc -l",
            )
            .await;
            let running: usize = out.trim().lines().last().unwrap().trim().parse().unwrap();
            assert!(
                (1..16).contains(&running),
                "a fork loop stops at pids_max: {out}"
            );
        }
        let memory = Sandbox {
            memory_max: "64M".into(),
            ..Default::default()
        };
        if let Some(sid) = limited(&mut c, &work, memory, "sandbox.memory_max", "memory").await {
            let hog = "python3 -c 'a = bytearray(512 << 20); print(len(a))'";
            let (code, _) = run(&mut c, &sid, hog).await;
            assert_eq!(
                code,
                Some(137),
                "the memory hog is killed inside the session"
            );
            run_ok(&mut c, AGENT, &sid, "true").await;
        }
        // Whatever happened, the other session and the daemon go on.
        run_ok(&mut c, AGENT, &bystander.session_id, "echo still-here").await;
        d.stop().await;

        let (d, work, _) = daemon(ProcessTracking::Subreaper).await;
        let mut c = d.client();
        let s = expect_code(
            c.open(request(
                &work,
                Some(Sandbox {
                    cpu_max: "50%".into(),
                    ..Default::default()
                }),
            ))
            .await,
            Code::FailedPrecondition,
            "limits under subreaper tracking",
        );
        assert!(s.message().contains("cgroup process tracking"), "{s:?}");
        assert!(
            list(&mut c, AGENT).await.sessions.is_empty(),
            "nothing was left running"
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_tightens_its_types_sandbox_and_never_loosens_it() {
    timed(async {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join("src")).unwrap();
        let mut config = ptyd::config::Config {
            process_tracking: ProcessTracking::Subreaper,
            ..Default::default()
        };
        let mut contained = config.types[0].clone();
        contained.name = "contained".into();
        contained.sandbox = Some(ptyd::sandbox::SandboxRequest {
            write: Some(vec!["$CWD".into()]),
            network: Some(ptyd::sandbox::Network::Loopback),
            pids_max: None,
            ..Default::default()
        });
        config.types.push(contained);
        let d = start_daemon_with(config).await;
        let mut c = d.client();
        let typed = |sandbox: Option<Sandbox>| OpenRequest {
            r#type: "contained".into(),
            ..request(&work, sandbox)
        };
        // Types says which types are sandboxed.
        let types = c
            .types(ptyd::pb::TypesRequest::default())
            .await
            .unwrap()
            .into_inner();
        let listed = types.types.iter().find(|t| t.name == "contained").unwrap();
        assert_eq!(
            listed.sandbox.as_ref().map(|s| s.network.as_str()),
            Some("loopback")
        );
        assert!(
            types
                .rendered
                .lines()
                .any(|l| l.starts_with("contained [") && l.contains("] [sandboxed] ")),
            "{}",
            types.rendered
        );
        // The type's sandbox applies without a request.
        let r = open_with(&mut c, typed(None)).await;
        let s = r.session.unwrap().sandbox.expect("the type's sandbox");
        assert_eq!(s.network, "loopback");
        // Tighter: a subset of the paths, a tighter network.
        let r = open_with(
            &mut c,
            typed(Some(Sandbox {
                write: paths(&["$CWD/src"]),
                network: "off".into(),
                ..Default::default()
            })),
        )
        .await;
        let s = r.session.unwrap().sandbox.unwrap();
        let src = std::fs::canonicalize(work.join("src")).unwrap();
        assert_eq!(s.write, paths(&[&src.display().to_string()]));
        assert_eq!(s.network, "off");
        for (loose, key) in [
            (
                Sandbox {
                    write: paths(&["/tmp"]),
                    ..Default::default()
                },
                "sandbox.write",
            ),
            (
                Sandbox {
                    network: "on".into(),
                    ..Default::default()
                },
                "sandbox.network",
            ),
        ] {
            let s = expect_code(c.open(typed(Some(loose))).await, Code::InvalidArgument, key);
            assert!(
                s.message().starts_with(key) && s.message().contains("type's sandbox"),
                "{s:?}"
            );
        }
        for (bad, key) in [
            (
                Sandbox {
                    write: paths(&["relative"]),
                    ..Default::default()
                },
                "sandbox.write[0]",
            ),
            (
                Sandbox {
                    read: paths(&["/no/such/dir"]),
                    ..Default::default()
                },
                "sandbox.read[0]",
            ),
            (
                Sandbox {
                    network: "wifi".into(),
                    ..Default::default()
                },
                "sandbox.network",
            ),
            (
                Sandbox {
                    memory_max: "1X".into(),
                    ..Default::default()
                },
                "sandbox.memory_max",
            ),
        ] {
            expect_invalid(c.open(request(&work, Some(bad))).await, key, key);
        }
        d.stop().await;
    })
    .await;
}

/// git, python, make and cargo inside a sandbox that allows their directories: the session's
/// directory writable, the toolchain readable, nothing else of the user's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everyday_tools_work_inside_a_sandbox_that_allows_their_directories() {
    timed(async {
        let (d, work, _) = daemon(ProcessTracking::Subreaper).await;
        let mut c = d.client();
        // The toolchain that builds this test, used directly (not through rustup's proxy).
        let cargo = PathBuf::from(env!("CARGO"));
        let toolchain = cargo.parent().and_then(Path::parent).unwrap();
        let tmp = work.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let mut req = request(
            &work,
            Some(Sandbox {
                write: paths(&["$CWD"]),
                read: paths(&[&toolchain.display().to_string()]),
                network: "off".into(),
                ..Default::default()
            }),
        );
        req.env.insert(
            "PATH".into(),
            format!("{}:{SYSTEM_PATH}", cargo.parent().unwrap().display()),
        );
        req.env.insert("CARGO_HOME".into(), work.join(".cargo").display().to_string());
        req.env.insert("TMPDIR".into(), tmp.display().to_string());
        let sid = open_with(&mut c, req).await.session.unwrap().session_id;
        let steps = [
            "git init -q repo && cd repo && echo hi > a && git add a && \
             git -c user.name=t -c user.email=t@example.com commit -qm one && git log --oneline | wc -l",
            "printf 'all:\\n\\techo made-$$((6*7))\\n' > Makefile && make",
            "python3 -c 'import json, sqlite3, tempfile; print(json.dumps({\"sum\": sum(range(10))}))'",
            "cargo new -q --vcs none hello && cd hello && cargo build -q --offline && ./target/debug/hello",
        ];
        let wants = ["1", "made-42", "{\"sum\": 45}", "Hello, world!"];
        for (step, want) in steps.iter().zip(wants) {
            let (code, out) = run(&mut c, &sid, step).await;
            assert_eq!(code, Some(0), "{step:?}: {out}");
            assert!(out.contains(want), "{step:?} prints {want:?}: {out}");
            run_ok(&mut c, AGENT, &sid, &format!("cd {}", work.display())).await;
        }
        d.stop().await;
    })
    .await;
}

/// The sandbox belongs to the processes: a daemon killed with SIGKILL and its successor change
/// nothing about it, and the successor's List and SessionInfo still say what is in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_outlives_a_kill_9_of_the_daemon() {
    timed(async {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(dir.path().join("config/ptyd")).unwrap();
        std::fs::write(
            dir.path().join("config/ptyd/config.toml"),
            "process_tracking = \"subreaper\"\n\
             [[types]]\nname = \"contained\"\nargv = [\"bash\"]\nintegration = \"bash\"\n\
             sandbox = { write = [\"$CWD\"], network = \"loopback\" }\n",
        )
        .unwrap();
        let home = clean_home().display().to_string();
        let envs = [("HOME", home.as_str())];
        let (first, socket) = spawned::spawn_daemon(dir.path(), &[], &envs).await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let r = open_with(
            &mut c,
            OpenRequest {
                r#type: "contained".into(),
                ..request(&work, None)
            },
        )
        .await;
        let before = r.session.unwrap();
        // The config file (like the daemon's token files) reads as empty from inside.
        let config_file = dir.path().join("config/ptyd/config.toml");
        let (code, out) = run(
            &mut c,
            &before.session_id,
            &format!("wc -c < {}", config_file.display()),
        )
        .await;
        assert_eq!((code, out.trim()), (Some(0), "0"), "{out}");
        assert!(std::fs::metadata(&config_file).unwrap().len() > 0);
        let mut first = first;
        first.kill().await.unwrap();
        first.wait().await.unwrap();
        let (second, socket) = spawned::spawn_daemon(dir.path(), &[], &envs).await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let after =
            wait_for_info(&mut c, AGENT, &before.session_id, "adopted", |i| i.adopted).await;
        assert_eq!(
            after.sandbox, before.sandbox,
            "the successor shows the same sandbox"
        );
        let listed = list(&mut c, AGENT).await.rendered;
        assert!(
            listed.contains("[sandboxed]") && listed.contains("(adopted)"),
            "{listed}"
        );
        let o = outside.display();
        let (code, out) = run(&mut c, &before.session_id, &format!("echo x > {o}/after")).await;
        assert_ne!(code, Some(0), "{out}");
        assert!(out.contains("Permission denied"), "{out}");
        let (code, out) = run(&mut c, &before.session_id, "ip -brief link | grep -c .").await;
        assert_eq!((code, out.trim()), (Some(0), "1"), "still only its own lo");
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
        close(&mut c, AGENT, &before.session_id).await;
        spawned::terminate(second).await;
    })
    .await;
}
