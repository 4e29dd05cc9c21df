//! Shared helpers for the integration tests: typed request helpers, status assertions, what a
//! test needs of the machine, and `wait_until`, the only way a test waits for a condition. The
//! in-process daemon is in `daemon.rs`, the Node client bridge of the ACP and MCP tests in
//! `bridge.rs`, the survival scenario in `five_sessions.rs`, a real daemon process in `spawned.rs`,
//! users made for a test in `users.rs`, and one plain HTTP request in `plain_http.rs`.
#![allow(dead_code)]

pub mod bridge;
mod daemon;
// Not every test file starts a daemon (emulation.rs only polls).
#[allow(unused_imports)]
pub use daemon::*;
pub mod five_sessions;
pub mod plain_http;
pub mod spawned;
pub mod users;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use ptyd::pb::terminals_client::TerminalsClient;
use ptyd::pb::{
    CloseRequest, CloseResponse, ForegroundResult, ListRequest, ListResponse, OpenRequest,
    OpenResponse, ReadRequest, ReadResponse, SendRequest, SendResponse, SessionInfo, send_response,
};
use tonic::transport::Channel;
use tonic::{Code, Status};

pub type Client = TerminalsClient<Channel>;

/// Upper bound for one whole test: a hang fails the test instead of blocking CI.
pub const TEST_DEADLINE: Duration = Duration::from_secs(120);
/// `timeout_ms` of the helpers' sends: long enough for a loaded 2-core CI machine.
pub const SEND_TIMEOUT_MS: u32 = 20_000;
/// `wait_until` polls with a back-off from the first to the last of these intervals.
const POLL_FIRST: Duration = Duration::from_millis(5);
const POLL_MAX: Duration = Duration::from_millis(100);

/// Opens a shell whose HOME (and cwd) is `home`, so the machine's own rc files stay out of the
/// test: pyenv, conda and the like are slow to start and contend for locks when dozens of
/// sessions start at once. Returns the session id.
pub async fn open_in(c: &mut Client, agent: &str, home: &std::path::Path) -> String {
    let home = home.display().to_string();
    open_with(
        c,
        ptyd::pb::OpenRequest {
            agent_id: agent.into(),
            cwd: home.clone(),
            env: [("HOME".to_string(), home)].into(),
            ..Default::default()
        },
    )
    .await
    .session
    .expect("OpenResponse.session is set")
    .session_id
}

/// One test per shell: `shell_tests!(scenario: bash_test => "bash", zsh_test => "zsh")` makes
/// `bash_test` run `scenario("bash")` under `timed`, and so on.
#[macro_export]
macro_rules! shell_tests {
    ($scenario:ident: $($test:ident => $shell:literal),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                $crate::support::timed($scenario($shell)).await;
            }
        )+
    };
}

/// Runs a test body under `TEST_DEADLINE`.
pub async fn timed<F: Future>(body: F) -> F::Output {
    match tokio::time::timeout(TEST_DEADLINE, body).await {
        Ok(out) => out,
        Err(_) => panic!("test did not finish within {TEST_DEADLINE:?}"),
    }
}

/// Polls `condition` with a short back-off until it holds; panics naming `what` when `within`
/// passes first. This is how tests wait: never a fixed sleep.
pub async fn wait_until<F, Fut>(within: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = POLL_FIRST;
    loop {
        if condition().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {within:?} waiting until {what}");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(POLL_MAX);
    }
}

/// The blocking form of `wait_until`, for tests that drive a program synchronously (tmux):
/// polls `ready` with the same back-off until it gives a value, or `None` once `within` passed.
pub fn poll_until<T>(within: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = std::time::Instant::now() + within;
    let mut pause = POLL_FIRST;
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(POLL_MAX);
    }
}

/// A plain gRPC channel over the Unix socket, for services other than `Terminals` (health).
pub async fn unix_channel(socket: &Path) -> Channel {
    let socket = socket.to_path_buf();
    tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .expect("connect a raw channel to the daemon socket")
}

// ---------------------------------------------------------------------------------------------
// Requests

/// Opens a default `shell` session for `agent` and returns its id.
pub async fn open(client: &mut Client, agent: &str) -> String {
    open_with(
        client,
        OpenRequest {
            agent_id: agent.into(),
            ..Default::default()
        },
    )
    .await
    .session
    .expect("OpenResponse.session is set")
    .session_id
}

/// Opens a `shell` session with a UTF-8 locale, so readline takes multi-byte input whatever the
/// locale of the machine running the tests.
pub async fn open_utf8(client: &mut Client, agent: &str) -> String {
    open_with(
        client,
        OpenRequest {
            agent_id: agent.into(),
            env: [("LANG".to_string(), "C.UTF-8".to_string())].into(),
            ..Default::default()
        },
    )
    .await
    .session
    .expect("OpenResponse.session is set")
    .session_id
}

/// Opens a session with an arbitrary request; panics on error.
pub async fn open_with(client: &mut Client, req: OpenRequest) -> OpenResponse {
    let what = format!("{req:?}");
    match client.open(req).await {
        Ok(r) => r.into_inner(),
        Err(s) => panic!("Open {what} failed: {s:?}"),
    }
}

/// A foreground send request with the helpers' defaults (submit, `SEND_TIMEOUT_MS`).
pub fn send_request(agent: &str, sid: &str, text: &str) -> SendRequest {
    SendRequest {
        agent_id: agent.into(),
        session_id: sid.into(),
        text: text.into(),
        timeout_ms: SEND_TIMEOUT_MS,
        ..Default::default()
    }
}

/// Sends `text` + Enter and waits; returns the foreground result.
pub async fn send(client: &mut Client, agent: &str, sid: &str, text: &str) -> ForegroundResult {
    send_with(client, send_request(agent, sid, text)).await.0
}

/// Sends an arbitrary foreground request; returns the result and `rendered`. Panics on error or
/// when the daemon answered with a background job.
pub async fn send_with(client: &mut Client, req: SendRequest) -> (ForegroundResult, String) {
    let what = format!("{:?} to {}", req.text, req.session_id);
    let resp = match client.send(req).await {
        Ok(r) => r.into_inner(),
        Err(s) => panic!("Send {what} failed: {s:?}"),
    };
    foreground(resp)
}

/// Splits a foreground `SendResponse`.
pub fn foreground(resp: SendResponse) -> (ForegroundResult, String) {
    match resp.result {
        Some(send_response::Result::Foreground(fr)) => (fr, resp.rendered),
        other => panic!(
            "expected a foreground result, got {other:?} ({})",
            resp.rendered
        ),
    }
}

/// Sends and asserts the command finished at the prompt with exit status 0; returns the
/// viewport.
pub async fn run_ok(client: &mut Client, agent: &str, sid: &str, cmd: &str) -> String {
    let fr = send(client, agent, sid, cmd).await;
    assert_eq!(
        fr.wait_reason(),
        ptyd::pb::WaitReason::Prompt,
        "{cmd:?} should end at the prompt: {fr:?}"
    );
    assert_eq!(fr.exit_code, Some(0), "{cmd:?} should exit 0: {fr:?}");
    fr.viewport
}

/// Reads a history page ending `offset` lines before the newest one.
pub async fn read_page(
    client: &mut Client,
    agent: &str,
    sid: &str,
    offset: u64,
    count: u32,
) -> ReadResponse {
    read_with(
        client,
        ReadRequest {
            agent_id: agent.into(),
            session_id: sid.into(),
            offset,
            count,
            ..Default::default()
        },
    )
    .await
}

/// Reads a history page starting at absolute line `from_line`.
pub async fn read_from(
    client: &mut Client,
    agent: &str,
    sid: &str,
    from_line: u64,
    count: u32,
) -> ReadResponse {
    read_with(
        client,
        ReadRequest {
            agent_id: agent.into(),
            session_id: sid.into(),
            from_line: Some(from_line),
            count,
            ..Default::default()
        },
    )
    .await
}

/// Reads the visible screen.
pub async fn read_screen(client: &mut Client, agent: &str, sid: &str) -> ReadResponse {
    read_with(
        client,
        ReadRequest {
            agent_id: agent.into(),
            session_id: sid.into(),
            screen: true,
            ..Default::default()
        },
    )
    .await
}

/// Reads with an arbitrary request; panics on error.
pub async fn read_with(client: &mut Client, req: ReadRequest) -> ReadResponse {
    let what = format!("{req:?}");
    match client.read(req).await {
        Ok(r) => r.into_inner(),
        Err(s) => panic!("Read {what} failed: {s:?}"),
    }
}

/// Lists `agent`'s sessions.
pub async fn list(client: &mut Client, agent: &str) -> ListResponse {
    match client
        .list(ListRequest {
            agent_id: agent.into(),
        })
        .await
    {
        Ok(r) => r.into_inner(),
        Err(s) => panic!("List for {agent:?} failed: {s:?}"),
    }
}

/// The `SessionInfo` of `sid` in `agent`'s list, if listed.
pub async fn session_info(client: &mut Client, agent: &str, sid: &str) -> Option<SessionInfo> {
    list(client, agent)
        .await
        .sessions
        .into_iter()
        .find(|s| s.session_id == sid)
}

/// Waits (20 s at most) until `List` shows `sid` as `ready` says; returns what it showed.
pub async fn wait_for_info(
    client: &mut Client,
    agent: &str,
    sid: &str,
    what: &str,
    ready: impl Fn(&SessionInfo) -> bool,
) -> SessionInfo {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let ready = &ready;
    wait_until(Duration::from_secs(20), what, || {
        let (mut c, seen) = (client.clone(), seen.clone());
        async move {
            let info = session_info(&mut c, agent, sid).await.expect("listed");
            let done = ready(&info);
            *seen.lock().unwrap() = Some(info);
            done
        }
    })
    .await;
    let info = seen.lock().unwrap().take();
    info.expect("listed")
}

/// Closes a session; panics on error.
pub async fn close(client: &mut Client, agent: &str, sid: &str) -> CloseResponse {
    match client
        .close(CloseRequest {
            agent_id: agent.into(),
            session_id: sid.into(),
        })
        .await
    {
        Ok(r) => r.into_inner(),
        Err(s) => panic!("Close {sid} for {agent:?} failed: {s:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Assertions

/// Asserts `result` failed with `code`; returns the status for further checks.
#[track_caller]
pub fn expect_code<T: std::fmt::Debug>(
    result: Result<T, Status>,
    code: Code,
    what: &str,
) -> Status {
    match result {
        Ok(v) => panic!("{what}: expected {code:?}, got success: {v:?}"),
        Err(s) => {
            assert_eq!(s.code(), code, "{what}: wrong code, status {s:?}");
            s
        }
    }
}

/// Asserts `result` is INVALID_ARGUMENT and that the message names `field`.
#[track_caller]
pub fn expect_invalid<T: std::fmt::Debug>(result: Result<T, Status>, field: &str, what: &str) {
    let s = expect_code(result, Code::InvalidArgument, what);
    assert!(
        s.message().contains(field),
        "{what}: message {:?} should name the field {field:?}",
        s.message()
    );
}

/// The lines of a text block (an empty text has no lines).
pub fn lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        Vec::new()
    } else {
        text.split('\n').collect()
    }
}

/// Whether `pid` names a live (non-zombie) process.
pub fn process_is_running(pid: u32) -> bool {
    ptyd::process::procfs::is_alive(pid as i32)
}

/// Asserts two NOT_FOUND statuses are indistinguishable apart from the id they name: the answer
/// for a foreign id must not leak that it exists.
#[track_caller]
pub fn assert_same_not_found(
    foreign: &Status,
    foreign_id: &str,
    unknown: &Status,
    unknown_id: &str,
) {
    assert_eq!(
        foreign.code(),
        Code::NotFound,
        "foreign id {foreign_id}: {foreign:?}"
    );
    assert_eq!(
        unknown.code(),
        Code::NotFound,
        "unknown id {unknown_id}: {unknown:?}"
    );
    assert_eq!(
        foreign.message().replace(foreign_id, "<id>"),
        unknown.message().replace(unknown_id, "<id>"),
        "a foreign id must get the same answer as an unknown one"
    );
}

/// The ids of the sessions `agent` owns, as List gives them.
pub async fn ids(c: &mut Client, agent: &str) -> Vec<String> {
    list(c, agent)
        .await
        .sessions
        .into_iter()
        .map(|s| s.session_id)
        .collect()
}

/// Opens a session of type `ty` in `cwd`; returns its id.
pub async fn open_type(c: &mut Client, agent: &str, ty: &str, cwd: &std::path::Path) -> String {
    open_with(
        c,
        OpenRequest {
            agent_id: agent.into(),
            r#type: ty.into(),
            cwd: cwd.display().to_string(),
            ..Default::default()
        },
    )
    .await
    .session
    .expect("a session")
    .session_id
}

/// Waits (an empty send) until the session is back at its prompt.
pub async fn settle(c: &mut Client, agent: &str, sid: &str) {
    let (r, _) = send_with(
        c,
        SendRequest {
            agent_id: agent.into(),
            session_id: sid.into(),
            submit: Some(false),
            timeout_ms: 60_000,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(r.wait_reason(), ptyd::pb::WaitReason::Prompt, "{r:?}");
}

/// Every retained history line of the session, oldest first.
pub async fn history(c: &mut Client, agent: &str, sid: &str) -> Vec<String> {
    let mut all = Vec::new();
    let mut from = read_page(c, agent, sid, 0, 1).await.first_line;
    loop {
        let page = read_from(c, agent, sid, from, 2000).await;
        all.extend(lines(&page.text).iter().map(|l| l.to_string()));
        if page.line_end == 0 || page.line_end >= page.total_lines {
            return all;
        }
        from = page.line_end + 1;
    }
}

/// Follows a job's output until it is no longer running (or `within` passed): its last status
/// and all its output.
pub async fn job_to_end(
    c: &mut Client,
    agent: &str,
    job: &str,
    within: Duration,
) -> (ptyd::pb::JobStatus, String) {
    let mut output = String::new();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let r = c
            .job_output(ptyd::pb::JobOutputRequest {
                agent_id: agent.into(),
                job_id: job.into(),
                wait_ms: 2000,
                ..Default::default()
            })
            .await
            .expect("JobOutput")
            .into_inner();
        output.push_str(&r.output);
        if r.status() != ptyd::pb::JobStatus::Running || tokio::time::Instant::now() > deadline {
            return (r.status(), output);
        }
    }
}

/// A test that cannot run on this machine fails, saying why: no test passes by skipping.
/// `.ci/run` installs everything the tests need (run it once as root on a fresh machine).
pub fn cannot_run_here(test: &str, why: &str) {
    panic!("{test} cannot run here: {why} (`bash .ci/run` installs what the tests need)");
}

/// Whether `program` is on `PATH`.
pub fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Checks that `program`, which the calling test needs, is installed: a missing one fails the
/// test (see `cannot_run_here`), so this returns true or does not return.
pub fn needs(program: &str) -> bool {
    if installed(program) {
        return true;
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    cannot_run_here(test, &format!("{program} is not installed"));
    false
}

/// The pids of a session's processes: its helper (the shell's parent) and everything under it.
pub fn session_processes(shell: u32) -> Vec<u32> {
    let helper = ptyd::process::procfs::ppid(shell as i32).expect("the shell's parent");
    ptyd::process::procfs::live_descendants(helper)
        .into_iter()
        .map(|p| p as u32)
        .chain([helper as u32])
        .collect()
}

/// A number no other test of this run uses, to name its processes.
pub fn nonce() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    format!(
        "{}{:03}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Pids of live processes whose command line is exactly `sleep <arg>`.
pub fn sleeps_with(arg: &str) -> Vec<u32> {
    let want = format!("sleep\0{arg}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes())
        })
        .filter(|pid| process_is_running(*pid))
        .collect()
}

/// Waits until exactly one live `sleep <arg>` exists and returns its pid.
pub async fn the_sleep(arg: &str, what: &str) -> u32 {
    let arg2 = arg.to_owned();
    wait_until(
        Duration::from_secs(10),
        &format!("{what} runs"),
        move || {
            let arg = arg2.clone();
            async move { sleeps_with(&arg).len() == 1 }
        },
    )
    .await;
    sleeps_with(arg)[0]
}

/// The ways a command can leave its shell's tree or Unix session: each starts
/// `sleep 1000.<n><i>` (`i` its place in the list, from 1) differently.
pub fn escapes(n: &str) -> Vec<(&'static str, String)> {
    vec![
        ("background job", format!("sleep 1000.{n}1 &")),
        ("nohup", format!("nohup sleep 1000.{n}2 >/dev/null 2>&1 &")),
        ("disown", format!("sleep 1000.{n}3 & disown")),
        ("setsid", format!("setsid sleep 1000.{n}4 &")),
        (
            "double-forked daemon",
            format!(
                "sh -c 'setsid sh -c \"sleep 1000.{n}5 </dev/null >/dev/null 2>&1 & exit 0\" & \
                 exit 0' </dev/null >/dev/null 2>&1"
            ),
        ),
        ("subshell orphan", format!("(sleep 1000.{n}6 &)")),
        ("env -i setsid", format!("env -i setsid sleep 1000.{n}7 &")),
    ]
}
