//! One of the person's messages as agents receive it: the shape the
//! inbox resource, the channel pushes and `wait_for_person` share.

use schemars::JsonSchema;
use serde::Serialize;

use hark_store::inbox::{Message, rfc3339};

/// One of the person's messages.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PersonMessage {
    /// The message's id in the inbox.
    pub id: i64,
    /// What the person said.
    pub text: String,
    /// When they began speaking (RFC 3339, UTC).
    pub at: String,
    /// When the words were transcribed (RFC 3339, UTC, microseconds).
    pub transcribed_at: String,
    /// Seconds of speech.
    pub duration: f64,
    /// The agent the person addressed (by name or as the default agent);
    /// null: any agent.
    pub addressed_to: Option<String>,
    /// `name` (the person said it), `default` (`inbox.default_agent`) or
    /// `anyone`.
    pub addressed_by: String,
    /// Mean token probability of the transcript, 0–1.
    pub confidence: Option<f32>,
}

impl From<&Message> for PersonMessage {
    fn from(m: &Message) -> Self {
        Self {
            id: m.id,
            text: m.new.text.clone(),
            at: rfc3339(m.new.spoken_at),
            transcribed_at: humantime::format_rfc3339_micros(m.new.transcribed_at).to_string(),
            duration: m.new.duration,
            addressed_to: m.new.addressed_to.clone(),
            addressed_by: m.new.addressed_by.clone(),
            confidence: m.new.confidence,
        }
    }
}
