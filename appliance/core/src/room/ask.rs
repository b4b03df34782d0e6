//! [`Ask`]: a question and its answer (`converse`, `confirm`, `choose`).

use super::{
    call::{BoxFuture, Failure, Report},
    listen::Heard,
    speak::{Engine, Priority},
};
use serde::{Deserialize, Serialize};

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
