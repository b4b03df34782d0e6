//! The voice inbox: what the person in the room says to an agent
//! unprompted (a press of the button, then speech) waits here until an
//! agent takes it with `wait_for_person`, or it expires.
//!
//! - **Addressing.** An utterance that starts with an agent's name
//!   ("Claude, …", "tell Cursor …") is for that agent; names are the
//!   agents' `clientInfo.name` and the aliases in `[agents.NAME]`.
//!   Otherwise it is for `inbox.default_agent`, else for whichever agent
//!   asks first.
//! - **Delivery.** An agent waiting for a message it may take gets it the
//!   moment it is kept (the longest-waiting first); otherwise the message
//!   waits, oldest first. Each message is taken once, atomically
//!   ([`store`]), and an agent that leaves before receiving it puts it back.
//! - **Nothing is lost.** Messages are kept in SQLite in the state
//!   directory until taken or `inbox.keep_minutes` old; `inbox.max_messages`
//!   bounds how many wait (the oldest go first, logged).
//!
//! Every change is published on the event stream (`inbox_arrived`,
//! `inbox_taken`, `inbox_dropped`): the message light and the
//! `hark://inbox` resource's subscribers follow it.

pub mod store;

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use store::Store;
pub use store::{Message, NewMessage, StoreError};

use crate::{
    events::{Bus, Event},
    words,
};

/// How a message was addressed.
pub const BY_NAME: &str = "name";
pub const BY_DEFAULT: &str = "default";
pub const BY_ANYONE: &str = "anyone";

/// The inbox's settings (from `[inbox]` and `[agents]`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub keep: Duration,
    pub max_messages: usize,
    /// The agent unaddressed messages are for (`inbox.default_agent`).
    pub default_agent: Option<String>,
    /// `[agents.NAME]`: names, aliases.
    pub agents: crate::agents::Agents,
    /// How long the person's recording waits for speech after a tap.
    pub listen: Duration,
    /// Say so when a message is kept that no agent can take now.
    pub announce: bool,
}

/// Where a delivered message went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// A waiting agent took it at once.
    To(String),
    /// It waits; `reachable` says whether an agent that may take it is
    /// subscribed to the inbox (and so has been told).
    Kept { reachable: bool },
}

struct Waiter {
    id: u64,
    key: String,
    agent: String,
    tx: oneshot::Sender<Message>,
}

struct Presence {
    id: u64,
    key: String,
    alive: Box<dyn Fn() -> bool + Send + Sync>,
}

pub struct Inbox {
    /// Lock order: `waiters`, then `store`.
    waiters: Mutex<VecDeque<Waiter>>,
    store: Mutex<Store>,
    presence: Mutex<Vec<Presence>>,
    ids: AtomicU64,
    bus: Bus,
    settings: Settings,
    /// Where the messages are kept, or why only in memory.
    kept: String,
    /// Wakes the expiry task when a message arrives.
    arrived: Notify,
    /// Ids for messages handed over that the disk could not keep: -1, -2, …
    unkept: std::sync::atomic::AtomicI64,
}

/// What [`Inbox::wait`] found.
pub enum Wait {
    /// A message that was already waiting.
    Taken(Message),
    /// Nothing yet: the message comes through the ticket.
    Ticket(Ticket),
}

/// A place in the queue of agents waiting for the person. Dropping it
/// leaves the queue; a message handed to it but not received goes back to
/// the inbox.
pub struct Ticket {
    inbox: Arc<Inbox>,
    id: u64,
    rx: Option<oneshot::Receiver<Message>>,
}

impl Ticket {
    /// The message, when the person has spoken one this agent may take.
    pub async fn message(&mut self) -> Option<Message> {
        let rx = self.rx.as_mut()?;
        let message = rx.await.ok();
        self.rx = None;
        message
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.inbox
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|w| w.id != self.id);
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if let Ok(message) = rx.try_recv() {
                tracing::info!(
                    id = message.id,
                    "the agent left before receiving the message; it stays in the inbox"
                );
                self.inbox.give_back(&message);
            }
        }
    }
}

/// Counts an agent subscribed to the inbox while it lasts.
pub struct PresenceGuard {
    inbox: Arc<Inbox>,
    id: u64,
}

impl Drop for PresenceGuard {
    fn drop(&mut self) {
        self.inbox
            .presence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|p| p.id != self.id);
    }
}

impl Inbox {
    /// Opens the inbox kept in `state_dir` (blocking: it opens a database).
    /// A directory that cannot be used leaves it in memory, logged.
    pub fn open(
        state_dir: &std::path::Path,
        settings: Settings,
        bus: Bus,
    ) -> Result<Inbox, StoreError> {
        let (store, kept) = match Store::open(state_dir) {
            Ok((store, warning)) => {
                if let Some(warning) = warning {
                    tracing::error!("{warning}");
                }
                let kept = format!(
                    "kept in {}",
                    store
                        .path
                        .as_ref()
                        .map_or_else(String::new, |p| p.display().to_string())
                );
                (store, kept)
            }
            Err(e) => {
                tracing::error!(error = %e, "the voice inbox cannot be kept on disk; messages last until the appliance restarts");
                (Store::in_memory()?, format!("in memory only: {e}"))
            }
        };
        let inbox = Inbox {
            waiters: Mutex::new(VecDeque::new()),
            store: Mutex::new(store),
            presence: Mutex::new(Vec::new()),
            ids: AtomicU64::new(1),
            bus,
            settings,
            kept,
            arrived: Notify::new(),
            unkept: std::sync::atomic::AtomicI64::new(-1),
        };
        // Messages kept from before a restart light the message light.
        let now = SystemTime::now();
        let waiting = inbox.count(now);
        if waiting > 0 {
            tracing::info!(waiting, "messages from before the restart are waiting");
            inbox.bus.publish(Event::InboxRestored { waiting });
        }
        Ok(inbox)
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, now: SystemTime) -> usize {
        self.store().count_waiting(now).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot count the inbox");
            0
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// One line for `get_status`.
    pub fn status(&self) -> String {
        let waiting = self.count(SystemTime::now());
        let agents = self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        format!(
            "{waiting} waiting; {agents} agent(s) waiting for the person; {}",
            self.kept
        )
    }

    /// The key an agent's name is compared by: the configured agent it is
    /// (by name or alias), else the name itself.
    pub fn key(&self, name: &str) -> String {
        self.settings.agents.key(name)
    }

    /// Who an utterance is for: (`addressed_to`, its key, how). `known`:
    /// the agents seen since the start, besides the configured ones.
    pub fn address(
        &self,
        text: &str,
        known: &[String],
    ) -> (Option<String>, Option<String>, &'static str) {
        let mut addressing = words::Addressing::new();
        for (name, aliases) in self.settings.agents.names() {
            addressing.add(name, aliases);
        }
        for name in known {
            addressing.add(name, &[]);
        }
        if let Some(addressed) = addressing.address(text) {
            let key = self.key(&addressed.agent);
            return (Some(addressed.agent), Some(key), BY_NAME);
        }
        match &self.settings.default_agent {
            Some(agent) => (Some(agent.clone()), Some(self.key(agent)), BY_DEFAULT),
            None => (None, None, BY_ANYONE),
        }
    }

    /// The expiry time for a message kept now.
    pub fn expires(&self, now: SystemTime) -> SystemTime {
        now + self.settings.keep
    }

    /// Keeps the person's message and hands it to a waiting agent that may
    /// take it (blocking: it writes the database).
    pub fn deliver(&self, message: NewMessage) -> Result<Delivered, StoreError> {
        let now = SystemTime::now();
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        let mut store = self.store();
        let mut kept: Option<Message> = None;
        while let Some(at) = waiters.iter().position(|w| {
            !w.tx.is_closed()
                && message
                    .addressed_key
                    .as_ref()
                    .is_none_or(|key| *key == w.key)
        }) {
            let Some(waiter) = waiters.remove(at) else {
                break;
            };
            let taken = match kept.take() {
                // Handed on from an agent that left meanwhile.
                Some(previous) => store.reassign(previous.id, &waiter.agent, now)?,
                None => match store.insert(&message, Some(&waiter.agent), now) {
                    Ok(taken) => taken,
                    // The disk failed, but an agent is waiting for it:
                    // hand it over rather than lose it.
                    Err(e) => {
                        tracing::error!(error = %e, agent = %waiter.agent,
                            "the message cannot be kept on disk; handed to the waiting agent from memory");
                        Message {
                            id: self.unkept.fetch_sub(1, Ordering::Relaxed),
                            new: message.clone(),
                            taken_by: Some(waiter.agent.clone()),
                        }
                    }
                },
            };
            let id = taken.id;
            match waiter.tx.send(taken) {
                Ok(()) => {
                    let waiting = store.count_waiting(now)?;
                    drop((store, waiters));
                    self.bus.publish(Event::InboxArrived {
                        id,
                        listen: message.listen,
                        addressed_to: message.addressed_to.clone(),
                        waiting,
                    });
                    self.bus.publish(Event::InboxTaken {
                        id,
                        agent: waiter.agent.clone(),
                        waiting,
                    });
                    tracing::info!(id, agent = %waiter.agent, "message delivered to a waiting agent");
                    return Ok(Delivered::To(waiter.agent));
                }
                Err(returned) => {
                    // The agent left between checking and sending.
                    kept = Some(returned);
                }
            }
        }
        let message_id = match kept {
            Some(previous) => {
                store.give_back(previous.id)?;
                previous.id
            }
            None => store.insert(&message, None, now)?.id,
        };
        let (_, overflow) = store.purge(self.settings.max_messages, now)?;
        let waiting = store.count_waiting(now)?;
        drop((store, waiters));
        if !overflow.is_empty() {
            tracing::warn!(dropped = ?overflow, max = self.settings.max_messages,
                "the inbox is full (inbox.max_messages): the oldest messages were dropped");
            self.bus.publish(Event::InboxDropped {
                ids: overflow,
                reason: "overflow".into(),
                waiting,
            });
        }
        self.bus.publish(Event::InboxArrived {
            id: message_id,
            listen: message.listen,
            addressed_to: message.addressed_to.clone(),
            waiting,
        });
        self.arrived.notify_one();
        let reachable = self.reachable(message.addressed_key.as_deref());
        tracing::info!(id = message_id, addressed_to = ?message.addressed_to, reachable, "message kept in the inbox");
        Ok(Delivered::Kept { reachable })
    }

    /// A message for `agent` if one waits, else a place in the queue of
    /// waiting agents (blocking: it may write the database).
    pub fn wait(self: &Arc<Self>, agent: &str) -> Result<Wait, StoreError> {
        let key = self.key(agent);
        let now = SystemTime::now();
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        let mut store = self.store();
        if let Some(message) = store.take_oldest(agent, &key, now)? {
            let waiting = store.count_waiting(now)?;
            drop((store, waiters));
            self.bus.publish(Event::InboxTaken {
                id: message.id,
                agent: agent.to_owned(),
                waiting,
            });
            return Ok(Wait::Taken(message));
        }
        drop(store);
        let (tx, rx) = oneshot::channel();
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        waiters.push_back(Waiter {
            id,
            key,
            agent: agent.to_owned(),
            tx,
        });
        Ok(Wait::Ticket(Ticket {
            inbox: Arc::clone(self),
            id,
            rx: Some(rx),
        }))
    }

    /// Puts a message back untaken (its agent left before receiving it).
    pub fn give_back(&self, message: &Message) {
        let now = SystemTime::now();
        let mut store = self.store();
        let result = store
            .give_back(message.id)
            .and_then(|()| store.count_waiting(now));
        drop(store);
        match result {
            Ok(waiting) => self.bus.publish(Event::InboxArrived {
                id: message.id,
                listen: None,
                addressed_to: message.new.addressed_to.clone(),
                waiting,
            }),
            Err(e) => tracing::error!(id = message.id, error = %e, "cannot put the message back"),
        }
    }

    /// The messages waiting that `agent` may take (all with `None`).
    pub fn waiting_for(&self, agent: Option<&str>) -> Result<Vec<Message>, StoreError> {
        let key = agent.map(|a| self.key(a));
        self.store().waiting(key.as_deref(), SystemTime::now())
    }

    /// Counts `agent` as subscribed to the inbox while the guard lives and
    /// `alive` says so.
    pub fn present(
        self: &Arc<Self>,
        agent: &str,
        alive: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> PresenceGuard {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        self.presence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Presence {
                id,
                key: self.key(agent),
                alive,
            });
        PresenceGuard {
            inbox: Arc::clone(self),
            id,
        }
    }

    /// Whether an agent that may take a message for `key` (`None`: any
    /// agent) waits for it or is subscribed.
    pub fn reachable(&self, key: Option<&str>) -> bool {
        let may = |k: &str| key.is_none_or(|key| key == k);
        let waiting = self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|w| !w.tx.is_closed() && may(&w.key));
        waiting
            || self
                .presence
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|p| (p.alive)() && may(&p.key))
    }

    /// Drops expired messages as they expire, until `token` is cancelled.
    pub async fn expire(self: Arc<Self>, token: CancellationToken) {
        loop {
            let inbox = Arc::clone(&self);
            let next = tokio::task::spawn_blocking(move || {
                let now = SystemTime::now();
                let mut store = inbox.store();
                let result =
                    store
                        .purge(inbox.settings.max_messages, now)
                        .and_then(|(expired, _)| {
                            Ok((expired, store.count_waiting(now)?, store.next_expiry()?))
                        });
                drop(store);
                match result {
                    Ok((expired, waiting, next)) => {
                        if !expired.is_empty() {
                            tracing::info!(
                                ?expired,
                                "inbox messages expired untaken (inbox.keep_minutes)"
                            );
                            inbox.bus.publish(Event::InboxDropped {
                                ids: expired,
                                reason: "expired".into(),
                                waiting,
                            });
                        }
                        next
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot expire inbox messages");
                        Some(SystemTime::now() + Duration::from_secs(60))
                    }
                }
            })
            .await
            .ok()
            .flatten();
            let sleep = next.map(|at| {
                at.duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO)
                    + Duration::from_millis(5)
            });
            tokio::select! {
                () = token.cancelled() => return,
                () = self.arrived.notified() => {}
                () = async {
                    match sleep {
                        Some(d) => tokio::time::sleep(d).await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
        }
    }
}

/// RFC 3339 time (UTC) with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn settings() -> Settings {
        Settings {
            keep: Duration::from_secs(3600),
            max_messages: 3,
            default_agent: None,
            agents: crate::agents::Agents::new(BTreeMap::from([(
                "claude-code".to_owned(),
                hark_core::agents::AgentConfig {
                    aliases: vec!["claude".to_owned(), "clod".to_owned()],
                    ..Default::default()
                },
            )])),
            listen: Duration::from_secs(8),
            announce: true,
        }
    }

    fn message(inbox: &Inbox, text: &str) -> NewMessage {
        let (addressed_to, addressed_key, by) = inbox.address(text, &["cursor".into()]);
        let now = SystemTime::now();
        NewMessage {
            text: text.into(),
            spoken_at: now,
            transcribed_at: now,
            duration: 1.5,
            confidence: Some(0.9),
            addressed_to,
            addressed_key,
            addressed_by: by.into(),
            expires_at: inbox.expires(now),
            listen: None,
        }
    }

    fn open(dir: &std::path::Path, settings: Settings) -> Arc<Inbox> {
        Arc::new(Inbox::open(dir, settings, Bus::default()).expect("inbox"))
    }

    #[test]
    fn names_and_aliases_are_one_agent() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        assert_eq!(inbox.key("Claude-Code"), "claude code");
        assert_eq!(inbox.key("clod"), "claude code");
        assert_eq!(inbox.key("Cursor"), "cursor");
        let (to, key, by) = inbox.address("Clod, what's the time?", &[]);
        assert_eq!(
            (to.as_deref(), key.as_deref(), by),
            (Some("claude-code"), Some("claude code"), BY_NAME)
        );
        let (to, _, by) = inbox.address("Cursor, open the file", &["cursor".into()]);
        assert_eq!((to.as_deref(), by), (Some("cursor"), BY_NAME));
        let (to, key, by) = inbox.address("what's the time", &["cursor".into()]);
        assert_eq!((to, key, by), (None, None, BY_ANYONE));
    }

    #[tokio::test]
    async fn a_waiting_agent_gets_the_message_at_once_and_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        let Wait::Ticket(mut claude) = inbox.wait("claude-code").unwrap() else {
            panic!("nothing waits yet");
        };
        let Wait::Ticket(mut cursor) = inbox.wait("cursor").unwrap() else {
            panic!("nothing waits yet");
        };
        // For Claude: Cursor, though it waited too, does not get it.
        let delivered = inbox
            .deliver(message(&inbox, "Claude, remind me at five"))
            .unwrap();
        assert_eq!(delivered, Delivered::To("claude-code".into()));
        let got = claude.message().await.expect("delivered");
        assert_eq!(got.new.text, "Claude, remind me at five");
        assert_eq!(got.taken_by.as_deref(), Some("claude-code"));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), cursor.message())
                .await
                .is_err(),
            "not for cursor"
        );
        // Unaddressed: the agent waiting longest (Cursor) takes it.
        let delivered = inbox.deliver(message(&inbox, "lights off")).unwrap();
        assert_eq!(delivered, Delivered::To("cursor".into()));
        assert_eq!(inbox.waiting_for(None).unwrap().len(), 0);
    }

    #[test]
    fn kept_messages_survive_a_restart_and_are_taken_oldest_first_once() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        for text in ["first", "second", "Claude, third"] {
            assert_eq!(
                inbox.deliver(message(&inbox, text)).unwrap(),
                Delivered::Kept { reachable: false }
            );
        }
        drop(inbox);
        let inbox = open(dir.path(), settings());
        assert_eq!(inbox.waiting_for(None).unwrap().len(), 3);
        assert_eq!(inbox.waiting_for(Some("cursor")).unwrap().len(), 2);
        let take = |agent: &str| match inbox.wait(agent).unwrap() {
            Wait::Taken(m) => Some(m.new.text),
            Wait::Ticket(_) => None,
        };
        assert_eq!(take("cursor").as_deref(), Some("first"));
        assert_eq!(take("claude").as_deref(), Some("second"));
        assert_eq!(take("cursor"), None, "the third is Claude's");
        assert_eq!(take("claude-code").as_deref(), Some("Claude, third"));
        assert_eq!(take("claude"), None, "each is taken once");
    }

    #[tokio::test]
    async fn a_message_handed_to_an_agent_that_left_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        let Wait::Ticket(ticket) = inbox.wait("cursor").unwrap() else {
            panic!("nothing waits yet");
        };
        // Delivered into the ticket, then the agent leaves without reading.
        assert_eq!(
            inbox.deliver(message(&inbox, "hello")).unwrap(),
            Delivered::To("cursor".into())
        );
        drop(ticket);
        let waiting = inbox.waiting_for(None).unwrap();
        assert_eq!(waiting.len(), 1, "back in the inbox");
        assert_eq!(waiting[0].taken_by, None);
    }

    #[test]
    fn the_oldest_are_dropped_beyond_the_limit_and_expired_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        for i in 0..5 {
            inbox
                .deliver(message(&inbox, &format!("message {i}")))
                .unwrap();
        }
        let texts: Vec<_> = inbox
            .waiting_for(None)
            .unwrap()
            .into_iter()
            .map(|m| m.new.text)
            .collect();
        assert_eq!(texts, ["message 2", "message 3", "message 4"]);
        let mut old = message(&inbox, "old");
        old.expires_at = SystemTime::now() - Duration::from_secs(1);
        let mut store = inbox.store();
        store.insert(&old, None, SystemTime::now()).unwrap();
        let (expired, _) = store.purge(10, SystemTime::now()).unwrap();
        assert_eq!(expired.len(), 1);
    }

    #[test]
    fn an_unreadable_database_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(store::FILE), b"this is not a database at all, not even close....................................................").unwrap();
        let (store, warning) = Store::open(dir.path()).expect("a new database");
        let warning = warning.expect("a warning");
        assert!(warning.contains("moved to"), "{warning}");
        assert_eq!(store.count_waiting(SystemTime::now()).unwrap(), 0);
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "the old file is kept aside");
    }

    #[test]
    fn a_state_directory_that_cannot_be_made_leaves_the_inbox_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let inbox = open(&file.join("state"), settings());
        assert!(
            inbox.status().contains("in memory only"),
            "{}",
            inbox.status()
        );
        inbox.deliver(message(&inbox, "still works")).unwrap();
        assert_eq!(inbox.waiting_for(None).unwrap().len(), 1);
    }
}
