//! `GET /hark-connect/<wheel>`: the `hark-connect` bridge
//! (appliance/bridge/python) as a wheel, made here from its sources (built
//! into the binary), so a Mac or a Windows PC with Python installs it from
//! the appliance it will talk to — `pipx install
//! http://hark.local:7341/hark-connect/hark_connect-0.1.0-py3-none-any.whl`
//! — with no package index involved. No token: it is the public source
//! every checkout has, and nothing about this appliance.
//!
//! A wheel is a zip of the package's files and its `.dist-info` (METADATA,
//! WHEEL, entry_points.txt, RECORD with each file's SHA-256); pip checks
//! RECORD's hashes on install. The zip is stored, not deflated: the package
//! is 20 KB and pip reads either.

use std::sync::OnceLock;

use base64::Engine as _;
use sha2::{Digest, Sha256};

const PYPROJECT: &str = include_str!("../../../bridge/python/pyproject.toml");
const README: &str = include_str!("../../../bridge/python/README.md");
const SOURCES: [(&str, &str); 2] = [
    (
        "hark_connect/__init__.py",
        include_str!("../../../bridge/python/src/hark_connect/__init__.py"),
    ),
    (
        "hark_connect/__main__.py",
        include_str!("../../../bridge/python/src/hark_connect/__main__.py"),
    ),
];

/// Where it is served.
pub const PREFIX: &str = "/hark-connect/";

/// The package's version, as its `pyproject.toml` says.
fn version() -> &'static str {
    PYPROJECT
        .lines()
        .find_map(|line| {
            let value = line.strip_prefix("version = ")?;
            Some(value.trim().trim_matches('"'))
        })
        .unwrap_or("0")
}

/// The wheel's file name: pip reads the name, version and tags from it.
pub fn file_name() -> String {
    format!("hark_connect-{}-py3-none-any.whl", version())
}

/// The wheel, made once.
pub fn wheel() -> &'static [u8] {
    static WHEEL: OnceLock<Vec<u8>> = OnceLock::new();
    WHEEL.get_or_init(build)
}

fn build() -> Vec<u8> {
    let version = version();
    let info = format!("hark_connect-{version}.dist-info");
    let description = PYPROJECT
        .lines()
        .find_map(|l| l.strip_prefix("description = "))
        .map_or("", |d| d.trim().trim_matches('"'));
    let metadata = format!(
        "Metadata-Version: 2.1\nName: hark-connect\nVersion: {version}\nSummary: {description}\nLicense: MIT OR Apache-2.0\nRequires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n{README}"
    );
    let mut files: Vec<(String, Vec<u8>)> = SOURCES
        .iter()
        .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec()))
        .collect();
    files.push((format!("{info}/METADATA"), metadata.into_bytes()));
    files.push((
        format!("{info}/WHEEL"),
        b"Wheel-Version: 1.0\nGenerator: hark\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec(),
    ));
    files.push((
        format!("{info}/entry_points.txt"),
        b"[console_scripts]\nhark-connect = hark_connect:main\n".to_vec(),
    ));
    let mut record = String::new();
    for (path, bytes) in &files {
        let digest = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(bytes));
        record.push_str(&format!("{path},sha256={digest},{}\n", bytes.len()));
    }
    record.push_str(&format!("{info}/RECORD,,\n"));
    files.push((format!("{info}/RECORD"), record.into_bytes()));
    zip(&files)
}

/// A zip archive of `files`, stored (no compression).
fn zip(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    // 1980-01-01 00:00, zip's earliest time: the same bytes every build.
    let (time, date) = (0u16, (1 << 5) | 1);
    for (name, bytes) in files {
        let crc = crc32fast::hash(bytes);
        let offset = out.len() as u32;
        let size = bytes.len() as u32;
        let name_len = name.len() as u16;
        // Local file header.
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        for v in [20u16, 0, 0, time, date] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, size, size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&name_len.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(bytes);
        // Its central directory entry.
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        for v in [20u16, 20, 0, 0, time, date] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [crc, size, size] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        for v in [name_len, 0, 0, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        // External attributes: a regular file, rw-r--r--.
        central.extend_from_slice(&(0o100_644u32 << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let start = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    let count = files.len() as u16;
    for v in [0u16, 0, count, count] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wheel_names_its_version_and_lists_every_file() {
        assert_eq!(version(), "0.1.0");
        assert_eq!(file_name(), "hark_connect-0.1.0-py3-none-any.whl");
        let wheel = wheel();
        assert_eq!(&wheel[..4], b"PK\x03\x04");
        let text = String::from_utf8_lossy(wheel);
        for name in [
            "hark_connect/__init__.py",
            "hark_connect-0.1.0.dist-info/RECORD",
            "hark_connect-0.1.0.dist-info/entry_points.txt",
        ] {
            assert!(text.contains(name), "{name}");
        }
        assert!(text.contains("hark-connect = hark_connect:main"));
    }
}
