//! The listeners agents connect to. All of them serve the same
//! [`HarkServer`](crate::HarkServer) tools.
//!
//! Binding is separate from serving ([`Listeners::bind`] then
//! [`Listeners::serve`]) so the daemon can report `READY=1` only once every
//! socket is bound, and so tests can bind port 0 and read the real port back.

pub mod bearer;
pub mod framed;
pub mod guard;
pub mod http;
pub mod page;
pub mod plain;
pub mod scripts;
pub mod stream;
pub mod wheel;
pub mod ws;

use std::{path::PathBuf, sync::Arc};

use rmcp::{
    handler::server::router::tool::ToolRouter,
    model::{ErrorCode, ErrorData, ServerJsonRpcMessage},
};
use tokio::net::{TcpListener, UnixListener};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    HarkServer,
    config::McpConfig,
    {ServerState, connections::TransportKind},
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

/// The bound, not yet serving, listeners.
pub struct Listeners {
    tcp: Option<TcpListener>,
    http: Option<TcpListener>,
    https: Option<TcpListener>,
    unix: Option<(UnixListener, PathBuf)>,
}

impl Listeners {
    pub async fn bind(config: &McpConfig) -> Result<Self, TransportError> {
        let tcp = match config.tcp.enabled {
            true => Some(bind_tcp(TransportKind::Tcp, config.tcp.listen).await?),
            false => None,
        };
        let http = match config.http.enabled {
            true => Some(bind_tcp(TransportKind::Http, config.http.listen).await?),
            false => None,
        };
        let https = match config.https.enabled {
            true => Some(bind_tcp(TransportKind::Https, config.https.listen).await?),
            false => None,
        };
        let unix = match config.unix.enabled {
            true => Some((
                stream::bind_unix(&config.unix.path, config.unix.mode)?,
                config.unix.path.clone(),
            )),
            false => None,
        };
        Ok(Self {
            tcp,
            http,
            https,
            unix,
        })
    }

    /// `(transport, address)` of every bound listener, ports resolved.
    pub fn addresses(&self) -> Vec<(TransportKind, String)> {
        let mut out = Vec::new();
        if let Some(addr) = self.tcp.as_ref().and_then(|l| l.local_addr().ok()) {
            out.push((TransportKind::Tcp, addr.to_string()));
        }
        if let Some(addr) = self.http.as_ref().and_then(|l| l.local_addr().ok()) {
            out.push((TransportKind::Http, addr.to_string()));
        }
        if let Some(addr) = self.https.as_ref().and_then(|l| l.local_addr().ok()) {
            out.push((TransportKind::Https, addr.to_string()));
        }
        if let Some((_, path)) = &self.unix {
            out.push((TransportKind::Unix, path.display().to_string()));
        }
        out
    }

    /// Drops the HTTPS listener (its certificate could not be made).
    pub fn without_https(&mut self) {
        self.https = None;
    }

    /// Serves every listener until `shared.shutdown` is cancelled. Returns
    /// the accept loops' handles; connection tasks are in `shared.tasks`.
    pub fn serve(self, shared: &Arc<Shared>) -> Vec<(TransportKind, tokio::task::JoinHandle<()>)> {
        for (transport, address) in self.addresses() {
            shared.state.connections.add_listener(transport, address);
        }
        let mut loops = Vec::new();
        if let Some(listener) = self.tcp {
            let shared = Arc::clone(shared);
            loops.push((
                TransportKind::Tcp,
                tokio::spawn(stream::run_tcp(shared, listener)),
            ));
        }
        if let Some(listener) = self.http {
            let shared = Arc::clone(shared);
            loops.push((
                TransportKind::Http,
                tokio::spawn(http::run(shared, listener)),
            ));
        }
        if let Some(listener) = self.https
            && let Some(tls) = shared.state.tls.as_ref()
        {
            let (shared, acceptor) = (Arc::clone(shared), tls.acceptor.clone());
            loops.push((
                TransportKind::Https,
                tokio::spawn(http::run_tls(shared, listener, acceptor)),
            ));
        }
        if let Some((listener, path)) = self.unix {
            let shared = Arc::clone(shared);
            loops.push((
                TransportKind::Unix,
                tokio::spawn(async move {
                    stream::run_unix(shared, listener).await;
                    // Leave no socket file behind for the next start to trip on.
                    let _ = std::fs::remove_file(&path);
                }),
            ));
        }
        loops
    }
}

async fn bind_tcp(
    transport: TransportKind,
    addr: std::net::SocketAddr,
) -> Result<TcpListener, TransportError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| TransportError::Bind {
            transport,
            addr,
            source,
        })
}
