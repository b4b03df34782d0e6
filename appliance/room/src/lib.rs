//! Hark's room: everything that touches the microphone, the speaker, the
//! models and the board, behind the capabilities of [`hark_core::room`]
//! that the MCP side calls.
//!
//! - [`start`]: the engines started in order and the room made of them;
//! - [`state`]: the room, as its engines share it;
//! - [`audio`]: the audio engine (crate `hark-audio`) in the room;
//! - [`stt`], [`tts`]: speech to text (crate `hark-stt`) and text to speech
//!   (crate `hark-tts`) in the room;
//! - [`floor`] (the core's): whose turn it is with the person;
//! - [`listen`]: one listen (chime, recording, transcription), shared by
//!   the tools that hear the person and by the person's own recording;
//! - [`person`]: the person starts: a press records a message for the
//!   agents;
//! - [`continuation`]: the person goes on just after a listen ended their
//!   turn: what they add is kept for the same agent ([`continuing`]: what
//!   is under way and heard, in the room's state);
//! - [`wake`]: the wake word detector's thread, which starts what a press
//!   starts;
//! - [`follow`]: the follow-up: after an agent answers, listen again
//!   without the wake word;
//! - [`window`]: a window for the person, which gives way to speech and
//!   to the agents it yields to (the follow-up's, the continuation's);
//! - [`schedule`]: speech and timers kept for later, said at their times;
//! - [`board`]: the button, lights and mute switch (crate `hark-board`);
//! - [`conductor`]: the one task that decides what a press, a hold or the
//!   mute switch means;
//! - [`room`]: the capabilities, implemented (one dialogue sequence for
//!   every question);
//! - [`selftest`]: the daemon's side of `hark selftest`;
//! - [`memory`]: the allocator's settings for a long-running daemon;
//! - [`config`]: the room's sections of the configuration.

pub mod audio;
pub mod board;
pub mod conductor;
pub mod config;
pub mod continuation;
pub mod continuing;
pub mod follow;
pub mod listen;
pub mod memory;
pub mod person;
pub mod room;
pub mod schedule;
pub mod selftest;
pub mod start;
pub mod state;
pub mod stt;
pub mod tts;
pub mod wake;
pub mod window;

// The core's parts, under the names the room's modules use.
pub use hark_core::{agents, events, floor, words};
// The stores, likewise.
pub use hark_store::{history, inbox};
