//! Issue 3 acceptance tests: when a send returns and why (stdin_read, prompt, inferred_idle,
//! timeout), the empty send, zsh/fish/python sessions and users' rc files, input that is never
//! lost (keys, submit, long lines, back-pressure, multi-line units), a caller that hangs up, and
//! an idle daemon that uses no CPU. Streams (SendStream, Watch) are in `streams.rs`. Each test
//! starts its own daemon.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use ptyd::pb::{OpenRequest, SendRequest, SignalRequest, SignalResponse, WaitReason};
use support::*;
use tonic::Code;

const A: &str = "a";
/// An `idle_ms` so long that only a real signal (prompt, stdin_read) or the timeout can end the
/// wait: a send that should be recognised must not fall back to `inferred_idle`.
const NO_IDLE: u32 = 600_000;

fn canonical(path: impl AsRef<Path>) -> String {
    std::fs::canonicalize(path)
        .expect("canonicalize")
        .to_string_lossy()
        .into_owned()
}

/// A send that must be recognised (prompt or stdin_read) rather than idle.
fn sharp(sid: &str, text: &str) -> SendRequest {
    SendRequest {
        idle_ms: NO_IDLE,
        ..send_request(A, sid, text)
    }
}

/// The empty send: no text, no Enter, no keys; it only waits.
fn pure_wait(sid: &str, timeout_ms: u32) -> SendRequest {
    SendRequest {
        submit: Some(false),
        timeout_ms,
        idle_ms: NO_IDLE,
        ..send_request(A, sid, "")
    }
}

/// Named keys only (no text, no Enter).
fn keys(sid: &str, names: &[&str]) -> SendRequest {
    SendRequest {
        submit: Some(false),
        keys: names.iter().map(|k| k.to_string()).collect(),
        idle_ms: NO_IDLE,
        ..send_request(A, sid, "")
    }
}

/// Sends and asserts the wait reason; returns the result.
async fn expect_wait(
    c: &mut Client,
    req: SendRequest,
    want: WaitReason,
) -> ptyd::pb::ForegroundResult {
    let what = format!("{:?} with keys {:?}", req.text, req.keys);
    let (fr, rendered) = send_with(c, req).await;
    assert_eq!(
        fr.wait_reason(),
        want,
        "{what} should return {want:?}: {fr:?}\n{rendered}"
    );
    fr
}

async fn signal(c: &mut Client, sid: &str, name: &str) -> SignalResponse {
    c.signal(SignalRequest {
        agent_id: A.into(),
        session_id: sid.into(),
        signal: name.into(),
    })
    .await
    .unwrap_or_else(|s| panic!("Signal {name} to {sid}: {s:?}"))
    .into_inner()
}

/// Opens a session of `ty` in `cwd` with `env` overrides; returns its id.
async fn open_type(c: &mut Client, ty: &str, cwd: &Path, env: &[(&str, &str)]) -> String {
    open_with(
        c,
        OpenRequest {
            agent_id: A.into(),
            r#type: ty.into(),
            cwd: canonical(cwd),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        },
    )
    .await
    .session
    .expect("OpenResponse.session is set")
    .session_id
}

/// A fresh HOME for a session, holding the given rc files (path relative to HOME, content).
fn home_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let home = tempfile::Builder::new()
        .prefix("ptyd-home-")
        .tempdir()
        .expect("create a temp HOME");
    for (path, content) in files {
        let path = home.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).expect("create rc dir");
        std::fs::write(path, content).expect("write rc file");
    }
    home
}

// ---------------------------------------------------------------------------------------------
// 1. stdin_read

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_waits_on_stdin_then_the_answer_returns_at_the_prompt() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let fr = expect_wait(c, sharp(&sid, "read x"), WaitReason::StdinRead).await;
        assert_eq!(fr.exit_code, None, "nothing ended: {fr:?}");
        let fr = expect_wait(c, sharp(&sid, "abc"), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(run_ok(c, A, &sid, "echo \"got $x\"").await, "got abc");
        d.stop().await;
    })
    .await;
}

/// The answer to a reader is written, and the reader is still blocked in `read` until the kernel
/// hands it the line: the send must not report `stdin_read` for the state before its own input
/// was seen. Repeated, because the window is short (it opens when the machine is busy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_read_is_never_reported_as_still_waiting() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        for i in 0..40 {
            expect_wait(c, sharp(&sid, "read x"), WaitReason::StdinRead).await;
            let answer = format!("answer{i}");
            let fr = expect_wait(c, sharp(&sid, &answer), WaitReason::Prompt).await;
            assert_eq!(fr.exit_code, Some(0), "round {i}: {fr:?}");
        }
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_started_from_the_shell_waits_at_its_repl() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let fr = expect_wait(c, sharp(&sid, "python3"), WaitReason::StdinRead).await;
        assert_eq!(
            lines(&fr.viewport).last().copied(),
            Some(">>>"),
            "the REPL prompt ends the viewport: {:?}",
            fr.viewport
        );
        let fr = expect_wait(c, sharp(&sid, "1+1"), WaitReason::StdinRead).await;
        assert!(
            lines(&fr.viewport).contains(&"2"),
            "the viewport shows the answer: {:?}",
            fr.viewport
        );
        let fr = expect_wait(c, sharp(&sid, "exit()"), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "python exited 0: {fr:?}");
        assert_eq!(run_ok(c, A, &sid, "echo back").await, "back");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_type_is_a_repl_that_waits_for_input() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let opened = open_with(
            c,
            OpenRequest {
                agent_id: A.into(),
                r#type: "python".into(),
                ..Default::default()
            },
        )
        .await;
        assert_eq!(
            lines(&opened.motd).last().copied(),
            Some(">>>"),
            "Open returns once the REPL waits at its prompt: {opened:?}"
        );
        let sid = opened.session.unwrap().session_id;
        let fr = expect_wait(c, sharp(&sid, "6*7"), WaitReason::StdinRead).await;
        assert_eq!(
            lines(&fr.viewport),
            vec![">>> 6*7", "42", ">>>"],
            "an unintegrated viewport: the input line to the cursor: {:?}",
            fr.viewport
        );
        // A multi-line block to a REPL is typed line by line and runs when the block ends.
        let fr = expect_wait(
            c,
            sharp(&sid, "for i in range(3):\n    print('row', i)\n"),
            WaitReason::StdinRead,
        )
        .await;
        for want in ["row 0", "row 1", "row 2"] {
            assert!(lines(&fr.viewport).contains(&want), "{:?}", fr.viewport);
        }
        let fr = expect_wait(c, sharp(&sid, "exit(3)"), WaitReason::SessionExit).await;
        assert_eq!(fr.exit_code, Some(3), "{fr:?}");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_prompt_with_echo_off_waits_on_stdin() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let program = r#"python3 -c 'import getpass; s = getpass.getpass("Password: "); print("length", len(s))'"#;
        let fr = expect_wait(c, sharp(&sid, program), WaitReason::StdinRead).await;
        assert!(
            fr.viewport.contains("Password:"),
            "the prompt is shown: {:?}",
            fr.viewport
        );
        let fr = expect_wait(c, sharp(&sid, "hunter2"), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert!(fr.viewport.contains("length 7"), "{:?}", fr.viewport);
        let history = read_page(c, A, &sid, 0, 10000).await;
        assert!(
            !history.text.contains("hunter2"),
            "echo was off, the password never reached the screen: {:?}",
            history.text
        );
        d.stop().await;
    })
    .await;
}

/// Readers the probe must find wherever they block: a thread other than the main one, an epoll
/// set, and a process of a pipeline that is not its group leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_are_found_in_any_thread_epoll_set_or_pipeline_member() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let cases = [
            (
                "a second thread",
                r#"python3 -c 'import threading; t = threading.Thread(target=lambda: print("got", input("thread> "))); t.start(); t.join()'"#,
            ),
            (
                "an epoll set",
                r#"python3 -c 'import selectors, sys; s = selectors.EpollSelector(); s.register(sys.stdin, selectors.EVENT_READ); s.select(); print("got", sys.stdin.readline().strip())'"#,
            ),
            (
                "a pipeline member",
                r#"echo | (read y < /dev/tty; echo "got $y") | cat"#,
            ),
        ];
        for (what, cmd) in cases {
            expect_wait(c, sharp(&sid, cmd), WaitReason::StdinRead).await;
            let fr = expect_wait(c, sharp(&sid, "it"), WaitReason::Prompt).await;
            assert_eq!(fr.exit_code, Some(0), "{what}: {fr:?}");
            assert!(
                lines(&fr.viewport).contains(&"got it"),
                "{what}: {:?}",
                fr.viewport
            );
        }
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unclosed_quote_waits_at_the_continuation_prompt() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let fr = expect_wait(c, sharp(&sid, "echo \"unterminated"), WaitReason::StdinRead).await;
        assert_eq!(fr.exit_code, None, "{fr:?}");
        let fr = expect_wait(c, sharp(&sid, "closed\""), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(
            lines(&fr.viewport),
            vec!["unterminated", "closed"],
            "{:?}",
            fr.viewport
        );
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 2. Full-screen programs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vim_waits_for_keys_with_its_screen_in_the_viewport_and_quits_on_escape_q() {
    timed(async {
        if !installed("vim") {
            eprintln!("note: vim is not installed; less_waits_for_keys covers full-screen");
            return;
        }
        let mut d = start_daemon().await;
        std::fs::write(
            d.dir().join("notes.txt"),
            "first line from the file\nsecond\n",
        )
        .unwrap();
        let dir = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_type(c, "bash", &dir, &[]).await;
        // -u NONE: the user's vimrc does not change what the screen shows.
        let fr = expect_wait(
            c,
            sharp(&sid, "vim -u NONE -N notes.txt"),
            WaitReason::StdinRead,
        )
        .await;
        let shown = lines(&fr.viewport);
        assert_eq!(
            shown.first().copied(),
            Some("first line from the file"),
            "the viewport is vim's screen: {:?}",
            fr.viewport
        );
        assert!(shown.contains(&"second"), "{:?}", fr.viewport);
        assert!(
            shown.iter().any(|l| l.contains("notes.txt")),
            "vim's status line: {:?}",
            fr.viewport
        );
        // Into insert mode, so Escape has something to do.
        expect_wait(
            c,
            SendRequest {
                submit: Some(false),
                ..sharp(&sid, "iTYPED")
            },
            WaitReason::StdinRead,
        )
        .await;
        expect_wait(c, keys(&sid, &["Escape"]), WaitReason::StdinRead).await;
        let fr = expect_wait(
            c,
            SendRequest {
                submit: Some(false),
                keys: vec!["Enter".into()],
                ..sharp(&sid, ":q!")
            },
            WaitReason::Prompt,
        )
        .await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(
            run_ok(c, A, &sid, "cat notes.txt").await,
            "first line from the file\nsecond",
            ":q! discarded the edit"
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn less_waits_for_keys_with_its_screen_in_the_viewport() {
    timed(async {
        let mut d = start_daemon().await;
        std::fs::write(d.dir().join("page.txt"), "paged text\n").unwrap();
        let dir = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_type(c, "bash", &dir, &[]).await;
        let fr = expect_wait(c, sharp(&sid, "less page.txt"), WaitReason::StdinRead).await;
        // less draws from where the cursor was (the alternate screen shares it, as in xterm):
        // the rows above its text are blank.
        assert_eq!(
            lines(&fr.viewport).into_iter().find(|l| !l.is_empty()),
            Some("paged text"),
            "{:?}",
            fr.viewport
        );
        let fr = expect_wait(
            c,
            SendRequest {
                submit: Some(false),
                ..sharp(&sid, "q")
            },
            WaitReason::Prompt,
        )
        .await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 3. inferred_idle and the empty send

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_command_goes_idle_and_an_empty_send_waits_for_its_end() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let started = Instant::now();
        let (fr, _) = send_with(
            c,
            SendRequest {
                idle_ms: 300,
                ..send_request(A, &sid, "sleep 30")
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::InferredIdle, "{fr:?}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "idle well before sleep ends: {:?}",
            started.elapsed()
        );
        assert_eq!(fr.exit_code, None, "{fr:?}");

        // The empty send waits: with a short timeout it times out rather than claim a prompt.
        let fr = expect_wait(c, pure_wait(&sid, 1000), WaitReason::Timeout).await;
        assert_eq!(fr.exit_code, None, "{fr:?}");
        let info = session_info(c, A, &sid).await.unwrap();
        assert_eq!(info.foreground, "sleep", "sleep still runs: {info:?}");

        let sent = signal(c, &sid, "SIGINT").await;
        assert!(sent.delivered, "{sent:?}");
        let fr = expect_wait(c, pure_wait(&sid, SEND_TIMEOUT_MS), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(130), "sleep died of SIGINT: {fr:?}");
        assert_eq!(run_ok(c, A, &sid, "echo next").await, "next");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_send_returns_the_end_of_a_command_that_went_idle() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let (fr, _) = send_with(
            c,
            SendRequest {
                idle_ms: 300,
                ..send_request(A, &sid, "sleep 4; echo finished; (exit 7)")
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::InferredIdle, "{fr:?}");
        let fr = expect_wait(c, pure_wait(&sid, SEND_TIMEOUT_MS), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(7), "{fr:?}");
        assert_eq!(fr.viewport, "finished", "the output since the last send");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 4. timeout

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_output_returns_timeout_at_the_deadline() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let started = Instant::now();
        let (fr, rendered) = send_with(
            c,
            SendRequest {
                timeout_ms: 1000,
                ..send_request(A, &sid, "while :; do echo tick; done")
            },
        )
        .await;
        let wall = started.elapsed();
        assert_eq!(
            fr.wait_reason(),
            WaitReason::Timeout,
            "the deadline comes first: {fr:?}"
        );
        assert!(rendered.contains("[wait: timeout]"), "{rendered:?}");
        assert!(
            (900..5000).contains(&fr.elapsed_ms),
            "timeout_ms=1000 ends the wait at about 1 s: {fr:?}"
        );
        assert!(wall < Duration::from_secs(10), "{wall:?}");
        assert!(lines(&fr.viewport).contains(&"tick"), "{:?}", fr.viewport);
        assert_eq!(fr.exit_code, None);

        // Ctrl-C (the key) stops the loop; the shell reports it.
        let fr = expect_wait(c, keys(&sid, &["C-c"]), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(130), "{fr:?}");
        assert_eq!(run_ok(c, A, &sid, "echo stopped").await, "stopped");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 5. bash, zsh and fish: prompt, exit code, cwd, stdin, multi-line units

/// `sh -c 'exit 42'` works the same in all three shells.
async fn prompt_exit_code_and_cwd(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let start_dir = canonical(d.dir());
    let c = &mut d.client;
    let opened = open_with(
        c,
        OpenRequest {
            agent_id: A.into(),
            r#type: shell.into(),
            cwd: start_dir.clone(),
            ..Default::default()
        },
    )
    .await;
    let info = opened.session.expect("session");
    let sid = info.session_id.clone();
    assert_eq!(info.r#type, shell);
    assert_eq!(info.cwd, start_dir, "{shell}: opened in cwd");

    let (fr, rendered) = send_with(c, sharp(&sid, "echo hi")).await;
    assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{shell}: {fr:?}");
    assert_eq!(fr.exit_code, Some(0), "{shell}: {fr:?}");
    assert_eq!(fr.viewport, "hi", "{shell}: only the command's output");
    assert_eq!(
        rendered, "hi\n[wait: prompt]\n[exit code: 0]\n[session: running]",
        "{shell}"
    );
    assert_eq!(fr.cwd, start_dir, "{shell}: {fr:?}");

    for (cmd, code) in [("false", 1), ("sh -c 'exit 42'", 42), ("true", 0)] {
        let fr = expect_wait(c, sharp(&sid, cmd), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(code), "{shell}: {cmd}: {fr:?}");
        assert_eq!(fr.viewport, "", "{shell}: {cmd} prints nothing: {fr:?}");
    }

    let tmp = canonical("/tmp");
    let fr = expect_wait(c, sharp(&sid, "cd /tmp"), WaitReason::Prompt).await;
    assert_eq!(fr.exit_code, Some(0), "{shell}: {fr:?}");
    assert_eq!(fr.cwd, tmp, "{shell}: the result's cwd follows cd");
    let info = session_info(c, A, &sid).await.expect("listed");
    assert_eq!(info.cwd, tmp, "{shell}: SessionInfo.cwd is read live");
    assert_eq!(run_ok(c, A, &sid, "pwd").await, tmp, "{shell}");

    // Waiting on stdin works the same in every shell.
    expect_wait(c, sharp(&sid, "read x"), WaitReason::StdinRead).await;
    let fr = expect_wait(c, sharp(&sid, "abc"), WaitReason::Prompt).await;
    assert_eq!(fr.exit_code, Some(0), "{shell}: {fr:?}");
    assert_eq!(
        run_ok(c, A, &sid, "echo got $x").await,
        "got abc",
        "{shell}"
    );

    // So does a continuation line (an unclosed quote).
    expect_wait(c, sharp(&sid, "echo \"open"), WaitReason::StdinRead).await;
    let fr = expect_wait(c, sharp(&sid, "closed\""), WaitReason::Prompt).await;
    assert_eq!(fr.exit_code, Some(0), "{shell}: {fr:?}");
    assert_eq!(
        lines(&fr.viewport),
        vec!["open", "closed"],
        "{shell}: {fr:?}"
    );

    // A program interrupted by SIGINT reports 130 in every shell.
    let (fr, _) = send_with(
        c,
        SendRequest {
            idle_ms: 300,
            ..send_request(A, &sid, "sleep 30")
        },
    )
    .await;
    assert_eq!(
        fr.wait_reason(),
        WaitReason::InferredIdle,
        "{shell}: {fr:?}"
    );
    signal(c, &sid, "INT").await;
    let fr = expect_wait(c, pure_wait(&sid, SEND_TIMEOUT_MS), WaitReason::Prompt).await;
    assert_eq!(fr.exit_code, Some(130), "{shell}: {fr:?}");
    d.stop().await;
}

crate::shell_tests!(prompt_exit_code_and_cwd:
    bash_reports_prompt_exit_code_and_cwd => "bash",
    zsh_reports_prompt_exit_code_and_cwd => "zsh",
    fish_reports_prompt_exit_code_and_cwd => "fish",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_command_after_a_slow_bashrc_returns_its_own_result() {
    timed(async {
        let mut d = start_daemon().await;
        // Longer than the startup idle allowance: Open may return before the first prompt, and
        // the first command is then typed ahead of it. It must still report its own end.
        let home = home_with(&[(".bashrc", "sleep 3\n")]);
        let c = &mut d.client;
        let home_str = home.path().to_str().unwrap();
        let sid = open_type(c, "bash", home.path(), &[("HOME", home_str)]).await;
        let fr = expect_wait(c, sharp(&sid, "echo first"), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(fr.viewport, "first", "{fr:?}");
        assert_eq!(run_ok(c, A, &sid, "echo second").await, "second");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_that_waited_for_a_slow_prompt_is_judged_after_it() {
    timed(async {
        let mut d = start_daemon().await;
        // A prompt hook that takes a while: a send returns at its command's end, so the next
        // send's input waits for the prompt, whose marks arrive after that send began. They
        // belong to the previous command: a reader found after the input is the input's.
        let home = home_with(&[(".bashrc", "PROMPT_COMMAND='sleep 0.1'\n")]);
        let c = &mut d.client;
        let home_str = home.path().to_str().unwrap();
        let sid = open_type(c, "bash", home.path(), &[("HOME", home_str)]).await;
        for round in 0..3 {
            expect_wait(c, sharp(&sid, "read x"), WaitReason::StdinRead).await;
            let fr = expect_wait(c, sharp(&sid, &format!("abc{round}")), WaitReason::Prompt).await;
            assert_eq!(fr.exit_code, Some(0), "{fr:?}");
            expect_wait(c, sharp(&sid, "echo \"open"), WaitReason::StdinRead).await;
            let fr = expect_wait(c, sharp(&sid, "closed\""), WaitReason::Prompt).await;
            assert_eq!(lines(&fr.viewport), vec!["open", "closed"], "{fr:?}");
        }
        assert_eq!(run_ok(c, A, &sid, "echo $x").await, "abc2");
        d.stop().await;
    })
    .await;
}

/// Multi-line input runs as one unit: one send, one prompt, the exit code of the last command.
async fn multi_line_runs_as_one_unit(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_type(c, shell, Path::new("/tmp"), &[]).await;
    let for_loop = if shell == "fish" {
        "for i in 1 2 3\n    echo \"n$i\"\nend"
    } else {
        "for i in 1 2 3\ndo\n  echo \"n$i\"\ndone"
    };
    let fr = expect_wait(c, sharp(&sid, for_loop), WaitReason::Prompt).await;
    assert_eq!(fr.exit_code, Some(0), "{shell}: {fr:?}");
    assert_eq!(
        fr.viewport, "n1\nn2\nn3",
        "{shell}: three lines of output, no echoed snippet, no prompt"
    );
    // Separate commands on separate lines: had they run one by one, the send would have
    // returned at the first command's end with its exit code 0.
    let fr = expect_wait(
        c,
        sharp(&sid, "echo one\necho two\nfalse"),
        WaitReason::Prompt,
    )
    .await;
    assert_eq!(
        fr.exit_code,
        Some(1),
        "{shell}: the unit's status is its last command's: {fr:?}"
    );
    assert_eq!(fr.viewport, "one\ntwo", "{shell}: {fr:?}");
    // Nothing of the snippet is left over for the next command.
    assert_eq!(run_ok(c, A, &sid, "echo after").await, "after", "{shell}");
    d.stop().await;
}

crate::shell_tests!(multi_line_runs_as_one_unit:
    bash_runs_a_multi_line_snippet_as_one_unit => "bash",
    zsh_runs_a_multi_line_snippet_as_one_unit => "zsh",
    fish_runs_a_multi_line_snippet_as_one_unit => "fish",
);

/// The last non-empty line of the visible screen: where the prompt is drawn.
async fn prompt_line(c: &mut Client, sid: &str) -> String {
    let screen = read_screen(c, A, sid).await;
    lines(&screen.text)
        .into_iter()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_string()
}

/// Waits until the screen's last line, the prompt, satisfies `drawn`. A send settles on the
/// shell's marks, and bash, zsh and fish draw their prompt just after them: the prompt may land
/// a moment after the send returned.
async fn wait_for_prompt(d: &Daemon, sid: &str, what: &str, drawn: impl Fn(&str) -> bool) {
    let watching = d.client();
    let drawn = &drawn;
    wait_until(Duration::from_secs(10), what, || {
        let (mut c, sid) = (watching.clone(), sid.to_owned());
        async move { drawn(&prompt_line(&mut c, &sid).await) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bashrc_that_rewrites_prompt_command_and_ps1_keeps_its_prompt_and_the_marks() {
    timed(async {
        let mut d = start_daemon().await;
        // A prompt framework in miniature: it rebuilds PS1 before every prompt from the last
        // status and a counter, and chains its own PROMPT_COMMAND.
        let home = home_with(&[(
            ".bashrc",
            r#"
RC_LOADED=yes
__rc_prompt() { local s=$?; __rc_n=$((__rc_n + 1)); PS1="rc[$__rc_n:$s]\$ "; }
PROMPT_COMMAND="__rc_prompt${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
"#,
        )]);
        let c = &mut d.client;
        let home_str = home.path().to_str().unwrap();
        let sid = open_type(c, "bash", home.path(), &[("HOME", home_str)]).await;
        assert_eq!(run_ok(c, A, &sid, "echo $RC_LOADED").await, "yes");
        wait_for_prompt(&d, &sid, "the user's prompt is drawn", |p| {
            p.starts_with("rc[") && p.ends_with(":0]$")
        })
        .await;
        let c = &mut d.client;
        for (cmd, code, out) in [
            ("echo one", 0, "one"),
            ("false", 1, ""),
            ("sh -c 'exit 5'", 5, ""),
            ("echo two", 0, "two"),
        ] {
            let fr = expect_wait(c, sharp(&sid, cmd), WaitReason::Prompt).await;
            assert_eq!(fr.exit_code, Some(code), "{cmd}: {fr:?}");
            assert_eq!(fr.viewport, out, "{cmd}: no prompt text in the viewport");
        }
        // The user's prompt saw the real status of the previous command.
        let fr = expect_wait(c, sharp(&sid, "false"), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(1));
        wait_for_prompt(&d, &sid, "the user's prompt still shows and sees $?", |p| {
            p.starts_with("rc[") && p.ends_with(":1]$")
        })
        .await;
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bashrc_that_replaces_prompt_command_at_every_prompt_keeps_the_marks() {
    timed(async {
        let mut d = start_daemon().await;
        // Some frameworks (lazy initialisers, `PROMPT_COMMAND=...` in a hook) assign
        // PROMPT_COMMAND again from inside a prompt hook.
        let home = home_with(&[(
            ".bashrc",
            r#"
__rc_hook() { PS1='lazy> '; PROMPT_COMMAND=__rc_hook; }
PROMPT_COMMAND=__rc_hook
"#,
        )]);
        let c = &mut d.client;
        let home_str = home.path().to_str().unwrap();
        let sid = open_type(c, "bash", home.path(), &[("HOME", home_str)]).await;
        for (cmd, code) in [
            ("echo one", 0),
            ("false", 1),
            ("echo two", 0),
            ("(exit 3)", 3),
        ] {
            let fr = expect_wait(c, sharp(&sid, cmd), WaitReason::Prompt).await;
            assert_eq!(fr.exit_code, Some(code), "{cmd}: {fr:?}");
        }
        // The send returns at the end mark; the prompt is drawn just after it.
        let reader = d.client();
        wait_until(Duration::from_secs(10), "the user's prompt shows", || {
            let (mut c, sid) = (reader.clone(), sid.clone());
            async move { prompt_line(&mut c, &sid).await == "lazy>" }
        })
        .await;
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zshrc_with_its_own_prompt_and_precmd_keeps_its_prompt_and_the_marks() {
    timed(async {
        if !needs("zsh") {
            return;
        }
        let mut d = start_daemon().await;
        let home = home_with(&[
            (".zshenv", "export FROM_ZSHENV=env-ok\n"),
            (
                ".zshrc",
                r#"
ZRC_LOADED=rc-ok
precmd() { local s=$?; PS1="zrc[$s]%# "; }
"#,
            ),
        ]);
        let c = &mut d.client;
        let home_str = home.path().to_str().unwrap();
        let sid = open_type(c, "zsh", home.path(), &[("HOME", home_str)]).await;
        assert_eq!(
            run_ok(c, A, &sid, "echo $FROM_ZSHENV $ZRC_LOADED").await,
            "env-ok rc-ok",
            "the user's .zshenv and .zshrc are loaded"
        );
        for (cmd, code, out) in [
            ("echo one", 0, "one"),
            ("false", 1, ""),
            ("sh -c 'exit 5'", 5, ""),
        ] {
            let fr = expect_wait(c, sharp(&sid, cmd), WaitReason::Prompt).await;
            assert_eq!(fr.exit_code, Some(code), "{cmd}: {fr:?}");
            assert_eq!(fr.viewport, out, "{cmd}: no prompt text in the viewport");
        }
        wait_for_prompt(&d, &sid, "the user's prompt is drawn and sees $?", |p| {
            p.starts_with("zrc[5]")
        })
        .await;
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fish_config_with_its_own_prompt_keeps_its_prompt_and_the_marks() {
    timed(async {
        if !needs("fish") {
            return;
        }
        let mut d = start_daemon().await;
        let home = home_with(&[(
            ".config/fish/config.fish",
            r#"
set -g FISH_RC_LOADED rc-ok
set -g fish_greeting
function fish_prompt; set -l s $status; echo -n "frc[$s]> "; end
"#,
        )]);
        let c = &mut d.client;
        let home_str = home.path().to_str().unwrap();
        let sid = open_type(c, "fish", home.path(), &[("HOME", home_str)]).await;
        assert_eq!(run_ok(c, A, &sid, "echo $FISH_RC_LOADED").await, "rc-ok");
        for (cmd, code, out) in [
            ("echo one", 0, "one"),
            ("false", 1, ""),
            ("sh -c 'exit 5'", 5, ""),
        ] {
            let fr = expect_wait(c, sharp(&sid, cmd), WaitReason::Prompt).await;
            assert_eq!(fr.exit_code, Some(code), "{cmd}: {fr:?}");
            assert_eq!(fr.viewport, out, "{cmd}: no prompt text in the viewport");
        }
        wait_for_prompt(
            &d,
            &sid,
            "the user's prompt is drawn and sees $status",
            |p| p.starts_with("frc[5]>"),
        )
        .await;
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fish_runs_the_next_command_after_a_line_it_rejected() {
    timed(async {
        if !needs("fish") {
            return;
        }
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "fish", Path::new("/tmp"), &[]).await;
        // fish refuses this line ("command substitutions not allowed") and keeps it in its
        // editor; the wait must still end.
        let (fr, _) = send_with(
            c,
            SendRequest {
                idle_ms: 1000,
                ..send_request(A, &sid, "(exit 42)")
            },
        )
        .await;
        assert_ne!(fr.wait_reason(), WaitReason::Timeout, "{fr:?}");
        let fr = expect_wait(c, sharp(&sid, "echo good"), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(
            fr.viewport, "good",
            "the kept line was not prepended to the next command"
        );
        // Twice in a row, and a multi-line unit after a rejected line.
        send_with(
            c,
            SendRequest {
                idle_ms: 1000,
                ..send_request(A, &sid, "(exit 43)")
            },
        )
        .await;
        let fr = expect_wait(c, sharp(&sid, "echo a\necho b"), WaitReason::Prompt).await;
        assert_eq!(fr.viewport, "a\nb", "{fr:?}");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 6. Input: long lines, a mebibyte, back-pressure, keys, submit

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10000_character_line_to_cat_arrives_intact_or_is_refused() {
    timed(async {
        let mut d = start_daemon().await;
        let dir = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_type(c, "bash", &dir, &[]).await;
        expect_wait(c, sharp(&sid, "cat > f"), WaitReason::StdinRead).await;
        let long = "x".repeat(10_000);
        let want = match c.send(sharp(&sid, &long)).await {
            Ok(resp) => {
                let (fr, _) = foreground(resp.into_inner());
                assert_eq!(fr.wait_reason(), WaitReason::StdinRead, "{fr:?}");
                10_001
            }
            Err(s) => {
                assert_eq!(s.code(), Code::InvalidArgument, "{s:?}");
                assert!(
                    s.message().contains("text") && s.message().contains("line"),
                    "the refusal names the field and says why: {:?}",
                    s.message()
                );
                // Refused means nothing was written: cat still takes a short line whole.
                expect_wait(c, sharp(&sid, "short"), WaitReason::StdinRead).await;
                6
            }
        };
        let fr = expect_wait(c, keys(&sid, &["C-d"]), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "C-d ends cat: {fr:?}");
        assert_eq!(
            std::fs::metadata(dir.join("f")).unwrap().len(),
            want,
            "no input silently lost or cut"
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_line_to_the_shell_line_editor_arrives_intact() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        // readline reads in raw mode: no kernel line limit applies, and the line is delivered.
        let cmd = format!("x={}", "y".repeat(10_000));
        let fr = expect_wait(c, sharp(&sid, &cmd), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(run_ok(c, A, &sid, "echo ${#x}").await, "10000");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mebibyte_of_lines_to_cat_arrives_intact() {
    timed(async {
        let mut d = start_daemon().await;
        let dir = d.dir().to_path_buf();
        // 16384 numbered lines of 64 bytes: exactly 1 MiB, the largest text a send takes.
        let mut text = String::with_capacity(1 << 20);
        for i in 0..16_384 {
            let line = format!("line {i:06} ");
            text.push_str(&line);
            text.push_str(&"abcdefghijklmnopqrstuvwxyz0123456789".repeat(2)[..63 - line.len()]);
            text.push('\n');
        }
        assert_eq!(text.len(), 1 << 20);
        std::fs::write(dir.join("want"), &text).unwrap();

        let c = &mut d.client;
        let sid = open_type(c, "bash", &dir, &[]).await;
        expect_wait(c, sharp(&sid, "cat > f"), WaitReason::StdinRead).await;
        let (fr, rendered) = send_with(
            c,
            SendRequest {
                submit: Some(false),
                timeout_ms: 90_000,
                max_result_bytes: 4096,
                ..sharp(&sid, &text)
            },
        )
        .await;
        assert_eq!(
            fr.wait_reason(),
            WaitReason::StdinRead,
            "all written, cat waits for more: {fr:?}\n{rendered}"
        );
        assert!(!rendered.contains("input incomplete"), "{rendered}");
        let fr = expect_wait(c, keys(&sid, &["C-d"]), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(run_ok(c, A, &sid, "wc -c < f").await, "1048576");
        assert_eq!(run_ok(c, A, &sid, "cmp f want && echo same").await, "same");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_nobody_reads_is_bounded_by_the_timeout() {
    timed(async {
        // An integrated shell refuses text for a command that nothing reads (typeahead, see
        // `tests/right_answers.rs`); a shell without integration cannot tell, and gets it.
        let mut config = ptyd::config::Config::default();
        config.types.push(ptyd::config::TerminalType {
            name: "plain-bash".into(),
            argv: vec!["bash".into(), "--norc".into(), "-i".into()],
            integration: ptyd::marks::Integration::None,
            history_expansion: false,
            description: "bash without shell integration".into(),
            env: Vec::new(),
            sandbox: None,
        });
        let mut d = start_daemon_with(config).await;
        let c = &mut d.client;
        let sid = open_type(c, "plain-bash", Path::new("/tmp"), &[]).await;
        let (fr, _) = send_with(
            c,
            SendRequest {
                idle_ms: 300,
                ..send_request(A, &sid, "sleep 60")
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::InferredIdle, "{fr:?}");
        // sleep never reads: the terminal takes a few KiB, then the write must stop at the
        // deadline instead of hanging the send.
        let text: String = (0..2000)
            .map(|i| format!("# typed ahead {i:05}\n"))
            .collect();
        let started = Instant::now();
        let (fr, rendered) = send_with(
            c,
            SendRequest {
                submit: Some(false),
                timeout_ms: 1500,
                ..send_request(A, &sid, &text)
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::Timeout, "{fr:?}\n{rendered}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the deadline bounds the write: {:?}",
            started.elapsed()
        );
        assert!(
            rendered.contains("not written") || rendered.contains("incomplete"),
            "the result says the input was not all written: {rendered}"
        );
        // The session is not wedged: it answers, and Close ends it at once.
        let history = read_page(c, A, &sid, 0, 10000).await;
        assert!(
            history.text.contains("# typed ahead 00000"),
            "what was written stays written (the terminal echoed it): {:?}",
            history.text
        );
        let closed =
            tokio::time::timeout(Duration::from_secs(30), async { close(c, A, &sid).await })
                .await
                .expect("Close returns while the terminal's input is full");
        assert_eq!(closed.outcome(), ptyd::pb::CloseOutcome::Closed);
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_key_interrupts_the_foreground_program() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let (fr, _) = send_with(
            c,
            SendRequest {
                idle_ms: 300,
                ..send_request(A, &sid, "sleep 30")
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::InferredIdle, "{fr:?}");
        let fr = expect_wait(c, keys(&sid, &["C-c"]), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(130), "{fr:?}");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_edit_the_line_like_a_terminal() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        // Prime the history for `Up`.
        run_ok(c, A, &sid, "echo from-history").await;
        let cases: &[(&str, &[&str], &str)] = &[
            // (text typed, keys after it, what the command printed)
            ("echo zzz", &["C-u", "Up", "Enter"], "from-history"),
            ("echo abXc", &["Left", "Backspace", "Enter"], "abc"),
            ("echo abXc", &["Left", "Left", "Delete", "Enter"], "abc"),
            (
                "echo Xbc",
                &[
                    "Home",
                    "Right",
                    "Right",
                    "Right",
                    "Right",
                    "Right",
                    "Right",
                    "Backspace",
                    "Enter",
                ],
                "bc",
            ),
            (
                "echo Xbc",
                &["Home", "End", "Left", "Left", "Backspace", "Enter"],
                "bc",
            ),
            ("echo tail extra", &["C-w", "Enter"], "tail"),
        ];
        for (text, names, want) in cases {
            let fr = expect_wait(
                c,
                SendRequest {
                    submit: Some(false),
                    keys: names.iter().map(|k| k.to_string()).collect(),
                    ..sharp(&sid, text)
                },
                WaitReason::Prompt,
            )
            .await;
            assert_eq!(fr.viewport, *want, "{text:?} then {names:?}: {fr:?}");
            assert_eq!(fr.exit_code, Some(0), "{text:?} then {names:?}: {fr:?}");
        }
        // Tab completes: a unique command prefix.
        let fr = expect_wait(
            c,
            SendRequest {
                submit: Some(false),
                keys: vec!["Tab".into(), "Enter".into()],
                ..sharp(&sid, "echo /proc/self/cmdli")
            },
            WaitReason::Prompt,
        )
        .await;
        assert_eq!(fr.viewport, "/proc/self/cmdline", "{fr:?}");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_key_is_refused_naming_keys_and_nothing_is_written() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        for bad in ["Bogus", "C-1", "F13", ""] {
            let r = c
                .send(SendRequest {
                    keys: vec!["Enter".into(), bad.into()],
                    ..sharp(&sid, "echo must-not-run")
                })
                .await;
            expect_invalid(r, "keys", &format!("key {bad:?}"));
        }
        assert_eq!(run_ok(c, A, &sid, "echo fine").await, "fine");
        let history = read_page(c, A, &sid, 0, 10000).await;
        assert!(
            !history.text.contains("must-not-run"),
            "a refused send writes nothing: {:?}",
            history.text
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_false_leaves_the_text_on_the_line_and_enter_runs_it() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash", Path::new("/tmp"), &[]).await;
        let (fr, rendered) = send_with(
            c,
            SendRequest {
                submit: Some(false),
                idle_ms: 1000,
                ..send_request(A, &sid, "echo pending")
            },
        )
        .await;
        assert_ne!(fr.wait_reason(), WaitReason::Timeout, "{fr:?}");
        assert_ne!(
            fr.exit_code,
            Some(0),
            "nothing ran, so no exit code: {fr:?}\n{rendered}"
        );
        let shown = prompt_line(c, &sid).await;
        assert!(
            shown.ends_with("echo pending"),
            "the text waits on the command line: {shown:?}"
        );
        let fr = expect_wait(c, keys(&sid, &["Enter"]), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(fr.viewport, "pending", "{fr:?}");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// A caller that hangs up

/// Starts a send of `command` and hangs up once the session is busy with it (`in_flight` says
/// when), then waits until the hung-up send released the session.
async fn send_and_hang_up(
    d: &Daemon,
    sid: &str,
    command: &str,
    in_flight: fn(&ptyd::pb::SessionInfo) -> bool,
) {
    let mut caller = d.client();
    let req = SendRequest {
        timeout_ms: 120_000,
        idle_ms: NO_IDLE,
        ..send_request(A, sid, command)
    };
    let pending = tokio::spawn(async move { caller.send(req).await });
    let busy_with = |want: fn(&ptyd::pb::SessionInfo) -> bool| {
        move || {
            let mut c = d.client();
            let sid = sid.to_owned();
            async move {
                session_info(&mut c, A, &sid)
                    .await
                    .is_some_and(|i| want(&i))
            }
        }
    };
    wait_until(
        Duration::from_secs(20),
        "the send is in flight",
        busy_with(in_flight),
    )
    .await;
    pending.abort();
    let _ = pending.await;
    wait_until(
        Duration::from_secs(10),
        "the hung-up send released the session",
        busy_with(|i| !i.busy),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_caller_hangs_up_releases_the_session() {
    timed(async {
        let mut d = start_daemon().await;
        let sid = open_type(&mut d.client, "bash", Path::new("/tmp"), &[]).await;
        send_and_hang_up(&d, &sid, "sleep 60", |i| i.busy && i.foreground == "sleep").await;
        let c = &mut d.client;
        // What was written stays written: sleep still runs, and the next send may wait for it.
        let fr = expect_wait(c, pure_wait(&sid, 500), WaitReason::Timeout).await;
        assert_eq!(fr.exit_code, None);
        signal(c, &sid, "SIGINT").await;
        let fr = expect_wait(c, pure_wait(&sid, SEND_TIMEOUT_MS), WaitReason::Prompt).await;
        assert_eq!(fr.exit_code, Some(130), "{fr:?}");
        d.stop().await;
    })
    .await;
}

/// An agent that gives up on `sleep 30` at once and interrupts it means the `sleep`: the signal
/// must not reach bash while it is still reading the line (readline would drop what it had read,
/// and `leep` would run) or before its child has exec'd (the interrupt would be lost). The
/// window opens when the machine is busy, so the test repeats on fresh sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_right_after_a_cancelled_send_interrupts_that_command() {
    timed(async {
        let mut d = start_daemon().await;
        for round in 0..8 {
            let sid = open_type(&mut d.client, "bash", Path::new("/tmp"), &[]).await;
            send_and_hang_up(&d, &sid, "sleep 30", |i| i.busy).await;
            let c = &mut d.client;
            signal(c, &sid, "SIGINT").await;
            let fr = expect_wait(c, pure_wait(&sid, 10_000), WaitReason::Prompt).await;
            assert_eq!(fr.exit_code, Some(130), "round {round}: {fr:?}");
            assert!(
                !fr.viewport.contains("command not found"),
                "round {round}: the command ran whole: {fr:?}"
            );
        }
        d.stop().await;
    })
    .await;
}

/// A send cut by its caller's deadline leaves its command's output to the next send: the empty
/// send returns `out1`, not the prompt and the echoed command above it. (The command waits on a
/// FIFO the test opens, so it still runs when the deadline passes, and ends when the test says.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_after_a_send_cut_by_its_deadline_returns_the_commands_output() {
    timed(async {
        let mut d = start_daemon().await;
        let sid = open_type(&mut d.client, "bash", Path::new("/tmp"), &[]).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("go");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let mut c = d.client();
        let command = format!("cat {} >/dev/null; echo out1", fifo.display());
        let mut req = tonic::Request::new(SendRequest {
            timeout_ms: 120_000,
            ..sharp(&sid, &command)
        });
        req.set_timeout(Duration::from_secs(2));
        let cut = c.send(req).await.expect_err("the deadline cuts the send");
        // The server's answer, or the client's own timer when it fires first.
        assert!(
            matches!(cut.code(), Code::DeadlineExceeded | Code::Cancelled),
            "{cut:?}"
        );
        wait_until(
            Duration::from_secs(10),
            "the cut send released the session",
            || {
                let mut c = d.client();
                let sid = sid.clone();
                async move { session_info(&mut c, A, &sid).await.is_some_and(|i| !i.busy) }
            },
        )
        .await;
        let open_fifo = tokio::task::spawn_blocking(move || std::fs::write(&fifo, b"go\n"));
        let fr = expect_wait(&mut c, pure_wait(&sid, SEND_TIMEOUT_MS), WaitReason::Prompt).await;
        open_fifo.await.unwrap().expect("write the FIFO");
        assert_eq!(fr.exit_code, Some(0), "{fr:?}");
        assert_eq!(fr.viewport, "out1", "{fr:?}");
        d.stop().await;
    })
    .await;
}

/// CPU-bound loops that keep every core busy while they live, so that a shell is scheduled late
/// (the windows the signal tests look for open only on a busy machine).
struct BusyLoops(Vec<std::process::Child>);

impl BusyLoops {
    fn start() -> BusyLoops {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        BusyLoops(
            (0..3 * cores)
                .map(|_| {
                    std::process::Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("start a busy loop")
                })
                .collect(),
        )
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A send right after `Signal` waits for what the signal ends. At bash's idle prompt, bash
/// reads on until it has handled the interrupt, then throws away what it read: written at once,
/// `echo rN` lost its first bytes (`cho: command not found`) or all of them. To a running
/// `sleep 100`, the text came before the command's end mark and was refused as typeahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_right_after_a_signal_waits_for_what_the_signal_ends() {
    timed(async {
        let mut d = start_daemon().await;
        let sid = open_type(&mut d.client, "bash", Path::new("/tmp"), &[]).await;
        let _load = BusyLoops::start();
        for round in 0..20 {
            let c = &mut d.client;
            signal(c, &sid, "SIGINT").await;
            let fr = expect_wait(
                c,
                sharp(&sid, &format!("echo r{round}")),
                WaitReason::Prompt,
            )
            .await;
            assert_eq!(fr.exit_code, Some(0), "round {round}: {fr:?}");
            assert_eq!(fr.viewport, format!("r{round}"), "round {round}: {fr:?}");
        }
        for round in 0..10 {
            send_and_hang_up(&d, &sid, "sleep 100", |i| i.busy && i.foreground == "sleep").await;
            let c = &mut d.client;
            signal(c, &sid, "SIGINT").await;
            let (fr, rendered) = c
                .send(sharp(&sid, "echo after"))
                .await
                .map(|r| foreground(r.into_inner()))
                .unwrap_or_else(|s| panic!("round {round}: refused: {s:?}"));
            assert_eq!(fr.exit_code, Some(0), "round {round}: {rendered}");
            assert_eq!(fr.viewport, "after", "round {round}: {rendered}");
        }
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 8. An idle daemon uses no CPU

/// utime + stime of `pid` in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    ptyd::process::procfs::cpu_ticks(pid as i32).expect("read /proc stat")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_idle_sessions_cost_the_daemon_no_cpu() {
    timed(async {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-idle-")
            .tempdir()
            .unwrap();
        let socket = dir.path().join("ptyd.sock");
        let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_ptyd"))
            .arg("serve")
            .arg("--socket")
            .arg(&socket)
            .env_remove("PTYD_SOCKET")
            .env("HOME", clean_home())
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn ptyd serve");
        let pid = child.id().expect("serve pid");
        wait_until(Duration::from_secs(30), "ptyd serve answers", || {
            let socket = socket.clone();
            async move {
                match ptyd::client::connect(&socket).await {
                    Ok(mut c) => c
                        .list(ptyd::pb::ListRequest { agent_id: A.into() })
                        .await
                        .is_ok(),
                    Err(_) => false,
                }
            }
        })
        .await;
        let c = ptyd::client::connect(&socket).await.expect("connect");

        // 50 sessions over two agents (the per-agent limit is 32).
        let mut opens = Vec::new();
        for i in 0..50 {
            let mut c = c.clone();
            let agent = if i % 2 == 0 { "a" } else { "b" };
            opens.push(tokio::spawn(async move {
                let sid = open(&mut c, agent).await;
                // Used once (how the first send settles is other tests' business); every fifth
                // session keeps a silent program in the foreground, which no send waits for.
                let cmd = if i % 5 == 0 {
                    "sleep 600"
                } else {
                    "echo ready"
                };
                send_with(
                    &mut c,
                    SendRequest {
                        idle_ms: 300,
                        ..send_request(agent, &sid, cmd)
                    },
                )
                .await;
            }));
        }
        for o in opens {
            o.await.expect("open and use a session");
        }
        // Idle means the shells are quiet too: on a loaded machine 50 shells may still be
        // drawing prompts. Wait until none has written anything for 2 s.
        wait_until(
            Duration::from_secs(60),
            "every session has been silent for 2 s",
            || {
                let mut c = c.clone();
                async move {
                    let mut newest = 0;
                    for agent in ["a", "b"] {
                        for s in list(&mut c, agent).await.sessions {
                            newest = newest.max(s.last_output_unix_ms);
                        }
                    }
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_millis() as i64;
                    now - newest > 2000
                }
            },
        )
        .await;

        // The behaviour under test is idleness over wall time, so this test measures a fixed
        // 10 s window of wall-clock time (the one place a test sleeps on purpose): nothing is
        // being waited for, the daemon's CPU time is sampled before and after.
        let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let before = cpu_ticks(pid);
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(10)).await;
        let wall = started.elapsed().as_secs_f64();
        let used = (cpu_ticks(pid) - before) as f64 / ticks_per_s;
        assert!(
            used < 0.005 * wall,
            "the idle daemon used {used:.3} s of CPU in {wall:.1} s (limit 0.5%)"
        );

        let listed = list(&mut c.clone(), "a").await.sessions.len()
            + list(&mut c.clone(), "b").await.sessions.len();
        assert_eq!(listed, 50);
        drop(c);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM ptyd serve");
        let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
            .await
            .expect("ptyd serve exits after SIGTERM")
            .expect("wait for ptyd serve");
        assert!(status.success(), "{status}");
    })
    .await;
}
