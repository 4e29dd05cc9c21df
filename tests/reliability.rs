//! The reliability suite: no output is lost under a flood from many sessions at once; 64
//! sessions under concurrent sends, reads and lists from many client tasks all settle correctly
//! while the health check keeps answering within 100 ms; one agent's session limit does not
//! touch another agent.

mod support;

use std::future::Future;
use std::time::Duration;

use ptyd::pb::{OpenRequest, ReadRequest, SendRequest, WaitReason};
use support::*;
use tonic::Code;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

/// Bound for the heavy tests below, which move tens of megabytes through PTYs on a small,
/// shared machine; a hang still fails instead of blocking CI.
const HEAVY_DEADLINE: Duration = Duration::from_secs(600);
/// A send's wait deadline in the heavy tests: far above the few seconds the work takes.
const HEAVY_SEND_MS: u32 = 300_000;
/// The responsiveness bar: every health check answers within this.
const HEALTH_BAR: Duration = Duration::from_millis(100);
/// Pause between health checks, so the checker samples the whole run without hogging a core.
const HEALTH_EVERY: Duration = Duration::from_millis(20);
/// A health check with no answer at all by then is a hang, whatever the machine.
const HEALTH_GIVE_UP: Duration = Duration::from_secs(10);

/// The heavy tests take turns: each means to load the machine on its own, and together on a
/// small machine they would measure each other.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn timed_for<F: Future>(limit: Duration, body: F) -> F::Output {
    let _turn = HEAVY.lock().await;
    match tokio::time::timeout(limit, body).await {
        Ok(out) => out,
        Err(_) => panic!("test did not finish within {limit:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// No output lost

/// Sessions flooding at once, and the numbers each prints.
const FLOOD_SESSIONS: usize = 16;
const FLOOD_NUMBERS: u64 = 200_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_output_is_lost_when_sixteen_sessions_flood_at_once() {
    timed_for(HEAVY_DEADLINE, async {
        let d = start_daemon_with(ptyd::config::Config {
            // All of it must stay retained to be read back.
            history_lines: FLOOD_NUMBERS + 1_000,
            ..Default::default()
        })
        .await;
        let mut c = d.client();
        let mut sessions = Vec::new();
        for i in 0..FLOOD_SESSIONS {
            let agent = format!("flood{i}");
            let sid = open_in(&mut c, &agent, d.dir()).await;
            sessions.push((agent, sid));
        }
        let mut floods = tokio::task::JoinSet::new();
        for (agent, sid) in sessions.clone() {
            let mut c = d.client();
            floods.spawn(async move {
                let fr = send_with(
                    &mut c,
                    SendRequest {
                        timeout_ms: HEAVY_SEND_MS,
                        ..send_request(&agent, &sid, &format!("seq 1 {FLOOD_NUMBERS}"))
                    },
                )
                .await
                .0;
                assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{sid}: {fr:?}");
                assert_eq!(fr.exit_code, Some(0), "{sid}");
            });
        }
        while let Some(done) = floods.join_next().await {
            done.expect("a flood task panicked");
        }
        for (agent, sid) in &sessions {
            let numbers = page_through(&mut c, agent, sid).await;
            assert_eq!(
                numbers.len() as u64,
                FLOOD_NUMBERS,
                "{sid}: every number exactly once"
            );
            if let Some(i) = (0..numbers.len()).find(|&i| numbers[i] != i as u64 + 1) {
                panic!(
                    "{sid}: line {} holds {} (neighbours {:?})",
                    i + 1,
                    numbers[i],
                    &numbers[i.saturating_sub(2)..(i + 3).min(numbers.len())]
                );
            }
        }
        d.stop().await;
    })
    .await;
}

/// Reads the whole retained history of `sid` forward by `from_line` pages; returns the lines
/// that are plain numbers, in order.
async fn page_through(c: &mut Client, agent: &str, sid: &str) -> Vec<u64> {
    let mut numbers = Vec::new();
    let first = read_page(c, agent, sid, 0, 1).await;
    let mut from = first.first_line.max(1);
    loop {
        let page = read_with(
            c,
            ReadRequest {
                agent_id: agent.into(),
                session_id: sid.into(),
                from_line: Some(from),
                count: 10_000,
                max_result_bytes: 16 << 20,
                ..Default::default()
            },
        )
        .await;
        assert!(!page.truncated, "a 10000-line page of numbers fits 16 MiB");
        if page.line_end < from {
            break; // past the end
        }
        assert_eq!(
            page.line_begin, from,
            "pages follow each other without a gap"
        );
        numbers.extend(
            lines(&page.text)
                .iter()
                .filter_map(|l| l.parse::<u64>().ok()),
        );
        if page.line_end >= page.total_lines {
            break;
        }
        from = page.line_end + 1;
    }
    numbers
}

// ---------------------------------------------------------------------------------------------
// Concurrent load

/// 64 sessions: four agents with 16 each (the per-agent limit is 32).
const LOAD_AGENTS: usize = 4;
const LOAD_SESSIONS_PER_AGENT: usize = 16;
/// Sends per session, each followed by a read and a list.
const LOAD_ROUNDS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_busy_sessions_settle_and_health_stays_fast() {
    timed_for(HEAVY_DEADLINE, async {
        let d = start_daemon().await;
        // The checker runs on its own thread and runtime, like a separate client process: it
        // measures the daemon, not how busy the test's own client tasks keep the runtime.
        let stop = tokio_util::sync::CancellationToken::new();
        let (connected_tx, connected) = tokio::sync::oneshot::channel();
        let health = {
            let (socket, daemon_thread) = (d.socket.clone(), d.thread);
            let stop = stop.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the health checker");
                rt.block_on(check_health_until(
                    &socket,
                    daemon_thread,
                    connected_tx,
                    stop,
                ))
            })
        };
        // The load begins once the checker's connection is up, as a monitor's would be: what
        // is measured is the daemon answering under load, not a client's handshake.
        connected.await.expect("the health checker connected");
        // The load's clients run on a runtime of their own, like client processes: the daemon's
        // runtime serves, it does not also run the test's assertions.
        let clients = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the load's clients");
        let socket = d.socket.clone();
        let home = d.dir().to_path_buf();
        let load = clients.spawn(async move {
            let mut workers = tokio::task::JoinSet::new();
            for a in 0..LOAD_AGENTS {
                // One connection per agent, as separate client processes would have.
                let c = ptyd::client::connect(&socket).await.expect("connect");
                for s in 0..LOAD_SESSIONS_PER_AGENT {
                    let (mut c, home) = (c.clone(), home.clone());
                    workers.spawn(async move { load_one(&mut c, a, s, &home).await });
                }
            }
            let mut opened = Vec::new();
            while let Some(done) = workers.join_next().await {
                opened.push(done.expect("a load task panicked"));
            }
            opened
        });
        let opened = load.await.expect("the load panicked");
        clients.shutdown_background();
        stop.cancel();
        let health = health.join().expect("the health checker panicked");
        assert!(health.checks > 0, "the health checker ran");
        eprintln!("health checks during the load: {health:?}");
        assert_eq!(opened.len(), LOAD_AGENTS * LOAD_SESSIONS_PER_AGENT);
        let mut c = d.client();
        for a in 0..LOAD_AGENTS {
            let listed = list(&mut c, &format!("load{a}")).await;
            assert_eq!(listed.sessions.len(), LOAD_SESSIONS_PER_AGENT);
            assert!(
                listed.sessions.iter().all(|s| !s.busy),
                "nothing stays busy"
            );
        }
        d.stop().await;
    })
    .await;
}

/// What the health checker saw.
#[derive(Debug, Default)]
struct HealthStats {
    checks: u32,
    /// Slowest answer, wall clock.
    slowest: Duration,
    /// Slowest answer less the time the process's threads waited for a CPU meanwhile.
    slowest_own: Duration,
    /// Answers slower than the bar in wall-clock time (all explained by CPU starvation).
    over_bar_wall: u32,
}

/// Checks health every [`HEALTH_EVERY`] until `stop`; panics when an answer takes longer than
/// [`HEALTH_BAR`] beyond what CPU starvation explains.
///
/// On a shared machine under load the kernel may not run the daemon at all for a while; that
/// says nothing about the daemon. So each check is charged only with its latency less the time
/// CPU starvation explains (`schedstat`'s run-queue waits during it), the larger of: the waits of
/// the two threads on its path, the daemon's one thread and this checker's, which take turns on
/// it and so add up; and the longest wait of any thread of this process, since a starved thread
/// of the daemon's blocking pool (spawning a session's helper) can hold up the daemon's thread
/// on a lock (the process's memory map, the allocator) without that thread waiting for a CPU
/// itself. What remains is the daemon's own doing — work queued ahead of the check, a blocking
/// call, a lock held too long — and must stay under the bar.
async fn check_health_until(
    socket: &std::path::Path,
    daemon_thread: i32,
    connected: tokio::sync::oneshot::Sender<()>,
    stop: tokio_util::sync::CancellationToken,
) -> HealthStats {
    let mut health = HealthClient::new(unix_channel(socket).await);
    health
        .check(HealthCheckRequest::default())
        .await
        .expect("a first health check on an idle daemon");
    let _ = connected.send(());
    let checker_thread = nix::unistd::gettid().as_raw();
    let mut stats = HealthStats::default();
    let mut ticks = tokio::time::interval(HEALTH_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return stats,
            _ = ticks.tick() => {}
        }
        let waited_before = run_queue_waits();
        let started = tokio::time::Instant::now();
        let answer =
            tokio::time::timeout(HEALTH_GIVE_UP, health.check(HealthCheckRequest::default())).await;
        let latency = started.elapsed();
        let waited_after = run_queue_waits();
        match answer {
            Ok(Ok(_)) => {}
            Ok(Err(s)) => panic!("health check failed: {s:?}"),
            Err(_) => panic!("no health answer within {HEALTH_GIVE_UP:?}"),
        }
        let waited = |tid: &i32| {
            let before = waited_before.get(tid).copied().unwrap_or(0);
            waited_after
                .get(tid)
                .map_or(0, |after| after.saturating_sub(before))
        };
        let on_path = waited(&daemon_thread) + waited(&checker_thread);
        let longest = waited_after.keys().map(waited).max().unwrap_or(0);
        let starved = Duration::from_nanos(on_path.max(longest));
        let own = latency.saturating_sub(starved);
        assert!(
            own <= HEALTH_BAR,
            "health check {} took {latency:?}, {own:?} of it not waiting for a CPU (bar \
             {HEALTH_BAR:?})",
            stats.checks + 1
        );
        stats.checks += 1;
        stats.slowest = stats.slowest.max(latency);
        stats.slowest_own = stats.slowest_own.max(own);
        stats.over_bar_wall += u32::from(latency > HEALTH_BAR);
    }
}

/// Nanoseconds each thread of this process has spent runnable, waiting for a CPU (the second
/// field of `/proc/self/task/<tid>/schedstat`), by thread id.
fn run_queue_waits() -> std::collections::HashMap<i32, u64> {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| {
            let tid = task.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            Some((tid, stat.split_whitespace().nth(1)?.parse().ok()?))
        })
        .collect()
}

/// One load task: opens a session, then sends, reads and lists in rounds, checking each answer.
async fn load_one(c: &mut Client, a: usize, s: usize, home: &std::path::Path) -> (String, String) {
    let agent = format!("load{a}");
    let sid = open_in(c, &agent, home).await;
    for round in 0..LOAD_ROUNDS {
        let word = format!("a{a}s{s}r{round}");
        let fr = send_with(
            c,
            SendRequest {
                timeout_ms: HEAVY_SEND_MS,
                ..send_request(&agent, &sid, &format!("echo {word}"))
            },
        )
        .await
        .0;
        assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{sid}: {fr:?}");
        assert_eq!(fr.exit_code, Some(0), "{sid}: {fr:?}");
        assert_eq!(fr.viewport, word, "{sid}");
        let page = read_page(c, &agent, &sid, 0, 50).await;
        assert!(
            lines(&page.text).contains(&word.as_str()),
            "{sid}: {word} is in the history: {:?}",
            page.text
        );
        let listed = list(c, &agent).await;
        assert!(
            listed.sessions.iter().any(|i| i.session_id == sid),
            "{sid} is listed"
        );
    }
    (agent, sid)
}

// ---------------------------------------------------------------------------------------------
// Limits

/// A type that is ready at once and costs nothing: `cat` waiting on the terminal.
fn cat_type() -> ptyd::config::TerminalType {
    ptyd::config::TerminalType {
        name: "cat".into(),
        argv: vec!["cat".into()],
        integration: ptyd::marks::Integration::None,
        history_expansion: false,
        description: "cat, for cheap sessions".into(),
        env: Vec::new(),
        sandbox: None,
    }
}

fn open_cat(agent: &str) -> OpenRequest {
    OpenRequest {
        agent_id: agent.into(),
        r#type: "cat".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_33rd_session_of_an_agent_is_refused_and_others_are_unaffected() {
    timed_for(HEAVY_DEADLINE, async {
        let mut config = ptyd::config::Config::default();
        config.types.push(cat_type());
        let limit = config.limits.sessions_per_agent;
        assert_eq!(limit, 32, "the contract's default");
        let mut d = start_daemon_with(config).await;
        let home = d.dir().to_path_buf();
        let c = &mut d.client;
        let mut mine = Vec::new();
        for _ in 0..limit {
            mine.push(
                open_with(c, open_cat("greedy"))
                    .await
                    .session
                    .unwrap()
                    .session_id,
            );
        }
        let refused = expect_code(
            c.open(open_cat("greedy")).await,
            Code::ResourceExhausted,
            "the 33rd session",
        );
        assert!(
            refused.message().contains("32") && refused.message().contains("greedy"),
            "names the agent and the limit: {:?}",
            refused.message()
        );
        assert_eq!(list(c, "greedy").await.sessions.len(), limit);

        // Another agent opens and works as usual.
        let other = open_in(c, "modest", &home).await;
        assert_eq!(
            run_ok(c, "modest", &other, "echo unaffected").await,
            "unaffected"
        );

        // Closing one frees a slot.
        close(c, "greedy", &mine[0]).await;
        open_with(c, open_cat("greedy")).await;
        d.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_wide_session_limit_is_resource_exhausted_for_everyone() {
    timed(async {
        let mut config = ptyd::config::Config::default();
        config.types.push(cat_type());
        config.limits.sessions_total = 3;
        let mut d = start_daemon_with(config).await;
        let c = &mut d.client;
        for agent in ["x", "y", "z"] {
            open_with(c, open_cat(agent)).await;
        }
        let refused = expect_code(
            c.open(open_cat("w")).await,
            Code::ResourceExhausted,
            "a fourth session in the daemon",
        );
        assert!(
            refused.message().contains('3'),
            "names the limit: {:?}",
            refused.message()
        );
        d.stop().await;
    })
    .await;
}
