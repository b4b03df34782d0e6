//! `hark selftest`: an interactive check of a newly assembled board,
//! through the running daemon (it owns the sound card and the board).
//!
//! The command ([`run`]) walks the person through the steps — the board
//! profile found, a tone, a spoken sentence, the room's noise floor, the
//! speech level of a short recording and its playback, a press, a long
//! press, the mute switch, every light, the microcontroller link — and
//! prints a report ([`report`]). Each step is one `hark/selftest` request
//! ([`hark_core::selftest::Request`]) on the daemon's Unix socket.

pub mod report;
pub mod run;
