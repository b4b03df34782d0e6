//! How the CLI names an appliance: `HOST`, `HOST:PORT`, `[v6]:PORT`, the
//! port being the raw TCP transport's.

/// Port of the raw TCP transport.
pub const DEFAULT_PORT: u16 = 7340;

/// Whether `target` ends in a port (`HOST:PORT`, `[v6]:PORT`); a bare IPv6
/// address does not.
pub fn has_port(target: &str) -> bool {
    match target.rsplit_once(':') {
        Some((host, port)) => {
            port.parse::<u16>().is_ok() && (!host.contains(':') || host.ends_with(']'))
        }
        None => false,
    }
}

/// `HOST` → `HOST:7340`; `HOST:PORT` and `[v6]:PORT` stay as they are.
pub fn with_default_port(target: &str) -> String {
    if has_port(target) {
        target.to_owned()
    } else {
        join(
            target.trim_start_matches('[').trim_end_matches(']'),
            DEFAULT_PORT,
        )
    }
}

/// The host part of `HOST`, `HOST:PORT`, `[v6]:PORT`, lower case.
pub fn host_key(target: &str) -> String {
    let target = target.trim();
    let host = if let Some(rest) = target.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else if has_port(target) {
        target.rsplit_once(':').map_or(target, |(host, _)| host)
    } else {
        target
    };
    host.to_ascii_lowercase()
}

/// The port `target` names, else the raw TCP transport's default.
pub fn port(target: &str) -> u16 {
    let target = target.trim();
    if has_port(target) {
        target
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .unwrap_or(DEFAULT_PORT)
    } else {
        DEFAULT_PORT
    }
}

/// `host` as it stands before a port or in a URL: an IPv6 address in
/// brackets.
pub fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// `host` and `port` as one target (`[v6]:PORT` for an IPv6 address).
pub fn join(host: &str, port: u16) -> String {
    format!("{}:{port}", bracketed(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_split_into_host_and_port() {
        assert_eq!(host_key("Hark.local:7340"), "hark.local");
        assert_eq!(host_key("10.0.0.5"), "10.0.0.5");
        assert_eq!(host_key("[fe80::1]:7340"), "fe80::1");
        assert_eq!(host_key("fe80::1"), "fe80::1");
        assert_eq!(port("hark.local:7440"), 7440);
        assert_eq!(port("hark.local"), DEFAULT_PORT);
        assert_eq!(port("[fe80::1]:7440"), 7440);
        assert_eq!(port("fe80::1"), DEFAULT_PORT);
        assert_eq!(with_default_port("fe80::1"), "[fe80::1]:7340");
        assert_eq!(with_default_port("[fe80::1]"), "[fe80::1]:7340");
        assert_eq!(with_default_port("hark.local"), "hark.local:7340");
        assert_eq!(with_default_port("hark.local:9000"), "hark.local:9000");
        assert_eq!(with_default_port("[::1]:9"), "[::1]:9");
        assert_eq!(join("fe80::1", 1), "[fe80::1]:1");
        assert_eq!(join("hark.local", 1), "hark.local:1");
    }
}
