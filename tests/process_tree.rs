//! Nothing a session starts survives it, in both process-tracking modes: every escape a shell
//! user knows (background, `nohup`, `disown`, `setsid`, a double-forked daemon, a subshell
//! orphan, `env -i setsid`, a stopped job) is gone when Close returns; SIGTERM to a real
//! `ptyd serve` with ten busy sessions exits 0 and leaves none of their processes; a restarted
//! daemon removes the session cgroups a crashed one left, and each daemon keeps its session
//! cgroups in one parent of its own that goes with it; the daemon's environment does not leak
//! into sessions; a daemon without its helper executable refuses to start and says why; the
//! PTY's line discipline follows the session's locale (IUTF8); the TCP listener demands its
//! bearer token.
//!
//! Cgroup-mode tests need a writable cgroup v2 subtree (root, or a delegated systemd unit); on a
//! machine without one they print why and pass without running.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use ptyd::pb::{CloseOutcome, OpenRequest, SendRequest, SignalRequest, WaitReason};
use ptyd::process::{ProcessTracking, procfs};
use support::spawned::*;
use support::*;
use tonic::Code;

const A: &str = "tree";
/// How long an escaped process may take to show up after the command that starts it returned
/// (a double fork finishes asynchronously).
const APPEAR_DEADLINE: Duration = Duration::from_secs(10);

/// A config forcing `mode`.
fn config(mode: ProcessTracking) -> ptyd::config::Config {
    ptyd::config::Config {
        process_tracking: mode,
        ..Default::default()
    }
}

/// Whether cgroup mode can run here; says why not when it cannot.
fn cgroup_mode_available(test: &str) -> bool {
    match ptyd::process::cgroup::hierarchy() {
        Ok(_) => true,
        Err(why) => {
            cannot_run_here(
                test,
                &format!("no writable cgroup v2 subtree on this machine: {why}"),
            );
            false
        }
    }
}

/// A number no other test or run uses, for recognisable `sleep` arguments.
fn state(pid: u32) -> Option<char> {
    procfs::state(pid as i32)
}

/// Starts every escape in a fresh session of a daemon tracking processes as `mode`, closes the
/// session, and asserts none of their processes is left.
async fn nothing_escapes_close(mode: ProcessTracking) {
    let mut d = start_daemon_with(config(mode)).await;
    let home = d.dir().to_path_buf();
    let c = &mut d.client;
    let sid = open_in(c, A, &home).await;
    let info = session_info(c, A, &sid).await.expect("listed");
    assert_tracked(info.pid, mode);
    let n = nonce();
    let mut victims = vec![("shell", info.pid)];
    for (what, cmd) in escapes(&n) {
        let fr = send(c, A, &sid, cmd.as_str()).await;
        assert_eq!(
            fr.wait_reason(),
            WaitReason::Prompt,
            "{what}: {cmd}: {fr:?}"
        );
        let i = victims.len();
        victims.push((what, the_sleep(&format!("1000.{n}{i}"), what).await));
    }
    // A foreground job stopped with SIGTSTP: Close must continue it to kill it.
    let stopped_arg = format!("1000.{n}8");
    let fr = send_with(
        c,
        SendRequest {
            timeout_ms: 300,
            ..send_request(A, &sid, &format!("sleep {stopped_arg}"))
        },
    )
    .await
    .0;
    assert_eq!(fr.wait_reason(), WaitReason::Timeout, "{fr:?}");
    let stopped = the_sleep(&stopped_arg, "the foreground sleep").await;
    c.signal(SignalRequest {
        agent_id: A.into(),
        session_id: sid.clone(),
        signal: "SIGTSTP".into(),
    })
    .await
    .expect("SIGTSTP the foreground job");
    wait_until(APPEAR_DEADLINE, "the job is stopped", || async move {
        state(stopped) == Some('T')
    })
    .await;
    victims.push(("stopped job", stopped));
    for (what, pid) in &victims {
        assert!(process_is_running(*pid), "{what} ({pid}) runs before Close");
    }

    let closed = close(c, A, &sid).await;
    assert_eq!(closed.outcome(), CloseOutcome::Closed);
    let left: Vec<String> = victims
        .iter()
        .filter(|(_, pid)| Path::new(&format!("/proc/{pid}")).exists())
        .map(|(what, pid)| format!("{what} ({pid}, state {:?})", state(*pid)))
        .collect();
    assert!(
        left.is_empty(),
        "{mode} mode: after Close returned these still exist: {left:?}"
    );
    d.stop().await;
}

/// Asserts the session's program is tracked as `mode` says: in its own cgroup, or under its
/// helper.
fn assert_tracked(shell: u32, mode: ProcessTracking) {
    let cgroup = std::fs::read_to_string(format!("/proc/{shell}/cgroup")).unwrap_or_default();
    let own = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("");
    let parent = procfs::ppid(shell as i32).unwrap_or(0);
    assert_eq!(
        procfs::comm(parent).as_deref(),
        Some("ptyd-helper"),
        "the shell runs under its session helper"
    );
    match mode {
        ProcessTracking::Cgroup => {
            let mut path = own.rsplit('/');
            let (leaf, daemons) = (path.next().unwrap_or(""), path.next().unwrap_or(""));
            assert!(
                daemons.starts_with("ptyd-") && leaf.ends_with("-t1"),
                "the shell is in its session cgroup, in the daemon's parent cgroup: {own:?}"
            );
            assert_eq!(
                std::fs::read_to_string(format!("/proc/{parent}/cgroup")).unwrap_or_default(),
                cgroup,
                "the helper is in the session cgroup too"
            );
        }
        _ => assert!(
            !own.split('/').any(|c| c.starts_with("ptyd-")),
            "no session cgroup in subreaper mode: {own:?}"
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_escapes_close_in_cgroup_mode() {
    if !cgroup_mode_available("nothing_escapes_close_in_cgroup_mode") {
        return;
    }
    timed(nothing_escapes_close(ProcessTracking::Cgroup)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_escapes_close_in_subreaper_mode() {
    timed(nothing_escapes_close(ProcessTracking::Subreaper)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_concurrent_close_answers_already_closing() {
    timed(async {
        // A long grace, and a `nohup` job that ignores the polite SIGHUP: the first Close stays
        // in its grace period long enough for the second one to arrive.
        let mut d = start_daemon_with(ptyd::config::Config {
            close_grace: Duration::from_secs(5),
            ..config(ProcessTracking::Subreaper)
        })
        .await;
        let home = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_in(c, A, &home).await;
        let shell = session_info(c, A, &sid).await.unwrap().pid;
        let n = nonce();
        run_ok(
            c,
            A,
            &sid,
            &format!("nohup sleep 1000.{n} >/dev/null 2>&1 &"),
        )
        .await;
        // Once `sleep` runs, nohup has made it ignore SIGHUP.
        the_sleep(&format!("1000.{n}"), "the nohup job").await;
        let req = ptyd::pb::CloseRequest {
            agent_id: A.into(),
            session_id: sid.clone(),
        };
        let mut c1 = c.clone();
        let (first, second) = tokio::join!(c1.close(req.clone()), async {
            // The shell dies of the first Close's SIGHUP; the nohup job holds the Close open.
            wait_until(
                Duration::from_secs(10),
                "the first Close has begun",
                || async move { !process_is_running(shell) },
            )
            .await;
            c.clone().close(req.clone()).await
        });
        let second = second.expect("the second Close").into_inner();
        assert_eq!(second.outcome(), CloseOutcome::AlreadyClosing);
        assert_eq!(
            second.rendered,
            format!("terminal session {sid} was already closing")
        );
        assert_eq!(
            first.expect("the first Close").into_inner().outcome(),
            CloseOutcome::Closed
        );
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// A real daemon process

async fn sigterm_ends_every_busy_session(mode: ProcessTracking) {
    let dir = tempfile::Builder::new()
        .prefix("ptyd-sigterm-")
        .tempdir()
        .unwrap();
    let (child, socket) = spawn_daemon(dir.path(), &["--process-tracking", mode.name()], &[]).await;
    let daemon = child.id().expect("the daemon runs") as i32;
    let mut c = ptyd::client::connect(&socket).await.expect("connect");
    let n = nonce();
    let mut sessions = Vec::new();
    for i in 0..10 {
        let sid = open_in(&mut c, A, dir.path()).await;
        // Half run a foreground sleep, half a CPU-bound loop; every other one also leaves a
        // setsid'd orphan behind.
        let cmd = match i % 2 {
            0 => format!("sleep 1000.{n}{i}"),
            _ => "yes > /dev/null".to_owned(),
        };
        let cmd = if i % 4 < 2 {
            format!("setsid sleep 1001.{n}{i} & {cmd}")
        } else {
            cmd
        };
        let fr = send_with(
            &mut c,
            SendRequest {
                timeout_ms: 200,
                ..send_request(A, &sid, &cmd)
            },
        )
        .await
        .0;
        assert_eq!(fr.wait_reason(), WaitReason::Timeout, "{cmd}: {fr:?}");
        sessions.push(sid);
    }
    let n2 = n.clone();
    wait_until(APPEAR_DEADLINE, "every busy process runs", move || {
        let n = n2.clone();
        async move {
            (0..10)
                .step_by(2)
                .all(|i| sleeps_with(&format!("1000.{n}{i}")).len() == 1)
                && [0, 1, 4, 5, 8, 9]
                    .iter()
                    .all(|i| sleeps_with(&format!("1001.{n}{i}")).len() == 1)
        }
    })
    .await;
    let owned = procfs::live_descendants(daemon);
    assert!(
        owned.len() >= 10 * 3,
        "helpers, shells and their programs run under the daemon: {owned:?}"
    );
    let cgroups = session_cgroups(daemon);
    if mode == ProcessTracking::Cgroup {
        assert_eq!(cgroups.len(), 10, "one cgroup per session: {cgroups:?}");
    }
    drop(c);
    terminate(child).await;
    let left: Vec<(u32, Option<char>)> = owned
        .iter()
        .map(|&p| p as u32)
        .filter(|p| Path::new(&format!("/proc/{p}")).exists())
        .map(|p| (p, state(p)))
        .collect();
    assert!(
        left.is_empty(),
        "{mode} mode: processes of the daemon's sessions survived it: {left:?}"
    );
    let left: Vec<_> = cgroups.iter().filter(|p| p.exists()).collect();
    assert!(
        left.is_empty(),
        "session cgroups survived the daemon: {left:?}"
    );
}

/// What the daemon `pid` made in this process's cgroup (where a daemon it spawns starts): its
/// parent cgroup, named `ptyd-<pid>-<start time>`; empty when there is none.
fn daemon_cgroups(pid: i32) -> Vec<std::path::PathBuf> {
    let Ok((base, _)) = ptyd::process::cgroup::current_dir() else {
        return Vec::new();
    };
    let prefix = format!("ptyd-{pid}-");
    let mut found: Vec<_> = std::fs::read_dir(base)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// The session cgroups of the daemon `pid`: the cgroups inside its parent cgroup.
fn session_cgroups(pid: i32) -> Vec<std::path::PathBuf> {
    daemon_cgroups(pid)
        .iter()
        .flat_map(|parent| std::fs::read_dir(parent).into_iter().flatten().flatten())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_every_busy_session_in_cgroup_mode() {
    if !cgroup_mode_available("sigterm_ends_every_busy_session_in_cgroup_mode") {
        return;
    }
    timed(sigterm_ends_every_busy_session(ProcessTracking::Cgroup)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_every_busy_session_in_subreaper_mode() {
    timed(sigterm_ends_every_busy_session(ProcessTracking::Subreaper)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_removes_the_cgroups_a_crashed_one_left() {
    if !cgroup_mode_available("a_restarted_daemon_removes_the_cgroups_a_crashed_one_left") {
        return;
    }
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-stale-")
            .tempdir()
            .unwrap();
        // A daemon "crashed" by SIGKILL: nothing closed its sessions, and with no adoption
        // grace its helper ends its session at once (as it does after the grace otherwise).
        let config_dir = dir.path().join("config/ptyd");
        std::fs::create_dir_all(&config_dir).unwrap();
        std::fs::write(config_dir.join("config.toml"), "adoption_grace_ms = 1\n").unwrap();
        let (mut crashed, socket) =
            spawn_daemon(dir.path(), &["--process-tracking", "cgroup"], &[]).await;
        let crashed_pid = crashed.id().expect("runs") as i32;
        let mut c = ptyd::client::connect(&socket).await.expect("connect");
        let sid = open_in(&mut c, A, dir.path()).await;
        let n = nonce();
        run_ok(&mut c, A, &sid, &format!("setsid sleep 1000.{n} &")).await;
        let survivor = the_sleep(&format!("1000.{n}"), "the session's sleep").await;
        let left = session_cgroups(crashed_pid);
        assert_eq!(left.len(), 1, "{left:?}");
        let parent = daemon_cgroups(crashed_pid);
        assert_eq!(parent.len(), 1, "{parent:?}");
        let shell = session_info(&mut c, A, &sid).await.unwrap().pid;
        let helper = procfs::ppid(shell as i32).expect("the shell's parent") as u32;
        drop(c);
        // The crashed daemon's helper comes to this process once it has ended its session;
        // reap it here rather than leave a zombie behind.
        ptyd::process::reaper::become_subreaper().expect("become a subreaper");
        crashed.kill().await.expect("SIGKILL the daemon");
        wait_until(
            APPEAR_DEADLINE,
            "the orphaned helper is gone",
            || async move {
                ptyd::process::reaper::reap_adopted();
                !Path::new(&format!("/proc/{helper}")).exists()
            },
        )
        .await;
        // Its helper notices the daemon is gone and ends the session by itself; to model a
        // crash the helper could not handle, put a fresh process into the orphaned cgroup.
        let mut planted = std::process::Command::new("sleep")
            .arg(format!("1001.{n}"))
            .spawn()
            .expect("start a sleep");
        std::fs::write(left[0].join("cgroup.procs"), planted.id().to_string())
            .expect("move the sleep into the orphaned cgroup");

        let (next, _) = spawn_daemon(dir.path(), &["--process-tracking", "cgroup"], &[]).await;
        // Start-up killed the planted process (our child: reap it) and removed the cgroup.
        let status = tokio::task::spawn_blocking(move || planted.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(!status.success(), "the planted sleep was killed: {status}");
        // The cgroups go once the kernel reports them empty, just after the kill.
        let stale = parent[0].clone();
        wait_until(
            APPEAR_DEADLINE,
            "the crashed daemon's parent cgroup (its session's with it) is removed",
            || {
                let stale = stale.clone();
                async move { !stale.exists() }
            },
        )
        .await;
        assert!(
            !process_is_running(survivor),
            "the crashed session's sleep is gone"
        );
        terminate(next).await;
    })
    .await;
}

/// The cgroup v2 path of `pid` (its `0::` line), relative to the hierarchy's root.
fn cgroup_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("")
        .to_owned()
}

/// A daemon keeps its session cgroups in one parent cgroup of its own, beside nothing else of
/// the machine's, and removes it when it stops. (Run as root outside systemd, the daemon's own
/// cgroup is the hierarchy's root: session cgroups used to go there, next to the machine's.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemons_session_cgroups_share_one_parent_removed_at_exit() {
    if !cgroup_mode_available("a_daemons_session_cgroups_share_one_parent_removed_at_exit") {
        return;
    }
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-parent-")
            .tempdir()
            .unwrap();
        let (child, socket) =
            spawn_daemon(dir.path(), &["--process-tracking", "cgroup"], &[]).await;
        let daemon = child.id().expect("runs") as i32;
        let mut c = ptyd::client::connect(&socket).await.expect("connect");
        let mut shells = Vec::new();
        for _ in 0..2 {
            let sid = open_in(&mut c, A, dir.path()).await;
            shells.push(session_info(&mut c, A, &sid).await.expect("listed").pid);
        }
        let (_, relative) = ptyd::process::cgroup::current_dir().expect("our cgroup");
        let parents = daemon_cgroups(daemon);
        assert_eq!(
            parents.len(),
            1,
            "the daemon made one cgroup beside its own: {parents:?}"
        );
        let parent = Path::new("/")
            .join(&relative)
            .join(parents[0].file_name().expect("named"));
        for shell in &shells {
            let own = cgroup_of(*shell);
            assert_eq!(
                Path::new(&own).parent(),
                Some(parent.as_path()),
                "the session cgroup {own:?} is in the daemon's parent {parent:?}"
            );
        }
        assert_eq!(session_cgroups(daemon).len(), 2);
        drop(c);
        terminate(child).await;
        assert!(
            !parents[0].exists(),
            "the daemon's parent cgroup {} is removed at exit",
            parents[0].display()
        );
    })
    .await;
}

/// The daemon needs its helper executable beside it: without one it does not start, and says
/// where it looked and how to build it (`cargo run` builds only `ptyd`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_its_helper_says_where_it_looked() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-lonely-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        // A hard link: the running executable's path is the link's, with no helper beside it.
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let lonely = bin.join("ptyd");
        std::fs::hard_link(env!("CARGO_BIN_EXE_ptyd"), &lonely).expect("link ptyd");
        let mut cmd = tokio::process::Command::new(&lonely);
        cmd.env_remove("PTYD_SOCKET")
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .arg("--socket")
            .arg(dir.path().join("ptyd.sock"))
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let out = tokio::time::timeout(PROCESS_DEADLINE, cmd.output())
            .await
            .expect("exits in time")
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "serve refuses to start: {stderr}");
        let looked_for = bin.join("ptyd-session-helper");
        assert!(
            stderr.contains("ptyd-session-helper is not installed beside")
                && stderr.contains(&looked_for.display().to_string())
                && stderr.contains("cargo build"),
            "the error names the helper, where it looked and how to build it: {stderr}"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The terminal

/// With a UTF-8 locale the PTY has IUTF8, as a terminal emulator sets it: in cooked mode,
/// Backspace after `é` erases both of its bytes, so the program reads `x` alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backspace_erases_a_whole_utf8_character_in_cooked_mode() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_utf8(c, A).await;
        let fr = send(c, A, &sid, "head -n 1 | od -c").await;
        assert_eq!(fr.wait_reason(), WaitReason::StdinRead, "{fr:?}");
        let fr = send(c, A, &sid, "\u{e9}\u{7f}x").await;
        assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{fr:?}");
        let dump = lines(&fr.viewport)
            .into_iter()
            .find(|l| l.starts_with("0000000"))
            .unwrap_or_else(|| panic!("od's first line in {fr:?}"));
        assert_eq!(
            dump.split_whitespace().collect::<Vec<_>>(),
            ["0000000", "x", "\\n"],
            "the line read holds no stray byte of the erased character"
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_environment_does_not_reach_sessions() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-env-")
            .tempdir()
            .unwrap();
        let (child, socket) = spawn_daemon(
            dir.path(),
            &[],
            &[("PTYD_TEST_SECRET", "hunter2"), ("PAGER", "less")],
        )
        .await;
        let mut c = ptyd::client::connect(&socket).await.expect("connect");
        let sid = open_in(&mut c, A, dir.path()).await;
        let out = run_ok(
            &mut c,
            A,
            &sid,
            "echo \"secret=[$PTYD_TEST_SECRET] pager=$PAGER id=$PTYD_SESSION_ID\"",
        )
        .await;
        assert_eq!(out, format!("secret=[] pager=cat id={sid}"));
        let env = run_ok(&mut c, A, &sid, "env | grep -c hunter2 || true").await;
        assert_eq!(env, "0", "no variable carries the secret");
        drop(c);
        terminate(child).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// TCP

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tcp_listener_needs_the_bearer_token() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-tcp-")
            .tempdir()
            .unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, "s3cret-token\n").unwrap();

        // The token file must be private, and each flag needs the other.
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let tf = token_file.display().to_string();
        for (args, says) in [
            (
                vec!["--listen-tcp", addr.as_str(), "--token-file", tf.as_str()],
                "readable by others",
            ),
            (vec!["--listen-tcp", addr.as_str()], "--token-file"),
            (vec!["--token-file", tf.as_str()], "--listen-tcp"),
        ] {
            let mut cmd = ptyd_command(dir.path());
            cmd.arg("--socket")
                .arg(dir.path().join("refused.sock"))
                .arg("serve")
                .args(&args)
                .stderr(Stdio::piped());
            let out = tokio::time::timeout(PROCESS_DEADLINE, cmd.output())
                .await
                .expect("exits in time")
                .expect("runs");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?} is refused");
            assert!(stderr.contains(says), "{args:?}: {stderr}");
        }
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();

        let (child, socket) = spawn_daemon(
            dir.path(),
            &["--listen-tcp", &addr, "--token-file", &tf],
            &[],
        )
        .await;
        // The daemon answers on its socket a moment before its TCP listener is bound.
        let tcp = addr.clone();
        wait_until(
            Duration::from_secs(10),
            "the TCP listener is bound",
            move || {
                let tcp = tcp.clone();
                async move { tokio::net::TcpStream::connect(&tcp).await.is_ok() }
            },
        )
        .await;
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .expect("connect over TCP");
        let with = |token: Option<&'static str>| {
            ptyd::pb::terminals_client::TerminalsClient::with_interceptor(
                channel.clone(),
                move |mut req: tonic::Request<()>| {
                    if let Some(t) = token {
                        req.metadata_mut()
                            .insert("authorization", t.parse().unwrap());
                    }
                    Ok(req)
                },
            )
        };
        let list = ptyd::pb::ListRequest { agent_id: A.into() };
        for (token, what) in [
            (None, "no token"),
            (Some("Bearer wrong"), "a wrong token"),
            (Some("s3cret-token"), "the token without `Bearer`"),
            (Some("Bearer s3cret-token2"), "a longer token"),
            (Some("Bearer s3cret-toke"), "a shorter token"),
            (Some("Bearer "), "an empty token"),
            (Some("Basic s3cret-token"), "another scheme"),
        ] {
            let s = with(token).list(list.clone()).await.expect_err(what);
            assert_eq!(s.code(), Code::Unauthenticated, "{what}: {s:?}");
        }
        // The scheme is case-insensitive (RFC 7235), as MCP HTTP takes it.
        for token in ["bearer s3cret-token", "BEARER s3cret-token"] {
            with(Some(token))
                .list(list.clone())
                .await
                .unwrap_or_else(|s| panic!("{token}: {s:?}"));
        }
        // Health is behind the token too.
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let s = health
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await
            .expect_err("health without a token");
        assert_eq!(s.code(), Code::Unauthenticated);

        let mut good = with(Some("Bearer s3cret-token"));
        let opened = good
            .open(OpenRequest {
                agent_id: A.into(),
                env: [("HOME".to_string(), dir.path().display().to_string())].into(),
                ..Default::default()
            })
            .await
            .expect("Open with the token")
            .into_inner();
        let sid = opened.session.unwrap().session_id;
        let fr = good
            .send(send_request(A, &sid, "echo over-tcp"))
            .await
            .expect("Send with the token")
            .into_inner();
        assert!(fr.rendered.starts_with("over-tcp\n"), "{}", fr.rendered);
        // The Unix socket needs no token.
        let mut local = ptyd::client::connect(&socket).await.expect("connect");
        assert_eq!(list_ids(&mut local).await, vec![sid.clone()]);

        // 100 connections that never send a token: the daemon lets in 64 at a time (the rest
        // wait in the backlog), closes each within 10 s, and holds no descriptor for the others.
        let daemon = child.id().expect("runs");
        let fds = || {
            std::fs::read_dir(format!("/proc/{daemon}/fd"))
                .unwrap()
                .count()
        };
        let before = fds();
        let mut idle = Vec::new();
        for _ in 0..100 {
            idle.push(
                tokio::net::TcpStream::connect(&addr)
                    .await
                    .expect("connect"),
            );
        }
        wait_until(
            Duration::from_secs(5),
            "64 connections are let in",
            || async { fds() >= before + 64 },
        )
        .await;
        assert!(
            fds() <= before + 64 + 2,
            "at most 64 held: {}",
            fds() - before
        );
        // The connection already authenticated is not bound by any of it.
        let listed = good.list(list.clone()).await.expect("List with the token");
        assert_eq!(listed.into_inner().sessions.len(), 1);
        let started = std::time::Instant::now();
        for (i, conn) in idle.iter_mut().take(64).enumerate() {
            // The server's HTTP/2 settings come first; then the connection ends.
            use tokio::io::AsyncReadExt;
            let mut sink = Vec::new();
            let read = tokio::time::timeout(Duration::from_secs(15), conn.read_to_end(&mut sink))
                .await
                .unwrap_or_else(|_| panic!("connection {i} is closed within 10 s"));
            assert!(
                sink.len() < 1024,
                "{i}: no more than the settings: {read:?}"
            );
        }
        assert!(
            started.elapsed() >= Duration::from_secs(9),
            "not before 10 s"
        );
        drop(idle);
        drop((good, local, channel));
        terminate(child).await;
    })
    .await;
}

async fn list_ids(c: &mut Client) -> Vec<String> {
    list(c, A)
        .await
        .sessions
        .into_iter()
        .map(|s| s.session_id)
        .collect()
}
