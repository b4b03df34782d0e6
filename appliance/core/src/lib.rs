//! Hark's core: what every other part of the daemon speaks in, and nothing
//! that touches hardware, models or the network.
//!
//! - [`events`]: the one event stream and the snapshot folded from it;
//! - [`words`] and [`agents`]: the words of the room (yes and no, options,
//!   whom the person addresses) and the agents it knows by name;
//! - [`status`]: typed subsystem statuses;
//! - [`files`]: atomic writes;
//! - [`logging`]: the daemon's log lines, and the last ones kept for the
//!   status page;
//! - [`scopes`]: what a paired agent may do;
//! - [`methods`]: the appliance's own JSON-RPC methods;
//! - [`config`]: the key-naming error and range check every section of
//!   the configuration uses; [`allow`]: who may reach the services that
//!   have no authentication of their own;
//! - [`selftest`]: the self-test's steps and answers on the wire, and how
//!   a recording is judged;
//! - [`room`]: the room's capabilities, the narrow traits the MCP side
//!   calls (listen, speak, ask, files, volume, observe, hands, pair).

pub mod agents;
pub mod allow;
pub mod clients;
pub mod config;
pub mod events;
pub mod files;
pub mod floor;
pub mod logging;
pub mod methods;
pub mod room;
pub mod scopes;
pub mod selftest;
pub mod status;
pub mod words;
