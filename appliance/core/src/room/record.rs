//! [`Record`]: recordings for someone who transcribes them themselves
//! (Home Assistant's pipeline), and who else takes the person's starts.

use super::{
    call::{BoxFuture, Failure},
    listen::EndReason,
};

/// A recording for someone who transcribes it themselves: Home
/// Assistant's pipeline, run from Hark as its satellite.
#[derive(Debug, Clone)]
pub struct RecordCall {
    /// Who records, for the floor and the logs (`Home Assistant`).
    pub who: String,
    /// Record from this microphone position (the wake word's end);
    /// `None`: from now, with the pre-roll.
    pub start_at: Option<u64>,
    /// How long to wait for speech to begin, seconds.
    pub timeout: f64,
}

/// One turn of the person's, recorded.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// 16-bit 16 kHz mono, from the start of the recording to the end of
    /// the turn.
    pub samples: Vec<i16>,
    /// Whether the person spoke.
    pub speech: bool,
    pub end_reason: EndReason,
}

/// How the person started a conversation of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonStart {
    /// The wake word, heard ending at this microphone position.
    WakeWord { at: u64 },
    /// A press of the button.
    Press,
}

/// Someone besides the agents who may take the person's own starts: Home
/// Assistant, whose pipeline Hark runs as its satellite.
pub trait TakeStarts: Send + Sync {
    /// True when taken: the room records nothing of its own for it.
    fn take(&self, start: PersonStart) -> bool;
}

pub trait Record: Send + Sync {
    /// Takes the floor before every agent waiting (the person started
    /// this), records the person's turn as a listen does (chime, light,
    /// push-to-talk, mute, the end of the turn) and gives the audio.
    fn record(&self, call: RecordCall) -> BoxFuture<'_, Result<Recorded, Failure>>;
    /// What the person went on to say just after the turn the last
    /// `record` gave ended at a pause (within `audio.vad.continue_ms`),
    /// recorded as `record` does from where that turn's recording ended.
    /// `None` when they did not go on, or the moment gave way first (speech
    /// to say, another recording).
    fn record_more(&self) -> BoxFuture<'_, Option<Recorded>>;
}
