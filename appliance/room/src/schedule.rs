//! Speech and timers kept for later (`speak_text` with `delay_seconds` or
//! `at`): kept in the schedule store (`hark-store`, so they outlast a
//! restart) and here, where one task sleeps until the soonest is due.
//!
//! At its time, speech is queued for the speaker as `speak_text` would
//! queue it. A timer's words are said, then its chime repeats until the
//! button, the wake word (the stop word) or `cancel_scheduled` stops it,
//! or its `ring` time runs out. Something due while the appliance was off
//! is said when it starts, unless it is more than [`MISSED_AFTER`] late:
//! then it is dropped, with a line in the log.
//!
//! Every change to the timers (one set, cancelled, due, rung out) is an
//! event (`timers`): the lights count the soonest down and show one
//! ringing.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime},
};

use hark_audio::earcon::Earcon;
use hark_core::{
    events::{Bus, Event, TimerSpan},
    room::{Failure, Kind, LaterKind, Scheduled},
};
use hark_store::schedule::{Entry, ScheduleStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use hark_audio::playback::Player;

use crate::tts::TextToSpeech;

/// Later than this, what was due while the appliance was off is dropped.
pub const MISSED_AFTER: Duration = Duration::from_secs(10 * 60);
/// The most kept at once.
pub const MAX_KEPT: usize = 100;
/// Between two rings of a timer's chime: long enough for the wake word
/// (about a second) and its detection to fit between them, since with
/// half duplex the microphone hears nothing while the chime plays.
const RING_EVERY: Duration = Duration::from_millis(2000);
/// The task looks at the clock at least this often (the wall clock may
/// be set while it sleeps).
const LOOK_EVERY: Duration = Duration::from_secs(30);

struct Ringing {
    entry: Entry,
    stop: Arc<AtomicBool>,
    /// Wakes the ringing between chimes, so a stop shows on the lights at
    /// once rather than at the next chime.
    stopped: Arc<Notify>,
}

impl Ringing {
    /// Stops it; whether it was still ringing.
    fn stop(&self) -> bool {
        let was = !self.stop.swap(true, Ordering::AcqRel);
        self.stopped.notify_one();
        was
    }
}

struct Shared {
    store: ScheduleStore,
    waiting: Mutex<BTreeMap<i64, Entry>>,
    ringing: Mutex<Option<Ringing>>,
    changed: Notify,
    bus: Bus,
    /// The timers as last published; held while publishing, so two
    /// changes at once reach the stream in the order they were seen.
    published: Mutex<Option<Timers>>,
}

/// How the timers stand, as the `timers` event tells it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Timers {
    running: usize,
    soonest: Option<TimerSpan>,
    ringing: bool,
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What is kept for later; cloned handles share it.
#[derive(Clone)]
pub struct Scheduler(Arc<Shared>);

fn scheduled(entry: &Entry, ringing: bool) -> Scheduled {
    let due_in = entry
        .due
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    Scheduled {
        id: entry.id,
        kind: if entry.ring.is_some() {
            LaterKind::Timer
        } else {
            LaterKind::Speech
        },
        agent: entry.agent.clone(),
        text: entry.text.clone(),
        due_at: humantime::format_rfc3339_seconds(entry.due).to_string(),
        due_in_seconds: if ringing {
            0.0
        } else {
            (due_in.as_secs_f64() * 10.0).round() / 10.0
        },
        ring_seconds: entry.ring.map(|r| r.as_secs_f64()),
        ringing,
    }
}

fn store_failure(e: impl std::fmt::Display) -> Failure {
    Failure::new(
        Kind::Schedule,
        format!("speech for later cannot be kept: {e}"),
    )
}

impl Scheduler {
    /// Opens the store in `dir` (blocking: off the runtime); the timers'
    /// changes go to `bus`.
    pub fn open(dir: &std::path::Path, bus: Bus) -> Result<Scheduler, hark_store::DbError> {
        let store = ScheduleStore::open(dir)?;
        Ok(Scheduler(Arc::new(Shared {
            store,
            waiting: Mutex::new(BTreeMap::new()),
            ringing: Mutex::new(None),
            changed: Notify::new(),
            bus,
            published: Mutex::new(None),
        })))
    }

    /// Publishes how the timers stand, if that changed.
    fn publish_timers(&self) {
        let mut published = self
            .0
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (running, soonest) = {
            let waiting = self.waiting();
            let timers = waiting.values().filter(|e| e.ring.is_some());
            let soonest = timers
                .clone()
                .min_by_key(|e| (e.due, e.id))
                .map(|e| TimerSpan {
                    set_at_ms: unix_ms(e.set.min(e.due)),
                    due_at_ms: unix_ms(e.due),
                });
            (timers.count(), soonest)
        };
        let now = Timers {
            running,
            soonest,
            ringing: self.is_ringing(),
        };
        if *published == Some(now) {
            return;
        }
        // Nothing running and nothing published yet: nothing to tell.
        if published.is_none() && now.running == 0 && !now.ringing {
            *published = Some(now);
            return;
        }
        *published = Some(now);
        self.0.bus.publish(Event::Timers {
            running: now.running,
            soonest: now.soonest,
            ringing: now.ringing,
        });
    }

    /// Where it is kept, for `get_status`.
    pub fn kept(&self) -> &str {
        &self.0.store.kept
    }

    /// `get_status`'s line: how many wait, and where they are kept.
    pub fn status(&self) -> String {
        format!("{} waiting; {}", self.waiting().len(), self.kept())
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, BTreeMap<i64, Entry>> {
        self.0
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn ringing(&self) -> std::sync::MutexGuard<'_, Option<Ringing>> {
        self.0
            .ringing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `entry` for its time; what it is now.
    pub async fn add(&self, mut entry: Entry) -> Result<Scheduled, Failure> {
        if self.waiting().len() >= MAX_KEPT {
            return Err(Failure::new(
                Kind::Busy,
                format!("{MAX_KEPT} are kept for later already; cancel one first (list_scheduled)"),
            ));
        }
        entry.id = self
            .0
            .store
            .add(entry.clone())
            .await
            .map_err(store_failure)?;
        let shown = scheduled(&entry, false);
        self.waiting().insert(entry.id, entry);
        self.publish_timers();
        self.0.changed.notify_one();
        Ok(shown)
    }

    /// Everything kept, the ringing timer first, then the soonest.
    pub fn list(&self) -> Vec<Scheduled> {
        let mut all: Vec<Scheduled> = self
            .ringing()
            .as_ref()
            .map(|r| scheduled(&r.entry, true))
            .into_iter()
            .collect();
        let mut waiting: Vec<Scheduled> = self
            .waiting()
            .values()
            .map(|e| scheduled(e, false))
            .collect();
        waiting.sort_by(|a, b| a.due_at.cmp(&b.due_at).then(a.id.cmp(&b.id)));
        all.extend(waiting);
        all
    }

    /// Cancels `id`: forgotten if it waits, stopped if it rings.
    pub async fn cancel(&self, id: i64) -> Result<Scheduled, Failure> {
        let waiting = self.waiting().get(&id).cloned();
        if let Some(entry) = waiting {
            // Forgotten on disk first: a cancel whose write fails leaves it
            // kept in both, not back after a restart.
            self.0.store.remove(id).await.map_err(store_failure)?;
            self.waiting().remove(&id);
            self.publish_timers();
            self.0.changed.notify_one();
            return Ok(scheduled(&entry, false));
        }
        let ringing = self.ringing().as_ref().and_then(|r| {
            (r.entry.id == id).then(|| {
                r.stop();
                scheduled(&r.entry, true)
            })
        });
        ringing.ok_or_else(|| {
            Failure::new(
                Kind::NotScheduled,
                format!("nothing kept for later has id {id} (list_scheduled lists what is)"),
            )
        })
    }

    /// Stops the timer ringing now, if one is: whether one was.
    pub fn stop_ringing(&self) -> bool {
        self.ringing().as_ref().is_some_and(Ringing::stop)
    }

    /// Whether a timer rings now.
    pub fn is_ringing(&self) -> bool {
        self.ringing().is_some()
    }

    /// Takes in what the store kept, then says each thing at its time
    /// with `tts` (a timer rings on `player` too) until `token` is
    /// cancelled.
    pub async fn serve(
        self,
        tts: Arc<TextToSpeech>,
        player: Weak<Player>,
        token: CancellationToken,
    ) {
        match self.0.store.all().await {
            Ok(kept) => {
                if !kept.is_empty() {
                    tracing::info!(
                        count = kept.len(),
                        "speech kept for later, from before the restart"
                    );
                }
                self.waiting().extend(kept.into_iter().map(|e| (e.id, e)));
                self.publish_timers();
            }
            Err(e) => tracing::error!(error = %e, "cannot read what was kept for later"),
        }
        loop {
            let now = SystemTime::now();
            let due = self
                .waiting()
                .values()
                .filter(|e| e.due <= now)
                .min_by_key(|e| (e.due, e.id))
                .cloned();
            if let Some(entry) = due {
                self.waiting().remove(&entry.id);
                self.publish_timers();
                if let Err(e) = self.0.store.remove(entry.id).await {
                    tracing::error!(error = %e, id = entry.id, "cannot forget what was said");
                }
                let late = now.duration_since(entry.due).unwrap_or_default();
                if late > MISSED_AFTER {
                    tracing::warn!(id = entry.id, text = %entry.text, late_s = late.as_secs(), "speech kept for later was due while the appliance was off; dropped");
                    continue;
                }
                self.say(&tts, &player, entry, &token).await;
                continue;
            }
            let sleep = self
                .waiting()
                .values()
                .map(|e| e.due.duration_since(now).unwrap_or_default())
                .min()
                .unwrap_or(LOOK_EVERY)
                .min(LOOK_EVERY);
            tokio::select! {
                () = token.cancelled() => return,
                () = self.0.changed.notified() => {}
                () = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// Says `entry` now (and rings it, for a timer).
    async fn say(
        &self,
        tts: &Arc<TextToSpeech>,
        player: &Weak<Player>,
        entry: Entry,
        token: &CancellationToken,
    ) {
        tracing::info!(id = entry.id, text = %entry.text, timer = entry.ring.is_some(), "speech kept for later is due");
        let Some(ring) = entry.ring else {
            speak(tts, &entry, false).await;
            return;
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::new(Notify::new());
        *self.ringing() = Some(Ringing {
            entry: entry.clone(),
            stop: Arc::clone(&stop),
            stopped: Arc::clone(&stopped),
        });
        self.publish_timers();
        let started = tokio::time::Instant::now();
        speak(tts, &entry, true).await;
        let ended = loop {
            if stop.load(Ordering::Acquire) {
                break "stopped";
            }
            if started.elapsed() >= ring {
                break "timed out";
            }
            crate::audio::play_through(player.upgrade(), Earcon::Alarm).await;
            tokio::select! {
                () = token.cancelled() => break "shut down",
                () = stopped.notified() => {}
                () = tokio::time::sleep(RING_EVERY) => {}
            }
        };
        *self.ringing() = None;
        self.publish_timers();
        tracing::info!(id = entry.id, how = ended, "the timer stopped ringing");
    }
}

/// Queues `entry`'s words for the speaker; with `wait`, until they have
/// been said (or stopped).
async fn speak(tts: &Arc<TextToSpeech>, entry: &Entry, wait: bool) {
    let tts = Arc::clone(tts);
    if !tts.enabled {
        tracing::warn!(
            id = entry.id,
            "speech kept for later is due, but text to speech is off"
        );
        return;
    }
    let (events, mut heard) = crate::tts::speech_events();
    let entry = entry.clone();
    let queued = tokio::task::spawn_blocking(move || {
        tts.speak(
            &entry.text,
            entry.voice.as_deref(),
            entry.rate.map(|r| r as f32),
            crate::tts::Priority::Normal,
            wait.then_some(events),
            entry.agent.clone(),
        )
    })
    .await;
    match queued {
        Ok(Ok(_)) if wait => {
            while let Some(event) = heard.recv().await {
                if matches!(event, crate::tts::SpeechEvent::Finished(_)) {
                    break;
                }
            }
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "speech kept for later could not be said"),
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str, due_in: Duration, ring: Option<Duration>) -> Entry {
        let now = SystemTime::now();
        Entry {
            id: 0,
            agent: Some("claude".into()),
            text: text.into(),
            voice: None,
            rate: None,
            set: now,
            due: now + due_in,
            ring,
        }
    }

    /// The next `timers` event `pred` accepts: (running, ringing).
    async fn timers(
        events: &mut hark_core::events::Events,
        pred: impl Fn(usize, bool) -> bool,
    ) -> (usize, bool) {
        let wait = async {
            loop {
                let event = events.recv().await.expect("the event stream");
                if let Event::Timers {
                    running, ringing, ..
                } = event.event
                    && pred(running, ringing)
                {
                    return (running, ringing);
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .expect("the timers changed in time")
    }

    /// A schedule in `dir` served with no speech and no speaker (its words
    /// are skipped, its chime silent): what is left is its timing.
    fn served(dir: &std::path::Path) -> (Scheduler, hark_core::events::Events, CancellationToken) {
        let bus = Bus::default();
        let events = bus.subscribe();
        let schedule = Scheduler::open(dir, bus.clone()).expect("schedule");
        let token = CancellationToken::new();
        tokio::spawn(schedule.clone().serve(
            Arc::new(TextToSpeech::off(&bus)),
            Weak::new(),
            token.clone(),
        ));
        (schedule, events, token)
    }

    #[tokio::test]
    async fn a_due_timer_rings_until_it_is_stopped_and_is_then_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let (schedule, mut events, token) = served(dir.path());
        let kept = schedule
            .add(entry(
                "Tea is ready.",
                Duration::from_millis(300),
                Some(Duration::from_secs(600)),
            ))
            .await
            .unwrap();
        assert_eq!(kept.kind, LaterKind::Timer);
        assert_eq!(
            timers(&mut events, |running, _| running == 1).await,
            (1, false)
        );
        assert_eq!(timers(&mut events, |_, ringing| ringing).await, (0, true));
        let listed = schedule.list();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].ringing, "{listed:?}");
        assert!(schedule.stop_ringing(), "the button stops it");
        assert_eq!(timers(&mut events, |_, ringing| !ringing).await, (0, false));
        assert!(schedule.list().is_empty());
        assert!(!schedule.stop_ringing(), "nothing rings any more");
        token.cancel();
    }

    #[tokio::test]
    async fn a_timer_nobody_stops_rings_out_and_a_waiting_one_can_be_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let (schedule, mut events, token) = served(dir.path());
        let later = schedule
            .add(entry(
                "Later.",
                Duration::from_secs(3600),
                Some(Duration::from_secs(60)),
            ))
            .await
            .unwrap();
        schedule
            .add(entry("Now.", Duration::ZERO, Some(Duration::from_secs(1))))
            .await
            .unwrap();
        timers(&mut events, |_, ringing| ringing).await;
        // Its second is up at its next look (every RING_EVERY).
        assert_eq!(timers(&mut events, |_, ringing| !ringing).await, (1, false));
        let cancelled = schedule.cancel(later.id).await.unwrap();
        assert_eq!(cancelled.text, "Later.");
        assert_eq!(
            timers(&mut events, |running, _| running == 0).await,
            (0, false)
        );
        assert!(schedule.list().is_empty());
        let again = schedule.cancel(later.id).await.unwrap_err();
        assert_eq!(again.kind, Kind::NotScheduled);
        token.cancel();
    }
}
