//! The self-test's tone. How a recording is measured and judged is
//! [`hark_core::selftest::signal`], shared with `hark selftest`.

pub use hark_core::selftest::signal::*;

// The core judges recordings at its own copy of the pipeline's rate (it
// has no audio engine below it): the build fails if the two ever differ.
const _: () = assert!(RATE == hark_audio::config::PIPELINE_RATE);

/// The test tone: `hz` for `ms` at `amplitude`, with 20 ms raised-cosine
/// fades so it starts and ends without a click, at [`RATE`].
pub fn tone(hz: f32, ms: u32, amplitude: f32) -> hark_audio::clip::Clip {
    hark_audio::earcon::tone(hz, ms, amplitude, 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tone_is_clickless_and_at_its_level() {
        let clip = tone(440.0, 1000, 0.25);
        assert_eq!(clip.rate, RATE);
        assert_eq!(clip.samples.len(), 16_000);
        assert!(clip.samples[0].abs() < 1e-6);
        assert!(clip.samples.last().is_some_and(|s| s.abs() < 0.01));
        let levels = measure(&clip.samples);
        assert_eq!(levels.peak_dbfs, -12.0);
        assert!((levels.median_dbfs + 15.1).abs() < 0.2, "{levels:?}");
    }
}
