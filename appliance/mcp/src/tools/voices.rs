//! `list_voices`, `install_voice`, `remove_voice` — the room's voice store
//! for agents: what is installed and what the catalog
//! offers, adding a voice from a URL, a catalog id or files on the
//! appliance, and deleting one (seed 003's add/delete).

use hark_core::room::Failure;
use hark_core::room::InstallCall;
pub use hark_core::room::{InstalledVoice, RemovedVoice, VoiceInfo, Voices};
use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolResult as _, success};
use crate::server::HarkServer;

/// Most voices one `list_voices` call returns by default.
const DEFAULT_LIMIT: usize = 100;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListVoices {
    /// Only voices of this language: a code such as `en_US`, `en-us` or
    /// `en` (case and `-`/`_` do not matter).
    pub language: Option<String>,
    /// Most voices to return (1–1000, default 100).
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct InstallVoice {
    /// An http(s) URL of a piper voice's `.onnx` (its `.onnx.json` must be
    /// beside it), or a catalog id from `list_voices` (`en_US-amy-low`).
    pub url: Option<String>,
    /// A voice's `.onnx` file on the appliance, inside `tts.output_dirs`;
    /// its `.onnx.json` must be beside it.
    pub path: Option<String>,
    /// The `.onnx`'s SHA-256 to check a URL download against.
    pub sha256: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RemoveVoice {
    /// The installed voice's id.
    pub id: String,
}

#[tool_router(router = voices_router, vis = "pub(crate)")]
impl HarkServer {
    /// List the voices installed on the appliance and those the catalog
    /// offers for `install_voice`.
    #[tool(
        name = "list_voices",
        output_schema = super::output_schema::<Voices>(),
        annotations(
            title = "List voices",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn list_voices(
        &self,
        Parameters(args): Parameters<ListVoices>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.voices(args).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }

    /// Install a piper voice from a URL, a catalog id, or files on the
    /// appliance. Downloads are checked against the catalog's checksums.
    #[tool(
        name = "install_voice",
        output_schema = super::output_schema::<InstalledVoice>(),
        annotations(title = "Install a voice", open_world_hint = true)
    )]
    pub async fn install_voice(
        &self,
        Parameters(args): Parameters<InstallVoice>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.install(args).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }

    /// Delete an installed voice (not the appliance's default voice).
    #[tool(
        name = "remove_voice",
        output_schema = super::output_schema::<RemovedVoice>(),
        annotations(
            title = "Remove a voice",
            destructive_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn remove_voice(
        &self,
        Parameters(RemoveVoice { id }): Parameters<RemoveVoice>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.remove(id).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn voices(&self, args: ListVoices) -> Result<CallToolResult, Failure> {
        let limit = match args.limit {
            None => DEFAULT_LIMIT,
            Some(n @ 1..=1000) => n as usize,
            Some(n) => {
                return Err(Failure::invalid(format!("limit must be 1–1000, got {n}")));
            }
        };
        let voices = self.room.files.voices(args.language, limit).await?;
        let text = voices
            .voices
            .iter()
            .map(|v| {
                format!(
                    "{}{}{}",
                    v.id,
                    if v.installed { " (installed)" } else { "" },
                    if v.default { " (default)" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ok(success(text, voices))
    }

    async fn install(&self, args: InstallVoice) -> Result<CallToolResult, Failure> {
        let installed = self
            .room
            .files
            .install_voice(InstallCall {
                url: args.url,
                path: args.path,
                sha256: args.sha256,
            })
            .await?;
        Ok(success(
            format!("installed voice {}", installed.id),
            installed,
        ))
    }

    async fn remove(&self, id: String) -> Result<CallToolResult, Failure> {
        let removed = self.room.files.remove_voice(id).await?;
        Ok(success(format!("removed voice {}", removed.id), removed))
    }
}
