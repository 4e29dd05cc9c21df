//! The answer a connection from another user gets (docs/security.md): a gRPC
//! `PERMISSION_DENIED` naming the socket's owner, which a client shows as any failed call, then
//! an HTTP/2 GOAWAY carrying the same words as its debug data. The refused connection never
//! reaches tonic, h2 or the service: this module speaks just enough HTTP/2 by hand to answer.
//! It reads frame headers only (to find the first request's stream id), never a header block,
//! and a peer gets a bounded time and number of bytes before the connection is closed.

use super::frame::{
    FLAG_ACK, FLAG_END_HEADERS, FLAG_END_STREAM, FRAME_HEAD_LEN, PREFACE, TYPE_GOAWAY,
    TYPE_HEADERS, TYPE_SETTINGS, frame,
};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// How long a refused peer has to send its first request, and then to hang up.
const REFUSAL_DEADLINE: Duration = Duration::from_secs(2);
/// The most a refused peer may send before it is cut off.
const MAX_REFUSED_BYTES: usize = 64 << 10;
/// Refused connections answered at once; beyond that they are closed without an answer, so
/// another user cannot make the daemon hold many sockets open.
pub(crate) const MAX_CONCURRENT_REFUSALS: usize = 16;

/// gRPC's PERMISSION_DENIED.
const GRPC_PERMISSION_DENIED: u8 = 7;

/// The refusal's words: who owns the daemon, who asked, and what to do instead.
pub(crate) fn message(owner_uid: u32, peer_uid: Option<u32>, allow_root_hint: bool) -> String {
    let owner = crate::private_dir::user_name(owner_uid).map_or_else(
        || format!("uid {owner_uid}"),
        |name| format!("{name} (uid {owner_uid})"),
    );
    let peer = peer_uid.map_or_else(|| "an unknown user".to_owned(), |u| format!("uid {u}"));
    let mut text = format!(
        "this ptyd socket belongs to {owner} and serves only that user; the connection came \
         from {peer}. Run your own daemon (`ptyd serve`) or pass --socket"
    );
    if allow_root_hint {
        text.push_str(" (root is admitted when the daemon's config sets allow_root = true)");
    }
    text
}

/// Answers `stream` with the refusal and closes it.
pub(crate) async fn refuse(mut stream: UnixStream, message: String) {
    let answer = async {
        // The server's preface (an empty SETTINGS) may go first: a client sends its own without
        // waiting for it.
        stream.write_all(&frame(TYPE_SETTINGS, 0, 0, &[])).await?;
        let stream_id = first_request(&mut stream).await?;
        let mut out = Vec::new();
        if let Some(id) = stream_id {
            out.extend(frame(
                TYPE_HEADERS,
                FLAG_END_HEADERS | FLAG_END_STREAM,
                id,
                &trailers_only(&message),
            ));
        }
        out.extend(goaway(stream_id.unwrap_or(0), &message));
        stream.write_all(&out).await?;
        stream.shutdown().await?;
        // Read what the client still sends until it hangs up, so closing first never turns
        // the answer into a reset on its side.
        let mut sink = [0u8; 4096];
        let mut left = MAX_REFUSED_BYTES;
        while left > 0 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => left = left.saturating_sub(n),
            }
        }
        Ok::<_, std::io::Error>(())
    };
    match tokio::time::timeout(REFUSAL_DEADLINE, answer).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "a refused connection ended early"),
        Err(_) => tracing::debug!("a refused connection was cut off at the deadline"),
    }
}

/// Reads the client's preface and frames up to its first HEADERS frame; that frame's stream id,
/// or none when the peer does not speak HTTP/2 or hangs up first. SETTINGS are acknowledged;
/// every other frame is skipped unread.
async fn first_request(stream: &mut UnixStream) -> std::io::Result<Option<u32>> {
    let mut preface = [0u8; PREFACE.len()];
    if stream.read_exact(&mut preface).await.is_err() || &preface != PREFACE {
        return Ok(None);
    }
    let mut budget = MAX_REFUSED_BYTES;
    loop {
        let mut head = [0u8; FRAME_HEAD_LEN];
        if stream.read_exact(&mut head).await.is_err() {
            return Ok(None);
        }
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if kind == TYPE_HEADERS && id != 0 {
            return Ok(Some(id));
        }
        budget = budget.saturating_sub(FRAME_HEAD_LEN + len);
        if budget == 0 {
            return Ok(None);
        }
        let skipped =
            tokio::io::copy(&mut (&mut *stream).take(len as u64), &mut tokio::io::sink()).await?;
        if skipped < len as u64 {
            return Ok(None);
        }
        if kind == TYPE_SETTINGS && flags & FLAG_ACK == 0 {
            stream
                .write_all(&frame(TYPE_SETTINGS, FLAG_ACK, 0, &[]))
                .await?;
        }
    }
}

/// GOAWAY after `last_stream_id`, NO_ERROR, with `message` as its debug data.
fn goaway(last_stream_id: u32, message: &str) -> Vec<u8> {
    let mut payload = (last_stream_id & 0x7fff_ffff).to_be_bytes().to_vec();
    payload.extend_from_slice(&0u32.to_be_bytes());
    payload.extend_from_slice(message.as_bytes());
    frame(TYPE_GOAWAY, 0, 0, &payload)
}

/// The header block of a gRPC "trailers-only" response: `:status: 200` (HPACK static index 8),
/// the gRPC content type, `grpc-status: 7` and the percent-encoded `grpc-message`. Every field
/// but the first is a literal without indexing, so the client's HPACK table is never touched.
fn trailers_only(message: &str) -> Vec<u8> {
    let mut block = vec![0x88];
    for (name, value) in [
        ("content-type", "application/grpc".to_owned()),
        ("grpc-status", GRPC_PERMISSION_DENIED.to_string()),
        ("grpc-message", percent_encode(message)),
    ] {
        block.push(0x00);
        hpack_string(&mut block, name.as_bytes());
        hpack_string(&mut block, value.as_bytes());
    }
    block
}

/// An HPACK string literal without Huffman coding: the length as a 7-bit-prefix integer, then
/// the bytes (RFC 7541 sections 5.1 and 5.2).
fn hpack_string(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut len = bytes.len();
    if len < 0x7f {
        out.push(len as u8);
    } else {
        out.push(0x7f);
        len -= 0x7f;
        while len >= 0x80 {
            out.push((len % 0x80) as u8 | 0x80);
            len /= 0x80;
        }
        out.push(len as u8);
    }
    out.extend_from_slice(bytes);
}

/// `grpc-message` encoding: bytes outside printable ASCII, and `%`, as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trailers_decode_to_a_grpc_permission_denied() {
        let message = format!("denied: 100% {} é", "x".repeat(300));
        let block = trailers_only(&message);
        let mut decoder = loona_hpack::Decoder::new();
        let fields: Vec<(String, String)> = decoder
            .decode(&block)
            .expect("a valid HPACK block")
            .into_iter()
            .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
            .collect();
        let expected_message = format!("denied: 100%25 {} %C3%A9", "x".repeat(300));
        let expected = [
            (":status", "200"),
            ("content-type", "application/grpc"),
            ("grpc-status", "7"),
            ("grpc-message", expected_message.as_str()),
        ];
        let got: Vec<(&str, &str)> = fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn frames_carry_length_type_flags_and_stream() {
        let f = frame(TYPE_HEADERS, FLAG_END_HEADERS, 3, b"abc");
        assert_eq!(f, [0, 0, 3, 1, 4, 0, 0, 0, 3, b'a', b'b', b'c']);
        let g = goaway(5, "why");
        assert_eq!(&g[..9], [0, 0, 11, TYPE_GOAWAY, 0, 0, 0, 0, 0]);
        assert_eq!(&g[9..], [0, 0, 0, 5, 0, 0, 0, 0, b'w', b'h', b'y']);
    }

    /// The frames `refuse` writes after a client sends `input` and hangs up: (type, flags,
    /// stream id, payload) each.
    async fn answer_to(input: Vec<u8>) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let (server, mut client) = UnixStream::pair().unwrap();
        let refusing = tokio::spawn(refuse(server, "go away".into()));
        client.write_all(&input).await.unwrap();
        client.shutdown().await.unwrap();
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        refusing.await.unwrap();
        let mut frames = Vec::new();
        let mut rest = &out[..];
        while rest.len() >= FRAME_HEAD_LEN {
            let len = usize::from(rest[0]) << 16 | usize::from(rest[1]) << 8 | usize::from(rest[2]);
            let id = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]);
            let payload = rest[FRAME_HEAD_LEN..FRAME_HEAD_LEN + len].to_vec();
            frames.push((rest[3], rest[4], id, payload));
            rest = &rest[FRAME_HEAD_LEN + len..];
        }
        assert!(rest.is_empty(), "whole frames only: {out:?}");
        frames
    }

    #[tokio::test]
    async fn a_request_gets_permission_denied_then_goaway() {
        let mut input = PREFACE.to_vec();
        input.extend(frame(TYPE_SETTINGS, 0, 0, &[0, 4, 0, 0, 0xff, 0xff]));
        input.extend(frame(0x8, 0, 0, &[0, 0, 0, 1])); // WINDOW_UPDATE, skipped
        input.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS, 3, &[0x83, 0x86]));
        let frames = answer_to(input).await;
        let kinds: Vec<(u8, u8, u32)> = frames.iter().map(|f| (f.0, f.1, f.2)).collect();
        assert_eq!(
            kinds,
            [
                (TYPE_SETTINGS, 0, 0),
                (TYPE_SETTINGS, FLAG_ACK, 0),
                (TYPE_HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 3),
                (TYPE_GOAWAY, 0, 0),
            ]
        );
        assert_eq!(frames[2].3, trailers_only("go away"));
        assert_eq!(
            &frames[3].3[..8],
            [0, 0, 0, 3, 0, 0, 0, 0],
            "last stream 3, NO_ERROR"
        );
        assert_eq!(&frames[3].3[8..], b"go away");
    }

    #[tokio::test]
    async fn a_peer_without_a_request_gets_only_goaway() {
        for input in [
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            PREFACE.to_vec(),
            vec![],
        ] {
            let frames = answer_to(input.clone()).await;
            let kinds: Vec<(u8, u32)> = frames.iter().map(|f| (f.0, f.2)).collect();
            assert_eq!(kinds, [(TYPE_SETTINGS, 0), (TYPE_GOAWAY, 0)], "{input:?}");
            assert_eq!(&frames[1].3[8..], b"go away");
        }
    }

    #[test]
    fn the_message_names_the_owner_and_the_peer() {
        let text = message(0, Some(65534), true);
        assert!(text.contains("root (uid 0)"), "{text}");
        assert!(text.contains("uid 65534"), "{text}");
        assert!(text.contains("allow_root"), "{text}");
        assert!(!message(0, None, false).contains("allow_root"));
    }
}
