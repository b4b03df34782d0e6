//! Whisper's mel filterbank, computed rather than shipped: Slaney-style
//! triangular filters (the `librosa.filters.mel` defaults whisper uses) for
//! 16 kHz audio, a 400-point FFT and 80 or 128 mel bands. CTranslate2 model
//! folders do not carry it; the ggml file format does.

const F_SP: f64 = 200.0 / 3.0;
const MIN_LOG_HZ: f64 = 1000.0;
const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;

fn log_step() -> f64 {
    6.4f64.ln() / 27.0
}

fn hz_to_mel(hz: f64) -> f64 {
    if hz >= MIN_LOG_HZ {
        MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / log_step()
    } else {
        hz / F_SP
    }
}

fn mel_to_hz(mel: f64) -> f64 {
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * (log_step() * (mel - MIN_LOG_MEL)).exp()
    } else {
        F_SP * mel
    }
}

/// `n_mels` × (`n_fft` / 2 + 1) filter weights, row-major.
pub fn filters(sample_rate: u32, n_fft: usize, n_mels: usize) -> Vec<f32> {
    let bins = n_fft / 2 + 1;
    let nyquist = f64::from(sample_rate) / 2.0;
    let fft_freqs: Vec<f64> = (0..bins)
        .map(|i| nyquist * i as f64 / (bins - 1) as f64)
        .collect();
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(nyquist));
    let mel_f: Vec<f64> = (0..n_mels + 2)
        .map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (n_mels + 1) as f64))
        .collect();
    let mut weights = vec![0.0f32; n_mels * bins];
    for m in 0..n_mels {
        let (left, center, right) = (mel_f[m], mel_f[m + 1], mel_f[m + 2]);
        let norm = 2.0 / (right - left);
        for (b, f) in fft_freqs.iter().enumerate() {
            let lower = (f - left) / (center - left);
            let upper = (right - f) / (right - center);
            weights[m * bins + b] = (lower.min(upper).max(0.0) * norm) as f32;
        }
    }
    weights
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_and_known_values() {
        let w = filters(16_000, 400, 80);
        assert_eq!(w.len(), 80 * 201);
        // The first filter peaks at bin 1 (25 Hz per bin, 0 → ~33 Hz → ~67 Hz).
        let first: Vec<f32> = w[..201].to_vec();
        let peak =
            first.iter().enumerate().fold(
                (0, 0.0f32),
                |acc, (i, v)| if *v > acc.1 { (i, *v) } else { acc },
            );
        assert_eq!(peak.0, 1);
        // Slaney normalisation: each filter's area in Hz is about 1.
        for m in [0usize, 40, 79] {
            let area: f32 = w[m * 201..(m + 1) * 201].iter().sum::<f32>() * 40.0;
            assert!((area - 1.0).abs() < 0.2, "filter {m}: {area}");
        }
        // Bands above the last filter's edge are empty.
        assert!(w.iter().all(|v| *v >= 0.0));
    }
}
