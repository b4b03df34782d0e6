//! `manifest.json`: what the store holds.
//!
//! ```json
//! {
//!   "version": 1,
//!   "models": [
//!     {
//!       "name": "tiny.en-q8_0",
//!       "file": "ggml-tiny.en-q8_0.bin",
//!       "sha256": "5bc2b386…",
//!       "size": 43550795,
//!       "language": "en",
//!       "quantisation": "q8_0",
//!       "source": "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-tiny.en-q8_0.bin",
//!       "added": "2026-05-01T12:00:00Z"
//!     }
//!   ]
//! }
//! ```
//!
//! The file is replaced atomically (a temporary file in the same
//! directory, fsync, rename, fsync of the directory), so a reader sees the
//! old manifest or the new one, never half of one. A missing manifest is
//! an empty store. A manifest that does not parse, or names files outside
//! the store, is an error naming the file: it is never rewritten or
//! wiped, since it is the only record of where the models came from.

use std::{
    collections::BTreeMap,
    fs::{self, File},
    io::{self, Write},
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

use crate::{
    hash::normalise_hex,
    name::{NameProblem, check_name},
};

/// The manifest's file name inside the models directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The manifest format this crate reads and writes.
pub const MANIFEST_VERSION: u32 = 1;

/// The languages a whisper model transcribes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// English only (the `.en` models).
    En,
    /// The 99 languages of multilingual whisper.
    Multilingual,
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Language::En => "en",
            Language::Multilingual => "multilingual",
        })
    }
}

/// One installed model, as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelEntry {
    /// The model's name in the store, e.g. `tiny.en-q8_0`.
    pub name: String,
    /// Its file name inside the models directory (`ggml-<name>.bin`).
    pub file: String,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
    /// Size of the file in bytes.
    pub size: u64,
    /// `en` or `multilingual`, read from the file's vocabulary size.
    pub language: Language,
    /// Weight type read from the file's header: `f16`, `f32`, `q8_0`,
    /// `q5_0`, `q5_1`, `q4_0`…
    pub quantisation: String,
    /// Where it came from: the URL, or `imported from <path>`.
    pub source: String,
    /// When it was added, RFC 3339 in UTC (`2026-05-01T12:00:00Z`).
    pub added: String,
}

/// What is wrong with a manifest file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestProblem {
    #[error("it is not valid manifest JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("it is format version {0}; this hark reads version {MANIFEST_VERSION}")]
    Version(u32),
    #[error("the entry `{name}` has an invalid name: {problem}")]
    Name { name: String, problem: NameProblem },
    #[error("the entry `{name}` names the file `{file}`, which is not a plain file name")]
    File { name: String, file: String },
    #[error("the model `{0}` is listed twice")]
    Duplicate(String),
    #[error("the entry `{name}` has an invalid sha256 `{sha256}`")]
    Sha256 { name: String, sha256: String },
}

/// Why the manifest could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error(
        "the model manifest {path} is unusable: {problem}; it was left untouched, fix it or move it aside"
    )]
    Corrupt {
        path: PathBuf,
        #[source]
        problem: ManifestProblem,
    },
    #[error("cannot read the model manifest {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write the model manifest {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

#[derive(Serialize, Deserialize)]
struct ManifestFile {
    version: u32,
    models: Vec<ModelEntry>,
}

/// The manifest in memory, keyed by model name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) models: BTreeMap<String, ModelEntry>,
}

impl Manifest {
    /// Reads `dir/manifest.json`; a missing file is an empty manifest.
    pub(crate) fn load(dir: &Path) -> Result<Self, ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => return Err(ManifestError::Read { path, source }),
        };
        Self::parse(&bytes).map_err(|problem| ManifestError::Corrupt { path, problem })
    }

    fn parse(bytes: &[u8]) -> Result<Self, ManifestProblem> {
        let file: ManifestFile = serde_json::from_slice(bytes)?;
        if file.version != MANIFEST_VERSION {
            return Err(ManifestProblem::Version(file.version));
        }
        let mut models = BTreeMap::new();
        for entry in file.models {
            // The manifest decides which files `remove` deletes, so a
            // hand-edited `"file": "../../etc/passwd"` must not load.
            if let Err(problem) = check_name(&entry.name) {
                return Err(ManifestProblem::Name {
                    name: entry.name,
                    problem,
                });
            }
            if check_name(&entry.file).is_err() {
                return Err(ManifestProblem::File {
                    name: entry.name,
                    file: entry.file,
                });
            }
            if normalise_hex(&entry.sha256, 64).as_deref() != Some(entry.sha256.as_str()) {
                return Err(ManifestProblem::Sha256 {
                    name: entry.name,
                    sha256: entry.sha256,
                });
            }
            if models.contains_key(&entry.name) {
                return Err(ManifestProblem::Duplicate(entry.name));
            }
            models.insert(entry.name.clone(), entry);
        }
        Ok(Self { models })
    }

    /// Replaces `dir/manifest.json` atomically.
    pub(crate) fn save(&self, dir: &Path) -> Result<(), ManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let file = ManifestFile {
            version: MANIFEST_VERSION,
            models: self.models.values().cloned().collect(),
        };
        let mut json = match serde_json::to_vec_pretty(&file) {
            Ok(json) => json,
            // Serialising strings and integers cannot fail; if it ever
            // does, report it as a write error rather than panic.
            Err(e) => {
                return Err(ManifestError::Write {
                    path,
                    source: io::Error::other(e),
                });
            }
        };
        json.push(b'\n');
        write_atomic(dir, &path, &json).map_err(|source| ManifestError::Write { path, source })
    }
}

/// Writes `bytes` to `path` through a temporary file in `dir`: a crash
/// leaves the old file or the new one, never a torn one. The voice store
/// writes its manifest with it too.
pub fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_mode(dir, path, bytes, 0o666)
}

/// [`write_atomic`], the new file made with permission bits `mode` (less
/// the umask) before anything is in it: 0o600 for secrets.
pub fn write_atomic_mode(dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One temporary name per process, so two writers never share one.
    let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes a rename in `dir` durable: the new name is only on disk once the
/// directory itself is synced.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Now, RFC 3339 in UTC.
pub fn now_rfc3339() -> String {
    // A clock before 1970 is a broken clock, not a reason to fail an
    // install; the epoch is recorded instead.
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// Unix seconds as RFC 3339 in UTC, without a date-time crate: Howard
/// Hinnant's `civil_from_days`.
pub fn rfc3339(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    fn entry(name: &str) -> ModelEntry {
        ModelEntry {
            name: name.into(),
            file: format!("ggml-{name}.bin"),
            sha256: "ab".repeat(32),
            size: 1,
            language: Language::En,
            quantisation: "f16".into(),
            source: "test".into(),
            added: rfc3339(0),
        }
    }

    fn json(models: &[ModelEntry]) -> Vec<u8> {
        serde_json::to_vec(&ManifestFile {
            version: MANIFEST_VERSION,
            models: models.to_vec(),
        })
        .unwrap()
    }

    #[test]
    fn entries_that_reach_outside_the_store_are_refused() {
        let mut e = entry("tiny");
        e.file = "../../etc/passwd".into();
        assert!(matches!(
            Manifest::parse(&json(&[e])),
            Err(ManifestProblem::File { .. })
        ));
        let mut e = entry("tiny");
        e.name = "../x".into();
        assert!(matches!(
            Manifest::parse(&json(&[e])),
            Err(ManifestProblem::Name { .. })
        ));
    }

    #[test]
    fn other_inconsistencies_are_refused() {
        assert!(matches!(
            Manifest::parse(&json(&[entry("a"), entry("a")])),
            Err(ManifestProblem::Duplicate(n)) if n == "a"
        ));
        let mut e = entry("a");
        e.sha256 = "AB".repeat(32);
        assert!(matches!(
            Manifest::parse(&json(&[e])),
            Err(ManifestProblem::Sha256 { .. })
        ));
        assert!(matches!(
            Manifest::parse(br#"{"version": 2, "models": []}"#),
            Err(ManifestProblem::Version(2))
        ));
        assert!(matches!(
            Manifest::parse(b"{\"version\": 1, \"models\": [{\"name\": 3}]}"),
            Err(ManifestProblem::Json(_))
        ));
    }
}
