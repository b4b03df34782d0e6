//! Finding the appliance on the LAN: it advertises itself by mDNS / DNS-SD
//! (`_mcp._tcp` for MCP clients, with TXT `path=/mcp`, the transports, the
//! auth mode and the version; `_hark._tcp` for Hark's own tools), and
//! `hark discover` (and `hark pair` without a host) browses for it.
//!
//! Two responders must not answer for the same name: avahi-daemon (on the
//! SD image and Raspberry Pi OS) answers for the host name, and Hark's own
//! responder (`mdns-sd`) would answer for it too, with addresses avahi may
//! take for a rival's (and rename the appliance `hark-2.local`). So with
//! avahi running and its service file writable, Hark hands avahi its
//! records as that file (`discovery.responder = "auto"`, the default) and
//! avahi alone answers; without avahi, Hark answers itself.

use std::{
    collections::BTreeMap,
    net::IpAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use mdns_sd::{IfKind, ServiceDaemon, ServiceEvent, ServiceInfo};
use serde::Serialize;

use crate::config::{DiscoveryConfig, Responder};

/// MCP clients browse for this.
pub const MCP_TYPE: &str = "_mcp._tcp.local.";
/// Hark's own tools browse for this: the raw TCP transport.
pub const HARK_TYPE: &str = "_hark._tcp.local.";
/// Home Assistant browses for this: the Wyoming services (docs/wyoming.md).
pub const WYOMING_TYPE: &str = "_wyoming._tcp.local.";
/// Home Assistant browses for this: ESPHome devices, Hark as a satellite
/// (docs/esphome.md).
pub const ESPHOME_TYPE: &str = "_esphomelib._tcp.local.";

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("mDNS: {0}")]
    Mdns(#[from] mdns_sd::Error),
    #[error("cannot write the avahi service file {path}: {source}")]
    AvahiFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One service: its type, port and TXT records.
pub type Record = (&'static str, u16, Vec<(&'static str, String)>);

/// What the appliance advertises.
#[derive(Debug, Clone, PartialEq)]
pub struct Advert {
    /// The instance name people see: "Hark on kitchen".
    pub instance: String,
    /// The host name, without `.local`.
    pub host: String,
    pub tcp_port: Option<u16>,
    pub http_port: Option<u16>,
    /// The Wyoming services' port, when they are on.
    pub wyoming_port: Option<u16>,
    /// The ESPHome API, when it is on.
    pub esphome: Option<EsphomeAdvert>,
    /// `paired` or `open`.
    pub auth: &'static str,
    pub version: &'static str,
}

/// How Hark as an ESPHome device is advertised. Its instance name is the
/// node name, not the appliance's: Home Assistant takes the instance as the
/// name the device must say in its hello.
#[derive(Debug, Clone, PartialEq)]
pub struct EsphomeAdvert {
    pub port: u16,
    /// The node name (`kitchen`).
    pub name: String,
    /// `02:AB:…`, as the device info says it.
    pub mac: String,
    pub friendly_name: String,
}

impl EsphomeAdvert {
    /// The TXT records Home Assistant's ESPHome discovery reads: the MAC
    /// (lower-case hex, no colons: its key for the device), the friendly
    /// name and the version.
    pub fn txt(&self, version: &str) -> Vec<(&'static str, String)> {
        vec![
            ("mac", self.mac.replace(':', "").to_lowercase()),
            ("friendly_name", self.friendly_name.clone()),
            ("version", version.to_owned()),
            ("platform", "hark".to_owned()),
            ("network", "ethernet".to_owned()),
        ]
    }
}

impl Advert {
    /// The transports served on the network, as TXT says them.
    fn transports(&self) -> String {
        let mut t = Vec::new();
        if self.http_port.is_some() {
            t.extend(["http", "websocket"]);
        }
        if self.tcp_port.is_some() {
            t.push("tcp");
        }
        t.join(",")
    }

    /// The TXT records of each service type, with its port.
    pub fn records(&self) -> Vec<Record> {
        let common = |mut txt: Vec<(&'static str, String)>| {
            txt.extend([
                ("transports", self.transports()),
                ("auth", self.auth.to_owned()),
                ("version", self.version.to_owned()),
            ]);
            txt
        };
        let mut out = Vec::new();
        if let Some(http) = self.http_port {
            let mut txt = vec![("path", "/mcp".to_owned())];
            if let Some(tcp) = self.tcp_port {
                txt.push(("tcp_port", tcp.to_string()));
            }
            out.push((MCP_TYPE, http, common(txt)));
        }
        if let Some(tcp) = self.tcp_port {
            let mut txt = Vec::new();
            if let Some(http) = self.http_port {
                txt.extend([("http_port", http.to_string()), ("path", "/mcp".to_owned())]);
            }
            out.push((HARK_TYPE, tcp, common(txt)));
        }
        // Not MCP: Wyoming has no authentication, and says nothing of
        // the MCP side.
        if let Some(wyoming) = self.wyoming_port {
            out.push((
                WYOMING_TYPE,
                wyoming,
                vec![("version", self.version.to_owned())],
            ));
        }
        out
    }

    /// The same records as an avahi service file.
    pub fn avahi_xml(&self) -> String {
        avahi_group(&self.instance, &self.records())
    }

    /// The ESPHome API's record as an avahi service file of its own: its
    /// instance is the node name, and a service group has one name.
    pub fn esphome_avahi_xml(&self) -> Option<String> {
        let esphome = self.esphome.as_ref()?;
        Some(avahi_group(
            &esphome.name,
            &[(ESPHOME_TYPE, esphome.port, esphome.txt(self.version))],
        ))
    }
}

/// One avahi service group: `name` and its services.
fn avahi_group(name: &str, records: &[Record]) -> String {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let mut xml = String::from(
        "<?xml version=\"1.0\" standalone='no'?>\n<!DOCTYPE service-group SYSTEM \"avahi-service.dtd\">\n\
         <!-- Written by the Hark daemon at start, removed when it stops: edit hark.toml, not this. -->\n\
         <service-group>\n",
    );
    xml.push_str(&format!("  <name>{}</name>\n", escape(name)));
    for (ty, port, txt) in records {
        let ty = ty.trim_end_matches(".local.");
        xml.push_str(&format!(
            "  <service>\n    <type>{ty}</type>\n    <port>{port}</port>\n"
        ));
        for (k, v) in txt {
            xml.push_str(&format!("    <txt-record>{k}={}</txt-record>\n", escape(v)));
        }
        xml.push_str("  </service>\n");
    }
    xml.push_str("</service-group>\n");
    xml
}

/// A listener's port when it is reachable from the LAN (not bound to
/// loopback only).
pub fn lan_port(listener: &crate::connections::Listener) -> Option<u16> {
    let addr = listener.socket_addr()?;
    (!addr.ip().is_loopback()).then_some(addr.port())
}

/// The running advertisement; withdrawn when dropped.
pub enum Advertising {
    Builtin {
        daemon: ServiceDaemon,
        names: Vec<String>,
    },
    /// The service files written (the appliance's, and the ESPHome API's
    /// when it is on).
    Avahi { paths: Vec<PathBuf> },
}

impl Drop for Advertising {
    fn drop(&mut self) {
        match self {
            Advertising::Builtin { daemon, names } => {
                // Goodbye packets, so browsers forget the appliance now
                // rather than when the records expire.
                for name in names.iter() {
                    if let Ok(done) = daemon.unregister(name) {
                        let _ = done.recv_timeout(Duration::from_secs(1));
                    }
                }
                let _ = daemon.shutdown();
            }
            Advertising::Avahi { paths } => {
                // A group with no services: avahi withdraws Hark's records
                // (an empty file would be a parse error in its log).
                for path in paths.iter() {
                    if let Err(e) = std::fs::write(path, WITHDRAWN) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot withdraw the avahi service file");
                    }
                }
            }
        }
    }
}

impl Advertising {
    pub fn describe(&self) -> String {
        match self {
            Advertising::Builtin { names, .. } => format!("mDNS: {}", names.join(", ")),
            Advertising::Avahi { paths } => format!(
                "through avahi ({})",
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The avahi service file while Hark is stopped.
pub const WITHDRAWN: &str = "<?xml version=\"1.0\" standalone='no'?>\n<!DOCTYPE service-group SYSTEM \"avahi-service.dtd\">\n\
<!-- Hark is not running: nothing to advertise. The daemon rewrites this at start. -->\n\
<service-group>\n  <name>Hark</name>\n</service-group>\n";

/// Whether avahi-daemon runs here.
fn avahi_running(config: &DiscoveryConfig) -> bool {
    config.avahi_socket.exists()
}

/// Starts advertising `advert` (nothing when no transport is on the LAN).
/// Blocking: call off the runtime's threads.
pub fn advertise(
    config: &DiscoveryConfig,
    advert: &Advert,
) -> Result<Option<Advertising>, DiscoveryError> {
    if advert.records().is_empty() {
        return Ok(None);
    }
    let avahi = match config.responder {
        Responder::Avahi => true,
        Responder::Builtin => false,
        Responder::Auto => avahi_running(config) && writable(&config.avahi_service_file),
    };
    if avahi {
        write_avahi(&config.avahi_service_file, &advert.avahi_xml())?;
        let mut paths = vec![config.avahi_service_file.clone()];
        if let Some(xml) = advert.esphome_avahi_xml() {
            // A file of its own (its instance name differs from the
            // appliance's). Without it the rest is still advertised.
            match write_avahi(&config.avahi_esphome_file, &xml) {
                Ok(()) => paths.push(config.avahi_esphome_file.clone()),
                Err(e) => tracing::warn!(
                    error = %e,
                    "the ESPHome API is not advertised: add Hark in Home Assistant by address"
                ),
            }
        }
        return Ok(Some(Advertising::Avahi { paths }));
    }
    let daemon = ServiceDaemon::new()?;
    if !config.interfaces.is_empty() {
        daemon.disable_interface(IfKind::All)?;
        for name in &config.interfaces {
            daemon.enable_interface(IfKind::Name(name.clone()))?;
        }
    }
    let host = format!("{}.local.", advert.host);
    let mut names = Vec::new();
    for (ty, port, txt) in advert.records() {
        let info =
            ServiceInfo::new(ty, &advert.instance, &host, (), port, &txt[..])?.enable_addr_auto();
        names.push(info.get_fullname().to_owned());
        daemon.register(info)?;
    }
    if let Some(esphome) = &advert.esphome {
        let txt = esphome.txt(advert.version);
        let info = ServiceInfo::new(
            ESPHOME_TYPE,
            &esphome.name,
            &host,
            (),
            esphome.port,
            &txt[..],
        )?
        .enable_addr_auto();
        names.push(info.get_fullname().to_owned());
        daemon.register(info)?;
    }
    Ok(Some(Advertising::Builtin { daemon, names }))
}

fn writable(path: &Path) -> bool {
    std::fs::OpenOptions::new().append(true).open(path).is_ok()
}

/// Rewrites the file in place (its directory belongs to root; the file,
/// made by the package, to the service): avahi notices and reloads.
fn write_avahi(path: &Path, xml: &str) -> Result<(), DiscoveryError> {
    std::fs::write(path, xml).map_err(|source| DiscoveryError::AvahiFile {
        path: path.to_owned(),
        source,
    })
}

/// One appliance found on the LAN.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Found {
    pub name: String,
    /// `kitchen.local`.
    pub host: String,
    pub addresses: Vec<IpAddr>,
    pub tcp_port: Option<u16>,
    pub http_port: Option<u16>,
    pub path: Option<String>,
    pub auth: Option<String>,
    pub version: Option<String>,
}

impl Found {
    /// Whether an agent on another host must pair first.
    pub fn needs_pairing(&self) -> bool {
        self.auth.as_deref() != Some("open")
    }

    /// The address to reach it by: IPv4 first (agents resolve `.local`
    /// over IPv4 on the image).
    pub fn address(&self) -> Option<IpAddr> {
        self.addresses
            .iter()
            .find(|a| a.is_ipv4())
            .or(self.addresses.first())
            .copied()
    }
}

/// Browses for `wait` and returns the appliances that answered, by name.
/// Blocking.
pub fn discover(wait: Duration, interfaces: &[String]) -> Result<Vec<Found>, DiscoveryError> {
    let daemon = ServiceDaemon::new()?;
    if !interfaces.is_empty() {
        daemon.disable_interface(IfKind::All)?;
        for name in interfaces {
            daemon.enable_interface(IfKind::Name(name.clone()))?;
        }
    }
    let mcp = daemon.browse(MCP_TYPE)?;
    let hark = daemon.browse(HARK_TYPE)?;
    let deadline = std::time::Instant::now() + wait;
    let mut found: BTreeMap<String, Found> = BTreeMap::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        let event = [&mcp, &hark]
            .iter()
            .find_map(|rx| rx.try_recv().ok())
            .or_else(|| mcp.recv_timeout(left.min(Duration::from_millis(50))).ok());
        let Some(ServiceEvent::ServiceResolved(info)) = event else {
            continue;
        };
        let host = info.get_hostname().trim_end_matches('.').to_owned();
        let name = instance_name(info.get_fullname());
        let entry = found.entry(host.clone()).or_insert_with(|| Found {
            name: name.clone(),
            host: host.clone(),
            addresses: Vec::new(),
            tcp_port: None,
            http_port: None,
            path: None,
            auth: None,
            version: None,
        });
        for addr in info.get_addresses() {
            let ip = addr.to_ip_addr();
            if !entry.addresses.contains(&ip) {
                entry.addresses.push(ip);
            }
        }
        entry.addresses.sort_by_key(|a| (a.is_ipv6(), *a));
        let prop = |k: &str| info.get_property_val_str(k).map(str::to_owned);
        let port = |k: &str| prop(k).and_then(|v| v.parse::<u16>().ok());
        if info.get_fullname().ends_with(MCP_TYPE) {
            entry.http_port = Some(info.get_port());
            entry.tcp_port = entry.tcp_port.or(port("tcp_port"));
        } else {
            entry.tcp_port = Some(info.get_port());
            entry.http_port = entry.http_port.or(port("http_port"));
        }
        entry.path = entry.path.take().or(prop("path"));
        entry.auth = entry.auth.take().or(prop("auth"));
        entry.version = entry.version.take().or(prop("version"));
    }
    let _ = daemon.shutdown();
    Ok(found.into_values().collect())
}

fn instance_name(fullname: &str) -> String {
    let name = fullname
        .strip_suffix(MCP_TYPE)
        .or_else(|| fullname.strip_suffix(HARK_TYPE))
        .unwrap_or(fullname)
        .trim_end_matches('.');
    name.replace("\\ ", " ")
}

/// What `hark discover` prints.
pub fn format_found(found: &[Found]) -> String {
    if found.is_empty() {
        return "no Hark appliance answered on the LAN\n".to_owned();
    }
    let mut out = format!(
        "{:<24} {:<22} {:<16} {:>5} {:>5}  {:<8} {}\n",
        "NAME", "HOST", "ADDRESS", "HTTP", "TCP", "VERSION", "ACCESS"
    );
    for f in found {
        out.push_str(&format!(
            "{:<24} {:<22} {:<16} {:>5} {:>5}  {:<8} {}\n",
            f.name,
            f.host,
            f.address()
                .map_or_else(|| "?".to_owned(), |a| a.to_string()),
            f.http_port
                .map_or_else(|| "-".to_owned(), |p| p.to_string()),
            f.tcp_port.map_or_else(|| "-".to_owned(), |p| p.to_string()),
            f.version.as_deref().unwrap_or("?"),
            if f.needs_pairing() {
                "pair first (`hark pair`)"
            } else {
                "open to everyone"
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advert() -> Advert {
        Advert {
            instance: "Hark on kitchen".into(),
            host: "kitchen".into(),
            tcp_port: Some(7340),
            http_port: Some(7341),
            wyoming_port: None,
            esphome: None,
            auth: "paired",
            version: "0.1.0",
        }
    }

    #[test]
    fn the_esphome_advert_says_what_home_assistant_reads() {
        let esphome = EsphomeAdvert {
            port: 6053,
            name: "kitchen".into(),
            mac: "02:AB:CD:EF:01:23".into(),
            friendly_name: "Hark on kitchen".into(),
        };
        let txt = esphome.txt("0.1.0");
        assert!(txt.contains(&("mac", "02abcdef0123".to_owned())), "{txt:?}");
        assert!(txt.contains(&("friendly_name", "Hark on kitchen".to_owned())));
        // Not among the appliance's own records (nor in avahi's file).
        let with = Advert {
            esphome: Some(esphome),
            ..advert()
        };
        assert!(with.records().iter().all(|(ty, _, _)| *ty != ESPHOME_TYPE));
    }

    #[test]
    fn the_records_say_where_and_how() {
        let records = advert().records();
        let (ty, port, txt) = &records[0];
        assert_eq!((*ty, *port), (MCP_TYPE, 7341));
        let txt: BTreeMap<_, _> = txt.iter().cloned().collect();
        assert_eq!(txt["path"], "/mcp");
        assert_eq!(txt["transports"], "http,websocket,tcp");
        assert_eq!(txt["auth"], "paired");
        assert_eq!(txt["tcp_port"], "7340");
        assert_eq!((records[1].0, records[1].1), (HARK_TYPE, 7340));
        // Loopback-only listeners are not advertised.
        let listener = |address: &str| crate::connections::Listener {
            transport: crate::connections::TransportKind::Tcp,
            address: address.into(),
        };
        assert_eq!(lan_port(&listener("127.0.0.1:7340")), None);
        assert_eq!(lan_port(&listener("0.0.0.0:7340")), Some(7340));
        assert_eq!(lan_port(&listener("/run/hark/mcp.sock")), None);
        let none = Advert {
            tcp_port: None,
            http_port: None,
            ..advert()
        };
        assert!(none.records().is_empty());
        let wyoming = Advert {
            wyoming_port: Some(10700),
            ..advert()
        };
        let records = wyoming.records();
        assert_eq!((records[2].0, records[2].1), (WYOMING_TYPE, 10700));
        assert!(records[2].2.iter().all(|(k, _)| *k == "version"));
    }

    #[test]
    fn the_avahi_file_carries_the_same_records() {
        let xml = advert().avahi_xml();
        assert!(xml.contains("<name>Hark on kitchen</name>"), "{xml}");
        assert!(
            xml.contains("<type>_mcp._tcp</type>\n    <port>7341</port>"),
            "{xml}"
        );
        assert!(xml.contains("<txt-record>path=/mcp</txt-record>"), "{xml}");
        assert!(
            xml.contains("<type>_hark._tcp</type>\n    <port>7340</port>"),
            "{xml}"
        );
        let odd = Advert {
            instance: "Hark <&> \"x\"".into(),
            ..advert()
        };
        assert!(
            odd.avahi_xml()
                .contains("<name>Hark &lt;&amp;&gt; &quot;x&quot;</name>")
        );
    }

    #[test]
    fn names_come_back_unescaped() {
        assert_eq!(
            instance_name("Hark\\ on\\ kitchen._mcp._tcp.local."),
            "Hark on kitchen"
        );
        let f = Found {
            name: "x".into(),
            host: "x.local".into(),
            addresses: vec!["fe80::1".parse().unwrap(), "10.0.0.2".parse().unwrap()],
            tcp_port: Some(7340),
            http_port: None,
            path: None,
            auth: Some("open".into()),
            version: None,
        };
        assert_eq!(f.address(), Some("10.0.0.2".parse().unwrap()));
        assert!(!f.needs_pairing());
        assert!(format_found(&[f]).contains("open to everyone"));
    }
}
