//! When a decoder's pass is not to be trusted, and what is tried then.
//!
//! Both decoders can fall into a loop ("Six, six, six, six…") or guess
//! words the audio does not hold. whisper's reference decoder (and
//! faster-whisper) judge each pass by two numbers and decode again at a
//! higher temperature (sampling instead of the most likely token) while a
//! pass fails: a transcript that compresses better than 2.4 : 1 repeats
//! itself, and one whose tokens average a log-probability under −1 is a
//! guess. whisper.cpp does the same with the entropy of its last tokens in
//! place of the compression ratio; the whisper engine sets its thresholds
//! from here, and the live engine (Moonshine) follows the same rules
//! ([`Doubt`]) with one more of its own: a pass that ran out of its token
//! budget (more tokens than anyone speaks in that much audio).
//!
//! When every temperature fails too, the least doubtful pass is kept and a
//! loop still at its end is cut ([`loop_cut`]): the words said once are
//! worth more to the agent than the same words fifty times.

use std::io::Write as _;

/// A transcript compressing better than this (bytes in : bytes out, zlib)
/// repeats itself: whisper's `compression_ratio_threshold`.
pub const COMPRESSION_RATIO_MAX: f64 = 2.4;

/// Mean log-probability per token under which a pass is a guess: whisper's
/// `logprob_threshold`.
pub const MEAN_LOG_PROB_MIN: f64 = -1.0;

/// whisper.cpp's stand-in for the compression ratio: a pass whose last
/// tokens' entropy is under this repeats itself (its `entropy_thold`).
pub const WHISPER_ENTROPY_MIN: f32 = 2.4;

/// The temperatures a failed pass is decoded again at, in order: whisper's
/// (0.2 steps up to 1.0).
pub const TEMPERATURES: [f32; 5] = [0.2, 0.4, 0.6, 0.8, 1.0];

/// The shortest repetition [`loop_cut`] looks for: three of a piece.
pub const LOOP_REPEATS: usize = 3;

/// The longest piece, in tokens, a loop repeats.
pub const LOOP_PIECE_MAX: usize = 8;

/// Why a pass is not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doubt {
    /// The pass ran out of its token budget before its end token.
    Runaway,
    /// The transcript compresses better than [`COMPRESSION_RATIO_MAX`].
    Repeats,
    /// Its tokens average a log-probability under [`MEAN_LOG_PROB_MIN`].
    Unlikely,
}

/// What is known of a pass when it is judged.
#[derive(Debug, Clone, Copy)]
pub struct Judged<'a> {
    pub text: &'a str,
    /// Mean log-probability per token (the end token's counted).
    pub mean_log_prob: f64,
    /// The budget ran out first.
    pub truncated: bool,
}

/// The first reason not to trust a pass, or None.
pub fn doubt(pass: Judged<'_>) -> Option<Doubt> {
    if pass.truncated {
        Some(Doubt::Runaway)
    } else if compression_ratio(pass.text) > COMPRESSION_RATIO_MAX {
        Some(Doubt::Repeats)
    } else if pass.mean_log_prob < MEAN_LOG_PROB_MIN {
        Some(Doubt::Unlikely)
    } else {
        None
    }
}

/// `text`'s bytes over its zlib-compressed bytes, as whisper measures it.
/// Short texts come out under 1 (zlib's own header and trailer).
pub fn compression_ratio(text: &str) -> f64 {
    if text.is_empty() {
        return 0.0;
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let packed = z
        .write_all(text.as_bytes())
        .and_then(|()| z.finish())
        .map_or(text.len(), |v| v.len());
    text.len() as f64 / packed.max(1) as f64
}

/// Where to cut a loop at the end of `tokens`: after the first time its
/// piece was said. The loop is found as the earliest index from which the
/// rest is one piece of at most [`LOOP_PIECE_MAX`] tokens repeated at least
/// [`LOOP_REPEATS`] times (the last repeat may be cut short, as a runaway
/// pass ends anywhere); what comes before it, and the piece once, are
/// kept. None when the end does not loop. Callers compare tokens as the
/// words they spell ("Six" and " six" are one word).
pub fn loop_cut<T: PartialEq>(tokens: &[T]) -> Option<usize> {
    let n = tokens.len();
    let mut best: Option<(usize, usize)> = None;
    for piece in 1..=LOOP_PIECE_MAX.min(n / LOOP_REPEATS) {
        // How far back the rest stays periodic with this piece length.
        let mut start = n - piece;
        while start > 0 && tokens[start - 1] == tokens[start - 1 + piece] {
            start -= 1;
        }
        if n - start >= LOOP_REPEATS * piece && best.is_none_or(|(s, _)| start < s) {
            best = Some((start, piece));
        }
    }
    best.map(|(start, piece)| start + piece)
}

/// A small, seeded generator for sampling at a temperature: the same audio
/// transcribes the same way every time (splitmix64).
#[derive(Debug, Clone)]
pub struct Sampler(u64);

impl Sampler {
    /// Every pass of every transcription starts from the same seed.
    pub fn new() -> Self {
        Self(0x9E37_79B9_7F4A_7C15)
    }

    /// A uniform number in [0, 1).
    pub fn next_unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A token drawn from `logits` at `temperature`, and its
    /// log-probability at temperature 1 (what the pass is judged by, as
    /// whisper judges a sampled pass).
    pub fn draw(&mut self, logits: &[f32], temperature: f32) -> Option<(usize, f32)> {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        if !max.is_finite() || logits.iter().any(|v| v.is_nan()) || temperature <= 0.0 {
            return None;
        }
        let t = f64::from(temperature);
        let total: f64 = logits
            .iter()
            .map(|&v| ((f64::from(v) - f64::from(max)) / t).exp())
            .sum();
        let mut left = self.next_unit() * total;
        let mut chosen = logits.len() - 1;
        for (i, &v) in logits.iter().enumerate() {
            left -= ((f64::from(v) - f64::from(max)) / t).exp();
            if left < 0.0 {
                chosen = i;
                break;
            }
        }
        let log_sum = logits
            .iter()
            .map(|&v| (f64::from(v) - f64::from(max)).exp())
            .sum::<f64>()
            .ln()
            + f64::from(max);
        Some((chosen, (f64::from(logits[chosen]) - log_sum) as f32))
    }
}

impl Default for Sampler {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_compresses_and_speech_does_not() {
        let looped = "I am a slave of the slave of the slave of the slave of the slave of the slave of the slave of the slave.";
        assert!(compression_ratio(looped) > COMPRESSION_RATIO_MAX);
        let said = "And Mister John Dashwood had then leisure to consider how much there might be prudently in his power to do for them.";
        assert!(compression_ratio(said) < COMPRESSION_RATIO_MAX);
        assert_eq!(compression_ratio(""), 0.0);
    }

    #[test]
    fn each_rule_alone_raises_its_doubt() {
        let fine = Judged {
            text: "ten of clubs",
            mean_log_prob: -0.2,
            truncated: false,
        };
        assert_eq!(doubt(fine), None);
        assert_eq!(
            doubt(Judged {
                truncated: true,
                ..fine
            }),
            Some(Doubt::Runaway)
        );
        assert_eq!(
            doubt(Judged {
                mean_log_prob: -1.3,
                ..fine
            }),
            Some(Doubt::Unlikely)
        );
        let looped = "the slave of the slave of the slave of the slave of the slave of the slave of the slave of the slave";
        assert_eq!(
            doubt(Judged {
                text: looped,
                ..fine
            }),
            Some(Doubt::Repeats)
        );
    }

    #[test]
    fn a_loop_is_cut_after_its_first_time() {
        // "Six, six, six…": "Six,".
        let six = ["six", ",", "six", ",", "six", ",", "six", ",", "six"];
        assert_eq!(loop_cut(&six), Some(2));
        // Said once before the loop, taken from its earliest start ("slave
        // of the | slave of the"): "I am a slave of the".
        let slave = "i am a slave of the slave of the slave of the slave of the";
        let words: Vec<&str> = slave.split(' ').collect();
        assert_eq!(
            words[..loop_cut(&words).unwrap_or(0)].join(" "),
            "i am a slave of the"
        );
        // A word looping on its last piece: "Forward|ward|ward…".
        let forward = ["Forward", "ward", "ward", "ward", "ward"];
        assert_eq!(loop_cut(&forward), Some(2));
        // A longer piece, the last repeat cut short.
        let tail = ["a", "b", "c", "d", "b", "c", "d", "b", "c", "d", "b"];
        assert_eq!(loop_cut(&tail), Some(4));
    }

    #[test]
    fn twice_is_not_a_loop() {
        assert_eq!(loop_cut(&["five", "five"]), None);
        assert_eq!(loop_cut(&["go", "forward", "ten", "meters"]), None);
        assert_eq!(loop_cut(&["a", "b", "a", "b", "c"]), None);
        assert_eq!(loop_cut::<&str>(&[]), None);
    }

    #[test]
    fn sampling_is_repeatable_and_follows_the_temperature() {
        let logits = [2.0f32, 1.0, 0.0, -1.0];
        let draws = |t: f32| {
            let mut s = Sampler::new();
            (0..2000)
                .map(|_| s.draw(&logits, t).map(|d| d.0))
                .collect::<Option<Vec<_>>>()
        };
        assert_eq!(draws(0.6), draws(0.6));
        let share_best = |t: f32| {
            let d = draws(t).unwrap_or_default();
            d.iter().filter(|&&i| i == 0).count() as f64 / d.len() as f64
        };
        // At 1.0 the best token is drawn about e^2/(e^2+e+1+1/e) = 64 % of
        // the time; cooler draws favour it more.
        let (cool, warm) = (share_best(0.2), share_best(1.0));
        assert!((0.6..0.68).contains(&warm), "{warm}");
        assert!(cool > 0.95, "{cool}");
        // The log-probability is at temperature 1 whatever was drawn.
        let mut s = Sampler::new();
        let (i, lp) = s.draw(&logits, 0.2).unwrap_or((9, 0.0));
        let expected = logits[i] - logits.iter().map(|v| v.exp()).sum::<f32>().ln();
        assert!((lp - expected).abs() < 1e-5);
        assert_eq!(Sampler::new().draw(&[f32::NAN, 1.0], 0.5), None);
        assert_eq!(Sampler::new().draw(&logits, 0.0), None);
    }
}
