//! The RPCs a person uses beside the agent: `Watch` (follow a session, read-only) and `Attach`
//! (take its keyboard). Both start with a redraw of the current screen, then the live output.

use super::{BoxStream, STREAM_CHUNKS, Terminals};
use crate::error::{Error, Result};
use crate::pb;
use crate::session::{AttachRequest, SessionHandle};
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

/// The holder name an attach that gives none gets.
const DEFAULT_HOLDER: &str = "a person";
/// The longest holder name kept (the rest is cut at a character boundary).
const MAX_HOLDER_BYTES: usize = 128;

impl Terminals {
    /// Takes the keyboard of `agent`'s session `id` for `holder` (the web page), leaving the
    /// session its size; the hold ends when the returned value is dropped.
    pub(crate) async fn take_keyboard(&self, agent: &str, id: &str, holder: &str) -> Result<Held> {
        let handle = self.session(agent, id)?;
        let holder = holder_name(holder);
        let start = handle.attach(AttachRequest { holder, size: None }).await?;
        Ok(Held {
            handle,
            token: start.token,
        })
    }

    pub(super) async fn watch(&self, req: pb::WatchRequest) -> Result<BoxStream<pb::WatchEvent>> {
        let handle = self.session(&req.agent_id, &req.session_id)?;
        if req.replay_lines > 10_000 {
            return Err(Error::invalid("replay_lines must be at most 10000"));
        }
        let start = handle.watch(req.replay_lines).await?;
        let mut first = Vec::new();
        if !start.replay.is_empty() {
            first = start.replay.join("\r\n").into_bytes();
            first.extend_from_slice(b"\r\n");
        }
        first.extend_from_slice(&start.redraw);
        let (tx, rx) = mpsc::channel(STREAM_CHUNKS);
        tokio::spawn(async move {
            let first = pb::WatchEvent { output: first };
            if tx.send(Ok(first)).await.is_err() {
                return;
            }
            let Some(mut live) = start.live else { return };
            while let Some(output) = next_output(&mut live).await {
                if tx.send(Ok(pb::WatchEvent { output })).await.is_err() {
                    return;
                }
            }
        });
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    /// `Attach`: the first message names the session; its keys and sizes and every later
    /// message's go to the session until the person closes their side or hangs up, which
    /// detaches.
    pub(super) async fn attach(
        &self,
        mut inputs: tonic::Streaming<pb::AttachInput>,
    ) -> (String, String, Result<BoxStream<pb::AttachEvent>>) {
        let first = match inputs.message().await {
            Ok(Some(first)) => first,
            Ok(None) => {
                let error = Error::invalid("the Attach stream ended before its first message");
                return (String::new(), String::new(), Err(error));
            }
            Err(status) => {
                let error = Error::invalid(format!("the Attach stream failed: {status}"));
                return (String::new(), String::new(), Err(error));
            }
        };
        let (agent, id) = (first.agent_id.clone(), first.session_id.clone());
        let started = self.start_attach(first, inputs).await;
        (agent, id, started)
    }

    async fn start_attach(
        &self,
        first: pb::AttachInput,
        inputs: tonic::Streaming<pb::AttachInput>,
    ) -> Result<BoxStream<pb::AttachEvent>> {
        let handle = self.session(&first.agent_id, &first.session_id)?;
        let size = window_size(&first)?;
        let holder = holder_name(&first.holder);
        let start = handle.attach(AttachRequest { holder, size }).await?;
        let held = Held {
            handle,
            token: start.token,
        };
        if !first.keys.is_empty() {
            held.handle.keys(held.token, first.keys).await?;
        }
        let held = Arc::new(held);
        let (tx, rx) = mpsc::channel(STREAM_CHUNKS);
        let keyboard = held.clone();
        let input_done = tokio::spawn(forward_inputs(inputs, keyboard));
        tokio::spawn(async move {
            let mut live = start.live;
            let mut output = Some(start.redraw);
            while let Some(chunk) = output {
                if tx
                    .send(Ok(pb::AttachEvent { output: chunk }))
                    .await
                    .is_err()
                {
                    break;
                }
                output = next_output(&mut live).await;
            }
            // The session ended, or the person hung up: either way the keyboard is free.
            input_done.abort();
            drop(held);
        });
        Ok(Box::pin(ReceiverStream::new(rx)))
    }
}

/// A person's hold on a session's keyboard; letting go of the last reference detaches.
pub(crate) struct Held {
    handle: SessionHandle,
    token: u64,
}

impl Held {
    /// The person typed `keys`.
    pub(crate) async fn keys(&self, keys: Vec<u8>) -> Result<()> {
        self.handle.keys(self.token, keys).await
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.handle.detach(self.token);
    }
}

/// Hands the person's keys and sizes to the session until their side closes or fails.
async fn forward_inputs(mut inputs: tonic::Streaming<pb::AttachInput>, held: Arc<Held>) {
    while let Some(Ok(input)) = inputs.next().await {
        match window_size(&input) {
            Ok(Some((cols, rows))) => {
                if held
                    .handle
                    .attach_size(held.token, cols, rows)
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::info!(session = %held.handle.spec.id, error = %e, "an attached window size was refused");
            }
        }
        if !input.keys.is_empty() && held.handle.keys(held.token, input.keys).await.is_err() {
            return;
        }
    }
    // Closing the input side detaches at once, even while output still flows.
    held.handle.detach(held.token);
}

/// The next piece of the live feed: a note in the stream when this reader fell behind, `None`
/// once the session's program exited.
async fn next_output(live: &mut broadcast::Receiver<Arc<[u8]>>) -> Option<Vec<u8>> {
    match live.recv().await {
        Ok(chunk) => Some(chunk.to_vec()),
        Err(broadcast::error::RecvError::Lagged(n)) => Some(
            format!("\r\n[ptyd: {n} output chunks skipped: this watcher fell behind]\r\n")
                .into_bytes(),
        ),
        Err(broadcast::error::RecvError::Closed) => None,
    }
}

/// The window size a message gives: none, or both within range.
fn window_size(input: &pb::AttachInput) -> Result<Option<(u16, u16)>> {
    match (input.cols, input.rows) {
        (0, 0) => Ok(None),
        (cols, rows) => Ok(Some((dimension("cols", cols)?, dimension("rows", rows)?))),
    }
}

/// One side of a person's window: 2 to 1000 cells.
fn dimension(field: &str, value: u32) -> Result<u16> {
    match u16::try_from(value) {
        Ok(v) if (2..=1000).contains(&v) => Ok(v),
        _ => Err(Error::invalid(format!(
            "{field} must be between 2 and 1000 (cols and rows are set together, or neither), \
             got {value}"
        ))),
    }
}

/// The holder's name as given (control characters shown as `?`, at most `MAX_HOLDER_BYTES`),
/// or `DEFAULT_HOLDER`.
fn holder_name(given: &str) -> String {
    let shown: String = given
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let mut cut = shown.len().min(MAX_HOLDER_BYTES);
    while !shown.is_char_boundary(cut) {
        cut -= 1;
    }
    match shown[..cut].trim() {
        "" => DEFAULT_HOLDER.to_owned(),
        name => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_is_named_as_given_cut_and_without_control_characters() {
        let long = "é".repeat(100);
        for (given, want) in [
            ("", DEFAULT_HOLDER),
            ("  ", DEFAULT_HOLDER),
            ("ptyd attach on /dev/pts/3", "ptyd attach on /dev/pts/3"),
            ("evil\x1b[2J", "evil?[2J"),
            (long.as_str(), &"é".repeat(64)),
        ] {
            assert_eq!(holder_name(given), want, "{given:?}");
        }
    }

    #[test]
    fn a_window_size_is_both_or_neither_and_in_range() {
        let input = |cols, rows| pb::AttachInput {
            cols,
            rows,
            ..Default::default()
        };
        assert_eq!(window_size(&input(0, 0)).unwrap(), None);
        assert_eq!(window_size(&input(80, 24)).unwrap(), Some((80, 24)));
        for (cols, rows, field) in [(80, 0, "rows"), (0, 24, "cols"), (1001, 24, "cols")] {
            let e = window_size(&input(cols, rows)).unwrap_err().to_string();
            assert!(e.contains(field), "{cols}x{rows}: {e}");
        }
    }
}
