//! The models directory: model files plus `manifest.json`.
//!
//! Layout of the directory:
//!
//! | file | what |
//! |---|---|
//! | `manifest.json` | one entry per installed model ([`crate::manifest`]) |
//! | `ggml-<name>.bin` | an installed whisper model |
//! | `<name>/` | an installed Moonshine model (a directory) |
//! | `<name>.onnx` | an installed Smart Turn model |
//! | `<name>.part` | a download in progress; the next fetch resumes it |
//! | `.*` | temporary files and directories of an add or a manifest write in progress |
//!
//! Every operation re-reads the manifest, so the daemon sees what the CLI
//! installed without a restart. Writers are not coordinated with each
//! other: run one `hark models` command at a time (the daemon only reads).
//!
//! A directory model is copied file by file into a hidden temporary
//! directory in the store, each file synced, then renamed into place in
//! one step, so a failed or interrupted import leaves no half model under
//! the model's name. Replacing one moves the old directory aside first (a
//! rename cannot replace a directory that has files in it) and deletes it
//! once the manifest names the new one.

use std::{
    fmt, fs, io,
    path::{Path, PathBuf},
};

use tracing::{info, warn};

use crate::{
    ggml::{self, HeaderProblem},
    hash::{self, CopyError, Digests},
    kind::{self, KindProblem, ModelKind},
    manifest::{
        self, FileEntry, Language, MANIFEST_FILE, Manifest, ManifestError, ModelEntry, files_digest,
    },
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
    /// The file or directory is not a model of the kind being added.
    #[error("{path} is not a {kind} model: {problem}")]
    NotOfKind {
        path: PathBuf,
        kind: ModelKind,
        #[source]
        problem: KindProblem,
    },
    /// A setting names an installed model of another kind (a whisper model
    /// as the live engine, say).
    #[error("the model `{name}` is a {kind} model, not a {wanted} one")]
    WrongKind {
        name: String,
        kind: ModelKind,
        wanted: ModelKind,
    },
    /// Another model already has the file name this one would get (names
    /// of different kinds can meet: Moonshine `a.onnx`, Smart Turn `a`).
    #[error("{path} already belongs to the model `{owner}`; choose another name")]
    FileTaken { path: PathBuf, owner: String },
    /// A directory of the new model's name is there but not in the
    /// manifest: copied in by hand, or left by an import cut short between
    /// its rename and its manifest entry. It is not Hark's to delete.
    #[error(
        "{path} is already there but not in the manifest; move it aside, or replace it explicitly"
    )]
    InTheWay { path: PathBuf },
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

/// How [`Store::add_file`] takes the file in. A directory model is always
/// copied.
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
    /// The model's file, or directory.
    pub path: PathBuf,
    /// What the manifest says.
    pub expected_size: u64,
    pub expected_sha256: String,
    /// The file's outcome; a directory model's is `Missing` when the
    /// directory is gone, else `Ok`, and its files' are in `files`.
    pub outcome: VerifyOutcome,
    /// A directory model's files, each checked, in name order; empty for a
    /// one-file model or a missing directory.
    pub files: Vec<FileReport>,
}

/// One file of a directory model, checked against the manifest.
#[derive(Debug)]
pub struct FileReport {
    /// Its name in the model's directory.
    pub file: String,
    pub path: PathBuf,
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
    /// The model is there and every file matches the manifest.
    pub fn is_ok(&self) -> bool {
        self.outcome.is_ok() && self.files.iter().all(|f| f.outcome.is_ok())
    }

    /// The files of a directory model that failed, in name order.
    pub fn failed_files(&self) -> impl Iterator<Item = &FileReport> {
        self.files.iter().filter(|f| !f.outcome.is_ok())
    }
}

impl VerifyOutcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, VerifyOutcome::Ok)
    }
}

/// `<label>: ok (…)`, `<label>: CORRUPT: …` and so on, for a model or one
/// file of one.
fn describe(
    f: &mut fmt::Formatter<'_>,
    label: &str,
    path: &Path,
    expected_size: u64,
    expected_sha256: &str,
    outcome: &VerifyOutcome,
) -> fmt::Result {
    let path = path.display();
    match outcome {
        VerifyOutcome::Ok => write!(
            f,
            "{label}: ok ({expected_size} bytes, sha256 {expected_sha256})"
        ),
        VerifyOutcome::Missing => write!(f, "{label}: MISSING: {path} is not there"),
        VerifyOutcome::SizeMismatch { actual } => write!(
            f,
            "{label}: CORRUPT: {path} is {actual} bytes, the manifest says {expected_size}"
        ),
        VerifyOutcome::HashMismatch { actual_sha256 } => write!(
            f,
            "{label}: CORRUPT: {path} has sha256 {actual_sha256}, the manifest says {expected_sha256}"
        ),
        VerifyOutcome::Unreadable(e) => write!(f, "{label}: UNREADABLE: {path}: {e}"),
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        if self.files.is_empty() {
            return describe(
                f,
                name,
                &self.path,
                self.expected_size,
                &self.expected_sha256,
                &self.outcome,
            );
        }
        let failed = self.failed_files().count();
        if failed == 0 {
            return write!(
                f,
                "{name}: ok ({} files, {} bytes, sha256 {})",
                self.files.len(),
                self.expected_size,
                self.expected_sha256
            );
        }
        write!(
            f,
            "{name}: CORRUPT: {failed} of its {} files differ from the manifest",
            self.files.len()
        )?;
        for file in self.failed_files() {
            f.write_str("\n  ")?;
            describe(
                f,
                &file.file,
                &file.path,
                file.expected_size,
                &file.expected_sha256,
                &file.outcome,
            )?;
        }
        Ok(())
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

    /// The path of `name`'s file (or directory), which exists (it is not
    /// hashed; see [`Store::verify`]).
    pub fn path(&self, name: &str) -> Result<PathBuf, StoreError> {
        let entry = self.get(name)?;
        let path = self.dir.join(&entry.file);
        let there = if entry.kind.is_dir() {
            path.is_dir()
        } else {
            path.is_file()
        };
        if !there {
            return Err(StoreError::FileMissing {
                name: entry.name,
                path,
            });
        }
        Ok(path)
    }

    /// [`Store::path`] of a model that must be of `kind`.
    pub fn path_of(&self, name: &str, kind: ModelKind) -> Result<PathBuf, StoreError> {
        let entry = self.get(name)?;
        if entry.kind != kind {
            return Err(StoreError::WrongKind {
                name: entry.name,
                kind: entry.kind,
                wanted: kind,
            });
        }
        self.path(name)
    }

    /// Adds the whisper.cpp model file at `src` as `name`: [`Store::add`]
    /// with [`ModelKind::Whisper`].
    pub fn add_file(
        &self,
        name: &str,
        src: &Path,
        options: &AddOptions,
    ) -> Result<ModelEntry, StoreError> {
        self.add(ModelKind::Whisper, name, src, options)
    }

    /// Adds the model at `src` (a file, or for Moonshine a directory) as
    /// `name`: checks it is a model of `kind` (a whisper file's language
    /// and quantisation come from its header), computes SHA-256 and size of
    /// each file on the way in, puts it in place under
    /// [`ModelKind::file_name`] with a rename, then records it in the
    /// manifest. A Moonshine directory brings its three files and its
    /// licence, if it has one ([`kind::moonshine_files`]).
    ///
    /// An installed model of the same name is an error unless
    /// `options.replace` is set.
    pub fn add(
        &self,
        kind: ModelKind,
        name: &str,
        src: &Path,
        options: &AddOptions,
    ) -> Result<ModelEntry, StoreError> {
        checked(name)?;
        let dest = self.dir.join(kind.file_name(name));
        self.refuse_taken(name, &dest, options.replace)?;
        // Content first: refusing a 500 MB web page should not take a copy.
        let facts = facts(kind, src)?;
        if kind.is_dir() {
            let (files, aside) = self.copy_dir_in(name, src, &dest)?;
            let digests = Digests {
                sha256: files_digest(&files),
                sha1: None,
                md5: None,
                size: files.iter().map(|f| f.size).sum(),
            };
            let installed = Installed {
                kind,
                facts,
                digests,
                files,
            };
            // Should the manifest write fail, the old model stays aside
            // (hidden) rather than be deleted with nothing recording the new.
            let entry = self.record(name, &dest, installed, &options.source)?;
            if let Some(aside) = aside {
                remove_if_present(&aside)?;
            }
            return Ok(entry);
        }
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
        let installed = Installed {
            kind,
            facts,
            digests,
            files: Vec::new(),
        };
        self.record(name, &dest, installed, &options.source)
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
        let kind = ModelKind::Whisper;
        let dest = self.dir.join(kind.file_name(name));
        self.refuse_taken(name, &dest, replace)?;
        let facts = facts(kind, part)?;
        fs::rename(part, &dest).map_err(|source| StoreError::Write {
            path: dest.clone(),
            source,
        })?;
        let installed = Installed {
            kind,
            facts,
            digests: digests.clone(),
            files: Vec::new(),
        };
        self.record(name, &dest, installed, source)
    }

    pub(crate) fn refuse_overwrite(&self, name: &str, replace: bool) -> Result<(), StoreError> {
        if !replace && self.manifest()?.models.contains_key(name) {
            return Err(StoreError::Exists {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// [`Store::refuse_overwrite`], and `dest` is no other model's, nor an
    /// unmanaged directory (a file there is replaced by the rename, as a
    /// download always has).
    fn refuse_taken(&self, name: &str, dest: &Path, replace: bool) -> Result<(), StoreError> {
        let manifest = self.manifest()?;
        let installed = manifest.models.contains_key(name);
        if installed && !replace {
            return Err(StoreError::Exists {
                name: name.to_owned(),
            });
        }
        let file = dest.file_name().and_then(|f| f.to_str()).unwrap_or("");
        if let Some(owner) = manifest
            .models
            .values()
            .find(|e| e.file == file && e.name != name)
        {
            return Err(StoreError::FileTaken {
                path: dest.to_owned(),
                owner: owner.name.clone(),
            });
        }
        let unmanaged_dir = !installed && fs::symlink_metadata(dest).is_ok_and(|m| m.is_dir());
        if unmanaged_dir && !replace {
            return Err(StoreError::InTheWay {
                path: dest.to_owned(),
            });
        }
        Ok(())
    }

    /// Copies the model directory `src` into a temporary directory in the
    /// store, hashing each file, then renames it to `dest`; an old `dest`
    /// is moved aside first and returned for the caller to delete once the
    /// manifest no longer names it. Nothing is left behind on failure.
    fn copy_dir_in(
        &self,
        name: &str,
        src: &Path,
        dest: &Path,
    ) -> Result<(Vec<FileEntry>, Option<PathBuf>), StoreError> {
        let pid = std::process::id();
        let tmp = self.dir.join(format!(".{name}.{pid}.tmp"));
        let aside = self.dir.join(format!(".{name}.{pid}.old"));
        // A crashed import of a process with the same id left these.
        remove_if_present(&tmp)?;
        remove_if_present(&aside)?;
        let write = |path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Write { path, source }
        };
        let names = kind::moonshine_files(src).map_err(|source| StoreError::Read {
            path: src.to_owned(),
            source,
        })?;
        fs::create_dir(&tmp).map_err(write(&tmp))?;
        let copied = (|| {
            let mut files = Vec::with_capacity(names.len());
            for file in names {
                let digests = hash::copy_file_hashed(&src.join(&file), &tmp.join(&file)).map_err(
                    |e| match e {
                        CopyError::Read(source) => StoreError::Read {
                            path: src.join(&file),
                            source,
                        },
                        CopyError::Write(source) => StoreError::Write {
                            path: tmp.join(&file),
                            source,
                        },
                    },
                )?;
                files.push(FileEntry {
                    name: file,
                    size: digests.size,
                    sha256: digests.sha256,
                });
            }
            files.sort_by(|a, b| a.name.cmp(&b.name));
            manifest::sync_dir(&tmp).map_err(write(&tmp))?;
            Ok(files)
        })();
        let files = match copied {
            Ok(files) => files,
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let moved_aside = match fs::rename(dest, &aside) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(source) => {
                let _ = fs::remove_dir_all(&tmp);
                return Err(StoreError::Write {
                    path: dest.to_owned(),
                    source,
                });
            }
        };
        if let Err(source) = fs::rename(&tmp, dest) {
            let _ = fs::remove_dir_all(&tmp);
            if moved_aside {
                // Put the old model back rather than leave none.
                let _ = fs::rename(&aside, dest);
            }
            return Err(StoreError::Write {
                path: dest.to_owned(),
                source,
            });
        }
        Ok((files, moved_aside.then_some(aside)))
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

    /// Writes the manifest entry for a model now at `dest`.
    fn record(
        &self,
        name: &str,
        dest: &Path,
        installed: Installed,
        source: &str,
    ) -> Result<ModelEntry, StoreError> {
        manifest::sync_dir(&self.dir).map_err(|source| StoreError::Write {
            path: self.dir.clone(),
            source,
        })?;
        let Installed {
            kind,
            facts,
            digests,
            files,
        } = installed;
        let entry = ModelEntry {
            name: name.to_owned(),
            kind,
            file: kind.file_name(name),
            sha256: digests.sha256.clone(),
            size: digests.size,
            language: facts.language,
            quantisation: facts.quantisation,
            files,
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
        let (outcome, files) = if entry.kind.is_dir() {
            match fs::metadata(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    (VerifyOutcome::Missing, Vec::new())
                }
                Err(e) => (VerifyOutcome::Unreadable(e), Vec::new()),
                Ok(_) => {
                    let files = entry
                        .files
                        .iter()
                        .map(|f| {
                            let file_path = path.join(&f.name);
                            FileReport {
                                outcome: check_file(&file_path, f.size, &f.sha256),
                                file: f.name.clone(),
                                path: file_path,
                                expected_size: f.size,
                                expected_sha256: f.sha256.clone(),
                            }
                        })
                        .collect();
                    (VerifyOutcome::Ok, files)
                }
            }
        } else {
            (check_file(&path, entry.size, &entry.sha256), Vec::new())
        };
        let report = VerifyReport {
            name: entry.name,
            path,
            expected_size: entry.size,
            expected_sha256: entry.sha256,
            outcome,
            files,
        };
        if !report.is_ok() {
            let failed: Vec<&str> = report.failed_files().map(|f| f.file.as_str()).collect();
            warn!(model = %report.name, path = %report.path.display(), files = ?failed, "model failed verification");
        }
        report
    }

    /// Deletes `name`: its manifest entry first, then its file (or
    /// directory), so a crash in between leaves an unmanaged file rather
    /// than an entry without one. Returns the entry removed.
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

/// The file name a whisper model gets in the store, whisper.cpp's
/// convention ([`ModelKind::file_name`] for every kind).
pub fn file_name(name: &str) -> String {
    ModelKind::Whisper.file_name(name)
}

/// Where a model setting (`stt.model`, `stt.live_model`, `stt.turn_model`)
/// points: `value` is a path if it contains a slash, else the name of a
/// model of `kind` installed in the store at `models_dir`. A name the
/// manifest does not know still finds a model put there by hand under the
/// store's file name for it (how the live engine was installed before the
/// store knew Moonshine). Reads only: a missing `models_dir` is not made.
pub fn resolve(models_dir: &Path, value: &str, kind: ModelKind) -> Result<PathBuf, StoreError> {
    if value.contains('/') {
        return Ok(PathBuf::from(value));
    }
    checked(value)?;
    let by_hand = models_dir.join(kind.file_name(value));
    let found = if models_dir.is_dir() {
        Store::open(models_dir).and_then(|store| store.path_of(value, kind))
    } else {
        Err(StoreError::NotFound {
            name: value.to_owned(),
            dir: models_dir.to_owned(),
            installed: Vec::new(),
        })
    };
    match found {
        Err(StoreError::NotFound { .. } | StoreError::Manifest(_)) if by_hand.exists() => {
            Ok(by_hand)
        }
        found => found,
    }
}

/// What an added model's content says about it.
struct Facts {
    language: Language,
    quantisation: String,
}

/// A model in place in the store, about to be recorded.
struct Installed {
    kind: ModelKind,
    facts: Facts,
    digests: Digests,
    files: Vec<FileEntry>,
}

/// Checks that `src` is a model of `kind` and reads what it says.
fn facts(kind: ModelKind, src: &Path) -> Result<Facts, StoreError> {
    match kind {
        ModelKind::Whisper => {
            let header = ggml::read_header(src).map_err(|problem| StoreError::NotAModel {
                path: src.to_owned(),
                problem,
            })?;
            Ok(Facts {
                language: header.language,
                quantisation: header.quantisation,
            })
        }
        ModelKind::Moonshine | ModelKind::SmartTurn => {
            kind::check(kind, src).map_err(|problem| StoreError::NotOfKind {
                path: src.to_owned(),
                kind,
                problem,
            })?;
            Ok(Facts {
                language: if kind == ModelKind::Moonshine {
                    Language::En
                } else {
                    Language::Any
                },
                quantisation: String::new(),
            })
        }
    }
}

/// Compares the file at `path` with the manifest's size and SHA-256.
fn check_file(path: &Path, size: u64, sha256: &str) -> VerifyOutcome {
    match fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => VerifyOutcome::Missing,
        Err(e) => VerifyOutcome::Unreadable(e),
        Ok(meta) if meta.len() != size => VerifyOutcome::SizeMismatch { actual: meta.len() },
        Ok(_) => match hash::hash_file(path) {
            Err(e) => VerifyOutcome::Unreadable(e),
            Ok(d) if d.sha256 == sha256 && d.size == size => VerifyOutcome::Ok,
            Ok(d) if d.size != size => VerifyOutcome::SizeMismatch { actual: d.size },
            Ok(d) => VerifyOutcome::HashMismatch {
                actual_sha256: d.sha256,
            },
        },
    }
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

/// Deletes a file, or a directory with what is in it; a symbolic link is
/// deleted itself, never followed (the package links its models into the
/// store from /usr/share/hark).
fn remove_if_present(path: &Path) -> Result<(), StoreError> {
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        _ => fs::remove_file(path),
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Write {
            path: path.to_owned(),
            source,
        }),
    }
}
