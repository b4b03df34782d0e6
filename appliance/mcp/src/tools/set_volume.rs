//! `set_volume` — the speaker's volume, 0–100, at run time: on the card's
//! mixer control when `audio.playback.mixer_control` names one, else in
//! software. Starts from `audio.playback.volume` at each start.

pub use hark_core::room::VolumeSet;
use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolResult as _, success};
use crate::server::HarkServer;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetVolume {
    /// Volume from 0 (silent) to 100 (full).
    #[schemars(range(min = 0, max = 100))]
    pub volume: u32,
}

#[tool_router(router = set_volume_router, vis = "pub(crate)")]
impl HarkServer {
    /// Set the speaker volume, 0 (silent) to 100 (full).
    #[tool(
        name = "set_volume",
        output_schema = super::output_schema::<VolumeSet>(),
        annotations(
            title = "Speaker volume",
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn set_volume(
        &self,
        Parameters(SetVolume { volume }): Parameters<SetVolume>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.room.volume.set_volume(i64::from(volume)).await {
            Ok(set) => success(format!("volume {}", set.volume), set),
            Err(e) => e.into_result(),
        })
    }
}
