//! The transports agents reach Hark by: named here, below everything that
//! tells them apart (trust, budgets, connections, the listeners).

use schemars::JsonSchema;
use serde::Serialize;

/// The transports agents reach Hark by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// Newline-delimited JSON-RPC over TCP.
    Tcp,
    /// Streamable HTTP at `/mcp`.
    Http,
    /// The same over TLS (`[mcp.https]`).
    Https,
    /// WebSocket upgrade at `/mcp`.
    Websocket,
    /// Newline-delimited JSON-RPC over a Unix socket.
    Unix,
}

impl TransportKind {
    /// How many there are: the per-transport client counts' length.
    pub const COUNT: usize = 5;

    /// Streamable HTTP, plain or over TLS: each request stands alone, and
    /// a session outlives its connections.
    pub fn is_http(self) -> bool {
        matches!(self, TransportKind::Http | TransportKind::Https)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Tcp => "tcp",
            TransportKind::Http => "http",
            TransportKind::Https => "https",
            TransportKind::Websocket => "websocket",
            TransportKind::Unix => "unix",
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
