//! [`Observe`] and [`WakeWord`]: what the room is doing, and its wake
//! word.

use super::{call::Failure, speak::Scheduled};
use serde::Serialize;

/// One turn holding the floor or waiting for it, as `get_status` shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Place {
    /// The agent's name, `person` for the person's own recording, or
    /// `hark` for a pairing waiting for the button.
    pub who: String,
    /// The tool (or `button`).
    pub tool: String,
    /// Since when (RFC 3339, UTC).
    pub since: String,
}

/// Who holds the floor and who waits.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FloorStatus {
    pub holder: Option<Place>,
    /// In the order they will get it.
    pub queue: Vec<Place>,
}

/// The capture thread's counters.
#[derive(Debug, Clone, Copy, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CaptureCounters {
    /// Periods read since the start (50 a second at 20 ms periods).
    pub periods: u64,
    /// Overruns recovered.
    pub overruns: u64,
}

/// The playback thread's counters.
#[derive(Debug, Clone, Copy, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlaybackCounters {
    /// Clips played to their end since the start (a sentence, a chime).
    pub clips: u64,
    /// Times the speaker ran dry mid-clip (recovered).
    pub underruns: u64,
}

/// What the room is doing that the event stream's snapshot does not say.
#[derive(Debug, Clone)]
pub struct RoomStatus {
    pub floor: FloorStatus,
    pub volume: Option<u8>,
    pub capture: Option<CaptureCounters>,
    pub playback: Option<PlaybackCounters>,
    /// What the lights show (`listening`, `muted`, …).
    pub lights: &'static str,
    /// The board is the simulated one (moved with `hark button`).
    pub simulated_board: bool,
    /// Each subsystem's state.
    pub subsystems: Vec<(crate::status::Subsystem, crate::status::SubsystemState)>,
    /// The wake word detector (none when it is not configured).
    pub wake: Option<WakeStatus>,
    /// Speech and timers kept for later, the soonest first.
    pub scheduled: Vec<Scheduled>,
}

/// How sure the wake word detector must be before it wakes: each level is
/// a cutoff on the model's window mean, from the model's own (`default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Sensitivity {
    /// Fewer false wakes, more missed words.
    Low,
    #[default]
    Default,
    /// More wakes from afar and in noise, more false wakes.
    High,
}

impl Sensitivity {
    pub const ALL: [Sensitivity; 3] = [Sensitivity::Low, Sensitivity::Default, Sensitivity::High];

    pub fn as_str(self) -> &'static str {
        match self {
            Sensitivity::Low => "low",
            Sensitivity::Default => "default",
            Sensitivity::High => "high",
        }
    }

    /// The level named `name`, if any.
    pub fn parse(name: &str) -> Option<Sensitivity> {
        Sensitivity::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// What the wake word detector is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WakeState {
    /// Listening for the word.
    Listening,
    /// Turned off (`wake.enabled = false`, or from the status page).
    Off,
    /// The microphone is muted: the detector does not run.
    Muted,
    /// Hark is speaking and its microphone is closed meanwhile (half
    /// duplex): the detector hears nothing.
    Speaking,
    /// The models or their runtime could not load (`subsystems.wake`
    /// says why).
    Unavailable,
}

/// One time the detector heard a word.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Detection {
    pub word: String,
    /// The mean probability of the window that passed the cutoff (0–1).
    pub score: f32,
    /// When (RFC 3339, UTC).
    pub at: String,
    /// It started the person's turn.
    pub started: bool,
}

/// The wake word detector, as `get_status` and the status page show it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WakeStatus {
    pub state: WakeState,
    /// The words it listens for (the models' names).
    pub words: Vec<String>,
    pub sensitivity: Sensitivity,
    /// The latest detections, newest last.
    pub detections: Vec<Detection>,
}

pub trait Observe: Send + Sync {
    fn status(&self) -> RoomStatus;
}

pub trait WakeWord: Send + Sync {
    /// Turns the wake word on or off and sets its sensitivity (until the
    /// next restart, which reads the configuration); how it is after.
    fn set_wake(
        &self,
        on: Option<bool>,
        sensitivity: Option<Sensitivity>,
    ) -> Result<WakeStatus, Failure>;
}
