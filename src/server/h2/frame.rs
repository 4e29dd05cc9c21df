//! The HTTP/2 framing both hand-written codecs share (RFC 9113 section 4): the client
//! preface, frame types and flags, and writing a frame's 9-byte header.

/// The HTTP/2 client connection preface.
pub(crate) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of an HTTP/2 frame header.
pub(crate) const FRAME_HEAD_LEN: usize = 9;

pub(crate) const TYPE_HEADERS: u8 = 0x1;
pub(crate) const TYPE_SETTINGS: u8 = 0x4;
pub(crate) const TYPE_PUSH_PROMISE: u8 = 0x5;
pub(crate) const TYPE_GOAWAY: u8 = 0x7;
pub(crate) const TYPE_CONTINUATION: u8 = 0x9;

/// END_STREAM (HEADERS, DATA) and ACK (SETTINGS, PING) share the bit.
pub(crate) const FLAG_END_STREAM: u8 = 0x1;
pub(crate) const FLAG_ACK: u8 = 0x1;
pub(crate) const FLAG_END_HEADERS: u8 = 0x4;
pub(crate) const FLAG_PADDED: u8 = 0x8;
pub(crate) const FLAG_PRIORITY: u8 = 0x20;

/// Largest frame payload either codec emits: the protocol's minimum SETTINGS_MAX_FRAME_SIZE,
/// which every server accepts (tonic's server keeps hyper's default, which is this value).
pub(crate) const MAX_FRAME_PAYLOAD: usize = 16_384;

/// Appends a frame header: payload length (24 bits), type, flags, stream id.
pub(crate) fn write_frame_head(
    out: &mut Vec<u8>,
    len: usize,
    frame_type: u8,
    flags: u8,
    stream_id: u32,
) {
    debug_assert!(len <= MAX_FRAME_PAYLOAD);
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(frame_type);
    out.push(flags);
    out.extend_from_slice(&stream_id.to_be_bytes());
}

/// One whole frame (the stream id's reserved bit cleared).
pub(crate) fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEAD_LEN + payload.len());
    write_frame_head(
        &mut out,
        payload.len(),
        kind,
        flags,
        stream_id & 0x7fff_ffff,
    );
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_its_nine_byte_head_then_its_payload() {
        // (type, flags, stream id, payload, the frame)
        type Case<'a> = (u8, u8, u32, &'a [u8], &'a [u8]);
        let cases: &[Case] = &[
            (
                TYPE_SETTINGS,
                FLAG_ACK,
                0,
                b"",
                &[0, 0, 0, 4, 1, 0, 0, 0, 0],
            ),
            (
                TYPE_HEADERS,
                FLAG_END_HEADERS,
                0x8000_0003,
                b"ab",
                &[0, 0, 2, 1, 4, 0, 0, 0, 3, b'a', b'b'],
            ),
        ];
        for &(kind, flags, stream, payload, want) in cases {
            assert_eq!(frame(kind, flags, stream, payload), want, "type {kind}");
        }
    }
}
