//! Who is connected: every transport the appliance listens on, every
//! connection with who is on the other end (its address, its name, what it
//! may do) and what its calls are doing now. `get_status` reports it; the
//! transports register each connection as they accept it.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex, OnceLock, PoisonError, Weak,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Instant,
};

use schemars::JsonSchema;
use serde::Serialize;

pub use crate::transports::TransportKind;

/// Who is on the other end of one connection. Created when the connection is
/// accepted; the client's self-reported name is filled in by `initialize`.
/// Authentication (a later issue) attaches its verified identity here too.
#[derive(Debug)]
pub struct ClientIdentity {
    pub id: u64,
    pub transport: TransportKind,
    /// Remote address, or the Unix peer's credentials.
    pub peer: String,
    /// The remote IP address (not on the Unix socket).
    pub address: Option<std::net::IpAddr>,
    /// What the client may do: set by its transport when it connects, and
    /// again when it presents a token (stream transports). HTTP requests
    /// carry their own (see `HarkServer::grant`).
    grant: Mutex<Arc<crate::auth::Grant>>,
    /// When the connection was accepted.
    pub since: std::time::SystemTime,
    /// The name the connection declared before any request (the
    /// WebSocket upgrade's `X-Hark-Client`): it wins over `clientInfo`.
    pub declared: OnceLock<String>,
    client_name: Mutex<Option<String>>,
    /// What the client's calls are doing now ("listening", "waiting for
    /// the microphone", …), for `get_status`; empty when idle.
    doing: Mutex<Vec<(u64, &'static str)>>,
    next_doing: AtomicU64,
    /// Cancelled when the client's side of the connection ends (stream
    /// transports); long-running tools stop on it.
    pub gone: tokio_util::sync::CancellationToken,
    /// Its connection slot (`crate::budget`), freed when the
    /// connection ends.
    pub slot: crate::budget::Held,
    /// Cancelled to close the connection: an unpaired one making way.
    pub close: tokio_util::sync::CancellationToken,
}

impl ClientIdentity {
    pub fn grant(&self) -> Arc<crate::auth::Grant> {
        Arc::clone(&self.grant.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Sets what the client may do; a paired client's name is its
    /// token's.
    pub fn set_grant(&self, grant: crate::auth::Grant) {
        if let Some(name) = grant.paired_name() {
            self.set_client_name(name);
            // A paired agent leaves the unpaired connections' budget.
            self.slot.promote();
        }
        *self.grant.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(grant);
    }

    pub fn client_name(&self) -> Option<String> {
        self.client_name
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_client_name(&self, name: &str) {
        let mut current = self
            .client_name
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if current.as_deref() != Some(name) {
            *current = Some(name.to_owned());
        }
    }

    /// Marks one of the client's calls as doing `what` until the guard
    /// drops (several calls may run at once on one connection).
    pub fn doing(self: &Arc<Self>, what: &'static str) -> DoingGuard {
        let id = self.next_doing.fetch_add(1, Ordering::Relaxed);
        self.doing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, what));
        DoingGuard {
            identity: Arc::clone(self),
            id,
        }
    }

    /// What the client's calls are doing now, oldest first; empty: idle.
    pub fn activities(&self) -> Vec<&'static str> {
        self.doing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, what)| *what)
            .collect()
    }
}

/// See [`ClientIdentity::doing`].
pub struct DoingGuard {
    identity: Arc<ClientIdentity>,
    id: u64,
}

impl DoingGuard {
    /// The call moved on to `what`.
    pub fn now(&self, what: &'static str) {
        let mut doing = self
            .identity
            .doing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = doing.iter_mut().find(|(id, _)| *id == self.id) {
            entry.1 = what;
        }
    }
}

impl Drop for DoingGuard {
    fn drop(&mut self) {
        self.identity
            .doing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

/// A registered connection. Dropping it removes the client from the counts.
pub struct ConnectionGuard {
    identity: Arc<ClientIdentity>,
    registry: Arc<Connections>,
}

impl ConnectionGuard {
    pub fn identity(&self) -> &Arc<ClientIdentity> {
        &self.identity
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.identity.slot.release();
        self.registry.clients[self.identity.transport as usize].fetch_sub(1, Ordering::Relaxed);
        self.registry
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.identity.id);
    }
}

/// One listening transport.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Listener {
    pub transport: TransportKind,
    /// `ip:port` or the socket path.
    pub address: String,
}

impl Listener {
    /// The address it listens on (none for the Unix socket).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        self.address.parse().ok()
    }
}

/// The connections and listeners, from the daemon's start.
pub struct Connections {
    /// When the daemon started (before its models loaded), for uptime.
    started: Instant,
    next_client: AtomicU64,
    clients: [AtomicUsize; TransportKind::COUNT],
    /// Every open connection, for `get_status`'s `clients`.
    connections: Mutex<BTreeMap<u64, Weak<ClientIdentity>>>,
    listeners: Mutex<Vec<Listener>>,
}

impl Connections {
    /// Nobody connected yet, in a daemon that started at `started`.
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            next_client: AtomicU64::new(1),
            clients: Default::default(),
            connections: Mutex::new(BTreeMap::new()),
            listeners: Mutex::new(Vec::new()),
        }
    }

    pub fn uptime_seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    pub fn add_listener(&self, transport: TransportKind, address: String) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Listener { transport, address });
    }

    pub fn listeners(&self) -> Vec<Listener> {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Registers a new client connection and returns the guard that keeps it
    /// counted.
    pub fn connect(self: &Arc<Self>, transport: TransportKind, peer: String) -> ConnectionGuard {
        self.connect_with(transport, peer, tokio_util::sync::CancellationToken::new())
    }

    /// [`Self::connect`], with the token that closes the connection.
    pub fn connect_with(
        self: &Arc<Self>,
        transport: TransportKind,
        peer: String,
        close: tokio_util::sync::CancellationToken,
    ) -> ConnectionGuard {
        self.clients[transport as usize].fetch_add(1, Ordering::Relaxed);
        let identity = Arc::new(ClientIdentity {
            id: self.next_client.fetch_add(1, Ordering::Relaxed),
            transport,
            address: peer
                .parse::<std::net::SocketAddr>()
                .ok()
                .map(|a| a.ip().to_canonical()),
            peer,
            grant: Mutex::new(Arc::new(crate::auth::Grant::unpaired())),
            since: std::time::SystemTime::now(),
            declared: OnceLock::new(),
            client_name: Mutex::new(None),
            doing: Mutex::new(Vec::new()),
            next_doing: AtomicU64::new(1),
            gone: tokio_util::sync::CancellationToken::new(),
            slot: Default::default(),
            close,
        });
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(identity.id, Arc::downgrade(&identity));
        ConnectionGuard {
            identity,
            registry: Arc::clone(self),
        }
    }

    /// Every open connection, oldest first.
    pub fn connections(&self) -> Vec<Arc<ClientIdentity>> {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    pub fn client_count(&self, transport: TransportKind) -> usize {
        self.clients[transport as usize].load(Ordering::Relaxed)
    }
}

/// Formats a peer address the same way for every TCP-based transport.
pub fn peer_of(addr: SocketAddr) -> String {
    addr.to_string()
}

/// The SSE clients, for `get_status`.
#[derive(Debug, Default)]
pub struct SseStats {
    pub clients: AtomicUsize,
    /// Clients dropped for not reading.
    pub dropped: AtomicU64,
}

/// `get_status`'s view of the event stream's HTTP subscribers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EventClients {
    /// `GET /events` clients connected now.
    pub clients: usize,
    /// Clients dropped since the start for not reading fast enough.
    pub dropped: u64,
}

impl SseStats {
    pub fn view(&self) -> EventClients {
        EventClients {
            clients: self.clients.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_transport_has_a_client_count() {
        let last = TransportKind::Unix;
        assert_eq!(last as usize + 1, TransportKind::COUNT);
        for t in [
            TransportKind::Tcp,
            TransportKind::Http,
            TransportKind::Https,
            TransportKind::Websocket,
            TransportKind::Unix,
        ] {
            assert!((t as usize) < TransportKind::COUNT, "{t}");
        }
    }

    #[test]
    fn connection_guard_counts_per_transport() {
        let state = Arc::new(Connections::new(Instant::now()));
        let a = state.connect(TransportKind::Tcp, "1.2.3.4:5".into());
        let b = state.connect(TransportKind::Tcp, "1.2.3.4:6".into());
        let c = state.connect(TransportKind::Websocket, "x".into());
        assert_eq!(state.client_count(TransportKind::Tcp), 2);
        assert_eq!(state.client_count(TransportKind::Websocket), 1);
        assert_eq!(state.client_count(TransportKind::Unix), 0);
        assert_ne!(a.identity().id, b.identity().id);
        drop(a);
        assert_eq!(state.client_count(TransportKind::Tcp), 1);
        drop((b, c));
        assert_eq!(state.client_count(TransportKind::Tcp), 0);
        assert_eq!(state.client_count(TransportKind::Websocket), 0);
    }
}
