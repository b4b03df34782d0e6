//! `[esphome]`: Hark as a Home Assistant voice satellite.

use std::net::{IpAddr, SocketAddr};

use hark_core::allow::AllowList;
use hark_core::config::{Invalid, check_range};
use serde::{Deserialize, Serialize};

/// Accepted range for `esphome.max_connections`.
pub const MAX_CONNECTIONS_RANGE: (usize, usize) = (1, 64);
/// Accepted range for `esphome.idle_secs`.
pub const IDLE_RANGE: (u64, u64) = (10, 3600);

/// `[esphome]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EsphomeConfig {
    /// Serve the ESPHome native API. Off by default: without an encryption
    /// key the protocol has no authentication (docs/security.md).
    pub enabled: bool,
    /// Address and port to listen on (ESPHome's is 6053; 0 picks a free
    /// port).
    pub listen: SocketAddr,
    /// Who may connect: addresses or networks. By default loopback and
    /// the private ranges of a home network.
    pub allow: AllowList,
    /// Connections at once (1–64): Home Assistant keeps one; past it the
    /// oldest is closed to make room for the newcomer.
    pub max_connections: usize,
    /// Seconds a connection may send nothing before it is closed (10–3600;
    /// Home Assistant pings every 20 s).
    pub idle_secs: u64,
    /// The wake word runs Home Assistant's pipeline (once Home Assistant
    /// subscribed to the voice assistant), as on a Voice PE; off, it
    /// records a message for the agents.
    pub run_on_wake_word: bool,
    /// A press of the button runs it too; off (the default), a press
    /// records a message for the agents.
    pub run_on_press: bool,
}

impl Default for EsphomeConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            listen: SocketAddr::from(([0, 0, 0, 0], 6053)),
            allow: AllowList::default(),
            max_connections: 4,
            idle_secs: 90,
            run_on_wake_word: true,
            run_on_press: false,
        }
    }
}

impl EsphomeConfig {
    pub fn validate(&self) -> Result<(), Invalid> {
        check_range(
            "esphome.max_connections",
            self.max_connections,
            MAX_CONNECTIONS_RANGE,
        )?;
        check_range("esphome.idle_secs", self.idle_secs, IDLE_RANGE)?;
        Ok(())
    }

    /// Whether `address` may connect.
    pub fn allows(&self, address: IpAddr) -> bool {
        self.allow.allows(address)
    }
}
