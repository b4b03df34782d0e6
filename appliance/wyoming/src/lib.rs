//! Wyoming, the protocol Home Assistant speaks to voice services: its
//! events on the wire ([`event`]) and the audio they carry ([`audio`]).

pub mod audio;
pub mod event;
