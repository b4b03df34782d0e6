//! The tools Hark serves, one file each. A tool is registered only once the
//! engine behind it exists: `transcribe_voice` arrives with speech-to-text,
//! `speak_text` with text-to-speech.

pub mod get_status;
pub mod set_volume;
