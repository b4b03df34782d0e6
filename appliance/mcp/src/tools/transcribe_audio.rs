//! `transcribe_audio` — transcribes audio an agent supplies: inline as
//! base64, or as a path inside `stt.audio_dirs` (checked on the canonical
//! path, so neither `..` nor a symbolic link leads out). WAV, FLAC, MP3 and
//! OGG/Vorbis are decoded and resampled to whisper's 16 kHz; the result is
//! text, JSON segments, or SRT/WebVTT subtitles.

use hark_core::room::Failure;
pub use hark_core::room::Transcribed;
use hark_core::room::{AudioInput, TranscribeCall};
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolResult as _, success};
use crate::server::HarkServer;

/// `text`, `json`, `srt` or `vtt`.
pub use hark_core::room::TranscriptFormat as OutputFormat;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeAudio {
    /// The audio file's bytes, base64-encoded (WAV, FLAC, MP3 or OGG/Vorbis).
    /// Give this or `audio_path`, not both.
    pub audio_base64: Option<String>,
    /// An audio file on the appliance, inside one of the directories in
    /// `stt.audio_dirs`. Give this or `audio_base64`, not both.
    pub audio_path: Option<String>,
    /// Language spoken, ISO 639-1 (`en`, `de`, …), or `auto` to have it
    /// detected (slower); default `stt.language` (`en`). `auto` and other
    /// languages need a multilingual model (`stt.multilingual_model`).
    pub language: Option<String>,
    /// `text` (default), `json`, `srt` or `vtt`: the content, and a file
    /// written with `output_file`.
    #[serde(default)]
    pub output_format: OutputFormat,
    /// Also write it to this file on the appliance, inside
    /// `stt.output_dirs` (the text, the whole result as JSON, or the
    /// subtitles); the result's `output_file` is the file written.
    pub output_file: Option<String>,
    /// Add each word with its start and end time to the segments.
    #[serde(default)]
    pub word_timestamps: bool,
    /// The model to transcribe with: a name from `list_models`
    /// (`base-q8_0`) or a size (`tiny`, `base`, `small`, `medium`,
    /// `large`); loaded on first use. Default: the configured one.
    pub model: Option<String>,
    /// The size of whisper model to transcribe with (`tiny`, `base`,
    /// `small`, `medium`, `large`, `large-v3`): an installed one of that
    /// size for the language. Give this or `model`.
    pub model_size: Option<String>,
}

/// The audio an agent named: inline or a path, exactly one of them.
pub fn audio_input(
    audio_base64: Option<String>,
    audio_path: Option<String>,
) -> Result<AudioInput, Failure> {
    match (audio_base64, audio_path) {
        (Some(_), Some(_)) => Err(Failure::invalid(
            "give either audio_base64 or audio_path, not both",
        )),
        (None, None) => Err(Failure::invalid(
            "no audio: give audio_base64 (the file's bytes in base64) or audio_path (a file in an allowed directory)",
        )),
        (Some(b64), None) => Ok(AudioInput::Base64(b64)),
        (None, Some(path)) => Ok(AudioInput::Path(path)),
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
    ) -> Result<CallToolResult, Failure> {
        let call = TranscribeCall {
            audio: audio_input(args.audio_base64, args.audio_path)?,
            language: args.language,
            word_timestamps: args.word_timestamps,
            format: args.output_format,
            output_file: args.output_file,
            model: args.model,
            model_size: args.model_size,
        };
        let transcription = tokio::select! {
            done = self.room.files.transcribe(call) => done?,
            _ = super::call_ended(self, context) => {
                return Err(Failure::cancelled("transcription was cancelled"));
            }
        };
        Ok(success(transcription.formatted, transcription.result))
    }
}
