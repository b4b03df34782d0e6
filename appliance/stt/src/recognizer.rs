//! What a speech recogniser is, to everything that runs one: a request,
//! the transcript it gives back, the model it names, how it fails, and the
//! [`Recognizer`] trait both engines implement (whisper.cpp in
//! [`crate::whisper`], the live engine in [`crate::moonshine`]). Plain data
//! at the bottom of the crate: the worker ([`crate::engine`]), the models'
//! choice ([`crate::choice`]) and the engines all stand on it.

use std::{
    path::PathBuf,
    sync::{Arc, atomic::AtomicBool},
};

use serde::Serialize;

use crate::fallback;

/// whisper's sample rate.
pub const SAMPLE_RATE: u32 = 16_000;

#[derive(Debug, thiserror::Error)]
pub enum SttError {
    #[error(
        "no speech-to-text model at {path}: install one with `hark models import` or `hark models fetch`, or set `stt.model`"
    )]
    ModelMissing { path: PathBuf },
    #[error("whisper.cpp cannot load the model {path}: {reason}")]
    ModelLoad { path: PathBuf, reason: String },
    #[error(
        "the speech-to-text engine is busy ({queued} requests queued): try again in a few seconds"
    )]
    Busy { queued: usize },
    #[error("the speech-to-text engine has stopped")]
    Stopped,
    #[error("transcription was cancelled")]
    Cancelled,
    #[error(
        "language `{language}` is not available: the model {model} understands English only (`stt.multilingual_model`, base-q8_0 by default, serves other languages and `auto`; `hark models list` shows what is installed)"
    )]
    EnglishOnly { language: String, model: String },
    #[error("unknown language `{0}`: use an ISO 639-1 code such as `en`, `de` or `es`, or `auto`")]
    UnknownLanguage(String),
    #[error("whisper.cpp failed: {0}")]
    Whisper(String),
    #[error("the live engine failed: {0}")]
    Live(String),
    #[error("not available here: {0}")]
    Unsupported(String),
    #[error(
        "no speech-to-text model `{name}` is installed (installed: {installed}); `hark models fetch` or `hark models import` adds one"
    )]
    UnknownModel { name: String, installed: String },
    #[error(
        "no {size} model for language `{language}` is installed (installed: {installed}); other languages and `auto` need a multilingual one"
    )]
    NoModelOfSize {
        size: String,
        language: String,
        installed: String,
    },
    #[error("{0}")]
    Choice(String),
}

/// The engine's settings (the `[stt]` section maps onto this).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The ggml model file.
    pub model: PathBuf,
    /// Threads whisper.cpp computes with.
    pub threads: u16,
    /// Beam search width; 1 decodes greedily (faster, worse on short clips).
    pub beam_size: u8,
    /// Default language: an ISO 639-1 code, or `auto` (the language
    /// spoken, detected by a multilingual model).
    pub language: String,
    /// A multilingual model for what an English-only `model` cannot do:
    /// requests in `auto` or another language, and language detection.
    /// Loaded when first needed (its header is checked at start); without
    /// one, such requests are a [`SttError::EnglishOnly`].
    pub multilingual: Option<PathBuf>,
    /// Fit the encoder context of an English-only model to short inputs
    /// (see the module docs). Off here, on in the daemon (`stt`'s
    /// configuration): on recorded people tiny.en fitted gets nearly as
    /// many words right as at the full context (17.5 % of words wrong
    /// against 17.0 % on the real-speech set) in half the time; on
    /// espeak-ng's synthetic voice it lost more (12.5–14.4 % against
    /// 7.7 %).
    pub fit_audio_ctx: bool,
    /// Encoder frames added to the fitted context (50 per second).
    pub audio_ctx_margin: u16,
    /// Segments whose no-speech probability exceeds this (and whose tokens
    /// are unsure) are dropped as not speech.
    pub no_speech_threshold: f32,
    /// Requests that may wait for the worker.
    pub queue: usize,
    /// Flash attention in whisper.cpp (its own default; whisper-rs turns it
    /// off). With whisper.cpp 1.8.5 it is both faster and a third smaller
    /// on CPUs (docs/benchmarks.md): the encoder no longer holds the full
    /// 1500×1500 attention matrices.
    pub flash_attn: bool,
    /// Called on the worker thread before each request. The daemon asks
    /// idle engines to give their working memory back here, so that a
    /// transcription does not stack on top of it.
    pub before_request: Option<fn()>,
    /// Called on the worker thread after each request. The daemon gives
    /// the memory a transcription freed back to the system here.
    pub after_request: Option<fn()>,
    /// Told on the worker thread when it starts (`true`) and finishes
    /// (`false`) a request: the daemon's event stream (the lights show
    /// "transcribing").
    pub on_busy: Option<BusyHook>,
    /// The model store (`stt.models_dir`): requests that name another
    /// model, or a size, find it there ([`crate::choice`]). `None`: only
    /// the configured models serve.
    pub store: Option<PathBuf>,
    /// Load the model on the first request instead of at start (its
    /// header is still checked at start). The daemon does so when the live
    /// engine hears the microphone: whisper then serves only files and
    /// other languages, and its 50 MB wait until one comes (it loads in
    /// under 0.1 s).
    pub lazy: bool,
}

/// See [`EngineConfig::on_busy`].
#[derive(Clone)]
pub struct BusyHook(pub std::sync::Arc<dyn Fn(bool) + Send + Sync>);

impl std::fmt::Debug for BusyHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BusyHook")
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            model: PathBuf::new(),
            threads: std::thread::available_parallelism()
                .map(|n| n.get().min(4) as u16)
                .unwrap_or(2),
            beam_size: 5,
            language: "en".into(),
            multilingual: None,
            fit_audio_ctx: false,
            audio_ctx_margin: 512,
            no_speech_threshold: 0.6,
            queue: 8,
            flash_attn: true,
            before_request: None,
            after_request: None,
            on_busy: None,
            store: None,
            lazy: false,
        }
    }
}

/// What the loaded model is.
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub path: PathBuf,
    /// The file name without its extension.
    pub name: String,
    /// whisper's size name (tiny, base, small, …).
    pub kind: String,
    pub multilingual: bool,
    /// Weight format (f32, f16, q8_0, q5_1, …).
    pub quantisation: String,
    pub load_ms: u64,
    /// The multilingual model beside an English-only one
    /// ([`EngineConfig::multilingual`]): other languages go to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_languages: Option<String>,
}

/// One transcription request.
#[derive(Debug)]
pub struct Request {
    /// 16 kHz mono samples.
    pub audio: Vec<f32>,
    /// `None` or `auto`: the configured default.
    pub language: Option<String>,
    pub word_timestamps: bool,
    /// Set to abandon the request, queued or running.
    pub cancel: Arc<AtomicBool>,
    /// A draft: words so far, shown while the person speaks and soon
    /// replaced. The live engine gives its first reading (no second
    /// decoding of an unsure one: speech cut off mid-word is unsure at its
    /// end, and the pass at the next pause should not wait behind it).
    pub draft: bool,
    /// Another model than the configured one, by name or size
    /// ([`crate::choice`]); whisper only (the live engine has one).
    pub model: Option<ModelChoice>,
}

impl Request {
    pub fn new(audio: Vec<f32>) -> Self {
        Self {
            audio,
            language: None,
            word_timestamps: false,
            cancel: Arc::default(),
            draft: false,
            model: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Word {
    pub word: String,
    /// Seconds from the start of the audio.
    pub start: f64,
    pub end: f64,
    pub probability: f32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Segment {
    /// Seconds from the start of the audio.
    pub start: f64,
    pub end: f64,
    pub text: String,
    /// Mean probability of the segment's text tokens.
    pub confidence: f32,
    pub no_speech_probability: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub words: Option<Vec<Word>>,
    /// Mean log-probability of its text tokens: what whisper's fallback
    /// judges a pass by (`crate::fallback`). Not in any tool's result.
    #[serde(skip)]
    pub mean_log_prob: f32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Transcript {
    /// The text, segments joined; empty when nothing was said.
    pub text: String,
    pub language: String,
    /// Probability of `language` when it was detected.
    pub language_probability: Option<f32>,
    /// Seconds of audio transcribed.
    pub duration: f64,
    pub segments: Vec<Segment>,
    /// Mean token probability over the kept segments (0 when none).
    pub confidence: f32,
    /// Segments dropped as not speech.
    pub dropped_segments: usize,
    /// Encoder context used (1500 is whisper's full 30 s).
    pub audio_ctx: u32,
    /// The fitted context looked degenerate and the audio was decoded again
    /// at the full context.
    pub refit: bool,
    /// Inference time, milliseconds.
    pub elapsed_ms: u64,
    /// The live engine ran out of its token budget (a runaway decode):
    /// the text stops there. For the caller's log, not any tool's result.
    #[serde(skip)]
    pub truncated: bool,
    /// The transcript is still in doubt by whisper's rules
    /// (`crate::fallback`) after every temperature was tried: a loop, or
    /// tokens averaging under −1 log-probability (speech the model does
    /// not know, often another language). Not in any tool's result.
    #[serde(skip)]
    pub doubt: Option<fallback::Doubt>,
    /// The model that transcribed it (an English-only model's
    /// multilingual partner serves other languages).
    #[serde(skip)]
    pub model: String,
}

/// A detected language with its probability.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LanguageGuess {
    pub language: String,
    pub name: String,
    pub probability: f32,
}

/// A speech recogniser the engine's worker runs: whisper.cpp, or the live
/// engine (Moonshine). It runs on the worker thread only.
pub trait Recognizer: Send {
    fn info(&self) -> &ModelInfo;
    /// Transcribes one request (the worker has checked it is still wanted).
    fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError>;
    /// The five likeliest languages (multilingual models only).
    fn detect(&mut self, audio: &[f32]) -> Result<Vec<LanguageGuess>, SttError>;
}

/// whisper's sizes, as its headers name them (`hark_models::ggml`).
pub const SIZES: [&str; 5] = ["tiny", "base", "small", "medium", "large"];

/// The model a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// A model's name in the store (`base-q8_0`).
    Name(String),
    /// A size (`tiny`, `base`, `small`, `medium`, `large`).
    Size(&'static str),
}

impl ModelChoice {
    /// What an agent's `model` and `model_size` ask for (at most one may
    /// be given). `model` is a size word or a name in the store; the
    /// large model's versions (`large-v2`, `large-v3`, `large-v3-turbo`)
    /// are its size, since a header tells only the size.
    pub fn parse(model: Option<&str>, model_size: Option<&str>) -> Result<Option<Self>, SttError> {
        fn given(v: Option<&str>) -> Option<&str> {
            v.map(str::trim).filter(|v| !v.is_empty())
        }
        match (given(model), given(model_size)) {
            (Some(_), Some(_)) => Err(SttError::Choice(
                "give model or model_size, not both".to_owned(),
            )),
            (None, None) => Ok(None),
            (None, Some(size)) => size_of(size).map(|s| Some(Self::Size(s))).ok_or_else(|| {
                SttError::Choice(format!(
                    "model_size `{size}` is not a whisper size: use {}",
                    SIZES.join(", ")
                ))
            }),
            (Some(model), None) => Ok(Some(match size_of(model) {
                Some(size) => Self::Size(size),
                None => Self::Name(model.to_owned()),
            })),
        }
    }
}

/// The size a word names: a size (`tiny.en` is `tiny`; English is
/// preferred for English anyway), or one of the large model's versions.
/// Anything else is a model's name.
fn size_of(word: &str) -> Option<&'static str> {
    let word = word.to_ascii_lowercase();
    let word = word.strip_suffix(".en").unwrap_or(&word);
    const LARGE: [&str; 5] = [
        "large-v1",
        "large-v2",
        "large-v3",
        "large-v3-turbo",
        "turbo",
    ];
    if LARGE.contains(&word) {
        return Some("large");
    }
    SIZES.into_iter().find(|s| *s == word)
}
