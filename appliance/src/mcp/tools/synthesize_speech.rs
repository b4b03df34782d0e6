//! `synthesize_speech` — speech as a WAV file instead of sound (seeds 003
//! and 004): written into one of `tts.output_dirs` (paths checked like
//! `transcribe_audio`'s), or returned inline as base64. And
//! `segment_sentences` (seed 003): the sentences Hark would speak a text in.

use std::{io::Cursor, sync::Arc};

use base64::Engine as _;
use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ToolError,
    speak_text::{check_rate, check_text, tts_of},
    success,
};
use crate::{mcp::HarkServer, tts::Rendered};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SynthesizeSpeech {
    /// The text to turn into speech.
    pub text: String,
    /// A voice id from `list_voices` (default: the appliance's voice).
    pub voice: Option<String>,
    /// Speaking rate, 0.5 (slow) to 2.0 (fast); default 1.
    #[schemars(range(min = 0.5, max = 2.0))]
    pub rate: Option<f64>,
    /// Where to write the WAV file, inside one of `tts.output_dirs`. Without
    /// it the audio comes back inline (base64).
    pub output_path: Option<String>,
}

/// `synthesize_speech`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Synthesized {
    /// The file written (canonical path), when `output_path` was given.
    pub output_path: Option<String>,
    /// The WAV file in base64, when no `output_path` was given.
    pub audio_base64: Option<String>,
    /// `audio/wav`: 16-bit PCM, mono.
    pub mime_type: String,
    pub duration_seconds: f64,
    pub sample_rate: u32,
    /// Size of the WAV file in bytes.
    pub bytes: usize,
    pub voice: String,
    /// `piper` or `espeak`.
    pub engine: String,
    /// Why espeak-ng spoke instead of piper, when it did.
    pub fallback_reason: Option<String>,
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
    async fn synthesize(&self, args: SynthesizeSpeech) -> Result<CallToolResult, ToolError> {
        let tts = tts_of(self)?;
        let speakable = check_text(&args.text, tts.max_chars)?;
        let rate = check_rate(args.rate)?.unwrap_or(1.0);
        // Checked before the work, so a bad path costs nothing.
        let target = match &args.output_path {
            Some(path) => Some(tts.outputs.resolve_write(std::path::Path::new(path))?),
            None => None,
        };
        let rendered = {
            let tts = Arc::clone(&tts);
            let voice = args.voice.clone();
            tokio::task::spawn_blocking(move || tts.render(&speakable, voice.as_deref(), rate))
                .await
                .map_err(|e| ToolError::new("SpeechError", format!("synthesis failed: {e}")))??
        };
        let wav = wav_bytes(&rendered)?;
        // The voice's working memory and what the synthesis freed go back
        // now, beside the reply: requests that follow one another closer
        // than the voices' idle release otherwise kept it and grew it (60
        // in a row: 460 MiB; docs/benchmarks.md, the turn: memory).
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
            mime_type: "audio/wav".into(),
            duration_seconds,
            sample_rate: rendered.rate,
            bytes: wav.len(),
            voice: rendered.voice.clone(),
            engine: rendered.engine.to_string(),
            fallback_reason: rendered.fallback.clone(),
        };
        match target {
            Some(target) => {
                let written = target.clone();
                tokio::task::spawn_blocking(move || write_atomically(&written, &wav))
                    .await
                    .map_err(|e| ToolError::new("SpeechError", format!("writing failed: {e}")))??;
                let shown = target.display().to_string();
                result.output_path = Some(shown.clone());
                Ok(success(
                    format!("wrote {duration_seconds} s of speech to {shown}"),
                    result,
                ))
            }
            None => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(&wav);
                result.audio_base64 = Some(encoded.clone());
                let mut call = success(
                    format!("{duration_seconds} s of speech, WAV inline"),
                    result,
                );
                call.content
                    .push(rmcp::model::ContentBlock::audio(encoded, "audio/wav"));
                Ok(call)
            }
        }
    }

    async fn segment(&self, text: String) -> Result<CallToolResult, ToolError> {
        let tts = tts_of(self)?;
        if text.chars().count() > tts.max_chars {
            return Err(ToolError::invalid(format!(
                "text is longer than {} characters (tts.max_chars)",
                tts.max_chars
            )));
        }
        let (ranges, text) = {
            let tts = Arc::clone(&tts);
            tokio::task::spawn_blocking(move || tts.sentences(&text).map(|r| (r, text)))
                .await
                .map_err(|e| ToolError::new("SpeechError", format!("segmenting failed: {e}")))??
        };
        let sentences: Vec<String> = ranges
            .into_iter()
            .filter_map(|range| text.get(range))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let count = sentences.len();
        Ok(success(
            sentences.join("\n"),
            Sentences { sentences, count },
        ))
    }
}

/// 16-bit PCM WAV, mono.
fn wav_bytes(rendered: &Rendered) -> Result<Vec<u8>, ToolError> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rendered.rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let fail = |e: hound::Error| ToolError::new("SpeechError", format!("cannot encode WAV: {e}"));
    let mut out = Cursor::new(Vec::with_capacity(44 + rendered.samples.len() * 2));
    {
        let mut writer = hound::WavWriter::new(&mut out, spec).map_err(fail)?;
        for s in &rendered.samples {
            let v = (s.clamp(-1.0, 1.0) * 32767.0) as i16;
            writer.write_sample(v).map_err(fail)?;
        }
        writer.finalize().map_err(fail)?;
    }
    Ok(out.into_inner())
}

/// Writes through a temporary file in the same directory, so a reader never
/// sees half a file and a failure leaves the old one in place.
fn write_atomically(target: &std::path::Path, bytes: &[u8]) -> Result<(), ToolError> {
    let fail = |e: std::io::Error| {
        ToolError::new(
            "SpeechError",
            format!("cannot write {}: {e}", target.display()),
        )
    };
    let mut temp = target.as_os_str().to_owned();
    temp.push(format!(".tmp-{}", std::process::id()));
    let temp = std::path::PathBuf::from(temp);
    std::fs::write(&temp, bytes).map_err(fail)?;
    std::fs::rename(&temp, target).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        fail(e)
    })
}
