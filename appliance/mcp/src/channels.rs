//! Pushes into an agent's session: the person's message arrives in the
//! agent's conversation without a polling call, through Claude Code's
//! channels (`notifications/claude/channel`, Claude Code 2.1.80 and later).
//!
//! Hark declares `experimental["claude/channel"]`. A session asks for the
//! pushes, because only a client that reads them should get a
//! notification it does not know:
//! - with `X-Hark-Channel: claude` on its HTTP requests (Claude Code sends
//!   the headers `claude mcp add --header` gave it), or
//! - with `experimental["claude/channel"]` in its `initialize`
//!   capabilities (`hark connect --channel` adds it for stdio clients).
//!
//! Each of the person's messages this agent may take (addressed to it, or
//! to anyone) is pushed to each of its sessions that asked, as its words
//! (`content`) and what Hark knows of them (`meta`). A message stays in the
//! inbox until a tool takes it: Claude Code drops a channel's
//! notifications unless it was started with `--channels` for this server,
//! which Hark cannot see, so a push is not proof the agent heard. While a
//! session that asked is connected, its agent counts as reachable (Hark
//! does not tell the person that nobody is listening).

use std::{collections::HashMap, sync::Arc};

use rmcp::model::{CustomNotification, ServerNotification};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{hearers::tell, message::PersonMessage, state::ServerState};
use hark_core::events::{self, Event};

/// The notification Claude Code reads as a channel event.
pub const METHOD: &str = "notifications/claude/channel";

/// The capability that says a server pushes (in Hark's `experimental`),
/// and that a client wants the pushes (in its `initialize`).
pub const CAPABILITY: &str = "claude/channel";

/// The HTTP header with which a session asks for the pushes.
pub const HEADER: &str = "x-hark-channel";

/// What the header must say.
pub const HEADER_VALUE: &str = "claude";

/// Whether an `initialize`'s capabilities ask for the pushes.
pub fn asked_in(capabilities: &rmcp::model::ClientCapabilities) -> bool {
    capabilities
        .experimental
        .as_ref()
        .is_some_and(|e| e.contains_key(CAPABILITY))
}

/// Whether an HTTP request's headers ask for the pushes.
pub fn asked_by_header(headers: &http::HeaderMap) -> bool {
    headers
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(HEADER_VALUE))
}

/// The channel notification's params for `message`: its words as the
/// content; the rest as `meta` (Claude Code shows each as an attribute of
/// the `<channel>` tag, so the keys are identifiers and the values
/// strings).
pub fn params(message: &PersonMessage) -> Value {
    let mut meta = serde_json::Map::new();
    meta.insert("message_id".into(), message.id.to_string().into());
    meta.insert("spoken_at".into(), message.at.clone().into());
    meta.insert("seconds".into(), format!("{:.1}", message.duration).into());
    meta.insert("addressed_by".into(), message.addressed_by.clone().into());
    if let Some(to) = &message.addressed_to {
        meta.insert("addressed_to".into(), to.clone().into());
    }
    json!({ "content": message.text, "meta": meta })
}

/// Pushes each arriving message to the sessions whose agent may take it,
/// until `token` is cancelled. A session that does not read is given a
/// second, then skipped: it never holds up the others.
pub async fn push(state: Arc<ServerState>, token: CancellationToken) {
    let mut events = state.bus.subscribe();
    loop {
        let event = tokio::select! {
            () = token.cancelled() => return,
            event = events::next(&mut events, "channel pushes") => event,
        };
        let Some(event) = event else { return };
        let Event::InboxArrived { id, .. } = event.event else {
            continue;
        };
        let Some(inbox) = state.inbox.clone() else {
            continue;
        };
        // What each agent may take, by the inbox's own rules: read once an
        // agent, however many of its sessions asked.
        let mut pushes: HashMap<String, Option<Value>> = HashMap::new();
        for (agent, peer) in state.channels.live() {
            if !pushes.contains_key(&agent) {
                let message = match inbox.waiting_for(Some(&agent)).await {
                    Ok(waiting) => waiting.into_iter().find(|m| m.id == id),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the inbox for a channel push");
                        None
                    }
                };
                let push = message.map(|m| params(&PersonMessage::from(&m)));
                pushes.insert(agent.clone(), push);
            }
            let Some(Some(params)) = pushes.get(&agent) else {
                continue;
            };
            tracing::info!(%agent, id, "pushing the person's message to a channel");
            let notification = ServerNotification::CustomNotification(CustomNotification::new(
                METHOD,
                Some(params.clone()),
            ));
            tell(peer, notification, "a channel push");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(addressed_to: Option<&str>) -> PersonMessage {
        PersonMessage {
            id: 7,
            text: "turn the oven off".into(),
            at: "2026-12-06T01:30:00Z".into(),
            transcribed_at: "2026-12-06T01:30:02.000000Z".into(),
            duration: 1.84,
            addressed_to: addressed_to.map(str::to_owned),
            addressed_by: if addressed_to.is_some() {
                "name"
            } else {
                "anyone"
            }
            .into(),
            confidence: Some(0.9),
        }
    }

    #[test]
    fn a_push_is_the_words_and_string_attributes() {
        let p = params(&message(Some("claude")));
        assert_eq!(p["content"], "turn the oven off");
        let meta = p["meta"].as_object().expect("meta");
        assert_eq!(meta["message_id"], "7");
        assert_eq!(meta["seconds"], "1.8");
        assert_eq!(meta["addressed_to"], "claude");
        assert_eq!(meta["addressed_by"], "name");
        // Claude Code takes identifier keys and string values only.
        for (key, value) in meta {
            assert!(
                key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{key}"
            );
            assert!(value.is_string(), "{key}");
        }
        let anyone = params(&message(None));
        assert!(anyone["meta"].get("addressed_to").is_none());
    }

    #[test]
    fn asking_for_pushes() {
        let mut headers = http::HeaderMap::new();
        assert!(!asked_by_header(&headers));
        headers.insert(HEADER, http::HeaderValue::from_static("Claude"));
        assert!(asked_by_header(&headers));
        headers.insert(HEADER, http::HeaderValue::from_static("yes"));
        assert!(!asked_by_header(&headers));

        let plain: rmcp::model::ClientCapabilities =
            serde_json::from_value(json!({})).expect("capabilities");
        assert!(!asked_in(&plain));
        let asking: rmcp::model::ClientCapabilities =
            serde_json::from_value(json!({ "experimental": { "claude/channel": {} } }))
                .expect("capabilities");
        assert!(asked_in(&asking));
    }
}
