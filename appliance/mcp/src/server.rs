//! The MCP server: one [`HarkServer`] is made per connection (per session
//! for Streamable HTTP); all of them share the appliance state and the tool
//! router, which is built once. What a request may ask of it (who is
//! calling, under which grant, the agent's name) is here, below the tools
//! that use it; how it answers MCP's requests is [`crate::handler`], above
//! them.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, handler::server::router::tool::ToolRouter, model::ErrorCode,
    service::RequestContext,
};

use hark_core::{methods, room::Refusal};

use crate::{connections::ClientIdentity, state::ServerState};

#[derive(Clone)]
pub struct HarkServer {
    pub(crate) state: Arc<ServerState>,
    /// What the tools may ask of the room.
    pub(crate) room: hark_core::room::Capabilities,
    /// Set for stream transports (TCP, Unix, WebSocket), where one handler
    /// serves one connection. Streamable HTTP sessions span connections, so
    /// their identity travels with each request instead (see [`identity`]).
    pub(crate) identity: Option<Arc<ClientIdentity>>,
    pub(crate) tools: Arc<ToolRouter<HarkServer>>,
}

impl HarkServer {
    pub fn new(
        state: Arc<ServerState>,
        room: hark_core::room::Capabilities,
        tools: Arc<ToolRouter<HarkServer>>,
        identity: Option<Arc<ClientIdentity>>,
    ) -> Self {
        Self {
            state,
            room,
            identity,
            tools,
        }
    }

    /// What the calling agent puts to the person (`converse`, `confirm`,
    /// `choose`): its text and voice, the answer's timeout, whether to wait
    /// for the microphone (default yes).
    pub(crate) fn question(
        &self,
        context: &RequestContext<RoleServer>,
        text: String,
        voice: Option<String>,
        timeout: Option<f64>,
        queue: Option<bool>,
    ) -> hark_core::room::Question {
        hark_core::room::Question {
            agent: self.agent_name(context),
            text,
            voice,
            timeout,
            queue: queue.unwrap_or(true),
        }
    }

    /// Shows the calling client doing `what` in `get_status` until the
    /// guard drops.
    pub(crate) fn doing(
        &self,
        context: &RequestContext<RoleServer>,
        what: &'static str,
    ) -> Option<crate::connections::DoingGuard> {
        self.identity(context).map(|identity| identity.doing(what))
    }

    /// The identity of the client making this request.
    pub fn identity(&self, context: &RequestContext<RoleServer>) -> Option<Arc<ClientIdentity>> {
        self.identity
            .clone()
            .or_else(|| identity_from_extensions(&context.extensions))
    }

    /// What the client making this request may do: an HTTP request's own
    /// grant (from its `Authorization` header), else its connection's.
    pub fn grant(&self, context: &RequestContext<RoleServer>) -> Arc<crate::auth::Grant> {
        if let Some(grant) = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<crate::auth::Grant>>())
        {
            return Arc::clone(grant);
        }
        self.identity(context)
            .map(|i| i.grant())
            .unwrap_or_else(|| Arc::new(crate::auth::Grant::unpaired()))
    }

    /// Checks that the client may use `scope` for `what`; the MCP error
    /// (for resources; tools answer a tool error instead) if not.
    pub fn require(
        &self,
        context: &RequestContext<RoleServer>,
        scope: crate::auth::Scope,
        what: &str,
    ) -> Result<(), ErrorData> {
        self.grant(context)
            .allows(scope, what)
            .map_err(|denied| ErrorData::new(ErrorCode(AUTH_ERROR), denied.to_string(), None))
    }

    /// The name of the agent making this request: a paired agent's token
    /// name, else the `X-Hark-Client`
    /// header (HTTP requests, the WebSocket upgrade) if it sent one, else
    /// its `clientInfo.name` (from `initialize`, or from the request's
    /// `_meta` under 2026-07-28). Remembered, so that the person can
    /// address messages to it, and shown in `get_status`.
    pub fn agent_name(&self, context: &RequestContext<RoleServer>) -> String {
        let identity = self.identity(context);
        // The token's name is who the agent is; what it calls itself is
        // only a label until it pairs.
        if let Some(name) = self.grant(context).paired_name() {
            self.state.agent_seen(name);
            if let Some(identity) = &identity {
                identity.set_client_name(name);
            }
            return name.to_owned();
        }
        let header = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get(CLIENT_HEADER))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let name = identity
            .as_ref()
            .and_then(|i| i.declared.get().cloned())
            .or(header)
            // A 2026-07-28 request names its client itself; rmcp gives
            // stateless requests a placeholder peer.
            .or_else(|| context.meta.client_info().map(|info| info.name))
            .or_else(|| {
                // A request without a session (stateless HTTP) has only
                // rmcp's placeholder peer, named after rmcp itself.
                let stateless = context
                    .extensions
                    .get::<http::request::Parts>()
                    .is_some_and(|parts| !parts.headers.contains_key("mcp-session-id"));
                if stateless {
                    return None;
                }
                context
                    .peer
                    .peer_info()
                    .map(|info| info.client_info.name.clone())
            })
            .or_else(|| identity.as_ref().and_then(|i| i.client_name()))
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| UNNAMED.to_owned());
        if name != UNNAMED {
            self.state.agent_seen(&name);
            if let Some(identity) = &identity {
                identity.set_client_name(&name);
            }
        }
        name
    }
}

/// The JSON-RPC error code of a self-test step that failed; the message
/// says why.
pub const STEP_FAILED: i32 = -32010;

/// What the hands refused, as the JSON-RPC error it is.
pub(crate) fn refused(refusal: Refusal) -> ErrorData {
    match refusal {
        Refusal::Invalid(message) => ErrorData::invalid_params(message, None),
        Refusal::Unavailable(message) => ErrorData::new(ErrorCode::INVALID_REQUEST, message, None),
        Refusal::Failed { message, step } => ErrorData::new(
            ErrorCode(STEP_FAILED),
            message,
            Some(serde_json::json!({ "step": step })),
        ),
        Refusal::Broken(message) => ErrorData::internal_error(message, None),
    }
}

/// The JSON-RPC error code of a request refused for want of a token (or a
/// scope), and of a token refused.
pub const AUTH_ERROR: i32 = -32001;

/// The name of an agent that gave none.
pub const UNNAMED: &str = "unnamed client";

/// The HTTP (and WebSocket upgrade) header an agent may name itself with.
pub const CLIENT_HEADER: &str = "x-hark-client";

/// Checks an `X-Hark-Client` value: 1–64 printable characters.
pub fn check_client_name(value: &http::HeaderValue) -> Result<String, String> {
    let text = value
        .to_str()
        .map_err(|_| "X-Hark-Client must be plain text (visible ASCII)".to_owned())?
        .trim();
    if text.is_empty() || text.chars().count() > 64 || text.chars().any(char::is_control) {
        return Err(format!(
            "X-Hark-Client must be 1–64 printable characters, got {} characters",
            text.chars().count()
        ));
    }
    Ok(text.to_owned())
}

impl HarkServer {
    /// `hark/pair`: asks the person, by voice and the pairing light, to
    /// allow this agent; a short press makes its token.
    pub(crate) async fn pair(
        &self,
        params: Option<serde_json::Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<serde_json::Value, ErrorData> {
        let request: crate::auth::pairing::PairRequest = serde_json::from_value(
            params.unwrap_or_else(|| serde_json::json!({})),
        )
        .map_err(|e| {
            ErrorData::invalid_params(format!("Invalid params for `{}`: {e}", methods::PAIR), None)
        })?;
        let auth = &self.state.auth;
        let identity = self.identity(context);
        let address = identity.as_ref().and_then(|i| i.address);
        // The pairing ends when the request is cancelled or its connection
        // goes, whichever comes first.
        let gone = tokio_util::sync::CancellationToken::new();
        let _stop_watching = gone.clone().drop_guard();
        {
            let (gone, ct) = (gone.clone(), context.ct.clone());
            let left = identity.map(|i| i.gone.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = gone.cancelled() => {}
                    () = ct.cancelled() => gone.cancel(),
                    () = async { match &left { Some(l) => l.cancelled().await, None => std::future::pending().await } } => gone.cancel(),
                }
            });
        }
        match auth
            .pairings
            .pair(
                self.room.pair.as_ref(),
                auth.store(),
                request,
                address,
                gone,
            )
            .await
        {
            Ok(paired) => {
                let mut result = serde_json::to_value(&paired)
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                // Where to use the token: the ports this appliance serves.
                for listener in self.state.listeners() {
                    let port = listener.socket_addr().map(|a| a.port());
                    let key = match listener.transport {
                        crate::connections::TransportKind::Tcp => "tcp_port",
                        crate::connections::TransportKind::Http => "http_port",
                        crate::connections::TransportKind::Https => "https_port",
                        _ => continue,
                    };
                    if let Some(port) = port {
                        result[key] = port.into();
                    }
                }
                // HTTPS: the CA to trust, and its fingerprint to compare.
                if let Some(tls) = self.state.tls.as_ref() {
                    result["ca_pem"] = tls.ca_pem.clone().into();
                    result["ca_sha256"] = tls.fingerprint.clone().into();
                }
                Ok(result)
            }
            Err(crate::auth::pairing::PairError::Invalid(why)) => {
                Err(ErrorData::invalid_params(why, None))
            }
            Err(e) => {
                let retry_after = match &e {
                    crate::auth::pairing::PairError::Pending { retry_after, .. }
                    | crate::auth::pairing::PairError::TooMany { retry_after, .. } => {
                        Some(retry_after.as_secs().max(1))
                    }
                    _ => None,
                };
                Err(ErrorData::new(
                    ErrorCode(AUTH_ERROR),
                    e.to_string(),
                    Some(
                        serde_json::json!({ "reason": e.reason(), "retry_after_secs": retry_after }),
                    ),
                ))
            }
        }
    }

    /// The span a tool call runs in: which agent asked for what, over which
    /// transport, from where.
    pub(crate) fn tool_span(
        &self,
        tool: &str,
        context: &RequestContext<RoleServer>,
    ) -> tracing::Span {
        let identity = self.identity(context);
        let client = self.agent_name(context);
        tracing::info_span!(
            "tool",
            tool = %tool,
            id = %context.id,
            client = %client,
            transport = identity.as_ref().map(|i| i.transport.as_str()).unwrap_or(""),
            peer = identity.as_ref().map(|i| i.peer.as_str()).unwrap_or(""),
        )
    }
}

pub(crate) fn identity_from_extensions(
    extensions: &rmcp::model::Extensions,
) -> Option<Arc<ClientIdentity>> {
    extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Arc<ClientIdentity>>())
        .cloned()
}
