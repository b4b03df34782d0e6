//! Hark as a Home Assistant voice satellite, the way ESPHome devices (and
//! linux-voice-assistant) are: the ESPHome native API, served on TCP for
//! Home Assistant to connect to.
//!
//! - [`frame`]: the plaintext frames;
//! - [`messages`]: the protobuf messages Hark speaks;
//! - [`server`]: the device's side of a connection (hello, device info,
//!   entities, the voice assistant's configuration, announcements said in
//!   Hark's voice, Home Assistant's timers as Hark's) and the listener;
//! - [`pipeline`]: the voice assistant's runs (the person's start runs Home
//!   Assistant's pipeline: their turn sent as audio, the reply said);
//! - [`voice`]: Hark speaking for Home Assistant (below both);
//! - [`media`]: Home Assistant's own audio for an announcement, fetched;
//! - [`config`]: the `[esphome]` section; [`testing`]: stand-ins for the
//!   room, for tests and the fuzz target.
//!
//! Not built yet: encryption (docs/esphome.md).

pub mod config;
pub mod frame;
pub mod media;
pub mod messages;
pub mod pipeline;
pub mod server;
pub mod testing;
pub mod voice;
