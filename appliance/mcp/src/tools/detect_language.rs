//! `detect_language` — which language is spoken in an audio file (seed
//! 004's `audio_detect_language`). Needs a multilingual model; an
//! English-only one answers with an error naming the model.

pub use hark_core::room::Detected;
use hark_core::room::Failure;
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolResult as _, success, transcribe_audio::audio_input};
use crate::server::HarkServer;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DetectLanguage {
    /// The audio file's bytes, base64-encoded. Give this or `audio_path`.
    pub audio_base64: Option<String>,
    /// An audio file inside one of the directories in `stt.audio_dirs`.
    pub audio_path: Option<String>,
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
    ) -> Result<CallToolResult, Failure> {
        let audio = audio_input(args.audio_base64, args.audio_path)?;
        let detected = tokio::select! {
            detected = self.room.files.detect_language(audio) => detected?,
            _ = super::call_ended(self, context) => {
                return Err(Failure::cancelled("detection was cancelled"));
            }
        };
        Ok(success(detected.language.clone(), detected))
    }
}
