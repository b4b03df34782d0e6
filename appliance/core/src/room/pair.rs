//! [`Pair`]: the person approves an agent.

use super::call::BoxFuture;
use std::time::Duration;

/// An agent asks to pair: what the person is told.
#[derive(Debug)]
pub struct PairAsk {
    /// What Hark says aloud.
    pub prompt: String,
    /// The agent's name, its address and scopes (for the event stream).
    pub agent: String,
    pub address: String,
    pub scopes: Vec<&'static str>,
    /// How long the person has to press, from the end of the prompt.
    pub timeout: Duration,
    /// Decides it besides the button (the status page's approve and
    /// refuse); `true` approves.
    pub decided: Option<tokio::sync::oneshot::Receiver<bool>>,
}

/// Why a pairing was not approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairRefusal {
    /// A long press.
    Refused,
    /// No press in time.
    TimedOut,
    /// No working button on this appliance; the board's state says why.
    NoButton(String),
    /// Another pairing waits.
    Busy,
    /// The agent went away.
    Cancelled,
}

pub trait Pair: Send + Sync {
    /// Asks the person, aloud and with the pairing light, to approve an
    /// agent: a short press approves, a long press or none refuses.
    fn ask(&self, ask: PairAsk) -> BoxFuture<'_, Result<(), PairRefusal>>;

    /// Tells the person, aloud, how it ended.
    fn say(&self, words: String);
}
