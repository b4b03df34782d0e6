//! From what the capture device delivers (interleaved S16/S32/float frames,
//! 1–8 channels, 16/44.1/48 kHz) to the 16 kHz mono stream the detector and
//! speech-to-text use: per-channel gain, channel selection and mix,
//! resampling, DC removal. Every buffer is sized in [`Frontend::new`];
//! [`Frontend::process`] does not allocate.

use audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};

use crate::{
    beam::Beamformer,
    config::{CaptureConfig, PIPELINE_RATE, SampleFormat},
};

#[derive(Debug, thiserror::Error)]
pub enum DspError {
    #[error("cannot build a {from} Hz → {to} Hz resampler: {reason}")]
    Resampler { from: u32, to: u32, reason: String },
}

/// One-pole high-pass at about 13 Hz (at 16 kHz): removes the DC offset many
/// MEMS microphones and cheap codecs add, which would otherwise bias the
/// detector's and whisper's input.
#[derive(Debug, Default)]
pub struct DcBlocker {
    last_in: f32,
    last_out: f32,
}

impl DcBlocker {
    const POLE: f32 = 0.995;

    pub fn process(&mut self, samples: &mut [f32]) {
        for s in samples {
            let out = *s - self.last_in + Self::POLE * self.last_out;
            self.last_in = *s;
            self.last_out = out;
            *s = out;
        }
    }
}

/// Reads sample `index` of an interleaved little-endian buffer as −1…1.
#[inline]
fn sample_at(raw: &[u8], format: SampleFormat, index: usize) -> f32 {
    match format {
        SampleFormat::S16Le => {
            let b = [raw[index * 2], raw[index * 2 + 1]];
            f32::from(i16::from_le_bytes(b)) / 32_768.0
        }
        SampleFormat::S32Le => {
            let o = index * 4;
            let b = [raw[o], raw[o + 1], raw[o + 2], raw[o + 3]];
            (f64::from(i32::from_le_bytes(b)) / 2_147_483_648.0) as f32
        }
        SampleFormat::FloatLe => {
            let o = index * 4;
            f32::from_le_bytes([raw[o], raw[o + 1], raw[o + 2], raw[o + 3]])
        }
    }
}

struct Resample {
    fft: Fft<f32>,
    /// Device-rate mono samples waiting for a full resampler chunk.
    pending: Vec<f32>,
    chunk: usize,
}

pub struct Frontend {
    channels: usize,
    /// Delay-and-sum over the selected channels instead of a plain mix.
    beam: Option<(Beamformer, Vec<usize>, Vec<f32>)>,
    format: SampleFormat,
    /// Linear gain per device channel, already divided by the number of
    /// mixed channels; 0 for channels not selected.
    weights: Vec<f32>,
    dc: DcBlocker,
    resample: Option<Resample>,
    /// One period of device-rate mono audio.
    mono: Vec<f32>,
    /// The 16 kHz output of one `process` call.
    out: Vec<f32>,
}

impl Frontend {
    /// `period_frames`: the most frames one `process` call will be given.
    pub fn new(config: &CaptureConfig, period_frames: usize) -> Result<Self, DspError> {
        let channels = config.channels as usize;
        let selected: Vec<usize> = if config.select.is_empty() {
            (0..channels).collect()
        } else {
            config.select.iter().map(|&c| c as usize).collect()
        };
        let mut weights = vec![0.0; channels];
        for &channel in &selected {
            let gain_db = config.gains_db.get(channel).copied().unwrap_or(0.0);
            weights[channel] = 10f32.powf(gain_db / 20.0) / selected.len() as f32;
        }
        let beam = (config.beamform && config.geometry.len() == channels).then(|| {
            let positions: Vec<[f32; 2]> = selected.iter().map(|&c| config.geometry[c]).collect();
            (
                Beamformer::new(&positions, config.rate),
                selected.clone(),
                vec![0.0; selected.len()],
            )
        });
        let resample = if config.rate == PIPELINE_RATE {
            None
        } else {
            let fft = Fft::<f32>::new(
                config.rate as usize,
                PIPELINE_RATE as usize,
                period_frames,
                1,
                FixedSync::Input,
            )
            .map_err(|e| DspError::Resampler {
                from: config.rate,
                to: PIPELINE_RATE,
                reason: e.to_string(),
            })?;
            Some(Resample {
                pending: Vec::with_capacity(period_frames * 2),
                chunk: fft.input_frames_next(),
                fft,
            })
        };
        let out_capacity = match &resample {
            // Two chunks can complete in one call when reads are uneven.
            Some(r) => r.fft.output_frames_max() * 2,
            None => period_frames,
        };
        Ok(Self {
            channels,
            beam,
            format: config.format,
            weights,
            dc: DcBlocker::default(),
            resample,
            mono: Vec::with_capacity(period_frames),
            out: Vec::with_capacity(out_capacity),
        })
    }

    /// Converts `frames` interleaved frames from `raw` to 16 kHz mono. The
    /// result may be empty (the resampler is still filling a chunk).
    pub fn process(&mut self, raw: &[u8], frames: usize) -> &[f32] {
        self.process_mut(raw, frames)
    }

    /// As [`Frontend::process`], with the output writable in place.
    pub fn process_mut(&mut self, raw: &[u8], frames: usize) -> &mut [f32] {
        let frames = frames.min(self.mono.capacity());
        self.mono.clear();
        if let Some((beam, selected, scratch)) = &mut self.beam {
            let n = selected.len() as f32;
            for frame in 0..frames {
                for (slot, &channel) in scratch.iter_mut().zip(selected.iter()) {
                    // Weights were divided by the channel count for the mix;
                    // the beam averages by itself.
                    *slot = self.weights[channel]
                        * n
                        * sample_at(raw, self.format, frame * self.channels + channel);
                }
                self.mono.push(beam.process_frame(scratch));
            }
        } else {
            for frame in 0..frames {
                let mut acc = 0.0;
                for (channel, weight) in self.weights.iter().enumerate() {
                    if *weight != 0.0 {
                        acc +=
                            weight * sample_at(raw, self.format, frame * self.channels + channel);
                    }
                }
                self.mono.push(acc);
            }
        }
        self.out.clear();
        match &mut self.resample {
            None => self.out.extend_from_slice(&self.mono),
            Some(r) => {
                r.pending.extend_from_slice(&self.mono);
                while r.pending.len() >= r.chunk {
                    let out_len = self.out.len();
                    let room = r.fft.output_frames_next();
                    self.out.resize(out_len + room, 0.0);
                    let result = InterleavedSlice::new(&r.pending[..r.chunk], 1, r.chunk)
                        .ok()
                        .zip(InterleavedSlice::new_mut(&mut self.out[out_len..], 1, room).ok())
                        .map(|(input, mut output)| {
                            r.fft.process_into_buffer(&input, &mut output, None)
                        });
                    match result {
                        Some(Ok((_, written))) => self.out.truncate(out_len + written),
                        _ => {
                            // Sizes are fixed at construction, so this cannot
                            // happen; drop the chunk rather than panic.
                            self.out.truncate(out_len);
                        }
                    }
                    r.pending.drain(..r.chunk);
                }
            }
        }
        self.dc.process(&mut self.out);
        &mut self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(channels: u32, rate: u32, format: SampleFormat) -> CaptureConfig {
        CaptureConfig {
            channels,
            rate,
            format,
            ..CaptureConfig::default()
        }
    }

    fn s16(samples: &[i16]) -> Vec<u8> {
        samples.iter().flat_map(|s| s.to_le_bytes()).collect()
    }

    /// Dominant frequency by counting zero crossings over whole seconds.
    fn frequency(samples: &[f32], rate: f32) -> f32 {
        let crossings = samples
            .windows(2)
            .filter(|w| w[0] < 0.0 && w[1] >= 0.0)
            .count();
        crossings as f32 * rate / samples.len() as f32
    }

    #[test]
    fn selects_and_mixes_channels_with_gain() {
        let mut c = config(4, 16_000, SampleFormat::S16Le);
        c.select = vec![1, 2];
        c.gains_db = vec![0.0, 0.0, 6.0206];
        let mut f = Frontend::new(&c, 320).expect("frontend");
        // Channel 0 and 3 carry loud noise that must not leak in.
        let frame = [30_000i16, 1000, 1000, -30_000];
        let raw = s16(&frame.repeat(320));
        let out = f.process(&raw, 320).to_vec();
        assert_eq!(out.len(), 320);
        // Before the DC blocker the mix is (1000 + 2·1000)/2/32768; the
        // blocker then decays a constant towards 0, so check the first sample.
        let expected = (1000.0 + 2.0 * 1000.0) / 2.0 / 32_768.0;
        assert!((out[0] - expected).abs() < 1e-3, "{} vs {expected}", out[0]);
    }

    #[test]
    fn formats_decode_to_the_same_value() {
        let half_s16 = s16(&[16_384]);
        let half_s32: Vec<u8> = (1i32 << 30).to_le_bytes().to_vec();
        let half_f32: Vec<u8> = 0.5f32.to_le_bytes().to_vec();
        assert!((sample_at(&half_s16, SampleFormat::S16Le, 0) - 0.5).abs() < 1e-6);
        assert!((sample_at(&half_s32, SampleFormat::S32Le, 0) - 0.5).abs() < 1e-6);
        assert!((sample_at(&half_f32, SampleFormat::FloatLe, 0) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn resamples_48k_to_16k_keeping_frequency() {
        let c = config(1, 48_000, SampleFormat::FloatLe);
        let period = 960;
        let mut f = Frontend::new(&c, period).expect("frontend");
        let tone: Vec<f32> = (0..48_000 * 2)
            .map(|i| (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / 48_000.0).sin() * 0.5)
            .collect();
        let mut out = Vec::new();
        for chunk in tone.chunks(period) {
            let raw: Vec<u8> = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
            out.extend_from_slice(f.process(&raw, chunk.len()));
        }
        // Two seconds in, about two seconds out (minus the resampler's delay).
        assert!((out.len() as i64 - 32_000).abs() <= 1_000, "{}", out.len());
        let steady = &out[4_000..out.len() - 1_000];
        let hz = frequency(steady, 16_000.0);
        assert!((hz - 1000.0).abs() < 2.0, "{hz} Hz");
    }

    #[test]
    fn beamforming_frontend_keeps_a_coherent_signal() {
        // The same signal on all four microphones (a source straight above
        // the array): every beam sums it coherently, so it passes at unity
        // gain while the channels' gains still apply.
        let mut c = config(4, 16_000, SampleFormat::FloatLe);
        c.beamform = true;
        c.geometry = vec![[0.03, 0.0], [0.0, 0.03], [-0.03, 0.0], [0.0, -0.03]];
        c.gains_db = vec![6.0206; 4];
        let mut f = Frontend::new(&c, 320).expect("frontend");
        let tone: Vec<f32> = (0..16_000)
            .map(|i| (2.0 * std::f32::consts::PI * 500.0 * i as f32 / 16_000.0).sin() * 0.25)
            .collect();
        let mut out = Vec::new();
        for chunk in tone.chunks(320) {
            let raw: Vec<u8> = chunk
                .iter()
                .flat_map(|s| [*s; 4])
                .flat_map(|s| s.to_le_bytes())
                .collect();
            out.extend_from_slice(f.process(&raw, chunk.len()));
        }
        let peak = out[8000..].iter().fold(0.0f32, |m, s| m.max(s.abs()));
        assert!((peak - 0.5).abs() < 0.03, "{peak}");
    }

    #[test]
    fn dc_offset_is_removed() {
        let c = config(1, 16_000, SampleFormat::FloatLe);
        let mut f = Frontend::new(&c, 320).expect("frontend");
        let raw: Vec<u8> = [0.3f32; 320].iter().flat_map(|s| s.to_le_bytes()).collect();
        let mut last = 1.0;
        for _ in 0..100 {
            last = *f.process(&raw, 320).last().expect("output");
        }
        assert!(last.abs() < 0.01, "{last}");
    }
}
