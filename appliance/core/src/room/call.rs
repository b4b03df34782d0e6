//! What every capability shares: the boxed future, the typed failure and
//! its kinds, the checks of call arguments, and a call's progress.

use serde::Serialize;
use std::{future::Future, pin::Pin, time::Duration};

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
    /// a limit), or none.
    pub context: Context,
}

impl Failure {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            context: Context::None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Kind::InvalidArgument, message)
    }

    pub fn cancelled(message: impl Into<String>) -> Self {
        Self::new(Kind::Cancelled, message)
    }

    pub fn with_context(mut self, context: Context) -> Self {
        self.context = context;
        self
    }
}

/// The facts a failure carries, each kind with its own fields: on the
/// wire (a tool error's `context`) an object of those fields, or `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Context {
    None,
    /// An argument over its limit, in characters.
    Length {
        characters: usize,
        limit: usize,
    },
    /// The floor refused: who holds the microphone, how many wait (each
    /// when known).
    Floor {
        #[serde(skip_serializing_if = "Option::is_none")]
        holder: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        waiting: Option<usize>,
    },
    /// The audio file a call named.
    AudioPath {
        audio_path: String,
    },
    /// The file a call asked to write.
    OutputFile {
        output_file: String,
    },
    /// An argument of the wrong JSON type.
    Field {
        field: String,
    },
    /// A tool the caller's grant does not reach, and the scope it needs.
    Scope {
        tool: String,
        scope: String,
    },
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
        .with_context(Context::Length {
            characters: chars,
            limit: QUESTION_MAX_CHARS,
        }));
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
        .with_context(Context::Length {
            characters: chars,
            limit: max_chars,
        }));
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
