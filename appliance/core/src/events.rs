//! The appliance's one event stream: every change of state — the
//! microphone opening and closing, speech heard and transcribed, the
//! speaker starting and stopping, the button and the mute switch, messages
//! arriving in the voice inbox and being taken, an agent awaiting an
//! answer — is an [`Event`] published on the [`Bus`].
//!
//! Consumers subscribe instead of polling: the lights, MCP notifications
//! (`notifications/resources/updated` for the inbox), the inbox's waiting
//! agents and the tools that react to the button. A consumer that falls
//! behind by more than the channel's capacity skips the oldest events
//! (tokio's broadcast `Lagged`, counted) and never slows the publisher.
//!
//! Publishing also folds the event into a [`Snapshot`] of what the
//! appliance is doing now, under the same lock that orders the events, so
//! the snapshot can never disagree with the stream and a lagging consumer
//! can always resynchronise from it. The lights and `get_status` read the
//! snapshot; a `watch` channel wakes whoever waits for it to change.
//!
//! The audio threads never publish: they raise a flag and wake a bridge
//! thread through a bounded, non-blocking hand-off (the daemon's audio
//! glue), and the bridge publishes.

use std::{
    collections::BTreeSet,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::SystemTime,
};

use serde::Serialize;
use tokio::sync::{broadcast, watch};

/// How many events a subscriber may fall behind before it skips the oldest.
pub const CAPACITY: usize = 512;

/// A button action, as the board classified it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Button {
    Press,
    Release,
    LongPress,
    DoublePress,
}

/// A part of the appliance whose health the error light shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Microphone,
    Speaker,
    SpeechToText,
}

/// One change of state. `agent` is the agent's name; where it is `None`
/// the person in the room started it (a press of the button).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The microphone opened for a recording (`listen` numbers it).
    ListeningStarted { listen: u64, agent: Option<String> },
    /// The voice detector heard speech begin (or push-to-talk went down).
    SpeechDetected { listen: u64 },
    /// The microphone closed: `reason` is the recording's end reason.
    ListeningEnded {
        listen: u64,
        reason: crate::room::EndReason,
    },
    /// Speech to text started working on a request.
    TranscriptionStarted,
    /// Speech to text finished a request.
    TranscriptionEnded,
    /// What the person has said so far, while they speak (the live
    /// engine's partial transcript; `utterance_transcribed` has the final
    /// words).
    UtterancePartial {
        listen: u64,
        agent: Option<String>,
        text: String,
    },
    /// A recording's words.
    UtteranceTranscribed {
        listen: u64,
        agent: Option<String>,
        text: String,
        confidence: Option<f32>,
        /// Seconds of speech.
        duration: f64,
        /// Why the recording ended (`end_of_speech`, `stopped`, …).
        end_reason: crate::room::EndReason,
    },
    /// An agent's speech started playing.
    SpeakingStarted {
        speech: u64,
        agent: Option<String>,
        text: String,
    },
    /// An agent's speech ended: `spoken`, `stopped` or `failed`.
    SpeakingEnded {
        speech: u64,
        agent: Option<String>,
        text: String,
        outcome: SpeechEnded,
        /// Seconds of speech played.
        seconds: f64,
    },
    /// A speech ended before any of it was heard: stopped while it waited
    /// its turn (`stop_speaking`, the button, its caller gone), or failed
    /// before its first sound. Each speech ends in this or
    /// `speaking_ended`, never both.
    SpeechDropped {
        speech: u64,
        agent: Option<String>,
        text: String,
        outcome: SpeechEnded,
    },
    /// Sound started or stopped coming out of the speaker (speech and
    /// earcons alike).
    Speaker { playing: bool },
    /// The board's button.
    Button { action: Button },
    /// The mute switch.
    Mute { on: bool },
    /// The wake word detector heard `word` (the model's name) with
    /// `score`, the mean probability of its window (0–1); `started`: it
    /// started the person's turn (not when Hark was already listening, a
    /// call held the floor, or a self-test or pairing waited).
    WakeWord {
        word: String,
        score: f32,
        started: bool,
    },
    /// An agent asked the person a question (`confirm`, `choose`) and
    /// waits for the answer.
    AnswerAwaited { ask: u64, agent: String },
    /// The question was answered, or given up.
    AnswerEnded { ask: u64, answer: Answered },
    /// The person spoke a message into the voice inbox; `waiting` is how
    /// many are waiting now. `listen`: the recording it came from.
    InboxArrived {
        id: i64,
        listen: Option<u64>,
        addressed_to: Option<String>,
        waiting: usize,
    },
    /// An agent took a message.
    InboxTaken {
        id: i64,
        agent: String,
        waiting: usize,
    },
    /// Messages kept from before the daemon started are waiting.
    InboxRestored { waiting: usize },
    /// Messages left the inbox untaken: `expired` (`inbox.keep_minutes`)
    /// or `overflow` (`inbox.max_messages`).
    InboxDropped {
        ids: Vec<i64>,
        reason: String,
        waiting: usize,
    },
    /// A part's health changed; `state` says how it is.
    Health { part: Part, ok: bool, state: String },
    /// The floor (the microphone, the turn with the person) went to an
    /// agent (`agent: None`: the person's own recording) for `tool`.
    FloorGranted {
        turn: u64,
        agent: Option<String>,
        tool: String,
    },
    /// A call waits for the floor, `position` in the queue (0: next).
    FloorQueued {
        turn: u64,
        agent: Option<String>,
        position: usize,
    },
    /// The floor was let go.
    FloorReleased { turn: u64, agent: Option<String> },
    /// An agent at `address` asks to pair as `agent` with `scopes`: the
    /// pairing light shows and the button decides.
    PairingRequested {
        pairing: u64,
        agent: String,
        address: String,
        scopes: Vec<&'static str>,
    },
    /// The pairing was decided: `approved`, `refused` (a long press),
    /// `timed_out` (no press) or `cancelled` (the agent left).
    PairingEnded {
        pairing: u64,
        agent: String,
        outcome: PairingOutcome,
    },
    /// The timers changed (one was set, cancelled, came due or stopped
    /// ringing): how many wait for their time, the one that ends soonest,
    /// and whether one rings now. The lights count the soonest down.
    Timers {
        running: usize,
        soonest: Option<TimerSpan>,
        ringing: bool,
    },
}

/// A running timer's span, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimerSpan {
    /// When it was set (its countdown's start).
    pub set_at_ms: u64,
    /// When it is due.
    pub due_at_ms: u64,
}

/// How an agent's speech ended.
#[derive(Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeechEnded {
    /// Played to the end.
    Spoken,
    /// Stopped: `stop_speaking`, the button, or the caller cancelled.
    Stopped,
    /// The synthesiser or the speaker failed.
    Failed,
}

impl SpeechEnded {
    pub fn as_str(self) -> &'static str {
        match self {
            SpeechEnded::Spoken => "spoken",
            SpeechEnded::Stopped => "stopped",
            SpeechEnded::Failed => "failed",
        }
    }
}

/// The event log shows these by their names on the wire (`"no_answer"`),
/// as it did when they were text.
macro_rules! debug_as_wire_name {
    ($($kind:ty),*) => {$(
        impl std::fmt::Debug for $kind {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self.as_str(), f)
            }
        }
    )*};
}

debug_as_wire_name!(SpeechEnded, Answered, PairingOutcome);

/// How a question (`confirm`, `choose`) ended.
#[derive(Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answered {
    Yes,
    No,
    /// Nothing said or pressed in time.
    NoAnswer,
    /// Something else was said, or no option matched.
    Unclear,
    /// An option was chosen.
    Chosen,
    /// The person said none of the options.
    None,
    /// The call went away first.
    Cancelled,
}

impl Answered {
    pub fn as_str(self) -> &'static str {
        match self {
            Answered::Yes => "yes",
            Answered::No => "no",
            Answered::NoAnswer => "no_answer",
            Answered::Unclear => "unclear",
            Answered::Chosen => "chosen",
            Answered::None => "none",
            Answered::Cancelled => "cancelled",
        }
    }
}

impl From<crate::room::YesNo> for Answered {
    fn from(answer: crate::room::YesNo) -> Self {
        match answer {
            crate::room::YesNo::Yes => Answered::Yes,
            crate::room::YesNo::No => Answered::No,
            crate::room::YesNo::NoAnswer => Answered::NoAnswer,
            crate::room::YesNo::Unclear => Answered::Unclear,
        }
    }
}

impl From<crate::room::ChoiceOutcome> for Answered {
    fn from(outcome: crate::room::ChoiceOutcome) -> Self {
        match outcome {
            crate::room::ChoiceOutcome::Chosen => Answered::Chosen,
            crate::room::ChoiceOutcome::None => Answered::None,
            crate::room::ChoiceOutcome::Unclear => Answered::Unclear,
            crate::room::ChoiceOutcome::NoAnswer => Answered::NoAnswer,
        }
    }
}

/// How a pairing was decided.
#[derive(Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairingOutcome {
    /// A short press.
    Approved,
    /// A long press (or the status page's refuse).
    Refused,
    /// No press in time.
    TimedOut,
    /// The agent left.
    Cancelled,
}

impl PairingOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PairingOutcome::Approved => "approved",
            PairingOutcome::Refused => "refused",
            PairingOutcome::TimedOut => "timed_out",
            PairingOutcome::Cancelled => "cancelled",
        }
    }
}

/// An event with its place in the stream and its time.
#[derive(Debug, Clone, Serialize)]
pub struct Stamped {
    /// 1, 2, 3, … from the daemon's start.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    #[serde(flatten)]
    pub event: Event,
}

/// What the appliance is doing now: the events folded together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Recordings with the microphone open.
    pub listening: BTreeSet<u64>,
    /// Recordings started by the person (the button), a subset.
    pub person_listening: BTreeSet<u64>,
    /// Sound is coming out of the speaker.
    pub speaker: bool,
    pub muted: bool,
    pub transcribing: bool,
    /// Questions waiting for the person's answer.
    pub asking: BTreeSet<u64>,
    /// Messages in the voice inbox that no agent has taken.
    pub inbox_waiting: usize,
    /// Parts that are not working.
    pub failed: BTreeSet<Part>,
    /// Pairings waiting for the button.
    pub pairing: BTreeSet<u64>,
    /// The running timer that ends soonest.
    pub timer: Option<TimerSpan>,
    /// A timer rings.
    pub timer_ringing: bool,
}

impl Snapshot {
    fn apply(&mut self, event: &Event) {
        match event {
            Event::ListeningStarted { listen, agent } => {
                self.listening.insert(*listen);
                if agent.is_none() {
                    self.person_listening.insert(*listen);
                }
            }
            Event::ListeningEnded { listen, .. } => {
                self.listening.remove(listen);
                self.person_listening.remove(listen);
            }
            Event::TranscriptionStarted => self.transcribing = true,
            Event::TranscriptionEnded => self.transcribing = false,
            Event::Speaker { playing } => self.speaker = *playing,
            Event::Mute { on } => self.muted = *on,
            Event::AnswerAwaited { ask, .. } => {
                self.asking.insert(*ask);
            }
            Event::AnswerEnded { ask, .. } => {
                self.asking.remove(ask);
            }
            Event::InboxArrived { waiting, .. }
            | Event::InboxTaken { waiting, .. }
            | Event::InboxDropped { waiting, .. }
            | Event::InboxRestored { waiting } => self.inbox_waiting = *waiting,
            Event::Health { part, ok, .. } => {
                if *ok {
                    self.failed.remove(part);
                } else {
                    self.failed.insert(*part);
                }
            }
            Event::PairingRequested { pairing, .. } => {
                self.pairing.insert(*pairing);
            }
            Event::PairingEnded { pairing, .. } => {
                self.pairing.remove(pairing);
            }
            Event::Timers {
                soonest, ringing, ..
            } => {
                self.timer = *soonest;
                self.timer_ringing = *ringing;
            }
            Event::SpeechDetected { .. }
            | Event::FloorGranted { .. }
            | Event::FloorQueued { .. }
            | Event::FloorReleased { .. }
            | Event::UtterancePartial { .. }
            | Event::UtteranceTranscribed { .. }
            | Event::SpeakingStarted { .. }
            | Event::SpeakingEnded { .. }
            | Event::SpeechDropped { .. }
            | Event::Button { .. }
            | Event::WakeWord { .. } => {}
        }
    }

    /// True while any recording has the microphone open.
    pub fn recording(&self) -> bool {
        !self.listening.is_empty()
    }
}

/// The stream and the snapshot it keeps. Cloning gives another handle to
/// the same stream (threads keep one to publish from).
#[derive(Clone)]
pub struct Bus(Arc<Inner>);

struct Inner {
    tx: broadcast::Sender<Arc<Stamped>>,
    snapshot: watch::Sender<Snapshot>,
    /// Orders the events: the sequence number, the fold and the send
    /// happen together.
    order: Mutex<u64>,
    /// Numbers recordings, speech requests and questions.
    ids: AtomicU64,
}

impl Default for Bus {
    fn default() -> Self {
        Self::new(CAPACITY)
    }
}

impl Bus {
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity);
        Self(Arc::new(Inner {
            tx,
            snapshot: watch::Sender::new(Snapshot::default()),
            order: Mutex::new(0),
            ids: AtomicU64::new(1),
        }))
    }

    /// A fresh id for a recording, a speech request or a question.
    pub fn next_id(&self) -> u64 {
        self.0.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// Publishes `event` (from any thread but the audio threads; it never
    /// waits for a subscriber).
    pub fn publish(&self, event: Event) {
        tracing::debug!(?event, "event");
        let mut seq = self.0.order.lock().unwrap_or_else(PoisonError::into_inner);
        *seq += 1;
        self.0.snapshot.send_if_modified(|snapshot| {
            let before = snapshot.clone();
            snapshot.apply(&event);
            *snapshot != before
        });
        let at_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        // No subscriber is no error: nobody is interested right now.
        let _ = self.0.tx.send(Arc::new(Stamped {
            seq: *seq,
            at_ms,
            event,
        }));
    }

    /// Every event from now on.
    pub fn subscribe(&self) -> Events {
        self.0.tx.subscribe()
    }

    /// What the appliance is doing now.
    pub fn snapshot(&self) -> Snapshot {
        self.0.snapshot.borrow().clone()
    }

    /// Wakes when the snapshot changes.
    pub fn watch(&self) -> watch::Receiver<Snapshot> {
        self.0.snapshot.subscribe()
    }
}

/// A subscription to the event stream.
pub type Events = broadcast::Receiver<Arc<Stamped>>;

/// The events a subscription has received and not yet read, without
/// waiting (those skipped had it lagged are passed over).
pub fn received(events: &mut Events) -> impl Iterator<Item = Arc<Stamped>> + '_ {
    use broadcast::error::TryRecvError;
    std::iter::from_fn(move || {
        loop {
            match events.try_recv() {
                Ok(event) => return Some(event),
                Err(TryRecvError::Lagged(_)) => continue,
                Err(_) => return None,
            }
        }
    })
}

/// Receives the next event, counting (and logging) what a slow consumer
/// skipped. `None` when the bus is gone.
pub async fn next(events: &mut Events, consumer: &str) -> Option<Arc<Stamped>> {
    loop {
        match events.recv().await {
            Ok(event) => return Some(event),
            Err(broadcast::error::RecvError::Lagged(skipped)) => {
                tracing::warn!(
                    consumer,
                    skipped,
                    "event consumer fell behind; skipped events"
                );
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_folds_the_events_in_order() {
        let bus = Bus::default();
        let mut events = bus.subscribe();
        bus.publish(Event::ListeningStarted {
            listen: 1,
            agent: None,
        });
        bus.publish(Event::ListeningStarted {
            listen: 2,
            agent: Some("claude".into()),
        });
        let now = bus.snapshot();
        assert!(now.recording());
        assert_eq!(now.person_listening.len(), 1);
        bus.publish(Event::ListeningEnded {
            listen: 1,
            reason: crate::room::EndReason::EndOfSpeech,
        });
        assert!(bus.snapshot().recording(), "recording 2 is still open");
        assert!(bus.snapshot().person_listening.is_empty());
        bus.publish(Event::ListeningEnded {
            listen: 2,
            reason: crate::room::EndReason::Timeout,
        });
        assert!(!bus.snapshot().recording());
        let seqs: Vec<u64> = std::iter::from_fn(|| events.try_recv().ok())
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3, 4]);
    }

    #[test]
    fn health_and_inbox_fold_into_the_snapshot() {
        let bus = Bus::default();
        bus.publish(Event::Health {
            part: Part::Microphone,
            ok: false,
            state: "capture device missing".into(),
        });
        bus.publish(Event::InboxArrived {
            id: 7,
            listen: None,
            addressed_to: None,
            waiting: 1,
        });
        let now = bus.snapshot();
        assert!(
            now.failed.contains(&Part::Microphone) && now.inbox_waiting == 1,
            "{now:?}"
        );
        bus.publish(Event::Health {
            part: Part::Microphone,
            ok: true,
            state: "capturing".into(),
        });
        bus.publish(Event::InboxTaken {
            id: 7,
            agent: "claude".into(),
            waiting: 0,
        });
        let now = bus.snapshot();
        assert!(now.failed.is_empty() && now.inbox_waiting == 0, "{now:?}");
    }

    #[tokio::test]
    async fn the_watch_wakes_only_on_a_change() {
        let bus = Bus::default();
        let mut watch = bus.watch();
        watch.borrow_and_update();
        bus.publish(Event::Button {
            action: Button::Press,
        });
        assert!(!watch.has_changed().unwrap(), "a press changes no state");
        bus.publish(Event::Mute { on: true });
        assert!(watch.has_changed().unwrap());
        assert!(watch.borrow_and_update().muted);
        bus.publish(Event::Mute { on: true });
        assert!(!watch.has_changed().unwrap(), "the same state again");
    }

    #[tokio::test]
    async fn a_slow_subscriber_skips_and_the_publisher_never_waits() {
        let bus = Bus::new(4);
        let mut slow = bus.subscribe();
        for on in (0..100).map(|i| i % 2 == 0) {
            bus.publish(Event::Mute { on });
        }
        // The publisher finished; the subscriber lost all but the newest 4
        // and reads on from there.
        let first = next(&mut slow, "test").await.unwrap();
        assert_eq!(first.seq, 97);
        assert!(!bus.snapshot().muted, "the snapshot has the last state");
    }

    #[test]
    fn events_serialise_with_their_name() {
        let stamped = Stamped {
            seq: 3,
            at_ms: 10,
            event: Event::InboxTaken {
                id: 4,
                agent: "cursor".into(),
                waiting: 0,
            },
        };
        let json = serde_json::to_value(&stamped).unwrap();
        assert_eq!(json["event"], "inbox_taken");
        assert_eq!(json["seq"], 3);
        assert_eq!(json["agent"], "cursor");
    }

    #[test]
    fn outcomes_keep_their_wire_names_in_json_and_the_log() {
        for (answer, name) in [
            (Answered::NoAnswer, "no_answer"),
            (Answered::Chosen, "chosen"),
            (Answered::Cancelled, "cancelled"),
        ] {
            assert_eq!(serde_json::to_value(answer).ok(), Some(name.into()));
            assert_eq!(format!("{answer:?}"), format!("{name:?}"));
        }
        assert_eq!(
            serde_json::to_value(PairingOutcome::TimedOut).ok(),
            Some("timed_out".into())
        );
        assert_eq!(format!("{:?}", SpeechEnded::Stopped), "\"stopped\"");
        let event = Event::AnswerEnded {
            ask: 1,
            answer: crate::room::YesNo::NoAnswer.into(),
        };
        assert!(format!("{event:?}").contains("answer: \"no_answer\""));
    }
}
