//! [`Volume`]: the speaker's volume.

use super::call::{BoxFuture, Failure};
use serde::Serialize;

/// `set_volume`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VolumeSet {
    /// The volume now in effect, 0–100.
    pub volume: u8,
    /// The card's mixer control that was set, or null when the volume is
    /// applied in software only.
    pub hardware_control: Option<String>,
}

pub trait Volume: Send + Sync {
    /// The speaker's volume, 0–100; `None` without a speaker.
    fn volume(&self) -> Option<u8>;

    /// Sets it (0–100).
    fn set_volume(&self, volume: i64) -> BoxFuture<'_, Result<VolumeSet, Failure>>;
}
