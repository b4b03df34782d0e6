//! A microWakeWord model listening to a stream of feature frames: every
//! `stride` frames (the model's input length, 30 ms for the shipped
//! models) it gives a probability, and the word is heard when the mean of
//! the last `sliding_window_size` probabilities passes the model's cutoff,
//! as the models' own manifests ask.

use std::path::{Path, PathBuf};

use crate::features::{CHANNELS, SCALE};
use crate::tflite::{INT8, Model, TfLite, TfLiteError, UINT8};

#[derive(Debug, thiserror::Error)]
pub enum WakeError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a microWakeWord manifest: {problem}", path.display())]
    Manifest { path: PathBuf, problem: String },
    #[error(transparent)]
    Runtime(#[from] TfLiteError),
}

/// What a model's JSON manifest says of it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Manifest {
    #[serde(rename = "type")]
    pub kind: String,
    pub wake_word: String,
    pub model: String,
    /// The languages its training speech was in (Home Assistant lists
    /// them); older manifests have none.
    #[serde(default)]
    pub trained_languages: Vec<String>,
    pub micro: Micro,
}

impl Manifest {
    /// Reads and checks a model's manifest (`<name>.json`), without
    /// loading the model it names.
    pub fn read(path: &Path) -> Result<Self, WakeError> {
        let text = std::fs::read_to_string(path).map_err(|source| WakeError::Read {
            path: path.to_owned(),
            source,
        })?;
        let bad = |problem: String| WakeError::Manifest {
            path: path.to_owned(),
            problem,
        };
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if manifest.kind != "micro" {
            return Err(bad(format!("type {:?}, not \"micro\"", manifest.kind)));
        }
        if manifest.micro.feature_step_size != 10 {
            return Err(bad(format!(
                "feature_step_size {} ms: the front end steps 10 ms",
                manifest.micro.feature_step_size
            )));
        }
        if !(1..=MAX_WINDOW).contains(&manifest.micro.sliding_window_size) {
            return Err(bad(format!(
                "sliding_window_size {} (1 to {MAX_WINDOW})",
                manifest.micro.sliding_window_size
            )));
        }
        Ok(manifest)
    }
}

#[derive(Debug, Clone, serde::Deserialize)]
pub struct Micro {
    pub probability_cutoff: f32,
    pub feature_step_size: u32,
    pub sliding_window_size: usize,
}

/// The most probabilities a window may average (the shipped models use 5).
const MAX_WINDOW: usize = 64;

/// A loaded wake word model and its stream state.
pub struct Detector {
    pub manifest: Manifest,
    model: Model,
    stride: usize,
    input_scale: f32,
    input_zero: i32,
    output_scale: f32,
    output_zero: i32,
    input: Vec<u8>,
    frames: usize,
    output: [u8; 1],
    probabilities: [f32; MAX_WINDOW],
    seen: usize,
}

impl Detector {
    /// Loads the model a manifest (`<name>.json`, the model beside it)
    /// names.
    pub fn load(lite: &TfLite, manifest_path: &Path) -> Result<Self, WakeError> {
        let manifest = Manifest::read(manifest_path)?;
        let bad = |problem: String| WakeError::Manifest {
            path: manifest_path.to_owned(),
            problem,
        };
        let dir = manifest_path.parent().unwrap_or(Path::new("."));
        let model = lite.model(&dir.join(&manifest.model))?;
        let (in_type, in_dims, in_q, in_bytes) = model.describe(true);
        let (out_type, _, out_q, out_bytes) = model.describe(false);
        let stride = match in_dims.as_slice() {
            [1, stride, c] if *c as usize == CHANNELS && *stride > 0 => *stride as usize,
            other => {
                return Err(bad(format!(
                    "an input shaped {other:?}, not [1, frames, 40]"
                )));
            }
        };
        if in_type != INT8 || in_bytes != stride * CHANNELS {
            return Err(bad(format!("an input of type {in_type}, not int8")));
        }
        if out_type != UINT8 || out_bytes != 1 {
            return Err(bad(format!(
                "an output of type {out_type} and {out_bytes} bytes, not one uint8"
            )));
        }
        Ok(Self {
            manifest,
            model,
            stride,
            input_scale: in_q.scale,
            input_zero: in_q.zero_point,
            output_scale: out_q.scale,
            output_zero: out_q.zero_point,
            input: vec![0; stride * CHANNELS],
            frames: 0,
            output: [0],
            probabilities: [0.0; MAX_WINDOW],
            seen: 0,
        })
    }

    /// Frames the model takes at once.
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Takes in one feature frame; every `stride` frames, the mean
    /// probability of the last window (0 until the window has filled).
    pub fn push(&mut self, frame: &[u16; CHANNELS]) -> Result<Option<f32>, WakeError> {
        let row = &mut self.input[self.frames * CHANNELS..(self.frames + 1) * CHANNELS];
        for (q, &v) in row.iter_mut().zip(frame) {
            let x = (f32::from(v) * SCALE / self.input_scale).round() as i32 + self.input_zero;
            *q = x.clamp(-128, 127) as i8 as u8;
        }
        self.frames += 1;
        if self.frames < self.stride {
            return Ok(None);
        }
        self.frames = 0;
        self.model.run(&self.input, &mut self.output)?;
        let p = (i32::from(self.output[0]) - self.output_zero) as f32 * self.output_scale;
        let window = self.manifest.micro.sliding_window_size;
        self.probabilities[self.seen % window] = p;
        self.seen += 1;
        if self.seen < window {
            return Ok(Some(0.0));
        }
        Ok(Some(
            self.probabilities[..window].iter().sum::<f32>() / window as f32,
        ))
    }

    /// Whether a mean from [`Self::push`] hears the word.
    pub fn heard(&self, mean: f32) -> bool {
        mean > self.manifest.micro.probability_cutoff
    }

    /// Starts the stream again (after a detection: the model's state and
    /// the window forget the word).
    pub fn reset(&mut self) -> Result<(), WakeError> {
        self.model.start()?;
        self.frames = 0;
        self.seen = 0;
        Ok(())
    }
}
