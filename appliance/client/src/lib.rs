//! Hark's command-line client: the `hark` commands that talk to a running
//! appliance, on the wire only (MCP over TCP or the Unix socket, and the
//! appliance's own methods in [`hark_core::methods`]).
//!
//! - [`calls`]: `hark status`, `listen`, `say`, `pair`, `token`, `button`,
//!   `mute` and the `hark connect` stdio bridge;
//! - [`saved`]: the appliances paired from this machine, their tokens and
//!   certificate authorities;
//! - [`selftest`]: `hark selftest`, its steps and its report.

pub mod calls;
pub mod saved;
pub mod selftest;

pub use calls::*;
