//! Pairing by the button (`hark pair`): an agent asks, Hark says aloud who
//! asks and from where, the pairing light spins, and a short press of the
//! button within `auth.pair_timeout_secs` makes the agent a token. A long
//! press, or none, refuses. Being in the room is what grants access, as
//! with a smart-home bridge's link button.
//!
//! One pairing waits at a time, and each address may ask only
//! `auth.max_pair_requests` times in ten minutes, so a flood of requests
//! neither keeps the light spinning nor lets a stranger's request slip in
//! while the person answers someone else's.

use std::{
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use hark_core::room::{Pair, PairAsk, PairRefusal};

use hark_store::tokens::{self, TokenError, TokenStore};

use super::{
    limit::Failures,
    scopes::{Scope, Scopes},
};

/// The window `auth.max_pair_requests` counts in.
pub const REQUEST_WINDOW: Duration = Duration::from_secs(600);

/// Longest pairing name: it is said aloud, so it stays a name.
pub const MAX_PAIR_NAME: usize = 32;

/// A `hark/pair` request's params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairRequest {
    /// The agent's name on the appliance (its token's name).
    pub name: String,
    /// Comma-separated scopes; default `listen,speak`.
    pub scopes: Option<String>,
    /// A browser asking for the status page (never from JSON-RPC).
    #[serde(skip)]
    pub browser: bool,
}

/// What an approved pairing gives the agent.
#[derive(Debug, Serialize)]
pub struct Paired {
    /// The token, in full: the only time it exists outside the agent.
    pub token: String,
    pub name: String,
    pub scopes: Vec<&'static str>,
    /// An earlier token of that name was revoked.
    pub replaced: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error("invalid pairing request: {0}")]
    Invalid(String),
    #[error(
        "another pairing is waiting for the button (`{agent}` from {address}); one may wait at a time: try again in {} s",
        retry_after.as_secs().max(1)
    )]
    Pending {
        agent: String,
        address: String,
        retry_after: Duration,
    },
    #[error(
        "too many pairing requests from {address}: at most {max} in 10 minutes; try again in {} s",
        retry_after.as_secs().max(1)
    )]
    TooMany {
        address: IpAddr,
        max: u32,
        retry_after: Duration,
    },
    #[error(
        "this appliance has no working button to approve a pairing ({why}); on the appliance, run `hark token create NAME` instead"
    )]
    NoButton { why: String },
    #[error(
        "Hark was busy in a conversation for all of {seconds} s and could not ask the person; try again in a moment"
    )]
    Busy { seconds: u64 },
    #[error("the person refused the pairing (a long press of the button, or on the status page)")]
    Refused,
    #[error(
        "nobody pressed the button within {seconds} s, so the pairing was refused; run `hark pair` again and press the appliance's button briefly while its light spins purple"
    )]
    TimedOut { seconds: u64 },
    #[error("the pairing was cancelled: the agent left")]
    Cancelled,
    #[error(transparent)]
    Token(#[from] TokenError),
}

impl PairError {
    /// The `reason` an agent (and `hark pair`) can tell apart.
    pub fn reason(&self) -> &'static str {
        match self {
            PairError::Invalid(_) => "invalid",
            PairError::Pending { .. } => "pending",
            PairError::TooMany { .. } => "too_many",
            PairError::NoButton { .. } => "no_button",
            PairError::Busy { .. } => "busy",
            PairError::Refused => "refused",
            PairError::TimedOut { .. } => "timed_out",
            PairError::Cancelled => "cancelled",
            PairError::Token(_) => "tokens_unavailable",
        }
    }
}

struct Waiting {
    agent: String,
    address: String,
    until: Instant,
    /// Decides it besides the button (the status page's approve/refuse).
    decide: Option<tokio::sync::oneshot::Sender<bool>>,
}

/// The pairing waiting now, for the status page.
#[derive(Debug, Clone, Serialize)]
pub struct Pending {
    pub agent: String,
    pub address: String,
}

/// The pairing slot and the per-address request counts.
pub struct Pairings {
    pub timeout: Duration,
    max_requests: u32,
    requests: Failures,
    waiting: Mutex<Option<Waiting>>,
}

/// The one waiting pairing's slot, freed when dropped.
struct Slot<'a>(&'a Pairings);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self
            .0
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// A pairing name: a token name that is plainly a name, since Hark says it
/// aloud (no sentences: no full stops), at most [`MAX_PAIR_NAME`].
pub fn check_pair_name(name: &str) -> Result<String, PairError> {
    let bad = || {
        PairError::Invalid(format!(
            "name `{}` cannot be paired: use 1–{MAX_PAIR_NAME} letters, digits, spaces, `-` or `_`, starting with a letter or digit",
            name.chars().take(80).collect::<String>()
        ))
    };
    let name = tokens::check_name(name).map_err(|_| bad())?;
    if name.contains('.') || name.chars().count() > MAX_PAIR_NAME {
        return Err(bad());
    }
    Ok(name)
}

/// How an address is said aloud: "192 dot 168 dot 1 dot 20".
pub fn spoken_address(address: Option<IpAddr>) -> String {
    match address.map(|a| a.to_canonical()) {
        None => "this appliance".to_owned(),
        Some(a) if a.is_loopback() => "this appliance".to_owned(),
        Some(IpAddr::V4(v4)) => v4
            .octets()
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(" dot "),
        Some(IpAddr::V6(v6)) => format!("the address {v6}"),
    }
}

/// What Hark says when a browser asks for the status page.
pub fn browser_prompt(address: Option<IpAddr>) -> String {
    format!(
        "A browser at {} wants to open Hark's status page. It could see what Hark hears, change its settings and manage the agents' access. Press the button to allow it.",
        spoken_address(address)
    )
}

/// What Hark says when an agent asks to pair.
pub fn prompt(name: &str, address: Option<IpAddr>, scopes: Scopes, replaced: bool) -> String {
    let mut words = format!(
        "An agent called {name} at {} wants to use Hark.",
        spoken_address(address)
    );
    if scopes.contains(Scope::Admin) {
        words.push_str(
            " It asks for admin access too: it could change voices, models and the volume, read the history and manage other agents' access.",
        );
    }
    if replaced {
        words.push_str(&format!(" It replaces the agent already paired as {name}."));
    }
    words.push_str(" Press the button to allow it.");
    words
}

impl Pairings {
    pub fn new(timeout: Duration, max_requests: u32) -> Self {
        Self {
            timeout,
            max_requests,
            requests: Failures::with_window(max_requests, REQUEST_WINDOW),
            waiting: Mutex::new(None),
        }
    }

    /// Counts a request from `address` and takes the slot, or says why not.
    fn admit(&self, agent: &str, address: Option<IpAddr>) -> Result<Slot<'_>, PairError> {
        let now = Instant::now();
        if let Some(address) = address.map(|a| a.to_canonical()) {
            if let Some(retry_after) = self.requests.blocked(address, now) {
                return Err(PairError::TooMany {
                    address,
                    max: self.max_requests,
                    retry_after,
                });
            }
            self.requests.record(address, now);
        }
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = waiting.as_ref() {
            return Err(PairError::Pending {
                agent: w.agent.clone(),
                address: w.address.clone(),
                retry_after: w.until.saturating_duration_since(now),
            });
        }
        *waiting = Some(Waiting {
            agent: agent.to_owned(),
            address: address.map_or_else(|| "this appliance".to_owned(), |a| a.to_string()),
            // The floor may take as long again before the question starts.
            until: now + self.timeout * 2,
            decide: None,
        });
        Ok(Slot(self))
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Option<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pairing waiting for the person, if any.
    pub fn pending(&self) -> Option<Pending> {
        self.waiting().as_ref().map(|w| Pending {
            agent: w.agent.clone(),
            address: w.address.clone(),
        })
    }

    /// Approves or refuses the waiting pairing (the status page, besides
    /// the button); the agent's name, or `None` when none waits for an
    /// answer.
    pub fn decide(&self, approve: bool) -> Option<String> {
        let mut waiting = self.waiting();
        let w = waiting.as_mut()?;
        let decide = w.decide.take()?;
        decide.send(approve).ok()?;
        Some(w.agent.clone())
    }

    /// The whole pairing: asks the person (the room: aloud, with the
    /// pairing light, answered by the button) and makes the token. `gone`
    /// is cancelled when the asking agent leaves.
    pub async fn pair(
        &self,
        room: &dyn Pair,
        store: Result<&Arc<TokenStore>, TokenError>,
        request: PairRequest,
        address: Option<IpAddr>,
        gone: CancellationToken,
    ) -> Result<Paired, PairError> {
        let name = check_pair_name(&request.name)?;
        let scopes = match request.scopes.as_deref() {
            None => Scopes::DEFAULT,
            Some(text) => Scopes::parse(text).map_err(|e| PairError::Invalid(e.to_string()))?,
        };
        let store = Arc::clone(store?);
        let _slot = self.admit(&name, address)?;
        let seconds = self.timeout.as_secs();
        tracing::info!(agent = %name, address = ?address, scopes = %scopes, "pairing requested");
        let replaced = store
            .list()
            .iter()
            .any(|t| t.name.eq_ignore_ascii_case(&name));
        let (decide, decided) = tokio::sync::oneshot::channel();
        if let Some(w) = self.waiting().as_mut() {
            w.decide = Some(decide);
        }
        let ask = PairAsk {
            prompt: if request.browser {
                browser_prompt(address)
            } else {
                prompt(&name, address, scopes, replaced)
            },
            agent: name.clone(),
            address: address.map_or_else(|| "local".to_owned(), |a| a.to_canonical().to_string()),
            scopes: scopes.names(),
            timeout: self.timeout,
            decided: Some(decided),
        };
        let answer = tokio::select! {
            () = gone.cancelled() => return Err(PairError::Cancelled),
            answer = room.ask(ask) => answer,
        };
        match answer {
            Ok(()) => {}
            Err(PairRefusal::NoButton(why)) => return Err(PairError::NoButton { why }),
            Err(PairRefusal::Busy) => return Err(PairError::Busy { seconds }),
            Err(PairRefusal::Refused) => {
                tracing::info!(agent = %name, "pairing refused");
                return Err(PairError::Refused);
            }
            Err(PairRefusal::TimedOut) => {
                tracing::info!(agent = %name, seconds, "pairing refused: the button was not pressed");
                return Err(PairError::TimedOut { seconds });
            }
            Err(PairRefusal::Cancelled) => return Err(PairError::Cancelled),
        }
        let (token, info) = store.create(&name, scopes, true).await?;
        tracing::info!(agent = %info.name, scopes = %scopes, replaced, "paired by the button");
        room.say(format!("{} is paired.", info.name));
        Ok(Paired {
            token,
            name: info.name,
            scopes: scopes.names(),
            replaced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_said_aloud_stay_names() {
        assert_eq!(check_pair_name(" laptop ").unwrap(), "laptop");
        assert_eq!(check_pair_name("claude-code 2").unwrap(), "claude-code 2");
        for bad in [
            "",
            "x. Your bank called. Press the button",
            &"a".repeat(33),
            "-dash",
            "a\nb",
        ] {
            let e = check_pair_name(bad).unwrap_err();
            assert!(matches!(e, PairError::Invalid(_)), "{bad:?}");
        }
    }

    #[test]
    fn the_prompt_says_who_where_and_admin() {
        let a: IpAddr = "192.168.1.20".parse().unwrap();
        let p = prompt("laptop", Some(a), Scopes::DEFAULT, false);
        assert_eq!(
            p,
            "An agent called laptop at 192 dot 168 dot 1 dot 20 wants to use Hark. Press the button to allow it."
        );
        let p = prompt("ops", Some(a), Scopes::ALL, true);
        assert!(p.contains("admin access"), "{p}");
        assert!(
            p.contains("replaces the agent already paired as ops"),
            "{p}"
        );
        let local: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert!(prompt("x", Some(local), Scopes::DEFAULT, false).contains("at this appliance"));
    }

    #[test]
    fn one_pairing_waits_and_requests_are_counted_per_address() {
        let p = Pairings::new(Duration::from_secs(60), 3);
        let a: IpAddr = "10.0.0.2".parse().unwrap();
        let b: IpAddr = "10.0.0.3".parse().unwrap();
        let slot = p.admit("one", Some(a)).unwrap();
        match p.admit("two", Some(b)) {
            Err(PairError::Pending { agent, address, .. }) => {
                assert_eq!((agent.as_str(), address.as_str()), ("one", "10.0.0.2"));
            }
            other => panic!("{:?}", other.err()),
        }
        drop(slot);
        drop(p.admit("again", Some(a)).unwrap());
        drop(p.admit("third", Some(a)).unwrap());
        match p.admit("fourth", Some(a)) {
            Err(PairError::TooMany { max: 3, .. }) => {}
            other => panic!("{:?}", other.err()),
        }
        // Another address is not held back by the first one's flood.
        assert!(p.admit("other", Some(b)).is_ok());
    }
}
