//! [`Speak`], [`Play`] and [`Schedule`]: speech to the person, audio made
//! elsewhere, and speech kept for later.

use super::call::{BoxFuture, Failure, Report};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How soon a speech request is spoken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// After everything else.
    Low,
    /// In order.
    #[default]
    Normal,
    /// Before everything waiting, and after the sentence being spoken (it
    /// is never cut).
    Urgent,
}

/// Which engine speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Piper,
    Espeak,
    /// Audio someone else made, played as it is (Home Assistant's own).
    Recording,
}

/// How a speech request ended (or that it is only queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SpeechStatus {
    Queued,
    Spoken,
    Stopped,
    /// Kept to be said later (`delay_seconds`, `at`).
    Scheduled,
}

/// `speak_text`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Spoken {
    /// `queued` (returned at once), `spoken` (played to the end), or
    /// `stopped` (interrupted before the end).
    pub status: SpeechStatus,
    /// The text as given.
    pub text: String,
    /// The voice that speaks: a voice id, or `espeak:<name>` for espeak-ng.
    pub voice: String,
    /// `piper` or `espeak`.
    pub engine: Engine,
    /// Why espeak-ng speaks instead of piper, when it does.
    pub fallback_reason: Option<String>,
    /// Sentences (pieces) the text is spoken in.
    pub sentences: usize,
    /// The priority it was queued with.
    pub priority: Priority,
    /// Seconds of speech played (with `wait: true`).
    pub seconds: Option<f64>,
    /// When it is kept to be said later: its id (for `cancel_scheduled`)
    /// and when.
    pub scheduled: Option<Scheduled>,
    /// Its number on the event stream (`speaking_started` and
    /// `speaking_ended` carry it as `speech`); null when kept for later.
    pub speech: Option<u64>,
}

/// Something to say.
#[derive(Debug, Clone)]
pub struct SpeakCall {
    /// Whose speech (`None`: a script's, with no agent of its own).
    pub agent: Option<String>,
    pub text: String,
    /// A voice id; `None`: the agent's, else the appliance's.
    pub voice: Option<String>,
    /// The language to speak in when no voice is given (ISO 639-1 such as
    /// `de`, or `de_DE`): the agent's or the appliance's voice if it
    /// speaks it, else an installed voice of it, else espeak-ng's.
    pub language: Option<String>,
    /// 0.5–2.0; `None`: the agent's, else 1.
    pub rate: Option<f64>,
    pub priority: Priority,
    /// Return when it has been played (or stopped), not once queued.
    pub wait: bool,
    /// Say it later: at this time, and as a timer that rings or not.
    pub later: Option<Later>,
}

/// Speech kept to be said at a time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Later {
    /// When it was asked for: a timer's countdown on the lights starts
    /// here (a timer Home Assistant started earlier, earlier).
    pub set: std::time::SystemTime,
    pub due: std::time::SystemTime,
    /// A timer: after the words, a chime repeats until the button, the wake
    /// word (the stop word) or this long ends it. `None`: said once.
    pub ring: Option<std::time::Duration>,
}

/// The longest delay (and the furthest time) speech may be kept for.
pub const MAX_LATER: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// Accepted range for a timer's ringing, in seconds.
pub const RING_SECONDS_RANGE: (f64, f64) = (1.0, 600.0);

/// When to say something, from a call's `delay_seconds` or `at` (not
/// both), and whether it rings (`ring`, up to `ring_seconds`, default 60);
/// `None`: now. `now` is the call's time.
pub fn check_later(
    delay_seconds: Option<f64>,
    at: Option<&str>,
    ring: Option<bool>,
    ring_seconds: Option<f64>,
    now: std::time::SystemTime,
) -> Result<Option<Later>, Failure> {
    let due = match (delay_seconds, at) {
        (Some(_), Some(_)) => {
            return Err(Failure::invalid("give delay_seconds or at, not both"));
        }
        (Some(d), None) => {
            if !(d.is_finite() && d >= 0.0 && d <= MAX_LATER.as_secs_f64()) {
                return Err(Failure::invalid(format!(
                    "delay_seconds must be 0–{} (seven days), got {d}",
                    MAX_LATER.as_secs()
                )));
            }
            now + Duration::from_secs_f64(d)
        }
        (None, Some(at)) => {
            let due = humantime::parse_rfc3339_weak(at).map_err(|e| {
                Failure::invalid(format!(
                    "at must be a time such as 2026-12-05T18:30:00Z (RFC 3339, UTC), got `{at}`: {e}"
                ))
            })?;
            if due.duration_since(now).is_ok_and(|ahead| ahead > MAX_LATER) {
                return Err(Failure::invalid(format!(
                    "at is more than seven days ahead: `{at}`"
                )));
            }
            // A time just past is said now, as a delay of 0 would be.
            due.max(now)
        }
        (None, None) => {
            if ring.is_some() || ring_seconds.is_some() {
                return Err(Failure::invalid(
                    "ring and ring_seconds need delay_seconds or at: a timer rings at its time",
                ));
            }
            return Ok(None);
        }
    };
    let ring = match (ring.unwrap_or(false), ring_seconds) {
        (false, Some(_)) => {
            return Err(Failure::invalid("ring_seconds needs ring: true"));
        }
        (false, None) => None,
        (true, seconds) => {
            let seconds = seconds.unwrap_or(60.0);
            let (lo, hi) = RING_SECONDS_RANGE;
            if !(seconds.is_finite() && (lo..=hi).contains(&seconds)) {
                return Err(Failure::invalid(format!(
                    "ring_seconds must be {lo}–{hi}, got {seconds}"
                )));
            }
            Some(Duration::from_secs_f64(seconds))
        }
    };
    Ok(Some(Later {
        set: now,
        due,
        ring,
    }))
}

/// What kind of thing is kept to be said later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LaterKind {
    /// Said once at its time.
    Speech,
    /// Said, then rings until stopped.
    Timer,
}

/// Speech (or a timer) kept to be said later, as `list_scheduled`,
/// `get_status` and the status page show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Scheduled {
    pub id: i64,
    pub kind: LaterKind,
    /// The agent that asked for it (`None`: a script).
    pub agent: Option<String>,
    pub text: String,
    /// When it is due (RFC 3339, UTC).
    pub due_at: String,
    /// Seconds until then (0 when it is due or ringing).
    pub due_in_seconds: f64,
    /// A timer's longest ringing, seconds.
    pub ring_seconds: Option<f64>,
    /// A timer ringing now.
    pub ringing: bool,
}

/// What was kept to be said later: listed, and cancelled by id.
pub trait Schedule: Send + Sync {
    /// Everything kept, the soonest first (a timer ringing now included).
    fn scheduled(&self) -> BoxFuture<'_, Result<Vec<Scheduled>, Failure>>;

    /// Cancels `id` (a ringing timer stops); what it was.
    fn cancel(&self, id: i64) -> BoxFuture<'_, Result<Scheduled, Failure>>;
}

pub trait Speak: Send + Sync {
    /// Queues the text for the speaker; with `wait`, plays it through,
    /// reporting each sentence made and heard. Dropped while it waits, the
    /// call stops its speech.
    fn speak<'a>(
        &'a self,
        call: SpeakCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Spoken, Failure>>;

    /// Stops the speaker and drops what waits; how many requests went.
    fn stop(&self) -> Result<usize, Failure>;

    /// The sentences a text is spoken in.
    fn sentences<'a>(&'a self, text: String) -> BoxFuture<'a, Result<Vec<String>, Failure>>;
}

/// Audio made elsewhere, to be played as speech is: queued, on the floor,
/// in the history (Home Assistant's announcements without words).
#[derive(Debug, Clone)]
pub struct PlayCall {
    /// Whose it is.
    pub agent: Option<String>,
    /// What it is, for the logs and the history ("Home Assistant's audio").
    pub label: String,
    /// A whole audio file: WAV, FLAC, MP3 or Ogg Vorbis.
    pub audio: Vec<u8>,
    /// Where it came from, for error messages.
    pub source: String,
}

/// Plays audio made elsewhere through the speaker.
pub trait Play: Send + Sync {
    /// Decodes `call`'s audio and plays it through as a waiting `speak`
    /// would; audio that is not audio is an `AudioFormat` failure naming
    /// its source.
    fn play<'a>(&'a self, call: PlayCall) -> BoxFuture<'a, Result<Spoken, Failure>>;
}
