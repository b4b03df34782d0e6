//! The playback thread: a queue of clips played through ALSA, with software
//! volume, a short fade when speech is stopped, and barge-in within one
//! period.
//!
//! Clips are resampled to the device rate by [`Player::play`] in the
//! caller's thread; the playback thread only scales and converts samples
//! into one preallocated period buffer and writes it, so it never allocates.
//! A stop request is an atomic generation counter the thread checks every
//! period: the current period is faded out, the device's buffer is dropped
//! (`snd_pcm_drop`), queued clips are discarded. Underruns are recovered in
//! place and counted; a missing device is a state, retried every few
//! seconds.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering},
        mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use alsa::{Direction, pcm::PCM};

use crate::{
    capture::{RETRY, route_alsa_messages},
    clip::{Clip, ClipError},
    config::{PIPELINE_RATE, PlaybackConfig, SampleFormat},
    device::{self, OpenError, errno},
    echo::Reference,
    mixer::{self, MixerError},
    pace::Pacer,
};

/// Clips waiting to be played, at most.
pub const QUEUE: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum PlaybackError {
    #[error("the speech queue is full ({QUEUE} clips waiting); try again when it drains")]
    QueueFull,
    #[error("the playback thread has stopped")]
    Stopped,
    #[error(transparent)]
    Clip(#[from] ClipError),
    #[error("cannot start the playback thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("playback device `{device}` cannot {wanted}: it supports {supported}")]
    Unsupported {
        device: String,
        wanted: String,
        supported: String,
    },
    #[error("playback device `{device}` is missing: {reason}")]
    Missing { device: String, reason: String },
    #[error("playback device `{device}`: {operation} failed: {source}")]
    Alsa {
        device: String,
        operation: &'static str,
        #[source]
        source: alsa::Error,
    },
}

/// How a clip's playback ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Played to the end.
    Finished,
    /// Stopped (barge-in, or a stop request) before or while playing.
    Stopped,
    /// The device was missing or failed.
    Failed,
}

struct Queued {
    samples: Vec<f32>,
    /// The clip at 16 kHz for the echo canceller's reference (empty
    /// without one).
    reference: Vec<f32>,
    /// Stop generation when queued: a later stop cancels it.
    generation: u64,
    done: Option<SyncSender<Outcome>>,
    /// Told when the clip's first period goes to the device.
    started: Option<SyncSender<()>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PlaybackState {
    Starting = 0,
    Ready = 1,
    DeviceMissing = 2,
    DeviceError = 3,
    Stopped = 4,
}

/// Shared with the rest of the daemon.
#[derive(Debug)]
pub struct PlayerStats {
    state: AtomicU8,
    /// True while sound is coming out of the speaker (shared: capture reads
    /// it for half duplex, `get_status` reports it).
    pub speaking: Arc<AtomicBool>,
    pub underruns: AtomicU64,
    pub clips_played: AtomicU64,
    /// When the thread last went silent after a stop (for latency tests).
    last_stop_latency_us: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// Told when `state` or `speaking` changes.
    pub changed: crate::changed::Changed,
    /// Beats every period written, every wait for a clip and every retry
    /// step, so the watchdog sees a thread stuck in the device.
    pub heartbeat: crate::heartbeat::Heartbeat,
}

impl PlayerStats {
    pub fn state(&self) -> PlaybackState {
        match self.state.load(Ordering::Acquire) {
            1 => PlaybackState::Ready,
            2 => PlaybackState::DeviceMissing,
            3 => PlaybackState::DeviceError,
            4 => PlaybackState::Stopped,
            _ => PlaybackState::Starting,
        }
    }

    fn set_state(&self, state: PlaybackState) {
        if self.state.swap(state as u8, Ordering::AcqRel) != state as u8 {
            self.changed.notify();
        }
    }

    /// Raises or lowers `speaking`, telling [`PlayerStats::changed`] when
    /// it changes.
    fn set_speaking(&self, on: bool) {
        if self.speaking.swap(on, Ordering::AcqRel) != on {
            self.changed.notify();
        }
    }

    fn set_error(&self, error: Option<String>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = error;
    }

    /// Time from the last stop request until the speaker was silent.
    pub fn last_stop_latency(&self) -> Option<Duration> {
        match self.last_stop_latency_us.load(Ordering::Acquire) {
            0 => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    /// A few words for `get_status` ("ready", "missing", "error: …").
    pub fn describe(&self) -> String {
        match self.state() {
            PlaybackState::Starting => "starting".into(),
            PlaybackState::Ready => "ready".into(),
            PlaybackState::DeviceMissing => "missing".into(),
            PlaybackState::DeviceError => {
                match self
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_deref()
                {
                    Some(e) => format!("error: {e}"),
                    None => "error".into(),
                }
            }
            PlaybackState::Stopped => "stopped".into(),
        }
    }
}

struct Shared {
    stats: Arc<PlayerStats>,
    /// Incremented by every stop request.
    stop_generation: AtomicU64,
    /// When the latest stop was requested.
    stop_requested: Mutex<Option<Instant>>,
    /// Software gain, linear, as f32 bits.
    gain: AtomicU32,
    shutdown: AtomicBool,
    /// Where what is played is written for the echo canceller.
    reference: Option<Arc<Reference>>,
}

/// Volume 0–100 to a linear gain: about 50 dB of range on a log curve, 0
/// is silence.
pub fn volume_to_gain(volume: u8) -> f32 {
    match volume.min(100) {
        0 => 0.0,
        v => 10f32.powf((f32::from(v) - 100.0) / 2.0 / 20.0),
    }
}

pub struct Player {
    tx: SyncSender<Queued>,
    shared: Arc<Shared>,
    rate: u32,
    device: String,
    mixer_control: String,
    volume: std::sync::atomic::AtomicU8,
    thread: Option<JoinHandle<()>>,
}

impl Player {
    /// `speaking` is raised while the speaker plays; pass the same flag to
    /// [`Capture::start`](crate::Capture::start) for half duplex.
    pub fn start(config: PlaybackConfig, speaking: Arc<AtomicBool>) -> Result<Self, PlaybackError> {
        Self::start_with_reference(config, speaking, None)
    }

    /// As [`Player::start`], writing what it plays into `reference` for
    /// the echo canceller.
    pub fn start_with_reference(
        config: PlaybackConfig,
        speaking: Arc<AtomicBool>,
        reference: Option<Arc<Reference>>,
    ) -> Result<Self, PlaybackError> {
        let (tx, rx) = sync_channel(QUEUE);
        let shared = Arc::new(Shared {
            stats: Arc::new(PlayerStats {
                state: AtomicU8::new(0),
                speaking,
                underruns: AtomicU64::new(0),
                clips_played: AtomicU64::new(0),
                last_stop_latency_us: AtomicU64::new(0),
                last_error: Mutex::new(None),
                changed: Default::default(),
                heartbeat: Default::default(),
            }),
            stop_generation: AtomicU64::new(0),
            stop_requested: Mutex::new(None),
            gain: AtomicU32::new(volume_to_gain(config.volume).to_bits()),
            shutdown: AtomicBool::new(false),
            reference,
        });
        let rate = config.rate;
        let (device, mixer_control, volume) = (
            config.device.clone(),
            config.mixer_control.clone(),
            config.volume,
        );
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("hark-playback".into())
                .spawn(move || run(&config, &rx, &shared))
                .map_err(PlaybackError::Thread)?
        };
        let player = Self {
            tx,
            shared,
            rate,
            device,
            mixer_control,
            volume: std::sync::atomic::AtomicU8::new(volume),
            thread: Some(thread),
        };
        if let Err(e) = player.set_volume(volume) {
            tracing::warn!(error = %e, "using software volume only");
        }
        Ok(player)
    }

    pub fn stats(&self) -> &Arc<PlayerStats> {
        &self.shared.stats
    }

    /// Queues a clip. Resampling happens here, in the caller's thread.
    /// Returns a receiver that gets the clip's [`Outcome`].
    pub fn play(&self, clip: &Clip) -> Result<Receiver<Outcome>, PlaybackError> {
        self.enqueue(clip, None)
    }

    /// Like [`play`](Self::play), and also returns a receiver that gets `()`
    /// when the clip starts playing (not if it is stopped before): speech
    /// reports when each sentence is heard.
    pub fn play_tracked(
        &self,
        clip: &Clip,
    ) -> Result<(Receiver<()>, Receiver<Outcome>), PlaybackError> {
        let (started_tx, started_rx) = sync_channel(1);
        Ok((started_rx, self.enqueue(clip, Some(started_tx))?))
    }

    fn enqueue(
        &self,
        clip: &Clip,
        started: Option<SyncSender<()>>,
    ) -> Result<Receiver<Outcome>, PlaybackError> {
        let samples = clip.resampled(self.rate)?.samples;
        let reference = match self.shared.reference {
            Some(_) => clip.resampled(PIPELINE_RATE)?.samples,
            None => Vec::new(),
        };
        let (done_tx, done_rx) = sync_channel(1);
        let queued = Queued {
            samples,
            reference,
            generation: self.shared.stop_generation.load(Ordering::Acquire),
            done: Some(done_tx),
            started,
        };
        match self.tx.try_send(queued) {
            Ok(()) => Ok(done_rx),
            Err(TrySendError::Full(_)) => Err(PlaybackError::QueueFull),
            Err(TrySendError::Disconnected(_)) => Err(PlaybackError::Stopped),
        }
    }

    /// Stops what is playing and everything queued (barge-in).
    pub fn stop(&self) {
        // A stop that finds nothing playing leaves no latency figure behind.
        self.shared
            .stats
            .last_stop_latency_us
            .store(0, Ordering::Release);
        *self
            .shared
            .stop_requested
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        self.shared.stop_generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Sets the volume, 0–100: on the card's mixer control when one is
    /// configured (the software gain then stays at full), else in software.
    /// The software volume is always applied; a mixer error is returned so
    /// the caller can say the hardware control was not set.
    pub fn set_volume(&self, volume: u8) -> Result<(), MixerError> {
        let volume = volume.min(100);
        self.volume.store(volume, Ordering::Release);
        let hardware = if self.mixer_control.is_empty() {
            Ok(false)
        } else {
            mixer::set_volume(&self.device, &self.mixer_control, volume).map(|()| true)
        };
        let gain = match hardware {
            Ok(true) => 1.0,
            _ => volume_to_gain(volume),
        };
        self.shared.gain.store(gain.to_bits(), Ordering::Release);
        hardware.map(|_| ())
    }

    /// The current volume, 0–100.
    pub fn volume(&self) -> u8 {
        self.volume.load(Ordering::Acquire)
    }

    /// The mixer control volume is set on, if any.
    pub fn mixer_control(&self) -> Option<&str> {
        (!self.mixer_control.is_empty()).then_some(self.mixer_control.as_str())
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn open(config: &PlaybackConfig) -> Result<(PCM, usize), PlaybackError> {
    let params = device::Params {
        direction: Direction::Playback,
        format: SampleFormat::S16Le,
        channels: config.channels,
        rate: config.rate,
        period_ms: config.period_ms,
        periods: config.periods,
    };
    device::open(&config.device, &params).map_err(|e| match e {
        OpenError::Missing(reason) => PlaybackError::Missing {
            device: config.device.clone(),
            reason: reason.to_string(),
        },
        OpenError::Unsupported { wanted, supported } => PlaybackError::Unsupported {
            device: config.device.clone(),
            wanted: format!("play {wanted}"),
            supported,
        },
        OpenError::Alsa { operation, source } => PlaybackError::Alsa {
            device: config.device.clone(),
            operation,
            source,
        },
    })
}

fn finish(clip: &mut Queued, outcome: Outcome) {
    if let Some(done) = clip.done.take() {
        let _ = done.try_send(outcome);
    }
}

fn run(config: &PlaybackConfig, rx: &Receiver<Queued>, shared: &Shared) {
    route_alsa_messages();
    // Once, before the device opens (see `crate::realtime`).
    crate::realtime::enter(config.realtime_priority);
    let stats = &shared.stats;
    // Reports Stopped and silence however the thread ends, a panic included.
    struct Ended<'a>(&'a PlayerStats);
    impl Drop for Ended<'_> {
        fn drop(&mut self) {
            self.0.set_speaking(false);
            self.0.set_state(PlaybackState::Stopped);
        }
    }
    let _ended = Ended(stats);
    let mut logged = false;
    'device: while !shared.shutdown.load(Ordering::Acquire) {
        stats.heartbeat.beat();
        let (pcm, period) = match open(config) {
            Ok(opened) => opened,
            Err(e) => {
                if !logged {
                    tracing::warn!(error = %e, retry_s = RETRY.as_secs(), "cannot open playback device");
                    logged = true;
                }
                stats.set_state(if matches!(e, PlaybackError::Missing { .. }) {
                    PlaybackState::DeviceMissing
                } else {
                    PlaybackState::DeviceError
                });
                stats.set_error(Some(e.to_string()));
                // Clips queued meanwhile fail at once rather than wait.
                let deadline = Instant::now() + RETRY;
                while Instant::now() < deadline && !shared.shutdown.load(Ordering::Acquire) {
                    stats.heartbeat.beat();
                    if let Ok(mut clip) = rx.recv_timeout(Duration::from_millis(50)) {
                        finish(&mut clip, Outcome::Failed);
                    }
                }
                continue;
            }
        };
        logged = false;
        stats.set_error(None);
        stats.set_state(PlaybackState::Ready);
        tracing::info!(device = %config.device, period_frames = period, "playback ready");
        let channels = config.channels as usize;
        let mut buffer = vec![0i16; period * channels];
        // One period of the echo reference at 16 kHz, scaled by the volume.
        let mut played = vec![0f32; period * PIPELINE_RATE as usize / config.rate as usize + 2];
        // Where the next clip's first sample is heard (capture position):
        // set when sound starts after silence, carried on while clips
        // follow back to back.
        let mut cursor: Option<u64> = None;
        let fade = (config.rate * config.fade_ms / 1000).max(1) as usize;
        // The virtual speaker is not paced; pace it as a card: a card takes
        // a whole buffer at once, starts playing the first period as it
        // comes (ALSA's default start threshold is one frame), and then
        // frees a period at a time. The `file` plugin writes to its file
        // only what runs past one buffer (what a card would still hold),
        // so held a period ahead, the file heard everything a buffer less
        // a period (60 ms) later than a card would play it: the first
        // sound of every reply included (docs/benchmarks.md, the turn).
        let period_time = Duration::from_millis(u64::from(config.period_ms));
        let mut pacer = Pacer::with_room(config.rate, period_time * config.periods, period_time);
        let io = pcm.io_i16();
        let Ok(io) = io else {
            stats.set_state(PlaybackState::DeviceError);
            std::thread::sleep(RETRY);
            continue;
        };
        let mut next: Option<Queued> = None;
        loop {
            stats.heartbeat.beat();
            let received = match next.take() {
                Some(clip) => Ok(clip),
                None => rx.recv_timeout(Duration::from_millis(100)),
            };
            let mut clip = match received {
                Ok(clip) => clip,
                Err(RecvTimeoutError::Timeout) => {
                    if shared.shutdown.load(Ordering::Acquire) {
                        break 'device;
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break 'device,
            };
            if clip.generation < shared.stop_generation.load(Ordering::Acquire) {
                finish(&mut clip, Outcome::Stopped);
                continue;
            }
            stats.set_speaking(true);
            if let Some(started) = clip.started.take() {
                let _ = started.try_send(());
            }
            // A clip that follows back to back finds the buffer as the
            // last one left it; after a gap, empty.
            pacer.catch_up();
            let generation = clip.generation;
            let mut anchor = match (&shared.reference, cursor) {
                (Some(_), Some(at)) => at,
                (Some(reference), None) => reference.heard(),
                (None, _) => 0,
            };
            let mut position = 0;
            let mut ran_dry = 0u32;
            let mut outcome = Outcome::Finished;
            while position < clip.samples.len() {
                let stopping = shared.stop_generation.load(Ordering::Acquire) != generation;
                let gain = f32::from_bits(shared.gain.load(Ordering::Acquire));
                let frames = if stopping {
                    fade.min(period).min(clip.samples.len() - position)
                } else {
                    period.min(clip.samples.len() - position)
                };
                for i in 0..frames {
                    let ramp = if stopping {
                        1.0 - (i as f32 + 1.0) / frames as f32
                    } else {
                        1.0
                    };
                    let v = (clip.samples[position + i] * gain * ramp).clamp(-1.0, 1.0);
                    let s = (v * 32767.0) as i16;
                    for c in 0..channels {
                        buffer[i * channels + c] = s;
                    }
                }
                let wrote = io.writei(&buffer[..frames * channels]);
                stats.heartbeat.beat();
                match wrote {
                    Ok(written) => {
                        if let (Some(reference), false) = (&shared.reference, stopping) {
                            let rate = u64::from(config.rate);
                            let from = position as u64 * u64::from(PIPELINE_RATE) / rate;
                            let to = ((position + written) as u64 * u64::from(PIPELINE_RATE)
                                / rate)
                                .min(clip.reference.len() as u64);
                            // The two resamplings round apart by a sample
                            // or two at the end: never past the reference.
                            let n = (to.saturating_sub(from) as usize).min(played.len());
                            let from = (from as usize).min(clip.reference.len() - n);
                            // The card ran dry (this thread was held up
                            // longer than its buffer lasts): it plays this
                            // period from now, not where the clip's
                            // timeline said. Placed there, the reference
                            // keeps leading the echo by the same delay, and
                            // the canceller need not learn the room again
                            // while Hark's voice leaks through as a person's.
                            let at = reference.place(anchor + from as u64);
                            if at != anchor + from as u64 {
                                anchor = at - from as u64;
                                ran_dry += 1;
                            }
                            for (p, v) in
                                played[..n].iter_mut().zip(&clip.reference[from..from + n])
                            {
                                *p = v * gain;
                            }
                            reference.write(anchor + from as u64, &played[..n]);
                        }
                        position += written;
                        pacer.pace(written);
                    }
                    Err(e) => {
                        // An underrun (the card ran dry): recover and go on.
                        let failed = if e.errno() == errno::EPIPE {
                            stats.underruns.fetch_add(1, Ordering::Relaxed);
                            pcm.try_recover(e, true).err()
                        } else {
                            Some(e)
                        };
                        // The device failed, or cannot come back from the
                        // underrun (a sound server gone shows as one): the
                        // clip failed and the status says so until the
                        // device opens again.
                        if let Some(e) = failed {
                            tracing::warn!(error = %e, device = %config.device, "playback write failed; reopening");
                            stats.set_error(Some(e.to_string()));
                            stats.set_state(PlaybackState::DeviceError);
                            finish(&mut clip, Outcome::Failed);
                            stats.set_speaking(false);
                            std::thread::sleep(Duration::from_millis(200));
                            continue 'device;
                        }
                    }
                }
                if stopping {
                    // Silence now: discard what the card still holds.
                    let _ = pcm.drop();
                    let _ = pcm.prepare();
                    pacer.reset();
                    if let Some(at) = *shared
                        .stop_requested
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                    {
                        let us = at.elapsed().as_micros().max(1) as u64;
                        stats.last_stop_latency_us.store(us, Ordering::Release);
                    }
                    outcome = Outcome::Stopped;
                    break;
                }
            }
            if ran_dry > 0 {
                tracing::debug!(
                    times = ran_dry,
                    "the speaker ran dry mid-clip; its echo reference moved with it"
                );
            }
            cursor = None;
            if outcome == Outcome::Finished {
                stats.clips_played.fetch_add(1, Ordering::Relaxed);
                // Let the card play out what it holds unless the queue has
                // more, so back-to-back sentences have no gap.
                next = rx.try_recv().ok();
                if next.is_none() {
                    let _ = pcm.drain();
                    let _ = pcm.prepare();
                } else {
                    cursor = Some(anchor + clip.reference.len() as u64);
                }
            }
            finish(&mut clip, outcome);
            // Clips queued before a stop are skipped as they come up (their
            // generation is older); ones queued after it play.
            if next.is_none() || outcome == Outcome::Stopped {
                stats.set_speaking(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_curve() {
        assert_eq!(volume_to_gain(0), 0.0);
        assert!((volume_to_gain(100) - 1.0).abs() < 1e-6);
        let half = volume_to_gain(50);
        assert!(half > 0.01 && half < 0.1, "{half}");
        assert!(volume_to_gain(60) > volume_to_gain(50));
    }
}
