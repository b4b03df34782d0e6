//! `transcribe_batch` — several files in one call (seed 004's
//! `audio_batch_transcribe`), one result or one error per file: a bad file
//! does not fail the others.

use hark_core::room::Failure;
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use hark_core::room::{AudioInput, Kind, TranscribeCall, TranscriptFormat};

use super::{ToolResult as _, success};
use crate::server::HarkServer;

/// Most files one call may name.
pub const MAX_BATCH: usize = 64;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeBatch {
    /// Audio files inside the directories in `stt.audio_dirs` (1–64).
    pub audio_paths: Vec<String>,
    /// Language for all files, ISO 639-1 or `auto` (detected per file);
    /// default `stt.language` (`en`).
    pub language: Option<String>,
    /// The model for all files: a name from `list_models` or a size
    /// (`tiny`, `base`, …). Default: the configured one.
    pub model: Option<String>,
    /// The size of whisper model for all files; give this or `model`.
    pub model_size: Option<String>,
    /// Write each file's transcription into this directory on the
    /// appliance, inside `stt.output_dirs`, named after the audio file
    /// (`meeting.mp3` → `meeting.txt`); each result's `output` is its file.
    pub output_directory: Option<String>,
    /// What each file is written as: `text` (default, `.txt`), `json`,
    /// `srt` or `vtt`.
    #[serde(default)]
    pub output_format: TranscriptFormat,
}

/// `transcribe_batch`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Batch {
    /// Files transcribed.
    pub processed: usize,
    /// Files that failed.
    pub failed: usize,
    /// One per file, in order: `transcribe_audio`'s result plus
    /// `audio_path` (the audio tool spec's `input`) and, with
    /// `output_directory`, `output` (the file written); or `audio_path`
    /// and `error` (`type`, `message`).
    pub results: Vec<serde_json::Value>,
}

#[tool_router(router = transcribe_batch_router, vis = "pub(crate)")]
impl HarkServer {
    /// Transcribe several audio files on the appliance; one result or one
    /// error per file, in order.
    #[tool(
        name = "transcribe_batch",
        output_schema = super::output_schema::<Batch>(),
        annotations(
            title = "Transcribe several audio files",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn transcribe_batch(
        &self,
        Parameters(args): Parameters<TranscribeBatch>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.batch(args, &context).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn batch(
        &self,
        args: TranscribeBatch,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, Failure> {
        if args.audio_paths.is_empty() || args.audio_paths.len() > MAX_BATCH {
            return Err(Failure::invalid(format!(
                "audio_paths must list 1–{MAX_BATCH} files, got {}",
                args.audio_paths.len()
            )));
        }
        let mut results = Vec::new();
        let (mut processed, mut failed) = (0, 0);
        let mut text = String::new();
        // Two audio files of one name would write one file twice.
        let mut names = std::collections::HashSet::new();
        for path in args.audio_paths {
            let output_file = match &args.output_directory {
                Some(dir) => {
                    let stem = std::path::Path::new(&path)
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let name = format!("{stem}.{}", args.output_format.extension());
                    if stem.is_empty() || !names.insert(name.clone()) {
                        failed += 1;
                        let e = Failure::invalid(format!(
                            "{path}: another file in the batch is also written as {name}"
                        ));
                        text.push_str(&format!("{path}: error: {}\n", e.message));
                        results.push(json!({ "audio_path": path, "error": e.to_json() }));
                        continue;
                    }
                    Some(std::path::Path::new(dir).join(name).display().to_string())
                }
                None => None,
            };
            let call = TranscribeCall {
                audio: AudioInput::Path(path.clone()),
                language: args.language.clone(),
                word_timestamps: false,
                format: args.output_format,
                output_file,
                model: args.model.clone(),
                model_size: args.model_size.clone(),
            };
            let outcome = tokio::select! {
                done = self.room.files.transcribe(call) => done,
                _ = super::call_ended(self, context) => {
                    return Err(Failure::cancelled("transcription was cancelled"));
                }
            };
            match outcome {
                Ok(done) => {
                    processed += 1;
                    text.push_str(&format!("{path}: {}\n", done.result.text));
                    let mut value = serde_json::to_value(&done.result).unwrap_or_default();
                    value["audio_path"] = json!(path);
                    if let Some(written) = &done.result.output_file {
                        value["output"] = json!(written);
                    }
                    results.push(value);
                }
                Err(e) if e.kind == Kind::Cancelled => return Err(e),
                Err(e) => {
                    failed += 1;
                    text.push_str(&format!("{path}: error: {}\n", e.message));
                    results.push(json!({ "audio_path": path, "error": e.to_json() }));
                }
            }
        }
        Ok(success(
            text,
            Batch {
                processed,
                failed,
                results,
            },
        ))
    }
}
