//! Hark's MCP side: how agents reach the room. It depends on the core and
//! the stores only; the tools reach the room through
//! [`hark_core::room`]'s capabilities.
//!
//! From the top down (a file imports only what stands below it, checked by
//! `tests/circles`):
//!
//! - [`transport`]: the listeners — raw TCP, Unix socket, Streamable HTTP
//!   and WebSocket, the status page and the scripts' endpoints — and the
//!   Host/Origin guard.
//! - [`handler`]: how the server answers MCP's requests (rmcp's handler):
//!   the tool router, calls and tasks, resources, custom methods.
//! - [`tools`]: one file per tool, with its schema, handler and tests.
//! - [`server`]: the server one connection (or session) has: who calls,
//!   under which grant, with the per-request tracing span.
//! - [`resources`]: `hark://inbox` and its subscriptions; [`channels`]: the
//!   person's messages pushed into Claude Code sessions.
//! - [`state`]: what the server serves from besides the room (the event
//!   stream, the stores, who is connected, trust, the lists below).
//! - [`connections`]: who is connected, how, and what their calls are
//!   doing; [`hearers`]: the sessions told of the person's messages;
//!   [`speeches`]: `POST /speak`'s speeches followed; [`message`]: a
//!   person's message as agents receive it; [`tasks`]: long waits as tasks
//!   (the MCP Tasks extension).
//! - [`framing`]: turning raw frames (a line, a WebSocket message) into
//!   JSON-RPC messages for rmcp, answering malformed ones with the right
//!   JSON-RPC error.
//! - [`auth`]: pairing, tokens and trust; [`tls`]: the appliance's own
//!   certificate authority for HTTPS; [`discovery`]: mDNS / DNS-SD.
//! - [`config`]: the `[mcp]`, `[auth]` and `[discovery]` sections.

pub mod auth;
pub mod budget;
pub mod channels;
pub mod config;
pub mod connections;
pub mod discovery;
pub mod framing;
pub mod handler;
pub mod hearers;
pub mod message;
pub mod resources;
pub mod server;
pub mod speeches;
pub mod state;
pub mod tasks;
pub mod tls;
pub mod tools;
pub mod transport;
pub mod transports;

pub use server::HarkServer;
pub use state::ServerState;

pub use connections::{ClientIdentity, Connections, TransportKind};
