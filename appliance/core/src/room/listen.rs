//! [`Listen`]: hearing the person (`transcribe_voice`).

use super::call::{BoxFuture, Failure, Report};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The person stopped speaking.
    EndOfSpeech,
    /// The person finished their turn (the end-of-turn model heard it).
    EndOfTurn,
    /// Nobody spoke before the timeout.
    Timeout,
    /// The recording reached its longest.
    MaxLength,
    /// Ended on purpose: push-to-talk released, or stopped.
    Stopped,
    /// The call went away first.
    Cancelled,
    /// The microphone stopped delivering audio.
    Stalled,
    /// The call held the floor past `floor.max_hold_seconds`.
    HeldTooLong,
    /// The mute switch went on mid-recording.
    Muted,
    /// A self-test's recording, of a length it set.
    Selftest,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::EndOfSpeech => "end_of_speech",
            EndReason::EndOfTurn => "end_of_turn",
            EndReason::Timeout => "timeout",
            EndReason::MaxLength => "max_length",
            EndReason::Stopped => "stopped",
            EndReason::Cancelled => "cancelled",
            EndReason::Stalled => "stalled",
            EndReason::HeldTooLong => "held_too_long",
            EndReason::Muted => "muted",
            EndReason::Selftest => "selftest",
        }
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer when nothing was said (seed 000's).
pub const NO_SPEECH: &str = "(no speech detected)";

/// What a listen heard: `transcribe_voice`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Heard {
    /// What was said, or `(no speech detected)`.
    pub text: String,
    /// Whether speech was heard and transcribed.
    pub speech: bool,
    /// Why listening ended: `end_of_speech`, `timeout`, `max_length`,
    /// `stopped`.
    pub end_reason: EndReason,
    /// Seconds of audio recorded, pre-roll included.
    pub duration: f64,
    /// Language of the text (ISO 639-1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// When speech began and ended, seconds from the start of the recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speech_start: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speech_end: Option<f64>,
    /// Segments with `start`, `end` (seconds from the start of the
    /// recording), `text` and `confidence`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<Value>,
    /// Mean token probability, 0–1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// The model that transcribed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Transcription time, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcribe_ms: Option<u64>,
    /// The transcription began at the first pause, before the turn had
    /// ended (`stt.speculative`), and was kept since the turn ended there.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub speculative: bool,
    /// What the person went on to say just after this agent's last listen
    /// had ended their turn (heard while the agent had not yet answered,
    /// and kept for it): the rest of that turn, returned at once without
    /// opening the microphone.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub continuation: bool,
    /// The recording's number on the event stream (not part of results).
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    pub listen: u64,
}

/// An agent's listen (`transcribe_voice`).
#[derive(Debug, Clone)]
pub struct ListenCall {
    /// Who listens.
    pub agent: String,
    /// How long to wait for speech to begin, any wait for the microphone
    /// included; `None`: the appliance's default (`mcp.record_timeout`).
    pub timeout: Option<f64>,
    /// Wait for the microphone when another call holds it (else `Busy`).
    pub queue: bool,
    /// Language spoken (ISO 639-1 or `auto`); `None`: `stt.language`.
    pub language: Option<String>,
}

pub trait Listen: Send + Sync {
    /// Takes the microphone for the agent, waits for the person to speak,
    /// records until they stop (or the button comes up, or the timeout),
    /// and transcribes.
    fn listen<'a>(
        &'a self,
        call: ListenCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Heard, Failure>>;
}
