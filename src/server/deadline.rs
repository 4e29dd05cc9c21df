//! The caller's deadline (`grpc-timeout`), answered `DEADLINE_EXCEEDED`. tonic's server enforces
//! the header itself but answers `CANCELLED: Timeout expired`, which the contract reserves for a
//! caller that cancelled (and which clients that retry on deadlines misread). [`DeadlineLayer`]
//! sits inside tonic's own timer: it starts its timer first, from the same header, so on the
//! tick where both expire it is polled first and its answer is the one sent. A streaming
//! response (`SendStream`, `Watch`) whose headers went out in time is ended at the deadline with
//! `DEADLINE_EXCEEDED` trailers; dropping the stream releases the session, as a hang-up does.

use super::cut_body::CutBody;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tonic::body::Body;

/// What a caller whose deadline passed is told.
const MESSAGE: &str = "the caller's deadline (grpc-timeout) passed before the call finished";

/// Adds [`Deadline`] to a tonic server.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeadlineLayer;

impl<S> tower::Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline { inner }
    }
}

/// Answers `DEADLINE_EXCEEDED` once the request's `grpc-timeout` has passed.
#[derive(Clone, Debug)]
pub(crate) struct Deadline<S> {
    inner: S,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for Deadline<S>
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
        // Taken before tonic's own timer starts (it starts once this returns), so this one is
        // never later.
        let deadline = grpc_timeout(request.headers()).map(|t| Instant::now() + t);
        let response = self.inner.call(request);
        Box::pin(async move {
            let Some(deadline) = deadline else {
                return response.await;
            };
            match tokio::time::timeout_at(deadline, response).await {
                Ok(result) => result.map(|r| {
                    r.map(|body| {
                        let at_deadline = tokio::time::sleep_until(deadline);
                        let code = tonic::Code::DeadlineExceeded;
                        Body::new(CutBody::new(body, at_deadline, code, MESSAGE, ()))
                    })
                }),
                Err(_) => Ok(tonic::Status::deadline_exceeded(MESSAGE).into_http()),
            }
        })
    }
}

/// The `grpc-timeout` header: 1 to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`), as the
/// gRPC-over-HTTP/2 spec defines it; none when absent or malformed (tonic ignores those too).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    parse_timeout(headers.get("grpc-timeout")?.to_str().ok()?)
}

fn parse_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_values_parse_as_the_spec_says() {
        let table = [
            ("1H", Some(Duration::from_secs(3600))),
            ("2M", Some(Duration::from_secs(120))),
            ("3S", Some(Duration::from_secs(3))),
            ("250m", Some(Duration::from_millis(250))),
            ("7u", Some(Duration::from_micros(7))),
            ("99999999n", Some(Duration::from_nanos(99_999_999))),
            ("123456789m", None), // more than 8 digits
            ("", None),
            ("m", None),
            ("10", None),
            ("10x", None),
            ("-1S", None),
            ("1.5S", None),
        ];
        for (value, expected) in table {
            assert_eq!(parse_timeout(value), expected, "{value:?}");
        }
    }
}
