//! `transcribe_voice` — seed 000's tool: opens the microphone, waits for the
//! person in the room to speak, ends on end of speech (or the timeout), and
//! returns what they said, or exactly `(no speech detected)`. The listening
//! itself is the room's ([`hark_core::room::Listen`]), a dialogue shared
//! with `converse`, `confirm` and `choose`.
//!
//! A cancelled call (`notifications/cancelled`) or a client that goes away
//! drops the listen, which stops the recording within one poll (10 ms) and
//! shows the microphone closed again.

use hark_core::room::Failure;
use hark_core::room::ListenCall;
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolResult as _, report::CallReport, success};
use crate::server::HarkServer;
pub use hark_core::room::{Heard, NO_SPEECH};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeVoice {
    /// Maximum seconds to wait for speech to begin before returning
    /// `(no speech detected)` (0.5–300; default `mcp.record_timeout`, 15),
    /// any wait for the microphone included.
    pub timeout_seconds: Option<f64>,
    /// Wait for the microphone when another call holds it (default true);
    /// false: `BusyError` at once.
    pub queue: Option<bool>,
    /// Language spoken, ISO 639-1 (`en`, `de`, …), or `auto` to have it
    /// detected (slower); default `stt.language` (`en`). `auto` and other
    /// languages need a multilingual model (`stt.multilingual_model`).
    pub language: Option<String>,
}

#[tool_router(router = transcribe_voice_router, vis = "pub(crate)")]
impl HarkServer {
    /// Open the microphone, wait for the person in the room to speak, and
    /// return what they said when they stop (or `(no speech detected)`).
    #[tool(
        name = "transcribe_voice",
        output_schema = super::output_schema::<Heard>(),
        annotations(
            title = "Listen to the room",
            read_only_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn transcribe_voice(
        &self,
        Parameters(args): Parameters<TranscribeVoice>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.listen_once(args, &context).await {
            Ok(heard) => success(heard.text.clone(), heard),
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn listen_once(
        &self,
        args: TranscribeVoice,
        context: &RequestContext<RoleServer>,
    ) -> Result<Heard, Failure> {
        let call = ListenCall {
            agent: self.agent_name(context),
            timeout: args.timeout_seconds,
            queue: args.queue.unwrap_or(true),
            language: args.language,
        };
        let mut report = CallReport::listen(self, context);
        tokio::select! {
            heard = self.room.listen.listen(call, &mut report) => Ok(heard?),
            _ = super::call_ended(self, context) => {
                tracing::info!("listening cancelled by the client");
                Err(Failure::cancelled("listening was cancelled"))
            }
        }
    }
}
