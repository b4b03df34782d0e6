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
//!   waits, oldest first. Each message is taken once, atomically (one job
//!   on the inbox's thread), and an agent that leaves before receiving it
//!   puts it back.
//! - **Nothing is lost.** Messages are kept in SQLite in the state
//!   directory until taken or `inbox.keep_minutes` old; `inbox.max_messages`
//!   bounds how many wait (the oldest go first, logged).
//!
//! Every change is published on the event stream (`inbox_arrived`,
//! `inbox_taken`, `inbox_dropped`): the message light and the
//! `hark://inbox` resource's subscribers follow it.

mod db;

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime},
};

use hark_core::{
    events::{Bus, Event},
    words,
};
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::worker::Worker;
use db::InboxDb;
pub use db::{FILE, Message, NewMessage, StoreError};

/// How a message was addressed.
pub const BY_NAME: &str = "name";
pub const BY_DEFAULT: &str = "default";
pub const BY_ANYONE: &str = "anyone";
/// Said in the follow-up after an agent answered: to that agent, unless
/// the person names another.
pub const BY_FOLLOW_UP: &str = "follow_up";
/// Said just after an agent's listen ended the person's turn, before the
/// agent answered: the rest of that turn, for that agent only.
pub const BY_CONTINUATION: &str = "continuation";

/// The inbox's settings (from `[inbox]` and `[agents]`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub keep: Duration,
    pub max_messages: usize,
    /// The agent unaddressed messages are for (`inbox.default_agent`).
    pub default_agent: Option<String>,
    /// `[agents.NAME]`: names, aliases.
    pub agents: hark_core::agents::Agents,
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

/// What the inbox's thread and its callers share: nothing here waits for
/// the database.
struct Shared {
    bus: Bus,
    settings: Settings,
    /// Agents subscribed to the inbox.
    presence: Mutex<Vec<Presence>>,
    /// Messages waiting untaken, and agents waiting for one, as the last
    /// change left them (for `get_status`, which must not wait).
    waiting: AtomicUsize,
    agents_waiting: AtomicUsize,
    /// Wakes the expiry task when a message arrives.
    arrived: Notify,
}

impl Shared {
    fn key(&self, name: &str) -> String {
        self.settings.agents.key(name)
    }

    fn present(&self, key: Option<&str>) -> bool {
        let may = |k: &str| key.is_none_or(|key| key == k);
        self.presence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|p| (p.alive)() && may(&p.key))
    }
}

/// The inbox's thread owns the database and the queue of waiting agents,
/// so delivering a message, taking one and joining the queue are each one
/// job: atomic without a lock held across a write.
struct Core {
    db: InboxDb,
    waiters: VecDeque<Waiter>,
    shared: Arc<Shared>,
    /// Ids for messages handed over that the disk could not keep: -1, -2, …
    unkept: i64,
    /// Where the messages are kept, or why only in memory.
    kept: String,
}

pub struct Inbox {
    worker: Worker<Core>,
    shared: Arc<Shared>,
    ids: AtomicU64,
    /// Where the messages are kept, or why only in memory.
    kept: String,
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
        // Closed first: a message sent from now on comes back to the
        // sender; one sent before is still here to give back.
        let undelivered = self.rx.take().and_then(|mut rx| {
            rx.close();
            rx.try_recv().ok()
        });
        let id = self.id;
        self.inbox.worker.send(move |core| {
            core.waiters.retain(|w| w.id != id);
            core.count_agents();
            if let Some(message) = undelivered {
                tracing::info!(
                    id = message.id,
                    "the agent left before receiving the message; it stays in the inbox"
                );
                core.give_back(&message);
            }
        });
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
            .shared
            .presence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|p| p.id != self.id);
    }
}

impl Core {
    fn count(&mut self, now: SystemTime) -> Result<usize, StoreError> {
        let waiting = self.db.count_waiting(now)?;
        self.shared.waiting.store(waiting, Ordering::Relaxed);
        Ok(waiting)
    }

    fn count_agents(&self) {
        self.shared
            .agents_waiting
            .store(self.waiters.len(), Ordering::Relaxed);
    }

    /// Whether an agent that may take a message for `key` (`None`: any
    /// agent) waits for it or is subscribed.
    fn reachable(&self, key: Option<&str>) -> bool {
        let may = |k: &str| key.is_none_or(|key| key == k);
        self.waiters
            .iter()
            .any(|w| !w.tx.is_closed() && may(&w.key))
            || self.shared.present(key)
    }

    fn deliver(&mut self, message: NewMessage) -> Result<Delivered, StoreError> {
        let now = SystemTime::now();
        let bus = self.shared.bus.clone();
        let mut kept: Option<Message> = None;
        while let Some(at) = self.waiters.iter().position(|w| {
            !w.tx.is_closed()
                && message
                    .addressed_key
                    .as_ref()
                    .is_none_or(|key| *key == w.key)
        }) {
            let Some(waiter) = self.waiters.remove(at) else {
                break;
            };
            self.count_agents();
            let taken = match kept.take() {
                // Handed on from an agent that left meanwhile.
                Some(previous) => self.db.reassign(previous.id, &waiter.agent, now)?,
                None => match self.db.insert(&message, Some(&waiter.agent), now) {
                    Ok(taken) => taken,
                    // The disk failed, but an agent is waiting for it:
                    // hand it over rather than lose it.
                    Err(e) => {
                        tracing::error!(error = %e, agent = %waiter.agent,
                            "the message cannot be kept on disk; handed to the waiting agent from memory");
                        self.unkept -= 1;
                        Message {
                            id: self.unkept,
                            new: message.clone(),
                            taken_by: Some(waiter.agent.clone()),
                        }
                    }
                },
            };
            let id = taken.id;
            match waiter.tx.send(taken) {
                Ok(()) => {
                    let waiting = self.count(now)?;
                    bus.publish(Event::InboxArrived {
                        id,
                        listen: message.listen,
                        addressed_to: message.addressed_to.clone(),
                        waiting,
                    });
                    bus.publish(Event::InboxTaken {
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
                self.db.give_back(previous.id)?;
                previous.id
            }
            None => self.db.insert(&message, None, now)?.id,
        };
        let max = self.shared.settings.max_messages;
        let (_, overflow) = self.db.purge(max, now)?;
        let waiting = self.count(now)?;
        if !overflow.is_empty() {
            tracing::warn!(dropped = ?overflow, max,
                "the inbox is full (inbox.max_messages): the oldest messages were dropped");
            bus.publish(Event::InboxDropped {
                ids: overflow,
                reason: "overflow".into(),
                waiting,
            });
        }
        // Whether anyone listens is decided before anyone is told: a
        // listening agent may react to the news (end its listen) before
        // this thread runs again.
        let reachable = self.reachable(message.addressed_key.as_deref());
        bus.publish(Event::InboxArrived {
            id: message_id,
            listen: message.listen,
            addressed_to: message.addressed_to.clone(),
            waiting,
        });
        self.shared.arrived.notify_one();
        tracing::info!(id = message_id, addressed_to = ?message.addressed_to, reachable, "message kept in the inbox");
        Ok(Delivered::Kept { reachable })
    }

    /// The oldest message `agent` may take, else a place in the queue.
    fn wait(
        &mut self,
        agent: String,
        id: u64,
    ) -> Result<Result<Message, oneshot::Receiver<Message>>, StoreError> {
        let key = self.shared.key(&agent);
        let now = SystemTime::now();
        if let Some(message) = self.db.take_oldest(&agent, &key, now)? {
            let waiting = self.count(now)?;
            self.shared.bus.publish(Event::InboxTaken {
                id: message.id,
                agent,
                waiting,
            });
            return Ok(Ok(message));
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push_back(Waiter { id, key, agent, tx });
        self.count_agents();
        Ok(Err(rx))
    }

    /// The oldest continuation of `agent`'s turn, taken.
    fn take_continuation(&mut self, agent: String) -> Result<Option<Message>, StoreError> {
        let key = self.shared.key(&agent);
        let now = SystemTime::now();
        let taken = self
            .db
            .take_addressed_by(&agent, &key, BY_CONTINUATION, now)?;
        if let Some(message) = &taken {
            let waiting = self.count(now)?;
            self.shared.bus.publish(Event::InboxTaken {
                id: message.id,
                agent,
                waiting,
            });
        }
        Ok(taken)
    }

    fn give_back(&mut self, message: &Message) {
        let now = SystemTime::now();
        match self.db.give_back(message.id).and_then(|()| self.count(now)) {
            Ok(waiting) => self.shared.bus.publish(Event::InboxArrived {
                id: message.id,
                listen: None,
                addressed_to: message.new.addressed_to.clone(),
                waiting,
            }),
            Err(e) => tracing::error!(id = message.id, error = %e, "cannot put the message back"),
        }
    }

    /// Drops what expired; when the next message expires.
    fn expire(&mut self) -> Option<SystemTime> {
        let now = SystemTime::now();
        let max = self.shared.settings.max_messages;
        let result = self
            .db
            .purge(max, now)
            .and_then(|(expired, _)| Ok((expired, self.count(now)?, self.db.next_expiry()?)));
        match result {
            Ok((expired, waiting, next)) => {
                if !expired.is_empty() {
                    tracing::info!(
                        ?expired,
                        "inbox messages expired untaken (inbox.keep_minutes)"
                    );
                    self.shared.bus.publish(Event::InboxDropped {
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
    }
}

impl Inbox {
    /// Opens the inbox kept in `state_dir` on a thread of its own (blocking
    /// until it is open: call it off the async runtime). A directory that
    /// cannot be used leaves it in memory, logged.
    pub fn open(
        state_dir: &std::path::Path,
        settings: Settings,
        bus: Bus,
    ) -> Result<Inbox, StoreError> {
        let shared = Arc::new(Shared {
            bus,
            settings,
            presence: Mutex::new(Vec::new()),
            waiting: AtomicUsize::new(0),
            agents_waiting: AtomicUsize::new(0),
            arrived: Notify::new(),
        });
        let dir = state_dir.to_path_buf();
        let core_shared = Arc::clone(&shared);
        let worker = Worker::open("hark-inbox", move || {
            let (db, kept) = match InboxDb::open(&dir) {
                Ok((db, warning)) => {
                    if let Some(warning) = warning {
                        tracing::error!("{warning}");
                    }
                    let kept = format!(
                        "kept in {}",
                        db.path
                            .as_ref()
                            .map_or_else(String::new, |p| p.display().to_string())
                    );
                    (db, kept)
                }
                Err(e) => {
                    tracing::error!(error = %e, "the voice inbox cannot be kept on disk; messages last until the appliance restarts");
                    (InboxDb::in_memory()?, format!("in memory only: {e}"))
                }
            };
            let mut core = Core {
                db,
                waiters: VecDeque::new(),
                shared: core_shared,
                unkept: 0,
                kept,
            };
            // Messages kept from before a restart light the message light.
            let waiting = core.count(SystemTime::now()).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot count the inbox");
                0
            });
            if waiting > 0 {
                tracing::info!(waiting, "messages from before the restart are waiting");
                core.shared.bus.publish(Event::InboxRestored { waiting });
            }
            Ok::<_, StoreError>(core)
        })?;
        let kept = worker.call_blocking(|core| core.kept.clone())?;
        Ok(Inbox {
            worker,
            shared,
            ids: AtomicU64::new(1),
            kept,
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    /// One line for `get_status` (from memory: it never waits for the
    /// database).
    pub fn status(&self) -> String {
        format!(
            "{} waiting; {} agent(s) waiting for the person; {}",
            self.shared.waiting.load(Ordering::Relaxed),
            self.shared.agents_waiting.load(Ordering::Relaxed),
            self.kept
        )
    }

    /// The key an agent's name is compared by: the configured agent it is
    /// (by name or alias), else the name itself.
    pub fn key(&self, name: &str) -> String {
        self.shared.key(name)
    }

    /// Who an utterance is for: (`addressed_to`, its key, how). `known`:
    /// the agents seen since the start, besides the configured ones.
    pub fn address(
        &self,
        text: &str,
        known: &[String],
    ) -> (Option<String>, Option<String>, &'static str) {
        let settings = &self.shared.settings;
        let mut addressing = words::Addressing::new();
        for (name, aliases) in settings.agents.names() {
            addressing.add(&name, &aliases);
        }
        for name in known {
            addressing.add(name, &[]);
        }
        if let Some(addressed) = addressing.address(text) {
            let key = self.key(&addressed.agent);
            return (Some(addressed.agent), Some(key), BY_NAME);
        }
        match &settings.default_agent {
            Some(agent) => (Some(agent.clone()), Some(self.key(agent)), BY_DEFAULT),
            None => (None, None, BY_ANYONE),
        }
    }

    /// Who a follow-up to `agent`'s answer is for: the agent the person
    /// names, if any, else `agent`.
    pub fn address_follow_up(
        &self,
        text: &str,
        known: &[String],
        agent: &str,
    ) -> (Option<String>, Option<String>, &'static str) {
        match self.address(text, known) {
            named @ (_, _, BY_NAME) => named,
            _ => (Some(agent.to_owned()), Some(self.key(agent)), BY_FOLLOW_UP),
        }
    }

    /// The expiry time for a message kept now.
    pub fn expires(&self, now: SystemTime) -> SystemTime {
        now + self.shared.settings.keep
    }

    /// Keeps the person's message and hands it to a waiting agent that may
    /// take it.
    pub async fn deliver(&self, message: NewMessage) -> Result<Delivered, StoreError> {
        self.worker.call(move |core| core.deliver(message)).await?
    }

    /// A message for `agent` if one waits, else a place in the queue of
    /// waiting agents.
    pub async fn wait(self: &Arc<Self>, agent: &str) -> Result<Wait, StoreError> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let agent = agent.to_owned();
        Ok(
            match self.worker.call(move |core| core.wait(agent, id)).await?? {
                Ok(message) => Wait::Taken(message),
                Err(rx) => Wait::Ticket(Ticket {
                    inbox: Arc::clone(self),
                    id,
                    rx: Some(rx),
                }),
            },
        )
    }

    /// Takes the oldest continuation of `agent`'s own turn waiting for it
    /// (addressed by [`BY_CONTINUATION`]), if any: the agent's next listen
    /// returns it instead of opening the microphone.
    pub async fn take_continuation(&self, agent: &str) -> Result<Option<Message>, StoreError> {
        let agent = agent.to_owned();
        self.worker
            .call(move |core| core.take_continuation(agent))
            .await?
    }

    /// The messages waiting that `agent` may take (all with `None`).
    pub async fn waiting_for(&self, agent: Option<&str>) -> Result<Vec<Message>, StoreError> {
        let key = agent.map(|a| self.key(a));
        self.worker
            .call(move |core| core.db.waiting(key.as_deref(), SystemTime::now()))
            .await?
    }

    /// Counts `agent` as subscribed to the inbox while the guard lives and
    /// `alive` says so.
    pub fn present(
        self: &Arc<Self>,
        agent: &str,
        alive: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> PresenceGuard {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        self.shared
            .presence
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

    /// Drops expired messages as they expire, until `token` is cancelled.
    pub async fn expire(self: Arc<Self>, token: CancellationToken) {
        loop {
            let next = self.worker.call(Core::expire).await.unwrap_or(None);
            let sleep = next.map(|at| {
                at.duration_since(SystemTime::now())
                    .unwrap_or(Duration::ZERO)
                    + Duration::from_millis(5)
            });
            tokio::select! {
                () = token.cancelled() => return,
                () = self.shared.arrived.notified() => {}
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
            agents: hark_core::agents::Agents::new(BTreeMap::from([(
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
    fn a_statement_off_the_stores_thread_fails_in_a_debug_build() {
        if !cfg!(debug_assertions) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let opened = std::panic::catch_unwind(|| InboxDb::open(dir.path()).map(|_| ()));
        assert!(opened.is_err(), "opened the database on a test thread");
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

    #[test]
    fn a_follow_up_goes_to_the_agent_that_answered_unless_another_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        let (to, key, by) = inbox.address_follow_up("and tomorrow?", &[], "Cursor");
        assert_eq!(
            (to.as_deref(), key.as_deref(), by),
            (Some("Cursor"), Some("cursor"), BY_FOLLOW_UP)
        );
        let (to, _, by) = inbox.address_follow_up("Claude, and tomorrow?", &[], "cursor");
        assert_eq!((to.as_deref(), by), (Some("claude-code"), BY_NAME));
    }

    #[tokio::test]
    async fn a_waiting_agent_gets_the_message_at_once_and_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        let Wait::Ticket(mut claude) = inbox.wait("claude-code").await.unwrap() else {
            panic!("nothing waits yet");
        };
        let Wait::Ticket(mut cursor) = inbox.wait("cursor").await.unwrap() else {
            panic!("nothing waits yet");
        };
        // For Claude: Cursor, though it waited too, does not get it.
        let delivered = inbox
            .deliver(message(&inbox, "Claude, remind me at five"))
            .await
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
        let delivered = inbox.deliver(message(&inbox, "lights off")).await.unwrap();
        assert_eq!(delivered, Delivered::To("cursor".into()));
        assert_eq!(inbox.waiting_for(None).await.unwrap().len(), 0);
        assert!(
            inbox.status().starts_with("0 waiting; 0 agent(s)"),
            "{}",
            inbox.status()
        );
    }

    #[tokio::test]
    async fn a_continuation_is_taken_only_by_its_agent_and_only_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        // A message for anyone and one the person addressed to Claude by
        // name are not continuations: Claude's next listen leaves them.
        inbox.deliver(message(&inbox, "lights off")).await.unwrap();
        inbox
            .deliver(message(&inbox, "Claude, remind me at five"))
            .await
            .unwrap();
        assert!(
            inbox
                .take_continuation("claude-code")
                .await
                .unwrap()
                .is_none()
        );
        let mut went_on = message(&inbox, "for four people");
        went_on.addressed_to = Some("claude-code".into());
        went_on.addressed_key = Some(inbox.key("claude-code"));
        went_on.addressed_by = BY_CONTINUATION.into();
        inbox.deliver(went_on).await.unwrap();
        assert!(
            inbox.take_continuation("cursor").await.unwrap().is_none(),
            "another agent's continuation"
        );
        // Claude by an alias is Claude.
        let taken = inbox
            .take_continuation("clod")
            .await
            .unwrap()
            .expect("kept");
        assert_eq!(taken.new.text, "for four people");
        assert_eq!(taken.taken_by.as_deref(), Some("clod"));
        assert!(
            inbox
                .take_continuation("claude-code")
                .await
                .unwrap()
                .is_none(),
            "taken once"
        );
        assert_eq!(inbox.waiting_for(None).await.unwrap().len(), 2);
    }

    async fn take(inbox: &Arc<Inbox>, agent: &str) -> Option<String> {
        match inbox.wait(agent).await.unwrap() {
            Wait::Taken(m) => Some(m.new.text),
            Wait::Ticket(_) => None,
        }
    }

    #[tokio::test]
    async fn kept_messages_survive_a_restart_and_are_taken_oldest_first_once() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        for text in ["first", "second", "Claude, third"] {
            assert_eq!(
                inbox.deliver(message(&inbox, text)).await.unwrap(),
                Delivered::Kept { reachable: false }
            );
        }
        assert!(
            inbox.status().starts_with("3 waiting;"),
            "{}",
            inbox.status()
        );
        drop(inbox);
        let inbox = open(dir.path(), settings());
        assert!(
            inbox.status().starts_with("3 waiting;"),
            "{}",
            inbox.status()
        );
        assert_eq!(inbox.waiting_for(None).await.unwrap().len(), 3);
        assert_eq!(inbox.waiting_for(Some("cursor")).await.unwrap().len(), 2);
        assert_eq!(take(&inbox, "cursor").await.as_deref(), Some("first"));
        assert_eq!(take(&inbox, "claude").await.as_deref(), Some("second"));
        assert_eq!(take(&inbox, "cursor").await, None, "the third is Claude's");
        assert_eq!(
            take(&inbox, "claude-code").await.as_deref(),
            Some("Claude, third")
        );
        assert_eq!(take(&inbox, "claude").await, None, "each is taken once");
    }

    #[tokio::test]
    async fn a_subscriber_that_stops_once_told_was_still_listening_when_it_arrived() {
        let dir = tempfile::tempdir().unwrap();
        let bus = Bus::default();
        let inbox = Arc::new(Inbox::open(dir.path(), settings(), bus.clone()).expect("inbox"));
        // The agent ends its subscription as soon as it hears of a message
        // (as an SDK client closes its listen): it counted as listening
        // until then.
        let news = Mutex::new(bus.subscribe());
        let stopped = std::sync::atomic::AtomicBool::new(false);
        let _present = inbox.present(
            "cursor",
            Box::new(move || {
                let mut news = news.lock().unwrap_or_else(PoisonError::into_inner);
                if hark_core::events::received(&mut news)
                    .any(|e| matches!(e.event, Event::InboxArrived { .. }))
                {
                    stopped.store(true, Ordering::Relaxed);
                }
                !stopped.load(Ordering::Relaxed)
            }),
        );
        assert_eq!(
            inbox.deliver(message(&inbox, "hello")).await.unwrap(),
            Delivered::Kept { reachable: true }
        );
    }

    #[tokio::test]
    async fn a_message_handed_to_an_agent_that_left_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        let Wait::Ticket(ticket) = inbox.wait("cursor").await.unwrap() else {
            panic!("nothing waits yet");
        };
        assert!(
            inbox.status().contains("1 agent(s) waiting"),
            "{}",
            inbox.status()
        );
        // Delivered into the ticket, then the agent leaves without reading.
        assert_eq!(
            inbox.deliver(message(&inbox, "hello")).await.unwrap(),
            Delivered::To("cursor".into())
        );
        drop(ticket);
        let waiting = inbox.waiting_for(None).await.unwrap();
        assert_eq!(waiting.len(), 1, "back in the inbox");
        assert_eq!(waiting[0].taken_by, None);
    }

    #[tokio::test]
    async fn the_oldest_are_dropped_beyond_the_limit_and_expired_ones_go() {
        let dir = tempfile::tempdir().unwrap();
        let inbox = open(dir.path(), settings());
        for i in 0..5 {
            inbox
                .deliver(message(&inbox, &format!("message {i}")))
                .await
                .unwrap();
        }
        let texts: Vec<_> = inbox
            .waiting_for(None)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.new.text)
            .collect();
        assert_eq!(texts, ["message 2", "message 3", "message 4"]);
        let mut old = message(&inbox, "old");
        old.expires_at = SystemTime::now() - Duration::from_secs(1);
        let expired = inbox
            .worker
            .call(move |core| {
                core.db.insert(&old, None, SystemTime::now()).unwrap();
                core.db.purge(10, SystemTime::now()).unwrap().0
            })
            .await
            .unwrap();
        assert_eq!(expired.len(), 1);
    }

    #[test]
    fn an_unreadable_database_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"this is not a database at all, not even close....................................................").unwrap();
        let path = dir.path().to_path_buf();
        let (warning, waiting) = Worker::start("test-inbox", ())
            .unwrap()
            .call_blocking(move |_| {
                let (db, warning) = InboxDb::open(&path).expect("a new database");
                (warning, db.count_waiting(SystemTime::now()).unwrap())
            })
            .unwrap();
        let warning = warning.expect("a warning");
        assert!(warning.contains("moved to"), "{warning}");
        assert_eq!(waiting, 0);
        let aside: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "the old file is kept aside");
    }

    #[tokio::test]
    async fn a_state_directory_that_cannot_be_made_leaves_the_inbox_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let inbox = open(&file.join("state"), settings());
        assert!(
            inbox.status().contains("in memory only"),
            "{}",
            inbox.status()
        );
        inbox.deliver(message(&inbox, "still works")).await.unwrap();
        assert_eq!(inbox.waiting_for(None).await.unwrap().len(), 1);
    }
}
