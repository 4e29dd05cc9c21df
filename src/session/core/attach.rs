//! A person at the session's keyboard (`Attach`) and beside it (`Watch`): taking and letting go
//! of the keyboard, their keys written, their window's size given to the session and the
//! session's own size given back.

use super::{Core, Cx};
use crate::error::{Error, Result};
use crate::session::{AttachRequest, AttachStart, WatchStart, view};

impl Core {
    /// `Watch`: the replayed lines, the current screen's redraw and the live feed, taken
    /// together so that nothing falls between them.
    pub(super) fn watch(&mut self, replay: u32) -> WatchStart {
        WatchStart {
            replay: view::replay(&self.terminal, replay),
            redraw: self.terminal.redraw(),
            live: self.watchers.subscribe(),
        }
    }

    /// `Attach`: the person takes the keyboard, their window's size given to the session.
    pub(super) fn attach(
        &mut self,
        cx: &mut Cx<'_>,
        request: AttachRequest,
    ) -> Result<AttachStart> {
        if self.exited() {
            return Err(self.exited_error());
        }
        let own_size = self.terminal.size();
        let token = self
            .keyboard
            .take(request.holder.clone(), own_size)
            .map_err(|holder| {
                Error::FailedPrecondition(format!(
                    "terminal session {} is attached by {holder}; one person at a time",
                    self.spec.id
                ))
            })?;
        if let Some((cols, rows)) = request.size {
            self.resize(cx, cols, rows);
        }
        let live = self
            .watchers
            .subscribe()
            .ok_or_else(|| self.exited_error())?;
        let redraw = self.terminal.redraw();
        tracing::info!(session = %self.spec.id, holder = %request.holder, "a person took the keyboard");
        self.publish(cx);
        Ok(AttachStart {
            token,
            redraw,
            live,
        })
    }

    /// The holder of `token` resized their window.
    pub(super) fn attach_size(&mut self, cx: &mut Cx<'_>, token: u64, cols: u16, rows: u16) {
        if self.keyboard.holds(token) {
            self.resize(cx, cols, rows);
        }
    }

    /// The holder of `token` let go: the session gets its own size back.
    pub(super) fn detach(&mut self, cx: &mut Cx<'_>, token: u64) {
        if let Some((cols, rows)) = self.keyboard.release(token) {
            tracing::info!(session = %self.spec.id, "the person let go of the keyboard");
            self.resize(cx, cols, rows);
            self.publish(cx);
        }
    }

    /// The person's keys went out (`written` of them); a failed write drops them, as nobody
    /// can read them.
    pub(super) fn on_keys_written(&mut self, cx: &mut Cx<'_>, written: std::io::Result<usize>) {
        // The keys themselves are never logged: they may be a password.
        match written {
            Ok(n) => self.keyboard.written(n),
            Err(e) => {
                tracing::debug!(session = %self.spec.id, error = %e, "writing a person's keys failed");
                self.keyboard.drop_keys();
            }
        }
        self.probe.rearm(cx.now);
    }

    /// Gives the terminal and its model a new size (the kernel tells the program).
    fn resize(&mut self, cx: &mut Cx<'_>, cols: u16, rows: u16) {
        if self.terminal.size() == (cols, rows) {
            return;
        }
        if let Err(e) = cx.tty.resize(cols, rows) {
            tracing::warn!(session = %self.spec.id, error = %e, "resizing the terminal failed");
            return;
        }
        self.terminal.resize(cols, rows);
        self.publish(cx);
    }
}
