//! APA102 / DotStar LEDs, as on the ReSpeaker 2-mic HAT (3 LEDs) and 4-mic
//! array (12 LEDs), driven over SPI.
//!
//! The wire format, from the APA102 datasheet: a start frame of 32 zero
//! bits; one 32-bit frame per LED — `111` and a 5-bit global brightness,
//! then blue, green, red; then an end frame that supplies the extra clock
//! edges the data needs to ripple through the chain (one edge per two
//! LEDs), here at least 32 zero bits.

use crate::led::Rgb;

/// The largest 5-bit brightness.
pub const MAX_BRIGHTNESS: u8 = 31;

/// Bytes [`encode`] writes for `count` LEDs.
pub fn frame_len(count: usize) -> usize {
    4 + 4 * count + end_len(count)
}

fn end_len(count: usize) -> usize {
    count.div_ceil(16).max(4)
}

/// Encodes `colors` at `brightness` (0–31; higher values are clamped) into
/// `out`, which is cleared first.
pub fn encode(colors: &[Rgb], brightness: u8, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[0; 4]);
    let global = 0b1110_0000 | brightness.min(MAX_BRIGHTNESS);
    for &Rgb(r, g, b) in colors {
        out.extend_from_slice(&[global, b, g, r]);
    }
    out.resize(out.len() + end_len(colors.len()), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_leds_as_the_datasheet_lays_them_out() {
        let mut out = Vec::new();
        encode(
            &[Rgb(0xff, 0, 0), Rgb(0, 0x80, 0), Rgb(1, 2, 3)],
            31,
            &mut out,
        );
        assert_eq!(
            out,
            [
                0, 0, 0, 0, // start frame
                0xff, 0, 0, 0xff, // red: brightness, blue, green, red
                0xff, 0, 0x80, 0, // green
                0xff, 3, 2, 1, // blue 3, green 2, red 1
                0, 0, 0, 0, // end frame
            ]
        );
        assert_eq!(out.len(), frame_len(3));
    }

    #[test]
    fn brightness_is_five_bits_and_long_chains_get_longer_end_frames() {
        let mut out = Vec::new();
        encode(&[Rgb(9, 9, 9)], 200, &mut out);
        assert_eq!(out[4], 0xff, "clamped to 31");
        encode(&[Rgb(9, 9, 9)], 4, &mut out);
        assert_eq!(out[4], 0b1110_0100);
        let chain = vec![Rgb::OFF; 100];
        encode(&chain, 1, &mut out);
        // 100 LEDs need 50 extra clock edges: 7 bytes of end frame.
        assert_eq!(out.len(), 4 + 400 + 7);
        assert_eq!(out.len(), frame_len(100));
    }
}
