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
//! audio so a confused model cannot run on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hark_onnx::OnnxRuntime;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::{Tensor, TensorRef};

use crate::level;

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
    /// Seconds of quiet at the clip's start the model was not given
    /// ([`onset`]).
    pub skipped: f64,
    pub encoder_ms: f64,
    pub decoder_ms: f64,
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
        self.transcribe_until(audio, &AtomicBool::new(false))
    }

    /// [`Self::transcribe`], abandoned between decoder steps once `cancel`
    /// is set.
    pub fn transcribe_until(
        &mut self,
        audio: &[f32],
        cancel: &AtomicBool,
    ) -> Result<LiveTranscript, MoonshineError> {
        if audio.is_empty() {
            return Err(MoonshineError::Empty);
        }
        let seconds = audio.len() as f64 / SAMPLE_RATE as f64;
        if seconds > MAX_SECONDS {
            return Err(MoonshineError::TooLong { seconds });
        }
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
        // The cache: empty before the first step; the encoder's part is
        // made by the first step and reused, the decoder's grows.
        let mut cache: Vec<(Vec<usize>, Vec<f32>)> =
            vec![(vec![1, self.heads, 0, self.head_dim], Vec::new()); self.past.len()];
        let mut tokens = vec![START];
        let mut probability = 0.0f64;
        let mut truncated = true;
        for step in 0..budget {
            if cancel.load(Ordering::Relaxed) {
                return Err(MoonshineError::Cancelled);
            }
            let last = [*tokens.last().unwrap_or(&START)];
            let mut inputs = ort::inputs! {
                "input_ids" => TensorRef::from_array_view(([1usize, 1], &last[..]))?,
                "encoder_hidden_states" => TensorRef::from_array_view((hidden_shape.clone(), &hidden[..]))?,
                "use_cache_branch" => Tensor::from_array(([1usize], vec![step > 0]))?,
            };
            if self.decoder_mask {
                inputs.push((
                    "encoder_attention_mask".into(),
                    TensorRef::from_array_view(([1usize, samples], &mask[..]))?.into(),
                ));
            }
            for (name, (shape, data)) in self.past.iter().zip(&cache) {
                inputs.push((
                    name.clone().into(),
                    TensorRef::from_array_view((shape.clone(), &data[..]))?.into(),
                ));
            }
            let outputs = if step == 0 {
                self.decoder.run_with_options(inputs, &self.release)?
            } else {
                self.decoder.run(inputs)?
            };
            let (shape, logits) = outputs
                .get("logits")
                .ok_or_else(|| MoonshineError::Output("the decoder gave no logits".into()))?
                .try_extract_tensor::<f32>()?;
            let vocabulary = *shape.last().unwrap_or(&0) as usize;
            let row = logits
                .get(logits.len().saturating_sub(vocabulary)..)
                .filter(|r| !r.is_empty())
                .ok_or_else(|| MoonshineError::Output(format!("logits shaped {:?}", &shape[..])))?;
            let (best, p) = softmax_best(row)?;
            for (i, name) in self.past.iter().enumerate() {
                // The encoder's part never changes after the first step.
                if step > 0 && name.contains(".encoder.") {
                    continue;
                }
                let present = name.replacen("past_key_values", "present", 1);
                let (shape, data) = outputs
                    .get(&present)
                    .ok_or_else(|| {
                        MoonshineError::Output(format!("the decoder gave no {present}"))
                    })?
                    .try_extract_tensor::<f32>()?;
                cache[i] = (shape.iter().map(|d| *d as usize).collect(), data.to_vec());
            }
            if best == END {
                truncated = false;
                break;
            }
            probability += f64::from(p);
            tokens.push(best);
        }
        let produced = tokens.len() - 1;
        if truncated {
            // Mostly the partial passes, on speech cut off mid-word; the
            // listen path warns when a turn's own transcript is cut.
            tracing::debug!(
                tokens = produced,
                seconds,
                "Moonshine ran out of its token budget; the transcript is cut"
            );
        }
        Ok(LiveTranscript {
            text: self.tokenizer.decode(&tokens),
            confidence: if produced == 0 {
                0.0
            } else {
                (probability / produced as f64) as f32
            },
            tokens: tokens[1..].to_vec(),
            truncated,
            skipped: skip as f64 / SAMPLE_RATE as f64,
            encoder_ms,
            decoder_ms: decode_started.elapsed().as_secs_f64() * 1000.0,
        })
    }
}

/// Moonshine as the engine's recogniser (the live engine): English only,
/// no word timestamps (requests that need either go to whisper).
pub struct MoonshineRecognizer {
    model: Moonshine,
    info: crate::engine::ModelInfo,
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
            info: crate::engine::ModelInfo {
                path: dir.to_owned(),
                kind: "moonshine".into(),
                name,
                multilingual: false,
                quantisation: "int8".into(),
                load_ms: started.elapsed().as_millis() as u64,
            },
        })
    }
}

impl crate::engine::Recognizer for MoonshineRecognizer {
    fn info(&self) -> &crate::engine::ModelInfo {
        &self.info
    }

    fn transcribe(
        &mut self,
        request: crate::engine::Request,
    ) -> Result<crate::engine::Transcript, crate::engine::SttError> {
        use crate::engine::{Segment, SttError, Transcript};
        let language = request
            .language
            .as_deref()
            .filter(|l| !l.is_empty())
            .unwrap_or("auto")
            .to_ascii_lowercase();
        if language != "auto" && language != "en" {
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
        let live = match self.model.transcribe_until(&request.audio, &request.cancel) {
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
        })
    }

    fn detect(
        &mut self,
        _audio: &[f32],
    ) -> Result<Vec<crate::engine::LanguageGuess>, crate::engine::SttError> {
        Err(crate::engine::SttError::EnglishOnly {
            language: "detection".into(),
            model: self.info.name.clone(),
        })
    }
}

/// The most likely token and its probability.
fn softmax_best(row: &[f32]) -> Result<(i64, f32), MoonshineError> {
    let (best, max) =
        row.iter()
            .copied()
            .enumerate()
            .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, v)| {
                if v > bv { (i, v) } else { (bi, bv) }
            });
    if !max.is_finite() {
        return Err(MoonshineError::Output("the logits are not finite".into()));
    }
    let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
    Ok((best as i64, 1.0 / sum))
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
    fn the_best_token_and_its_probability() {
        let (best, p) = softmax_best(&[0.0, 2.0, 0.0]).unwrap();
        assert_eq!(best, 1);
        assert!((p - 0.787).abs() < 0.01, "{p}");
        assert!(softmax_best(&[f32::NAN]).is_err());
    }
}
