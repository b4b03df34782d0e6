//! Who may use the appliance, and for what (docs/security.md).
//!
//! Every connection starts with a [`Grant`]: the Unix socket is trusted by
//! its file mode, loopback by default (`auth.trust_loopback`: agents on the
//! appliance itself), everyone else is unpaired until they present a
//! token. An unpaired client may initialize, list the tools and call
//! `get_status`; everything else needs a token whose scopes cover it.
//! `auth.mode = "open"` trusts everyone, explicitly and loudly.

pub mod limit;
pub mod manage;
pub mod pairing;
pub mod scopes;

pub use hark_store::tokens;

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use scopes::{Scope, Scopes};
use tokens::{Rejected, TokenError, TokenStore};

use crate::{
    config::{AuthConfig, AuthMode},
    transports::TransportKind,
};

/// Who a client is to the appliance.
/// Browser tokens' names start so: the status page's own, revoked at
/// log-out, and not agents.
pub const BROWSER_PREFIX: &str = "browser-";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Trusted without a token; the reason is shown in `get_status`.
    Trusted(&'static str),
    /// Holds the token of this name.
    Paired(String),
    /// Neither.
    Unpaired,
}

/// What one client may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub principal: Principal,
    pub scopes: Scopes,
}

impl Grant {
    pub fn unpaired() -> Self {
        Self {
            principal: Principal::Unpaired,
            scopes: Scopes::NONE,
        }
    }

    pub fn trusted(why: &'static str) -> Self {
        Self {
            principal: Principal::Trusted(why),
            scopes: Scopes::ALL,
        }
    }

    /// The token's name, which is the agent's name wherever one is used.
    pub fn paired_name(&self) -> Option<&str> {
        match &self.principal {
            Principal::Paired(name) => Some(name),
            _ => None,
        }
    }

    /// How the client is let in, for `get_status`: `trusted`, `paired` or
    /// `unpaired`.
    pub fn access(&self) -> &'static str {
        match self.principal {
            Principal::Trusted(_) => "trusted",
            Principal::Paired(_) => "paired",
            Principal::Unpaired => "unpaired",
        }
    }

    /// Whether the grant covers `scope`; else the tool error to answer.
    pub fn allows(&self, scope: Scope, what: &str) -> Result<(), Denied> {
        if self.scopes.contains(scope) {
            return Ok(());
        }
        Err(match &self.principal {
            Principal::Unpaired => Denied::NotPaired {
                what: what.to_owned(),
                scope,
            },
            Principal::Paired(name) => Denied::Scope {
                name: name.clone(),
                has: self.scopes,
                scope,
                what: what.to_owned(),
            },
            // Trusted grants hold every scope.
            Principal::Trusted(_) => Denied::Scope {
                name: String::new(),
                has: self.scopes,
                scope,
                what: what.to_owned(),
            },
        })
    }
}

/// How to pair, in words a model can pass on to its person.
pub const HOW_TO_PAIR: &str = "To pair, run `hark pair HOST` on the agent's machine and press \
the appliance's button briefly when it asks (or the appliance's owner runs `hark token create NAME` \
on it); then send the token as `Authorization: Bearer <token>` on HTTP and the WebSocket upgrade, \
or in the first message's `_meta` as \"hark/token\" on raw TCP (`hark connect` does that).";

/// A call the client's grant does not cover.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error(
        "This agent is not paired with the Hark appliance, so it may not use {what} (scope `{scope}`: {}). {HOW_TO_PAIR}",
        scope.describe()
    )]
    NotPaired { what: String, scope: Scope },
    #[error(
        "The token `{name}` may {has_words}, not {what} (scope `{scope}`: {}). Ask the appliance's owner for a token with `--scopes {has},{scope}`.",
        scope.describe(),
        has_words = words(*has)
    )]
    Scope {
        name: String,
        has: Scopes,
        scope: Scope,
        what: String,
    },
}

impl Denied {
    /// The tool error type.
    pub fn kind(&self) -> hark_core::room::Kind {
        match self {
            Denied::NotPaired { .. } => hark_core::room::Kind::NotPaired,
            Denied::Scope { .. } => hark_core::room::Kind::PermissionDenied,
        }
    }
}

fn words(scopes: Scopes) -> String {
    let names = scopes.names();
    match names.as_slice() {
        [] => "do nothing but ask for the status".to_owned(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Why a presented token let no one in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Rejected(#[from] Rejected),
    #[error(
        "too many failed token attempts from {address}; try again in {} s",
        retry_after.as_secs().max(1)
    )]
    TooMany {
        address: IpAddr,
        retry_after: Duration,
    },
    #[error("tokens cannot be checked: {0}")]
    Unavailable(String),
}

/// The appliance's authentication: the mode, the token store and the
/// failure counts.
pub struct Auth {
    pub mode: AuthMode,
    pub trust_loopback: bool,
    store: Result<Arc<TokenStore>, String>,
    failures: limit::Failures,
    /// Cancelled when the token of that name is revoked: calls in flight
    /// under it (a long `wait_for_person`) end.
    revocations: Mutex<HashMap<String, CancellationToken>>,
    /// Pairing by the button (`hark pair`).
    pub pairings: pairing::Pairings,
}

/// `get_status`'s `auth`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct AuthStatus {
    /// `paired` (tokens needed) or `open` (everyone trusted).
    pub mode: &'static str,
    /// Whether clients on the appliance itself (loopback) are trusted.
    pub trust_loopback: bool,
    /// Live tokens (null when the token store is unavailable).
    pub paired_agents: Option<usize>,
    /// How this client is let in: `trusted`, `paired` or `unpaired`.
    pub access: &'static str,
    /// Its token's name when paired; why it is trusted when trusted.
    pub r#as: Option<String>,
    /// What it may do.
    pub scopes: Vec<&'static str>,
    /// A warning in open mode, or when tokens cannot be checked.
    pub warning: Option<String>,
    /// How to pair, when this client is unpaired.
    pub how_to_pair: Option<&'static str>,
    /// SHA-256 of the appliance's HTTPS certificate authority, when it
    /// serves HTTPS: what `hark pair` printed, to compare.
    pub https_ca_sha256: Option<String>,
}

pub const OPEN_WARNING: &str = "auth.mode is \"open\": every host on the network may use the \
microphone and the speaker without pairing";

impl Auth {
    /// The appliance's auth, with the token store from `state_dir`.
    /// Opening reads a database: call off the runtime's threads.
    pub fn open(config: &AuthConfig, state_dir: &std::path::Path) -> Self {
        let store = match TokenStore::open(state_dir) {
            Ok((store, warning)) => {
                if let Some(warning) = warning {
                    tracing::warn!(%warning, "the token store was unreadable; agents must pair again");
                }
                Ok(Arc::new(store))
            }
            Err(e) => {
                tracing::error!(error = %e, "the token store is unavailable; only trusted clients can be served");
                Err(e.to_string())
            }
        };
        Self::with_store(config, store)
    }

    pub fn with_store(config: &AuthConfig, store: Result<Arc<TokenStore>, String>) -> Self {
        if config.mode == AuthMode::Open {
            tracing::warn!("{OPEN_WARNING}");
        }
        Self {
            mode: config.mode,
            trust_loopback: config.trust_loopback,
            store,
            failures: limit::Failures::new(config.max_failures),
            revocations: Mutex::new(HashMap::new()),
            pairings: pairing::Pairings::new(
                Duration::from_secs(config.pair_timeout_secs),
                config.max_pair_requests,
            ),
        }
    }

    /// Cancelled when the token `name` is revoked (or replaced).
    pub fn revoked(&self, name: &str) -> CancellationToken {
        self.revocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.to_lowercase())
            .or_default()
            .clone()
    }

    /// Stops the calls in flight under the token `name` (revoked or
    /// replaced); its connections' grants are the caller's to reset
    /// ([`manage`]).
    pub fn stop_calls_of(&self, name: &str) {
        if let Some(signal) = self
            .revocations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&name.to_lowercase())
        {
            signal.cancel();
        }
    }

    pub fn store(&self) -> Result<&Arc<TokenStore>, TokenError> {
        self.store
            .as_ref()
            .map_err(|why| TokenError::Unavailable(why.clone()))
    }

    /// The grant of a connection before any token.
    pub fn base(&self, transport: TransportKind, address: Option<IpAddr>) -> Grant {
        if transport == TransportKind::Unix {
            return Grant::trusted("Unix socket");
        }
        if self.mode == AuthMode::Open {
            return Grant::trusted("auth.mode = open");
        }
        if self.trust_loopback && address.is_some_and(|a| a.to_canonical().is_loopback()) {
            return Grant::trusted("loopback");
        }
        Grant::unpaired()
    }

    /// Checks a token presented from `address`.
    pub fn present(&self, token: &str, address: Option<IpAddr>) -> Result<Grant, AuthError> {
        let now = Instant::now();
        let address = address.map(|a| a.to_canonical());
        if let Some(address) = address
            && let Some(retry_after) = self.failures.blocked(address, now)
        {
            return Err(AuthError::TooMany {
                address,
                retry_after,
            });
        }
        let store = self
            .store
            .as_ref()
            .map_err(|why| AuthError::Unavailable(why.clone()))?;
        let shown = address.map(|a| a.to_string());
        match store.check(token.trim(), shown.as_deref()) {
            Ok(accepted) => Ok(Grant {
                principal: Principal::Paired(accepted.name),
                scopes: accepted.scopes,
            }),
            Err(rejected) => {
                if let Some(address) = address {
                    self.failures.record(address, now);
                }
                tracing::warn!(address = shown.as_deref().unwrap_or("?"), reason = %rejected, "token refused");
                Err(rejected.into())
            }
        }
    }

    /// What `get_status` says about auth to the client holding `grant`.
    pub fn status(&self, grant: &Grant) -> AuthStatus {
        let warning = match (&self.mode, &self.store) {
            (AuthMode::Open, _) => Some(OPEN_WARNING.to_owned()),
            (_, Err(why)) => Some(format!("tokens cannot be checked: {why}")),
            _ => None,
        };
        AuthStatus {
            mode: self.mode.as_str(),
            trust_loopback: self.trust_loopback,
            paired_agents: self.store.as_ref().ok().map(|s| s.live_count()),
            access: grant.access(),
            r#as: match &grant.principal {
                Principal::Trusted(why) => Some((*why).to_owned()),
                Principal::Paired(name) => Some(name.clone()),
                Principal::Unpaired => None,
            },
            scopes: grant.scopes.names(),
            warning,
            how_to_pair: (grant.principal == Principal::Unpaired).then_some(HOW_TO_PAIR),
            https_ca_sha256: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(mode: AuthMode, trust_loopback: bool) -> (Auth, Arc<TokenStore>) {
        let store = Arc::new(TokenStore::in_memory().expect("store"));
        let config = AuthConfig {
            mode,
            trust_loopback,
            max_failures: 3,
            ..AuthConfig::default()
        };
        (Auth::with_store(&config, Ok(Arc::clone(&store))), store)
    }

    #[test]
    fn who_is_trusted_without_a_token() {
        let lan: IpAddr = "192.168.1.20".parse().expect("ip");
        let lo: IpAddr = "127.0.0.1".parse().expect("ip");
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().expect("ip");
        let (a, _) = auth(AuthMode::Paired, true);
        assert_eq!(
            a.base(TransportKind::Unix, None),
            Grant::trusted("Unix socket")
        );
        assert_eq!(
            a.base(TransportKind::Tcp, Some(lo)),
            Grant::trusted("loopback")
        );
        assert_eq!(
            a.base(TransportKind::Http, Some(mapped)),
            Grant::trusted("loopback")
        );
        assert_eq!(a.base(TransportKind::Tcp, Some(lan)), Grant::unpaired());
        assert_eq!(a.base(TransportKind::Tcp, None), Grant::unpaired());
        let (a, _) = auth(AuthMode::Paired, false);
        assert_eq!(
            a.base(TransportKind::Websocket, Some(lo)),
            Grant::unpaired()
        );
        assert_eq!(a.base(TransportKind::Unix, None).scopes, Scopes::ALL);
        let (a, _) = auth(AuthMode::Open, false);
        assert_eq!(a.base(TransportKind::Tcp, Some(lan)).access(), "trusted");
        assert!(a.status(&Grant::unpaired()).warning.is_some());
    }

    #[tokio::test]
    async fn a_token_grants_its_scopes_and_failures_lock_an_address_out() {
        let (a, store) = auth(AuthMode::Paired, false);
        let (token, _) = store
            .create("claude", Scopes::DEFAULT, false)
            .await
            .expect("made");
        let lan: IpAddr = "192.168.1.20".parse().expect("ip");
        let other: IpAddr = "192.168.1.21".parse().expect("ip");
        let grant = a.present(&token, Some(lan)).expect("valid");
        assert_eq!(grant.paired_name(), Some("claude"));
        assert_eq!(grant.allows(Scope::Listen, "transcribe_voice"), Ok(()));
        let denied = grant
            .allows(Scope::Admin, "set_volume")
            .expect_err("no admin");
        assert_eq!(denied.kind().name(), "PermissionDeniedError");
        let text = denied.to_string();
        assert!(
            text.contains("may listen and speak, not set_volume"),
            "{text}"
        );
        assert!(text.contains("--scopes listen,speak,admin"), "{text}");
        let denied = Grant::unpaired()
            .allows(Scope::Listen, "transcribe_voice")
            .expect_err("unpaired");
        assert_eq!(denied.kind().name(), "NotPairedError");
        assert!(denied.to_string().contains("Authorization: Bearer"));

        for _ in 0..3 {
            assert!(matches!(
                a.present("hark_nope", Some(lan)),
                Err(AuthError::Rejected(Rejected::Malformed(_)))
            ));
        }
        // Locked out, even with the good token; another address is not.
        assert!(matches!(
            a.present(&token, Some(lan)),
            Err(AuthError::TooMany { .. })
        ));
        assert!(a.present(&token, Some(other)).is_ok());
    }

    #[tokio::test]
    async fn status_tells_a_client_where_it_stands() {
        let (a, store) = auth(AuthMode::Paired, true);
        store
            .create("claude", Scopes::DEFAULT, false)
            .await
            .expect("made");
        let unpaired = a.status(&Grant::unpaired());
        assert_eq!(unpaired.access, "unpaired");
        assert_eq!(unpaired.paired_agents, Some(1));
        assert!(unpaired.how_to_pair.is_some());
        assert!(unpaired.scopes.is_empty());
        let trusted = a.status(&Grant::trusted("loopback"));
        assert_eq!(trusted.r#as.as_deref(), Some("loopback"));
        assert_eq!(trusted.warning, None);
        let broken = Auth::with_store(
            &AuthConfig::default(),
            Err("cannot create the state directory".into()),
        );
        assert!(matches!(
            broken.present("hark_x", None),
            Err(AuthError::Unavailable(_))
        ));
        assert!(broken.status(&Grant::unpaired()).warning.is_some());
    }
}
