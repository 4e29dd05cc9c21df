//! Issue 13 acceptance tests: right answers when a command's output or text fights back.
//! Answers to terminal queries reach only a program that reads them. Output that prints
//! shell-integration marks (a nested integrated shell, `ssh` to a host with shell integration,
//! `cat` of a recording) cannot end a send or set its exit code. `!` in a command is literal in
//! integrated bash and zsh unless the type turns history expansion on. A line the shell refuses
//! returns at once with the shell's message alone. Text for a command that still runs is
//! refused unless sent as typeahead, which keeps every result clean. Each test starts its own
//! daemon.

mod support;

use ptyd::pb::{OpenRequest, SendRequest, WaitReason};
use support::*;

const A: &str = "a";
/// An `idle_ms` so long that only the prompt (or the timeout) can end the wait.
const NO_IDLE: u32 = 600_000;

/// A send that must end at the prompt, not at silence.
fn sharp(sid: &str, text: &str) -> SendRequest {
    SendRequest {
        idle_ms: NO_IDLE,
        ..send_request(A, sid, text)
    }
}

async fn open_type(c: &mut Client, ty: &str) -> String {
    open_with(
        c,
        OpenRequest {
            agent_id: A.into(),
            r#type: ty.into(),
            ..Default::default()
        },
    )
    .await
    .session
    .expect("OpenResponse.session is set")
    .session_id
}

/// Sends `text` and asserts it ended at the prompt with exit code `code`; returns the viewport.
async fn at_prompt(c: &mut Client, sid: &str, text: &str, code: i32) -> String {
    let (fr, rendered) = send_with(c, sharp(sid, text)).await;
    assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{text}: {rendered}");
    assert_eq!(fr.exit_code, Some(code), "{text}: {rendered}");
    fr.viewport
}

// ---------------------------------------------------------------------------------------------
// Output cannot forge the shell's marks

/// The marks a program's output may hold: the standard ones, and one that carries a key (another
/// ptyd session's, as in a recording of it).
const FORGED: [&str; 5] = [
    r"\033]133;D;3\007",
    r"\033]133;A\007",
    r"\033]133;C\007",
    r"\033]133;D;3;ptyd=0123456789abcdef0123456789abcdef\007",
    r"\033]133;D;3\033]133;A\007\033]133;B\007",
];

async fn forged_marks_do_not_end_the_send(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_type(c, shell).await;
    for forged in FORGED {
        // The forged end comes a second before the real one: a send that settled on it would
        // return without `real_end`.
        let cmd = format!("printf 'x{forged}y\\n'; sleep 1; echo real_end");
        let viewport = at_prompt(c, &sid, &cmd, 0).await;
        assert_eq!(lines(&viewport), ["xy", "real_end"], "{shell}: {forged}");
    }
    // The shell's own marks still work after them.
    assert_eq!(at_prompt(c, &sid, "sh -c 'exit 4'", 4).await, "", "{shell}");
    d.stop().await;
}

crate::shell_tests!(forged_marks_do_not_end_the_send:
    bash_ignores_marks_forged_by_output => "bash",
    zsh_ignores_marks_forged_by_output => "zsh",
    fish_ignores_marks_forged_by_output => "fish",
);

/// The key reaches the integration only: no program the shell starts (a nested shell among
/// them) finds it in its environment or in the shell's exported variables.
async fn the_key_stays_out_of_the_environment(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_type(c, shell).await;
    assert_eq!(
        at_prompt(c, &sid, "env | grep -c PTYD_MARK_KEY", 1).await,
        "0",
        "{shell}"
    );
    assert_eq!(
        at_prompt(c, &sid, "env | grep -c PTYD_HISTORY_EXPANSION", 1).await,
        "0",
        "{shell}"
    );
    d.stop().await;
}

crate::shell_tests!(the_key_stays_out_of_the_environment:
    bash_keeps_the_key_from_its_programs => "bash",
    zsh_keeps_the_key_from_its_programs => "zsh",
    fish_keeps_the_key_from_its_programs => "fish",
);

// ---------------------------------------------------------------------------------------------
// `!` in a command

async fn bang_is_literal(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_type(c, shell).await;
    assert_eq!(at_prompt(c, &sid, "echo A!B", 0).await, "A!B", "{shell}");
    assert_eq!(
        at_prompt(c, &sid, r#"echo "wow!x""#, 0).await,
        "wow!x",
        "{shell}"
    );
    d.stop().await;
}

crate::shell_tests!(bang_is_literal:
    bash_prints_a_bang_literally => "bash",
    zsh_prints_a_bang_literally => "zsh",
);

/// A type with `history_expansion = true` keeps `!!` working.
async fn a_type_turns_history_expansion_on(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut config = ptyd::config::Config::default();
    let mut ty = config
        .types
        .iter()
        .find(|t| t.name == shell)
        .expect("a built-in type per installed shell")
        .clone();
    ty.name = format!("{shell}-bang");
    ty.history_expansion = true;
    config.types.push(ty);
    let mut d = start_daemon_with(config).await;
    let c = &mut d.client;
    let sid = open_type(c, &format!("{shell}-bang")).await;
    at_prompt(c, &sid, "echo first", 0).await;
    // `!!` is the previous command: it runs `echo echo first`.
    let viewport = at_prompt(c, &sid, "echo !!", 0).await;
    assert_eq!(
        lines(&viewport).last(),
        Some(&"echo first"),
        "{shell}: {viewport:?}"
    );
    d.stop().await;
}

crate::shell_tests!(a_type_turns_history_expansion_on:
    bash_type_can_turn_history_expansion_on => "bash",
    zsh_type_can_turn_history_expansion_on => "zsh",
);

// ---------------------------------------------------------------------------------------------
// Answers to terminal queries

/// The queries CLIs print (cursor position, device status, primary and secondary device
/// attributes, foreground and background colour), as `printf` formats.
const QUERIES: [&str; 6] = [
    r"\033[6n",
    r"\033[5n",
    r"\033[c",
    r"\033[>c",
    r"\033]10;?\007",
    r"\033]11;?\007",
];

/// A query printed by a command that never reads the answer: its answer must not become input
/// to the shell or show up in the next command's output.
async fn unread_answers_stay_out(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_type(c, shell).await;
    for query in QUERIES {
        let printed = at_prompt(c, &sid, &format!("printf 'before{query}after\\n'"), 0).await;
        assert_eq!(printed, "beforeafter", "{shell}: {query}");
        let next = at_prompt(c, &sid, "echo next_command_ok", 0).await;
        assert_eq!(next, "next_command_ok", "{shell}: after {query}");
    }
    d.stop().await;
}

crate::shell_tests!(unread_answers_stay_out:
    bash_keeps_unread_query_answers_out_of_the_next_command => "bash",
    zsh_keeps_unread_query_answers_out_of_the_next_command => "zsh",
);

/// Sets raw mode, asks for the cursor position, reads the answer and prints it parsed.
const RAW_QUERY: &str = r#"
import os, sys, termios, tty
fd = sys.stdin.fileno()
saved = termios.tcgetattr(fd)
try:
    tty.setraw(fd)
    os.write(sys.stdout.fileno(), b"\x1b[6n")
    answer = b""
    while not answer.endswith(b"R"):
        answer += os.read(fd, 1)
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, saved)
row, col = answer[2:-1].split(b";")
print(f"row={int(row)} col={int(col)}")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_reads_its_answer_still_gets_it() {
    timed(async {
        let mut d = start_daemon().await;
        let script = d.dir().join("raw_query.py");
        std::fs::write(&script, RAW_QUERY).expect("write the script");
        let c = &mut d.client;
        let sid = open_type(c, "bash").await;
        let printed = at_prompt(c, &sid, &format!("python3 {}", script.display()), 0).await;
        let row = printed
            .strip_prefix("row=")
            .and_then(|rest| rest.strip_suffix(" col=1"))
            .and_then(|row| row.parse::<u32>().ok());
        assert!(row.is_some_and(|r| r >= 1), "{printed:?}");
        // The shell's own `read` of an answer (it turns line mode off for `-d`).
        let read = r#"IFS='[;' read -p $'\e[6n' -d R -rs _ row col; echo "col=$col""#;
        assert_eq!(at_prompt(c, &sid, read, 0).await, "col=1");
        assert_eq!(
            at_prompt(c, &sid, "echo next_command_ok", 0).await,
            "next_command_ok"
        );
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// A line the shell refuses

/// Sends a line the shell refuses without running it: it must end at the prompt (only the
/// prompt can end it before the timeout), with the shell's message alone and no exit code.
async fn refused(c: &mut Client, sid: &str, text: &str) -> String {
    let (fr, rendered) = send_with(c, sharp(sid, text)).await;
    assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{text}: {rendered}");
    assert_eq!(fr.exit_code, None, "{text}: nothing ran: {rendered}");
    fr.viewport
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_returns_a_refused_line_at_once_with_its_message_alone() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "bash").await;
        at_prompt(c, &sid, "set -H", 0).await;
        assert_eq!(
            refused(c, &sid, "echo !nonexistent").await,
            "bash: !nonexistent: event not found"
        );
        assert_eq!(
            refused(c, &sid, "echo (").await,
            "bash: syntax error near unexpected token `newline'"
        );
        // A refused line longer than the terminal is wide: its echo wraps.
        let long = format!("echo {} (", "x".repeat(200));
        assert_eq!(
            refused(c, &sid, &long).await,
            "bash: syntax error near unexpected token `('"
        );
        assert_eq!(at_prompt(c, &sid, "echo ok", 0).await, "ok");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zsh_returns_a_refused_line_with_its_message_alone() {
    timed(async {
        if !needs("zsh") {
            return;
        }
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "zsh").await;
        assert_eq!(
            refused(c, &sid, "echo ;;").await,
            "zsh: parse error near `;;'"
        );
        at_prompt(c, &sid, "setopt BANG_HIST", 0).await;
        assert_eq!(
            refused(c, &sid, "echo !nonexistent").await,
            "zsh: event not found: nonexistent"
        );
        assert_eq!(at_prompt(c, &sid, "echo ok", 0).await, "ok");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fish_returns_a_refused_line_with_its_message_alone() {
    timed(async {
        if !needs("fish") {
            return;
        }
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, "fish").await;
        let viewport = refused(c, &sid, "(exit 42)").await;
        assert!(
            viewport.starts_with("fish: "),
            "the message, not the prompt and the echoed line: {viewport:?}"
        );
        assert_eq!(at_prompt(c, &sid, "echo ok", 0).await, "ok");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Typeahead

/// A send that returns `inferred_idle` soon, its command still running.
async fn leave_running(c: &mut Client, sid: &str, text: &str) -> String {
    let (fr, rendered) = send_with(
        c,
        SendRequest {
            idle_ms: 300,
            ..send_request(A, sid, text)
        },
    )
    .await;
    assert_eq!(
        fr.wait_reason(),
        WaitReason::InferredIdle,
        "{text}: {rendered}"
    );
    fr.viewport
}

/// Sends `interrupt` (accepted, or `send_with` fails) and waits until the interrupted command
/// has ended: under load the probe may see fish reading the terminal just before its end mark,
/// and a pure wait then reports the end.
async fn interrupted(c: &mut Client, sid: &str, shell: &str, interrupt: SendRequest) {
    let (fr, rendered) = send_with(c, interrupt).await;
    if fr.wait_reason() != WaitReason::Prompt {
        let (fr, rendered) = send_with(
            c,
            SendRequest {
                submit: Some(false),
                ..sharp(sid, "")
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{shell}: {rendered}");
    }
    assert!(
        rendered.contains("[wait: prompt]") || rendered.contains("[wait: stdin_read]"),
        "{shell}: {rendered}"
    );
}

async fn typeahead_is_refused_or_held(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_type(c, shell).await;
    leave_running(c, &sid, "sleep 30").await;
    let refused = expect_code(
        c.send(sharp(&sid, "echo typed")).await,
        tonic::Code::FailedPrecondition,
        "text while sleep runs",
    );
    assert!(
        refused.message().contains("`sleep 30`") && refused.message().contains("typeahead"),
        "{shell}: names the command and the way out: {:?}",
        refused.message()
    );
    // Control characters are never typeahead: Ctrl-C as a key, and as text.
    let keys = SendRequest {
        keys: vec!["C-c".into()],
        ..sharp(&sid, "")
    };
    interrupted(c, &sid, shell, keys).await;
    leave_running(c, &sid, "sleep 30").await;
    let text = SendRequest {
        submit: Some(false),
        ..sharp(&sid, "\u{3}")
    };
    interrupted(c, &sid, shell, text).await;
    // With typeahead the text runs once the command ended: the result is the rest of the
    // running command's output, then the typed command's, without the prompt or the echo.
    assert_eq!(
        leave_running(c, &sid, "echo one; sleep 2; echo two; sleep 2; echo three").await,
        "one",
        "{shell}"
    );
    let (fr, rendered) = send_with(
        c,
        SendRequest {
            typeahead: true,
            ..sharp(&sid, "echo typed")
        },
    )
    .await;
    assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{shell}: {rendered}");
    assert_eq!(fr.exit_code, Some(0), "{shell}: {rendered}");
    assert_eq!(lines(&fr.viewport), ["two", "three", "typed"], "{shell}");
    // Nothing is left over for the next result.
    let (fr, rendered) = send_with(
        c,
        SendRequest {
            submit: Some(false),
            ..sharp(&sid, "")
        },
    )
    .await;
    assert_eq!(fr.viewport, "", "{shell}: {rendered}");
    assert_eq!(at_prompt(c, &sid, "echo next", 0).await, "next", "{shell}");
    // Text for a program that reads the terminal is not typeahead.
    let (fr, rendered) = send_with(c, sharp(&sid, "read x; echo got $x")).await;
    assert_eq!(
        fr.wait_reason(),
        WaitReason::StdinRead,
        "{shell}: {rendered}"
    );
    let answered = at_prompt(c, &sid, "value", 0).await;
    assert_eq!(lines(&answered).last(), Some(&"got value"), "{shell}");
    d.stop().await;
}

crate::shell_tests!(typeahead_is_refused_or_held:
    bash_refuses_typeahead_unless_asked_and_keeps_results_clean => "bash",
    zsh_refuses_typeahead_unless_asked_and_keeps_results_clean => "zsh",
    fish_refuses_typeahead_unless_asked_and_keeps_results_clean => "fish",
);

/// Reads keys in cbreak mode, polling with a short timeout (as TUIs with an animation do, which
/// the probe does not count as blocked on the terminal); prints what came before Enter.
const POLLING_TUI: &str = r#"
import os, select, sys, termios, tty
fd = sys.stdin.fileno()
saved = termios.tcgetattr(fd)
tty.setcbreak(fd)
print("ready", flush=True)
typed = ""
try:
    while not typed.endswith("\r") and not typed.endswith("\n"):
        if select.select([fd], [], [], 0.05)[0]:
            typed += os.read(fd, 1).decode()
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, saved)
print("got " + typed.strip())
"#;

/// Text for a program that reads keys in non-canonical mode is input, not typeahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_for_a_program_reading_keys_is_not_typeahead() {
    timed(async {
        let mut d = start_daemon().await;
        let script = d.dir().join("polling_tui.py");
        std::fs::write(&script, POLLING_TUI).expect("write the script");
        let c = &mut d.client;
        let sid = open_type(c, "bash").await;
        let (fr, rendered) = send_with(
            c,
            SendRequest {
                idle_ms: 2000,
                ..send_request(A, &sid, &format!("python3 -u {}", script.display()))
            },
        )
        .await;
        assert_eq!(fr.wait_reason(), WaitReason::InferredIdle, "{rendered}");
        assert_eq!(lines(&fr.viewport).last(), Some(&"ready"), "{rendered}");
        let viewport = at_prompt(c, &sid, "hello", 0).await;
        assert_eq!(lines(&viewport).last(), Some(&"got hello"), "{viewport:?}");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// A fresh session

/// Right after `Open`, the prompt is on screen but is no one's output: the first empty send has
/// nothing new, and `List` already counts the prompt's line and its time.
async fn a_fresh_session_has_no_new_output(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after the epoch")
        .as_millis() as i64;
    let sid = open_type(c, shell).await;
    let info = session_info(c, A, &sid).await.expect("listed");
    assert!(
        info.total_lines >= 1,
        "{shell}: the prompt's line: {info:?}"
    );
    assert!(
        info.last_output_unix_ms >= before,
        "{shell}: the prompt is output: {info:?}"
    );
    let (fr, rendered) = send_with(
        c,
        SendRequest {
            submit: Some(false),
            idle_ms: NO_IDLE,
            ..send_request(A, &sid, "")
        },
    )
    .await;
    assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{shell}: {rendered}");
    assert_eq!(fr.viewport, "", "{shell}: {rendered}");
    assert_eq!(
        rendered, "(no new output)\n[wait: prompt]\n[session: running]",
        "{shell}"
    );
    d.stop().await;
}

crate::shell_tests!(a_fresh_session_has_no_new_output:
    a_fresh_bash_session_has_no_new_output => "bash",
    a_fresh_zsh_session_has_no_new_output => "zsh",
    a_fresh_fish_session_has_no_new_output => "fish",
);

// ---------------------------------------------------------------------------------------------
// Output without a final newline

/// A command whose output has no final newline (`curl -w '%{http_code}'`) returns that output:
/// not the prompt the shell draws on its row (bash), not the prompt drawn over it (zsh), not the
/// missing-newline sign after it (fish). Racy before the fix (the prompt in the same read as the
/// end mark): repeated.
async fn output_without_a_final_newline(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_type(c, shell).await;
    for i in 0..20 {
        let text = format!("printf {i:03}");
        assert_eq!(
            at_prompt(c, &sid, &text, 0).await,
            format!("{i:03}"),
            "{shell}"
        );
    }
    // A wait at the idle prompt finds nothing new (not the last output, not the prompt).
    let (fr, rendered) = send_with(
        c,
        SendRequest {
            submit: Some(false),
            idle_ms: NO_IDLE,
            ..send_request(A, &sid, "")
        },
    )
    .await;
    assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{shell}: {rendered}");
    assert_eq!(fr.viewport, "", "{shell}: {rendered}");
    // Output that ends with a newline, after one that did not, is as ever.
    assert_eq!(
        at_prompt(c, &sid, "echo after", 0).await,
        "after",
        "{shell}"
    );
    d.stop().await;
}

crate::shell_tests!(output_without_a_final_newline:
    bash_returns_output_without_a_final_newline => "bash",
    zsh_returns_output_without_a_final_newline => "zsh",
    fish_returns_output_without_a_final_newline => "fish",
);
