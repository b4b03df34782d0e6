//! How the server answers MCP's requests (rmcp's [`ServerHandler`]):
//! `initialize`, the tools (routed to their files in [`crate::tools`],
//! run as calls or as tasks), the inbox resource and its subscriptions,
//! the channel pushes, and the appliance's own methods. Above the tools it
//! routes to; [`crate::server`] is below them.

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

use hark_core::{
    methods,
    room::{Context, Failure, Refusal},
};

use crate::{
    hearers, resources,
    server::{HarkServer, refused},
    tools::ToolResult as _,
};

/// What agents are told about the appliance in `initialize` / `server/discover`.
const INSTRUCTIONS: &str = "Hark is a voice appliance in a room: a microphone array, a speaker, \
a push-to-talk button and status lights. Call get_status to see whether the microphone is open \
or the speaker is playing, and which subsystems are ready. Talk with the person: speak_text, \
transcribe_voice, or converse (speak, then listen, in one call). Before anything risky or \
irreversible ask with confirm and proceed only on yes; let them pick with choose. The person can \
start a conversation too: they press the button and speak, and wait_for_person returns what they \
said (call it in a loop, or subscribe to the hark://inbox resource to be told). In a session \
started with Hark as a channel, the person's words arrive as a <channel source=\"hark\"> event: \
answer them (speak_text or converse) and take the message with wait_for_person \
(timeout_seconds 0) so Hark knows it reached you.";

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
                + Self::voices_router()
                + Self::models_router()
                + Self::agent_settings_router()
                + Self::wait_for_person_router()
                + Self::converse_router()
                + Self::confirm_router()
                + Self::choose_router()
                + Self::list_captures_router()
                + Self::scheduled_router(),
        )
    }
}

#[tool_handler(router = self.tools)]
impl ServerHandler for HarkServer {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tasks()
            .build();
        // Claude Code's channels: the person's messages pushed (see
        // `channels`).
        capabilities.experimental = Some(std::collections::BTreeMap::from([(
            crate::channels::CAPABILITY.to_owned(),
            rmcp::model::JsonObject::new(),
        )]));
        InitializeResult::new(capabilities)
            .with_server_info(
                Implementation::new("hark", env!("CARGO_PKG_VERSION"))
                    .with_title("Hark voice appliance"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let owner = self.agent_name(&context);
        let task = self.state.tasks.get(&owner, &request.task_id)?;
        Ok(rmcp::model::GetTaskResult::new(task))
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.agent_name(&context);
        self.state.tasks.cancel(&owner, &request.task_id)?;
        tracing::info!(%owner, task = %request.task_id, "task cancelled by its client");
        Ok(())
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.agent_name(&context);
        Ok(self.state.tasks.update(&owner, &request.task_id)?)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if let Some(identity) = self.identity(&context)
            && identity.declared.get().is_none()
            && identity.grant().paired_name().is_none()
        {
            identity.set_client_name(&request.client_info.name);
        }
        tracing::info!(
            client = %request.client_info.name,
            client_version = %request.client_info.version,
            protocol = %request.protocol_version,
            "client initialized"
        );
        let by_header = context
            .extensions
            .get::<http::request::Parts>()
            .is_some_and(|parts| crate::channels::asked_by_header(&parts.headers));
        if by_header || crate::channels::asked_in(&request.capabilities) {
            self.add_channel(&context);
        }
        Ok(ServerHandler::get_info(self))
    }

    async fn list_resources(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        Ok(resources::list())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        // None: the one resource has a fixed URI.
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(Vec::new()).with_ttl_ms(0))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        resources::check(&request.uri)?;
        self.require(&context, crate::auth::Scope::Listen, "the voice inbox")?;
        let agent = self.agent_name(&context);
        resources::read(self.state.inbox.as_ref(), &agent)
            .await
            .map(Into::into)
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        resources::check(&request.uri)?;
        self.require(&context, crate::auth::Scope::Listen, "the voice inbox")?;
        let hearer = self.hearer(&context);
        tracing::info!(agent = %hearer.agent, conn = %hearer.conn, "subscribed to the inbox");
        self.state.subscribers.add(hearer);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        resources::check(&request.uri)?;
        let identity = self.identity(&context);
        self.state
            .subscribers
            .remove(&resources::connection_of(identity.as_deref(), &context));
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let inbox = requested
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.iter().any(|u| u == resources::INBOX_URI));
        Some(if inbox {
            rmcp::model::SubscriptionFilter::builder()
                .resource_subscriptions(vec![resources::INBOX_URI.to_owned()])
                .build()
        } else {
            rmcp::model::SubscriptionFilter::new()
        })
    }

    async fn listen(
        &self,
        subscription: rmcp::service::SubscriptionContext,
    ) -> Result<(), ErrorData> {
        let sink = subscription.sink().clone();
        let watching = sink
            .accepted()
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.iter().any(|u| u == resources::INBOX_URI));
        if !watching {
            subscription.cancelled().await;
            return Ok(());
        }
        let context = subscription.request_context();
        self.require(context, crate::auth::Scope::Listen, "the voice inbox")?;
        let agent = self.agent_name(context);
        // The listen request's own cancellation covers HTTP; a stream
        // connection that ends cancels it sooner.
        let gone = self
            .identity(context)
            .filter(|i| !i.transport.is_http())
            .map(|i| i.gone.clone());
        let mut events = self.state.bus.subscribe();
        let _present = self.state.inbox.as_ref().map(|inbox| {
            let ct = context.ct.clone();
            inbox.present(&agent, Box::new(move || !ct.is_cancelled()))
        });
        tracing::info!(%agent, "listening for inbox changes");
        loop {
            tokio::select! {
                () = subscription.cancelled() => break,
                () = async { match &gone { Some(g) => g.cancelled().await, None => std::future::pending().await } } => break,
                event = hark_core::events::next(&mut events, "inbox listen") => {
                    let Some(event) = event else { break };
                    if resources::changes_inbox(&event.event)
                        && let Err(e) = sink.notify_resource_updated(resources::INBOX_URI).await
                    {
                        tracing::debug!(error = %e, "inbox listener gone");
                        break;
                    }
                }
            }
        }
        Ok(())
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
            .is_some_and(|i| i.transport == crate::connections::TransportKind::Unix);
        if request.method == methods::BOARD && local {
            let control: hark_core::room::BoardControl =
                serde_json::from_value(request.params.unwrap_or_default()).map_err(|e| {
                    ErrorData::invalid_params(
                        format!("hark/board takes {{\"button\": \"press|hold|release\"}} or {{\"mute\": true|false}}: {e}"),
                        None,
                    )
                })?;
            return self
                .room
                .hands
                .control(control)
                .await
                .map(CustomResult)
                .map_err(refused);
        }
        // `hark selftest`: it records the room and takes the button, so it
        // is for the appliance's own administrators, like `hark/board`.
        if request.method == methods::SELFTEST && local {
            let params = request.params.unwrap_or_default();
            let step = params
                .get("step")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("?")
                .to_owned();
            let gone = self.identity(&context).map(|i| i.gone.clone());
            let gone = async {
                match gone {
                    Some(gone) => gone.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            let done = tokio::select! {
                done = self.room.hands.selftest(params) => done,
                () = context.ct.cancelled() => Err(Refusal::Failed { message: "the step was cancelled".into(), step }),
                () = gone => Err(Refusal::Failed { message: "the step was cancelled".into(), step }),
            };
            return done.map(CustomResult).map_err(refused);
        }
        // Tokens: the appliance's own administrators, or an agent given
        // the admin scope.
        if request.method == methods::TOKENS {
            self.require(&context, crate::auth::Scope::Admin, "the tokens")?;
            return crate::auth::manage::manage(&self.state, request.params)
                .await
                .map(CustomResult);
        }
        if request.method == methods::PAIR {
            return self.pair(request.params, &context).await.map(CustomResult);
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
        if let Some(scope) = crate::auth::scopes::for_tool(&request.name)
            && let Err(denied) = self
                .grant(&context)
                .allows(scope, &format!("`{}`", request.name))
        {
            let _span = self.tool_span(&request.name, &context).entered();
            tracing::info!(kind = denied.kind().name(), "tool call refused");
            return Ok(Failure::new(denied.kind(), denied.to_string())
                .with_context(Context::Scope {
                    tool: request.name.to_string(),
                    scope: scope.as_str().to_owned(),
                })
                .into_result()
                .into());
        }
        if let Some(tool) = self.tools.get(&request.name)
            && let Err(wrong) =
                crate::tools::check_argument_types(&tool.input_schema, request.arguments.as_ref())
        {
            return Ok(wrong.into_result().into());
        }
        // Only a request that declares the extension itself (2026-07-28's
        // per-request capabilities): the Inspector declares it at every
        // `initialize` too, expecting a session before 2026-07-28 to pay no
        // heed, and its calls there cannot take a task handle.
        if crate::tasks::TASK_TOOLS.contains(&request.name.as_ref())
            && context
                .meta
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks())
        {
            return self.start_task(request, context);
        }
        let span = self.tool_span(&request.name, &context);
        self.run_call(request, context).instrument(span).await
    }
}

impl HarkServer {
    /// This session gets the person's messages as channel pushes, if it
    /// may listen.
    fn add_channel(&self, context: &RequestContext<RoleServer>) {
        if let Err(denied) = self
            .grant(context)
            .allows(crate::auth::Scope::Listen, "channel pushes")
        {
            tracing::info!(%denied, "channel pushes refused");
            return;
        }
        let hearer = self.hearer(context);
        tracing::info!(
            agent = %hearer.agent,
            conn = %hearer.conn,
            "the person's messages will be pushed to this session"
        );
        self.state.channels.add(hearer);
    }

    /// This session, as one told of the person's messages (a subscription,
    /// a channel).
    fn hearer(&self, context: &RequestContext<RoleServer>) -> hearers::Hearer {
        let identity = self.identity(context);
        let conn = resources::connection_of(identity.as_deref(), context);
        let agent = self.agent_name(context);
        // A stream connection's end ends it; an HTTP session outlives its
        // connections, and its peer says when it ends.
        let gone = identity
            .as_ref()
            .filter(|i| !i.transport.is_http())
            .map(|i| i.gone.clone());
        let present = self.state.inbox.as_ref().map(|inbox| {
            let peer = context.peer.clone();
            let gone = gone.clone();
            inbox.present(
                &agent,
                Box::new(move || {
                    !peer.is_transport_closed() && !gone.as_ref().is_some_and(|g| g.is_cancelled())
                }),
            )
        });
        hearers::Hearer {
            conn,
            agent,
            peer: context.peer.clone(),
            gone,
            present,
        }
    }

    /// A tool call, run to its end (in the request, or in a task), with
    /// Hark's own words for how it ended.
    async fn run_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Revoking the token ends the call (see `tools::call_ended`); say so.
        let grant = self.grant(&context);
        let revoked = grant
            .paired_name()
            .map(|name| (name.to_owned(), self.state.auth.revoked(name)));
        // Progress kept rising, and repeated while the call waits: only
        // for a client that asked for progress (a task's status is its
        // progress), so the many quick calls pay nothing for it.
        let mut context = context;
        let heartbeat = context
            .meta
            .get_progress_token()
            .filter(|_| context.extensions.get::<crate::tasks::Running>().is_none())
            .map(|token| {
                let sent = crate::tools::Sent::new();
                context.extensions.insert(sent.clone());
                crate::tools::keep_alive(context.peer.clone(), token, sent)
            });
        let call = self
            .tools
            .call(ToolCallContext::new(self, request, context));
        let heartbeat = async {
            match heartbeat {
                Some(heartbeat) => heartbeat.await,
                None => std::future::pending().await,
            }
        };
        let mut result = tokio::select! {
            result = call => result,
            never = heartbeat => match never {},
        };
        if let Some((name, revoked)) = revoked
            && revoked.is_cancelled()
            && matches!(&result, Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true))
        {
            result = Ok(Failure::new(
                hark_core::room::Kind::NotPaired,
                format!(
                    "the token `{name}` was revoked during this call, which ended; {}",
                    crate::auth::HOW_TO_PAIR
                ),
            )
            .into_result()
            .into());
        }
        // A call the daemon's stop cancelled says so, rather than
        // looking like one the client cancelled: the agent should call
        // again once the appliance is back, not give up.
        if self.state.shutdown.is_cancelled()
            && let Ok(CallToolResponse::Complete(r)) = &result
            && r.is_error == Some(true)
            && r.structured_content
                .as_ref()
                .and_then(|c| c.pointer("/error/type"))
                == Some(&serde_json::Value::from(
                    hark_core::room::Kind::Cancelled.name(),
                ))
        {
            let said: Vec<&str> = r
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                .collect();
            result = Ok(Failure::new(
                hark_core::room::Kind::ShuttingDown,
                format!(
                    "the appliance is shutting down (a restart, an update or power off), so this call ended ({}); call again once it is back",
                    said.join(" ")
                ),
            )
            .into_result()
            .into());
        }
        // Every failure of Hark's own is typed; one without a type is
        // rmcp's own refusal of the arguments (a missing field, a value
        // not in an enum, an item of the wrong type): typed here, once.
        if let Ok(CallToolResponse::Complete(r)) = &result
            && r.is_error == Some(true)
            && r.structured_content.is_none()
        {
            let text: Vec<&str> = r
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                .collect();
            result = Ok(Failure::invalid(text.join(" ")).into_result().into());
        }
        // Answers at debug: agents may poll get_status many times a
        // minute. Failures are worth a line at info.
        match &result {
            Ok(_) => tracing::debug!("tool call answered"),
            Err(error) => {
                tracing::info!(code = error.code.0, message = %error.message, "tool call failed")
            }
        }
        result
    }

    /// Starts a waiting tool as a task (the client declared the tasks
    /// extension): the answer is the task handle; the call goes on, with
    /// the task's stop as its cancellation and the task's status as its
    /// progress (see [`crate::tasks`]).
    fn start_task(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let owner = self.agent_name(&context);
        let span = self.tool_span(&request.name, &context);
        // What else ends the call (a stream connection's end, the token
        // revoked) is `tools::call_ended`'s, as for any call.
        let server = self.clone();
        let started = self
            .state
            .tasks
            .start(&owner, &self.state.shutdown, |running, stop| {
                let mut context = context;
                context.ct = stop;
                context.extensions.insert(running);
                async move {
                    match server.run_call(request, context).await? {
                        CallToolResponse::Complete(result) => Ok(result),
                        _ => Err(ErrorData::internal_error(
                            "a task's call did not end with a result",
                            None,
                        )),
                    }
                }
                .instrument(span.clone())
            });
        let _span = span.entered();
        match started {
            Ok(task) => {
                tracing::info!(task = %task.task_id, "tool call continues as a task");
                Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
                    task,
                )))
            }
            Err(full @ crate::tasks::TaskError::Full { .. }) => {
                Ok(Failure::new(hark_core::room::Kind::Busy, full.to_string())
                    .into_result()
                    .into())
            }
            Err(other) => Err(other.into()),
        }
    }
}
