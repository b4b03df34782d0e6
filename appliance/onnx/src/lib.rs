//! ONNX Runtime, loaded once per process from an explicit path (ort's
//! `load-dynamic`): the library `appliance/setup-voices` installs. Piper
//! voices (`hark-tts`) and the live speech engine (`hark-stt`) share it;
//! whoever needs it first loads it, and every later load of the same file
//! returns the same runtime.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use ort::environment::Environment;
use ort::logging::LogLevel;

/// The ONNX Runtime minor version ort's `api-31` feature needs: the C API
/// version equals it, and ort refuses older libraries.
pub const ORT_MINOR_VERSION: u32 = ort::MINOR_VERSION;

/// What went wrong loading ONNX Runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "ONNX Runtime library {} cannot be read: {source} (run appliance/setup-voices to install it)",
        path.display()
    )]
    Missing {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not an ONNX Runtime library for this machine: {problem}", path.display())]
    NotLibrary { path: PathBuf, problem: String },
    #[error(
        "{} is ONNX Runtime {found}, but Hark needs 1.{}.x or newer (run appliance/setup-voices to install it)",
        path.display(),
        ORT_MINOR_VERSION
    )]
    Version { path: PathBuf, found: String },
    #[error("cannot load ONNX Runtime from {}: {reason}", path.display())]
    Load { path: PathBuf, reason: String },
    #[error(
        "ONNX Runtime is already loaded from {} in this process; it cannot also be loaded from {}",
        loaded.display(),
        requested.display()
    )]
    AlreadyLoaded { loaded: PathBuf, requested: PathBuf },
    #[error("cannot create the ONNX Runtime environment from {}: {source}", path.display())]
    Environment {
        path: PathBuf,
        #[source]
        source: ort::Error,
    },
}

/// ONNX Runtime, loaded into this process. Cloning is cheap; every clone is
/// the same runtime.
#[derive(Debug, Clone)]
pub struct OnnxRuntime {
    env: Environment,
    library: PathBuf,
}

/// How far loading got. ort keeps the first library it loads for the life of
/// the process and allows one environment, so both facts must be remembered
/// here to refuse a second, different library instead of silently using the
/// first one.
enum State {
    Empty,
    /// ort holds this library but creating the environment failed.
    Library(PathBuf),
    /// Kept for the life of the process: dropping the last clone would
    /// release the environment, and ort never allows another.
    Ready(OnnxRuntime),
}

// A Mutex rather than a OnceLock: loading can fail, and a failed attempt
// (say, before the set-up ran) must leave the way open for a later one.
static STATE: Mutex<State> = Mutex::new(State::Empty);

impl OnnxRuntime {
    /// Loads ONNX Runtime from `library` (e.g. `…/libonnxruntime.so.1.31.1`)
    /// and creates the process' environment. Loading the same file again
    /// (by any path that resolves to it) returns the runtime already loaded;
    /// another file is an error, since a process can hold only one.
    pub fn load(library: &Path) -> Result<OnnxRuntime, RuntimeError> {
        let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
        let canonical = std::fs::canonicalize(library);
        let held = match &*state {
            State::Empty => None,
            State::Library(path) => Some(path.clone()),
            State::Ready(runtime) => Some(runtime.library.clone()),
        };
        if let Some(held) = held {
            if canonical.as_ref().ok() != Some(&held) {
                return Err(RuntimeError::AlreadyLoaded {
                    loaded: held,
                    requested: library.to_path_buf(),
                });
            }
            if let State::Ready(runtime) = &*state {
                return Ok(runtime.clone());
            }
        }
        // Absolute from here on: ort resolves a relative path against the
        // executable's directory, not the working directory.
        let path = canonical.map_err(|source| RuntimeError::Missing {
            path: library.to_path_buf(),
            source,
        })?;
        if matches!(*state, State::Empty) {
            check_elf(&path)?;
            guard_panics(&path, || ort::init_from(&path).map(drop))?
                .map_err(|e| load_error(&path, e))?;
            *state = State::Library(path.clone());
        }
        let env = guard_panics(&path, || {
            ort::init().with_name("hark").with_telemetry(false).build()
        })?
        .map_err(|source| RuntimeError::Environment {
            path: path.clone(),
            source,
        })?;
        // ort asks ONNX Runtime for everything down to verbose and filters in
        // `tracing`; formatting all of that costs time on every run.
        env.set_log_level(LogLevel::Warning);
        tracing::info!(library = %path.display(), "ONNX Runtime loaded");
        let runtime = OnnxRuntime { env, library: path };
        *state = State::Ready(runtime.clone());
        Ok(runtime)
    }

    /// The library this runtime was loaded from (resolved, absolute).
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The process' environment, which sessions are built in.
    pub fn env(&self) -> &Environment {
        &self.env
    }
}

/// Run options under which ONNX Runtime gives its CPU arena's free chunks
/// back at the end of the run. A session's arena otherwise keeps the
/// buffers of its largest run for as long as it lives: the live engine's
/// and the end-of-turn model's would stay resident beside a voice's while
/// it speaks (docs/benchmarks.md, the turn: memory).
pub fn releasing_run() -> ort::Result<ort::session::RunOptions> {
    let mut run = ort::session::RunOptions::new()?;
    run.set("memory.enable_memory_arena_shrinkage", "cpu:0")?;
    Ok(run)
}

fn load_error(path: &Path, error: ort::LoadDynamicError) -> RuntimeError {
    match error {
        ort::LoadDynamicError::BadVersion { version_str, .. } => RuntimeError::Version {
            path: path.to_path_buf(),
            found: version_str,
        },
        // libloading's message is only "dlopen failed"; dlerror's text
        // (which file or symbol is missing) is in its source.
        ort::LoadDynamicError::Dlopen { error, .. } => {
            let mut reason = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                reason.push_str(": ");
                reason.push_str(&cause.to_string());
                source = cause.source();
            }
            RuntimeError::Load {
                path: path.to_path_buf(),
                reason,
            }
        }
        other => RuntimeError::Load {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

/// Runs a call into ort's loader, turning a panic into an error. ort asserts
/// on things a foreign library controls (a null API table, a version string
/// that is not UTF-8); those must not take the appliance down.
fn guard_panics<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T, RuntimeError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let reason = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "ort panicked".to_owned());
        RuntimeError::Load {
            path: path.to_path_buf(),
            reason,
        }
    })
}

/// Checks the file is a complete shared library for this machine before
/// dlopen sees it. dlopen answers a wrong file with a terse "invalid ELF
/// header" at best; at worst, on a truncated library (an interrupted copy),
/// glibc maps segments past the end of the file and the process dies of
/// SIGBUS inside dlopen, which no error handling can catch.
fn check_elf(path: &Path) -> Result<(), RuntimeError> {
    let not_library = |problem: String| RuntimeError::NotLibrary {
        path: path.to_path_buf(),
        problem,
    };
    let unreadable = |source: std::io::Error| RuntimeError::Missing {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(unreadable)?;
    let metadata = file.metadata().map_err(unreadable)?;
    if !metadata.is_file() {
        return Err(not_library("it is not a regular file".to_owned()));
    }
    let size = metadata.len();

    let mut header = [0u8; 64];
    let got = read_up_to(&mut file, &mut header).map_err(unreadable)?;
    if got < 20 || header[..4] != *b"\x7fELF" {
        return Err(not_library(
            "it is not a shared library (no ELF header)".to_owned(),
        ));
    }
    let elf = Elf {
        is_64: header[4] == 2,
        little_endian: header[5] == 1,
    };
    if elf.is_64 != cfg!(target_pointer_width = "64") {
        return Err(not_library(format!(
            "it is a {}-bit library",
            if elf.is_64 { 64 } else { 32 }
        )));
    }
    let machine = elf.u16(&header[18..20]);
    let expected: Option<(u16, &str)> = if cfg!(target_arch = "x86_64") {
        Some((62, "x86_64"))
    } else if cfg!(target_arch = "aarch64") {
        Some((183, "aarch64"))
    } else {
        None
    };
    if let Some((want, arch)) = expected
        && machine != want
    {
        let name = match machine {
            62 => "x86_64".to_owned(),
            183 => "aarch64".to_owned(),
            40 => "arm".to_owned(),
            3 => "x86".to_owned(),
            other => format!("ELF machine {other}"),
        };
        return Err(not_library(format!(
            "it is built for {name}, this machine is {arch} (run appliance/setup-voices without ARCH)"
        )));
    }

    // The program header table: where each loadable segment lies in the file.
    let (table_offset, entry_size, entries) = if elf.is_64 {
        (
            elf.u64(&header[32..40]),
            elf.u16(&header[54..56]),
            elf.u16(&header[56..58]),
        )
    } else {
        (
            u64::from(elf.u32(&header[28..32])),
            elf.u16(&header[42..44]),
            elf.u16(&header[44..46]),
        )
    };
    let min_entry = if elf.is_64 { 56 } else { 32 };
    let truncated = || {
        not_library(format!(
            "it is truncated or damaged ({size} bytes; reinstall it with appliance/setup-voices)"
        ))
    };
    if got < header.len() || entries == 0 || usize::from(entry_size) < min_entry {
        return Err(truncated());
    }
    let table_len = u64::from(entry_size) * u64::from(entries);
    if table_offset
        .checked_add(table_len)
        .is_none_or(|end| end > size)
    {
        return Err(truncated());
    }
    // The section header table is not loaded, but it is normally the last
    // thing in the file, so it is what a cut at the very end removes.
    let (sections_offset, section_size, sections) = if elf.is_64 {
        (
            elf.u64(&header[40..48]),
            elf.u16(&header[58..60]),
            elf.u16(&header[60..62]),
        )
    } else {
        (
            u64::from(elf.u32(&header[32..36])),
            elf.u16(&header[46..48]),
            elf.u16(&header[48..50]),
        )
    };
    let sections_len = u64::from(section_size) * u64::from(sections);
    if sections > 0
        && sections_offset
            .checked_add(sections_len)
            .is_none_or(|end| end > size)
    {
        return Err(truncated());
    }
    let mut table = vec![0u8; usize::from(entry_size) * usize::from(entries)];
    file.seek(SeekFrom::Start(table_offset))
        .and_then(|_| file.read_exact(&mut table))
        .map_err(unreadable)?;
    const PT_LOAD: u32 = 1;
    for entry in table.chunks_exact(usize::from(entry_size)) {
        let (kind, offset, file_size) = if elf.is_64 {
            (
                elf.u32(&entry[0..4]),
                elf.u64(&entry[8..16]),
                elf.u64(&entry[32..40]),
            )
        } else {
            (
                elf.u32(&entry[0..4]),
                u64::from(elf.u32(&entry[4..8])),
                u64::from(elf.u32(&entry[16..20])),
            )
        };
        if kind == PT_LOAD && offset.checked_add(file_size).is_none_or(|end| end > size) {
            return Err(truncated());
        }
    }
    Ok(())
}

/// Reads until `buf` is full or the file ends; returns how much was read.
fn read_up_to(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Integer decoding in the ELF file's byte order. Callers pass slices of
/// exactly the integer's width.
struct Elf {
    is_64: bool,
    little_endian: bool,
}

impl Elf {
    fn bytes<const N: usize>(&self, raw: &[u8]) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&raw[..N]);
        if !self.little_endian {
            out.reverse();
        }
        out
    }

    fn u16(&self, raw: &[u8]) -> u16 {
        u16::from_le_bytes(self.bytes(raw))
    }

    fn u32(&self, raw: &[u8]) -> u32 {
        u32::from_le_bytes(self.bytes(raw))
    }

    fn u64(&self, raw: &[u8]) -> u64 {
        u64::from_le_bytes(self.bytes(raw))
    }
}
