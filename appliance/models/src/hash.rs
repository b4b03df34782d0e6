//! Checksums of downloaded and installed files, for the model store and
//! anything else that stores files the same way (the voice store).
//!
//! SHA-256 is what manifests record, so it is always computed. SHA-1 and
//! MD5 are computed on request, in the same pass over the file, because
//! that is what some publishers give: whisper.cpp publishes SHA-1 for its
//! models (models/README.md), piper's voice catalog (`voices.json`) MD5.
//! Checking against the publisher's own figure is worth a second hash.

use std::{
    fs::File,
    io::{self, BufWriter, Read, Write},
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
    /// SHA-1, lowercase hex, if it was asked for ([`Extra::sha1`]).
    pub sha1: Option<String>,
    /// MD5, lowercase hex, if it was asked for ([`Extra::md5`]).
    pub md5: Option<String>,
    /// Size in bytes.
    pub size: u64,
}

/// Which digests to compute besides SHA-256. Each costs another pass of
/// the CPU over the data (not of the disk), so only what will be checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extra {
    pub sha1: bool,
    pub md5: bool,
}

/// The digests asked for, fed in one pass.
pub struct Hasher {
    sha256: sha2::Sha256,
    sha1: Option<sha1::Sha1>,
    md5: Option<md5::Md5>,
    size: u64,
}

impl Hasher {
    pub fn new(extra: Extra) -> Self {
        Self {
            sha256: <sha2::Sha256 as sha2::Digest>::new(),
            sha1: extra.sha1.then(sha1::Sha1::new),
            md5: extra.md5.then(md5::Md5::new),
            size: 0,
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        sha2::Digest::update(&mut self.sha256, bytes);
        if let Some(sha1) = &mut self.sha1 {
            sha1.update(bytes);
        }
        if let Some(md5) = &mut self.md5 {
            md5.update(bytes);
        }
        self.size += bytes.len() as u64;
    }

    pub fn finish(self) -> Digests {
        Digests {
            sha256: hex(&sha2::Digest::finalize(self.sha256)),
            sha1: self.sha1.map(|h| hex(&h.finalize())),
            md5: self.md5.map(|h| hex(&h.finalize())),
            size: self.size,
        }
    }
}

/// Which side of a copy failed.
#[derive(Debug)]
pub enum CopyError {
    Read(io::Error),
    Write(io::Error),
}

/// Hashes a whole file (SHA-256 and size).
pub fn hash_file(path: &Path) -> io::Result<Digests> {
    hash_file_with(path, Extra::default())
}

/// Hashes a whole file with the `extra` digests too.
pub fn hash_file_with(path: &Path, extra: Extra) -> io::Result<Digests> {
    copy_hashed_with(&mut File::open(path)?, &mut io::sink(), extra).map_err(|e| match e {
        CopyError::Read(e) | CopyError::Write(e) => e,
    })
}

/// Copies `from` into `to`, hashing what passes through, so an import is
/// read once, not once to copy and again to hash.
pub fn copy_hashed(from: &mut impl Read, to: &mut impl Write) -> Result<Digests, CopyError> {
    copy_hashed_with(from, to, Extra::default())
}

fn copy_hashed_with(
    from: &mut impl Read,
    to: &mut impl Write,
    extra: Extra,
) -> Result<Digests, CopyError> {
    let mut hasher = Hasher::new(extra);
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

/// Copies the file `src` to a new file `dest` (replacing one there),
/// hashing it on the way, and syncs `dest` to disk before returning, so a
/// rename of `dest` into place afterwards never exposes a file whose
/// content is not yet durable. On failure `dest` may be left half written:
/// callers write to a temporary name and delete it.
pub fn copy_file_hashed(src: &Path, dest: &Path) -> Result<Digests, CopyError> {
    let mut from = File::open(src).map_err(CopyError::Read)?;
    let mut to = BufWriter::new(File::create(dest).map_err(CopyError::Write)?);
    let digests = copy_hashed(&mut from, &mut to)?;
    let file = to
        .into_inner()
        .map_err(|e| CopyError::Write(e.into_error()))?;
    file.sync_all().map_err(CopyError::Write)?;
    Ok(digests)
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
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
        let mut h = Hasher::new(Extra {
            sha1: true,
            md5: true,
        });
        h.update(b"a");
        h.update(b"bc");
        let d = h.finish();
        assert_eq!(
            d.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            d.sha1.as_deref(),
            Some("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
        // RFC 1321's test vector for "abc".
        assert_eq!(d.md5.as_deref(), Some("900150983cd24fb0d6963f7d28e17f72"));
        assert_eq!(d.size, 3);
        let plain = hash_of(b"abc", Extra::default());
        assert_eq!((plain.sha1, plain.md5), (None, None));
    }

    #[test]
    fn copy_hashes_what_it_copies() {
        let data: Vec<u8> = (0..(CHUNK * 2 + 17)).map(|i| (i * 7) as u8).collect();
        let mut out = Vec::new();
        let d = copy_hashed(&mut data.as_slice(), &mut out).unwrap();
        assert_eq!(out, data);
        assert_eq!(d, hash_of(&data, Extra::default()));
    }

    fn hash_of(data: &[u8], extra: Extra) -> Digests {
        let mut h = Hasher::new(extra);
        h.update(data);
        h.finish()
    }

    #[test]
    fn hex_digests_are_checked() {
        assert_eq!(normalise_hex(" ABCdef01 ", 8).as_deref(), Some("abcdef01"));
        assert_eq!(normalise_hex("abcdef0", 8), None);
        assert_eq!(normalise_hex("abcdefg1", 8), None);
        assert_eq!(hex(&[0x00, 0x9f, 0xff]), "009fff");
    }
}
