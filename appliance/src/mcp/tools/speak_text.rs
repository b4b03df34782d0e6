//! `speak_text` — seed 000's tool: queues text for the speaker and returns
//! `spoken` at once; with `wait: true` it returns when the speech has been
//! played (or stopped), sending progress as each sentence is made and
//! heard. `stop_speaking` silences the speaker and clears the queue.

use std::sync::{Arc, atomic::Ordering};

use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolError, progress, success};
use crate::{
    mcp::HarkServer,
    tts::{Priority, SpeakError, SpeechEvent, SpeechOutcome, TextToSpeech},
};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SpeakText {
    /// The text to speak. Markdown, HTML tags and emoji are not read out.
    #[schemars(required)]
    pub text: Option<String>,
    /// A voice id from `list_voices` (default: the appliance's voice).
    pub voice: Option<String>,
    /// Speaking rate, 0.5 (slow) to 2.0 (fast); default 1.
    #[schemars(range(min = 0.5, max = 2.0))]
    pub rate: Option<f64>,
    /// Return when the speech has been played instead of at once.
    pub wait: Option<bool>,
    /// `urgent` (before everything waiting, after the sentence being
    /// spoken), `normal` (in order; the default) or `low` (after the rest).
    pub priority: Option<Priority>,
}

/// `speak_text`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Spoken {
    /// `queued` (returned at once), `spoken` (played to the end), or
    /// `stopped` (interrupted before the end).
    pub status: String,
    /// The text as given.
    pub text: String,
    /// The voice that speaks: a voice id, or `espeak:<name>` for espeak-ng.
    pub voice: String,
    /// `piper` or `espeak`.
    pub engine: String,
    /// Why espeak-ng speaks instead of piper, when it does.
    pub fallback_reason: Option<String>,
    /// Sentences (pieces) the text is spoken in.
    pub sentences: usize,
    /// The priority it was queued with.
    pub priority: Priority,
    /// Seconds of speech played (with `wait: true`).
    pub seconds: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Stopped {
    /// Speech requests that were playing or waiting and were dropped.
    pub cleared: usize,
}

#[tool_router(router = speak_text_router, vis = "pub(crate)")]
impl HarkServer {
    /// Speak text aloud through the appliance's speaker. Returns as soon as
    /// the text is queued, unless `wait` is true.
    #[tool(
        name = "speak_text",
        output_schema = super::output_schema::<Spoken>(),
        annotations(title = "Speak text aloud", open_world_hint = false)
    )]
    pub async fn speak_text(
        &self,
        Parameters(args): Parameters<SpeakText>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // Seed 000's exact error for a call without text.
        let Some(text) = args.text.clone() else {
            return Err(ErrorData::internal_error(
                "speak_text requires 'text' argument",
                None,
            ));
        };
        Ok(match self.speak(text, args, &context).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }

    /// Stop speaking at once and drop everything queued to be spoken.
    #[tool(
        name = "stop_speaking",
        output_schema = super::output_schema::<Stopped>(),
        annotations(
            title = "Stop speaking",
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn stop_speaking(&self) -> Result<CallToolResult, ErrorData> {
        Ok(match tts_of(self) {
            Ok(tts) => {
                let cleared = tts.stop();
                success(
                    if cleared == 0 {
                        "nothing was being spoken".to_owned()
                    } else {
                        format!("stopped; {cleared} speech request(s) dropped")
                    },
                    Stopped { cleared },
                )
            }
            Err(e) => e.into_result(),
        })
    }
}

/// The text-to-speech service, or why it is not there.
pub fn tts_of(server: &HarkServer) -> Result<Arc<TextToSpeech>, ToolError> {
    tts_of_state(&server.state)
}

/// As [`tts_of`], from the appliance's state.
pub fn tts_of_state(state: &crate::state::ApplianceState) -> Result<Arc<TextToSpeech>, ToolError> {
    let tts = state
        .tts
        .get()
        .cloned()
        .ok_or_else(|| ToolError::new("SpeechError", "text to speech is starting"))?;
    if !tts.enabled {
        return Err(SpeakError::Disabled.into());
    }
    Ok(tts)
}

/// The text made speakable, or why it cannot be spoken.
pub fn check_text(text: &str, max_chars: usize) -> Result<String, ToolError> {
    if text.trim().is_empty() {
        return Err(ToolError::invalid("text is empty; give the words to speak"));
    }
    let chars = text.chars().count();
    if chars > max_chars {
        return Err(ToolError::invalid(format!(
            "text is {chars} characters; the limit is {max_chars} (tts.max_chars): split it into several calls"
        ))
        .with_context(serde_json::json!({ "characters": chars, "limit": max_chars })));
    }
    let speakable = hark_tts::text::speakable(text);
    if !speakable.chars().any(char::is_alphanumeric) {
        return Err(ToolError::invalid(
            "text has nothing to say: only emoji, markup or punctuation",
        ));
    }
    Ok(speakable)
}

/// `rate` checked: 0.5–2.0; `None`: the agent's own or 1.
pub fn check_rate(rate: Option<f64>) -> Result<Option<f32>, ToolError> {
    match rate {
        None => Ok(None),
        Some(r) if (0.5..=2.0).contains(&r) => Ok(Some(r as f32)),
        Some(r) => Err(ToolError::invalid(format!(
            "rate must be between 0.5 and 2.0, got {r}"
        ))),
    }
}

impl From<SpeakError> for ToolError {
    fn from(e: SpeakError) -> Self {
        use hark_tts::synth::TtsError;
        let kind = match &e {
            SpeakError::Busy(_) => "BusyError",
            SpeakError::Tts(TtsError::UnknownVoice { .. }) => "VoiceNotFoundError",
            SpeakError::Tts(TtsError::Rate(_) | TtsError::Unspeakable) => "InvalidArgumentError",
            SpeakError::Tts(TtsError::Voices(_)) => "VoiceError",
            _ => "SpeechError",
        };
        ToolError::new(kind, e.to_string())
    }
}

impl From<hark_tts::synth::TtsError> for ToolError {
    fn from(e: hark_tts::synth::TtsError) -> Self {
        SpeakError::Tts(e).into()
    }
}

impl HarkServer {
    async fn speak(
        &self,
        text: String,
        args: SpeakText,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ToolError> {
        let wait = args.wait.unwrap_or(false);
        let mut progress = SpeechProgress::new(context, Some(2.0));
        let speech = Speech {
            text,
            voice: args.voice,
            rate: args.rate,
            priority: args.priority.unwrap_or_default(),
            deadline: None,
        };
        let spoken = self.say(speech, wait, context, &mut progress).await?;
        Ok(match spoken.status.as_str() {
            "stopped" => success("stopped before the end", spoken),
            _ => success("spoken", spoken),
        })
    }

    /// Speaks `text` for the calling agent: queues it and, with `wait`,
    /// waits until it has been played (or stopped), reporting each
    /// sentence made and heard to `progress`. A caller that goes away stops
    /// its speech.
    pub(crate) async fn say(
        &self,
        speech: Speech,
        wait: bool,
        context: &RequestContext<RoleServer>,
        progress: &mut SpeechProgress<'_>,
    ) -> Result<Spoken, ToolError> {
        let deadline = speech.deadline;
        let tts = tts_of(self)?;
        let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let agent = Some(self.agent_name(context));
        let (mut result, accepted) =
            queue_speech(&tts, speech, agent, wait.then_some(events_tx)).await?;
        if !wait {
            return Ok(result);
        }
        let _doing = self.doing(context, "speaking");
        progress.sentences(accepted.pieces);
        let finished = loop {
            let event = tokio::select! {
                event = events.recv() => event,
                _ = super::call_ended(self, context) => {
                    // The caller gave up: stop its speech, not everyone's.
                    accepted.cancel.store(true, Ordering::Release);
                    return Err(ToolError::new("CancelledError", "the call was cancelled; its speech was stopped"));
                }
                () = async {
                    match deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline).await,
                        None => std::future::pending().await,
                    }
                } => {
                    accepted.cancel.store(true, Ordering::Release);
                    let max = self.state.floor().max_hold.as_secs();
                    return Err(ToolError::new("FloorTimeoutError", format!(
                        "this call held the floor longer than floor.max_hold_seconds ({max} s) and was cut off; its speech was stopped"
                    )));
                }
            };
            let (what, index, count) = match event {
                Some(SpeechEvent::Synthesized { index, count }) => ("synthesized", index, count),
                Some(SpeechEvent::Playing { index, count }) => ("playing", index, count),
                Some(SpeechEvent::Finished(finished)) => break finished,
                None => return Err(SpeakError::Stopped.into()),
            };
            progress
                .report(&format!("{what} sentence {} of {count}", index + 1))
                .await;
        };
        result.engine = finished.engine.to_string();
        if finished.fallback.is_some() {
            result.fallback_reason = finished.fallback;
        }
        result.seconds = Some((finished.seconds * 100.0).round() / 100.0);
        match finished.outcome {
            SpeechOutcome::Spoken => {
                result.status = "spoken".into();
                Ok(result)
            }
            SpeechOutcome::Stopped => {
                result.status = "stopped".into();
                Ok(result)
            }
            SpeechOutcome::Failed(reason) => Err(ToolError::new("SpeechError", reason)),
        }
    }
}

/// Checks `speech` and queues it for `agent` (`None`: the appliance's own
/// words): what `speak_text`, `converse` and `POST /speak` share. `events`
/// gets the request's progress.
pub async fn queue_speech(
    tts: &Arc<TextToSpeech>,
    speech: Speech,
    agent: Option<String>,
    events: Option<tokio::sync::mpsc::UnboundedSender<SpeechEvent>>,
) -> Result<(Spoken, crate::tts::Accepted), ToolError> {
    let Speech {
        text,
        voice,
        rate,
        priority,
        ..
    } = speech;
    let speakable = check_text(&text, tts.max_chars)?;
    let rate = check_rate(rate)?;
    let accepted = {
        let tts = Arc::clone(tts);
        tokio::task::spawn_blocking(move || {
            tts.speak(&speakable, voice.as_deref(), rate, priority, events, agent)
        })
        .await
        .map_err(|e| ToolError::new("SpeechError", format!("speech planning failed: {e}")))??
    };
    let spoken = Spoken {
        status: "queued".into(),
        text,
        voice: accepted.voice.clone(),
        engine: accepted.engine.to_string(),
        fallback_reason: accepted.fallback.clone(),
        sentences: accepted.pieces,
        priority,
        seconds: None,
    };
    Ok((spoken, accepted))
}

/// What to say, and how.
pub struct Speech {
    pub text: String,
    pub voice: Option<String>,
    pub rate: Option<f64>,
    pub priority: Priority,
    /// The floor's `max_hold` for a call that holds it while it speaks:
    /// speech still playing then is stopped and the call fails.
    pub deadline: Option<tokio::time::Instant>,
}

impl Speech {
    /// `text` in the agent's own voice and rate, in order.
    pub fn plain(text: String, voice: Option<String>) -> Self {
        Self {
            text,
            voice,
            rate: None,
            priority: Priority::Normal,
            deadline: None,
        }
    }
}

/// Progress of a call that speaks (and maybe listens after): MCP requires
/// the value to grow with every notification, so it counts them.
pub struct SpeechProgress<'a> {
    context: &'a RequestContext<RoleServer>,
    step: f64,
    /// Notifications per sentence (`speak_text`: made and heard), or `None`
    /// when the call's total is not known in advance.
    per_sentence: Option<f64>,
    total: Option<f64>,
}

impl<'a> SpeechProgress<'a> {
    pub fn new(context: &'a RequestContext<RoleServer>, per_sentence: Option<f64>) -> Self {
        Self {
            context,
            step: 0.0,
            per_sentence,
            total: None,
        }
    }

    fn sentences(&mut self, count: usize) {
        self.total = self.per_sentence.map(|per| per * count as f64);
    }

    pub async fn report(&mut self, message: &str) {
        self.step += 1.0;
        progress(self.context, self.step, self.total, message).await;
    }

    /// Where a listen after the speech continues counting.
    pub fn step(&self) -> f64 {
        self.step + 1.0
    }
}
