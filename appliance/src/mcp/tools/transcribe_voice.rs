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
use serde_json::json;

use super::{ToolError, success};
pub use crate::listen::{Heard, NO_SPEECH};
use crate::{
    config::RECORD_TIMEOUT_RANGE,
    floor::{FloorError, Turn, Who},
    listen::{self, Chime, Listen, ListenError},
    mcp::HarkServer,
    state::DoingGuard,
};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeVoice {
    /// Maximum seconds to wait for speech to begin before returning
    /// `(no speech detected)` (0.5–300; default `mcp.record_timeout`, 15),
    /// any wait for the microphone included.
    pub timeout_seconds: Option<f64>,
    /// Wait for the microphone when another call holds it (default true);
    /// false: `BusyError` at once.
    pub queue: Option<bool>,
    /// Language spoken, ISO 639-1 (`en`, `de`, …) or `auto`; only
    /// multilingual models accept languages other than English.
    pub language: Option<String>,
}

/// Progress notifications (of 3 steps) when the client asked for them.
pub struct ListenProgress<'a> {
    context: &'a RequestContext<RoleServer>,
    step: f64,
    total: Option<f64>,
    /// Partial transcripts sent since the last step.
    partials: u32,
}

impl<'a> ListenProgress<'a> {
    /// Steps from `first` on, of `total` (a `converse` counts its speech
    /// first).
    pub fn new(context: &'a RequestContext<RoleServer>, first: f64, total: Option<f64>) -> Self {
        Self {
            context,
            step: first,
            total,
            partials: 0,
        }
    }
}

impl listen::Progress for ListenProgress<'_> {
    async fn report(&mut self, step: &'static str) {
        super::progress(self.context, self.step, self.total, step).await;
        self.step += 1.0;
        self.partials = 0;
    }

    /// Between the step before ("speech detected") and the next
    /// ("transcribing"): progress must rise with every notification, and
    /// the steps' count stays what the total says, however many partial
    /// transcripts there are (the n-th is at 1 - 1/(n+1) of the way).
    async fn partial(&mut self, text: &str) {
        self.partials += 1;
        let n = f64::from(self.partials);
        let at = self.step - 1.0 + n / (n + 1.0);
        super::progress(
            self.context,
            at,
            self.total,
            &format!("heard so far: {text}"),
        )
        .await;
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
            ListenError::HeldTooLong(_) => "FloorTimeoutError",
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

impl From<FloorError> for ToolError {
    fn from(e: FloorError) -> Self {
        let context = match &e {
            FloorError::Busy {
                holder, waiting, ..
            } => json!({ "holder": holder, "waiting": waiting }),
            FloorError::QueueFull { waiting } => json!({ "waiting": waiting }),
            FloorError::TimedOut { holder } => json!({ "holder": holder }),
        };
        ToolError::new("BusyError", e.to_string()).with_context(context)
    }
}

impl HarkServer {
    /// Takes the floor (the microphone, the turn with the person) for this
    /// agent's `tool`: at once if free, else after those before it, within
    /// `timeout`; with `queue: false` a busy floor is `BusyError` at once.
    /// The client leaving gives up its place.
    pub(crate) async fn take_floor(
        &self,
        context: &RequestContext<RoleServer>,
        tool: &'static str,
        queue: bool,
        timeout: Duration,
    ) -> Result<Turn, ToolError> {
        let agent = self.agent_name(context);
        let _doing = self.doing(context, "waiting for the microphone");
        let floor = self.state.floor();
        tokio::select! {
            turn = floor.take(Who::Agent(agent), tool, queue, timeout) => Ok(turn?),
            _ = super::call_ended(self, context) => {
                Err(ToolError::new("CancelledError", "the call was cancelled while it waited for the microphone"))
            }
        }
    }

    /// Shows the calling client doing `what` in `get_status` until the
    /// guard drops.
    pub(crate) fn doing(
        &self,
        context: &RequestContext<RoleServer>,
        what: &'static str,
    ) -> Option<DoingGuard> {
        self.identity(context).map(|identity| identity.doing(what))
    }

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
        let asked = tokio::time::Instant::now();
        let turn = self
            .take_floor(
                context,
                "transcribe_voice",
                args.queue.unwrap_or(true),
                timeout,
            )
            .await?;
        let doing = self.doing(context, "listening");
        // The wait for the microphone counts against the timeout; what is
        // left is at least long enough to start speaking.
        let waited = asked.elapsed();
        let request = Listen {
            agent: Some(self.agent_name(context)),
            timeout: timeout
                .saturating_sub(waited)
                .max(Duration::from_millis(500)),
            language: args.language,
            // Handed the floor by another listen: the microphone opens at
            // once (the chime plays alongside).
            chime: if waited > Duration::from_millis(50) {
                Chime::Alongside
            } else {
                Chime::First
            },
            push_to_talk: true,
            turn: Some(turn),
        };
        let mut progress = ListenProgress::new(context, 0.0, Some(3.0));
        let _doing = doing;
        tokio::select! {
            heard = listen::listen(&self.state, request, &mut progress) => Ok(heard?),
            _ = super::call_ended(self, context) => {
                tracing::info!("listening cancelled by the client");
                Err(ToolError::new("CancelledError", "listening was cancelled"))
            }
        }
    }
}
