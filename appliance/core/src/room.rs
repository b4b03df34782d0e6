//! What the room offers: the microphone, the speaker and the person's hand,
//! as narrow capabilities over plain data. The daemon's room implements
//! them; the MCP side parses a call's arguments, makes one call through the
//! capability it needs and formats the result, and its tests call a
//! simulated room instead.
//!
//! - [`Listen`]: hear the person (`transcribe_voice`);
//! - [`Speak`]: speak to them, stop, and the sentences a text is spoken in;
//! - [`Ask`]: a question and its answer (`converse`, `confirm`, `choose`);
//! - [`Files`]: speech from and to files (transcribe, detect the language,
//!   synthesise), and the voices;
//! - [`Volume`], [`Observe`] (what the room is doing), [`Hands`] (the
//!   simulated board, the self-test) and [`Pair`] (the person approves an
//!   agent).
//!
//! A call that is dropped is cancelled: its recording stops, its speech
//! stops, its transcription is abandoned. Results are plain data; with the
//! `schema` feature they also describe themselves as JSON Schema, for the
//! MCP side to publish as output schemas (their doc comments are the
//! fields' descriptions).

use std::{future::Future, pin::Pin, time::Duration};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A capability's future: boxed, so the traits can be used as objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a request failed: what kind of failure (for the caller to act on)
/// and what to do, in words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
    /// Facts about the failure a program can use (the microphone's holder,
    /// a limit), or `Value::Null`.
    pub context: Value,
}

impl Failure {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            context: Value::Null,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidArgument, message)
    }

    pub fn with_context(mut self, context: Value) -> Self {
        self.context = context;
        self
    }
}

/// The kinds of failure (seed 004's error types, and the appliance's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    InvalidArgument,
    AudioFormat,
    FileNotFound,
    FileTooLarge,
    PathNotAllowed,
    ModelNotLoaded,
    Language,
    Transcription,
    Microphone,
    MicrophoneMuted,
    /// Another call has the microphone (or the speech queue is full).
    Busy,
    /// The call held the floor past `floor.max_hold_seconds`.
    FloorTimeout,
    Cancelled,
    Speech,
    VoiceNotFound,
    Voice,
    Board,
    /// The voice inbox failed.
    Inbox,
    /// The history failed (or is off).
    History,
    /// The agent has no token.
    NotPaired,
    /// The agent's token does not allow it.
    PermissionDenied,
    /// No speech or timer kept for later has that id.
    NotScheduled,
    /// What is kept for later could not be kept (its store failed).
    Schedule,
    /// The appliance began to stop (a restart, an update, power off) and
    /// ended the call: call again once it is back.
    ShuttingDown,
    /// The wake word detector could not start or run (its runtime or a
    /// model is missing or broken).
    WakeWord,
    /// An agent's settings could not be kept (their store failed).
    Settings,
}

impl Kind {
    /// The name agents see (`type` in a tool error).
    pub fn name(self) -> &'static str {
        match self {
            Kind::InvalidArgument => "InvalidArgumentError",
            Kind::AudioFormat => "AudioFormatError",
            Kind::FileNotFound => "FileNotFoundError",
            Kind::FileTooLarge => "FileTooLargeError",
            Kind::PathNotAllowed => "PathNotAllowedError",
            Kind::ModelNotLoaded => "ModelNotLoadedError",
            Kind::Language => "LanguageError",
            Kind::Transcription => "TranscriptionError",
            Kind::Microphone => "MicrophoneError",
            Kind::MicrophoneMuted => "MicrophoneMutedError",
            Kind::Busy => "BusyError",
            Kind::FloorTimeout => "FloorTimeoutError",
            Kind::Cancelled => "CancelledError",
            Kind::Speech => "SpeechError",
            Kind::VoiceNotFound => "VoiceNotFoundError",
            Kind::Voice => "VoiceError",
            Kind::Board => "BoardError",
            Kind::Inbox => "InboxError",
            Kind::History => "HistoryError",
            Kind::Settings => "SettingsError",
            Kind::NotPaired => "NotPairedError",
            Kind::PermissionDenied => "PermissionDeniedError",
            Kind::NotScheduled => "NotScheduledError",
            Kind::Schedule => "ScheduleError",
            Kind::ShuttingDown => "ShuttingDownError",
            Kind::WakeWord => "WakeWordError",
        }
    }
}

/// The range of a listen's `timeout_seconds` and of `mcp.record_timeout`,
/// in seconds.
pub const RECORD_TIMEOUT_RANGE: (f64, f64) = (0.5, 300.0);

/// `timeout_seconds` checked against its range (`lo`–`hi`); `None`: the
/// default.
pub fn check_timeout(
    timeout: Option<f64>,
    default: Duration,
    (lo, hi): (f64, f64),
) -> Result<Duration, Failure> {
    match timeout {
        None => Ok(default),
        Some(t) if t.is_finite() && t >= lo && t <= hi => Ok(Duration::from_secs_f64(t)),
        Some(t) => Err(Failure::invalid(format!(
            "timeout_seconds must be {lo}–{hi} seconds, got {t}"
        ))),
    }
}

/// Longest question `confirm` and `choose` speak, in characters: a
/// question is a sentence or two; more belongs in `speak_text` first.
pub const QUESTION_MAX_CHARS: usize = 1000;

/// The question checked: not empty, not over [`QUESTION_MAX_CHARS`].
pub fn check_question(question: &str) -> Result<String, Failure> {
    let trimmed = question.trim();
    if trimmed.is_empty() {
        return Err(Failure::invalid(
            "question is empty; give the question to ask the person",
        ));
    }
    let chars = trimmed.chars().count();
    if chars > QUESTION_MAX_CHARS {
        return Err(Failure::invalid(format!(
            "question is {chars} characters; a question may have at most {QUESTION_MAX_CHARS}: say the details with speak_text first"
        ))
        .with_context(serde_json::json!({ "characters": chars, "limit": QUESTION_MAX_CHARS })));
    }
    Ok(trimmed.to_owned())
}

const NUMBERS: [&str; 8] = [
    "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight",
];

/// What `choose` reads out: the question, then each option with its
/// number.
pub fn prompt(question: &str, options: &[String]) -> String {
    let mut text = question.trim().to_owned();
    if !text.ends_with(['?', '.', '!']) {
        text.push('?');
    }
    for (number, option) in NUMBERS.iter().zip(options) {
        let option = option
            .trim()
            .trim_end_matches(['.', '!', '?', ',', ';', ':']);
        text.push_str(&format!(" {number}: {option}."));
    }
    text
}

/// Text to speak checked: not empty, at most `max_chars` (`tts.max_chars`).
/// What of it can be spoken is the voice engine's to say.
pub fn check_text(text: &str, max_chars: usize) -> Result<(), Failure> {
    if text.trim().is_empty() {
        return Err(Failure::invalid("text is empty; give the words to speak"));
    }
    let chars = text.chars().count();
    if chars > max_chars {
        return Err(Failure::invalid(format!(
            "text is {chars} characters; the limit is {max_chars} (tts.max_chars): split it into several calls"
        ))
        .with_context(serde_json::json!({ "characters": chars, "limit": max_chars })));
    }
    Ok(())
}

/// `rate` checked: 0.5–2.0; `None`: the agent's own or 1.
pub fn check_rate(rate: Option<f64>) -> Result<Option<f32>, Failure> {
    match rate {
        None => Ok(None),
        Some(r) if (0.5..=2.0).contains(&r) => Ok(Some(r as f32)),
        Some(r) => Err(Failure::invalid(format!(
            "rate must be between 0.5 and 2.0, got {r}"
        ))),
    }
}

/// A volume checked: 0–100.
pub fn check_volume(volume: i64) -> Result<u8, Failure> {
    u8::try_from(volume)
        .ok()
        .filter(|v| *v <= 100)
        .ok_or_else(|| Failure::invalid(format!("volume must be 0–100, got {volume}")))
}

/// What a call is doing, as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Waiting for the microphone (another call has it).
    WaitingForFloor,
    /// The turn with the person is the call's.
    Granted,
    /// Speaking: the text goes out in `pieces` sentences.
    Speaking {
        pieces: usize,
    },
    /// Piece `index` (from 0) of `count` has its audio.
    Synthesized {
        index: usize,
        count: usize,
    },
    /// Piece `index` of `count` started playing.
    Playing {
        index: usize,
        count: usize,
    },
    /// The microphone is open.
    Listening,
    SpeechDetected,
    Transcribing,
    /// What the person has said so far.
    Partial(String),
}

/// Where a call's progress goes (the MCP side: notifications, and what the
/// client is shown doing in `get_status`).
pub trait Report: Send {
    fn report(&mut self, progress: Progress) -> BoxFuture<'_, ()>;
}

/// A report nobody reads.
pub struct Quiet;

impl Report for Quiet {
    fn report(&mut self, _: Progress) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

// ------------------------------------------------------------------ listen

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

// ----------------------------------------------------------------- record

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

// ------------------------------------------------------------------ speak

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

// ------------------------------------------------------------------ ask

/// A question put to the person, and how long to wait for the answer.
#[derive(Debug, Clone)]
pub struct Question {
    pub agent: String,
    /// What is said first.
    pub text: String,
    pub voice: Option<String>,
    /// Seconds to wait for the answer to begin after it (`None`: the
    /// appliance's default), any wait for the microphone included.
    pub timeout: Option<f64>,
    /// Wait for the microphone when another call holds it (else `Busy`).
    pub queue: bool,
}

/// `converse`: speak, then listen for the reply.
#[derive(Debug, Clone)]
pub struct ConverseCall {
    pub question: Question,
    pub rate: Option<f64>,
    pub priority: Priority,
    /// Listen after speaking; `false`: only speak, to the end.
    pub listen: bool,
}

/// How `converse`'s speech ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SpeechEnd {
    /// Played to the end.
    Spoken,
    /// The person pressed the button: Hark stopped and listened at once.
    Interrupted,
    /// Stopped otherwise (`stop_speaking`).
    Stopped,
    /// Not said: the person had gone on speaking after this agent's last
    /// listen ended their turn, and what they added is the reply
    /// (`continuation`); the question was written before it was heard.
    Skipped,
}

impl SpeechEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            SpeechEnd::Spoken => "spoken",
            SpeechEnd::Interrupted => "interrupted",
            SpeechEnd::Stopped => "stopped",
            SpeechEnd::Skipped => "skipped",
        }
    }
}

/// `converse`'s structured result: what was spoken, then what was heard
/// (`transcribe_voice`'s fields; absent with `listen: false`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Conversed {
    /// The text spoken (empty when `skipped`).
    pub spoken: String,
    /// `spoken` (played to the end), `interrupted` (the person pressed the
    /// button: Hark stopped and listened at once), `stopped` (stopped
    /// otherwise, e.g. `stop_speaking`) or `skipped` (not said: the
    /// person's continuation of their last turn is the reply).
    pub speech_status: SpeechEnd,
    /// The voice that spoke (absent when nothing was said).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voice: Option<String>,
    /// `piper` or `espeak` (absent when nothing was said).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    /// Seconds of speech played.
    pub speech_seconds: Option<f64>,
    /// What the person said, or `(no speech detected)`; absent with
    /// `listen: false`.
    #[serde(flatten)]
    pub heard: Option<Heard>,
}

/// `confirm`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum YesNo {
    Yes,
    No,
    /// Nothing said or pressed in time.
    NoAnswer,
    /// Something else was said.
    Unclear,
}

impl YesNo {
    pub fn as_str(self) -> &'static str {
        match self {
            YesNo::Yes => "yes",
            YesNo::No => "no",
            YesNo::NoAnswer => "no_answer",
            YesNo::Unclear => "unclear",
        }
    }
}

/// How the person answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AnsweredBy {
    Voice,
    Button,
}

/// `confirm`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Confirmed {
    /// `yes`, `no`, `no_answer` (nothing said or pressed in time) or
    /// `unclear` (something else was said: see `transcript`).
    pub answer: YesNo,
    /// `voice` or `button`; null with `no_answer`.
    pub by: Option<AnsweredBy>,
    /// What the person said, when they answered by voice.
    pub transcript: Option<String>,
    /// How sure: the transcript's mean token probability (0–1) for a spoken
    /// answer, 1 for the button.
    pub confidence: Option<f32>,
}

impl From<crate::words::Answer> for YesNo {
    fn from(answer: crate::words::Answer) -> Self {
        match answer {
            crate::words::Answer::Yes => YesNo::Yes,
            crate::words::Answer::No => YesNo::No,
            crate::words::Answer::Unclear => YesNo::Unclear,
        }
    }
}

impl Confirmed {
    /// Nothing said or pressed in time.
    pub fn no_answer() -> Self {
        Self {
            answer: YesNo::NoAnswer,
            by: None,
            transcript: None,
            confidence: None,
        }
    }

    /// The person said `heard`, read as `answer`.
    pub fn by_voice(answer: crate::words::Answer, heard: Heard) -> Self {
        Self {
            answer: answer.into(),
            by: Some(AnsweredBy::Voice),
            transcript: Some(heard.text),
            confidence: heard.confidence,
        }
    }

    /// The person answered with the button.
    pub fn by_button(answer: crate::words::Answer) -> Self {
        Self {
            answer: answer.into(),
            by: Some(AnsweredBy::Button),
            transcript: None,
            confidence: Some(1.0),
        }
    }
}

/// `choose`'s outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChoiceOutcome {
    Chosen,
    /// The person said none of them.
    None,
    /// No option matched, or two equally.
    Unclear,
    NoAnswer,
}

impl ChoiceOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ChoiceOutcome::Chosen => "chosen",
            ChoiceOutcome::None => "none",
            ChoiceOutcome::Unclear => "unclear",
            ChoiceOutcome::NoAnswer => "no_answer",
        }
    }
}

/// How an option was recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum MatchedBy {
    /// Its own words.
    Words,
    /// Its number ("the second one").
    Ordinal,
}

/// `choose`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Chosen {
    /// The option picked, as given; null when none was.
    pub choice: Option<String>,
    /// Its position in `options`, from 0; null when none was picked.
    pub index: Option<usize>,
    /// `chosen`, `none` (the person said none of them), `unclear` (no
    /// option matched, or two equally: see `transcript`) or `no_answer`.
    pub outcome: ChoiceOutcome,
    /// `voice`; null with `no_answer`.
    pub by: Option<AnsweredBy>,
    /// How the option was recognised: `words` (its own words) or `ordinal`
    /// ("the second one").
    pub matched_by: Option<MatchedBy>,
    /// What the person said.
    pub transcript: Option<String>,
}

impl Chosen {
    /// Nothing said in time.
    pub fn no_answer() -> Self {
        Self {
            choice: None,
            index: None,
            outcome: ChoiceOutcome::NoAnswer,
            by: None,
            matched_by: None,
            transcript: None,
        }
    }

    /// The person said `transcript`, read as `choice` of `options`.
    pub fn by_voice(choice: crate::words::Choice, options: &[String], transcript: String) -> Self {
        use crate::words::Choice;
        let (index, outcome, matched_by) = match choice {
            Choice::Named(i) => (Some(i), ChoiceOutcome::Chosen, Some(MatchedBy::Words)),
            Choice::Ordinal(i) => (Some(i), ChoiceOutcome::Chosen, Some(MatchedBy::Ordinal)),
            Choice::NoneOfThem => (None, ChoiceOutcome::None, None),
            Choice::Unclear => (None, ChoiceOutcome::Unclear, None),
        };
        Self {
            choice: index.and_then(|i| options.get(i).cloned()),
            index,
            outcome,
            by: Some(AnsweredBy::Voice),
            matched_by,
            transcript: Some(transcript),
        }
    }
}

pub trait Ask: Send + Sync {
    /// Speaks, then listens for the reply in one turn (a press while it
    /// speaks stops the speech and listens at once).
    fn converse<'a>(
        &'a self,
        call: ConverseCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Conversed, Failure>>;

    /// Asks a yes/no question; answered by voice or the button.
    fn confirm<'a>(
        &'a self,
        question: Question,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Confirmed, Failure>>;

    /// Asks the person to pick one of `options` (2–8).
    fn choose<'a>(
        &'a self,
        question: Question,
        options: Vec<String>,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Chosen, Failure>>;
}

// ------------------------------------------------------------------ volume

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

// ------------------------------------------------------------------ observe

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

// ------------------------------------------------------------------ files

/// Audio an agent supplies: a file's bytes, or a path in the allowed
/// directories.
#[derive(Debug, Clone)]
pub enum AudioInput {
    /// The file's bytes, base64-encoded (decoded by the room, which bounds
    /// them first).
    Base64(String),
    Path(String),
}

/// What a transcription is written as (`output_format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum TranscriptFormat {
    /// The text alone.
    #[default]
    Text,
    /// The text, with the segments in the structured content (a file
    /// written gets the whole result as JSON).
    Json,
    /// SubRip subtitles.
    Srt,
    /// WebVTT subtitles.
    Vtt,
}

impl TranscriptFormat {
    /// The file name extension a file of it gets.
    pub fn extension(self) -> &'static str {
        match self {
            TranscriptFormat::Text => "txt",
            TranscriptFormat::Json => "json",
            TranscriptFormat::Srt => "srt",
            TranscriptFormat::Vtt => "vtt",
        }
    }
}

/// A file to transcribe.
#[derive(Debug, Clone)]
pub struct TranscribeCall {
    pub audio: AudioInput,
    /// ISO 639-1 or `auto`; `None`: `stt.language`.
    pub language: Option<String>,
    pub word_timestamps: bool,
    /// What to make of it (the content, and a file written).
    pub format: TranscriptFormat,
    /// A file to write it to, inside `stt.output_dirs`.
    pub output_file: Option<String>,
    /// The model to transcribe with: a name in the model store or a size
    /// (`tiny`, `base`, …); `None`: the configured one.
    pub model: Option<String>,
    /// The audio tool spec's `model_size`; give this or `model`.
    pub model_size: Option<String>,
}

/// `transcribe_audio`'s structured result (and each of
/// `transcribe_batch`'s).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Transcribed {
    /// The text; empty when nothing was said.
    pub text: String,
    /// Language of the text (ISO 639-1).
    pub language: String,
    /// Probability of `language` when it was detected, else null.
    pub language_confidence: Option<f32>,
    /// Seconds of audio.
    pub duration: f64,
    /// The file's format: wav, flac, mp3 or ogg.
    pub format: String,
    /// The file's sample rate (Hz) and channel count.
    pub source_rate: u32,
    pub source_channels: u16,
    /// Segments: `start`, `end` (seconds), `text`, `confidence`,
    /// `no_speech_probability`, and `words` (`word`, `start`, `end`,
    /// `probability`) with `word_timestamps`.
    pub segments: Vec<Value>,
    /// Mean token probability, 0–1.
    pub confidence: f32,
    /// The model that transcribed.
    pub model: String,
    /// Transcription time, milliseconds.
    pub transcribe_ms: u64,
    /// Where the audio came from (`source`: audio_base64 or audio_path).
    pub input: Value,
    /// The file written (canonical path), when `output_file` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
}

/// A transcription, with what it was made into.
#[derive(Debug, Clone)]
pub struct Transcription {
    pub result: Transcribed,
    /// The text in the format asked for (subtitles for `srt`/`vtt`).
    pub formatted: String,
}

/// `detect_language`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Detected {
    /// The most likely language, ISO 639-1.
    pub language: String,
    /// Its English name.
    pub language_name: String,
    /// Its probability, 0–1.
    pub confidence: f32,
    /// The five most likely languages (`language`, `name`, `probability`).
    pub candidates: Vec<Value>,
    /// Seconds of audio.
    pub duration: f64,
    /// Where the audio came from.
    pub input: Value,
}

/// Speech to make into a WAV file.
#[derive(Debug, Clone)]
pub struct SynthesizeCall {
    pub text: String,
    pub voice: Option<String>,
    /// As [`SpeakCall::language`].
    pub language: Option<String>,
    pub rate: Option<f64>,
    /// Where to write it, inside `tts.output_dirs`; `None`: hand it back.
    pub output_path: Option<String>,
    /// The file's format; `None`: `output_path`'s extension says (`.mp3`,
    /// `.ogg`/`.opus`), else WAV.
    pub format: Option<SpeechFormat>,
}

/// A file format synthesized speech is made as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SpeechFormat {
    /// 16-bit PCM WAV.
    Wav,
    /// Ogg Opus.
    Ogg,
    /// MP3.
    Mp3,
}

/// `synthesize_speech`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Synthesized {
    /// The file written (canonical path), when `output_path` was given.
    pub output_path: Option<String>,
    /// The WAV file in base64, when no `output_path` was given.
    pub audio_base64: Option<String>,
    /// `audio/wav`, `audio/ogg` (Opus) or `audio/mpeg`; mono.
    pub mime_type: String,
    pub duration_seconds: f64,
    /// The audio tool spec's name for `duration_seconds`.
    pub duration: f64,
    /// `wav`, `ogg` or `mp3` (the spec's `format`).
    pub format: String,
    pub sample_rate: u32,
    /// Size of the file in bytes.
    pub bytes: usize,
    /// The spec's size: kilobytes (1000 bytes), to one decimal.
    pub file_size_kb: f64,
    pub voice: String,
    /// The spec's name for `voice`.
    pub voice_used: String,
    /// `piper` or `espeak`.
    pub engine: Engine,
    /// Why espeak-ng spoke instead of piper, when it did.
    pub fallback_reason: Option<String>,
}

/// One voice, installed or in the catalog.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VoiceInfo {
    /// The voice id to pass as `voice`.
    pub id: String,
    /// Language code, e.g. `en_US`.
    pub language: Option<String>,
    /// `x_low`, `low`, `medium` or `high`.
    pub quality: Option<String>,
    /// Sample rate in Hz (installed voices).
    pub sample_rate: Option<u32>,
    /// Size of the model in bytes.
    pub size: u64,
    pub installed: bool,
    /// The appliance's default voice (`tts.voice`).
    pub default: bool,
    /// Loaded in memory now (speaks without a load delay).
    pub loaded: bool,
}

/// `list_voices`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Voices {
    pub voices: Vec<VoiceInfo>,
    /// Voices matching before `limit` applied.
    pub total: usize,
    /// Why espeak-ng speaks instead of piper voices, if it does.
    pub piper_unavailable: Option<String>,
}

/// What a speech model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ModelPurpose {
    /// whisper: files, other languages, and the microphone without a live
    /// engine.
    Transcription,
    /// Moonshine: the live engine that hears the microphone in English.
    Live,
    /// Smart Turn: hears whether a pause ends the turn.
    EndOfTurn,
}

impl ModelPurpose {
    /// As `list_models`' text says it.
    pub fn label(self) -> &'static str {
        match self {
            ModelPurpose::Transcription => "transcription",
            ModelPurpose::Live => "live",
            ModelPurpose::EndOfTurn => "end of turn",
        }
    }
}

/// What the appliance has a model set up as (`[stt]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ModelRole {
    /// `stt.model`: transcribes when a call names no model.
    Default,
    /// `stt.multilingual_model`: other languages, `auto`, detection.
    OtherLanguages,
    /// `stt.live_model`.
    Live,
    /// `stt.turn_model`.
    EndOfTurn,
}

impl ModelRole {
    /// The setting that makes it so.
    pub fn setting(self) -> &'static str {
        match self {
            ModelRole::Default => "stt.model",
            ModelRole::OtherLanguages => "stt.multilingual_model",
            ModelRole::Live => "stt.live_model",
            ModelRole::EndOfTurn => "stt.turn_model",
        }
    }
}

/// One installed speech model.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelSummary {
    /// Its name in the model store: what `model` takes.
    pub name: String,
    pub purpose: ModelPurpose,
    /// whisper's size read from the file (`tiny`, `base`, `small`,
    /// `medium`, `large`): what `model_size` takes. Null for other kinds.
    pub size: Option<String>,
    /// `en`, `multilingual` or `any` (Smart Turn hears sound, not words).
    pub language: String,
    /// The ISO 639-1 codes it transcribes (empty for Smart Turn).
    pub languages: Vec<String>,
    /// Weight format (`q8_0`, `f16`, …); empty where the files do not say.
    pub quantisation: String,
    /// Bytes on disk.
    pub bytes: u64,
    /// What it is set up as; empty: it serves calls that ask for it.
    pub roles: Vec<ModelRole>,
    /// A transcription tool's `model` may name it.
    pub per_call: bool,
}

/// `list_models`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ModelList {
    pub models: Vec<ModelSummary>,
    /// The model transcription uses when a call names none.
    pub default: String,
}

/// Where a voice to install comes from.
#[derive(Debug, Clone)]
pub struct InstallCall {
    /// An http(s) URL of a piper `.onnx`, or a catalog id.
    pub url: Option<String>,
    /// A `.onnx` on the appliance, inside `tts.output_dirs`.
    pub path: Option<String>,
    /// The `.onnx`'s SHA-256 to check a download against.
    pub sha256: Option<String>,
}

/// `install_voice`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InstalledVoice {
    pub id: String,
    pub language: Option<String>,
    pub quality: Option<String>,
    pub sample_rate: u32,
    pub size: u64,
    /// SHA-256 of the installed `.onnx`.
    pub sha256: String,
    /// Where it came from.
    pub source: String,
}

/// `remove_voice`'s structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RemovedVoice {
    pub id: String,
    /// Files deleted.
    pub deleted: Vec<String>,
}

pub trait Files: Send + Sync {
    /// Transcribes an audio file an agent supplies (dropped: abandoned).
    fn transcribe(&self, call: TranscribeCall) -> BoxFuture<'_, Result<Transcription, Failure>>;

    /// The languages most likely spoken in an audio file.
    fn detect_language(&self, audio: AudioInput) -> BoxFuture<'_, Result<Detected, Failure>>;

    /// Speech as a WAV file, written or handed back.
    fn synthesize(&self, call: SynthesizeCall) -> BoxFuture<'_, Result<Synthesized, Failure>>;

    /// The voices installed and in the catalog, of `language` if given.
    fn voices(
        &self,
        language: Option<String>,
        limit: usize,
    ) -> BoxFuture<'_, Result<Voices, Failure>>;

    fn install_voice(&self, call: InstallCall) -> BoxFuture<'_, Result<InstalledVoice, Failure>>;

    fn remove_voice(&self, id: String) -> BoxFuture<'_, Result<RemovedVoice, Failure>>;

    /// The speech models installed, with what each is set up as.
    fn models(&self) -> BoxFuture<'_, Result<ModelList, Failure>>;
}

// -------------------------------------------------------------------- pcm

/// Audio handed over whole, as samples: what protocols that carry raw PCM
/// (Wyoming) send and take, with no file or encoding around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pcm {
    /// Samples a second.
    pub rate: u32,
    /// Mono, −1 to 1.
    pub samples: Vec<f32>,
}

/// What was said in some [`Pcm`].
#[derive(Debug, Clone, PartialEq)]
pub struct PcmText {
    /// The text; empty when nothing was said.
    pub text: String,
    /// Its language (ISO 639-1).
    pub language: String,
}

/// Text made into speech.
#[derive(Debug, Clone, PartialEq)]
pub struct PcmVoice {
    pub audio: Pcm,
    /// The voice that spoke.
    pub voice: String,
}

/// A speech-to-text model on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedModel {
    pub name: String,
    /// ISO 639-1 codes it understands.
    pub languages: Vec<String>,
}

/// A voice on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedVoice {
    pub name: String,
    /// Its language, e.g. `en_US`.
    pub languages: Vec<String>,
}

/// A wake word on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedWord {
    /// Its model's name (`okay_nabu`): what a detection names.
    pub name: String,
    /// What the person says ("Okay Nabu").
    pub phrase: String,
    /// ISO 639-1 codes of the speakers it was trained on.
    pub languages: Vec<String>,
}

/// What speech to text, text to speech and the wake word can do here now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Offer {
    pub models: Vec<OfferedModel>,
    pub voices: Vec<OfferedVoice>,
    /// The default voice.
    pub voice: Option<String>,
    /// The wake words a stream can be searched for (none when the
    /// detector's runtime is missing).
    pub words: Vec<OfferedWord>,
}

/// A wake word heard in a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Spotted {
    /// The word's model name.
    pub name: String,
    /// Where in the stream it was heard: samples at [`SPOTTER_RATE`] from
    /// the first fed.
    pub at: u64,
}

/// The rate a [`PcmSpotter`] takes.
pub const SPOTTER_RATE: u32 = 16_000;

/// A wake word detector on one stream of audio (Home Assistant's
/// satellites stream theirs): each detector starts from nothing and keeps
/// its state between feeds. Feeding runs the models: call it off the
/// runtime's threads.
pub trait PcmSpotter: Send {
    /// `samples` (mono, [`SPOTTER_RATE`], −1 to 1), the next of the
    /// stream: the word heard in them, if any. After a word it hears
    /// nothing for a second, so one saying is one detection.
    fn feed(&mut self, samples: &[f32]) -> Result<Option<Spotted>, Failure>;
}

pub trait PcmSpeech: Send + Sync {
    /// What was said in `audio`, in `language` (ISO 639-1, `None`: the
    /// configured one).
    fn transcribe_pcm(
        &self,
        audio: Pcm,
        language: Option<String>,
    ) -> BoxFuture<'_, Result<PcmText, Failure>>;

    /// A first reading of speech still coming in (`audio` so far), from
    /// the live engine: `None` when there is none for `language`, or it is
    /// busy with the room's microphone, which comes first.
    fn draft_pcm(
        &self,
        audio: Pcm,
        language: Option<String>,
    ) -> BoxFuture<'_, Result<Option<String>, Failure>>;

    /// `text` spoken in `voice` (`None`: the default), not played.
    fn synthesize_pcm(
        &self,
        text: String,
        voice: Option<String>,
    ) -> BoxFuture<'_, Result<PcmVoice, Failure>>;

    /// The models, installed voices and wake words on offer.
    fn offer(&self) -> BoxFuture<'_, Result<Offer, Failure>>;

    /// A detector for `words` (model names; `None`: every installed one).
    fn spotter(
        &self,
        words: Option<Vec<String>>,
    ) -> BoxFuture<'_, Result<Box<dyn PcmSpotter>, Failure>>;
}

// ------------------------------------------------------------------ hands

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

// ------------------------------------------------------------------ pair

/// An agent asks to pair: what the person is told.
#[derive(Debug)]
pub struct PairAsk {
    /// What Hark says aloud.
    pub prompt: String,
    /// The agent's name, its address and scopes (for the event stream).
    pub agent: String,
    pub address: String,
    pub scopes: Vec<&'static str>,
    /// How long the person has to press, from the end of the prompt.
    pub timeout: Duration,
    /// Decides it besides the button (the status page's approve and
    /// refuse); `true` approves.
    pub decided: Option<tokio::sync::oneshot::Receiver<bool>>,
}

/// Why a pairing was not approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairRefusal {
    /// A long press.
    Refused,
    /// No press in time.
    TimedOut,
    /// No working button on this appliance; the board's state says why.
    NoButton(String),
    /// Another pairing waits.
    Busy,
    /// The agent went away.
    Cancelled,
}

pub trait Pair: Send + Sync {
    /// Asks the person, aloud and with the pairing light, to approve an
    /// agent: a short press approves, a long press or none refuses.
    fn ask(&self, ask: PairAsk) -> BoxFuture<'_, Result<(), PairRefusal>>;

    /// Tells the person, aloud, how it ended.
    fn say(&self, words: String);
}

// ----------------------------------------------------------------- agents

/// A change to an agent's settings (`agent_settings`, the status page).
/// What is not given stays as it is.
#[derive(Debug, Clone, Default)]
pub struct AgentChange {
    /// The agent, by name or alias.
    pub agent: String,
    /// Other names the person calls it by; the first is said when it is
    /// announced.
    pub aliases: Option<Vec<String>>,
    /// A voice id from `list_voices`, `espeak:<name>`, or `default` (or
    /// empty): `tts.voice`.
    pub voice: Option<String>,
    /// Its speaking rate, 0.5–2.0.
    pub rate: Option<f64>,
    pub chime: Option<crate::agents::Chime>,
    pub announce: Option<bool>,
    /// Drop what was changed at run time: `hark.toml`'s settings (or the
    /// defaults) again. Other fields given are applied after.
    pub reset: bool,
}

/// Where an agent's settings in effect come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SettingsSource {
    /// Nothing set: the appliance's defaults.
    Defaults,
    /// `[agents.NAME]` in `hark.toml`.
    Config,
    /// Changed at run time, kept across restarts.
    RunTime,
}

/// One agent's settings in effect.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentSettingsView {
    pub name: String,
    pub aliases: Vec<String>,
    /// Its voice; null: the appliance's (`default_voice`).
    pub voice: Option<String>,
    /// Its speaking rate; null: 1.0.
    pub rate: Option<f64>,
    /// `default`, `high`, `low` or `triple`.
    pub chime: crate::agents::Chime,
    /// Hark says its name before its speech when another agent spoke last.
    pub announce: bool,
    pub source: SettingsSource,
}

impl AgentSettingsView {
    /// An agent's settings in effect, or the defaults under `name`.
    pub fn of(name: &str, found: Option<crate::agents::Effective>) -> Self {
        let (name, config, source) = match found {
            Some(e) => (
                e.name,
                e.config,
                match e.source {
                    crate::agents::Source::Config => SettingsSource::Config,
                    crate::agents::Source::RunTime => SettingsSource::RunTime,
                },
            ),
            None => (
                name.to_owned(),
                crate::agents::AgentConfig::default(),
                SettingsSource::Defaults,
            ),
        };
        Self {
            name,
            aliases: config.aliases,
            voice: config.voice,
            rate: config.rate,
            chime: config.earcon,
            announce: config.announce,
            source,
        }
    }
}

/// `agent_settings`' structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentSettingsList {
    pub agents: Vec<AgentSettingsView>,
    /// The appliance's voice (`tts.voice`), for agents that set none.
    pub default_voice: String,
    /// Where changes are kept (or why only in memory).
    pub kept: String,
}

pub trait AgentSettings: Send + Sync {
    /// Every agent with settings (`hark.toml`'s or changed).
    fn agents(&self) -> BoxFuture<'_, Result<AgentSettingsList, Failure>>;

    /// Applies a change at once and keeps it; the agent's settings after.
    fn change_agent(
        &self,
        change: AgentChange,
    ) -> BoxFuture<'_, Result<AgentSettingsView, Failure>>;
}

// ------------------------------------------------------------------ all

/// Every capability of one room, each reachable alone: a tool takes the
/// one it needs.
#[derive(Clone)]
pub struct Capabilities {
    pub listen: std::sync::Arc<dyn Listen>,
    pub speak: std::sync::Arc<dyn Speak>,
    pub ask: std::sync::Arc<dyn Ask>,
    pub files: std::sync::Arc<dyn Files>,
    pub volume: std::sync::Arc<dyn Volume>,
    pub observe: std::sync::Arc<dyn Observe>,
    pub hands: std::sync::Arc<dyn Hands>,
    pub pair: std::sync::Arc<dyn Pair>,
    pub wake: std::sync::Arc<dyn WakeWord>,
    pub schedule: std::sync::Arc<dyn Schedule>,
    pub agents: std::sync::Arc<dyn AgentSettings>,
}

impl Capabilities {
    /// A room that has them all.
    pub fn of<R>(room: std::sync::Arc<R>) -> Self
    where
        R: Listen
            + Speak
            + Ask
            + Files
            + Volume
            + Observe
            + Hands
            + Pair
            + WakeWord
            + Schedule
            + AgentSettings
            + 'static,
    {
        Self {
            listen: room.clone(),
            speak: room.clone(),
            ask: room.clone(),
            files: room.clone(),
            volume: room.clone(),
            observe: room.clone(),
            hands: room.clone(),
            pair: room.clone(),
            wake: room.clone(),
            schedule: room.clone(),
            agents: room,
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn later_is_a_delay_or_a_time_and_a_timer_only_with_one() {
        use std::time::{Duration, SystemTime};
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(check_later(None, None, None, None, now).unwrap(), None);
        let later = check_later(Some(90.0), None, Some(true), None, now)
            .unwrap()
            .unwrap();
        assert_eq!(later.due, now + Duration::from_secs(90));
        assert_eq!(
            later.ring,
            Some(Duration::from_secs(60)),
            "a minute by default"
        );
        // `now` is 2027-01-15T08:00:00Z.
        let at = check_later(None, Some("2027-01-15T09:00:00Z"), None, None, now)
            .unwrap()
            .unwrap();
        assert_eq!(at.due, now + Duration::from_secs(3600));
        assert!(at.ring.is_none());
        let past = check_later(None, Some("2020-01-01T00:00:00Z"), None, None, now)
            .unwrap()
            .unwrap();
        assert_eq!(past.due, now, "a time past is said now");
        for (delay, at, ring, seconds, why) in [
            (
                Some(1.0),
                Some("2027-01-01T00:00:00Z"),
                None,
                None,
                "not both",
            ),
            (Some(-1.0), None, None, None, "delay_seconds must be"),
            (Some(f64::NAN), None, None, None, "delay_seconds must be"),
            (None, Some("soon"), None, None, "RFC 3339"),
            (None, Some("2099-01-01T00:00:00Z"), None, None, "seven days"),
            (None, None, Some(true), None, "need delay_seconds or at"),
            (Some(5.0), None, None, Some(10.0), "needs ring: true"),
            (
                Some(5.0),
                None,
                Some(true),
                Some(0.5),
                "ring_seconds must be",
            ),
        ] {
            let e = check_later(delay, at, ring, seconds, now).unwrap_err();
            assert!(e.message.contains(why), "{why}: {}", e.message);
            assert_eq!(e.kind, Kind::InvalidArgument);
        }
    }

    use super::*;

    #[test]
    fn questions_are_checked() {
        assert!(check_question("  ").is_err());
        let long = "why ".repeat(5000);
        let e = check_question(&long).unwrap_err();
        assert!(e.message.contains("at most 1000"), "{}", e.message);
        assert_eq!(check_question(" Delete it? ").unwrap(), "Delete it?");
    }

    #[test]
    fn the_options_are_read_out_numbered() {
        let options = vec![
            "Pizza.".to_owned(),
            "  sushi ".to_owned(),
            "tacos".to_owned(),
        ];
        assert_eq!(
            prompt("What shall we eat", &options),
            "What shall we eat? One: Pizza. Two: sushi. Three: tacos."
        );
        assert_eq!(
            prompt("Pick one.", &options[..2]),
            "Pick one. One: Pizza. Two: sushi."
        );
    }

    #[test]
    fn rates_and_volumes_are_checked() {
        assert_eq!(check_rate(None).unwrap(), None);
        assert_eq!(check_rate(Some(1.5)).unwrap(), Some(1.5));
        assert!(
            check_rate(Some(2.5))
                .unwrap_err()
                .message
                .contains("0.5 and 2.0")
        );
        assert_eq!(check_volume(100).unwrap(), 100);
        assert!(check_volume(101).is_err());
        assert!(check_volume(-1).is_err());
    }
}
