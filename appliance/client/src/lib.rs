//! Hark's command-line client: the `hark` commands that talk to a running
//! appliance, on the wire only (MCP over TCP or the Unix socket, and the
//! appliance's own methods in [`hark_core::methods`]).
//!
//! - [`calls`]: `hark status`, `listen`, `say`, `pair`, `token`, `button`,
//!   `mute` and the `hark connect` stdio bridge;
//! - [`saved`]: the appliances paired from this machine, their tokens and
//!   certificate authorities;
//! - [`target`]: how an appliance is named (`HOST[:PORT]`);
//! - [`selftest`]: `hark selftest`, its steps and its report.

pub mod calls;
pub mod saved;
pub mod selftest;
pub mod target;

pub use calls::*;
pub use target::{DEFAULT_PORT, with_default_port};
