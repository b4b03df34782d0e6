//! Text to speech inside the daemon: the synthesiser (crate `hark-tts`)
//! feeding the speaker.
//!
//! One worker thread speaks one request at a time, in order, from a bounded
//! queue (`tts.queue`). It renders piece k+1 while piece k plays, so speech
//! starts after the first sentence is made, and it never gets more than one
//! piece ahead of the speaker (memory stays bounded however long the text).
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

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel},
    },
    thread::JoinHandle,
    time::Duration,
};

use hark_audio::{
    clip::Clip,
    files::AllowedDirs,
    playback::{Outcome, PlaybackError, Player},
};
use hark_tts::synth::{EngineKind, Synthesizer, TtsError, Utterance};
use tokio::sync::mpsc::UnboundedSender;

use crate::{config::Config, state::ApplianceState};

/// How long the speech thread waits with nothing to say before it gives the
/// voices' working memory back. Long enough to span the gaps between the
/// sentences an agent sends one by one, short enough that the memory is back
/// before the person has finished answering.
pub const IDLE_RELEASE: Duration = Duration::from_secs(2);

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
    events: Option<UnboundedSender<SpeechEvent>>,
    /// For the event stream: which request, whose, what it says.
    id: u64,
    agent: Option<String>,
    text: String,
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
    pub pieces: usize,
    /// Set it to stop this request (and, if it is playing, the speaker).
    pub cancel: Arc<AtomicBool>,
}

pub struct TextToSpeech {
    synth: Arc<Mutex<Synthesizer>>,
    /// Taken at shutdown, which ends the worker.
    jobs: Mutex<Option<SyncSender<Job>>>,
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
    pub fn start(config: &Config, state: &ApplianceState) -> Self {
        let mut synth_config = config.tts.synth();
        if !config.tts.enabled {
            // Nothing will speak: do not load ONNX Runtime and the voice.
            synth_config.engine = EngineKind::Espeak;
        }
        let synth = Arc::new(Mutex::new(Synthesizer::new(synth_config)));
        let queued = Arc::new(AtomicUsize::new(0));
        let stop_generation = Arc::new(AtomicU64::new(0));
        let player = state.player();
        let enabled = config.tts.enabled;
        let (jobs, worker) = match (&player, enabled) {
            (Some(player), true) => {
                let (tx, rx) = sync_channel(config.tts.queue);
                let worker = Worker {
                    bus: state.bus.clone(),
                    synth: Arc::clone(&synth),
                    player: Arc::clone(player),
                    queued: Arc::clone(&queued),
                    stop_generation: Arc::clone(&stop_generation),
                };
                match std::thread::Builder::new()
                    .name("hark-tts".into())
                    .spawn(move || worker.run(&rx))
                {
                    Ok(handle) => (Some(tx), Some(handle)),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot start the speech thread");
                        (None, None)
                    }
                }
            }
            _ => (None, None),
        };
        if jobs.is_some() {
            // Before a transcription: give the voices' working memory back
            // now rather than at the idle timer, unless speech is going on.
            let synth = Arc::downgrade(&synth);
            let queued = Arc::downgrade(&queued);
            crate::memory::on_make_room(move || {
                let (Some(synth), Some(queued)) = (synth.upgrade(), queued.upgrade()) else {
                    return false;
                };
                if queued.load(Ordering::Acquire) == 0 {
                    release_idle_memory(&synth);
                }
                true
            });
        }
        let describe = {
            let synth = Arc::clone(&synth);
            let queued = Arc::clone(&queued);
            let voice = config.tts.voice.clone();
            let has_worker = jobs.is_some();
            Arc::new(move || {
                if !enabled {
                    return "disabled".to_owned();
                }
                if !has_worker {
                    return "unavailable: no speaker".to_owned();
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
                format!("ready; {engine}; {} queued", queued.load(Ordering::Relaxed))
            })
        };
        state.set_subsystem("tts", describe);
        Self {
            synth,
            jobs: Mutex::new(jobs),
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
            bus: state.bus.clone(),
        }
    }

    pub fn synthesizer(&self) -> &Arc<Mutex<Synthesizer>> {
        &self.synth
    }

    /// Plans `text` and queues it (blocking for the plan: phonemes, and the
    /// voice's model if it is not loaded). Returns at once after that.
    /// `agent`: whose speech it is (`None`: the appliance's own words), for
    /// the event stream.
    pub fn speak(
        &self,
        text: &str,
        voice: Option<&str>,
        rate: f32,
        events: Option<UnboundedSender<SpeechEvent>>,
        agent: Option<String>,
    ) -> Result<Accepted, SpeakError> {
        if !self.enabled {
            return Err(SpeakError::Disabled);
        }
        let Some(jobs) = self
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return Err(SpeakError::NoSpeaker);
        };
        let utterance = self
            .synth
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .prepare(text, voice, rate)?;
        let cancel = Arc::new(AtomicBool::new(false));
        let accepted = Accepted {
            voice: utterance.voice.clone(),
            engine: utterance.engine,
            fallback: utterance.fallback.clone(),
            pieces: utterance.pieces.len(),
            cancel: Arc::clone(&cancel),
        };
        let job = Job {
            utterance,
            generation: self.stop_generation.load(Ordering::Acquire),
            cancel,
            events,
            id: self.bus.next_id(),
            agent,
            text: text.to_owned(),
        };
        self.queued.fetch_add(1, Ordering::AcqRel);
        match jobs.try_send(job) {
            Ok(()) => Ok(accepted),
            Err(TrySendError::Full(_)) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                Err(SpeakError::Busy(self.queue))
            }
            Err(TrySendError::Disconnected(_)) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                Err(SpeakError::Stopped)
            }
        }
    }

    /// Silences the speaker and drops every request queued so far.
    /// Returns how many requests were waiting.
    pub fn stop(&self) -> usize {
        let waiting = self.queued.load(Ordering::Acquire);
        self.stop_generation.fetch_add(1, Ordering::AcqRel);
        if let Some(player) = self.player.upgrade() {
            player.stop();
        }
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
        drop(
            self.jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
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
}

/// A piece handed to the player.
struct InFlight {
    index: usize,
    started: Receiver<()>,
    done: Receiver<Outcome>,
    heard: bool,
}

impl Worker {
    fn run(&self, jobs: &Receiver<Job>) {
        loop {
            let job = match jobs.recv_timeout(IDLE_RELEASE) {
                Ok(job) => job,
                Err(RecvTimeoutError::Timeout) => {
                    release_idle_memory(&self.synth);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let heard = std::cell::Cell::new(false);
            let finished = self.speak(&job, &heard);
            if heard.get() {
                self.bus.publish(crate::events::Event::SpeakingEnded {
                    speech: job.id,
                    agent: job.agent.clone(),
                    outcome: match &finished.outcome {
                        SpeechOutcome::Spoken => "spoken",
                        SpeechOutcome::Stopped => "stopped",
                        SpeechOutcome::Failed(_) => "failed",
                    }
                    .to_owned(),
                });
            }
            tracing::info!(
                voice = %job.utterance.voice,
                engine = %finished.engine,
                outcome = ?finished.outcome,
                seconds = finished.seconds,
                "speech ended"
            );
            if let Some(events) = &job.events {
                let _ = events.send(SpeechEvent::Finished(finished));
            }
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn stopped(&self, job: &Job) -> bool {
        job.cancel.load(Ordering::Acquire)
            || self.stop_generation.load(Ordering::Acquire) != job.generation
    }

    /// Speaks one request; `heard` is set (and the event stream told) when
    /// its first piece starts playing.
    fn speak(&self, job: &Job, heard: &std::cell::Cell<bool>) -> Finished {
        let utterance = &job.utterance;
        let count = utterance.pieces.len();
        let mut finished = Finished {
            outcome: SpeechOutcome::Spoken,
            engine: utterance.engine,
            fallback: utterance.fallback.clone(),
            seconds: 0.0,
        };
        let send = |event: SpeechEvent| {
            if matches!(event, SpeechEvent::Playing { .. }) && !heard.replace(true) {
                self.bus.publish(crate::events::Event::SpeakingStarted {
                    speech: job.id,
                    agent: job.agent.clone(),
                    text: job.text.clone(),
                });
            }
            if let Some(events) = &job.events {
                let _ = events.send(event);
            }
        };
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        for index in 0..count {
            if self.stopped(job) {
                finished.outcome = SpeechOutcome::Stopped;
                break;
            }
            let rendered = self
                .synth
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .render(utterance, index, &job.cancel);
            let chunk = match rendered {
                Ok(chunk) => chunk,
                Err(e) => {
                    finished.outcome = SpeechOutcome::Failed(e.to_string());
                    break;
                }
            };
            finished.engine = chunk.engine;
            if chunk.fallback.is_some() {
                finished.fallback = chunk.fallback.clone();
            }
            send(SpeechEvent::Synthesized { index, count });
            let clip = Clip {
                samples: chunk.samples,
                rate: chunk.rate,
            };
            finished.seconds += clip.duration_secs();
            match self.play(job, &clip) {
                Ok(Some((started, done))) => in_flight.push_back(InFlight {
                    index,
                    started,
                    done,
                    heard: false,
                }),
                Ok(None) => {
                    finished.outcome = SpeechOutcome::Stopped;
                    break;
                }
                Err(e) => {
                    finished.outcome = SpeechOutcome::Failed(e.to_string());
                    break;
                }
            }
            // Render the next piece while this one plays, no further ahead.
            while in_flight.len() > 1 {
                if let Some(outcome) = self.wait_front(job, &mut in_flight, count, &send) {
                    finished.outcome = outcome;
                }
            }
            if finished.outcome != SpeechOutcome::Spoken {
                break;
            }
        }
        while !in_flight.is_empty() {
            if let Some(outcome) = self.wait_front(job, &mut in_flight, count, &send)
                && finished.outcome == SpeechOutcome::Spoken
            {
                finished.outcome = outcome;
            }
        }
        finished
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

    /// Waits until the oldest piece in flight ends, reporting pieces that
    /// start meanwhile. Returns an outcome other than "spoken" if it ended so.
    fn wait_front(
        &self,
        job: &Job,
        in_flight: &mut VecDeque<InFlight>,
        count: usize,
        send: &dyn Fn(SpeechEvent),
    ) -> Option<SpeechOutcome> {
        let mut stop_sent = false;
        loop {
            for piece in in_flight.iter_mut().filter(|p| !p.heard) {
                if piece.started.try_recv().is_ok() {
                    piece.heard = true;
                    send(SpeechEvent::Playing {
                        index: piece.index,
                        count,
                    });
                }
            }
            let front = in_flight.front()?;
            match front.done.recv_timeout(Duration::from_millis(10)) {
                Ok(outcome) => {
                    let piece = in_flight.pop_front()?;
                    if !piece.heard && piece.started.try_recv().is_ok() {
                        send(SpeechEvent::Playing {
                            index: piece.index,
                            count,
                        });
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
