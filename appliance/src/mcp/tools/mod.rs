//! The tools Hark serves, one file each: a tool parses its arguments, makes
//! one call through the room capability it needs
//! ([`hark_core::room::Capabilities`]) and formats the result; what a call
//! is doing reaches the client as progress ([`report`]).
//!
//! Tool failures an agent can act on are tool results with `isError` set
//! ([`ToolError`]): the text says what went wrong and what to do, and the
//! structured content carries a machine-readable type (seed 004's error
//! types) and the context.

pub mod choose;
pub mod confirm;
pub mod converse;
pub mod detect_language;
pub mod get_status;
pub mod list_captures;
pub mod set_volume;
pub mod speak_text;
pub mod synthesize_speech;
pub mod transcribe_audio;
pub mod transcribe_batch;
pub mod transcribe_voice;
pub mod voices;
pub mod wait_for_person;

pub mod report;

use hark_core::room::{Failure, Kind};
use rmcp::{
    RoleServer,
    model::{CallToolResult, ContentBlock as Content},
    service::RequestContext,
};
use serde_json::{Value, json};

/// A failed tool call, as the agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// What kind of failure: its name is the structured content's `type`
    /// (`AudioFormatError`, `BusyError`, … seed 004's error types and the
    /// appliance's own).
    pub kind: Kind,
    pub message: String,
    pub context: Value,
}

impl ToolError {
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

    pub fn cancelled(message: impl Into<String>) -> Self {
        Self::new(Kind::Cancelled, message)
    }

    pub fn with_context(mut self, context: Value) -> Self {
        self.context = context;
        self
    }

    pub fn to_json(&self) -> Value {
        json!({
            "type": self.kind.name(),
            "message": self.message,
            "context": self.context,
        })
    }

    pub fn into_result(self) -> CallToolResult {
        let mut result = CallToolResult::error(vec![Content::text(self.message.clone())]);
        result.structured_content = Some(json!({ "error": self.to_json() }));
        result
    }
}

impl From<Failure> for ToolError {
    fn from(f: Failure) -> Self {
        Self {
            kind: f.kind,
            message: f.message,
            context: f.context,
        }
    }
}

/// Resolves when the call should stop: cancelled by the client
/// (`notifications/cancelled`), or the client's connection ended.
pub async fn call_ended(server: &crate::mcp::HarkServer, context: &RequestContext<RoleServer>) {
    // A call made under a token ends when the token is revoked.
    let revoked = match server.grant(context).paired_name() {
        Some(name) => server.state.auth.revoked(name),
        None => tokio_util::sync::CancellationToken::new(),
    };
    tokio::select! {
        () = revoked.cancelled() => {}
        () = connection_or_call_ended(server, context) => {}
    }
}

async fn connection_or_call_ended(
    server: &crate::mcp::HarkServer,
    context: &RequestContext<RoleServer>,
) {
    match server.identity(context) {
        Some(identity) => {
            let gone = identity.gone.clone();
            tokio::select! {
                _ = context.ct.cancelled() => {}
                _ = gone.cancelled() => {}
            }
        }
        None => context.ct.cancelled().await,
    }
}

/// Sends a progress notification when the client asked for them (a
/// progress token in the request's `_meta`).
pub async fn progress(
    context: &RequestContext<RoleServer>,
    step: f64,
    total: Option<f64>,
    message: &str,
) {
    if let Some(token) = context.meta.get_progress_token() {
        let mut param = rmcp::model::ProgressNotificationParam::new(token, step);
        param.total = total;
        param.message = Some(message.to_owned());
        if let Err(e) = context.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "progress notification not sent");
        }
    }
}

/// A successful result: `text` for the agent to read, `structured` for
/// programs (it matches the tool's output schema).
pub fn success(text: impl Into<String>, structured: impl serde::Serialize) -> CallToolResult {
    let mut result = CallToolResult::success(vec![Content::text(text.into())]);
    result.structured_content = Some(serde_json::to_value(structured).unwrap_or(Value::Null));
    result
}

/// The output schema of a tool whose result is `T`.
pub fn output_schema<T: schemars::JsonSchema + std::any::Any>()
-> std::sync::Arc<rmcp::model::JsonObject> {
    rmcp::handler::server::common::schema_for_output::<T>()
}
