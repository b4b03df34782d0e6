//! `transcribe_audio` — transcribes audio an agent supplies: inline as
//! base64, or as a path inside `stt.audio_dirs` (checked on the canonical
//! path, so neither `..` nor a symbolic link leads out). WAV, FLAC, MP3 and
//! OGG/Vorbis are decoded and resampled to whisper's 16 kHz; the result is
//! text, JSON segments, or SRT/WebVTT subtitles.

use std::{path::PathBuf, sync::Arc};

use base64::Engine as _;
use hark_audio::decode::{self, Decoded};
use hark_stt::engine::{Engine, Request, Transcript};
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ToolError, success};
use crate::{
    mcp::HarkServer,
    stt::{SpeechToText, subtitles},
};

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// The text alone.
    #[default]
    Text,
    /// The text, with the segments in the structured content.
    Json,
    /// SubRip subtitles.
    Srt,
    /// WebVTT subtitles.
    Vtt,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeAudio {
    /// The audio file's bytes, base64-encoded (WAV, FLAC, MP3 or OGG/Vorbis).
    /// Give this or `audio_path`, not both.
    pub audio_base64: Option<String>,
    /// An audio file on the appliance, inside one of the directories in
    /// `stt.audio_dirs`. Give this or `audio_base64`, not both.
    pub audio_path: Option<String>,
    /// Language spoken, ISO 639-1 (`en`, `de`, …) or `auto` (default).
    /// English-only models accept only `en`.
    pub language: Option<String>,
    /// `text` (default), `json`, `srt` or `vtt`.
    #[serde(default)]
    pub output_format: OutputFormat,
    /// Add each word with its start and end time to the segments.
    #[serde(default)]
    pub word_timestamps: bool,
}

/// The audio an agent named, decoded: from base64 or from an allowed path.
/// Blocking (reads and decodes the file): call from a blocking thread.
pub fn load_audio(
    stt: &SpeechToText,
    audio_base64: Option<&str>,
    audio_path: Option<&str>,
) -> Result<(Decoded, Value), ToolError> {
    match (audio_base64, audio_path) {
        (Some(_), Some(_)) => Err(ToolError::invalid(
            "give either audio_base64 or audio_path, not both",
        )),
        (None, None) => Err(ToolError::invalid(
            "no audio: give audio_base64 (the file's bytes in base64) or audio_path (a file in an allowed directory)",
        )),
        (Some(b64), None) => {
            // The encoded size bounds the decoded size; refuse early.
            let limit = stt.limits.max_bytes;
            if (b64.len() as u64 / 4) * 3 > limit + 3 {
                return Err(decode::DecodeError::TooLarge {
                    size: b64.len() as u64 / 4 * 3,
                    limit,
                }
                .into());
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| {
                    ToolError::invalid(format!("audio_base64 is not valid base64: {e}"))
                })?;
            let size = bytes.len();
            let decoded = decode::decode(bytes, None, &stt.limits)?;
            Ok((decoded, json!({ "source": "audio_base64", "bytes": size })))
        }
        (None, Some(path)) => {
            let requested = PathBuf::from(path);
            let resolved = stt
                .files
                .resolve_read(&requested)
                .map_err(|e| ToolError::from(e).with_context(json!({ "audio_path": path })))?;
            let decoded = decode::decode_file(&resolved, &stt.limits)
                .map_err(|e| ToolError::from(e).with_context(json!({ "audio_path": path })))?;
            Ok((
                decoded,
                json!({ "source": "audio_path", "audio_path": path }),
            ))
        }
    }
}

/// The speech-to-text service and its engine, or the error an agent sees.
pub fn engine_of(server: &HarkServer) -> Result<(Arc<SpeechToText>, Arc<Engine>), ToolError> {
    let stt = server
        .state
        .stt
        .get()
        .cloned()
        .ok_or_else(|| ToolError::new("ModelNotLoadedError", "speech-to-text is starting"))?;
    let engine = Arc::clone(
        stt.engine()
            .map_err(|why| ToolError::new("ModelNotLoadedError", why))?,
    );
    Ok((stt, engine))
}

/// Transcribes decoded audio on the engine, giving up if the call is
/// cancelled.
pub async fn run(
    server: &HarkServer,
    engine: &Engine,
    request: Request,
    context: &RequestContext<RoleServer>,
) -> Result<Transcript, ToolError> {
    let cancel = Arc::clone(&request.cancel);
    let answer = engine.submit(request)?;
    tokio::select! {
        answer = answer => Ok(answer.map_err(|_| ToolError::new("ModelNotLoadedError", "the speech-to-text engine stopped"))??),
        _ = super::call_ended(server, context) => {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
            Err(ToolError::new("CancelledError", "transcription was cancelled"))
        }
    }
}

/// `transcribe_audio`'s structured result (and each of
/// `transcribe_batch`'s).
#[derive(Debug, Serialize, JsonSchema)]
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
}

/// The structured form of a transcript.
pub fn transcript_json(
    t: &Transcript,
    decoded: &Decoded,
    source: Value,
    model: &str,
) -> Transcribed {
    Transcribed {
        text: t.text.clone(),
        language: t.language.clone(),
        language_confidence: t.language_probability,
        duration: decoded.duration_secs,
        format: decoded.format.to_owned(),
        source_rate: decoded.source_rate,
        source_channels: decoded.source_channels,
        segments: t
            .segments
            .iter()
            .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
            .collect(),
        confidence: t.confidence,
        model: model.to_owned(),
        transcribe_ms: t.elapsed_ms,
        input: source,
    }
}

#[tool_router(router = transcribe_audio_router, vis = "pub(crate)")]
impl HarkServer {
    /// Transcribe an audio file (WAV, FLAC, MP3 or OGG/Vorbis) sent inline
    /// as base64 or named by a path in an allowed directory; text, JSON
    /// segments, or SRT/WebVTT subtitles.
    #[tool(
        name = "transcribe_audio",
        output_schema = super::output_schema::<Transcribed>(),
        annotations(
            title = "Transcribe an audio file",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn transcribe_audio(
        &self,
        Parameters(args): Parameters<TranscribeAudio>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.transcribe_supplied(args, &context).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn transcribe_supplied(
        &self,
        args: TranscribeAudio,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ToolError> {
        let (stt, engine) = engine_of(self)?;
        let TranscribeAudio {
            audio_base64,
            audio_path,
            language,
            output_format,
            word_timestamps,
        } = args;
        let (mut decoded, source) = tokio::task::spawn_blocking(move || {
            load_audio(&stt, audio_base64.as_deref(), audio_path.as_deref())
        })
        .await
        .map_err(|e| ToolError::new("AudioFormatError", format!("decoding failed: {e}")))??;
        // The samples go to the engine; the rest describes the file.
        let mut request = Request::new(std::mem::take(&mut decoded.samples));
        request.language = language;
        request.word_timestamps = word_timestamps;
        let transcript = run(self, &engine, request, context).await?;
        let structured = transcript_json(&transcript, &decoded, source, &engine.info().name);
        let text = match output_format {
            OutputFormat::Text | OutputFormat::Json => transcript.text.clone(),
            OutputFormat::Srt => subtitles(&transcript, false),
            OutputFormat::Vtt => subtitles(&transcript, true),
        };
        Ok(success(text, structured))
    }
}
