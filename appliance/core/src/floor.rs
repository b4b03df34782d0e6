//! The floor: whose turn it is to talk with the person. The microphone is
//! one resource: one listen (`transcribe_voice`, `converse`, `confirm`,
//! `choose`, the person's own recording) holds it at a time, and the
//! others wait in a fair queue — first come, first served, each within its
//! own timeout — or are told at once that it is busy (`queue: false`). The
//! person's recording goes to the front: the person in the room comes
//! first.
//!
//! While an agent holds the floor, other agents' speech waits
//! (the room's speech queue asks [`Floor::speaker`]): nobody talks over the person
//! or between a `converse`'s question and its answer.
//!
//! Who holds it and who waits is on the event stream (`floor_granted`,
//! `floor_queued`, `floor_released`) and in `get_status`. A holder that
//! goes away (its call cancelled, its client disconnected) drops its
//! [`Turn`], which hands the floor on at once; a holder past
//! `floor.max_hold_seconds` is cut off.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime},
};

use tokio::sync::{oneshot, watch};

use crate::{
    events::{Bus, Event},
    room::{Context, Failure, Kind},
};

/// Who wants the floor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// The person in the room (the button).
    Person,
    Agent(String),
    /// Hark itself asking the person something of its own (a pairing):
    /// only Hark's own speech plays meanwhile, and it queues with the
    /// person, since it is the person's answer it waits for.
    Hark,
}

impl Who {
    pub fn agent(&self) -> Option<&str> {
        match self {
            Who::Person | Who::Hark => None,
            Who::Agent(name) => Some(name),
        }
    }

    fn name(&self) -> String {
        match self {
            Who::Person => "the person".into(),
            Who::Hark => "Hark (a pairing)".into(),
            Who::Agent(name) => name.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FloorError {
    #[error(
        "the microphone is busy: {holder} is using it ({tool}){}; call again later, or with queue: true (the default) to wait your turn",
        waiting_text(*.waiting)
    )]
    Busy {
        holder: String,
        tool: String,
        waiting: usize,
    },
    #[error(
        "{waiting} calls are already waiting for the microphone (floor.max_queue); try again when it is free"
    )]
    QueueFull { waiting: usize },
    #[error(
        "the microphone was busy for the whole timeout ({holder} held it); try again, or with a longer timeout_seconds"
    )]
    TimedOut { holder: String },
}

/// A floor refusal as a tool's failure: `BusyError`, with who holds the
/// microphone and how many wait.
impl From<FloorError> for Failure {
    fn from(e: FloorError) -> Self {
        let context = match &e {
            FloorError::Busy {
                holder, waiting, ..
            } => Context::Floor {
                holder: Some(holder.clone()),
                waiting: Some(*waiting),
            },
            FloorError::QueueFull { waiting } => Context::Floor {
                holder: None,
                waiting: Some(*waiting),
            },
            FloorError::TimedOut { holder } => Context::Floor {
                holder: Some(holder.clone()),
                waiting: None,
            },
        };
        Failure::new(Kind::Busy, e.to_string()).with_context(context)
    }
}

fn waiting_text(waiting: usize) -> String {
    match waiting {
        0 => String::new(),
        n => format!(" and {n} more wait"),
    }
}

pub use crate::room::{FloorStatus, Place};

struct Entry {
    id: u64,
    who: Who,
    tool: &'static str,
    since: SystemTime,
}

struct Waiter {
    entry: Entry,
    granted: oneshot::Sender<()>,
}

#[derive(Default)]
struct State {
    holder: Option<Entry>,
    queue: VecDeque<Waiter>,
    next: u64,
}

pub struct Floor {
    state: Mutex<State>,
    bus: Bus,
    max_queue: usize,
    pub max_hold: Duration,
    /// Who holds the floor now, for whoever waits for it to change (the
    /// speech thread).
    holder: watch::Sender<Option<Who>>,
}

/// The floor, held until dropped (then handed to the next in the queue).
pub struct Turn {
    floor: Arc<Floor>,
    id: u64,
    /// When `floor.max_hold_seconds` is up.
    pub deadline: tokio::time::Instant,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn").field("id", &self.id).finish()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.floor.release(self.id);
    }
}

impl Turn {
    /// Hands the floor straight to `who` (for `tool`), past the queue: the
    /// person going on after a listen ended keeps the microphone the
    /// listen had, so what they add is not heard by the next in line. The
    /// new turn keeps this one's deadline. A turn no longer holding the
    /// floor (it was released meanwhile) hands on nothing: the new turn
    /// then waits for nothing and releases nothing.
    pub fn hand_to(self, who: Who, tool: &'static str) -> Turn {
        let floor = Arc::clone(&self.floor);
        let deadline = self.deadline;
        let id = {
            let mut state = floor.lock();
            state.next += 1;
            let id = state.next;
            if let Some(held) = state.holder.take_if(|h| h.id == self.id) {
                floor.bus.publish(Event::FloorReleased {
                    turn: held.id,
                    agent: held.who.agent().map(str::to_owned),
                });
                let entry = Entry {
                    id,
                    who,
                    tool,
                    since: SystemTime::now(),
                };
                floor.grant(&mut state, entry);
            }
            id
        };
        // This turn's own release would now release nothing.
        drop(self);
        Turn {
            floor,
            id,
            deadline,
        }
    }
}

/// A place in the queue; dropping it before the floor came leaves the
/// queue, after, releases the floor.
struct Queued {
    floor: Arc<Floor>,
    id: u64,
    done: bool,
}

impl Drop for Queued {
    fn drop(&mut self) {
        if !self.done {
            self.floor.release(self.id);
        }
    }
}

fn place(entry: &Entry) -> Place {
    Place {
        who: match &entry.who {
            Who::Person => "person".into(),
            Who::Hark => "hark".into(),
            Who::Agent(name) => name.clone(),
        },
        tool: entry.tool.into(),
        since: humantime::format_rfc3339_millis(entry.since).to_string(),
    }
}

impl Floor {
    pub fn new(bus: Bus, max_queue: usize, max_hold: Duration) -> Self {
        Self {
            state: Mutex::new(State::default()),
            bus,
            max_queue,
            max_hold,
            holder: watch::Sender::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who holds the floor (whose speech may play now), and a way to wait
    /// for that to change.
    pub fn speaker(&self) -> watch::Receiver<Option<Who>> {
        self.holder.subscribe()
    }

    pub fn status(&self) -> FloorStatus {
        let state = self.lock();
        FloorStatus {
            holder: state.holder.as_ref().map(place),
            queue: state.queue.iter().map(|w| place(&w.entry)).collect(),
        }
    }

    /// Whether an agent (not the person) holds the floor.
    pub fn held_by_agent(&self) -> bool {
        matches!(
            &self.lock().holder,
            Some(Entry {
                who: Who::Agent(_),
                ..
            })
        )
    }

    fn grant(&self, state: &mut State, entry: Entry) {
        self.bus.publish(Event::FloorGranted {
            turn: entry.id,
            agent: entry.who.agent().map(str::to_owned),
            tool: entry.tool.to_owned(),
        });
        let who = entry.who.clone();
        state.holder = Some(entry);
        self.holder.send_replace(Some(who));
    }

    /// Releases turn `id` (holding or waiting) and hands the floor on.
    fn release(&self, id: u64) {
        let mut state = self.lock();
        state.queue.retain(|w| w.entry.id != id);
        if state.holder.as_ref().is_none_or(|h| h.id != id) {
            return;
        }
        if let Some(held) = state.holder.take() {
            self.bus.publish(Event::FloorReleased {
                turn: held.id,
                agent: held.who.agent().map(str::to_owned),
            });
        }
        // The first waiter still there takes it; one that gave up in the
        // meantime (its receiver gone) is skipped.
        while let Some(next) = state.queue.pop_front() {
            if next.granted.send(()).is_ok() {
                self.grant(&mut state, next.entry);
                return;
            }
        }
        self.holder.send_replace(None);
    }

    /// Takes the floor for `who` (for `tool`): at once if it is free, else
    /// after those before in the queue (the person goes to its front),
    /// waiting at most `timeout`; with `queue: false`, a busy floor is an
    /// error at once.
    pub async fn take(
        self: &Arc<Self>,
        who: Who,
        tool: &'static str,
        queue: bool,
        timeout: Duration,
    ) -> Result<Turn, FloorError> {
        let (granted, id) = {
            let mut state = self.lock();
            state.next += 1;
            let id = state.next;
            let entry = Entry {
                id,
                who,
                tool,
                since: SystemTime::now(),
            };
            if state.holder.is_none() && state.queue.is_empty() {
                self.grant(&mut state, entry);
                return Ok(self.turn(id));
            }
            let (holder, holder_tool) = state
                .holder
                .as_ref()
                .map(|h| (h.who.name(), h.tool.to_owned()))
                .unwrap_or_default();
            if !queue {
                return Err(FloorError::Busy {
                    holder,
                    tool: holder_tool,
                    waiting: state.queue.len(),
                });
            }
            if state.queue.len() >= self.max_queue {
                return Err(FloorError::QueueFull {
                    waiting: state.queue.len(),
                });
            }
            let (tx, rx) = oneshot::channel();
            let person = matches!(entry.who, Who::Person | Who::Hark);
            let agent = entry.who.agent().map(str::to_owned);
            let waiter = Waiter { entry, granted: tx };
            // The person goes first, before every agent that waits.
            let position = if person {
                state.queue.push_front(waiter);
                0
            } else {
                state.queue.push_back(waiter);
                state.queue.len() - 1
            };
            self.bus.publish(Event::FloorQueued {
                turn: id,
                agent,
                position,
            });
            (rx, id)
        };
        let mut queued = Queued {
            floor: Arc::clone(self),
            id,
            done: false,
        };
        match tokio::time::timeout(timeout, granted).await {
            Ok(Ok(())) => {
                queued.done = true;
                Ok(self.turn(id))
            }
            _ => {
                let holder = self
                    .lock()
                    .holder
                    .as_ref()
                    .map(|h| h.who.name())
                    .unwrap_or_default();
                // `queued` drops here: out of the queue (or, had the floor
                // come at the last moment, handed on).
                drop(queued);
                Err(FloorError::TimedOut { holder })
            }
        }
    }

    fn turn(self: &Arc<Self>, id: u64) -> Turn {
        Turn {
            floor: Arc::clone(self),
            id,
            deadline: tokio::time::Instant::now() + self.max_hold,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor() -> Arc<Floor> {
        Arc::new(Floor::new(Bus::default(), 2, Duration::from_secs(60)))
    }

    fn agent(name: &str) -> Who {
        Who::Agent(name.into())
    }

    #[tokio::test]
    async fn one_at_a_time_in_order_and_the_person_first() {
        let floor = floor();
        let a = floor
            .take(agent("a"), "transcribe_voice", true, Duration::from_secs(5))
            .await
            .unwrap();
        let f = Arc::clone(&floor);
        let b = tokio::spawn(async move {
            f.take(agent("b"), "converse", true, Duration::from_secs(5))
                .await
        });
        tokio::task::yield_now().await;
        let f = Arc::clone(&floor);
        let person = tokio::spawn(async move {
            f.take(Who::Person, "button", true, Duration::from_secs(5))
                .await
        });
        tokio::task::yield_now().await;
        let status = floor.status();
        assert_eq!(status.holder.as_ref().unwrap().who, "a");
        let queue: Vec<_> = status.queue.iter().map(|p| p.who.as_str()).collect();
        assert_eq!(queue, ["person", "b"], "the person goes first");
        drop(a);
        let person = person.await.unwrap().unwrap();
        assert_eq!(floor.status().holder.unwrap().who, "person");
        assert!(!floor.held_by_agent());
        drop(person);
        let b = b.await.unwrap().unwrap();
        assert_eq!(floor.status().holder.unwrap().tool, "converse");
        assert!(floor.held_by_agent());
        drop(b);
        assert_eq!(floor.status(), FloorStatus::default());
        assert_eq!(*floor.speaker().borrow(), None);
    }

    #[tokio::test]
    async fn a_turn_handed_on_passes_the_queue_and_then_releases() {
        let floor = floor();
        let a = floor
            .take(agent("a"), "transcribe_voice", true, Duration::from_secs(5))
            .await
            .unwrap();
        let f = Arc::clone(&floor);
        let mut b = tokio::spawn(async move {
            f.take(agent("b"), "transcribe_voice", true, Duration::from_secs(5))
                .await
        });
        tokio::task::yield_now().await;
        let person = a.hand_to(Who::Person, "continuation");
        let status = floor.status();
        assert_eq!(status.holder.as_ref().unwrap().who, "person");
        assert_eq!(status.holder.unwrap().tool, "continuation");
        assert_eq!(status.queue.len(), 1, "b still waits");
        assert_eq!(*floor.speaker().borrow(), Some(Who::Person));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut b)
                .await
                .is_err(),
            "the handed turn still holds the floor"
        );
        drop(person);
        let b = b.await.unwrap().unwrap();
        assert_eq!(floor.status().holder.unwrap().who, "b");
        drop(b);
        assert_eq!(floor.status(), FloorStatus::default());
    }

    #[tokio::test]
    async fn busy_full_and_timed_out_are_errors() {
        let floor = floor();
        let _a = floor
            .take(agent("a"), "confirm", true, Duration::from_secs(5))
            .await
            .unwrap();
        let busy = floor
            .take(
                agent("b"),
                "transcribe_voice",
                false,
                Duration::from_secs(5),
            )
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&busy, FloorError::Busy { holder, .. } if holder == "a"),
            "{busy}"
        );
        assert!(
            busy.to_string().contains("a is using it (confirm)"),
            "{busy}"
        );
        // Two may wait (max_queue); a third is refused.
        let (f1, f2) = (Arc::clone(&floor), Arc::clone(&floor));
        let w1 =
            tokio::spawn(
                async move { f1.take(agent("b"), "x", true, Duration::from_secs(5)).await },
            );
        let w2 = tokio::spawn(async move {
            f2.take(agent("c"), "x", true, Duration::from_millis(50))
                .await
        });
        tokio::task::yield_now().await;
        let full = floor
            .take(agent("d"), "x", true, Duration::from_secs(5))
            .await
            .err()
            .unwrap();
        assert_eq!(full, FloorError::QueueFull { waiting: 2 });
        let timed_out = w2.await.unwrap().err().unwrap();
        assert_eq!(timed_out, FloorError::TimedOut { holder: "a".into() });
        assert_eq!(
            floor.status().queue.len(),
            1,
            "the one that gave up left the queue"
        );
        w1.abort();
        let _ = w1.await;
        assert!(
            floor.status().queue.is_empty(),
            "a waiter that went away left the queue"
        );
    }
}
