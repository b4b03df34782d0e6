//! The voice store: the piper voices the appliance can speak with, in one
//! directory (by default [`DEFAULT_DIR`], `/var/lib/hark/voices`) with a
//! manifest recording where each came from and its checksums.
//!
//! The daemon reads from it ([`VoiceStore::get`]); the CLI manages it:
//!
//! | command | call |
//! |---|---|
//! | `hark voices list` | [`VoiceStore::list`] (installed, the [`catalog`] not installed, problems) |
//! | `hark voices install <id>` | [`VoiceStore::install_url`] with a catalog id (either spelling) |
//! | `hark voices install <url> [--sha256 <hex>]` | [`VoiceStore::install_request`] with [`VoiceRequest::url`] |
//! | `hark voices install <file.onnx> [--json <file>]` | [`VoiceStore::install_files_with`] |
//! | `hark voices remove <id>` | [`VoiceStore::remove`] |
//!
//! # The directory
//!
//! | file | what |
//! |---|---|
//! | `manifest.json` | one entry per installed voice |
//! | `<id>.onnx`, `<id>.onnx.json` | an installed voice: piper's own names, so piper and `appliance/setup-voices` use the same directory |
//! | `<id>.onnx.part`, `<id>.onnx.json.part` | downloads in progress; the next install resumes them |
//! | `.*` | download records and temporary files |
//!
//! A pair of `<id>.onnx` and `<id>.onnx.json` that the manifest does not
//! list (what `appliance/setup-voices` writes, or files copied by hand) is
//! validated, hashed and *adopted* into the manifest the next time the
//! store is opened or read; a pair that fails validation is listed as a
//! problem instead, never used. Every operation re-reads the directory and
//! the manifest, so the daemon sees what the CLI installed. Writers are not
//! coordinated: run one `hark voices` command at a time.
//!
//! Files are only put in place by renames within the directory and the
//! manifest is replaced atomically, so a crash leaves the old state or the
//! new one, at worst with files the next open adopts or reports. A voice is
//! two files, though, and two renames are not one: a reader that looks
//! while a voice is being *replaced* can see the new `.onnx` with the old
//! `.onnx.json` for that instant.
//!
//! # Validation
//!
//! Nothing is installed without passing [`VoiceConfig::from_path`] (the
//! config, with errors naming the field) and [`check_onnx`] (the model is
//! an ONNX protobuf whose graph takes piper's inputs). ONNX Runtime is not
//! loaded: the store must work in the CLI and on a machine without it.
//!
//! # Downloads
//!
//! Downloads reuse the model store's machinery ([`hark_models::PartFile`]):
//! blocking HTTP(S), resume with range requests, size and checksums
//! checked (the catalog gives size and MD5 for every file, SHA-256 for
//! joe), a progress bar. The config is fetched first: it is small, and a
//! voice Hark cannot use is refused before its model is downloaded. Call
//! from a thread that may block, never from the async runtime.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt, fs,
    io::{self, BufRead, BufReader, Read, Seek},
    path::{Path, PathBuf},
};

use hark_models::{
    Expected, FetchError, FetchOptions, NameProblem, PartFile, Partial, Progress, Verification,
    check_name,
    fetch::{check_url, parse_sha256},
    hash::{self, CopyError, Digests, normalise_hex},
    manifest::{now_rfc3339, sync_dir, write_atomic},
};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::{
    catalog::{self, CatalogVoice, id_key},
    voice::{VoiceConfig, VoiceError},
};

/// Where the appliance keeps its voices.
pub const DEFAULT_DIR: &str = "/var/lib/hark/voices";
/// The manifest's file name inside the voices directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The manifest format this crate reads and writes.
pub const MANIFEST_VERSION: u32 = 1;

/// The source recorded for files found in the directory: the directory
/// itself is not named, because voices directories get copied.
pub const ADOPTED: &str =
    "found in the voices directory (put there by appliance/setup-voices or by hand)";

const ONNX: &str = ".onnx";
const JSON: &str = ".onnx.json";
const PART: &str = ".part";

/// Why a voice store operation failed. Each names the voice, file, URL or
/// field involved and, where there is one, what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum VoicesError {
    #[error(
        "the voice manifest {path} is unusable: {problem}; it was left untouched, fix it or move it aside"
    )]
    ManifestCorrupt { path: PathBuf, problem: String },
    #[error("invalid voice id `{id}`: {problem} (voice ids look like en_US-lessac-medium)")]
    BadId {
        id: String,
        #[source]
        problem: NameProblem,
    },
    /// No voice of that id is installed.
    #[error("no voice `{id}` is installed in {dir}; {}", installed_list(.installed))]
    NotInstalled {
        id: String,
        dir: PathBuf,
        /// The ids that are installed, sorted.
        installed: Vec<String>,
    },
    /// Installing would overwrite an installed voice.
    #[error(
        "the voice `{id}` is already installed; replace it explicitly (--replace) or remove it first"
    )]
    Exists { id: String },
    /// The manifest lists the voice but some of its files are gone.
    #[error(
        "the voice `{id}` is missing {}; install it again with --replace, or remove it",
        paths(.missing)
    )]
    FilesMissing { id: String, missing: Vec<PathBuf> },
    /// An id that is neither a URL nor in the catalog.
    #[error(
        "`{id}` is not in the voice catalog (known: {}); give the URL of its .onnx, or install local .onnx and .onnx.json files",
        .known.join(", ")
    )]
    UnknownVoice {
        id: String,
        known: Vec<&'static str>,
    },
    #[error(
        "cannot tell which voice `{url}` is: an install URL must end in <id>.onnx or <id>.onnx.json"
    )]
    BadUrl { url: String },
    #[error("cannot tell the voice id from the file name {path}: name it <id>.onnx or give the id")]
    NoId { path: PathBuf },
    /// The `.onnx.json` does not validate; the error names the field.
    #[error("{source}; a piper voice needs the .onnx.json published with its model")]
    Config {
        #[source]
        source: VoiceError,
    },
    /// A downloaded `.onnx.json` does not validate; the download was deleted.
    #[error("{url} is not a voice config Hark can use ({source}); the download was deleted")]
    DownloadedConfig {
        url: String,
        #[source]
        source: VoiceError,
    },
    /// The `.onnx` is not a piper ONNX model.
    #[error("{file} is not a piper voice model: {problem}")]
    NotOnnx {
        /// The file's path or URL.
        file: String,
        #[source]
        problem: OnnxProblem,
    },
    /// A download failed (the error names the URL).
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// Creating, reading, writing, renaming or deleting a file failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done, e.g. `read` or `create the voices directory`.
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// An [`VoicesError::Io`] maker for `map_err`.
fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> VoicesError {
    let path = path.to_owned();
    move |source| VoicesError::Io {
        action,
        path,
        source,
    }
}

fn installed_list(installed: &[String]) -> String {
    if installed.is_empty() {
        "no voices are installed (see `hark voices list` for the ones to install)".to_owned()
    } else {
        format!("installed: {}", installed.join(", "))
    }
}

fn paths(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(" and ")
}

/// One installed voice: its manifest entry, and where its files are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledVoice {
    /// Its id, e.g. `en_US-lessac-medium`; its files are `<id>.onnx` and
    /// `<id>.onnx.json`.
    pub id: String,
    /// `language.code` of its config, e.g. `en_US`.
    pub language: Option<String>,
    /// `audio.quality` of its config.
    pub quality: Option<String>,
    /// `audio.sample_rate` of its config, in Hz.
    pub sample_rate: u32,
    pub num_speakers: u32,
    /// Size of the `.onnx` in bytes.
    pub size: u64,
    /// SHA-256 of the `.onnx`, lowercase hex.
    pub sha256: String,
    /// Size of the `.onnx.json` in bytes.
    pub json_size: u64,
    /// SHA-256 of the `.onnx.json`, lowercase hex.
    pub json_sha256: String,
    /// Where it came from: the `.onnx` URL, `installed from <path>`, or
    /// [`ADOPTED`] for files found in the directory.
    pub source: String,
    /// When it was added, RFC 3339 in UTC.
    pub added: String,
    /// The model file.
    #[serde(skip)]
    pub onnx: PathBuf,
    /// The config file.
    #[serde(skip)]
    pub json: PathBuf,
}

/// Something in the voices directory that is not a usable voice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The manifest lists the voice but files are gone.
    FilesMissing { id: String, missing: Vec<PathBuf> },
    /// Half a voice that the manifest does not list: an `.onnx` without
    /// its `.onnx.json` or the reverse.
    Incomplete {
        id: String,
        present: PathBuf,
        missing: PathBuf,
    },
    /// A pair that fails validation, so it was not adopted.
    Invalid { id: String, reason: String },
    /// Any other file.
    Unmanaged { path: PathBuf },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::FilesMissing { id, missing } => write!(
                f,
                "{id}: MISSING {} (install it again with --replace, or remove it)",
                paths(missing)
            ),
            Problem::Incomplete {
                id,
                present,
                missing,
            } => write!(
                f,
                "{id}: {} is there but {} is missing (install the voice again, or remove it)",
                present.display(),
                missing.display()
            ),
            Problem::Invalid { id, reason } => write!(
                f,
                "{id}: NOT USABLE: {reason} (install the voice again, or remove it)"
            ),
            Problem::Unmanaged { path } => write!(f, "{}: not a voice file", path.display()),
        }
    }
}

/// What is in the voices directory, and what else can be installed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VoiceListing {
    /// Installed voices (adopted ones included), sorted by id.
    pub installed: Vec<InstalledVoice>,
    /// Catalog voices that are not installed, in catalog order.
    pub available: Vec<&'static CatalogVoice>,
    /// Downloads in progress (`<file>.part`, named by `<file>`).
    pub partial: Vec<Partial>,
    pub problems: Vec<Problem>,
}

/// How [`VoiceStore::install_files_with`] installs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOptions {
    /// The id to install under; by default the `.onnx` file's name without
    /// `.onnx` (a catalog voice's id in either spelling becomes piper's).
    pub id: Option<String>,
    /// Overwrite an installed voice of the same id.
    pub replace: bool,
}

/// One file of a voice to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRequest {
    pub url: String,
    /// What it must match; unknown fields are not checked.
    pub expected: Expected,
}

/// A voice to download: its id in the store and its two files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoiceRequest {
    pub id: String,
    pub onnx: FileRequest,
    pub json: FileRequest,
}

impl VoiceRequest {
    /// A catalog voice, in either spelling, with its published sizes and
    /// checksums.
    pub fn catalog(id: &str) -> Result<Self, VoicesError> {
        let voice = catalog::find(id).ok_or_else(|| VoicesError::UnknownVoice {
            id: id.to_owned(),
            known: catalog::ids().collect(),
        })?;
        Ok(Self::of(voice))
    }

    fn of(voice: &CatalogVoice) -> Self {
        Self {
            id: voice.id.to_owned(),
            onnx: FileRequest {
                url: voice.onnx_url(),
                expected: voice.onnx.expected(),
            },
            json: FileRequest {
                url: voice.json_url(),
                expected: voice.json.expected(),
            },
        }
    }

    /// The voice at an http(s) URL of its `.onnx` or its `.onnx.json` (the
    /// other file is beside it), installed under the file's name. The
    /// `.onnx` is checked against `onnx_sha256` if given. A catalog voice's
    /// own URL gets the catalog's sizes and checksums as well.
    pub fn url(url: &str, onnx_sha256: Option<&str>) -> Result<Self, VoicesError> {
        check_url(url)?;
        let bad_url = || VoicesError::BadUrl {
            url: url.to_owned(),
        };
        // Hugging Face links often end in `?download=true`; the file name
        // is before the query, which both files keep.
        let (path, query) = match url.split_once('?') {
            Some((path, query)) => (path, format!("?{query}")),
            None => (url, String::new()),
        };
        let stem = path
            .strip_suffix(JSON)
            .or_else(|| path.strip_suffix(ONNX))
            .ok_or_else(bad_url)?;
        let id = stem.rsplit('/').next().filter(|id| !id.is_empty());
        let id = canonical(id.ok_or_else(bad_url)?);
        checked(&id)?;
        // The catalog's own files, however linked, are checked against
        // the catalog.
        let mut request = match catalog::find(&id) {
            Some(voice) if voice.onnx_url() == format!("{stem}{ONNX}") => Self::of(voice),
            _ => Self {
                onnx: FileRequest {
                    url: String::new(),
                    expected: Expected::default(),
                },
                json: FileRequest {
                    url: String::new(),
                    expected: Expected::default(),
                },
                id,
            },
        };
        request.onnx.url = format!("{stem}{ONNX}{query}");
        request.json.url = format!("{stem}{JSON}{query}");
        if let Some(sha256) = parse_sha256(onnx_sha256)? {
            request.onnx.expected.sha256 = Some(sha256);
        }
        Ok(request)
    }

    /// A URL (see [`VoiceRequest::url`]) or else a catalog id.
    pub fn parse(url_or_id: &str) -> Result<Self, VoicesError> {
        if url_or_id.contains("://") {
            Self::url(url_or_id, None)
        } else {
            Self::catalog(url_or_id)
        }
    }
}

/// A voice downloaded and installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledFromUrl {
    pub voice: InstalledVoice,
    /// Which published figures the `.onnx` matched.
    pub onnx: Verification,
    /// Which published figures the `.onnx.json` matched.
    pub json: Verification,
    /// Bytes that earlier, interrupted installs had already downloaded.
    pub resumed_from: u64,
}

impl fmt::Display for InstalledFromUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.voice;
        write!(f, "{}: {} bytes, sha256 {}", v.id, v.size, v.sha256)?;
        match (self.onnx.is_verified(), self.json.is_verified()) {
            (true, true) => write!(
                f,
                "; the model matches the published {}, its config the published {}",
                self.onnx.matched(),
                self.json.matched()
            ),
            (true, false) => write!(
                f,
                "; the model matches the published {} (no checksum for its config, which was validated)",
                self.onnx.matched()
            ),
            _ => write!(
                f,
                " — NOT verified: no checksum was given for the model; compare this sha256 with one from a source you trust"
            ),
        }
    }
}

/// What [`VoiceStore::remove`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    pub id: String,
    /// The manifest entry, if the voice had one.
    pub voice: Option<InstalledVoice>,
    /// The files deleted.
    pub deleted: Vec<PathBuf>,
}

/// A voices directory.
#[derive(Debug, Clone)]
pub struct VoiceStore {
    dir: PathBuf,
}

/// The directory as one read of it found it.
struct Scan {
    voices: BTreeMap<String, InstalledVoice>,
    /// Ids with any file here, recorded or not: what `remove` may delete.
    on_disk: BTreeSet<String>,
    partial: Vec<Partial>,
    problems: Vec<Problem>,
}

impl VoiceStore {
    /// Opens the store in `dir`, creating the directory if needed, reading
    /// the manifest (a corrupt one is an error now rather than later) and
    /// adopting voices that were put there without it.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, VoicesError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(io_error("create the voices directory", &dir))?;
        let store = Self { dir };
        store.scan()?;
        Ok(store)
    }

    /// The voices directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Installed voices, catalog voices not installed, downloads in
    /// progress and problems.
    pub fn list(&self) -> Result<VoiceListing, VoicesError> {
        let scan = self.scan()?;
        let installed: Vec<InstalledVoice> = scan.voices.into_values().collect();
        let keys: BTreeSet<String> = installed.iter().map(|v| id_key(&v.id)).collect();
        Ok(VoiceListing {
            available: catalog::CATALOG
                .iter()
                .filter(|v| !keys.contains(&id_key(v.id)))
                .collect(),
            installed,
            partial: scan.partial,
            problems: scan.problems,
        })
    }

    /// The installed voice `id` (either spelling), or `None`. A voice whose
    /// files are gone is an error saying so.
    pub fn get(&self, id: &str) -> Result<Option<InstalledVoice>, VoicesError> {
        let scan = self.scan()?;
        let Some(voice) = find(&scan.voices, id) else {
            return Ok(None);
        };
        let missing: Vec<PathBuf> = [&voice.onnx, &voice.json]
            .into_iter()
            .filter(|p| !p.is_file())
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(VoicesError::FilesMissing {
                id: voice.id.clone(),
                missing,
            });
        }
        Ok(Some(voice.clone()))
    }

    /// [`VoiceStore::get`], with not installed as an error that lists the
    /// installed voices.
    pub fn voice(&self, id: &str) -> Result<InstalledVoice, VoicesError> {
        self.get(id)?.ok_or_else(|| self.not_installed(id))
    }

    fn not_installed(&self, id: &str) -> VoicesError {
        let installed = self
            .scan()
            .map(|s| s.voices.into_keys().collect())
            .unwrap_or_default();
        VoicesError::NotInstalled {
            id: id.to_owned(),
            dir: self.dir.clone(),
            installed,
        }
    }

    /// Installs the voice in `onnx` and `json` under the `.onnx` file's
    /// name. See [`VoiceStore::install_files_with`].
    pub fn install_files(&self, onnx: &Path, json: &Path) -> Result<InstalledVoice, VoicesError> {
        self.install_files_with(onnx, json, &FileOptions::default())
    }

    /// Validates the config and the model, copies both in (through
    /// temporary files and renames), and records them with their SHA-256.
    pub fn install_files_with(
        &self,
        onnx: &Path,
        json: &Path,
        options: &FileOptions,
    ) -> Result<InstalledVoice, VoicesError> {
        let id = match &options.id {
            Some(id) => canonical(id),
            None => onnx
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(ONNX))
                .map(canonical)
                .ok_or_else(|| VoicesError::NoId {
                    path: onnx.to_owned(),
                })?,
        };
        checked(&id)?;
        // A mistyped path is reported as such, not as a missing config.
        fs::metadata(onnx).map_err(io_error("read", onnx))?;
        self.refuse_installed(&id, options.replace)?;
        // Both checks before any copy: refusing a web page saved as
        // `.onnx` should not take a 60 MB copy first.
        let config = validate(onnx, json)?;

        let tmp_onnx = self.temp_path(&format!("{id}{ONNX}"));
        let tmp_json = self.temp_path(&format!("{id}{JSON}"));
        let copied = copy_in(json, &tmp_json).and_then(|json_digests| {
            let onnx_digests = copy_in(onnx, &tmp_onnx)?;
            self.put_in_place(&id, &tmp_onnx, &tmp_json)?;
            Ok((onnx_digests, json_digests))
        });
        let (onnx_digests, json_digests) = copied.inspect_err(|_| {
            let _ = fs::remove_file(&tmp_onnx);
            let _ = fs::remove_file(&tmp_json);
        })?;
        let source = format!("installed from {}", onnx.display());
        self.record(self.entry(&id, &config, &onnx_digests, &json_digests, &source))
    }

    /// Downloads and installs a catalog voice (`url_or_id` in either
    /// spelling) or the voice at a URL. See [`VoiceStore::install_request`].
    pub fn install_url(
        &self,
        url_or_id: &str,
        progress: Progress<'_>,
    ) -> Result<InstalledFromUrl, VoicesError> {
        let request = VoiceRequest::parse(url_or_id)?;
        self.install_request(&request, &FetchOptions::default(), progress)
    }

    /// Downloads the voice's config, then its model, each to a `.part`
    /// (resuming one an interrupted install left), checks them against
    /// `request`'s expectations, validates them, and puts them in place.
    /// A checksum mismatch or a file that fails validation deletes that
    /// download; any other failure keeps it for the next attempt.
    pub fn install_request(
        &self,
        request: &VoiceRequest,
        options: &FetchOptions,
        mut progress: Progress<'_>,
    ) -> Result<InstalledFromUrl, VoicesError> {
        let id = &request.id;
        checked(id)?;
        // Before any download: an installed voice is refused now, not
        // after 60 MB.
        self.refuse_installed(id, options.replace)?;
        let json_name = format!("{id}{JSON}");
        let onnx_name = format!("{id}{ONNX}");
        let json_part = PartFile::new(self.dir.join(format!("{json_name}{PART}")));
        let onnx_part = PartFile::new(self.dir.join(format!("{onnx_name}{PART}")));

        let json = json_part.download(
            &request.json.url,
            &request.json.expected,
            options,
            &json_name,
            progress.reborrow(),
        )?;
        let config = VoiceConfig::from_path(json_part.path()).map_err(|source| {
            json_part.discard();
            VoicesError::DownloadedConfig {
                url: request.json.url.clone(),
                source,
            }
        })?;
        let onnx = onnx_part
            .download(
                &request.onnx.url,
                &request.onnx.expected,
                options,
                &onnx_name,
                progress,
            )
            .inspect_err(|e| {
                // The model is not the one expected, so its source is
                // wrong: nothing of the voice is kept. (An interrupted
                // download keeps both parts for the next attempt.)
                if matches!(
                    e,
                    FetchError::ChecksumMismatch { .. } | FetchError::SizeMismatch { .. }
                ) {
                    json_part.discard();
                }
            })?;
        check_onnx(onnx_part.path()).map_err(|problem| {
            // A web page saved in place of a model is not worth resuming.
            onnx_part.discard();
            json_part.discard();
            VoicesError::NotOnnx {
                file: request.onnx.url.clone(),
                problem,
            }
        })?;

        if !onnx.verification.is_verified() {
            // The config is validated instead; the model is what matters.
            warn!(url = %request.onnx.url, sha256 = %onnx.digests.sha256, "no checksum to verify the voice model against");
        }
        self.put_in_place(id, onnx_part.path(), json_part.path())?;
        onnx_part.forget();
        json_part.forget();
        let voice =
            self.record(self.entry(id, &config, &onnx.digests, &json.digests, &request.onnx.url))?;
        Ok(InstalledFromUrl {
            voice,
            onnx: onnx.verification,
            json: json.verification,
            resumed_from: onnx.resumed_from + json.resumed_from,
        })
    }

    /// Deletes the voice `id` (either spelling): its manifest entry first,
    /// then its files and any download of it in progress, so a crash in
    /// between leaves files that the next open adopts again (and a second
    /// `remove` deletes), never an entry without files. Also cleans up
    /// files of a voice the manifest does not list (half a voice, one that
    /// failed validation).
    pub fn remove(&self, id: &str) -> Result<Removed, VoicesError> {
        let mut scan = self.scan()?;
        let voice = find(&scan.voices, id).cloned();
        let key = id_key(id);
        let id = match &voice {
            Some(voice) => voice.id.clone(),
            None => match scan.on_disk.iter().find(|on| id_key(on) == key) {
                Some(on_disk) => on_disk.clone(),
                None => return Err(self.not_installed(id)),
            },
        };
        checked(&id)?;
        if scan.voices.remove(&id).is_some() {
            self.save(&scan.voices)?;
        }
        let mut deleted = Vec::new();
        for name in [format!("{id}{ONNX}"), format!("{id}{JSON}")] {
            let path = self.dir.join(&name);
            if remove_if_present(&path)? {
                deleted.push(path);
            }
            let part = PartFile::new(self.dir.join(format!("{name}{PART}")));
            if part.path().exists() {
                deleted.push(part.path().to_owned());
            }
            part.discard();
        }
        info!(voice = %id, "voice removed");
        Ok(Removed { id, voice, deleted })
    }

    /// Reads the manifest and the directory, and adopts complete, valid
    /// pairs the manifest does not list. Adoption is recorded when the
    /// directory is writable; when it is not (a read-only daemon), the
    /// adopted voices are still returned.
    fn scan(&self) -> Result<Scan, VoicesError> {
        let mut voices = self.load()?;
        let mut onnx = BTreeSet::new();
        let mut json = BTreeSet::new();
        let mut partial = Vec::new();
        let mut problems = Vec::new();
        let read_err = || io_error("read", &self.dir);
        for item in fs::read_dir(&self.dir).map_err(read_err())? {
            let item = item.map_err(read_err())?;
            let file_name = item.file_name();
            let Some(name) = file_name.to_str() else {
                problems.push(Problem::Unmanaged { path: item.path() });
                continue;
            };
            if name == MANIFEST_FILE || name.starts_with('.') {
                continue;
            }
            if let Some(file) = name.strip_suffix(PART) {
                partial.push(Partial {
                    name: file.to_owned(),
                    bytes: item.metadata().map(|m| m.len()).unwrap_or(0),
                    path: item.path(),
                });
                continue;
            }
            let voice_file = [(JSON, &mut json), (ONNX, &mut onnx)]
                .into_iter()
                .find_map(|(suffix, set)| Some((name.strip_suffix(suffix)?, set)));
            match voice_file {
                Some((id, set)) if check_name(id).is_ok() => {
                    set.insert(id.to_owned());
                }
                _ => problems.push(Problem::Unmanaged { path: item.path() }),
            }
        }

        for voice in voices.values() {
            let missing: Vec<PathBuf> = [(&onnx, &voice.onnx), (&json, &voice.json)]
                .into_iter()
                .filter(|(present, _)| !present.contains(&voice.id))
                .map(|(_, path)| path.clone())
                .collect();
            if !missing.is_empty() {
                problems.push(Problem::FilesMissing {
                    id: voice.id.clone(),
                    missing,
                });
            }
        }

        let on_disk: BTreeSet<String> = onnx
            .union(&json)
            .cloned()
            .chain(partial.iter().filter_map(|p| {
                let name = p.name.as_str();
                Some(
                    name.strip_suffix(JSON)
                        .or(name.strip_suffix(ONNX))?
                        .to_owned(),
                )
            }))
            .collect();
        let mut adopted = false;
        let unrecorded: Vec<&String> = onnx
            .union(&json)
            .filter(|id| !voices.contains_key(*id))
            .collect();
        for id in unrecorded {
            let (onnx_path, json_path) = (self.onnx_path(id), self.json_path(id));
            match (onnx.contains(id), json.contains(id)) {
                (true, true) => match self.adopt(id) {
                    Ok(voice) => {
                        voices.insert(id.clone(), voice);
                        adopted = true;
                    }
                    Err(e) => problems.push(Problem::Invalid {
                        id: id.clone(),
                        reason: e.to_string(),
                    }),
                },
                (true, false) => problems.push(Problem::Incomplete {
                    id: id.clone(),
                    present: onnx_path,
                    missing: json_path,
                }),
                _ => problems.push(Problem::Incomplete {
                    id: id.clone(),
                    present: json_path,
                    missing: onnx_path,
                }),
            }
        }
        if adopted && let Err(e) = self.save(&voices) {
            warn!(error = %e, "voices found in the directory could not be recorded in its manifest");
        }
        partial.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Scan {
            voices,
            on_disk,
            partial,
            problems,
        })
    }

    /// Validates and hashes a pair that is in the directory but not in the
    /// manifest.
    fn adopt(&self, id: &str) -> Result<InstalledVoice, VoicesError> {
        let (onnx, json) = (self.onnx_path(id), self.json_path(id));
        let config = validate(&onnx, &json)?;
        let hash = |path: &Path| hash::hash_file(path).map_err(io_error("read", path));
        let voice = self.entry(id, &config, &hash(&onnx)?, &hash(&json)?, ADOPTED);
        info!(voice = id, sha256 = %voice.sha256, "voice files found in the directory adopted");
        Ok(voice)
    }

    fn refuse_installed(&self, id: &str, replace: bool) -> Result<(), VoicesError> {
        if !replace && find(&self.scan()?.voices, id).is_some() {
            return Err(VoicesError::Exists { id: id.to_owned() });
        }
        Ok(())
    }

    /// Renames the two files to `<id>.onnx` and `<id>.onnx.json` and makes
    /// the renames durable.
    fn put_in_place(&self, id: &str, onnx: &Path, json: &Path) -> Result<(), VoicesError> {
        for (from, to) in [(onnx, self.onnx_path(id)), (json, self.json_path(id))] {
            fs::rename(from, &to).map_err(io_error("write", &to))?;
        }
        sync_dir(&self.dir).map_err(io_error("write", &self.dir))
    }

    fn entry(
        &self,
        id: &str,
        config: &VoiceConfig,
        onnx: &Digests,
        json: &Digests,
        source: &str,
    ) -> InstalledVoice {
        InstalledVoice {
            id: id.to_owned(),
            language: config.language.clone(),
            quality: config.quality.clone(),
            sample_rate: config.sample_rate,
            num_speakers: config.num_speakers,
            size: onnx.size,
            sha256: onnx.sha256.clone(),
            json_size: json.size,
            json_sha256: json.sha256.clone(),
            source: source.to_owned(),
            added: now_rfc3339(),
            onnx: self.onnx_path(id),
            json: self.json_path(id),
        }
    }

    /// Writes the manifest entry of files now in place.
    fn record(&self, voice: InstalledVoice) -> Result<InstalledVoice, VoicesError> {
        // Re-read: a download takes minutes, and the manifest may have
        // changed meanwhile.
        let mut voices = self.load()?;
        voices.insert(voice.id.clone(), voice.clone());
        self.save(&voices)?;
        info!(voice = %voice.id, size = voice.size, sha256 = %voice.sha256, source = %voice.source, "voice installed");
        Ok(voice)
    }

    /// Reads the manifest; a missing one is an empty store.
    fn load(&self) -> Result<BTreeMap<String, InstalledVoice>, VoicesError> {
        let path = self.dir.join(MANIFEST_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(source) => return Err(io_error("read", &path)(source)),
        };
        let corrupt = |problem: String| VoicesError::ManifestCorrupt {
            path: path.clone(),
            problem,
        };
        let file: ManifestFile = serde_json::from_slice(&bytes)
            .map_err(|e| corrupt(format!("it is not valid manifest JSON: {e}")))?;
        if file.version != MANIFEST_VERSION {
            return Err(corrupt(format!(
                "it is format version {}; this hark reads version {MANIFEST_VERSION}",
                file.version
            )));
        }
        let mut voices = BTreeMap::new();
        for mut voice in file.voices {
            // The id names the files `remove` deletes, so one that reaches
            // outside the directory must not load.
            if let Err(problem) = check_name(&voice.id) {
                return Err(corrupt(format!(
                    "the entry `{}` has an invalid id: {problem}",
                    voice.id
                )));
            }
            for hash in [&voice.sha256, &voice.json_sha256] {
                if normalise_hex(hash, 64).as_deref() != Some(hash.as_str()) {
                    return Err(corrupt(format!(
                        "the entry `{}` has an invalid sha256 `{hash}`",
                        voice.id
                    )));
                }
            }
            voice.onnx = self.onnx_path(&voice.id);
            voice.json = self.json_path(&voice.id);
            if let Some(old) = voices.insert(voice.id.clone(), voice) {
                return Err(corrupt(format!("the voice `{}` is listed twice", old.id)));
            }
        }
        Ok(voices)
    }

    /// Replaces the manifest atomically.
    fn save(&self, voices: &BTreeMap<String, InstalledVoice>) -> Result<(), VoicesError> {
        let path = self.dir.join(MANIFEST_FILE);
        let file = ManifestFile {
            version: MANIFEST_VERSION,
            voices: voices.values().cloned().collect(),
        };
        let write = || -> io::Result<()> {
            let mut json = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
            json.push(b'\n');
            write_atomic(&self.dir, &path, &json)
        };
        write().map_err(io_error("write", &path))
    }

    fn onnx_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}{ONNX}"))
    }

    fn json_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}{JSON}"))
    }

    /// A hidden name in the directory for a file being copied in: hidden
    /// so a listing in the meantime skips it, per process so two writers
    /// never share one.
    fn temp_path(&self, file_name: &str) -> PathBuf {
        self.dir
            .join(format!(".{file_name}.{}.tmp", std::process::id()))
    }
}

/// `manifest.json` as it is on disk.
#[derive(Serialize, Deserialize)]
struct ManifestFile {
    version: u32,
    voices: Vec<InstalledVoice>,
}

/// The voice `id` names among `voices`: the same id, or the same voice in
/// the other spelling.
fn find<'v>(voices: &'v BTreeMap<String, InstalledVoice>, id: &str) -> Option<&'v InstalledVoice> {
    voices.get(id).or_else(|| {
        let key = id_key(id);
        voices.values().find(|v| id_key(&v.id) == key)
    })
}

/// A catalog voice's id in piper's spelling; any other id as given.
fn canonical(id: &str) -> String {
    catalog::find(id).map_or_else(|| id.trim().to_owned(), |v| v.id.to_owned())
}

fn checked(id: &str) -> Result<(), VoicesError> {
    check_name(id).map_err(|problem| VoicesError::BadId {
        id: id.to_owned(),
        problem,
    })
}

/// The config (naming the bad field), then the model.
fn validate(onnx: &Path, json: &Path) -> Result<VoiceConfig, VoicesError> {
    let config = VoiceConfig::from_path(json).map_err(|source| VoicesError::Config { source })?;
    check_onnx(onnx).map_err(|problem| VoicesError::NotOnnx {
        file: onnx.display().to_string(),
        problem,
    })?;
    Ok(config)
}

/// Copies `src` to `dest` with its digests, naming the side that failed.
fn copy_in(src: &Path, dest: &Path) -> Result<Digests, VoicesError> {
    hash::copy_file_hashed(src, dest).map_err(|e| match e {
        CopyError::Read(source) => io_error("read", src)(source),
        CopyError::Write(source) => io_error("write", dest)(source),
    })
}

/// Deletes `path`; whether it was there.
fn remove_if_present(path: &Path) -> Result<bool, VoicesError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(io_error("delete", path)(source)),
    }
}

/// Why a file is not a piper ONNX model.
#[derive(Debug, thiserror::Error)]
pub enum OnnxProblem {
    #[error("cannot read it: {0}")]
    Read(#[from] io::Error),
    #[error("it is empty")]
    Empty,
    #[error(
        "it starts with text ({0:?}), not with ONNX's binary encoding; was a web page or an error message saved in its place?"
    )]
    Text(String),
    #[error("it is not an ONNX protobuf: {0}")]
    NotProtobuf(String),
    #[error("it ends in the middle of a field at byte {0} (a truncated download?)")]
    Truncated(u64),
    #[error("it has no ir_version, which every ONNX model starts with")]
    NoIrVersion,
    #[error("it has no graph")]
    NoGraph,
    #[error(
        "its graph's inputs are [{}], but a piper voice takes input, input_lengths and scales",
        .0.join(", ")
    )]
    NotPiper(Vec<String>),
}

/// Checks that `path` is an ONNX model (a protobuf `ModelProto`) with an
/// `ir_version` and a graph whose inputs include piper's `input`,
/// `input_lengths` and `scales`, without ONNX Runtime: the top-level fields
/// are walked, the graph's large ones (initializers, nodes) skipped by
/// seeking, so a 100 MB model costs a few reads. This catches what a
/// download goes wrong with (an HTML page, a truncated file, another kind
/// of model); ONNX Runtime still has the last word when the voice loads.
pub fn check_onnx(path: &Path) -> Result<(), OnnxProblem> {
    let file = fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Err(OnnxProblem::Empty);
    }
    let mut reader = Proto {
        source: BufReader::with_capacity(64 * 1024, file),
        pos: 0,
    };
    let head = reader.source.fill_buf()?;
    let head = &head[..head.len().min(40)];
    // A protobuf starts with a field key, which for ONNX is a control
    // byte; text in its place is a web page or an error message.
    if head
        .iter()
        .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        return Err(OnnxProblem::Text(
            String::from_utf8_lossy(head).into_owned(),
        ));
    }

    // ModelProto: ir_version = 1 (varint), graph = 7 (message).
    let mut ir_version = None;
    let mut inputs = None;
    while let Some((field, wire)) = reader.key(len)? {
        match (field, wire) {
            (1, WIRE_VARINT) => ir_version = Some(reader.varint(len)?),
            (7, WIRE_LEN) => {
                let graph_len = reader.varint(len)?;
                let end = reader.end_of(graph_len, len)?;
                inputs = Some(graph_inputs(&mut reader, end)?);
            }
            _ => reader.skip(wire, len)?,
        }
    }
    if ir_version.is_none_or(|v| v == 0) {
        return Err(OnnxProblem::NoIrVersion);
    }
    let inputs = inputs.ok_or(OnnxProblem::NoGraph)?;
    if ["input", "input_lengths", "scales"]
        .iter()
        .all(|name| inputs.iter().any(|i| i == name))
    {
        Ok(())
    } else {
        Err(OnnxProblem::NotPiper(inputs))
    }
}

/// The names of a `GraphProto`'s inputs (field 11, `ValueInfoProto`, whose
/// field 1 is the name), reading up to `end`.
fn graph_inputs<R: BufRead + Skip>(
    reader: &mut Proto<R>,
    end: u64,
) -> Result<Vec<String>, OnnxProblem> {
    // A value info is a name and a type: anything bigger is not one.
    const MAX_VALUE_INFO: u64 = 64 * 1024;
    let mut inputs = Vec::new();
    while let Some((field, wire)) = reader.key(end)? {
        if (field, wire) != (11, WIRE_LEN) {
            reader.skip(wire, end)?;
            continue;
        }
        let len = reader.varint(end)?;
        reader.end_of(len, end)?;
        if len > MAX_VALUE_INFO {
            reader.skip_bytes(len, end)?;
            continue;
        }
        let mut info = vec![0u8; len as usize];
        reader.read_exact(&mut info)?;
        let info_len = info.len() as u64;
        let mut inner = Proto {
            source: io::Cursor::new(info.as_slice()),
            pos: 0,
        };
        while let Some((field, wire)) = inner.key(info_len)? {
            if (field, wire) == (1, WIRE_LEN) {
                let name_len = inner.varint(info_len)?;
                inner.end_of(name_len, info_len)?;
                let mut name = vec![0u8; name_len as usize];
                inner.read_exact(&mut name)?;
                inputs.push(String::from_utf8_lossy(&name).into_owned());
            } else {
                inner.skip(wire, info_len)?;
            }
        }
    }
    Ok(inputs)
}

const WIRE_VARINT: u8 = 0;
const WIRE_I64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_I32: u8 = 5;

/// Moving forward without reading: a seek for a file, so a model's
/// weights are never read.
trait Skip {
    fn skip_forward(&mut self, n: u64) -> io::Result<()>;
}

impl<R: Read + Seek> Skip for BufReader<R> {
    fn skip_forward(&mut self, n: u64) -> io::Result<()> {
        let n = i64::try_from(n).map_err(io::Error::other)?;
        self.seek_relative(n)
    }
}

impl Skip for io::Cursor<&[u8]> {
    fn skip_forward(&mut self, n: u64) -> io::Result<()> {
        self.set_position(self.position().saturating_add(n));
        Ok(())
    }
}

/// A protobuf reader over `source` that knows its position.
struct Proto<R> {
    source: R,
    pos: u64,
}

impl<R: BufRead + Skip> Proto<R> {
    fn byte(&mut self, end: u64) -> Result<u8, OnnxProblem> {
        if self.pos >= end {
            return Err(OnnxProblem::Truncated(self.pos));
        }
        let mut b = [0u8; 1];
        self.read_exact(&mut b)?;
        Ok(b[0])
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), OnnxProblem> {
        self.source.read_exact(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                OnnxProblem::Truncated(self.pos)
            } else {
                OnnxProblem::Read(e)
            }
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn varint(&mut self, end: u64) -> Result<u64, OnnxProblem> {
        let start = self.pos;
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte(end)?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(OnnxProblem::NotProtobuf(format!(
            "the number at byte {start} is too long"
        )))
    }

    /// The next field's number and wire type, or `None` at `end`.
    fn key(&mut self, end: u64) -> Result<Option<(u64, u8)>, OnnxProblem> {
        if self.pos >= end {
            return Ok(None);
        }
        let at = self.pos;
        let key = self.varint(end)?;
        let (field, wire) = (key >> 3, (key & 7) as u8);
        // Groups (3, 4) are long deprecated and unused by ONNX; 6 and 7
        // do not exist.
        if field == 0 || ![WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32].contains(&wire) {
            return Err(OnnxProblem::NotProtobuf(format!(
                "byte {at} is not a field key"
            )));
        }
        Ok(Some((field, wire)))
    }

    /// Where a field of `len` bytes starting here ends, if it fits before
    /// `end`.
    fn end_of(&self, len: u64, end: u64) -> Result<u64, OnnxProblem> {
        self.pos
            .checked_add(len)
            .filter(|field_end| *field_end <= end)
            .ok_or(OnnxProblem::Truncated(self.pos))
    }

    fn skip_bytes(&mut self, n: u64, end: u64) -> Result<(), OnnxProblem> {
        let to = self.end_of(n, end)?;
        self.source.skip_forward(n)?;
        self.pos = to;
        Ok(())
    }

    /// Skips the value of a field of wire type `wire`.
    fn skip(&mut self, wire: u8, end: u64) -> Result<(), OnnxProblem> {
        match wire {
            WIRE_VARINT => self.varint(end).map(drop),
            WIRE_I64 => self.skip_bytes(8, end),
            WIRE_I32 => self.skip_bytes(4, end),
            _ => {
                let len = self.varint(end)?;
                self.skip_bytes(len, end)
            }
        }
    }
}
