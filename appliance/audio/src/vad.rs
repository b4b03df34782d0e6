//! End-of-speech detection: the `earshot` neural voice detector scores each
//! 16 ms frame, and a small state machine turns scores into "speech started"
//! and "speech ended" with the configured minimum speech and hang-over.
//!
//! Positions are in samples of the 16 kHz stream, so timing does not depend
//! on how fast audio arrives (real time from a microphone, or all at once in
//! a test).

use crate::config::{PIPELINE_RATE, VadConfig};

/// Samples per detector frame (16 ms at 16 kHz), fixed by the model.
pub const FRAME: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Speech confirmed (it lasted at least the minimum); `at` is where it began.
    SpeechStart { at: u64 },
    /// The hang-over passed after speech; `end` is where the last voiced frame ended.
    SpeechEnd { start: u64, end: u64 },
}

pub struct Segmenter {
    detector: Box<earshot::Detector>,
    threshold: f32,
    /// Tracked background level, dBFS (see `frame_done`).
    noise_floor: Option<f32>,
    /// The loudest voiced frame of the speech heard so far, dBFS (see
    /// `frame_done`); reset when speech ends.
    speech_peak: Option<f32>,
    hangover: u64,
    min_speech: u64,
    frame: [f32; FRAME],
    filled: usize,
    /// Samples consumed so far (absolute position of `frame[0]` + `filled`).
    position: u64,
    start: Option<u64>,
    confirmed: bool,
    voiced: u64,
    last_voiced_end: u64,
    /// The longest silence the voice has come back from since speech
    /// began (samples).
    longest_pause: u64,
}

/// How far above the background a frame must be to count as voiced, dB.
const LOUDNESS_MARGIN_DB: f32 = 9.0;

/// How far below the loudest frame of the speech so far a frame may be and
/// still count as voiced, dB. A voice dies away over some tens of ms after
/// its last word, and in a quiet room (or from a clean source) the
/// background margin alone lets the detector's lingering score carry that
/// tail: the pause, and with it the end of the turn, would start 70–130 ms
/// after the voice fell below −40 dBFS (docs/benchmarks.md, the turn).
/// Speech within a sentence stays well inside this range: soft consonants
/// sit some 20–30 dB under the vowels around them.
const SPEECH_RANGE_DB: f32 = 35.0;

/// RMS level of a frame in dBFS.
fn frame_level_db(frame: &[f32]) -> f32 {
    let power = frame.iter().map(|s| s * s).sum::<f32>() / frame.len() as f32;
    // In f64: glibc 2.43 gave `log10f` a new symbol version, and a binary
    // that links it cannot start on the appliance's Debian trixie (glibc
    // 2.41). `log10` has one version everywhere.
    (10.0 * f64::from(power + 1e-12).log10()) as f32
}

fn ms_to_samples(ms: u32) -> u64 {
    u64::from(ms) * u64::from(PIPELINE_RATE) / 1000
}

impl Segmenter {
    /// `origin`: the absolute position of the first sample that will be pushed.
    pub fn new(config: &VadConfig, origin: u64) -> Self {
        Self {
            detector: earshot::Detector::default_boxed(),
            // Higher sensitivity → lower score needed to count as speech.
            threshold: (1.0 - config.sensitivity).clamp(0.05, 0.95),
            noise_floor: None,
            speech_peak: None,
            hangover: ms_to_samples(config.hangover_ms),
            min_speech: ms_to_samples(config.min_speech_ms),
            frame: [0.0; FRAME],
            filled: 0,
            position: origin,
            start: None,
            confirmed: false,
            voiced: 0,
            last_voiced_end: 0,
            longest_pause: 0,
        }
    }

    /// While confirmed speech pauses: where it started, where the voice
    /// last stopped, and how long it has been quiet since (samples).
    pub fn pause(&self) -> Option<(u64, u64, u64)> {
        let start = self.start?;
        (self.confirmed && self.position > self.last_voiced_end).then(|| {
            (
                start,
                self.last_voiced_end,
                self.position - self.last_voiced_end,
            )
        })
    }

    /// The longest pause the voice has come back from since speech began,
    /// in samples (0 before any): the speaker's own pace.
    pub fn longest_pause(&self) -> u64 {
        self.longest_pause
    }

    /// Feeds samples; returns the first event they produce, if any. Samples
    /// after an event are kept for the next call.
    pub fn push(&mut self, mut samples: &[f32]) -> (usize, Option<Event>) {
        let total = samples.len();
        while !samples.is_empty() {
            let take = (FRAME - self.filled).min(samples.len());
            // The detector takes samples in [-1, 1]; resampling and the
            // front end's gain can overshoot a full-scale peak a little.
            for (to, from) in self.frame[self.filled..self.filled + take]
                .iter_mut()
                .zip(&samples[..take])
            {
                *to = from.clamp(-1.0, 1.0);
            }
            self.filled += take;
            samples = &samples[take..];
            if self.filled == FRAME {
                self.filled = 0;
                let frame_start = self.position;
                self.position += FRAME as u64;
                if let Some(event) = self.frame_done(frame_start) {
                    return (total - samples.len(), Some(event));
                }
            }
        }
        (total, None)
    }

    fn frame_done(&mut self, frame_start: u64) -> Option<Event> {
        let frame_end = frame_start + FRAME as u64;
        let score = self.detector.predict_f32(&self.frame);
        // The network's score stays high for a while after a voice stops,
        // which would end utterances 100–200 ms late. A frame also has to
        // stand out from the background to count as voiced: its level must
        // be some dB above a tracked noise floor, which follows the level
        // down at once and up gradually (and barely during speech).
        let level = frame_level_db(&self.frame);
        let floor = self.noise_floor.get_or_insert(level);
        let loud = level > *floor + LOUDNESS_MARGIN_DB;
        if level < *floor {
            *floor = level;
        } else {
            // Rising: about half a second to close most of the gap outside
            // speech (the background got louder), a minute during speech.
            let rate = if self.confirmed { 0.0003 } else { 0.03 };
            *floor += (level - *floor) * rate;
        }
        // Within reach of the speech heard so far (once there is some).
        let audible = self
            .speech_peak
            .is_none_or(|peak| level > peak - SPEECH_RANGE_DB);
        if score >= self.threshold && loud && audible {
            self.speech_peak = Some(self.speech_peak.map_or(level, |peak| peak.max(level)));
            if self.start.is_some() {
                self.longest_pause = self
                    .longest_pause
                    .max(frame_start.saturating_sub(self.last_voiced_end));
            }
            let start = *self.start.get_or_insert(frame_start);
            self.voiced += FRAME as u64;
            self.last_voiced_end = frame_end;
            if !self.confirmed && self.voiced >= self.min_speech.max(1) {
                self.confirmed = true;
                return Some(Event::SpeechStart { at: start });
            }
            return None;
        }
        let start = self.start?;
        if frame_end - self.last_voiced_end < self.hangover {
            return None;
        }
        let was_speech = self.confirmed;
        self.start = None;
        self.speech_peak = None;
        self.confirmed = false;
        self.voiced = 0;
        self.longest_pause = 0;
        // Too short to be speech (a click, a cough): forget it and go on
        // listening.
        was_speech.then_some(Event::SpeechEnd {
            start,
            end: self.last_voiced_end,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::spoken;

    /// After the last 10 ms window above −40 dBFS. (How soon the voice's
    /// end is heard is tested on the piper voice, in tests/end_of_voice.rs:
    /// espeak's voice stops dead, and the detector's score with it.)
    fn true_end(clip: &[f32]) -> usize {
        clip.chunks(160)
            .enumerate()
            .rfind(|(_, w)| (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt() > 0.01)
            .map_or(0, |(i, _)| (i + 1) * 160)
    }

    /// Every event of `audio` pushed through a segmenter.
    fn events(audio: &[f32]) -> Vec<Event> {
        let mut segmenter = Segmenter::new(&VadConfig::default(), 0);
        let mut rest = audio;
        let mut out = Vec::new();
        while !rest.is_empty() {
            let (used, event) = segmenter.push(rest);
            rest = &rest[used..];
            out.extend(event);
        }
        out
    }

    #[test]
    fn the_longest_pause_is_one_the_voice_came_back_from() {
        let speech = spoken("Turn on the lights.");
        let end = true_end(&speech);
        let mut segmenter = Segmenter::new(
            &VadConfig {
                hangover_ms: 2_000,
                ..VadConfig::default()
            },
            0,
        );
        let _ = segmenter.push(&speech[..end]);
        // A 600 ms pause, still going: not one the voice came back from.
        let _ = segmenter.push(&vec![0.0; 16 * 600]);
        assert!(
            segmenter.longest_pause() < 16 * 200,
            "{}",
            segmenter.longest_pause()
        );
        let _ = segmenter.push(&speech[..end]);
        let longest = segmenter.longest_pause() as f64 / 16.0;
        assert!((600.0..900.0).contains(&longest), "{longest:.0} ms");
    }

    #[test]
    fn speech_over_full_scale_is_still_speech() {
        // A peak-normalised clip resampled, or a gain after it, overshoots
        // 1.0 a little; the detector takes [-1, 1] (a debug build asserts
        // it), so the frames are clipped on their way in.
        let speech = spoken("Turn on the lights.");
        let peak = speech.iter().fold(0.0f32, |m, s| m.max(s.abs()));
        let mut audio = vec![0.0; 8_000];
        audio.extend(speech.iter().map(|s| s * 1.5 / peak));
        audio.extend(vec![0.0; 16_000]);
        assert!(audio.iter().any(|s| *s > 1.0));
        let events = events(&audio);
        assert!(
            matches!(events.first(), Some(Event::SpeechStart { .. })),
            "{events:?}"
        );
    }

    #[test]
    fn a_quiet_room_after_loud_speech_is_not_voice() {
        // The loud speech, then the same speech 45 dB down (a television
        // in the next room): past the speech's range, it does not carry
        // the first speech on.
        let speech = spoken("Turn on the lights.");
        let end = true_end(&speech);
        let mut audio = vec![0.0; 8_000];
        audio.extend_from_slice(&speech[..end]);
        audio.extend(speech.iter().map(|s| s * 10f32.powf(-45.0 / 20.0)));
        audio.extend(vec![0.0; 16_000]);
        let events = events(&audio);
        let Some(Event::SpeechEnd { end: heard, .. }) = events.get(1) else {
            panic!("speech and its end, not {events:?}");
        };
        let late_ms = (*heard as f64 - (8_000 + end) as f64) / 16.0;
        assert!(late_ms <= 45.0, "ended {late_ms:.0} ms late");
    }
}
