//! The sessions told of the person's messages, one list per way
//! (`resources/subscribe` subscriptions, channel pushes), and how one is
//! told: below the server state that keeps the lists and the tasks that
//! tell them.

use std::sync::{Mutex, PoisonError};

use rmcp::{RoleServer, model::ServerNotification, service::Peer};
use tokio_util::sync::CancellationToken;

use hark_store::inbox::PresenceGuard;

/// A session told of the person's messages (a subscription, a channel
/// push): which connection or HTTP session it is, whose, its peer, what
/// ends it, and its presence, which makes its agent count as listening
/// while it lasts.
pub struct Hearer {
    pub conn: String,
    pub agent: String,
    pub peer: Peer<RoleServer>,
    /// A stream connection's end; `None` over HTTP, where the session
    /// outlives its connections and its peer says when it ends.
    pub gone: Option<CancellationToken>,
    pub present: Option<PresenceGuard>,
}

impl Hearer {
    fn live(&self) -> bool {
        !self.peer.is_transport_closed() && !self.gone.as_ref().is_some_and(|g| g.is_cancelled())
    }
}

/// The sessions told of the person's messages one way: the
/// `resources/subscribe` subscriptions, or the channel pushes.
#[derive(Default)]
pub struct Hearers(Mutex<Vec<Hearer>>);

impl Hearers {
    /// Adds `hearer`; the same connection asking twice is one.
    pub fn add(&self, hearer: Hearer) {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|h| h.conn != hearer.conn);
        all.push(hearer);
    }

    pub fn remove(&self, conn: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|h| h.conn != conn);
    }

    /// The live ones' agents and peers (dropping those whose connection
    /// ended).
    pub fn live(&self) -> Vec<(String, Peer<RoleServer>)> {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(Hearer::live);
        all.iter()
            .map(|h| (h.agent.clone(), h.peer.clone()))
            .collect()
    }
}

/// Sends `notification` to `peer` beside the caller, giving it a second: a
/// session that does not read never holds up the others.
pub fn tell(peer: Peer<RoleServer>, notification: ServerNotification, what: &'static str) {
    tokio::spawn(async move {
        let sent = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            peer.send_notification(notification),
        )
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            tracing::debug!("{what} was not sent");
        }
    });
}
