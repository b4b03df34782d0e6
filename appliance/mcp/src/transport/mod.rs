//! The listeners agents connect to. All of them serve the same
//! [`HarkServer`](crate::server::HarkServer) tools.
//!
//! Binding is separate from serving ([`Listeners::bind`] then
//! [`Listeners::serve`]) so the daemon can report `READY=1` only once every
//! socket is bound, and so tests can bind port 0 and read the real port back.

pub mod bearer;
pub mod body;
pub mod framed;
pub mod guard;
pub mod http;
pub mod page;
pub mod plain;
pub mod scripts;
pub mod shared;
pub mod stream;
pub mod wheel;
pub mod ws;

pub use shared::{Shared, TransportError};

use std::{path::PathBuf, sync::Arc};

use tokio::net::{TcpListener, UnixListener};

use crate::{config::McpConfig, connections::TransportKind};

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
