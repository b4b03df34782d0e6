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

use hark_core::room::Failure;
use std::{
    convert::Infallible,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde::Deserialize;
use tokio::sync::mpsc;

use super::{body::Body, shared::Shared};
use hark_core::room::{Kind, Priority, Quiet, SpeakCall};

use crate::{server::CLIENT_HEADER, speeches::FOLLOWED, tools::ToolResult as _};
use hark_core::events;

/// Events a slow SSE client may have waiting before it is dropped.
pub const SSE_BUFFER: usize = 256;
/// A comment every so often keeps proxies from closing a quiet stream and
/// finds clients that left.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Largest `POST /speak` body.
const SPEAK_BODY: usize = 256 * 1024;

struct Counted(Arc<crate::state::ServerState>);

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
    /// Voicebox's name for the voice.
    profile: Option<String>,
    /// Voicebox's fields with no counterpart here: taken, and said to be
    /// ignored in the answer rather than refused.
    engine: Option<serde_json::Value>,
    personality: Option<serde_json::Value>,
    /// Voicebox's language: the language to speak in (a voice of it).
    language: Option<String>,
    model_size: Option<serde_json::Value>,
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

fn refused(status: StatusCode, error: Failure) -> Response<Body> {
    json(status, &serde_json::json!({ "error": error.to_json() }))
}

/// Voicebox's header naming its client, read as `X-Hark-Client` is.
const VOICEBOX_CLIENT_HEADER: &str = "x-voicebox-client-id";

/// The name of a script's request: the token's, else `X-Hark-Client`
/// (or Voicebox's `X-Voicebox-Client-Id`), else `script`.
fn script_name(grant: &crate::auth::Grant, headers: &http::HeaderMap) -> String {
    grant.paired_name().map(str::to_owned).unwrap_or_else(|| {
        [CLIENT_HEADER, VOICEBOX_CLIENT_HEADER]
            .iter()
            .find_map(|name| headers.get(*name))
            .and_then(|v| crate::server::check_client_name(v).ok())
            .unwrap_or_else(|| "script".to_owned())
    })
}

/// `POST /speak`.
pub async fn speak(
    shared: Arc<Shared>,
    grant: &crate::auth::Grant,
    request: Request<Incoming>,
) -> Response<Body> {
    let agent = script_name(grant, request.headers());
    let body = match Limited::new(request.into_body(), SPEAK_BODY)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                Failure::invalid(format!(
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
            return refused(StatusCode::BAD_REQUEST, Failure::invalid(message));
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
        Err(e) => return refused(StatusCode::BAD_REQUEST, e),
    };
    if speak.voice.is_some() && speak.profile.is_some() {
        return refused(
            StatusCode::BAD_REQUEST,
            Failure::invalid("give voice or profile (Voicebox's name for it), not both".to_owned()),
        );
    }
    let ignored: Vec<&str> = [
        ("engine", speak.engine.is_some()),
        ("personality", speak.personality.is_some()),
        ("model_size", speak.model_size.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, given)| given.then_some(name))
    .collect();
    let call = SpeakCall {
        agent: Some(agent.clone()),
        text: speak.text,
        voice: speak.voice.or(speak.profile),
        language: speak.language,
        rate: speak.rate,
        priority: speak.priority.unwrap_or_default(),
        wait: false,
        later,
    };
    // Watching from before it is queued, so its start cannot be missed.
    let watching = shared.state.bus.subscribe();
    match shared.room.speak.speak(call, &mut Quiet).await {
        Ok(spoken) => {
            tracing::info!(%agent, speech = ?spoken.speech, "POST /speak queued");
            let mut answer = serde_json::to_value(&spoken).unwrap_or_default();
            if let Some(id) = spoken.speech {
                shared
                    .state
                    .speeches
                    .follow(id, &agent, &spoken.text, watching);
                answer["poll"] = format!("/speak/{id}").into();
            }
            if !ignored.is_empty() {
                answer["ignored"] = serde_json::json!(ignored);
                answer["ignored_why"] = "Voicebox's engine, personality and model size have no counterpart on Hark: the voice (voice or profile, or a language) says how it sounds".into();
            }
            json(StatusCode::ACCEPTED, &answer)
        }
        Err(e) => {
            let status = match e.kind {
                Kind::InvalidArgument | Kind::VoiceNotFound => StatusCode::BAD_REQUEST,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            refused(status, e)
        }
    }
}

/// `GET /speak/{id}`: how a speech asked for through `POST /speak` is going.
pub fn speech(shared: &Arc<Shared>, id: &str) -> Response<Body> {
    let Ok(id) = id.parse::<u64>() else {
        return refused(
            StatusCode::BAD_REQUEST,
            Failure::invalid(format!(
                "`{id}` is not a speech number (POST /speak answers one as `speech`)"
            )),
        );
    };
    match shared.state.speeches.get(id) {
        Some(followed) => json(
            StatusCode::OK,
            &serde_json::to_value(followed).unwrap_or_default(),
        ),
        None => refused(
            StatusCode::NOT_FOUND,
            Failure::invalid(format!(
                "no speech {id} is known: GET /speak/ID tells of the last {FOLLOWED} asked for through POST /speak"
            )),
        ),
    }
}

/// `GET /health`: whether the appliance serves, for monitoring. No token is
/// needed, so it says nothing private: up, the version, and whether every
/// part the person relies on works (the parts that do not, by name).
pub fn health(shared: &Arc<Shared>) -> Response<Body> {
    let now = shared.state.bus.snapshot();
    let failing: Vec<String> = now
        .failed
        .iter()
        .map(|part| {
            serde_json::to_value(part)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("{part:?}"))
        })
        .collect();
    let ready = failing.is_empty();
    json(
        StatusCode::OK,
        &serde_json::json!({
            "status": if ready { "ok" } else { "degraded" },
            "version": env!("CARGO_PKG_VERSION"),
            "ready": ready,
            "failing": failing,
        }),
    )
}

/// `POST /transcribe`: an audio file in the body (raw, or the `file` part
/// of a `multipart/form-data` form, as Voicebox's and EdgeSpeak's HTTP
/// APIs take it), transcribed as `transcribe_audio` does; `language` and
/// `word_timestamps` in the query (or the form).
pub async fn transcribe(shared: Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let limit = shared.config.max_message_bytes;
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, limit).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                Failure::invalid(format!(
                    "the body is over {limit} bytes (mcp.max_message_bytes)"
                )),
            );
        }
    };
    let mut options: Vec<(String, String)> = match query(parts.uri.query().unwrap_or("")) {
        Ok(options) => options,
        Err(why) => return refused(StatusCode::BAD_REQUEST, Failure::invalid(why)),
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let audio: Bytes = if content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        let Some(boundary) = boundary(content_type) else {
            return refused(
                StatusCode::BAD_REQUEST,
                Failure::invalid("multipart/form-data needs its boundary".to_owned()),
            );
        };
        let form = match form(&body, &boundary) {
            Ok(form) => form,
            Err(why) => return refused(StatusCode::BAD_REQUEST, Failure::invalid(why)),
        };
        let mut file = None;
        for part in form {
            match part.name.as_str() {
                "file" | "audio" => file = Some(body.slice_ref(part.data)),
                "language" | "word_timestamps" | "model" | "model_size" => {
                    match std::str::from_utf8(part.data) {
                        Ok(value) => options.push((part.name.clone(), value.trim().to_owned())),
                        Err(_) => {
                            return refused(
                                StatusCode::BAD_REQUEST,
                                Failure::invalid(format!("the form's `{}` is not text", part.name)),
                            );
                        }
                    }
                }
                _ if part.filename && file.is_none() => file = Some(body.slice_ref(part.data)),
                _ => {}
            }
        }
        match file {
            Some(file) => file,
            None => {
                return refused(
                    StatusCode::BAD_REQUEST,
                    Failure::invalid(
                        "the form has no audio: send it as the part named `file`".to_owned(),
                    ),
                );
            }
        }
    } else {
        body
    };
    let mut language = None;
    let mut word_timestamps = false;
    let (mut model, mut model_size) = (None, None);
    for (key, value) in options {
        match key.as_str() {
            "language" => language = Some(value),
            "model" => model = Some(value),
            "model_size" => model_size = Some(value),
            "word_timestamps" => match value.as_str() {
                "true" | "1" => word_timestamps = true,
                "false" | "0" => word_timestamps = false,
                other => {
                    return refused(
                        StatusCode::BAD_REQUEST,
                        Failure::invalid(format!(
                            "word_timestamps is true or false, got `{other}`"
                        )),
                    );
                }
            },
            other => {
                return refused(
                    StatusCode::BAD_REQUEST,
                    Failure::invalid(format!(
                        "POST /transcribe takes language, word_timestamps, model and model_size, not `{other}`"
                    )),
                );
            }
        }
    }
    use base64::Engine as _;
    let call = hark_core::room::TranscribeCall {
        audio: hark_core::room::AudioInput::Base64(
            base64::engine::general_purpose::STANDARD.encode(&audio),
        ),
        language,
        word_timestamps,
        format: hark_core::room::TranscriptFormat::Json,
        output_file: None,
        model,
        model_size,
    };
    // A model the call named and the store lacks is not the appliance
    // being unavailable.
    let chose = call.model.is_some() || call.model_size.is_some();
    match shared.room.files.transcribe(call).await {
        Ok(transcription) => json(
            StatusCode::OK,
            &serde_json::to_value(transcription.result).unwrap_or_default(),
        ),
        Err(e) => {
            let status = match e.kind {
                Kind::InvalidArgument | Kind::AudioFormat | Kind::Language => {
                    StatusCode::BAD_REQUEST
                }
                Kind::FileTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                Kind::ModelNotLoaded if chose => StatusCode::NOT_FOUND,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            refused(status, e)
        }
    }
}

/// `key=value` pairs of a query string (values are plain: language codes,
/// booleans; `%` escapes are refused rather than guessed at).
fn query(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key.contains('%') || value.contains('%') {
                return Err(format!(
                    "the query's `{pair}` is escaped; send plain values"
                ));
            }
            Ok((key.to_owned(), value.replace('+', " ")))
        })
        .collect()
}

/// The boundary of a `multipart/form-data` content type.
fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.trim().split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_owned())
            .filter(|b| !b.is_empty() && b.len() <= 70)
    })
}

/// One part of a form.
struct FormPart<'a> {
    name: String,
    /// Whether it is a file (its disposition names a file name).
    filename: bool,
    data: &'a [u8],
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The parts of a `multipart/form-data` body (RFC 7578), or what is wrong
/// with it.
fn form<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<FormPart<'a>>, String> {
    let delimiter = format!("--{boundary}");
    let broken = |why: &str| format!("the multipart form is broken: {why}");
    let mut at = find(body, delimiter.as_bytes())
        .ok_or_else(|| broken("its boundary is not in the body"))?
        + delimiter.len();
    let mut parts = Vec::new();
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        let rest = rest
            .strip_prefix(b"\r\n")
            .ok_or_else(|| broken("a boundary line does not end"))?;
        let head_end =
            find(rest, b"\r\n\r\n").ok_or_else(|| broken("a part's headers do not end"))?;
        let head = std::str::from_utf8(&rest[..head_end])
            .map_err(|_| broken("a part's headers are not text"))?;
        let content = &rest[head_end + 4..];
        let end = find(content, format!("\r\n{delimiter}").as_bytes())
            .ok_or_else(|| broken("a part does not end with the boundary"))?;
        let disposition = head
            .split("\r\n")
            .find(|line| {
                line.to_ascii_lowercase()
                    .starts_with("content-disposition:")
            })
            .unwrap_or("");
        let param = |key: &str| {
            disposition.split(';').find_map(|p| {
                let (k, v) = p.trim().split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case(key)
                    .then(|| v.trim().trim_matches('"').to_owned())
            })
        };
        parts.push(FormPart {
            name: param("name").unwrap_or_default(),
            filename: param("filename").is_some(),
            data: &content[..end],
        });
        at = body.len() - content.len() + end + 2 + delimiter.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_gives_its_parts() {
        let body = b"preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\nde\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n--X\0data\r\n--XyZ--\r\n";
        let parts = form(body, "XyZ").expect("parsed");
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), parts[0].filename, parts[0].data),
            ("language", false, &b"de"[..])
        );
        assert_eq!((parts[1].name.as_str(), parts[1].filename), ("file", true));
        assert_eq!(
            parts[1].data, b"RIFF\r\n--X\0data",
            "a near-boundary inside the data is data"
        );
        assert_eq!(
            boundary("multipart/form-data; boundary=\"XyZ\"").as_deref(),
            Some("XyZ")
        );
    }

    #[test]
    fn a_broken_form_is_named_not_guessed() {
        for (body, why) in [
            (&b"no boundary here"[..], "its boundary is not in the body"),
            (
                b"--B\r\nContent-Disposition: form-data; name=\"f\"",
                "headers do not end",
            ),
            (
                b"--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\ndata",
                "does not end with the boundary",
            ),
            (b"--Bjunk", "a boundary line does not end"),
        ] {
            let err = form(body, "B").err().expect("refused");
            assert!(err.contains(why), "{err}");
        }
        assert_eq!(boundary("multipart/form-data"), None);
        assert!(query("language=de&word_timestamps=true").is_ok());
        assert!(query("language=d%65").is_err());
    }
}
