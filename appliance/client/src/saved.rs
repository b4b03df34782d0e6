//! The tokens `hark pair` was given, kept on the agent's machine for `hark
//! connect`, `hark status`, `hark listen` and `hark say`: one per appliance,
//! in `$XDG_CONFIG_HOME/hark/tokens.json` (else `~/.config/hark/tokens.json`),
//! readable only by its owner and written atomically, so an interrupted
//! write never loses the others.
//!
//! An appliance is its host *and* its raw TCP port: two Harks may share a
//! host (one installed on a laptop, another started on a port of its own
//! for a test), and a token one issued means nothing to the other. Files
//! written before keyed by the host alone; their entries are read as the
//! host and the port the pairing answered with.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::target::{self, has_port, host_key};

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
    /// By appliance: `host:port` (lower case; `[v6]:port`), the port its
    /// raw TCP transport's. Older files: the host alone.
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

/// The key `target` (`HOST`, `HOST:PORT`, `[v6]:PORT`; the port the raw
/// TCP transport's, 7340 unless given) is kept under.
pub fn appliance_key(target: &str) -> String {
    target::join(&host_key(target), target::port(target))
}

/// An entry of a file written before ports were part of the key: its host,
/// and the TCP port the pairing answered with.
fn legacy_key(host: &str, saved: &Saved) -> String {
    target::join(
        &host_key(host),
        saved.tcp_port.unwrap_or(target::DEFAULT_PORT),
    )
}

fn read(path: &Path) -> Result<File, SavedError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let file: File = serde_json::from_slice(&bytes).map_err(|e| SavedError::Corrupt {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
            let appliances = file
                .appliances
                .into_iter()
                .map(|(key, saved)| {
                    let key = if has_port(&key) {
                        appliance_key(&key)
                    } else {
                        legacy_key(&key, &saved)
                    };
                    (key, saved)
                })
                .collect();
            Ok(File { appliances })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(File::default()),
        Err(source) => Err(SavedError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// The token kept in `path` for the appliance at `target`, if any.
pub fn lookup_in(path: &Path, target: &str) -> Result<Option<Saved>, SavedError> {
    Ok(read(path)?.appliances.remove(&appliance_key(target)))
}

/// Keeps an appliance's CA certificate beside the tokens, as
/// `HOST_PORT-ca.pem`; returns its path.
pub fn store_ca(target: &str, pem: &str) -> Result<PathBuf, SavedError> {
    let dir = path()?.parent().map(Path::to_owned).unwrap_or_default();
    let file = dir.join(format!(
        "{}-ca.pem",
        appliance_key(target).replace([':', '[', ']'], "_")
    ));
    let err = |source| SavedError::Write {
        path: file.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(err)?;
    hark_core::files::write_atomic(&dir, &file, pem.as_bytes()).map_err(err)?;
    Ok(file)
}

/// Keeps `saved` for the appliance at `target` (replacing an earlier one);
/// returns the file's path.
pub fn store(target: &str, saved: Saved) -> Result<PathBuf, SavedError> {
    let path = path()?;
    store_in(&path, target, saved)?;
    Ok(path)
}

pub fn store_in(path: &Path, target: &str, saved: Saved) -> Result<(), SavedError> {
    let mut file = read(path)?;
    file.appliances.insert(appliance_key(target), saved);
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
    fn appliances_are_keyed_by_host_and_port() {
        assert_eq!(appliance_key("Hark.local"), "hark.local:7340");
        assert_eq!(appliance_key("hark.local:7340"), "hark.local:7340");
        assert_eq!(appliance_key("127.0.0.1:7440"), "127.0.0.1:7440");
        assert_eq!(appliance_key("fe80::1"), "[fe80::1]:7340");
        assert_eq!(appliance_key("[FE80::1]:7440"), "[fe80::1]:7440");
    }

    #[test]
    fn two_appliances_on_one_host_keep_their_own_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hark").join(FILE);
        store_in(&path, "127.0.0.1", saved("kitchen")).unwrap();
        assert_eq!(
            lookup_in(&path, "127.0.0.1:7340").unwrap().unwrap().token,
            "kitchen"
        );
        assert_eq!(lookup_in(&path, "127.0.0.1:7440").unwrap(), None);
        store_in(&path, "127.0.0.1:7440", saved("test")).unwrap();
        assert_eq!(
            lookup_in(&path, "127.0.0.1").unwrap().unwrap().token,
            "kitchen"
        );
        assert_eq!(
            lookup_in(&path, "127.0.0.1:7440").unwrap().unwrap().token,
            "test"
        );
    }

    #[test]
    fn a_file_keyed_by_host_alone_is_read_with_the_paired_port() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let mut other_port = saved("b");
        other_port.tcp_port = Some(7440);
        let mut no_port = saved("c");
        no_port.tcp_port = None;
        let old = serde_json::json!({"appliances": {
            "hark.local": saved("a"), "kitchen.local": other_port, "fe80::1": no_port}});
        std::fs::write(&path, old.to_string()).unwrap();
        assert_eq!(lookup_in(&path, "hark.local").unwrap().unwrap().token, "a");
        assert_eq!(lookup_in(&path, "kitchen.local").unwrap(), None);
        assert_eq!(
            lookup_in(&path, "kitchen.local:7440")
                .unwrap()
                .unwrap()
                .token,
            "b"
        );
        assert_eq!(lookup_in(&path, "fe80::1").unwrap().unwrap().token, "c");
        // Written back under the new keys, the others kept.
        store_in(&path, "hark.local:7441", saved("d")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\"kitchen.local:7440\"") && text.contains("\"[fe80::1]:7340\""),
            "{text}"
        );
        assert_eq!(lookup_in(&path, "hark.local").unwrap().unwrap().token, "a");
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
            lookup_in(&path, "kitchen.local:7340")
                .unwrap()
                .unwrap()
                .token,
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
