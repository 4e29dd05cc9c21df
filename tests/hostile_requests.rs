//! Requests a careless or hostile caller sends: bytes that are not protobuf, strings that are not
//! UTF-8, fields of megabytes, and ids spelled other than ptyd spells them. Each is the caller's
//! fault and answered as such (`INVALID_ARGUMENT`, `NOT_FOUND`), quoting at most 200 bytes of
//! what was sent, and the daemon serves the next request as before.

mod support;

use ptyd::pb::{CloseRequest, ReadRequest, SignalRequest};
use std::path::Path;
use support::*;
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

const A: &str = "hostile";

/// A codec that sends the given bytes as the message and reads the answer's bytes back: a
/// client that does not speak protobuf.
#[derive(Default)]
struct RawBytes;

struct RawEncoder;
struct RawDecoder;

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Vec<u8>, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut;
        buf.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        use prost::bytes::Buf;
        let mut out = vec![0; buf.remaining()];
        buf.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

impl Codec for RawBytes {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

/// `method` of the Terminals service called with `body` as the message's bytes.
async fn raw_call(socket: &Path, method: &str, body: Vec<u8>) -> Result<Vec<u8>, tonic::Status> {
    let channel = ptyd::client::channel(socket).await.expect("a channel");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("the channel is ready");
    let path = format!("/ptyd.v1.Terminals/{method}")
        .parse()
        .expect("a path");
    grpc.unary(tonic::Request::new(body), path, RawBytes)
        .await
        .map(|r| r.into_inner())
}

#[tokio::test]
async fn bytes_that_are_not_protobuf_are_the_callers_fault() {
    timed(async {
        let mut d = start_daemon().await;
        let session = open(&mut d.client, A).await;
        // (what, the message's bytes)
        let cases: [(&str, Vec<u8>); 3] = [
            ("a truncated field", vec![0x0a, 0x20, b'x']),
            ("a wire type that does not exist", vec![0x0f, 0x01]),
            (
                // agent_id (field 1, length-delimited) holding bytes that are not UTF-8
                "a string field that is not UTF-8",
                vec![0x0a, 0x03, 0xff, 0xfe, 0xfd],
            ),
        ];
        for (what, body) in cases {
            let status = raw_call(&d.socket, "List", body).await.expect_err(what);
            assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
            assert!(
                status.message().contains("not a valid protobuf encoding"),
                "{what}: {status:?}"
            );
        }
        // Still serving, on a fresh channel and on the old one.
        let info = session_info(&mut d.client, A, &session).await;
        assert!(info.is_some(), "the session is still listed");
        d.stop().await;
    })
    .await;
}

#[tokio::test]
async fn huge_fields_are_quoted_at_most_200_bytes() {
    timed(async {
        let mut d = start_daemon().await;
        let session = open(&mut d.client, A).await;
        let huge_id = format!("t{}", "9".repeat(17_000));
        let status = d
            .client
            .read(ReadRequest {
                agent_id: A.into(),
                session_id: huge_id.clone(),
                ..Default::default()
            })
            .await
            .expect_err("no such session");
        assert_eq!(status.code(), Code::NotFound, "{status:?}");
        assert!(
            status.message().len() < 300,
            "{} bytes",
            status.message().len()
        );
        assert!(
            status.message().contains(&huge_id[..150]) && status.message().contains('…'),
            "the head of the id, then an ellipsis: {}",
            status.message()
        );
        let status = d
            .client
            .signal(SignalRequest {
                agent_id: A.into(),
                session_id: session.clone(),
                signal: "X".repeat(3 << 20),
            })
            .await
            .expect_err("no such signal");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().len() < 400,
            "{} bytes",
            status.message().len()
        );
        let bad_type = d
            .client
            .open(ptyd::pb::OpenRequest {
                agent_id: A.into(),
                r#type: "é".repeat(100_000),
                ..Default::default()
            })
            .await
            .expect_err("no such type");
        assert_eq!(bad_type.code(), Code::InvalidArgument);
        assert!(bad_type.message().len() < 600, "{bad_type:?}");
        assert_eq!(
            run_ok(&mut d.client, A, &session, "echo still").await,
            "still"
        );
        d.stop().await;
    })
    .await;
}

#[tokio::test]
async fn only_the_canonical_id_names_a_session() {
    timed(async {
        let mut d = start_daemon().await;
        let session = open(&mut d.client, A).await;
        assert_eq!(session, "t1");
        for alias in ["t01", "t0001", "t+1"] {
            let status = d
                .client
                .close(CloseRequest {
                    agent_id: A.into(),
                    session_id: alias.into(),
                })
                .await
                .expect_err(alias);
            assert_eq!(status.code(), Code::NotFound, "{alias}: {status:?}");
        }
        assert!(
            session_info(&mut d.client, A, &session).await.is_some(),
            "t1 is still open"
        );
        d.stop().await;
    })
    .await;
}
