//! Hark's core: what every other part of the daemon speaks in, and nothing
//! that touches hardware, models or the network.
//!
//! - [`events`]: the one event stream and the snapshot folded from it;
//! - [`words`] and [`agents`]: the words of the room (yes and no, options,
//!   whom the person addresses) and the agents it knows by name;
//! - [`status`]: typed subsystem statuses;
//! - [`scopes`]: what a paired agent may do.

pub mod agents;
pub mod events;
pub mod scopes;
pub mod status;
pub mod words;
