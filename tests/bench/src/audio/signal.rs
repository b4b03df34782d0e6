//! The audio the audio benchmark injects: speech made at run time with
//! espeak-ng and sox, reproducible noise, and where speech truly ends.

use std::{ops::Range, path::Path, process::Command};

use anyhow::{Context, ensure};

/// The pipeline rate, and the rate every clip here is made at.
pub const RATE: usize = 16_000;

/// Samples in `ms` milliseconds at 16 kHz.
pub fn samples(ms: u64) -> usize {
    (ms as usize) * RATE / 1000
}

/// Milliseconds in `n` samples at 16 kHz (signed, for differences).
pub fn millis(n: i64) -> f64 {
    n as f64 * 1000.0 / RATE as f64
}

fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("cannot run {what} (apt-get install espeak-ng sox)"))?;
    ensure!(status.success(), "{what} failed: {status}");
    Ok(())
}

/// `text` spoken by espeak-ng, as 16 kHz mono (sox converts espeak-ng's
/// 22.05 kHz output to 16 kHz signed 16-bit).
pub fn speech(dir: &Path, name: &str, text: &str) -> anyhow::Result<Vec<f32>> {
    let wav = dir.join(format!("{name}.wav"));
    let raw = dir.join(format!("{name}.raw"));
    run(
        Command::new("espeak-ng").arg("-w").arg(&wav).arg(text),
        "espeak-ng",
    )?;
    run(
        Command::new("sox")
            .arg(&wav)
            .args([
                "-r", "16000", "-c", "1", "-b", "16", "-e", "signed", "-t", "raw",
            ])
            .arg(&raw),
        "sox",
    )?;
    let bytes = std::fs::read(&raw).with_context(|| format!("cannot read {}", raw.display()))?;
    let clip = from_s16_le(&bytes);
    ensure!(
        true_end(&clip) > 0,
        "espeak-ng produced no audible speech for {text:?}"
    );
    Ok(clip)
}

/// Reproducible white noise (xorshift32), uniform in −amp…amp; its RMS is
/// amp/√3.
pub fn noise(n: usize, amp: f32, seed: u32) -> Vec<f32> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32 * 2.0 - 1.0) * amp
        })
        .collect()
}

/// Adds `noise` to `signal` in place.
pub fn add(signal: &mut [f32], noise: &[f32]) {
    for (s, n) in signal.iter_mut().zip(noise) {
        *s += n;
    }
}

/// The threshold of "audible" in a clean clip: −40 dBFS RMS.
const AUDIBLE_RMS: f32 = 0.01;
/// The window the threshold is applied to: 10 ms.
const WINDOW: usize = 160;

fn loud_windows(clip: &[f32]) -> impl Iterator<Item = usize> + '_ {
    clip.chunks(WINDOW).enumerate().filter_map(|(i, w)| {
        let rms = (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt();
        (rms > AUDIBLE_RMS).then_some(i)
    })
}

/// Where speech truly ends in a clean clip: the end of the last 10 ms
/// window above −40 dBFS RMS (as `true_end` in the engine's virtual-card
/// tests). 0 if there is none.
pub fn true_end(clip: &[f32]) -> usize {
    loud_windows(clip).last().map_or(0, |i| (i + 1) * WINDOW)
}

/// Where speech truly starts: the first 10 ms window above −40 dBFS.
pub fn true_start(clip: &[f32]) -> usize {
    loud_windows(clip).next().map_or(0, |i| i * WINDOW)
}

/// What the card carries: 16-bit samples, as the detectors see them.
pub fn quantize(samples: &[f32]) -> Vec<f32> {
    samples
        .iter()
        .map(|s| f32::from(to_i16(*s)) / 32_768.0)
        .collect()
}

fn to_i16(s: f32) -> i16 {
    (s.clamp(-1.0, 1.0) * 32_767.0).round() as i16
}

/// Samples (−1…1) of raw S16_LE bytes.
pub fn from_s16_le(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32_768.0)
        .collect()
}

/// Raw S16_LE bytes of interleaved samples.
pub fn s16_le(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .flat_map(|s| to_i16(*s).to_le_bytes())
        .collect()
}

/// Interleaves `channels` channels: `speech` on channel `on`, noise on the
/// others (a different seed each).
pub fn interleave(speech: &[f32], channels: usize, on: usize, noise_amp: f32) -> Vec<f32> {
    let others: Vec<Vec<f32>> = (0..channels)
        .map(|c| noise(speech.len(), noise_amp, 100 + c as u32))
        .collect();
    (0..speech.len())
        .flat_map(|i| {
            let others = &others;
            (0..channels).map(move |c| if c == on { speech[i] } else { others[c][i] })
        })
        .collect()
}

/// Where `needle` starts in `hay` (best correlation), among the offsets in
/// `offsets`.
pub fn locate(hay: &[f32], needle: &[f32], offsets: Range<usize>) -> Option<usize> {
    let last = hay.len().checked_sub(needle.len())?;
    (offsets.start..offsets.end.min(last + 1))
        .map(|offset| {
            let score: f32 = hay[offset..offset + needle.len()]
                .iter()
                .zip(needle)
                .map(|(a, b)| a * b)
                .sum();
            (score, offset)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, offset)| offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn true_end_is_the_last_loud_window() {
        let mut clip = vec![0.0; 1600];
        clip.extend(vec![0.5; 800]);
        clip.extend(vec![0.001; 1600]);
        assert_eq!(true_start(&clip), 1600);
        assert_eq!(true_end(&clip), 2400);
        assert_eq!(true_end(&[0.0; 100]), 0);
    }

    #[test]
    fn locates_a_needle_and_interleaves() {
        let hay = noise(4000, 0.5, 3);
        assert_eq!(locate(&hay, &hay[1234..1634], 0..4000), Some(1234));
        assert_eq!(locate(&hay, &hay[1234..1634], 1200..1300), Some(1234));
        assert!(locate(&hay, &hay[1234..1634], 0..1000).is_some_and(|at| at < 1000));
        assert_eq!(locate(&hay[..10], &hay[..20], 0..100), None);
        assert_eq!(locate(&hay, &hay[..20], 5000..6000), None);
        let frames = interleave(&[1.0, 2.0], 3, 1, 0.1);
        assert_eq!(frames.len(), 6);
        assert_eq!((frames[1], frames[4]), (1.0, 2.0));
        assert!(frames[0].abs() <= 0.1 && frames[5].abs() <= 0.1);
    }

    #[test]
    fn quantizes_like_the_card() {
        assert_eq!(s16_le(&[0.5, -1.5]), [0x00, 0x40, 0x01, 0x80]);
        assert!((quantize(&[0.5])[0] - 16_384.0 / 32_768.0).abs() < 1e-4);
    }
}
