//! HTTPS and WSS (`[mcp.https]`): the appliance is its own small
//! certificate authority. At first start it makes a CA key and certificate
//! (kept in `STATE_DIR/tls/`, the key readable only by the service); at
//! every start it issues itself a fresh server certificate from that CA
//! for its names and current addresses. Agents trust the CA once (`hark
//! pair` saves it and prints its SHA-256 fingerprint), so a new address
//! from DHCP or a restart never asks them to trust anything again.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber, date_time_ymd,
};
use sha2::{Digest, Sha256};
use tokio_rustls::{
    TlsAcceptor,
    rustls::{
        ServerConfig,
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, pem::PemObject},
    },
};

pub const CA_CERT: &str = "ca.pem";
pub const CA_KEY: &str = "ca.key";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a key or certificate Hark made ({reason}); move the tls directory aside to make new ones (agents then trust the new CA)"
    )]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot make a certificate: {0}")]
    Make(#[from] rcgen::Error),
    #[error("TLS: {0}")]
    Rustls(#[from] tokio_rustls::rustls::Error),
}

/// The appliance's TLS: what serves, and what agents trust.
pub struct Tls {
    pub acceptor: TlsAcceptor,
    /// The CA certificate agents trust, PEM.
    pub ca_pem: String,
    /// SHA-256 of the CA certificate (DER), colon-separated hex.
    pub fingerprint: String,
    pub ca_path: PathBuf,
}

/// SHA-256 of `der` as `AB:CD:…`.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The CA's parameters, the same every time for the same key: a CA
/// certificate made again would chain the same certificates.
fn ca_params(key: &KeyPair) -> CertificateParams {
    let id = Sha256::digest(key.public_key_raw());
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(
        DnType::CommonName,
        format!(
            "Hark appliance CA {:02x}{:02x}{:02x}{:02x}",
            id[0], id[1], id[2], id[3]
        ),
    );
    name.push(DnType::OrganizationName, "Hark");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.serial_number = Some(SerialNumber::from_slice(&id[..8]));
    // Fixed dates: a board without a clock may start in 1970 until NTP
    // answers, and must not make a certificate that is not valid yet.
    params.not_before = date_time_ymd(2025, 1, 1);
    params.not_after = date_time_ymd(2045, 1, 1);
    params
}

fn read(path: &Path) -> Result<Option<String>, TlsError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TlsError::Io {
            action: "read",
            path: path.to_owned(),
            source,
        }),
    }
}

/// Writes `text` to `path` with `mode`, atomically: a crash leaves the
/// old file or the new, never half of one.
fn write(path: &Path, text: &str, mode: u32) -> Result<(), TlsError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    hark_core::files::write_atomic_mode(dir, path, text.as_bytes(), mode).map_err(|source| {
        TlsError::Io {
            action: "write",
            path: path.to_owned(),
            source,
        }
    })
}

/// Opens (or makes) the CA in `dir` and issues the server certificate for
/// `names` and `addresses`. Blocking: call off the runtime's threads.
pub fn open(dir: &Path, names: &[String], addresses: &[IpAddr]) -> Result<Tls, TlsError> {
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| TlsError::Io {
                action: "create",
                path: dir.to_owned(),
                source,
            })?;
    }
    let key_path = dir.join(CA_KEY);
    let cert_path = dir.join(CA_CERT);
    let corrupt = |path: &Path, reason: String| TlsError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let ca_key = match read(&key_path)? {
        Some(pem) => KeyPair::from_pem(&pem).map_err(|e| corrupt(&key_path, e.to_string()))?,
        None => {
            let key = KeyPair::generate()?;
            write(&key_path, &key.serialize_pem(), 0o600)?;
            tracing::info!(path = %key_path.display(), "made the appliance's TLS certificate authority");
            key
        }
    };
    let params = ca_params(&ca_key);
    let ca_pem = match read(&cert_path)? {
        Some(pem) => pem,
        None => {
            let pem = params.self_signed(&ca_key)?.pem();
            write(&cert_path, &pem, 0o644)?;
            pem
        }
    };
    let ca_der = CertificateDer::from_pem_slice(ca_pem.as_bytes())
        .map_err(|e| corrupt(&cert_path, e.to_string()))?;
    let issuer = Issuer::new(params, &ca_key);

    let mut leaf = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(
        DnType::CommonName,
        names
            .first()
            .cloned()
            .unwrap_or_else(|| "hark.local".into()),
    );
    leaf.distinguished_name = name;
    for n in names {
        leaf.subject_alt_names
            .push(SanType::DnsName(n.clone().try_into()?));
    }
    for a in addresses {
        leaf.subject_alt_names.push(SanType::IpAddress(*a));
    }
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.use_authority_key_identifier_extension = true;
    leaf.not_before = date_time_ymd(2025, 1, 1);
    leaf.not_after = date_time_ymd(2045, 1, 1);
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;

    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf_cert.der().clone(), ca_der.clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )?;
    // HTTP/1.1 only: the WebSocket upgrade is an HTTP/1.1 request.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        fingerprint: fingerprint(&ca_der),
        ca_pem,
        ca_path: cert_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["kitchen.local".to_owned(), "localhost".to_owned()];
        let addresses = vec!["127.0.0.1".parse().unwrap()];
        let first = open(dir.path(), &names, &addresses).unwrap();
        let again = open(dir.path(), &names, &addresses).unwrap();
        assert_eq!(
            first.fingerprint, again.fingerprint,
            "the same CA after a restart"
        );
        assert_eq!(first.fingerprint.len(), 32 * 3 - 1);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(CA_KEY))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.path().join(CA_KEY), "not a key").unwrap();
        let e = open(dir.path(), &names, &addresses).err().unwrap();
        assert!(
            e.to_string().contains("move the tls directory aside"),
            "{e}"
        );
    }
}
