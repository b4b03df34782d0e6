//! Piper voices (VITS models exported to ONNX) on ONNX Runtime.
//!
//! ONNX Runtime is not linked: Hark loads the `libonnxruntime.so` that
//! `appliance/setup-voices` installs, from an explicit path, once per
//! process (`OnnxRuntime`). A `PiperModel` is one voice's session; it turns
//! a sentence's phoneme ids (from `phonemize`) into mono f32 samples at the
//! voice's sample rate, running the model exactly as piper-tts does.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use ort::environment::Environment;
use ort::logging::LogLevel;
use ort::session::{RunOptions, Session};
use ort::value::{Tensor, TensorElementType, TensorRef, ValueType};

use crate::voice::{Scales, VoiceConfig};

/// The ONNX Runtime minor version ort's `api-31` feature needs: the C API
/// version equals it, and ort refuses older libraries.
pub const ORT_MINOR_VERSION: u32 = ort::MINOR_VERSION;

/// What went wrong loading ONNX Runtime, loading a voice, or speaking.
#[derive(Debug, thiserror::Error)]
pub enum PiperError {
    #[error(
        "ONNX Runtime library {} cannot be read: {source} (run appliance/setup-voices to install it)",
        path.display()
    )]
    RuntimeMissing {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not an ONNX Runtime library for this machine: {problem}", path.display())]
    RuntimeNotLibrary { path: PathBuf, problem: String },
    #[error(
        "{} is ONNX Runtime {found}, but Hark needs 1.{}.x or newer (run appliance/setup-voices to install it)",
        path.display(),
        ORT_MINOR_VERSION
    )]
    RuntimeVersion { path: PathBuf, found: String },
    #[error("cannot load ONNX Runtime from {}: {reason}", path.display())]
    RuntimeLoad { path: PathBuf, reason: String },
    #[error(
        "ONNX Runtime is already loaded from {} in this process; it cannot also be loaded from {}",
        loaded.display(),
        requested.display()
    )]
    RuntimeAlreadyLoaded { loaded: PathBuf, requested: PathBuf },
    #[error("cannot create the ONNX Runtime environment from {}: {source}", path.display())]
    Environment {
        path: PathBuf,
        #[source]
        source: ort::Error,
    },
    #[error("cannot read the voice model {}: {source}", file.display())]
    ModelRead {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the voice model {} is not a usable ONNX model: {source}", file.display())]
    ModelInvalid {
        file: PathBuf,
        #[source]
        source: ort::Error,
    },
    #[error("cannot set up an ONNX Runtime session for {}: {source}", file.display())]
    Session {
        file: PathBuf,
        #[source]
        source: ort::Error,
    },
    #[error("the voice model {} does not fit a piper voice: {problem}", file.display())]
    ModelInterface { file: PathBuf, problem: String },
    #[error("no phoneme ids to speak")]
    EmptyIds,
    #[error("phoneme id {id} at position {position} is not one of the voice's ids{}", id_range(.num_symbols))]
    BadId {
        id: i64,
        position: usize,
        /// The voice's `num_symbols`, if its config gives it.
        num_symbols: Option<u32>,
    },
    #[error(
        "invalid scales {scales:?}: noise and noise_w must be finite and at least 0, length finite and above 0"
    )]
    BadScales { scales: Scales },
    #[error("{0}")]
    Speaker(String),
    #[error("inference with {} failed: {source}", file.display())]
    Inference {
        file: PathBuf,
        #[source]
        source: ort::Error,
    },
    #[error("the voice model {} produced unusable output: {problem}", file.display())]
    Output { file: PathBuf, problem: String },
}

fn id_range(num_symbols: &Option<u32>) -> String {
    num_symbols.map_or_else(String::new, |n| format!(" (0..{n})"))
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
    pub fn load(library: &Path) -> Result<OnnxRuntime, PiperError> {
        let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
        let canonical = std::fs::canonicalize(library);
        let held = match &*state {
            State::Empty => None,
            State::Library(path) => Some(path.clone()),
            State::Ready(runtime) => Some(runtime.library.clone()),
        };
        if let Some(held) = held {
            if canonical.as_ref().ok() != Some(&held) {
                return Err(PiperError::RuntimeAlreadyLoaded {
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
        let path = canonical.map_err(|source| PiperError::RuntimeMissing {
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
        .map_err(|source| PiperError::Environment {
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
}

fn load_error(path: &Path, error: ort::LoadDynamicError) -> PiperError {
    match error {
        ort::LoadDynamicError::BadVersion { version_str, .. } => PiperError::RuntimeVersion {
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
            PiperError::RuntimeLoad {
                path: path.to_path_buf(),
                reason,
            }
        }
        other => PiperError::RuntimeLoad {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

/// Runs a call into ort's loader, turning a panic into an error. ort asserts
/// on things a foreign library controls (a null API table, a version string
/// that is not UTF-8); those must not take the appliance down.
fn guard_panics<T>(path: &Path, f: impl FnOnce() -> T) -> Result<T, PiperError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let reason = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "ort panicked".to_owned());
        PiperError::RuntimeLoad {
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
fn check_elf(path: &Path) -> Result<(), PiperError> {
    let not_library = |problem: String| PiperError::RuntimeNotLibrary {
        path: path.to_path_buf(),
        problem,
    };
    let unreadable = |source: std::io::Error| PiperError::RuntimeMissing {
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

/// The names of a piper model's inputs (`piper/voice.py`).
const INPUT_IDS: &str = "input";
const INPUT_LENGTHS: &str = "input_lengths";
const INPUT_SCALES: &str = "scales";
const INPUT_SPEAKER: &str = "sid";

/// A piper voice, ready to speak.
pub struct PiperModel {
    session: Session,
    /// A plain run, and one after which ONNX Runtime shrinks its CPU arena.
    run: RunOptions,
    run_release: RunOptions,
    /// A run grew the arena since the last release.
    holds_memory: bool,
    config: VoiceConfig,
    file: PathBuf,
    /// Name of the model's first output, the audio (piper takes output 0).
    output: String,
    /// Keeps the environment alive as long as the session.
    _runtime: OnnxRuntime,
}

impl std::fmt::Debug for PiperModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiperModel")
            .field("file", &self.file)
            .field("sample_rate", &self.config.sample_rate)
            .finish_non_exhaustive()
    }
}

impl PiperModel {
    /// Loads a voice's `.onnx` with its config. `intra_threads` is ONNX
    /// Runtime's intra-op thread count (0 lets it use every core).
    pub fn load(
        rt: &OnnxRuntime,
        onnx: &Path,
        config: VoiceConfig,
        intra_threads: usize,
    ) -> Result<PiperModel, PiperError> {
        let file = onnx.to_path_buf();
        // ONNX Runtime's own message for a missing file does not say which
        // OS error it was; opening it first gives "permission denied" etc.
        let opened = File::open(onnx).and_then(|f| f.metadata());
        match opened {
            Ok(metadata) if metadata.is_file() => {}
            Ok(_) => {
                return Err(PiperError::ModelRead {
                    file,
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "not a regular file",
                    ),
                });
            }
            Err(source) => return Err(PiperError::ModelRead { file, source }),
        }

        let started = Instant::now();
        let session_error = |source: ort::Error| PiperError::Session {
            file: file.clone(),
            source,
        };
        let mut builder = Session::builder(&rt.env)
            .map_err(session_error)?
            .with_intra_threads(intra_threads)
            .map_err(|e| session_error(e.into()))?
            // Spinning workers would keep cores busy between sentences,
            // cores the appliance's speech recogniser needs.
            .with_intra_op_spinning(false)
            .map_err(|e| session_error(e.into()))?;
        let session =
            builder
                .commit_from_file(onnx)
                .map_err(|source| PiperError::ModelInvalid {
                    file: file.clone(),
                    source,
                })?;

        let output =
            check_interface(&session, &config).map_err(|problem| PiperError::ModelInterface {
                file: file.clone(),
                problem,
            })?;
        tracing::debug!(
            model = %file.display(),
            intra_threads,
            ms = started.elapsed().as_millis() as u64,
            "piper voice loaded"
        );
        // The CPU arena keeps the largest sentence's buffers (about 90 MB
        // for a few seconds of speech) for the next run. Keeping them while
        // sentences follow one another saves regrowing them (page faults:
        // 7 % of a 3-sentence text's time, measured); `release_memory`
        // gives them back when the caller is idle. Without an arena the peak
        // was 20 % higher (measured).
        let run = RunOptions::new().map_err(session_error)?;
        let mut run_release = RunOptions::new().map_err(session_error)?;
        run_release
            .set("memory.enable_memory_arena_shrinkage", "cpu:0")
            .map_err(session_error)?;
        Ok(PiperModel {
            session,
            run,
            run_release,
            holds_memory: false,
            config,
            file,
            output,
            _runtime: rt.clone(),
        })
    }

    /// Gives ONNX Runtime's working memory back, for an idle caller. ONNX
    /// Runtime shrinks its arena only at the end of a run, so this speaks
    /// `silence` — the shortest input there is, the voice's ids for `^ _ $`
    /// (`PhonemeIdMap::ids(&[])`), a few milliseconds — with shrinking on.
    /// Returns whether there was anything to give back.
    pub fn release_memory(&mut self, silence: &[i64]) -> Result<bool, PiperError> {
        if !self.holds_memory {
            return Ok(false);
        }
        if silence.is_empty() {
            return Err(PiperError::EmptyIds);
        }
        let scales = self.config.scales(1.0);
        let sid = self.config.is_multi_speaker().then_some(0);
        self.run_model(silence, scales, sid, true)?;
        self.holds_memory = false;
        Ok(true)
    }

    /// Whether ONNX Runtime holds working memory from a run since the last
    /// `release_memory`.
    pub fn holds_memory(&self) -> bool {
        self.holds_memory
    }

    pub fn config(&self) -> &VoiceConfig {
        &self.config
    }

    /// The rate of `synthesize`'s samples, in Hz.
    pub fn sample_rate(&self) -> u32 {
        self.config.sample_rate
    }

    pub fn path(&self) -> &Path {
        &self.file
    }

    /// Speaks one sentence's phoneme ids; returns mono f32 samples at
    /// `sample_rate()`, as the model makes them (not normalised: see
    /// `normalize`). `speaker` is for multi-speaker voices (default 0); a
    /// single-speaker voice takes none.
    pub fn synthesize(
        &mut self,
        ids: &[i64],
        scales: Scales,
        speaker: Option<i64>,
    ) -> Result<Vec<f32>, PiperError> {
        if ids.is_empty() {
            return Err(PiperError::EmptyIds);
        }
        // An id beyond the embedding makes ONNX Runtime fail deep in a
        // Gather node; catching it here names the id.
        let num_symbols = self.config.num_symbols;
        let limit = num_symbols.map(i64::from);
        if let Some((position, &id)) = ids
            .iter()
            .enumerate()
            .find(|(_, id)| **id < 0 || limit.is_some_and(|n| **id >= n))
        {
            return Err(PiperError::BadId {
                id,
                position,
                num_symbols,
            });
        }
        let scales_ok = scales.noise.is_finite()
            && scales.noise >= 0.0
            && scales.noise_w.is_finite()
            && scales.noise_w >= 0.0
            && scales.length.is_finite()
            && scales.length > 0.0;
        if !scales_ok {
            return Err(PiperError::BadScales { scales });
        }
        let speakers = self.config.num_speakers;
        let sid = match (self.config.is_multi_speaker(), speaker) {
            (false, None) => None,
            (false, Some(s)) => {
                return Err(PiperError::Speaker(format!(
                    "speaker {s} asked of {}, which has a single speaker",
                    self.file.display()
                )));
            }
            (true, s) => {
                let s = s.unwrap_or(0);
                if !(0..i64::from(speakers)).contains(&s) {
                    return Err(PiperError::Speaker(format!(
                        "speaker {s} is not one of the {speakers} speakers of {}",
                        self.file.display()
                    )));
                }
                Some(s)
            }
        };

        // Set first: a run that fails may have grown the arena too.
        self.holds_memory = true;
        self.run_model(ids, scales, sid, false)
    }

    /// One run of the model on checked inputs; `release`: with the arena
    /// shrinking at its end.
    fn run_model(
        &mut self,
        ids: &[i64],
        scales: Scales,
        sid: Option<i64>,
        release: bool,
    ) -> Result<Vec<f32>, PiperError> {
        let started = Instant::now();
        let file = &self.file;
        let inference = |source: ort::Error| PiperError::Inference {
            file: file.clone(),
            source,
        };
        // A slice never holds more than isize::MAX elements.
        let length = ids.len() as i64;
        let mut inputs = ort::inputs! {
            INPUT_IDS => TensorRef::from_array_view(([1usize, ids.len()], ids)).map_err(inference)?,
            INPUT_LENGTHS => Tensor::from_array(([1usize], vec![length])).map_err(inference)?,
            INPUT_SCALES => Tensor::from_array((
                [3usize],
                vec![scales.noise, scales.length, scales.noise_w],
            ))
            .map_err(inference)?,
        };
        if let Some(sid) = sid {
            inputs.push((
                INPUT_SPEAKER.into(),
                Tensor::from_array(([1usize], vec![sid]))
                    .map_err(inference)?
                    .into(),
            ));
        }
        let outputs = self
            .session
            .run_with_options(
                inputs,
                if release {
                    &self.run_release
                } else {
                    &self.run
                },
            )
            .map_err(inference)?;
        let output_error = |problem: String| PiperError::Output {
            file: file.clone(),
            problem,
        };
        let value = outputs
            .get(&self.output)
            .ok_or_else(|| output_error(format!("no output {:?}", self.output)))?;
        let (_, samples) = value
            .try_extract_tensor::<f32>()
            .map_err(|e| output_error(e.to_string()))?;
        if let Some(position) = samples.iter().position(|s| !s.is_finite()) {
            return Err(output_error(format!(
                "sample {position} of {} is not a finite number",
                samples.len()
            )));
        }
        let audio = samples.to_vec();
        tracing::debug!(
            ids = ids.len(),
            samples = audio.len(),
            ms = started.elapsed().as_millis() as u64,
            "piper synthesis"
        );
        Ok(audio)
    }
}

/// Checks the session has piper's inputs (with `sid` exactly when the config
/// has several speakers) and a float output; returns the output's name.
fn check_interface(session: &Session, config: &VoiceConfig) -> Result<String, String> {
    let mut expected = vec![
        (INPUT_IDS, TensorElementType::Int64),
        (INPUT_LENGTHS, TensorElementType::Int64),
        (INPUT_SCALES, TensorElementType::Float32),
    ];
    if config.is_multi_speaker() {
        expected.push((INPUT_SPEAKER, TensorElementType::Int64));
    }
    let inputs = session.inputs();
    for (name, ty) in &expected {
        let input = inputs.iter().find(|i| i.name() == *name).ok_or_else(|| {
            let why = if *name == INPUT_SPEAKER {
                format!(
                    " (the config says {} speakers, but the model takes no speaker id)",
                    config.num_speakers
                )
            } else {
                String::new()
            };
            format!(
                "it has no input {name:?}{why}; its inputs are {}",
                names(inputs.iter().map(|i| i.name()))
            )
        })?;
        check_tensor(name, input.dtype(), *ty)?;
    }
    if let Some(extra) = inputs
        .iter()
        .find(|i| !expected.iter().any(|(name, _)| i.name() == *name))
    {
        let why = if extra.name() == INPUT_SPEAKER {
            " (the model is multi-speaker, but the config says num_speakers 1)"
        } else {
            ""
        };
        return Err(format!(
            "it has an unexpected input {:?}{why}",
            extra.name()
        ));
    }
    let output = session
        .outputs()
        .first()
        .ok_or_else(|| "it has no outputs".to_owned())?;
    check_tensor(output.name(), output.dtype(), TensorElementType::Float32)?;
    Ok(output.name().to_owned())
}

fn check_tensor(name: &str, dtype: &ValueType, want: TensorElementType) -> Result<(), String> {
    match dtype {
        ValueType::Tensor { ty, .. } if *ty == want => Ok(()),
        other => Err(format!("{name:?} is {other}, expected a tensor of {want}")),
    }
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let list: Vec<String> = names.map(|n| format!("{n:?}")).collect();
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    }
}

/// Below this peak a sentence is not raised to full scale: VITS renders
/// near-silence as faint noise, and boosting that ×1000 would hiss. The old
/// C++ piper used the same floor (`max(0.01, peak)`); piper-tts 1.x divides
/// by any peak above 1e-8, which turns a near-silent sentence into loud
/// noise.
const NORMALIZE_FLOOR: f32 = 0.01;

/// Peak-normalises a sentence in place, like piper: every sample is divided
/// by the largest magnitude, so the peak becomes exactly 1.0. Audio whose
/// peak is under 0.01 is amplified only ×100 (the old C++ piper's guard,
/// see `NORMALIZE_FLOOR`), so silence stays silence. Non-finite samples,
/// which `synthesize` never returns, are zeroed rather than spread.
pub fn normalize(audio: &mut [f32]) {
    let mut peak = 0.0f32;
    for sample in audio.iter_mut() {
        if sample.is_finite() {
            peak = peak.max(sample.abs());
        } else {
            *sample = 0.0;
        }
    }
    // Dividing (not multiplying by the reciprocal): IEEE division makes
    // peak / peak exactly 1.0 and never lets |sample| / peak exceed it.
    let divisor = peak.max(NORMALIZE_FLOOR);
    for sample in audio.iter_mut() {
        *sample /= divisor;
    }
}
