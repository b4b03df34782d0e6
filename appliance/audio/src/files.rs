//! Which filesystem paths agents may read (audio to transcribe) or write
//! (synthesised speech).
//!
//! Agents name files; the appliance only touches files inside the
//! directories its configuration lists. [`AllowedDirs`] turns an agent's path
//! into one that is safe to open, or into a [`PathError`] that names the path
//! and lists the allowed directories, so the agent can correct itself.
//!
//! The rules, for reading ([`AllowedDirs::resolve_read`]):
//!
//! - A relative path is taken relative to the *first* allowed directory, so
//!   an agent can name `hello.wav`; an absolute path is taken as is.
//! - A path with a `..` component is refused outright, before looking at the
//!   filesystem, even where it would resolve inside.
//! - The path must lie, as written, inside an allowed directory (as
//!   configured, or as canonicalised): a path elsewhere is refused without
//!   looking at the filesystem, so errors never tell whether files outside
//!   exist.
//! - It is then canonicalised (every symlink resolved) and the result must
//!   still lie inside an allowed directory, compared component by component:
//!   `/data/audio-evil/x.wav` is not inside `/data/audio`. So a symlink inside
//!   pointing outside is refused; one pointing to another allowed place is
//!   fine.
//! - The result must be a regular file (not a directory, FIFO or device).
//!
//! For writing ([`AllowedDirs::resolve_write`]) the same rules apply to the
//! parent directory, which must exist; the file name must be a plain name; and
//! if the target exists it must be a regular file, not a symlink.
//!
//! Configured directories are canonicalised once, by [`AllowedDirs::new`]. One
//! that does not exist (or is not a directory) then is skipped with a warning
//! and stays unusable until restart; if none is left, every request fails with
//! [`PathError::NoDirsConfigured`], which names the configuration key.
//!
//! What this does not do: guard against a local user racing the check, e.g.
//! swapping a file for a symlink between [`AllowedDirs::resolve_read`] and the
//! open. Anyone with write access to an allowed directory can already put any
//! audio there. To write without following a symlink planted after the check,
//! write a temporary file in the same directory and rename it onto the
//! returned path (a rename replaces a symlink; it does not follow it).

use std::fmt::Write as _;
use std::io;
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The configuration lists no directory, or none of those it lists exists.
    #[error(
        "no directories are configured for file access: set `{setting}` in the configuration \
         to the directories agents may use{}",
        missing_note(.missing)
    )]
    NoDirsConfigured {
        /// The configuration key, e.g. `files.read_dirs`.
        setting: String,
        /// Configured directories that were skipped because they are missing.
        missing: Vec<PathBuf>,
    },
    /// The path has a `..` component.
    #[error(
        "{}: paths may not contain `..`; name the file by its path inside one of the allowed \
         directories: {}",
        .path.display(),
        list(.allowed)
    )]
    ParentDots {
        path: PathBuf,
        allowed: Vec<PathBuf>,
    },
    /// The path, or what its symlinks lead to, is outside every allowed
    /// directory.
    #[error(
        "{} is outside the directories agents may use; use a file in one of: {}",
        .path.display(),
        list(.allowed)
    )]
    NotAllowed {
        path: PathBuf,
        allowed: Vec<PathBuf>,
    },
    /// Nothing at that path (or, for writing, no such parent directory).
    #[error(
        "{} does not exist; the allowed directories are: {}",
        .path.display(),
        list(.allowed)
    )]
    NotFound {
        path: PathBuf,
        allowed: Vec<PathBuf>,
    },
    /// A directory, FIFO, socket or device where a regular file is needed.
    #[error("{} is not a regular file; name an audio file", .path.display())]
    NotAFile { path: PathBuf },
    /// For writing: the parent is not a directory.
    #[error("{} is not a directory; name a file inside an allowed directory", .path.display())]
    NotADirectory { path: PathBuf },
    /// For writing: the path ends in no file name (`/`, `.`).
    #[error("{} does not end in a file name; name the file to write, e.g. `reply.wav`", .path.display())]
    NoFileName { path: PathBuf },
    /// For writing: the target exists and is a symlink.
    #[error("{} is a symbolic link; Hark does not write through links, choose another name", .path.display())]
    Symlink { path: PathBuf },
    /// The filesystem refused to tell (permissions, I/O error).
    #[error("cannot check {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn list(allowed: &[PathBuf]) -> String {
    let mut out = String::new();
    for (i, dir) in allowed.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(out, "{sep}{}", dir.display());
    }
    out
}

fn missing_note(missing: &[PathBuf]) -> String {
    if missing.is_empty() {
        String::new()
    } else {
        format!(" (configured but missing: {})", list(missing))
    }
}

/// One allowed directory: as configured (absolute) and canonicalised.
#[derive(Debug, Clone)]
struct Dir {
    configured: PathBuf,
    canonical: PathBuf,
}

/// The directories agents may read from or write to.
#[derive(Debug, Clone)]
pub struct AllowedDirs {
    dirs: Vec<Dir>,
    /// Configured directories skipped at construction.
    missing: Vec<PathBuf>,
    setting: String,
}

impl AllowedDirs {
    /// `dirs` as configured; `setting` is the configuration key that lists
    /// them, named in [`PathError::NoDirsConfigured`]. Each directory is
    /// canonicalised now; one that does not exist or is not a directory is
    /// skipped with a warning (see [`AllowedDirs::missing`]), so an unmounted
    /// disk does not stop the appliance from starting.
    pub fn new(dirs: Vec<PathBuf>, setting: impl Into<String>) -> Self {
        let setting = setting.into();
        let mut kept = Vec::new();
        let mut missing = Vec::new();
        for dir in dirs {
            match dir.canonicalize() {
                Ok(canonical) if canonical.is_dir() => {
                    // A relative configured path means little to an agent.
                    let configured = if dir.is_absolute() {
                        dir
                    } else {
                        canonical.clone()
                    };
                    kept.push(Dir {
                        configured,
                        canonical,
                    });
                }
                Ok(_) => {
                    tracing::warn!(dir = %dir.display(), %setting, "not a directory; agents cannot use it");
                    missing.push(dir);
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), %setting, error = %e, "cannot use this directory for agents' files");
                    missing.push(dir);
                }
            }
        }
        Self {
            dirs: kept,
            missing,
            setting,
        }
    }

    /// The usable directories, canonicalised, in configuration order.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.canonical.clone()).collect()
    }

    /// Configured directories that were skipped (missing or not a directory).
    pub fn missing(&self) -> &[PathBuf] {
        &self.missing
    }

    /// The canonical path of an existing regular file an agent may read.
    pub fn resolve_read(&self, requested: &Path) -> Result<PathBuf, PathError> {
        let path = self.absolute(requested)?;
        let canonical = path.canonicalize().map_err(|e| self.io_error(&path, e))?;
        self.check_inside(&path, &canonical)?;
        let meta = std::fs::metadata(&canonical).map_err(|e| self.io_error(&path, e))?;
        if !meta.is_file() {
            return Err(PathError::NotAFile { path });
        }
        Ok(canonical)
    }

    /// The path to create (or replace) for a file an agent wants written: the
    /// canonical parent joined with the file name. The parent must exist; an
    /// existing target must be a regular file, not a symlink.
    pub fn resolve_write(&self, requested: &Path) -> Result<PathBuf, PathError> {
        let path = self.absolute(requested)?;
        let (Some(parent), Some(Component::Normal(name))) =
            (path.parent(), path.components().next_back())
        else {
            return Err(PathError::NoFileName { path });
        };
        let parent_canonical = parent
            .canonicalize()
            .map_err(|e| self.io_error(parent, e))?;
        self.check_inside(&path, &parent_canonical)?;
        if !parent_canonical.is_dir() {
            return Err(PathError::NotADirectory {
                path: parent.to_owned(),
            });
        }
        let target = parent_canonical.join(name);
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() => Err(PathError::Symlink { path }),
            Ok(meta) if !meta.is_file() => Err(PathError::NotAFile { path }),
            Ok(_) => Ok(target),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(target),
            Err(source) => Err(PathError::Io { path, source }),
        }
    }

    /// The request made absolute and checked without touching the
    /// filesystem: no `..`, and inside an allowed directory as written.
    fn absolute(&self, requested: &Path) -> Result<PathBuf, PathError> {
        let Some(first) = self.dirs.first() else {
            return Err(PathError::NoDirsConfigured {
                setting: self.setting.clone(),
                missing: self.missing.clone(),
            });
        };
        if requested
            .components()
            .any(|c| matches!(c, Component::ParentDir))
        {
            return Err(PathError::ParentDots {
                path: requested.to_owned(),
                allowed: self.dirs(),
            });
        }
        let path = if requested.is_absolute() {
            requested.to_owned()
        } else {
            first.configured.join(requested)
        };
        let inside = self
            .dirs
            .iter()
            .any(|d| path.starts_with(&d.configured) || path.starts_with(&d.canonical));
        if !inside {
            return Err(PathError::NotAllowed {
                path,
                allowed: self.dirs(),
            });
        }
        Ok(path)
    }

    /// `canonical` (what `path` resolves to) must be inside an allowed
    /// directory, component by component.
    fn check_inside(&self, path: &Path, canonical: &Path) -> Result<(), PathError> {
        if self
            .dirs
            .iter()
            .any(|d| canonical.starts_with(&d.canonical))
        {
            Ok(())
        } else {
            Err(PathError::NotAllowed {
                path: path.to_owned(),
                allowed: self.dirs(),
            })
        }
    }

    fn io_error(&self, path: &Path, source: io::Error) -> PathError {
        match source.kind() {
            io::ErrorKind::NotFound => PathError::NotFound {
                path: path.to_owned(),
                allowed: self.dirs(),
            },
            // A path through a regular file (`x.wav/y.wav`).
            io::ErrorKind::NotADirectory => PathError::NotAFile {
                path: path.to_owned(),
            },
            _ => PathError::Io {
                path: path.to_owned(),
                source,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    const KEY: &str = "files.read_dirs";

    /// A tempdir holding `audio/` (allowed, with `a.wav` and `sub/b.wav`),
    /// `audio-evil/` (a sibling sharing the prefix, with `x.wav`) and
    /// `outside/` (with `secret.wav`).
    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        dirs: AllowedDirs,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().canonicalize().expect("canonical tempdir");
        for dir in ["audio/sub", "audio-evil", "outside"] {
            fs::create_dir_all(root.join(dir)).expect("mkdir");
        }
        for file in [
            "audio/a.wav",
            "audio/sub/b.wav",
            "audio-evil/x.wav",
            "outside/secret.wav",
        ] {
            fs::write(root.join(file), b"RIFF").expect("write");
        }
        let dirs = AllowedDirs::new(vec![root.join("audio")], KEY);
        Fixture {
            _tmp: tmp,
            root,
            dirs,
        }
    }

    #[test]
    fn reads_a_file_inside_by_absolute_or_relative_path() {
        let f = fixture();
        let a = f.root.join("audio/a.wav");
        assert_eq!(f.dirs.resolve_read(&a).expect("absolute"), a);
        assert_eq!(
            f.dirs.resolve_read(Path::new("a.wav")).expect("relative"),
            a
        );
        assert_eq!(
            f.dirs
                .resolve_read(Path::new("./sub/b.wav"))
                .expect("nested"),
            f.root.join("audio/sub/b.wav")
        );
    }

    #[test]
    fn refuses_parent_dots_even_when_they_resolve_inside() {
        let f = fixture();
        for p in [
            f.root.join("audio/sub/../a.wav"),
            f.root.join("audio/../outside/secret.wav"),
            PathBuf::from("../outside/secret.wav"),
        ] {
            let e = f.dirs.resolve_read(&p).expect_err("dots");
            assert!(matches!(e, PathError::ParentDots { .. }), "{p:?}: {e}");
            assert!(e.to_string().contains("`..`"), "{e}");
        }
        let e = f
            .dirs
            .resolve_write(&f.root.join("audio/sub/../new.wav"))
            .expect_err("dots");
        assert!(matches!(e, PathError::ParentDots { .. }), "{e}");
    }

    #[test]
    fn refuses_paths_outside_including_a_sibling_with_the_same_prefix() {
        let f = fixture();
        for p in [
            f.root.join("outside/secret.wav"),
            f.root.join("audio-evil/x.wav"),
            PathBuf::from("/etc/passwd"),
        ] {
            let e = f.dirs.resolve_read(&p).expect_err("outside");
            let PathError::NotAllowed { path, allowed } = &e else {
                panic!("{p:?}: {e}");
            };
            assert_eq!(path, &p);
            assert_eq!(allowed, &[f.root.join("audio")]);
            let message = e.to_string();
            assert!(message.contains(&p.display().to_string()), "{message}");
            assert!(
                message.contains(&f.root.join("audio").display().to_string()),
                "{message}"
            );
        }
        // A missing file outside is still "not allowed", not "not found":
        // the answer must not reveal what exists outside.
        let e = f
            .dirs
            .resolve_read(&f.root.join("outside/nothing.wav"))
            .expect_err("outside");
        assert!(matches!(e, PathError::NotAllowed { .. }), "{e}");
    }

    #[test]
    fn follows_symlinks_only_when_they_stay_inside() {
        let f = fixture();
        let audio = f.root.join("audio");
        symlink(f.root.join("outside/secret.wav"), audio.join("leak.wav")).expect("symlink");
        symlink(f.root.join("outside"), audio.join("leakdir")).expect("symlink");
        symlink(audio.join("sub/b.wav"), audio.join("alias.wav")).expect("symlink");
        let e = f
            .dirs
            .resolve_read(Path::new("leak.wav"))
            .expect_err("leak");
        assert!(matches!(e, PathError::NotAllowed { .. }), "{e}");
        let e = f
            .dirs
            .resolve_read(Path::new("leakdir/secret.wav"))
            .expect_err("leak through a directory link");
        assert!(matches!(e, PathError::NotAllowed { .. }), "{e}");
        assert_eq!(
            f.dirs
                .resolve_read(Path::new("alias.wav"))
                .expect("inside → inside"),
            audio.join("sub/b.wav")
        );
    }

    #[test]
    fn an_allowed_dir_reached_through_a_symlink_works_both_ways() {
        let f = fixture();
        let link = f.root.join("audio-link");
        symlink(f.root.join("audio"), &link).expect("symlink");
        let dirs = AllowedDirs::new(vec![link.clone()], KEY);
        assert_eq!(dirs.dirs(), vec![f.root.join("audio")]);
        let expected = f.root.join("audio/a.wav");
        assert_eq!(
            dirs.resolve_read(&link.join("a.wav")).expect("configured"),
            expected
        );
        assert_eq!(dirs.resolve_read(&expected).expect("canonical"), expected);
    }

    #[test]
    fn refuses_directories_and_reports_missing_files() {
        let f = fixture();
        let e = f.dirs.resolve_read(Path::new("sub")).expect_err("dir");
        assert!(matches!(e, PathError::NotAFile { .. }), "{e}");
        let e = f.dirs.resolve_read(&f.root.join("audio")).expect_err("dir");
        assert!(matches!(e, PathError::NotAFile { .. }), "{e}");
        let e = f
            .dirs
            .resolve_read(Path::new("nothing.wav"))
            .expect_err("missing");
        let PathError::NotFound { path, allowed } = &e else {
            panic!("{e}");
        };
        assert_eq!(path, &f.root.join("audio/nothing.wav"));
        assert_eq!(allowed.len(), 1);
        let e = f
            .dirs
            .resolve_read(Path::new("a.wav/x.wav"))
            .expect_err("through a file");
        assert!(matches!(e, PathError::NotAFile { .. }), "{e}");
    }

    #[test]
    fn writes_inside_but_not_through_symlinks() {
        let f = fixture();
        let audio = f.root.join("audio");
        assert_eq!(
            f.dirs.resolve_write(Path::new("reply.wav")).expect("new"),
            audio.join("reply.wav")
        );
        assert_eq!(
            f.dirs
                .resolve_write(&audio.join("sub/reply.wav"))
                .expect("nested"),
            audio.join("sub/reply.wav")
        );
        // Replacing an existing regular file is allowed.
        assert_eq!(
            f.dirs.resolve_write(Path::new("a.wav")).expect("replace"),
            audio.join("a.wav")
        );
        symlink(f.root.join("outside/secret.wav"), audio.join("trap.wav")).expect("symlink");
        symlink(audio.join("a.wav"), audio.join("alias.wav")).expect("symlink");
        symlink(audio.join("gone.wav"), audio.join("dangling.wav")).expect("symlink");
        for name in ["trap.wav", "alias.wav", "dangling.wav"] {
            let e = f
                .dirs
                .resolve_write(Path::new(name))
                .expect_err("symlink target");
            assert!(matches!(e, PathError::Symlink { .. }), "{name}: {e}");
        }
        symlink(f.root.join("outside"), audio.join("outdir")).expect("symlink");
        let e = f
            .dirs
            .resolve_write(Path::new("outdir/new.wav"))
            .expect_err("parent leads outside");
        assert!(matches!(e, PathError::NotAllowed { .. }), "{e}");
        let e = f
            .dirs
            .resolve_write(&f.root.join("audio-evil/new.wav"))
            .expect_err("sibling");
        assert!(matches!(e, PathError::NotAllowed { .. }), "{e}");
        let e = f
            .dirs
            .resolve_write(Path::new("sub"))
            .expect_err("a directory");
        assert!(matches!(e, PathError::NotAFile { .. }), "{e}");
        let e = f
            .dirs
            .resolve_write(Path::new("nodir/new.wav"))
            .expect_err("no parent");
        assert!(matches!(e, PathError::NotFound { .. }), "{e}");
        let e = f.dirs.resolve_write(Path::new("/")).expect_err("root");
        assert!(
            matches!(
                e,
                PathError::NotAllowed { .. } | PathError::NoFileName { .. }
            ),
            "{e}"
        );
        let e = f.dirs.resolve_write(&audio).expect_err("the dir itself");
        assert!(matches!(e, PathError::NotAllowed { .. }), "{e}");
    }

    #[test]
    fn with_no_usable_directory_the_error_names_the_setting() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let missing = tmp.path().join("absent");
        let dirs = AllowedDirs::new(vec![missing.clone()], KEY);
        assert_eq!(dirs.missing(), std::slice::from_ref(&missing));
        for e in [
            dirs.resolve_read(Path::new("a.wav")).expect_err("none"),
            dirs.resolve_write(Path::new("a.wav")).expect_err("none"),
        ] {
            assert!(matches!(e, PathError::NoDirsConfigured { .. }), "{e}");
            let message = e.to_string();
            assert!(
                message.starts_with(
                    "no directories are configured for file access: set `files.read_dirs`"
                ),
                "{message}"
            );
            assert!(
                message.contains(&missing.display().to_string()),
                "{message}"
            );
        }
        let e = AllowedDirs::new(Vec::new(), KEY)
            .resolve_read(Path::new("/x.wav"))
            .expect_err("none");
        assert!(!e.to_string().contains("missing"), "{e}");
    }
}
