//! Consistent Overhead Byte Stuffing: rewrites a buffer so it holds no 0x00,
//! letting 0x00 delimit frames. Each run of up to 254 non-zero bytes is
//! preceded by a code byte, one more than the run's length; a code below
//! 0xFF also stands for the zero that followed the run (except at the end).
//!
//! Written here rather than taken from a crate so that every failure is a
//! distinct, non-panicking error and decoding works in place.

/// The longest COBS encoding of `len` bytes: one code byte per started run of
/// 254 bytes, plus one.
pub const fn max_encoded_len(len: usize) -> usize {
    len + len / 254 + 1
}

/// Encodes `input` into `out`, returning the encoded length, or `None` if
/// `out` is too small. Writes no delimiter.
pub fn encode(input: &[u8], out: &mut [u8]) -> Option<usize> {
    // Where the current run's code byte goes, filled in when the run ends.
    let mut code_at = 0;
    let mut written = 1;
    let mut code: u8 = 1;
    for &byte in input {
        if byte == 0 {
            *out.get_mut(code_at)? = code;
            code_at = written;
            written += 1;
            code = 1;
        } else {
            *out.get_mut(written)? = byte;
            written += 1;
            code += 1;
            if code == 0xff {
                *out.get_mut(code_at)? = code;
                code_at = written;
                written += 1;
                code = 1;
            }
        }
    }
    *out.get_mut(code_at)? = code;
    Some(written)
}

/// Why a buffer is not valid COBS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CobsError {
    /// A 0x00 inside the encoded bytes (cannot happen after splitting on
    /// delimiters; checked anyway).
    ZeroByte,
    /// A code byte promises more bytes than the frame holds: the frame was
    /// cut short or a byte was corrupted.
    Truncated,
}

/// Decodes `buf` in place, returning the decoded length (the decoded bytes
/// are `buf[..len]`). Decoding never writes ahead of where it reads, so one
/// buffer suffices.
pub fn decode_in_place(buf: &mut [u8]) -> Result<usize, CobsError> {
    let len = buf.len();
    let mut read = 0;
    let mut write = 0;
    while read < len {
        let code = buf[read];
        if code == 0 {
            return Err(CobsError::ZeroByte);
        }
        read += 1;
        let end = read + usize::from(code) - 1;
        if end > len {
            return Err(CobsError::Truncated);
        }
        if buf[read..end].contains(&0) {
            return Err(CobsError::ZeroByte);
        }
        buf.copy_within(read..end, write);
        write += end - read;
        read = end;
        // A short run stands for a zero after it, unless it ends the frame.
        if code != 0xff && read < len {
            buf[write] = 0;
            write += 1;
        }
    }
    Ok(write)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(input: &[u8]) {
        let mut enc = [0u8; 600];
        let n = encode(input, &mut enc).expect("room");
        assert!(n <= max_encoded_len(input.len()));
        assert!(!enc[..n].contains(&0));
        let dec = decode_in_place(&mut enc[..n]).expect("valid");
        assert_eq!(&enc[..dec], input);
    }

    #[test]
    fn examples_from_the_cobs_paper() {
        // Worked by hand: each zero ends a run, the code counts the run + 1.
        let mut out = [0u8; 16];
        let n = encode(&[0x00], &mut out).unwrap();
        assert_eq!(&out[..n], &[0x01, 0x01]);
        let n = encode(&[0x11, 0x22, 0x00, 0x33], &mut out).unwrap();
        assert_eq!(&out[..n], &[0x03, 0x11, 0x22, 0x02, 0x33]);
        let n = encode(&[0x11, 0x00, 0x00, 0x00], &mut out).unwrap();
        assert_eq!(&out[..n], &[0x02, 0x11, 0x01, 0x01, 0x01]);
    }

    #[test]
    fn round_trips_including_long_runs() {
        round_trip(&[]);
        round_trip(&[0; 10]);
        let mut long = [0u8; 520];
        for (i, b) in long.iter_mut().enumerate() {
            *b = (i % 255) as u8 + 1;
        }
        round_trip(&long[..253]);
        round_trip(&long[..254]);
        round_trip(&long[..255]);
        round_trip(&long);
        long[300] = 0;
        round_trip(&long);
    }

    #[test]
    fn rejects_truncation_and_zeros() {
        assert_eq!(
            decode_in_place(&mut [0x05, 1, 2]),
            Err(CobsError::Truncated)
        );
        assert_eq!(decode_in_place(&mut [0x03, 1, 0]), Err(CobsError::ZeroByte));
        assert_eq!(decode_in_place(&mut [0x00]), Err(CobsError::ZeroByte));
    }

    #[test]
    fn too_small_output_is_an_error_not_a_panic() {
        let mut out = [0u8; 3];
        assert_eq!(encode(&[1, 2, 3], &mut out), None);
    }
}
