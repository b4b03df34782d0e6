//! Hark's MCP side: how agents reach the room. It depends on the core and
//! the stores only; the tools reach the room through
//! [`hark_core::room`]'s capabilities.
//!
//! - [`server`]: the rmcp server handler every transport serves, and the
//!   per-request tracing span around it.
//! - [`connections`]: who is connected, how, and what their calls are
//!   doing.
//! - [`tools`]: one file per tool, with its schema, handler and tests.
//! - [`resources`]: `hark://inbox` and its subscriptions; [`channels`]: the
//!   person's messages pushed into Claude Code sessions.
//! - [`tasks`]: long waits as tasks (the MCP Tasks extension).
//! - [`framing`]: turning raw frames (a line, a WebSocket message) into
//!   JSON-RPC messages for rmcp, answering malformed ones with the right
//!   JSON-RPC error.
//! - [`transport`]: the listeners — raw TCP, Unix socket, Streamable HTTP and
//!   WebSocket — and the Host/Origin guard.
//! - [`auth`]: pairing, tokens and trust; [`tls`]: the appliance's own
//!   certificate authority for HTTPS; [`discovery`]: mDNS / DNS-SD.
//! - [`config`]: the `[mcp]`, `[auth]` and `[discovery]` sections.

pub mod auth;
pub mod budget;
pub mod channels;
pub mod config;
pub mod connections;
pub mod discovery;
pub mod framing;
pub mod resources;
pub mod server;
pub mod tasks;
pub mod tls;
pub mod tools;
pub mod transport;
pub mod transports;

pub use server::HarkServer;

use std::sync::Arc;

use hark_core::{agents::Seen, events::Bus};
use hark_store::{history::History, inbox::Inbox};

pub use connections::{ClientIdentity, Connections, TransportKind};

/// What the MCP side serves from besides the room: the event stream, the
/// stores, who is connected, its own bookkeeping (subscriptions, the event
/// stream's clients), tokens and HTTPS.
pub struct ServerState {
    pub bus: Bus,
    pub connections: Arc<Connections>,
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
    pub subscribers: resources::Hearers,
    /// `GET /events` clients.
    pub sse: transport::scripts::SseStats,
    /// Speeches asked for through `POST /speak`, for `GET /speak/{id}`.
    pub speeches: Arc<transport::scripts::Speeches>,
    /// Cancelled when the daemon begins to stop, so a call it ends says
    /// why (see `call_tool`).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Calls that went on as tasks, for every transport.
    pub tasks: Arc<tasks::Tasks>,
    /// Sessions that asked for the person's messages as pushes.
    pub channels: resources::Hearers,
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
