//! Running ptyd like infrastructure: systemd socket activation (a client that connected before
//! the daemon existed gets its answer), the config file (a configured type is listed and opens;
//! a malformed file is refused naming the key), and the CLI's contract for scripts (exit status of
//! `send`, one-line errors, an example in every verb's help, completions).

mod support;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use ptyd::pb::{ListRequest, OpenRequest, TypesRequest};
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long a spawned `ptyd serve` may take to answer or to exit.
const PROCESS_DEADLINE: Duration = Duration::from_secs(30);

/// The real binary with no client or config settings inherited from the test's environment.
fn ptyd() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ptyd"));
    cmd.env("HOME", clean_home())
        .env_remove("PTYD_SOCKET")
        .env_remove("PTYD_AGENT")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Points the daemon's config and runtime directories into `dir`, so no user file is read.
fn isolate(cmd: &mut tokio::process::Command, dir: &Path) {
    cmd.env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_RUNTIME_DIR", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("HOME", clean_home());
}

async fn output(cmd: &mut tokio::process::Command) -> Output {
    tokio::time::timeout(PROCESS_DEADLINE, cmd.output())
        .await
        .expect("the ptyd process finishes in time")
        .expect("run the ptyd binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create a temp dir")
}

/// A gRPC channel over a Unix stream that is already connected: the connection exists before
/// anything serves it.
async fn channel_over(stream: tokio::net::UnixStream) -> tonic::transport::Channel {
    let stream = std::sync::Mutex::new(Some(stream));
    let stream = std::sync::Arc::new(stream);
    tonic::transport::Endpoint::from_static("http://localhost").connect_with_connector_lazy(
        tower::service_fn(move |_: tonic::transport::Uri| {
            let stream = stream.lock().unwrap().take();
            async move {
                let stream = stream.ok_or_else(|| std::io::Error::other("connected only once"))?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }),
    )
}

/// Sends SIGTERM to `child` and asserts it exits 0 in time.
async fn terminate(mut child: tokio::process::Child, what: &str) {
    let pid = child.id().expect("the daemon is running") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM the daemon");
    let status = tokio::time::timeout(PROCESS_DEADLINE, child.wait())
        .await
        .unwrap_or_else(|_| panic!("{what} exits after SIGTERM"))
        .expect("wait for the daemon");
    assert!(status.success(), "{what} exits 0 after SIGTERM: {status}");
}

/// Asserts that `agent` can open and close a session on the daemon at `socket`, and that the
/// session's shell holds no socket: the daemon's inherited listening socket (fd 3) must not leak
/// into sessions.
async fn open_check_close(socket: &Path, agent: &str) {
    let mut c = ptyd::client::connect(socket).await.expect("connect");
    let opened = open_with(
        &mut c,
        OpenRequest {
            agent_id: agent.into(),
            ..Default::default()
        },
    )
    .await;
    let info = opened.session.expect("a session");
    let fds = std::fs::read_dir(format!("/proc/{}/fd", info.pid)).expect("list the shell's fds");
    for fd in fds {
        let fd = fd.expect("an fd entry").path();
        let target = std::fs::read_link(&fd).unwrap_or_default();
        assert!(
            !target.to_string_lossy().starts_with("socket:"),
            "the session's shell holds a socket: {} -> {}",
            fd.display(),
            target.display()
        );
    }
    close(&mut c, agent, &info.session_id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inherited_socket_answers_a_client_that_connected_before_the_daemon_started() {
    timed(async {
        let dir = temp_dir("ptyd-activation-");
        let socket = dir.path().join("activated.sock");
        // What systemd does for ptyd.socket: bind and listen before the service exists.
        let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
        let early = tokio::net::UnixStream::connect(&socket)
            .await
            .expect("connect: the kernel queues it until someone accepts");
        let mut client =
            ptyd::pb::terminals_client::TerminalsClient::new(channel_over(early).await);
        let answer = tokio::spawn(async move {
            client
                .list(ListRequest {
                    agent_id: "early".into(),
                })
                .await
        });

        // Hand the listener over as fd 3 with LISTEN_FDS=1 and LISTEN_PID set to the daemon's
        // own pid: `sh` sets it to `$$`, which `exec` keeps for ptyd.
        let fd = listener.as_raw_fd();
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg("LISTEN_FDS=1 LISTEN_PID=$$ exec \"$0\" serve")
            .arg(env!("CARGO_BIN_EXE_ptyd"))
            .env_remove("PTYD_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        isolate(&mut cmd, dir.path());
        // SAFETY: dup2 and fcntl are async-signal-safe; this runs in the child between fork and
        // exec. dup2 gives fd 3 without close-on-exec; when the listener already is fd 3, only
        // the flag needs clearing.
        unsafe {
            cmd.pre_exec(move || {
                let r = if fd == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, 3)
                };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .expect("spawn ptyd serve with an inherited socket");
        drop(listener);

        let listed = tokio::time::timeout(PROCESS_DEADLINE, answer)
            .await
            .expect("the early client gets its answer")
            .expect("the client task")
            .expect("List over the inherited socket");
        assert!(listed.into_inner().sessions.is_empty());
        assert!(
            !dir.path().join("ptyd").exists(),
            "an activated daemon binds no socket of its own"
        );
        open_check_close(&socket, "a").await;
        terminate(child, "the activated daemon").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_socket_activate_starts_the_daemon_on_the_first_connection() {
    let Some(activate) = ptyd::config::find_program("systemd-socket-activate") else {
        // .ci/run installs systemd; elsewhere the inherited-fd test above covers activation.
        cannot_run_here(
            "systemd_socket_activate_starts_the_daemon_on_the_first_connection",
            "systemd-socket-activate is not installed",
        );
        return;
    };
    timed(async {
        let dir = temp_dir("ptyd-socket-activate-");
        let socket = dir.path().join("ptyd.sock");
        let mut cmd = tokio::process::Command::new(activate);
        cmd.arg("-l")
            .arg(&socket)
            .arg(env!("CARGO_BIN_EXE_ptyd"))
            .arg("serve")
            .env_remove("PTYD_SOCKET")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        isolate(&mut cmd, dir.path());
        let mut child = cmd.spawn().expect("spawn systemd-socket-activate");

        // It says "Listening on ..." once the socket is bound; ptyd starts only when a client
        // connects, so the first client always connects before the daemon exists.
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
        loop {
            let line = tokio::time::timeout(PROCESS_DEADLINE, stderr.next_line())
                .await
                .expect("systemd-socket-activate listens in time")
                .expect("read its stderr")
                .expect("systemd-socket-activate exited before listening");
            if line.contains("Listening on") {
                break;
            }
        }
        // Keep draining stderr (the daemon's logs) so the daemon never blocks on a full pipe.
        let drain = tokio::spawn(async move {
            let mut log = Vec::new();
            while let Ok(Some(line)) = stderr.next_line().await {
                log.push(line);
            }
            log
        });

        let mut c = ptyd::client::connect(&socket).await.expect("connect");
        let types = tokio::time::timeout(PROCESS_DEADLINE, c.types(TypesRequest {}))
            .await
            .expect("the first client gets its answer")
            .expect("Types over the activated socket")
            .into_inner();
        assert!(types.types.iter().any(|t| t.name == "shell"), "{types:?}");
        drop(c);
        open_check_close(&socket, "b").await;
        terminate(child, "ptyd under systemd-socket-activate").await;
        let log = drain.await.expect("the stderr task").join("\n");
        assert!(log.contains("serving"), "the daemon logged: {log}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_type_is_listed_and_opens() {
    timed(async {
        let file = PathBuf::from("config.toml");
        let config = ptyd::config::Config::from_toml(
            r#"
[[types]]
name = "py"
argv = ["python3", "-q"]
integration = "none"
description = "python3 for the ops test"
env = { PTYD_OPS_TEST = "configured" }
"#,
            &file,
        )
        .expect("the config loads");
        let mut d = start_daemon_with(config).await;

        let types = d
            .client
            .types(TypesRequest {})
            .await
            .expect("Types")
            .into_inner();
        let py = types
            .types
            .iter()
            .find(|t| t.name == "py")
            .unwrap_or_else(|| panic!("Types lists py: {types:?}"));
        assert_eq!(py.argv, ["python3", "-q"]);
        assert_eq!(py.integration, "none");
        assert_eq!(py.description, "python3 for the ops test");
        assert!(
            types.rendered.contains("py"),
            "the rendering lists it: {}",
            types.rendered
        );

        let opened = open_with(
            &mut d.client,
            OpenRequest {
                agent_id: "a".into(),
                r#type: "py".into(),
                ..Default::default()
            },
        )
        .await;
        let info = opened.session.expect("a session");
        assert_eq!(info.r#type, "py");
        let mut c = d.client();
        send(
            &mut c,
            "a",
            &info.session_id,
            "import os; print(6 * 7, os.environ['PTYD_OPS_TEST'])",
        )
        .await;
        // Without prompt marks the send may end before python prints (stdin_read, idle): the
        // history is where the answer must show up.
        let sid = info.session_id.clone();
        wait_until(
            Duration::from_secs(20),
            "python prints the answer with the type's env",
            || {
                let mut c = c.clone();
                let sid = sid.clone();
                async move {
                    read_page(&mut c, "a", &sid, 0, 50)
                        .await
                        .text
                        .lines()
                        .any(|l| l == "42 configured")
                }
            },
        )
        .await;
        close(&mut c, "a", &info.session_id).await;
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_config_is_refused_at_start_naming_the_file_and_key() {
    timed(async {
        let dir = temp_dir("ptyd-config-");
        let bad = dir.path().join("bad.toml");
        std::fs::write(
            &bad,
            "[limits]\nsessions_per_agent = 4\nsesions_total = 8\n",
        )
        .unwrap();

        let out = output(
            ptyd()
                .args(["serve", "--check-config", "--config"])
                .arg(&bad),
        )
        .await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "exit 1: {stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("an error line: {stderr:?}"));
        assert!(
            line.contains(&bad.display().to_string()),
            "names the file: {line}"
        );
        assert!(line.contains("line 3"), "names the line: {line}");
        assert!(
            line.contains("key `limits.sesions_total`"),
            "names the key: {line}"
        );
        assert!(line.contains("unknown field"), "says why: {line}");

        // Serving with it fails at start, before binding anything.
        let socket = dir.path().join("never.sock");
        let mut cmd = ptyd();
        isolate(&mut cmd, dir.path());
        let out = output(
            cmd.arg("serve")
                .arg("--config")
                .arg(&bad)
                .arg("--socket")
                .arg(&socket),
        )
        .await;
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(!socket.exists(), "nothing was bound");

        // A range error names its key too; a missing explicit file is an error.
        std::fs::write(&bad, "[defaults]\ncols = 5\n").unwrap();
        let out = output(
            ptyd()
                .args(["serve", "--check-config", "--config"])
                .arg(&bad),
        )
        .await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("key `defaults.cols`"), "{stderr}");
        assert!(stderr.contains("between 20 and 1000"), "{stderr}");
        let out = output(
            ptyd()
                .args(["serve", "--check-config", "--config"])
                .arg(dir.path().join("missing.toml")),
        )
        .await;
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("missing.toml"));

        // A good file, found at the default XDG path, passes the check.
        let config_dir = dir.path().join("config").join("ptyd");
        std::fs::create_dir_all(&config_dir).unwrap();
        std::fs::write(
            config_dir.join("config.toml"),
            "[[types]]\nname = \"py\"\nargv = [\"python3\"]\nintegration = \"none\"\n",
        )
        .unwrap();
        let mut cmd = ptyd();
        isolate(&mut cmd, dir.path());
        let out = output(cmd.args(["serve", "--check-config"])).await;
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("config.toml is valid"),
            "says which file: {stderr}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_exits_with_the_commands_status_and_errors_are_one_line() {
    timed(async {
        let d = start_daemon().await;
        let socket = d.socket.to_str().unwrap().to_owned();
        let out = output(ptyd().args(["open", "--socket", &socket])).await;
        assert!(out.status.success(), "open: {}", text(&out.stderr));

        let out = output(ptyd().args(["send", "--socket", &socket, "t1", "false"])).await;
        assert_eq!(
            out.status.code(),
            Some(1),
            "`ptyd send t1 false` exits with false's status: {}",
            text(&out.stdout)
        );
        assert!(text(&out.stdout).contains("[exit code: 1]"));
        let out = output(ptyd().args(["send", "--socket", &socket, "t1", "(exit 7)"])).await;
        assert_eq!(out.status.code(), Some(7), "{}", text(&out.stdout));
        let out = output(ptyd().args(["send", "--socket", &socket, "t1", "true"])).await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

        // A failed request: exit 2 and one line `error: CODE: message`.
        let out = output(ptyd().args(["send", "--socket", &socket, "t99", "true"])).await;
        assert_eq!(out.status.code(), Some(2));
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(stderr.starts_with("error: NOT_FOUND: "), "{stderr:?}");
        assert!(stderr.contains("t99"), "{stderr:?}");

        // No daemon: exit 2, one line naming the socket and the reason.
        let missing = d.dir().join("missing.sock");
        let out = output(ptyd().arg("list").arg("--socket").arg(&missing)).await;
        assert_eq!(out.status.code(), Some(2));
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
        assert!(stderr.starts_with("error: UNAVAILABLE: "), "{stderr:?}");
        assert!(stderr.contains("missing.sock"), "{stderr:?}");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_has_an_example_and_completions_are_generated() {
    timed(async {
        let out = output(ptyd().arg("--help")).await;
        assert!(out.status.success());
        let help = text(&out.stdout);
        assert!(help.contains("Examples:"), "{help}");
        assert!(help.contains("ptyd send t1 'cargo test'"), "{help}");

        let verbs: Vec<String> = help
            .split("Commands:")
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .expect("the help lists the commands")
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|v| *v != "help")
            .map(str::to_owned)
            .collect();
        assert!(verbs.len() >= 13, "{verbs:?}");
        for verb in &verbs {
            let out = output(ptyd().arg(verb).arg("--help")).await;
            assert!(out.status.success(), "{verb} --help");
            let help = text(&out.stdout);
            assert!(
                help.contains(&format!("Example: ptyd {verb}")),
                "`ptyd {verb} --help` shows an example: {help}"
            );
        }
        let out = output(ptyd().args(["send", "--help"])).await;
        assert!(text(&out.stdout).contains("Exit status:"));

        for shell in ["bash", "zsh", "fish"] {
            let out = output(ptyd().args(["completions", shell])).await;
            assert!(out.status.success(), "completions {shell}");
            let script = text(&out.stdout);
            assert!(
                script.contains("ptyd") && script.contains("job-output"),
                "the {shell} script completes the verbs"
            );
        }
    })
    .await;
}

/// Starts `ptyd serve` on a socket in `dir` with `envs`, reads its stderr until it is listening,
/// makes two requests (an open and close that succeed, a List that fails), stops it with SIGTERM
/// and returns all it wrote to stderr.
async fn serve_log(dir: &Path, envs: &[(&str, &str)]) -> String {
    let mut cmd = ptyd();
    isolate(&mut cmd, dir);
    cmd.arg("serve")
        .arg("--socket")
        .arg(dir.join("log-test.sock"))
        .env_remove("JOURNAL_STREAM")
        .env_remove("RUST_LOG")
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ptyd serve");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut log = Vec::new();
    loop {
        let line = tokio::time::timeout(PROCESS_DEADLINE, stderr.next_line())
            .await
            .expect("ptyd serve starts listening in time")
            .expect("read stderr")
            .unwrap_or_else(|| panic!("ptyd serve exited early: {log:?}"));
        let listening = line.starts_with("ptyd: listening on ");
        log.push(line);
        if listening {
            break;
        }
    }
    let rest = tokio::spawn(async move {
        let mut rest = Vec::new();
        while let Ok(Some(line)) = stderr.next_line().await {
            rest.push(line);
        }
        rest
    });
    let socket = dir.join("log-test.sock");
    open_check_close(&socket, "log-test").await;
    let mut c = ptyd::client::connect(&socket).await.expect("connect");
    let refused = c.list(ListRequest::default()).await;
    assert!(refused.is_err(), "a List without agent_id fails");
    terminate(child, "ptyd serve").await;
    log.extend(rest.await.expect("the stderr task"));
    log.join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_follow_rust_log_and_suit_the_journal() {
    timed(async {
        let dir = temp_dir("ptyd-logs-");
        // Under systemd stderr is the journal (JOURNAL_STREAM is set): no colours, no timestamps.
        let log = serve_log(
            dir.path(),
            &[("JOURNAL_STREAM", "8:12345"), ("RUST_LOG", "info")],
        )
        .await;
        assert!(!log.contains('\x1b'), "no ANSI escapes: {log:?}");
        let events: Vec<&str> = log.lines().filter(|l| l.contains("INFO")).collect();
        assert!(
            events.iter().any(|l| l.contains("serving")),
            "info events are logged: {log}"
        );
        for event in &events {
            assert!(
                event.trim_start().starts_with("INFO"),
                "the journal adds the timestamp, ptyd does not: {event:?}"
            );
        }
        // One event per request, with its outcome, whether it succeeds or fails.
        let request = |rpc: &str, outcome: &str| {
            let (outcome, rpc) = (
                format!("ptyd::service: {outcome}"),
                format!("rpc=\"{rpc}\""),
            );
            events
                .iter()
                .any(|l| l.contains(&outcome) && l.contains(&rpc))
        };
        assert!(
            request("List", "failed"),
            "a failed request is logged: {log}"
        );
        assert!(
            request("Open", "ok"),
            "a request that succeeds is logged: {log}"
        );
        // RUST_LOG filters: at warn, the info events are gone.
        let log = serve_log(dir.path(), &[("RUST_LOG", "warn")]).await;
        assert!(!log.contains("INFO"), "RUST_LOG=warn drops info: {log}");
    })
    .await;
}

/// `ptyd stop-post`, the unit's `ExecStopPost=`, in a cgroup laid out as systemd lays out a
/// delegated `ptyd.service` (this runs without a systemd manager): after a crash
/// (`SERVICE_RESULT=signal`) the sessions stay for the restarted daemon; after a stop that was
/// asked for (`success`) every process left in the unit's cgroup tree is gone; without systemd's
/// variables it refuses and kills nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_post_ends_a_stopped_units_sessions_and_keeps_a_crashed_ones() {
    timed(async {
        const TEST: &str = "stop_post_ends_a_stopped_units_sessions_and_keeps_a_crashed_ones";
        let Ok((base, _)) = ptyd::process::cgroup::current_dir() else {
            cannot_run_here(TEST, "this process is in no cgroup v2");
            return;
        };
        let n = format!("{}-{}", std::process::id(), nonce_ops());
        let unit = base.join(format!("ptydtest-{n}.service"));
        if let Err(e) = std::fs::create_dir(&unit) {
            cannot_run_here(
                TEST,
                &format!("cannot create a cgroup under {}: {e}", base.display()),
            );
            return;
        }
        let session = unit.join("ptyd-1-2").join("3-t1");
        let control = unit.join(".control");
        std::fs::create_dir_all(&session).unwrap();
        std::fs::create_dir(&control).unwrap();
        // A session's process in its cgroup, and one left directly in the unit's (subreaper
        // mode); each joins its cgroup before it becomes the sleep.
        let in_cgroup = |cgroup: &Path, program: &str| {
            let mut cmd = tokio::process::Command::new("sh");
            cmd.arg("-c")
                .arg(format!(
                    "echo $$ > {}/cgroup.procs && exec {program}",
                    cgroup.display()
                ))
                .stdin(Stdio::null())
                .kill_on_drop(true);
            cmd
        };
        let sleeps =
            [format!("sleep 1000.{n}"), format!("sleep 1001.{n}")].map(|s| s.replace('-', ""));
        let mut children = vec![
            in_cgroup(&session, &sleeps[0]).spawn().unwrap(),
            in_cgroup(&unit, &sleeps[1]).spawn().unwrap(),
        ];
        let pids: Vec<i32> = children.iter().map(|c| c.id().unwrap() as i32).collect();
        let joined = |cgroup: &Path, pid: i32| {
            std::fs::read_to_string(cgroup.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .any(|l| l.trim() == pid.to_string())
        };
        let (s, u) = (session.clone(), unit.clone());
        let p = pids.clone();
        wait_until(
            PROCESS_DEADLINE,
            "both sleeps joined their cgroups",
            move || {
                let ok = joined(&s, p[0]) && joined(&u, p[1]);
                async move { ok }
            },
        )
        .await;
        let stop_post = |result: Option<&str>| {
            let mut cmd = in_cgroup(
                &control,
                &format!("{} stop-post", env!("CARGO_BIN_EXE_ptyd")),
            );
            cmd.env_remove("SERVICE_RESULT")
                .env("EXIT_CODE", "killed")
                .env("EXIT_STATUS", "KILL");
            if let Some(result) = result {
                cmd.env("SERVICE_RESULT", result);
            }
            cmd
        };
        let alive = |pid: i32| process_is_running(pid as u32);

        let refused = output(&mut stop_post(None)).await;
        assert_eq!(refused.status.code(), Some(2), "{refused:?}");
        assert!(text(&refused.stderr).contains("SERVICE_RESULT is not set"));
        let kept = output(&mut stop_post(Some("signal"))).await;
        assert!(kept.status.success(), "{kept:?}");
        assert!(
            text(&kept.stderr).contains("leaving its sessions for the restarted daemon"),
            "{}",
            text(&kept.stderr)
        );
        assert!(pids.iter().all(|&p| alive(p)), "a crash keeps the sessions");

        let ended = output(&mut stop_post(Some("success"))).await;
        assert!(ended.status.success(), "{ended:?}");
        assert!(
            text(&ended.stderr).contains("ended 2 leftover process(es)"),
            "{}",
            text(&ended.stderr)
        );
        for child in &mut children {
            let status = tokio::time::timeout(PROCESS_DEADLINE, child.wait())
                .await
                .expect("the leftover is gone")
                .unwrap();
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&status),
                Some(9),
                "killed: {status:?}"
            );
        }
        for cgroup in [
            &session,
            &session.parent().unwrap().to_path_buf(),
            &control,
            &unit,
        ] {
            let path = cgroup.clone();
            wait_until(
                PROCESS_DEADLINE,
                "the test cgroup can be removed",
                move || {
                    let removed = std::fs::remove_dir(&path).is_ok() || !path.exists();
                    async move { removed }
                },
            )
            .await;
        }
    })
    .await;
}

/// A number no other call in this process returns.
fn nonce_ops() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
