//! The transcription engine: one recogniser (whisper's models, chosen per
//! request by [`crate::choice`], or the live engine) on a dedicated worker
//! thread fed by a bounded queue.
//!
//! An inference takes seconds of full CPU; it must never run on the
//! async runtime's threads, and two inferences at once would only slow both
//! down on a small board. So there is one worker, and requests wait in a
//! queue of [`EngineConfig::queue`] places; a full queue is an immediate
//! [`SttError::Busy`], never an unbounded wait.

use std::{
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc::{self, Receiver, SyncSender, TrySendError},
    },
    thread::JoinHandle,
};

use crate::choice::Models;
use crate::recognizer::{
    BusyHook, EngineConfig, LanguageGuess, ModelInfo, Recognizer, Request, SttError, Transcript,
};
use crate::whisper::{LazyWhisper, LoadFailures, Whisper, install_logging};

/// What the worker tells the daemon, and its queue's size.
#[derive(Clone, Default)]
pub struct Hooks {
    pub queue: usize,
    pub before_request: Option<fn()>,
    pub after_request: Option<fn()>,
    pub on_busy: Option<BusyHook>,
}

enum Job {
    Transcribe(
        Request,
        tokio::sync::oneshot::Sender<Result<Transcript, SttError>>,
    ),
    Detect(
        Vec<f32>,
        Arc<AtomicBool>,
        tokio::sync::oneshot::Sender<Result<Vec<LanguageGuess>, SttError>>,
    ),
}

/// The engine. Dropping it stops the worker (after the job it is running).
pub struct Engine {
    jobs: Option<SyncSender<Job>>,
    worker: Option<JoinHandle<()>>,
    info: ModelInfo,
    /// Models loaded on first use that failed to load, for `get_status`.
    failures: LoadFailures,
    queued: Arc<AtomicUsize>,
    busy: Arc<AtomicBool>,
}

impl Engine {
    /// Models whose load on first use failed, and why (name, error).
    pub fn load_failures(&self) -> Vec<(String, String)> {
        self.failures.list()
    }

    /// Loads the model and starts the worker. Blocking (the load reads the
    /// whole file): call it from a blocking context.
    pub fn start(config: EngineConfig) -> Result<Engine, SttError> {
        install_logging();
        if !config.model.is_file() {
            return Err(SttError::ModelMissing {
                path: config.model.clone(),
            });
        }
        let hooks = Hooks {
            queue: config.queue,
            before_request: config.before_request,
            after_request: config.after_request,
            on_busy: config.on_busy.clone(),
        };
        let other = config.multilingual.clone();
        let failures = LoadFailures::default();
        let main: Box<dyn Recognizer> = if config.lazy {
            Box::new(LazyWhisper::checked(config.clone(), &failures)?)
        } else {
            Box::new(Whisper::load(config.clone())?)
        };
        let other = match other {
            Some(path) if !main.info().multilingual => {
                match Self::other_languages(&config, path, &failures) {
                    Ok(other) => Some(other),
                    Err(e) => {
                        tracing::warn!(error = %e, "no multilingual model: speech to text is English only");
                        None
                    }
                }
            }
            _ => None,
        };
        let recognizer = Models::new(main, other, config, failures.clone());
        let mut engine = Self::from_recognizer(Box::new(recognizer), hooks)?;
        engine.failures = failures;
        Ok(engine)
    }

    /// The multilingual model beside an English-only one, checked (not
    /// loaded).
    fn other_languages(
        config: &EngineConfig,
        path: PathBuf,
        failures: &LoadFailures,
    ) -> Result<LazyWhisper, SttError> {
        if !path.is_file() {
            return Err(SttError::ModelMissing { path });
        }
        let other = LazyWhisper::checked(
            EngineConfig {
                model: path,
                multilingual: None,
                ..config.clone()
            },
            failures,
        )?;
        if !other.info().multilingual {
            return Err(SttError::ModelLoad {
                path: other.info().path.clone(),
                reason: "it is English only, not multilingual".into(),
            });
        }
        Ok(other)
    }

    /// Starts a worker for any recogniser (the live engine).
    pub fn from_recognizer(
        recognizer: Box<dyn Recognizer>,
        hooks: Hooks,
    ) -> Result<Engine, SttError> {
        let info = recognizer.info().clone();
        let (tx, rx) = mpsc::sync_channel(hooks.queue.max(1));
        let queued = Arc::new(AtomicUsize::new(0));
        let busy = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            recognizer,
            hooks,
            queued: Arc::clone(&queued),
            busy: Arc::clone(&busy),
        };
        let handle = std::thread::Builder::new()
            .name("hark-stt".into())
            .spawn(move || worker.run(rx))
            .map_err(|e| SttError::Whisper(format!("cannot start the worker thread: {e}")))?;
        Ok(Engine {
            jobs: Some(tx),
            worker: Some(handle),
            info,
            failures: LoadFailures::default(),
            queued,
            busy,
        })
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Requests waiting for the worker.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// True while the worker is transcribing.
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed)
    }

    fn send(&self, job: Job) -> Result<(), SttError> {
        let jobs = self.jobs.as_ref().ok_or(SttError::Stopped)?;
        self.queued.fetch_add(1, Ordering::Relaxed);
        jobs.try_send(job).map_err(|e| {
            let queued = self.queued.fetch_sub(1, Ordering::Relaxed) - 1;
            match e {
                TrySendError::Full(_) => SttError::Busy { queued },
                TrySendError::Disconnected(_) => SttError::Stopped,
            }
        })
    }

    /// Queues a transcription; the answer arrives on the returned receiver.
    pub fn submit(
        &self,
        request: Request,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<Transcript, SttError>>, SttError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Job::Transcribe(request, tx))?;
        Ok(rx)
    }

    /// Transcribes on the worker and waits for it (for blocking callers).
    pub fn transcribe_blocking(&self, request: Request) -> Result<Transcript, SttError> {
        self.submit(request)?
            .blocking_recv()
            .map_err(|_| SttError::Stopped)?
    }

    /// Queues a language detection (multilingual models only).
    pub fn submit_detect(
        &self,
        audio: Vec<f32>,
        cancel: Arc<AtomicBool>,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<Vec<LanguageGuess>, SttError>>, SttError>
    {
        if !self.info.multilingual {
            return Err(SttError::EnglishOnly {
                language: "detection".into(),
                model: self.info.name.clone(),
            });
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(Job::Detect(audio, cancel, tx))?;
        Ok(rx)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Closing the queue ends the worker's loop.
        drop(self.jobs.take());
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

struct Worker {
    recognizer: Box<dyn Recognizer>,
    hooks: Hooks,
    queued: Arc<AtomicUsize>,
    busy: Arc<AtomicBool>,
}

impl Worker {
    fn run(mut self, jobs: Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            self.busy.store(true, Ordering::Relaxed);
            if let Some(hook) = &self.hooks.on_busy {
                (hook.0)(true);
            }
            if let Some(before) = self.hooks.before_request {
                before();
            }
            // The worker is idle from the moment the result exists: the
            // caller sees "ready" as soon as it has its answer, and the
            // clean-up after it is no transcription.
            match job {
                Job::Transcribe(request, reply) => {
                    // A caller that gave up (dropped its receiver) needs no work.
                    let result = if reply.is_closed() || request.cancel.load(Ordering::Relaxed) {
                        Err(SttError::Cancelled)
                    } else {
                        self.recognizer.transcribe(request)
                    };
                    self.idle();
                    let _ = reply.send(result);
                }
                Job::Detect(audio, cancel, reply) => {
                    let result = if reply.is_closed() || cancel.load(Ordering::Relaxed) {
                        Err(SttError::Cancelled)
                    } else {
                        self.recognizer.detect(&audio)
                    };
                    self.idle();
                    let _ = reply.send(result);
                }
            }
            if let Some(after) = self.hooks.after_request {
                after();
            }
        }
    }

    fn idle(&self) {
        self.busy.store(false, Ordering::Relaxed);
        if let Some(hook) = &self.hooks.on_busy {
            (hook.0)(false);
        }
    }
}
