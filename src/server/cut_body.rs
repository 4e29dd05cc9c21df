//! A response body cut short with a gRPC status: it passes the service's frames on until a
//! future completes (a deadline, a drain), then drops the service's body and ends with that
//! status in its trailers, so a streaming call whose headers went out still gets a status a
//! client can act on.

use http_body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::codegen::Bytes;

/// The service's body until `cut` completes, then `code` and `message` as trailers. `_guard`
/// lives as long as the body (what counts the call in flight, say).
pub(super) struct CutBody<F, G = ()> {
    /// The service's body; dropped at the cut.
    inner: Option<Body>,
    cut: Pin<Box<F>>,
    code: tonic::Code,
    message: &'static str,
    _guard: G,
}

impl<F: Future, G> CutBody<F, G> {
    pub(super) fn new(
        inner: Body,
        cut: F,
        code: tonic::Code,
        message: &'static str,
        guard: G,
    ) -> CutBody<F, G> {
        CutBody {
            inner: Some(inner),
            cut: Box::pin(cut),
            code,
            message,
            _guard: guard,
        }
    }
}

impl<F: Future, G: Unpin> http_body::Body for CutBody<F, G> {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(None) => {
                self.inner = None;
                return Poll::Ready(None);
            }
            Poll::Ready(Some(frame)) => return Poll::Ready(Some(frame)),
            Poll::Pending => {}
        }
        if self.cut.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.inner = None;
        let trailers = tonic::Status::new(self.code, self.message)
            .into_http::<()>()
            .into_parts()
            .0
            .headers;
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}
