//! The live feed of `Watch` subscribers: the session's raw output, split only at UTF-8
//! character boundaries, until the session's program exits.

use crate::marks::Utf8Splitter;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Raw-output chunks buffered for `Watch` subscribers before a slow one starts losing chunks.
const WATCH_BUFFER: usize = 1024;

/// The feed, made for the first watcher: its buffer costs memory that idle sessions need not
/// pay.
#[derive(Default)]
pub(super) struct Watchers {
    feed: Option<broadcast::Sender<Arc<[u8]>>>,
    /// The program exited: watchers get no live feed any more.
    ended: bool,
    utf8: Utf8Splitter,
}

impl Watchers {
    /// A new watcher's receiver; `None` once the program exited.
    pub(super) fn subscribe(&mut self) -> Option<broadcast::Receiver<Arc<[u8]>>> {
        (!self.ended).then(|| {
            self.feed
                .get_or_insert_with(|| broadcast::channel(WATCH_BUFFER).0)
                .subscribe()
        })
    }

    /// Hands raw output to the watchers there are.
    pub(super) fn forward(&mut self, bytes: &[u8]) {
        if let Some(feed) = &self.feed
            && feed.receiver_count() > 0
        {
            let piece = self.utf8.split(bytes);
            if !piece.is_empty() {
                let _ = feed.send(piece.into());
            }
        }
    }

    /// The program exited: the watchers' streams end with it.
    pub(super) fn end(&mut self) {
        self.feed = None;
        self.ended = true;
    }
}
