//! The MCP server handler. One [`HarkServer`] is made per connection (per
//! session for Streamable HTTP); all of them share the appliance state and
//! the tool router, which is built once.

use std::{borrow::Cow, sync::Arc};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, tool::ToolCallContext},
    model::{
        CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, ErrorCode,
        Implementation, InitializeRequestParams, InitializeResult, ProtocolVersion,
        ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    tool_handler,
};
use tracing::Instrument;

use crate::state::{ApplianceState, ClientIdentity};

/// What agents are told about the appliance in `initialize` / `server/discover`.
const INSTRUCTIONS: &str = "Hark is a voice appliance in a room: a microphone array, a speaker, \
a push-to-talk button and status lights. Call get_status to see whether the microphone is open \
or the speaker is playing, and which subsystems are ready.";

/// The requests Hark serves. (`initialize` and `ping` only to clients before
/// 2026-07-28; rmcp answers them as removed methods to later ones.) Any other
/// method is answered with -32601, whatever its params.
pub const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "subscriptions/listen",
];

/// The simulated board's controls (`hark button`, `hark mute`), served on
/// the Unix socket only.
pub const BOARD_METHOD: &str = "hark/board";

#[derive(Clone)]
pub struct HarkServer {
    pub(crate) state: Arc<ApplianceState>,
    /// Set for stream transports (TCP, Unix, WebSocket), where one handler
    /// serves one connection. Streamable HTTP sessions span connections, so
    /// their identity travels with each request instead (see [`identity`]).
    pub(crate) identity: Option<Arc<ClientIdentity>>,
    pub(crate) tools: Arc<ToolRouter<HarkServer>>,
}

impl HarkServer {
    /// The tool router, built once at start-up and shared by every connection.
    pub fn router() -> Arc<ToolRouter<HarkServer>> {
        Arc::new(
            Self::get_status_router()
                + Self::set_volume_router()
                + Self::transcribe_voice_router()
                + Self::transcribe_audio_router()
                + Self::detect_language_router()
                + Self::transcribe_batch_router()
                + Self::speak_text_router()
                + Self::synthesize_speech_router()
                + Self::voices_router(),
        )
    }

    pub fn new(
        state: Arc<ApplianceState>,
        tools: Arc<ToolRouter<HarkServer>>,
        identity: Option<Arc<ClientIdentity>>,
    ) -> Self {
        Self {
            state,
            identity,
            tools,
        }
    }

    /// The identity of the client making this request.
    pub fn identity(&self, context: &RequestContext<RoleServer>) -> Option<Arc<ClientIdentity>> {
        self.identity
            .clone()
            .or_else(|| identity_from_extensions(&context.extensions))
    }
}

impl HarkServer {
    /// The span a tool call runs in: which agent asked for what, over which
    /// transport, from where.
    fn tool_span(&self, tool: &str, context: &RequestContext<RoleServer>) -> tracing::Span {
        let identity = self.identity(context);
        // Sessions that began with `initialize` know the client's name from
        // it; 2026-07-28 clients send it with every request.
        let client = context
            .peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .or_else(|| context.meta.client_info().map(|info| info.name))
            .unwrap_or_default();
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

fn identity_from_extensions(extensions: &rmcp::model::Extensions) -> Option<Arc<ClientIdentity>> {
    extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Arc<ClientIdentity>>())
        .cloned()
}

#[tool_handler(router = self.tools)]
impl ServerHandler for HarkServer {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("hark", env!("CARGO_PKG_VERSION"))
                    .with_title("Hark voice appliance"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if let Some(identity) = self.identity(&context) {
            identity.set_client_name(&request.client_info.name);
        }
        tracing::info!(
            client = %request.client_info.name,
            client_version = %request.client_info.version,
            protocol = %request.protocol_version,
            "client initialized"
        );
        Ok(ServerHandler::get_info(self))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        // `hark button` and `hark mute`: the simulated board's hands. Only
        // on the Unix socket, whose file mode limits it to this machine's
        // administrators: no agent may press the button or unmute the
        // microphone, so it is no tool and not served on the network.
        let local = self
            .identity(&context)
            .is_some_and(|i| i.transport == crate::state::TransportKind::Unix);
        if request.method == BOARD_METHOD && local {
            return crate::board::control(&self.state, request.params)
                .await
                .map(CustomResult);
        }
        // rmcp's default answer carries only the method name as its message.
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: `{}`", request.method),
            None,
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // rmcp answers an unknown tool with a bare "tool not found"; name the
        // tool and what is served so an agent (or its human) can fix the call.
        if !self.tools.has_route(&request.name) {
            let known: Vec<_> = self.tools.list_all().into_iter().map(|t| t.name).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`; this appliance serves: {}",
                    request.name,
                    known.join(", ")
                ),
                None,
            ));
        }
        let span = self.tool_span(&request.name, &context);
        async move {
            let result = self
                .tools
                .call(ToolCallContext::new(self, request, context))
                .await;
            // Answers at debug: agents may poll get_status many times a
            // minute. Failures are worth a line at info.
            match &result {
                Ok(_) => tracing::debug!("tool call answered"),
                Err(error) => tracing::info!(code = error.code.0, message = %error.message, "tool call failed"),
            }
            result
        }
        .instrument(span)
        .await
    }
}
