//! Hark's hardware ports: the push-to-talk button, the status LEDs and LED
//! rings, the mute switch, and the UART link to a microcontroller. See
//! docs/hardware.md for what the lights mean and which boards are known.
//!
//! Each port has a real backend and a simulated one that is always
//! compiled and behaves like the device ([`sim`]); [`Board::open`] picks
//! them from the profile the config names or detection finds.

pub mod apa102;
pub mod board;
pub mod button;
pub mod contact;
pub mod detect;
pub mod error;
pub mod gpio;
pub mod led;
pub mod link;
pub mod ports;
pub mod profile;
pub mod sim;
pub mod spi;
pub mod status;

pub use board::{Board, BoardConfig, BoardEvent};
pub use error::BoardError;
