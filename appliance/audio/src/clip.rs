//! Whole clips in memory: reading a WAV file, resampling a clip, and
//! writing it in a device's raw format. Used off the audio path (injecting a
//! test utterance, preparing earcons), so allocation is fine here.

use std::path::Path;

use audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};

#[derive(Debug, thiserror::Error)]
pub enum ClipError {
    #[error("cannot read WAV file {path}: {reason}")]
    Wav { path: String, reason: String },
    #[error("cannot resample {from} Hz → {to} Hz: {reason}")]
    Resample { from: u32, to: u32, reason: String },
}

/// A mono clip.
#[derive(Debug, Clone, PartialEq)]
pub struct Clip {
    pub samples: Vec<f32>,
    pub rate: u32,
}

impl Clip {
    /// Reads a WAV file (8/16/24/32-bit integer or 32-bit float, any rate,
    /// any channel count; channels are averaged to mono).
    pub fn read_wav(path: &Path) -> Result<Self, ClipError> {
        let err = |reason: String| ClipError::Wav {
            path: path.display().to_string(),
            reason,
        };
        let mut reader = hound::WavReader::open(path).map_err(|e| err(e.to_string()))?;
        let spec = reader.spec();
        let channels = usize::from(spec.channels.max(1));
        let interleaved: Vec<f32> = match spec.sample_format {
            hound::SampleFormat::Float => reader
                .samples::<f32>()
                .collect::<Result<_, _>>()
                .map_err(|e| err(e.to_string()))?,
            hound::SampleFormat::Int => {
                let scale = 1.0 / (1u64 << (spec.bits_per_sample.clamp(1, 32) - 1)) as f32;
                reader
                    .samples::<i32>()
                    .map(|s| s.map(|v| v as f32 * scale))
                    .collect::<Result<_, _>>()
                    .map_err(|e| err(e.to_string()))?
            }
        };
        let samples = interleaved
            .chunks(channels)
            .map(|frame| frame.iter().sum::<f32>() / channels as f32)
            .collect();
        Ok(Self {
            samples,
            rate: spec.sample_rate,
        })
    }

    /// The clip at another rate (high-quality FFT resampling).
    pub fn resampled(&self, rate: u32) -> Result<Self, ClipError> {
        if rate == self.rate || self.samples.is_empty() {
            return Ok(Self {
                samples: self.samples.clone(),
                rate,
            });
        }
        let err = |reason: String| ClipError::Resample {
            from: self.rate,
            to: rate,
            reason,
        };
        let mut fft = Fft::<f32>::new(self.rate as usize, rate as usize, 1024, 1, FixedSync::Input)
            .map_err(|e| err(e.to_string()))?;
        let input = InterleavedSlice::new(&self.samples, 1, self.samples.len())
            .map_err(|e| err(e.to_string()))?;
        let out = fft
            .process_all(&input, self.samples.len(), None)
            .map_err(|e| err(e.to_string()))?;
        Ok(Self {
            samples: out.take_data(),
            rate,
        })
    }

    /// Raw interleaved S16_LE with the mono signal on every channel.
    pub fn to_s16_le(&self, channels: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.samples.len() * channels as usize * 2);
        for s in &self.samples {
            let v = (s.clamp(-1.0, 1.0) * 32767.0).round() as i16;
            for _ in 0..channels {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    pub fn duration_secs(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.rate.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(freq: f32, rate: u32, seconds: f32) -> Vec<f32> {
        (0..(rate as f32 * seconds) as usize)
            .map(|i| (2.0 * std::f32::consts::PI * freq * i as f32 / rate as f32).sin() * 0.5)
            .collect()
    }

    /// Frequency from the zero crossings of a steady stretch.
    fn frequency(samples: &[f32], rate: u32) -> f64 {
        let crossings: Vec<f64> = samples
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[0] < 0.0 && w[1] >= 0.0)
            // Interpolate the crossing point for sub-sample precision.
            .map(|(i, w)| i as f64 + f64::from(-w[0] / (w[1] - w[0])))
            .collect();
        let (first, last) = (crossings[0], crossings[crossings.len() - 1]);
        (crossings.len() - 1) as f64 * f64::from(rate) / (last - first)
    }

    #[test]
    fn a_1khz_sine_stays_at_1khz_from_22050_to_48000() {
        let clip = Clip {
            samples: sine(1000.0, 22_050, 2.0),
            rate: 22_050,
        };
        let out = clip.resampled(48_000).expect("resampled");
        assert_eq!(out.rate, 48_000);
        assert!(
            (out.samples.len() as i64 - 96_000).abs() < 100,
            "{}",
            out.samples.len()
        );
        let steady = &out.samples[4_800..out.samples.len() - 4_800];
        let hz = frequency(steady, 48_000);
        assert!((hz - 1000.0).abs() < 1.0, "{hz} Hz");
    }

    #[test]
    fn wav_round_trip_and_mono_mix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.wav");
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: 16_000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::create(&path, spec).expect("writer");
        for _ in 0..100 {
            w.write_sample(16_384i16).expect("write");
            w.write_sample(0i16).expect("write");
        }
        w.finalize().expect("finalize");
        let clip = Clip::read_wav(&path).expect("read");
        assert_eq!(clip.rate, 16_000);
        assert_eq!(clip.samples.len(), 100);
        assert!((clip.samples[0] - 0.25).abs() < 1e-4);
        let raw = clip.to_s16_le(2);
        assert_eq!(raw.len(), 400);
        assert_eq!(i16::from_le_bytes([raw[0], raw[1]]), 8192);
        assert!(Clip::read_wav(&dir.path().join("missing.wav")).is_err());
    }
}
