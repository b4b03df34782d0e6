//! CPU of capture + end-of-speech detection on the virtual card.
//!
//! One case: the virtual microphone plays a programme of speech clips with
//! pauses in real time; the capture thread reads it through ALSA into the
//! ring; a detector thread reads the ring as `utterance::record` does and
//! runs the engine's `Segmenter` over it, continuously. Over the window the
//! bench reads utime + stime of the whole process and of each thread by
//! name (`/proc/self/task/TID/stat`). The feeder thread stands in for the
//! sound card, so its share is reported apart and subtracted.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::Context;
use hark_audio::{
    Capture, CaptureState, Ring,
    config::{CaptureConfig, VadConfig},
    vad::{Event, Segmenter},
    virtual_mic::{MicFormat, VirtualMic},
};

use super::signal::{self, RATE};
use crate::procfs::{self, ThreadCpu};

/// The detector thread's name, to find it in `/proc/self/task`.
pub const DETECTOR_THREAD: &str = "bench-vad";
const CAPTURE_THREAD: &str = "hark-capture";
const FEEDER_THREAD: &str = "hark-virtual-mic";
/// Audio played before the window opens, so start-up is not measured.
const SETTLE: Duration = Duration::from_millis(500);
/// Between two clips of the programme.
const PAUSE_MS: u64 = 1500;
/// Noise on the channels that do not carry speech, uniform ±0.05 (about
/// −31 dBFS RMS).
const OTHER_CHANNELS_NOISE: f32 = 0.05;
/// Noise under the speech and in its pauses: uniform ±0.003 (about −55 dBFS).
const FLOOR_NOISE: f32 = 0.003;

/// What a case captures.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    pub channels: u32,
    /// `[audio.capture] select`: empty mixes every channel.
    pub select: Vec<u32>,
    /// The channel the speech is on.
    pub speech_channel: usize,
}

#[derive(Debug)]
pub struct CpuResult {
    pub case: Case,
    pub window: Duration,
    pub ticks_per_second: u64,
    /// The whole process (`/proc/self/stat`, in clock ticks).
    pub process: Duration,
    /// Per thread (`/proc/self/task/TID/sched`, or `stat` if the kernel has
    /// no `sched`).
    pub capture: Duration,
    pub detector: Duration,
    pub feeder: Duration,
    /// Whether the per-thread figures are to the nanosecond.
    pub precise: bool,
    /// ALSA periods read in the window (20 ms each: 50 a second).
    pub periods: u64,
    /// Overruns since capture started.
    pub overruns: u64,
    /// Samples the detector's reader lost to the ring (should be 0).
    pub dropped: u64,
    pub utterances_injected: usize,
    pub utterances_detected: u64,
}

impl CpuResult {
    /// `cpu` over the window, in % of one core.
    pub fn percent(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() * 100.0 / self.window.as_secs_f64().max(1e-9)
    }

    /// One clock tick over the window, in % of one core: the resolution of
    /// the whole-process figure.
    pub fn tick_percent(&self) -> f64 {
        self.percent(Duration::from_secs_f64(
            1.0 / self.ticks_per_second.max(1) as f64,
        ))
    }
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    anyhow::bail!("timed out after {timeout:?} waiting for {what}")
}

/// Opens the virtual microphone and captures from it until `Capturing`.
pub fn start(
    fifo: &Path,
    channels: u32,
    select: Vec<u32>,
) -> anyhow::Result<(VirtualMic, Capture)> {
    let mic = VirtualMic::start(
        fifo,
        None,
        MicFormat {
            rate: RATE as u32,
            channels,
            period: Duration::from_millis(20),
        },
    )
    .context("cannot start the virtual microphone")?;
    let capture = Capture::start(
        CaptureConfig {
            device: "hark_virtual_mic".into(),
            channels,
            rate: RATE as u32,
            select,
            ..CaptureConfig::default()
        },
        Vec::new(),
    )
    .context("cannot start capture")?;
    wait_for(
        "capture on hark_virtual_mic",
        Duration::from_secs(10),
        || capture.stats().state() == CaptureState::Capturing,
    )
    .with_context(|| format!("capture is {}", capture.stats().describe()))?;
    Ok((mic, capture))
}

struct Detector {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(u64, u64)>,
}

/// What `utterance::record` does with the ring, without an end: read what
/// capture wrote, feed it to the detector, sleep 10 ms when there is none.
fn detect(ring: &Ring, stop: &AtomicBool) -> (u64, u64) {
    let mut reader = ring.reader(0);
    let mut segmenter = Segmenter::new(&VadConfig::default(), reader.position());
    let mut chunk = vec![0.0f32; 4096];
    let mut ends = 0;
    while !stop.load(Ordering::Acquire) {
        let n = reader.read(&mut chunk);
        if n == 0 {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let (used, event) = segmenter.push(rest);
            rest = &rest[used..];
            if matches!(event, Some(Event::SpeechEnd { .. })) {
                ends += 1;
            }
        }
    }
    (ends, reader.dropped())
}

impl Detector {
    fn start(ring: Arc<Ring>) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name(DETECTOR_THREAD.into())
                .spawn(move || detect(&ring, &stop))
                .context("cannot start the detector thread")?
        };
        Ok(Self { stop, thread })
    }

    fn finish(self) -> anyhow::Result<(u64, u64)> {
        self.stop.store(true, Ordering::Release);
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the detector thread panicked"))
    }
}

/// The mono programme: clips with pauses, as many as end (with their pause)
/// within `length`, then the floor noise to the end.
fn programme(clips: &[Vec<f32>], length: Duration) -> (Vec<f32>, usize) {
    let total = (length.as_secs_f64() * RATE as f64) as usize;
    let mut out = Vec::with_capacity(total);
    let mut count = 0;
    for clip in clips.iter().cycle() {
        if out.len() + clip.len() + signal::samples(PAUSE_MS) > total {
            break;
        }
        out.extend_from_slice(clip);
        out.extend(std::iter::repeat_n(0.0, signal::samples(PAUSE_MS)));
        count += 1;
    }
    out.resize(total, 0.0);
    let floor = signal::noise(out.len(), FLOOR_NOISE, 11);
    signal::add(&mut out, &floor);
    (out, count)
}

pub fn measure(
    fifo: &Path,
    case: &Case,
    clips: &[Vec<f32>],
    window: Duration,
    ticks_per_second: u64,
) -> anyhow::Result<CpuResult> {
    let (mic, capture) = start(fifo, case.channels, case.select.clone())?;
    let detector = Detector::start(Arc::clone(capture.ring()))?;
    // Clips that end, with their pause, inside settle + window are the ones
    // the detector must have ended by the close of the window.
    let (mono, injected) = programme(clips, SETTLE + window);
    let mut played = signal::interleave(
        &mono,
        case.channels as usize,
        case.speech_channel,
        OTHER_CHANNELS_NOISE,
    );
    // One more second of floor noise so the microphone never runs dry
    // inside the window.
    played.extend(std::iter::repeat_n(0.0, RATE * case.channels as usize));
    mic.inject(&signal::s16_le(&played));
    std::thread::sleep(SETTLE);

    let stats = Arc::clone(capture.stats());
    let periods_before = stats.periods.load(Ordering::Relaxed);
    let process_before = procfs::cpu_ticks(std::process::id())?;
    let threads_before = ThreadCpu::take(ticks_per_second)?;
    let opened = Instant::now();
    std::thread::sleep(window);
    let process_after = procfs::cpu_ticks(std::process::id())?;
    let threads_after = ThreadCpu::take(ticks_per_second)?;
    let window = opened.elapsed();
    let periods = stats.periods.load(Ordering::Relaxed) - periods_before;

    let (ends, dropped) = detector.finish()?;
    let overruns = stats.overruns.load(Ordering::Relaxed);
    // Capture first: it stops within a period while the feeder still feeds.
    drop(capture);
    drop(mic);
    let delta = |name| {
        threads_after
            .named(name)
            .saturating_sub(threads_before.named(name))
    };
    let process_ticks = process_after.saturating_sub(process_before);
    Ok(CpuResult {
        case: case.clone(),
        window,
        ticks_per_second,
        process: Duration::from_secs_f64(process_ticks as f64 / ticks_per_second.max(1) as f64),
        precise: threads_before.precise && threads_after.precise,
        capture: delta(CAPTURE_THREAD),
        detector: delta(DETECTOR_THREAD),
        feeder: delta(FEEDER_THREAD),
        periods,
        overruns,
        dropped,
        utterances_injected: injected,
        utterances_detected: ends,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programme_holds_whole_clips_with_their_pauses() {
        let clips = vec![vec![0.5; 16_000], vec![0.5; 8_000]];
        let (mono, count) = programme(&clips, Duration::from_secs(7));
        assert_eq!(mono.len(), 7 * 16_000);
        // 1 s + 1.5 s, 0.5 s + 1.5 s, 1 s + 1.5 s = 7.0 s.
        assert_eq!(count, 3);
        let (_, none) = programme(&[], Duration::from_secs(1));
        assert_eq!(none, 0);
    }
}
