//! From one frame of bytes (a line on TCP or the Unix socket, a WebSocket text
//! message) to a JSON-RPC message for rmcp, or to the error reply the sender
//! should get.
//!
//! rmcp's own line transport drops unparsable input silently and answers
//! shape errors with a bare "Invalid request"; Hark's clients — VoxCtrl's
//! among them — expect `-32700` for malformed JSON and a message that says
//! what is wrong, and the connection must keep working afterwards. So the
//! checks JSON-RPC 2.0 asks of a server happen here, before rmcp sees the
//! message; everything that passes goes to rmcp unchanged (apart from the
//! `initialize` leniency below), which does the dispatch.

use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorData, InitializeRequestParams,
    RequestId, ServerJsonRpcMessage,
};
use serde_json::{Map, Value};

/// The requests Hark serves. (`initialize` and `ping` only to clients before
/// 2026-07-28; rmcp answers them as removed methods to later ones.) Any other
/// method is answered with -32601, whatever its params.
pub const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "tasks/get",
    "tasks/cancel",
    "tasks/update",
];

/// The outcome of decoding one frame.
#[derive(Debug)]
pub enum Decoded {
    /// A well-formed message for rmcp.
    Message(Box<ClientJsonRpcMessage>),
    /// Malformed: send this error back and carry on.
    Reply(Box<ServerJsonRpcMessage>),
    /// Nothing to do (a blank line, a notification we cannot parse).
    Ignore,
}

/// The protocol version assumed for an `initialize` that names none
/// (VoxCtrl's own example sends `"params": {}`), the version VoxCtrl speaks.
pub const LENIENT_PROTOCOL_VERSION: &str = "2024-11-05";

pub fn decode(frame: &[u8]) -> Decoded {
    let frame = frame.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(frame);
    if frame.iter().all(u8::is_ascii_whitespace) {
        return Decoded::Ignore;
    }
    let text = match std::str::from_utf8(frame) {
        Ok(text) => text,
        Err(e) => {
            return reply(
                ErrorData::parse_error(
                    format!(
                        "Parse error: message is not valid UTF-8 (invalid byte at offset {})",
                        e.valid_up_to()
                    ),
                    None,
                ),
                None,
            );
        }
    };
    // Fast path: a well-formed message for a method Hark serves parses
    // straight into rmcp's type. Everything else takes the slow path below,
    // which works out what exactly is wrong.
    if let Ok(message) = serde_json::from_str::<ClientJsonRpcMessage>(text)
        && !matches!(&message, ClientJsonRpcMessage::Request(r) if is_unfit_standard_request(&r.request))
    {
        return Decoded::Message(Box::new(message));
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            return reply(
                ErrorData::parse_error(format!("Parse error: {e}"), None),
                None,
            );
        }
    };
    let mut object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return reply(
                ErrorData::invalid_request(
                    "Invalid Request: JSON-RPC batches are not supported; send one message per line",
                    None,
                ),
                None,
            );
        }
        other => {
            return reply(
                ErrorData::invalid_request(
                    format!(
                        "Invalid Request: a JSON-RPC message is an object, got {}",
                        kind(&other)
                    ),
                    None,
                ),
                None,
            );
        }
    };
    let id = object.get("id").and_then(request_id);
    match object.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        Some(other) => {
            return reply(
                ErrorData::invalid_request(
                    format!("Invalid Request: \"jsonrpc\" must be \"2.0\", got {other}"),
                    None,
                ),
                id,
            );
        }
        None => {
            return reply(
                ErrorData::invalid_request("Invalid Request: missing \"jsonrpc\": \"2.0\"", None),
                id,
            );
        }
    }
    if object.contains_key("id") && id.is_none() {
        return reply(
            ErrorData::invalid_request(
                "Invalid Request: \"id\" must be a string or an integer",
                None,
            ),
            None,
        );
    }
    let method = match object.get("method") {
        Some(Value::String(method)) => Some(method.clone()),
        Some(other) => {
            return reply(
                ErrorData::invalid_request(
                    format!(
                        "Invalid Request: \"method\" must be a string, got {}",
                        kind(other)
                    ),
                    None,
                ),
                id,
            );
        }
        None if object.contains_key("result") || object.contains_key("error") => None,
        None => {
            return reply(
                ErrorData::invalid_request("Invalid Request: missing \"method\"", None),
                id,
            );
        }
    };
    if method.as_deref() == Some("initialize") {
        complete_initialize(&mut object);
    }
    let params = object.get("params").cloned();
    match serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(object)) {
        // rmcp falls back to a custom request when a standard method's params
        // do not fit; for a method Hark serves that would be answered "method
        // not found", which is wrong and unhelpful: say what is wrong with the
        // params instead. Methods Hark does not serve stay "method not found".
        Ok(ClientJsonRpcMessage::Request(request))
            if is_unfit_standard_request(&request.request) =>
        {
            let method = method.unwrap_or_default();
            reply(
                ErrorData::invalid_params(
                    format!(
                        "Invalid params for `{method}`: {}",
                        params_problem(&method, params)
                    ),
                    None,
                ),
                Some(request.id),
            )
        }
        Ok(message) => Decoded::Message(Box::new(message)),
        // A request naming a known method whose params do not fit it.
        Err(e) if id.is_some() => reply(
            ErrorData::invalid_params(
                format!(
                    "Invalid params for `{}`: {e}",
                    method.as_deref().unwrap_or("response")
                ),
                None,
            ),
            id,
        ),
        // Notifications get no reply, by JSON-RPC's rules.
        Err(e) => {
            tracing::debug!(method = method.as_deref().unwrap_or(""), error = %e, "ignoring malformed notification");
            Decoded::Ignore
        }
    }
}

/// A request for a method Hark serves whose params did not fit, which rmcp
/// turned into a custom request.
fn is_unfit_standard_request(request: &ClientRequest) -> bool {
    matches!(request, ClientRequest::CustomRequest(c) if METHODS.contains(&c.method.as_str()))
}

/// The serde error for the params of the methods agents call most, so the
/// message names the field; a general sentence for the rest.
fn params_problem(method: &str, params: Option<Value>) -> String {
    let params = params.unwrap_or(Value::Null);
    fn problem<T: serde::de::DeserializeOwned>(params: Value) -> Option<String> {
        serde_path_to_error::deserialize::<_, T>(params)
            .err()
            .map(|e| match e.path().to_string().as_str() {
                "." => e.inner().to_string(),
                path => format!("`{path}`: {}", e.inner()),
            })
    }
    let detail = match method {
        "tools/call" => problem::<CallToolRequestParams>(params),
        "initialize" => problem::<InitializeRequestParams>(params),
        _ => None,
    };
    detail.unwrap_or_else(|| "they do not match the method's schema".into())
}

/// VoxCtrl's clients send `initialize` with empty params. Fill in what the
/// MCP schema requires so they can connect; a complete request is untouched.
fn complete_initialize(object: &mut Map<String, Value>) {
    let params = object
        .entry("params")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(params) = params {
        params
            .entry("protocolVersion")
            .or_insert_with(|| Value::String(LENIENT_PROTOCOL_VERSION.into()));
        params
            .entry("capabilities")
            .or_insert_with(|| Value::Object(Map::new()));
        params
            .entry("clientInfo")
            .or_insert_with(|| serde_json::json!({"name": "unnamed client", "version": "0"}));
    }
}

fn request_id(value: &Value) -> Option<RequestId> {
    serde_json::from_value(value.clone()).ok()
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn reply(error: ErrorData, id: Option<RequestId>) -> Decoded {
    Decoded::Reply(Box::new(ServerJsonRpcMessage::error(error, id)))
}

/// The reply to a frame larger than `limit` bytes.
pub fn too_large(limit: usize) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::invalid_request(
            format!(
                "Invalid Request: message exceeds the {limit}-byte limit (mcp.max_message_bytes); it was discarded"
            ),
            None,
        ),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(decoded: Decoded) -> (i32, String, Option<RequestId>) {
        match decoded {
            Decoded::Reply(msg) => {
                let (error, id) = (*msg).into_error().expect("an error reply");
                (error.code.0, error.message.to_string(), id)
            }
            other => panic!("expected an error reply, got {other:?}"),
        }
    }

    #[test]
    fn malformed_json_is_parse_error() {
        let (code, message, id) = error_of(decode(b"{\"jsonrpc\":\"2.0\",\"id\":1,"));
        assert_eq!(code, -32700);
        assert!(message.starts_with("Parse error"), "{message}");
        assert!(id.is_none());
    }

    #[test]
    fn invalid_utf8_is_parse_error() {
        let (code, message, _) = error_of(decode(b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}"));
        assert_eq!(code, -32700);
        assert!(message.contains("UTF-8"), "{message}");
    }

    #[test]
    fn batch_is_refused() {
        let (code, message, _) = error_of(decode(
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
        ));
        assert_eq!(code, -32600);
        assert!(message.contains("batches"), "{message}");
    }

    #[test]
    fn missing_jsonrpc_keeps_id() {
        let (code, message, id) = error_of(decode(br#"{"id":7,"method":"ping"}"#));
        assert_eq!(code, -32600);
        assert!(message.contains("jsonrpc"), "{message}");
        assert_eq!(id, Some(RequestId::Number(7)));
        let (code, _, _) = error_of(decode(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#));
        assert_eq!(code, -32600);
    }

    #[test]
    fn non_object_and_bad_fields() {
        assert_eq!(error_of(decode(b"42")).0, -32600);
        assert_eq!(
            error_of(decode(br#"{"jsonrpc":"2.0","id":1,"method":5}"#)).0,
            -32600
        );
        assert_eq!(error_of(decode(br#"{"jsonrpc":"2.0","id":1}"#)).0, -32600);
        assert_eq!(
            error_of(decode(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#)).0,
            -32600
        );
    }

    #[test]
    fn wrong_param_types_are_invalid_params() {
        let (code, message, id) = error_of(decode(
            br#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":5}}"#,
        ));
        assert_eq!(code, -32602);
        assert!(message.contains("tools/call"), "{message}");
        assert!(message.contains("`name`"), "{message}");
        assert_eq!(id, Some(RequestId::String("x".into())));
    }

    #[test]
    fn voxctrl_initialize_with_empty_params_is_accepted() {
        match decode(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#) {
            Decoded::Message(msg) => {
                let (request, _) = (*msg).into_request().expect("a request");
                let rmcp::model::ClientRequest::InitializeRequest(init) = request else {
                    panic!("not initialize");
                };
                assert_eq!(
                    init.params.protocol_version.as_str(),
                    LENIENT_PROTOCOL_VERSION
                );
            }
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn unserved_method_with_bad_params_is_not_invalid_params() {
        // Hark serves no logging: that is "method not found" (rmcp answers),
        // not a complaint about the params.
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{}}"#),
            Decoded::Message(_)
        ));
    }

    #[test]
    fn unknown_method_reaches_rmcp() {
        // rmcp answers it with -32601; it must not be rejected here.
        assert!(matches!(
            decode(br#"{"jsonrpc":"2.0","id":3,"method":"server/frobnicate","params":{}}"#),
            Decoded::Message(_)
        ));
    }

    #[test]
    fn blank_lines_and_bom_are_tolerated() {
        assert!(matches!(decode(b"  \r"), Decoded::Ignore));
        assert!(matches!(
            decode(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"),
            Decoded::Message(_)
        ));
    }
}
