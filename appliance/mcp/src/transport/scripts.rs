//! The HTTP port's surface for scripts and home automation, beside `/mcp`
//! and behind the same Host/Origin guard:
//!
//! - `GET /events`: the event stream as Server-Sent Events, one JSON
//!   object per event (`id:` its sequence number, `event:` its name). Each
//!   client has a bounded buffer of its own; a client that does not read
//!   fast enough is dropped (counted in `get_status`), and the event stream
//!   never waits for it.
//! - `POST /speak`: `{"text": …, "voice"?: …, "rate"?: …, "priority"?: …}`,
//!   spoken through the same path as `speak_text` (queued, answered at
//!   once with the same result). The speaker is named by `X-Hark-Client`,
//!   else `script`.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::{Shared, http::Body};
use hark_core::room::{Kind, Priority, Quiet, SpeakCall};

use crate::{server::CLIENT_HEADER, tools::ToolError};
use hark_core::events;

/// Events a slow SSE client may have waiting before it is dropped.
pub const SSE_BUFFER: usize = 256;
/// A comment every so often keeps proxies from closing a quiet stream and
/// finds clients that left.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Largest `POST /speak` body.
const SPEAK_BODY: usize = 256 * 1024;

/// The SSE clients, for `get_status`.
#[derive(Debug, Default)]
pub struct SseStats {
    pub clients: AtomicUsize,
    /// Clients dropped for not reading.
    pub dropped: AtomicU64,
}

/// `get_status`'s view of the event stream's HTTP subscribers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EventClients {
    /// `GET /events` clients connected now.
    pub clients: usize,
    /// Clients dropped since the start for not reading fast enough.
    pub dropped: u64,
}

impl SseStats {
    pub fn view(&self) -> EventClients {
        EventClients {
            clients: self.clients.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

struct Counted(Arc<crate::ServerState>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.sse.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `GET /events`.
pub fn events(shared: &Arc<Shared>) -> Response<Body> {
    let state = Arc::clone(&shared.state);
    let shutdown = shared.shutdown.clone();
    let (tx, rx) = mpsc::channel::<Bytes>(SSE_BUFFER);
    let mut events = state.bus.subscribe();
    state.sse.clients.fetch_add(1, Ordering::Relaxed);
    let counted = Counted(Arc::clone(&state));
    tokio::spawn(async move {
        let _counted = counted;
        let hello = Bytes::from_static(b": hark events\n\n");
        if tx.try_send(hello).is_err() {
            return;
        }
        let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
        keep_alive.tick().await;
        loop {
            let frame = tokio::select! {
                () = shutdown.cancelled() => return,
                () = tx.closed() => return,
                _ = keep_alive.tick() => Bytes::from_static(b": keep-alive\n\n"),
                event = events::next(&mut events, "GET /events") => match event {
                    Some(event) => sse_frame(&event),
                    None => return,
                },
            };
            match tx.try_send(frame) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    let dropped = state.sse.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                    tracing::warn!(
                        dropped,
                        buffer = SSE_BUFFER,
                        "an event-stream client stopped reading; dropped"
                    );
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), rx))
    });
    let mut response = Response::new(StreamBody::new(stream).boxed());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// One event in SSE's framing.
fn sse_frame(event: &events::Stamped) -> Bytes {
    let json = serde_json::to_string(event).unwrap_or_else(|_| "{}".into());
    let name = serde_json::to_value(&event.event)
        .ok()
        .and_then(|v| v.get("event").and_then(|n| n.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "event".into());
    Bytes::from(format!(
        "id: {}\nevent: {name}\ndata: {json}\n\n",
        event.seq
    ))
}

/// `POST /speak`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Speak {
    text: String,
    voice: Option<String>,
    rate: Option<f64>,
    priority: Option<Priority>,
    /// As `speak_text`'s: say it later, or ring as a timer.
    delay_seconds: Option<f64>,
    at: Option<String>,
    ring: Option<bool>,
    ring_seconds: Option<f64>,
}

fn json(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn refused(status: StatusCode, error: ToolError) -> Response<Body> {
    json(status, &serde_json::json!({ "error": error.to_json() }))
}

/// `POST /speak`. The speaker is the token's name, else `X-Hark-Client`,
/// else `script`.
pub async fn speak(
    shared: Arc<Shared>,
    grant: &crate::auth::Grant,
    request: Request<Incoming>,
) -> Response<Body> {
    let agent = grant.paired_name().map(str::to_owned).unwrap_or_else(|| {
        request
            .headers()
            .get(CLIENT_HEADER)
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| "script".to_owned(), str::to_owned)
    });
    let body = match Limited::new(request.into_body(), SPEAK_BODY)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                ToolError::invalid(format!(
                    "the body is over {SPEAK_BODY} bytes; POST /speak takes {{\"text\": …}}"
                )),
            );
        }
    };
    let mut parser = serde_json::Deserializer::from_slice(&body);
    let speak: Speak = match serde_path_to_error::deserialize(&mut parser) {
        Ok(speak) => speak,
        Err(e) => {
            let at = e.path().to_string();
            let why = e.into_inner();
            let message = if at == "." {
                format!(
                    "POST /speak takes a JSON object {{\"text\": …, \"voice\"?: …, \"rate\"?: …, \"priority\"?: \"urgent\"|\"normal\"|\"low\", \"delay_seconds\"?: …, \"at\"?: …, \"ring\"?: …, \"ring_seconds\"?: …}}: {why}"
                )
            } else {
                format!("POST /speak: `{at}`: {why}")
            };
            return refused(StatusCode::BAD_REQUEST, ToolError::invalid(message));
        }
    };
    let later = match hark_core::room::check_later(
        speak.delay_seconds,
        speak.at.as_deref(),
        speak.ring,
        speak.ring_seconds,
        std::time::SystemTime::now(),
    ) {
        Ok(later) => later,
        Err(e) => return refused(StatusCode::BAD_REQUEST, e.into()),
    };
    let call = SpeakCall {
        agent: Some(agent.clone()),
        text: speak.text,
        voice: speak.voice,
        rate: speak.rate,
        priority: speak.priority.unwrap_or_default(),
        wait: false,
        later,
    };
    match shared.room.speak.speak(call, &mut Quiet).await {
        Ok(spoken) => {
            tracing::info!(%agent, "POST /speak queued");
            json(
                StatusCode::ACCEPTED,
                &serde_json::to_value(spoken).unwrap_or_default(),
            )
        }
        Err(e) => {
            let status = match e.kind {
                Kind::InvalidArgument | Kind::VoiceNotFound => StatusCode::BAD_REQUEST,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            refused(status, e.into())
        }
    }
}
