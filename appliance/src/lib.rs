//! Hark, a voice appliance for AI agents: the `hark` binary, which wires
//! the crates together.
//!
//! - [`config`]: the TOML configuration, composed of each crate's sections
//!   (`hark-mcp`'s `[mcp]`, `[auth]` and `[discovery]`, `hark-room`'s
//!   `[audio]`, `[stt]`, `[tts]`, …) and the daemon's own `[service]`;
//! - [`service`]: the daemon's lifecycle — the room started, the listeners
//!   serving, sd-notify, the watchdog, shutdown;
//! - [`cli`]: the command line; its client commands are `hark-client`'s;
//! - [`models`], [`voices`]: `hark models` and `hark voices`, the model and
//!   voice stores.

pub mod cli;
pub mod config;
pub mod models;
pub mod service;
pub mod voices;
