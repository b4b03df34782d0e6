//! [`Hands`]: the simulated board's button and switch.

use super::call::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A button action asked of the simulated board (`hark button`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ButtonAction {
    /// A tap: down, 120 ms, up.
    Press,
    /// Down, and kept down.
    Hold,
    /// Up.
    Release,
}

/// The request `hark button` / `hark mute` send (one of the two fields).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardControl {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub button: Option<ButtonAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mute: Option<bool>,
}

/// Why the hands did not do what was asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// The request itself is wrong.
    #[error("{0}")]
    Invalid(String),
    /// There is nothing here to do it with (no simulated board).
    #[error("{0}")]
    Unavailable(String),
    /// A self-test step ran and failed.
    #[error("{message}")]
    Failed { message: String, step: String },
    /// Something broke while doing it.
    #[error("{0}")]
    Broken(String),
}

pub trait Hands: Send + Sync {
    /// Moves the simulated board's button or switch; what it did.
    fn control(&self, control: BoardControl) -> BoxFuture<'_, Result<Value, Refusal>>;

    /// One step of the self-test (its request and answer as JSON: the
    /// self-test's own wire types).
    fn selftest(&self, request: Value) -> BoxFuture<'_, Result<Value, Refusal>>;
}
