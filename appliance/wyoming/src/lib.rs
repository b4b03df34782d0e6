//! Wyoming, the protocol Home Assistant speaks to voice services: its
//! events on the wire ([`event`]).

pub mod event;
