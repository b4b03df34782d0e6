//! Speech from and to files: audio an agent supplies (inline, or a path
//! inside `stt.audio_dirs`, checked on its canonical path) transcribed or
//! its language detected; text made into a WAV file (written inside
//! `tts.output_dirs`, or handed back); and the voices installed or in the
//! catalog.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, atomic::AtomicBool},
};

use base64::Engine as _;
use hark_audio::{
    decode::{self, Decoded},
    encode::{Format, encode},
    files::AllowedDirs,
};
use hark_core::room::{
    AudioInput, BoxFuture, Context, Detected, Failure, Files, InstallCall, InstalledVoice, Kind,
    ModelList, RemovedVoice, SpeechFormat, SynthesizeCall, Synthesized, TranscribeCall,
    Transcribed, TranscriptFormat, Transcription, VoiceInfo, Voices,
};
use hark_stt::{
    engine::Engine,
    recognizer::{ModelChoice, Request, Transcript},
};
use hark_tts::voices::{VoiceStore, VoicesError};
use serde_json::{Value, json};

use super::{Room, failure, speech};
use crate::stt::{Handed, SpeechToText, Via, subtitles};

/// The audio an agent named, decoded (blocking: it reads and decodes the
/// file).
fn load_audio(stt: &SpeechToText, audio: AudioInput) -> Result<(Decoded, Value), Failure> {
    match audio {
        AudioInput::Base64(b64) => {
            // The encoded size bounds the decoded size; refuse early.
            let limit = stt.limits.max_bytes;
            if (b64.len() as u64 / 4) * 3 > limit + 3 {
                return Err(failure::decode(decode::DecodeError::TooLarge {
                    size: b64.len() as u64 / 4 * 3,
                    limit,
                }));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| Failure::invalid(format!("audio_base64 is not valid base64: {e}")))?;
            let size = bytes.len();
            let decoded = decode::decode(bytes, None, &stt.limits).map_err(failure::decode)?;
            Ok((decoded, json!({ "source": "audio_base64", "bytes": size })))
        }
        AudioInput::Path(path) => {
            let requested = PathBuf::from(&path);
            let resolved = stt.files.resolve_read(&requested).map_err(|e| {
                failure::path(e).with_context(Context::AudioPath {
                    audio_path: path.clone(),
                })
            })?;
            let decoded = decode::decode_file(&resolved, &stt.limits).map_err(|e| {
                failure::decode(e).with_context(Context::AudioPath {
                    audio_path: path.clone(),
                })
            })?;
            Ok((
                decoded,
                json!({ "source": "audio_path", "audio_path": path }),
            ))
        }
    }
}

/// Speech to text and its file engine, or why they are not there.
pub(super) fn engine(room: &Room) -> Result<(Arc<SpeechToText>, Arc<Engine>), Failure> {
    let stt = Arc::clone(&room.state.ears.stt);
    let engine = Arc::clone(
        stt.engine()
            .map_err(|why| Failure::new(Kind::ModelNotLoaded, why))?,
    );
    Ok((stt, engine))
}

/// Decodes `audio` off the async runtime.
async fn decoded(stt: Arc<SpeechToText>, audio: AudioInput) -> Result<(Decoded, Value), Failure> {
    tokio::task::spawn_blocking(move || load_audio(&stt, audio))
        .await
        .map_err(|e| failure::task(Kind::AudioFormat, "decoding", e))?
}

fn stopped() -> Failure {
    Failure::new(Kind::ModelNotLoaded, "the speech-to-text engine stopped")
}

/// `request`'s transcript, abandoned if the caller goes away first.
pub(super) async fn transcribed(engine: &Engine, request: Request) -> Result<Transcript, Failure> {
    crate::stt::heard(engine, request)
        .await
        .map_err(failure::stt)
}

/// Where a tool may write `path`: inside `dirs` (blocking checks of the
/// filesystem, off the runtime), checked before any work so that a bad
/// path costs nothing.
async fn writable(dirs: &AllowedDirs, path: &str, kind: Kind) -> Result<PathBuf, Failure> {
    let (dirs, requested) = (dirs.clone(), PathBuf::from(path));
    tokio::task::spawn_blocking(move || dirs.resolve_write(&requested))
        .await
        .map_err(|e| failure::task(kind, "checking the output path", e))?
        .map_err(failure::path)
}

/// Writes through a temporary file in the same directory, so a reader never
/// sees half a file and a failure leaves the old one in place.
fn write_atomically(target: &Path, bytes: &[u8], kind: Kind) -> Result<(), Failure> {
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    hark_core::files::write_atomic(dir, target, bytes)
        .map_err(|e| Failure::new(kind, format!("cannot write {}: {e}", target.display())))
}

impl Files for Room {
    fn models(&self) -> BoxFuture<'_, Result<ModelList, Failure>> {
        Box::pin(async move {
            let stt = Arc::clone(&self.state.ears.stt);
            tokio::task::spawn_blocking(move || {
                let live = stt.live().map(|live| live.info().name.clone());
                stt.models.list(live.as_deref())
            })
            .await
            .map_err(|e| failure::task(Kind::ModelNotLoaded, "listing", e))?
            .map_err(|e| Failure::new(Kind::ModelNotLoaded, e.to_string()))
        })
    }

    fn transcribe(&self, call: TranscribeCall) -> BoxFuture<'_, Result<Transcription, Failure>> {
        Box::pin(async move {
            let (stt, whisper) = engine(self)?;
            let target = match &call.output_file {
                Some(path) => Some(
                    writable(&stt.outputs, path, Kind::Transcription)
                        .await
                        .map_err(|e| {
                            e.with_context(Context::OutputFile {
                                output_file: path.clone(),
                            })
                        })?,
                ),
                None => None,
            };
            let choice = ModelChoice::parse(call.model.as_deref(), call.model_size.as_deref())
                .map_err(failure::stt)?;
            // The live engine's model, named, is the live engine (it
            // transcribes files too, English only); any other goes to
            // whisper, which finds it in the store; none named, the audio
            // decides (`SpeechToText::for_handed`).
            let live = stt.live().filter(|live| {
                matches!(&choice, Some(ModelChoice::Name(name)) if *name == live.info().name)
            });
            let (mut decoded, source) = decoded(Arc::clone(&stt), call.audio).await?;
            // The samples go to the engine; the rest describes the file.
            let mut request = Request::new(std::mem::take(&mut decoded.samples));
            request.language = call.language.clone();
            request.word_timestamps = call.word_timestamps;
            let transcript = match (live, choice) {
                (Some(live), _) => transcribed(live, request).await?,
                (None, Some(choice)) => {
                    request.model = Some(choice);
                    transcribed(&whisper, request).await?
                }
                (None, None) => {
                    let handed = Handed {
                        via: Via::File,
                        language: call.language.as_deref(),
                        seconds: decoded.duration_secs,
                        timings: call.word_timestamps
                            || matches!(call.format, TranscriptFormat::Srt | TranscriptFormat::Vtt),
                    };
                    stt.hear_handed(&whisper, handed, request)
                        .await
                        .map_err(failure::stt)?
                }
            };
            let mut result = Transcribed {
                text: transcript.text.clone(),
                language: transcript.language.clone(),
                language_confidence: transcript.language_probability,
                duration: decoded.duration_secs,
                format: decoded.format.to_owned(),
                source_rate: decoded.source_rate,
                source_channels: decoded.source_channels,
                segments: transcript
                    .segments
                    .iter()
                    .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
                    .collect(),
                confidence: transcript.confidence,
                model: transcript.model.clone(),
                transcribe_ms: transcript.elapsed_ms,
                input: source,
                output_file: None,
            };
            let formatted = match call.format {
                TranscriptFormat::Text | TranscriptFormat::Json => result.text.clone(),
                TranscriptFormat::Srt => subtitles(&transcript, false),
                TranscriptFormat::Vtt => subtitles(&transcript, true),
            };
            if let Some(target) = target {
                result.output_file = Some(target.display().to_string());
                let bytes = match call.format {
                    TranscriptFormat::Json => serde_json::to_vec_pretty(&result)
                        .map_err(|e| Failure::new(Kind::Transcription, e.to_string()))?,
                    TranscriptFormat::Text => format!("{formatted}\n").into_bytes(),
                    TranscriptFormat::Srt | TranscriptFormat::Vtt => formatted.clone().into_bytes(),
                };
                tokio::task::spawn_blocking(move || {
                    write_atomically(&target, &bytes, Kind::Transcription)
                })
                .await
                .map_err(|e| failure::task(Kind::Transcription, "writing", e))??;
            }
            Ok(Transcription { result, formatted })
        })
    }

    fn detect_language(&self, audio: AudioInput) -> BoxFuture<'_, Result<Detected, Failure>> {
        Box::pin(async move {
            let (stt, engine) = engine(self)?;
            if !engine.info().multilingual {
                return Err(Failure::new(
                    Kind::Language,
                    format!(
                        "the model {} understands English only and cannot detect languages; set stt.multilingual_model (base-q8_0 by default) or stt.model to a multilingual model",
                        engine.info().name
                    ),
                ));
            }
            let (decoded, source) = decoded(stt, audio).await?;
            let cancel = Arc::new(AtomicBool::new(false));
            let _abandon = crate::stt::AbandonOnDrop(Arc::clone(&cancel));
            let guesses = engine
                .submit_detect(decoded.samples, cancel)
                .map_err(failure::stt)?
                .await
                .map_err(|_| stopped())?
                .map_err(failure::stt)?;
            let best = guesses
                .first()
                .ok_or_else(|| Failure::new(Kind::Transcription, "no language was detected"))?;
            Ok(Detected {
                language: best.language.clone(),
                language_name: best.name.clone(),
                confidence: best.probability,
                candidates: guesses
                    .iter()
                    .map(|g| json!({ "language": g.language, "name": g.name, "probability": g.probability }))
                    .collect(),
                duration: decoded.duration_secs,
                input: source,
            })
        })
    }

    fn synthesize(&self, call: SynthesizeCall) -> BoxFuture<'_, Result<Synthesized, Failure>> {
        Box::pin(async move {
            let tts = speech::tts(&self.state.voice)?;
            let speakable = speech::check_text(&call.text, tts.max_chars)?;
            let rate = hark_core::room::check_rate(call.rate)?.unwrap_or(1.0);
            let target = match &call.output_path {
                Some(path) => Some(writable(&tts.outputs, path, Kind::Speech).await?),
                None => None,
            };
            let format = match call.format {
                Some(SpeechFormat::Wav) => Format::Wav,
                Some(SpeechFormat::Ogg) => Format::OggOpus,
                Some(SpeechFormat::Mp3) => Format::Mp3,
                None => target
                    .as_ref()
                    .and_then(|t| t.extension())
                    .and_then(|e| Format::of_extension(&e.to_string_lossy()))
                    .unwrap_or(Format::Wav),
            };
            let voice = speech::language_voice(
                &self.state.keeping.agents,
                &tts,
                None,
                call.voice.clone(),
                call.language.as_deref(),
            )
            .await?;
            // Made and encoded in one go off the runtime.
            let (rendered, bytes) = {
                let tts = Arc::clone(&tts);
                tokio::task::spawn_blocking(move || {
                    let rendered = tts
                        .render(&speakable, voice.as_deref(), rate)
                        .map_err(failure::speak)?;
                    let bytes = encode(&rendered.samples, rendered.rate, format)
                        .map_err(|e| Failure::new(Kind::Speech, e.to_string()))?;
                    Ok::<_, Failure>((rendered, bytes))
                })
                .await
                .map_err(|e| failure::task(Kind::Speech, "synthesis", e))??
            };
            // The voice's working memory and what the synthesis freed go
            // back now, beside the reply: requests that follow one another
            // closer than the voices' idle release otherwise kept it and
            // grew it (60 in a row: 460 MiB; docs/benchmarks.md, the turn:
            // memory).
            {
                let tts = Arc::clone(&tts);
                tokio::task::spawn_blocking(move || tts.release_idle());
            }
            let duration_seconds =
                (rendered.samples.len() as f64 / f64::from(rendered.rate.max(1)) * 100.0).round()
                    / 100.0;
            let mut result = Synthesized {
                output_path: None,
                audio_base64: None,
                mime_type: format.mime_type().into(),
                duration_seconds,
                duration: duration_seconds,
                format: format.name().into(),
                sample_rate: rendered.rate,
                bytes: bytes.len(),
                file_size_kb: (bytes.len() as f64 / 100.0).round() / 10.0,
                voice: rendered.voice.clone(),
                voice_used: rendered.voice.clone(),
                engine: speech::engine(rendered.engine),
                fallback_reason: rendered.fallback.clone(),
            };
            match target {
                Some(target) => {
                    let written = target.clone();
                    tokio::task::spawn_blocking(move || {
                        write_atomically(&written, &bytes, Kind::Speech)
                    })
                    .await
                    .map_err(|e| failure::task(Kind::Speech, "writing", e))??;
                    result.output_path = Some(target.display().to_string());
                }
                None => {
                    result.audio_base64 =
                        Some(base64::engine::general_purpose::STANDARD.encode(&bytes));
                }
            }
            Ok(result)
        })
    }

    fn voices(
        &self,
        language: Option<String>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Voices, Failure>> {
        Box::pin(async move {
            let tts = speech::tts(&self.state.voice)?;
            let default = tts.default_voice.clone();
            // The synthesiser's lock may be held for a whole sentence (or a
            // voice loading): off the async runtime.
            let (listing, loaded, problem) = {
                let tts = Arc::clone(&tts);
                tokio::task::spawn_blocking(move || {
                    let listing = VoiceStore::open(&tts.voices_dir)?.list()?;
                    let synth = tts
                        .synthesizer()
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let loaded: Vec<String> = synth
                        .loaded_voices()
                        .into_iter()
                        .map(str::to_owned)
                        .collect();
                    let problem = synth.runtime_problem().map(str::to_owned);
                    Ok::<_, VoicesError>((listing, loaded, problem))
                })
                .await
                .map_err(|e| failure::task(Kind::Voice, "listing", e))?
                .map_err(failure::voices)?
            };
            let key = hark_tts::catalog::id_key;
            let mut voices: Vec<VoiceInfo> = listing
                .installed
                .iter()
                .map(|v| VoiceInfo {
                    id: v.id.clone(),
                    language: v.language.clone(),
                    quality: v.quality.clone(),
                    sample_rate: Some(v.sample_rate),
                    size: v.size,
                    installed: true,
                    default: key(&v.id) == key(&default),
                    loaded: loaded.iter().any(|l| key(l) == key(&v.id)),
                })
                .chain(listing.available.iter().map(|v| VoiceInfo {
                    id: v.id.to_owned(),
                    language: Some(v.language.to_owned()),
                    quality: Some(v.quality.to_owned()),
                    sample_rate: None,
                    size: v.size(),
                    installed: false,
                    default: false,
                    loaded: false,
                }))
                .filter(|v| match (&language, &v.language) {
                    (None, _) => true,
                    (Some(wanted), Some(code)) => speech::language_matches(code, wanted),
                    (Some(_), None) => false,
                })
                .collect();
            let total = voices.len();
            voices.truncate(limit);
            Ok(Voices {
                voices,
                total,
                piper_unavailable: problem,
            })
        })
    }

    fn install_voice(&self, call: InstallCall) -> BoxFuture<'_, Result<InstalledVoice, Failure>> {
        Box::pin(async move {
            let tts = speech::tts(&self.state.voice)?;
            let dir = tts.voices_dir.clone();
            let installed = match (call.url, call.path) {
                (Some(url), None) => {
                    let sha256 = call.sha256;
                    tokio::task::spawn_blocking(move || {
                        let store = VoiceStore::open(dir)?;
                        let request = match &sha256 {
                            Some(sha) => hark_tts::voices::VoiceRequest::url(&url, Some(sha))?,
                            None => hark_tts::voices::VoiceRequest::parse(&url)?,
                        };
                        store
                            .install_request(
                                &request,
                                &hark_models::FetchOptions::default(),
                                hark_models::Progress::Silent,
                            )
                            .map(|done| done.voice)
                    })
                    .await
                    .map_err(|e| failure::task(Kind::Voice, "install", e))?
                    .map_err(failure::voices)?
                }
                (None, Some(path)) => {
                    let onnx = tts
                        .outputs
                        .resolve_read(Path::new(&path))
                        .map_err(failure::path)?;
                    let json = PathBuf::from(format!("{}.json", onnx.display()));
                    let json = tts.outputs.resolve_read(&json).map_err(failure::path)?;
                    tokio::task::spawn_blocking(move || {
                        VoiceStore::open(dir)?.install_files(&onnx, &json)
                    })
                    .await
                    .map_err(|e| failure::task(Kind::Voice, "install", e))?
                    .map_err(failure::voices)?
                }
                _ => {
                    return Err(Failure::invalid(
                        "give exactly one of `url` (a URL or catalog id) and `path`",
                    ));
                }
            };
            Ok(InstalledVoice {
                id: installed.id,
                language: installed.language,
                quality: installed.quality,
                sample_rate: installed.sample_rate,
                size: installed.size,
                sha256: installed.sha256,
                source: installed.source,
            })
        })
    }

    fn remove_voice(&self, id: String) -> BoxFuture<'_, Result<RemovedVoice, Failure>> {
        Box::pin(async move {
            let tts = speech::tts(&self.state.voice)?;
            let synth = Arc::clone(tts.synthesizer());
            let (dir, default) = (tts.voices_dir.clone(), tts.default_voice.clone());
            let key = hark_tts::catalog::id_key;
            if key(&id) == key(&default) {
                return Err(Failure::invalid(format!(
                    "{id} is the appliance's default voice (tts.voice); set another default first"
                )));
            }
            let removed = tokio::task::spawn_blocking(move || {
                let removed = VoiceStore::open(dir)?.remove(&id)?;
                synth
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .unload(&removed.id);
                Ok::<_, VoicesError>(removed)
            })
            .await
            .map_err(|e| failure::task(Kind::Voice, "remove", e))?
            .map_err(failure::voices)?;
            Ok(RemovedVoice {
                id: removed.id,
                deleted: removed
                    .deleted
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect(),
            })
        })
    }
}
