//! Hark's stores: what must survive a restart or a power cut, in SQLite in
//! the state directory, each behind an async API.
//!
//! - [`inbox`]: the voice inbox, the person's messages until an agent takes
//!   them (and the agents waiting for them);
//! - [`history`]: what was heard and spoken, from the event stream;
//! - [`tokens`]: the paired agents' tokens (only their hashes);
//! - [`schedule`]: speech and timers kept to be said later;
//! - [`agents`]: the agents' settings changed at run time.
//!
//! Every statement runs on the store's own thread ([`worker`]), never on
//! the async runtime's: a `synchronous = FULL` commit waits for the card,
//! and nothing else may wait with it. What `get_status` shows of a store
//! (messages waiting, rows kept) is counted in memory as the store changes,
//! so reading it never touches the database.

pub mod agents;
pub mod db;
pub mod history;
pub mod inbox;
pub mod schedule;
pub mod tokens;
pub mod worker;

pub use db::DbError;
