//! Hark, a voice appliance for AI agents.
//!
//! The daemon is wired from these parts:
//! - [`config`]: the TOML configuration, one struct per section.
//! - [`service`]: lifecycle — listeners, sd-notify, watchdog, shutdown.
//! - the MCP server, its tools, transports, pairing and discovery are
//!   crate `hark-mcp`, which reaches the room through the capabilities
//!   [`room`] implements.
//! - [`state`]: what the appliance knows about itself; where the audio,
//!   speech-to-text, text-to-speech and board engines report their state.
//! - [`client`]: `hark status` and the `hark connect` stdio bridge.
//! - [`audio`]: the audio engine (crate `hark-audio`) inside the daemon, and
//!   `hark inject` for the virtual sound card.
//! - [`stt`]: speech to text (crate `hark-stt`) inside the daemon.
//! - [`tts`]: text to speech (crate `hark-tts`) inside the daemon.
//! - [`memory`]: the allocator's settings for a long-running daemon.
//! - [`board`]: the button, lights and mute switch (crate `hark-board`).
//! - [`events`]: the one event stream every change of state goes through,
//!   and the snapshot the lights and `get_status` read.
//! - [`listen`]: one listen (chime, recording, transcription), shared by
//!   the tools that hear the person and by the person's own recording.
//! - [`person`]: the person starts: a press of the button records a
//!   message for the agents.
//! - [`inbox`]: the voice inbox those messages wait in (SQLite).
//! - [`words`]: what the person's words mean — yes or no, a choice, whom
//!   they address.
//! - [`selftest`]: `hark selftest`, the hardware check of a new board,
//!   and its side in the daemon.

pub mod audio;
pub mod board;
pub mod cli;
pub mod conductor;
pub mod config;
pub mod floor;
pub mod listen;
pub mod memory;
pub mod models;
pub mod person;
pub mod room;
pub mod selftest;
pub mod service;
pub mod state;
pub mod stt;
pub mod tts;
pub mod voices;

// The core's parts, under the names the daemon's modules use.
pub use hark_core::{agents, events, logging, words};
// The stores, likewise.
pub use hark_store::{history, inbox};
