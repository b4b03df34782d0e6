//! `converse` — speak, then listen for the reply, in one call (VoiceMode's
//! central tool): what `speak_text` with `wait: true` and then
//! `transcribe_voice` do, without a gap in which another agent could take
//! the turn, and with barge-in: a press of the button while Hark speaks
//! stops the speech and listens at once (no chime; push-to-talk if the
//! button stays down).

pub use hark_core::room::Conversed;
use hark_core::room::Failure;
use hark_core::room::{ConverseCall, Priority};
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    ToolResult as _,
    report::{CallReport, Doing},
    success,
};
use crate::server::HarkServer;

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
    pub priority: Option<Priority>,
    /// Wait for the microphone when another call holds it (default true),
    /// up to `timeout_seconds`; false: `BusyError` at once.
    pub queue: Option<bool>,
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
                    None => conversed.speech_status.as_str().to_owned(),
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
    ) -> Result<Conversed, Failure> {
        let call = ConverseCall {
            question: self.question(
                context,
                args.text,
                args.voice,
                args.timeout_seconds,
                args.queue,
            ),
            rate: args.rate,
            priority: args.priority.unwrap_or_default(),
            listen: args.listen.unwrap_or(true),
        };
        let mut report = CallReport::dialogue(self, context, Doing::Speaking);
        let conversed = self.room.ask.converse(call, &mut report);
        super::unless_ended(self, context, conversed, "converse was cancelled").await
    }
}
