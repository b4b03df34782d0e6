//! The wake word: what the models hear of the microphone ([`features`]),
//! the TensorFlow Lite runtime they run on ([`tflite`]), and the streaming
//! detector ([`detector`]).

pub mod detector;
pub mod features;
pub mod tflite;
