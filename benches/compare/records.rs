//! The `records` case (issue 23): `Search` over a session whose history is full (the default
//! 16 MiB), against `grep -n` over the same text in the same run; and what the command records
//! cost a send: `Send("true")` in a session holding the newest 10 000 records against a fresh
//! session of the same daemon, interleaved.

use super::{AGENT, Client, DAEMON_SESSIONS, Daemon, Row, Setup, fmt_ms, ms, p50, p99};
use ptyd::pb::{ReadRequest, SearchRequest};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Lines printed into the searched session: about 24 MB of 80-byte lines, more than the
/// default history keeps, so its bound decides what is searched.
const FILL_LINES: u64 = 300_000;
/// The `printf` format of a filled line (its number in the middle, `N` below).
const FILL_FORMAT: &str =
    "compiling crate-%06.0f v0.1.0 (build step of a long log, padded to eighty bytes)";
const SEARCHES: usize = 20;
/// Commands run before the send is timed: the records a session keeps at most.
const RECORDS: usize = 10_000;
const RECORD_SENDS: usize = 300;

fn fill_line(n: u64) -> String {
    FILL_FORMAT.replace("%06.0f", &format!("{n:06}"))
}

/// What each timed search looks for: (row name, pattern, ignore case).
const PATTERNS: [(&str, &str, bool); 3] = [
    ("rare (10 lines)", "crate-2999[0-9]9 ", false),
    ("every line, newest 100 kept", "build step", false),
    ("case folded, every line", "COMPILING CRATE", true),
];

pub(super) fn case_records(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("command records and search ...");
    let daemon = Daemon::spawn(setup, "records", DAEMON_SESSIONS);
    let mut client = Client::connect(&daemon.socket);
    search_rows(setup, &mut client, rows);
    send_rows(&mut client, rows);
}

fn search_rows(setup: &Setup, client: &mut Client, rows: &mut Vec<Row>) {
    let (sid, _) = client.open(AGENT);
    let fill = format!("seq -f '{FILL_FORMAT}' 1 {FILL_LINES}");
    client.run_to_prompt(AGENT, &sid, &fill);
    let page = client
        .rt
        .block_on(client.terminals.read(ReadRequest {
            agent_id: AGENT.into(),
            session_id: sid.clone(),
            count: 1,
            ..Default::default()
        }))
        .expect("Read")
        .into_inner();
    assert!(
        page.first_line > 1,
        "the history is full: its oldest lines were dropped ({} of {})",
        page.first_line,
        page.total_lines
    );
    // The same filled lines the session retains, in a file for grep.
    let retained = page.total_lines - page.first_line + 1;
    let first_kept = FILL_LINES.saturating_sub(retained) + 1;
    let text: String = (first_kept..=FILL_LINES)
        .map(|n| fill_line(n) + "\n")
        .collect();
    let file = setup.dir.path().join("records-history.txt");
    std::fs::write(&file, &text).expect("write grep's copy");
    let history_mib = text.len() as f64 / f64::from(1 << 20);
    for (name, pattern, ignore_case) in PATTERNS {
        let mut ptyd_ms = Vec::new();
        let mut grep_ms = Vec::new();
        let mut total = 0;
        for _ in 0..SEARCHES {
            let req = SearchRequest {
                agent_id: AGENT.into(),
                session_id: sid.clone(),
                pattern: pattern.into(),
                ignore_case,
                ..Default::default()
            };
            let t0 = Instant::now();
            let resp = client
                .rt
                .block_on(client.terminals.search(req))
                .expect("Search")
                .into_inner();
            ptyd_ms.push(ms(t0.elapsed()));
            total = resp.total_matches;
            // What an agent would run for the same answer: the newest 100 matching lines.
            // Its output is read (GNU grep stops at the first match when it writes to
            // /dev/null).
            let flags = if ignore_case { "-niE" } else { "-nE" };
            let t0 = Instant::now();
            let out = Command::new("sh")
                .arg("-c")
                .arg("grep \"$1\" -e \"$2\" \"$3\" | tail -n 100")
                .args(["sh", flags, pattern])
                .arg(&file)
                .stderr(Stdio::inherit())
                .output()
                .expect("run grep");
            grep_ms.push(ms(t0.elapsed()));
            assert!(
                out.status.success() && !out.stdout.is_empty(),
                "grep found {pattern:?}"
            );
        }
        assert!(total > 0, "Search found {pattern:?}");
        let (pv, gv) = (p50(&ptyd_ms), p50(&grep_ms));
        rows.push(Row {
            case: format!("Search p50 over {history_mib:.0} MiB of history: {name}"),
            ptyd: fmt_ms(pv),
            baselines: format!("grep -n, tail -n 100: {}", fmt_ms(gv)),
            ratio: format!("{:.1}x grep", pv / gv),
            bar: "< 100 ms".into(),
            pass: Some(pv < 100.0),
            json: json!({"pattern": pattern, "ignore_case": ignore_case,
                         "history_bytes": text.len(), "total_matches": total,
                         "ptyd_ms": {"p50": pv, "p99": p99(&ptyd_ms)},
                         "grep_ms": {"p50": gv, "p99": p99(&grep_ms)}}),
        });
    }
}

fn send_rows(client: &mut Client, rows: &mut Vec<Row>) {
    let (full, _) = client.open(AGENT);
    let (fresh, _) = client.open(AGENT);
    let mut wrong = 0;
    for _ in 0..RECORDS {
        wrong += client.run_to_prompt(AGENT, &full, "true");
    }
    let (mut full_ms, mut fresh_ms) = (Vec::new(), Vec::new());
    for _ in 0..RECORD_SENDS {
        for (sid, into) in [(&full, &mut full_ms), (&fresh, &mut fresh_ms)] {
            let t0 = Instant::now();
            wrong += client.run_to_prompt(AGENT, sid, "true");
            into.push(ms(t0.elapsed()));
        }
    }
    let (fv, nv) = (p50(&full_ms), p50(&fresh_ms));
    rows.push(Row {
        case: format!("Send(\"true\") p50 with {RECORDS} records kept"),
        ptyd: fmt_ms(fv),
        baselines: format!("fresh session {}", fmt_ms(nv)),
        ratio: format!("{:.2}x fresh", fv / nv),
        bar: "< 1.2x".into(),
        pass: Some(fv / nv < 1.2 && wrong == 0),
        json: json!({"records": RECORDS, "wrong_wait_reasons": wrong,
                     "full_ms": {"p50": fv, "p99": p99(&full_ms)},
                     "fresh_ms": {"p50": nv, "p99": p99(&fresh_ms)}}),
    });
}
