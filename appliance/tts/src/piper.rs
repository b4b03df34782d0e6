//! Piper voices (VITS models exported to ONNX) on ONNX Runtime.
//!
//! ONNX Runtime is not linked: Hark loads the `libonnxruntime.so` that
//! `appliance/setup-voices` installs, from an explicit path, once per
//! process (`OnnxRuntime`, in `hark-onnx`). A `PiperModel` is one voice's session; it turns
//! a sentence's phoneme ids (from `phonemize`) into mono f32 samples at the
//! voice's sample rate, running the model exactly as piper-tts does.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use ort::session::{RunOptions, Session};
use ort::value::{Tensor, TensorElementType, TensorRef, ValueType};

use crate::voice::{Scales, VoiceConfig};

pub use hark_onnx::{ORT_MINOR_VERSION, OnnxRuntime, RuntimeError};

/// What went wrong loading ONNX Runtime, loading a voice, or speaking.
#[derive(Debug, thiserror::Error)]
pub enum PiperError {
    #[error(transparent)]
    Runtime(#[from] hark_onnx::RuntimeError),
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
        let mut builder = Session::builder(rt.env())
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
        let run_release = hark_onnx::releasing_run().map_err(session_error)?;
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
/// which `synthesize` never returns, are zeroed rather than spread. Returns
/// the peak before scaling.
pub fn normalize(audio: &mut [f32]) -> f32 {
    normalize_shared(audio, 0.0)
}

/// [`normalize`] for the rest of a sentence whose first piece was scaled by
/// `1 / shared` (its peak): divides by the larger of `shared` and this
/// audio's own peak, so both pieces keep the level the model gave them
/// unless this one would clip. Returns the peak before scaling.
pub fn normalize_shared(audio: &mut [f32], shared: f32) -> f32 {
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
    let shared = if shared.is_finite() { shared } else { 0.0 };
    let divisor = peak.max(shared).max(NORMALIZE_FLOOR);
    for sample in audio.iter_mut() {
        *sample /= divisor;
    }
    peak
}
