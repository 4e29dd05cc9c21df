//! Answering the calls in flight before an upgrade in place re-executes the daemon: every call
//! in flight (and any that arrives meanwhile) ends with `UNAVAILABLE`, which clients treat as
//! "retry", instead of a connection that breaks mid-call (tonic reports that as `UNKNOWN:
//! transport error`). [`DrainLayer`] wraps both listeners' services; [`Drain::begin`] ends
//! what is in flight and waits, bounded, until every answer is out. A streaming response whose
//! headers went out ends with `UNAVAILABLE` trailers, as `deadline` ends one at its deadline.

use super::cut_body::CutBody;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;

/// What a call in flight during an upgrade is told.
const MESSAGE: &str = "the daemon is upgrading in place; call again (the command keeps running)";
/// Longest wait for the answers in flight to go out before the exec goes ahead anyway.
const ANSWER_WAIT: Duration = Duration::from_secs(2);
/// Time for the connections to write the last answers to their sockets once every call has
/// answered (the answers sit in HTTP/2 buffers until each connection's task runs).
const FLUSH_PAUSE: Duration = Duration::from_millis(50);

/// The shared state: the current drain's token and the number of calls in flight.
#[derive(Clone, Default)]
pub(crate) struct Drain {
    token: Arc<Mutex<CancellationToken>>,
    in_flight: Arc<AtomicUsize>,
}

impl Drain {
    /// Ends every call in flight with `UNAVAILABLE` (and answers new ones so) and waits until
    /// their answers are out, or [`ANSWER_WAIT`] passed.
    pub(crate) async fn begin(&self) {
        self.current().cancel();
        let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
        while self.in_flight.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let left = self.in_flight.load(Ordering::Acquire);
        if left > 0 {
            tracing::warn!(calls = left, "calls still answering after {ANSWER_WAIT:?}");
        }
        tokio::time::sleep(FLUSH_PAUSE).await;
    }

    /// Serves normally again (the upgrade did not happen).
    pub(crate) fn end(&self) {
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = CancellationToken::new();
    }

    fn current(&self) -> CancellationToken {
        self.token.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Counts a call in flight until dropped.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn new(count: &Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::AcqRel);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Adds [`Draining`] to a tonic server.
#[derive(Clone)]
pub(crate) struct DrainLayer(pub(crate) Drain);

impl<S> tower::Layer<S> for DrainLayer {
    type Service = Draining<S>;

    fn layer(&self, inner: S) -> Draining<S> {
        Draining {
            inner,
            drain: self.0.clone(),
        }
    }
}

/// Answers `UNAVAILABLE` for every call in flight once a drain begins.
#[derive(Clone)]
pub(crate) struct Draining<S> {
    inner: S,
    drain: Drain,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for Draining<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let token = self.drain.current();
        let counted = InFlight::new(&self.drain.in_flight);
        let response = self.inner.call(request);
        Box::pin(async move {
            tokio::select! {
                biased;
                _ = token.cancelled() => {
                    drop(counted);
                    Ok(tonic::Status::unavailable(MESSAGE).into_http())
                }
                result = response => result.map(|r| {
                    r.map(|body| {
                        let drained = token.cancelled_owned();
                        let code = tonic::Code::Unavailable;
                        Body::new(CutBody::new(body, drained, code, MESSAGE, counted))
                    })
                }),
            }
        })
    }
}
