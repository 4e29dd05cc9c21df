//! The server-side answer to clients that send the Unix socket path as the HTTP/2 `:authority`
//! (grpcio since 1.57, grpc-java, grpc-swift, grpcurl): h2 rejects such a request with
//! `RST_STREAM PROTOCOL_ERROR` (hyperium/h2 PR #487, grpc/grpc#38142). [`AuthorityFix`] wraps each
//! accepted connection and rewrites the client-to-server bytes before h2 reads them: an
//! `:authority` that is not a valid URI authority becomes `localhost`.
//!
//! # Design
//! - The 24-byte client preface is checked; anything else (not HTTP/2) passes through untouched.
//! - After it, frames are parsed by their 9-byte header. Every frame passes through unchanged
//!   except HEADERS and their CONTINUATION frames, which are held until END_HEADERS.
//! - Every header block is decoded by an HPACK decoder that mirrors the client's encoder (its
//!   dynamic table, honouring size updates), so indexed references always resolve correctly.
//! - While no block has needed a rewrite, each block is forwarded as the original frames, byte
//!   for byte; the server's decoder then holds the same dynamic table as the client's encoder.
//! - The first `:authority` decides for the connection, since a gRPC channel keeps one target: a
//!   valid one (the Rust client sends `localhost`) puts the connection in pass-through, where
//!   nothing more is parsed or decoded. That keeps the adapter off the request path of good
//!   clients (the HPACK decoder builds a Huffman table for every coded string it meets, tens of
//!   microseconds per request).
//! - From the first block that needs a rewrite on, every block of that connection is re-encoded:
//!   each field as a "literal without indexing" with a literal name, no dynamic-table reference,
//!   no insertion and no size update. The server's dynamic table is never touched again, so it
//!   stays a valid (if unused) table while the client's encoder table moves on. The re-encoded
//!   block is split into frames of at most 16,384 bytes (the smallest SETTINGS_MAX_FRAME_SIZE
//!   any peer may advertise, and what tonic's server keeps); padding is dropped, priority and
//!   END_STREAM are kept. The never-indexed marking of sensitive fields is not carried over: it
//!   only binds intermediaries that re-encode, and the server is the last hop.
//! - A protocol violation the server would answer with a connection error anyway (a frame inside
//!   a header block, a stray CONTINUATION, a PUSH_PROMISE from a client, bad padding, an
//!   undecodable or oversized block) is turned into one HEADERS frame whose block is the
//!   indexed field 0, which RFC 7541 makes a decoding error: the server answers with GOAWAY.
//!   Nothing after it is forwarded.
//!
//! Once h2 accepts such an authority (hyperium/h2 PR #487) and tonic depends on that release,
//! this module goes, and connections reach h2 as they are.

use super::frame::{
    FLAG_END_HEADERS, FLAG_END_STREAM, FLAG_PADDED, FLAG_PRIORITY, FRAME_HEAD_LEN,
    MAX_FRAME_PAYLOAD, PREFACE, TYPE_CONTINUATION, TYPE_HEADERS, TYPE_PUSH_PROMISE,
    write_frame_head,
};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// The server's SETTINGS_HEADER_TABLE_SIZE, the bound on the client encoder's dynamic table:
/// the HTTP/2 default, since tonic's server builder offers no way to change it.
const SERVER_HEADER_TABLE_SIZE: usize = 4_096;
/// Cap on one header block as received (all its frames). h2 itself refuses far less (with
/// default settings about 6 frames of 16 KiB), so only abuse reaches it.
const MAX_BLOCK_BYTES: usize = 256 << 10;
/// Cap on one decoded header list, counted as RFC 7541 does (name + value + 32 per field),
/// which bounds the re-encoded block; h2 answers 64 KiB with GOAWAY by default.
const MAX_DECODED_BYTES: usize = 256 << 10;
/// What an invalid `:authority` becomes.
const REPLACEMENT_AUTHORITY: &[u8] = b"localhost";
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 << 10;

/// A connection whose client-to-server HTTP/2 bytes get an invalid `:authority` replaced by
/// `localhost`; writes pass straight through. It is [`Connected`] like the stream it wraps, so
/// the request extensions keep the same connect info (peer credentials for a Unix stream).
pub struct AuthorityFix<S> {
    inner: S,
    rewriter: Rewriter,
    /// Rewritten bytes not yet handed to the reader, from `pending_pos` on.
    pending: Vec<u8>,
    pending_pos: usize,
    /// Where raw bytes are read from the socket.
    chunk: Box<[u8]>,
}

impl<S> AuthorityFix<S> {
    /// Wraps a freshly accepted connection (nothing read from it yet).
    pub fn new(inner: S) -> Self {
        AuthorityFix {
            inner,
            rewriter: Rewriter::new(),
            pending: Vec::new(),
            pending_pos: 0,
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }
}

impl<S: Connected> Connected for AuthorityFix<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.pending_pos < this.pending.len() || buf.remaining() == 0 {
                let n = buf.remaining().min(this.pending.len() - this.pending_pos);
                buf.put_slice(&this.pending[this.pending_pos..this.pending_pos + n]);
                this.pending_pos += n;
                if this.pending_pos == this.pending.len() {
                    this.pending.clear();
                    this.pending_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut raw = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut raw))?;
            if raw.filled().is_empty() {
                // End of stream: hand over whatever was held back (an incomplete frame), then
                // report the end.
                this.rewriter.finish(&mut this.pending);
                if this.pending.is_empty() {
                    return Poll::Ready(Ok(()));
                }
            } else {
                // May produce nothing (a header block still open): then read on.
                this.rewriter.feed(raw.filled(), &mut this.pending);
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Where the rewriter is in the client's byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// This many bytes of the preface have matched (and been forwarded).
    Preface(usize),
    /// Collecting a frame header into `head`.
    Head,
    /// Forwarding this many more payload bytes of a frame that is not part of a header block.
    Forward(usize),
    /// Holding this many more payload bytes of a HEADERS or CONTINUATION frame.
    Held(usize),
    /// Not HTTP/2, or the first `:authority` was valid: everything passes through untouched.
    Raw,
    /// After a protocol violation: nothing more reaches the server.
    Discard,
}

/// A header block being collected, from its HEADERS frame to the frame with END_HEADERS.
struct Block {
    stream_id: u32,
    /// END_STREAM and PRIORITY of the HEADERS frame.
    flags: u8,
    /// The HEADERS frame's priority fields, when PRIORITY is set.
    priority: [u8; 5],
    /// The frames exactly as received.
    raw: Vec<u8>,
    /// The header block fragments, concatenated.
    fragment: Vec<u8>,
    /// The frame being received: its type, flags and where its payload starts in `raw`.
    frame_type: u8,
    frame_flags: u8,
    payload_start: usize,
}

/// The byte-stream rewriter behind [`AuthorityFix`], free of I/O: `feed` takes the client's bytes
/// in chunks of any size and appends what the server should read.
struct Rewriter {
    phase: Phase,
    head: [u8; FRAME_HEAD_LEN],
    head_len: usize,
    block: Option<Block>,
    /// Mirrors the client's HPACK encoder.
    decoder: loona_hpack::Decoder<'static>,
    /// Set by the first block that needed a rewrite: every block from then on is re-encoded.
    reencode: bool,
    /// The current block re-encoded (reused between blocks).
    encoded: Vec<u8>,
}

impl Rewriter {
    fn new() -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(SERVER_HEADER_TABLE_SIZE);
        Rewriter {
            phase: Phase::Preface(0),
            head: [0; FRAME_HEAD_LEN],
            head_len: 0,
            block: None,
            decoder,
            reencode: false,
            encoded: Vec::new(),
        }
    }

    /// Consumes `input`, appending to `out` the bytes the server should read.
    fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            match self.phase {
                Phase::Raw => {
                    out.extend_from_slice(input);
                    return;
                }
                Phase::Discard => return,
                Phase::Preface(matched) => {
                    let n = input.len().min(PREFACE.len() - matched);
                    if input[..n] != PREFACE[matched..matched + n] {
                        // Not HTTP/2 with prior knowledge: what was forwarded so far is what
                        // came in, and so is everything after.
                        self.phase = Phase::Raw;
                        continue;
                    }
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    self.phase = if matched + n == PREFACE.len() {
                        Phase::Head
                    } else {
                        Phase::Preface(matched + n)
                    };
                }
                Phase::Head => {
                    let n = input.len().min(FRAME_HEAD_LEN - self.head_len);
                    self.head[self.head_len..self.head_len + n].copy_from_slice(&input[..n]);
                    self.head_len += n;
                    input = &input[n..];
                    if self.head_len == FRAME_HEAD_LEN {
                        self.head_len = 0;
                        self.on_frame_head(out);
                    }
                }
                Phase::Forward(left) => {
                    let n = input.len().min(left);
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    self.phase = if n == left {
                        Phase::Head
                    } else {
                        Phase::Forward(left - n)
                    };
                }
                Phase::Held(left) => {
                    let n = input.len().min(left);
                    if let Some(block) = self.block.as_mut() {
                        block.raw.extend_from_slice(&input[..n]);
                    }
                    input = &input[n..];
                    if n == left {
                        self.on_held_frame_end(out);
                    } else {
                        self.phase = Phase::Held(left - n);
                    }
                }
            }
        }
    }

    /// The client closed its side: forwards whatever is held back (an incomplete frame header
    /// or header block) untouched, so the server sees the same truncated stream.
    fn finish(&mut self, out: &mut Vec<u8>) {
        if self.phase == Phase::Discard {
            return;
        }
        if let Some(block) = self.block.take() {
            out.extend_from_slice(&block.raw);
        }
        out.extend_from_slice(&self.head[..self.head_len]);
        self.head_len = 0;
        self.phase = Phase::Raw;
    }

    /// A frame header is complete in `head`.
    fn on_frame_head(&mut self, out: &mut Vec<u8>) {
        let head = self.head;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let frame_type = head[3];
        let flags = head[4];
        let stream_id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;

        match (self.block.as_mut(), frame_type) {
            (None, TYPE_HEADERS) => {
                if len > MAX_BLOCK_BYTES {
                    return self.poison(out, stream_id, "HEADERS frame over the size cap");
                }
                let mut raw = Vec::with_capacity(FRAME_HEAD_LEN + len);
                raw.extend_from_slice(&head);
                self.block = Some(Block {
                    stream_id,
                    flags: flags & (FLAG_END_STREAM | FLAG_PRIORITY),
                    priority: [0; 5],
                    raw,
                    fragment: Vec::new(),
                    frame_type,
                    frame_flags: flags,
                    payload_start: FRAME_HEAD_LEN,
                });
            }
            (Some(block), TYPE_CONTINUATION) if block.stream_id == stream_id => {
                if block.raw.len() + FRAME_HEAD_LEN + len > MAX_BLOCK_BYTES {
                    return self.poison(out, stream_id, "header block over the size cap");
                }
                block.raw.extend_from_slice(&head);
                block.frame_type = frame_type;
                block.frame_flags = flags;
                block.payload_start = block.raw.len();
            }
            (Some(_), _) => {
                return self.poison(
                    out,
                    stream_id,
                    "a header block interrupted by another frame",
                );
            }
            (None, TYPE_CONTINUATION) => {
                return self.poison(out, stream_id, "CONTINUATION without HEADERS");
            }
            (None, TYPE_PUSH_PROMISE) => {
                return self.poison(out, stream_id, "PUSH_PROMISE from a client");
            }
            (None, _) => {
                out.extend_from_slice(&head);
                self.phase = if len == 0 {
                    Phase::Head
                } else {
                    Phase::Forward(len)
                };
                return;
            }
        }
        if len == 0 {
            self.on_held_frame_end(out);
        } else {
            self.phase = Phase::Held(len);
        }
    }

    /// The payload of a held HEADERS or CONTINUATION frame is complete.
    fn on_held_frame_end(&mut self, out: &mut Vec<u8>) {
        self.phase = Phase::Head;
        let Some(block) = self.block.as_mut() else {
            return;
        };
        let payload = &block.raw[block.payload_start..];
        let fragment = if block.frame_type == TYPE_HEADERS {
            match headers_fragment(block.frame_flags, payload) {
                Some((priority, range)) => {
                    block.priority = priority;
                    &payload[range]
                }
                None => {
                    let stream_id = block.stream_id;
                    return self.poison(out, stream_id, "HEADERS padding or priority malformed");
                }
            }
        } else {
            payload
        };
        block.fragment.extend_from_slice(fragment);
        if block.frame_flags & FLAG_END_HEADERS != 0 {
            self.on_block_end(out);
        }
    }

    /// A header block is complete: decode it, then forward it as received or re-encoded.
    fn on_block_end(&mut self, out: &mut Vec<u8>) {
        let Some(block) = self.block.take() else {
            return;
        };
        let encoded = &mut self.encoded;
        encoded.clear();
        let mut decoded_size = 0usize;
        let mut bad_authority = None;
        let mut good_authority = false;
        let result = self.decoder.decode_with_cb(&block.fragment, |name, value| {
            decoded_size = decoded_size.saturating_add(name.len() + value.len() + 32);
            if decoded_size > MAX_DECODED_BYTES {
                return;
            }
            let authority = &*name == b":authority";
            let value: &[u8] = if authority && !authority_is_valid(&value) {
                bad_authority.get_or_insert_with(|| String::from_utf8_lossy(&value).into_owned());
                REPLACEMENT_AUTHORITY
            } else {
                good_authority |= authority;
                &value
            };
            encode_literal(encoded, &name, value);
        });
        if let Err(e) = result {
            tracing::debug!(error = ?e, "HPACK decoding failed");
            return self.poison(out, block.stream_id, "undecodable header block");
        }
        if decoded_size > MAX_DECODED_BYTES {
            return self.poison(
                out,
                block.stream_id,
                "decoded header list over the size cap",
            );
        }
        if let Some(authority) = bad_authority.filter(|_| !self.reencode) {
            tracing::debug!(
                %authority,
                "replacing an invalid :authority with localhost; re-encoding this connection's \
                 header blocks from here on"
            );
            self.reencode = true;
        }
        if self.reencode {
            write_block(out, block.stream_id, block.flags, &block.priority, encoded);
        } else {
            out.extend_from_slice(&block.raw);
            if good_authority {
                self.phase = Phase::Raw;
            }
        }
    }

    /// Ends the connection the way the server would: a HEADERS frame that no HPACK decoder
    /// accepts (indexed field 0), then nothing more.
    fn poison(&mut self, out: &mut Vec<u8>, stream_id: u32, reason: &str) {
        tracing::debug!(
            reason,
            "HTTP/2 protocol violation from a client; ending the connection"
        );
        write_frame_head(out, 1, TYPE_HEADERS, FLAG_END_HEADERS, stream_id);
        out.push(0x80);
        self.block = None;
        self.phase = Phase::Discard;
    }
}

/// Whether h2 accepts `value` as a request's `:authority` (the check in h2's server).
fn authority_is_valid(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

/// Splits a HEADERS payload: its priority fields (zero when absent) and the range of its header
/// block fragment. `None` when padding or priority do not fit the payload.
fn headers_fragment(flags: u8, payload: &[u8]) -> Option<([u8; 5], std::ops::Range<usize>)> {
    let mut start = 0;
    let mut end = payload.len();
    if flags & FLAG_PADDED != 0 {
        let pad = usize::from(*payload.first()?);
        start = 1;
        end = end.checked_sub(pad)?;
    }
    let mut priority = [0; 5];
    if flags & FLAG_PRIORITY != 0 {
        priority.copy_from_slice(payload.get(start..start + 5)?);
        start += 5;
    }
    (start <= end).then_some((priority, start..end))
}

/// Appends one field as "literal header field without indexing, new name", both strings raw.
fn encode_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    for s in [name, value] {
        loona_hpack::encoder::encode_integer_into(s.len(), 7, 0, out)
            .expect("writing to a Vec cannot fail");
        out.extend_from_slice(s);
    }
}

/// Appends `block` as a HEADERS frame (with `flags`' END_STREAM and PRIORITY, and `priority`
/// when set) followed by as many CONTINUATION frames as needed, each payload at most
/// `MAX_FRAME_PAYLOAD`; END_HEADERS goes on the last frame.
fn write_block(out: &mut Vec<u8>, stream_id: u32, flags: u8, priority: &[u8; 5], block: &[u8]) {
    let priority: &[u8] = if flags & FLAG_PRIORITY != 0 {
        priority
    } else {
        &[]
    };
    let first = block.len().min(MAX_FRAME_PAYLOAD - priority.len());
    let (chunk, mut rest) = block.split_at(first);
    let mut head_flags = flags & (FLAG_END_STREAM | FLAG_PRIORITY);
    if rest.is_empty() {
        head_flags |= FLAG_END_HEADERS;
    }
    write_frame_head(
        out,
        priority.len() + chunk.len(),
        TYPE_HEADERS,
        head_flags,
        stream_id,
    );
    out.extend_from_slice(priority);
    out.extend_from_slice(chunk);
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(rest.len().min(MAX_FRAME_PAYLOAD));
        rest = tail;
        let flags = if rest.is_empty() { FLAG_END_HEADERS } else { 0 };
        write_frame_head(out, chunk.len(), TYPE_CONTINUATION, flags, stream_id);
        out.extend_from_slice(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOCKET: &str = "/run/user/1000/ptyd/ptyd.sock";

    // ---------------------------------------------------------------------------------------
    // Building what a client sends

    /// One HPACK field representation, as a client's encoder writes it.
    enum F<'a> {
        /// Indexed field (static or dynamic table).
        Idx(usize),
        /// Literal with incremental indexing, new name.
        Inc(&'a str, &'a str),
        /// Literal with incremental indexing, indexed name.
        IncName(usize, &'a str),
        /// Literal never indexed, indexed name.
        Never(usize, &'a str),
        /// Dynamic table size update.
        Size(usize),
    }

    fn int(out: &mut Vec<u8>, value: usize, prefix: u8, lead: u8) {
        loona_hpack::encoder::encode_integer_into(value, prefix, lead, out).unwrap();
    }

    fn string(out: &mut Vec<u8>, s: &str) {
        int(out, s.len(), 7, 0);
        out.extend_from_slice(s.as_bytes());
    }

    fn hpack(fields: &[F]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in fields {
            match *f {
                F::Idx(i) => int(&mut out, i, 7, 0x80),
                F::Inc(name, value) => {
                    out.push(0x40);
                    string(&mut out, name);
                    string(&mut out, value);
                }
                F::IncName(i, value) => {
                    int(&mut out, i, 6, 0x40);
                    string(&mut out, value);
                }
                F::Never(i, value) => {
                    int(&mut out, i, 4, 0x10);
                    string(&mut out, value);
                }
                F::Size(n) => int(&mut out, n, 5, 0x20),
            }
        }
        out
    }

    fn frame(frame_type: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        out.push(frame_type);
        out.push(flags);
        out.extend_from_slice(&stream_id.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// A complete request header block in one HEADERS frame.
    fn headers(stream_id: u32, flags: u8, block: &[u8]) -> Vec<u8> {
        frame(TYPE_HEADERS, flags | FLAG_END_HEADERS, stream_id, block)
    }

    fn settings() -> Vec<u8> {
        // SETTINGS_ENABLE_PUSH = 0, SETTINGS_HEADER_TABLE_SIZE = 65536 (the client's decoder).
        frame(0x4, 0, 0, &[0, 2, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0])
    }

    /// The preface and the client's SETTINGS.
    fn client_start() -> Vec<u8> {
        [&PREFACE[..], &settings()].concat()
    }

    /// `:method POST`, `:scheme http`, then `path` and `authority` (both inserted into the
    /// client's dynamic table), then `content-type` and `te` (from the dynamic table when
    /// `reuse`, else inserted).
    fn grpc_request(path: &str, authority: &str) -> Vec<u8> {
        hpack(&[
            F::Idx(3),
            F::Idx(6),
            F::IncName(4, path),
            F::IncName(1, authority),
            F::IncName(31, "application/grpc"),
            F::Inc("te", "trailers"),
        ])
    }

    fn run(input: &[u8]) -> Vec<u8> {
        let mut rewriter = Rewriter::new();
        let mut out = Vec::new();
        rewriter.feed(input, &mut out);
        out
    }

    fn run_chunked(input: &[u8], mut sizes: impl FnMut() -> usize) -> Vec<u8> {
        let mut rewriter = Rewriter::new();
        let mut out = Vec::new();
        let mut rest = input;
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(sizes().clamp(1, rest.len()));
            rewriter.feed(chunk, &mut out);
            rest = tail;
        }
        out
    }

    /// A deterministic pseudo-random sequence (xorshift64).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    // ---------------------------------------------------------------------------------------
    // Reading what the server gets

    #[derive(Debug, Clone, PartialEq)]
    struct Frame {
        frame_type: u8,
        flags: u8,
        stream_id: u32,
        payload: Vec<u8>,
    }

    /// The frames after the preface; panics unless `out` is the preface and whole frames.
    fn frames(out: &[u8]) -> Vec<Frame> {
        assert!(out.starts_with(PREFACE), "output starts with the preface");
        let mut rest = &out[PREFACE.len()..];
        let mut frames = Vec::new();
        while !rest.is_empty() {
            assert!(rest.len() >= FRAME_HEAD_LEN, "truncated frame header");
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            assert!(
                rest.len() >= FRAME_HEAD_LEN + len,
                "truncated frame payload"
            );
            frames.push(Frame {
                frame_type: rest[3],
                flags: rest[4],
                stream_id: u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]),
                payload: rest[FRAME_HEAD_LEN..FRAME_HEAD_LEN + len].to_vec(),
            });
            rest = &rest[FRAME_HEAD_LEN + len..];
        }
        frames
    }

    /// A header block as the server reassembles it.
    #[derive(Debug)]
    struct OutBlock {
        stream_id: u32,
        /// Flags of the HEADERS frame.
        flags: u8,
        /// Priority fields of the HEADERS frame, if any.
        priority: Option<Vec<u8>>,
        block: Vec<u8>,
    }

    /// The header blocks in the frames, checking CONTINUATION sequencing, END_HEADERS on the
    /// last frame only, and no padding; every frame at most `MAX_FRAME_PAYLOAD`.
    fn blocks(frames: &[Frame]) -> Vec<OutBlock> {
        let mut out: Vec<OutBlock> = Vec::new();
        let mut open = false;
        for f in frames {
            assert!(
                f.payload.len() <= MAX_FRAME_PAYLOAD,
                "frame over 16384: {f:?}"
            );
            match f.frame_type {
                TYPE_HEADERS => {
                    assert!(!open, "HEADERS inside an open block");
                    let mut payload = &f.payload[..];
                    let mut priority = None;
                    if f.flags & FLAG_PADDED != 0 {
                        let pad = payload[0] as usize;
                        payload = &payload[1..payload.len() - pad];
                    }
                    if f.flags & FLAG_PRIORITY != 0 {
                        priority = Some(payload[..5].to_vec());
                        payload = &payload[5..];
                    }
                    out.push(OutBlock {
                        stream_id: f.stream_id,
                        flags: f.flags,
                        priority,
                        block: payload.to_vec(),
                    });
                    open = f.flags & FLAG_END_HEADERS == 0;
                }
                TYPE_CONTINUATION => {
                    assert!(open, "CONTINUATION outside a block");
                    let last = out.last_mut().unwrap();
                    assert_eq!(last.stream_id, f.stream_id);
                    last.block.extend_from_slice(&f.payload);
                    open = f.flags & FLAG_END_HEADERS == 0;
                }
                _ => assert!(!open, "frame inside an open block: {f:?}"),
            }
        }
        assert!(!open, "a block left open");
        out
    }

    fn owned(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn take_int(b: &mut &[u8], prefix: u8) -> usize {
        let mask = (1u16 << prefix) as usize - 1;
        let mut value = b[0] as usize & mask;
        *b = &b[1..];
        if value == mask {
            let mut shift = 0;
            loop {
                let byte = b[0];
                *b = &b[1..];
                value += ((byte & 0x7f) as usize) << shift;
                shift += 7;
                if byte & 0x80 == 0 {
                    break;
                }
            }
        }
        value
    }

    fn take_string(b: &mut &[u8]) -> String {
        assert_eq!(b[0] & 0x80, 0, "a raw string, not Huffman");
        let len = take_int(b, 7);
        let s = String::from_utf8(b[..len].to_vec()).unwrap();
        *b = &b[len..];
        s
    }

    /// Reads a block written by this module; panics on any representation other than
    /// "literal without indexing, new name" with raw strings (so: no dynamic-table reference,
    /// no insertion, no size update).
    fn literals(mut b: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            assert_eq!(b[0], 0x00, "only literals without indexing with a new name");
            b = &b[1..];
            let name = take_string(&mut b);
            let value = take_string(&mut b);
            out.push((name, value));
        }
        out
    }

    /// Decodes every header block of `out` with one decoder, as the server does.
    fn server_view(out: &[u8]) -> Vec<Vec<(String, String)>> {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(SERVER_HEADER_TABLE_SIZE);
        blocks(&frames(out))
            .iter()
            .map(|b| {
                decoder
                    .decode(&b.block)
                    .expect("the server decodes the block")
                    .into_iter()
                    .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
                    .collect()
            })
            .collect()
    }

    fn poison_frame(stream_id: u32) -> Vec<u8> {
        frame(TYPE_HEADERS, FLAG_END_HEADERS, stream_id, &[0x80])
    }

    // ---------------------------------------------------------------------------------------
    // Pass-through

    /// RFC 7541 C.4: three requests with Huffman strings, the later ones reusing the dynamic
    /// table.
    fn rfc_requests() -> [Vec<u8>; 3] {
        fn hex(s: &str) -> Vec<u8> {
            let s: String = s.split_whitespace().collect();
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        }
        [
            hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
            hex("8286 84be 5886 a8eb 1064 9cbf"),
            hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"),
        ]
    }

    #[test]
    fn valid_authorities_and_other_frames_pass_byte_for_byte() {
        let [r1, r2, r3] = rfc_requests();
        let input = [
            client_start(),
            frame(0x8, 0, 0, &[0, 0, 0x10, 0]), // WINDOW_UPDATE
            headers(1, FLAG_END_STREAM, &r1),
            frame(0x6, 0, 0, &[7; 8]), // PING
            headers(3, 0, &r2),
            frame(0x0, FLAG_END_STREAM, 3, b"\0\0\0\0\x02hi"), // DATA
            headers(5, FLAG_END_STREAM, &r3),
            frame(0x3, 0, 3, &[0, 0, 0, 8]), // RST_STREAM
            frame(0xfa, 0x3, 0, b"an unknown frame type"),
        ]
        .concat();
        assert_eq!(run(&input), input);
        // And the server decodes them as RFC 7541 says.
        assert_eq!(
            server_view(&input),
            vec![
                owned(&[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                ]),
                owned(&[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                    ("cache-control", "no-cache"),
                ]),
                owned(&[
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", "/index.html"),
                    (":authority", "www.example.com"),
                    ("custom-key", "custom-value"),
                ]),
            ]
        );
    }

    #[test]
    fn other_protocols_pass_untouched() {
        for input in [
            &b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"[..],
            b"PRI * HTTP/1.1\r\n\r\nnot quite the preface",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r",
            b"",
        ] {
            assert_eq!(run(input), input);
            assert_eq!(run_chunked(input, || 1), input);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Rewriting

    #[test]
    fn a_socket_path_authority_becomes_localhost() {
        let data = frame(0x0, FLAG_END_STREAM, 1, b"\0\0\0\0\0");
        let input = [
            client_start(),
            headers(1, 0, &grpc_request("/grpc.health.v1.Health/Check", SOCKET)),
            data.clone(),
        ]
        .concat();
        let out = run(&input);
        let frames = frames(&out);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0].payload, settings()[FRAME_HEAD_LEN..]);
        assert_eq!(frames[1].frame_type, TYPE_HEADERS);
        assert_eq!(frames[1].flags, FLAG_END_HEADERS);
        assert_eq!(frames[1].stream_id, 1);
        assert_eq!(
            literals(&frames[1].payload),
            owned(&[
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/grpc.health.v1.Health/Check"),
                (":authority", "localhost"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ])
        );
        assert_eq!(frames[2].payload, data[FRAME_HEAD_LEN..]);
    }

    #[test]
    fn authorities_h2_rejects_are_replaced_and_valid_ones_kept() {
        for (authority, expected) in [
            (SOCKET, "localhost"),
            ("tmp%2Fx%2Fptyd.sock", "localhost"), // grpcio's form for a relative path
            ("", "localhost"),
            ("localhost", "localhost"),
            ("localhost:50051", "localhost:50051"),
            ("[::1]:8080", "[::1]:8080"),
            ("unix.example", "unix.example"),
        ] {
            let request = grpc_request("/p", authority);
            // Rewritten only when invalid: force re-encoding to read the value either way.
            let input = [
                client_start(),
                headers(1, 0, &grpc_request("/first", SOCKET)),
                headers(3, 0, &request),
            ]
            .concat();
            let out = run(&input);
            let blocks = blocks(&frames(&out));
            let fields = literals(&blocks[1].block);
            assert_eq!(
                fields[3],
                owned(&[(":authority", expected)])[0],
                "{authority:?}"
            );
        }
    }

    #[test]
    fn the_dynamic_table_stays_in_step_across_the_switch() {
        // Request 1 has no authority (nothing decided yet) and passes as it is; it fills the
        // client's table with [62] x-trace: one, [63] :path: /a.
        let r1 = hpack(&[
            F::Idx(3),
            F::Idx(6),
            F::IncName(4, "/a"),
            F::Inc("x-trace", "one"),
        ]);
        // Request 2 refers to request 1's entries and inserts the socket path: then
        // [62] :authority: SOCKET, [63] x-trace: one, [64] :path: /a.
        let r2 = hpack(&[
            F::Idx(3),
            F::Idx(6),
            F::Idx(63),
            F::IncName(1, SOCKET),
            F::Idx(63),
        ]);
        // Request 3 is made of references only; request 4 has a valid authority but comes after
        // the switch, and a sensitive header.
        let r3 = hpack(&[F::Idx(3), F::Idx(6), F::Idx(64), F::Idx(62), F::Idx(63)]);
        let r4 = hpack(&[
            F::Idx(3),
            F::Idx(6),
            F::Idx(64),
            F::IncName(1, "localhost"),
            F::Never(23, "Bearer secret"),
        ]);
        let input = [
            client_start(),
            headers(1, FLAG_END_STREAM, &r1),
            headers(3, FLAG_END_STREAM, &r2),
            headers(5, FLAG_END_STREAM, &r3),
            headers(7, FLAG_END_STREAM, &r4),
        ]
        .concat();
        let out = run(&input);

        let common = [(":method", "POST"), (":scheme", "http"), (":path", "/a")];
        let with = |extra: &[(&'static str, &'static str)]| owned(&[&common[..], extra].concat());
        let expected = vec![
            with(&[("x-trace", "one")]),
            with(&[(":authority", "localhost"), ("x-trace", "one")]),
            with(&[(":authority", "localhost"), ("x-trace", "one")]),
            with(&[
                (":authority", "localhost"),
                ("authorization", "Bearer secret"),
            ]),
        ];
        // Decoded in order by one decoder, as the server does: the tables agree.
        assert_eq!(server_view(&out), expected);
        let blocks = blocks(&frames(&out));
        // Request 1 went through as sent; the rest are literals only.
        assert_eq!(blocks[0].block, r1);
        for (b, want) in blocks[1..].iter().zip(&expected[1..]) {
            assert_eq!(&literals(&b.block), want);
            assert_eq!(b.flags, FLAG_END_STREAM | FLAG_END_HEADERS);
        }
        assert_eq!(
            blocks.iter().map(|b| b.stream_id).collect::<Vec<_>>(),
            [1, 3, 5, 7]
        );
    }

    #[test]
    fn a_valid_first_authority_lets_the_rest_of_the_connection_pass_unread() {
        // After a valid first authority nothing is parsed: not a later invalid authority, not
        // even a protocol violation (a stray CONTINUATION), which the server itself judges.
        let stray_continuation = frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 9, b"\x80");
        let input = [
            client_start(),
            headers(1, 0, &grpc_request("/first", "localhost")),
            headers(3, 0, &grpc_request("/second", SOCKET)),
            stray_continuation,
        ]
        .concat();
        assert_eq!(run(&input), input);
        for chunk in [1, 7, 100] {
            assert_eq!(run_chunked(&input, || chunk), input, "chunks of {chunk}");
        }
    }

    #[test]
    fn size_updates_are_followed_and_not_forwarded() {
        // Before the switch a size update is the client's business and passes as it is.
        let r1 = hpack(&[
            F::Size(2048),
            F::Idx(3),
            F::Idx(6),
            F::IncName(4, "/one"),
            F::IncName(1, SOCKET),
        ]);
        // Empty the table, restore it, insert new entries and refer to them.
        let r2 = hpack(&[
            F::Size(0),
            F::Size(4096),
            F::Idx(3),
            F::Idx(6),
            F::IncName(4, "/two"),
            F::Inc("x-b", "2"),
            F::IncName(1, "other%2Fpath"),
        ]);
        // [62] :authority other%2Fpath, [63] x-b 2, [64] :path /two.
        let r3 = hpack(&[F::Idx(3), F::Idx(6), F::Idx(64), F::Idx(62), F::Idx(63)]);
        let input = [
            client_start(),
            headers(1, FLAG_END_STREAM, &r1),
            headers(3, FLAG_END_STREAM, &r2),
            headers(5, FLAG_END_STREAM, &r3),
        ]
        .concat();
        let out = run(&input);
        let blocks = blocks(&frames(&out));
        let fields: Vec<_> = blocks.iter().map(|b| literals(&b.block)).collect();
        let base = [(":method", "POST"), (":scheme", "http")];
        assert_eq!(
            fields,
            vec![
                owned(&[&base[..], &[(":path", "/one"), (":authority", "localhost")]].concat()),
                owned(
                    &[
                        &base[..],
                        &[(":path", "/two"), ("x-b", "2"), (":authority", "localhost")]
                    ]
                    .concat()
                ),
                owned(
                    &[
                        &base[..],
                        &[(":path", "/two"), (":authority", "localhost"), ("x-b", "2")]
                    ]
                    .concat()
                ),
            ]
        );
    }

    #[test]
    fn a_size_update_over_the_server_limit_ends_the_connection() {
        let block = hpack(&[F::Size(8192), F::Idx(3)]);
        let input = [client_start(), headers(1, FLAG_END_STREAM, &block)].concat();
        assert_eq!(run(&input), [client_start(), poison_frame(1)].concat());
    }

    #[test]
    fn a_block_split_across_continuation_frames() {
        for authority in [SOCKET, "localhost"] {
            let block = grpc_request("/ptyd.v1.Terminals/List", authority);
            let (a, rest) = block.split_at(5); // splits the :path literal
            let (b, c) = rest.split_at(7);
            let sent = [
                frame(TYPE_HEADERS, FLAG_END_STREAM, 1, a),
                frame(TYPE_CONTINUATION, 0, 1, b),
                frame(TYPE_CONTINUATION, 0, 1, &[]),
                frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 1, c),
            ]
            .concat();
            let input = [client_start(), sent.clone()].concat();
            let out = run(&input);
            if authority == "localhost" {
                assert_eq!(out, input, "a valid block keeps its frames");
                continue;
            }
            let frames = frames(&out);
            assert_eq!(frames.len(), 2, "{frames:?}");
            assert_eq!(frames[1].flags, FLAG_END_STREAM | FLAG_END_HEADERS);
            assert_eq!(
                literals(&frames[1].payload)[3],
                owned(&[(":authority", "localhost")])[0]
            );
        }
    }

    #[test]
    fn padded_and_prioritised_headers() {
        let priority = [0x80, 0, 0, 0x01, 15]; // exclusive on stream 1, weight 16
        for authority in [SOCKET, "localhost"] {
            let block = grpc_request("/p", authority);
            let payload = [&[7u8][..], &priority, &block, &[0; 7]].concat();
            let flags = FLAG_PADDED | FLAG_PRIORITY | FLAG_END_STREAM | FLAG_END_HEADERS;
            let input = [client_start(), frame(TYPE_HEADERS, flags, 3, &payload)].concat();
            let out = run(&input);
            if authority == "localhost" {
                assert_eq!(out, input);
                continue;
            }
            let frames = frames(&out);
            assert_eq!(
                frames[1].flags,
                FLAG_PRIORITY | FLAG_END_STREAM | FLAG_END_HEADERS,
                "padding dropped, the rest kept"
            );
            assert_eq!(frames[1].payload[..5], priority);
            assert_eq!(
                literals(&frames[1].payload[5..])[3],
                owned(&[(":authority", "localhost")])[0]
            );
        }
    }

    #[test]
    fn a_large_block_is_split_into_frames_of_at_most_16384() {
        let big = "x".repeat(40_000);
        let block = hpack(&[
            F::Idx(3),
            F::Idx(6),
            F::IncName(4, "/p"),
            F::IncName(1, SOCKET),
            F::Inc("x-big", &big),
        ]);
        // The client's own frames are 20,000 bytes (a server advertising more would allow it).
        let priority = [0, 0, 0, 0, 200];
        let mut sent = Vec::new();
        let chunks: Vec<_> = block.chunks(20_000).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let end = if last { FLAG_END_HEADERS } else { 0 };
            sent.extend(if i == 0 {
                let payload = [&priority[..], chunk].concat();
                frame(
                    TYPE_HEADERS,
                    FLAG_PRIORITY | FLAG_END_STREAM | end,
                    1,
                    &payload,
                )
            } else {
                frame(TYPE_CONTINUATION, end, 1, chunk)
            });
        }
        let out = run(&[client_start(), sent].concat());
        let frames = frames(&out);
        assert!(frames.len() >= 4, "split into HEADERS and CONTINUATIONs");
        assert_eq!(frames[1].payload.len(), MAX_FRAME_PAYLOAD);
        assert_eq!(frames[1].flags, FLAG_PRIORITY | FLAG_END_STREAM);
        for f in &frames[2..frames.len() - 1] {
            assert_eq!((f.frame_type, f.flags), (TYPE_CONTINUATION, 0));
        }
        let last = frames.last().unwrap();
        assert_eq!(
            (last.frame_type, last.flags),
            (TYPE_CONTINUATION, FLAG_END_HEADERS)
        );
        let blocks = blocks(&frames);
        assert_eq!(blocks[0].priority.as_deref(), Some(&priority[..]));
        assert_eq!(
            literals(&blocks[0].block),
            owned(&[
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/p"),
                (":authority", "localhost"),
                ("x-big", &big),
            ])
        );
    }

    /// Everything above in one connection.
    fn busy_connection() -> Vec<u8> {
        let [r1, r2, _] = rfc_requests();
        let block = grpc_request("/ptyd.v1.Terminals/Send", SOCKET);
        let (a, b) = block.split_at(9);
        let padded = [&[3u8][..], &grpc_request("/q", "x"), &[0; 3]].concat();
        [
            client_start(),
            headers(1, FLAG_END_STREAM, &r1),
            frame(0x8, 0, 0, &[0, 1, 0, 0]),
            headers(3, 0, &r2),
            frame(0x0, 0, 3, &[9; 300]),
            frame(TYPE_HEADERS, 0, 5, a),
            frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 5, b),
            frame(0x0, FLAG_END_STREAM, 5, &[1; 40]),
            frame(TYPE_HEADERS, FLAG_PADDED | FLAG_END_HEADERS, 7, &padded),
            headers(
                9,
                0,
                &hpack(&[F::Idx(3), F::Idx(6), F::Idx(62), F::Idx(63)]),
            ),
            frame(0x6, 0, 0, &[0; 8]),
        ]
        .concat()
    }

    #[test]
    fn any_chunking_gives_the_same_output() {
        let input = busy_connection();
        let whole = run(&input);
        assert_eq!(server_view(&whole).len(), 5);
        for size in [1, 2, 3, 5, 8, 9, 13, 24, 25, 100, 4096] {
            assert_eq!(run_chunked(&input, || size), whole, "chunks of {size}");
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200 {
            assert_eq!(run_chunked(&input, || 1 + rng.below(64)), whole);
        }
    }

    // ---------------------------------------------------------------------------------------
    // Protocol violations and the end of the stream

    #[test]
    fn protocol_violations_end_with_an_undecodable_block() {
        let ok = grpc_request("/p", "localhost");
        let cases: Vec<(&str, Vec<u8>, u32)> = vec![
            (
                "a DATA frame inside a header block",
                [
                    frame(TYPE_HEADERS, 0, 1, &ok[..3]),
                    frame(0x0, 0, 1, b"data"),
                ]
                .concat(),
                1,
            ),
            (
                "CONTINUATION without HEADERS",
                frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 1, &ok),
                1,
            ),
            (
                "CONTINUATION on another stream",
                [
                    frame(TYPE_HEADERS, 0, 1, &ok[..3]),
                    frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 3, &ok[3..]),
                ]
                .concat(),
                3,
            ),
            (
                "PUSH_PROMISE",
                frame(TYPE_PUSH_PROMISE, FLAG_END_HEADERS, 1, &[0, 0, 0, 2]),
                1,
            ),
            (
                "padding longer than the payload",
                frame(TYPE_HEADERS, FLAG_PADDED | FLAG_END_HEADERS, 1, &[9, 0x82]),
                1,
            ),
            (
                "priority fields missing",
                frame(TYPE_HEADERS, FLAG_PRIORITY | FLAG_END_HEADERS, 1, &[0, 0]),
                1,
            ),
            ("indexed field 0", headers(1, 0, &[0x82, 0x80]), 1),
            (
                "an index past the tables",
                headers(1, 0, &hpack(&[F::Idx(62)])),
                1,
            ),
            ("a truncated literal", headers(1, 0, &ok[..ok.len() - 2]), 1),
            (
                "a HEADERS frame over the cap",
                frame(TYPE_HEADERS, 0, 1, &[])[..3]
                    .iter()
                    .map(|_| 0xff)
                    .chain([TYPE_HEADERS, 0, 0, 0, 0, 1])
                    .collect(),
                1,
            ),
            (
                "a decoded list over the cap",
                {
                    // 100 references to a 4,000-byte entry: a small block, a huge list.
                    let mut block = hpack(&[F::Inc("x-bomb", &"b".repeat(4000))]);
                    block.extend(std::iter::repeat_n(0x80 | 62, 100));
                    headers(1, 0, &block)
                },
                1,
            ),
        ];
        for (what, sent, stream_id) in cases {
            // Whatever follows is not forwarded.
            let input = [client_start(), sent, headers(11, 0, &ok)].concat();
            let expected = [client_start(), poison_frame(stream_id)].concat();
            assert_eq!(run(&input), expected, "{what}");
            assert_eq!(run_chunked(&input, || 1), expected, "{what}, byte by byte");
            // The server's decoder refuses the block.
            let block = &blocks(&frames(&expected))[0].block;
            assert!(loona_hpack::Decoder::new().decode(block).is_err());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let types = [0x0, 0x1, 0x4, 0x5, 0x8, 0x9, 0x9, 0x1, 0xfe];
        for _ in 0..3000 {
            let mut input = client_start();
            for _ in 0..rng.below(6) {
                let len = rng.below(40);
                let mut payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                if rng.below(2) == 0 {
                    // Mostly-valid HPACK, to get past the first byte more often.
                    payload = [grpc_request("/r", SOCKET), payload].concat();
                }
                let frame_type = types[rng.below(types.len())];
                let flags = rng.next() as u8;
                input.extend(frame(
                    frame_type,
                    flags,
                    1 + 2 * rng.below(3) as u32,
                    &payload,
                ));
            }
            if rng.below(4) == 0 {
                let cut = rng.below(input.len());
                input.truncate(cut);
            }
            let mut rewriter = Rewriter::new();
            let mut out = Vec::new();
            let mut rest = &input[..];
            while !rest.is_empty() {
                let (chunk, tail) = rest.split_at((1 + rng.below(50)).min(rest.len()));
                rewriter.feed(chunk, &mut out);
                rest = tail;
            }
            rewriter.finish(&mut out);
        }
    }

    #[test]
    fn the_end_of_the_stream_forwards_what_was_held() {
        let block = grpc_request("/p", SOCKET);
        let open = frame(TYPE_HEADERS, 0, 1, &block);
        let input = [
            client_start(),
            open,
            frame(TYPE_CONTINUATION, 0, 1, &[])[..4].to_vec(),
        ]
        .concat();
        let mut rewriter = Rewriter::new();
        let mut out = Vec::new();
        rewriter.feed(&input, &mut out);
        assert_eq!(out, client_start(), "the open block is held");
        rewriter.finish(&mut out);
        assert_eq!(out, input, "then forwarded untouched");
        rewriter.finish(&mut out);
        assert_eq!(out, input, "once");
    }

    // ---------------------------------------------------------------------------------------
    // The adapter, and h2 itself as the judge

    #[tokio::test]
    async fn the_adapter_rewrites_reads_and_passes_writes() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let input = busy_connection();
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let mut server = AuthorityFix::new(server);
        client.write_all(&input).await.unwrap();
        client.shutdown().await.unwrap();
        // Small reads, so rewritten bytes wait in the adapter between calls.
        let mut got = Vec::new();
        let mut buf = [0u8; 7];
        loop {
            let n = server.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, run(&input));
        server.write_all(b"to the client").await.unwrap();
        server.flush().await.unwrap();
        let mut back = [0u8; 13];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"to the client");
    }

    /// Serves `input` to a real h2 server (through the adapter when `fix`) and returns the
    /// first `count` requests it accepts, as (authority, path, x-trace).
    async fn h2_accepts(input: Vec<u8>, fix: bool, count: usize) -> Vec<(String, String, String)> {
        use tokio::io::AsyncWriteExt;
        async fn accept<T>(io: T, count: usize) -> Vec<(String, String, String)>
        where
            T: AsyncRead + AsyncWrite + Unpin,
        {
            let mut conn = h2::server::handshake(io).await.expect("h2 handshake");
            let mut seen = Vec::new();
            while seen.len() < count {
                let (request, _respond) = conn
                    .accept()
                    .await
                    .expect("a request")
                    .expect("no connection error");
                let uri = request.uri();
                seen.push((
                    uri.authority().map(|a| a.to_string()).unwrap_or_default(),
                    uri.path().to_string(),
                    request
                        .headers()
                        .get("x-trace")
                        .map(|v| v.to_str().unwrap().to_string())
                        .unwrap_or_default(),
                ));
            }
            seen
        }
        // The client end stays open: h2 stops accepting once the client has gone.
        let (mut client, server) = tokio::io::duplex(1 << 20);
        client.write_all(&input).await.unwrap();
        let accepted = async {
            if fix {
                accept(AuthorityFix::new(server), count).await
            } else {
                accept(server, count).await
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), accepted)
            .await
            .expect("h2 accepted the requests in time")
    }

    fn h2_input() -> Vec<u8> {
        let traced = |path: &'static str, authority: &'static str, trace: &'static str| {
            hpack(&[
                F::Idx(2),
                F::Idx(6),
                F::IncName(4, path),
                F::IncName(1, authority),
                F::Inc("x-trace", trace),
            ])
        };
        let big = traced("/big", SOCKET, "big");
        let (a, b) = big.split_at(10);
        let padded = [&[5u8][..], &traced("/padded", SOCKET, "pad"), &[0; 5]].concat();
        [
            client_start(),
            // The first authority decides: invalid here, so every block is checked.
            headers(1, FLAG_END_STREAM, &traced("/one", SOCKET, "1")),
            headers(3, FLAG_END_STREAM, &traced("/two", SOCKET, "2")),
            // :path /two, :authority SOCKET, x-trace 2, all from the dynamic table.
            headers(
                5,
                FLAG_END_STREAM,
                &hpack(&[F::Idx(2), F::Idx(6), F::Idx(64), F::Idx(63), F::Idx(62)]),
            ),
            frame(TYPE_HEADERS, FLAG_END_STREAM, 7, a),
            frame(TYPE_CONTINUATION, FLAG_END_HEADERS, 7, b),
            frame(
                TYPE_HEADERS,
                FLAG_PADDED | FLAG_END_STREAM | FLAG_END_HEADERS,
                9,
                &padded,
            ),
            // A valid authority comes late: the connection was decided by the first one.
            headers(
                11,
                FLAG_END_STREAM,
                &hpack(&[
                    F::Idx(2),
                    F::Idx(6),
                    F::IncName(1, "localhost"),
                    F::IncName(4, "/last"),
                    F::Inc("x-trace", "z"),
                ]),
            ),
        ]
        .concat()
    }

    #[tokio::test]
    async fn h2_accepts_every_request_through_the_adapter() {
        let seen = h2_accepts(h2_input(), true, 6).await;
        let want = [
            ("localhost", "/one", "1"),
            ("localhost", "/two", "2"),
            ("localhost", "/two", "2"),
            ("localhost", "/big", "big"),
            ("localhost", "/padded", "pad"),
            ("localhost", "/last", "z"),
        ];
        assert_eq!(
            seen,
            want.iter()
                .map(|(a, p, t)| (a.to_string(), p.to_string(), t.to_string()))
                .collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn h2_answers_a_violation_with_goaway() {
        use tokio::io::AsyncWriteExt;
        let input = [
            client_start(),
            frame(
                TYPE_CONTINUATION,
                FLAG_END_HEADERS,
                1,
                &grpc_request("/p", SOCKET),
            ),
        ]
        .concat();
        let (mut client, server) = tokio::io::duplex(1 << 20);
        client.write_all(&input).await.unwrap();
        let outcome = async {
            let mut conn = h2::server::handshake(AuthorityFix::new(server))
                .await
                .expect("h2 handshake");
            match conn.accept().await {
                Some(Err(e)) => e,
                other => panic!("expected a connection error, got {other:?}"),
            }
        };
        let e = tokio::time::timeout(std::time::Duration::from_secs(30), outcome)
            .await
            .expect("h2 gave up on the connection in time");
        assert!(e.is_go_away(), "{e:?}");
        assert_eq!(e.reason(), Some(h2::Reason::PROTOCOL_ERROR), "{e:?}");
    }

    #[tokio::test]
    async fn h2_alone_refuses_the_socket_path() {
        // The failure the adapter exists for: without it only the valid request gets through.
        let seen = h2_accepts(h2_input(), false, 1).await;
        let paths: Vec<_> = seen.iter().map(|(_, p, _)| p.as_str()).collect();
        assert_eq!(paths, ["/last"]);
    }
}
