//! The synthesiser: text in, audio out, one piece at a time.
//!
//! [`Synthesizer::prepare`] turns a text into [`Piece`]s — piper's
//! sentences, long ones cut at clause boundaries — which is quick (espeak-ng
//! phonemes only); [`Synthesizer::render`] makes one piece's audio. A caller
//! that plays piece k while it renders piece k+1 starts speaking after the
//! first piece only, and [`Synthesizer::plan`] with [`Lead::Early`] makes
//! that piece short: the first clause or words of the first sentence
//! (`crate::plan`), the rest of the sentence the next piece, at the same
//! loudness. A caller that shares the synthesiser between threads holds its
//! lock for one piece at a time.
//!
//! Piper voices run on ONNX Runtime, one session per loaded voice, at most
//! [`SynthConfig::max_loaded_voices`] at once. When piper cannot speak —
//! ONNX Runtime or the voice missing or broken, or an inference error —
//! espeak-ng's own synthesiser speaks instead, and the result says so and
//! why (seed 000's fallback).

use std::{
    collections::HashMap,
    ops::Range,
    path::PathBuf,
    sync::{Arc, OnceLock, atomic::AtomicBool},
};

pub use crate::plan::{Lead, MAX_PIECE_PHONEMES};
use crate::{
    espeak::{Espeak, EspeakError},
    phonemize::{PhonemeIdMap, phonemize},
    piper::{OnnxRuntime, PiperError, PiperModel, normalize, normalize_shared},
    plan::plan,
    voice::{Scales, VoiceConfig},
    voices::{VoiceStore, VoicesError},
};

/// How long the audio on either side of a join inside a sentence (the first
/// sentence cut early) is faded, in seconds. piper's pieces begin and end in
/// silence, but a piece that begins on a fricative has it from the first
/// sample, which after the silence before it would click.
const JOIN_FADE_SECONDS: f32 = 0.003;

/// The most silence kept at the end of a piece that the next one continues,
/// in seconds. piper ends a piece that ends in a comma with 0.2–0.45 s of
/// silence and begins the next with up to 0.05 s more, so a cut between
/// words could pause longer than piper's own commas inside a sentence do
/// (0.15–0.45 s, measured with en_US-joe-medium); with this the join is at
/// most about 0.3 s, a comma's pause.
const JOIN_TAIL_SECONDS: f32 = 0.25;

/// A sample under this magnitude (of full scale) is silence when the tail
/// before a join is measured: piper's pauses hold faint noise below it.
const SILENCE_LEVEL: f32 = 0.02;

/// espeak-ng's speaking rate at `rate` 1.0, in words per minute (its default).
const ESPEAK_WPM: f32 = 175.0;

/// Which synthesiser spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Piper,
    Espeak,
    /// Audio someone else made, played as it is ([`Utterance::recording`]);
    /// never a configured engine.
    Recording,
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineKind::Piper => "piper",
            EngineKind::Espeak => "espeak",
            EngineKind::Recording => "recording",
        })
    }
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "piper" => Ok(EngineKind::Piper),
            "espeak" => Ok(EngineKind::Espeak),
            other => Err(format!(
                "unknown engine {other:?}: use \"piper\" or \"espeak\""
            )),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    #[error("unknown voice {voice:?}; installed voices: {installed}")]
    UnknownVoice { voice: String, installed: String },
    #[error("rate must be between 0.5 and 2.0, got {0}")]
    Rate(f32),
    #[error("nothing to say: the text has no speakable words")]
    Unspeakable,
    #[error(transparent)]
    Voices(#[from] VoicesError),
    #[error("cannot assemble the audio: {0}")]
    Render(String),
    #[error("espeak-ng, the fallback voice, failed too: {0}")]
    Espeak(#[from] EspeakError),
}

#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// `piper`, or `espeak` to always use espeak-ng's own voice.
    pub engine: EngineKind,
    /// ONNX Runtime's shared library.
    pub onnxruntime: PathBuf,
    pub voices_dir: PathBuf,
    /// The voice used when a request names none.
    pub voice: String,
    /// ONNX Runtime intra-op threads per voice (1 is fastest on 2 cores).
    pub threads: usize,
    /// espeak-ng voice for the fallback when the piper voice gives none.
    pub espeak_voice: String,
    /// Piper voices kept loaded at once (each holds its model in memory).
    pub max_loaded_voices: usize,
}

/// The plan for one text: which voice and engine, and the pieces.
#[derive(Debug, Clone)]
pub struct Utterance {
    /// The text as given.
    pub text: String,
    /// The voice id (the store's spelling), or the espeak-ng voice name when
    /// espeak speaks from the start.
    pub voice: String,
    pub engine: EngineKind,
    /// Why espeak-ng speaks instead of piper, when it does.
    pub fallback: Option<String>,
    pub rate: f32,
    pub pieces: Vec<Piece>,
    /// The raw peak of the piece a [`Piece::continues`] piece continues,
    /// once `render` has made it: the continuation is scaled by it too.
    continued_peak: OnceLock<f32>,
    /// A recording's audio (mono, and its rate): its one piece.
    recorded: Option<Arc<(Vec<f32>, u32)>>,
}

impl Utterance {
    /// Audio someone else made (mono `samples` at `rate`), to be played as
    /// it is, in one piece; `label` says what it is for the logs and the
    /// history.
    pub fn recording(label: &str, samples: Vec<f32>, rate: u32) -> Utterance {
        Utterance {
            text: label.to_owned(),
            voice: String::new(),
            engine: EngineKind::Recording,
            fallback: None,
            rate: 1.0,
            pieces: vec![Piece {
                text: 0..label.len(),
                ids: Vec::new(),
                continues: false,
            }],
            continued_peak: OnceLock::new(),
            recorded: Some(Arc::new((samples, rate))),
        }
    }

    /// How many parts callers count the speech in (as its sentences): one
    /// per piece, except that a piece which continues the one before is part
    /// of it.
    pub fn parts(&self) -> usize {
        self.pieces.iter().filter(|p| !p.continues).count()
    }

    /// The part (0-based) piece `index` belongs to.
    pub fn part_of(&self, index: usize) -> usize {
        let through = index.saturating_add(1).min(self.pieces.len());
        self.pieces[..through]
            .iter()
            .filter(|p| !p.continues)
            .count()
            .saturating_sub(1)
    }
}

/// One model run's worth of text.
#[derive(Debug, Clone)]
pub struct Piece {
    /// Byte range of [`Utterance::text`].
    pub text: Range<usize>,
    /// Piper's phoneme ids (empty when espeak speaks).
    pub ids: Vec<i64>,
    /// The rest of the sentence the piece before began: the first sentence
    /// cut early ([`Lead::Early`]). A caller plays it straight after that
    /// piece and counts them as one.
    pub continues: bool,
}

/// One piece's audio.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// Mono, peak-normalised (a piece that continues another at that one's
    /// gain, so its peak may be under 1).
    pub samples: Vec<f32>,
    pub rate: u32,
    pub engine: EngineKind,
    /// Set when piper failed on this piece and espeak-ng spoke it.
    pub fallback: Option<String>,
}

/// Piper voices and espeak-ng behind one interface.
pub struct Synthesizer {
    config: SynthConfig,
    /// The runtime, or why there is none (espeak-ng speaks then).
    runtime: Result<OnnxRuntime, String>,
    /// Loaded voices, most recently used last.
    loaded: Vec<(String, PiperModel, PhonemeIdMap)>,
    /// Why a voice could not be loaded, by id (not retried until it changes
    /// on disk: the store's `install` / `remove` clear it).
    broken: HashMap<String, String>,
}

impl Synthesizer {
    /// Loads ONNX Runtime and the default voice (blocking: model files are
    /// read whole). Failures are kept as the reason espeak-ng speaks.
    pub fn new(config: SynthConfig) -> Self {
        let runtime = match config.engine {
            EngineKind::Espeak => Err("tts.engine is \"espeak\"".to_owned()),
            // `Recording` is never configured (`from_str` does not give it).
            EngineKind::Piper | EngineKind::Recording => {
                OnnxRuntime::load(&config.onnxruntime).map_err(|e| e.to_string())
            }
        };
        if let Err(reason) = &runtime {
            tracing::warn!(%reason, "piper voices are unavailable; espeak-ng speaks");
        }
        let mut synth = Self {
            config,
            runtime,
            loaded: Vec::new(),
            broken: HashMap::new(),
        };
        if synth.runtime.is_ok() {
            let voice = synth.config.voice.clone();
            if let Err(reason) = synth.load(&voice) {
                tracing::warn!(%voice, %reason, "the default voice cannot be loaded; espeak-ng speaks");
            }
        }
        synth
    }

    pub fn config(&self) -> &SynthConfig {
        &self.config
    }

    /// The espeak-ng voice the default voice phonemizes with (the fallback
    /// voice's when it is not loaded).
    pub fn espeak_voice(&self) -> String {
        self.loaded
            .iter()
            .find(|(id, ..)| *id == self.config.voice)
            .map(|(_, model, _)| model.config().espeak_voice.clone())
            .unwrap_or_else(|| self.config.espeak_voice.clone())
    }

    /// Why the default voice cannot speak, if it cannot (with the runtime
    /// there): not installed, or it failed to load.
    pub fn voice_problem(&self) -> Option<String> {
        if let Some(reason) = self.broken.get(&self.config.voice) {
            return Some(reason.clone());
        }
        if self.runtime.is_ok() && !self.loaded.iter().any(|(id, ..)| *id == self.config.voice) {
            let store = match VoiceStore::open(&self.config.voices_dir) {
                Ok(store) => store,
                Err(e) => return Some(e.to_string()),
            };
            match store.get(&self.config.voice) {
                Ok(Some(_)) => {}
                Ok(None) => return Some(self.default_voice_problem(&store)),
                Err(e) => return Some(e.to_string()),
            }
        }
        None
    }

    fn default_voice_problem(&self, store: &VoiceStore) -> String {
        let voice = &self.config.voice;
        let problems: Vec<String> = store
            .list()
            .map(|listing| {
                listing
                    .problems
                    .iter()
                    .map(ToString::to_string)
                    .filter(|p| p.starts_with(voice.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        if problems.is_empty() {
            format!(
                "voice {voice} (tts.voice) is not installed in {}",
                self.config.voices_dir.display()
            )
        } else {
            format!(
                "voice {voice} (tts.voice) is not usable: {}",
                problems.join("; ")
            )
        }
    }

    /// Why piper cannot speak at all, if it cannot.
    pub fn runtime_problem(&self) -> Option<&str> {
        self.runtime.as_ref().err().map(String::as_str)
    }

    /// The loaded voices' ids, least recently used first.
    pub fn loaded_voices(&self) -> Vec<&str> {
        self.loaded.iter().map(|(id, ..)| id.as_str()).collect()
    }

    /// Forgets a voice (it was removed or replaced on disk).
    pub fn unload(&mut self, id: &str) {
        self.loaded.retain(|(loaded, ..)| loaded != id);
        self.broken.remove(id);
    }

    /// Plans `text` in `voice` (default: the configured one) at `rate`
    /// (0.5–2.0, 1 is the voice's own pace): a piece per sentence, for a
    /// caller that wants all the audio before it uses any ([`Self::plan`]
    /// with [`Lead::Sentence`]).
    pub fn prepare(
        &mut self,
        text: &str,
        voice: Option<&str>,
        rate: f32,
    ) -> Result<Utterance, TtsError> {
        self.plan(text, voice, rate, Lead::Sentence)
    }

    /// Plans `text` like [`Self::prepare`], its first piece as `lead` says:
    /// [`Lead::Early`], for a caller that plays piece k while it renders
    /// piece k+1, cuts a long enough first sentence after its first clause
    /// or words (`crate::plan`), so the first piece is made sooner; the piece
    /// after the cut [`Piece::continues`] it.
    pub fn plan(
        &mut self,
        text: &str,
        voice: Option<&str>,
        rate: f32,
        lead: Lead,
    ) -> Result<Utterance, TtsError> {
        if !(0.5..=2.0).contains(&rate) {
            return Err(TtsError::Rate(rate));
        }
        let requested = voice.unwrap_or(&self.config.voice).to_owned();
        let store = match VoiceStore::open(&self.config.voices_dir) {
            Ok(store) => store,
            // No voice store (unreadable, or a directory that cannot be
            // made): the appliance's own voice is then espeak-ng's.
            Err(e) if requested == self.config.voice => {
                let espeak_voice = self.config.espeak_voice.clone();
                return self.prepare_espeak(text, &espeak_voice, rate, Some(e.to_string()));
            }
            Err(e) => return Err(e.into()),
        };
        let found = match store.get(&requested) {
            Ok(found) => found,
            // The appliance's own voice broken on disk (a file deleted):
            // speak anyway, and say why.
            Err(e) if requested == self.config.voice => {
                let espeak_voice = self.config.espeak_voice.clone();
                return self.prepare_espeak(text, &espeak_voice, rate, Some(e.to_string()));
            }
            Err(e) => return Err(e.into()),
        };
        let id = match found {
            Some(installed) => installed.id,
            // espeak-ng's own voices are always there: `espeak:en-us`.
            None => match requested.strip_prefix("espeak:") {
                Some(name) => return self.prepare_espeak(text, name, rate, None),
                // The appliance's own voice gone (its files deleted or never
                // installed): speak anyway, and say why.
                None if requested == self.config.voice => {
                    let reason = self.default_voice_problem(&store);
                    let espeak_voice = self.config.espeak_voice.clone();
                    return self.prepare_espeak(text, &espeak_voice, rate, Some(reason));
                }
                None => {
                    let installed = store
                        .list()?
                        .installed
                        .iter()
                        .map(|v| v.id.clone())
                        .collect::<Vec<_>>();
                    return Err(TtsError::UnknownVoice {
                        voice: requested,
                        installed: if installed.is_empty() {
                            "none".into()
                        } else {
                            installed.join(", ")
                        },
                    });
                }
            },
        };
        if let Err(reason) = self.load(&id) {
            let espeak_voice = self.config.espeak_voice.clone();
            return self.prepare_espeak(text, &espeak_voice, rate, Some(reason));
        }
        let espeak = Espeak::get()?;
        let pieces = {
            // `load` left the voice last in the list.
            let Some((_, model, map)) = self.loaded.last() else {
                let espeak_voice = self.config.espeak_voice.clone();
                return self.prepare_espeak(text, &espeak_voice, rate, None);
            };
            plan(espeak, &model.config().espeak_voice, text, lead)?
                .into_iter()
                .map(|planned| Piece {
                    text: planned.text,
                    ids: map.ids(&planned.phonemes).ids,
                    continues: planned.continues,
                })
                .collect::<Vec<_>>()
        };
        if pieces.is_empty() {
            return Err(TtsError::Unspeakable);
        }
        Ok(Utterance {
            text: text.to_owned(),
            voice: id,
            engine: EngineKind::Piper,
            fallback: None,
            rate,
            pieces,
            continued_peak: OnceLock::new(),
            recorded: None,
        })
    }

    /// Plans `text` for espeak-ng's own voice: one piece per sentence (it
    /// speaks a sentence in a few milliseconds, so none is cut early).
    fn prepare_espeak(
        &mut self,
        text: &str,
        voice: &str,
        rate: f32,
        fallback: Option<String>,
    ) -> Result<Utterance, TtsError> {
        let espeak = Espeak::get()?;
        let pieces: Vec<Piece> = phonemize(espeak, voice, text)?
            .into_iter()
            .filter(|s| s.phonemes().iter().any(|c| c.is_alphabetic()))
            .map(|s| Piece {
                text: s.text,
                ids: Vec::new(),
                continues: false,
            })
            .collect();
        if pieces.is_empty() {
            return Err(TtsError::Unspeakable);
        }
        let fallback = fallback.or_else(|| self.runtime_problem().map(str::to_owned));
        Ok(Utterance {
            text: text.to_owned(),
            voice: format!("espeak:{voice}"),
            engine: EngineKind::Espeak,
            fallback,
            rate,
            pieces,
            continued_peak: OnceLock::new(),
            recorded: None,
        })
    }

    /// Makes piece `index` of `utterance`. Piper failing on it is not an
    /// error: espeak-ng speaks the piece and the chunk says why.
    pub fn render(
        &mut self,
        utterance: &Utterance,
        index: usize,
        cancel: &AtomicBool,
    ) -> Result<Chunk, TtsError> {
        let Some(piece) = utterance.pieces.get(index) else {
            return Ok(Chunk {
                samples: Vec::new(),
                rate: 22050,
                engine: utterance.engine,
                fallback: None,
            });
        };
        if let Some(recorded) = &utterance.recorded {
            // Played as it is: its level is the maker's.
            return Ok(Chunk {
                samples: recorded.0.clone(),
                rate: recorded.1,
                engine: EngineKind::Recording,
                fallback: None,
            });
        }
        let text = utterance.text.get(piece.text.clone()).unwrap_or("");
        if utterance.engine == EngineKind::Espeak {
            let voice = utterance
                .voice
                .strip_prefix("espeak:")
                .unwrap_or(&self.config.espeak_voice)
                .to_owned();
            return self.render_espeak(text, &voice, utterance.rate, cancel, None);
        }
        let piper = self.find(&utterance.voice).map(|model| {
            let scales: Scales = model.config().scales(utterance.rate);
            let rate = model.sample_rate();
            model
                .synthesize(&piece.ids, scales, None)
                .map(|s| (s, rate))
        });
        match piper {
            Some(Ok((mut samples, rate))) => {
                // Peak normalisation per piece would change the level in the
                // middle of a sentence cut early: its rest takes the first
                // piece's gain, turned down only where it would clip.
                let peak = match utterance.continued_peak.get() {
                    Some(&first) if piece.continues => normalize_shared(&mut samples, first),
                    _ => normalize(&mut samples),
                };
                let continued = utterance.pieces.get(index + 1).is_some_and(|p| p.continues);
                if continued {
                    let _ = utterance.continued_peak.set(peak);
                }
                shape_join(&mut samples, rate, piece.continues, continued);
                Ok(Chunk {
                    samples,
                    rate,
                    engine: EngineKind::Piper,
                    fallback: None,
                })
            }
            Some(Err(e)) => {
                let reason = format!("piper failed on this sentence: {e}");
                tracing::warn!(voice = %utterance.voice, %reason, "espeak-ng speaks it instead");
                let voice = self.config.espeak_voice.clone();
                self.render_espeak(text, &voice, utterance.rate, cancel, Some(reason))
            }
            None => {
                // Unloaded since `prepare` (another voice took its place).
                match self.load(&utterance.voice) {
                    Ok(()) => self.render(utterance, index, cancel),
                    Err(reason) => {
                        let voice = self.config.espeak_voice.clone();
                        self.render_espeak(text, &voice, utterance.rate, cancel, Some(reason))
                    }
                }
            }
        }
    }

    fn render_espeak(
        &self,
        text: &str,
        voice: &str,
        rate: f32,
        cancel: &AtomicBool,
        fallback: Option<String>,
    ) -> Result<Chunk, TtsError> {
        let espeak = Espeak::get()?;
        let mut samples = Vec::new();
        let wpm = (ESPEAK_WPM * rate).round() as u32;
        espeak.synthesize(voice, text, Some(wpm), cancel, &mut |pcm: &[i16]| {
            samples.extend(pcm.iter().map(|&s| f32::from(s) / 32768.0));
            true
        })?;
        normalize(&mut samples);
        Ok(Chunk {
            samples,
            rate: espeak.sample_rate(),
            engine: EngineKind::Espeak,
            fallback,
        })
    }

    /// Gives back the working memory ONNX Runtime keeps between sentences
    /// (about 90 MB per voice that spoke), for a caller that is idle.
    /// Returns how many voices gave theirs back.
    pub fn release_memory(&mut self) -> usize {
        let mut released = 0;
        for (id, model, map) in &mut self.loaded {
            match model.release_memory(&map.ids(&[]).ids) {
                Ok(true) => released += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(voice = %id, error = %e, "cannot give the voice's working memory back")
                }
            }
        }
        released
    }

    /// Whether a loaded voice holds working memory `release_memory` would
    /// give back.
    pub fn holds_memory(&self) -> bool {
        self.loaded.iter().any(|(_, model, _)| model.holds_memory())
    }

    /// The loaded model for `id`, marked most recently used.
    fn find(&mut self, id: &str) -> Option<&mut PiperModel> {
        let at = self.loaded.iter().position(|(loaded, ..)| loaded == id)?;
        let entry = self.loaded.remove(at);
        self.loaded.push(entry);
        self.loaded.last_mut().map(|(_, model, _)| model)
    }

    /// Makes `id` the most recently used loaded voice, loading it if needed.
    fn load(&mut self, id: &str) -> Result<(), String> {
        if self.find(id).is_some() {
            return Ok(());
        }
        if let Some(reason) = self.broken.get(id) {
            return Err(reason.clone());
        }
        let runtime = match &self.runtime {
            Ok(rt) => rt.clone(),
            Err(reason) => return Err(reason.clone()),
        };
        let result = self.load_files(&runtime, id);
        match result {
            Ok((model, map)) => {
                while self.loaded.len() >= self.config.max_loaded_voices.max(1) {
                    let (old, ..) = self.loaded.remove(0);
                    tracing::info!(voice = %old, "voice unloaded to make room");
                }
                tracing::info!(voice = %id, "voice loaded");
                self.loaded.push((id.to_owned(), model, map));
                Ok(())
            }
            Err(reason) => {
                tracing::warn!(voice = %id, %reason, "voice cannot be loaded");
                self.broken.insert(id.to_owned(), reason.clone());
                Err(reason)
            }
        }
    }

    fn load_files(
        &self,
        runtime: &OnnxRuntime,
        id: &str,
    ) -> Result<(PiperModel, PhonemeIdMap), String> {
        let store = VoiceStore::open(&self.config.voices_dir).map_err(|e| e.to_string())?;
        let installed = store
            .get(id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("voice {id} is not installed"))?;
        let config = VoiceConfig::from_path(&installed.json).map_err(|e| e.to_string())?;
        let map = PhonemeIdMap::new(&config.phoneme_id_map)
            .map_err(|e| format!("{}: {e}", installed.json.display()))?;
        let model = PiperModel::load(runtime, &installed.onnx, config, self.config.threads)
            .map_err(|e: PiperError| e.to_string())?;
        Ok((model, map))
    }
}

/// Shapes a piece's audio for a join inside a sentence: when the next piece
/// continues it (`end`), its silence after the last sound is cut to
/// [`JOIN_TAIL_SECONDS`]; it fades in over [`JOIN_FADE_SECONDS`] when it
/// continues the piece before (`start`), and out when it is continued, so
/// the join has no step.
fn shape_join(samples: &mut Vec<f32>, rate: u32, start: bool, end: bool) {
    if end {
        let tail = (rate as f32 * JOIN_TAIL_SECONDS) as usize;
        let sound = samples
            .iter()
            .rposition(|s| s.abs() >= SILENCE_LEVEL)
            .map_or(0, |at| at + 1);
        samples.truncate(sound.saturating_add(tail));
    }
    let length = ((rate as f32 * JOIN_FADE_SECONDS) as usize).min(samples.len() / 2);
    if length == 0 {
        return;
    }
    let gain = |i: usize| i as f32 / length as f32;
    if start {
        for (i, sample) in samples.iter_mut().take(length).enumerate() {
            *sample *= gain(i);
        }
    }
    if end {
        for (i, sample) in samples.iter_mut().rev().take(length).enumerate() {
            *sample *= gain(i);
        }
    }
}
