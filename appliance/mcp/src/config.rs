//! The MCP side's sections of the configuration: `[mcp]` (the transports
//! and their limits), `[auth]` (pairing, tokens, trust) and `[discovery]`
//! (mDNS). The daemon's configuration file composes them with the room's
//! sections; each checks its own ranges.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use hark_core::config::{Invalid, check_range};
use serde::{Deserialize, Serialize};

/// Accepted range for `mcp.max_connections`.
pub const MAX_CONNECTIONS_RANGE: (usize, usize) = (1, 4096);
/// Accepted range for `mcp.max_message_bytes` (1 KiB … 96 MiB: room for a
/// 50 MB audio file in base64).
pub const MAX_MESSAGE_BYTES_RANGE: (usize, usize) = (1024, 96 * 1024 * 1024);
/// Accepted range for `mcp.idle_timeout_secs` (0 disables the timeout).
pub const IDLE_TIMEOUT_RANGE: (u64, u64) = (0, 7 * 24 * 3600);

/// `discovery.responder`
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Responder {
    /// avahi when it runs and its service file is writable, else Hark's own.
    #[default]
    Auto,
    /// Hark's own mDNS responder.
    Builtin,
    /// Write `avahi_service_file`; avahi-daemon answers.
    Avahi,
}

/// `[discovery]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoveryConfig {
    /// Advertise `_mcp._tcp` and `_hark._tcp` (the transports listening
    /// beyond loopback).
    pub enabled: bool,
    /// Who answers: `auto`, `builtin` or `avahi`.
    pub responder: Responder,
    /// Network interfaces to advertise on (Hark's own responder); empty:
    /// all of them.
    pub interfaces: Vec<String>,
    /// The instance name browsers show; empty: "Hark on HOSTNAME".
    pub name: String,
    /// The service file Hark writes for avahi (the package makes it, owned
    /// by the service).
    pub avahi_service_file: PathBuf,
    /// The service file for the ESPHome API's record (`[esphome]`): a
    /// group of its own, named after the node (the package makes it too).
    pub avahi_esphome_file: PathBuf,
    /// Present while avahi-daemon runs.
    pub avahi_socket: PathBuf,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            responder: Responder::Auto,
            interfaces: Vec::new(),
            name: String::new(),
            avahi_service_file: PathBuf::from("/etc/avahi/services/hark.service"),
            avahi_esphome_file: PathBuf::from("/etc/avahi/services/hark-esphome.service"),
            avahi_socket: PathBuf::from("/run/avahi-daemon/socket"),
        }
    }
}

/// Accepted range for `auth.max_failures`.
pub const MAX_FAILURES_RANGE: (u32, u32) = (1, 1000);
/// Accepted range for `auth.pair_timeout_secs`.
pub const PAIR_TIMEOUT_RANGE: (u64, u64) = (5, 600);
/// Accepted range for `auth.max_pair_requests`.
pub const MAX_PAIR_REQUESTS_RANGE: (u32, u32) = (1, 100);

/// `auth.mode`
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Clients need a token (or to be trusted: the Unix socket, loopback).
    #[default]
    Paired,
    /// Everyone may do everything, as before pairing existed.
    Open,
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Paired => "paired",
            AuthMode::Open => "open",
        }
    }
}

/// `[auth]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `paired`: agents on other hosts need a token; `open`: no one does
    /// (a warning at start and in `get_status`).
    pub mode: AuthMode,
    /// Trust clients connecting from the appliance itself (loopback) like
    /// the Unix socket.
    pub trust_loopback: bool,
    /// Failed token attempts one address may make in a minute (1–1000);
    /// past that it is refused until the minute is over.
    pub max_failures: u32,
    /// Seconds a pairing (`hark pair`) waits for the button (5–600).
    pub pair_timeout_secs: u64,
    /// Pairing requests one address may make in ten minutes (1–100).
    pub max_pair_requests: u32,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            mode: AuthMode::Paired,
            trust_loopback: true,
            max_failures: 10,
            pair_timeout_secs: 60,
            max_pair_requests: 5,
        }
    }
}

/// `[mcp]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Most simultaneous client connections over all transports together
    /// (1–4096). Further clients get a clear "busy" error and are closed.
    pub max_connections: usize,
    /// Largest single JSON-RPC message accepted, in bytes (1024–100663296):
    /// one line on TCP and the Unix socket, one WebSocket message, one HTTP
    /// request body.
    pub max_message_bytes: usize,
    /// A connection with no traffic and no call in flight for this many
    /// seconds is closed (0–604800; 0 never closes). Clients that hold a
    /// connection open for days (Claude Desktop through socat) should use
    /// `hark connect`, which reconnects transparently.
    pub idle_timeout_secs: u64,
    /// How long `transcribe_voice` waits for speech to begin when the call
    /// gives no `timeout_seconds`, in seconds (0.5–300).
    pub record_timeout: f64,
    /// Extra names or addresses accepted in HTTP `Host` headers, besides
    /// localhost, `hark.local`, the host name and the appliance's own
    /// addresses. An entry may carry a port (`name:8080`).
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins accepted in HTTP `Origin` headers
    /// (`scheme://host[:port]`). Origins whose host is an allowed host are
    /// always accepted.
    pub allowed_origins: Vec<String>,
    /// Raw TCP: newline-delimited JSON-RPC, the stdio framing.
    pub tcp: TcpConfig,
    /// Streamable HTTP and WebSocket, both at `/mcp`.
    pub http: HttpConfig,
    /// Unix socket for agents on the appliance itself.
    pub unix: UnixConfig,
    /// Connections not (yet) paired: their own budget, apart from
    /// `max_connections`, and a short deadline.
    pub unpaired: UnpairedConfig,
    /// The HTTP service (`/mcp`, WebSocket, scripts) over TLS.
    pub https: HttpsConfig,
}

/// `[mcp.https]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpsConfig {
    /// Serve HTTPS and WSS, with the appliance's own certificate authority
    /// (made at first start in `service.state_dir`/tls).
    pub enabled: bool,
    /// Address and port to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
}

impl Default for HttpsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            listen: SocketAddr::from(([0, 0, 0, 0], 7342)),
        }
    }
}

/// Accepted range for `mcp.unpaired.max_connections`.
pub const UNPAIRED_MAX_RANGE: (usize, usize) = (1, 1024);
/// Accepted range for `mcp.unpaired.per_address`.
pub const UNPAIRED_PER_ADDRESS_RANGE: (usize, usize) = (1, 256);
/// Accepted range for `mcp.unpaired.deadline_secs`.
pub const UNPAIRED_DEADLINE_RANGE: (u64, u64) = (1, 300);

/// `[mcp.unpaired]`: connections from hosts that are not trusted and have
/// presented no token. They cannot take the paired agents' slots: however
/// many a host opens, agents and the trusted keep theirs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UnpairedConfig {
    /// Unpaired connections at once, all addresses together (1–1024);
    /// past it one is closed to make room: the oldest that has sent no
    /// complete request yet, else the oldest.
    pub max_connections: usize,
    /// Unpaired connections from one address at once (1–256); past it one
    /// of that address's is closed the same way. A newcomer is never
    /// refused, so a paired agent always gets to present its token.
    pub per_address: usize,
    /// Seconds an unpaired connection may sit with no request in flight,
    /// and an HTTP one may take to send its request head, before it is
    /// closed (1–300).
    pub deadline_secs: u64,
}

impl Default for UnpairedConfig {
    fn default() -> Self {
        Self {
            max_connections: 16,
            per_address: 4,
            deadline_secs: 10,
        }
    }
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            max_connections: 32,
            // Room for about 12 MB of inline (base64) audio.
            max_message_bytes: 16 * 1024 * 1024,
            idle_timeout_secs: 3600,
            record_timeout: 15.0,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            tcp: TcpConfig::default(),
            http: HttpConfig::default(),
            unix: UnixConfig::default(),
            unpaired: UnpairedConfig::default(),
            https: HttpsConfig::default(),
        }
    }
}

/// `[mcp.tcp]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TcpConfig {
    /// Serve raw TCP at all.
    pub enabled: bool,
    /// Address and port to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::from(([0, 0, 0, 0], 7340)),
        }
    }
}

/// `[mcp.http]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Serve Streamable HTTP and WebSocket at all.
    pub enabled: bool,
    /// Address and port to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::from(([0, 0, 0, 0], 7341)),
        }
    }
}

/// `[mcp.unix]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UnixConfig {
    /// Serve the Unix socket at all.
    pub enabled: bool,
    /// Socket path. Its directory is created if missing; a stale socket left
    /// by a crashed daemon is replaced, a live one is an error.
    pub path: PathBuf,
    /// Permission bits of the socket file (octal in TOML: `0o660`). Group
    /// members of the daemon's group may connect.
    pub mode: u32,
}

impl Default for UnixConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            path: PathBuf::from("/run/hark/mcp.sock"),
            mode: 0o660,
        }
    }
}

impl AuthConfig {
    /// Checks every ranged field, naming the key that is out of range.
    pub fn validate(&self) -> Result<(), Invalid> {
        check_range("auth.max_failures", self.max_failures, MAX_FAILURES_RANGE)?;
        check_range(
            "auth.pair_timeout_secs",
            self.pair_timeout_secs,
            PAIR_TIMEOUT_RANGE,
        )?;
        check_range(
            "auth.max_pair_requests",
            self.max_pair_requests,
            MAX_PAIR_REQUESTS_RANGE,
        )?;
        Ok(())
    }
}

impl McpConfig {
    /// Checks every ranged field and that some transport serves, naming the
    /// key that is wrong.
    pub fn validate(&self) -> Result<(), Invalid> {
        check_range(
            "mcp.unpaired.max_connections",
            self.unpaired.max_connections,
            UNPAIRED_MAX_RANGE,
        )?;
        check_range(
            "mcp.unpaired.per_address",
            self.unpaired.per_address,
            UNPAIRED_PER_ADDRESS_RANGE,
        )?;
        check_range(
            "mcp.unpaired.deadline_secs",
            self.unpaired.deadline_secs,
            UNPAIRED_DEADLINE_RANGE,
        )?;
        check_range(
            "mcp.max_connections",
            self.max_connections,
            MAX_CONNECTIONS_RANGE,
        )?;
        check_range(
            "mcp.max_message_bytes",
            self.max_message_bytes,
            MAX_MESSAGE_BYTES_RANGE,
        )?;
        check_range(
            "mcp.idle_timeout_secs",
            self.idle_timeout_secs,
            IDLE_TIMEOUT_RANGE,
        )?;
        if self.unix.mode > 0o777 {
            return Err(Invalid {
                key: "mcp.unix.mode",
                reason: format!(
                    "{:#o} is not a permission mode (0o000–0o777)",
                    self.unix.mode
                ),
            });
        }
        if self.unix.enabled && self.unix.path.as_os_str().is_empty() {
            return Err(Invalid {
                key: "mcp.unix.path",
                reason: "empty path; set a path or `enabled = false`".into(),
            });
        }
        if !(self.tcp.enabled || self.http.enabled || self.unix.enabled) {
            return Err(Invalid {
                key: "mcp",
                reason: "every transport is disabled; agents could not reach the appliance".into(),
            });
        }
        for origin in &self.allowed_origins {
            if !origin.contains("://") {
                return Err(Invalid {
                    key: "mcp.allowed_origins",
                    reason: format!("`{origin}` has no scheme; write it as http://{origin}"),
                });
            }
        }
        check_range(
            "mcp.record_timeout",
            self.record_timeout,
            hark_core::room::RECORD_TIMEOUT_RANGE,
        )?;
        Ok(())
    }

    /// When an idle connection is closed; `None`: never.
    pub fn idle_timeout(&self) -> Option<Duration> {
        (self.idle_timeout_secs > 0).then(|| Duration::from_secs(self.idle_timeout_secs))
    }
}
