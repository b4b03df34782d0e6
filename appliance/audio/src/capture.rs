//! The capture thread: reads the microphones through ALSA a period at a
//! time, turns each period into 16 kHz mono ([`Frontend`]) and appends it to
//! the capture [`Ring`], which never makes it wait.
//!
//! Faults are handled where they happen (librespot's and snapcast's way):
//! an overrun is recovered in place with `snd_pcm_recover` and counted; a
//! read error that does not recover closes the device and opens it again; a
//! device that is missing at start or disappears (a USB array unplugged) is
//! a state, "capture device missing", retried every few seconds until it
//! returns. Nothing here panics or busy-loops, and after start-up nothing in
//! the read loop allocates.
//!
//! Permissions: the daemon's user must be in the `audio` group to open
//! `/dev/snd/*`. The thread runs under `SCHED_FIFO` when
//! `realtime_priority` is set and allowed ([`crate::realtime`]).

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use alsa::{Direction, pcm::PCM};

use crate::{
    config::{CaptureConfig, PIPELINE_RATE},
    device::{self, OpenError, errno, is_missing},
    dsp::{DspError, Frontend},
    echo::Reference,
    pace::Pacer,
    ring::Ring,
};

/// How often a missing device is looked for again.
pub const RETRY: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("capture device `{device}` is missing: {reason}")]
    Missing { device: String, reason: String },
    #[error("capture device `{device}` cannot {wanted}: it supports {supported}")]
    Unsupported {
        device: String,
        wanted: String,
        supported: String,
    },
    #[error("capture device `{device}`: {operation} failed: {source}")]
    Alsa {
        device: String,
        operation: &'static str,
        #[source]
        source: alsa::Error,
    },
    #[error(transparent)]
    Dsp(#[from] DspError),
    #[error("cannot start the capture thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// What the capture side is doing, as `get_status` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CaptureState {
    Starting = 0,
    Capturing = 1,
    DeviceMissing = 2,
    DeviceError = 3,
    Stopped = 4,
}

impl CaptureState {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Capturing,
            2 => Self::DeviceMissing,
            3 => Self::DeviceError,
            4 => Self::Stopped,
            _ => Self::Starting,
        }
    }
}

/// Counters and state shared with the rest of the daemon (read-only there).
#[derive(Debug, Default)]
pub struct CaptureStats {
    state: AtomicU8,
    /// Overruns recovered in place.
    pub overruns: AtomicU64,
    /// Times the device was (re)opened.
    pub opens: AtomicU64,
    /// Periods read.
    pub periods: AtomicU64,
    /// The last fault, for `get_status` and logs. Written only when a fault
    /// happens, never in the read loop.
    last_error: Mutex<Option<String>>,
    /// Told when `state` changes.
    pub changed: crate::changed::Changed,
    /// Beats every period read and every retry step, so the watchdog sees
    /// a thread stuck in the device.
    pub heartbeat: crate::heartbeat::Heartbeat,
}

impl CaptureStats {
    pub fn state(&self) -> CaptureState {
        CaptureState::from_u8(self.state.load(Ordering::Acquire))
    }

    fn set_state(&self, state: CaptureState) {
        if self.state.swap(state as u8, Ordering::AcqRel) != state as u8 {
            self.changed.notify();
        }
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_error(&self, error: Option<String>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = error;
    }

    /// One line for `get_status`: "capturing", "capture device missing", …
    pub fn describe(&self) -> String {
        match self.state() {
            CaptureState::Starting => "starting".into(),
            CaptureState::Capturing => "capturing".into(),
            CaptureState::DeviceMissing => "capture device missing".into(),
            // The error names the device already: "capture device `x`
            // cannot capture FLOAT_LE: it supports …".
            CaptureState::DeviceError => self
                .last_error()
                .unwrap_or_else(|| "capture device error".into()),
            CaptureState::Stopped => "stopped".into(),
        }
    }
}

/// What the read loop needs from a capture device: ALSA's PCM on the
/// appliance; a wrapper that injects faults in tests.
pub trait CaptureDevice: Send {
    /// Reads interleaved frames into `buf`; returns the frames read.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, alsa::Error>;
    /// Recovers from an xrun or suspend in place (`snd_pcm_recover`).
    fn recover(&mut self, err: alsa::Error) -> Result<(), alsa::Error>;
}

struct AlsaCapture(PCM);

impl CaptureDevice for AlsaCapture {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, alsa::Error> {
        self.0.io_bytes().readi(buf)
    }

    fn recover(&mut self, err: alsa::Error) -> Result<(), alsa::Error> {
        self.0.try_recover(err, true)
    }
}

impl Drop for AlsaCapture {
    fn drop(&mut self) {
        let _ = self.0.drop();
    }
}

/// Opens a capture device for a configuration; returns it and its period
/// in frames.
pub type Opener =
    Box<dyn Fn(&CaptureConfig) -> Result<(Box<dyn CaptureDevice>, usize), CaptureError> + Send>;

/// Opens the configured ALSA device.
pub fn open_alsa(config: &CaptureConfig) -> Result<(Box<dyn CaptureDevice>, usize), CaptureError> {
    let (pcm, period) = open(config)?;
    Ok((Box::new(AlsaCapture(pcm)), period))
}

/// A running capture thread. Dropping it stops the thread and joins it.
pub struct Capture {
    ring: Arc<Ring>,
    stats: Arc<CaptureStats>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Capture {
    /// Starts capturing. Never fails because of the device: a missing or
    /// broken device is reported through [`CaptureStats`] and retried.
    /// `mute`: while any of these is raised (the speaker is playing, half
    /// duplex; the mute switch is on), capture stores silence instead of
    /// what the microphones hear, so the appliance does not listen to
    /// itself, and nothing said while muted reaches the ring (not even a
    /// later recording's pre-roll).
    pub fn start(config: CaptureConfig, mute: Vec<Arc<AtomicBool>>) -> Result<Self, CaptureError> {
        Self::start_with(config, mute, Box::new(open_alsa))
    }

    /// As [`Capture::start`], opening the device with `opener` (tests wrap
    /// the ALSA device to inject faults).
    pub fn start_with(
        config: CaptureConfig,
        mute: Vec<Arc<AtomicBool>>,
        opener: Opener,
    ) -> Result<Self, CaptureError> {
        Self::start_clocked(config, mute, opener, None)
    }

    /// As [`Capture::start_with`], keeping `reference`'s clock: the echo
    /// canceller's reference is placed by how much capture has stored.
    pub fn start_clocked(
        config: CaptureConfig,
        mute: Vec<Arc<AtomicBool>>,
        opener: Opener,
        reference: Option<Arc<Reference>>,
    ) -> Result<Self, CaptureError> {
        let ring = Arc::new(Ring::new((config.ring_seconds * PIPELINE_RATE) as usize));
        let stats = Arc::new(CaptureStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (ring, stats, stop) = (Arc::clone(&ring), Arc::clone(&stats), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("hark-capture".into())
                .spawn(move || {
                    let sink = Sink {
                        ring: &ring,
                        mute: &mute,
                        clock: reference.as_deref(),
                    };
                    run(&config, &opener, &sink, &stats, &stop)
                })
                .map_err(CaptureError::Thread)?
        };
        Ok(Self {
            ring,
            stats,
            stop,
            thread: Some(thread),
        })
    }

    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    pub fn stats(&self) -> &Arc<CaptureStats> {
        &self.stats
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Sleeps up to `total`, waking early when asked to stop.
fn pause(stop: &AtomicBool, total: Duration, heart: &crate::heartbeat::Heartbeat) {
    let step = Duration::from_millis(50);
    let mut slept = Duration::ZERO;
    while slept < total && !stop.load(Ordering::Acquire) {
        heart.beat();
        std::thread::sleep(step);
        slept += step;
    }
}

/// alsa-lib prints its own diagnostics to stderr (twice per failed open of
/// a missing device, every retry). Hark reports those errors itself, with
/// the device and what to do; on its audio threads alsa-lib's messages are
/// reduced to a debug line naming the failing function.
pub(crate) fn route_alsa_messages() {
    unsafe extern "C" fn to_log(
        _file: *const std::ffi::c_char,
        _line: std::ffi::c_int,
        func: *const std::ffi::c_char,
        errcode: std::ffi::c_int,
        _fmt: *const std::ffi::c_char,
        _args: *mut alsa_sys::__va_list_tag,
    ) {
        let func = if func.is_null() {
            String::new()
        } else {
            // SAFETY: alsa-lib passes a NUL-terminated function name valid
            // for the duration of the call.
            unsafe { std::ffi::CStr::from_ptr(func) }
                .to_string_lossy()
                .into_owned()
        };
        tracing::debug!(%func, errcode, "alsa-lib reported an error");
    }
    // SAFETY: installs a handler for this thread only; `to_log` has the
    // handler's signature, reads none of the variadic arguments and never
    // unwinds.
    unsafe {
        alsa_sys::snd_lib_error_set_local(Some(to_log));
    }
}

/// Where each period goes: the ring, silenced while any `mute` flag is
/// up, and the echo reference's clock told how far capture has got.
struct Sink<'a> {
    ring: &'a Ring,
    mute: &'a [Arc<AtomicBool>],
    clock: Option<&'a Reference>,
}

fn run(
    config: &CaptureConfig,
    opener: &Opener,
    sink: &Sink,
    stats: &CaptureStats,
    stop: &AtomicBool,
) {
    route_alsa_messages();
    // Once, before the device opens: the read loop itself never allocates
    // or logs for this.
    crate::realtime::enter(config.realtime_priority);
    // Reports Stopped however the thread ends, a panic included, so the
    // watchdog's health check sees a dead capture thread.
    struct Ended<'a>(&'a CaptureStats);
    impl Drop for Ended<'_> {
        fn drop(&mut self) {
            self.0.set_state(CaptureState::Stopped);
        }
    }
    let _ended = Ended(stats);
    let mut logged_missing = false;
    while !stop.load(Ordering::Acquire) {
        stats.heartbeat.beat();
        match opener(config) {
            Ok((mut device, period)) => {
                logged_missing = false;
                stats.opens.fetch_add(1, Ordering::Relaxed);
                stats.set_error(None);
                stats.set_state(CaptureState::Capturing);
                tracing::info!(device = %config.device, period_frames = period, "capture started");
                match read_loop(config, device.as_mut(), period, sink, stats, stop) {
                    Ok(()) => break,
                    Err(e) => {
                        let missing = matches!(e, CaptureError::Missing { .. });
                        tracing::warn!(error = %e, "capture interrupted; reopening");
                        stats.set_error(Some(e.to_string()));
                        stats.set_state(if missing {
                            CaptureState::DeviceMissing
                        } else {
                            CaptureState::DeviceError
                        });
                        pause(
                            stop,
                            if missing {
                                RETRY
                            } else {
                                Duration::from_millis(200)
                            },
                            &stats.heartbeat,
                        );
                    }
                }
            }
            Err(e) => {
                let missing = matches!(e, CaptureError::Missing { .. });
                if !logged_missing {
                    tracing::warn!(error = %e, retry_s = RETRY.as_secs(), "cannot open capture device");
                    logged_missing = true;
                }
                stats.set_error(Some(e.to_string()));
                stats.set_state(if missing {
                    CaptureState::DeviceMissing
                } else {
                    CaptureState::DeviceError
                });
                pause(stop, RETRY, &stats.heartbeat);
            }
        }
    }
}

/// Opens and configures the capture device; returns it and its period in
/// frames.
fn open(config: &CaptureConfig) -> Result<(PCM, usize), CaptureError> {
    let params = device::Params {
        direction: Direction::Capture,
        format: config.format,
        channels: config.channels,
        rate: config.rate,
        period_ms: config.period_ms,
        periods: config.periods,
    };
    device::open(&config.device, &params).map_err(|e| match e {
        OpenError::Missing(reason) => CaptureError::Missing {
            device: config.device.clone(),
            reason: reason.to_string(),
        },
        OpenError::Unsupported { wanted, supported } => CaptureError::Unsupported {
            device: config.device.clone(),
            wanted: format!("capture {wanted}"),
            supported,
        },
        OpenError::Alsa { operation, source } => CaptureError::Alsa {
            device: config.device.clone(),
            operation,
            source,
        },
    })
}

fn read_loop(
    config: &CaptureConfig,
    device: &mut dyn CaptureDevice,
    period: usize,
    sink: &Sink,
    stats: &CaptureStats,
    stop: &AtomicBool,
) -> Result<(), CaptureError> {
    let mut frontend = Frontend::new(config, period)?;
    let frame_bytes = config.channels as usize * config.format.bytes();
    let mut buffer = vec![0u8; period * frame_bytes];
    let mut pacer = Pacer::new(config.rate, Duration::from_millis(200));
    while !stop.load(Ordering::Acquire) {
        let read = device.read(&mut buffer);
        stats.heartbeat.beat();
        match read {
            Ok(frames) => {
                stats.periods.fetch_add(1, Ordering::Relaxed);
                pacer.pace(frames);
                let out = frontend.process_mut(&buffer[..frames * frame_bytes], frames);
                if sink.mute.iter().any(|m| m.load(Ordering::Acquire)) {
                    out.fill(0.0);
                }
                sink.ring.push(out);
                if let Some(clock) = sink.clock {
                    clock.set_heard(sink.ring.written());
                }
            }
            Err(e) if matches!(e.errno(), errno::EPIPE | errno::ESTRPIPE) => {
                // Overrun: we were late; ALSA dropped audio. Recover here.
                stats.overruns.fetch_add(1, Ordering::Relaxed);
                device.recover(e).map_err(|source| CaptureError::Alsa {
                    device: config.device.clone(),
                    operation: "recovering from an overrun",
                    source,
                })?;
            }
            Err(e) if is_missing(e.errno()) => {
                return Err(CaptureError::Missing {
                    device: config.device.clone(),
                    reason: e.to_string(),
                });
            }
            Err(e) => {
                if device.recover(e).is_err() {
                    return Err(CaptureError::Alsa {
                        device: config.device.clone(),
                        operation: "reading",
                        source: e,
                    });
                }
            }
        }
    }
    Ok(())
}
