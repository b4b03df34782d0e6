//! Moonshine (English, MIT): an encoder–decoder speech recogniser whose
//! cost grows with the length of the audio, not a fixed 30 s window, run on
//! ONNX Runtime (`hark-onnx`). Hark's live engine for the microphone.
//!
//! The model is three files (the PyPI package `moonshine-voice` 0.1.0 ships
//! tiny-en): `encoder_model.ort` (raw 16 kHz samples in, hidden states
//! out), `decoder_model_merged.ort` (one decoder for the first step and the
//! cached ones, chosen by `use_cache_branch`) and `tokenizer.bin`. Greedy
//! decoding from the start token 1 to the end token 2, with the decoder's
//! key/value cache carried between steps, and a token budget per second of
//! audio so a confused model cannot run on. A greedy pass that had to guess
//! at a token is decoded again by a beam search ([`BEAMS`] hypotheses side
//! by side in one batch), as whisper decodes again when unsure; a pass
//! still in doubt (a loop, a guess) falls back to warmer ones as whisper's
//! does ([`crate::fallback`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hark_onnx::OnnxRuntime;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::{Tensor, TensorRef};

use crate::{fallback, level};

// The model store checks a Moonshine directory for the same files.
pub const ENCODER: &str = hark_models::kind::MOONSHINE_FILES[0];
pub const DECODER: &str = hark_models::kind::MOONSHINE_FILES[1];
pub const TOKENIZER: &str = hark_models::kind::MOONSHINE_FILES[2];

/// The decoder's start and end tokens.
pub const START: i64 = 1;
pub const END: i64 = 2;

/// Audio the model takes, in samples per second.
pub const SAMPLE_RATE: usize = 16_000;

/// Longest audio it is given: past this, whisper (which splits into 30 s
/// windows) does better. Callers hand longer audio elsewhere.
pub const MAX_SECONDS: f64 = 30.0;

/// Tokens allowed per second of audio (speech is about three), and a floor
/// for very short clips.
pub const TOKENS_PER_SECOND: f64 = 6.5;
pub const MIN_TOKENS: usize = 12;

/// A greedy pass whose least likely chosen token is below this probability
/// is decoded again by a beam search. Greedy decoding commits to a first
/// piece it cannot take back ("Can you rem|et the last message" for "read
/// me": 0.19 and 0.27 at the guess, on two of three takes of the turn
/// bench's clip 4; the search heard "read me" in both). On the bench's 45
/// clips of one run 3 greedy passes fell below 0.35 and the other 42 did
/// not (0.36–0.97), so the search's time is spent on few turns
/// (docs/benchmarks.md, the turn).
pub const UNSURE_BELOW: f32 = 0.35;

/// Hypotheses a beam search keeps. Four decoder rows in one batch take
/// about twice one row's time a step on tiny-en.
pub const BEAMS: usize = 4;

/// Quiet kept before the first sound of a clip: none. Moonshine tiny-en
/// misreads first words after quiet (the listen path keeps 250 ms before
/// the detector's start, which whisper wants): "Purn on the lights",
/// "to-morrow", "It's in the message too" for "Send a message to". On the
/// turn bench's 42 takes (24 utterances, 18 with a pause; 576 words) after
/// 200 ms of digital silence, it made 4 word errors from the first sound,
/// 22 with 20 ms of the silence kept, 39 with 100 ms and 15 with 220 ms;
/// under a −60 dBFS noise floor, 10 from the first sound and 12 with 20 ms.
pub const QUIET_KEPT_MS: usize = 0;

/// Where the first sound of `audio` begins, less [`QUIET_KEPT_MS`]: the
/// first 10 ms window 12 dB above the quietest one and above −50 dBFS
/// (but never more than 20 dB below the loudest, so a loud room's floor
/// cannot hide speech; [`level::threshold`]). 0 when no window stands out
/// (silence, or a noisy room whose floor is within 20 dB of the loudest
/// window: nothing is cut then). At least [`MIN_KEPT`] is left (a click at
/// the end of silence is no reason to give the encoder a few samples).
pub fn onset(audio: &[f32]) -> usize {
    let levels = level::levels(audio);
    let Some(threshold) = level::threshold(&levels, level::ONSET_LEAST) else {
        return 0;
    };
    levels
        .iter()
        .position(|&level| level >= threshold)
        .map_or(0, |first| {
            (first * level::WINDOW)
                .saturating_sub(QUIET_KEPT_MS * SAMPLE_RATE / 1000)
                .min(audio.len().saturating_sub(MIN_KEPT))
        })
}

/// The least audio [`onset`] leaves: a quarter second.
const MIN_KEPT: usize = SAMPLE_RATE / 4;

/// The space marker of the tokenizer's pieces ("▁").
const SPACE: &str = "\u{2581}";

#[derive(Debug, thiserror::Error)]
pub enum MoonshineError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a Moonshine tokenizer: {problem}", path.display())]
    Tokenizer { path: PathBuf, problem: String },
    #[error("{} is not a usable Moonshine model: {source}", path.display())]
    Model {
        path: PathBuf,
        #[source]
        source: ort::Error,
    },
    #[error("{} does not have Moonshine's {what}: {problem}", path.display())]
    Interface {
        path: PathBuf,
        what: &'static str,
        problem: String,
    },
    #[error(
        "the tokenizer has {tokens} tokens but the decoder predicts {vocabulary}: they are not from the same model"
    )]
    Mismatch { tokens: usize, vocabulary: usize },
    #[error("no audio to transcribe")]
    Empty,
    #[error("transcription was cancelled")]
    Cancelled,
    #[error("{seconds:.1} s of audio is more than the live engine takes ({MAX_SECONDS} s)")]
    TooLong { seconds: f64 },
    #[error("Moonshine failed: {0}")]
    Inference(#[from] ort::Error),
    #[error("Moonshine produced unusable output: {0}")]
    Output(String),
}

/// Token ids to text: one byte string per id.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    pieces: Vec<Vec<u8>>,
}

impl Tokenizer {
    /// Parses `tokenizer.bin`: for each id in order, its length (one byte;
    /// from 128 up, two bytes: `(b0 - 128) + 128 * b1`), then its bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let first = usize::from(bytes[at]);
            at += 1;
            let len = if first >= 128 {
                let second = *bytes
                    .get(at)
                    .ok_or_else(|| format!("token {} ends inside its length", pieces.len()))?;
                at += 1;
                (first - 128) + 128 * usize::from(second)
            } else {
                first
            };
            let piece = bytes.get(at..at + len).ok_or_else(|| {
                format!(
                    "token {} says it has {len} bytes, but only {} are left",
                    pieces.len(),
                    bytes.len() - at
                )
            })?;
            pieces.push(piece.to_vec());
            at += len;
        }
        if pieces.len() <= END as usize {
            return Err(format!("only {} tokens", pieces.len()));
        }
        Ok(Self { pieces })
    }

    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The text of `ids` (special tokens and unknown ids left out).
    pub fn decode(&self, ids: &[i64]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            if id <= END {
                continue;
            }
            if let Some(piece) = usize::try_from(id).ok().and_then(|i| self.pieces.get(i)) {
                bytes.extend_from_slice(piece);
            }
        }
        String::from_utf8_lossy(&bytes)
            .replace(SPACE, " ")
            .trim()
            .to_owned()
    }
}

/// One transcription.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveTranscript {
    pub text: String,
    pub tokens: Vec<i64>,
    /// Mean probability of the chosen tokens (0–1).
    pub confidence: f32,
    /// The token budget ran out before the end token.
    pub truncated: bool,
    /// The greedy pass was unsure and the beam search's transcript is kept
    /// ([`UNSURE_BELOW`]).
    pub searched: bool,
    /// The temperature of the pass kept: above 0 when the first was in
    /// doubt ([`fallback`]).
    pub temperature: f32,
    /// A loop at the transcript's end was cut ([`fallback::loop_cut`]).
    pub looped: bool,
    /// Why the pass kept is still not trusted, after every temperature (a
    /// draft's: its greedy pass's), or None.
    pub doubt: Option<fallback::Doubt>,
    /// Seconds of quiet at the clip's start the model was not given
    /// ([`onset`]).
    pub skipped: f64,
    pub encoder_ms: f64,
    pub decoder_ms: f64,
}

impl LiveTranscript {
    /// This piece's transcript followed by the next's.
    fn then(self, next: LiveTranscript) -> LiveTranscript {
        let (a, b) = (self.tokens.len() as f32, next.tokens.len() as f32);
        let text = match (self.text.is_empty(), next.text.is_empty()) {
            (_, true) => self.text,
            (true, false) => next.text,
            (false, false) => format!("{} {}", self.text, next.text),
        };
        LiveTranscript {
            text,
            confidence: if a + b == 0.0 {
                0.0
            } else {
                (self.confidence * a + next.confidence * b) / (a + b)
            },
            tokens: [self.tokens, next.tokens].concat(),
            truncated: self.truncated || next.truncated,
            searched: self.searched || next.searched,
            temperature: self.temperature.max(next.temperature),
            looped: self.looped || next.looped,
            doubt: self.doubt.or(next.doubt),
            skipped: self.skipped,
            encoder_ms: self.encoder_ms + next.encoder_ms,
            decoder_ms: self.decoder_ms + next.decoder_ms,
        }
    }
}

/// Longest piece of a turn the model hears in one pass, in samples; a
/// longer turn is split at its quietest moments ([`pieces`]) and the
/// pieces' words joined. Moonshine tiny-en reads long stretches worse and
/// slower (its attention grows with the square of the length): on the
/// real-speech set (docs/benchmarks.md, word errors) the 25 s monologues
/// in one pass missed 24.6 % of their words and the podcast's turns 24.4 %,
/// in pieces of at most 10 s 21.9 % and 17.9 %, no subset worse, and the
/// slowest tenth of clips took 485 ms instead of 663. Pieces of 15 s
/// gained nothing; of 7 s, no more than 10 s.
pub const PIECE: usize = 10 * SAMPLE_RATE;

/// The quiet a split looks for: the quietest run of this many 10 ms
/// windows (200 ms, a pause between words or a breath).
const SPLIT_RUN: usize = 20;

/// Where a turn is split for the model: pieces of at most [`PIECE`]
/// samples, each cut in the middle of the quietest [`SPLIT_RUN`] windows
/// of the second half of its span (never shorter than half a piece, so a
/// quiet start does not make slivers). Audio up to [`PIECE`] is one piece.
pub fn pieces(audio: &[f32]) -> Vec<std::ops::Range<usize>> {
    // Most turns are one piece: no levels to read.
    if audio.len() <= PIECE {
        return std::iter::once(0..audio.len()).collect();
    }
    let levels = level::levels(audio);
    let mut out = Vec::new();
    let mut start = 0;
    while audio.len() - start > PIECE {
        // Windows whose run of SPLIT_RUN lies inside [start + PIECE/2, start + PIECE].
        let first = (start + PIECE / 2).div_ceil(level::WINDOW);
        let last = (start + PIECE) / level::WINDOW - SPLIT_RUN;
        let quietest = (first..=last)
            .map(|w| {
                let energy: f32 = levels[w..w + SPLIT_RUN].iter().map(|l| l * l).sum();
                (w, energy)
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(first, |(w, _)| w);
        let cut = (quietest + SPLIT_RUN / 2) * level::WINDOW;
        out.push(start..cut);
        start = cut;
    }
    out.push(start..audio.len());
    out
}

/// A loaded Moonshine model.
pub struct Moonshine {
    encoder: Session,
    decoder: Session,
    /// Runs that give their session's arena back at their end
    /// (`hark_onnx::releasing_run`): the encoder's, whose buffers grow with
    /// the clip, and the decoder's first step, which computes the
    /// encoder's part of the cache (its largest). Kept, the two arenas held
    /// some 50 MB beside a voice's while it spoke; later decoder steps keep
    /// theirs, as giving them back at every token cost more time than it
    /// saved memory (docs/benchmarks.md, the turn: memory).
    release: ort::session::RunOptions,
    tokenizer: Tokenizer,
    /// The decoder's cache inputs (`past_key_values.N.{decoder,encoder}.{key,value}`).
    past: Vec<String>,
    heads: usize,
    head_dim: usize,
    /// Whether the encoder and the decoder take the audio's attention mask
    /// (tiny-en's export does; base-en's has none: all audio counts).
    encoder_mask: bool,
    decoder_mask: bool,
    dir: PathBuf,
}

impl std::fmt::Debug for Moonshine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Moonshine").field("dir", &self.dir).finish()
    }
}

fn session(runtime: &OnnxRuntime, path: &Path, threads: usize) -> Result<Session, MoonshineError> {
    let model = |source: ort::Error| MoonshineError::Model {
        path: path.to_owned(),
        source,
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => {
            return Err(MoonshineError::Read {
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            });
        }
        Err(source) => {
            return Err(MoonshineError::Read {
                path: path.to_owned(),
                source,
            });
        }
    }
    Session::builder(runtime.env())
        .map_err(model)?
        .with_intra_threads(threads)
        .map_err(|e| model(e.into()))?
        .with_intra_op_spinning(false)
        .map_err(|e| model(e.into()))?
        .with_optimization_level(GraphOptimizationLevel::Level3)
        .map_err(|e| model(e.into()))?
        .commit_from_file(path)
        .map_err(model)
}

impl Moonshine {
    /// Loads the model in `dir` on `runtime`, `threads` per session.
    pub fn load(runtime: &OnnxRuntime, dir: &Path, threads: usize) -> Result<Self, MoonshineError> {
        let started = Instant::now();
        let tokenizer_path = dir.join(TOKENIZER);
        let bytes = std::fs::read(&tokenizer_path).map_err(|source| MoonshineError::Read {
            path: tokenizer_path.clone(),
            source,
        })?;
        let tokenizer = Tokenizer::parse(&bytes).map_err(|problem| MoonshineError::Tokenizer {
            path: tokenizer_path,
            problem,
        })?;
        let encoder_path = dir.join(ENCODER);
        let decoder_path = dir.join(DECODER);
        let encoder = session(runtime, &encoder_path, threads)?;
        let decoder = session(runtime, &decoder_path, threads)?;
        let interface = |path: &Path, what, problem: String| MoonshineError::Interface {
            path: path.to_owned(),
            what,
            problem,
        };
        let names = |s: &Session| {
            s.inputs()
                .iter()
                .map(|i| i.name().to_owned())
                .collect::<Vec<_>>()
        };
        let encoder_inputs = names(&encoder);
        if !encoder_inputs.iter().any(|n| n == "input_values") {
            return Err(interface(
                &encoder_path,
                "encoder inputs",
                format!("no input `input_values` (it has {encoder_inputs:?})"),
            ));
        }
        let encoder_mask = encoder_inputs.iter().any(|n| n == "attention_mask");
        let decoder_inputs = names(&decoder);
        let decoder_mask = decoder_inputs.iter().any(|n| n == "encoder_attention_mask");
        for want in ["input_ids", "encoder_hidden_states", "use_cache_branch"] {
            if !decoder_inputs.iter().any(|n| n == want) {
                return Err(interface(
                    &decoder_path,
                    "decoder inputs",
                    format!("no input `{want}`"),
                ));
            }
        }
        let past: Vec<String> = decoder_inputs
            .into_iter()
            .filter(|n| n.starts_with("past_key_values."))
            .collect();
        if past.is_empty() || !past.len().is_multiple_of(4) {
            return Err(interface(
                &decoder_path,
                "key/value cache",
                format!("{} cache inputs", past.len()),
            ));
        }
        // [batch, heads, sequence, head_dim], from the first cache input.
        let (heads, head_dim) = decoder
            .inputs()
            .iter()
            .find(|i| i.name() == past[0])
            .and_then(|i| match i.dtype() {
                ort::value::ValueType::Tensor { shape, .. } if shape.len() == 4 => Some((
                    usize::try_from(shape[1]).ok()?,
                    usize::try_from(shape[3]).ok()?,
                )),
                _ => None,
            })
            .ok_or_else(|| {
                interface(
                    &decoder_path,
                    "key/value cache",
                    "its cache has no fixed heads and head size".into(),
                )
            })?;
        let vocabulary = decoder
            .outputs()
            .iter()
            .find(|o| o.name() == "logits")
            .and_then(|o| match o.dtype() {
                ort::value::ValueType::Tensor { shape, .. } => {
                    shape.last().and_then(|v| usize::try_from(*v).ok())
                }
                _ => None,
            })
            .ok_or_else(|| {
                interface(
                    &decoder_path,
                    "outputs",
                    "no `logits` with a fixed vocabulary".into(),
                )
            })?;
        // The decoder's vocabulary may be padded past the tokenizer's last
        // token to a multiple of 1024 (base-en: 32000 tokens, 32768
        // logits); anything else is a tokenizer from another model.
        if tokenizer.len() > vocabulary || vocabulary - tokenizer.len() >= 1024 {
            return Err(MoonshineError::Mismatch {
                tokens: tokenizer.len(),
                vocabulary,
            });
        }
        tracing::info!(model = %dir.display(), ms = started.elapsed().as_millis() as u64, "Moonshine loaded");
        Ok(Self {
            encoder,
            decoder,
            release: hark_onnx::releasing_run().map_err(|source| MoonshineError::Model {
                path: dir.to_owned(),
                source,
            })?,
            tokenizer,
            past,
            heads,
            head_dim,
            encoder_mask,
            decoder_mask,
            dir: dir.to_owned(),
        })
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Transcribes `audio` (mono, 16 kHz, −1…1).
    pub fn transcribe(&mut self, audio: &[f32]) -> Result<LiveTranscript, MoonshineError> {
        self.transcribe_until(audio, &AtomicBool::new(false), true)
    }

    /// [`Self::transcribe`], abandoned between decoder steps once `cancel`
    /// is set; without `search`, the greedy pass is kept however unsure (a
    /// draft).
    pub fn transcribe_until(
        &mut self,
        audio: &[f32],
        cancel: &AtomicBool,
        search: bool,
    ) -> Result<LiveTranscript, MoonshineError> {
        if audio.is_empty() {
            return Err(MoonshineError::Empty);
        }
        let seconds = audio.len() as f64 / SAMPLE_RATE as f64;
        if seconds > MAX_SECONDS {
            return Err(MoonshineError::TooLong { seconds });
        }
        // A turn over 10 s is heard in pieces ([`PIECE`]); only the first
        // piece's quiet before the voice counts as skipped.
        let mut whole: Option<LiveTranscript> = None;
        for range in pieces(audio) {
            let piece = self.transcribe_piece(&audio[range], cancel, search)?;
            whole = Some(match whole {
                None => piece,
                Some(before) => before.then(piece),
            });
        }
        whole.ok_or(MoonshineError::Empty)
    }

    /// One piece of a turn ([`pieces`]) through the encoder and decoder.
    fn transcribe_piece(
        &mut self,
        audio: &[f32],
        cancel: &AtomicBool,
        search: bool,
    ) -> Result<LiveTranscript, MoonshineError> {
        let seconds = audio.len() as f64 / SAMPLE_RATE as f64;
        let started = Instant::now();
        let skip = onset(audio);
        let audio = &audio[skip..];
        let samples = audio.len();
        let mask = vec![1i64; samples];
        let (hidden_shape, hidden) = {
            let mut inputs = ort::inputs! {
                "input_values" => TensorRef::from_array_view(([1usize, samples], audio))?,
            };
            if self.encoder_mask {
                inputs.push((
                    "attention_mask".into(),
                    TensorRef::from_array_view(([1usize, samples], &mask[..]))?.into(),
                ));
            }
            let outputs = self.encoder.run_with_options(inputs, &self.release)?;
            let (shape, data) = outputs
                .get("last_hidden_state")
                .ok_or_else(|| {
                    MoonshineError::Output("the encoder gave no last_hidden_state".into())
                })?
                .try_extract_tensor::<f32>()?;
            (
                shape.iter().map(|d| *d as usize).collect::<Vec<_>>(),
                data.to_vec(),
            )
        };
        if hidden_shape.len() != 3 || hidden_shape[1] == 0 {
            return Err(MoonshineError::Output(format!(
                "encoder output shaped {hidden_shape:?}"
            )));
        }
        let encoder_ms = started.elapsed().as_secs_f64() * 1000.0;
        let decode_started = Instant::now();
        let budget = ((seconds * TOKENS_PER_SECOND).ceil() as usize).max(MIN_TOKENS);
        let hidden = (hidden_shape.as_slice(), hidden.as_slice());
        let mut kept = self.pass(hidden, (samples, &mask), budget, cancel, None)?;
        // Unsure somewhere: search. A runaway pass is left to the fallback
        // below (the search would have the same budget).
        let mut searched = false;
        if search
            && !kept.truncated
            && kept.least < UNSURE_BELOW
            && kept.tokens.len() > 1
            && let Some(found) = self.search(hidden, samples, budget, cancel)?
        {
            tracing::debug!(
                greedy = %self.tokenizer.decode(&kept.tokens),
                searched = %self.tokenizer.decode(&found.tokens),
                least = kept.least,
                "an unsure greedy pass decoded again by a beam search"
            );
            kept = Pass {
                least: kept.least,
                ..found
            };
            searched = true;
        }
        // Still in doubt (a loop, a guess): whisper's temperature fallback.
        // Drafts are read for their words while the person speaks and are
        // not worth the time; a loop at their end is still cut below.
        let mut temperature = 0.0;
        if search && let Some(first) = self.doubt(&kept) {
            let mut sampler = fallback::Sampler::new();
            let mut tried = vec![kept];
            let mut settled = None;
            for t in fallback::TEMPERATURES {
                let pass = self.pass(
                    hidden,
                    (samples, &mask),
                    budget,
                    cancel,
                    Some((t, &mut sampler)),
                )?;
                if self.doubt(&pass).is_none() {
                    settled = Some((t, pass));
                    break;
                }
                tried.push(pass);
            }
            let (t, pass) = settled.unwrap_or_else(|| least_doubtful(tried));
            tracing::debug!(
                doubt = ?first,
                temperature = t,
                kept = %self.tokenizer.decode(&pass.tokens),
                "a doubtful pass decoded again at higher temperatures"
            );
            temperature = t;
            kept = pass;
        }
        let doubt = self.doubt(&kept);
        let mut looped = false;
        if kept.truncated {
            // Mostly the partial passes, on speech cut off mid-word; the
            // listen path warns when a turn's own transcript is cut.
            tracing::debug!(
                tokens = kept.tokens.len() - 1,
                seconds,
                "Moonshine ran out of its token budget; the transcript is cut"
            );
            let words: Vec<String> = kept.tokens[1..]
                .iter()
                .map(|&t| self.tokenizer.decode(&[t]).to_lowercase())
                .collect();
            if let Some(at) = fallback::loop_cut(&words) {
                kept.tokens.truncate(at + 1);
                kept.probs.truncate(at);
                looped = true;
            }
        }
        let produced = kept.tokens.len() - 1;
        let mut text = self.tokenizer.decode(&kept.tokens);
        if looped {
            // "Six, six, six" cut to "Six,": the comma led into the loop.
            text = text
                .trim_end_matches(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .to_owned();
        }
        Ok(LiveTranscript {
            text,
            confidence: if produced == 0 {
                0.0
            } else {
                (kept.probs.iter().map(|&p| f64::from(p)).sum::<f64>() / produced as f64) as f32
            },
            tokens: kept.tokens[1..].to_vec(),
            truncated: kept.truncated,
            searched,
            temperature,
            looped,
            doubt,
            skipped: skip as f64 / SAMPLE_RATE as f64,
            encoder_ms,
            decoder_ms: decode_started.elapsed().as_secs_f64() * 1000.0,
        })
    }

    /// Why `pass` is not trusted ([`fallback::doubt`]), or None.
    fn doubt(&self, pass: &Pass) -> Option<fallback::Doubt> {
        fallback::doubt(fallback::Judged {
            text: &self.tokenizer.decode(&pass.tokens),
            mean_log_prob: pass.mean_log_prob(),
            truncated: pass.truncated,
        })
    }

    /// One pass of the decoder from the start token, the cache carried
    /// between steps, until the end token or `budget` tokens: the most
    /// likely token each step, or with `sampling` one drawn at its
    /// temperature.
    fn pass(
        &mut self,
        hidden: (&[usize], &[f32]),
        mask: (usize, &[i64]),
        budget: usize,
        cancel: &AtomicBool,
        mut sampling: Option<(f32, &mut fallback::Sampler)>,
    ) -> Result<Pass, MoonshineError> {
        let mut pass = Pass {
            tokens: vec![START],
            probs: Vec::new(),
            log_probability: 0.0,
            least: 1.0,
            truncated: true,
        };
        // The cache: none before the first step; the encoder's part is
        // made by the first step and carried on, the decoder's grows.
        let mut cache = None;
        for _ in 0..budget {
            if cancel.load(Ordering::Relaxed) {
                return Err(MoonshineError::Cancelled);
            }
            let last = [*pass.tokens.last().unwrap_or(&START)];
            let step = self.step(&last, hidden, mask, cache.take())?;
            let (token, log_p) = match sampling.as_mut() {
                None => top_log_probabilities(&step.logits, 1)?
                    .first()
                    .copied()
                    .ok_or_else(|| MoonshineError::Output("no logits".into()))?,
                Some((t, sampler)) => sampler
                    .draw(&step.logits, *t)
                    .map(|(i, lp)| (i as i64, lp))
                    .ok_or_else(|| MoonshineError::Output("the logits are not finite".into()))?,
            };
            cache = Some(step.present);
            let p = log_p.exp();
            pass.least = pass.least.min(p);
            pass.log_probability += f64::from(log_p);
            if token == END {
                pass.truncated = false;
                break;
            }
            pass.probs.push(p);
            pass.tokens.push(token);
        }
        Ok(pass)
    }
}

/// Of passes that all failed, the one to keep: one that ended before one
/// that ran out, then the likeliest per token; and the temperature it was
/// decoded at (the first pass's is 0).
fn least_doubtful(tried: Vec<Pass>) -> (f32, Pass) {
    let temperatures = std::iter::once(0.0).chain(fallback::TEMPERATURES);
    tried
        .into_iter()
        .zip(temperatures)
        .map(|(pass, t)| (t, pass))
        .max_by(|(_, a), (_, b)| {
            (!a.truncated)
                .cmp(&!b.truncated)
                .then(a.mean_log_prob().total_cmp(&b.mean_log_prob()))
        })
        .unwrap_or_else(|| {
            (
                0.0,
                Pass {
                    tokens: vec![START],
                    probs: Vec::new(),
                    log_probability: 0.0,
                    least: 0.0,
                    truncated: true,
                },
            )
        })
}

/// A decoder pass: its tokens (the start token first, no end token), their
/// probabilities (one a token after the start; the end token's is no
/// word's), the sum of their log-probabilities (the end token's in), the
/// least likely token's probability, and whether the budget ran out first.
#[derive(Debug, Clone, PartialEq)]
struct Pass {
    tokens: Vec<i64>,
    probs: Vec<f32>,
    log_probability: f64,
    least: f32,
    truncated: bool,
}

impl Pass {
    /// Mean log-probability per token, the end token's counted.
    fn mean_log_prob(&self) -> f64 {
        let n = self.tokens.len() - 1 + usize::from(!self.truncated);
        self.log_probability / n.max(1) as f64
    }
}

impl Moonshine {
    /// One decoder step for `ids.len()` rows (`[rows, 1]` tokens) over the
    /// encoder's `hidden` states and the audio's `mask` (samples a row,
    /// and at least `rows` rows of each): the vocabulary, the logits
    /// (`[rows, vocabulary]`) and the cache the step made, in
    /// `self.past`'s order. `cache` None: the first step.
    fn step(
        &mut self,
        ids: &[i64],
        hidden: (&[usize], &[f32]),
        mask: (usize, &[i64]),
        cache: Option<Vec<Cache>>,
    ) -> Result<Step, MoonshineError> {
        let rows = ids.len();
        let frames = hidden.0[1..].iter().product::<usize>();
        let (samples, mask) = mask;
        let mut hidden_shape = hidden.0.to_vec();
        hidden_shape[0] = rows;
        let mut inputs = ort::inputs! {
            "input_ids" => TensorRef::from_array_view(([rows, 1usize], ids))?,
            "encoder_hidden_states" => TensorRef::from_array_view((hidden_shape, &hidden.1[..rows * frames]))?,
            "use_cache_branch" => Tensor::from_array(([1usize], vec![cache.is_some()]))?,
        };
        if self.decoder_mask {
            inputs.push((
                "encoder_attention_mask".into(),
                TensorRef::from_array_view(([rows, samples], &mask[..rows * samples]))?.into(),
            ));
        }
        let first = cache.is_none();
        for (i, name) in self.past.iter().enumerate() {
            let (shape, data) = match &cache {
                Some(cache) => (cache[i].0.clone(), &cache[i].1[..]),
                None => (vec![rows, self.heads, 0, self.head_dim], &[][..]),
            };
            inputs.push((
                name.clone().into(),
                TensorRef::from_array_view((shape, data))?.into(),
            ));
        }
        let outputs = if first {
            self.decoder.run_with_options(inputs, &self.release)?
        } else {
            self.decoder.run(inputs)?
        };
        let (shape, logits) = outputs
            .get("logits")
            .ok_or_else(|| MoonshineError::Output("the decoder gave no logits".into()))?
            .try_extract_tensor::<f32>()?;
        let vocabulary = *shape.last().unwrap_or(&0) as usize;
        if vocabulary == 0 || logits.len() != rows * vocabulary {
            return Err(MoonshineError::Output(format!(
                "logits shaped {:?}",
                &shape[..]
            )));
        }
        let logits = logits.to_vec();
        let mut made = Vec::with_capacity(self.past.len());
        for name in &self.past {
            // The encoder's part never changes after the first step: it is
            // carried over, not copied out again.
            if !first && name.contains(".encoder.") {
                made.push(None);
                continue;
            }
            let out = name.replacen("past_key_values", "present", 1);
            let (shape, data) = outputs
                .get(&out)
                .ok_or_else(|| MoonshineError::Output(format!("the decoder gave no {out}")))?
                .try_extract_tensor::<f32>()?;
            made.push(Some((
                shape.iter().map(|d| *d as usize).collect(),
                data.to_vec(),
            )));
        }
        drop(outputs);
        let present = match cache {
            Some(cache) => made
                .into_iter()
                .zip(cache)
                .map(|(made, old)| made.unwrap_or(old))
                .collect(),
            None => made.into_iter().flatten().collect(),
        };
        Ok(Step {
            vocabulary,
            logits,
            present,
        })
    }

    /// Beam search over the encoder's `hidden` states, [`BEAMS`] decoder
    /// rows a step: the ended hypothesis with the best mean
    /// log-probability per token, or None when none ended within `budget`
    /// tokens.
    fn search(
        &mut self,
        hidden: (&[usize], &[f32]),
        samples: usize,
        budget: usize,
        cancel: &AtomicBool,
    ) -> Result<Option<Pass>, MoonshineError> {
        // The rows share the audio: its states once per row.
        let rows = hidden.1.repeat(BEAMS);
        let hidden = (hidden.0, &rows[..]);
        let mask = vec![1i64; samples * BEAMS];
        let mut beams = Beams::new(BEAMS);
        let mut cache: Option<Vec<Cache>> = None;
        for _ in 0..budget {
            if cancel.load(Ordering::Relaxed) {
                return Err(MoonshineError::Cancelled);
            }
            let ids = beams.last_tokens();
            let step = self.step(&ids, hidden, (samples, &mask), cache.take())?;
            let tops = step
                .logits
                .chunks_exact(step.vocabulary)
                .map(|row| top_log_probabilities(row, BEAMS))
                .collect::<Result<Vec<_>, _>>()?;
            let parents = beams.advance(&tops);
            if beams.done() {
                break;
            }
            cache = Some(reorder(step.present, &parents, &self.past, ids.len()));
        }
        Ok(beams.best())
    }
}

/// One layer's key or value cache: its shape and data.
type Cache = (Vec<usize>, Vec<f32>);

/// What a decoder step gives.
struct Step {
    vocabulary: usize,
    logits: Vec<f32>,
    present: Vec<Cache>,
}

/// The cache rows for the hypotheses kept, in their order: each its
/// parent's row (`present` has `rows` rows). The encoder's part, the same
/// in every row, is cut or repeated to the new number of rows.
fn reorder(present: Vec<Cache>, parents: &[usize], names: &[String], rows: usize) -> Vec<Cache> {
    present
        .into_iter()
        .zip(names)
        .map(|((mut shape, data), name)| {
            let row = data.len() / rows.max(1);
            let data = if name.contains(".encoder.") {
                if parents.len() == rows {
                    data
                } else {
                    data[..row].repeat(parents.len())
                }
            } else {
                parents
                    .iter()
                    .flat_map(|&p| data[p * row..(p + 1) * row].iter().copied())
                    .collect()
            };
            shape[0] = parents.len();
            (shape, data)
        })
        .collect()
}

/// A hypothesis: its tokens (the start token first), the sum of their
/// log-probabilities and of their probabilities (the end token's not in
/// the latter: it is no word).
#[derive(Debug, Clone)]
struct Hypothesis {
    tokens: Vec<i64>,
    log_probability: f64,
    probs: Vec<f32>,
}

impl Hypothesis {
    /// Mean log-probability per token, the end token's counted: a longer
    /// transcript is not worse for having more tokens.
    fn score(&self) -> f64 {
        self.log_probability / (self.tokens.len().max(2) - 1) as f64
    }
}

/// The hypotheses of a beam search: those going on (a decoder row each)
/// and those ended.
struct Beams {
    width: usize,
    going: Vec<Hypothesis>,
    ended: Vec<Hypothesis>,
}

impl Beams {
    fn new(width: usize) -> Self {
        let start = Hypothesis {
            tokens: vec![START],
            log_probability: 0.0,
            probs: Vec::new(),
        };
        Self {
            width,
            going: vec![start],
            ended: Vec::new(),
        }
    }

    /// The token each row is given next.
    fn last_tokens(&self) -> Vec<i64> {
        self.going
            .iter()
            .map(|h| *h.tokens.last().unwrap_or(&START))
            .collect()
    }

    /// Takes each row's most likely next tokens (`tops[row]`: a token and
    /// its log-probability) and keeps the `width` best continuations going,
    /// setting aside those that ended among them. Returns the row each
    /// kept hypothesis came from.
    fn advance(&mut self, tops: &[Vec<(i64, f32)>]) -> Vec<usize> {
        let mut candidates: Vec<(f64, usize, i64, f32)> = Vec::new();
        for (row, (top, h)) in tops.iter().zip(&self.going).enumerate() {
            for &(token, lp) in top {
                candidates.push((h.log_probability + f64::from(lp), row, token, lp));
            }
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut going = Vec::with_capacity(self.width);
        let mut parents = Vec::with_capacity(self.width);
        for (log_probability, row, token, lp) in candidates {
            if going.len() == self.width {
                break;
            }
            let parent = &self.going[row];
            let mut tokens = parent.tokens.clone();
            tokens.push(token);
            if token == END {
                if self.ended.len() < self.width {
                    self.ended.push(Hypothesis {
                        tokens,
                        log_probability,
                        probs: parent.probs.clone(),
                    });
                }
            } else {
                let mut probs = parent.probs.clone();
                probs.push(lp.exp());
                going.push(Hypothesis {
                    tokens,
                    log_probability,
                    probs,
                });
                parents.push(row);
            }
        }
        self.going = going;
        parents
    }

    /// Enough hypotheses ended, or none goes on.
    fn done(&self) -> bool {
        self.ended.len() >= self.width || self.going.is_empty()
    }

    /// The ended hypothesis with the best score as a pass, its end token
    /// dropped (the search keeps no least probability: 0).
    fn best(&self) -> Option<Pass> {
        let best = self
            .ended
            .iter()
            .max_by(|a, b| a.score().total_cmp(&b.score()))?;
        let tokens = best.tokens[..best.tokens.len() - 1].to_vec();
        Some(Pass {
            tokens,
            probs: best.probs.clone(),
            log_probability: best.log_probability,
            least: 0.0,
            truncated: false,
        })
    }
}

/// The `k` most likely tokens of a row of logits and their
/// log-probabilities, the most likely first.
fn top_log_probabilities(row: &[f32], k: usize) -> Result<Vec<(i64, f32)>, MoonshineError> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() || row.iter().any(|v| v.is_nan()) {
        return Err(MoonshineError::Output("the logits are not finite".into()));
    }
    let log_sum = row.iter().map(|v| (v - max).exp()).sum::<f32>().ln() + max;
    let mut top: Vec<(i64, f32)> = Vec::with_capacity(k + 1);
    for (i, &v) in row.iter().enumerate() {
        if top.len() == k && v <= top[k - 1].1 {
            continue;
        }
        let at = top.partition_point(|&(_, t)| t >= v);
        top.insert(at, (i as i64, v));
        top.truncate(k);
    }
    Ok(top.into_iter().map(|(i, v)| (i, v - log_sum)).collect())
}

/// Moonshine as the engine's recogniser (the live engine): English only,
/// no word timestamps (requests that need either go to whisper).
pub struct MoonshineRecognizer {
    model: Moonshine,
    info: crate::recognizer::ModelInfo,
}

impl MoonshineRecognizer {
    pub fn load(runtime: &OnnxRuntime, dir: &Path, threads: usize) -> Result<Self, MoonshineError> {
        let started = Instant::now();
        let model = Moonshine::load(runtime, dir, threads)?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            model,
            info: crate::recognizer::ModelInfo {
                path: dir.to_owned(),
                kind: "moonshine".into(),
                name,
                multilingual: false,
                quantisation: "int8".into(),
                load_ms: started.elapsed().as_millis() as u64,
                other_languages: None,
            },
        })
    }
}

impl crate::recognizer::Recognizer for MoonshineRecognizer {
    fn info(&self) -> &crate::recognizer::ModelInfo {
        &self.info
    }

    fn transcribe(
        &mut self,
        request: crate::recognizer::Request,
    ) -> Result<crate::recognizer::Transcript, crate::recognizer::SttError> {
        use crate::recognizer::{Segment, SttError, Transcript};
        let language = request
            .language
            .as_deref()
            .filter(|l| !l.is_empty())
            .unwrap_or("en")
            .to_ascii_lowercase();
        // `auto` included: it cannot tell the language spoken, and would
        // write any speech as English.
        if language != "en" {
            return Err(SttError::EnglishOnly {
                language,
                model: self.info.name.clone(),
            });
        }
        if request.word_timestamps {
            return Err(SttError::Unsupported(format!(
                "word timestamps: the live engine {} has none (whisper does)",
                self.info.name
            )));
        }
        let started = Instant::now();
        let duration = request.audio.len() as f64 / SAMPLE_RATE as f64;
        let live =
            match self
                .model
                .transcribe_until(&request.audio, &request.cancel, !request.draft)
            {
                Ok(live) => live,
                Err(MoonshineError::Cancelled) => return Err(SttError::Cancelled),
                Err(MoonshineError::Empty) => return Err(SttError::Unsupported("no audio".into())),
                Err(e) => return Err(SttError::Live(e.to_string())),
            };
        let segments = if live.text.is_empty() {
            Vec::new()
        } else {
            vec![Segment {
                start: live.skipped,
                end: duration,
                text: live.text.clone(),
                confidence: live.confidence,
                no_speech_probability: 0.0,
                words: None,
                mean_log_prob: 0.0,
            }]
        };
        Ok(Transcript {
            text: live.text,
            language: "en".into(),
            language_probability: None,
            duration,
            segments,
            confidence: live.confidence,
            dropped_segments: 0,
            audio_ctx: 0,
            refit: false,
            elapsed_ms: started.elapsed().as_millis() as u64,
            truncated: live.truncated,
            doubt: live.doubt,
            model: self.info.name.clone(),
        })
    }

    fn detect(
        &mut self,
        _audio: &[f32],
    ) -> Result<Vec<crate::recognizer::LanguageGuess>, crate::recognizer::SttError> {
        Err(crate::recognizer::SttError::EnglishOnly {
            language: "detection".into(),
            model: self.info.name.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(pieces: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in pieces {
            if p.len() >= 128 {
                out.push(128 + (p.len() % 128) as u8);
                out.push((p.len() / 128) as u8);
            } else {
                out.push(p.len() as u8);
            }
            out.extend_from_slice(p);
        }
        out
    }

    #[test]
    fn the_tokenizer_reads_short_and_long_pieces() {
        let long = vec![b'x'; 300];
        let bytes = encode(&[
            b"<unk>",
            b"<s>",
            b"</s>",
            "\u{2581}hello".as_bytes(),
            &long,
            "\u{2581}world".as_bytes(),
            b"!",
        ]);
        let t = Tokenizer::parse(&bytes).unwrap();
        assert_eq!(t.len(), 7);
        assert_eq!(t.decode(&[1, 3, 5, 6, 2]), "hello world!");
        assert_eq!(t.decode(&[4]).len(), 300);
        // Ids that are special or unknown leave nothing.
        assert_eq!(t.decode(&[0, 1, 2, 99, -4]), "");
    }

    #[test]
    fn a_damaged_tokenizer_is_an_error() {
        let bytes = encode(&[b"<unk>", b"<s>", b"</s>", b"abc"]);
        let cut = &bytes[..bytes.len() - 1];
        assert!(
            Tokenizer::parse(cut)
                .unwrap_err()
                .contains("only 2 are left")
        );
        assert!(
            Tokenizer::parse(&[200])
                .unwrap_err()
                .contains("ends inside its length")
        );
        assert!(
            Tokenizer::parse(&encode(&[b"a", b"b"]))
                .unwrap_err()
                .contains("only 2 tokens")
        );
    }

    #[test]
    fn a_long_turn_is_split_in_its_pauses() {
        // 10 ms windows of "speech" at 0.1 with pauses (0.001) of 300 ms
        // at 4 s, 7.5 s, 13 s and 21 s: 24 s in all.
        let pauses = [400..430, 750..780, 1300..1330, 2100..2130];
        let audio: Vec<f32> = (0..2400)
            .flat_map(|w| {
                let level = if pauses.iter().any(|p| p.contains(&w)) {
                    0.001
                } else {
                    0.1
                };
                quiet_then(10, level, &[])
            })
            .collect();
        let got = pieces(&audio);
        let at: Vec<usize> = got.iter().map(|r| r.start / level::WINDOW).collect();
        // The first cut falls in the pause at 7.5 s (4 s is under half a
        // piece), the next in the one at 13 s, then 21 s; each cut
        // inside its pause, every sample in one piece, in order.
        assert_eq!(got.len(), 4, "{got:?}");
        for (cut, pause) in at[1..].iter().zip([&pauses[1], &pauses[2], &pauses[3]]) {
            assert!(pause.contains(cut), "cut at window {cut}, pause {pause:?}");
        }
        assert_eq!(got[0].start, 0);
        assert_eq!(got[3].end, audio.len());
        for pair in got.windows(2) {
            assert_eq!(pair[0].end, pair[1].start);
        }
        assert!(got.iter().all(|r| r.len() <= PIECE));
        // Without a pause, a piece is cut at the longest length still,
        // never longer; a turn of 10 s or less is not cut.
        let flat = quiet_then(25_000, 0.1, &[]);
        let got = pieces(&flat);
        assert!(
            got.iter().all(|r| r.len() <= PIECE && r.len() >= PIECE / 2),
            "{got:?}"
        );
        assert_eq!(got.last().map(|r| r.end), Some(flat.len()));
        assert_eq!(pieces(&flat[..PIECE]), vec![0..PIECE]);
        assert_eq!(pieces(&[]), vec![0..0]);
    }

    /// `ms` of `level` (RMS, a square wave), then `then`.
    fn quiet_then(ms: usize, level: f32, then: &[f32]) -> Vec<f32> {
        let mut audio: Vec<f32> = (0..ms * 16)
            .map(|i| if i % 2 == 0 { level } else { -level })
            .collect();
        audio.extend_from_slice(then);
        audio
    }

    #[test]
    fn the_quiet_before_the_first_sound_is_skipped() {
        let voice: Vec<f32> = (0..8_000).map(|i| 0.1 * (i as f32 * 0.2).sin()).collect();
        // Digital silence, as the virtual card's, and a −60 dBFS floor.
        for level in [0.0, 0.001] {
            let audio = quiet_then(250, level, &voice);
            assert_eq!(onset(&audio), 250 * 16, "floor {level}");
        }
        // Speech from the first sample: nothing to skip.
        assert_eq!(onset(&voice), 0);
        // A soft first sound (−45 dBFS) 12 dB over a −60 dBFS floor counts.
        let soft = quiet_then(100, 0.005_6, &voice);
        assert_eq!(onset(&quiet_then(300, 0.001, &soft)), 300 * 16);
        // A noisy room (−30 dBFS floor under −23 dBFS speech): kept whole.
        assert_eq!(onset(&quiet_then(300, 0.03, &voice)), 0);
        assert_eq!(onset(&[0.0; 4_000]), 0);
        // A click at the end of a second of silence: a quarter second is
        // left.
        let mut click = vec![0.0; 16_000];
        click[15_990] = 0.9;
        assert_eq!(onset(&click), 12_000);
        assert_eq!(onset(&[]), 0);
    }

    #[test]
    fn the_most_likely_tokens_and_their_log_probabilities() {
        let top = top_log_probabilities(&[0.0, 3.0, 1.0, 2.0, 3.0], 3).unwrap();
        let tokens: Vec<i64> = top.iter().map(|t| t.0).collect();
        assert_eq!(tokens, [1, 4, 3]);
        let sum: f32 = [0.0f32, 3.0, 1.0, 2.0, 3.0].iter().map(|v| v.exp()).sum();
        assert!((top[0].1 - (3.0 - sum.ln())).abs() < 1e-5, "{top:?}");
        assert!((top[2].1 - (2.0 - sum.ln())).abs() < 1e-5, "{top:?}");
        assert!(top_log_probabilities(&[0.0, f32::NAN], 1).is_err());
    }

    fn ln(p: f32) -> f32 {
        p.ln()
    }

    #[test]
    fn the_beam_keeps_what_greedy_would_have_dropped() {
        // Greedy takes 10 (0.5) and ends there (0.8); 11 (0.4) goes on
        // surely to 21 (0.9) and ends (0.95).
        let mut beams = Beams::new(2);
        let parents = beams.advance(&[vec![(10, ln(0.5)), (11, ln(0.4))]]);
        assert_eq!(parents, [0, 0]);
        assert_eq!(beams.last_tokens(), [10, 11]);
        let parents = beams.advance(&[
            vec![(END, ln(0.8)), (20, ln(0.1))],
            vec![(21, ln(0.9)), (22, ln(0.05))],
        ]);
        // "10" ended (0.40); 11→21 (0.36) and 10→20 (0.05) go on.
        assert_eq!(parents, [1, 0]);
        assert_eq!(beams.last_tokens(), [21, 20]);
        assert!(!beams.done());
        beams.advance(&[
            vec![(END, ln(0.95)), (30, ln(0.01))],
            vec![(END, ln(0.9)), (31, ln(0.05))],
        ]);
        assert!(beams.done(), "two ended");
        let found = beams.best().unwrap();
        // "11 21" (0.342 in all, over three tokens) beats "10" (0.40 over
        // two): by mean log-probability per token.
        assert_eq!(found.tokens, [START, 11, 21]);
        let sum: f32 = found.probs.iter().sum();
        assert!((sum - 1.3).abs() < 1e-5, "{found:?}");
    }

    #[test]
    fn a_search_where_nothing_ended_finds_nothing() {
        let mut beams = Beams::new(2);
        beams.advance(&[vec![(10, ln(0.5)), (11, ln(0.4))]]);
        beams.advance(&[
            vec![(12, ln(0.5)), (13, ln(0.4))],
            vec![(14, ln(0.5)), (15, ln(0.4))],
        ]);
        assert!(!beams.done());
        assert_eq!(beams.best(), None);
    }

    #[test]
    fn the_cache_follows_the_hypotheses_kept() {
        // Two rows of 3 values each: the decoder's part takes its parents'
        // rows, the encoder's (the same in every row) is cut to the rows kept.
        let names = [
            "past_key_values.0.decoder.key".to_owned(),
            "past_key_values.0.encoder.key".to_owned(),
        ];
        let present = vec![
            (vec![2, 1, 3, 1], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            (vec![2, 1, 3, 1], vec![7.0, 8.0, 9.0, 7.0, 8.0, 9.0]),
        ];
        let kept = reorder(present.clone(), &[1, 1, 0], &names, 2);
        assert_eq!(kept[0].0, [3, 1, 3, 1]);
        assert_eq!(kept[0].1, [4.0, 5.0, 6.0, 4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
        assert_eq!(kept[1].1, [7.0, 8.0, 9.0, 7.0, 8.0, 9.0, 7.0, 8.0, 9.0]);
        let one = reorder(present, &[1], &names, 2);
        assert_eq!(
            (one[0].1.as_slice(), one[1].1.as_slice()),
            (&[4.0, 5.0, 6.0][..], &[7.0, 8.0, 9.0][..])
        );
    }

    fn pass(tokens: usize, log_probability: f64, truncated: bool) -> Pass {
        Pass {
            tokens: std::iter::once(START)
                .chain((0..tokens as i64).map(|t| 10 + t))
                .collect(),
            probs: Vec::new(),
            log_probability,
            least: 0.0,
            truncated,
        }
    }

    #[test]
    fn a_pass_is_judged_per_token_with_its_end() {
        // Three words and the end token: four tokens.
        assert!((pass(3, -2.0, false).mean_log_prob() + 0.5).abs() < 1e-9);
        // Ran out: no end token to count.
        assert!((pass(4, -2.0, true).mean_log_prob() + 0.5).abs() < 1e-9);
        assert_eq!(pass(0, 0.0, true).mean_log_prob(), 0.0);
    }

    #[test]
    fn of_failed_passes_one_that_ended_is_kept_then_the_likeliest() {
        let (t, kept) = least_doubtful(vec![
            pass(12, -1.0, true),
            pass(3, -6.0, false),
            pass(3, -5.0, false),
            pass(12, -0.5, true),
        ]);
        // The third: ended, and -1.25 a token against -1.5.
        assert_eq!((t, kept.log_probability), (0.4, -5.0));
        let (t, kept) = least_doubtful(vec![pass(12, -9.0, true), pass(12, -1.0, true)]);
        assert_eq!((t, kept.log_probability), (0.2, -1.0));
    }
}
