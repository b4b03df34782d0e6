//! The models directory: model files plus `manifest.json`.
//!
//! Layout of the directory:
//!
//! | file | what |
//! |---|---|
//! | `manifest.json` | one entry per installed model ([`crate::manifest`]) |
//! | `ggml-<name>.bin` | an installed model |
//! | `<name>.part` | a download in progress; the next fetch resumes it |
//! | `.*` | temporary files of an add or a manifest write in progress |
//!
//! Every operation re-reads the manifest, so the daemon sees what the CLI
//! installed without a restart. Writers are not coordinated with each
//! other: run one `hark models` command at a time (the daemon only reads).

use std::{
    fmt, fs, io,
    path::{Path, PathBuf},
};

use tracing::{info, warn};

use crate::{
    ggml::{self, HeaderProblem},
    hash::{self, CopyError, Digests},
    manifest::{self, MANIFEST_FILE, Manifest, ManifestError, ModelEntry},
    name::{NameProblem, check_name},
};

/// Where the appliance keeps its models.
pub const DEFAULT_DIR: &str = "/var/lib/hark/models";

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The directory does not exist and cannot be made (permissions, a file
    /// in the way, a read-only file system).
    #[error("cannot create the models directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The manifest cannot be read, written, or makes no sense.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The name breaks the naming rules ([`crate::check_name`]).
    #[error("invalid model name `{name}`: {problem}")]
    BadName {
        name: String,
        #[source]
        problem: NameProblem,
    },
    /// No model of that name is installed.
    #[error("no model named `{name}` in {dir}; {}", installed_list(.installed))]
    NotFound {
        name: String,
        dir: PathBuf,
        /// The names that are installed, sorted.
        installed: Vec<String>,
    },
    /// Adding would overwrite an installed model and `replace` was not set.
    #[error(
        "a model named `{name}` is already installed; replace it explicitly or remove it first"
    )]
    Exists { name: String },
    /// The manifest lists the model but its file is gone.
    #[error("the file of model `{name}` is missing: {path}")]
    FileMissing { name: String, path: PathBuf },
    /// The file is not a whisper.cpp ggml model.
    #[error("{path} is not a whisper.cpp model: {problem}")]
    NotAModel {
        path: PathBuf,
        #[source]
        problem: HeaderProblem,
    },
    /// Reading a model file failed.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Writing, renaming or deleting in the models directory failed.
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn installed_list(installed: &[String]) -> String {
    if installed.is_empty() {
        "no models are installed".to_owned()
    } else {
        format!("installed: {}", installed.join(", "))
    }
}

/// How [`Store::add_file`] takes the file in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Rename the file into the store (a copy and delete when it is on
    /// another file system). For files made for the store, e.g. an
    /// importer's output.
    Move,
    /// Copy it; the original stays where it is. For files the user named.
    Copy,
}

/// What [`Store::add_file`] records besides what it reads from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddOptions {
    /// Where the model came from: a URL or `imported from <path>`.
    pub source: String,
    /// Overwrite an installed model of the same name.
    pub replace: bool,
    pub transfer: Transfer,
}

impl AddOptions {
    /// Copy a user's file in, recording `imported from <path>`.
    pub fn import(path: &Path) -> Self {
        Self {
            source: format!("imported from {}", path.display()),
            replace: false,
            transfer: Transfer::Copy,
        }
    }
}

/// What is in the models directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The manifest's entries, sorted by name.
    pub models: Vec<ModelEntry>,
    /// Names of entries whose file is not in the directory.
    pub missing: Vec<String>,
    /// Downloads in progress (`<name>.part`).
    pub partial: Vec<Partial>,
    /// Other files in the directory that the manifest does not list, e.g.
    /// a model copied in by hand. Add them with [`Store::add_file`].
    pub unmanaged: Vec<PathBuf>,
}

/// A download in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    pub name: String,
    /// Bytes downloaded so far.
    pub bytes: u64,
    pub path: PathBuf,
}

/// The result of checking one model against the manifest.
#[derive(Debug)]
pub struct VerifyReport {
    pub name: String,
    pub path: PathBuf,
    /// What the manifest says.
    pub expected_size: u64,
    pub expected_sha256: String,
    pub outcome: VerifyOutcome,
}

/// What [`Store::verify`] found.
#[derive(Debug)]
pub enum VerifyOutcome {
    /// Size and SHA-256 match the manifest.
    Ok,
    /// The file is not there.
    Missing,
    /// The size differs (the file was not hashed).
    SizeMismatch { actual: u64 },
    /// Same size, different content.
    HashMismatch { actual_sha256: String },
    /// The file is there but cannot be read.
    Unreadable(io::Error),
}

impl VerifyReport {
    /// The file is there and matches the manifest.
    pub fn is_ok(&self) -> bool {
        matches!(self.outcome, VerifyOutcome::Ok)
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match &self.outcome {
            VerifyOutcome::Ok => write!(
                f,
                "{name}: ok ({} bytes, sha256 {})",
                self.expected_size, self.expected_sha256
            ),
            VerifyOutcome::Missing => {
                write!(f, "{name}: MISSING: {} is not there", self.path.display())
            }
            VerifyOutcome::SizeMismatch { actual } => write!(
                f,
                "{name}: CORRUPT: {} is {actual} bytes, the manifest says {}",
                self.path.display(),
                self.expected_size
            ),
            VerifyOutcome::HashMismatch { actual_sha256 } => write!(
                f,
                "{name}: CORRUPT: {} has sha256 {actual_sha256}, the manifest says {}",
                self.path.display(),
                self.expected_sha256
            ),
            VerifyOutcome::Unreadable(e) => {
                write!(f, "{name}: UNREADABLE: {}: {e}", self.path.display())
            }
        }
    }
}

/// A models directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Opens the store in `dir`, creating the directory if needed, and
    /// reads the manifest once so a corrupt one is reported now rather
    /// than at the first use.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|source| StoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        let store = Self { dir };
        store.manifest()?;
        Ok(store)
    }

    /// The models directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn manifest(&self) -> Result<Manifest, StoreError> {
        Ok(Manifest::load(&self.dir)?)
    }

    fn not_found(&self, name: &str, manifest: &Manifest) -> StoreError {
        StoreError::NotFound {
            name: name.to_owned(),
            dir: self.dir.clone(),
            installed: manifest.models.keys().cloned().collect(),
        }
    }

    /// The manifest's entries plus what else is in the directory.
    pub fn list(&self) -> Result<Listing, StoreError> {
        let manifest = self.manifest()?;
        let mut listing = Listing {
            models: manifest.models.values().cloned().collect(),
            ..Listing::default()
        };
        let managed: Vec<&str> = manifest.models.values().map(|e| e.file.as_str()).collect();
        let read_dir = fs::read_dir(&self.dir).map_err(|source| StoreError::Read {
            path: self.dir.clone(),
            source,
        })?;
        let mut present = Vec::new();
        for item in read_dir {
            let item = item.map_err(|source| StoreError::Read {
                path: self.dir.clone(),
                source,
            })?;
            let file_name = item.file_name();
            let Some(file_name) = file_name.to_str() else {
                listing.unmanaged.push(item.path());
                continue;
            };
            if file_name == MANIFEST_FILE || file_name.starts_with('.') {
                continue;
            }
            if managed.contains(&file_name) {
                present.push(file_name.to_owned());
                continue;
            }
            match file_name.strip_suffix(PART_SUFFIX) {
                Some(name) if check_name(name).is_ok() => listing.partial.push(Partial {
                    name: name.to_owned(),
                    bytes: item.metadata().map(|m| m.len()).unwrap_or(0),
                    path: item.path(),
                }),
                _ => listing.unmanaged.push(item.path()),
            }
        }
        listing.missing = manifest
            .models
            .values()
            .filter(|e| !present.contains(&e.file))
            .map(|e| e.name.clone())
            .collect();
        listing.partial.sort_by(|a, b| a.name.cmp(&b.name));
        listing.unmanaged.sort();
        Ok(listing)
    }

    /// The manifest entry of `name`.
    pub fn get(&self, name: &str) -> Result<ModelEntry, StoreError> {
        checked(name)?;
        let manifest = self.manifest()?;
        manifest
            .models
            .get(name)
            .cloned()
            .ok_or_else(|| self.not_found(name, &manifest))
    }

    /// The path of `name`'s file, which exists (it is not hashed; see
    /// [`Store::verify`]).
    pub fn path(&self, name: &str) -> Result<PathBuf, StoreError> {
        let entry = self.get(name)?;
        let path = self.dir.join(&entry.file);
        if !path.is_file() {
            return Err(StoreError::FileMissing {
                name: entry.name,
                path,
            });
        }
        Ok(path)
    }

    /// Adds the model file at `src` as `name`: checks it is a whisper.cpp
    /// model (language and quantisation come from its header), computes
    /// its SHA-256 and size, moves or copies it in under
    /// `ggml-<name>.bin` with a rename, then records it in the manifest.
    ///
    /// An installed model of the same name is an error unless
    /// `options.replace` is set.
    pub fn add_file(
        &self,
        name: &str,
        src: &Path,
        options: &AddOptions,
    ) -> Result<ModelEntry, StoreError> {
        checked(name)?;
        self.refuse_overwrite(name, options.replace)?;
        // Header first: refusing a 500 MB web page should not take a copy.
        let header = ggml::read_header(src).map_err(|problem| StoreError::NotAModel {
            path: src.to_owned(),
            problem,
        })?;
        let dest = self.dir.join(file_name(name));
        let digests = match options.transfer {
            Transfer::Copy => self.copy_in(src, &dest)?,
            Transfer::Move => {
                // The file may have just been written; make its content
                // durable before a name in the store points at it.
                sync_file(src).map_err(|source| StoreError::Write {
                    path: src.to_owned(),
                    source,
                })?;
                match fs::rename(src, &dest) {
                    // Hashed where it now is: one read either way.
                    Ok(()) => hash::hash_file(&dest).map_err(|source| StoreError::Read {
                        path: dest.clone(),
                        source,
                    })?,
                    Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
                        let copied = self.copy_in(src, &dest)?;
                        if let Err(e) = fs::remove_file(src) {
                            warn!(path = %src.display(), error = %e, "model copied into the store, but the original could not be deleted");
                        }
                        copied
                    }
                    Err(source) => {
                        return Err(StoreError::Write { path: dest, source });
                    }
                }
            }
        };
        self.record(name, &dest, &digests, header, &options.source)
    }

    /// Installs a file that is already in the models directory and whose
    /// digests are known (a finished download), by renaming it.
    pub(crate) fn install_part(
        &self,
        name: &str,
        part: &Path,
        digests: &Digests,
        source: &str,
        replace: bool,
    ) -> Result<ModelEntry, StoreError> {
        checked(name)?;
        self.refuse_overwrite(name, replace)?;
        let header = ggml::read_header(part).map_err(|problem| StoreError::NotAModel {
            path: part.to_owned(),
            problem,
        })?;
        let dest = self.dir.join(file_name(name));
        fs::rename(part, &dest).map_err(|source| StoreError::Write {
            path: dest.clone(),
            source,
        })?;
        self.record(name, &dest, digests, header, source)
    }

    pub(crate) fn refuse_overwrite(&self, name: &str, replace: bool) -> Result<(), StoreError> {
        if !replace && self.manifest()?.models.contains_key(name) {
            return Err(StoreError::Exists {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// Copies `src` to a temporary file in the store, hashing it on the
    /// way, then renames it to `dest`.
    fn copy_in(&self, src: &Path, dest: &Path) -> Result<Digests, StoreError> {
        let tmp = self.dir.join(format!(
            ".{}.{}.tmp",
            dest.file_name().and_then(|n| n.to_str()).unwrap_or("model"),
            std::process::id()
        ));
        let result = hash::copy_file_hashed(src, &tmp)
            .map_err(|e| match e {
                CopyError::Read(source) => StoreError::Read {
                    path: src.to_owned(),
                    source,
                },
                CopyError::Write(source) => StoreError::Write {
                    path: tmp.clone(),
                    source,
                },
            })
            .and_then(|digests| {
                fs::rename(&tmp, dest).map_err(|source| StoreError::Write {
                    path: dest.to_owned(),
                    source,
                })?;
                Ok(digests)
            });
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Writes the manifest entry for a file now at `dest`.
    fn record(
        &self,
        name: &str,
        dest: &Path,
        digests: &Digests,
        header: ggml::Header,
        source: &str,
    ) -> Result<ModelEntry, StoreError> {
        manifest::sync_dir(&self.dir).map_err(|source| StoreError::Write {
            path: self.dir.clone(),
            source,
        })?;
        let entry = ModelEntry {
            name: name.to_owned(),
            file: file_name(name),
            sha256: digests.sha256.clone(),
            size: digests.size,
            language: header.language,
            quantisation: header.quantisation,
            source: source.to_owned(),
            added: manifest::now_rfc3339(),
        };
        // Re-read: a copy can take minutes, and the manifest may have
        // changed meanwhile.
        let mut manifest = self.manifest()?;
        let old = manifest.models.insert(name.to_owned(), entry.clone());
        manifest.save(&self.dir)?;
        // A hand-edited entry may have used another file name; the new file
        // replaced the model, so the old file goes.
        if let Some(old) = old.filter(|old| old.file != entry.file) {
            remove_if_present(&self.dir.join(&old.file))?;
        }
        info!(model = name, file = %dest.display(), size = digests.size, sha256 = %digests.sha256, "model added");
        Ok(entry)
    }

    /// Recomputes `name`'s size and SHA-256 and compares them with the
    /// manifest. A mismatch or a missing file is a report, not an error.
    pub fn verify(&self, name: &str) -> Result<VerifyReport, StoreError> {
        let entry = self.get(name)?;
        Ok(self.verify_entry(entry))
    }

    /// [`Store::verify`] for every installed model, in name order.
    pub fn verify_all(&self) -> Result<Vec<VerifyReport>, StoreError> {
        let manifest = self.manifest()?;
        Ok(manifest
            .models
            .into_values()
            .map(|entry| self.verify_entry(entry))
            .collect())
    }

    fn verify_entry(&self, entry: ModelEntry) -> VerifyReport {
        let path = self.dir.join(&entry.file);
        let outcome = match fs::metadata(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => VerifyOutcome::Missing,
            Err(e) => VerifyOutcome::Unreadable(e),
            Ok(meta) if meta.len() != entry.size => {
                VerifyOutcome::SizeMismatch { actual: meta.len() }
            }
            Ok(_) => match hash::hash_file(&path) {
                Err(e) => VerifyOutcome::Unreadable(e),
                Ok(d) if d.sha256 == entry.sha256 && d.size == entry.size => VerifyOutcome::Ok,
                Ok(d) if d.size != entry.size => VerifyOutcome::SizeMismatch { actual: d.size },
                Ok(d) => VerifyOutcome::HashMismatch {
                    actual_sha256: d.sha256,
                },
            },
        };
        if !matches!(outcome, VerifyOutcome::Ok) {
            warn!(model = %entry.name, file = %path.display(), "model failed verification");
        }
        VerifyReport {
            name: entry.name,
            path,
            expected_size: entry.size,
            expected_sha256: entry.sha256,
            outcome,
        }
    }

    /// Deletes `name`: its manifest entry first, then its file, so a crash
    /// in between leaves an unmanaged file rather than an entry without
    /// one. Returns the entry removed.
    pub fn remove(&self, name: &str) -> Result<ModelEntry, StoreError> {
        checked(name)?;
        let mut manifest = self.manifest()?;
        let Some(entry) = manifest.models.remove(name) else {
            return Err(self.not_found(name, &manifest));
        };
        manifest.save(&self.dir)?;
        remove_if_present(&self.dir.join(&entry.file))?;
        info!(model = name, "model removed");
        Ok(entry)
    }

    /// Where a download of `name` is kept until it is complete.
    pub fn part_path(&self, name: &str) -> Result<PathBuf, StoreError> {
        checked(name)?;
        Ok(self.dir.join(format!("{name}{PART_SUFFIX}")))
    }
}

const PART_SUFFIX: &str = ".part";

/// The file name a model gets in the store, whisper.cpp's convention.
pub fn file_name(name: &str) -> String {
    format!("ggml-{name}.bin")
}

fn checked(name: &str) -> Result<(), StoreError> {
    check_name(name).map_err(|problem| StoreError::BadName {
        name: name.to_owned(),
        problem,
    })
}

fn sync_file(path: &Path) -> io::Result<()> {
    fs::File::open(path)?.sync_all()
}

fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Write {
            path: path.to_owned(),
            source,
        }),
    }
}
