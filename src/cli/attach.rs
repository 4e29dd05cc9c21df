//! `ptyd attach t1`: a person takes a session's keyboard from their own terminal. The terminal
//! goes into raw mode (every key to the session, Ctrl-C included), its window size follows the
//! person's window, and Ctrl-] detaches. The terminal is restored on every way out: detach, the
//! session's end, the daemon gone, SIGTERM or SIGHUP to the CLI, a panic.

use crate::pb;
use crate::pb::terminals_client::TerminalsClient;
use nix::sys::termios::{self, SetArg, Termios};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// The key that detaches: Ctrl-] (GS), as telnet's and docker's escape.
const DETACH_KEY: u8 = 0x1d;
/// What puts a person's terminal back once the session's program had it: normal cursor and
/// keypad keys, no bracketed paste, no mouse reports, colours reset, the cursor shown.
const RESET_MODES: &[u8] =
    b"\x1b[?1l\x1b>\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[0m\x1b[?25h";

/// Why the attach ended.
enum End {
    Detached,
    SessionEnded,
    DaemonGone(String),
    Signalled(&'static str),
}

/// Attaches to `session` of `agent_id`; returns the exit status.
pub(super) async fn run(
    mut client: TerminalsClient<Channel>,
    agent_id: String,
    session: String,
) -> Result<i32, String> {
    let stdin = std::io::stdin();
    let saved = termios::tcgetattr(stdin.as_fd())
        .map_err(|e| format!("ptyd attach needs a terminal on its standard input ({e})"))?;
    let (inputs, rx) = mpsc::channel(64);
    let (cols, rows) = window_size();
    let first = pb::AttachInput {
        agent_id,
        session_id: session.clone(),
        holder: holder_name(),
        cols,
        rows,
        ..Default::default()
    };
    let _ = inputs.send(first).await;
    let mut events = client
        .attach(ReceiverStream::new(rx))
        .await
        .map_err(|s| crate::cli::CliError::from(s).0)?
        .into_inner();
    let raw = RawMode::enter(saved)?;
    eprint!("[ptyd: attached to {session}; Ctrl-] detaches]\r\n");
    let keys = read_keys();
    let mut screens = AlternateScreen::default();
    let end = pump(&mut events, &inputs, keys, &mut screens).await;
    drop(inputs);
    let mut out = std::io::stdout();
    if screens.on {
        let _ = out.write_all(b"\x1b[?1049l");
    }
    drop(raw);
    let (message, status) = match end {
        End::Detached => (format!("detached from {session}"), 0),
        End::SessionEnded => (format!("session {session} ended"), 0),
        End::DaemonGone(why) => (format!("the daemon went away: {why}"), 2),
        End::Signalled(name) => (format!("{name}: detached from {session}"), 1),
    };
    let _ = writeln!(out, "\n[ptyd: {message}]");
    Ok(status)
}

/// Moves keys, window sizes and output until one side ends.
async fn pump(
    events: &mut tonic::Streaming<pb::AttachEvent>,
    inputs: &mpsc::Sender<pb::AttachInput>,
    mut keys: mpsc::Receiver<Vec<u8>>,
    screens: &mut AlternateScreen,
) -> End {
    let (Ok(mut winch), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::window_change()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return End::DaemonGone("cannot watch this process's signals".into());
    };
    let mut out = std::io::stdout();
    loop {
        tokio::select! {
            event = events.message() => match event {
                Ok(Some(event)) => {
                    screens.scan(&event.output);
                    if out.write_all(&event.output).and_then(|_| out.flush()).is_err() {
                        return End::Signalled("the terminal closed");
                    }
                }
                Ok(None) => return End::SessionEnded,
                Err(status) => return End::DaemonGone(status.message().to_owned()),
            },
            typed = keys.recv() => {
                let Some(typed) = typed else { return End::Detached };
                let (before, detach) = match typed.iter().position(|&b| b == DETACH_KEY) {
                    Some(at) => (typed[..at].to_vec(), true),
                    None => (typed, false),
                };
                if !before.is_empty() {
                    let input = pb::AttachInput { keys: before, ..Default::default() };
                    let _ = inputs.send(input).await;
                }
                if detach {
                    return End::Detached;
                }
            }
            _ = winch.recv() => {
                let (cols, rows) = window_size();
                let _ = inputs.send(pb::AttachInput { cols, rows, ..Default::default() }).await;
            }
            _ = term.recv() => return End::Signalled("SIGTERM"),
            _ = hup.recv() => return End::Signalled("SIGHUP"),
        }
    }
}

/// The person's keys, read by a thread of their own (a blocking read of the terminal, which
/// ends with the process).
fn read_keys() -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(64);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 4096];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx.blocking_send(buf[..n].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// The person's window size; 0 x 0 (unchanged) when the terminal does not say.
fn window_size() -> (u32, u32) {
    match rustix::termios::tcgetwinsize(std::io::stdout()) {
        Ok(w) if w.ws_col >= 2 && w.ws_row >= 2 => (u32::from(w.ws_col), u32::from(w.ws_row)),
        _ => (0, 0),
    }
}

/// "ptyd attach on /dev/pts/3 (pid 1234)": how List and a second attach name this one.
fn holder_name() -> String {
    let tty = std::fs::read_link("/proc/self/fd/0")
        .map(|p| format!(" on {}", p.display()))
        .unwrap_or_default();
    format!("ptyd attach{tty} (pid {})", std::process::id())
}

/// The person's terminal in raw mode; dropping it restores the settings it had.
struct RawMode {
    saved: Termios,
}

impl RawMode {
    fn enter(saved: Termios) -> Result<RawMode, String> {
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, &raw)
            .map_err(|e| format!("cannot put the terminal in raw mode: {e}"))?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let mut out = std::io::stdout();
        let _ = out.write_all(RESET_MODES).and_then(|_| out.flush());
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, &self.saved);
    }
}

/// Whether the output stream left the terminal on the alternate screen (`CSI ? 1049 h`, 1047,
/// 47, and their `l`), followed across chunks.
#[derive(Default)]
struct AlternateScreen {
    on: bool,
    /// The end of the previous chunk, where a sequence may have been cut.
    tail: Vec<u8>,
}

impl AlternateScreen {
    fn scan(&mut self, bytes: &[u8]) {
        let mut text = std::mem::take(&mut self.tail);
        text.extend_from_slice(bytes);
        let mut i = 0;
        while let Some(at) = find(&text[i..], b"\x1b[?") {
            let start = i + at + 3;
            let digits = text[start..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let Some(&last) = text.get(start + digits) else {
                break;
            };
            if matches!(&text[start..start + digits], b"1049" | b"1047" | b"47") {
                match last {
                    b'h' => self.on = true,
                    b'l' => self.on = false,
                    _ => {}
                }
            }
            i = start + digits;
        }
        let keep = text.len().saturating_sub(8);
        self.tail = text[keep..].to_vec();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alternate_screen_is_followed_across_chunks() {
        let table: &[(&[&[u8]], bool)] = &[
            (&[b"plain"], false),
            (&[b"\x1b[?1049h"], true),
            (&[b"\x1b[?1049hvim\x1b[?1049l"], false),
            (&[b"\x1b[?10", b"49h"], true),
            (&[b"\x1b[?47h", b"x", b"\x1b[?2004h"], true),
            (&[b"\x1b[?1049h", b"\x1b[?1049", b"l"], false),
            (&[b"\x1b[?25l"], false),
        ];
        for (chunks, want) in table {
            let mut screens = AlternateScreen::default();
            for chunk in chunks.iter() {
                screens.scan(chunk);
            }
            assert_eq!(screens.on, *want, "{chunks:?}");
        }
    }
}
