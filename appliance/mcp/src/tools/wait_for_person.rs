//! `wait_for_person` — waits until the person in the room speaks to this
//! agent unprompted (they press the button and talk) and returns what they
//! said. Messages that arrived while the agent was not waiting come first,
//! oldest first. The microphone is not opened by this call: the person
//! opens it with the button.
//!
//! The message is taken from the voice inbox ([`hark_store::inbox`]) when it is
//! returned; a call that is cancelled or whose client leaves before that
//! leaves it in the inbox for the next call.

use hark_core::room::Failure;
use std::{sync::Arc, time::Duration};

use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolResult as _, success};
use crate::server::HarkServer;
use hark_store::inbox::{Inbox, Wait};

use crate::message::PersonMessage;

/// Accepted range for `wait_for_person`'s `timeout_seconds`.
pub const WAIT_RANGE: (f64, f64) = (0.0, 3600.0);
/// The wait when the call gives none.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// The text when the person said nothing to this agent in time.
pub const NO_MESSAGE: &str = "(no message)";

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WaitForPerson {
    /// Seconds to wait for the person (0–3600; default 60). 0 only takes a
    /// message that is already waiting.
    pub timeout_seconds: Option<f64>,
}

/// `wait_for_person`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PersonSaid {
    /// Whether the person said something to this agent.
    pub received: bool,
    /// What they said, or `(no message)`.
    pub text: String,
    /// The message, when one came.
    pub message: Option<PersonMessage>,
    /// Messages still waiting for this agent.
    pub waiting: usize,
}

/// The inbox, or why there is none.
pub fn inbox_of(server: &HarkServer) -> Result<Arc<Inbox>, Failure> {
    server.state.inbox.as_ref().cloned().ok_or_else(|| {
        Failure::new(
            hark_core::room::Kind::Inbox,
            "the voice inbox is off on this appliance (inbox.enabled = false): the person cannot leave messages",
        )
    })
}

#[tool_router(router = wait_for_person_router, vis = "pub(crate)")]
impl HarkServer {
    /// Wait until the person in the room speaks to you unprompted (they
    /// press the button and talk) and return what they said. Messages left
    /// while you were not waiting come first, oldest first. Call it in a
    /// loop to be reachable by the person.
    #[tool(
        name = "wait_for_person",
        output_schema = super::output_schema::<PersonSaid>(),
        annotations(
            title = "Wait for the person to speak",
            read_only_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn wait_for_person(
        &self,
        Parameters(args): Parameters<WaitForPerson>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.wait_for_message(args, &context).await {
            Ok(said) => success(said.text.clone(), said),
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn wait_for_message(
        &self,
        args: WaitForPerson,
        context: &RequestContext<RoleServer>,
    ) -> Result<PersonSaid, Failure> {
        let timeout =
            hark_core::room::check_timeout(args.timeout_seconds, DEFAULT_WAIT, WAIT_RANGE)?;
        let inbox = inbox_of(self)?;
        let agent = self.agent_name(context);
        let found = inbox
            .wait(&agent)
            .await
            .map_err(|e| Failure::new(hark_core::room::Kind::Inbox, e.to_string()))?;
        let message = match found {
            Wait::Taken(message) => Some(message),
            Wait::Ticket(_) if timeout.is_zero() => None,
            Wait::Ticket(_) if self.state.bus.snapshot().muted => {
                return Err(Failure::new(
                    hark_core::room::Kind::MicrophoneMuted,
                    "the microphone is muted: the person cannot speak to you until they turn the \
                     mute switch off (get_status shows it); no message is waiting",
                ));
            }
            Wait::Ticket(mut ticket) => {
                tracing::debug!(%agent, "waiting for the person");
                let _doing = self.doing(context, "waiting for the person");
                super::progress(context, 0.0, None, "waiting for the person").await;
                tokio::select! {
                    message = ticket.message() => message,
                    () = tokio::time::sleep(timeout) => None,
                    _ = super::call_ended(self, context) => {
                        return Err(Failure::new(hark_core::room::Kind::Cancelled, "waiting for the person was cancelled"));
                    }
                }
            }
        };
        let waiting = inbox.waiting_for(Some(&agent)).await.map_or(0, |w| w.len());
        Ok(match message {
            Some(message) => {
                tracing::info!(id = message.id, %agent, "the person's message taken");
                PersonSaid {
                    received: true,
                    text: message.new.text.clone(),
                    message: Some(PersonMessage::from(&message)),
                    waiting,
                }
            }
            None => PersonSaid {
                received: false,
                text: NO_MESSAGE.into(),
                message: None,
                waiting,
            },
        })
    }
}
