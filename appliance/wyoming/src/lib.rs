//! Wyoming, the protocol Home Assistant speaks to voice services: its
//! events on the wire ([`event`]), the audio they carry ([`audio`]), what
//! Hark offers ([`info`]), one client's connection ([`session`]), and the
//! listener with its allow-list and admission ([`server`], [`config`]).
//! [`testing`] stands in for the room in the tests and the fuzz target.

pub mod audio;
pub mod config;
pub mod event;
pub mod info;
pub mod server;
pub mod session;
pub mod testing;
