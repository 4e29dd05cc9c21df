//! Sessions outlive the daemon. Real
//! `ptyd serve` processes are killed with SIGKILL and a new one on the same socket and state
//! directory adopts what they left.

mod support;

use std::os::unix::fs::MetadataExt;

use ptyd::pb::{CloseOutcome, OpenRequest};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::five_sessions::{A, B, FiveSessions, start};
use support::*;

const PROCESS_DEADLINE: Duration = Duration::from_secs(20);

/// `ptyd serve` on `<dir>/ptyd.sock` with its state in `<dir>/state/ptyd` and `config` as its
/// config file; returns once it answers.
async fn serve(dir: &Path, config: &str) -> (tokio::process::Child, PathBuf) {
    let child = serve_command(dir, config, &dir.join("ptyd.sock"))
        .spawn()
        .expect("start ptyd serve");
    let socket = dir.join("ptyd.sock");
    let s = socket.clone();
    wait_until(PROCESS_DEADLINE, "the daemon answers", move || {
        let s = s.clone();
        async move { ptyd::client::connect(&s).await.is_ok() }
    })
    .await;
    (child, socket)
}

fn serve_command(dir: &Path, config: &str, socket: &Path) -> tokio::process::Command {
    let config_dir = dir.join("config/ptyd");
    std::fs::create_dir_all(&config_dir).unwrap();
    // Subreaper mode: in cgroup mode, a daemon of an older version starting anywhere on the
    // machine removes the cgroups of dead daemons, sessions waiting for adoption included.
    let config = format!("process_tracking = \"subreaper\"\n{config}");
    std::fs::write(config_dir.join("config.toml"), config).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ptyd"));
    cmd.env_remove("PTYD_SOCKET")
        .env_remove("PTYD_AGENT")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env("HOME", clean_home())
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_RUNTIME_DIR", dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .arg("--socket")
        .arg(socket)
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn kill9(mut child: tokio::process::Child) {
    child.kill().await.expect("SIGKILL the daemon");
}

async fn terminate(mut child: tokio::process::Child) {
    let pid = child.id().expect("runs") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(PROCESS_DEADLINE, child.wait())
        .await
        .expect("exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "exits 0 after SIGTERM: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_sessions_of_two_agents_survive_a_kill_9() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-survive-")
            .tempdir()
            .unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let (first, socket) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let sessions = FiveSessions::set_up(&mut c, &work).await;
        kill9(first).await;

        let (second, _) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        sessions.check(&mut c).await;
        terminate(second).await;
    })
    .await;
}

/// Kills a session's helper (as a program inside it could) and waits until it is gone.
async fn kill_helper(c: &mut Client, sid: &str) {
    let shell = session_info(c, A, sid).await.expect("listed").pid;
    let helper = ptyd::process::procfs::ppid(shell as i32).expect("the helper");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(helper),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the helper");
    wait_until(PROCESS_DEADLINE, "the helper is gone", || async move {
        !process_is_running(helper as u32)
    })
    .await;
}

/// Starts every escape in `sid` but the one with a cleared environment (which only its tree or
/// Unix session names, see `process::tag`); returns what each started.
async fn start_escapes(c: &mut Client, sid: &str) -> Vec<(&'static str, u32)> {
    let n = nonce();
    let mut started = Vec::new();
    for (i, (what, cmd)) in escapes(&n).into_iter().enumerate() {
        if cmd.starts_with("env -i") {
            continue;
        }
        run_ok(c, A, sid, &cmd).await;
        started.push((what, the_sleep(&format!("1000.{n}{}", i + 1), what).await));
    }
    started
}

/// What of `started` still runs. (Once the daemon died its orphans belong to the nearest
/// subreaper above it, which may leave them zombies for a while: they count as ended.)
fn left(started: &[(&'static str, u32)]) -> Vec<String> {
    started
        .iter()
        .filter(|(_, pid)| process_is_running(*pid))
        .map(|(what, pid)| format!("{what} ({pid})"))
        .collect()
}

/// Subreaper mode, faults on top of each other: a session's helper is killed from inside it
/// (what it adopted comes to the daemon), the session starts more processes, and then the
/// daemon is killed too (everything goes to init). Close still ends everything the session
/// started, in the daemon that saw the helper die and in the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_everything_after_the_helper_and_the_daemon_were_killed() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-double-")
            .tempdir()
            .unwrap();
        let (first, socket) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let (here, later) = (
            open_in(&mut c, A, dir.path()).await,
            open_in(&mut c, A, dir.path()).await,
        );
        let mut started = std::collections::HashMap::new();
        for sid in [&here, &later] {
            // One escape before the helper dies (the helper adopts what it orphans), the rest
            // after (they come to the daemon).
            let n = nonce();
            run_ok(&mut c, A, sid, &format!("(setsid sleep 1000.{n}0 &)")).await;
            let before = the_sleep(&format!("1000.{n}0"), "an orphan of the helper").await;
            kill_helper(&mut c, sid).await;
            let mut pids = start_escapes(&mut c, sid).await;
            pids.push(("an orphan the helper adopted", before));
            started.insert(sid.clone(), pids);
        }

        assert_eq!(
            close(&mut c, A, &here).await.outcome(),
            CloseOutcome::Closed
        );
        assert_eq!(
            left(&started[&here]),
            Vec::<String>::new(),
            "after Close in the same daemon"
        );

        kill9(first).await;
        let survivors = left(&started[&later]);
        assert!(
            survivors.iter().any(|s| s.starts_with("nohup")),
            "the daemon's death does not end a nohup job: {survivors:?}"
        );
        let (second, _) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        assert!(
            session_info(&mut c, A, &later).await.is_some(),
            "still listed"
        );
        assert_eq!(
            close(&mut c, A, &later).await.outcome(),
            CloseOutcome::Closed
        );
        assert_eq!(
            left(&started[&later]),
            Vec::<String>::new(),
            "after Close in the next daemon"
        );
        terminate(second).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_happened_while_no_daemon_ran_is_reported() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-away-")
            .tempdir()
            .unwrap();
        let (first, socket) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let exits = open_in(&mut c, A, dir.path()).await;
        let orphaned = open_in(&mut c, A, dir.path()).await;
        run_ok(&mut c, A, &orphaned, "echo kept-line").await;
        let shell = session_info(&mut c, A, &exits).await.unwrap().pid;
        let other = session_info(&mut c, A, &orphaned).await.unwrap().pid;
        let helper = ptyd::process::procfs::ppid(other as i32).expect("the helper");
        start(&mut c, A, &exits, "sleep 1; exit 3").await;
        kill9(first).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(helper),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        wait_until(
            PROCESS_DEADLINE,
            "the shell exited meanwhile",
            || async move { !process_is_running(shell) },
        )
        .await;

        let (second, _) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let c2 = c.clone();
        let exits2 = exits.clone();
        wait_until(PROCESS_DEADLINE, "the exit is reported", move || {
            let (mut c, id) = (c2.clone(), exits2.clone());
            async move {
                session_info(&mut c, A, &id)
                    .await
                    .and_then(|s| s.status)
                    .is_some_and(|s| s.state == "exited" && s.exit_code == Some(3))
            }
        })
        .await;
        let lost = session_info(&mut c, A, &orphaned)
            .await
            .expect("still listed");
        assert_eq!(lost.status.unwrap().state, "exited");
        let page = read_page(&mut c, A, &orphaned, 0, 50).await;
        assert!(page.text.contains("kept-line"), "{}", page.text);
        terminate(second).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grace_ends_an_unadopted_session_and_a_restart_within_it_adopts() {
    timed(async {
        let config = "adoption_grace_ms = 2000\n";
        let dir = tempfile::Builder::new()
            .prefix("ptyd-grace-")
            .tempdir()
            .unwrap();
        let (first, socket) = serve(dir.path(), config).await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let sid = open_in(&mut c, A, dir.path()).await;
        run_ok(&mut c, A, &sid, "sleep 1000 &").await;
        let shell = session_info(&mut c, A, &sid).await.unwrap().pid;
        let members = session_processes(shell);
        assert!(members.len() >= 3, "{members:?}");
        kill9(first).await;
        let killed = Instant::now();
        wait_until(
            Duration::from_secs(3),
            "no process of the session is left",
            || {
                let members = members.clone();
                async move { members.iter().all(|&p| !process_is_running(p)) }
            },
        )
        .await;
        assert!(
            killed.elapsed() >= Duration::from_millis(1900),
            "not before the grace"
        );

        // Within the grace, a new daemon adopts the session, which then outlives the grace.
        let (second, _) = serve(dir.path(), config).await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let kept = open_in(&mut c, A, dir.path()).await;
        run_ok(&mut c, A, &kept, "echo before").await;
        let pid = session_info(&mut c, A, &kept).await.unwrap().pid;
        kill9(second).await;
        let (third, _) = serve(dir.path(), config).await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        // The behaviour under test is the session outliving the grace, so this waits out a
        // fixed stretch of wall time past it on purpose (nothing is waited for): a session that
        // ended meanwhile stays ended, so one look afterwards sees it.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            process_is_running(pid),
            "the adopted session lives on past the grace"
        );
        let out = run_ok(&mut c, A, &kept, "echo after").await;
        assert!(out.contains("after"), "{out}");
        terminate(third).await;
        assert!(!process_is_running(pid), "a clean stop ends it");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_per_state_directory_and_ids_continue_across_daemons() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-one-")
            .tempdir()
            .unwrap();
        let (first, socket) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        assert_eq!(open_in(&mut c, A, dir.path()).await, "t1");

        let out = serve_command(dir.path(), "", &dir.path().join("other.sock"))
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("already serves the state directory"),
            "{stderr}"
        );
        assert!(
            !dir.path().join("other.sock").exists(),
            "the refused daemon left no socket file"
        );
        // What the session keeps is private to its user: directories 0700, the rest (the
        // helper's socket, where a new daemon takes the session over, included) 0600.
        let session = dir.path().join("state/ptyd/sessions/t1");
        for entry in std::fs::read_dir(&session).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            let want = if meta.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(
                meta.mode() & 0o777,
                want,
                "{}",
                entry.file_name().to_string_lossy()
            );
        }
        assert!(session.join("helper.sock").exists());

        terminate(first).await;
        let sessions = dir.path().join("state/ptyd/sessions");
        assert_eq!(
            std::fs::read_dir(&sessions).unwrap().count(),
            0,
            "a clean stop removes them"
        );
        let (second, _) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        assert!(ids(&mut c, A).await.is_empty());
        assert_eq!(open_in(&mut c, A, dir.path()).await, "t2", "never reused");
        terminate(second).await;
    })
    .await;
}

/// Whether the session's journal was compacted: its head holds a checkpoint.
fn journal_compacted(dir: &Path, sid: &str) -> bool {
    let path = dir.join("state/ptyd/sessions").join(sid).join("journal");
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok_and(|()| &head == b"ptyd-journal 1\n{")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_compacted_under_a_flood_still_rebuilds_the_session() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-compact-")
            .tempdir()
            .unwrap();
        // A small history: the journal is compacted every 4 MiB of output.
        let config = "[defaults]\nhistory_bytes = 1048576\n";
        let (first, socket) = serve(dir.path(), config).await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let sid = open_in(&mut c, A, dir.path()).await;
        run_ok(&mut c, A, &sid, "cd /tmp; export FOO=bar").await;
        // The prompt's line: the flood's number n will be on line `prompt + n`.
        let prompt = read_page(&mut c, A, &sid, 0, 1).await.total_lines;
        start(&mut c, A, &sid, "seq 1 3000000").await;
        let d = dir.path().to_owned();
        let s = sid.clone();
        wait_until(PROCESS_DEADLINE, "the journal is compacted", move || {
            let (d, s) = (d.clone(), s.clone());
            async move { journal_compacted(&d, &s) }
        })
        .await;
        // Killed in the flood, or just after it: either way every line must be where it was.
        kill9(first).await;

        let (second, _) = serve(dir.path(), config).await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        settle(&mut c, A, &sid).await;
        let first_line = read_page(&mut c, A, &sid, 0, 1).await.first_line;
        let kept = history(&mut c, A, &sid).await;
        let numbers: Vec<u64> = kept.iter().filter_map(|l| l.trim().parse().ok()).collect();
        assert!(
            numbers.len() > 100_000,
            "the history's bound of lines is kept: {}",
            numbers.len()
        );
        assert_eq!(numbers.last(), Some(&3_000_000));
        assert!(
            numbers.windows(2).all(|w| w[1] == w[0] + 1),
            "the flood's lines follow each other, none lost or doubled"
        );
        // The line numbering went on from where the first daemon's was.
        assert_eq!(first_line, prompt + numbers[0], "{:?}", &kept[..3]);
        // What the session keeps on disk stayed bounded: the flood was about 21 MB.
        let journal = dir
            .path()
            .join("state/ptyd/sessions")
            .join(&sid)
            .join("journal");
        let kept_bytes = std::fs::metadata(&journal).unwrap().len();
        assert!(kept_bytes < 8 << 20, "the journal holds {kept_bytes} bytes");
        // The shell state was rebuilt from the marks the checkpoint kept.
        let out = run_ok(&mut c, A, &sid, "pwd; echo $FOO").await;
        assert_eq!(lines(&out), ["/tmp", "bar"], "{out}");
        let r = send(&mut c, A, &sid, "(exit 7)").await;
        assert_eq!(r.exit_code, Some(7), "{r:?}");
        terminate(second).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_record_is_unreadable_is_ended_at_once_and_a_bad_size_repaired() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-wreck-")
            .tempdir()
            .unwrap();
        let (first, socket) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        // (session, what is done to its record)
        let damage: [(&str, Option<&[u8]>); 3] = [
            ("garbage", Some(b"{ not json")),
            ("empty", Some(b"")),
            ("removed", None),
        ];
        let mut wrecks = Vec::new();
        for (what, _) in &damage {
            let sid = open_in(&mut c, A, dir.path()).await;
            run_ok(&mut c, A, &sid, "sleep 1000 &").await;
            let shell = session_info(&mut c, A, &sid).await.unwrap().pid;
            let members = session_processes(shell);
            assert!(members.len() >= 3, "{what}: {members:?}");
            wrecks.push((sid, members));
        }
        let sized = open_in(&mut c, A, dir.path()).await;
        kill9(first).await;
        let sessions = dir.path().join("state/ptyd/sessions");
        for ((sid, _), (_, bytes)) in wrecks.iter().zip(damage) {
            let record = sessions.join(sid).join("record.json");
            match bytes {
                Some(bytes) => std::fs::write(&record, bytes).unwrap(),
                None => std::fs::remove_file(&record).unwrap(),
            }
        }
        let record = sessions.join(&sized).join("record.json");
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
        json["cols"] = 0.into();
        json["rows"] = 0.into();
        std::fs::write(&record, serde_json::to_vec(&json).unwrap()).unwrap();

        let (second, _) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        // Ended by the new daemon, not by the helpers' 15-minute grace.
        for (sid, members) in &wrecks {
            let (members, files) = (members.clone(), sessions.join(sid));
            wait_until(PROCESS_DEADLINE, "no process or file of the wreck is left", move || {
                let (members, files) = (members.clone(), files.clone());
                async move { members.iter().all(|&p| !process_is_running(p)) && !files.exists() }
            })
            .await;
        }
        assert_eq!(ids(&mut c, A).await, vec![sized.clone()]);
        // The zero size became a usable one: a word stays on one row.
        assert_eq!(run_ok(&mut c, A, &sized, "echo alive").await, "alive");
        terminate(second).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_the_state_directory_cannot_keep_says_so_in_its_result() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-unkept-")
            .tempdir()
            .unwrap();
        let (daemon, socket) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        // Where t1's files would go, a file: the state directory cannot keep t1 (as on a full
        // disk, where the journal cannot be made).
        // Once it serves (a socket that accepts may not have its state directory yet).
        assert!(ids(&mut c, A).await.is_empty());
        let sessions = dir.path().join("state/ptyd/sessions");
        std::fs::write(sessions.join("t1"), b"in the way").unwrap();
        let opened = open_with(
            &mut c,
            OpenRequest {
                agent_id: A.into(),
                env: [("HOME".to_string(), dir.path().display().to_string())].into(),
                ..Default::default()
            },
        )
        .await;
        assert_eq!(opened.session.as_ref().unwrap().session_id, "t1");
        assert!(!opened.not_kept.is_empty(), "{opened:?}");
        let second_line = opened.rendered.lines().nth(1).unwrap_or_default();
        assert!(
            second_line.starts_with("[warning: the state directory cannot keep this session (")
                && second_line.ends_with("it ends with this daemon]"),
            "{}",
            opened.rendered
        );
        // It works all the same, and one the directory can keep has no warning.
        assert_eq!(run_ok(&mut c, A, "t1", "echo works").await, "works");
        let kept = open_with(
            &mut c,
            OpenRequest {
                agent_id: A.into(),
                env: [("HOME".to_string(), dir.path().display().to_string())].into(),
                ..Default::default()
            },
        )
        .await;
        assert!(kept.not_kept.is_empty(), "{kept:?}");
        assert!(!kept.rendered.contains("[warning:"), "{}", kept.rendered);
        terminate(daemon).await;
    })
    .await;
}

/// A tmpfs of `size` mounted at `at` for as long as it lives; `None` where this machine does not
/// let the test mount one.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> Option<SmallDisk> {
        std::fs::create_dir_all(at).unwrap();
        let mounted = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then(|| SmallDisk(at.to_owned()))
    }

    /// Writes a file until the disk has no room left.
    fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = vec![1u8; 64 << 10];
        loop {
            match filler.write(&block) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        let _ = filler.sync_all();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_adopted_on_a_full_disk_keeps_its_history() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-full-")
            .tempdir()
            .unwrap();
        let Some(disk) = SmallDisk::mount(&dir.path().join("state"), "8m") else {
            cannot_run_here(
                "a_session_adopted_on_a_full_disk_keeps_its_history",
                "this machine does not let the test mount a tmpfs",
            );
            return;
        };
        let (first, socket) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let sid = open_in(&mut c, A, dir.path()).await;
        // More output than the journal's first window holds past its first 64 KiB, so that
        // going on after it needs room a full disk does not have.
        run_ok(&mut c, A, &sid, "seq 1 30000; echo seq-done").await;
        let before = read_page(&mut c, A, &sid, 0, 3).await;
        assert!(before.text.contains("seq-done"), "{}", before.text);
        kill9(first).await;
        disk.fill();

        let (second, _) = serve(dir.path(), "").await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let after = read_page(&mut c, A, &sid, 0, 3).await;
        assert_eq!(after.total_lines, before.total_lines, "{}", after.text);
        assert_eq!(after.text, before.text);
        let early = read_from(&mut c, A, &sid, 1, 200).await;
        assert!(early.text.lines().any(|l| l == "100"), "{}", early.text);
        // It goes on serving; only what it prints from now on is not kept for a later daemon.
        assert_eq!(
            run_ok(&mut c, A, &sid, "echo still-here").await,
            "still-here"
        );
        terminate(second).await;
        drop(disk);
    })
    .await;
}

/// Each record's id, line, exit code and output region: what a new daemon must
/// give back as the old one did.
fn record_facts(records: &[ptyd::pb::CommandRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            format!(
                "{} {:?} exit={:?} refused={} lines={:?}-{:?} bytes={} retained={}",
                r.command_id,
                r.command,
                r.exit_code,
                r.refused,
                r.first_line,
                r.last_line,
                r.output_bytes,
                r.output_retained
            )
        })
        .collect()
}

async fn records_of(c: &mut Client, agent: &str, sid: &str) -> Vec<ptyd::pb::CommandRecord> {
    c.commands(ptyd::pb::CommandsRequest {
        agent_id: agent.into(),
        session_id: sid.into(),
        ..Default::default()
    })
    .await
    .expect("Commands")
    .into_inner()
    .commands
}

async fn search_for(c: &mut Client, agent: &str, sid: &str, pattern: &str) -> Vec<String> {
    c.search(ptyd::pb::SearchRequest {
        agent_id: agent.into(),
        session_id: sid.into(),
        pattern: pattern.into(),
        ..Default::default()
    })
    .await
    .expect("Search")
    .into_inner()
    .matches
    .iter()
    .map(|m| format!("{} {} {}", m.line, m.text, m.command_id))
    .collect()
}

/// Command records and search survive a `kill -9` of the daemon: the adopted session lists the
/// same records (not doubled by the journal's replay), a command that was running meanwhile
/// gets its end, numbering goes on, and another agent still gets NOT_FOUND.
async fn records_survive_a_kill_9(shell: &str) {
    if !needs(shell) {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("ptyd-records-")
        .tempdir()
        .unwrap();
    let (first, socket) = serve(dir.path(), "").await;
    let mut c = ptyd::client::connect(&socket).await.unwrap();
    let sid = open_type(&mut c, A, shell, dir.path()).await;
    assert_eq!(run_ok(&mut c, A, &sid, "echo alpha-1").await, "alpha-1");
    let failed = send(&mut c, A, &sid, "ls /no-such-dir-here").await;
    assert_ne!(failed.exit_code, Some(0), "{shell}: {failed:?}");
    run_ok(&mut c, A, &sid, "echo needle-x; echo after-needle").await;
    let before = records_of(&mut c, A, &sid).await;
    let found_before = search_for(&mut c, A, &sid, "needle").await;
    // The echoed command line and its two output lines; only the output belongs to c3.
    assert_eq!(found_before.len(), 3, "{shell}: {found_before:?}");
    assert!(
        found_before[1..].iter().all(|m| m.ends_with(" c3")),
        "{shell}: {found_before:?}"
    );
    // A command still running when the daemon dies ends under the next one.
    start(&mut c, A, &sid, "sleep 1; echo late-line").await;
    kill9(first).await;

    let (second, _) = serve(dir.path(), "").await;
    let mut c = ptyd::client::connect(&socket).await.unwrap();
    settle(&mut c, A, &sid).await;
    let after = records_of(&mut c, A, &sid).await;
    assert_eq!(
        record_facts(&after[..3]),
        record_facts(&before),
        "{shell}: the records before the kill"
    );
    let late = after.get(3).expect("the command that ran across the kill");
    assert_eq!(
        (late.command_id.as_str(), late.exit_code),
        ("c4", Some(0)),
        "{shell}: {late:?}"
    );
    assert_eq!(after.len(), 4, "{shell}: {:?}", record_facts(&after));
    let late_output = read_with(
        &mut c,
        ptyd::pb::ReadRequest {
            agent_id: A.into(),
            session_id: sid.clone(),
            command_id: "c4".into(),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        late_output.text, "late-line",
        "{shell}: {late:?} {late_output:?}"
    );
    assert_eq!(search_for(&mut c, A, &sid, "needle").await, found_before);
    assert_eq!(run_ok(&mut c, A, &sid, "echo beta-5").await, "beta-5");
    let newest = records_of(&mut c, A, &sid).await;
    assert_eq!(newest.last().map(|r| r.command_id.as_str()), Some("c5"));

    let theirs = c
        .commands(ptyd::pb::CommandsRequest {
            agent_id: B.into(),
            session_id: sid.clone(),
            ..Default::default()
        })
        .await;
    assert_eq!(
        theirs.map(|_| ()).unwrap_err().code(),
        tonic::Code::NotFound
    );
    let theirs = c
        .search(ptyd::pb::SearchRequest {
            agent_id: B.into(),
            session_id: sid.clone(),
            pattern: "needle".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(
        theirs.map(|_| ()).unwrap_err().code(),
        tonic::Code::NotFound
    );
    terminate(second).await;
}

shell_tests!(records_survive_a_kill_9:
    bash_records_survive_a_kill_9 => "bash",
    zsh_records_survive_a_kill_9 => "zsh",
    fish_records_survive_a_kill_9 => "fish",
);
