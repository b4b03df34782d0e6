//! End of turn, not end of silence: Smart Turn v3.2 (BSD-2, from the PyPI
//! package `pipecat-ai` 1.14.0) says from the last 8 s of speech whether the
//! person has finished, so a pause to think in mid-sentence does not end
//! their turn and a finished sentence need not wait out a long silence.
//!
//! Its input is whisper-style log-mel features of exactly 8 s of 16 kHz
//! audio (shorter audio padded with zeros in front), as its training
//! computed them: the waveform normalised to zero mean and unit variance,
//! a centred short-time Fourier transform (400-point periodic Hann window,
//! hop 160, reflect padding), the power spectrum through 80 Slaney mel
//! filters, `log10` floored at 1e-10, the last frame dropped (800 frames),
//! values clamped to within 8 of the maximum, then `(x + 4) / 4`. Its
//! output is the probability that the turn is complete.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hark_onnx::OnnxRuntime;
use ort::session::Session;
use ort::value::TensorRef;
use realfft::RealFftPlanner;

pub const SAMPLE_RATE: usize = 16_000;
/// Seconds of audio the model looks at: the turn's last 8 s.
pub const WINDOW_SECONDS: usize = 8;
pub const WINDOW: usize = SAMPLE_RATE * WINDOW_SECONDS;
pub const N_FFT: usize = 400;
pub const HOP: usize = 160;
pub const N_MELS: usize = 80;
/// Feature frames: one per hop over the window, the trailing one dropped.
pub const FRAMES: usize = WINDOW / HOP;
/// The model's file in the package.
pub const MODEL: &str = "smart-turn-v3.2-cpu.onnx";

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("cannot read the end-of-turn model {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a usable end-of-turn model: {source}", path.display())]
    Model {
        path: PathBuf,
        #[source]
        source: ort::Error,
    },
    #[error("{} is not Smart Turn: {problem}", path.display())]
    Interface { path: PathBuf, problem: String },
    #[error("the end-of-turn model failed: {0}")]
    Inference(#[from] ort::Error),
    #[error("the end-of-turn model gave no usable probability: {0}")]
    Output(String),
    #[error("the end-of-turn model takes {expected} feature values, not {got}")]
    Input { expected: usize, got: usize },
}

/// The feature extractor: the Hann window, the mel filters and the FFT
/// plan, made once.
pub struct Features {
    window: Vec<f64>,
    /// `N_MELS × (N_FFT / 2 + 1)`, row-major.
    filters: Vec<f32>,
    /// Each band's non-zero bins: a triangle covers a few of the 201, and
    /// the sum over the rest is zeros (the same sum, bit for bit, in a
    /// tenth of the time: this runs on every ask, while the person waits).
    spans: Vec<std::ops::Range<usize>>,
    fft: Arc<dyn realfft::RealToComplex<f64>>,
}

impl Default for Features {
    fn default() -> Self {
        Self::new()
    }
}

impl Features {
    pub fn new() -> Self {
        // Periodic Hann: the symmetric window of N + 1 points, last dropped.
        let window = (0..N_FFT)
            .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / N_FFT as f64).cos())
            .collect();
        let filters = crate::mel::filters(SAMPLE_RATE as u32, N_FFT, N_MELS);
        let bins = N_FFT / 2 + 1;
        let spans = filters
            .chunks(bins)
            .map(|row| {
                let first = row.iter().position(|w| *w != 0.0).unwrap_or(0);
                let end = row.iter().rposition(|w| *w != 0.0).map_or(first, |i| i + 1);
                first..end
            })
            .collect();
        Self {
            window,
            filters,
            spans,
            fft: RealFftPlanner::<f64>::new().plan_fft_forward(N_FFT),
        }
    }

    /// The `N_MELS × FRAMES` features (row-major) of the last 8 s of
    /// `audio`.
    pub fn compute(&self, audio: &[f32]) -> Vec<f32> {
        // The last 8 s; shorter audio is padded with silence in front.
        let mut x = vec![0.0f32; WINDOW];
        let take = audio.len().min(WINDOW);
        x[WINDOW - take..].copy_from_slice(&audio[audio.len() - take..]);
        // Zero mean, unit variance (in f32, as the reference).
        let n = x.len() as f32;
        let mean = x.iter().sum::<f32>() / n;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
        let scale = 1.0 / (var + 1e-7).sqrt();
        for v in &mut x {
            *v = (*v - mean) * scale;
        }
        // Reflect padding of half a window on each side.
        let pad = N_FFT / 2;
        let mut padded = Vec::with_capacity(WINDOW + 2 * pad);
        padded.extend((1..=pad).rev().map(|i| f64::from(x[i])));
        padded.extend(x.iter().map(|v| f64::from(*v)));
        padded.extend((0..pad).map(|i| f64::from(x[WINDOW - 2 - i])));
        let bins = N_FFT / 2 + 1;
        let mut frame = self.fft.make_input_vec();
        let mut spectrum = self.fft.make_output_vec();
        let mut power = vec![0.0f64; bins];
        let mut features = vec![0.0f32; N_MELS * FRAMES];
        for t in 0..FRAMES {
            let start = t * HOP;
            for (i, f) in frame.iter_mut().enumerate() {
                *f = padded[start + i] * self.window[i];
            }
            // A plan of the right size never fails on buffers it made.
            if self.fft.process(&mut frame, &mut spectrum).is_err() {
                continue;
            }
            for (p, c) in power.iter_mut().zip(&spectrum) {
                *p = c.norm_sqr();
            }
            for (m, span) in self.spans.iter().enumerate() {
                let row = &self.filters[m * bins + span.start..m * bins + span.end];
                let energy: f64 = row
                    .iter()
                    .zip(&power[span.clone()])
                    .map(|(w, p)| f64::from(*w) * p)
                    .sum();
                features[m * FRAMES + t] = energy.max(1e-10).log10() as f32;
            }
        }
        let max = features.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for v in &mut features {
            *v = ((*v).max(max - 8.0) + 4.0) / 4.0;
        }
        features
    }
}

/// The end-of-turn model.
pub struct SmartTurn {
    session: Session,
    /// Every ask gives the session's arena back at its end
    /// (`hark_onnx::releasing_run`): kept, it held some 28 MB beside a
    /// voice's while it spoke, for some 7 ms more an ask (docs/benchmarks.md,
    /// the turn: memory).
    release: ort::session::RunOptions,
    features: Features,
    input: String,
    path: PathBuf,
}

impl SmartTurn {
    pub fn load(runtime: &OnnxRuntime, path: &Path) -> Result<Self, TurnError> {
        std::fs::metadata(path).map_err(|source| TurnError::Read {
            path: path.to_owned(),
            source,
        })?;
        let model = |source: ort::Error| TurnError::Model {
            path: path.to_owned(),
            source,
        };
        // All graph optimisations, as the model's own runner sets them: its
        // int8 kernels fuse differently at lower levels (a 0.016 change in
        // the probability, measured).
        let session = Session::builder(runtime.env())
            .map_err(model)?
            .with_optimization_level(ort::session::builder::GraphOptimizationLevel::Level3)
            .map_err(|e| model(e.into()))?
            .with_intra_threads(1)
            .map_err(|e| model(e.into()))?
            .with_intra_op_spinning(false)
            .map_err(|e| model(e.into()))?
            .commit_from_file(path)
            .map_err(model)?;
        let input = session
            .inputs()
            .first()
            .map(|i| i.name().to_owned())
            .ok_or_else(|| TurnError::Interface {
                path: path.to_owned(),
                problem: "it has no input".into(),
            })?;
        if input != "input_features" || session.outputs().is_empty() {
            return Err(TurnError::Interface {
                path: path.to_owned(),
                problem: format!("its input is `{input}`, not `input_features`"),
            });
        }
        Ok(Self {
            session,
            release: hark_onnx::releasing_run().map_err(model)?,
            features: Features::new(),
            input,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The probability (0–1) that the person finished their turn, from
    /// the audio of the turn so far (16 kHz).
    pub fn complete(&mut self, audio: &[f32]) -> Result<f32, TurnError> {
        let features = self.features.compute(audio);
        self.predict(&features)
    }

    /// The probability from features already computed ([`N_MELS`] ×
    /// [`FRAMES`], band by band).
    pub fn predict(&mut self, features: &[f32]) -> Result<f32, TurnError> {
        if features.len() != N_MELS * FRAMES {
            return Err(TurnError::Input {
                expected: N_MELS * FRAMES,
                got: features.len(),
            });
        }
        let outputs = self.session.run_with_options(
            ort::inputs! {
                self.input.as_str() => TensorRef::from_array_view(([1usize, N_MELS, FRAMES], features))?,
            },
            &self.release,
        )?;
        let (_, value) = outputs[0].try_extract_tensor::<f32>()?;
        let p = *value
            .first()
            .ok_or_else(|| TurnError::Output("an empty output".into()))?;
        if !(0.0..=1.0).contains(&p) {
            return Err(TurnError::Output(format!("{p} is not a probability")));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_have_the_models_shape_and_range() {
        let f = Features::new();
        let tone: Vec<f32> = (0..SAMPLE_RATE * 2)
            .map(|i| {
                (i as f32 * 440.0 * 2.0 * std::f32::consts::PI / SAMPLE_RATE as f32).sin() * 0.3
            })
            .collect();
        let x = f.compute(&tone);
        assert_eq!(x.len(), N_MELS * FRAMES);
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let min = x.iter().copied().fold(f32::INFINITY, f32::min);
        // Clamped to 8 below the maximum, then divided by 4: a span of 2.
        assert!(min >= max - 2.0 - 1e-6 && max > min, "{min} … {max}");
        // Padding goes in front: the first frames are the floor, the last
        // carry the tone (440 Hz is about mel band 10).
        assert!(x[10 * FRAMES + FRAMES - 5] > x[10 * FRAMES + 5]);
    }

    #[test]
    fn each_band_sums_every_bin_its_filter_weighs() {
        // The bands sum only over their spans: a weight outside one would
        // be dropped from the features.
        let f = Features::new();
        let bins = N_FFT / 2 + 1;
        for (m, span) in f.spans.iter().enumerate() {
            let row = &f.filters[m * bins..(m + 1) * bins];
            assert!(!span.is_empty(), "band {m} has no bins");
            let outside = row
                .iter()
                .enumerate()
                .filter(|(i, w)| !span.contains(i) && **w != 0.0)
                .count();
            assert_eq!(outside, 0, "band {m}: weights outside {span:?}");
        }
    }
}

/// Words an English sentence does not end on: articles, prepositions,
/// conjunctions, auxiliaries, possessives, fillers. A transcript of the
/// speech so far that ends on one stops in the middle of a sentence,
/// whatever its last punctuation says (the live engine often puts a full
/// stop after "send a message to").
const DANGLING: &[&str] = &[
    "a", "an", "the", "to", "of", "in", "on", "at", "for", "from", "with", "about", "by", "into",
    "onto", "over", "under", "than", "like", "and", "or", "but", "so", "because", "if", "when",
    "that", "which", "who", "whose", "where", "whether", "while", "until", "unless", "although",
    "is", "are", "was", "were", "be", "been", "am", "will", "would", "could", "should", "can",
    "may", "might", "must", "shall", "have", "has", "had", "do", "does", "did", "my", "your",
    "our", "their", "his", "her", "its", "um", "uh", "er", "erm", "hmm",
];

/// Words of [`DANGLING`] a sentence may also end on, read as finished when
/// the live engine closed the sentence right after them: forms of "be" and
/// "do" ("…than he was.", "What are you going to do?"), particles ("Come
/// in.", "It's over."), pronouns ("I told her.", "I think so.", "That's
/// who."). Not the modals: "…that we could." is a thought broken off more
/// often than an answer ("We could."). On the
/// real-speech set, finished readings ("…more respectable than he was.")
/// held the turn open where the person had finished (docs/benchmarks.md,
/// end of turn on real speech).
const ENDS_A_SENTENCE_TOO: &[&str] = &[
    "is", "are", "was", "were", "am", "do", "does", "did", "so", "in", "on", "over", "under", "by",
    "about", "that", "who", "which", "where", "when", "his", "her",
];

/// An opening clause is short: a sentence of more words that begins with
/// an opener ("Unless to be rather cold-hearted and rather selfish is to be
/// ill-disposed.") has said what it began to say.
const OPENING_CLAUSE_WORDS: usize = 8;

/// What the words of the speech up to a pause say of the sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// A finished sentence.
    Finished,
    /// Perhaps more to come: the text ends on a comma, semicolon, colon,
    /// dash or ellipsis, or its last sentence is only an opening clause
    /// ("When you have a moment."). Punctuation is the engine's guess from
    /// how the voice went (it heard "Turn on the lights" cut 100 ms after
    /// the last word as "Turn on the lights,"), and an opening clause can
    /// be a whole answer ("After lunch."): no reason to end the turn
    /// early, none to hold it open either.
    Open,
    /// Stopped in the middle: the last word is one no sentence ends on
    /// ([`DANGLING`]).
    Midway,
}

/// Reads English text as [`Reading`]. Empty text says nothing either way
/// ([`Reading::Finished`]: the model and the silence decide).
pub fn read(text: &str) -> Reading {
    let text = text.trim_end_matches(|c: char| c.is_whitespace() || c == '"' || c == '\'');
    if !text.chars().any(char::is_alphanumeric) {
        return Reading::Finished;
    }
    let last = text
        .trim_end_matches(|c: char| !c.is_alphanumeric())
        .rsplit(|c: char| !c.is_alphanumeric() && c != '\'')
        .next()
        .unwrap_or_default()
        .to_lowercase();
    // An auxiliary, a particle or an object pronoun closed by a full stop,
    // question or exclamation mark ends a sentence as often as not ("…than
    // he was.", "I think so.", "Come in.", "I told her."); without one, or
    // trailing off ("is…"), it is left midway.
    let closed = text.ends_with(['.', '!', '?'])
        && !text.ends_with("..")
        && text[..text.len() - 1].ends_with(char::is_alphanumeric);
    if DANGLING.contains(&last.as_str())
        && !(closed && ENDS_A_SENTENCE_TOO.contains(&last.as_str()))
    {
        Reading::Midway
    } else if text.ends_with([',', ':', ';', '-', '—', '–'])
        || text.ends_with("...")
        || text.ends_with('…')
        || opens_a_clause(text)
    {
        Reading::Open
    } else {
        Reading::Finished
    }
}

/// Words that open a clause a sentence goes on from ("When you have a
/// moment, …", "If it rains tomorrow, …", "After the meeting, …").
const OPENERS: &[&str] = &[
    "when", "whenever", "if", "unless", "before", "after", "because", "since", "although",
    "though", "while", "until", "once",
];

/// Whether the last sentence of English text is only an opening clause
/// so far: it begins with one of [`OPENERS`], has no comma after which
/// the rest could have begun, and is no question ("When is it?"). Spoken
/// with a pause where the comma goes, such words read as finished to the
/// end-of-turn model.
fn opens_a_clause(text: &str) -> bool {
    let text = text.trim().trim_matches(|c: char| c == '"' || c == '\'');
    let body = text.trim_end_matches(['.', '!', '?', '"', '\'']);
    // The last sentence: after the last full stop, question or exclamation
    // mark inside the text.
    let sentence = body
        .rfind(['.', '!', '?'])
        .map_or(body, |i| &body[i + 1..])
        .trim();
    let first = sentence
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .find(|w| !w.is_empty())
        .unwrap_or_default()
        .to_lowercase();
    OPENERS.contains(&first.as_str())
        && !sentence.contains(',')
        && !text.ends_with('?')
        && word_count(sentence) <= OPENING_CLAUSE_WORDS
}

/// Whether a second transcription of the speech up to a pause heard
/// further than the first (more words), rather than reading the same words
/// again: only then may it overrule the first's "stopped midway", since a
/// second reading of the same speech can differ in its last word alone
/// ("Send a message to" then "Send a message, too.").
pub fn heard_further(before: &str, now: &str) -> bool {
    word_count(now) > word_count(before)
}

/// How many words `text` has (runs of letters, digits and apostrophes).
fn word_count(text: &str) -> usize {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count()
}

#[cfg(test)]
mod text_tests {
    use super::{Reading, heard_further, opens_a_clause, read, word_count};

    #[test]
    fn an_opening_clause_is_told_from_a_sentence() {
        for open in [
            "When you have a moment.",
            "If it rains tomorrow.",
            "Before you book anything.",
            "After the meeting.",
            "Thanks. If you can.",
            "\"Because I said so.\"",
        ] {
            assert!(opens_a_clause(open), "{open}");
        }
        for sentence in [
            "When is the meeting?",
            "If it rains tomorrow, move the picnic to Sunday.",
            "Turn on the lights.",
            "When you have a moment, could you look through the notes?",
            "After the meeting. Send the notes to everyone.",
            "Send it when you can.",
            "",
        ] {
            assert!(!opens_a_clause(sentence), "{sentence}");
        }
    }

    #[test]
    fn words_are_counted_without_punctuation() {
        assert_eq!(word_count("Turn on the"), 3);
        assert_eq!(word_count("Turn on the lights."), 4);
        assert_eq!(word_count("Turn on the, uh... lights!"), 5);
        assert_eq!(word_count("I'm late - sorry"), 3);
        assert_eq!(word_count(" ... "), 0);
    }

    #[test]
    fn a_second_reading_counts_only_when_it_heard_more_words() {
        assert!(heard_further("Turn on the", "Turn on the lights."));
        // Read midway, then finished, on the same speech: not further.
        let (first, second) = ("Send a message to", "Send a message, too.");
        assert_eq!(
            (read(first), read(second)),
            (Reading::Midway, Reading::Finished)
        );
        assert!(!heard_further(first, second));
        assert!(!heard_further("Turn on the lights.", "Turn on the light"));
    }

    #[test]
    fn sentences_stopped_midway_are_told_from_open_and_finished_ones() {
        for midway in [
            "Send a message to.",
            "I need to buy some milk and.",
            "The thing I wanted to ask you about is,",
            "Can you find the email from?",
            "Well, um",
            "It was - ",
            "\"The report is in my\"",
            // A question ending on its preposition reads as midway too:
            // the cost is a longer wait, never a cut.
            "Who is it for",
            // An auxiliary with no full stop after it, or trailing off; a
            // modal even with one.
            "The report is",
            "I think it was...",
            "He said that",
            "So I was thinking that we could.",
        ] {
            assert_eq!(read(midway), Reading::Midway, "{midway}");
        }
        for open in [
            "So I was thinking that we could, you know,",
            "Find the cheapest flight to Lisbon next weekend,",
            "Turn on the lights,",
            "and then…",
            "The list:",
            "When you have a moment.",
        ] {
            assert_eq!(read(open), Reading::Open, "{open}");
        }
        for finished in [
            "Turn on the lights.",
            "What time is it in Tokyo?",
            "Book a table for two.",
            "Send it to Anna and David.",
            "",
            "...",
            "He might have been made still more respectable than he was.",
            "Come in.",
            "I told her.",
            "I think so!",
            "Is it ready? I hope it is.",
            // Too long for an opening clause: it said what it began to.
            "Unless to be rather cold-hearted and rather selfish is to be ill-disposed.",
        ] {
            assert_eq!(read(finished), Reading::Finished, "{finished}");
        }
    }
}
