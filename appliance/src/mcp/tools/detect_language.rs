//! `detect_language` — which language is spoken in an audio file (seed
//! 004's `audio_detect_language`). Needs a multilingual model; an
//! English-only one answers with an error naming the model.

use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{
    ToolError, success,
    transcribe_audio::{engine_of, load_audio},
};
use crate::mcp::HarkServer;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DetectLanguage {
    /// The audio file's bytes, base64-encoded. Give this or `audio_path`.
    pub audio_base64: Option<String>,
    /// An audio file inside one of the directories in `stt.audio_dirs`.
    pub audio_path: Option<String>,
}

/// `detect_language`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Detected {
    /// The most likely language, ISO 639-1.
    pub language: String,
    /// Its English name.
    pub language_name: String,
    /// Its probability, 0–1.
    pub confidence: f32,
    /// The five most likely languages (`language`, `name`, `probability`).
    pub candidates: Vec<serde_json::Value>,
    /// Seconds of audio.
    pub duration: f64,
    /// Where the audio came from.
    pub input: serde_json::Value,
}

#[tool_router(router = detect_language_router, vis = "pub(crate)")]
impl HarkServer {
    /// Detect the language spoken in an audio file (multilingual models
    /// only); the most likely languages with their probabilities.
    #[tool(
        name = "detect_language",
        output_schema = super::output_schema::<Detected>(),
        annotations(
            title = "Detect the spoken language",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn detect_language(
        &self,
        Parameters(args): Parameters<DetectLanguage>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.detect(args, &context).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn detect(
        &self,
        args: DetectLanguage,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ToolError> {
        let (stt, engine) = engine_of(self)?;
        if !engine.info().multilingual {
            return Err(ToolError::new(
                "LanguageError",
                format!(
                    "the model {} understands English only and cannot detect languages; set stt.model to a multilingual model (e.g. `hark models fetch base`)",
                    engine.info().name
                ),
            ));
        }
        let (decoded, source) = tokio::task::spawn_blocking(move || {
            load_audio(
                &stt,
                args.audio_base64.as_deref(),
                args.audio_path.as_deref(),
            )
        })
        .await
        .map_err(|e| ToolError::new("AudioFormatError", format!("decoding failed: {e}")))??;
        let cancel = std::sync::Arc::default();
        let answer = engine.submit_detect(decoded.samples, std::sync::Arc::clone(&cancel))?;
        let guesses = tokio::select! {
            answer = answer => answer.map_err(|_| ToolError::new("ModelNotLoadedError", "the speech-to-text engine stopped"))??,
            _ = super::call_ended(self, context) => {
                cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(ToolError::new("CancelledError", "detection was cancelled"));
            }
        };
        let best = guesses
            .first()
            .ok_or_else(|| ToolError::new("TranscriptionError", "no language was detected"))?;
        Ok(success(
            best.language.clone(),
            Detected {
                language: best.language.clone(),
                language_name: best.name.clone(),
                confidence: best.probability,
                candidates: guesses
                    .iter()
                    .map(|g| json!({ "language": g.language, "name": g.name, "probability": g.probability }))
                    .collect(),
                duration: decoded.duration_secs,
                input: source,
            },
        ))
    }
}
