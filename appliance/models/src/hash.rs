//! Checksums of model files.
//!
//! SHA-256 is what the manifest records. SHA-1 is computed alongside
//! because whisper.cpp publishes SHA-1 for its models (models/README.md),
//! and checking against the publisher's own figure is worth a second hash
//! in the same pass over the file.

use std::{
    fs::File,
    io::{self, Read, Write},
    path::Path,
};

use sha1::Digest as _;

/// Read and hash in pieces of this size: large enough for sequential SD
/// card reads, small enough not to matter on a 1 GB board.
pub(crate) const CHUNK: usize = 256 * 1024;

/// The checksums and size of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    /// SHA-256, lowercase hex.
    pub sha256: String,
    /// SHA-1, lowercase hex.
    pub sha1: String,
    /// Size in bytes.
    pub size: u64,
}

/// Both hashes, fed in one pass.
pub(crate) struct Hasher {
    sha256: sha2::Sha256,
    sha1: sha1::Sha1,
    size: u64,
}

impl Hasher {
    pub(crate) fn new() -> Self {
        Self {
            sha256: <sha2::Sha256 as sha2::Digest>::new(),
            sha1: sha1::Sha1::new(),
            size: 0,
        }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        sha2::Digest::update(&mut self.sha256, bytes);
        self.sha1.update(bytes);
        self.size += bytes.len() as u64;
    }

    pub(crate) fn finish(self) -> Digests {
        Digests {
            sha256: hex(&sha2::Digest::finalize(self.sha256)),
            sha1: hex(&self.sha1.finalize()),
            size: self.size,
        }
    }
}

/// Which side of a copy failed.
#[derive(Debug)]
pub(crate) enum CopyError {
    Read(io::Error),
    Write(io::Error),
}

/// Hashes a whole file.
pub(crate) fn hash_file(path: &Path) -> io::Result<Digests> {
    copy_hashed(&mut File::open(path)?, &mut io::sink()).map_err(|e| match e {
        CopyError::Read(e) | CopyError::Write(e) => e,
    })
}

/// Copies `from` into `to`, hashing what passes through, so an import is
/// read once, not once to copy and again to hash.
pub(crate) fn copy_hashed(from: &mut impl Read, to: &mut impl Write) -> Result<Digests, CopyError> {
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n]).map_err(CopyError::Write)?;
    }
    Ok(hasher.finish())
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// `s` as a lowercase hex digest of `len` digits, or `None` if it is not
/// one. Upper case is accepted (and lowered) because that is how some
/// tools print checksums.
pub fn normalise_hex(s: &str, len: usize) -> Option<String> {
    let s = s.trim();
    (s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // FIPS 180 test vectors for "abc".
        let mut h = Hasher::new();
        h.update(b"a");
        h.update(b"bc");
        let d = h.finish();
        assert_eq!(
            d.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(d.size, 3);
    }

    #[test]
    fn copy_hashes_what_it_copies() {
        let data: Vec<u8> = (0..(CHUNK * 2 + 17)).map(|i| (i * 7) as u8).collect();
        let mut out = Vec::new();
        let d = copy_hashed(&mut data.as_slice(), &mut out).unwrap();
        assert_eq!(out, data);
        let mut h = Hasher::new();
        h.update(&data);
        assert_eq!(d, h.finish());
    }

    #[test]
    fn hex_digests_are_checked() {
        assert_eq!(normalise_hex(" ABCdef01 ", 8).as_deref(), Some("abcdef01"));
        assert_eq!(normalise_hex("abcdef0", 8), None);
        assert_eq!(normalise_hex("abcdefg1", 8), None);
        assert_eq!(hex(&[0x00, 0x9f, 0xff]), "009fff");
    }
}
