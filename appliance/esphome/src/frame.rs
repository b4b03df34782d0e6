//! The ESPHome native API's plaintext frames: a zero byte, the payload's
//! length and the message's type as varints, then the payload (a protobuf
//! message). A client that wants encryption begins with 1 instead (the Noise
//! frames); this side does not serve those yet and says so.

/// The largest payload accepted. Voice audio comes in frames of a few
/// kilobytes; nothing a client sends is near this.
pub const MAX_PAYLOAD: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error(
        "the client asked for an encrypted connection (Noise); this appliance's ESPHome API serves plaintext only: remove the encryption key from the device in Home Assistant"
    )]
    Encrypted,
    #[error("not an ESPHome API frame: it begins with byte {0:#04x}, not 0x00")]
    Preamble(u8),
    #[error("a varint of more than 5 bytes in a frame header")]
    Varint,
    #[error("a frame of {0} bytes, over the {MAX_PAYLOAD}-byte limit")]
    TooLong(u64),
}

/// One frame read from the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub kind: u32,
    pub payload: &'a [u8],
    /// Bytes of the buffer the frame took.
    pub used: usize,
}

/// Appends the frame of a `kind` message with `payload` to `out`.
pub fn encode(kind: u32, payload: &[u8], out: &mut Vec<u8>) {
    out.push(0);
    put_varint(payload.len() as u64, out);
    put_varint(u64::from(kind), out);
    out.extend_from_slice(payload);
}

/// The frame at the front of `buf`, `None` while it is incomplete.
pub fn decode(buf: &[u8]) -> Result<Option<Frame<'_>>, FrameError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    match first {
        0 => {}
        1 => return Err(FrameError::Encrypted),
        other => return Err(FrameError::Preamble(other)),
    }
    let mut at = 1;
    let Some(len) = varint(buf, &mut at)? else {
        return Ok(None);
    };
    if len > MAX_PAYLOAD as u64 {
        return Err(FrameError::TooLong(len));
    }
    let Some(kind) = varint(buf, &mut at)? else {
        return Ok(None);
    };
    let kind = u32::try_from(kind).map_err(|_| FrameError::Varint)?;
    let end = at + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some(Frame {
        kind,
        payload: &buf[at..end],
        used: end,
    }))
}

fn put_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A varint at `buf[*at..]`, advancing `at`; `None` while incomplete.
fn varint(buf: &[u8], at: &mut usize) -> Result<Option<u64>, FrameError> {
    let mut value = 0u64;
    for i in 0..5 {
        let Some(&byte) = buf.get(*at + i) else {
            return Ok(None);
        };
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *at += i + 1;
            return Ok(Some(value));
        }
    }
    Err(FrameError::Varint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_reads_back_whole_and_not_before() {
        let payload = vec![7u8; 300];
        let mut out = Vec::new();
        encode(122, &payload, &mut out);
        // 300 and 122 as varints: two bytes and one.
        assert_eq!(&out[..4], &[0, 0xac, 0x02, 122]);
        for cut in 0..out.len() {
            assert_eq!(decode(&out[..cut]), Ok(None), "{cut} bytes");
        }
        out.extend_from_slice(&[0, 0, 7]);
        let frame = decode(&out).expect("valid").expect("whole");
        assert_eq!(frame.kind, 122);
        assert_eq!(frame.payload, &payload[..]);
        assert_eq!(frame.used, 304);
        // The next one follows: an empty ping.
        let next = decode(&out[frame.used..]).expect("valid").expect("whole");
        assert_eq!((next.kind, next.payload.len(), next.used), (7, 0, 3));
    }

    #[test]
    fn what_is_not_a_plaintext_frame_is_named() {
        assert_eq!(decode(&[1, 0, 0]), Err(FrameError::Encrypted));
        assert_eq!(decode(b"GET / HTTP/1.1"), Err(FrameError::Preamble(b'G')));
        assert_eq!(
            decode(&[0, 0xff, 0xff, 0xff, 0xff, 0xff, 1]),
            Err(FrameError::Varint)
        );
        let mut big = Vec::new();
        put_varint(MAX_PAYLOAD as u64 + 1, &mut big);
        let mut frame = vec![0];
        frame.extend_from_slice(&big);
        assert_eq!(
            decode(&frame),
            Err(FrameError::TooLong(MAX_PAYLOAD as u64 + 1))
        );
    }
}
