//! The audio decoders behind `transcribe_audio` (WAV, FLAC, MP3, Ogg
//! Vorbis and Opus through symphonia, and Hark's own checks around them).
//!
//! Beyond "does not panic" (a panic inside symphonia is caught and
//! reported as corrupt; one outside it would reach the fuzzer): whatever
//! decodes is finite 16 kHz audio, in range, within the limits it was
//! given.
//!
//! Shared by the fuzz target (`tests/fuzz/fuzz_targets`) and the test that
//! replays the committed corpus on every `cargo test`.

use hark_audio::decode::{Limits, decode};

/// Panics on what the target must never do.
pub fn check(data: &[u8]) {
    let limits = Limits {
        max_bytes: 1 << 20,
        max_seconds: 30,
    };
    if let Ok(decoded) = decode(data, Some("fuzz"), &limits) {
        assert!(decoded.source_rate > 0 && decoded.source_channels > 0);
        assert!(decoded.duration_secs <= f64::from(limits.max_seconds) + 1.0);
        assert!(decoded.samples.len() as f64 <= (f64::from(limits.max_seconds) + 1.0) * 16_000.0);
        assert!(
            decoded
                .samples
                .iter()
                .all(|s| s.is_finite() && s.abs() <= 1.0)
        );
    }
}
