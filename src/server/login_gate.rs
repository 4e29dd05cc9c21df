//! What a peer that has not authenticated may hold on a listener others can reach
//! (`--listen-tcp`, `ptyd mcp --listen`; docs/security.md): a connection that has not made
//! one request with a valid token within `LOGIN_WITHIN` is closed, at most
//! `MAX_UNAUTHENTICATED` such connections are open at once (more wait in the kernel's backlog),
//! and an accept error (`EMFILE`: out of descriptors) is waited out instead of retried in a
//! busy loop. Authenticated connections are not limited by it. The request layer says which
//! connection authenticated by its peer address, unique while the connection lives.

use dashmap::DashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a connection may stay without a request that carries a valid token.
pub(crate) const LOGIN_WITHIN: Duration = Duration::from_secs(10);
/// How many connections may be open without having authenticated.
pub(crate) const MAX_UNAUTHENTICATED: usize = 64;
/// How long accepting pauses after an error: the error (out of descriptors, most likely)
/// lasts until a connection closes, and retrying at once would spin a core.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The gate of one listener.
#[derive(Clone)]
pub(crate) struct LoginGate {
    shared: Arc<Shared>,
}

struct Shared {
    /// `LOGIN_WITHIN`, but for tests.
    login_within: Duration,
    unauthenticated: Arc<Semaphore>,
    /// The connections that have not authenticated yet, by peer address.
    waiting: DashMap<SocketAddr, Arc<Login>>,
}

/// One connection's login: done once a request authenticated; until then it holds a place
/// among the unauthenticated.
struct Login {
    done: AtomicBool,
    place: Mutex<Option<OwnedSemaphorePermit>>,
}

impl std::fmt::Debug for LoginGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginGate")
            .field("unauthenticated", &self.shared.waiting.len())
            .finish()
    }
}

impl Default for LoginGate {
    fn default() -> LoginGate {
        LoginGate::within(LOGIN_WITHIN)
    }
}

impl LoginGate {
    /// A gate that closes connections not authenticated within `login_within`.
    fn within(login_within: Duration) -> LoginGate {
        LoginGate {
            shared: Arc::new(Shared {
                login_within,
                unauthenticated: Arc::new(Semaphore::new(MAX_UNAUTHENTICATED)),
                waiting: DashMap::new(),
            }),
        }
    }

    /// The next connection of `listener`, once there is room for another unauthenticated one.
    pub(crate) async fn accept(&self, listener: &TcpListener) -> (Gated, SocketAddr) {
        let place = self
            .shared
            .unauthenticated
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let login = Arc::new(Login {
                        done: AtomicBool::new(false),
                        place: Mutex::new(Some(place)),
                    });
                    self.shared.waiting.insert(peer, login.clone());
                    let gated = Gated {
                        stream,
                        peer,
                        login,
                        deadline: Some(Box::pin(tokio::time::sleep(self.shared.login_within))),
                        shared: self.shared.clone(),
                    };
                    return (gated, peer);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection; pausing");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }

    /// The connection from `peer` made a request with a valid token: it is no longer bound by
    /// the gate.
    pub(crate) fn authenticated(&self, peer: Option<SocketAddr>) {
        if let Some((_, login)) = peer.and_then(|p| self.shared.waiting.remove(&p)) {
            login.done.store(true, Ordering::Release);
            login.place.lock().expect("not poisoned").take();
        }
    }

    /// Connections that have not authenticated (tests read it).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.shared.waiting.len()
    }
}

/// A connection the gate let in: closed (reads fail) once `LOGIN_WITHIN` passes without a
/// request that authenticated.
pub(crate) struct Gated {
    stream: TcpStream,
    peer: SocketAddr,
    login: Arc<Login>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    shared: Arc<Shared>,
}

impl Drop for Gated {
    fn drop(&mut self) {
        self.shared
            .waiting
            .remove_if(&self.peer, |_, login| Arc::ptr_eq(login, &self.login));
    }
}

impl AsyncRead for Gated {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.login.done.load(Ordering::Acquire) {
            self.deadline = None;
        } else if let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request with a valid token within 10 s",
            )));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Gated {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Gated {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::TcpConnectInfo {
            local_addr: self.stream.local_addr().ok(),
            remote_addr: Some(self.peer),
        }
    }
}

/// A gated listener, for axum (the MCP HTTP server).
pub(crate) struct GatedListener {
    pub(crate) gate: LoginGate,
    pub(crate) listener: TcpListener,
}

impl axum::serve::Listener for GatedListener {
    type Io = Gated;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Gated, SocketAddr) {
        self.gate.accept(&self.listener).await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// The peer address of a request served through a [`GatedListener`] (axum's `ConnectInfo`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer(pub(crate) SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, GatedListener>>
    for Peer
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, GatedListener>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

/// A gated listener's connections as a stream, for tonic; it ends when the server drops it.
pub(crate) fn incoming(
    gate: LoginGate,
    listener: TcpListener,
) -> tokio_stream::wrappers::ReceiverStream<io::Result<Gated>> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                (gated, _) = gate.accept(&listener) => {
                    if tx.send(Ok(gated)).await.is_err() {
                        return;
                    }
                }
                _ = tx.closed() => return,
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const SOON: Duration = Duration::from_millis(200);

    #[tokio::test]
    async fn a_connection_that_never_authenticates_is_closed_in_time() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let gate = LoginGate::within(SOON);
        let client = TcpStream::connect(address).await.unwrap();
        let (mut gated, _) = gate.accept(&listener).await;
        assert_eq!(gate.waiting(), 1);
        let started = tokio::time::Instant::now();
        let mut buf = [0; 8];
        let error = gated.read(&mut buf).await.expect_err("closed");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= SOON, "not before its time");
        drop(gated);
        assert_eq!(gate.waiting(), 0, "its place is free again");
        drop(client);
    }

    #[tokio::test]
    async fn an_authenticated_connection_is_no_longer_bound() {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let gate = LoginGate::within(SOON);
        let mut client = TcpStream::connect(address).await.unwrap();
        let (mut gated, peer) = gate.accept(&listener).await;
        gate.authenticated(Some(peer));
        assert_eq!(gate.waiting(), 0);
        // Written once its time has passed: the read that takes it comes after the deadline.
        let deadline = tokio::time::Instant::now() + SOON * 2;
        tokio::time::sleep_until(deadline).await;
        client.write_all(b"late").await.unwrap();
        let mut buf = [0; 4];
        gated.read_exact(&mut buf).await.expect("still open");
        assert_eq!(&buf, b"late");
    }

    #[tokio::test]
    async fn at_most_64_unauthenticated_connections_are_let_in() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let gate = LoginGate::default();
        let mut clients = Vec::new();
        for _ in 0..MAX_UNAUTHENTICATED + 1 {
            clients.push(TcpStream::connect(address).await.unwrap());
        }
        let mut gated = Vec::new();
        for _ in 0..MAX_UNAUTHENTICATED {
            gated.push(gate.accept(&listener).await);
        }
        // The 65th waits in the backlog ...
        let next = gate.accept(&listener);
        tokio::pin!(next);
        assert!(
            futures_poll_once(next.as_mut()).await.is_none(),
            "no room for a 65th"
        );
        // ... until one authenticates.
        gate.authenticated(Some(gated[0].1));
        let (_kept, peer) = next.await;
        assert_eq!(gate.waiting(), MAX_UNAUTHENTICATED);
        assert!(gated.iter().all(|(_, p)| *p != peer));
    }

    /// Polls `f` once: its output if it was ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = f;
        std::future::poll_fn(|cx| match Pin::new(&mut f).poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }
}
