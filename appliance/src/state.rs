//! What the appliance knows about itself at run time: when it started, which
//! transports it serves and who is connected, and the state of each
//! subsystem. `get_status` reports it; transports and engines update it.
//!
//! This is also where the engines plug in: the audio engine sets
//! `recording` and the audio state, speech-to-text and text-to-speech report
//! their model and voice, the board reports which board it is, its lights
//! and the mute switch. Until an engine has started its subsystem reads
//! "not configured".

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex, OnceLock, PoisonError, Weak,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::Instant,
};

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
    /// Its connection slot (`mcp::transport::budget`), freed when the
    /// connection ends.
    pub slot: crate::mcp::transport::budget::Held,
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
    state: Arc<ApplianceState>,
}

impl ConnectionGuard {
    pub fn identity(&self) -> &Arc<ClientIdentity> {
        &self.identity
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.identity.slot.release();
        self.state.clients[self.identity.transport as usize].fetch_sub(1, Ordering::Relaxed);
        self.state
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

pub struct ApplianceState {
    started: Instant,
    next_client: AtomicU64,
    clients: [AtomicUsize; TransportKind::COUNT],
    /// Every open connection, for `get_status`'s `clients`.
    connections: Mutex<BTreeMap<u64, Weak<ClientIdentity>>>,
    listeners: Mutex<Vec<Listener>>,
    /// The event stream. Recordings, speech, the button, the mute switch,
    /// the inbox and the parts' health are published here; the lights and
    /// `get_status` read its snapshot (docs/architecture.md).
    pub bus: crate::events::Bus,
    /// Whose turn it is with the person (the microphone and the speaker);
    /// while an agent has it, a press of the button belongs to its call,
    /// not to the voice inbox.
    pub floor: OnceLock<Arc<crate::floor::Floor>>,
    /// Names of the agents that have connected since the start, for
    /// addressing messages ("Claude, …").
    agents_seen: Mutex<std::collections::BTreeSet<String>>,
    /// Tokens and trust, once started.
    pub auth: OnceLock<Arc<crate::auth::Auth>>,
    /// The voice inbox, once started (not with `inbox.enabled = false`).
    pub inbox: OnceLock<Arc<crate::inbox::Inbox>>,
    /// Clients subscribed to `hark://inbox` with `resources/subscribe`.
    pub subscribers: crate::mcp::resources::Subscribers,
    /// How `confirm` hears yes and no (`[confirm]`).
    pub yes_no: OnceLock<crate::words::YesNo>,
    /// `[agents.NAME]`: names, voices, chimes.
    pub agents: OnceLock<crate::agents::Agents>,
    /// What was heard and spoken (not with `history.enabled = false`).
    pub history: OnceLock<Arc<crate::history::History>>,
    /// `GET /events` clients.
    pub sse: crate::mcp::transport::scripts::SseStats,
    /// True while the mute switch (or `hark mute on`) has the microphone
    /// closed; shared with capture, which then stores silence.
    pub muted: Arc<AtomicBool>,
    /// True while the speaker plays (VoxCtrl's `speaking`); shared with the
    /// playback thread, which raises it, and capture (half duplex).
    pub speaking: Arc<AtomicBool>,
    /// Each subsystem's state, read live from its engine.
    pub subsystems: hark_core::status::Subsystems,
    /// The speaker, once the audio engine runs. Weak: the engine owns it and
    /// stops it at shutdown.
    player: Mutex<Weak<hark_audio::playback::Player>>,
    /// The capture ring and detector settings, once the audio engine runs.
    pub microphone: OnceLock<crate::stt::Microphone>,
    /// Speech to text, once started.
    pub stt: OnceLock<Arc<crate::stt::SpeechToText>>,
    /// Text to speech, once started.
    pub tts: OnceLock<Arc<crate::tts::TextToSpeech>>,
    /// The simulated board's button and mute switch, when that is the
    /// board (`hark button`, `hark mute`).
    pub simulated_board: OnceLock<hark_board::sim::SimControl>,
    /// What a press, a hold and the mute switch mean (`crate::conductor`):
    /// recordings register here for push-to-talk.
    pub conductor: crate::conductor::Conductor,
    /// The conductor's task, until the daemon starts it.
    pub conductor_task: Mutex<Option<crate::conductor::ConductorTask>>,
    /// HTTPS's certificate authority, when `[mcp.https]` serves.
    pub tls: OnceLock<crate::tls::Tls>,
    /// The end-of-turn model, when `audio.vad.end_of_turn = "smart-turn"`
    /// and it loaded.
    pub turn: OnceLock<Arc<Mutex<hark_stt::turn::SmartTurn>>>,
    /// `hark selftest`'s side in the daemon: the board's lights task, the
    /// button while a step waits for it, the last recording.
    pub selftest: crate::selftest::Bench,
}

/// Keeps the microphone shown as open while a recording runs, and tells
/// the event stream when it opens, hears speech and closes.
pub struct RecordingGuard {
    state: Arc<ApplianceState>,
    pub id: u64,
    speech: bool,
    reason: hark_core::room::EndReason,
}

impl RecordingGuard {
    /// The detector heard speech begin (once per recording).
    pub fn speech_detected(&mut self) {
        if !std::mem::replace(&mut self.speech, true) {
            self.state
                .bus
                .publish(crate::events::Event::SpeechDetected { listen: self.id });
        }
    }

    /// Why the recording ended, reported when the guard drops (default
    /// `cancelled`).
    pub fn ended(&mut self, reason: hark_core::room::EndReason) {
        self.reason = reason;
    }
}

impl Drop for RecordingGuard {
    fn drop(&mut self) {
        self.state
            .bus
            .publish(crate::events::Event::ListeningEnded {
                listen: self.id,
                reason: self.reason,
            });
    }
}

impl Default for ApplianceState {
    fn default() -> Self {
        let (conductor, conductor_task) = crate::conductor::Conductor::new();
        Self {
            started: Instant::now(),
            next_client: AtomicU64::new(1),
            clients: Default::default(),
            connections: Mutex::new(BTreeMap::new()),
            listeners: Mutex::new(Vec::new()),
            bus: crate::events::Bus::default(),
            floor: OnceLock::new(),
            agents_seen: Mutex::new(Default::default()),
            auth: OnceLock::new(),
            inbox: OnceLock::new(),
            subscribers: Default::default(),
            yes_no: OnceLock::new(),
            agents: OnceLock::new(),
            history: OnceLock::new(),
            sse: Default::default(),
            muted: Arc::new(AtomicBool::new(false)),
            speaking: Arc::new(AtomicBool::new(false)),
            subsystems: Default::default(),
            player: Mutex::new(Weak::new()),
            microphone: OnceLock::new(),
            stt: OnceLock::new(),
            tts: OnceLock::new(),
            simulated_board: OnceLock::new(),
            conductor,
            conductor_task: Mutex::new(Some(conductor_task)),
            tls: OnceLock::new(),
            turn: OnceLock::new(),
            selftest: Default::default(),
        }
    }
}

impl ApplianceState {
    /// True while any recording has the microphone open.
    pub fn recording(&self) -> bool {
        self.bus.snapshot().recording()
    }

    /// Marks the microphone open until the guard is dropped. `agent`: who
    /// listens (`None`: the person started it with the button).
    pub fn start_recording(self: &Arc<Self>, agent: Option<String>) -> RecordingGuard {
        let id = self.bus.next_id();
        self.bus
            .publish(crate::events::Event::ListeningStarted { listen: id, agent });
        RecordingGuard {
            state: Arc::clone(self),
            id,
            speech: false,
            reason: hark_core::room::EndReason::Cancelled,
        }
    }

    /// The floor (made with the default limits if the daemon has not set
    /// it up from the config: unit tests).
    pub fn floor(&self) -> Arc<crate::floor::Floor> {
        Arc::clone(self.floor.get_or_init(|| {
            let defaults = crate::config::FloorConfig::default();
            Arc::new(crate::floor::Floor::new(
                self.bus.clone(),
                defaults.max_queue,
                std::time::Duration::from_secs(defaults.max_hold_seconds),
            ))
        }))
    }

    /// The configured agents (none before the daemon set them up).
    pub fn agents(&self) -> crate::agents::Agents {
        self.agents.get().cloned().unwrap_or_default()
    }

    /// `confirm`'s yes and no words.
    pub fn yes_no(&self) -> crate::words::YesNo {
        self.yes_no.get().cloned().unwrap_or_default()
    }

    /// Remembers an agent's name (for addressing messages to it).
    pub fn agent_seen(&self, name: &str) {
        let mut seen = self
            .agents_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !seen.contains(name) {
            seen.insert(name.to_owned());
        }
    }

    /// Every agent name seen since the start.
    pub fn agents_seen(&self) -> Vec<String> {
        self.agents_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
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
            state: Arc::clone(self),
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

    pub fn set_player(&self, player: &Arc<hark_audio::playback::Player>) {
        *self.player.lock().unwrap_or_else(PoisonError::into_inner) = Arc::downgrade(player);
    }

    /// The speaker, if the audio engine is running.
    pub fn player(&self) -> Option<Arc<hark_audio::playback::Player>> {
        self.player
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade()
    }
}

/// Formats a peer address the same way for every TCP-based transport.
pub fn peer_of(addr: SocketAddr) -> String {
    addr.to_string()
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
        let state = Arc::new(ApplianceState::default());
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
