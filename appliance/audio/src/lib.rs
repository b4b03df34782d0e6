//! Hark's audio engine.
//!
//! - [`capture`]: the capture thread — ALSA in, 16 kHz mono out, into the
//!   [`ring`], with fault recovery and device-missing retries.
//! - [`dsp`]: format conversion, channel gain/selection/mix, resampling, DC
//!   removal.
//! - [`playback`]: the playback thread — a queue of clips, volume, fade and
//!   barge-in within a period.
//! - [`vad`]: end-of-speech detection with the `earshot` voice detector.
//! - [`utterance`]: record until end of speech, timeout, stop or cancel.
//! - [`changed`]: how the audio threads report a change of state without
//!   waiting or allocating.
//! - [`config`]: the `[audio]` configuration section.
//! - [`realtime`]: `SCHED_FIFO` for the capture and playback threads
//!   (`[audio] realtime_priority`).
//! - [`decode`]: audio files agents send or name (WAV, FLAC, MP3,
//!   OGG/Vorbis) decoded to 16 kHz mono, with size and length limits.
//! - [`files`]: which paths agents may read audio from or write speech to.
//! - [`virtual_mic`]: the microphone of the virtual sound card (ALSA's `file`
//!   plugin reading a FIFO this feeds in real time), with utterance injection.
//!
//! Threads: capture runs on its own thread and never waits for anyone; an
//! utterance recording runs on the caller's blocking thread and reads the
//! ring at its own pace. The capture and playback threads ask for real-time
//! priority when they start ([`realtime`]); nothing else does.

pub mod beam;
pub mod capture;
pub mod changed;
pub mod clip;
pub mod config;
pub mod decode;
pub mod device;
pub mod dsp;
pub mod earcon;
pub mod echo;
pub mod encode;
pub mod files;
pub mod heartbeat;
pub mod mixer;
pub mod pace;
pub mod playback;
pub mod realtime;
pub mod ring;
#[cfg(test)]
mod testing;
pub mod utterance;
pub mod vad;
pub mod virtual_mic;
pub mod virtual_room;

pub use capture::{Capture, CaptureError, CaptureState, CaptureStats};
pub use config::AudioConfig;
pub use ring::Ring;
