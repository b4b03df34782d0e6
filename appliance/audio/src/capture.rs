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
//! `/dev/snd/*`.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use alsa::{
    Direction, ValueOr,
    pcm::{Access, Format, HwParams, PCM},
};

use crate::{
    config::{CaptureConfig, PIPELINE_RATE, SampleFormat},
    dsp::{DspError, Frontend},
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
}

impl CaptureStats {
    pub fn state(&self) -> CaptureState {
        CaptureState::from_u8(self.state.load(Ordering::Acquire))
    }

    fn set_state(&self, state: CaptureState) {
        self.state.store(state as u8, Ordering::Release);
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
            CaptureState::DeviceError => match self.last_error() {
                Some(e) => format!("capture device error: {e}"),
                None => "capture device error".into(),
            },
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
    /// `mute`: while it is raised (the speaker is playing, half duplex),
    /// capture stores silence instead of what the microphones hear, so the
    /// appliance does not listen to itself.
    pub fn start(
        config: CaptureConfig,
        mute: Option<Arc<AtomicBool>>,
    ) -> Result<Self, CaptureError> {
        Self::start_with(config, mute, Box::new(open_alsa))
    }

    /// As [`Capture::start`], opening the device with `opener` (tests wrap
    /// the ALSA device to inject faults).
    pub fn start_with(
        config: CaptureConfig,
        mute: Option<Arc<AtomicBool>>,
        opener: Opener,
    ) -> Result<Self, CaptureError> {
        let ring = Arc::new(Ring::new((config.ring_seconds * PIPELINE_RATE) as usize));
        let stats = Arc::new(CaptureStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (ring, stats, stop) = (Arc::clone(&ring), Arc::clone(&stats), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("hark-capture".into())
                .spawn(move || run(&config, &opener, &ring, &stats, &stop, mute.as_deref()))
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

    /// Whether the thread is still running (for the watchdog's health check).
    pub fn alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
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
fn pause(stop: &AtomicBool, total: Duration) {
    let step = Duration::from_millis(50);
    let mut slept = Duration::ZERO;
    while slept < total && !stop.load(Ordering::Acquire) {
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

fn run(
    config: &CaptureConfig,
    opener: &Opener,
    ring: &Ring,
    stats: &CaptureStats,
    stop: &AtomicBool,
    mute: Option<&AtomicBool>,
) {
    route_alsa_messages();
    let mut logged_missing = false;
    while !stop.load(Ordering::Acquire) {
        match opener(config) {
            Ok((mut device, period)) => {
                logged_missing = false;
                stats.opens.fetch_add(1, Ordering::Relaxed);
                stats.set_error(None);
                stats.set_state(CaptureState::Capturing);
                tracing::info!(device = %config.device, period_frames = period, "capture started");
                match read_loop(config, device.as_mut(), period, ring, stats, stop, mute) {
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
                pause(stop, RETRY);
            }
        }
    }
    stats.set_state(CaptureState::Stopped);
}

fn is_missing(errno: i32) -> bool {
    // ENOENT: no such device name or node; ENODEV/ENXIO: the device went away.
    matches!(
        errno,
        libc_errno::ENOENT | libc_errno::ENODEV | libc_errno::ENXIO
    )
}

/// errno values, without a libc dependency for three constants.
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const ENXIO: i32 = 6;
    pub const EPIPE: i32 = 32;
    pub const ENODEV: i32 = 19;
    pub const ESTRPIPE: i32 = 86;
}

fn alsa_format(format: SampleFormat) -> Format {
    match format {
        SampleFormat::S16Le => Format::S16LE,
        SampleFormat::S32Le => Format::S32LE,
        SampleFormat::FloatLe => Format::FloatLE,
    }
}

/// Opens and configures the device; returns it and its period in frames.
fn open(config: &CaptureConfig) -> Result<(PCM, usize), CaptureError> {
    let device = config.device.clone();
    let pcm = PCM::new(&device, Direction::Capture, false).map_err(|e| {
        if is_missing(e.errno()) {
            CaptureError::Missing {
                device: device.clone(),
                reason: e.to_string(),
            }
        } else {
            CaptureError::Alsa {
                device: device.clone(),
                operation: "open",
                source: e,
            }
        }
    })?;
    let alsa_err = |operation| {
        let device = device.clone();
        move |source| CaptureError::Alsa {
            device,
            operation,
            source,
        }
    };
    let period = {
        let hwp = HwParams::any(&pcm).map_err(alsa_err("reading hardware parameters"))?;
        let unsupported = |wanted: String| CaptureError::Unsupported {
            device: device.clone(),
            wanted,
            supported: supported(&hwp),
        };
        hwp.set_access(Access::RWInterleaved)
            .map_err(|_| unsupported("interleaved access".into()))?;
        hwp.set_format(alsa_format(config.format))
            .map_err(|_| unsupported(format!("capture {}", config.format.name())))?;
        hwp.set_channels(config.channels)
            .map_err(|_| unsupported(format!("capture {} channels", config.channels)))?;
        hwp.set_rate(config.rate, ValueOr::Nearest)
            .map_err(|_| unsupported(format!("capture at {} Hz", config.rate)))?;
        let period = (config.rate * config.period_ms / 1000) as i64;
        let period = hwp
            .set_period_size_near(period, ValueOr::Nearest)
            .map_err(alsa_err("setting the period size"))?;
        hwp.set_buffer_size_near(period * i64::from(config.periods))
            .map_err(alsa_err("setting the buffer size"))?;
        pcm.hw_params(&hwp)
            .map_err(alsa_err("applying hardware parameters"))?;
        let current = pcm
            .hw_params_current()
            .map_err(alsa_err("reading back parameters"))?;
        let rate = current.get_rate().map_err(alsa_err("reading the rate"))?;
        if rate != config.rate {
            return Err(CaptureError::Unsupported {
                device: device.clone(),
                wanted: format!("capture at {} Hz (it offers {rate} Hz)", config.rate),
                supported: supported(
                    &HwParams::any(&pcm).map_err(alsa_err("reading hardware parameters"))?,
                ),
            });
        }
        current
            .get_period_size()
            .map_err(alsa_err("reading the period size"))? as usize
    };
    pcm.prepare().map_err(alsa_err("prepare"))?;
    Ok((pcm, period))
}

/// What a device offers, for error messages.
fn supported(hwp: &HwParams) -> String {
    let formats: Vec<&str> = [
        SampleFormat::S16Le,
        SampleFormat::S32Le,
        SampleFormat::FloatLe,
    ]
    .into_iter()
    .filter(|f| hwp.test_format(alsa_format(*f)).is_ok())
    .map(SampleFormat::name)
    .collect();
    let channels = match (hwp.get_channels_min(), hwp.get_channels_max()) {
        (Ok(lo), Ok(hi)) => format!("{lo}–{hi}"),
        _ => "?".into(),
    };
    let rates = match (hwp.get_rate_min(), hwp.get_rate_max()) {
        (Ok(lo), Ok(hi)) => format!("{lo}–{hi} Hz"),
        _ => "?".into(),
    };
    let formats = if formats.is_empty() {
        "none of S16_LE, S32_LE, FLOAT_LE".to_owned()
    } else {
        formats.join(", ")
    };
    format!("formats {formats}; channels {channels}; rates {rates}")
}

fn read_loop(
    config: &CaptureConfig,
    device: &mut dyn CaptureDevice,
    period: usize,
    ring: &Ring,
    stats: &CaptureStats,
    stop: &AtomicBool,
    mute: Option<&AtomicBool>,
) -> Result<(), CaptureError> {
    let mut frontend = Frontend::new(config, period)?;
    let frame_bytes = config.channels as usize * config.format.bytes();
    let mut buffer = vec![0u8; period * frame_bytes];
    let mut pacer = Pacer::new(config.rate, Duration::from_millis(200));
    while !stop.load(Ordering::Acquire) {
        match device.read(&mut buffer) {
            Ok(frames) => {
                stats.periods.fetch_add(1, Ordering::Relaxed);
                pacer.pace(frames);
                let out = frontend.process_mut(&buffer[..frames * frame_bytes], frames);
                if mute.is_some_and(|m| m.load(Ordering::Acquire)) {
                    out.fill(0.0);
                }
                ring.push(out);
            }
            Err(e) if matches!(e.errno(), libc_errno::EPIPE | libc_errno::ESTRPIPE) => {
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
