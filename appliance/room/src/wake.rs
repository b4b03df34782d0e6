//! The wake word inside the daemon: a thread of its own reads the capture
//! ring (never the capture thread: it only writes the ring, which never
//! waits for a reader), feeds the microWakeWord front end and each
//! configured word's model (crate `hark-wake`), and hands a detection to
//! the conductor, which decides what it means as it does for a press.
//!
//! The detector runs only while it may hear the person: not while the
//! microphone is muted (the mute switch means nothing listens), and not
//! while half duplex closes the microphone for Hark's own speech (the ring
//! holds silence then). Each time it starts again its front end and models
//! start from nothing, so no audio from before a mute is carried over.
//! Nothing it reads is kept: the person's turn starts at the ring position
//! where the word was heard, so the word and what came before it are never
//! recorded or sent anywhere.

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU8, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, SystemTime},
};

use hark_audio::ring::Ring;
use hark_core::room::{
    Detection, Failure, Kind, PcmSpotter, Sensitivity, Spotted, WakeState, WakeStatus,
};
use hark_wake::{
    detector::{Detector, WakeError},
    features::Frontend,
    tflite::TfLite,
};

use crate::conductor::Conductor;

/// How often the thread looks for new audio: a detection waits this long
/// at most for its last samples (the models step 30 ms anyway).
const POLL: Duration = Duration::from_millis(20);
/// Samples read at once: 10 ms, the front end's step, so a detection's
/// ring position is within one step of the frame that made it.
pub const CHUNK: usize = 160;
/// After a detection the models start again and nothing wakes for this
/// long: the rest of the word must not wake it twice.
const REFRACTORY: Duration = Duration::from_secs(1);
/// Detections `get_status` and the status page keep.
const KEPT: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum WakeStartError {
    #[error(
        "the wake word runtime {} (wake.runtime) is missing: appliance/setup-models installs it with the microWakeWord models",
        .0.display()
    )]
    Missing(PathBuf),
    #[error(
        "wake word `{word}` has no model in {} (wake.models_dir): the installed ones are {installed}",
        dir.display()
    )]
    NoModel {
        word: String,
        dir: PathBuf,
        installed: String,
    },
    #[error(transparent)]
    Runtime(#[from] hark_wake::tflite::TfLiteError),
    #[error(transparent)]
    Model(#[from] WakeError),
    #[error("cannot start the wake word thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Where the models and their runtime are (`wake.models_dir`,
/// `wake.runtime`): the room's detector loads them once, and each Wyoming
/// stream searched for a wake word loads its own.
#[derive(Debug, Clone)]
pub struct Files {
    pub models: PathBuf,
    pub runtime: PathBuf,
}

/// What the rest of the room shares with the detector thread.
struct Shared {
    files: Files,
    words: Vec<String>,
    on: AtomicBool,
    sensitivity: AtomicU8,
    state: AtomicU8,
    /// Why the detector does not run, when it could not start.
    unavailable: Option<String>,
    detections: Mutex<VecDeque<Detection>>,
}

/// The wake word's handle: its state for `get_status`, the switch and the
/// sensitivity the status page sets, the detections the conductor records.
#[derive(Clone)]
pub struct Wake(Arc<Shared>);

impl Wake {
    /// The handle of a detector that runs (`unavailable: None`) or could
    /// not start (it shows why).
    fn new(
        files: Files,
        words: Vec<String>,
        on: bool,
        sensitivity: Sensitivity,
        unavailable: Option<String>,
    ) -> Self {
        let state = match unavailable {
            Some(_) => WakeState::Unavailable,
            None => WakeState::Off,
        };
        Wake(Arc::new(Shared {
            files,
            words,
            on: AtomicBool::new(on),
            sensitivity: AtomicU8::new(level(sensitivity)),
            state: AtomicU8::new(state as u8),
            unavailable,
            detections: Mutex::new(VecDeque::with_capacity(KEPT)),
        }))
    }

    /// The detector that could not start: it shows why.
    fn unavailable(
        files: Files,
        words: Vec<String>,
        sensitivity: Sensitivity,
        why: String,
    ) -> Self {
        Wake::new(files, words, false, sensitivity, Some(why))
    }

    /// Where the models and their runtime are.
    pub fn files(&self) -> &Files {
        &self.0.files
    }

    pub fn status(&self) -> WakeStatus {
        WakeStatus {
            state: self.state(),
            words: self.0.words.clone(),
            sensitivity: self.sensitivity(),
            detections: self
                .0
                .detections
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned()
                .collect(),
        }
    }

    pub fn state(&self) -> WakeState {
        match self.0.state.load(Ordering::Acquire) {
            0 => WakeState::Listening,
            2 => WakeState::Muted,
            3 => WakeState::Speaking,
            4 => WakeState::Unavailable,
            _ => WakeState::Off,
        }
    }

    /// Whether it is switched on and can run (hands-free).
    pub fn on(&self) -> bool {
        self.0.unavailable.is_none() && self.0.on.load(Ordering::Acquire)
    }

    /// Why it does not run, when it could not start.
    pub fn why_unavailable(&self) -> Option<&str> {
        self.0.unavailable.as_deref()
    }

    pub fn sensitivity(&self) -> Sensitivity {
        match self.0.sensitivity.load(Ordering::Acquire) {
            0 => Sensitivity::Low,
            2 => Sensitivity::High,
            _ => Sensitivity::Default,
        }
    }

    /// Turns the detector on or off and sets its sensitivity (the status
    /// page's control; until the next restart, which reads the config).
    pub fn set(&self, on: Option<bool>, sensitivity: Option<Sensitivity>) {
        if let Some(on) = on {
            self.0.on.store(on, Ordering::Release);
        }
        if let Some(sensitivity) = sensitivity {
            self.0
                .sensitivity
                .store(level(sensitivity), Ordering::Release);
        }
    }

    /// Keeps a detection for `get_status` (the newest [`KEPT`]); `score`
    /// as the event shows it.
    pub fn record(&self, word: &str, score: f32, started: bool) {
        let mut kept = self
            .0
            .detections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(Detection {
            word: word.to_owned(),
            score,
            at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            started,
        });
    }

    fn set_state(&self, state: WakeState) {
        self.0.state.store(state as u8, Ordering::Release);
    }
}

fn level(sensitivity: Sensitivity) -> u8 {
    match sensitivity {
        Sensitivity::Low => 0,
        Sensitivity::Default => 1,
        Sensitivity::High => 2,
    }
}

/// The cutoff a model's window mean must pass at `sensitivity`: the
/// model's own at `default`; `low` halves the distance to 1 (okay_nabu's
/// 0.85 becomes 0.925), `high` doubles it (0.70). Scaled by each model's
/// own margin, so the levels mean alike for models whose cutoffs differ
/// (hey_jarvis: 0.97, 0.985, 0.94).
pub fn cutoff(model: f32, sensitivity: Sensitivity) -> f32 {
    let margin = 1.0 - model;
    match sensitivity {
        Sensitivity::Low => model + margin / 2.0,
        Sensitivity::Default => model,
        Sensitivity::High => (model - margin).max(0.05),
    }
}

/// The models of `words` in `models`, on the TensorFlow Lite library
/// `runtime`. Blocking (it reads the files): run it off the async runtime.
pub fn load(
    models: &Path,
    runtime: &Path,
    words: &[String],
) -> Result<Vec<Detector>, WakeStartError> {
    if !runtime.exists() {
        return Err(WakeStartError::Missing(runtime.to_owned()));
    }
    let lite = TfLite::open(runtime)?;
    words
        .iter()
        .map(|word| {
            let manifest = models.join(format!("{word}.json"));
            if !manifest.exists() {
                return Err(WakeStartError::NoModel {
                    word: word.clone(),
                    dir: models.to_owned(),
                    installed: installed(models),
                });
            }
            Ok(Detector::load(&lite, &manifest)?)
        })
        .collect()
}

/// The model names in `dir` (each `NAME.json`), sorted.
pub fn installed_words(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

/// The model names in `dir`, for an error that names a missing one.
fn installed(dir: &Path) -> String {
    let names = installed_words(dir);
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// The running detector thread; dropping it stops and joins the thread.
pub struct WakeService {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for WakeService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// When the detector may hear the person.
pub struct Ears {
    pub ring: Arc<Ring>,
    pub muted: Arc<AtomicBool>,
    /// Raised while Hark speaks, when that closes the microphone (half
    /// duplex); `None` when capture stays open.
    pub closed_while_speaking: Option<Arc<AtomicBool>>,
}

/// Starts the detector for `config` on `ears`, handing detections to
/// `conductor`. The handle is there whether it runs or not (off, or its
/// models missing: the handle says so); the service only while it runs.
/// Blocking (it loads the models).
pub fn start(
    config: &crate::config::WakeConfig,
    ears: Option<Ears>,
    conductor: Conductor,
) -> (Wake, Option<WakeService>) {
    let (words, sensitivity) = (config.words.clone(), config.sensitivity);
    let files = Files {
        models: config.models_dir.clone(),
        runtime: config.runtime.clone(),
    };
    let Some(ears) = ears else {
        let why = "there is no microphone (audio.enabled = false)".to_owned();
        return (Wake::unavailable(files, words, sensitivity, why), None);
    };
    let detectors = match load(&config.models_dir, &config.runtime, &config.words) {
        Ok(detectors) => detectors,
        Err(e) => {
            if config.enabled {
                tracing::error!(error = %e, "the wake word cannot start; the button still starts a turn");
            }
            return (
                Wake::unavailable(files, words, sensitivity, e.to_string()),
                None,
            );
        }
    };
    let wake = Wake::new(files, words, config.enabled, sensitivity, None);
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (wake, stop) = (wake.clone(), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("hark-wake".into())
            .spawn(move || listen(detectors, ears, wake, conductor, stop))
    };
    match thread {
        Ok(thread) => (
            wake,
            Some(WakeService {
                stop,
                thread: Some(thread),
            }),
        ),
        Err(e) => {
            let why = WakeStartError::Thread(e).to_string();
            tracing::error!(error = why, "the wake word cannot start");
            let (files, words) = (wake.0.files.clone(), wake.0.words.clone());
            (Wake::unavailable(files, words, sensitivity, why), None)
        }
    }
}

/// The word spotter: the front end and the models over a stream of
/// 16 kHz samples, with the refractory time after a detection. The
/// detector thread runs one; `hark-bench wake` runs the same on files.
pub struct Spotter {
    frontend: Frontend,
    detectors: Vec<Detector>,
    pcm: [i16; CHUNK],
    /// No detection before this stream position (the refractory time).
    quiet_until: u64,
}

/// A word heard: which model (its index in the words), the window mean
/// that passed the cutoff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Heard {
    pub word: usize,
    pub score: f32,
}

impl Spotter {
    pub fn new(detectors: Vec<Detector>) -> Self {
        Self {
            frontend: Frontend::new(),
            detectors,
            pcm: [0; CHUNK],
            quiet_until: 0,
        }
    }

    /// The words' manifests, in order.
    pub fn manifests(&self) -> impl Iterator<Item = &hark_wake::detector::Manifest> {
        self.detectors.iter().map(|d| &d.manifest)
    }

    /// Forgets everything heard: the stream starts again.
    pub fn reset(&mut self) -> Result<(), WakeError> {
        self.frontend.reset();
        self.quiet_until = 0;
        self.detectors.iter_mut().try_for_each(Detector::reset)
    }

    /// Takes in up to [`CHUNK`] samples (-1…1) that end at stream position
    /// `end`; the word heard, if one passed its cutoff at `sensitivity`.
    /// Allocates nothing.
    pub fn feed(
        &mut self,
        audio: &[f32],
        end: u64,
        sensitivity: Sensitivity,
    ) -> Result<Option<Heard>, WakeError> {
        let n = audio.len().min(CHUNK);
        for (p, a) in self.pcm.iter_mut().zip(&audio[..n]) {
            *p = (a * 32768.0).clamp(-32768.0, 32767.0) as i16;
        }
        let (mut heard, mut error): (Option<Heard>, Option<WakeError>) = (None, None);
        let detectors = &mut self.detectors;
        self.frontend.push(&self.pcm[..n], |frame| {
            for (word, detector) in detectors.iter_mut().enumerate() {
                match detector.push(frame) {
                    Ok(Some(mean))
                        if mean
                            > cutoff(detector.manifest.micro.probability_cutoff, sensitivity)
                            && heard.is_none_or(|h| mean > h.score) =>
                    {
                        heard = Some(Heard { word, score: mean });
                    }
                    Ok(_) => {}
                    Err(e) => error = Some(e),
                }
            }
        });
        if let Some(e) = error {
            return Err(e);
        }
        match heard {
            Some(heard) if end >= self.quiet_until => {
                // The models start again, so the rest of the word does
                // not wake it twice.
                self.detectors.iter_mut().try_for_each(Detector::reset)?;
                self.quiet_until = end + REFRACTORY_SAMPLES;
                Ok(Some(heard))
            }
            _ => Ok(None),
        }
    }
}

/// [`REFRACTORY`] in samples.
const REFRACTORY_SAMPLES: u64 =
    REFRACTORY.as_millis() as u64 * hark_audio::config::PIPELINE_RATE as u64 / 1000;

/// A detector on a stream handed over a protocol (Wyoming's `detect`),
/// not the room's microphone: the same models and rule, its own state.
pub struct StreamSpotter {
    spotter: Spotter,
    names: Vec<String>,
    sensitivity: Sensitivity,
    /// Samples fed so far: where in the stream a word is heard.
    fed: u64,
}

impl StreamSpotter {
    /// `words`' models from `files`, at `sensitivity`. Reads files: call it
    /// off the runtime's threads.
    pub fn load(
        files: &Files,
        words: Vec<String>,
        sensitivity: Sensitivity,
    ) -> Result<Self, WakeStartError> {
        let detectors = load(&files.models, &files.runtime, &words)?;
        Ok(Self {
            spotter: Spotter::new(detectors),
            names: words,
            sensitivity,
            fed: 0,
        })
    }
}

impl PcmSpotter for StreamSpotter {
    fn feed(&mut self, samples: &[f32]) -> Result<Option<Spotted>, Failure> {
        let mut spotted = None;
        for chunk in samples.chunks(CHUNK) {
            self.fed += chunk.len() as u64;
            let heard = self
                .spotter
                .feed(chunk, self.fed, self.sensitivity)
                .map_err(|e| Failure::new(Kind::WakeWord, e.to_string()))?;
            if let Some(heard) = heard {
                // A second word within one feed is inside the first's
                // quiet second: there is at most one.
                spotted.get_or_insert(Spotted {
                    name: self.names[heard.word].clone(),
                    at: self.fed,
                });
            }
        }
        Ok(spotted)
    }
}

/// The detector thread's loop.
fn listen(
    detectors: Vec<Detector>,
    ears: Ears,
    wake: Wake,
    conductor: Conductor,
    stop: Arc<AtomicBool>,
) {
    let mut spotter = Spotter::new(detectors);
    let mut reader = ears.ring.reader(0);
    let mut audio = [0.0f32; CHUNK];
    let mut running = false;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(POLL);
        let state = if !wake.0.on.load(Ordering::Acquire) {
            WakeState::Off
        } else if ears.muted.load(Ordering::Acquire) {
            WakeState::Muted
        } else if ears
            .closed_while_speaking
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Acquire))
        {
            WakeState::Speaking
        } else {
            WakeState::Listening
        };
        wake.set_state(state);
        if state != WakeState::Listening {
            running = false;
            continue;
        }
        if !running {
            // Starting (again): from now, with nothing remembered.
            running = true;
            reader = ears.ring.reader(0);
            if let Err(e) = spotter.reset() {
                return failed(&wake, &e);
            }
        }
        let sensitivity = wake.sensitivity();
        loop {
            let n = reader.read(&mut audio);
            if n == 0 {
                break;
            }
            match spotter.feed(&audio[..n], reader.position(), sensitivity) {
                Ok(Some(heard)) => {
                    let word = wake.0.words[heard.word].clone();
                    tracing::info!(word, score = heard.score, "wake word heard");
                    conductor.woke(word, heard.score, reader.position());
                }
                Ok(None) => {}
                Err(e) => return failed(&wake, &e),
            }
        }
    }
    wake.set_state(WakeState::Off);
}

fn failed(wake: &Wake, error: &WakeError) {
    tracing::error!(%error, "the wake word model failed; the wake word is off until restart");
    wake.set_state(WakeState::Unavailable);
}
