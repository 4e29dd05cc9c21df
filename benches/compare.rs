//! `cargo bench --bench compare`: the comparison benchmark behind `docs/performance.md`, which
//! holds its latest table and each case's quality bar (issue 7). Every case runs against ptyd
//! (a spawned `ptyd serve` on a temp socket, reached through its gRPC client) and against its
//! baselines in the same run: the raw-PTY floor (the same bash with the same shell integration
//! on a bare PTY, read directly), tmux, and ptyd's own data structures in-process. It prints
//! one table and writes `target/bench/compare.json`; every figure is also a ratio against a
//! baseline measured in the same run, because the machine is shared and noisy.
//!
//! Sessions, bare shells and tmux panes all run bash with `HOME` set to an empty directory, so the
//! machine's own rc files (prompt hooks that fork) do not dominate what is measured. Everything
//! the bench starts is ended when it finishes or fails: daemons and shells through drop guards,
//! tmux servers with `kill-server`, and any leftover descendant through a final sweep (the bench
//! makes itself the subreaper of everything it starts).
//!
//! Arguments: `cargo bench --bench compare -- [CASE...]` runs only the named cases (`send`,
//! `mcp`, `stdin`, `ingest`, `paging`, `scale`, `memory`, `emulator`, `adopt`, `hostile`,
//! `agent-streams`, `records`; `send` includes the Python grpcio client's row, from
//! `benches/python_send.py`); `-- feed STREAM [MB] [CHUNK]` only feeds a generated stream
//! (`base64`, `seq`, `ls`, `build`, `progress`, `fullscreen`) through the in-process terminal model,
//! chunk by chunk as the session actor does, for profiling under callgrind.

#[path = "compare/records.rs"]
mod records;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write as _;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use ptyd::history::History;
use ptyd::marks::{Integration, IntegrationFiles, MarkKey};
use ptyd::pb::terminals_client::TerminalsClient;
use ptyd::pb::{ListRequest, OpenRequest, ReadRequest, SendRequest, WaitReason, send_response};
use ptyd::screen::Terminal;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

// ---------------------------------------------------------------------------------------------
// Parameters

/// Terminal size for every contender.
const COLS: u16 = 120;
const ROWS: u16 = 40;
/// Send latency: rounds of interleaved blocks, so slow phases of the machine hit every contender.
const LATENCY_ROUNDS: usize = 10;
const LATENCY_PTYD_PER_ROUND: usize = 100;
const LATENCY_FLOOR_PER_ROUND: usize = 100;
const LATENCY_TMUX_PER_ROUND: usize = 20;
/// MCP send latency: rounds of interleaved blocks of MCP and gRPC sends.
const MCP_ROUNDS: usize = 10;
const MCP_PER_ROUND: usize = 50;
/// Stdin detection iterations per contender.
const STDIN_READ_ITERS: usize = 60;
const STDIN_PYTHON_ITERS: usize = 15;
/// How often the raw floor looks at /proc for the reader (the quality bar's 1 ms poll).
const FLOOR_POLL: Duration = Duration::from_millis(1);
/// Ingest: repetitions per stream and contender; the best of them counts (noise only slows).
const INGEST_REPS: usize = 5;
const INGEST_STREAMS: [(&str, &str); 3] = [
    ("base64", "head -c 100M /dev/zero | base64"),
    ("seq", "seq 1 3000000"),
    ("ls -lR", "ls -lR --color=always /usr"),
];
/// Paging: reads per depth.
const PAGING_READS: usize = 200;
const PAGING_LINES: u32 = 500;
const PAGING_OFFSETS: [u64; 3] = [0, 50_000, 99_000];
/// Scale: sessions, agents they are spread over, Opens in flight, idle sampling window.
const SCALE_SESSIONS: usize = 1000;
const SCALE_AGENTS: usize = 32;
const SCALE_CONCURRENCY: usize = 8;
const SCALE_IDLE: Duration = Duration::from_secs(10);
const SCALE_LIST_CALLS: usize = 200;
/// History memory: lines of typical output and their length.
const MEMORY_LINES: usize = 100_000;
const MEMORY_LINE_LEN: usize = 60;
/// History memory of short lines: `seq 1 SEQ_MEMORY_LINES` under the default bounds.
const SEQ_MEMORY_LINES: usize = 2_000_000;
/// Emulator-only throughput: the chunk size fed at a time (a PTY read returns about this much).
const EMULATOR_CHUNK: usize = 1024;

/// `CSI 99999999 b` in the REP stream: 6 000 of them make the 66 KB of issue 21.
const HOSTILE_REPS: usize = 6_000;
/// How many times in a row the REP stream is sent while the other session is timed.
const HOSTILE_REP_PASSES: usize = 20;
/// `Send("true")` to the other session with nothing else running, for the baseline.
const HOSTILE_IDLE_SENDS: usize = 200;

// ---------------------------------------------------------------------------------------------
// A counting allocator: live heap bytes, for the history-memory case.

struct Counting;

/// Whether allocations are counted (only while the memory case measures, so the daemon process
/// and the other cases pay nothing but one relaxed load).
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Live bytes allocated while counting (wrapping: frees of older blocks may pass zero).
static LIVE: AtomicUsize = AtomicUsize::new(0);

fn count_alloc(size: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_add(size, Ordering::Relaxed);
    }
}

fn count_free(size: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_sub(size, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is updated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        count_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count_alloc(new_size);
            count_free(layout.size());
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live_heap() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Heap bytes `build` leaves allocated (its result is kept alive until measured).
fn heap_of<T>(build: impl FnOnce() -> T) -> (usize, T) {
    COUNTING.store(true, Ordering::Relaxed);
    let before = live_heap();
    let value = build();
    let bytes = live_heap().wrapping_sub(before);
    COUNTING.store(false, Ordering::Relaxed);
    (bytes, value)
}

// ---------------------------------------------------------------------------------------------
// Results

/// One row of the table.
struct Row {
    case: String,
    ptyd: String,
    baselines: String,
    ratio: String,
    bar: String,
    /// None for information rows without a bar.
    pass: Option<bool>,
    json: Value,
}

impl Row {
    fn info(case: &str, ptyd: String, baselines: String, json: Value) -> Row {
        Row {
            case: case.to_owned(),
            ptyd,
            baselines,
            ratio: String::new(),
            bar: String::new(),
            pass: None,
            json,
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The q-quantile (0..=1) of `samples` in milliseconds.
fn quantile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    s[i]
}

fn p50(samples: &[f64]) -> f64 {
    quantile(samples, 0.5)
}

fn p99(samples: &[f64]) -> f64 {
    quantile(samples, 0.99)
}

/// Milliseconds with a precision that suits their size.
fn fmt_ms(v: f64) -> String {
    if v < 1.0 {
        format!("{v:.3} ms")
    } else if v < 100.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.0} ms")
    }
}

// ---------------------------------------------------------------------------------------------
// Cleanup: everything the bench starts is a descendant, and the bench is their subreaper.

/// Makes this process the subreaper of everything it starts, so orphans (tmux servers, a dead
/// daemon's shells) stay findable for the final sweep.
fn become_subreaper() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Direct children of this process (every thread's).
fn own_children() -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|s| s.parse::<i32>().ok()),
                );
            }
        }
    }
    out
}

/// Kills and reaps every remaining descendant.
fn sweep_descendants() {
    for _ in 0..50 {
        let children = own_children();
        if children.is_empty() {
            return;
        }
        for pid in &children {
            // SAFETY: signalling and reaping our own children.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        for pid in &children {
            let mut status = 0;
            // SAFETY: as above.
            unsafe {
                libc::waitpid(*pid, &mut status, 0);
            }
        }
    }
}

/// Sweeps on drop, so a panicking case still leaves nothing behind.
struct SweepGuard;

impl Drop for SweepGuard {
    fn drop(&mut self) {
        sweep_descendants();
    }
}

/// Raises the open-file limit to its hard maximum (1000 sessions need a few fds each).
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The environment every contender runs in

struct Setup {
    dir: tempfile::TempDir,
    home: PathBuf,
    integration: IntegrationFiles,
    /// Environment of every shell and of the daemon.
    env: Vec<(String, String)>,
    bash: String,
    /// The minimal integration a user would write (`MINIMAL_RC`).
    minimal_rc: PathBuf,
}

/// The shell integration a user would write for themselves: the four OSC 133 marks and
/// nothing else. The send floor runs bash with it (issue 22: a floor with ptyd's own
/// integration hid what that integration costs).
const MINIMAL_RC: &str = r#"PS1='\[\e]133;A\a\]$ \[\e]133;B\a\]'
PS0='\e]133;C\a'
PROMPT_COMMAND='printf "\e]133;D;%s\a" "$?"'
"#;

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::Builder::new()
            .prefix("ptyd-bench-")
            .tempdir()
            .expect("create the bench's temp dir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("create the bench HOME");
        let integration =
            IntegrationFiles::install(&dir.path().join("integration")).expect("integration files");
        let mut env: Vec<(String, String)> = vec![("HOME".into(), home.display().to_string())];
        for (k, v) in std::env::vars() {
            let keep = matches!(k.as_str(), "USER" | "LOGNAME" | "PATH" | "LANG" | "TZ")
                || k.starts_with("LC_");
            if keep {
                env.push((k, v));
            }
        }
        for (k, v) in [
            ("TERM", "xterm-256color"),
            ("PAGER", "cat"),
            ("GIT_PAGER", "cat"),
            ("MANPAGER", "cat"),
            ("SHELL", "/bin/bash"),
        ] {
            env.push((k.into(), v.into()));
        }
        let bash = ptyd::config::find_program("bash").expect("bash is installed");
        let minimal_rc = dir.path().join("minimal.bash");
        std::fs::write(&minimal_rc, MINIMAL_RC).expect("write the minimal integration");
        Setup {
            dir,
            home,
            integration,
            env,
            bash,
            minimal_rc,
        }
    }

    /// `bash --rcfile <MINIMAL_RC> -i`: a user's own floor (issue 22).
    fn minimal_bash_argv(&self) -> Vec<String> {
        vec![
            self.bash.clone(),
            "--rcfile".into(),
            self.minimal_rc.display().to_string(),
            "-i".into(),
        ]
    }

    /// `bash --rcfile <integration> -i`, exactly what ptyd starts for the `bash` type.
    fn bash_argv(&self) -> Vec<String> {
        let mut argv = vec![self.bash.clone()];
        let mut env = Vec::new();
        // The floor finds the marks by their prefix, so it hands the integration no key.
        self.integration.apply(
            Integration::Bash,
            &MarkKey::unverified(),
            false,
            &mut argv,
            &mut env,
        );
        argv
    }
}

// ---------------------------------------------------------------------------------------------
// A spawned `ptyd serve`

struct Daemon {
    child: std::process::Child,
    socket: PathBuf,
}

impl Daemon {
    /// Starts `ptyd serve` (the release binary built with this bench) on a socket in the bench's
    /// temp dir, with the contract defaults except the given total session limit.
    fn spawn(setup: &Setup, name: &str, sessions_total: usize) -> Daemon {
        let socket = setup.dir.path().join(format!("{name}.sock"));
        let config = setup.dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "close_grace_ms = 200\nstate_dir = \"{}\"\n[limits]\nsessions_total = {sessions_total}\n",
                setup.dir.path().join(format!("{name}-state")).display()
            ),
        )
        .expect("write the daemon's config file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ptyd"));
        cmd.arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--config")
            .arg(&config)
            .env_clear()
            .envs(setup.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; the daemon ends (closing its sessions) if the bench
        // dies without dropping it.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn ptyd serve");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "ptyd serve did not listen");
            std::thread::sleep(Duration::from_millis(10));
        }
        Daemon { child, socket }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SIGTERM: the daemon closes every session (process trees included) and exits.
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(self.pid(), libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// ptyd's client: the Terminals service and health on one channel.
struct Client {
    rt: tokio::runtime::Runtime,
    terminals: TerminalsClient<Channel>,
    health: HealthClient<Channel>,
}

impl Client {
    fn connect(socket: &Path) -> Client {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime");
        let channel = rt
            .block_on(ptyd::client::channel(socket))
            .expect("connect to ptyd");
        Client {
            rt,
            terminals: TerminalsClient::new(channel.clone())
                .max_decoding_message_size(ptyd::client::MAX_MESSAGE_BYTES),
            health: HealthClient::new(channel),
        }
    }

    /// Opens a bash session; returns its id and the shell's pid.
    fn open(&mut self, agent: &str) -> (String, i32) {
        self.open_in(agent, None)
    }

    /// Opens a bash session inside `sandbox` when given.
    fn open_in(&mut self, agent: &str, sandbox: Option<ptyd::pb::Sandbox>) -> (String, i32) {
        let req = OpenRequest {
            agent_id: agent.into(),
            r#type: "bash".into(),
            cols: COLS.into(),
            rows: ROWS.into(),
            sandbox,
            ..Default::default()
        };
        let info = self
            .rt
            .block_on(self.terminals.open(req))
            .expect("Open")
            .into_inner()
            .session
            .expect("session info");
        (info.session_id, info.pid as i32)
    }

    /// Sends `text` + Enter (nothing at all, only waiting, when `text` is empty); returns the
    /// wait reason and the rendered result.
    fn send(&mut self, agent: &str, sid: &str, text: &str) -> (WaitReason, String) {
        let req = SendRequest {
            agent_id: agent.into(),
            session_id: sid.into(),
            text: text.into(),
            submit: Some(!text.is_empty()),
            timeout_ms: 600_000,
            ..Default::default()
        };
        let resp = self
            .rt
            .block_on(self.terminals.send(req))
            .expect("Send")
            .into_inner();
        match resp.result {
            Some(send_response::Result::Foreground(fr)) => (fr.wait_reason(), resp.rendered),
            other => panic!("expected a foreground result, got {other:?}"),
        }
    }

    fn send_expect(&mut self, agent: &str, sid: &str, text: &str, want: WaitReason) {
        let (got, rendered) = self.send(agent, sid, text);
        assert_eq!(got, want, "ptyd: Send({text:?}) answered:\n{rendered}");
    }

    /// Sends `text` and waits until the prompt is back, with pure waits after any other answer
    /// (a wrong one: the command had not finished). Returns how many wrong answers came first.
    fn run_to_prompt(&mut self, agent: &str, sid: &str, text: &str) -> usize {
        let mut wrong = 0;
        let (mut reason, mut rendered) = self.send(agent, sid, text);
        while reason != WaitReason::Prompt {
            wrong += 1;
            assert!(
                wrong < 100,
                "ptyd: Send({text:?}) never reached the prompt:\n{rendered}"
            );
            (reason, rendered) = self.send(agent, sid, "");
        }
        wrong
    }

    /// Reads the newest line of a session's history.
    fn read_one(&mut self, agent: &str, sid: &str) {
        let req = ReadRequest {
            agent_id: agent.into(),
            session_id: sid.into(),
            count: 1,
            ..Default::default()
        };
        self.rt.block_on(self.terminals.read(req)).expect("Read");
    }

    fn health_check(&mut self) {
        self.rt
            .block_on(self.health.check(HealthCheckRequest {
                service: String::new(),
            }))
            .expect("Health/Check");
    }
}

// ---------------------------------------------------------------------------------------------
// The raw floor: bash on a bare PTY, written and read directly

const MARK_C: &[u8] = b"\x1b]133;C";
const MARK_D: &[u8] = b"\x1b]133;D";
const MARK_B: &[u8] = b"\x1b]133;B";
const MARK_A: &[u8] = b"\x1b]133;A";

struct RawShell {
    master: Option<Box<dyn MasterPty + Send>>,
    fd: RawFd,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    pid: i32,
    tty: String,
    buf: Vec<u8>,
    /// Bytes read past the last mark found, consumed by the next read.
    unread: Vec<u8>,
}

impl RawShell {
    fn spawn(setup: &Setup) -> RawShell {
        RawShell::spawn_argv(setup, &setup.bash_argv())
    }

    fn spawn_argv(setup: &Setup, argv: &[String]) -> RawShell {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::from_argv(argv.iter().map(Into::into).collect());
        cmd.env_clear();
        for (k, v) in &setup.env {
            cmd.env(k, v);
        }
        cmd.cwd(&setup.home);
        let child = pair.slave.spawn_command(cmd).expect("spawn bash on a PTY");
        drop(pair.slave);
        let fd = pair.master.as_raw_fd().expect("master fd");
        let tty = pair
            .master
            .tty_name()
            .expect("tty name")
            .display()
            .to_string();
        let pid = child.process_id().expect("pid") as i32;
        // SAFETY: plain fcntl flag manipulation on the master fd we own.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        let mut shell = RawShell {
            master: Some(pair.master),
            fd,
            child,
            pid,
            tty,
            buf: vec![0; 64 * 1024],
            unread: Vec::new(),
        };
        shell.read_until(MARK_B, Duration::from_secs(20));
        shell
    }

    fn write_all(&self, mut data: &[u8]) {
        while !data.is_empty() {
            // SAFETY: data is valid for reads of its length.
            let n = unsafe { libc::write(self.fd, data.as_ptr().cast(), data.len()) };
            assert!(n > 0, "write to the PTY failed");
            data = &data[n as usize..];
        }
    }

    /// Reads one chunk, waiting up to `wait` for one; 0 when none came (at once when `wait` is
    /// zero). The master is non-blocking: a read first, `poll` only when nothing is there, the
    /// fewest syscalls a reader can make.
    fn read_chunk(&mut self, wait: Duration) -> usize {
        if !self.unread.is_empty() {
            let n = self.unread.len().min(self.buf.len());
            self.buf[..n].copy_from_slice(&self.unread[..n]);
            self.unread.drain(..n);
            return n;
        }
        loop {
            // SAFETY: buf is valid for writes of its length.
            let n = unsafe { libc::read(self.fd, self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n > 0 {
                return n as usize;
            }
            let err = std::io::Error::last_os_error();
            assert!(
                n < 0 && err.kind() == std::io::ErrorKind::WouldBlock,
                "the bare PTY hung up: {err}"
            );
            let mut pfd = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let timeout = wait.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, timeout) } <= 0 {
                return 0;
            }
        }
    }

    /// Reads (and discards) output until `mark` appears; returns the bytes and reads it took.
    fn read_until(&mut self, mark: &[u8], timeout: Duration) -> (u64, u64) {
        let deadline = Instant::now() + timeout;
        let mut carry: Vec<u8> = Vec::new();
        let (mut bytes, mut reads) = (0u64, 0u64);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "timed out waiting for a mark on the bare PTY"
            );
            let n = self.read_chunk(left.min(Duration::from_secs(1)));
            if n == 0 {
                continue;
            }
            bytes += n as u64;
            reads += 1;
            if let Some(end) = find_mark(&carry, &self.buf[..n], mark) {
                self.unread = self.buf[end..n].to_vec();
                bytes -= (n - end) as u64;
                return (bytes, reads);
            }
            let keep = (mark.len() - 1).min(n);
            if n >= mark.len() - 1 {
                carry.clear();
            }
            carry.extend_from_slice(&self.buf[n - keep..n]);
            let excess = carry.len().saturating_sub(mark.len() - 1);
            carry.drain(..excess);
        }
    }

    /// Everything already written, without waiting.
    fn drain_now(&mut self, into: &mut Vec<u8>) {
        loop {
            let n = self.read_chunk(Duration::ZERO);
            if n == 0 {
                return;
            }
            into.extend_from_slice(&self.buf[..n]);
        }
    }

    /// Runs `cmd` and waits for its end mark, then for the next prompt (untimed).
    fn run(&mut self, cmd: &str) -> (Duration, u64, u64) {
        let t0 = Instant::now();
        self.write_all(format!("{cmd}\r").as_bytes());
        let (bytes, reads) = self.read_until(MARK_D, Duration::from_secs(600));
        let elapsed = t0.elapsed();
        self.read_until(MARK_B, Duration::from_secs(20));
        (elapsed, bytes, reads)
    }
}

impl Drop for RawShell {
    fn drop(&mut self) {
        // Closing the master hangs the session up; then make sure the shell is gone.
        drop(self.master.take());
        // SAFETY: signalling the shell's own process group (it is a session leader).
        unsafe {
            libc::kill(-self.pid, libc::SIGHUP);
            libc::kill(self.pid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// The offset in `chunk` just past `mark`, looking across the boundary with `carry` (the end of
/// the previous chunk).
fn find_mark(carry: &[u8], chunk: &[u8], mark: &[u8]) -> Option<usize> {
    if !carry.is_empty() {
        let mut joined = carry.to_vec();
        joined.extend_from_slice(&chunk[..chunk.len().min(mark.len() - 1)]);
        if let Some(p) = find(&joined, mark) {
            return Some(p + mark.len() - carry.len());
        }
    }
    find(chunk, mark).map(|p| p + mark.len())
}

/// The stdin probe as a floor's poll runs it, with the foreground group from /proc (the floor
/// holds no master to ask; the daemon asks its master).
fn floor_terminal_reader(pid: i32, tty: &str) -> Option<ptyd::process::stdin_probe::Reader> {
    let fg = ptyd::process::procfs::tpgid(pid)?;
    ptyd::process::stdin_probe::terminal_reader(pid, fg, tty, false)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = hay[from..].iter().position(|b| *b == needle[0]) {
        let at = from + p;
        if hay[at..].starts_with(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

// ---------------------------------------------------------------------------------------------
// tmux with a private socket

struct Tmux {
    socket: PathBuf,
    env: Vec<(String, String)>,
}

impl Tmux {
    fn start(setup: &Setup) -> Tmux {
        let tmux = Tmux {
            socket: setup.dir.path().join("tmux.sock"),
            env: setup.env.clone(),
        };
        let size = [COLS.to_string(), ROWS.to_string()];
        let mut args: Vec<String> = [
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "bench",
            "-x",
            &size[0],
            "-y",
            &size[1],
            "-c",
        ]
        .map(String::from)
        .to_vec();
        args.push(setup.home.display().to_string());
        args.extend(setup.bash_argv());
        tmux.cmd(&args.iter().map(String::as_str).collect::<Vec<_>>());
        tmux.cmd(&["send-keys", "-t", "bench", "tmux wait -S ready", "Enter"]);
        tmux.cmd(&["wait", "ready"]);
        tmux
    }

    fn cmd(&self, args: &[&str]) {
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux {args:?} failed");
    }

    /// `send-keys '<cmd>; tmux wait -S done' Enter` + `wait done`: how tmux harnesses run a
    /// command and wait for its end.
    fn run(&self, cmd: &str) -> Duration {
        let t0 = Instant::now();
        let line = format!("{cmd}; tmux wait -S done");
        self.cmd(&["send-keys", "-t", "bench", &line, "Enter"]);
        self.cmd(&["wait", "done"]);
        t0.elapsed()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

// ---------------------------------------------------------------------------------------------
// /proc helpers

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The peak RSS (VmHWM) of `pid` in KiB since it started or since `reset_peak_rss`.
fn peak_rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Makes `pid`'s peak RSS its current RSS (proc(5): `clear_refs`, value 5).
fn reset_peak_rss(pid: i32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the daemon's peak RSS");
}

/// Private memory (USS: private clean + dirty pages) of `pid` in KiB.
fn private_kib(pid: i32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some(field("Private_Clean:")? + field("Private_Dirty:")?)
}

/// utime + stime of `pid`, in seconds.
fn cpu_seconds(pid: i32) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let u = ptyd::process::procfs::cpu_ticks(pid).unwrap_or(0);
    u as f64 / tick
}

/// What the stdin floor waits for.
#[derive(Clone, Copy)]
enum Reader {
    /// The shell itself blocked in `read(0)` (the `read` builtin).
    ShellRead,
    /// A process other than the shell blocked reading the terminal (a REPL).
    Program,
}

// ---------------------------------------------------------------------------------------------
// Cases

/// Sessions a daemon of the ordinary cases may hold (the contract default).
const DAEMON_SESSIONS: usize = 256;
const AGENT: &str = "bench";

/// `ptyd mcp` on stdio, spoken to as a minimal MCP client: newline-delimited JSON-RPC, one
/// request at a time.
struct McpStdio {
    child: std::process::Child,
    /// None once closed (on drop).
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl McpStdio {
    /// Starts `ptyd mcp` on the daemon's socket and completes the MCP handshake.
    fn start(setup: &Setup, socket: &Path) -> McpStdio {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ptyd"));
        cmd.arg("mcp")
            .arg("--socket")
            .arg(socket)
            .arg("--agent-id")
            .arg("bench-mcp")
            .env_clear()
            .envs(setup.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn ptyd mcp");
        let stdin = child.stdin.take().expect("mcp stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("mcp stdout"));
        let mut mcp = McpStdio {
            child,
            stdin: Some(stdin),
            stdout,
            next_id: 0,
        };
        mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "ptyd-bench", "version": "1"}}),
        );
        mcp.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn write(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("ptyd mcp's stdin is open");
        stdin.write_all(line.as_bytes()).expect("write to ptyd mcp");
        stdin.flush().expect("flush ptyd mcp's stdin");
    }

    /// Sends a request and returns its result (skipping any notification in between).
    fn request(&mut self, method: &str, params: Value) -> Value {
        use std::io::BufRead as _;
        self.next_id += 1;
        let id = self.next_id;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self
                .stdout
                .read_line(&mut line)
                .expect("read from ptyd mcp");
            assert!(n > 0, "ptyd mcp closed its stdout");
            let message: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// `tools/call`; returns the text the model reads (the server's default: one text block).
    fn call(&mut self, tool: &str, arguments: Value) -> String {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert_ne!(result["isError"], true, "{tool}: {result}");
        result["content"][0]["text"]
            .as_str()
            .expect("a text block")
            .to_owned()
    }

    /// `terminal_send` of `text`, then empty sends until the prompt; returns the wrong answers.
    fn run_to_prompt(&mut self, sid: &str, text: &str) -> usize {
        let at_prompt = |result: &str| result.lines().any(|l| l == "[wait: prompt]");
        let mut wrong = 0;
        let mut result = self.call(
            "terminal_send",
            json!({"session_id": sid, "text": text, "timeout_ms": 600000}),
        );
        while !at_prompt(&result) {
            wrong += 1;
            assert!(
                wrong < 100,
                "ptyd mcp: {text:?} never reached the prompt: {result}"
            );
            result = self.call(
                "terminal_send",
                json!({"session_id": sid, "timeout_ms": 600000}),
            );
        }
        wrong
    }
}

impl Drop for McpStdio {
    fn drop(&mut self) {
        // Closing stdin ends the server (it closes its sessions first).
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `terminal_send("true")` through `ptyd mcp` on stdio against gRPC `Send` on the same daemon,
/// interleaved so slow phases of the machine hit both.
fn case_mcp(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("mcp send latency ...");
    let daemon = Daemon::spawn(setup, "mcp", DAEMON_SESSIONS);
    let mut client = Client::connect(&daemon.socket);
    let (sid, _) = client.open(AGENT);
    let mut mcp = McpStdio::start(setup, &daemon.socket);
    let opened = mcp.call(
        "terminal_open",
        json!({"type": "bash", "cols": COLS, "rows": ROWS}),
    );
    // "started terminal session t2 [type: bash]"
    let msid = opened
        .split_whitespace()
        .nth(3)
        .expect("the session id")
        .to_owned();
    let mut wrong = 0;
    for _ in 0..20 {
        wrong += client.run_to_prompt(AGENT, &sid, "true");
        wrong += mcp.run_to_prompt(&msid, "true");
    }
    let (mut m, mut g) = (Vec::new(), Vec::new());
    for _ in 0..MCP_ROUNDS {
        for _ in 0..MCP_PER_ROUND {
            let t0 = Instant::now();
            wrong += mcp.run_to_prompt(&msid, "true");
            m.push(ms(t0.elapsed()));
        }
        for _ in 0..MCP_PER_ROUND {
            let t0 = Instant::now();
            wrong += client.run_to_prompt(AGENT, &sid, "true");
            g.push(ms(t0.elapsed()));
        }
    }
    let (mp50, gp50) = (p50(&m), p50(&g));
    rows.push(Row {
        case: "MCP terminal_send p50 (p99)".into(),
        ptyd: format!("{} ({})", fmt_ms(mp50), fmt_ms(p99(&m))),
        baselines: format!("gRPC Send {} ({})", fmt_ms(gp50), fmt_ms(p99(&g))),
        ratio: format!("{:.2}x gRPC", mp50 / gp50),
        bar: "<= 1.5x gRPC".into(),
        pass: Some(mp50 <= 1.5 * gp50),
        json: json!({
            "mcp_ms": {"p50": mp50, "p99": p99(&m), "n": m.len()},
            "grpc_ms": {"p50": gp50, "p99": p99(&g), "n": g.len()},
            "wrong_wait_reasons": wrong,
        }),
    });
}

fn case_send(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("send latency ...");
    let daemon = Daemon::spawn(setup, "send", DAEMON_SESSIONS);
    let mut client = Client::connect(&daemon.socket);
    let (sid, _) = client.open(AGENT);
    // The tightest sandbox: its own directory writable, only the system readable, no network.
    let paths = |p: &[&str]| {
        Some(ptyd::pb::SandboxPaths {
            paths: p.iter().map(|s| s.to_string()).collect(),
        })
    };
    let (sandboxed, _) = client.open_in(
        AGENT,
        Some(ptyd::pb::Sandbox {
            write: paths(&["$CWD"]),
            read: paths(&[]),
            network: "off".into(),
            ..Default::default()
        }),
    );
    // The floor: bash with only the four marks on a bare PTY; beside it, the same bash with
    // ptyd's own integration, to show what that costs per prompt.
    let mut raw = RawShell::spawn_argv(setup, &setup.minimal_bash_argv());
    let mut raw_ptyd = RawShell::spawn(setup);
    let tmux = Tmux::start(setup);
    // Warm-up.
    let mut wrong = 0;
    for _ in 0..20 {
        wrong += client.run_to_prompt(AGENT, &sid, "true");
        wrong += client.run_to_prompt(AGENT, &sandboxed, "true");
        raw.run("true");
        raw_ptyd.run("true");
        client.health_check();
    }
    tmux.run("true");
    let (mut p, mut f, mut t) = (Vec::new(), Vec::new(), Vec::new());
    let (mut fa, mut health, mut read1) = (Vec::new(), Vec::new(), Vec::new());
    let (mut boxed, mut with_ptyd_rc) = (Vec::new(), Vec::new());
    for _ in 0..LATENCY_ROUNDS {
        for _ in 0..LATENCY_PTYD_PER_ROUND {
            let t0 = Instant::now();
            // A wrong early answer is counted, and the time until the real prompt measured.
            wrong += client.run_to_prompt(AGENT, &sid, "true");
            p.push(ms(t0.elapsed()));
            let t0 = Instant::now();
            wrong += client.run_to_prompt(AGENT, &sandboxed, "true");
            boxed.push(ms(t0.elapsed()));
        }
        for _ in 0..LATENCY_FLOOR_PER_ROUND {
            let t0 = Instant::now();
            raw.write_all(b"true\r");
            raw.read_until(MARK_D, Duration::from_secs(20));
            let end_mark = t0.elapsed();
            raw.read_until(MARK_A, Duration::from_secs(20));
            let prompt_mark = t0.elapsed();
            let t1 = Instant::now();
            client.health_check();
            let rpc = t1.elapsed();
            f.push(ms(end_mark + rpc));
            fa.push(ms(prompt_mark + rpc));
            raw.read_until(MARK_B, Duration::from_secs(20));
            let t0 = Instant::now();
            raw_ptyd.write_all(b"true\r");
            raw_ptyd.read_until(MARK_D, Duration::from_secs(20));
            with_ptyd_rc.push(ms(t0.elapsed()));
            raw_ptyd.read_until(MARK_B, Duration::from_secs(20));
        }
        // The daemon's own share: an RPC that goes through the session actor and back.
        for _ in 0..LATENCY_FLOOR_PER_ROUND / 2 {
            let t0 = Instant::now();
            client.health_check();
            health.push(ms(t0.elapsed()));
            let t0 = Instant::now();
            client.read_one(AGENT, &sid);
            read1.push(ms(t0.elapsed()));
        }
        for _ in 0..LATENCY_TMUX_PER_ROUND {
            t.push(ms(tmux.run("true")));
        }
    }
    let (pp50, fp50, tp50) = (p50(&p), p50(&f), p50(&t));
    let json = json!({
        "raw_floor_to_prompt_mark_ms": {"p50": p50(&fa), "p99": p99(&fa)},
        "health_check_ms": {"p50": p50(&health)},
        "read_one_line_ms": {"p50": p50(&read1)},
        "ptyd_wrong_wait_reasons": wrong,
        "ptyd_ms": {"p50": pp50, "p99": p99(&p), "n": p.len()},
        "raw_floor_ms": {"p50": fp50, "p99": p99(&f), "n": f.len()},
        "raw_with_ptyd_integration_ms": {"p50": p50(&with_ptyd_rc)},
        "tmux_ms": {"p50": tp50, "p99": p99(&t), "n": t.len()},
    });
    rows.push(Row {
        case: "send latency p50 (p99)".into(),
        ptyd: format!("{} ({})", fmt_ms(pp50), fmt_ms(p99(&p))),
        baselines: format!(
            "floor (four marks) {} ({}); floor to the prompt mark {}; tmux {} ({})",
            fmt_ms(fp50),
            fmt_ms(p99(&f)),
            fmt_ms(p50(&fa)),
            fmt_ms(tp50),
            fmt_ms(p99(&t))
        ),
        ratio: format!("{:.2}x floor", pp50 / fp50),
        bar: "<= 1.3x floor".into(),
        pass: Some(pp50 <= 1.3 * fp50),
        json: json.clone(),
    });
    let bp50 = p50(&boxed);
    rows.push(Row {
        case: "send latency, sandboxed session p50 (p99)".into(),
        ptyd: format!("{} ({})", fmt_ms(bp50), fmt_ms(p99(&boxed))),
        baselines: format!(
            "plain session {} ({}); floor {}",
            fmt_ms(pp50),
            fmt_ms(p99(&p)),
            fmt_ms(fp50)
        ),
        ratio: format!("{:.2}x floor, {:.2}x plain", bp50 / fp50, bp50 / pp50),
        bar: "<= 1.3x floor".into(),
        pass: Some(bp50 <= 1.3 * fp50),
        json: json!({
            "sandbox": "write $CWD; read none; network off",
            "sandboxed_ms": {"p50": bp50, "p99": p99(&boxed), "n": boxed.len()},
            "plain_ms": {"p50": pp50, "p99": p99(&p), "n": p.len()},
            "raw_floor_ms": {"p50": fp50},
        }),
    });
    rows.push(Row::info(
        "info: bare PTY to the end mark, four marks vs ptyd's integration",
        fmt_ms(p50(&with_ptyd_rc)),
        format!(
            "four marks {} (the floor less its RPC)",
            fmt_ms(fp50 - p50(&health))
        ),
        json.clone(),
    ));
    rows.push(Row::info(
        "info: RPC p50, Read of 1 line (through the actor)",
        fmt_ms(p50(&read1)),
        format!("Health/Check {}", fmt_ms(p50(&health))),
        json.clone(),
    ));
    rows.push(Row {
        case: "send: answers other than prompt".into(),
        ptyd: format!("{wrong} of {}", p.len() + boxed.len() + 40),
        baselines: String::new(),
        ratio: String::new(),
        bar: "0".into(),
        pass: Some(wrong == 0),
        json: json.clone(),
    });
    rows.push(Row {
        case: "send latency vs tmux".into(),
        ptyd: fmt_ms(pp50),
        baselines: format!("tmux {}", fmt_ms(tp50)),
        ratio: format!("{:.1}x faster", tp50 / pp50),
        bar: ">= 10x faster".into(),
        pass: Some(tp50 >= 10.0 * pp50),
        json,
    });
    case_send_python(setup, &daemon.socket, tp50, rows);
}

/// Send latency as a Python harness sees it (issue 12): `benches/python_send.py` measures, with
/// grpcio and compiled stubs, the same bash on a bare PTY, an empty RPC and ptyd's `Send("true")`
/// interleaved in one run; the floor is bare PTY + empty RPC of the same round.
fn case_send_python(setup: &Setup, socket: &Path, tmux_p50: f64, rows: &mut Vec<Row>) {
    eprintln!("send latency from Python grpcio ...");
    let env: serde_json::Map<String, Value> = setup
        .env
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/python_send.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg("--socket")
        .arg(socket)
        .arg("--bash-argv")
        .arg(json!(setup.minimal_bash_argv()).to_string())
        .arg("--env")
        .arg(Value::Object(env).to_string())
        .arg("--cwd")
        .arg(&setup.home)
        .arg("--sends")
        .arg((LATENCY_ROUNDS * LATENCY_PTYD_PER_ROUND).to_string())
        .arg("--rounds")
        .arg(LATENCY_ROUNDS.to_string())
        .stderr(Stdio::inherit())
        .output()
        .expect("run python3");
    let json: Value = match serde_json::from_slice(&out.stdout) {
        Ok(json) if out.status.success() => json,
        _ => {
            rows.push(Row {
                case: "send latency, Python grpcio p50 (p99)".into(),
                ptyd: "not measured".into(),
                baselines: format!(
                    "{script:?} failed ({}); it needs `pip install grpcio grpcio-tools`",
                    out.status
                ),
                ratio: String::new(),
                bar: "<= 1.3x floor".into(),
                pass: Some(false),
                json: Value::Null,
            });
            return;
        }
    };
    let get = |what: &str, q: &str| json[what][q].as_f64().unwrap_or(f64::NAN);
    let (pp50, pp99) = (get("ptyd_ms", "p50"), get("ptyd_ms", "p99"));
    let (fp50, fp99) = (get("floor_ms", "p50"), get("floor_ms", "p99"));
    let version = json["grpcio_version"].as_str().unwrap_or("?").to_owned();
    rows.push(Row {
        case: "send latency, Python grpcio p50 (p99)".into(),
        ptyd: format!("{} ({})", fmt_ms(pp50), fmt_ms(pp99)),
        baselines: format!(
            "floor {} ({}) = bare PTY (four marks) + Health/Check {} from the same channel; grpcio {version}",
            fmt_ms(fp50),
            fmt_ms(fp99),
            fmt_ms(get("rpc_ms", "p50")),
        ),
        ratio: format!("{:.2}x floor, p99 {:.2}x", pp50 / fp50, pp99 / fp99),
        bar: "p50 <= 1.3x, p99 <= 2x floor".into(),
        pass: Some(pp50 <= 1.3 * fp50 && pp99 <= 2.0 * fp99),
        json: json.clone(),
    });
    let wrong = json["wrong_wait_reasons"].as_u64().unwrap_or(u64::MAX);
    rows.push(Row {
        case: "send latency, Python grpcio vs tmux".into(),
        ptyd: fmt_ms(pp50),
        // The floor itself against tmux: how far any daemon reached from this client can go.
        baselines: format!(
            "tmux {}; the floor is {:.1}x faster than tmux; answers other than prompt: {wrong}",
            fmt_ms(tmux_p50),
            tmux_p50 / fp50
        ),
        ratio: format!("{:.1}x faster", tmux_p50 / pp50),
        bar: ">= 12x faster, 0 wrong".into(),
        pass: Some(tmux_p50 >= 12.0 * pp50 && wrong == 0),
        json,
    });
}

fn case_stdin(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("stdin detection ...");
    let daemon = Daemon::spawn(setup, "stdin", DAEMON_SESSIONS);
    let mut client = Client::connect(&daemon.socket);
    let (sid, session_pid) = client.open(AGENT);
    let session_tty = std::fs::read_link(format!("/proc/{session_pid}/fd/0"))
        .expect("the session shell's terminal")
        .to_string_lossy()
        .into_owned();
    let mut raw = RawShell::spawn(setup);
    // What the daemon's /proc work costs, on the bare shell at its prompt: the snapshot taken
    // before every write (`task_switches`) and one stdin probe (`terminal_reader`).
    let (mut snap, mut probe) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        let t0 = Instant::now();
        std::hint::black_box(ptyd::process::stdin_probe::task_switches(raw.pid));
        snap.push(ms(t0.elapsed()));
        let t0 = Instant::now();
        std::hint::black_box(floor_terminal_reader(raw.pid, &raw.tty));
        probe.push(ms(t0.elapsed()));
    }
    rows.push(Row::info(
        "info: /proc snapshot before each write (task_switches) p50",
        fmt_ms(p50(&snap)),
        format!("one stdin probe (terminal_reader) {}", fmt_ms(p50(&probe))),
        json!({"task_switches_ms": {"p50": p50(&snap)}, "terminal_reader_ms": {"p50": p50(&probe)}}),
    ));
    let cases = [
        ("read x", "x", Reader::ShellRead, STDIN_READ_ITERS),
        ("python3", "exit()", Reader::Program, STDIN_PYTHON_ITERS),
    ];
    for (cmd, answer, kind, iters) in cases {
        // Every contender is timed from the same event, the write of the command: ptyd from the
        // Send (the RPC's share is in the send-latency case's Read of 1 line, ~0.03 ms), the floor
        // from its own write to the PTY; each until it reports the reader. Both are durations
        // from the write, so neither can be negative; their difference is what ptyd's detection
        // costs beyond a 1 ms /proc poll that sees the same reader.
        //
        // A program's start-up (python3: ~50-200 ms) varies far more than detection costs, so
        // for a program the floor's poll watches the very process ptyd started, in the same
        // send, rather than a second interpreter on the bare PTY. A shell's own `read` cannot
        // be told apart from its line editor that way (both are the shell reading), so there
        // the floor runs on the bare PTY and starts looking once the command-start mark shows.
        let (mut p_tot, mut f_tot) = (vec![], vec![]);
        for i in 0..iters + 2 {
            let warm = i < 2;
            let t0 = Instant::now();
            let observer = matches!(kind, Reader::Program).then(|| {
                let tty = session_tty.clone();
                std::thread::spawn(move || {
                    loop {
                        std::thread::sleep(FLOOR_POLL);
                        let found =
                            floor_terminal_reader(session_pid, &tty).is_some_and(|r| !r.is_shell);
                        if found {
                            break t0.elapsed();
                        }
                        assert!(t0.elapsed() < Duration::from_secs(30), "floor: no reader");
                    }
                })
            });
            client.send_expect(AGENT, &sid, cmd, WaitReason::StdinRead);
            let detected = t0.elapsed();
            let observed = observer.map(|o| o.join().expect("the floor's poll"));
            client.run_to_prompt(AGENT, &sid, answer);
            if !warm {
                p_tot.push(ms(detected));
                if let Some(observed) = observed {
                    f_tot.push(ms(observed));
                }
            }
            if observed.is_some() {
                continue; // a program: the floor watched ptyd's own session
            }

            let t0 = Instant::now();
            raw.write_all(format!("{cmd}\r").as_bytes());
            let mut seen = Vec::new();
            let detected = loop {
                std::thread::sleep(FLOOR_POLL);
                raw.drain_now(&mut seen);
                let started = find(&seen, MARK_C).is_some();
                let found = floor_terminal_reader(raw.pid, &raw.tty).is_some_and(|r| r.is_shell);
                if started && found {
                    break t0.elapsed();
                }
                assert!(t0.elapsed() < Duration::from_secs(30), "floor: no reader");
            };
            raw.run(answer);
            if !warm {
                f_tot.push(ms(detected));
            }
        }
        let (pt, ft) = (p50(&p_tot), p50(&f_tot));
        let beyond_floor = pt - ft;
        rows.push(Row {
            case: format!("stdin detection p50 from the write: {cmd}"),
            ptyd: format!("{} (p99 {})", fmt_ms(pt), fmt_ms(p99(&p_tot))),
            baselines: format!(
                "floor (1 ms poll{}) {} (p99 {})",
                match kind {
                    Reader::ShellRead => ", bare PTY",
                    Reader::Program => " of ptyd's own session",
                },
                fmt_ms(ft),
                fmt_ms(p99(&f_tot))
            ),
            ratio: format!("{beyond_floor:+.2} ms vs floor"),
            bar: "< 5 ms beyond the floor".into(),
            pass: Some(beyond_floor < 5.0),
            json: json!({
                "command": cmd,
                "ptyd_from_write_ms": {"p50": pt, "p99": p99(&p_tot), "n": p_tot.len()},
                "floor_from_write_ms": {"p50": ft, "p99": p99(&f_tot), "n": f_tot.len()},
                "ptyd_beyond_floor_ms": beyond_floor,
                "floor_poll_us": FLOOR_POLL.as_micros() as u64,
            }),
        });
    }
}

fn stream_bytes(cmd: &str) -> u64 {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} | wc -c"))
        .stderr(Stdio::null())
        .output()
        .expect("measure a stream");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("wc -c output")
}

fn case_ingest(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("ingest throughput ...");
    let daemon = Daemon::spawn(setup, "ingest", DAEMON_SESSIONS);
    let mut client = Client::connect(&daemon.socket);
    let (sid, _) = client.open(AGENT);
    let mut raw = RawShell::spawn(setup);
    let tmux = Tmux::start(setup);
    for (name, cmd) in INGEST_STREAMS {
        let (row, _, _) = ingest_row(&mut client, &sid, &mut raw, &tmux, name, cmd);
        rows.push(row);
    }
}

/// `cmd` run to its end `INGEST_REPS` times by ptyd (session `sid`), the raw floor and tmux in
/// turn: the `ingest MB/s: {name}` row (the best of each), ptyd's best, and ptyd's answers
/// other than prompt.
fn ingest_row(
    client: &mut Client,
    sid: &str,
    raw: &mut RawShell,
    tmux: &Tmux,
    name: &str,
    cmd: &str,
) -> (Row, f64, usize) {
    let bytes = stream_bytes(cmd);
    let mb = bytes as f64 / 1e6;
    let (mut p, mut f, mut t) = (vec![], vec![], vec![]);
    let (mut pty_bytes, mut reads, mut wrong) = (0, 0, 0);
    for rep in 0..INGEST_REPS {
        eprintln!("  {name} rep {}", rep + 1);
        let t0 = Instant::now();
        wrong += client.run_to_prompt(AGENT, sid, cmd);
        p.push(mb / t0.elapsed().as_secs_f64());
        let (elapsed, b, r) = raw.run(cmd);
        f.push(mb / elapsed.as_secs_f64());
        (pty_bytes, reads) = (b, r);
        t.push(mb / tmux.run(cmd).as_secs_f64());
    }
    let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let (pb, fb, tb) = (best(&p), best(&f), best(&t));
    let row = Row {
        case: format!("ingest MB/s: {name}"),
        ptyd: format!("{pb:.1}"),
        baselines: format!("floor {fb:.1}; tmux {tb:.1}"),
        ratio: format!("{:.2}x floor", pb / fb),
        bar: ">= 0.9x floor".into(),
        pass: Some(pb >= 0.9 * fb),
        json: json!({
            "command": cmd,
            "ptyd_wrong_wait_reasons": wrong,
            "stream_bytes": bytes,
            "pty_bytes": pty_bytes,
            "floor_bytes_per_read": pty_bytes as f64 / reads.max(1) as f64,
            "ptyd_mb_s": p, "raw_floor_mb_s": f, "tmux_mb_s": t,
            "best": {"ptyd": pb, "raw_floor": fb, "tmux": tb},
        }),
    };
    (row, pb, wrong)
}

/// `HOSTILE_IDLE_SENDS` times `Send("true")` to session `sid` (ms each), adding the answers
/// other than prompt to `wrong`.
fn idle_sends(client: &mut Client, sid: &str, wrong: &mut usize) -> Vec<f64> {
    (0..HOSTILE_IDLE_SENDS)
        .map(|_| {
            let t0 = Instant::now();
            *wrong += client.run_to_prompt(AGENT, sid, "true");
            ms(t0.elapsed())
        })
        .collect()
}

/// One session's hostile output and what it costs everyone else (issue 21): a 66 KB stream of
/// `CSI 99999999 b` (REP, 6 000 times, each painting a row), and one 100 MB OSC string.
/// Meanwhile another session's `Send("true")` is timed, against the same send with nothing else
/// running in the same run. The REP stream is sent `HOSTILE_REP_PASSES` times in a row, so the
/// other session is timed over more than a moment. The daemon's RSS growth is its peak (VmHWM,
/// reset before) during one pass of each stream, less its size before.
fn case_hostile(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("hostile output ...");
    let daemon = Daemon::spawn(setup, "hostile", DAEMON_SESSIONS);
    let mut client = Client::connect(&daemon.socket);
    let (victim, _) = client.open(AGENT);
    let (other, _) = client.open(AGENT);
    let rep = setup.dir.path().join("rep.bin");
    let mut stream = b"x".to_vec();
    for _ in 0..HOSTILE_REPS {
        stream.extend_from_slice(b"\x1b[99999999b");
    }
    std::fs::write(&rep, &stream).expect("write the REP stream");
    let mut wrong = 0;
    let idle = idle_sends(&mut client, &other, &mut wrong);
    let osc = "printf '\\033]2;'; head -c 100000000 /dev/zero | tr '\\0' a; printf '\\a'";
    let streams = [
        (
            "66 KB REP stream",
            format!("cat {}", rep.display()),
            HOSTILE_REP_PASSES,
        ),
        ("100 MB OSC", osc.to_owned(), 1),
    ];
    for (name, cmd, passes) in streams {
        let before = rss_kib(daemon.pid()).unwrap_or(0);
        reset_peak_rss(daemon.pid());
        let socket = daemon.socket.clone();
        let flooding = victim.clone();
        let pid = daemon.pid();
        // Returns the answers other than prompt and the daemon's peak RSS over the first pass.
        let flood = std::thread::spawn(move || {
            let mut c = Client::connect(&socket);
            let mut wrong = c.run_to_prompt(AGENT, &flooding, &cmd);
            let peak = peak_rss_kib(pid).unwrap_or(0);
            for _ in 1..passes {
                wrong += c.run_to_prompt(AGENT, &flooding, &cmd);
            }
            (wrong, peak)
        });
        let mut meanwhile = Vec::new();
        while !flood.is_finished() {
            let t0 = Instant::now();
            wrong += client.run_to_prompt(AGENT, &other, "true");
            meanwhile.push(ms(t0.elapsed()));
        }
        let (flood_wrong, peak) = flood.join().expect("the flood's sends");
        wrong += flood_wrong;
        let growth_mib = peak.saturating_sub(before) as f64 / 1024.0;
        let (m99, i99) = (p99(&meanwhile), p99(&idle));
        let json = json!({
            "command": name,
            "passes": passes,
            "other_send_true_ms": {"p50": p50(&meanwhile), "p99": m99, "n": meanwhile.len()},
            "idle_send_true_ms": {"p50": p50(&idle), "p99": i99, "n": idle.len()},
            "rss_kib": {"before": before, "peak_first_pass": peak},
            "wrong_wait_reasons": wrong,
        });
        rows.push(Row {
            case: format!("hostile {name}: another session's Send(\"true\") p99"),
            ptyd: fmt_ms(m99),
            baselines: format!("idle {} ({} sends meanwhile)", fmt_ms(i99), meanwhile.len()),
            ratio: format!("{:.1}x idle", m99 / i99),
            bar: "< 5 ms".into(),
            pass: Some(m99 < 5.0 && !meanwhile.is_empty()),
            json: json.clone(),
        });
        rows.push(Row {
            case: format!("hostile {name}: daemon RSS growth"),
            ptyd: format!("{growth_mib:.1} MiB"),
            baselines: format!("before {:.1} MiB", before as f64 / 1024.0),
            ratio: String::new(),
            bar: "< 32 MiB".into(),
            pass: Some(growth_mib < 32.0),
            json,
        });
    }
    rows.push(Row {
        case: "hostile: answers other than prompt".into(),
        ptyd: wrong.to_string(),
        baselines: String::new(),
        ratio: String::new(),
        bar: "0".into(),
        pass: Some(wrong == 0),
        json: json!({"wrong_wait_reasons": wrong}),
    });
}

/// What agents' commands print (issue 22): a coloured build log, progress bars and full-screen
/// redraws, `AGENT_STREAM_BYTES` each, `cat` to the end as the ingest rows run their streams
/// (best of `INGEST_REPS`, against the raw floor and tmux in the same run). Then, while one
/// session floods each stream, another session's `Send("true")` p50 against the same send with
/// nothing else running; and two sessions flooding the progress stream at once against one.
fn case_agent_streams(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("agent streams ...");
    let daemon = Daemon::spawn(setup, "agent-streams", DAEMON_SESSIONS);
    let mut client = Client::connect(&daemon.socket);
    let (sid, _) = client.open(AGENT);
    let (other, _) = client.open(AGENT);
    let (second, _) = client.open(AGENT);
    let mut raw = RawShell::spawn(setup);
    let tmux = Tmux::start(setup);
    let mut wrong = 0;
    let mut one_session_mb_s = std::collections::HashMap::new();
    for name in AGENT_STREAMS {
        let file = setup.dir.path().join(format!("{name}.stream"));
        std::fs::write(&file, agent_stream(name)).expect("write an agent stream");
        let cmd = format!("cat {}", file.display());
        let (row, best, rep_wrong) = ingest_row(&mut client, &sid, &mut raw, &tmux, name, &cmd);
        rows.push(row);
        wrong += rep_wrong;
        one_session_mb_s.insert(name, best);
        // Another session's sends with nothing else running, then while this one floods the
        // stream (twice over): the baseline right before, so both see the same machine.
        let idle = idle_sends(&mut client, &other, &mut wrong);
        let idle50 = p50(&idle);
        let socket = daemon.socket.clone();
        let (flooding, flood_cmd) = (sid.clone(), cmd.clone());
        let flood = std::thread::spawn(move || {
            let mut c = Client::connect(&socket);
            (0..2)
                .map(|_| c.run_to_prompt(AGENT, &flooding, &flood_cmd))
                .sum::<usize>()
        });
        let mut meanwhile = Vec::new();
        while !flood.is_finished() {
            let t0 = Instant::now();
            wrong += client.run_to_prompt(AGENT, &other, "true");
            meanwhile.push(ms(t0.elapsed()));
        }
        wrong += flood.join().expect("the flood's sends");
        let m50 = p50(&meanwhile);
        rows.push(Row {
            case: format!("fairness: another session's Send(\"true\") p50 during {name}"),
            ptyd: fmt_ms(m50),
            baselines: format!(
                "idle {} ({} sends meanwhile)",
                fmt_ms(idle50),
                meanwhile.len()
            ),
            ratio: format!("{:.2}x idle", m50 / idle50),
            bar: "<= 1.5x idle".into(),
            pass: Some(!meanwhile.is_empty() && m50 <= 1.5 * idle50),
            json: json!({"stream": name,
                         "other_send_true_ms": {"p50": m50, "p99": p99(&meanwhile),
                                                "n": meanwhile.len()},
                         "idle_send_true_ms": {"p50": idle50, "p99": p99(&idle)}}),
        });
    }
    // Two sessions flooding at once: what the daemon takes in all together, against one.
    let file = setup.dir.path().join("progress.stream");
    let cmd = format!("cat {}", file.display());
    let mb = stream_bytes(&cmd) as f64 / 1e6;
    let mut together = Vec::new();
    for _ in 0..INGEST_REPS {
        let socket = daemon.socket.clone();
        let (session, c2) = (second.clone(), cmd.clone());
        let t0 = Instant::now();
        let beside = std::thread::spawn(move || {
            Client::connect(&socket).run_to_prompt(AGENT, &session, &c2)
        });
        wrong += client.run_to_prompt(AGENT, &sid, &cmd);
        wrong += beside.join().expect("the second flood");
        together.push(2.0 * mb / t0.elapsed().as_secs_f64());
    }
    let both = together.iter().copied().fold(0.0, f64::max);
    let one = one_session_mb_s["progress"];
    rows.push(Row {
        case: "ingest MB/s: two sessions of progress at once (aggregate)".into(),
        ptyd: format!("{both:.1}"),
        baselines: format!("one session {one:.1}"),
        ratio: format!("{:.2}x one", both / one),
        bar: ">= 1.6x one (a core per session)".into(),
        pass: Some(both >= 1.6 * one),
        json: json!({"mb_s": together, "best": both, "one_session": one}),
    });
    rows.push(Row {
        case: "agent streams: answers other than prompt".into(),
        ptyd: wrong.to_string(),
        baselines: String::new(),
        ratio: String::new(),
        bar: "0".into(),
        pass: Some(wrong == 0),
        json: json!({"wrong_wait_reasons": wrong}),
    });
}

/// The bytes `seq 1 n` shows on a terminal (ONLCR: CR LF line ends).
fn seq_stream(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 1..=n {
        let _ = write!(out, "{i}\r\n");
    }
    out
}

fn case_paging(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("paging ...");
    let daemon = Daemon::spawn(setup, "paging", DAEMON_SESSIONS);
    let mut client = Client::connect(&daemon.socket);
    let (sid, _) = client.open(AGENT);
    client.run_to_prompt(AGENT, &sid, "seq 1 100000");
    // The same history in-process: the daemon's own structure, read directly.
    let mut term = Terminal::new(COLS, ROWS, 100_000, 16 << 20);
    for chunk in seq_stream(100_000).chunks(4096) {
        term.feed(chunk);
    }
    let mut ptyd_ms: Vec<Vec<f64>> = vec![Vec::new(); PAGING_OFFSETS.len()];
    let mut base_ms: Vec<Vec<f64>> = vec![Vec::new(); PAGING_OFFSETS.len()];
    for _ in 0..PAGING_READS {
        for (i, offset) in PAGING_OFFSETS.iter().enumerate() {
            let req = ReadRequest {
                agent_id: AGENT.into(),
                session_id: sid.clone(),
                offset: *offset,
                count: PAGING_LINES,
                ..Default::default()
            };
            let t0 = Instant::now();
            let resp = client
                .rt
                .block_on(client.terminals.read(req))
                .expect("Read")
                .into_inner();
            ptyd_ms[i].push(ms(t0.elapsed()));
            assert_eq!(
                resp.line_end + 1 - resp.line_begin,
                u64::from(PAGING_LINES),
                "a full page at offset {offset}"
            );
            let total = term.total_lines();
            let end = total - offset;
            let t0 = Instant::now();
            let lines = std::hint::black_box(term.lines(end + 1 - u64::from(PAGING_LINES), end));
            base_ms[i].push(ms(t0.elapsed()));
            assert_eq!(lines.len(), PAGING_LINES as usize);
        }
    }
    for (i, offset) in PAGING_OFFSETS.iter().enumerate() {
        let (pv, bv) = (p50(&ptyd_ms[i]), p50(&base_ms[i]));
        rows.push(Row {
            case: format!("paging p50: 500 lines at offset {offset}"),
            ptyd: fmt_ms(pv),
            baselines: format!("in-process Terminal::lines {}", fmt_ms(bv)),
            ratio: format!("{:.1}x", pv / bv),
            bar: "< 1 ms".into(),
            pass: Some(pv < 1.0),
            json: json!({"offset": offset, "ptyd_ms": {"p50": pv, "p99": p99(&ptyd_ms[i])},
                         "in_process_ms": {"p50": bv}}),
        });
    }
}

fn case_scale(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("scale: opening {SCALE_SESSIONS} sessions ...");
    let daemon = Daemon::spawn(setup, "scale", SCALE_SESSIONS + SCALE_AGENTS);
    let client = Client::connect(&daemon.socket);
    let daemon_pid = daemon.pid();
    // Warm-up: one session opened and closed, so lazily built state is not counted per session.
    let mut c = client.terminals.clone();
    let warm = client
        .rt
        .block_on(c.open(OpenRequest {
            agent_id: "warm".into(),
            r#type: "bash".into(),
            ..Default::default()
        }))
        .expect("Open")
        .into_inner()
        .session
        .expect("session");
    client
        .rt
        .block_on(c.close(ptyd::pb::CloseRequest {
            agent_id: "warm".into(),
            session_id: warm.session_id,
        }))
        .expect("Close");
    std::thread::sleep(Duration::from_millis(500));
    let rss_before = rss_kib(daemon_pid).expect("daemon RSS");
    let t0 = Instant::now();
    let pids: Vec<i32> = client.rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        let mut pids = Vec::new();
        for i in 0..SCALE_SESSIONS {
            while set.len() >= SCALE_CONCURRENCY {
                pids.push(set.join_next().await.expect("task").expect("join"));
            }
            let mut c = client.terminals.clone();
            set.spawn(async move {
                let info = c
                    .open(OpenRequest {
                        agent_id: format!("s{}", i % SCALE_AGENTS),
                        r#type: "bash".into(),
                        cols: COLS.into(),
                        rows: ROWS.into(),
                        ..Default::default()
                    })
                    .await
                    .expect("Open")
                    .into_inner()
                    .session
                    .expect("session");
                info.pid as i32
            });
        }
        while let Some(r) = set.join_next().await {
            pids.push(r.expect("join"));
        }
        pids
    });
    let open_s = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(2));
    let rss_after = rss_kib(daemon_pid).expect("daemon RSS");
    let per_session = (rss_after.saturating_sub(rss_before)) as f64 / SCALE_SESSIONS as f64;
    let shells: u64 = pids.iter().filter_map(|p| rss_kib(*p)).sum();
    let per_shell = shells as f64 / pids.len() as f64;
    // Each session's program runs under a small helper process of ptyd's (the shell's parent
    // when it is not the daemon): its private memory is ptyd's too.
    let helpers: Vec<i32> = pids
        .iter()
        .filter_map(|p| ptyd::process::procfs::ppid(*p))
        .filter(|pp| *pp != daemon_pid)
        .collect();
    let helper_private: u64 = helpers.iter().filter_map(|p| private_kib(*p)).sum();
    let per_helper = helper_private as f64 / pids.len() as f64;
    let per_session_total = per_session + per_helper;
    eprintln!("scale: idle CPU over {SCALE_IDLE:?} ...");
    let cpu0 = cpu_seconds(daemon_pid);
    let w0 = Instant::now();
    std::thread::sleep(SCALE_IDLE);
    let cpu_pct = (cpu_seconds(daemon_pid) - cpu0) / w0.elapsed().as_secs_f64() * 100.0;
    let mut list_ms = Vec::new();
    let mut c = client.terminals.clone();
    for i in 0..SCALE_LIST_CALLS {
        let t0 = Instant::now();
        let resp = client
            .rt
            .block_on(c.list(ListRequest {
                agent_id: format!("s{}", i % SCALE_AGENTS),
            }))
            .expect("List")
            .into_inner();
        list_ms.push(ms(t0.elapsed()));
        assert!(!resp.sessions.is_empty());
    }
    let lp50 = p50(&list_ms);
    let detail = json!({
        "sessions": SCALE_SESSIONS, "agents": SCALE_AGENTS, "open_seconds": open_s,
        "daemon_rss_kib": {"before": rss_before, "after": rss_after},
        "daemon_kib_per_session": per_session, "bash_kib_per_session": per_shell,
        "helpers": helpers.len(), "helper_private_kib_per_session": per_helper,
        "idle_cpu_percent": cpu_pct, "list_ms": {"p50": lp50, "p99": p99(&list_ms)},
    });
    rows.push(Row {
        case: format!("scale: ptyd memory per idle session ({SCALE_SESSIONS})"),
        ptyd: format!(
            "{per_session_total:.1} KiB (daemon RSS {per_session:.1} + helper private {per_helper:.1})"
        ),
        baselines: format!("bash RSS {per_shell:.0} KiB"),
        ratio: format!("{:.3}x bash", per_session_total / per_shell),
        bar: "<= 256 KiB".into(),
        pass: Some(per_session_total <= 256.0),
        json: detail.clone(),
    });
    rows.push(Row {
        case: format!("scale: daemon idle CPU ({} s)", SCALE_IDLE.as_secs()),
        ptyd: format!("{cpu_pct:.2}%"),
        baselines: String::new(),
        ratio: String::new(),
        bar: "< 0.5%".into(),
        pass: Some(cpu_pct < 0.5),
        json: detail.clone(),
    });
    rows.push(Row {
        case: format!(
            "scale: List p50 ({} sessions per agent)",
            SCALE_SESSIONS.div_ceil(SCALE_AGENTS)
        ),
        ptyd: fmt_ms(lp50),
        baselines: String::new(),
        ratio: String::new(),
        bar: "< 2 ms".into(),
        pass: Some(lp50 < 2.0),
        json: detail,
    });
    drop(client);
    eprintln!("scale: closing ...");
    drop(daemon);
}

/// Typical 60-character output lines (an `ls -l`-like listing), deterministic.
/// Sessions the adoption case leaves to a killed daemon, and the history lines each holds.
const ADOPT_SESSIONS: usize = 100;
const ADOPT_LINES: u64 = 10_000;

/// Re-adoption (issue 14): a daemon serving `ADOPT_SESSIONS` idle sessions with `ADOPT_LINES`
/// lines of history each is killed with SIGKILL; the time from starting its successor on the
/// same state directory until every session has answered a Read of its newest line (its
/// terminal rebuilt from the journal) is the row's figure.
fn case_adopt(setup: &Setup, rows: &mut Vec<Row>) {
    eprintln!("adopt: {ADOPT_SESSIONS} sessions of {ADOPT_LINES} lines ...");
    let sessions_total = ADOPT_SESSIONS + 8;
    let agents = ADOPT_SESSIONS.div_ceil(25);
    let first = Daemon::spawn(setup, "adopt", sessions_total);
    let client = Client::connect(&first.socket);
    let ids: Vec<(String, String)> = client.rt.block_on(async {
        let mut ids = Vec::new();
        let mut set = tokio::task::JoinSet::new();
        for i in 0..ADOPT_SESSIONS {
            let mut c = client.terminals.clone();
            let agent = format!("adopt{}", i % agents);
            set.spawn(async move {
                let sid = c
                    .open(OpenRequest {
                        agent_id: agent.clone(),
                        r#type: "bash".into(),
                        ..Default::default()
                    })
                    .await
                    .expect("Open")
                    .into_inner()
                    .session
                    .expect("session")
                    .session_id;
                let r = c
                    .send(SendRequest {
                        agent_id: agent.clone(),
                        session_id: sid.clone(),
                        text: format!("seq 1 {ADOPT_LINES}"),
                        timeout_ms: 600_000,
                        ..Default::default()
                    })
                    .await
                    .expect("Send");
                drop(r);
                (agent, sid)
            });
            while set.len() >= 8 {
                if let Some(done) = set.join_next().await {
                    ids.push(done.expect("join"));
                }
            }
        }
        while let Some(done) = set.join_next().await {
            ids.push(done.expect("join"));
        }
        ids
    });
    drop(client);
    let socket = first.socket.clone();
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(first.pid(), libc::SIGKILL);
    }
    drop(first);
    let _ = std::fs::remove_file(&socket);
    let t0 = Instant::now();
    let second = Daemon::spawn(setup, "adopt", sessions_total);
    let client = Client::connect(&second.socket);
    let complete = client.rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (agent, sid) in ids.clone() {
            let mut c = client.terminals.clone();
            set.spawn(async move {
                let page = c
                    .read(ReadRequest {
                        agent_id: agent,
                        session_id: sid,
                        count: 1,
                        ..Default::default()
                    })
                    .await
                    .expect("Read")
                    .into_inner();
                page.total_lines >= ADOPT_LINES
            });
        }
        let mut complete = 0;
        while let Some(done) = set.join_next().await {
            complete += usize::from(done.expect("join"));
        }
        complete
    });
    let took = t0.elapsed();
    drop(client);
    drop(second);
    rows.push(Row {
        case: format!("re-adoption of {ADOPT_SESSIONS} idle sessions x {ADOPT_LINES} lines"),
        ptyd: format!("{:.0} ms ({complete}/{ADOPT_SESSIONS} complete)", ms(took)),
        baselines: String::new(),
        ratio: String::new(),
        bar: "< 2 s".into(),
        pass: Some(took < Duration::from_secs(2) && complete == ADOPT_SESSIONS),
        json: json!({"ms": ms(took), "sessions": ADOPT_SESSIONS, "lines": ADOPT_LINES,
                     "complete": complete}),
    });
}

fn typical_lines() -> Vec<String> {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    (0..MEMORY_LINES)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut line = format!(
                "-rw-r--r-- 1 user group {:>7} Jan {:>2} 12:{:02} file_{:x}_{}.txt",
                x % 1_000_000,
                1 + x % 28,
                x % 60,
                x >> 40,
                i
            );
            line.truncate(MEMORY_LINE_LEN);
            while line.len() < MEMORY_LINE_LEN {
                line.push('x');
            }
            line
        })
        .collect()
}

fn case_memory(rows: &mut Vec<Row>) {
    eprintln!("history memory ...");
    let lines = typical_lines();
    let raw: usize = lines.iter().map(String::len).sum();
    let mut stream = Vec::with_capacity(raw + 2 * lines.len());
    for l in &lines {
        stream.extend_from_slice(l.as_bytes());
        stream.extend_from_slice(b"\r\n");
    }
    let (history_heap, history) = heap_of(|| {
        let mut history = History::new(MEMORY_LINES as u64, 1 << 30);
        for l in &lines {
            history.push(l);
        }
        history
    });
    drop(history);
    let (term_heap, term) = heap_of(|| {
        let mut term = Terminal::new(COLS, ROWS, MEMORY_LINES as u64, 1 << 30);
        for chunk in stream.chunks(EMULATOR_CHUNK) {
            term.feed(chunk);
        }
        term
    });
    assert_eq!(term.total_lines(), MEMORY_LINES as u64);
    drop(term);
    let ratio = term_heap as f64 / raw as f64;
    // What one idle session's terminal model costs (a prompt on a default-size screen).
    let (idle_heap, idle) = heap_of(|| {
        let mut t = Terminal::new(COLS, ROWS, 100_000, 16 << 20);
        t.feed(b"\x1b]133;D;0\x07\x1b]133;A\x07user@host:~$ \x1b]133;B\x07");
        t
    });
    drop(idle);
    // The same once it rests (an idle session's screen after a second without output).
    let (resting_heap, resting) = heap_of(|| {
        let mut t = Terminal::new(COLS, ROWS, 100_000, 16 << 20);
        t.feed(b"\x1b]133;D;0\x07\x1b]133;A\x07user@host:~$ \x1b]133;B\x07");
        assert!(t.rest(), "an idle prompt rests");
        t
    });
    drop(resting);
    rows.push(Row {
        case: "history memory: 100k x 60-char lines".into(),
        ptyd: format!("{:.2} MB", term_heap as f64 / 1e6),
        baselines: format!(
            "raw {:.2} MB; History alone {:.2} MB",
            raw as f64 / 1e6,
            history_heap as f64 / 1e6
        ),
        ratio: format!("{ratio:.2}x raw"),
        bar: "<= 2x raw".into(),
        pass: Some(ratio <= 2.0),
        json: json!({"raw_bytes": raw, "terminal_heap_bytes": term_heap,
                     "history_heap_bytes": history_heap}),
    });
    // Short lines under the default bounds: the byte bound decides (the line bound is a
    // backstop), so `seq 1 2000000` is kept whole; its cost is its text plus a line's offset.
    let seq = seq_stream(SEQ_MEMORY_LINES);
    let seq_raw = seq.len() - SEQ_MEMORY_LINES; // without the CRs a terminal adds
    let (seq_heap, seq_term) = heap_of(|| {
        let mut term = Terminal::new(
            COLS,
            ROWS,
            ptyd::config::DEFAULT_HISTORY_LINES,
            ptyd::config::Config::default().history_bytes,
        );
        for chunk in seq.chunks(EMULATOR_CHUNK) {
            term.feed(chunk);
        }
        term
    });
    let kept_whole = seq_term.first_line() == 1;
    drop(seq_term);
    let seq_bar = 2 * seq_raw + 8 * SEQ_MEMORY_LINES;
    rows.push(Row {
        case: "history memory: seq 1 2000000 (default bounds)".into(),
        ptyd: format!("{:.2} MB", seq_heap as f64 / 1e6),
        baselines: format!(
            "raw {:.2} MB; every line kept: {kept_whole}",
            seq_raw as f64 / 1e6
        ),
        ratio: format!("{:.2}x raw", seq_heap as f64 / seq_raw as f64),
        bar: "<= 2x raw + 8 B/line, kept whole".into(),
        pass: Some(seq_heap <= seq_bar && kept_whole),
        json: json!({"raw_bytes": seq_raw, "terminal_heap_bytes": seq_heap,
                     "lines": SEQ_MEMORY_LINES, "kept_whole": kept_whole}),
    });
    // The session actor's raw-output channel for `Watch` (1024 chunks), made with every session.
    let (watch_heap, watch) =
        heap_of(|| tokio::sync::broadcast::channel::<std::sync::Arc<[u8]>>(1024).0);
    drop(watch);
    rows.push(Row::info(
        &format!("info: heap of one idle terminal model ({COLS}x{ROWS})"),
        format!("{:.1} KiB", idle_heap as f64 / 1024.0),
        format!(
            "resting {:.1} KiB; Watch channel (1024 chunks, made on first Watch) {:.1} KiB",
            resting_heap as f64 / 1024.0,
            watch_heap as f64 / 1024.0
        ),
        json!({"idle_terminal_heap_bytes": idle_heap, "resting_terminal_heap_bytes": resting_heap,
               "watch_channel_heap_bytes": watch_heap}),
    ));
}

/// A generated stream as a terminal shows it (CR LF line ends).
/// Bytes of each generated agent-output stream (issue 22).
const AGENT_STREAM_BYTES: usize = 30 << 20;
/// The agent-output streams: what builds, installers and full-screen programs print.
const AGENT_STREAMS: [&str; 3] = ["build", "progress", "fullscreen"];

/// One of `AGENT_STREAMS`, about `AGENT_STREAM_BYTES` long, as a program writes it (`\n` line
/// ends; the PTY adds the `\r`). Deterministic: the same bytes every run.
fn agent_stream(name: &str) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::with_capacity(AGENT_STREAM_BYTES + 4096);
    let mut i = 0usize;
    match name {
        // A coloured build and test log: bold green verbs, yellow warnings, red failures.
        "build" => {
            while out.len() < AGENT_STREAM_BYTES {
                let _ = match i % 4 {
                    0 => writeln!(
                        out,
                        "\x1b[1m\x1b[32m   Compiling\x1b[0m crate-{} v0.{}.{} (/home/dev/src/app/crates/crate-{})",
                        i % 97,
                        i % 13,
                        i % 29,
                        i % 97
                    ),
                    1 => writeln!(
                        out,
                        "\x1b[0m\x1b[1m\x1b[33mwarning\x1b[0m\x1b[1m: unused variable: `value_{}`\x1b[0m \x1b[34m-->\x1b[0m src/module_{}.rs:{}:{}",
                        i % 71,
                        i % 37,
                        i % 400,
                        i % 80
                    ),
                    2 => writeln!(
                        out,
                        "test tests::case_{}::handles_input_{} ... \x1b[32mok\x1b[0m",
                        i % 211,
                        i % 17
                    ),
                    _ => writeln!(
                        out,
                        "test tests::case_{}::rejects_input_{} ... \x1b[31mFAILED\x1b[0m",
                        i % 211,
                        i % 19
                    ),
                };
                i += 1;
            }
        }
        // A progress bar redrawn in place: `\r`, erase-line, colours; a newline every 101
        // frames (the next item).
        "progress" => {
            while out.len() < AGENT_STREAM_BYTES {
                let done = i % 101;
                let bar = "#".repeat(done * 30 / 100);
                let _ = write!(
                    out,
                    "\r\x1b[K\x1b[36mitem {:>5}\x1b[0m \x1b[32m{:>3}%\x1b[0m|{:<30}| {}/100 [00:{:02}<00:{:02}, {}.{}it/s]",
                    i / 101,
                    done,
                    bar,
                    done,
                    i % 60,
                    (100 - done) % 60,
                    1000 + i % 9000,
                    i % 10
                );
                if done == 100 {
                    out.push(b'\n');
                }
                i += 1;
            }
        }
        // A full-screen program redrawing: the alternate screen, each row placed (CUP),
        // coloured and erased to its end, frame after frame.
        "fullscreen" => {
            out.extend_from_slice(b"\x1b[?1049h\x1b[H\x1b[2J");
            while out.len() < AGENT_STREAM_BYTES {
                for row in 1..=ROWS as usize {
                    let _ = write!(
                        out,
                        "\x1b[{row};1H\x1b[{}m{:>6} root  20   0 {:>7}K {:>6}K S {:>4}.{} {:>4}.{} 0:{:02}.{:02} process-{}\x1b[0m\x1b[K",
                        31 + (row + i) % 7,
                        1000 + row * 7 + i % 100,
                        (i * 13 + row) % 999_999,
                        (i * 7 + row) % 99_999,
                        (i + row) % 100,
                        i % 10,
                        (i * 3 + row) % 100,
                        row % 10,
                        i % 60,
                        row,
                        (row * 31 + i) % 997
                    );
                }
                i += 1;
            }
            out.extend_from_slice(b"\x1b[?1049l");
        }
        other => panic!("unknown agent stream {other:?} (build, progress, fullscreen)"),
    }
    out
}

/// `stream` as a PTY delivers it to a terminal: every `\n` preceded by `\r` (onlcr).
fn as_delivered(stream: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(stream.len() * 102 / 100);
    for &b in stream {
        if b == b'\n' {
            v.push(b'\r');
        }
        v.push(b);
    }
    v
}

fn generated_stream(name: &str) -> Vec<u8> {
    match name {
        "seq" => seq_stream(3_000_000),
        "base64" => {
            // base64 of zeros: 76-character lines of 'A'.
            let total = 100usize << 20;
            let chars = total.div_ceil(3) * 4;
            let mut out = Vec::with_capacity(chars + chars / 76 * 2 + 2);
            let mut left = chars;
            while left > 0 {
                let n = left.min(76);
                out.extend(std::iter::repeat_n(b'A', n));
                out.extend_from_slice(b"\r\n");
                left -= n;
            }
            out
        }
        "ls" => {
            let out = Command::new("sh")
                .arg("-c")
                .arg("ls -lR --color=always /usr")
                .stderr(Stdio::null())
                .output()
                .expect("ls -lR");
            as_delivered(&out.stdout)
        }
        name if AGENT_STREAMS.contains(&name) => as_delivered(&agent_stream(name)),
        other => panic!("unknown stream {other:?} (base64, seq, ls, build, progress, fullscreen)"),
    }
}

/// Feeds `stream` in `chunk`-byte pieces, doing per piece what the session actor does per PTY
/// read (feed, take the marks, count the lines for the published state). Returns MB/s.
fn feed_stream(stream: &[u8], chunk: usize) -> f64 {
    let mut term = Terminal::new(COLS, ROWS, 100_000, 16 << 20);
    let t0 = Instant::now();
    for piece in stream.chunks(chunk) {
        term.feed(piece);
        std::hint::black_box(term.take_marks());
        std::hint::black_box(term.total_lines());
    }
    stream.len() as f64 / 1e6 / t0.elapsed().as_secs_f64()
}

fn case_emulator(rows: &mut Vec<Row>) {
    eprintln!("emulator only ...");
    for name in ["base64", "seq", "ls"] {
        let stream = generated_stream(name);
        let best = (0..2)
            .map(|_| feed_stream(&stream, EMULATOR_CHUNK))
            .fold(0.0, f64::max);
        rows.push(Row::info(
            &format!("info: terminal model only, {name} ({EMULATOR_CHUNK} B chunks)"),
            format!("{best:.1} MB/s"),
            String::new(),
            json!({"stream": name, "bytes": stream.len(), "chunk": EMULATOR_CHUNK, "mb_s": best}),
        ));
    }
    // The pause a journal compaction puts on the daemon's thread: the checkpoint of a terminal
    // whose history is full (100 000 lines of base64), taken and verified.
    let mut term = Terminal::new(COLS, ROWS, 100_000, 16 << 20);
    for piece in generated_stream("base64").chunks(EMULATOR_CHUNK) {
        term.feed(piece);
    }
    let pauses: Vec<f64> = (0..5)
        .map(|_| {
            let t0 = Instant::now();
            let checkpoint = term.checkpoint().expect("a checkpoint of a flood");
            std::hint::black_box(checkpoint);
            t0.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let best = pauses.iter().copied().fold(f64::MAX, f64::min);
    rows.push(Row::info(
        "info: journal compaction pause (checkpoint of a full 100 000-line history)",
        format!("{best:.1} ms"),
        String::new(),
        json!({"lines": 100_000, "ms": pauses}),
    ));
}

// ---------------------------------------------------------------------------------------------
// Output

fn machine() -> Value {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    json!({"cpus": cpus, "model": model, "kernel": kernel})
}

fn today() -> String {
    Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn print_table(rows: &[Row]) {
    let header = ["case", "ptyd", "baseline(s)", "ratio", "bar", "pass"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.case.clone(),
                r.ptyd.clone(),
                r.baselines.clone(),
                r.ratio.clone(),
                r.bar.clone(),
                match r.pass {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => String::new(),
                },
            ]
        })
        .collect();
    let mut out = String::new();
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
    for c in &cells {
        out.push_str(&format!("| {} |\n", c.join(" | ")));
    }
    println!("{out}");
}

fn write_json(rows: &[Row], machine: Value, date: &str) {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("bench");
    std::fs::create_dir_all(&dir).expect("create target/bench");
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "case": r.case, "ptyd": r.ptyd, "baselines": r.baselines, "ratio": r.ratio,
                "bar": r.bar, "pass": r.pass, "detail": r.json,
            })
        })
        .collect();
    let doc = json!({"date": date, "machine": machine, "rows": rows});
    let path = dir.join("compare.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).expect("json"))
        .expect("write compare.json");
    eprintln!("wrote {}", path.display());
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if args.first().map(String::as_str) == Some("feed") {
        let name = args.get(1).map_or("seq", String::as_str);
        let mut stream = generated_stream(name);
        if let Some(mb) = args.get(2).and_then(|s| s.parse::<usize>().ok()) {
            stream.truncate(mb << 20);
        }
        let chunk = args
            .get(3)
            .and_then(|s| s.parse().ok())
            .unwrap_or(EMULATOR_CHUNK);
        let mbs = feed_stream(&stream, chunk);
        println!(
            "{name}: {} bytes in {chunk} B chunks: {mbs:.1} MB/s",
            stream.len()
        );
        return;
    }
    if args.first().map(String::as_str) == Some("write-stream") {
        // A generated stream as a program prints it, for profiling the daemon by hand.
        let name = args.get(1).map_or("progress", String::as_str);
        let file = args.get(2).map_or("stream.out", String::as_str);
        let stream = match name {
            "build" | "progress" | "fullscreen" => agent_stream(name),
            other => generated_stream(other),
        };
        std::fs::write(file, &stream).expect("write the stream");
        return;
    }
    let wanted = |case: &str| args.is_empty() || args.iter().any(|a| a == case);
    become_subreaper();
    raise_fd_limit();
    let _sweep = SweepGuard;
    let setup = Setup::new();
    let machine = machine();
    let date = today();
    eprintln!(
        "ptyd compare bench: {} cpus, {}",
        machine["cpus"], machine["model"]
    );
    let mut rows = Vec::new();
    let t0 = Instant::now();
    if wanted("send") {
        case_send(&setup, &mut rows);
    }
    if wanted("mcp") {
        case_mcp(&setup, &mut rows);
    }
    if wanted("stdin") {
        case_stdin(&setup, &mut rows);
    }
    if wanted("ingest") {
        case_ingest(&setup, &mut rows);
    }
    if wanted("paging") {
        case_paging(&setup, &mut rows);
    }
    if wanted("scale") {
        case_scale(&setup, &mut rows);
    }
    if wanted("memory") {
        case_memory(&mut rows);
    }
    if wanted("adopt") {
        case_adopt(&setup, &mut rows);
    }
    if wanted("emulator") {
        case_emulator(&mut rows);
    }
    if wanted("hostile") {
        case_hostile(&setup, &mut rows);
    }
    if wanted("agent-streams") {
        case_agent_streams(&setup, &mut rows);
    }
    if wanted("records") {
        records::case_records(&setup, &mut rows);
    }
    println!(
        "\nptyd compare bench, {date}, {} cpus ({}), {:.0} s\n",
        machine["cpus"],
        machine["model"].as_str().unwrap_or(""),
        t0.elapsed().as_secs_f64()
    );
    print_table(&rows);
    write_json(&rows, machine, &date);
}
