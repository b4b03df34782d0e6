//! Who may connect to a service that has no authentication of its own
//! (Wyoming, the ESPHome API): addresses and networks, by default loopback
//! and the private ranges of a home network.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de::Error};

/// An `allow` list: each entry a network (`192.168.0.0/16`) or one address
/// (`192.168.1.20`, the same as `/32`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList(Vec<IpNet>);

impl AllowList {
    /// Whether `address` may connect (an IPv4 address mapped into IPv6 is
    /// taken as the IPv4 one).
    pub fn allows(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.0.iter().any(|net| net.contains(&address))
    }
}

impl Default for AllowList {
    /// Loopback and the private ranges of a home network.
    fn default() -> Self {
        let nets = [
            "127.0.0.0/8",
            "::1/128",
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "169.254.0.0/16",
            "fc00::/7",
            "fe80::/10",
        ];
        Self(nets.iter().filter_map(|n| n.parse().ok()).collect())
    }
}

impl Serialize for AllowList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(ToString::to_string))
    }
}

impl<'de> Deserialize<'de> for AllowList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|text| {
                text.parse::<IpNet>()
                    .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        D::Error::custom(format!(
                            "`{text}` is neither an address nor a network (192.168.0.0/16)"
                        ))
                    })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }
}
