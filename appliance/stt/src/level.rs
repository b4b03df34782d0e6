//! Where there is sound in a clip, from the level (RMS) of its 10 ms
//! windows against the clip's own floor. The live engine reads words into
//! quiet: it is given a clip from its first sound ([`crate::moonshine::onset`]),
//! and a pause is transcribed a second time only if something was heard
//! after the first look ([`sound_after`]).

/// A window, in samples at 16 kHz (10 ms).
pub const WINDOW: usize = 16_000 / 100;

/// −50 dBFS: quieter than this is no first sound (breath, hum).
pub const ONSET_LEAST: f32 = 0.003_16;
/// −70 dBFS: the least that counts as sound after speech. A last word can
/// trail off 40 dB under the sentence (to about −50 dBFS); digital
/// silence and the capture path's rounding are well under this.
pub const AFTER_LEAST: f32 = 0.000_316;

/// The RMS level of each 10 ms window of `audio` (the last may be short).
pub fn levels(audio: &[f32]) -> Vec<f32> {
    audio
        .chunks(WINDOW)
        .map(|w| (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt())
        .collect()
}

/// The level a window must reach to count as sound: 12 dB over the
/// quietest window and at least `least`, but never more than 20 dB under
/// the loudest (a loud room's floor cannot hide speech). `None` for no
/// audio.
pub fn threshold(levels: &[f32], least: f32) -> Option<f32> {
    let quietest = levels.iter().copied().reduce(f32::min)?;
    let loudest = levels.iter().copied().reduce(f32::max)?;
    Some((quietest * 3.98).max(least).min(loudest * 0.1))
}

/// Where the last sound in `audio` after sample `from` ends (the end of
/// its window), judged against the whole clip's floor ([`threshold`] with
/// [`AFTER_LEAST`]); `None` when nothing after `from` stands out of it.
/// Whole windows only: the one holding `from` belongs to what came before.
pub fn sound_after(audio: &[f32], from: usize) -> Option<usize> {
    let levels = levels(audio);
    let threshold = threshold(&levels, AFTER_LEAST)?;
    let first = from.div_ceil(WINDOW);
    levels
        .iter()
        .rposition(|&level| level >= threshold)
        .filter(|&last| last >= first)
        .map(|last| ((last + 1) * WINDOW).min(audio.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ms` of a square wave at `level` (RMS).
    fn tone(ms: usize, level: f32) -> Vec<f32> {
        (0..ms * 16)
            .map(|i| if i % 2 == 0 { level } else { -level })
            .collect()
    }

    fn join(parts: &[Vec<f32>]) -> Vec<f32> {
        parts.concat()
    }

    #[test]
    fn only_sound_after_the_point_counts() {
        let voice = tone(500, 0.1);
        // Speech, then digital silence (the virtual card's) or a −60 dBFS
        // floor: nothing after the speech.
        for floor in [0.0, 0.001] {
            let audio = join(&[voice.clone(), tone(500, floor)]);
            assert_eq!(sound_after(&audio, 500 * 16), None, "floor {floor}");
            // From inside the speech, its end.
            assert_eq!(
                sound_after(&audio, 200 * 16),
                Some(500 * 16),
                "floor {floor}"
            );
        }
        // A last word 40 dB under the sentence (−60 dBFS) after it, over
        // digital silence: sound, ending where the word does.
        let trailing = join(&[
            voice.clone(),
            tone(100, 0.0),
            tone(300, 0.001),
            tone(400, 0.0),
        ]);
        assert_eq!(sound_after(&trailing, 520 * 16), Some(900 * 16));
        // The same word in a room whose floor is as loud: not told apart.
        let room = join(&[voice.clone(), tone(800, 0.001)]);
        assert_eq!(sound_after(&room, 520 * 16), None);
        // Under −70 dBFS is no sound, even over digital silence.
        let faint = join(&[voice.clone(), tone(100, 0.0), tone(300, 0.000_2)]);
        assert_eq!(sound_after(&faint, 520 * 16), None);
        // The window holding the point belongs to what came before it.
        assert_eq!(sound_after(&voice, 495 * 16), None);
        assert_eq!(sound_after(&[], 0), None);
    }

    #[test]
    fn the_threshold_follows_the_floor_within_bounds() {
        // Over digital silence, the least; over a −40 dBFS floor, 12 dB
        // more; in a room within 20 dB of the loudest, 20 dB under it.
        assert_eq!(threshold(&[0.0, 0.1], ONSET_LEAST), Some(ONSET_LEAST));
        let floor = threshold(&[0.01, 0.5], ONSET_LEAST).unwrap();
        assert!((floor - 0.0398).abs() < 1e-4, "{floor}");
        let room = threshold(&[0.03, 0.1], ONSET_LEAST).unwrap();
        assert!((room - 0.01).abs() < 1e-6, "{room}");
        assert_eq!(threshold(&[], ONSET_LEAST), None);
    }
}
