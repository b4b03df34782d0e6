//! `converse` — speak, then listen for the reply, in one call (VoiceMode's
//! central tool): what `speak_text` with `wait: true` and then
//! `transcribe_voice` do, without a gap in which another agent could take
//! the turn, and with barge-in: a press of the button while Hark speaks
//! stops the speech and listens at once (no chime; push-to-talk if the
//! button stays down).

use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ToolError,
    speak_text::{Speech, SpeechProgress, Spoken},
    success,
    transcribe_voice::ListenProgress,
};
use crate::{
    events::{self, Button, Event, Events},
    listen::{self, Chime, Heard, Listen, ListenError},
    mcp::HarkServer,
};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Converse {
    /// What to say first (at most `tts.max_chars` characters).
    pub text: String,
    /// A voice id from `list_voices` (default: the appliance's voice).
    pub voice: Option<String>,
    /// Speaking rate, 0.5–2.0; default 1.
    #[schemars(range(min = 0.5, max = 2.0))]
    pub rate: Option<f64>,
    /// Seconds to wait for the reply to begin after the speech (0.5–300;
    /// default `mcp.record_timeout`, 15).
    pub timeout_seconds: Option<f64>,
    /// Listen for a reply after speaking (default true). False: only speak,
    /// and return when the speech has played.
    pub listen: Option<bool>,
    /// The speech's place in the queue: `urgent`, `normal` (default) or
    /// `low`.
    pub priority: Option<crate::tts::Priority>,
    /// Wait for the microphone when another call holds it (default true),
    /// up to `timeout_seconds`; false: `BusyError` at once.
    pub queue: Option<bool>,
}

/// `converse`'s structured result: what was spoken, then what was heard
/// (`transcribe_voice`'s fields; absent with `listen: false`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Conversed {
    /// The text spoken.
    pub spoken: String,
    /// `spoken` (played to the end), `interrupted` (the person pressed the
    /// button: Hark stopped and listened at once) or `stopped` (stopped
    /// otherwise, e.g. `stop_speaking`).
    pub speech_status: String,
    /// The voice that spoke.
    pub voice: String,
    /// `piper` or `espeak`.
    pub engine: String,
    /// Seconds of speech played.
    pub speech_seconds: Option<f64>,
    /// What the person said, or `(no speech detected)`; absent with
    /// `listen: false`.
    #[serde(flatten)]
    pub heard: Option<Heard>,
}

/// Whether the person pressed the button since `events` subscribed.
fn pressed(events: &mut Events) -> bool {
    events::received(events).any(|event| {
        matches!(
            event.event,
            Event::Button {
                action: Button::Press
            }
        )
    })
}

#[tool_router(router = converse_router, vis = "pub(crate)")]
impl HarkServer {
    /// Say something to the person in the room and listen for their reply
    /// in one call. Returns what was spoken and what was heard (the same
    /// fields as transcribe_voice). With `listen: false` it only speaks and
    /// returns when the speech has played.
    #[tool(
        name = "converse",
        output_schema = super::output_schema::<Conversed>(),
        annotations(
            title = "Speak and listen for the reply",
            read_only_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn converse(
        &self,
        Parameters(args): Parameters<Converse>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.speak_then_listen(args, &context).await {
            Ok(conversed) => {
                let text = match &conversed.heard {
                    Some(heard) => heard.text.clone(),
                    None => conversed.speech_status.clone(),
                };
                success(text, conversed)
            }
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn speak_then_listen(
        &self,
        args: Converse,
        context: &RequestContext<RoleServer>,
    ) -> Result<Conversed, ToolError> {
        let listen = args.listen.unwrap_or(true);
        let timeout = self.listen_timeout(args.timeout_seconds)?;
        if listen && self.state.muted.load(std::sync::atomic::Ordering::Acquire) {
            // Nothing could be heard: say so before speaking, not after.
            return Err(ListenError::Muted.into());
        }
        // A press during the speech belongs to this call (barge-in), not to
        // the voice inbox.
        // The floor from before speaking: nobody else speaks or listens
        // between the question and the answer.
        let turn = match listen {
            true => Some(
                self.take_floor(context, "converse", args.queue.unwrap_or(true), timeout)
                    .await?,
            ),
            false => None,
        };
        let deadline = turn.as_ref().map(|t| t.deadline);
        let _doing = self.doing(context, "speaking");
        let mut events = self.state.bus.subscribe();
        let mut progress = SpeechProgress::new(context, None);
        let spoken: Spoken = self
            .say(
                Speech {
                    text: args.text,
                    voice: args.voice,
                    rate: args.rate,
                    priority: args.priority.unwrap_or_default(),
                    deadline,
                },
                true,
                context,
                &mut progress,
            )
            .await?;
        let interrupted = spoken.status == "stopped" && pressed(&mut events);
        let mut conversed = Conversed {
            spoken: spoken.text,
            speech_status: if interrupted {
                "interrupted".into()
            } else {
                spoken.status
            },
            voice: spoken.voice,
            engine: spoken.engine,
            speech_seconds: spoken.seconds,
            heard: None,
        };
        if !listen {
            return Ok(conversed);
        }
        let request = Listen {
            agent: Some(self.agent_name(context)),
            timeout,
            language: None,
            chime: if interrupted {
                Chime::None
            } else {
                Chime::First
            },
            push_to_talk: true,
            turn,
        };
        let _doing = self.doing(context, "listening");
        let mut progress = ListenProgress::new(context, progress.step(), None);
        let heard = tokio::select! {
            heard = listen::listen(&self.state, request, &mut progress) => heard?,
            _ = super::call_ended(self, context) => {
                return Err(ToolError::new("CancelledError", "converse was cancelled while listening"));
            }
        };
        conversed.heard = Some(heard);
        Ok(conversed)
    }
}
