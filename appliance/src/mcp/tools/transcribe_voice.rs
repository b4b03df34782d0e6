//! `transcribe_voice` — seed 000's tool: opens the microphone, waits for the
//! person in the room to speak, ends on end of speech (or the timeout), and
//! returns what they said, or exactly `(no speech detected)`. The listening
//! itself is [`crate::listen`], shared with `converse`, `confirm` and
//! `choose`.
//!
//! A cancelled call (`notifications/cancelled`) or a client that goes away
//! drops the listen, which stops the recording within one poll (10 ms) and
//! shows the microphone closed again.

use std::time::Duration;

use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolError, success};
pub use crate::listen::{Heard, NO_SPEECH};
use crate::{
    config::RECORD_TIMEOUT_RANGE,
    listen::{self, Chime, Listen, ListenError},
    mcp::HarkServer,
};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeVoice {
    /// Maximum seconds to wait for speech to begin before returning
    /// `(no speech detected)` (0.5–300; default `mcp.record_timeout`, 15).
    pub timeout_seconds: Option<f64>,
    /// Language spoken, ISO 639-1 (`en`, `de`, …) or `auto`; only
    /// multilingual models accept languages other than English.
    pub language: Option<String>,
}

/// Progress notifications (of 3 steps) when the client asked for them.
pub struct ListenProgress<'a> {
    context: &'a RequestContext<RoleServer>,
    step: f64,
    total: Option<f64>,
}

impl<'a> ListenProgress<'a> {
    /// Steps from `first` on, of `total` (a `converse` counts its speech
    /// first).
    pub fn new(context: &'a RequestContext<RoleServer>, first: f64, total: Option<f64>) -> Self {
        Self {
            context,
            step: first,
            total,
        }
    }
}

impl listen::Progress for ListenProgress<'_> {
    async fn report(&mut self, step: &'static str) {
        super::progress(self.context, self.step, self.total, step).await;
        self.step += 1.0;
    }
}

impl From<ListenError> for ToolError {
    fn from(e: ListenError) -> Self {
        let kind = match e {
            ListenError::Stt(e) => return e.into(),
            ListenError::NoEngine(_) | ListenError::EngineStopped => "ModelNotLoadedError",
            ListenError::NoMicrophone | ListenError::Stalled | ListenError::Recorder(_) => {
                "MicrophoneError"
            }
            ListenError::Muted => "MicrophoneMutedError",
        };
        ToolError::new(kind, e.to_string())
    }
}

/// `timeout_seconds` checked against its range; `None`: the default.
pub fn check_timeout(
    timeout: Option<f64>,
    default: Duration,
    (lo, hi): (f64, f64),
) -> Result<Duration, ToolError> {
    match timeout {
        None => Ok(default),
        Some(t) if t.is_finite() && t >= lo && t <= hi => Ok(Duration::from_secs_f64(t)),
        Some(t) => Err(ToolError::invalid(format!(
            "timeout_seconds must be {lo}–{hi} seconds, got {t}"
        ))),
    }
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
    /// A listen's `timeout_seconds`, checked (0.5–300); the default is
    /// `mcp.record_timeout`.
    pub(crate) fn listen_timeout(&self, asked: Option<f64>) -> Result<Duration, ToolError> {
        let default = self
            .state
            .stt
            .get()
            .map_or(Duration::from_secs(15), |stt| stt.record_timeout);
        check_timeout(asked, default, RECORD_TIMEOUT_RANGE)
    }

    async fn listen_once(
        &self,
        args: TranscribeVoice,
        context: &RequestContext<RoleServer>,
    ) -> Result<Heard, ToolError> {
        let timeout = self.listen_timeout(args.timeout_seconds)?;
        let request = Listen {
            agent: Some(self.agent_name(context)),
            timeout,
            language: args.language,
            chime: Chime::First,
            push_to_talk: true,
        };
        let _turn = self.state.agent_turn();
        let mut progress = ListenProgress::new(context, 0.0, Some(3.0));
        tokio::select! {
            heard = listen::listen(&self.state, request, &mut progress) => Ok(heard?),
            _ = super::call_ended(self, context) => {
                tracing::info!("listening cancelled by the client");
                Err(ToolError::new("CancelledError", "listening was cancelled"))
            }
        }
    }
}
