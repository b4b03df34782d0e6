//! `set_volume` — the speaker's volume, 0–100, at run time: on the card's
//! mixer control when `audio.playback.mixer_control` names one, else in
//! software. Starts from `audio.playback.volume` at each start.

use rmcp::{Json, handler::server::wrapper::Parameters, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::mcp::HarkServer;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetVolume {
    /// Volume from 0 (silent) to 100 (full).
    #[schemars(range(min = 0, max = 100))]
    pub volume: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct VolumeSet {
    /// The volume now in effect, 0–100.
    pub volume: u8,
    /// The card's mixer control that was set, or null when the volume is
    /// applied in software only.
    pub hardware_control: Option<String>,
}

#[tool_router(router = set_volume_router, vis = "pub(crate)")]
impl HarkServer {
    /// Set the speaker volume, 0 (silent) to 100 (full).
    #[tool(
        name = "set_volume",
        annotations(
            title = "Speaker volume",
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn set_volume(
        &self,
        Parameters(SetVolume { volume }): Parameters<SetVolume>,
    ) -> Result<Json<VolumeSet>, String> {
        set(&self.state, i64::from(volume)).await.map(Json)
    }
}

/// Sets the speaker's volume (0–100): the tool, and the status page.
pub async fn set(state: &crate::state::ApplianceState, volume: i64) -> Result<VolumeSet, String> {
    let volume = u8::try_from(volume)
        .ok()
        .filter(|v| *v <= 100)
        .ok_or_else(|| format!("volume must be 0–100, got {volume}"))?;
    let player = state
        .player()
        .ok_or("there is no speaker: the audio engine is not running (audio.enabled = false)")?;
    // The mixer call is a blocking ALSA control operation.
    let (result, player) = tokio::task::spawn_blocking(move || (player.set_volume(volume), player))
        .await
        .map_err(|e| format!("setting the volume failed: {e}"))?;
    let hardware_control = match result {
        Ok(()) => player.mixer_control().map(str::to_owned),
        Err(e) => {
            tracing::warn!(error = %e, "hardware volume not set; software volume applies");
            None
        }
    };
    Ok(VolumeSet {
        volume: player.volume(),
        hardware_control,
    })
}
