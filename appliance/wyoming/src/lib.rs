//! Wyoming, the protocol Home Assistant speaks to voice services: its
//! events on the wire ([`event`]), the audio they carry ([`audio`]), what
//! Hark offers ([`info`]) and one client's connection ([`session`]).

pub mod audio;
pub mod event;
pub mod info;
pub mod session;
