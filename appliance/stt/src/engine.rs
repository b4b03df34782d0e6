//! The transcription engine: one whisper.cpp context, loaded once and reused,
//! on a dedicated worker thread fed by a bounded queue.
//!
//! whisper.cpp inference takes seconds of full CPU; it must never run on the
//! async runtime's threads, and two inferences at once would only slow both
//! down on a small board. So there is one worker, and requests wait in a
//! queue of [`EngineConfig::queue`] places; a full queue is an immediate
//! [`SttError::Busy`], never an unbounded wait.
//!
//! Short utterances are the common case (an agent asking a question and
//! listening for the answer), and whisper's encoder costs the same for 2 s as
//! for 30 s. With [`EngineConfig::fit_audio_ctx`] (the daemon's default;
//! English-only models) the encoder context is cut to the utterance plus a
//! margin; a context too tight makes whisper repeat itself, so a result
//! that looks repeated, or runs faster than anyone speaks, is decoded again
//! at the full context (see [`looks_degenerate`]).
//!
//! Silence and noise make whisper invent text ("Thanks for watching!").
//! Segments whisper itself rates as probably not speech (no-speech
//! probability over the threshold and low token probability) are dropped;
//! `transcribe_voice` also only hands over the detector's speech span.

use std::{
    path::PathBuf,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc::{self, Receiver, SyncSender, TrySendError},
    },
    thread::JoinHandle,
    time::Instant,
};

use crate::choice::{ModelChoice, Models};
use crate::fallback;
use serde::Serialize;
use whisper_rs::{
    FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters, WhisperState,
};

/// whisper's sample rate.
pub const SAMPLE_RATE: u32 = 16_000;
/// whisper's encoder frames per second of audio (one per 20 ms).
const CTX_PER_SECOND: f64 = 50.0;
/// whisper.cpp warns about and misreads inputs under a second.
const MIN_INPUT: usize = SAMPLE_RATE as usize + SAMPLE_RATE as usize / 20;

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

/// What the worker tells the daemon, and its queue's size.
#[derive(Clone, Default)]
pub struct Hooks {
    pub queue: usize,
    pub before_request: Option<fn()>,
    pub after_request: Option<fn()>,
    pub on_busy: Option<BusyHook>,
}

enum Job {
    Transcribe(
        Request,
        tokio::sync::oneshot::Sender<Result<Transcript, SttError>>,
    ),
    Detect(
        Vec<f32>,
        Arc<AtomicBool>,
        tokio::sync::oneshot::Sender<Result<Vec<LanguageGuess>, SttError>>,
    ),
}

/// The engine. Dropping it stops the worker (after the job it is running).
pub struct Engine {
    jobs: Option<SyncSender<Job>>,
    worker: Option<JoinHandle<()>>,
    info: ModelInfo,
    /// Models loaded on first use that failed to load, for `get_status`.
    failures: LoadFailures,
    queued: Arc<AtomicUsize>,
    busy: Arc<AtomicBool>,
}

/// The models loaded when first needed whose last load failed (a file
/// damaged or cut short after the daemon checked its header), by name, with
/// why. A load is tried again on the next request, and a success clears it,
/// so a file put right needs no restart.
#[derive(Clone, Default)]
pub(crate) struct LoadFailures(Arc<Mutex<std::collections::BTreeMap<String, String>>>);

impl LoadFailures {
    pub(crate) fn set(&self, model: &str, failure: Option<String>) {
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match failure {
            Some(why) => failures.insert(model.to_owned(), why),
            None => failures.remove(model),
        };
    }

    fn list(&self) -> Vec<(String, String)> {
        let failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        failures
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

impl Engine {
    /// Models whose load on first use failed, and why (name, error).
    pub fn load_failures(&self) -> Vec<(String, String)> {
        self.failures.list()
    }

    /// Loads the model and starts the worker. Blocking (the load reads the
    /// whole file): call it from a blocking context.
    pub fn start(config: EngineConfig) -> Result<Engine, SttError> {
        install_logging();
        if !config.model.is_file() {
            return Err(SttError::ModelMissing {
                path: config.model.clone(),
            });
        }
        let hooks = Hooks {
            queue: config.queue,
            before_request: config.before_request,
            after_request: config.after_request,
            on_busy: config.on_busy.clone(),
        };
        let other = config.multilingual.clone();
        let failures = LoadFailures::default();
        let main: Box<dyn Recognizer> = if config.lazy {
            Box::new(LazyWhisper::checked(config.clone(), &failures)?)
        } else {
            Box::new(Whisper::load(config.clone())?)
        };
        let other = match other {
            Some(path) if !main.info().multilingual => {
                match Self::other_languages(&config, path, &failures) {
                    Ok(other) => Some(other),
                    Err(e) => {
                        tracing::warn!(error = %e, "no multilingual model: speech to text is English only");
                        None
                    }
                }
            }
            _ => None,
        };
        let recognizer = Models::new(main, other, config, failures.clone());
        let mut engine = Self::from_recognizer(Box::new(recognizer), hooks)?;
        engine.failures = failures;
        Ok(engine)
    }

    /// The multilingual model beside an English-only one, checked (not
    /// loaded).
    fn other_languages(
        config: &EngineConfig,
        path: PathBuf,
        failures: &LoadFailures,
    ) -> Result<LazyWhisper, SttError> {
        if !path.is_file() {
            return Err(SttError::ModelMissing { path });
        }
        let other = LazyWhisper::checked(
            EngineConfig {
                model: path,
                multilingual: None,
                ..config.clone()
            },
            failures,
        )?;
        if !other.info.multilingual {
            return Err(SttError::ModelLoad {
                path: other.info.path.clone(),
                reason: "it is English only, not multilingual".into(),
            });
        }
        Ok(other)
    }

    /// Starts a worker for any recogniser (the live engine).
    pub fn from_recognizer(
        recognizer: Box<dyn Recognizer>,
        hooks: Hooks,
    ) -> Result<Engine, SttError> {
        let info = recognizer.info().clone();
        let (tx, rx) = mpsc::sync_channel(hooks.queue.max(1));
        let queued = Arc::new(AtomicUsize::new(0));
        let busy = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            recognizer,
            hooks,
            queued: Arc::clone(&queued),
            busy: Arc::clone(&busy),
        };
        let handle = std::thread::Builder::new()
            .name("hark-stt".into())
            .spawn(move || worker.run(rx))
            .map_err(|e| SttError::Whisper(format!("cannot start the worker thread: {e}")))?;
        Ok(Engine {
            jobs: Some(tx),
            worker: Some(handle),
            info,
            failures: LoadFailures::default(),
            queued,
            busy,
        })
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Requests waiting for the worker.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// True while the worker is transcribing.
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed)
    }

    fn send(&self, job: Job) -> Result<(), SttError> {
        let jobs = self.jobs.as_ref().ok_or(SttError::Stopped)?;
        self.queued.fetch_add(1, Ordering::Relaxed);
        jobs.try_send(job).map_err(|e| {
            let queued = self.queued.fetch_sub(1, Ordering::Relaxed) - 1;
            match e {
                TrySendError::Full(_) => SttError::Busy { queued },
                TrySendError::Disconnected(_) => SttError::Stopped,
            }
        })
    }

    /// Queues a transcription; the answer arrives on the returned receiver.
    pub fn submit(
        &self,
        request: Request,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<Transcript, SttError>>, SttError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Job::Transcribe(request, tx))?;
        Ok(rx)
    }

    /// Transcribes on the worker and waits for it (for blocking callers).
    pub fn transcribe_blocking(&self, request: Request) -> Result<Transcript, SttError> {
        self.submit(request)?
            .blocking_recv()
            .map_err(|_| SttError::Stopped)?
    }

    /// Queues a language detection (multilingual models only).
    pub fn submit_detect(
        &self,
        audio: Vec<f32>,
        cancel: Arc<AtomicBool>,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<Vec<LanguageGuess>, SttError>>, SttError>
    {
        if !self.info.multilingual {
            return Err(SttError::EnglishOnly {
                language: "detection".into(),
                model: self.info.name.clone(),
            });
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Job::Detect(audio, cancel, tx))?;
        Ok(rx)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Closing the queue ends the worker's loop.
        drop(self.jobs.take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

struct Worker {
    recognizer: Box<dyn Recognizer>,
    hooks: Hooks,
    queued: Arc<AtomicUsize>,
    busy: Arc<AtomicBool>,
}

/// whisper.cpp: one context, a fresh state per request.
struct Whisper {
    ctx: WhisperContext,
    config: EngineConfig,
    multilingual: bool,
    name: String,
    info: ModelInfo,
}

/// The model's name: the store's `ggml-<name>.bin` (whisper.cpp's own
/// naming) without its prefix and extension.
fn model_name(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().trim_start_matches("ggml-").to_owned())
        .unwrap_or_default()
}

/// Whisper loaded on the first request ([`EngineConfig::lazy`]); its
/// info read from the model's header at start.
pub(crate) struct LazyWhisper {
    config: EngineConfig,
    info: ModelInfo,
    loaded: Option<Whisper>,
    failures: LoadFailures,
}

impl LazyWhisper {
    /// The model's header read and checked; nothing loaded yet.
    pub(crate) fn checked(config: EngineConfig, failures: &LoadFailures) -> Result<Self, SttError> {
        let header =
            hark_models::ggml::read_header(&config.model).map_err(|e| SttError::ModelLoad {
                path: config.model.clone(),
                reason: e.to_string(),
            })?;
        let info = ModelInfo {
            path: config.model.clone(),
            name: model_name(&config.model),
            kind: header.kind.to_owned(),
            multilingual: header.language == hark_models::Language::Multilingual,
            quantisation: header.quantisation,
            load_ms: 0,
            other_languages: None,
        };
        tracing::info!(model = %info.path.display(), "speech-to-text model checked; it loads when first needed");
        Ok(Self {
            config,
            info,
            loaded: None,
            failures: failures.clone(),
        })
    }

    fn whisper(&mut self) -> Result<&mut Whisper, SttError> {
        let whisper = match self.loaded.take() {
            Some(whisper) => whisper,
            None => {
                let loaded = Whisper::load(self.config.clone());
                let failure = loaded.as_ref().err().map(ToString::to_string);
                self.failures.set(&self.info.name, failure);
                loaded?
            }
        };
        Ok(self.loaded.insert(whisper))
    }
}

impl Recognizer for LazyWhisper {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError> {
        self.whisper()?.transcribe(request)
    }

    fn detect(&mut self, audio: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
        self.whisper()?.detect(audio)
    }
}

impl Recognizer for Whisper {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError> {
        Whisper::transcribe(self, request)
    }

    fn detect(&mut self, audio: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
        Whisper::detect(self, audio)
    }
}

impl Worker {
    fn run(mut self, jobs: Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            self.busy.store(true, Ordering::Relaxed);
            if let Some(hook) = &self.hooks.on_busy {
                (hook.0)(true);
            }
            if let Some(before) = self.hooks.before_request {
                before();
            }
            // The worker is idle from the moment the result exists: the
            // caller sees "ready" as soon as it has its answer, and the
            // clean-up after it is no transcription.
            match job {
                Job::Transcribe(request, reply) => {
                    // A caller that gave up (dropped its receiver) needs no work.
                    let result = if reply.is_closed() || request.cancel.load(Ordering::Relaxed) {
                        Err(SttError::Cancelled)
                    } else {
                        self.recognizer.transcribe(request)
                    };
                    self.idle();
                    let _ = reply.send(result);
                }
                Job::Detect(audio, cancel, reply) => {
                    let result = if reply.is_closed() || cancel.load(Ordering::Relaxed) {
                        Err(SttError::Cancelled)
                    } else {
                        self.recognizer.detect(&audio)
                    };
                    self.idle();
                    let _ = reply.send(result);
                }
            }
            if let Some(after) = self.hooks.after_request {
                after();
            }
        }
    }

    fn idle(&self) {
        self.busy.store(false, Ordering::Relaxed);
        if let Some(hook) = &self.hooks.on_busy {
            (hook.0)(false);
        }
    }
}

impl Whisper {
    /// Loads the model (blocking: it reads the whole file).
    fn load(config: EngineConfig) -> Result<Self, SttError> {
        let started = Instant::now();
        let path = config.model.to_string_lossy().into_owned();
        let mut params = WhisperContextParameters::default();
        params.flash_attn(config.flash_attn);
        // whisper.cpp says only that it failed; a header that read well
        // and a load that fails is almost always a damaged file.
        let damaged = |e: whisper_rs::WhisperError| SttError::ModelLoad {
            path: config.model.clone(),
            reason: format!(
                "{e} (a damaged or incomplete file? `hark models verify` checks it against its checksum)"
            ),
        };
        let ctx = WhisperContext::new_with_params(&path, params).map_err(damaged)?;
        // A state is made per request (see `Worker::decode`); making one
        // now proves the model can run before the daemon says it is ready.
        drop(ctx.create_state().map_err(damaged)?);
        let info = ModelInfo {
            path: config.model.clone(),
            name: model_name(&config.model),
            kind: ctx
                .model_type_readable_str_lossy()
                .map(|s| s.into_owned())
                .unwrap_or_default(),
            multilingual: ctx.is_multilingual(),
            quantisation: hark_models::ggml::ftype_name(ctx.model_ftype()),
            load_ms: started.elapsed().as_millis() as u64,
            other_languages: None,
        };
        tracing::info!(model = %info.path.display(), kind = %info.kind, quantisation = %info.quantisation,
            multilingual = info.multilingual, load_ms = info.load_ms, "speech-to-text model loaded");
        Ok(Self {
            ctx,
            multilingual: info.multilingual,
            name: info.name.clone(),
            config,
            info,
        })
    }

    /// The language to decode in, checked against the model.
    fn language(&self, requested: Option<&str>) -> Result<Option<String>, SttError> {
        let wanted = requested
            .filter(|l| !l.is_empty())
            .unwrap_or(&self.config.language)
            .to_ascii_lowercase();
        if !self.multilingual {
            // `auto` asks for the language spoken, which an English-only
            // model cannot tell: it would write any speech as English.
            return if wanted == "en" {
                Ok(Some("en".into()))
            } else if wanted == "auto" || whisper_rs::get_lang_id(&wanted).is_some() {
                Err(SttError::EnglishOnly {
                    language: wanted,
                    model: self.name.clone(),
                })
            } else {
                Err(SttError::UnknownLanguage(wanted))
            };
        }
        if wanted == "auto" {
            return Ok(None);
        }
        if whisper_rs::get_lang_id(&wanted).is_none() {
            return Err(SttError::UnknownLanguage(wanted));
        }
        Ok(Some(wanted))
    }

    fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError> {
        let started = Instant::now();
        let asked = self.language(request.language.as_deref())?;
        let duration = request.audio.len() as f64 / f64::from(SAMPLE_RATE);
        let mut audio = request.audio;
        if audio.len() < MIN_INPUT {
            audio.resize(MIN_INPUT, 0.0);
        }
        // `auto`: one encoder pass names the language, with its
        // probability, and the transcription runs in it. Left to
        // whisper.cpp, `auto` detects in an encoder pass of its own and
        // keeps no probability, which took a third pass.
        let (language, language_probability) = match asked {
            Some(language) => (language, None),
            None => {
                let top = self.detect(&audio)?.into_iter().next().ok_or_else(|| {
                    SttError::Whisper("language detection gave no language".into())
                })?;
                (top.language, Some(top.probability))
            }
        };
        let full = self.ctx.model_n_audio_ctx().max(1) as u32;
        // English-only models only: the fit was measured on tiny.en and
        // recorded English (docs/benchmarks.md, Files); a multilingual
        // model, and the other languages it serves, keep the whole window.
        let fitted = fitted_ctx(
            audio.len(),
            self.config.audio_ctx_margin,
            full,
            self.config.fit_audio_ctx && !self.ctx.is_multilingual(),
        );
        let mut result = self.decode(
            &audio,
            &language,
            fitted,
            request.word_timestamps,
            &request.cancel,
        )?;
        let mut refit = false;
        if fitted < full && looks_degenerate(&result, duration) {
            tracing::debug!(
                audio_ctx = fitted,
                text = %result.iter().map(|s| s.text.as_str()).collect::<String>(),
                "fitted encoder context gave a degenerate result; decoding at the full context"
            );
            result = self.decode(
                &audio,
                &language,
                full,
                request.word_timestamps,
                &request.cancel,
            )?;
            refit = true;
        }
        let segments = result;
        let total = segments.len();
        let threshold = self.config.no_speech_threshold;
        let kept: Vec<Segment> = segments
            .into_iter()
            .filter(|s| {
                let silent = s.no_speech_probability > threshold && s.confidence < 0.5;
                let keep = !(silent || s.text.trim().is_empty() || is_annotation(&s.text));
                if !keep {
                    tracing::debug!(text = %s.text, no_speech = s.no_speech_probability,
                        confidence = s.confidence, "segment dropped as not speech");
                }
                keep
            })
            .map(cut_loop)
            // Padding is silence; nothing said can end after the audio does.
            .map(|mut s| {
                s.end = s.end.min(duration);
                s.start = s.start.min(s.end);
                s
            })
            .collect();
        let dropped = total - kept.len();
        let text = kept
            .iter()
            .map(|s| s.text.trim())
            .collect::<Vec<_>>()
            .join(" ");
        let confidence = if kept.is_empty() {
            0.0
        } else {
            kept.iter().map(|s| s.confidence).sum::<f32>() / kept.len() as f32
        };
        // After whisper.cpp's own fallback: the kept segments judged as a
        // whole, by the same rules.
        let doubt = (!kept.is_empty())
            .then(|| {
                fallback::doubt(fallback::Judged {
                    text: &text,
                    mean_log_prob: kept.iter().map(|s| f64::from(s.mean_log_prob)).sum::<f64>()
                        / kept.len() as f64,
                    truncated: false,
                })
            })
            .flatten();
        Ok(Transcript {
            text,
            language,
            language_probability,
            duration,
            segments: kept,
            confidence,
            dropped_segments: dropped,
            audio_ctx: if refit { full } else { fitted },
            refit,
            elapsed_ms: started.elapsed().as_millis() as u64,
            truncated: false,
            doubt,
            model: self.name.clone(),
        })
    }

    /// One whisper.cpp pass in `language` (a code: detection happens
    /// before): the segments.
    fn decode(
        &mut self,
        audio: &[f32],
        language: &str,
        audio_ctx: u32,
        words: bool,
        cancel: &Arc<AtomicBool>,
    ) -> Result<Vec<Segment>, SttError> {
        let strategy = if self.config.beam_size > 1 {
            SamplingStrategy::BeamSearch {
                beam_size: i32::from(self.config.beam_size),
                patience: -1.0,
            }
        } else {
            SamplingStrategy::Greedy { best_of: 1 }
        };
        let mut params = FullParams::new(strategy);
        params.set_n_threads(i32::from(self.config.threads.max(1)));
        params.set_language(Some(language));
        params.set_audio_ctx(audio_ctx as i32);
        // Each request stands alone: no text carried over from the last one.
        params.set_no_context(true);
        params.set_token_timestamps(words);
        params.set_no_speech_thold(self.config.no_speech_threshold);
        // whisper.cpp's temperature fallback (its own defaults, set here so
        // that both engines follow the rules of `crate::fallback`): a pass
        // whose tokens average under −1 log-probability, or whose last
        // tokens' entropy falls under 2.4 (its stand-in for whisper's
        // compression ratio: a loop), is decoded again 0.2 warmer.
        params.set_temperature(0.0);
        params.set_temperature_inc(fallback::TEMPERATURES[0]);
        params.set_entropy_thold(fallback::WHISPER_ENTROPY_MIN);
        params.set_logprob_thold(fallback::MEAN_LOG_PROB_MIN as f32);
        params.set_print_progress(false);
        params.set_print_realtime(false);
        params.set_print_special(false);
        params.set_print_timestamps(false);
        // whisper-rs 0.16's closure-based abort callback hands its
        // trampoline a pointer of the wrong type (it always aborts), so the
        // raw C callback reads the cancel flag directly.
        // SAFETY: the flag is an `AtomicBool` behind `cancel`, which outlives
        // `full` below; the callback only loads it.
        unsafe {
            params.set_abort_callback(Some(abort_requested));
            params.set_abort_callback_user_data(Arc::as_ptr(cancel) as *mut std::ffi::c_void);
        }
        // A fresh state per pass (5–15 ms), dropped at the end of it:
        // whisper.cpp's temperature fallback draws from a generator kept in
        // the state, so a reused state would make the same audio transcribe
        // differently depending on what came before; and only one state is
        // ever alive, which keeps the peak memory down.
        let mut state = self.fresh_state()?;
        let outcome = state.full(params, audio);
        if cancel.load(Ordering::Relaxed) {
            return Err(SttError::Cancelled);
        }
        outcome.map_err(|e| SttError::Whisper(e.to_string()))?;

        let eot = self.ctx.token_eot();
        let mut segments = Vec::new();
        for segment in state.as_iter() {
            let text = segment
                .to_str_lossy()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            let mut probs = Vec::new();
            let mut log_probs = 0.0f32;
            let mut word_list: Vec<Word> = Vec::new();
            for i in 0..segment.n_tokens() {
                let Some(token) = segment.get_token(i) else {
                    continue;
                };
                let data = token.token_data();
                // Special tokens (timestamps, end of text, language) carry
                // no words.
                if data.id >= eot {
                    continue;
                }
                probs.push(data.p);
                log_probs += data.plog;
                if words {
                    let piece = token
                        .to_str_lossy()
                        .map(|t| t.into_owned())
                        .unwrap_or_default();
                    let (t0, t1) = (data.t0 as f64 / 100.0, data.t1 as f64 / 100.0);
                    match word_list.last_mut() {
                        Some(last) if !piece.starts_with(' ') && !piece.is_empty() => {
                            last.word.push_str(&piece);
                            last.end = t1.max(last.end);
                            last.probability = last.probability.min(data.p);
                        }
                        _ => word_list.push(Word {
                            word: piece,
                            start: t0,
                            end: t1,
                            probability: data.p,
                        }),
                    }
                }
            }
            for w in &mut word_list {
                w.word = w.word.trim().to_owned();
            }
            word_list.retain(|w| !w.word.is_empty());
            let confidence = if probs.is_empty() {
                0.0
            } else {
                probs.iter().sum::<f32>() / probs.len() as f32
            };
            segments.push(Segment {
                start: segment.start_timestamp() as f64 / 100.0,
                end: segment.end_timestamp() as f64 / 100.0,
                text: text.trim().to_owned(),
                confidence,
                no_speech_probability: segment.no_speech_probability(),
                words: words.then_some(word_list),
                mean_log_prob: log_probs / probs.len().max(1) as f32,
            });
        }
        Ok(segments)
    }

    fn fresh_state(&self) -> Result<WhisperState, SttError> {
        self.ctx
            .create_state()
            .map_err(|e| SttError::Whisper(format!("cannot make a whisper state: {e}")))
    }

    fn detect(&mut self, audio: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
        let threads = usize::from(self.config.threads.max(1));
        let mut state = self.fresh_state()?;
        state
            .pcm_to_mel(audio, threads)
            .map_err(|e| SttError::Whisper(e.to_string()))?;
        let (_, probs) = state
            .lang_detect(0, threads)
            .map_err(|e| SttError::Whisper(e.to_string()))?;
        let mut guesses: Vec<LanguageGuess> = probs
            .iter()
            .enumerate()
            .filter_map(|(id, p)| {
                let id = id as i32;
                Some(LanguageGuess {
                    language: whisper_rs::get_lang_str(id)?.to_owned(),
                    name: whisper_rs::get_lang_str_full(id)?.to_owned(),
                    probability: *p,
                })
            })
            .collect();
        guesses.sort_by(|a, b| b.probability.total_cmp(&a.probability));
        guesses.truncate(5);
        Ok(guesses)
    }
}

/// whisper.cpp's and ggml's log lines into `tracing`, whisper.cpp's through
/// [`whisper_log`] rather than whisper-rs's own hook.
fn install_logging() {
    static OURS: std::sync::Once = std::sync::Once::new();
    whisper_rs::install_logging_hooks();
    // SAFETY: the callback is a plain function that lives for the whole
    // program and takes no user data.
    OURS.call_once(|| unsafe {
        whisper_rs_sys::whisper_log_set(Some(whisper_log), std::ptr::null_mut());
    });
}

/// How whisper.cpp's log line `text` at `level` is logged: as whisper-rs
/// logs it (its target, so `whisper_rs=warn` filters it), except that a
/// cancelled transcription's "failed to encode" or "failed to decode" is
/// no error: the abort callback stopped whisper.cpp because the caller
/// asked, and a real failure comes back to the caller as an error it
/// reports.
fn whisper_level(level: whisper_rs_sys::ggml_log_level, text: &str) -> tracing::Level {
    match level {
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_ERROR
            if text.ends_with("failed to encode") || text.ends_with("failed to decode") =>
        {
            tracing::Level::DEBUG
        }
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_ERROR => tracing::Level::ERROR,
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_WARN => tracing::Level::WARN,
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_INFO => tracing::Level::INFO,
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_DEBUG => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    }
}

unsafe extern "C" fn whisper_log(
    level: whisper_rs_sys::ggml_log_level,
    text: *const std::ffi::c_char,
    _: *mut std::ffi::c_void,
) {
    if text.is_null() {
        return;
    }
    // SAFETY: whisper.cpp passes a NUL-terminated string valid for the call.
    let text = unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    const TARGET: &str = "whisper_rs::whisper_logging_hook";
    match whisper_level(level, text) {
        tracing::Level::ERROR => tracing::error!(target: TARGET, "{text}"),
        tracing::Level::WARN => tracing::warn!(target: TARGET, "{text}"),
        tracing::Level::INFO => tracing::info!(target: TARGET, "{text}"),
        tracing::Level::DEBUG => tracing::debug!(target: TARGET, "{text}"),
        _ => tracing::trace!(target: TARGET, "{text}"),
    }
}

/// whisper.cpp's abort callback: the request's cancel flag.
unsafe extern "C" fn abort_requested(flag: *mut std::ffi::c_void) -> bool {
    // SAFETY: `decode` passes a pointer to an `AtomicBool` it keeps alive
    // for the whole call.
    unsafe { (*(flag as *const AtomicBool)).load(Ordering::Relaxed) }
}

/// The languages a model understands (ISO 639-1 codes, whisper's own
/// order): every one whisper knows for a multilingual model, English for
/// an English-only one.
pub fn languages(multilingual: bool) -> Vec<String> {
    if !multilingual {
        return vec!["en".to_owned()];
    }
    (0..=whisper_rs::get_lang_max_id())
        .filter_map(whisper_rs::get_lang_str)
        .map(str::to_owned)
        .collect()
}

/// The encoder context for `samples` of audio: the audio's frames plus
/// `margin`, rounded up to a multiple of 64 (ggml's kernels prefer it), or
/// the full context when fitting is off or would not save anything.
pub fn fitted_ctx(samples: usize, margin: u16, full: u32, fit: bool) -> u32 {
    if !fit {
        return full;
    }
    let frames = (samples as f64 / f64::from(SAMPLE_RATE) * CTX_PER_SECOND).ceil() as u32;
    let ctx = (frames + u32::from(margin)).div_ceil(64) * 64;
    ctx.min(full)
}

/// whisper's descriptions of non-speech — `[BLANK_AUDIO]`, `(music)`,
/// `*laughs*` — which are not words anyone said.
pub fn is_annotation(text: &str) -> bool {
    let t = text.trim();
    let wrapped = |open: char, close: char| {
        t.starts_with(open)
            && t.ends_with(close)
            && t[1..t.len() - 1].chars().all(|c| c != open && c != close)
    };
    t.len() >= 2 && (wrapped('[', ']') || wrapped('(', ')') || wrapped('*', '*'))
}

/// Signs that whisper lost its way, as it does when the encoder context is
/// a little too small for the audio: the same run of words repeated back to
/// back, or more words than anyone says in the time.
/// A segment still looping after whisper.cpp's fallback (every
/// temperature failed, and it keeps the last) loses the loop at its end:
/// the words said once are kept ([`fallback::loop_cut`]). Only a segment
/// that compresses like a loop is touched, so a person's own "no, no, no"
/// stays.
fn cut_loop(mut segment: Segment) -> Segment {
    if fallback::compression_ratio(&segment.text) <= fallback::COMPRESSION_RATIO_MAX {
        return segment;
    }
    let said: Vec<&str> = segment.text.split_whitespace().collect();
    let words: Vec<String> = said.iter().map(|w| plain(w)).collect();
    if let Some(at) = fallback::loop_cut(&words) {
        tracing::debug!(text = %segment.text, kept = at, "a looping segment cut");
        let kept = said[..at].join(" ");
        segment.text = kept.trim_end_matches([',', ';']).to_owned();
        if let Some(timed) = segment.words.as_mut() {
            timed.truncate(at);
        }
    }
    segment
}

/// A whitespace-separated piece of a transcript as the word it is:
/// lower-case, without the punctuation around it.
fn plain(piece: &str) -> String {
    piece
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase()
}

pub fn looks_degenerate(segments: &[Segment], duration: f64) -> bool {
    let text: String = segments
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let words: Vec<String> = text
        .split_whitespace()
        .map(plain)
        .filter(|w| !w.is_empty())
        .collect();
    // Fast speech is about 4 words a second; 6 is not speech.
    if words.len() as f64 > 6.0 * duration.max(1.0) + 2.0 {
        return true;
    }
    // A run of 3 or more words immediately repeated.
    for n in 3..=words.len() / 2 {
        for start in 0..=words.len() - 2 * n {
            if words[start..start + n] == words[start + n..start + 2 * n] {
                return true;
            }
        }
    }
    // The same sentence twice (segments repeated).
    segments
        .windows(2)
        .any(|w| w[0].text.len() > 8 && w[0].text.trim() == w[1].text.trim())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_multilingual_model_offers_whispers_languages() {
        assert_eq!(super::languages(false), ["en"]);
        let all = super::languages(true);
        assert!(all.len() > 90, "{}", all.len());
        for code in ["en", "de", "sv", "zh", "haw"] {
            assert!(all.iter().any(|l| l == code), "{code} in {all:?}");
        }
    }

    fn segment(text: &str) -> super::Segment {
        super::Segment {
            start: 0.0,
            end: 5.0,
            text: text.into(),
            confidence: 0.5,
            no_speech_probability: 0.0,
            words: None,
            mean_log_prob: 0.0,
        }
    }

    #[test]
    fn a_segment_still_looping_keeps_what_was_said_once() {
        let looped = segment(
            " I am a slave of the slave of the slave of the slave of the slave of the slave of the slave of the slave,",
        );
        assert_eq!(super::cut_loop(looped).text, "I am a slave of the");
        let runaway = segment(
            " Montreal, forced, a line, a line, a line, a line, a line, a line, a line, a line, a line, a line, a line, a line, a",
        );
        assert_eq!(super::cut_loop(runaway).text, "Montreal, forced, a line");
        // A person repeating themselves does not compress like a loop.
        for said in [
            " No, no, no, not that one.",
            " Word, another word, here's some more word, word, word, word.",
        ] {
            assert_eq!(super::cut_loop(segment(said)).text, said);
        }
    }

    #[test]
    fn a_cancelled_encoder_is_no_error_in_the_log() {
        use whisper_rs_sys::{
            ggml_log_level_GGML_LOG_LEVEL_ERROR as ERROR,
            ggml_log_level_GGML_LOG_LEVEL_WARN as WARN,
        };
        assert_eq!(
            whisper_level(ERROR, "whisper_full_with_state: failed to encode"),
            tracing::Level::DEBUG
        );
        assert_eq!(
            whisper_level(ERROR, "whisper_full_with_state: failed to decode"),
            tracing::Level::DEBUG
        );
        assert_eq!(
            whisper_level(ERROR, "whisper_init: failed to load model"),
            tracing::Level::ERROR
        );
        assert_eq!(
            whisper_level(WARN, "failed to encode"),
            tracing::Level::WARN
        );
    }

    use super::*;

    fn seg(text: &str) -> Segment {
        Segment {
            start: 0.0,
            end: 1.0,
            text: text.into(),
            confidence: 0.9,
            no_speech_probability: 0.0,
            words: None,
            mean_log_prob: 0.0,
        }
    }

    #[test]
    fn fitted_context_covers_the_audio_plus_margin() {
        // 3 s = 150 frames, + 128 = 278 → 320.
        assert_eq!(fitted_ctx(48_000, 128, 1500, true), 320);
        assert_eq!(fitted_ctx(48_000, 128, 1500, false), 1500);
        // 29 s needs more than the full context allows.
        assert_eq!(fitted_ctx(29 * 16_000, 128, 1500, true), 1500);
        assert_eq!(fitted_ctx(0, 0, 1500, true), 0);
    }

    #[test]
    fn repeated_runs_and_impossible_rates_are_degenerate() {
        assert!(!looks_degenerate(
            &[seg("The quick brown fox jumps over the lazy dog.")],
            3.0
        ));
        assert!(looks_degenerate(
            &[seg(
                "the quick brown fox the quick brown fox the quick brown fox"
            )],
            5.0
        ));
        assert!(looks_degenerate(
            &[seg("Turn on the lights."), seg("Turn on the lights.")],
            3.0
        ));
        let many = "word ".repeat(40);
        assert!(looks_degenerate(&[seg(many.trim())], 3.0));
        // Repeating one or two words is how people talk ("no, no").
        assert!(!looks_degenerate(&[seg("No, no, I said stop.")], 2.0));
    }

    #[test]
    fn non_speech_annotations_are_recognised() {
        for t in ["[BLANK_AUDIO]", " (upbeat music)", "*laughs*", "[Music]"] {
            assert!(is_annotation(t), "{t}");
        }
        for t in ["Turn on (the) lights", "[a] and [b]", "", "(", "hello"] {
            assert!(!is_annotation(t), "{t}");
        }
    }

    #[test]
    fn ggml_file_types_name_their_quantisation() {
        use hark_models::ggml::ftype_name;
        assert_eq!(ftype_name(1), "f16");
        assert_eq!(ftype_name(2007), "q8_0");
        assert_eq!(ftype_name(2009), "q5_1");
    }
}
