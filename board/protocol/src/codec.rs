//! Frames to bytes and back: postcard, then CRC, then COBS, then 0x00.

use postcard::experimental::max_size::MaxSize;

use crate::cobs::{self, CobsError};
use crate::crc::crc16;
use crate::message::{Frame, Message};

/// The longest postcard encoding of a [`Frame`].
pub const MAX_PAYLOAD: usize = Frame::POSTCARD_MAX_SIZE;
/// Bytes of CRC after the payload.
pub const CRC_LEN: usize = 2;
/// The longest payload + CRC, before COBS.
pub const MAX_BODY: usize = MAX_PAYLOAD + CRC_LEN;
/// The longest COBS-encoded body, without the delimiter.
pub const MAX_ENCODED: usize = cobs::max_encoded_len(MAX_BODY);
/// The longest frame on the wire, delimiter included: the size of
/// [`encode`]'s output buffer and of the [`Decoder`]'s.
pub const MAX_FRAME: usize = MAX_ENCODED + 1;
/// The frame delimiter.
pub const DELIMITER: u8 = 0x00;

/// The shortest body that can hold a frame: a sequence number and a kind
/// (one varint byte each at least) and the CRC.
const MIN_BODY: usize = 2 + CRC_LEN;

/// Why a frame could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// postcard refused the frame. With the buffer sized by `MaxSize` this
    /// does not happen; it is an error rather than a panic all the same.
    #[error("cannot serialise frame: {0}")]
    Serialize(postcard::Error),
}

/// Encodes `frame` into `out`, returning the bytes to write, delimiter
/// included.
pub fn encode<'b>(frame: &Frame, out: &'b mut [u8; MAX_FRAME]) -> Result<&'b [u8], EncodeError> {
    let mut payload = [0u8; MAX_PAYLOAD];
    let payload = postcard::to_slice(frame, &mut payload).map_err(EncodeError::Serialize)?;
    frame_payload(payload, out)
}

/// Frames an already serialised payload: CRC appended, COBS-encoded,
/// delimiter last. [`encode`] uses it; it is public for peers that build
/// payloads themselves (a newer kind, a test's deliberate corruption).
pub fn frame_payload<'b>(
    payload: &[u8],
    out: &'b mut [u8; MAX_FRAME],
) -> Result<&'b [u8], EncodeError> {
    // The body is built on the stack (a few dozen bytes) and COBS-encoded
    // into `out`: simpler to reason about than encoding in place.
    if payload.len() > MAX_PAYLOAD {
        return Err(EncodeError::Serialize(postcard::Error::SerializeBufferFull));
    }
    let mut body = [0u8; MAX_BODY];
    body[..payload.len()].copy_from_slice(payload);
    let crc = crc16(payload).to_le_bytes();
    body[payload.len()..payload.len() + CRC_LEN].copy_from_slice(&crc);
    let encoded = cobs::encode(&body[..payload.len() + CRC_LEN], &mut out[..MAX_ENCODED])
        // `MAX_ENCODED` is the bound for `MAX_BODY` bytes.
        .ok_or(EncodeError::Serialize(postcard::Error::SerializeBufferFull))?;
    out[encoded] = DELIMITER;
    Ok(&out[..=encoded])
}

/// Why bytes between two delimiters did not yield a frame. After any of these
/// the decoder carries on with the bytes after the delimiter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// More than [`MAX_FRAME`] bytes without a delimiter: a frame from a peer
    /// whose frames are larger, or a run of noise. `len` counts the bytes
    /// dropped (saturating).
    #[error(
        "oversized frame: {len} bytes before the delimiter, at most {} allowed",
        MAX_ENCODED
    )]
    Oversized {
        /// Bytes dropped, delimiter excluded.
        len: usize,
    },
    /// The bytes are not valid COBS: a cut-short frame or line noise.
    #[error("invalid COBS encoding ({0:?})")]
    Cobs(CobsError),
    /// Fewer bytes than the smallest frame.
    #[error("frame too short: {len} bytes after COBS decoding")]
    TooShort {
        /// Decoded length.
        len: usize,
    },
    /// The CRC does not match: corruption on the wire.
    #[error("CRC mismatch: frame says {received:#06x}, bytes give {computed:#06x}")]
    Crc {
        /// The CRC carried by the frame.
        received: u16,
        /// The CRC of the bytes received.
        computed: u16,
    },
    /// An intact frame of a kind this version does not know, from a peer with
    /// a newer minor version. Not a fault: skip it.
    #[error("unknown message kind {kind} (frame {seq}); skipped")]
    UnknownKind {
        /// The frame's sequence number.
        seq: u16,
        /// The unknown kind.
        kind: u32,
    },
    /// An intact frame (its CRC matches) of a known kind whose fields do not
    /// decode: a peer bug, or an incompatible major version.
    #[error("malformed frame (kind {kind:?}): {error}")]
    Malformed {
        /// The kind, if it could be read.
        kind: Option<u32>,
        /// What postcard said.
        error: postcard::Error,
    },
}

impl DecodeError {
    /// Whether this is the benign [`DecodeError::UnknownKind`] (skip and carry
    /// on) rather than a sign of a bad line or a broken peer.
    pub const fn is_unknown_kind(&self) -> bool {
        matches!(self, DecodeError::UnknownKind { .. })
    }
}

/// Turns a byte stream into frames: feed it whatever the UART gave, in chunks
/// of any size, and take the results from the iterator [`Decoder::feed`]
/// returns.
///
/// Holds at most one partial frame ([`MAX_ENCODED`] bytes); never allocates
/// and never panics, whatever the input.
#[derive(Clone, Debug)]
pub struct Decoder {
    buf: [u8; MAX_ENCODED],
    len: usize,
    /// Bytes dropped since the buffer filled up; non-zero means the current
    /// frame is oversized and is being skipped up to its delimiter.
    dropped: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// An empty decoder.
    pub const fn new() -> Self {
        Self {
            buf: [0; MAX_ENCODED],
            len: 0,
            dropped: 0,
        }
    }

    /// Forgets any partial frame (e.g. after reopening the port).
    pub fn reset(&mut self) {
        self.len = 0;
        self.dropped = 0;
    }

    /// Whether part of a frame is waiting for more bytes.
    pub fn is_mid_frame(&self) -> bool {
        self.len > 0 || self.dropped > 0
    }

    /// Feeds `bytes`; the iterator yields one result per delimiter found.
    ///
    /// Bytes are consumed only as the iterator advances: drain it (a `for`
    /// loop does), or take [`Feed::remaining`] before dropping it and feed
    /// those again later.
    pub fn feed<'d, 'b>(&'d mut self, bytes: &'b [u8]) -> Feed<'d, 'b> {
        Feed {
            decoder: self,
            input: bytes,
        }
    }

    /// Appends bytes that contain no delimiter.
    fn push(&mut self, bytes: &[u8]) {
        if self.dropped > 0 {
            self.dropped = self.dropped.saturating_add(bytes.len());
            return;
        }
        let room = MAX_ENCODED - self.len;
        if bytes.len() > room {
            self.dropped = self.len.saturating_add(bytes.len());
            self.len = 0;
            return;
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Handles a delimiter: `None` for an empty frame (idle delimiters are
    /// allowed and mean nothing), else the frame or why not.
    fn finish(&mut self) -> Option<Result<Frame, DecodeError>> {
        let dropped = core::mem::take(&mut self.dropped);
        let len = core::mem::take(&mut self.len);
        if dropped > 0 {
            return Some(Err(DecodeError::Oversized { len: dropped }));
        }
        if len == 0 {
            return None;
        }
        Some(decode_body(&mut self.buf[..len]))
    }
}

/// Decodes one frame's bytes, delimiter excluded.
fn decode_body(encoded: &mut [u8]) -> Result<Frame, DecodeError> {
    let len = cobs::decode_in_place(encoded).map_err(DecodeError::Cobs)?;
    let body = &encoded[..len];
    if len < MIN_BODY {
        return Err(DecodeError::TooShort { len });
    }
    let (payload, crc) = body.split_at(len - CRC_LEN);
    let received = u16::from_le_bytes([crc[0], crc[1]]);
    let computed = crc16(payload);
    if received != computed {
        return Err(DecodeError::Crc { received, computed });
    }
    // Read the header by hand first, so that a kind from a newer version is
    // told apart from a malformed frame of a known kind.
    let (seq, rest) = postcard::take_from_bytes::<u16>(payload)
        .map_err(|error| DecodeError::Malformed { kind: None, error })?;
    let (kind, _) = postcard::take_from_bytes::<u32>(rest)
        .map_err(|error| DecodeError::Malformed { kind: None, error })?;
    if kind >= Message::KINDS {
        return Err(DecodeError::UnknownKind { seq, kind });
    }
    // Trailing bytes are allowed: a newer minor version may append fields to
    // a message, which older peers ignore.
    let (frame, _) =
        postcard::take_from_bytes::<Frame>(payload).map_err(|error| DecodeError::Malformed {
            kind: Some(kind),
            error,
        })?;
    Ok(frame)
}

/// The results of one [`Decoder::feed`] call.
#[derive(Debug)]
pub struct Feed<'d, 'b> {
    decoder: &'d mut Decoder,
    input: &'b [u8],
}

impl<'b> Feed<'_, 'b> {
    /// The bytes not consumed yet.
    pub fn remaining(&self) -> &'b [u8] {
        self.input
    }
}

impl Iterator for Feed<'_, '_> {
    type Item = Result<Frame, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.input.is_empty() {
            match self.input.iter().position(|&b| b == DELIMITER) {
                None => {
                    self.decoder.push(self.input);
                    self.input = &[];
                }
                Some(at) => {
                    let (chunk, rest) = self.input.split_at(at);
                    self.decoder.push(chunk);
                    // Skip the delimiter itself.
                    self.input = rest.get(1..).unwrap_or(&[]);
                    if let Some(result) = self.decoder.finish() {
                        return Some(result);
                    }
                }
            }
        }
        None
    }
}
