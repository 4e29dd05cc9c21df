//! Command records and search with real shells: `Commands` lists what bash, zsh and fish ran
//! (plain, failing, refused, multi-line, scrolled out of history), `Read` with a command gives
//! exactly its output, `Search` finds lines with their numbers and commands; another agent gets
//! NOT_FOUND, bad input names its field.

mod support;

use ptyd::pb::{CommandRecord, CommandsRequest, ReadRequest, SearchRequest, WaitReason};
use std::path::Path;
use support::*;
use tonic::Code;

const A: &str = "agent-a";

async fn commands(c: &mut Client, sid: &str) -> (Vec<CommandRecord>, String) {
    let r = c
        .commands(CommandsRequest {
            agent_id: A.into(),
            session_id: sid.into(),
            ..Default::default()
        })
        .await
        .expect("Commands")
        .into_inner();
    (r.commands, r.rendered)
}

fn read_command(sid: &str, id: &str) -> ReadRequest {
    ReadRequest {
        agent_id: A.into(),
        session_id: sid.into(),
        command_id: id.into(),
        ..Default::default()
    }
}

fn search(sid: &str, pattern: &str) -> SearchRequest {
    SearchRequest {
        agent_id: A.into(),
        session_id: sid.into(),
        pattern: pattern.into(),
        ..Default::default()
    }
}

/// Plain, failing, refused and multi-line commands become records with the right lines, and
/// `Read` of one gives exactly its output.
async fn records_of_what_the_shell_ran(shell: &str) {
    if !needs(shell) {
        return;
    }
    let mut d = start_daemon().await;
    let c = &mut d.client;
    let sid = open_type(c, A, shell, Path::new("/tmp")).await;
    let (none, rendered) = commands(c, &sid).await;
    assert!(none.is_empty(), "{shell}: {none:?}");
    assert!(rendered.starts_with("(no commands)"), "{shell}: {rendered}");

    assert_eq!(run_ok(c, A, &sid, "echo one; echo two").await, "one\ntwo");
    let fr = send(c, A, &sid, "ls /no-such-dir-here").await;
    assert_ne!(fr.exit_code, Some(0), "{shell}: {fr:?}");
    // A line the shell refuses runs nothing.
    let fr = send(c, A, &sid, "echo )").await;
    assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{shell}: {fr:?}");
    let multi = if shell == "fish" {
        "for i in 1 2\n    echo \"n$i\"\nend"
    } else {
        "for i in 1 2\ndo\n  echo \"n$i\"\ndone"
    };
    assert_eq!(run_ok(c, A, &sid, multi).await, "n1\nn2", "{shell}");
    assert_eq!(run_ok(c, A, &sid, "cd / && pwd").await, "/");
    run_ok(c, A, &sid, "true").await;

    let (records, rendered) = commands(c, &sid).await;
    let ids: Vec<&str> = records.iter().map(|r| r.command_id.as_str()).collect();
    assert_eq!(
        ids,
        ["c1", "c2", "c3", "c4", "c5", "c6"],
        "{shell}: {rendered}"
    );
    let [echo, ls, refused, multi_line, cd, true_] = &records[..] else {
        unreachable!()
    };
    assert_eq!(echo.command, "echo one; echo two", "{shell}");
    assert_eq!(echo.exit_code, Some(0));
    assert_eq!(echo.cwd, "/tmp", "{shell}");
    assert!(echo.ended_unix_ms >= Some(echo.started_unix_ms));
    assert_eq!(echo.typed_by, "agent");
    assert!(echo.output_retained);
    // The raw bytes between the marks: the output, and whatever else the shell prints there
    // (fish sets the window title).
    let raw = "one\r\ntwo\r\n".len() as u64;
    assert!(
        (raw..raw + 200).contains(&echo.output_bytes),
        "{shell}: {echo:?}"
    );
    let (first, last) = (echo.first_line.unwrap(), echo.last_line.unwrap());
    assert_eq!(last - first, 1, "{shell}: two lines of output: {echo:?}");
    assert_eq!(ls.command, "ls /no-such-dir-here");
    assert!(
        matches!(ls.exit_code, Some(code) if code != 0),
        "{shell}: {ls:?}"
    );
    assert!(refused.refused, "{shell}: {refused:?}");
    assert_eq!(refused.command, "echo )", "{shell}");
    assert_eq!(refused.exit_code, None, "{shell}");
    assert!(
        multi_line.command.contains("echo \"n$i\""),
        "{shell}: {multi_line:?}"
    );
    assert!(multi_line.command.starts_with("for i in 1 2"), "{shell}");
    assert_eq!(cd.cwd, "/tmp", "{shell}: cwd at its start");
    assert_eq!(
        true_.cwd, "/",
        "{shell}: the cd took effect for the next one"
    );
    assert_eq!((true_.first_line, true_.last_line), (None, None), "{shell}");
    // The rendered lines, as the contract shows them.
    let lines: Vec<&str> = rendered.lines().collect();
    assert!(lines[0].starts_with("c1 [exit 0] "), "{shell}: {rendered}");
    assert!(
        lines[0].ends_with(&format!("/tmp$ echo one; echo two  (lines {first}-{last})")),
        "{shell}: {rendered}"
    );
    assert!(lines[2].starts_with("c3 [refused] "), "{shell}: {rendered}");
    assert!(
        lines[5].ends_with("/$ true  (no output)"),
        "{shell}: {rendered}"
    );
    assert_eq!(lines[6], "[commands: 1-6 of 6]", "{shell}: {rendered}");

    // Read of a command is exactly its output, then its record line.
    let page = c.read(read_command(&sid, "c1")).await.unwrap().into_inner();
    assert_eq!(page.text, "one\ntwo", "{shell}: {page:?}");
    assert_eq!((page.line_begin, page.line_end), (first, last));
    assert!(
        page.rendered.ends_with(lines[0]),
        "{shell}: {}",
        page.rendered
    );
    assert_eq!(
        page.command.as_ref().map(|r| r.command_id.as_str()),
        Some("c1")
    );
    let page = c.read(read_command(&sid, "c4")).await.unwrap().into_inner();
    assert_eq!(page.text, "n1\nn2", "{shell}: {page:?}");
    let page = c
        .read(read_command(&sid, "last"))
        .await
        .unwrap()
        .into_inner();
    assert!(
        page.rendered.starts_with("(no output)"),
        "{shell}: {}",
        page.rendered
    );
    // Paged inside the command's output: offset 1, one line.
    let page = c
        .read(ReadRequest {
            offset: 1,
            count: 1,
            ..read_command(&sid, "c1")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.text, "one", "{shell}: {page:?}");

    // Search finds the lines, numbered, with the command that printed them.
    let found = c
        .search(search(&sid, "^n[0-9]$"))
        .await
        .unwrap()
        .into_inner();
    let got: Vec<(String, String)> = found
        .matches
        .iter()
        .map(|m| (m.text.clone(), m.command_id.clone()))
        .collect();
    let want = [("n1", "c4"), ("n2", "c4")].map(|(t, c)| (t.to_owned(), c.to_owned()));
    assert_eq!(got, want, "{shell}: {}", found.rendered);
    let n1 = found.matches[0].line;
    assert!(
        found.rendered.starts_with(&format!("{n1}: n1  (c4)\n")),
        "{shell}: {}",
        found.rendered
    );
    assert!(found.rendered.ends_with("[matches: 2 of 2]"), "{shell}");
    d.stop().await;
}

crate::shell_tests!(records_of_what_the_shell_ran:
    bash_records_what_it_ran => "bash",
    zsh_records_what_it_ran => "zsh",
    fish_records_what_it_ran => "fish",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_takes_context_case_a_cap_and_one_command() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, A, "bash", Path::new("/tmp")).await;
        run_ok(
            c,
            A,
            &sid,
            "printf 'a\\nError one\\nb\\nc\\nd\\ne\\nerror two\\n'",
        )
        .await;
        run_ok(c, A, &sid, "seq 1 300 | sed 's/^/error /'").await;
        let r = c
            .search(SearchRequest {
                ignore_case: true,
                context: 1,
                command_id: "c1".into(),
                ..search(&sid, "^error")
            })
            .await
            .unwrap()
            .into_inner();
        let body: Vec<String> = r
            .rendered
            .lines()
            .map(|l| {
                l.trim_start_matches(|c: char| c.is_ascii_digit())
                    .to_owned()
            })
            .collect();
        // The line numbers aside: a match, its context, groups apart, the count.
        assert_eq!(
            body,
            [
                "- a",
                ": Error one  (c1)",
                "- b",
                "--",
                "- e",
                ": error two  (c1)",
                "[matches: 2 of 2]"
            ],
            "{}",
            r.rendered
        );
        // Past max_matches the newest are kept, and the result says how many were left out.
        let r = c
            .search(SearchRequest {
                max_matches: 10,
                ..search(&sid, "^error [0-9]+$")
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.total_matches, 300);
        assert_eq!(r.matches.len(), 10);
        assert_eq!(r.matches.last().unwrap().text, "error 300");
        assert!(r.rendered.ends_with("[matches: 10 of 300, newest kept]"));
        // A byte cap keeps the newest lines, within the cap.
        let r = c
            .search(SearchRequest {
                max_result_bytes: 300,
                ..search(&sid, "^error [0-9]+$")
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.truncated && r.rendered.len() <= 300, "{}", r.rendered);
        assert!(r.rendered.contains("error 300  (c2)"), "{}", r.rendered);
        assert_eq!(r.matches.last().unwrap().text, "error 300");
        assert!(r.matches.len() < 100);
        // A pattern that does not compile names the field and the reason.
        let bad = c.search(search(&sid, "error (")).await;
        expect_invalid(bad, "pattern", "unclosed group");
        let bad = c.search(search(&sid, "")).await;
        expect_invalid(bad, "pattern", "required");
        let bad = c
            .search(SearchRequest {
                command_id: "c01".into(),
                ..search(&sid, "x")
            })
            .await;
        expect_invalid(bad, "command_id", "not a command id");
        let unknown = c
            .search(SearchRequest {
                command_id: "c9".into(),
                ..search(&sid, "x")
            })
            .await;
        expect_code(unknown, Code::NotFound, "command_id \"c9\"");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_agent_sees_no_commands_and_bad_reads_name_their_field() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, A, "bash", Path::new("/tmp")).await;
        run_ok(c, A, &sid, "echo secret").await;
        let other = |mut r: CommandsRequest| {
            r.agent_id = "agent-b".into();
            r
        };
        let theirs = c
            .commands(other(CommandsRequest {
                session_id: sid.clone(),
                ..Default::default()
            }))
            .await;
        expect_code(theirs, Code::NotFound, "");
        let theirs = c
            .search(SearchRequest {
                agent_id: "agent-b".into(),
                ..search(&sid, "secret")
            })
            .await;
        expect_code(theirs, Code::NotFound, "");
        let theirs = c
            .read(ReadRequest {
                agent_id: "agent-b".into(),
                ..read_command(&sid, "c1")
            })
            .await;
        expect_code(theirs, Code::NotFound, "");
        let bad = c.read(read_command(&sid, "1")).await;
        expect_invalid(bad, "command_id", "not a command id");
        let bad = c
            .read(ReadRequest {
                screen: true,
                ..read_command(&sid, "c1")
            })
            .await;
        expect_invalid(bad, "command_id", "not with screen");
        let missing = c.read(read_command(&sid, "c7")).await;
        expect_code(missing, Code::NotFound, "command_id \"c7\"");
        d.stop().await;
    })
    .await;
}

/// A command whose output scrolled out of the history bounds says so, and its read is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_output_left_history_is_not_retained() {
    timed(async {
        let config = ptyd::config::Config {
            history_bytes: 64 << 10,
            ..Default::default()
        };
        let mut d = start_daemon_with(config).await;
        let c = &mut d.client;
        let sid = open_type(c, A, "bash", Path::new("/tmp")).await;
        run_ok(c, A, &sid, "echo early").await;
        run_ok(c, A, &sid, "seq 1 50000").await;
        run_ok(c, A, &sid, "echo late").await;
        let (records, rendered) = commands(c, &sid).await;
        let retained: Vec<bool> = records.iter().map(|r| r.output_retained).collect();
        assert_eq!(retained, [false, false, true], "{rendered}");
        let page = c.read(read_command(&sid, "c1")).await.unwrap().into_inner();
        assert!(
            page.rendered
                .starts_with("(its output is no longer retained)"),
            "{}",
            page.rendered
        );
        let page = c.read(read_command(&sid, "c2")).await.unwrap().into_inner();
        // What is left of a command whose start was dropped is its newest lines.
        assert!(page.text.ends_with("49999\n50000"), "{}", page.rendered);
        assert!(page.line_begin > records[1].first_line.unwrap(), "{page:?}");
        d.stop().await;
    })
    .await;
}

/// A type without shell integration has no records; search works all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_integration_has_no_records_but_can_be_searched() {
    timed(async {
        let mut d = start_daemon().await;
        let c = &mut d.client;
        let sid = open_type(c, A, "python", Path::new("/tmp")).await;
        let fr = send(c, A, &sid, "print('plain-' + str(40 + 2))").await;
        assert!(fr.viewport.contains("plain-42"), "{fr:?}");
        let (records, rendered) = commands(c, &sid).await;
        assert!(records.is_empty() && rendered.starts_with("(no commands)"));
        let found = c
            .search(search(&sid, "^plain-42$"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(found.matches.len(), 1, "{}", found.rendered);
        assert_eq!(found.matches[0].command_id, "");
        d.stop().await;
    })
    .await;
}
