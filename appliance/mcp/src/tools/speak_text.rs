//! `speak_text` — seed 000's tool: queues text for the speaker and returns
//! `spoken` at once; with `wait: true` it returns when the speech has been
//! played (or stopped), sending progress as each sentence is made and
//! heard. `stop_speaking` silences the speaker and clears the queue.

use hark_core::room::Failure;
pub use hark_core::room::Spoken;
use hark_core::room::{Priority, SpeakCall, SpeechStatus};
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolResult as _, report::CallReport, success};
use crate::server::HarkServer;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SpeakText {
    /// The text to speak. Markdown, HTML tags and emoji are not read out.
    #[schemars(required)]
    pub text: Option<String>,
    /// A voice id from `list_voices` (default: the agent's voice, else the
    /// appliance's).
    pub voice: Option<String>,
    /// The language of the text, ISO 639-1 (`de`, `es`, …) or a voice's
    /// `de_DE`, when no voice is given: spoken in a voice of it (an
    /// installed piper voice, else espeak-ng's).
    pub language: Option<String>,
    /// Speaking rate, 0.5 (slow) to 2.0 (fast); default 1.
    #[schemars(range(min = 0.5, max = 2.0))]
    pub rate: Option<f64>,
    /// Return when the speech has been played instead of at once.
    pub wait: Option<bool>,
    /// `urgent` (before everything waiting, after the sentence being
    /// spoken), `normal` (in order; the default) or `low` (after the rest).
    pub priority: Option<Priority>,
    /// Say it this many seconds from now (0–604800) instead of at once; it
    /// is kept across restarts (`list_scheduled`, `cancel_scheduled`).
    #[schemars(range(min = 0.0, max = 604800.0))]
    pub delay_seconds: Option<f64>,
    /// Say it at this time (RFC 3339, e.g. `2026-12-05T18:30:00Z`; at most
    /// seven days ahead) instead of at once.
    pub at: Option<String>,
    /// With `delay_seconds` or `at`: a timer. After the words a chime rings
    /// until the person presses the button or says the wake word, or
    /// `ring_seconds` pass.
    pub ring: Option<bool>,
    /// How long a timer rings at most, 1–600 seconds (default 60).
    #[schemars(range(min = 1.0, max = 600.0))]
    pub ring_seconds: Option<f64>,
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
        Ok(match self.room.speak.stop() {
            Ok(cleared) => success(
                if cleared == 0 {
                    "nothing was being spoken".to_owned()
                } else {
                    format!("stopped; {cleared} speech request(s) dropped")
                },
                Stopped { cleared },
            ),
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn speak(
        &self,
        text: String,
        args: SpeakText,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, Failure> {
        let later = hark_core::room::check_later(
            args.delay_seconds,
            args.at.as_deref(),
            args.ring,
            args.ring_seconds,
            std::time::SystemTime::now(),
        )?;
        let call = SpeakCall {
            agent: Some(self.agent_name(context)),
            text,
            voice: args.voice,
            language: args.language,
            rate: args.rate,
            priority: args.priority.unwrap_or_default(),
            wait: args.wait.unwrap_or(false),
            later,
        };
        let mut report = CallReport::speech(self, context);
        let spoken = tokio::select! {
            spoken = self.room.speak.speak(call, &mut report) => spoken?,
            _ = super::call_ended(self, context) => {
                // The caller gave up: its speech stops with the call.
                return Err(Failure::cancelled("the call was cancelled; its speech was stopped"));
            }
        };
        Ok(match spoken.status {
            SpeechStatus::Stopped => success("stopped before the end", spoken),
            SpeechStatus::Scheduled => {
                let text = spoken.scheduled.as_ref().map_or_else(
                    || "kept for later".to_owned(),
                    |s| format!("kept for {} (id {})", s.due_at, s.id),
                );
                success(text, spoken)
            }
            _ => success("spoken", spoken),
        })
    }
}
