//! The resources Hark serves: `hark://inbox`, the person's messages that
//! wait for an agent (those the reading agent may take), so an agent can be
//! woken instead of polling.
//!
//! Two ways to be told when it changes, one per protocol era:
//! - `resources/subscribe` (clients that `initialize`): the subscription
//!   is kept here with the connection's peer, and every inbox event on the
//!   event stream sends it `notifications/resources/updated`;
//! - `subscriptions/listen` (2026-07-28): the listen request itself stays
//!   open and carries the same notifications until it is cancelled.
//!
//! Either way the agent counts as reachable for the inbox while it is
//! subscribed, so Hark does not tell the person that nobody is listening.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CacheScope, ListResourcesResult, ReadResourceResult, Resource, ResourceContents,
        ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification,
    },
    service::RequestContext,
};
use tokio_util::sync::CancellationToken;

use crate::{hearers::tell, message::PersonMessage, state::ServerState};
use hark_core::events::{self, Event};
use hark_store::inbox::Inbox;

/// The voice inbox's URI.
pub const INBOX_URI: &str = "hark://inbox";

/// `resources/list`.
pub fn list() -> ListResourcesResult {
    ListResourcesResult::with_all_items(vec![
        Resource::new(INBOX_URI, "inbox")
            .with_title("The person's messages")
            .with_description(
                "Messages the person in the room spoke to the agents (they press the button and \
                 talk) that no agent has taken yet: those you may take, oldest first. Take one with \
                 wait_for_person. Subscribe to be told when it changes.",
            )
            .with_mime_type("application/json"),
    ])
    .with_ttl_ms(0)
}

/// Whether `uri` names a resource Hark serves.
pub fn check(uri: &str) -> Result<(), ErrorData> {
    if uri == INBOX_URI {
        Ok(())
    } else {
        Err(ErrorData::new(
            rmcp::model::ErrorCode::RESOURCE_NOT_FOUND,
            format!("no resource `{uri}`; this appliance serves {INBOX_URI}"),
            Some(serde_json::json!({ "uri": uri })),
        ))
    }
}

/// `resources/read` of the inbox, as `agent` sees it.
pub async fn read(
    inbox: Option<&Arc<Inbox>>,
    agent: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let messages = match inbox {
        Some(inbox) => inbox
            .waiting_for(Some(agent))
            .await
            .map_err(|e| ErrorData::internal_error(format!("cannot read the inbox: {e}"), None))?,
        None => Vec::new(),
    };
    let messages: Vec<PersonMessage> = messages.iter().map(PersonMessage::from).collect();
    let body = serde_json::json!({
        "enabled": inbox.is_some(),
        "waiting": messages.len(),
        "messages": messages,
    });
    Ok(
        ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
            uri: INBOX_URI.into(),
            mime_type: Some("application/json".into()),
            text: body.to_string(),
            meta: None,
        }])
        // Changes whenever the person speaks or an agent takes a message.
        .with_ttl_ms(0)
        .with_cache_scope(CacheScope::Private),
    )
}

/// Which connection (or HTTP session) a request came on.
pub fn connection_of(
    identity: Option<&crate::connections::ClientIdentity>,
    context: &RequestContext<RoleServer>,
) -> String {
    let session = context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok());
    match (session, identity) {
        (Some(session), _) => format!("session {session}"),
        (None, Some(identity)) => format!("connection {}", identity.id),
        (None, None) => "unknown".into(),
    }
}

/// Whether an event changes what `hark://inbox` shows.
pub fn changes_inbox(event: &Event) -> bool {
    matches!(
        event,
        Event::InboxArrived { .. }
            | Event::InboxTaken { .. }
            | Event::InboxDropped { .. }
            | Event::InboxRestored { .. }
    )
}

/// Tells every `resources/subscribe` subscriber when the inbox changes,
/// until `token` is cancelled. A subscriber that does not read is given a
/// second, then skipped: it never holds up the others.
pub async fn notify_subscribers(state: Arc<ServerState>, token: CancellationToken) {
    let mut events = state.bus.subscribe();
    loop {
        let event = tokio::select! {
            () = token.cancelled() => return,
            event = events::next(&mut events, "inbox subscriptions") => event,
        };
        let Some(event) = event else { return };
        if !changes_inbox(&event.event) {
            continue;
        }
        for (_, peer) in state.subscribers.live() {
            let updated = ServerNotification::ResourceUpdatedNotification(
                ResourceUpdatedNotification::new(ResourceUpdatedNotificationParam::new(INBOX_URI)),
            );
            tell(peer, updated, "an inbox update to a subscriber");
        }
    }
}
