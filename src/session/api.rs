//! What callers give a session and get back: the state `List` shows, a send's input and
//! outcome, a read's query and page, a job's report, what a watcher or an attached person starts
//! with, and how a status reads in rendered text.

use super::CommandInfo;
use crate::process::pty::ExitKind;
use crate::waiting::WaitReason;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast;

/// How the session's program is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still running.
    Running,
    /// Ended.
    Exited(ExitKind),
}

/// What `List` shows without asking the actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// Running or exited.
    pub status: Status,
    /// A send or job is in flight.
    pub busy: bool,
    /// Lines since the session started.
    pub total_lines: u64,
    /// Milliseconds since the epoch of the last output (0: none yet).
    pub last_output_unix_ms: i64,
    /// Current size.
    pub cols: u16,
    /// Current size.
    pub rows: u16,
    /// Who holds the keyboard (`Attach`), if anyone.
    pub attached: Option<String>,
}

/// A validated send.
#[derive(Debug, Clone)]
pub struct SendInput {
    /// Text typed as given.
    pub text: String,
    /// Press Enter after the text.
    pub submit: bool,
    /// Bytes of the named keys, sent last.
    pub keys: Vec<u8>,
    /// Overall deadline.
    pub timeout: Duration,
    /// Output silence that counts as idle.
    pub idle: Duration,
    /// Cap on the rendered result.
    pub max_result_bytes: usize,
    /// Text for a command that still runs is held until the shell's next prompt instead of
    /// refused (docs/api.md).
    pub typeahead: bool,
    /// The web page's address for this session, when the daemon serves one: a wait at a
    /// password prompt names it beside `ptyd attach` (without a sign-in code: the line goes to
    /// the model, and a person signs in on the page).
    pub web_page: Option<String>,
}

impl SendInput {
    /// `text` and Enter with the contract's defaults: what the unit tables type.
    #[cfg(test)]
    pub(crate) fn typed(text: &str) -> SendInput {
        SendInput {
            text: text.to_owned(),
            submit: true,
            keys: Vec::new(),
            timeout: Duration::from_secs(30),
            idle: Duration::from_secs(5),
            max_result_bytes: 65536,
            typeahead: false,
            web_page: None,
        }
    }

    /// True when the send writes nothing and only waits.
    pub fn is_pure_wait(&self) -> bool {
        self.text.is_empty() && !self.submit && self.keys.is_empty()
    }
}

/// The result of a foreground send.
#[derive(Debug, Clone)]
pub struct SendOutcome {
    /// Clean output of the send (capped).
    pub viewport: String,
    /// Why it returned.
    pub reason: WaitReason,
    /// Session status when it returned.
    pub status: Status,
    /// The command's exit status when known.
    pub exit_code: Option<i32>,
    /// The viewport was cut.
    pub truncated: bool,
    /// The program waits for a password: what is typed is not echoed.
    pub input_hidden: bool,
    /// The shell's cwd.
    pub cwd: String,
    /// Wall time.
    pub elapsed: Duration,
    /// The model-facing text.
    pub rendered: String,
}

/// What `Read` asks for.
#[derive(Debug, Clone)]
pub struct ReadQuery {
    /// Newest-relative offset.
    pub offset: u64,
    /// Lines wanted.
    pub count: u64,
    /// Absolute start line, overriding `offset`.
    pub from_line: Option<u64>,
    /// The visible screen instead of history.
    pub screen: bool,
    /// Cap on the rendered result.
    pub max_result_bytes: usize,
    /// One command's output (`c12` or `last`) instead of the whole history; `offset` and
    /// `count` page inside it.
    pub command_id: Option<String>,
}

/// A page of history or the screen.
#[derive(Debug, Clone, Default)]
pub struct ReadOutcome {
    /// The page text (capped).
    pub text: String,
    /// Lines since the session started.
    pub total_lines: u64,
    /// Oldest retained line.
    pub first_line: u64,
    /// First line in `text` (0 when empty).
    pub line_begin: u64,
    /// Last line in `text` (0 when empty).
    pub line_end: u64,
    /// The page was cut.
    pub truncated: bool,
    /// The model-facing text.
    pub rendered: String,
    /// The command whose output this is, for a read of one.
    pub command: Option<CommandInfo>,
}

/// What `Open` gets back once the session is ready.
#[derive(Debug, Clone)]
pub struct Ready {
    /// Startup output before the first prompt.
    pub motd: String,
}

/// The lifecycle of a background job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Its send still waits.
    Running,
    /// Its send settled.
    Completed,
    /// JobKill ended it.
    Killed,
    /// It could not be carried out.
    Failed,
}

impl JobStatus {
    /// The lower-case name used in rendered text.
    pub fn name(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Killed => "killed",
            JobStatus::Failed => "failed",
        }
    }
}

/// New output and status of a job.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// Status now.
    pub status: JobStatus,
    /// Clean output not returned before (capped).
    pub output: String,
    /// `output` was cut.
    pub truncated: bool,
    /// Why it failed, when it did.
    pub detail: String,
    /// The settled send, once finished.
    pub outcome: Option<SendOutcome>,
    /// The model-facing text.
    pub rendered: String,
}

/// What a watcher starts with.
pub struct WatchStart {
    /// The history lines asked for.
    pub replay: Vec<String>,
    /// Draws the current screen on the watcher's terminal.
    pub redraw: Vec<u8>,
    /// The session's raw output from the redraw on (none once the program exited).
    pub live: Option<broadcast::Receiver<Arc<[u8]>>>,
}

/// A person taking a session's keyboard: who they are and their window's size, if known.
#[derive(Debug, Clone)]
pub struct AttachRequest {
    /// How a second attach's refusal and `List` name them.
    pub holder: String,
    /// Their window's columns and rows.
    pub size: Option<(u16, u16)>,
}

/// What an attached person starts with: their token (for keys, sizes and the detach), the
/// redraw of the current screen, and the live feed of raw output.
pub struct AttachStart {
    /// Names this holder to the actor; a later holder's differs.
    pub token: u64,
    /// Draws the screen as it is on the person's terminal.
    pub redraw: Vec<u8>,
    /// The session's output from the redraw on.
    pub live: broadcast::Receiver<Arc<[u8]>>,
}

/// "running" or "exited code=0 signal=null".
pub fn status_text(status: Status) -> String {
    match status {
        Status::Running => "running".to_owned(),
        Status::Exited(ExitKind::Code(c)) => exited_text(Some(c), None),
        Status::Exited(ExitKind::Signal(s)) => exited_text(None, Some(s.as_str())),
        Status::Exited(ExitKind::Lost) => exited_text(None, None),
    }
}

/// "exited code=0 signal=null": how an exited session's status reads in rendered text.
pub fn exited_text(code: Option<i32>, signal: Option<&str>) -> String {
    let code = code.map_or_else(|| "null".to_owned(), |c| c.to_string());
    format!("exited code={code} signal={}", signal.unwrap_or("null"))
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The screen as the web page draws it, with what a person needs to know beside it.
pub struct PageScreen {
    /// The visible screen as styled runs.
    pub screen: crate::screen::StyledScreen,
    /// The terminal reads lines with its echo off: a password or passphrase prompt waits.
    pub password_prompt: bool,
}
