//! The tools Hark serves, one file each: a tool parses its arguments, makes
//! one call through the room capability it needs
//! ([`hark_core::room::Capabilities`]) and formats the result; what a call
//! is doing reaches the client as progress ([`report`]).
//!
//! Tool failures an agent can act on are tool results with `isError` set
//! ([`ToolResult`]): the text says what went wrong and what to do, and the
//! structured content carries a machine-readable type (seed 004's error
//! types) and the context.

pub mod agent_settings;
pub mod choose;
pub mod confirm;
pub mod converse;
pub mod detect_language;
pub mod get_status;
pub mod list_captures;
pub mod models;
pub mod scheduled;
pub mod set_volume;
pub mod speak_text;
pub mod synthesize_speech;
pub mod transcribe_audio;
pub mod transcribe_batch;
pub mod transcribe_voice;
pub mod voices;
pub mod wait_for_person;

pub mod report;

use hark_core::room::{Context, Failure};
use rmcp::{
    RoleServer,
    model::{CallToolResult, ContentBlock as Content},
    service::RequestContext,
};
use serde_json::{Value, json};

/// A failed call as the agent sees it: a tool result with `isError` set,
/// its text the failure's message, its structured content the failure's
/// `type` (the kind's name: `AudioFormatError`, `BusyError`, … seed 004's
/// error types and the appliance's own), message and context.
pub trait ToolResult {
    fn to_json(&self) -> Value;
    fn into_result(self) -> CallToolResult;
}

impl ToolResult for Failure {
    fn to_json(&self) -> Value {
        json!({
            "type": self.kind.name(),
            "message": self.message,
            "context": self.context,
        })
    }

    fn into_result(self) -> CallToolResult {
        let mut result = CallToolResult::error(vec![Content::text(self.message.clone())]);
        result.structured_content = Some(json!({ "error": self.to_json() }));
        result
    }
}

/// `call` to its end, or `cancelled` (a `CancelledError` saying so) if the
/// call ends first (see [`call_ended`]); dropping `call` cancels it in the
/// room.
pub async fn unless_ended<T>(
    server: &crate::server::HarkServer,
    context: &RequestContext<RoleServer>,
    call: impl std::future::Future<Output = Result<T, Failure>>,
    cancelled: &str,
) -> Result<T, Failure> {
    tokio::select! {
        done = call => Ok(done?),
        () = call_ended(server, context) => Err(Failure::cancelled(cancelled)),
    }
}

/// Resolves when the call should stop: cancelled by the client
/// (`notifications/cancelled`), or the client's connection ended.
pub async fn call_ended(server: &crate::server::HarkServer, context: &RequestContext<RoleServer>) {
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
    server: &crate::server::HarkServer,
    context: &RequestContext<RoleServer>,
) {
    // A task outlives the HTTP connection that started it (the client
    // asks after it on whatever connection it has); on a stream transport
    // the connection is the session, and its end ends the task too.
    let task = context.extensions.get::<crate::tasks::Running>().is_some();
    match server
        .identity(context)
        .filter(|i| !(task && i.transport.is_http()))
    {
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
/// progress token in the request's `_meta`). In a task, whose request was
/// answered already, the message is the task's status instead.
pub async fn progress(
    context: &RequestContext<RoleServer>,
    step: f64,
    total: Option<f64>,
    message: &str,
) {
    if let Some(task) = context.extensions.get::<crate::tasks::Running>() {
        task.say(message);
        return;
    }
    let Some(token) = context.meta.get_progress_token() else {
        return;
    };
    // Progress must rise with every notification; a step after a
    // heartbeat (see `keep_alive`) may not, and goes halfway up instead.
    let step = match context.extensions.get::<Sent>() {
        Some(sent) => sent.next(step, total, message),
        None => step,
    };
    notify(&context.peer, &token, step, total, message).await;
}

async fn notify(
    peer: &rmcp::Peer<RoleServer>,
    token: &rmcp::model::ProgressToken,
    step: f64,
    total: Option<f64>,
    message: &str,
) {
    let mut param = rmcp::model::ProgressNotificationParam::new(token.clone(), step);
    param.total = total;
    param.message = Some(message.to_owned());
    if let Err(e) = peer.notify_progress(param).await {
        tracing::debug!(error = %e, "progress notification not sent");
    }
}

/// What the call is doing, between its counted steps: a task's status, and
/// what the next heartbeat (see [`keep_alive`]) says; no notification of
/// its own.
pub fn note(context: &RequestContext<RoleServer>, message: &str) {
    if let Some(task) = context.extensions.get::<crate::tasks::Running>() {
        task.say(message);
    } else if let Some(sent) = context.extensions.get::<Sent>() {
        sent.lock().message = message.to_owned();
    }
}

/// How often a call that has been quiet says it is still at it.
pub const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(20);

/// The progress a call has sent, so its notifications keep rising when
/// heartbeats come between its steps. One per call, in its context.
#[derive(Clone)]
pub struct Sent(std::sync::Arc<std::sync::Mutex<SentState>>);

struct SentState {
    value: Option<f64>,
    total: Option<f64>,
    message: String,
    at: std::time::Instant,
}

impl Sent {
    pub fn new() -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(SentState {
            value: None,
            total: None,
            message: String::new(),
            at: std::time::Instant::now(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SentState> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The value to send for `step`: itself when it rises, else halfway
    /// from the last one to the next whole step (below any later step).
    fn next(&self, step: f64, total: Option<f64>, message: &str) -> f64 {
        let mut sent = self.lock();
        let value = match sent.value {
            Some(last) if step <= last => last + (last.floor() + 1.0 - last) / 2.0,
            _ => step,
        };
        sent.value = Some(value);
        sent.total = total;
        sent.message = message.to_owned();
        sent.at = std::time::Instant::now();
        value
    }
}

impl Default for Sent {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs beside a call whose client asked for progress: when the call has
/// said nothing for [`KEEP_ALIVE`], it repeats its last message (still
/// `listening`, still `waiting for the person`), so clients that restart
/// their limit on progress (the TypeScript SDK with
/// `resetTimeoutOnProgress`) do not give up on a person who takes their
/// time. Never ends.
pub async fn keep_alive(
    peer: rmcp::Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
    sent: Sent,
) -> std::convert::Infallible {
    loop {
        let due = sent.lock().at + KEEP_ALIVE;
        if std::time::Instant::now() < due {
            tokio::time::sleep_until(due.into()).await;
            continue;
        }
        let (last, total, message) = {
            let s = sent.lock();
            (s.value.unwrap_or(0.0), s.total, s.message.clone())
        };
        let message = if message.is_empty() {
            "working".to_owned()
        } else {
            message
        };
        notify(
            &peer,
            &token,
            sent.next(last, total, &message),
            total,
            &message,
        )
        .await;
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

/// Arguments of the wrong JSON type, caught against the tool's input
/// schema before its handler parses them: the error names the field and
/// the type it takes (the parser's own message names neither).
pub fn check_argument_types(
    schema: &rmcp::model::JsonObject,
    arguments: Option<&rmcp::model::JsonObject>,
) -> Result<(), Failure> {
    let (Some(properties), Some(arguments)) = (
        schema.get("properties").and_then(Value::as_object),
        arguments,
    ) else {
        return Ok(());
    };
    for (field, value) in arguments {
        let Some(types) = properties.get(field).and_then(|p| p.get("type")) else {
            continue;
        };
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        if !types.iter().any(|t| json_type_is(value, t)) {
            let wanted: Vec<&str> = types.iter().copied().filter(|t| *t != "null").collect();
            return Err(Failure::invalid(format!(
                "`{field}` must be {}, got {}",
                wanted.join(" or "),
                json_type_name(value)
            ))
            .with_context(Context::Field {
                field: field.clone(),
            }));
        }
    }
    Ok(())
}

/// Whether `value` is of JSON Schema type `t`.
fn json_type_is(value: &Value, t: &str) -> bool {
    match t {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        // 3.0 is an integer to serde_json's integer parsers only as 3.
        "integer" => value.is_i64() || value.is_u64(),
        // A type this check does not know: let the parser judge.
        _ => true,
    }
}

fn json_type_name(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({:?})", s.chars().take(40).collect::<String>()),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_keeps_rising_when_heartbeats_come_between_steps() {
        let sent = Sent::new();
        let total = Some(3.0);
        assert_eq!(sent.next(0.0, total, "listening"), 0.0);
        // Two heartbeats: halfway up to the next step, each time.
        assert_eq!(sent.next(0.0, total, "listening"), 0.5);
        assert_eq!(sent.next(0.5, total, "listening"), 0.75);
        // The next step goes out as it is.
        assert_eq!(sent.next(1.0, total, "speech detected"), 1.0);
        // A partial at 1.5, a heartbeat, then a partial the listen counted
        // at 1.67: still rising, still below the step after.
        assert_eq!(sent.next(1.5, total, "heard so far: turn"), 1.5);
        assert_eq!(sent.next(1.5, total, "heard so far: turn"), 1.75);
        let partial = sent.next(1.0 + 2.0 / 3.0, total, "heard so far: turn the");
        assert!(partial > 1.75 && partial < 2.0, "{partial}");
        assert_eq!(sent.next(2.0, total, "transcribing"), 2.0);
        let state = sent.lock();
        assert_eq!(state.message, "transcribing");
        assert_eq!(state.total, total);
    }

    #[test]
    fn a_wrong_type_names_the_field_and_what_it_takes() {
        let schema = json!({ "properties": {
            "volume": { "type": "integer" },
            "voice": { "type": ["string", "null"] },
            "options": { "type": "array" },
        }});
        let schema = schema.as_object().expect("object");
        let args = |v: Value| v.as_object().cloned();
        let check = |v: Value| check_argument_types(schema, args(v).as_ref());
        assert!(check(json!({ "volume": 40, "voice": null, "options": [] })).is_ok());
        assert!(check(json!({ "unknown": 1 })).is_ok());
        let err = check(json!({ "volume": "loud" })).expect_err("a string");
        assert_eq!(err.kind, hark_core::room::Kind::InvalidArgument);
        assert_eq!(
            err.message,
            "`volume` must be integer, got a string (\"loud\")"
        );
        // On the wire: the type, the words, and the field as the context.
        assert_eq!(
            err.to_json(),
            json!({
                "type": "InvalidArgumentError",
                "message": err.message,
                "context": { "field": "volume" },
            })
        );
        assert_eq!(
            Failure::invalid("no context").to_json()["context"],
            Value::Null
        );
        let err = check(json!({ "volume": 4.5 })).expect_err("a fraction");
        assert_eq!(err.message, "`volume` must be integer, got a number (4.5)");
        let err = check(json!({ "voice": 3 })).expect_err("a number");
        assert_eq!(err.message, "`voice` must be string, got a number (3)");
    }
}
