//! `synthesize_speech` — speech as a WAV file instead of sound (seeds 003
//! and 004): written into one of `tts.output_dirs` (paths checked like
//! `transcribe_audio`'s), or returned inline as base64. And
//! `segment_sentences` (seed 003): the sentences Hark would speak a text in.

use hark_core::room::Failure;
use hark_core::room::SynthesizeCall;
pub use hark_core::room::Synthesized;
use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolResult as _, success};
use crate::server::HarkServer;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SynthesizeSpeech {
    /// The text to turn into speech.
    pub text: String,
    /// A voice id from `list_voices` (default: the appliance's voice).
    pub voice: Option<String>,
    /// The language of the text when no voice is given (`de`, `es`, …): a
    /// voice of it, as `speak_text` chooses.
    pub language: Option<String>,
    /// Speaking rate, 0.5 (slow) to 2.0 (fast); default 1.
    #[schemars(range(min = 0.5, max = 2.0))]
    pub rate: Option<f64>,
    /// Where to write the file, inside one of `tts.output_dirs`. Without
    /// it the audio comes back inline (base64).
    pub output_path: Option<String>,
    /// `wav`, `ogg` (Ogg Opus) or `mp3`. Default: what `output_path`'s
    /// extension says (`.mp3`, `.ogg`, `.opus`), else `wav`.
    pub format: Option<hark_core::room::SpeechFormat>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SegmentSentences {
    /// The text to split.
    pub text: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Sentences {
    /// The sentences in order, as spoken (long ones are further cut at
    /// commas when spoken).
    pub sentences: Vec<String>,
    pub count: usize,
}

#[tool_router(router = synthesize_speech_router, vis = "pub(crate)")]
impl HarkServer {
    /// Turn text into speech audio (WAV) without playing it: written to a
    /// file on the appliance or returned inline.
    #[tool(
        name = "synthesize_speech",
        output_schema = super::output_schema::<Synthesized>(),
        annotations(title = "Synthesize speech to a WAV file", open_world_hint = false)
    )]
    pub async fn synthesize_speech(
        &self,
        Parameters(args): Parameters<SynthesizeSpeech>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.synthesize(args).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }

    /// Split text into the sentences the appliance would speak it in.
    #[tool(
        name = "segment_sentences",
        output_schema = super::output_schema::<Sentences>(),
        annotations(
            title = "Split text into sentences",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn segment_sentences(
        &self,
        Parameters(SegmentSentences { text }): Parameters<SegmentSentences>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.segment(text).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn synthesize(&self, args: SynthesizeSpeech) -> Result<CallToolResult, Failure> {
        let call = SynthesizeCall {
            text: args.text,
            voice: args.voice,
            language: args.language,
            rate: args.rate,
            output_path: args.output_path,
            format: args.format,
        };
        let result = self.room.files.synthesize(call).await?;
        let seconds = result.duration_seconds;
        Ok(match (&result.output_path, &result.audio_base64) {
            (Some(path), _) => success(format!("wrote {seconds} s of speech to {path}"), &result),
            (None, encoded) => {
                let encoded = encoded.clone().unwrap_or_default();
                let mut call = success(
                    format!("{seconds} s of speech, {} inline", result.format),
                    &result,
                );
                call.content.push(rmcp::model::ContentBlock::audio(
                    encoded,
                    result.mime_type.clone(),
                ));
                call
            }
        })
    }

    async fn segment(&self, text: String) -> Result<CallToolResult, Failure> {
        let sentences = self.room.speak.sentences(text).await?;
        let count = sentences.len();
        Ok(success(
            sentences.join("\n"),
            Sentences { sentences, count },
        ))
    }
}
