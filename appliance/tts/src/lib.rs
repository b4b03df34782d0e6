//! Hark's text to speech.
//!
//! Text becomes phonemes through libespeak-ng exactly as piper makes them
//! (`phonemize`), phonemes become ids through the voice's map (`voice`), and
//! ids become audio through the voice's ONNX model on ONNX Runtime (`piper`).
//! `plan` cuts a text into pieces, one model run each, and `synth` puts it
//! together. When piper cannot speak, espeak-ng's own synthesiser does
//! (`espeak`).

pub mod catalog;
pub mod espeak;
pub mod phonemize;
pub mod piper;
pub mod plan;
pub mod synth;
#[cfg(feature = "test-voice")]
pub mod test_voice;
pub mod text;
pub mod voice;
pub mod voices;
