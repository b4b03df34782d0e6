//! The audio front end the microWakeWord models were trained on: 40
//! channels every 10 ms from 30 ms windows of 16 kHz speech, in the fixed
//! point arithmetic of TensorFlow Lite Micro's "micro frontend" (a Hann
//! window, a 512-point FFT, a mel filterbank from 125 to 7500 Hz, a square
//! root, per-channel noise reduction, per-channel energy normalisation
//! (PCAN) and a logarithm). The models hear every small difference in
//! these numbers, so each stage keeps the reference's integer widths,
//! shifts and rounding; only the FFT is computed in floating point and
//! rounded to the reference's scale (its fixed-point FFT rounds at every
//! stage, which moves a bin by a unit or two).
//!
//! [`Frontend::push`] allocates nothing: the audio path calls it.

use std::sync::Arc;

use realfft::{RealFftPlanner, RealToComplex, num_complex::Complex};

/// Samples a second.
pub const RATE: usize = 16_000;
/// Channels of a feature frame.
pub const CHANNELS: usize = 40;
/// Samples between frames (10 ms).
pub const STEP: usize = RATE / 100;
/// A frame's value in the models' input units: the front end's 16-bit
/// output divided by 25.6.
pub const SCALE: f32 = 0.039_062_5;

/// Samples a frame reads (30 ms).
const WINDOW: usize = RATE * 30 / 1000;
const FFT: usize = 512;
const BINS: usize = FFT / 2 + 1;
const LOWEST_HZ: f32 = 125.0;
const HIGHEST_HZ: f32 = 7500.0;

/// Fraction bits of the window's coefficients and of the filterbank's
/// weights.
const WINDOW_BITS: u32 = 12;
const WEIGHT_BITS: u32 = 12;
/// Noise reduction: the estimate's fraction bits, its extra precision, how
/// fast it follows even and odd channels, and the least share of a channel
/// it leaves.
const NOISE_BITS: u32 = 14;
const SMOOTHING_BITS: u32 = 10;
const EVEN_SMOOTHING: f32 = 0.025;
const ODD_SMOOTHING: f32 = 0.06;
const MIN_REMAINING: f32 = 0.05;
/// PCAN: gain = 2^GAIN_BITS · (noise + OFFSET)^−STRENGTH, read from a
/// piecewise quadratic table over each octave of the noise estimate.
const PCAN_STRENGTH: f32 = 0.95;
const PCAN_OFFSET: f32 = 80.0;
const GAIN_BITS: u32 = 21;
const SNR_BITS: u32 = 12;
const PCAN_OUTPUT_BITS: u32 = 6;
const OCTAVES: usize = 32;
/// The logarithm: 16 fraction bits, a correction table of 128 segments,
/// and the output's scale (2^6 per unit of ln).
const LOG_BITS: u32 = 16;
const LOG_SEGMENT_BITS: u32 = 7;
const LOG_OUTPUT_SHIFT: u32 = 6;
/// ln 2 · 2^16, rounded: log2 to ln in the logarithm's units.
const LN2: u64 = 45_426;

/// Bits up to and including the highest set one (0 for 0).
fn bit_length(n: u64) -> u32 {
    64 - n.leading_zeros()
}

/// The mel scale the filterbank is spaced on.
fn mel(hz: f32) -> f32 {
    1127.0 * (hz / 700.0).ln_1p()
}

/// Fixed-point `x` with `bits` fraction bits, rounded half up.
fn fixed(x: f32, bits: u32) -> i16 {
    (x * (1u32 << bits) as f32 + 0.5).floor() as i16
}

/// One channel of the filterbank: the FFT bins rising towards its centre,
/// each with its weight here and what is left of it (the "unweight") for
/// the channel before, which those bins fall from.
struct Band {
    first: usize,
    weights: Vec<(i16, i16)>,
}

fn bands() -> (Vec<Band>, usize, usize) {
    let hz_per_bin = 0.5 * RATE as f32 / (BINS as f32 - 1.0);
    let (low, high) = (mel(LOWEST_HZ), mel(HIGHEST_HZ));
    // One more centre than channels: the last channel's bins fall to it.
    let spacing = (high - low) / (CHANNELS + 1) as f32;
    let centres: Vec<f32> = (0..=CHANNELS)
        .map(|i| low + spacing * (i + 1) as f32)
        .collect();
    // DC is never in a band.
    let first = (1.5 + LOWEST_HZ / hz_per_bin) as usize;
    let mut bands = Vec::with_capacity(CHANNELS + 1);
    let mut next = first;
    for (c, &centre) in centres.iter().enumerate() {
        let below = if c == 0 { low } else { centres[c - 1] };
        let start = next;
        let mut weights = Vec::new();
        while mel(next as f32 * hz_per_bin) <= centre {
            let w = (centre - mel(next as f32 * hz_per_bin)) / (centre - below);
            weights.push((fixed(w, WEIGHT_BITS), fixed(1.0 - w, WEIGHT_BITS)));
            next += 1;
        }
        bands.push(Band {
            first: start,
            weights,
        });
    }
    (bands, first, next)
}

/// Square root rounded to the nearest, as the reference rounds it: up
/// when the remainder exceeds the root, but not past 16 bits for inputs
/// under 2^32 (it takes a 32-bit path there).
fn rounded_sqrt(n: u64) -> u32 {
    let root = n.isqrt();
    let rest = n - root * root;
    let cap = if n >> 32 == 0 { 0xFFFF } else { 0xFFFF_FFFF };
    (if rest > root && root != cap {
        root + 1
    } else {
        root
    }) as u32
}

/// The PCAN gain at noise `x` (`input_bits` fraction bits), 16-bit.
fn gain_at(input_bits: i32, x: u32) -> i16 {
    let noise = x as f32 / 2f32.powi(input_bits);
    let gain = (1u32 << GAIN_BITS) as f32 * (noise + PCAN_OFFSET).powf(-PCAN_STRENGTH);
    if gain > i16::MAX as f32 {
        i16::MAX
    } else {
        (gain + 0.5) as i16
    }
}

/// The gain table: the gains at 0 and 1, then for each octave
/// [2^(k−1), 2^k) a quadratic through its start, middle and end, as
/// (value at the start, first and second coefficient).
struct GainTable {
    small: [i16; 2],
    octaves: [[i16; 3]; OCTAVES + 1],
}

impl GainTable {
    fn new(input_bits: i32) -> Self {
        let mut octaves = [[0i16; 3]; OCTAVES + 1];
        for (k, octave) in octaves.iter_mut().enumerate().skip(2) {
            let x0 = 1u32 << (k - 1);
            let x1 = x0 + (x0 >> 1);
            let x2 = if k == OCTAVES { x0 + (x0 - 1) } else { 2 * x0 };
            let (y0, y1, y2) = (
                gain_at(input_bits, x0),
                gain_at(input_bits, x1),
                gain_at(input_bits, x2),
            );
            let (d1, d2) = (i32::from(y1) - i32::from(y0), i32::from(y2) - i32::from(y0));
            let a1 = 4 * d1 - d2;
            *octave = [y0, a1 as i16, (d2 - a1) as i16];
        }
        Self {
            small: [gain_at(input_bits, 0), gain_at(input_bits, 1)],
            octaves,
        }
    }

    /// The gain at noise estimate `x`: the octave's quadratic at the
    /// position of `x` in it (10 bits).
    fn gain(&self, x: u32) -> i16 {
        if x <= 2 {
            return match x {
                0 | 1 => self.small[x as usize],
                _ => self.octaves[2][0],
            };
        }
        let octave = bit_length(u64::from(x)) as usize;
        let [y0, a1, a2] = self.octaves[octave];
        let at = if octave < 11 {
            x << (11 - octave)
        } else {
            x >> (octave - 11)
        } & 0x3FF;
        let at = at as i32;
        let mut g = (i32::from(a2) * at) >> 5;
        g += i32::from(a1) << 5;
        g *= at;
        g = (g + (1 << 14)) >> 15;
        (g + i32::from(y0)) as i16
    }
}

/// Compresses a signal-to-noise ratio: quadratic below 2, linear above.
fn shrink(snr: u32) -> u32 {
    if snr < (2 << SNR_BITS) {
        (snr * snr) >> (2 + 2 * SNR_BITS - PCAN_OUTPUT_BITS)
    } else {
        (snr >> (SNR_BITS - PCAN_OUTPUT_BITS)) - (1 << PCAN_OUTPUT_BITS)
    }
}

/// log2(1 + f) − f for f = i/128, in 1/65536: the correction the integer
/// logarithm adds to its linear reading of the mantissa (two entries past
/// the end, 0, for the interpolation's last step).
fn log_corrections() -> [i32; 130] {
    let mut table = [0i32; 130];
    for (i, c) in table.iter_mut().enumerate().take(129) {
        let f = i as f64 / 128.0;
        *c = (((1.0 + f).log2() - f) * 65536.0).round() as i32;
    }
    table
}

/// ln(x) · 2^LOG_OUTPUT_SHIFT, from x's highest bit and an interpolated
/// correction of its mantissa.
fn log(x: u32, corrections: &[i32; 130]) -> u32 {
    let integer = bit_length(u64::from(x)) - 1;
    let mut frac = x as i64 - (1i64 << integer);
    if integer < LOG_BITS {
        frac <<= LOG_BITS - integer;
    } else {
        frac >>= integer - LOG_BITS;
    }
    let frac = frac as i32;
    let segment = (frac >> (LOG_BITS - LOG_SEGMENT_BITS)) as usize;
    let unit = (1i32 << LOG_BITS) >> LOG_SEGMENT_BITS;
    let (c0, c1) = (corrections[segment], corrections[segment + 1]);
    let along = ((c1 - c0) * (frac - unit * segment as i32)) >> LOG_BITS;
    let fraction = (frac + c0 + along) as u32;
    let log2 = (integer << LOG_BITS) + fraction;
    let half = 1u64 << (LOG_BITS - 1);
    let ln = ((LN2 * u64::from(log2) + half) >> LOG_BITS) as u32;
    (((u64::from(ln) << LOG_OUTPUT_SHIFT) + half) >> LOG_BITS) as u32
}

/// The front end's state: the last window's samples, the noise estimates,
/// and every buffer a frame needs.
pub struct Frontend {
    coefficients: [i16; WINDOW],
    input: [i16; WINDOW],
    filled: usize,
    fft: Arc<dyn RealToComplex<f32>>,
    fft_in: Vec<f32>,
    fft_out: Vec<Complex<f32>>,
    scratch: Vec<Complex<f32>>,
    bands: Vec<Band>,
    first_bin: usize,
    end_bin: usize,
    energy: [u32; BINS],
    estimate: [u32; CHANNELS],
    even: u32,
    odd: u32,
    remaining: u32,
    gains: GainTable,
    snr_shift: u32,
    correction_bits: i32,
    corrections: [i32; 130],
}

impl Default for Frontend {
    fn default() -> Self {
        Self::new()
    }
}

impl Frontend {
    pub fn new() -> Self {
        let mut coefficients = [0i16; WINDOW];
        let arg = std::f32::consts::PI * 2.0 / WINDOW as f32;
        for (i, c) in coefficients.iter_mut().enumerate() {
            *c = fixed(0.5 - 0.5 * (arg * (i as f32 + 0.5)).cos(), WINDOW_BITS);
        }
        let fft = RealFftPlanner::<f32>::new().plan_fft_forward(FFT);
        let (fft_in, fft_out, scratch) = (
            fft.make_input_vec(),
            fft.make_output_vec(),
            fft.make_scratch_vec(),
        );
        let (bands, first_bin, end_bin) = bands();
        // The filterbank's output carries 2^(log2 FFT − 1 − WEIGHT_BITS/2)
        // too much or too little; PCAN and the logarithm take it out.
        let correction_bits = bit_length(FFT as u64) as i32 - 1 - (WEIGHT_BITS / 2) as i32;
        let noise_units = |share: f32| (share * (1u32 << NOISE_BITS) as f32) as u32;
        Self {
            coefficients,
            input: [0; WINDOW],
            filled: 0,
            fft,
            fft_in,
            fft_out,
            scratch,
            bands,
            first_bin,
            end_bin,
            energy: [0; BINS],
            estimate: [0; CHANNELS],
            even: noise_units(EVEN_SMOOTHING),
            odd: noise_units(ODD_SMOOTHING),
            remaining: noise_units(MIN_REMAINING),
            gains: GainTable::new(SMOOTHING_BITS as i32 - correction_bits),
            snr_shift: (GAIN_BITS as i32 - correction_bits - SNR_BITS as i32) as u32,
            correction_bits,
            corrections: log_corrections(),
        }
    }

    /// Forgets the audio and the noise heard so far.
    pub fn reset(&mut self) {
        self.input = [0; WINDOW];
        self.filled = 0;
        self.estimate = [0; CHANNELS];
    }

    /// Takes in `samples`; calls `frame` with each frame they complete
    /// (one every [`STEP`] samples once the first window is full).
    pub fn push(&mut self, mut samples: &[i16], mut frame: impl FnMut(&[u16; CHANNELS])) {
        while !samples.is_empty() {
            let take = (WINDOW - self.filled).min(samples.len());
            self.input[self.filled..self.filled + take].copy_from_slice(&samples[..take]);
            self.filled += take;
            samples = &samples[take..];
            if self.filled == WINDOW {
                let out = self.frame();
                frame(&out);
                self.input.copy_within(STEP.., 0);
                self.filled -= STEP;
            }
        }
    }

    /// The frame of the full window.
    fn frame(&mut self) -> [u16; CHANNELS] {
        // Window, scaled up as far as 16 bits allow.
        let mut loudest = 0u16;
        for (i, (&x, &c)) in self.input.iter().zip(&self.coefficients).enumerate() {
            let y = ((i32::from(x) * i32::from(c)) >> WINDOW_BITS) as i16;
            loudest = loudest.max(y.unsigned_abs());
            self.fft_in[i] = f32::from(y);
        }
        let shift = 15 - bit_length(u64::from(loudest)).min(15);
        for x in &mut self.fft_in[..WINDOW] {
            *x = f32::from(((*x as i16 as u16) << shift) as i16);
        }
        self.fft_in[WINDOW..].fill(0.0);
        // The reference's FFT scales its output by 1/FFT into 16 bits.
        if self
            .fft
            .process_with_scratch(&mut self.fft_in, &mut self.fft_out, &mut self.scratch)
            .is_err()
        {
            // Only wrong lengths fail, and the buffers are the plan's own.
            return [0; CHANNELS];
        }
        for bin in self.first_bin..self.end_bin {
            let z = self.fft_out[bin];
            let (re, im) = (
                i64::from((z.re / FFT as f32).round() as i16),
                i64::from((z.im / FFT as f32).round() as i16),
            );
            self.energy[bin] = (re * re + im * im) as u32;
        }
        // Filterbank: each channel's weighted bins, and the rest of the
        // weight of the next channel's bins.
        let mut out = [0u32; CHANNELS];
        let mut carried = 0u64;
        for (c, band) in self.bands.iter().enumerate() {
            let (mut here, mut next) = (carried, 0u64);
            for (j, &(w, u)) in band.weights.iter().enumerate() {
                let e = u64::from(self.energy[band.first + j]);
                here += w as u64 * e;
                next += u as u64 * e;
            }
            if c > 0 {
                out[c - 1] = rounded_sqrt(here) >> shift;
            }
            carried = next;
        }
        // Noise reduction, then PCAN on the noise left, then the log.
        let mut features = [0u16; CHANNELS];
        for (i, value) in out.iter_mut().enumerate() {
            let smoothing = if i % 2 == 0 { self.even } else { self.odd };
            let up = *value << SMOOTHING_BITS;
            let mut estimate = ((u64::from(up) * u64::from(smoothing)
                + u64::from(self.estimate[i]) * u64::from((1 << NOISE_BITS) - smoothing))
                >> NOISE_BITS) as u32;
            self.estimate[i] = estimate;
            estimate = estimate.min(up);
            let floor = ((u64::from(*value) * u64::from(self.remaining)) >> NOISE_BITS) as u32;
            *value = ((up - estimate) >> SMOOTHING_BITS).max(floor);

            let gain = self.gains.gain(self.estimate[i]) as u16 as u64;
            let snr = ((u64::from(*value) * gain) >> self.snr_shift) as u32;
            let mut v = shrink(snr);

            v = if self.correction_bits < 0 {
                v >> -self.correction_bits
            } else {
                v << self.correction_bits
            };
            features[i] = if v > 1 {
                log(v, &self.corrections).min(0xFFFF) as u16
            } else {
                0
            };
        }
        features
    }
}
