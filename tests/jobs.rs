//! Background jobs and the rest of the section-8 bad-input table.
//!
//! Jobs: `run_in_background` answers with a job id at once; a second send while it runs is
//! FAILED_PRECONDITION naming the job; `JobOutput` hands out each piece of output exactly once and
//! reports COMPLETED with the send's wait reason; `JobKill` of `sleep 100` gives KILLED and frees
//! the session.
//!
//! Bad input for the RPCs `tests/operations.rs` does not cover fully — `Watch`, `JobOutput`,
//! `JobKill`, `SendStream` — with the exact code, a message naming the field, and a well-formed
//! request that still succeeds afterwards.

mod support;

use std::time::{Duration, Instant};

use ptyd::pb::{
    JobKillRequest, JobKillResponse, JobOutputRequest, JobOutputResponse, JobStatus, SendRequest,
    WaitReason, WatchRequest, send_event, send_response,
};
use support::*;
use tonic::{Code, Status};

const A: &str = "jobs";
/// How long a stream may stay silent before the tests call it open.
const STREAM_PATIENCE: Duration = Duration::from_secs(5);

/// Starts `cmd` as a background job that returns at once (`background_wait_ms` 0); returns its
/// id, how long the call took, and the output it came back with: what the job printed before
/// the answer was made (usually nothing; under load its first lines), which JobOutput will not
/// give again.
async fn start_job(c: &mut Client, sid: &str, cmd: &str) -> (String, Duration, String) {
    let started = Instant::now();
    let resp = background_send(c, sid, cmd, Some(0))
        .await
        .expect("a background send");
    let took = started.elapsed();
    let Some(send_response::Result::Background(first)) = &resp.result else {
        panic!("expected a job: {resp:?}");
    };
    assert_eq!(first.job_id, resp.job_id);
    let job = resp.job_id.clone();
    assert!(
        resp.rendered
            .starts_with(&format!("started background job {job}\n")),
        "{}",
        resp.rendered
    );
    if first.output.is_empty() && first.status() == JobStatus::Running {
        assert_eq!(
            resp.rendered,
            format!("started background job {job}\n[job: {job} running]")
        );
    }
    (job, took, first.output.clone())
}

/// A background send of `cmd` waiting `wait_ms` for the job's first line.
async fn background_send(
    c: &mut Client,
    sid: &str,
    cmd: &str,
    wait_ms: Option<u32>,
) -> Result<ptyd::pb::SendResponse, Status> {
    c.send(SendRequest {
        run_in_background: true,
        background_wait_ms: wait_ms,
        ..send_request(A, sid, cmd)
    })
    .await
    .map(|r| r.into_inner())
}

/// What a background send saw when it returned.
fn first_output(resp: &ptyd::pb::SendResponse) -> &JobOutputResponse {
    match &resp.result {
        Some(send_response::Result::Background(first)) => first,
        other => panic!("expected a job: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_send_returns_with_the_jobs_first_line_or_its_end() {
    timed(async {
        let mut d = start_daemon().await;
        let home = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_in(c, A, &home).await;
        // A server's first line comes back in the same call, and is not handed out again.
        let cmd = "sleep 0.2; echo Serving on port 8000; sleep 30; echo later";
        let resp = background_send(c, &sid, cmd, None).await.unwrap();
        let job = resp.job_id.clone();
        let first = first_output(&resp);
        assert_eq!(first.status(), JobStatus::Running, "{resp:?}");
        assert_eq!(first.output, "Serving on port 8000", "{resp:?}");
        assert_eq!(first.session_id, sid);
        assert_eq!(
            resp.rendered,
            format!("started background job {job}\nServing on port 8000\n[job: {job} running]")
        );
        let next = job_output(c, &job, 0).await;
        assert_eq!(next.output, "", "consumed by the send: {next:?}");
        job_kill(c, &job).await;

        // A command that ends at once: the send reports how it ended.
        let resp = background_send(c, &sid, "echo done; false", None)
            .await
            .unwrap();
        let job = resp.job_id.clone();
        let ended = first_output(&resp);
        assert_eq!(ended.status(), JobStatus::Completed, "{resp:?}");
        assert_eq!(ended.output, "done");
        assert_eq!(ended.exit_code, Some(1));
        assert!(
            resp.rendered
                .ends_with(&format!("done\n[job: {job} completed: wait: prompt]")),
            "{}",
            resp.rendered
        );

        // Nothing printed within background_wait_ms: the send returns with the job running.
        let resp = background_send(c, &sid, "sleep 30", Some(300))
            .await
            .unwrap();
        let quiet = first_output(&resp);
        assert_eq!(quiet.status(), JobStatus::Running);
        assert_eq!(quiet.output, "");
        job_kill(c, &resp.job_id).await;

        let refused = background_send(c, &sid, "true", Some(10_001))
            .await
            .expect_err("out of range");
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(
            refused.message().contains("background_wait_ms"),
            "{refused:?}"
        );
        d.stop().await;
    })
    .await;
}

async fn job_kill(c: &mut Client, job: &str) -> JobKillResponse {
    c.job_kill(JobKillRequest {
        agent_id: A.into(),
        job_id: job.into(),
    })
    .await
    .expect("JobKill")
    .into_inner()
}

async fn job_output(c: &mut Client, job: &str, wait_ms: u32) -> JobOutputResponse {
    c.job_output(JobOutputRequest {
        agent_id: A.into(),
        job_id: job.into(),
        wait_ms,
        ..Default::default()
    })
    .await
    .expect("JobOutput")
    .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_reports_each_output_once_and_completes() {
    timed(async {
        let mut d = start_daemon().await;
        let home = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_in(c, A, &home).await;
        let cmd = "for i in 1 2 3 4 5; do echo line$i; sleep 0.3; done";
        let (job, took, first) = start_job(c, &sid, cmd).await;
        assert!(
            took < Duration::from_millis(1200),
            "the job id comes back at once, not after the command's 1.5 s: {took:?}"
        );

        // The session is reserved for the job: another send is refused naming it.
        for background in [false, true] {
            let s = c
                .send(SendRequest {
                    run_in_background: background,
                    ..send_request(A, &sid, "echo intruder")
                })
                .await
                .expect_err("a send while the job runs");
            assert_eq!(s.code(), Code::FailedPrecondition, "{s:?}");
            assert!(s.message().contains(&job), "names {job}: {:?}", s.message());
        }
        assert!(session_info(c, A, &sid).await.unwrap().busy);

        // Collect the output piece by piece until the job is done.
        let mut pieces: Vec<String> = [first].into_iter().filter(|f| !f.is_empty()).collect();
        let last = loop {
            let r = job_output(c, &job, 2000).await;
            assert_eq!(r.job_id, job);
            assert_eq!(r.session_id, sid);
            if !r.output.is_empty() {
                pieces.push(r.output.clone());
            }
            match r.status() {
                JobStatus::Running => {
                    assert!(
                        r.rendered.ends_with(&format!("[job: {job} running]")),
                        "{r:?}"
                    )
                }
                JobStatus::Completed => break r,
                other => panic!("unexpected status {other:?}: {r:?}"),
            }
        };
        let all: Vec<&str> = pieces.iter().flat_map(|p| lines(p)).collect();
        assert_eq!(
            all,
            ["line1", "line2", "line3", "line4", "line5"],
            "every line exactly once, in order (pieces {pieces:?})"
        );
        assert_eq!(last.wait_reason(), WaitReason::Prompt, "{last:?}");
        assert_eq!(last.exit_code, Some(0));
        assert!(
            last.rendered
                .contains(&format!("[job: {job} completed: wait: prompt]")),
            "{}",
            last.rendered
        );
        // Nothing is repeated afterwards.
        let again = job_output(c, &job, 0).await;
        assert_eq!(again.output, "", "consumed output is never repeated");
        assert_eq!(again.status(), JobStatus::Completed);
        assert!(!session_info(c, A, &sid).await.unwrap().busy);
        assert_eq!(run_ok(c, A, &sid, "echo free").await, "free");
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_output_waits_for_new_output_or_the_end() {
    timed(async {
        let mut d = start_daemon().await;
        let home = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_in(c, A, &home).await;
        // The job waits for a file the test makes: still running when first asked, however
        // slow the machine.
        let go = home.join("go");
        let cmd = format!(
            "while [ ! -e '{}' ]; do sleep 0.05; done; echo late",
            go.display()
        );
        let (job, _, _) = start_job(c, &sid, &cmd).await;
        // wait_ms 0 answers at once, with nothing new.
        let now = job_output(c, &job, 0).await;
        assert_eq!(now.status(), JobStatus::Running);
        assert_eq!(now.output, "");
        std::fs::write(&go, "").unwrap();
        // A long wait returns with the output (or the end), well before its deadline.
        let started = Instant::now();
        let mut seen = String::new();
        while !seen.contains("late") {
            let r = job_output(c, &job, 20_000).await;
            seen.push_str(&r.output);
            if r.status() != JobStatus::Running {
                break;
            }
        }
        assert!(seen.contains("late"), "{seen:?}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "woken by the output, not the deadline"
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_kill_interrupts_the_job_and_frees_the_session() {
    timed(async {
        let mut d = start_daemon().await;
        let home = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_in(c, A, &home).await;
        // Killed at once, the interrupt races the shell's fork of `sleep`: it must reach the
        // command whenever it takes the terminal. Several rounds give the race its chances.
        for round in 0..5 {
            let (job, _, _) = start_job(c, &sid, "sleep 100").await;
            let killed = job_kill(c, &job).await;
            assert_eq!(killed.job_id, job);
            assert_eq!(
                killed.status(),
                JobStatus::Killed,
                "round {round}: {killed:?}"
            );
            assert_eq!(killed.rendered, format!("[job: {job} killed]"));
            let r = job_output(c, &job, 0).await;
            assert_eq!(r.status(), JobStatus::Killed, "{r:?}");
            assert_ne!(r.wait_reason(), WaitReason::Timeout, "round {round}: {r:?}");
            assert!(!session_info(c, A, &sid).await.unwrap().busy);
            assert_eq!(
                run_ok(c, A, &sid, &format!("echo free-{round}")).await,
                format!("free-{round}")
            );
            // Killing a finished job changes nothing.
            let again = job_kill(c, &job).await;
            assert_eq!(again.status(), JobStatus::Killed);
        }
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_kill_kills_a_command_that_ignores_the_interrupt() {
    timed(async {
        let mut d = start_daemon().await;
        let home = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_in(c, A, &home).await;
        let (job, _, early) =
            start_job(c, &sid, "bash -c 'trap \"\" INT; echo stubborn; sleep 100'").await;
        if !early.contains("stubborn") {
            let first = job_output(c, &job, 10_000).await;
            assert!(first.output.contains("stubborn"), "{first:?}");
        }
        let killed = job_kill(c, &job).await;
        assert_eq!(killed.status(), JobStatus::Killed, "{killed:?}");
        let r = job_output(c, &job, 0).await;
        assert_eq!(r.wait_reason(), WaitReason::Prompt, "{r:?}");
        assert_eq!(
            r.exit_code,
            Some(137),
            "SIGKILLed after ignoring SIGINT: {r:?}"
        );
        assert_eq!(run_ok(c, A, &sid, "echo free-again").await, "free-again");
        d.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Bad input

/// A refused stream may fail at the call or as its first item.
async fn watch(c: &mut Client, req: WatchRequest) -> Result<String, Status> {
    let mut stream = c.watch(req).await?.into_inner();
    match tokio::time::timeout(STREAM_PATIENCE, stream.message()).await {
        Ok(Ok(item)) => Ok(format!("watch item {item:?}")),
        Ok(Err(s)) => Err(s),
        Err(_) => Ok("watch stream stayed open".into()),
    }
}

/// A SendStream call played to its end; a refusal may come at the call or as an item.
async fn send_stream(c: &mut Client, req: SendRequest) -> Result<String, Status> {
    let mut stream = c.send_stream(req).await?.into_inner();
    let mut last = String::new();
    loop {
        match tokio::time::timeout(STREAM_PATIENCE * 4, stream.message()).await {
            Ok(Ok(Some(ev))) => {
                if let Some(send_event::Event::Done(done)) = ev.event {
                    return Ok(format!("done: {}", done.rendered));
                }
                last = format!("{ev:?}");
            }
            Ok(Ok(None)) => return Ok(format!("stream ended after {last}")),
            Ok(Err(s)) => return Err(s),
            Err(_) => return Ok("stream stayed open".into()),
        }
    }
}

enum Call {
    Watch(WatchRequest),
    Output(JobOutputRequest),
    Kill(JobKillRequest),
    Stream(SendRequest),
}

async fn call(c: &mut Client, call: Call) -> Result<String, Status> {
    match call {
        Call::Watch(r) => watch(c, r).await,
        Call::Output(r) => c
            .job_output(r)
            .await
            .map(|r| format!("{:?}", r.into_inner())),
        Call::Kill(r) => c.job_kill(r).await.map(|r| format!("{:?}", r.into_inner())),
        Call::Stream(r) => send_stream(c, r).await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_stream_and_job_requests_are_refused_by_the_table() {
    timed(async {
        let mut d = start_daemon().await;
        let home = d.dir().to_path_buf();
        let c = &mut d.client;
        let sid = open_in(c, A, &home).await;
        let (job, _, _) = start_job(c, &sid, "echo finished").await;
        wait_until(Duration::from_secs(20), "the job completes", || {
            let mut c = c.clone();
            let job = job.clone();
            async move { job_output(&mut c, &job, 500).await.status() == JobStatus::Completed }
        })
        .await;

        let w = |f: &dyn Fn(&mut WatchRequest)| {
            let mut r = WatchRequest {
                agent_id: A.into(),
                session_id: sid.clone(),
                replay_lines: 0,
            };
            f(&mut r);
            Call::Watch(r)
        };
        let o = |f: &dyn Fn(&mut JobOutputRequest)| {
            let mut r = JobOutputRequest {
                agent_id: A.into(),
                job_id: job.clone(),
                ..Default::default()
            };
            f(&mut r);
            Call::Output(r)
        };
        let k = |f: &dyn Fn(&mut JobKillRequest)| {
            let mut r = JobKillRequest {
                agent_id: A.into(),
                job_id: job.clone(),
            };
            f(&mut r);
            Call::Kill(r)
        };
        let s = |f: &dyn Fn(&mut SendRequest)| {
            let mut r = send_request(A, &sid, "echo should-not-run");
            f(&mut r);
            Call::Stream(r)
        };
        let long_agent = "x".repeat(129);
        let invalid: Vec<(&str, Call, &str)> = vec![
            (
                "Watch empty agent_id",
                w(&|r| r.agent_id.clear()),
                "agent_id",
            ),
            (
                "Watch 129-byte agent_id",
                w(&|r| r.agent_id = long_agent.clone()),
                "agent_id",
            ),
            (
                "Watch agent_id with ESC",
                w(&|r| r.agent_id = "a\u{1b}".into()),
                "agent_id",
            ),
            (
                "Watch empty session_id",
                w(&|r| r.session_id.clear()),
                "session_id",
            ),
            (
                "Watch replay_lines 10001",
                w(&|r| r.replay_lines = 10_001),
                "replay_lines",
            ),
            (
                "JobOutput empty agent_id",
                o(&|r| r.agent_id.clear()),
                "agent_id",
            ),
            (
                "JobOutput agent_id with NUL",
                o(&|r| r.agent_id = "a\0".into()),
                "agent_id",
            ),
            ("JobOutput empty job_id", o(&|r| r.job_id.clear()), "job_id"),
            (
                "JobOutput wait_ms 600001",
                o(&|r| r.wait_ms = 600_001),
                "wait_ms",
            ),
            (
                "JobOutput cap 63",
                o(&|r| r.max_result_bytes = 63),
                "max_result_bytes",
            ),
            (
                "JobOutput cap 16 MiB + 1",
                o(&|r| r.max_result_bytes = (16 << 20) + 1),
                "max_result_bytes",
            ),
            (
                "JobKill empty agent_id",
                k(&|r| r.agent_id.clear()),
                "agent_id",
            ),
            (
                "JobKill 129-byte agent_id",
                k(&|r| r.agent_id = long_agent.clone()),
                "agent_id",
            ),
            ("JobKill empty job_id", k(&|r| r.job_id.clear()), "job_id"),
            (
                "SendStream empty agent_id",
                s(&|r| r.agent_id.clear()),
                "agent_id",
            ),
            (
                "SendStream empty session_id",
                s(&|r| r.session_id.clear()),
                "session_id",
            ),
            (
                "SendStream in the background",
                s(&|r| r.run_in_background = true),
                "run_in_background",
            ),
            (
                "SendStream timeout_ms 600001",
                s(&|r| r.timeout_ms = 600_001),
                "timeout_ms",
            ),
            ("SendStream idle_ms 49", s(&|r| r.idle_ms = 49), "idle_ms"),
            (
                "SendStream cap 63",
                s(&|r| r.max_result_bytes = 63),
                "max_result_bytes",
            ),
            (
                "SendStream unknown key",
                s(&|r| {
                    r.text.clear();
                    r.keys = vec!["Hyper-X".into()];
                }),
                "keys",
            ),
            (
                "SendStream text over 1 MiB",
                s(&|r| {
                    r.text = "y".repeat((1 << 20) + 1);
                    r.submit = Some(false);
                }),
                "text",
            ),
        ];
        for (what, req, field) in invalid {
            expect_invalid(call(c, req).await, field, what);
        }

        let not_found: Vec<(&str, Call)> = vec![
            ("Watch t999", w(&|r| r.session_id = "t999".into())),
            (
                "Watch by another agent",
                w(&|r| r.agent_id = "intruder".into()),
            ),
            ("JobOutput j999", o(&|r| r.job_id = "j999".into())),
            ("JobOutput of a session id", o(&|r| r.job_id = sid.clone())),
            (
                "JobOutput by another agent",
                o(&|r| r.agent_id = "intruder".into()),
            ),
            ("JobKill j999", k(&|r| r.job_id = "j999".into())),
            (
                "JobKill by another agent",
                k(&|r| r.agent_id = "intruder".into()),
            ),
            ("SendStream t999", s(&|r| r.session_id = "t999".into())),
            (
                "SendStream by another agent",
                s(&|r| r.agent_id = "intruder".into()),
            ),
        ];
        for (what, req) in not_found {
            expect_code(call(c, req).await, Code::NotFound, what);
        }

        // A busy session refuses a streaming send, naming the job that holds it.
        let (busy_job, _, _) = start_job(c, &sid, "sleep 100").await;
        let refused = expect_code(
            call(c, s(&|_| {})).await,
            Code::FailedPrecondition,
            "SendStream while a job runs",
        );
        assert!(
            refused.message().contains(&busy_job),
            "{:?}",
            refused.message()
        );
        c.job_kill(JobKillRequest {
            agent_id: A.into(),
            job_id: busy_job,
        })
        .await
        .expect("JobKill");

        // Well-formed requests still work, and nothing refused ran.
        call(c, o(&|_| {})).await.expect("JobOutput");
        call(c, k(&|_| {}))
            .await
            .expect("JobKill of a finished job");
        let streamed = call(c, s(&|r| r.text = "echo streamed-ok".into()))
            .await
            .expect("SendStream");
        assert!(streamed.contains("streamed-ok"), "{streamed}");
        let watched = call(c, w(&|r| r.replay_lines = 5)).await.expect("Watch");
        assert!(watched.contains("watch item"), "{watched}");
        let history = read_page(c, A, &sid, 0, 10_000).await;
        assert!(
            !history.text.contains("should-not-run"),
            "a refused send wrote nothing: {:?}",
            history.text
        );
        d.stop().await;
    })
    .await;
}
