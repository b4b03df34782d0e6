//! `get_status` — VoxCtrl's status tool. Its text content is a JSON object
//! with VoxCtrl's `recording` and `speaking` booleans; Hark adds its version,
//! uptime, transports with their client counts and each subsystem's state.
//! The same object is the structured content. What the appliance is doing
//! comes from the event stream's snapshot ([`hark_core::events`]), the same
//! one the lights show.

use hark_core::{
    room::{CaptureCounters, Observe},
    status::Subsystem,
};
use rmcp::{Json, RoleServer, service::RequestContext, tool, tool_router};
use schemars::JsonSchema;
use serde::Serialize;

use crate::{
    server::HarkServer,
    {connections::TransportKind, state::ServerState},
};

#[derive(Debug, Serialize, JsonSchema)]
pub struct Status {
    /// True while the microphone is open.
    pub recording: bool,
    /// True while the speaker is playing speech.
    pub speaking: bool,
    /// True while the mute switch has the microphone closed.
    pub muted: bool,
    /// Messages from the person waiting in the voice inbox for an agent.
    pub messages_waiting: usize,
    /// Speaker volume, 0–100; null when there is no speaker.
    pub volume: Option<u8>,
    /// Hark's version.
    pub version: String,
    /// Seconds since the daemon started.
    pub uptime_seconds: f64,
    /// Every transport the daemon listens on, with its connected clients.
    pub transports: Vec<TransportStatus>,
    /// Every connected client: its name, how and from where, since when,
    /// and what it is doing.
    pub clients: Vec<ClientStatus>,
    /// Who has the turn with the person (the microphone) and who waits.
    pub floor: hark_core::room::FloorStatus,
    /// The event stream's `GET /events` clients.
    pub events: crate::connections::EventClients,
    /// The capture thread's counters (null without audio): `periods` read
    /// since the start (50 a second at 20 ms periods, whatever else the
    /// appliance does), `overruns` recovered.
    pub capture: Option<CaptureCounters>,
    /// The playback thread's counters (null without audio): `clips` played
    /// to their end, `underruns` (the speaker ran dry mid-clip).
    pub playback: Option<hark_core::room::PlaybackCounters>,
    /// State of each subsystem ("not configured" until its engine has started).
    pub subsystems: Subsystems,
    /// The wake word: whether it listens (`listening`, `off`, `muted`,
    /// `speaking` while half duplex closes the microphone, `unavailable`),
    /// for which words, at which sensitivity, and the latest detections
    /// with their scores. Null without a microphone.
    pub wake: Option<hark_core::room::WakeStatus>,
    /// Speech and timers kept for later (`speak_text` with
    /// `delay_seconds` or `at`): a ringing timer first, then the soonest.
    pub scheduled: Vec<hark_core::room::Scheduled>,
    /// Pairing: the mode, and how this client is let in and what it may do.
    pub auth: Option<crate::auth::AuthStatus>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TransportStatus {
    /// tcp, http, websocket or unix.
    pub transport: TransportKind,
    /// `ip:port`, or the socket path.
    pub address: String,
    /// Clients connected right now.
    pub clients: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ClientStatus {
    /// The agent's name (`X-Hark-Client`, else `clientInfo.name`), or
    /// `unnamed client` before it gave one.
    pub name: String,
    pub transport: TransportKind,
    /// Remote address, or the Unix peer's credentials.
    pub peer: String,
    /// Connected since (RFC 3339, UTC).
    pub since: String,
    /// `idle`, or what its calls are doing: `listening`, `waiting for the
    /// microphone`, `speaking`, `asking`, `waiting for the person`, …
    pub doing: String,
    /// `trusted`, `paired` or `unpaired`.
    pub access: &'static str,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Subsystems {
    pub audio: String,
    pub stt: String,
    pub tts: String,
    pub board: String,
    pub inbox: String,
    pub history: String,
    /// Speech and timers kept for later: how many, and where they are
    /// kept ("in memory only: …" when the state directory cannot be used,
    /// so they would not outlast a restart).
    pub schedule: String,
    pub wake: String,
}

impl Status {
    /// The status as a client with `grant` sees it: with how it is let in
    /// (`auth`), and the HTTPS fingerprint to compare.
    pub fn for_grant(state: &ServerState, room: &dyn Observe, grant: &crate::auth::Grant) -> Self {
        let mut status = Self::of(state, room);
        let mut auth = state.auth.status(grant);
        auth.https_ca_sha256 = state.tls.as_ref().map(|tls| tls.fingerprint.clone());
        status.auth = Some(auth);
        status
    }

    pub fn of(state: &ServerState, room: &dyn Observe) -> Self {
        let mut transports = Vec::new();
        for listener in state.listeners() {
            transports.push(TransportStatus {
                transport: listener.transport,
                address: listener.address.clone(),
                clients: state.connections.client_count(listener.transport),
            });
            // WebSocket shares the HTTP listener; report it as its own row so
            // its clients are visible.
            if listener.transport == TransportKind::Http {
                transports.push(TransportStatus {
                    transport: TransportKind::Websocket,
                    address: listener.address,
                    clients: state.connections.client_count(TransportKind::Websocket),
                });
            }
        }
        let clients = state
            .connections
            .connections()
            .iter()
            .map(|c| {
                let doing = c.activities();
                ClientStatus {
                    name: c
                        .client_name()
                        .unwrap_or_else(|| crate::server::UNNAMED.to_owned()),
                    transport: c.transport,
                    peer: c.peer.clone(),
                    since: humantime::format_rfc3339_seconds(c.since).to_string(),
                    doing: if doing.is_empty() {
                        "idle".to_owned()
                    } else {
                        doing.join(", ")
                    },
                    access: c.grant().access(),
                }
            })
            .collect();
        let now = state.bus.snapshot();
        let room = room.status();
        let subsystem = |which: Subsystem| {
            room.subsystems
                .iter()
                .find(|(s, _)| *s == which)
                .map_or_else(
                    || "not configured".to_owned(),
                    |(_, state)| state.to_string(),
                )
        };
        Status {
            recording: now.recording(),
            speaking: now.speaker,
            muted: now.muted,
            messages_waiting: now.inbox_waiting,
            volume: room.volume,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_seconds: (state.uptime_seconds() * 1000.0).round() / 1000.0,
            transports,
            clients,
            floor: room.floor,
            events: state.sse.view(),
            capture: room.capture,
            playback: room.playback,
            subsystems: Subsystems {
                audio: subsystem(Subsystem::Audio),
                stt: subsystem(Subsystem::Stt),
                tts: subsystem(Subsystem::Tts),
                board: subsystem(Subsystem::Board),
                inbox: subsystem(Subsystem::Inbox),
                history: subsystem(Subsystem::History),
                schedule: subsystem(Subsystem::Schedule),
                wake: subsystem(Subsystem::Wake),
            },
            wake: room.wake,
            scheduled: room.scheduled,
            auth: None,
        }
    }
}

#[tool_router(router = get_status_router, vis = "pub(crate)")]
impl HarkServer {
    /// Report whether the microphone is open (`recording`) and speech is
    /// playing (`speaking`), plus version, uptime, transports and subsystems.
    #[tool(
        name = "get_status",
        annotations(
            title = "Appliance status",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn get_status(&self, context: RequestContext<RoleServer>) -> Json<Status> {
        Json(Status::for_grant(
            &self.state,
            self.room.observe.as_ref(),
            &self.grant(&context),
        ))
    }
}
