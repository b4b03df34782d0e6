//! The MCP face of the appliance.
//!
//! - [`server`]: the rmcp server handler every transport serves, and the
//!   per-request tracing span around it.
//! - [`tools`]: one file per tool, with its schema, handler and tests.
//! - [`resources`]: `hark://inbox` and its subscriptions.
//! - [`framing`]: turning raw frames (a line, a WebSocket message) into
//!   JSON-RPC messages for rmcp, answering malformed ones with the right
//!   JSON-RPC error.
//! - [`transport`]: the listeners — raw TCP, Unix socket, Streamable HTTP and
//!   WebSocket — and the Host/Origin guard.

pub mod framing;
pub mod resources;
pub mod server;
pub mod tools;
pub mod transport;

pub use server::{BOARD_METHOD, HarkServer, SELFTEST_METHOD};
