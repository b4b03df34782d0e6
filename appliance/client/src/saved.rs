//! The tokens `hark pair` was given, kept on the agent's machine for `hark
//! connect`, `hark status`, `hark listen` and `hark say`: one per appliance
//! host, in `$XDG_CONFIG_HOME/hark/tokens.json` (else
//! `~/.config/hark/tokens.json`), readable only by its owner and written
//! atomically, so an interrupted write never loses the others.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

pub const FILE: &str = "tokens.json";

#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    #[error("no home directory to keep tokens in: set HOME or XDG_CONFIG_HOME")]
    NoHome,
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a token file Hark wrote ({reason}); move it aside and pair again")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One appliance's token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Saved {
    pub token: String,
    /// The agent's name on the appliance.
    pub name: String,
    pub scopes: Vec<String>,
    /// RFC 3339.
    #[serde(default)]
    pub paired_at: String,
    #[serde(default)]
    pub tcp_port: Option<u16>,
    #[serde(default)]
    pub http_port: Option<u16>,
    /// HTTPS, when the appliance serves it: its port, and the file holding
    /// the appliance's CA certificate (beside this one).
    #[serde(default)]
    pub https_port: Option<u16>,
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default)]
    pub ca_sha256: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// By appliance host, as `hark pair` was given it (lower case, no port).
    appliances: BTreeMap<String, Saved>,
}

/// Where the file is.
pub fn path() -> Result<PathBuf, SavedError> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".config"))
        })
        .ok_or(SavedError::NoHome)?;
    Ok(base.join("hark").join(FILE))
}

/// The host part of `HOST`, `HOST:PORT`, `[v6]:PORT`, lower case: the key.
pub fn host_key(target: &str) -> String {
    let target = target.trim();
    let host = if let Some(rest) = target.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        match target.rsplit_once(':') {
            // One colon: HOST:PORT. More: a bare IPv6 address.
            Some((host, port)) if !host.contains(':') && port.parse::<u16>().is_ok() => host,
            _ => target,
        }
    };
    host.to_ascii_lowercase()
}

fn read(path: &Path) -> Result<File, SavedError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SavedError::Corrupt {
            path: path.to_owned(),
            reason: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(File::default()),
        Err(source) => Err(SavedError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The token kept for `target`'s host, if any.
pub fn lookup(target: &str) -> Result<Option<Saved>, SavedError> {
    let path = path()?;
    lookup_in(&path, target)
}

pub fn lookup_in(path: &Path, target: &str) -> Result<Option<Saved>, SavedError> {
    Ok(read(path)?.appliances.remove(&host_key(target)))
}

/// Keeps an appliance's CA certificate beside the tokens, as
/// `HOST-ca.pem`; returns its path.
pub fn store_ca(target: &str, pem: &str) -> Result<PathBuf, SavedError> {
    let dir = path()?.parent().map(Path::to_owned).unwrap_or_default();
    let file = dir.join(format!("{}-ca.pem", host_key(target).replace(':', "_")));
    let err = |source| SavedError::Write {
        path: file.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(err)?;
    hark_core::files::write_atomic(&dir, &file, pem.as_bytes()).map_err(err)?;
    Ok(file)
}

/// Keeps `saved` for `target`'s host (replacing an earlier one); returns
/// the file's path.
pub fn store(target: &str, saved: Saved) -> Result<PathBuf, SavedError> {
    let path = path()?;
    store_in(&path, target, saved)?;
    Ok(path)
}

pub fn store_in(path: &Path, target: &str, saved: Saved) -> Result<(), SavedError> {
    let mut file = read(path)?;
    file.appliances.insert(host_key(target), saved);
    let write_err = |source| SavedError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(write_err)?;
    let bytes =
        serde_json::to_vec_pretty(&file).map_err(|e| write_err(std::io::Error::other(e)))?;
    let mut bytes = bytes;
    bytes.push(b'\n');
    // Made unreadable to others before the token is in it.
    hark_core::files::write_atomic_mode(dir, path, &bytes, 0o600).map_err(write_err)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn saved(token: &str) -> Saved {
        Saved {
            token: token.into(),
            name: "laptop".into(),
            scopes: vec!["listen".into(), "speak".into()],
            paired_at: "2026-12-01T12:00:00Z".into(),
            tcp_port: Some(7340),
            http_port: Some(7341),
            https_port: None,
            ca_file: None,
            ca_sha256: None,
        }
    }

    #[test]
    fn hosts_are_keyed_without_their_port() {
        assert_eq!(host_key("Hark.local:7340"), "hark.local");
        assert_eq!(host_key("10.0.0.5"), "10.0.0.5");
        assert_eq!(host_key("[fe80::1]:7340"), "fe80::1");
        assert_eq!(host_key("fe80::1"), "fe80::1");
    }

    #[test]
    fn tokens_are_kept_per_host_privately_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hark").join(FILE);
        assert_eq!(lookup_in(&path, "hark.local").unwrap(), None);
        store_in(&path, "hark.local:7340", saved("a")).unwrap();
        store_in(&path, "kitchen.local", saved("b")).unwrap();
        store_in(&path, "HARK.local", saved("c")).unwrap();
        assert_eq!(lookup_in(&path, "hark.local").unwrap().unwrap().token, "c");
        assert_eq!(
            lookup_in(&path, "kitchen.local:1").unwrap().unwrap().token,
            "b"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1,
            "no temporary file left"
        );
        std::fs::write(&path, "{not json").unwrap();
        let e = lookup_in(&path, "hark.local").unwrap_err();
        assert!(e.to_string().contains("pair again"), "{e}");
    }
}
