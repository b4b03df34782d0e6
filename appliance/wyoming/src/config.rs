//! `[wyoming]`: the Wyoming services Home Assistant uses.

use std::net::{IpAddr, SocketAddr};

use hark_core::allow::AllowList;
use hark_core::config::{Invalid, check_range};
use serde::{Deserialize, Serialize};

/// Accepted range for `wyoming.max_connections`.
pub const MAX_CONNECTIONS_RANGE: (usize, usize) = (1, 1024);
/// Accepted range for `wyoming.per_address`.
pub const PER_ADDRESS_RANGE: (usize, usize) = (1, 256);
/// Accepted range for `wyoming.idle_secs`.
pub const IDLE_RANGE: (u64, u64) = (1, 3600);
/// Accepted range for `wyoming.max_audio_seconds`.
pub const MAX_AUDIO_RANGE: (u32, u32) = (1, 600);

/// `[wyoming]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WyomingConfig {
    /// Serve Wyoming. Off by default: the protocol has no authentication,
    /// so whoever may connect may have Hark transcribe and speak (never
    /// listen to the room: docs/security.md).
    pub enabled: bool,
    /// Address and port to listen on; one port serves speech to text and
    /// text to speech (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Who may connect: addresses or networks (`192.168.1.20`,
    /// `192.168.0.0/16`, `fd00::/8`). By default loopback and the private
    /// ranges of a home network.
    pub allow: AllowList,
    /// Connections at once, all addresses together (1–1024); past it the
    /// oldest that has sent nothing yet, else the oldest, is closed to make
    /// room for the newcomer.
    pub max_connections: usize,
    /// Connections at once from one address (1–256), made room for the
    /// same way.
    pub per_address: usize,
    /// Seconds a connection may send nothing before it is closed (1–3600).
    pub idle_secs: u64,
    /// Seconds of audio transcribed at once, at most (1–600).
    pub max_audio_seconds: u32,
}

impl Default for WyomingConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            listen: SocketAddr::from(([0, 0, 0, 0], 10700)),
            allow: AllowList::default(),
            max_connections: 32,
            per_address: 8,
            idle_secs: 60,
            max_audio_seconds: 120,
        }
    }
}

impl WyomingConfig {
    pub fn validate(&self) -> Result<(), Invalid> {
        check_range(
            "wyoming.max_connections",
            self.max_connections,
            MAX_CONNECTIONS_RANGE,
        )?;
        check_range("wyoming.per_address", self.per_address, PER_ADDRESS_RANGE)?;
        check_range("wyoming.idle_secs", self.idle_secs, IDLE_RANGE)?;
        check_range(
            "wyoming.max_audio_seconds",
            self.max_audio_seconds,
            MAX_AUDIO_RANGE,
        )?;
        Ok(())
    }

    /// Whether `address` may connect (an IPv4 address mapped into IPv6
    /// is taken as the IPv4 one).
    pub fn allows(&self, address: IpAddr) -> bool {
        self.allow.allows(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_network_is_allowed_and_the_internet_is_not() {
        let config = WyomingConfig::default();
        for ok in [
            "127.0.0.1",
            "192.168.1.20",
            "10.1.2.3",
            "::1",
            "::ffff:192.168.1.5",
            "fd12::1",
        ] {
            assert!(config.allows(ok.parse().expect("an address")), "{ok}");
        }
        for no in ["8.8.8.8", "172.32.0.1", "2001:db8::1", "::ffff:1.1.1.1"] {
            assert!(!config.allows(no.parse().expect("an address")), "{no}");
        }
    }

    #[test]
    fn the_file_names_networks_and_bad_values_are_named() {
        let config: WyomingConfig =
            toml::from_str("enabled = true\nallow = [\"192.168.7.0/24\", \"10.0.0.9\"]")
                .expect("read");
        assert!(config.allows("192.168.7.200".parse().expect("an address")));
        assert!(!config.allows("192.168.8.1".parse().expect("an address")));
        assert!(config.allows("10.0.0.9".parse().expect("an address")));
        assert!(!config.allows("10.0.0.10".parse().expect("an address")));
        let error = toml::from_str::<WyomingConfig>("allow = [\"not a network\"]")
            .expect_err("refused")
            .to_string();
        assert!(error.contains("`not a network` is neither"), "{error}");
        let bad = WyomingConfig {
            per_address: 0,
            ..WyomingConfig::default()
        };
        assert_eq!(
            bad.validate().map_err(|e| e.key),
            Err("wyoming.per_address")
        );
    }
}
