//! Progress while a tool waits: when the request carries `_meta.progressToken`, one
//! `notifications/progress` about once a second (never more often), with the elapsed
//! milliseconds as `progress` and the newest non-empty output line as `message`, so a client that
//! resets its timeout on progress can wait for a long build and a person sees what happens.
//! [`NewestLine`] (the message, from raw terminal output) is pure.

use crate::pb::{SendEvent, SendResponse, send_event};
use crate::render;
use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use std::future::Future;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior};

/// The most a progress message carries, in bytes.
const MESSAGE_BYTES: usize = 200;
/// How often progress is reported.
const INTERVAL: Duration = Duration::from_secs(1);

/// Where progress goes: the client and the token of its request.
pub(crate) struct Reporter {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    started: Instant,
    last_ms: f64,
}

impl Reporter {
    /// A reporter for a request that carried `token`.
    pub(crate) fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Reporter {
        Reporter {
            peer,
            token,
            started: Instant::now(),
            last_ms: 0.0,
        }
    }

    async fn report(&mut self, message: Option<String>) {
        // `progress` must increase with every notification.
        let elapsed = self.started.elapsed().as_millis() as f64;
        self.last_ms = elapsed.max(self.last_ms + 1.0);
        let mut param = ProgressNotificationParam::new(self.token.clone(), self.last_ms);
        if let Some(message) = message {
            param = param.with_message(message);
        }
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "sending a progress notification");
        }
    }
}

fn ticker() -> tokio::time::Interval {
    let mut ticker = tokio::time::interval_at(Instant::now() + INTERVAL, INTERVAL);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    ticker
}

/// Drives a `SendStream` to its final result, reporting progress each second with the newest
/// output line.
pub(crate) async fn follow_send(
    mut stream: tonic::Streaming<SendEvent>,
    reporter: &mut Reporter,
) -> Result<SendResponse, tonic::Status> {
    let mut newest = NewestLine::default();
    let mut ticker = ticker();
    loop {
        tokio::select! {
            event = stream.message() => match event?.and_then(|e| e.event) {
                Some(send_event::Event::Output(bytes)) => newest.feed(&bytes),
                Some(send_event::Event::Done(response)) => return Ok(response),
                None => {
                    return Err(tonic::Status::unavailable(
                        "the daemon ended the send stream without a result",
                    ));
                }
            },
            _ = ticker.tick() => reporter.report(newest.line()).await,
        }
    }
}

/// Awaits `call`, reporting progress (elapsed time only) each second until it answers.
pub(crate) async fn while_waiting<T>(call: impl Future<Output = T>, reporter: &mut Reporter) -> T {
    let mut ticker = ticker();
    tokio::pin!(call);
    loop {
        tokio::select! {
            result = &mut call => return result,
            _ = ticker.tick() => reporter.report(None).await,
        }
    }
}

/// The newest non-empty line of raw terminal output, escape sequences and control characters
/// removed; a carriage return ends a line too (progress bars redraw that way).
#[derive(Debug, Default)]
pub(crate) struct NewestLine {
    state: Escape,
    current: String,
    last: String,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum Escape {
    #[default]
    None,
    /// After ESC.
    Start,
    /// Inside `ESC [`, up to its final byte.
    Csi,
    /// Inside an OSC/DCS/APC/PM string, up to BEL or ST.
    String,
    /// ESC inside such a string (the start of ST).
    StringEsc,
}

impl NewestLine {
    /// Takes more output (chunks end on character boundaries).
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for c in String::from_utf8_lossy(bytes).chars() {
            self.state = match (self.state, c) {
                (Escape::None, '\x1b') => Escape::Start,
                (Escape::None, '\n' | '\r') => {
                    if !self.current.trim().is_empty() {
                        self.last = std::mem::take(&mut self.current);
                    }
                    self.current.clear();
                    Escape::None
                }
                (Escape::None, c) => {
                    if !c.is_control() {
                        self.current.push(c);
                    }
                    Escape::None
                }
                (Escape::Start, '[') => Escape::Csi,
                (Escape::Start, ']' | 'P' | '_' | '^') => Escape::String,
                (Escape::Start, _) => Escape::None,
                (Escape::Csi, '\x40'..='\x7e') => Escape::None,
                (Escape::Csi, _) => Escape::Csi,
                (Escape::String, '\x07') => Escape::None,
                (Escape::String, '\x1b') => Escape::StringEsc,
                (Escape::String, _) => Escape::String,
                (Escape::StringEsc, '\\') => Escape::None,
                (Escape::StringEsc, _) => Escape::String,
            };
        }
    }

    /// The newest non-empty line, at most 200 bytes, if any output had one.
    pub(crate) fn line(&self) -> Option<String> {
        let line = if self.current.trim().is_empty() {
            &self.last
        } else {
            &self.current
        };
        let line = line.trim();
        (!line.is_empty()).then(|| render::head_fit(line, MESSAGE_BYTES).to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_line_of_raw_output() {
        let long = "é".repeat(150);
        let cut = "é".repeat(100);
        let cases: &[(&[&[u8]], Option<&str>)] = &[
            (&[], None),
            (&[b"\r\n\r\n"], None),
            (&[b"compiling a\r\ncompiling b\r\n"], Some("compiling b")),
            (&[b"done\r\npartial"], Some("partial")),
            (&[b"\x1b[1;32mgreen\x1b[0m\r\n"], Some("green")),
            (
                &[b"\x1b]133;D;0\x07\x1b]7;file:///tmp\x1b\\ok\r\n"],
                Some("ok"),
            ),
            (&[b" 10%\r 50%\r"], Some("50%")),
            (&[b"split \x1b[3", b"1mred\x1b[0m"], Some("split red")),
            (&[long.as_bytes()], Some(&cut)),
        ];
        for (chunks, want) in cases {
            let mut newest = NewestLine::default();
            for chunk in *chunks {
                newest.feed(chunk);
            }
            assert_eq!(newest.line().as_deref(), *want, "{chunks:?}");
        }
    }
}
