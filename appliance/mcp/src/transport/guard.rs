//! DNS-rebinding protection for HTTP and WebSocket: the `Host` (or HTTP/2
//! authority) must name the appliance, and an `Origin`, when a browser sends
//! one, must be the appliance or an origin the config allows.
//!
//! The appliance's names are localhost, `hark.local`, its host name (plain and
//! `.local`) and what `mcp.allowed_hosts` adds. Its addresses are looked up
//! when a request names an IP, not once at start-up: on a LAN the address
//! usually arrives by DHCP after the daemon has started, and may change.
//!
//! rmcp's Streamable HTTP service has the same kind of check, but the
//! WebSocket upgrade on `/mcp` is not rmcp's, so one policy here guards both
//! and rmcp's own is switched off.

use std::{
    collections::HashSet,
    net::IpAddr,
    sync::Mutex,
    time::{Duration, Instant},
};

use http::{HeaderMap, Uri, header};

/// Why a request was refused; the text goes into the 403 body.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Rejection {
    #[error("missing Host header")]
    MissingHost,
    #[error("Host `{0}` is not this appliance (add it to mcp.allowed_hosts to allow it)")]
    Host(String),
    #[error("Origin `{0}` is not allowed (add it to mcp.allowed_origins to allow it)")]
    Origin(String),
}

/// The names the appliance answers to, its usual one first: the host
/// name (`service.hostname`, and the system's) as given, short and with
/// `.local`, then `hark.local`, `hark` and `localhost`. The Host check, the
/// HTTPS certificate and the mDNS records all use these.
pub fn appliance_names(hostname: &str) -> Vec<String> {
    let mut names = Vec::new();
    let system = gethostname::gethostname().to_string_lossy().to_lowercase();
    for name in [hostname.to_lowercase(), system] {
        let name = name.trim().trim_end_matches('.').to_owned();
        if name.is_empty() {
            continue;
        }
        let short = name.split('.').next().unwrap_or(&name).to_owned();
        for n in [format!("{short}.local"), short, name] {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    for n in ["hark.local", "hark", "localhost"] {
        if !names.iter().any(|x| x == n) {
            names.push(n.to_owned());
        }
    }
    names
}

/// The addresses of this machine's interfaces now (none if they cannot be
/// read).
pub fn interface_addresses() -> Vec<IpAddr> {
    if_addrs::get_if_addrs()
        .map(|ifs| ifs.into_iter().map(|i| i.ip()).collect())
        .unwrap_or_default()
}

/// The short host name agents see the appliance by (`kitchen`).
pub fn short_hostname(hostname: &str) -> String {
    appliance_names(hostname)
        .into_iter()
        .find(|n| !n.contains('.'))
        .unwrap_or_else(|| "hark".into())
}

pub struct HostPolicy {
    /// Lower-case host names, and `name:port` entries from the config.
    names: HashSet<String>,
    /// Extra origins from the config, lower-case, `scheme://host[:port]`.
    origins: Vec<String>,
    local_addresses: Mutex<(Instant, Vec<IpAddr>)>,
}

/// How long a lookup of the interface addresses is reused.
const ADDRESS_CACHE: Duration = Duration::from_secs(5);

impl HostPolicy {
    pub fn new(hostname: &str, extra_hosts: &[String], extra_origins: &[String]) -> Self {
        let mut names: HashSet<String> = appliance_names(hostname).into_iter().collect();
        for extra in extra_hosts {
            names.insert(extra.trim().to_lowercase());
        }
        Self {
            names,
            origins: extra_origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_lowercase())
                .collect(),
            // An expired entry: the first lookup happens on first use.
            local_addresses: Mutex::new((Instant::now() - ADDRESS_CACHE * 2, Vec::new())),
        }
    }

    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Rejection> {
        let authority = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| uri.authority().map(|a| a.as_str().to_owned()))
            .ok_or(Rejection::MissingHost)?;
        if !self.allows_authority(&authority) {
            return Err(Rejection::Host(authority));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("<not text>").to_owned();
            if !self.allows_origin(&origin) {
                return Err(Rejection::Origin(origin));
            }
        }
        Ok(())
    }

    fn allows_authority(&self, authority: &str) -> bool {
        let authority = authority.trim().to_lowercase();
        if self.names.contains(&authority) {
            return true;
        }
        let Some(host) = host_of(&authority) else {
            return false;
        };
        if self.names.contains(host) {
            return true;
        }
        match host.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback() || self.is_local_address(ip),
            Err(_) => false,
        }
    }

    fn allows_origin(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_lowercase();
        if self.origins.iter().any(|o| o == &origin) {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false; // includes the opaque origin "null"
        };
        if scheme != "http" && scheme != "https" {
            return false;
        }
        // An allowed origin entry without a port accepts any port.
        if let Some(host) = host_of(rest)
            && self
                .origins
                .iter()
                .any(|o| o == &format!("{scheme}://{host}"))
        {
            return true;
        }
        self.allows_authority(rest)
    }

    fn is_local_address(&self, ip: IpAddr) -> bool {
        let mut cache = self
            .local_addresses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.0.elapsed() > ADDRESS_CACHE {
            *cache = (Instant::now(), interface_addresses());
        }
        cache.1.contains(&ip)
    }
}

/// The host part of `host`, `host:port`, `[v6]` or `[v6]:port`.
fn host_of(authority: &str) -> Option<&str> {
    if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        let after = &rest[end + 1..];
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        return Some(&rest[..end]);
    }
    let host = match authority.rsplit_once(':') {
        // A bare IPv6 address without brackets has several colons.
        Some((host, port)) if !host.contains(':') => {
            port.parse::<u16>().ok()?;
            host
        }
        Some(_) => authority,
        None => authority,
    };
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn check(
        policy: &HostPolicy,
        host: Option<&str>,
        origin: Option<&str>,
    ) -> Result<(), Rejection> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).expect("header"));
        }
        if let Some(origin) = origin {
            headers.insert(
                header::ORIGIN,
                HeaderValue::from_str(origin).expect("header"),
            );
        }
        policy.check(&Uri::from_static("/mcp"), &headers)
    }

    fn policy() -> HostPolicy {
        HostPolicy::new(
            "kitchen",
            &["hark.example.lan".into(), "proxy:8443".into()],
            &["https://dashboard.example.com".into()],
        )
    }

    #[test]
    fn appliance_names_are_allowed() {
        let p = policy();
        for host in [
            "localhost",
            "localhost:7341",
            "127.0.0.1:7341",
            "[::1]:7341",
            "hark.local:7341",
            "HARK.LOCAL",
            "kitchen:7341",
            "kitchen.local",
            "hark.example.lan:80",
            "proxy:8443",
        ] {
            assert_eq!(check(&p, Some(host), None), Ok(()), "{host}");
        }
    }

    #[test]
    fn foreign_hosts_are_rejected() {
        let p = policy();
        for host in [
            "evil.example.com",
            "evil.example.com:7341",
            "proxy:9999",
            "10.255.255.254:7341",
            "hark.local.evil.com",
        ] {
            assert!(
                matches!(check(&p, Some(host), None), Err(Rejection::Host(_))),
                "{host}"
            );
        }
        assert_eq!(check(&p, None, None), Err(Rejection::MissingHost));
    }

    #[test]
    fn origins() {
        let p = policy();
        let ok = Some("localhost:7341");
        assert_eq!(check(&p, ok, Some("http://localhost:5173")), Ok(()));
        assert_eq!(check(&p, ok, Some("http://hark.local")), Ok(()));
        assert_eq!(check(&p, ok, Some("https://dashboard.example.com")), Ok(()));
        assert_eq!(
            check(&p, ok, Some("https://dashboard.example.com:8443")),
            Ok(())
        );
        for bad in [
            "http://evil.example.com",
            "null",
            "file://",
            "chrome-extension://abc",
            "http://localhost.evil.com",
        ] {
            assert!(
                matches!(check(&p, ok, Some(bad)), Err(Rejection::Origin(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn host_parsing() {
        assert_eq!(host_of("a:1"), Some("a"));
        assert_eq!(host_of("[::1]:80"), Some("::1"));
        assert_eq!(host_of("[::1]"), Some("::1"));
        assert_eq!(host_of("a:notaport"), None);
        assert_eq!(host_of("[::1]x"), None);
    }
}
