//! The virtual card's room: the microphone hears the speaker.
//!
//! On a real appliance the microphones hear Hark's own speech; on the
//! virtual card nothing would, and echo cancellation and barge-in by voice
//! could not be tried. With `[audio.virtual_card] room = true` the virtual
//! microphone follows the virtual speaker's WAV file as the playback side
//! writes it, and adds what it plays to the microphone as a room would
//! return it: a small speaker's missing bass, the room's reverberation
//! (a Schroeder reverberator: four feedback combs and two all-passes,
//! decaying 60 dB in `rt60`), at `gain_db`, late by however far the
//! speaker's file runs behind the card (a buffer less a period).

use std::{
    collections::VecDeque,
    fs::File,
    io::{Read, Seek, SeekFrom},
    path::PathBuf,
};

/// `[audio.virtual_card]`'s room, as the virtual microphone needs it.
#[derive(Debug, Clone)]
pub struct RoomSpec {
    /// The virtual speaker's WAV file.
    pub speaker: PathBuf,
    /// Its rate and channels (`[audio.playback]`).
    pub speaker_rate: u32,
    pub speaker_channels: u32,
    /// The microphone's rate (`[audio.capture]`).
    pub mic_rate: u32,
    /// The speaker's level at the microphone, dB.
    pub gain_db: f32,
    /// Reverberation time, seconds.
    pub rt60: f32,
}

/// The 44-byte header `aplay`'s WAV writer (the `file` plugin) puts first.
const WAV_HEADER: u64 = 44;

/// Follows the speaker's file and turns what it plays into the room's echo
/// at the microphone's rate.
pub struct Room {
    spec: RoomSpec,
    file: Option<File>,
    /// Bytes of the file read so far.
    offset: u64,
    /// Echo samples waiting to be mixed into the microphone.
    echo: VecDeque<f32>,
    /// The resampler's position between speaker samples, and the last one.
    phase: f64,
    last: f32,
    gain: f32,
    highpass: Highpass,
    combs: Vec<Comb>,
    allpasses: Vec<Allpass>,
    bytes: Vec<u8>,
}

impl Room {
    pub fn new(spec: RoomSpec) -> Self {
        let rate = spec.mic_rate as f32;
        let combs = [29.7, 37.1, 41.1, 43.7]
            .iter()
            .map(|ms| Comb::new((ms * rate / 1000.0) as usize, spec.rt60, rate))
            .collect();
        let allpasses = [5.0, 1.7]
            .iter()
            .map(|ms| Allpass::new((ms * rate / 1000.0) as usize))
            .collect();
        Self {
            gain: 10f32.powf(spec.gain_db / 20.0),
            highpass: Highpass::new(150.0, rate),
            combs,
            allpasses,
            file: None,
            offset: 0,
            echo: VecDeque::new(),
            phase: 0.0,
            last: 0.0,
            bytes: vec![0; 64 * 1024],
            spec,
        }
    }

    /// Reads what the speaker has played since the last call.
    pub fn follow(&mut self) {
        if self.file.is_none() {
            // Made when the playback side opens the card; until then, or
            // after it is made again, start at its end: only speech played
            // from now on echoes.
            let Ok(mut file) = File::open(&self.spec.speaker) else {
                return;
            };
            self.offset = file.seek(SeekFrom::End(0)).unwrap_or(0).max(WAV_HEADER);
            self.file = Some(file);
        }
        let Some(mut file) = self.file.take() else {
            return;
        };
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        if length < self.offset {
            // The card was opened again: a new file.
            return;
        }
        let frame = 2 * self.spec.speaker_channels.max(1) as usize;
        loop {
            let _ = file.seek(SeekFrom::Start(self.offset));
            let want = ((length - self.offset) as usize).min(self.bytes.len()) / frame * frame;
            if want == 0 {
                break;
            }
            let Ok(n) = file.read(&mut self.bytes[..want]) else {
                break;
            };
            let n = n / frame * frame;
            if n == 0 {
                break;
            }
            self.offset += n as u64;
            for i in (0..n).step_by(frame) {
                let mut sum = 0.0;
                for c in 0..frame / 2 {
                    let at = i + 2 * c;
                    sum += f32::from(i16::from_le_bytes([self.bytes[at], self.bytes[at + 1]]));
                }
                let sample = sum / (frame / 2) as f32 / 32768.0;
                self.resample(sample);
            }
        }
        self.file = Some(file);
        // Nobody mixing (the microphone stalled): keep two seconds at most.
        let keep = 2 * self.spec.mic_rate as usize;
        if self.echo.len() > keep {
            let excess = self.echo.len() - keep;
            self.echo.drain(..excess);
        }
    }

    /// One speaker sample in; microphone-rate samples out (linear
    /// interpolation: the room does not need a better resampler).
    fn resample(&mut self, sample: f32) {
        let step = self.spec.speaker_rate as f64 / self.spec.mic_rate as f64;
        while self.phase < 1.0 {
            let v = self.last + (sample - self.last) * self.phase as f32;
            let wet = self.reverberate(v);
            self.echo.push_back(wet);
            self.phase += step;
        }
        self.phase -= 1.0;
        self.last = sample;
    }

    fn reverberate(&mut self, x: f32) -> f32 {
        let direct = self.highpass.run(x);
        let mut tail = 0.0;
        for comb in &mut self.combs {
            tail += comb.run(direct);
        }
        let mut tail = tail * 0.25;
        for allpass in &mut self.allpasses {
            tail = allpass.run(tail);
        }
        self.gain * (direct + 0.5 * tail)
    }

    /// Drops `frames` of echo: sound the microphone missed.
    pub fn skip(&mut self, frames: usize) {
        let n = frames.min(self.echo.len());
        self.echo.drain(..n);
    }

    /// Adds the echo to one period of microphone audio (S16_LE, `channels`
    /// interleaved).
    pub fn mix(&mut self, period: &mut [u8], channels: usize) {
        let frame = 2 * channels.max(1);
        for i in (0..period.len() / frame * frame).step_by(frame) {
            let Some(e) = self.echo.pop_front() else {
                break;
            };
            for c in 0..channels {
                let at = i + 2 * c;
                let v = f32::from(i16::from_le_bytes([period[at], period[at + 1]])) / 32768.0;
                let s = ((v + e).clamp(-1.0, 1.0) * 32767.0) as i16;
                period[at..at + 2].copy_from_slice(&s.to_le_bytes());
            }
        }
    }
}

/// A second-order high-pass (RBJ, Q 0.707): a small speaker's bass.
/// Also the speaker of `hark-bench echo`'s simulated room.
pub struct Highpass {
    b: [f32; 3],
    a: [f32; 2],
    x: [f32; 2],
    y: [f32; 2],
}

impl Highpass {
    pub fn new(hz: f32, rate: f32) -> Self {
        let w = 2.0 * std::f32::consts::PI * hz / rate;
        let alpha = w.sin() / (2.0 * std::f32::consts::FRAC_1_SQRT_2);
        let (cos, a0) = (w.cos(), 1.0 + alpha);
        Self {
            b: [
                (1.0 + cos) / 2.0 / a0,
                -(1.0 + cos) / a0,
                (1.0 + cos) / 2.0 / a0,
            ],
            a: [-2.0 * cos / a0, (1.0 - alpha) / a0],
            x: [0.0; 2],
            y: [0.0; 2],
        }
    }

    pub fn run(&mut self, x0: f32) -> f32 {
        let y0 = self.b[0] * x0 + self.b[1] * self.x[0] + self.b[2] * self.x[1]
            - self.a[0] * self.y[0]
            - self.a[1] * self.y[1];
        self.x = [x0, self.x[0]];
        self.y = [y0, self.y[0]];
        y0
    }
}

/// A feedback comb whose echoes decay 60 dB in `rt60`.
struct Comb {
    line: Vec<f32>,
    at: usize,
    feedback: f32,
}

impl Comb {
    fn new(delay: usize, rt60: f32, rate: f32) -> Self {
        let delay = delay.max(1);
        Self {
            line: vec![0.0; delay],
            at: 0,
            feedback: 10f32.powf(-3.0 * delay as f32 / rate / rt60.max(0.05)),
        }
    }

    fn run(&mut self, x: f32) -> f32 {
        let y = self.line[self.at];
        self.line[self.at] = x + y * self.feedback;
        self.at = (self.at + 1) % self.line.len();
        y
    }
}

/// An all-pass that smears the combs' echoes into a tail.
struct Allpass {
    line: Vec<f32>,
    at: usize,
}

impl Allpass {
    fn new(delay: usize) -> Self {
        Self {
            line: vec![0.0; delay.max(1)],
            at: 0,
        }
    }

    fn run(&mut self, x: f32) -> f32 {
        const G: f32 = 0.7;
        let delayed = self.line[self.at];
        let y = -G * x + delayed;
        self.line[self.at] = x + G * y;
        self.at = (self.at + 1) % self.line.len();
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speakers_file_reaches_the_microphone_reverberated() {
        let dir = tempfile::tempdir().expect("dir");
        let speaker = dir.path().join("speaker.wav");
        std::fs::write(&speaker, [0u8; 44]).expect("header");
        let mut room = Room::new(RoomSpec {
            speaker: speaker.clone(),
            speaker_rate: 32_000,
            speaker_channels: 2,
            mic_rate: 16_000,
            gain_db: -6.0,
            rt60: 0.4,
        });
        room.follow();
        // One click, then silence, in stereo at twice the microphone's rate.
        let mut data = Vec::new();
        for i in 0..32_000 {
            let v: i16 = if (100..110).contains(&i) { 16_000 } else { 0 };
            data.extend_from_slice(&v.to_le_bytes());
            data.extend_from_slice(&v.to_le_bytes());
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&speaker)
            .expect("open");
        std::io::Write::write_all(&mut file, &data).expect("write");
        room.follow();
        assert!(
            (room.echo.len() as i64 - 16_000).abs() <= 1,
            "{}",
            room.echo.len()
        );
        let mut mic = vec![0u8; 2 * 16_000];
        room.mix(&mut mic, 1);
        let level = |from: usize, to: usize| {
            mic[2 * from..2 * to]
                .chunks_exact(2)
                .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])).abs())
                .fold(0.0, f32::max)
        };
        // The click is heard, and the room still rings 100 ms later, and
        // has died away by the end.
        assert!(level(40, 80) > 1000.0, "click {}", level(40, 80));
        assert!(level(1650, 2450) > 10.0, "tail {}", level(1650, 2450));
        assert!(level(15_000, 16_000) < level(1650, 2450));
    }
}
