//! [`Files`]: speech from and to files, the voices and the models.

use super::{
    call::{BoxFuture, Failure},
    speak::Engine,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Audio an agent supplies: a file's bytes, or a path in the allowed
/// directories.
#[derive(Debug, Clone)]
pub enum AudioInput {
    /// The file's bytes, base64-encoded (decoded by the room, which bounds
    /// them first).
    Base64(String),
    Path(String),
}

/// What a transcription is written as (`output_format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum TranscriptFormat {
    /// The text alone.
    #[default]
    Text,
    /// The text, with the segments in the structured content (a file
    /// written gets the whole result as JSON).
    Json,
    /// SubRip subtitles.
    Srt,
    /// WebVTT subtitles.
    Vtt,
}

impl TranscriptFormat {
    /// The file name extension a file of it gets.
    pub fn extension(self) -> &'static str {
        match self {
            TranscriptFormat::Text => "txt",
            TranscriptFormat::Json => "json",
            TranscriptFormat::Srt => "srt",
            TranscriptFormat::Vtt => "vtt",
        }
    }
}

/// A file to transcribe.
#[derive(Debug, Clone)]
pub struct TranscribeCall {
    pub audio: AudioInput,
    /// ISO 639-1 or `auto`; `None`: `stt.language`.
    pub language: Option<String>,
    pub word_timestamps: bool,
    /// What to make of it (the content, and a file written).
    pub format: TranscriptFormat,
    /// A file to write it to, inside `stt.output_dirs`.
    pub output_file: Option<String>,
    /// The model to transcribe with: a name in the model store or a size
    /// (`tiny`, `base`, …); `None`: the configured one.
    pub model: Option<String>,
    /// The audio tool spec's `model_size`; give this or `model`.
    pub model_size: Option<String>,
}

/// `transcribe_audio`'s structured result (and each of
/// `transcribe_batch`'s).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Transcribed {
    /// The text; empty when nothing was said.
    pub text: String,
    /// Language of the text (ISO 639-1).
    pub language: String,
    /// Probability of `language` when it was detected, else null.
    pub language_confidence: Option<f32>,
    /// Seconds of audio.
    pub duration: f64,
    /// The file's format: wav, flac, mp3 or ogg.
    pub format: String,
    /// The file's sample rate (Hz) and channel count.
    pub source_rate: u32,
    pub source_channels: u16,
    /// Segments: `start`, `end` (seconds), `text`, `confidence`,
    /// `no_speech_probability`, and `words` (`word`, `start`, `end`,
    /// `probability`) with `word_timestamps`.
    pub segments: Vec<Value>,
    /// Mean token probability, 0–1.
    pub confidence: f32,
    /// The model that transcribed.
    pub model: String,
    /// Transcription time, milliseconds.
    pub transcribe_ms: u64,
    /// Where the audio came from (`source`: audio_base64 or audio_path).
    pub input: Value,
    /// The file written (canonical path), when `output_file` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
}

/// A transcription, with what it was made into.
#[derive(Debug, Clone)]
pub struct Transcription {
    pub result: Transcribed,
    /// The text in the format asked for (subtitles for `srt`/`vtt`).
    pub formatted: String,
}

/// `detect_language`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Detected {
    /// The most likely language, ISO 639-1.
    pub language: String,
    /// Its English name.
    pub language_name: String,
    /// Its probability, 0–1.
    pub confidence: f32,
    /// The five most likely languages (`language`, `name`, `probability`).
    pub candidates: Vec<Value>,
    /// Seconds of audio.
    pub duration: f64,
    /// Where the audio came from.
    pub input: Value,
}

/// Speech to make into a WAV file.
#[derive(Debug, Clone)]
pub struct SynthesizeCall {
    pub text: String,
    pub voice: Option<String>,
    /// As [`SpeakCall::language`](super::speak::SpeakCall::language).
    pub language: Option<String>,
    pub rate: Option<f64>,
    /// Where to write it, inside `tts.output_dirs`; `None`: hand it back.
    pub output_path: Option<String>,
    /// The file's format; `None`: `output_path`'s extension says (`.mp3`,
    /// `.ogg`/`.opus`), else WAV.
    pub format: Option<SpeechFormat>,
}

/// A file format synthesized speech is made as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SpeechFormat {
    /// 16-bit PCM WAV.
    Wav,
    /// Ogg Opus.
    Ogg,
    /// MP3.
    Mp3,
}

/// `synthesize_speech`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Synthesized {
    /// The file written (canonical path), when `output_path` was given.
    pub output_path: Option<String>,
    /// The WAV file in base64, when no `output_path` was given.
    pub audio_base64: Option<String>,
    /// `audio/wav`, `audio/ogg` (Opus) or `audio/mpeg`; mono.
    pub mime_type: String,
    pub duration_seconds: f64,
    /// The audio tool spec's name for `duration_seconds`.
    pub duration: f64,
    /// `wav`, `ogg` or `mp3` (the spec's `format`).
    pub format: String,
    pub sample_rate: u32,
    /// Size of the file in bytes.
    pub bytes: usize,
    /// The spec's size: kilobytes (1000 bytes), to one decimal.
    pub file_size_kb: f64,
    pub voice: String,
    /// The spec's name for `voice`.
    pub voice_used: String,
    /// `piper` or `espeak`.
    pub engine: Engine,
    /// Why espeak-ng spoke instead of piper, when it did.
    pub fallback_reason: Option<String>,
}

/// One voice, installed or in the catalog.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VoiceInfo {
    /// The voice id to pass as `voice`.
    pub id: String,
    /// Language code, e.g. `en_US`.
    pub language: Option<String>,
    /// `x_low`, `low`, `medium` or `high`.
    pub quality: Option<String>,
    /// Sample rate in Hz (installed voices).
    pub sample_rate: Option<u32>,
    /// Size of the model in bytes.
    pub size: u64,
    pub installed: bool,
    /// The appliance's default voice (`tts.voice`).
    pub default: bool,
    /// Loaded in memory now (speaks without a load delay).
    pub loaded: bool,
}

/// `list_voices`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Voices {
    pub voices: Vec<VoiceInfo>,
    /// Voices matching before `limit` applied.
    pub total: usize,
    /// Why espeak-ng speaks instead of piper voices, if it does.
    pub piper_unavailable: Option<String>,
}

/// What a speech model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ModelPurpose {
    /// whisper: files, other languages, and the microphone without a live
    /// engine.
    Transcription,
    /// Moonshine: the live engine that hears the microphone in English.
    Live,
    /// Smart Turn: hears whether a pause ends the turn.
    EndOfTurn,
}

impl ModelPurpose {
    /// As `list_models`' text says it.
    pub fn label(self) -> &'static str {
        match self {
            ModelPurpose::Transcription => "transcription",
            ModelPurpose::Live => "live",
            ModelPurpose::EndOfTurn => "end of turn",
        }
    }
}

/// What the appliance has a model set up as (`[stt]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ModelRole {
    /// `stt.model`: transcribes when a call names no model.
    Default,
    /// `stt.multilingual_model`: other languages, `auto`, detection.
    OtherLanguages,
    /// `stt.live_model`.
    Live,
    /// `stt.turn_model`.
    EndOfTurn,
}

impl ModelRole {
    /// The setting that makes it so.
    pub fn setting(self) -> &'static str {
        match self {
            ModelRole::Default => "stt.model",
            ModelRole::OtherLanguages => "stt.multilingual_model",
            ModelRole::Live => "stt.live_model",
            ModelRole::EndOfTurn => "stt.turn_model",
        }
    }
}

/// One installed speech model.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelSummary {
    /// Its name in the model store: what `model` takes.
    pub name: String,
    pub purpose: ModelPurpose,
    /// whisper's size read from the file (`tiny`, `base`, `small`,
    /// `medium`, `large`): what `model_size` takes. Null for other kinds.
    pub size: Option<String>,
    /// `en`, `multilingual` or `any` (Smart Turn hears sound, not words).
    pub language: String,
    /// The ISO 639-1 codes it transcribes (empty for Smart Turn).
    pub languages: Vec<String>,
    /// Weight format (`q8_0`, `f16`, …); empty where the files do not say.
    pub quantisation: String,
    /// Bytes on disk.
    pub bytes: u64,
    /// What it is set up as; empty: it serves calls that ask for it.
    pub roles: Vec<ModelRole>,
    /// A transcription tool's `model` may name it.
    pub per_call: bool,
}

/// `list_models`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelList {
    pub models: Vec<ModelSummary>,
    /// The model transcription uses when a call names none.
    pub default: String,
}

/// Where a voice to install comes from.
#[derive(Debug, Clone)]
pub struct InstallCall {
    /// An http(s) URL of a piper `.onnx`, or a catalog id.
    pub url: Option<String>,
    /// A `.onnx` on the appliance, inside `tts.output_dirs`.
    pub path: Option<String>,
    /// The `.onnx`'s SHA-256 to check a download against.
    pub sha256: Option<String>,
}

/// `install_voice`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InstalledVoice {
    pub id: String,
    pub language: Option<String>,
    pub quality: Option<String>,
    pub sample_rate: u32,
    pub size: u64,
    /// SHA-256 of the installed `.onnx`.
    pub sha256: String,
    /// Where it came from.
    pub source: String,
}

/// `remove_voice`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RemovedVoice {
    pub id: String,
    /// Files deleted.
    pub deleted: Vec<String>,
}

pub trait Files: Send + Sync {
    /// Transcribes an audio file an agent supplies (dropped: abandoned).
    fn transcribe(&self, call: TranscribeCall) -> BoxFuture<'_, Result<Transcription, Failure>>;

    /// The languages most likely spoken in an audio file.
    fn detect_language(&self, audio: AudioInput) -> BoxFuture<'_, Result<Detected, Failure>>;

    /// Speech as a WAV file, written or handed back.
    fn synthesize(&self, call: SynthesizeCall) -> BoxFuture<'_, Result<Synthesized, Failure>>;

    /// The voices installed and in the catalog, of `language` if given.
    fn voices(
        &self,
        language: Option<String>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Voices, Failure>>;

    fn install_voice(&self, call: InstallCall) -> BoxFuture<'_, Result<InstalledVoice, Failure>>;

    fn remove_voice(&self, id: String) -> BoxFuture<'_, Result<RemovedVoice, Failure>>;

    /// The speech models installed, with what each is set up as.
    fn models(&self) -> BoxFuture<'_, Result<ModelList, Failure>>;
}
