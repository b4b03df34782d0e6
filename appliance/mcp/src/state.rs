//! What the MCP side serves from besides the room, shared by the server,
//! the tools and the listeners: below all of them.

use std::sync::Arc;

use hark_core::{agents::Seen, events::Bus};
use hark_store::{history::History, inbox::Inbox};

use crate::{auth, connections, hearers, speeches, tasks, tls};

/// What the MCP side serves from besides the room: the event stream, the
/// stores, who is connected, its own bookkeeping (subscriptions, the event
/// stream's clients), tokens and HTTPS.
pub struct ServerState {
    pub bus: Bus,
    pub connections: Arc<connections::Connections>,
    /// Agents' names, for the person to address messages to.
    pub agents_seen: Arc<Seen>,
    /// The voice inbox (none with `inbox.enabled = false`, or when it
    /// could not start).
    pub inbox: Option<Arc<Inbox>>,
    /// What was heard and spoken (likewise).
    pub history: Option<Arc<History>>,
    pub auth: Arc<auth::Auth>,
    /// HTTPS's certificate authority, when `[mcp.https]` serves.
    pub tls: Option<tls::Tls>,
    /// Clients subscribed to `hark://inbox` with `resources/subscribe`.
    pub subscribers: hearers::Hearers,
    /// `GET /events` clients.
    pub sse: connections::SseStats,
    /// Speeches asked for through `POST /speak`, for `GET /speak/{id}`.
    pub speeches: Arc<speeches::Speeches>,
    /// Cancelled when the daemon begins to stop, so a call it ends says
    /// why (see `call_tool`).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Calls that went on as tasks, for every transport.
    pub tasks: Arc<tasks::Tasks>,
    /// Sessions that asked for the person's messages as pushes.
    pub channels: hearers::Hearers,
}

impl ServerState {
    /// The state of a server on `bus` with `auth` in a daemon that started
    /// at `started`, nobody connected yet, without stores or HTTPS (the
    /// daemon fills those in).
    pub fn new(bus: Bus, auth: Arc<auth::Auth>, started: std::time::Instant) -> Self {
        Self {
            bus,
            connections: Arc::new(connections::Connections::new(started)),
            agents_seen: Default::default(),
            inbox: None,
            history: None,
            auth,
            tls: None,
            subscribers: Default::default(),
            sse: Default::default(),
            speeches: Default::default(),
            shutdown: Default::default(),
            tasks: Default::default(),
            channels: Default::default(),
        }
    }

    /// Remembers an agent's name (for addressing messages to it).
    pub fn agent_seen(&self, name: &str) {
        self.agents_seen.note(name);
    }

    pub fn uptime_seconds(&self) -> f64 {
        self.connections.uptime_seconds()
    }

    pub fn listeners(&self) -> Vec<connections::Listener> {
        self.connections.listeners()
    }
}
