//! Text to speech inside the daemon: the synthesiser (crate `hark-tts`)
//! feeding the speaker.
//!
//! One worker thread speaks one request at a time from a bounded queue in
//! three priority lanes (`tts.queue`, [`queue`]): `urgent` before the rest
//! (after the sentence being spoken, never cutting it), `normal` in order,
//! `low` last. Whose speech may play is the floor's to say
//! ([`crate::floor`]): while an agent (or the person) has the turn, other
//! agents' requests wait, and one that was speaking pauses after its
//! sentence and carries on when the turn ends. When the speaker changes
//! from one agent to another, Hark says the new one's name first ("Cursor
//! says: …", `[agents.NAME] announce`), in that agent's voice, and each
//! agent speaks in its own voice and rate when the call names none.
//!
//! It renders piece k+1 while piece k plays, so speech starts after the
//! first piece is made: the first clause or words of the first sentence
//! ([`Synthesizer::plan`] with [`Lead::Early`]), the rest of that
//! sentence the next piece. It never gets more than one sentence ahead of
//! the speaker (memory stays bounded however long the text): the pieces of
//! the first sentence count as one, so the second sentence is made while
//! the first sentence plays, as it would be uncut. Callers count sentences
//! (progress, `sentences`), not the pieces of the first one, and urgent
//! requests and floor changes wait for the end of the sentence.
//! The synthesiser sits behind a mutex held for one piece at a time, so
//! `synthesize_speech` (audio to a file or inline) and `segment_sentences`
//! are served between pieces of a long speech instead of after it.
//!
//! `stop_speaking` bumps a stop generation: the worker drops the request it
//! is speaking and every request queued before the stop, and the player
//! silences the speaker within a period.
//!
//! The voices keep ONNX Runtime's working memory from one sentence to the
//! next, and from one request to the next while requests keep coming:
//! growing it again costs page faults on every sentence (7 % of a short
//! text's synthesis time, measured). After [`IDLE_RELEASE`] with nothing to
//! say, the worker gives it back.

pub mod queue;

use std::{
    collections::VecDeque,
    sync::{
        Arc, Condvar, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc::{Receiver, RecvTimeoutError},
    },
    thread::JoinHandle,
    time::Duration,
};

use hark_audio::{
    clip::Clip,
    files::AllowedDirs,
    playback::{Outcome, PlaybackError, Player},
};
use hark_tts::synth::{EngineKind, Lead, Synthesizer, TtsError, Utterance};
use tokio::sync::mpsc;

use hark_core::status::{Subsystem, SubsystemState};
pub use queue::Priority;
use queue::{Prioritised, Queue};

use crate::{agents::Agents, config::RoomConfig, floor::Who};

/// How long the speech thread waits with nothing to say before it gives the
/// voices' working memory back. Long enough to span the gaps between the
/// sentences an agent sends one by one, short enough that the memory is back
/// before the person has finished answering.
pub const IDLE_RELEASE: Duration = Duration::from_secs(2);

/// Where a speech request's progress goes: a bounded channel the speech
/// thread never waits on. It keeps the last place for the end, so a caller
/// that falls behind misses progress, never the end. Made by
/// [`speech_events`]; `None` from its receiver when the speech thread
/// let the request go without another.
pub type SpeechEvents = mpsc::Sender<SpeechEvent>;

/// Events a request's channel holds: two a piece (made, playing) and the
/// end, for a reply of 30 pieces unread.
pub const SPEECH_EVENTS: usize = 64;

/// A request's progress: the sender for the speech thread, the receiver for
/// whoever waits.
pub fn speech_events() -> (SpeechEvents, mpsc::Receiver<SpeechEvent>) {
    mpsc::channel(SPEECH_EVENTS)
}

/// What happens to a speech request, in order. `wait: true` callers turn
/// these into progress notifications.
#[derive(Debug, Clone, PartialEq)]
pub enum SpeechEvent {
    /// Piece `index` (0-based) of `count` has its audio.
    Synthesized { index: usize, count: usize },
    /// Piece `index` started playing.
    Playing { index: usize, count: usize },
    /// The request ended.
    Finished(Finished),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub outcome: SpeechOutcome,
    /// The engine that spoke the last piece (espeak-ng when piper failed).
    pub engine: EngineKind,
    /// Why espeak-ng spoke, when it did.
    pub fallback: Option<String>,
    /// Seconds of audio played.
    pub seconds: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SpeechOutcome {
    Spoken,
    /// `stop_speaking`, the button, or the caller cancelled.
    Stopped,
    Failed(String),
}

#[derive(Debug, thiserror::Error)]
pub enum SpeakError {
    #[error("text to speech is disabled on this appliance (tts.enabled = false)")]
    Disabled,
    #[error("there is no speaker: the audio engine is not running (audio.enabled = false)")]
    NoSpeaker,
    #[error(
        "the speech queue is full ({0} requests waiting); try again when it drains or call stop_speaking"
    )]
    Busy(usize),
    #[error("the speech thread has stopped")]
    Stopped,
    #[error(transparent)]
    Tts(#[from] TtsError),
}

struct Job {
    utterance: Utterance,
    generation: u64,
    cancel: Arc<AtomicBool>,
    events: Option<SpeechEvents>,
    /// For the event stream: which request, whose, what it says.
    id: u64,
    agent: Option<String>,
    text: String,
    priority: Priority,
    /// The first piece not yet spoken (a paused request carries on here).
    next: usize,
    /// What has been spoken so far.
    finished: Finished,
    /// Whether a piece has started playing (the event stream was told).
    heard: bool,
}

impl Prioritised for Job {
    fn priority(&self) -> Priority {
        self.priority
    }
}

/// What the speech thread and the callers share.
struct Shared {
    queue: Mutex<Queue<Job>>,
    /// Wakes the speech thread: a request, a stop, the floor changing.
    wake: Condvar,
    /// Who holds the floor (whose speech may play); `None`: anyone's.
    floor: Mutex<Option<Who>>,
    closed: AtomicBool,
    agents: Agents,
}

impl Shared {
    fn queue(&self) -> std::sync::MutexGuard<'_, Queue<Job>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `job` may be spoken while `holder` holds the floor: anyone's
    /// when it is free, only the holder's when an agent holds it, nobody's
    /// while the person records, only Hark's own while it asks the person.
    fn may_speak(&self, job: &Job, holder: &Option<Who>) -> bool {
        match holder {
            None => true,
            Some(Who::Person) => false,
            Some(Who::Hark) => job.agent.is_none(),
            Some(Who::Agent(holder)) => job
                .agent
                .as_deref()
                .is_some_and(|agent| self.agents.key(agent) == self.agents.key(holder)),
        }
    }

    fn holder(&self) -> Option<Who> {
        self.floor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Audio made by [`TextToSpeech::render`].
pub struct Rendered {
    /// Mono, peak-normalised per piece.
    pub samples: Vec<f32>,
    pub rate: u32,
    pub voice: String,
    pub engine: EngineKind,
    pub fallback: Option<String>,
}

/// A request taken for speaking.
pub struct Accepted {
    pub voice: String,
    pub engine: EngineKind,
    pub fallback: Option<String>,
    /// Sentences the text is spoken in (long ones count once per piece;
    /// the first sentence cut early counts once).
    pub pieces: usize,
    /// Set it to stop this request (and, if it is playing, the speaker).
    pub cancel: Arc<AtomicBool>,
    /// Its number on the event stream.
    pub id: u64,
}

pub struct TextToSpeech {
    synth: Arc<Mutex<Synthesizer>>,
    shared: Arc<Shared>,
    /// Whether the speech thread runs (a speaker exists, speech is on).
    speaking: bool,
    queue: usize,
    queued: Arc<AtomicUsize>,
    stop_generation: Arc<AtomicU64>,
    /// Weak: the audio engine owns the player and stops it at shutdown.
    player: std::sync::Weak<Player>,
    pub outputs: AllowedDirs,
    /// `tts.voices_dir` and `tts.voice`: the voice tools need them without
    /// taking the synthesiser's lock, which a rendering sentence holds.
    pub voices_dir: std::path::PathBuf,
    pub default_voice: String,
    pub max_chars: usize,
    pub enabled: bool,
    worker: Mutex<Option<JoinHandle<()>>>,
    bus: crate::events::Bus,
}

impl TextToSpeech {
    /// Loads ONNX Runtime and the default voice (blocking: run it off the
    /// async runtime) and starts the speech thread.
    /// `player`: the speaker (none: nothing speaks).
    pub fn start(
        config: &RoomConfig,
        bus: &crate::events::Bus,
        subsystems: &hark_core::status::Subsystems,
        player: Option<Arc<Player>>,
        agents: Agents,
    ) -> Self {
        let mut synth_config = config.tts.synth();
        if !config.tts.enabled {
            // Nothing will speak: do not load ONNX Runtime and the voice.
            synth_config.engine = EngineKind::Espeak;
        }
        let synth = Arc::new(Mutex::new(Synthesizer::new(synth_config)));
        let queued = Arc::new(AtomicUsize::new(0));
        let stop_generation = Arc::new(AtomicU64::new(0));
        let enabled = config.tts.enabled;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::new(config.tts.queue)),
            wake: Condvar::new(),
            floor: Mutex::new(None),
            closed: AtomicBool::new(false),
            agents,
        });
        let worker = match (&player, enabled) {
            (Some(player), true) => {
                let worker = Worker {
                    bus: bus.clone(),
                    synth: Arc::clone(&synth),
                    player: Arc::clone(player),
                    queued: Arc::clone(&queued),
                    stop_generation: Arc::clone(&stop_generation),
                    shared: Arc::clone(&shared),
                };
                match std::thread::Builder::new()
                    .name("hark-tts".into())
                    .spawn(move || worker.run())
                {
                    Ok(handle) => Some(handle),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot start the speech thread");
                        None
                    }
                }
            }
            _ => None,
        };
        let speaking = worker.is_some();
        if speaking {
            // Before a transcription: give the voices' working memory back
            // now rather than at the idle timer, unless speech is going on.
            let synth = Arc::downgrade(&synth);
            let queued = Arc::downgrade(&queued);
            crate::memory::on_make_room(move || {
                let (Some(synth), Some(queued)) = (synth.upgrade(), queued.upgrade()) else {
                    return false;
                };
                release_unless_speaking(&synth, &queued);
                true
            });
        }
        let describe = {
            let synth = Arc::clone(&synth);
            let queued = Arc::clone(&queued);
            let voice = config.tts.voice.clone();
            let has_worker = speaking;
            Arc::new(move || {
                if !enabled {
                    return SubsystemState::Disabled;
                }
                if !has_worker {
                    return SubsystemState::unavailable("no speaker");
                }
                // `try_lock`: status must not wait for a sentence to render.
                let engine = match synth.try_lock() {
                    Ok(synth) => match (synth.runtime_problem(), synth.voice_problem()) {
                        (Some(reason), _) => format!("espeak-ng (piper unavailable: {reason})"),
                        (None, Some(reason)) => format!("espeak-ng ({reason})"),
                        (None, None) => format!(
                            "piper, voice {voice}; loaded: {}",
                            synth.loaded_voices().join(", ")
                        ),
                    },
                    Err(_) => format!("piper, voice {voice} (synthesising)"),
                };
                SubsystemState::Running(format!(
                    "ready; {engine}; {} queued",
                    queued.load(Ordering::Relaxed)
                ))
            })
        };
        subsystems.set(Subsystem::Tts, describe);
        Self {
            synth,
            shared,
            speaking,
            queue: config.tts.queue,
            queued,
            stop_generation,
            player: player.as_ref().map(Arc::downgrade).unwrap_or_default(),
            outputs: AllowedDirs::new(config.tts.output_dirs.clone(), "tts.output_dirs"),
            voices_dir: config.tts.voices_dir.clone(),
            default_voice: config.tts.voice.clone(),
            max_chars: config.tts.max_chars,
            enabled,
            worker: Mutex::new(worker),
            bus: bus.clone(),
        }
    }

    /// No speech (a room built without engines, in tests): nothing is
    /// loaded and nothing speaks.
    pub fn off(bus: &crate::events::Bus) -> Self {
        let mut config = RoomConfig::default();
        config.tts.enabled = false;
        Self::start(&config, bus, &Default::default(), None, Agents::default())
    }

    pub fn synthesizer(&self) -> &Arc<Mutex<Synthesizer>> {
        &self.synth
    }

    /// Gives the voices' working memory back now, unless speech is queued
    /// or going on (blocking for a few ms: call it off the runtime). For a
    /// request that made all its audio at once: requests in a row closer
    /// than the idle release otherwise grew it by chance (docs/benchmarks.md,
    /// the turn: memory).
    pub fn release_idle(&self) {
        release_unless_speaking(&self.synth, &self.queued);
    }

    /// Plans `text` and queues it (blocking for the plan: phonemes, and the
    /// voice's model if it is not loaded). Returns at once after that.
    /// `agent`: whose speech it is (`None`: the appliance's own words); its
    /// `[agents.NAME]` voice and rate apply when `voice`/`rate` are `None`.
    pub fn speak(
        &self,
        text: &str,
        voice: Option<&str>,
        rate: Option<f32>,
        priority: Priority,
        events: Option<SpeechEvents>,
        agent: Option<String>,
    ) -> Result<Accepted, SpeakError> {
        self.ready()?;
        let agents = &self.shared.agents;
        let agent_voice = agent.as_deref().and_then(|a| agents.voice(a));
        let voice = voice.or(agent_voice.as_deref());
        let rate = rate
            .or_else(|| agent.as_deref().and_then(|a| agents.rate(a)))
            .unwrap_or(1.0);
        let utterance = self
            .synth
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .plan(text, voice, rate, Lead::Early)?;
        tracing::debug!(
            sentences = utterance.parts(),
            pieces = utterance.pieces.len(),
            first = ?utterance.pieces.first().and_then(|p| text.get(p.text.clone())),
            "speech planned"
        );
        self.enqueue(utterance, priority, events, agent)
    }

    /// Queues audio made elsewhere (mono `samples` at `rate`) to be played
    /// as speech is: in turn, on the floor, stopped as speech is stopped;
    /// `label` stands for its words in the events and the history.
    pub fn play_recording(
        &self,
        label: &str,
        samples: Vec<f32>,
        rate: u32,
        events: Option<SpeechEvents>,
        agent: Option<String>,
    ) -> Result<Accepted, SpeakError> {
        self.ready()?;
        let utterance = hark_tts::synth::Utterance::recording(label, samples, rate);
        self.enqueue(utterance, Priority::Normal, events, agent)
    }

    /// Whether anything can be queued: text to speech on, a speaker there.
    fn ready(&self) -> Result<(), SpeakError> {
        if !self.enabled {
            return Err(SpeakError::Disabled);
        }
        if !self.speaking || self.shared.closed.load(Ordering::Acquire) {
            return Err(SpeakError::NoSpeaker);
        }
        Ok(())
    }

    fn enqueue(
        &self,
        utterance: hark_tts::synth::Utterance,
        priority: Priority,
        events: Option<SpeechEvents>,
        agent: Option<String>,
    ) -> Result<Accepted, SpeakError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let id = self.bus.next_id();
        let accepted = Accepted {
            voice: utterance.voice.clone(),
            engine: utterance.engine,
            fallback: utterance.fallback.clone(),
            pieces: utterance.parts(),
            cancel: Arc::clone(&cancel),
            id,
        };
        let finished = Finished {
            outcome: SpeechOutcome::Spoken,
            engine: utterance.engine,
            fallback: utterance.fallback.clone(),
            seconds: 0.0,
        };
        let job = Job {
            generation: self.stop_generation.load(Ordering::Acquire),
            cancel,
            events,
            id,
            agent,
            text: utterance.text.clone(),
            utterance,
            priority,
            next: 0,
            finished,
            heard: false,
        };
        self.queued.fetch_add(1, Ordering::AcqRel);
        if self.shared.queue().push(job).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(SpeakError::Busy(self.queue));
        }
        self.shared.wake.notify_all();
        Ok(accepted)
    }

    /// The floor went to `holder` (`None`: it is free): whose speech may
    /// play from now on.
    pub fn floor_changed(&self, holder: Option<Who>) {
        *self
            .shared
            .floor
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = holder;
        self.shared.wake.notify_all();
    }

    /// Silences the speaker and drops every request queued so far.
    /// Returns how many requests were waiting.
    pub fn stop(&self) -> usize {
        let waiting = self.queued.load(Ordering::Acquire);
        self.stop_generation.fetch_add(1, Ordering::AcqRel);
        if let Some(player) = self.player.upgrade() {
            player.stop();
        }
        // Requests the floor holds back are dropped now, not when their turn
        // comes.
        self.shared.wake.notify_all();
        waiting
    }

    /// The whole of `text` as audio, without playing it (blocking). The
    /// synthesiser is locked per piece, so speech in progress keeps going.
    pub fn render(
        &self,
        text: &str,
        voice: Option<&str>,
        rate: f32,
    ) -> Result<Rendered, SpeakError> {
        if !self.enabled {
            return Err(SpeakError::Disabled);
        }
        let lock = || self.synth.lock().unwrap_or_else(PoisonError::into_inner);
        // Sentence by sentence: nothing is heard before all of it is made, so
        // cutting the first sentence early would gain nothing.
        let utterance = lock().prepare(text, voice, rate)?;
        let never = AtomicBool::new(false);
        let mut rendered = Rendered {
            samples: Vec::new(),
            rate: 0,
            voice: utterance.voice.clone(),
            engine: utterance.engine,
            fallback: utterance.fallback.clone(),
        };
        for index in 0..utterance.pieces.len() {
            let chunk = lock().render(&utterance, index, &never)?;
            if chunk.fallback.is_some() {
                rendered.engine = chunk.engine;
                rendered.fallback = chunk.fallback;
            }
            if rendered.rate == 0 {
                rendered.rate = chunk.rate;
            }
            // A piece espeak-ng spoke for a voice of another rate.
            let samples = if chunk.rate == rendered.rate {
                chunk.samples
            } else {
                Clip {
                    samples: chunk.samples,
                    rate: chunk.rate,
                }
                .resampled(rendered.rate)
                .map_err(|e| SpeakError::Tts(TtsError::Render(e.to_string())))?
                .samples
            };
            rendered.samples.extend_from_slice(&samples);
        }
        Ok(rendered)
    }

    /// `text`'s sentences as Hark speaks them: byte ranges into `text`.
    pub fn sentences(&self, text: &str) -> Result<Vec<std::ops::Range<usize>>, SpeakError> {
        let espeak_voice = self
            .synth
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .espeak_voice();
        let espeak = hark_tts::espeak::Espeak::get().map_err(TtsError::from)?;
        Ok(hark_tts::phonemize::phonemize(espeak, &espeak_voice, text)
            .map_err(TtsError::from)?
            .into_iter()
            .map(|sentence| sentence.text)
            .collect())
    }

    /// Requests waiting or speaking.
    pub fn pending(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }
}

impl TextToSpeech {
    /// Stops speaking and ends the speech thread (blocking until it has:
    /// at most one piece's rendering). Requests after this are refused.
    pub fn shutdown(&self) {
        self.stop();
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        let worker = self
            .worker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(worker) = worker {
            let _ = worker.join();
        }
    }
}

/// [`release_idle_memory`], unless speech is queued or going on (`queued`
/// counts both).
fn release_unless_speaking(synth: &Mutex<Synthesizer>, queued: &AtomicUsize) {
    if queued.load(Ordering::Acquire) == 0 {
        release_idle_memory(synth);
    }
}

/// Gives back the working memory the voices keep between sentences (ONNX
/// Runtime's arena, about 90 MB per voice that spoke, whether the speech
/// thread or `synthesize_speech` used it) and what the allocator holds
/// freed. Returns at once if a sentence is being made (the synthesiser is
/// locked): then the memory is in use.
fn release_idle_memory(synth: &Mutex<Synthesizer>) {
    let mut synth = match synth.try_lock() {
        Ok(synth) => synth,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    if !synth.holds_memory() {
        return;
    }
    let released = synth.release_memory();
    drop(synth);
    crate::memory::release_freed();
    tracing::debug!(voices = released, "working memory given back");
}

struct Worker {
    bus: crate::events::Bus,
    synth: Arc<Mutex<Synthesizer>>,
    player: Arc<Player>,
    queued: Arc<AtomicUsize>,
    stop_generation: Arc<AtomicU64>,
    shared: Arc<Shared>,
}

/// A piece handed to the player.
struct InFlight {
    /// The sentence (part) it begins, for the callers' progress; `None`: the
    /// announcement of the agent's name, or the rest of a sentence that an
    /// earlier piece began, which callers do not count.
    index: Option<usize>,
    /// The rest of the sentence the piece before began.
    continues: bool,
    started: Receiver<()>,
    done: Receiver<Outcome>,
    heard: bool,
}

/// How speaking a request went this time.
enum Spoke {
    Done,
    /// Paused between sentences: it goes back to the queue.
    Paused,
}

impl Worker {
    fn run(&self) {
        // The agent whose speech played last, to announce a change.
        let mut last: Option<String> = None;
        loop {
            let Some(mut job) = self.next() else { break };
            if self.stopped(&job) {
                job.finished.outcome = SpeechOutcome::Stopped;
                self.finish(job);
                continue;
            }
            match self.speak(&mut job, &mut last) {
                Spoke::Done => self.finish(job),
                Spoke::Paused => {
                    tracing::debug!(
                        speech = job.id,
                        next = job.next,
                        "speech paused for another turn"
                    );
                    self.shared.queue().resume_later(job);
                }
            }
        }
    }

    /// The next request that may be spoken, waiting for one; `None` at
    /// shutdown. Stopped requests are finished on the way.
    fn next(&self) -> Option<Job> {
        let mut queue = self.shared.queue();
        loop {
            if self.shared.closed.load(Ordering::Acquire) {
                return None;
            }
            let generation = self.stop_generation.load(Ordering::Acquire);
            let stopped = queue
                .remove(|job| job.generation != generation || job.cancel.load(Ordering::Acquire));
            if !stopped.is_empty() {
                drop(queue);
                for mut job in stopped {
                    job.finished.outcome = SpeechOutcome::Stopped;
                    self.finish(job);
                }
                queue = self.shared.queue();
                continue;
            }
            let holder = self.shared.holder();
            if let Some(job) = queue.take(|job| self.shared.may_speak(job, &holder)) {
                return Some(job);
            }
            let idle = queue.is_empty();
            let (guard, waited) = self
                .shared
                .wake
                .wait_timeout(queue, IDLE_RELEASE)
                .unwrap_or_else(PoisonError::into_inner);
            queue = guard;
            if waited.timed_out() && idle && queue.is_empty() {
                drop(queue);
                release_idle_memory(&self.synth);
                queue = self.shared.queue();
            }
        }
    }

    fn finish(&self, job: Job) {
        let finished = job.finished;
        let outcome = match &finished.outcome {
            SpeechOutcome::Spoken => crate::events::SpeechEnded::Spoken,
            SpeechOutcome::Stopped => crate::events::SpeechEnded::Stopped,
            SpeechOutcome::Failed(_) => crate::events::SpeechEnded::Failed,
        };
        // Every speech number ends on the stream: heard, or dropped before
        // a sound of it played (what follows a speech must not wait on it).
        self.bus.publish(if job.heard {
            crate::events::Event::SpeakingEnded {
                speech: job.id,
                agent: job.agent.clone(),
                text: job.text.clone(),
                outcome,
                seconds: (finished.seconds * 100.0).round() / 100.0,
            }
        } else {
            crate::events::Event::SpeechDropped {
                speech: job.id,
                agent: job.agent.clone(),
                text: job.text.clone(),
                outcome,
            }
        });
        tracing::info!(
            voice = %job.utterance.voice,
            engine = %finished.engine,
            outcome = ?finished.outcome,
            seconds = finished.seconds,
            "speech ended"
        );
        if let Some(events) = &job.events {
            // The last place is kept for this (see `send`).
            let _ = events.try_send(SpeechEvent::Finished(finished));
        }
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }

    fn stopped(&self, job: &Job) -> bool {
        job.cancel.load(Ordering::Acquire)
            || self.stop_generation.load(Ordering::Acquire) != job.generation
    }

    /// Whether the request speaking now should make way after its current
    /// sentence: the floor went to someone else, or an urgent request that
    /// may speak is waiting.
    fn make_way(&self, job: &Job) -> bool {
        let holder = self.shared.holder();
        !self.shared.may_speak(job, &holder)
            || self
                .shared
                .queue()
                .waiting_above(job.priority, |other| self.shared.may_speak(other, &holder))
    }

    /// The agent's name, before its speech when the speaker changed.
    fn announce(&self, job: &Job, last: &Option<String>, in_flight: &mut VecDeque<InFlight>) {
        let (Some(agent), Some(previous)) = (&job.agent, last) else {
            return;
        };
        let agents = &self.shared.agents;
        if agents.key(agent) == agents.key(previous) {
            return;
        }
        let Some(words) = agents.announcement(agent) else {
            return;
        };
        let mut synth = self.synth.lock().unwrap_or_else(PoisonError::into_inner);
        let utterance = match synth.prepare(&words, Some(&job.utterance.voice), job.utterance.rate)
        {
            Ok(utterance) => utterance,
            Err(e) => {
                tracing::warn!(error = %e, "cannot announce the agent");
                return;
            }
        };
        for index in 0..utterance.pieces.len() {
            let Ok(chunk) = synth.render(&utterance, index, &job.cancel) else {
                return;
            };
            let clip = Clip {
                samples: chunk.samples,
                rate: chunk.rate,
            };
            if let Ok(Some((started, done))) = self.play(job, &clip) {
                in_flight.push_back(InFlight {
                    index: None,
                    continues: false,
                    started,
                    done,
                    heard: false,
                });
            }
        }
        tracing::info!(agent = %agent, "speaker changed: announced");
    }

    /// Speaks `job` from its next piece, until it ends or makes way.
    fn speak(&self, job: &mut Job, last: &mut Option<String>) -> Spoke {
        let pieces = job.utterance.pieces.len();
        // What callers count: sentences, the first one's pieces as one.
        let count = job.utterance.parts();
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        self.announce(job, last, &mut in_flight);
        if job.agent.is_some() {
            last.clone_from(&job.agent);
        }
        let mut paused = false;
        while job.next < pieces {
            let index = job.next;
            let continues = job.utterance.pieces[index].continues;
            let part = job.utterance.part_of(index);
            if self.stopped(job) {
                job.finished.outcome = SpeechOutcome::Stopped;
                break;
            }
            let rendered = self
                .synth
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .render(&job.utterance, index, &job.cancel);
            // The first sound is reported while the rest of its sentence is
            // made, not once the worker next waits.
            self.report_started(job, &mut in_flight, count);
            let chunk = match rendered {
                Ok(chunk) => chunk,
                Err(e) => {
                    job.finished.outcome = SpeechOutcome::Failed(e.to_string());
                    break;
                }
            };
            job.finished.engine = chunk.engine;
            if chunk.fallback.is_some() {
                job.finished.fallback = chunk.fallback.clone();
            }
            if !continues {
                send(self, job, SpeechEvent::Synthesized { index: part, count });
            }
            let clip = Clip {
                samples: chunk.samples,
                rate: chunk.rate,
            };
            job.finished.seconds += clip.duration_secs();
            match self.play(job, &clip) {
                Ok(Some((started, done))) => in_flight.push_back(InFlight {
                    index: (!continues).then_some(part),
                    continues,
                    started,
                    done,
                    heard: false,
                }),
                Ok(None) => {
                    job.finished.outcome = SpeechOutcome::Stopped;
                    break;
                }
                Err(e) => {
                    job.finished.outcome = SpeechOutcome::Failed(e.to_string());
                    break;
                }
            }
            job.next = index + 1;
            // Render the next piece while this one plays, no further ahead
            // than one sentence.
            while sentences_ahead(&in_flight) > 1 {
                if let Some(outcome) = self.wait_front(job, &mut in_flight, count) {
                    job.finished.outcome = outcome;
                }
            }
            if job.finished.outcome != SpeechOutcome::Spoken {
                break;
            }
            // Never between a sentence's pieces: the rest of a sentence cut
            // early follows it at once.
            let next_continues = job
                .utterance
                .pieces
                .get(job.next)
                .is_some_and(|piece| piece.continues);
            if job.next < pieces && !next_continues && self.make_way(job) {
                paused = true;
                break;
            }
        }
        while !in_flight.is_empty() {
            if let Some(outcome) = self.wait_front(job, &mut in_flight, count)
                && job.finished.outcome == SpeechOutcome::Spoken
            {
                job.finished.outcome = outcome;
            }
        }
        if paused && job.finished.outcome == SpeechOutcome::Spoken {
            Spoke::Paused
        } else {
            Spoke::Done
        }
    }

    /// Queues a clip, waiting while the player's queue is full. `None`: the
    /// request was stopped meanwhile.
    #[allow(clippy::type_complexity)]
    fn play(
        &self,
        job: &Job,
        clip: &Clip,
    ) -> Result<Option<(Receiver<()>, Receiver<Outcome>)>, PlaybackError> {
        loop {
            if self.stopped(job) {
                return Ok(None);
            }
            match self.player.play_tracked(clip) {
                Ok(tracked) => return Ok(Some(tracked)),
                // Earcons or another client's clip hold the queue.
                Err(PlaybackError::QueueFull) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(e),
            }
        }
    }

    /// Reports the pieces in flight that have started playing since it was
    /// last asked.
    fn report_started(&self, job: &mut Job, in_flight: &mut VecDeque<InFlight>, count: usize) {
        for piece in in_flight.iter_mut().filter(|p| !p.heard) {
            if piece.started.try_recv().is_ok() {
                piece.heard = true;
                if let Some(index) = piece.index {
                    send(self, job, SpeechEvent::Playing { index, count });
                }
            }
        }
    }

    /// Waits until the oldest piece in flight ends, reporting pieces that
    /// start meanwhile. Returns an outcome other than "spoken" if it ended so.
    fn wait_front(
        &self,
        job: &mut Job,
        in_flight: &mut VecDeque<InFlight>,
        count: usize,
    ) -> Option<SpeechOutcome> {
        let mut stop_sent = false;
        loop {
            self.report_started(job, in_flight, count);
            let front = in_flight.front()?;
            match front.done.recv_timeout(Duration::from_millis(10)) {
                Ok(outcome) => {
                    let piece = in_flight.pop_front()?;
                    if !piece.heard
                        && piece.started.try_recv().is_ok()
                        && let Some(index) = piece.index
                    {
                        send(self, job, SpeechEvent::Playing { index, count });
                    }
                    return match outcome {
                        Outcome::Finished => None,
                        Outcome::Stopped => Some(SpeechOutcome::Stopped),
                        Outcome::Failed => Some(SpeechOutcome::Failed(
                            "the speaker failed while playing (see get_status)".into(),
                        )),
                    };
                }
                Err(RecvTimeoutError::Timeout) => {
                    // Cancelled by its caller: only this request's clips are
                    // in the player, so stopping it silences just them.
                    if job.cancel.load(Ordering::Acquire) && !stop_sent {
                        self.player.stop();
                        stop_sent = true;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    in_flight.pop_front();
                    return Some(SpeechOutcome::Failed("the playback thread stopped".into()));
                }
            }
        }
    }
}

/// How many sentences the pieces in flight hold: the rest of a sentence
/// counts with the piece before it while that one is still there (the first
/// sentence, cut early, is made ahead as one).
fn sentences_ahead(in_flight: &VecDeque<InFlight>) -> usize {
    in_flight.len() - in_flight.iter().skip(1).filter(|p| p.continues).count()
}

/// Tells the caller (with `wait: true`) how its request goes, and the event
/// stream when it is first heard.
fn send(worker: &Worker, job: &mut Job, event: SpeechEvent) {
    if matches!(event, SpeechEvent::Playing { .. }) && !job.heard {
        job.heard = true;
        worker.bus.publish(crate::events::Event::SpeakingStarted {
            speech: job.id,
            agent: job.agent.clone(),
            text: job.text.clone(),
        });
    }
    // Never waits: progress goes only while a place beyond the one kept
    // for the end is free.
    if let Some(events) = &job.events
        && events.capacity() > 1
    {
        let _ = events.try_send(event);
    }
}
