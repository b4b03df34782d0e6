//! `list_models` — the speech models installed on the appliance, with their
//! sizes and languages and what each is set up as: what the transcription
//! tools' `model` and `model_size` can choose from.

use hark_core::room::Failure;
pub use hark_core::room::ModelList;
use rmcp::{ErrorData, model::CallToolResult, tool, tool_router};

use super::{ToolResult as _, success};
use crate::server::HarkServer;

#[tool_router(router = models_router, vis = "pub(crate)")]
impl HarkServer {
    /// List the speech models installed on the appliance: name, size,
    /// languages and role. Pass a name as `model`, or a size as
    /// `model_size`, to `transcribe_audio` or `transcribe_batch`.
    #[tool(
        name = "list_models",
        output_schema = super::output_schema::<ModelList>(),
        annotations(
            title = "List speech models",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn list_models(&self) -> Result<CallToolResult, ErrorData> {
        Ok(match self.models().await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn models(&self) -> Result<CallToolResult, Failure> {
        let list = self.room.files.models().await?;
        let text = list
            .models
            .iter()
            .map(|m| {
                let languages = match m.language.as_str() {
                    "multilingual" => format!("{} languages", m.languages.len()),
                    "en" => "English".to_owned(),
                    _ => "any language".to_owned(),
                };
                let size = m
                    .size
                    .as_deref()
                    .map(|s| format!(", {s}"))
                    .unwrap_or_default();
                let roles: Vec<&str> = m.roles.iter().map(|r| r.setting()).collect();
                let roles = if roles.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", roles.join(", "))
                };
                format!(
                    "{} ({}{size}, {languages}){roles}",
                    m.name,
                    m.purpose.label()
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ok(success(text, list))
    }
}
