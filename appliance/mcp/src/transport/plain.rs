//! Streamable HTTP for the simplest clients: a `curl` that POSTs one
//! JSON-RPC message and reads one JSON answer (EdgeSpeak's recipe), a
//! script that accepts only `application/json`, a client that never keeps
//! a session id.
//!
//! rmcp answers a session's requests as event streams, wants both media
//! types accepted, and refuses a request without a session. Here:
//!
//! - `initialize` is answered with JSON (the session id still in its
//!   header, for the clients that keep one);
//! - a request without a session id goes to a stateless service, which
//!   answers with JSON when nothing comes before the result;
//! - a client that does not accept event streams gets the result of any
//!   stream as JSON (progress and other notifications before it dropped:
//!   it asked for none of them).

use bytes::Bytes;
use http::{HeaderMap, Response, header};
use http_body_util::{BodyExt, Full};

use super::body::Body;

const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// Whether the request's `Accept` names `media` (or `*/*`).
pub fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|item| item.split(';').next().unwrap_or("").trim())
        .any(|essence| essence.eq_ignore_ascii_case(media) || essence == "*/*")
}

/// Makes the request acceptable to rmcp, which wants both media types
/// named: the answer is turned back into JSON ([`to_json`]) for a client
/// that named only JSON.
pub fn accept_both(headers: &mut HeaderMap) {
    headers.insert(
        header::ACCEPT,
        header::HeaderValue::from_static("application/json, text/event-stream"),
    );
}

/// The JSON-RPC answer in an event-stream response, as a JSON response
/// with the same status and headers (the session id among them). Other
/// responses pass through untouched. The stream is read until the answer
/// (a result or an error) arrives; what came before it is dropped.
pub async fn to_json(response: Response<Body>) -> Response<Body> {
    let is_stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(EVENT_STREAM));
    if !is_stream || !response.status().is_success() {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let mut events = Events::default();
    let answer = loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref()
                    && let Some(answer) = events.feed(data)
                {
                    break Some(answer);
                }
            }
            // The stream ended (or failed) without an answer.
            Some(Err(never)) => match never {},
            None => break events.finish(),
        }
    };
    let Some(answer) = answer else {
        // Nothing to answer with: an empty 202, as for a notification.
        parts.status = http::StatusCode::ACCEPTED;
        parts.headers.remove(header::CONTENT_TYPE);
        return Response::from_parts(parts, Full::new(Bytes::new()).boxed());
    };
    parts
        .headers
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(JSON));
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CACHE_CONTROL);
    Response::from_parts(parts, Full::new(Bytes::from(answer)).boxed())
}

/// Server-sent events read as they arrive, looking for the JSON-RPC
/// answer among their `data`.
#[derive(Default)]
struct Events {
    /// Bytes of a line not yet ended.
    line: Vec<u8>,
    /// The current event's data lines, joined.
    data: Vec<u8>,
}

impl Events {
    /// Takes in `bytes`; the answer once an event holding it has ended.
    fn feed(&mut self, bytes: &[u8]) -> Option<Vec<u8>> {
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(answer) = self.line_ended(&line) {
                return Some(answer);
            }
        }
        None
    }

    /// The stream ended: an event not closed by a blank line counts.
    fn finish(&mut self) -> Option<Vec<u8>> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty()
            && let Some(answer) = self.line_ended(&line)
        {
            return Some(answer);
        }
        self.event_ended()
    }

    fn line_ended(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        if line.is_empty() {
            return self.event_ended();
        }
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if !self.data.is_empty() {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
        }
        // `id:`, `retry:`, `event:` and `:` comments say nothing here.
        None
    }

    fn event_ended(&mut self) -> Option<Vec<u8>> {
        let data = std::mem::take(&mut self.data);
        is_answer(&data).then_some(data)
    }
}

/// Whether `data` is a JSON-RPC result or error (not a notification, not a
/// request from the server, not the empty priming event).
fn is_answer(data: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        result: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        error: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Head>(data)
        .is_ok_and(|h| h.method.is_none() && (h.result.is_some() || h.error.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(text: &'static str) -> Response<Body> {
        let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(EVENT_STREAM),
        );
        response
            .headers_mut()
            .insert("mcp-session-id", header::HeaderValue::from_static("s1"));
        response
    }

    async fn body(response: Response<Body>) -> String {
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    #[test]
    fn accept_is_read_as_media_types() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            header::HeaderValue::from_static("application/json;q=0.9, text/event-stream"),
        );
        assert!(accepts(&headers, JSON) && accepts(&headers, EVENT_STREAM));
        headers.insert(header::ACCEPT, header::HeaderValue::from_static(JSON));
        assert!(!accepts(&headers, EVENT_STREAM));
        headers.insert(header::ACCEPT, header::HeaderValue::from_static("*/*"));
        assert!(accepts(&headers, EVENT_STREAM));
        assert!(!accepts(&HeaderMap::new(), JSON));
    }

    #[tokio::test]
    async fn the_answer_in_a_stream_becomes_json_and_what_came_before_is_dropped() {
        let response = to_json(stream(
            "data: \nid: 0\nretry: 3000\n\n\
             : keep-alive\n\n\
             data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
             data: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{\"ok\":true}}\r\n\r\n\
             data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n\n",
        ))
        .await;
        assert_eq!(response.status(), http::StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_TYPE], JSON);
        assert_eq!(
            response.headers()["mcp-session-id"],
            "s1",
            "the session kept"
        );
        assert_eq!(
            body(response).await,
            "{\"jsonrpc\":\"2.0\",\"id\":7,\n\"result\":{\"ok\":true}}"
        );
        // An error is an answer too, even at the stream's unterminated end.
        let response = to_json(stream(
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"x\"}}",
        ))
        .await;
        assert!(body(response).await.contains("-32602"));
        // No answer at all: an empty 202.
        let response = to_json(stream(": nothing\n\n")).await;
        assert_eq!(response.status(), http::StatusCode::ACCEPTED);
        assert!(body(response).await.is_empty());
    }

    #[tokio::test]
    async fn json_and_failures_pass_through() {
        let mut json = Response::new(Full::new(Bytes::from_static(b"{}")).boxed());
        json.headers_mut()
            .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(JSON));
        assert_eq!(body(to_json(json).await).await, "{}");
        let mut refused = stream("data: x\n\n");
        *refused.status_mut() = http::StatusCode::BAD_REQUEST;
        let refused = to_json(refused).await;
        assert_eq!(refused.status(), http::StatusCode::BAD_REQUEST);
    }
}
