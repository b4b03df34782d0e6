//! What every listener shares, below them all: the server's state and
//! budgets as the listeners see them ([`Shared`]), admitting a connection
//! (`accept_next`), TCP keep-alive, and how a listener fails.

use std::{path::PathBuf, sync::Arc};

use rmcp::{
    handler::server::router::tool::ToolRouter,
    model::{ErrorCode, ErrorData, ServerJsonRpcMessage},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::guard;
use crate::{
    config::McpConfig, connections::TransportKind, server::HarkServer, state::ServerState,
};

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("cannot listen for {transport} on {addr}: {source}")]
    Bind {
        transport: TransportKind,
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen on Unix socket {path}: {source}")]
    BindUnix {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What every connection handler needs.
pub struct Shared {
    /// `[mcp]`.
    pub config: McpConfig,
    /// How long shutdown waits for a connection's calls to end
    /// (`service.shutdown_timeout_ms`).
    pub shutdown_timeout: std::time::Duration,
    pub state: Arc<ServerState>,
    /// What the tools may ask of the room.
    pub room: hark_core::room::Capabilities,
    pub tools: Arc<ToolRouter<HarkServer>>,
    pub hosts: guard::HostPolicy,
    /// Cancelled when the daemon shuts down.
    pub shutdown: CancellationToken,
    /// Every connection task, so shutdown can wait for them.
    pub tasks: TaskTracker,
    budget: Arc<crate::budget::Budget>,
}

impl Shared {
    /// `hostname`: the name the appliance answers to besides the
    /// machine's (`service.hostname`; empty: the machine's).
    pub fn new(
        config: McpConfig,
        hostname: &str,
        shutdown_timeout: std::time::Duration,
        state: Arc<ServerState>,
        room: hark_core::room::Capabilities,
        shutdown: CancellationToken,
    ) -> Self {
        let hosts =
            guard::HostPolicy::new(hostname, &config.allowed_hosts, &config.allowed_origins);
        let budget = crate::budget::Budget::new(config.max_connections, config.unpaired.clone());
        Self {
            config,
            shutdown_timeout,
            state,
            room,
            tools: HarkServer::router(),
            hosts,
            shutdown,
            tasks: TaskTracker::new(),
            budget,
        }
    }

    /// Registers a new connection, with its slot and what it may do
    /// before any token.
    pub fn connect(
        &self,
        transport: TransportKind,
        peer: String,
        admitted: Admitted,
    ) -> crate::connections::ConnectionGuard {
        let guard = self
            .state
            .connections
            .connect_with(transport, peer, admitted.close);
        let identity = guard.identity();
        identity.slot.set(admitted.slot);
        identity.set_grant(admitted.base);
        guard
    }

    /// Tokens and trust (the server state's).
    pub fn auth(&self) -> &Arc<crate::auth::Auth> {
        &self.state.auth
    }

    /// A slot for a connection from `address` over `transport` (trusted
    /// clients and paired agents share `mcp.max_connections`, the unpaired
    /// have their own budget), or why not. `paired`: the connection
    /// already presented a good token (a WebSocket upgrade's header).
    pub fn admit(
        &self,
        transport: TransportKind,
        address: Option<std::net::IpAddr>,
        paired: bool,
    ) -> Result<Admitted, crate::budget::Refusal> {
        let base = self.auth().base(transport, address);
        let trusted = paired || matches!(base.principal, crate::auth::Principal::Trusted(_));
        let close = CancellationToken::new();
        let slot = self.budget.admit(trusted, paired, address, &close)?;
        Ok(Admitted { slot, close, base })
    }

    /// How long an unpaired connection may wait with nothing in flight.
    pub fn unpaired_deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.config.unpaired.deadline_secs)
    }
}

/// A connection let in: its slot, the token that closes it (an unpaired
/// one making way), and what it may do before any token.
pub struct Admitted {
    slot: crate::budget::Slot,
    close: CancellationToken,
    base: crate::auth::Grant,
}

impl Admitted {
    pub fn unpaired(&self) -> bool {
        self.slot.unpaired()
    }
}

/// The error a client not let in gets before it is closed.
pub fn busy_error(refusal: &crate::budget::Refusal) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::new(ErrorCode(-32000), refusal.to_string(), None),
        None,
    )
}

/// Waits for the next accepted connection; `None` once the daemon shuts
/// down. Accept errors (EMFILE when out of descriptors, …) are logged and
/// retried after a pause rather than in a busy loop.
pub async fn accept_next<T, F, Fut>(
    shared: &Shared,
    transport: TransportKind,
    mut accept: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = std::io::Result<T>>,
{
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return None,
            accepted = accept() => match accepted {
                Ok(accepted) => return Some(accepted),
                Err(e) => {
                    tracing::warn!(%transport, error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
        }
    }
}

/// Keep-alive probes, so a client that vanished from the LAN (unplugged,
/// asleep) releases its connection slot within minutes, not hours.
pub fn keepalive(stream: &tokio::net::TcpStream) {
    let probes = socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(60))
        .with_interval(std::time::Duration::from_secs(10))
        .with_retries(5);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&probes) {
        tracing::debug!(error = %e, "cannot enable TCP keep-alive");
    }
}
