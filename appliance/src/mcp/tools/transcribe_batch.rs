//! `transcribe_batch` — several files in one call (seed 004's
//! `audio_batch_transcribe`), one result or one error per file: a bad file
//! does not fail the others.

use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{
    ToolError, success,
    transcribe_audio::{engine_of, load_audio, run, transcript_json},
};
use crate::mcp::HarkServer;

/// Most files one call may name.
pub const MAX_BATCH: usize = 64;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeBatch {
    /// Audio files inside the directories in `stt.audio_dirs` (1–64).
    pub audio_paths: Vec<String>,
    /// Language for all files, ISO 639-1 or `auto` (default).
    pub language: Option<String>,
}

/// `transcribe_batch`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Batch {
    /// Files transcribed.
    pub processed: usize,
    /// Files that failed.
    pub failed: usize,
    /// One per file, in order: `transcribe_audio`'s result plus
    /// `audio_path`, or `audio_path` and `error` (`type`, `message`).
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
    ) -> Result<CallToolResult, ToolError> {
        if args.audio_paths.is_empty() || args.audio_paths.len() > MAX_BATCH {
            return Err(ToolError::invalid(format!(
                "audio_paths must list 1–{MAX_BATCH} files, got {}",
                args.audio_paths.len()
            )));
        }
        let (stt, engine) = engine_of(self)?;
        let mut results = Vec::new();
        let (mut processed, mut failed) = (0, 0);
        let mut text = String::new();
        for path in args.audio_paths {
            let stt2 = std::sync::Arc::clone(&stt);
            let p = path.clone();
            let loaded = tokio::task::spawn_blocking(move || load_audio(&stt2, None, Some(&p)))
                .await
                .map_err(|e| ToolError::new("AudioFormatError", format!("decoding failed: {e}")))
                .and_then(|r| r);
            let outcome = match loaded {
                Ok((mut decoded, source)) => {
                    let mut request =
                        hark_stt::engine::Request::new(std::mem::take(&mut decoded.samples));
                    request.language = args.language.clone();
                    run(self, &engine, request, context).await.map(|t| {
                        let value = serde_json::to_value(transcript_json(
                            &t,
                            &decoded,
                            source,
                            &engine.info().name,
                        ))
                        .unwrap_or_default();
                        (value, t.text)
                    })
                }
                Err(e) => Err(e),
            };
            match outcome {
                Ok((mut value, transcript)) => {
                    processed += 1;
                    text.push_str(&format!("{path}: {transcript}\n"));
                    value["audio_path"] = json!(path);
                    results.push(value);
                }
                Err(e) if e.kind == "CancelledError" => return Err(e),
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
