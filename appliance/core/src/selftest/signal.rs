//! The self-test's sound: the tone it plays, and how it measures what the
//! microphone recorded.
//!
//! Levels are in dBFS relative to a full-scale constant (a sample of 1.0):
//! a full-scale sine reads −3 dBFS, as most recording software shows it.
//! Everything is measured on 20 ms frames of the capture ring's 16 kHz mono
//! signal, after the capture's gain and DC removal — what the voice
//! detector and speech to text hear, not the card's raw samples.
//!
//! - The **noise floor** is the median frame level of a quiet recording: a
//!   click or a cough in the quiet second moves it little.
//! - The **speech level** is the level of the loudest half of the frames of
//!   a recording while the person speaks, so the pauses between words do
//!   not pull it down.
//! - **Clipping** is samples at full scale (|x| ≥ 0.99; the DC removal
//!   after the card moves a clipped run slightly off 1.0).

use serde::{Deserialize, Serialize};

/// The capture ring's sample rate (`hark-audio` resamples every card to
/// it: its `PIPELINE_RATE`).
pub const RATE: u32 = 16_000;
/// 20 ms at [`RATE`]: short enough to find the pauses between words.
pub const FRAME: usize = 320;
/// What digital silence (all zeros, whose logarithm is −∞) reads as.
pub const SILENCE_DBFS: f64 = -120.0;
/// A sample this close to full scale counts as clipped.
pub const CLIP_AMPLITUDE: f32 = 0.99;
/// Speech quieter than this (dBFS) is too low for the voice detector and
/// speech to text to hear reliably: the microphone is far, its gain low,
/// or nothing reaches it.
pub const TOO_LOW_DBFS: f64 = -45.0;
/// More than this fraction of samples clipped is audible distortion.
pub const CLIPPED_FRACTION: f64 = 0.001;
/// Speech less than this far above the noise floor (dB) is hard to tell
/// from the room.
pub const MIN_SNR_DB: f64 = 15.0;
/// A quiet room above this (dBFS) is noisy: a fan, mains hum, or the gain
/// set too high.
pub const NOISY_DBFS: f64 = -40.0;

/// A linear RMS amplitude (or a peak) in dBFS, digital silence as
/// [`SILENCE_DBFS`].
pub fn dbfs(amplitude: f64) -> f64 {
    if amplitude <= 0.0 {
        return SILENCE_DBFS;
    }
    (20.0 * amplitude.log10()).max(SILENCE_DBFS)
}

/// dBFS rounded to a tenth, as reports show it.
fn tenth(db: f64) -> f64 {
    (db * 10.0).round() / 10.0
}

/// The RMS level of each 20 ms frame (a last partial frame counts if it is
/// at least half a frame).
fn frame_levels(samples: &[f32]) -> Vec<f64> {
    samples
        .chunks(FRAME)
        .filter(|frame| frame.len() >= FRAME / 2)
        .map(rms)
        .collect()
}

/// The RMS amplitude of `samples` (0 for none).
fn rms(samples: &[f32]) -> f64 {
    let power = samples
        .iter()
        .map(|&s| f64::from(s) * f64::from(s))
        .sum::<f64>()
        / samples.len().max(1) as f64;
    power.sqrt()
}

/// What one recording measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Levels {
    /// Seconds recorded.
    pub seconds: f64,
    /// RMS level of the whole recording, dBFS.
    pub rms_dbfs: f64,
    /// RMS level of the loudest half of the 20 ms frames, dBFS: the speech
    /// level.
    pub active_dbfs: f64,
    /// Median level of the 20 ms frames, dBFS: the noise floor, for a quiet
    /// recording.
    pub median_dbfs: f64,
    /// The largest sample, dBFS.
    pub peak_dbfs: f64,
    /// Fraction of samples at full scale (0–1).
    pub clipped: f64,
}

/// Measures a recording at [`RATE`].
pub fn measure(samples: &[f32]) -> Levels {
    let mut frames = frame_levels(samples);
    frames.sort_by(f64::total_cmp);
    let median = frames.get(frames.len() / 2).copied().unwrap_or(0.0);
    // The loudest half, and at least one frame.
    let loud = &frames[frames.len() / 2..];
    let active = if loud.is_empty() {
        0.0
    } else {
        (loud.iter().map(|l| l * l).sum::<f64>() / loud.len() as f64).sqrt()
    };
    let n = samples.len().max(1) as f64;
    let peak = samples.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    let clipped = samples.iter().filter(|s| s.abs() >= CLIP_AMPLITUDE).count();
    Levels {
        seconds: (samples.len() as f64 / f64::from(RATE) * 1000.0).round() / 1000.0,
        rms_dbfs: tenth(dbfs(rms(samples))),
        active_dbfs: tenth(dbfs(active)),
        median_dbfs: tenth(dbfs(median)),
        peak_dbfs: tenth(dbfs(f64::from(peak))),
        clipped: clipped as f64 / n,
    }
}

/// What the speech level says about the microphone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Loud enough, not clipping, well above the noise.
    Good,
    /// Below [`TOO_LOW_DBFS`].
    TooLow,
    /// Loud enough, but less than [`MIN_SNR_DB`] above the noise floor.
    Noisy,
    /// More than [`CLIPPED_FRACTION`] of the samples at full scale.
    Clipping,
}

impl Verdict {
    /// Judges the speech level of `speech` over the noise floor `noise`
    /// (dBFS; `None`: not measured).
    pub fn of(speech: &Levels, noise: Option<f64>) -> Verdict {
        if speech.clipped > CLIPPED_FRACTION {
            Verdict::Clipping
        } else if speech.active_dbfs < TOO_LOW_DBFS {
            Verdict::TooLow
        } else if noise.is_some_and(|noise| speech.active_dbfs - noise < MIN_SNR_DB) {
            Verdict::Noisy
        } else {
            Verdict::Good
        }
    }

    pub fn passed(self) -> bool {
        self == Verdict::Good
    }

    /// For the person, with the level.
    pub fn explain(self, speech: &Levels, noise: Option<f64>) -> String {
        let level = speech.active_dbfs;
        let above = noise.map_or_else(String::new, |noise| {
            format!(", {:.0} dB above the noise floor", level - noise)
        });
        match self {
            Verdict::Good => format!(
                "speech at {level:.1} dBFS (peak {:.1} dBFS){above}: good",
                speech.peak_dbfs
            ),
            Verdict::TooLow if level <= SILENCE_DBFS => format!(
                "speech at {level:.1} dBFS: too low — the microphone delivered silence (nothing spoke, or the input is muted or not connected)"
            ),
            Verdict::TooLow => format!(
                "speech at {level:.1} dBFS: too low (below {TOO_LOW_DBFS} dBFS) — speak closer, or raise the capture gain (audio.capture.gain)"
            ),
            Verdict::Noisy => format!(
                "speech at {level:.1} dBFS{above}: too close to the noise (at least {MIN_SNR_DB} dB wanted) — a quieter room, or the microphone nearer"
            ),
            Verdict::Clipping => format!(
                "speech at {level:.1} dBFS, {:.2} % of samples at full scale: clipping — lower the capture gain (audio.capture.gain) or speak further away",
                speech.clipped * 100.0
            ),
        }
    }
}

/// What the noise floor says about the room and the microphone.
pub fn explain_noise(noise: f64) -> (bool, String) {
    if noise <= SILENCE_DBFS {
        (
            true,
            format!(
                "noise floor {noise:.1} dBFS: digital silence (a virtual sound card, or an input that delivers zeros)"
            ),
        )
    } else if noise > NOISY_DBFS {
        (
            false,
            format!(
                "noise floor {noise:.1} dBFS: noisy (above {NOISY_DBFS} dBFS) — a fan or hum nearby, or the capture gain too high"
            ),
        )
    } else {
        (true, format!("noise floor {noise:.1} dBFS"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(amplitude: f32, seconds: f32) -> Vec<f32> {
        (0..(RATE as f32 * seconds) as usize)
            .map(|i| {
                (2.0 * std::f32::consts::PI * 440.0 * i as f32 / RATE as f32).sin() * amplitude
            })
            .collect()
    }

    #[test]
    fn dbfs_of_known_amplitudes() {
        assert_eq!(dbfs(1.0), 0.0);
        assert!((dbfs(0.1) + 20.0).abs() < 1e-9);
        assert!((dbfs(0.5f64.sqrt()) + 3.0103).abs() < 1e-3);
        assert_eq!(dbfs(0.0), SILENCE_DBFS);
        assert_eq!(dbfs(1e-12), SILENCE_DBFS, "floored");
    }

    #[test]
    fn a_sine_reads_its_rms_everywhere() {
        // 0.1 peak: RMS 0.0707, −23.0 dBFS; peak −20 dBFS.
        let levels = measure(&sine(0.1, 1.0));
        assert_eq!(levels.seconds, 1.0);
        assert_eq!(levels.rms_dbfs, -23.0);
        assert_eq!(levels.active_dbfs, -23.0);
        assert_eq!(levels.median_dbfs, -23.0);
        assert_eq!(levels.peak_dbfs, -20.0);
        assert_eq!(levels.clipped, 0.0);
    }

    #[test]
    fn silence_is_the_floor_and_too_low() {
        let levels = measure(&vec![0.0; 16_000]);
        assert_eq!(levels.active_dbfs, SILENCE_DBFS);
        assert_eq!(levels.median_dbfs, SILENCE_DBFS);
        assert_eq!(levels.peak_dbfs, SILENCE_DBFS);
        let verdict = Verdict::of(&levels, Some(SILENCE_DBFS));
        assert_eq!(verdict, Verdict::TooLow);
        assert!(verdict.explain(&levels, None).contains("silence"));
        // Nothing at all recorded measures as silence, not a panic.
        assert_eq!(measure(&[]).active_dbfs, SILENCE_DBFS);
    }

    #[test]
    fn the_speech_level_ignores_pauses_and_the_noise_floor_ignores_a_click() {
        // A second of speech-like tone (−23 dBFS), a second and a half of
        // quiet (−63 dBFS).
        let mut samples = sine(0.1, 1.0);
        samples.extend(sine(0.001, 1.5));
        let levels = measure(&samples);
        // (20 ms is not a whole number of 440 Hz periods: a tenth either
        // way.)
        assert!((levels.median_dbfs + 63.0).abs() <= 0.15, "{levels:?}");
        // The loudest half of the frames is four fifths tone: 1 dB under
        // it, where the whole recording's RMS is 4 dB under.
        assert_eq!(levels.active_dbfs, -24.0, "{levels:?}");
        assert_eq!(levels.rms_dbfs, -27.0, "{levels:?}");
        // A click in a quiet second: the median stays at the quiet.
        let mut quiet = sine(0.001, 1.0);
        for s in &mut quiet[8000..8100] {
            *s = 0.9;
        }
        assert!((measure(&quiet).median_dbfs + 63.0).abs() <= 0.15);
    }

    #[test]
    fn verdicts() {
        let good = measure(&sine(0.1, 1.0));
        assert_eq!(Verdict::of(&good, Some(-70.0)), Verdict::Good);
        assert!(Verdict::of(&good, None).passed());
        assert_eq!(
            Verdict::of(&good, Some(-30.0)),
            Verdict::Noisy,
            "7 dB above"
        );
        let quiet = measure(&sine(0.003, 1.0));
        assert_eq!(Verdict::of(&quiet, Some(-90.0)), Verdict::TooLow);
        assert!(
            Verdict::TooLow
                .explain(&quiet, None)
                .contains("too low (below")
        );
        let clipped: Vec<f32> = sine(3.0, 1.0).iter().map(|s| s.clamp(-1.0, 1.0)).collect();
        let loud = measure(&clipped);
        assert!(loud.clipped > 0.5, "{loud:?}");
        assert_eq!(Verdict::of(&loud, Some(-70.0)), Verdict::Clipping);
        assert!(!Verdict::Clipping.passed());
    }

    #[test]
    fn the_noise_floor_is_judged() {
        assert!(explain_noise(SILENCE_DBFS).0);
        assert!(explain_noise(-65.0).0);
        let (ok, text) = explain_noise(-30.0);
        assert!(!ok && text.contains("noisy"), "{text}");
    }
}
