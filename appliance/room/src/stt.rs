//! Speech to text inside the daemon: loads the whisper model at start (a
//! missing model is a reported state, not a failed start: the other tools
//! keep working and the transcription tools say how to install one), and
//! holds what the transcription tools need — the engine, the directories
//! agents may name files in, and the size limits.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hark_audio::{decode, files::AllowedDirs, ring::Ring};
use hark_stt::engine::Engine;
use hark_stt::recognizer::{BusyHook, Request, SttError, Transcript};

use hark_core::events::Bus;
use hark_core::room::{ModelList, ModelPurpose, ModelRole, ModelSummary};
use hark_core::status::{Subsystem, SubsystemState, Subsystems, fixed};
use hark_models::ModelKind;

use crate::{
    config::RoomConfig,
    events::{Event, Part},
};

/// What `transcribe_voice` needs from the audio engine.
pub struct Microphone {
    pub ring: Arc<Ring>,
    pub vad: hark_audio::config::VadConfig,
    pub preroll: Duration,
    /// With echo cancellation: what decides a barge-in by voice.
    pub barge_in: Option<BargeIn>,
    /// The capture thread's counters, for `get_status`.
    pub stats: Arc<hark_audio::CaptureStats>,
}

/// Barge-in by voice, with echo cancellation on.
#[derive(Clone)]
pub struct BargeIn {
    /// The microphone after the canceller's suppressor too: echo never
    /// passes for a person there (same positions as the listening ring).
    pub ring: Arc<Ring>,
    /// How much speech stops Hark (`[audio.echo] barge_in_ms`).
    pub ms: u32,
}

/// The end-of-turn model, shared by the listens (one asks at a time).
pub type Turn = Arc<std::sync::Mutex<hark_stt::turn::SmartTurn>>;

pub struct SpeechToText {
    engine: Result<Arc<Engine>, String>,
    /// The end-of-turn model, when the config asks for it and it loaded.
    pub turn: Option<Turn>,
    /// The live engine for the microphone (`stt.live_model`), when it
    /// loaded.
    live: Option<Arc<Engine>>,
    /// `stt.language`: a language other than English sends the microphone
    /// to whisper.
    language: String,
    /// `stt.live_files_seconds` and `stt.live_wyoming_seconds`: audio
    /// handed over that way up to this long may go to the live engine (0:
    /// never).
    live_files_seconds: f64,
    live_wyoming_seconds: f64,
    /// `stt.live_unsure_below`: a live reading of audio handed over less
    /// sure than this is heard again by whisper (0: never).
    live_unsure_below: f32,
    pub files: AllowedDirs,
    /// Where transcriptions may be written (`stt.output_dirs`).
    pub outputs: AllowedDirs,
    pub limits: decode::Limits,
    /// Default wait for speech, `mcp.record_timeout`.
    pub record_timeout: Duration,
    /// `stt.enabled`: without it, no engine is no failure.
    enabled: bool,
    /// `stt.partial_ms`: how often the live engine transcribes speech so
    /// far (`None`: never).
    pub partial_every: Option<Duration>,
    /// `stt.speculative`: start the final pass at the first pause.
    pub speculative: bool,
    /// The store and what is set up from it, for `list_models`.
    pub models: ModelSettings,
}

/// The `[stt]` model settings: the store, and the models set up from it.
#[derive(Debug, Clone)]
pub struct ModelSettings {
    pub dir: PathBuf,
    pub model: String,
    pub multilingual: String,
    pub live: String,
    pub turn: String,
}

impl ModelSettings {
    fn new(config: &crate::config::SttConfig) -> Self {
        Self {
            dir: config.models_dir.clone(),
            model: config.model.trim().to_owned(),
            multilingual: config.multilingual_model.trim().to_owned(),
            live: config.live_model.trim().to_owned(),
            turn: config.turn_model.trim().to_owned(),
        }
    }

    /// The installed models (blocking: it reads the store and the
    /// whisper files' headers). `live`: the live engine's model, when it
    /// runs (a transcription call may name it).
    pub fn list(&self, live: Option<&str>) -> Result<ModelList, hark_models::StoreError> {
        let entries = if self.dir.is_dir() {
            hark_models::Store::open(&self.dir)?.list()?.models
        } else {
            Vec::new()
        };
        let models = entries
            .into_iter()
            .map(|entry| {
                let path = self.dir.join(&entry.file);
                let header = (entry.kind == ModelKind::Whisper)
                    .then(|| hark_models::ggml::read_header(&path).ok())
                    .flatten();
                let purpose = match entry.kind {
                    ModelKind::Whisper => ModelPurpose::Transcription,
                    ModelKind::Moonshine => ModelPurpose::Live,
                    ModelKind::SmartTurn => ModelPurpose::EndOfTurn,
                };
                let mut languages = match entry.language {
                    hark_models::Language::En => vec!["en".to_owned()],
                    hark_models::Language::Multilingual => hark_stt::whisper::languages(true),
                    hark_models::Language::Any => Vec::new(),
                };
                // whisper.cpp's table is large-v3's; older models know fewer.
                if let Some(header) = &header {
                    languages.truncate(header.languages);
                }
                let roles = [
                    (&self.model, ModelRole::Default),
                    (&self.multilingual, ModelRole::OtherLanguages),
                    (&self.live, ModelRole::Live),
                    (&self.turn, ModelRole::EndOfTurn),
                ]
                .into_iter()
                .filter(|(setting, _)| **setting == entry.name)
                .map(|(_, role)| role)
                .collect();
                let per_call = match entry.kind {
                    ModelKind::Whisper => true,
                    ModelKind::Moonshine => live == Some(entry.name.as_str()),
                    ModelKind::SmartTurn => false,
                };
                ModelSummary {
                    name: entry.name,
                    purpose,
                    size: header.map(|h| h.kind.to_owned()),
                    language: entry.language.to_string(),
                    languages,
                    quantisation: entry.quantisation,
                    bytes: entry.size,
                    roles,
                    per_call,
                }
            })
            .collect();
        Ok(ModelList {
            models,
            default: self.model.clone(),
        })
    }
}

impl SpeechToText {
    /// Loads the model (blocking: run it off the async runtime) and reports
    /// the subsystem's state.
    pub fn start(config: &RoomConfig, bus: &Bus, subsystems: &Subsystems) -> Self {
        let files = AllowedDirs::new(config.stt.audio_dirs.clone(), "stt.audio_dirs");
        let outputs = AllowedDirs::new(config.stt.output_dirs.clone(), "stt.output_dirs");
        let limits = decode::Limits {
            max_bytes: config.stt.max_audio_bytes,
            max_seconds: config.stt.max_audio_seconds,
        };
        let record_timeout = Duration::from_secs_f64(config.record_timeout);
        let engine = if !config.stt.enabled {
            subsystems.set(Subsystem::Stt, fixed(SubsystemState::Disabled));
            Err("speech-to-text is disabled on this appliance (stt.enabled = false)".to_owned())
        } else {
            let mut engine_config = config.stt.engine();
            engine_config.on_busy = Some(transcription_events(bus));
            match Engine::start(engine_config) {
                Ok(engine) => {
                    let engine = Arc::new(engine);
                    let live = Arc::clone(&engine);
                    subsystems.set(
                        Subsystem::Stt,
                        Arc::new(move || {
                            let info = live.info();
                            let activity = if live.busy() {
                                format!("transcribing, {} queued", live.queued())
                            } else {
                                "ready".to_owned()
                            };
                            let languages = match (&info.other_languages, info.multilingual) {
                                (Some(other), _) => format!(", English; other languages: {other}"),
                                (None, true) => ", multilingual".to_owned(),
                                (None, false) => ", English".to_owned(),
                            };
                            let mut failed = String::new();
                            for (model, why) in live.load_failures() {
                                // The main model: nothing can be transcribed.
                                if model == info.name {
                                    return SubsystemState::unavailable(why);
                                }
                                failed.push_str(&format!("; {model} cannot load: {why}"));
                            }
                            SubsystemState::Running(format!(
                                "{activity}; model {} ({} {}{languages}){failed}",
                                info.name, info.kind, info.quantisation,
                            ))
                        }),
                    );
                    Ok(engine)
                }
                Err(e) => {
                    tracing::error!(error = %e, "speech-to-text is unavailable");
                    // The person relies on it: the error light shows.
                    bus.publish(Event::Health {
                        part: Part::SpeechToText,
                        ok: false,
                        state: e.to_string(),
                    });
                    subsystems.set(Subsystem::Stt, fixed(SubsystemState::unavailable(&e)));
                    Err(e.to_string())
                }
            }
        };
        // The live engine and the end-of-turn model serve the microphone
        // only: without one (or without speech to text) they are not loaded.
        let hears = config.stt.enabled && config.audio.enabled;
        let live = if hears {
            start_live(config, bus, subsystems)
        } else {
            None
        };
        let turn = if hears {
            start_turn(config, subsystems)
        } else {
            None
        };
        if let Some(live) = &live {
            // The status line says both.
            let live = Arc::clone(live);
            subsystems.extend(
                Subsystem::Stt,
                Arc::new(move || {
                    let activity = if live.busy() { "transcribing" } else { "ready" };
                    format!(
                        "live: {activity}, model {} ({})",
                        live.info().name,
                        live.info().kind
                    )
                }),
            );
        }
        Self {
            engine,
            turn,
            live,
            language: config.stt.language.clone(),
            live_files_seconds: f64::from(config.stt.live_files_seconds),
            live_wyoming_seconds: f64::from(config.stt.live_wyoming_seconds),
            live_unsure_below: config.stt.live_unsure_below,
            files,
            outputs,
            limits,
            record_timeout,
            enabled: config.stt.enabled,
            partial_every: (config.stt.partial_ms > 0)
                .then(|| Duration::from_millis(u64::from(config.stt.partial_ms))),
            speculative: config.stt.speculative,
            models: ModelSettings::new(&config.stt),
        }
    }

    /// No speech to text (a room built without engines, in tests).
    pub fn off() -> Self {
        let config = RoomConfig::default();
        Self {
            engine: Err("speech-to-text is disabled in this room".to_owned()),
            turn: None,
            live: None,
            language: config.stt.language.clone(),
            live_files_seconds: 0.0,
            live_wyoming_seconds: 0.0,
            live_unsure_below: 0.0,
            files: AllowedDirs::new(Vec::new(), "stt.audio_dirs"),
            outputs: AllowedDirs::new(Vec::new(), "stt.output_dirs"),
            limits: decode::Limits {
                max_bytes: config.stt.max_audio_bytes,
                max_seconds: config.stt.max_audio_seconds,
            },
            record_timeout: Duration::from_secs_f64(config.record_timeout),
            enabled: false,
            partial_every: None,
            speculative: false,
            models: ModelSettings::new(&config.stt),
        }
    }

    /// Speech to text is enabled but has no engine (the model is missing or
    /// broken): the appliance cannot hear anyone until someone fixes it.
    pub fn failed(&self) -> bool {
        self.enabled && self.engine.is_err()
    }

    /// The engine, or why there is none.
    pub fn engine(&self) -> Result<&Arc<Engine>, &str> {
        self.engine.as_ref().map_err(String::as_str)
    }

    /// The engine that hears the microphone in `language` (`None`: the
    /// configured one): the live engine for English, else whisper (`auto`
    /// included: the live engine cannot tell the language spoken).
    pub fn microphone(&self, language: Option<&str>) -> Result<&Arc<Engine>, &str> {
        match &self.live {
            Some(live) if self.english(language) => Ok(live),
            _ => self.engine(),
        }
    }

    /// Whether `language` (`None` or empty: `stt.language`) is English,
    /// the only language the live engine hears.
    fn english(&self, language: Option<&str>) -> bool {
        language
            .filter(|l| !l.is_empty())
            .unwrap_or(&self.language)
            .eq_ignore_ascii_case("en")
    }

    /// The live engine, if it runs.
    pub fn live(&self) -> Option<&Arc<Engine>> {
        self.live.as_ref()
    }

    /// The engine for audio handed over (a file, Wyoming's samples) when
    /// the caller names no model, given `whisper`, the one it otherwise
    /// goes to: the live engine for English audio no longer than the
    /// limit for its way in (`stt.live_files_seconds`,
    /// `stt.live_wyoming_seconds`) that needs no word timings ([`Handed`]),
    /// unless something already waits for it. The microphone comes first:
    /// a person's turn never waits behind a queue of handed audio, only the
    /// one the live engine is on and at most one more (beyond that it goes
    /// to whisper). What is running is not counted: a Wyoming stream's last
    /// draft, stopping as its final pass is asked, must not send that pass
    /// to whisper.
    pub fn for_handed<'a>(
        &'a self,
        whisper: &'a Arc<Engine>,
        handed: Handed<'_>,
    ) -> &'a Arc<Engine> {
        let limit = match handed.via {
            Via::File => self.live_files_seconds,
            Via::Wyoming => self.live_wyoming_seconds,
        };
        match &self.live {
            Some(live)
                if self.english(handed.language)
                    && !handed.timings
                    && limit > 0.0
                    && handed.seconds <= limit
                    && live.queued() == 0 =>
            {
                live
            }
            _ => whisper,
        }
    }

    /// Hears audio handed over with no model named: on the engine
    /// [`Self::for_handed`] picks, and when that is the live engine and it
    /// was less sure than `stt.live_unsure_below` (its mean token
    /// probability), again on `whisper`, whose transcript is kept, with the
    /// time of both. The live engine misses most where it is unsure (a
    /// game's clipped radio lines, odd voices) and is as good as whisper
    /// where it is sure, so the slow pass is spent on the clips that need
    /// it (docs/benchmarks.md, Files).
    pub async fn hear_handed(
        &self,
        whisper: &Arc<Engine>,
        handed: Handed<'_>,
        request: Request,
    ) -> Result<Transcript, SttError> {
        let engine = self.for_handed(whisper, handed);
        let again = (!Arc::ptr_eq(engine, whisper) && self.live_unsure_below > 0.0)
            .then(|| (request.audio.clone(), request.language.clone()));
        let first = heard(engine, request).await?;
        // 1: every reading is heard again (a mean probability can be 1).
        let unsure = first.confidence < self.live_unsure_below || self.live_unsure_below >= 1.0;
        let Some((audio, language)) = again.filter(|_| unsure) else {
            return Ok(first);
        };
        let mut request = Request::new(audio);
        request.language = language;
        let mut second = heard(whisper, request).await?;
        tracing::info!(
            confidence = first.confidence,
            "the live engine was unsure of audio handed over: whisper heard it again"
        );
        second.elapsed_ms += first.elapsed_ms;
        Ok(second)
    }
}

/// `request`'s transcript on `engine`, abandoned (the worker skips or stops
/// it) if the caller goes away first.
pub async fn heard(engine: &Engine, request: Request) -> Result<Transcript, SttError> {
    let _abandon = AbandonOnDrop(Arc::clone(&request.cancel));
    engine
        .submit(request)?
        .await
        .map_err(|_| SttError::Stopped)?
}

/// Sets a request's cancel flag when dropped: a caller that went away
/// (a client that hung up) takes its request off the worker.
pub struct AbandonOnDrop(pub Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// How audio was handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// A file an agent sent or named.
    File,
    /// Samples over Wyoming (Home Assistant).
    Wyoming,
}

/// What decides which engine hears audio handed over.
#[derive(Debug, Clone, Copy)]
pub struct Handed<'a> {
    pub via: Via,
    /// The language asked for (`None`: `stt.language`).
    pub language: Option<&'a str>,
    pub seconds: f64,
    /// Word timestamps or subtitles are wanted: only whisper times words.
    pub timings: bool,
}

/// Loads the live engine (`stt.live_model`, a path or a name in the model
/// store): Moonshine on the ONNX Runtime the voices use. A failure,
/// including a name the store does not have, is said in the log and the
/// status, and whisper hears the microphone instead.
fn start_live(config: &RoomConfig, bus: &Bus, subsystems: &Subsystems) -> Option<Arc<Engine>> {
    let loaded = config
        .stt
        .live_model_dir()?
        .map_err(|e| e.to_string())
        .and_then(|dir| load_live(config, bus, &dir).map(|engine| (dir, engine)));
    match loaded {
        Ok((dir, engine)) => {
            tracing::info!(model = %dir.display(), "the live engine hears the microphone");
            Some(Arc::new(engine))
        }
        Err(why) => {
            tracing::error!(model = %config.stt.live_model, error = %why, "the live engine is unavailable; whisper hears the microphone");
            let note = format!("live engine unavailable ({why}); whisper hears the microphone");
            subsystems.extend(Subsystem::Stt, Arc::new(move || note.clone()));
            None
        }
    }
}

/// The live engine's threads: `stt.threads`, but with the end-of-turn
/// model on, one core fewer than the machine has (at least one). At every
/// pause the model is asked on its own thread while the live engine
/// transcribes the speech up to it, and the turn waits for both: on two
/// cores, Moonshine on two threads and the ask on one slowed each other
/// (asks 88 ms against 62 ms, the pause's transcription 93 against 77 ms;
/// docs/benchmarks.md, the turn).
fn live_threads(config: &RoomConfig) -> usize {
    let threads = usize::from(config.stt.threads.max(1));
    if config.audio.vad.end_of_turn != hark_audio::config::EndOfTurnRule::SmartTurn {
        return threads;
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    threads.min(cores.saturating_sub(1)).max(1)
}

/// Moonshine from `dir`, as an engine with whisper's queue and hooks.
fn load_live(config: &RoomConfig, bus: &Bus, dir: &Path) -> Result<Engine, String> {
    hark_onnx::OnnxRuntime::load(&config.tts.onnxruntime)
        .map_err(|e| e.to_string())
        .and_then(|runtime| {
            hark_stt::moonshine::MoonshineRecognizer::load(&runtime, dir, live_threads(config))
                .map_err(|e| e.to_string())
        })
        .and_then(|recognizer| {
            // The same queue, memory hooks and events as whisper's.
            let whisper = config.stt.engine();
            let hooks = hark_stt::engine::Hooks {
                queue: whisper.queue,
                before_request: whisper.before_request,
                after_request: whisper.after_request,
                on_busy: Some(transcription_events(bus)),
            };
            Engine::from_recognizer(Box::new(recognizer), hooks).map_err(|e| e.to_string())
        })
}

/// Formats a transcript as SubRip or WebVTT subtitles.
pub fn subtitles(transcript: &Transcript, vtt: bool) -> String {
    let stamp = |seconds: f64| {
        let ms = (seconds.max(0.0) * 1000.0).round() as u64;
        let (h, m, s, ms) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
        if vtt {
            format!("{h:02}:{m:02}:{s:02}.{ms:03}")
        } else {
            format!("{h:02}:{m:02}:{s:02},{ms:03}")
        }
    };
    let mut out = String::new();
    if vtt {
        out.push_str("WEBVTT\n\n");
    }
    for (i, segment) in transcript.segments.iter().enumerate() {
        if !vtt {
            out.push_str(&format!("{}\n", i + 1));
        }
        out.push_str(&format!(
            "{} --> {}\n{}\n\n",
            stamp(segment.start),
            stamp(segment.end),
            segment.text.trim()
        ));
    }
    out
}

/// `hark transcribe FILE`: loads the model and transcribes one file.
pub fn transcribe_file(
    config: &RoomConfig,
    path: &Path,
    language: Option<String>,
) -> Result<Transcript, CliSttError> {
    let limits = decode::Limits {
        max_bytes: config.stt.max_audio_bytes,
        max_seconds: config.stt.max_audio_seconds,
    };
    let audio = decode::decode_file(path, &limits)?;
    let engine = Engine::start(config.stt.engine())?;
    let mut request = hark_stt::recognizer::Request::new(audio.samples);
    request.language = language;
    Ok(engine.transcribe_blocking(request)?)
}

#[derive(Debug, thiserror::Error)]
pub enum CliSttError {
    #[error(transparent)]
    Decode(#[from] decode::DecodeError),
    #[error(transparent)]
    Stt(#[from] SttError),
}

/// Loads the end-of-turn model when the config asks for it. Without it the
/// silence rule ends turns, said in the log and the status.
fn start_turn(config: &RoomConfig, subsystems: &Subsystems) -> Option<Turn> {
    if config.audio.vad.end_of_turn != hark_audio::config::EndOfTurnRule::SmartTurn {
        return None;
    }
    // `stt.turn_model` is a path or a name in the model store.
    let loaded = config
        .stt
        .turn_model_path()
        .map_err(|e| e.to_string())
        .and_then(|path| {
            hark_onnx::OnnxRuntime::load(&config.tts.onnxruntime)
                .map_err(|e| e.to_string())
                .and_then(|runtime| {
                    hark_stt::turn::SmartTurn::load(&runtime, &path).map_err(|e| e.to_string())
                })
                .map(|model| (path, model))
        });
    let (turn, note) = match loaded {
        Ok((path, model)) => {
            tracing::info!(model = %path.display(), "the end-of-turn model decides when the person has finished");
            (
                Some(Arc::new(std::sync::Mutex::new(model))),
                "end of turn: smart-turn".to_owned(),
            )
        }
        Err(why) => {
            tracing::error!(model = %config.stt.turn_model, error = %why, "the end-of-turn model is unavailable; silence ends turns");
            (
                None,
                format!("end of turn by silence: the end-of-turn model is unavailable ({why})"),
            )
        }
    };
    subsystems.extend(Subsystem::Stt, Arc::new(move || note.clone()));
    turn
}

/// The event stream hears when an engine starts and ends a request (the
/// lights show "transcribing").
fn transcription_events(bus: &Bus) -> BusyHook {
    let bus = bus.clone();
    BusyHook(Arc::new(move |busy| {
        bus.publish(if busy {
            Event::TranscriptionStarted
        } else {
            Event::TranscriptionEnded
        })
    }))
}

#[cfg(test)]
mod tests {
    use hark_stt::engine::Hooks;
    use hark_stt::recognizer::{LanguageGuess, ModelInfo, Recognizer, Segment};

    use super::*;

    /// A recogniser that holds each request until told to go on (or told
    /// nothing more will come).
    struct Held {
        info: ModelInfo,
        go: std::sync::mpsc::Receiver<()>,
    }

    impl Recognizer for Held {
        fn info(&self) -> &ModelInfo {
            &self.info
        }
        fn transcribe(&mut self, _: Request) -> Result<Transcript, SttError> {
            let _ = self.go.recv();
            Err(SttError::Unsupported("held".into()))
        }
        fn detect(&mut self, _: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
            Ok(Vec::new())
        }
    }

    /// An English-only model's description, named `name`.
    fn info(name: &str) -> ModelInfo {
        ModelInfo {
            path: PathBuf::from(name),
            name: name.into(),
            kind: "test".into(),
            multilingual: false,
            quantisation: String::new(),
            load_ms: 0,
            other_languages: None,
        }
    }

    /// `recognizer` on a worker of its own.
    fn worker(recognizer: impl Recognizer + 'static) -> Arc<Engine> {
        let hooks = Hooks {
            queue: 4,
            ..Hooks::default()
        };
        Arc::new(Engine::from_recognizer(Box::new(recognizer), hooks).expect("the worker starts"))
    }

    fn held(name: &str) -> (Arc<Engine>, std::sync::mpsc::Sender<()>) {
        let (go, wait) = std::sync::mpsc::channel();
        let info = info(name);
        (worker(Held { info, go: wait }), go)
    }

    #[test]
    fn handed_audio_goes_to_the_live_engine_when_it_can_hear_it_and_nothing_waits() {
        let (live, go_live) = held("live");
        let (whisper, go_whisper) = held("whisper");
        let mut stt = SpeechToText::off();
        stt.live = Some(Arc::clone(&live));
        stt.live_wyoming_seconds = 20.0;
        let short = Handed {
            via: Via::Wyoming,
            language: None,
            seconds: 5.0,
            timings: false,
        };
        let to = |stt: &SpeechToText, handed| stt.for_handed(&whisper, handed).info().name.clone();
        // (language, seconds, timings) over Wyoming, and the engine.
        let cases = [
            (None, 5.0, false, "live"),
            (Some("EN"), 5.0, false, "live"),
            (None, 20.0, false, "live"),
            (None, 20.5, false, "whisper"),
            (None, 5.0, true, "whisper"),
            (Some("de"), 5.0, false, "whisper"),
            (Some("auto"), 5.0, false, "whisper"),
        ];
        for (language, seconds, timings, engine) in cases {
            let handed = Handed {
                language,
                seconds,
                timings,
                ..short
            };
            assert_eq!(to(&stt, handed), engine, "{handed:?}");
        }
        // Files have a limit of their own: 0, whisper only.
        let file = Handed {
            via: Via::File,
            ..short
        };
        assert_eq!(to(&stt, file), "whisper");
        stt.live_files_seconds = 30.0;
        assert_eq!(
            to(
                &stt,
                Handed {
                    seconds: 25.0,
                    ..file
                }
            ),
            "live"
        );

        // One request running is no reason to go elsewhere; one waiting
        // behind it is: the microphone's next pass must not queue longer.
        let _running = live.submit(Request::new(vec![0.0; 160])).expect("queued");
        let started = std::time::Instant::now();
        while !live.busy() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the worker never took it"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(to(&stt, short), "live");
        let _waiting = live.submit(Request::new(vec![0.0; 160])).expect("queued");
        assert_eq!(live.queued(), 1);
        assert_eq!(to(&stt, short), "whisper");
        assert_eq!(to(&stt, file), "whisper");

        // No live engine: whisper.
        stt.live = None;
        assert_eq!(to(&stt, short), "whisper");

        // The held requests end, so the workers can stop.
        drop((go_live, go_whisper));
    }

    /// A recogniser that answers every request with `text` at
    /// `confidence`.
    struct Sure {
        info: ModelInfo,
        text: &'static str,
        confidence: f32,
    }

    impl Recognizer for Sure {
        fn info(&self) -> &ModelInfo {
            &self.info
        }
        fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError> {
            Ok(Transcript {
                text: self.text.into(),
                language: "en".into(),
                language_probability: None,
                duration: request.audio.len() as f64 / 16_000.0,
                segments: Vec::new(),
                confidence: self.confidence,
                dropped_segments: 0,
                audio_ctx: 0,
                refit: false,
                elapsed_ms: 10,
                truncated: false,
                doubt: None,
                model: self.info.name.clone(),
            })
        }
        fn detect(&mut self, _: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
            Ok(Vec::new())
        }
    }

    fn sure(name: &str, text: &'static str, confidence: f32) -> Arc<Engine> {
        worker(Sure {
            info: info(name),
            text,
            confidence,
        })
    }

    async fn hear(
        stt: &SpeechToText,
        whisper: &Arc<Engine>,
        handed: Handed<'_>,
    ) -> (String, String, u64) {
        let t = stt
            .hear_handed(whisper, handed, Request::new(vec![0.0; 32_000]))
            .await
            .expect("heard");
        (t.model, t.text, t.elapsed_ms)
    }

    #[tokio::test]
    async fn an_unsure_live_reading_is_heard_again_by_whisper() {
        let whisper = sure("whisper", "enemy base detected", 0.9);
        let handed = Handed {
            via: Via::Wyoming,
            language: None,
            seconds: 2.0,
            timings: false,
        };
        let mut stt = SpeechToText::off();
        stt.live_wyoming_seconds = 20.0;
        stt.live_unsure_below = 0.7;

        // Sure enough: the live engine's reading stands.
        stt.live = Some(sure("live", "any base detected", 0.71));
        assert_eq!(
            hear(&stt, &whisper, handed).await,
            ("live".into(), "any base detected".into(), 10)
        );
        // Unsure: whisper's, with the time of both passes.
        stt.live = Some(sure("live", "adamie banks detective", 0.69));
        assert_eq!(
            hear(&stt, &whisper, handed).await,
            ("whisper".into(), "enemy base detected".into(), 20)
        );
        // 0: the live engine's reading however unsure.
        stt.live_unsure_below = 0.0;
        assert_eq!(
            hear(&stt, &whisper, handed).await,
            ("live".into(), "adamie banks detective".into(), 10)
        );
        // 1: every reading again, a certain one too.
        stt.live_unsure_below = 1.0;
        stt.live = Some(sure("live", "any base detected", 1.0));
        assert_eq!(
            hear(&stt, &whisper, handed).await,
            ("whisper".into(), "enemy base detected".into(), 20)
        );
        // Audio that went to whisper in the first place is heard once.
        stt.live_unsure_below = 0.7;
        stt.live_wyoming_seconds = 0.0;
        assert_eq!(
            hear(&stt, &whisper, handed).await,
            ("whisper".into(), "enemy base detected".into(), 10)
        );
    }

    #[test]
    fn subtitles_number_and_time_each_segment() {
        let seg = |start, end, text: &str| Segment {
            start,
            end,
            text: text.into(),
            confidence: 1.0,
            no_speech_probability: 0.0,
            words: None,
            mean_log_prob: 0.0,
        };
        let t = Transcript {
            text: "Hello there. General Kenobi.".into(),
            language: "en".into(),
            language_probability: None,
            duration: 3.0,
            segments: vec![
                seg(0.0, 1.25, " Hello there."),
                seg(1.25, 3661.5, "General Kenobi."),
            ],
            confidence: 1.0,
            dropped_segments: 0,
            audio_ctx: 1500,
            refit: false,
            elapsed_ms: 1,
            truncated: false,
            doubt: None,
            model: "tiny.en-q8_0".into(),
        };
        assert_eq!(
            subtitles(&t, false),
            "1\n00:00:00,000 --> 00:00:01,250\nHello there.\n\n2\n00:00:01,250 --> 01:01:01,500\nGeneral Kenobi.\n\n"
        );
        assert!(subtitles(&t, true).starts_with("WEBVTT\n\n00:00:00.000 --> 00:00:01.250\n"));
    }
}
