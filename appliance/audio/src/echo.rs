//! Echo cancellation: Hark's own speech taken out of what the microphones
//! hear, with what the speaker plays as the reference, so the person can
//! be heard while Hark talks.
//!
//! The canceller is WebRTC's AEC3 (the `aec3` crate, a pure-Rust port): an
//! adaptive filter that learns the echo path from the speaker to the
//! microphone, its own delay estimator (the reference may lead the echo by
//! up to a few hundred milliseconds), and a suppressor for what the filter
//! leaves. Chosen over speexdsp (Debian's) by measurement on recorded
//! people with a simulated room: it removes 15–20 dB more echo and keeps
//! the person's words (docs/benchmarks.md, "Echo cancellation").
//!
//! Everything works on 10 ms frames of the 16 kHz pipeline stream.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use aec3::nodes::audio::AudioFormat;
use aec3::pipelines::linear::{self, LinearPipeline};

use crate::{config::PIPELINE_RATE, ring::Ring};

/// Samples in one frame: 10 ms at 16 kHz, what AEC3 works on.
pub const FRAME: usize = (PIPELINE_RATE / 100) as usize;

#[derive(Debug, thiserror::Error)]
pub enum EchoError {
    #[error("the echo canceller cannot start: {0}")]
    Start(String),
    #[error("the echo canceller failed on a frame: {0}")]
    Frame(String),
}

/// The voice detector's settings that decide a barge-in: `vad`'s, with
/// `barge_in_ms` of speech needed. One rule for the daemon's watch and
/// `hark-bench echo`, which measures it.
pub fn barge_in_rule(vad: &crate::config::VadConfig, barge_in_ms: u32) -> crate::config::VadConfig {
    crate::config::VadConfig {
        min_speech_ms: barge_in_ms,
        ..vad.clone()
    }
}

/// AEC3's settings beyond its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stages {
    /// WebRTC's noise suppressor after the canceller.
    pub noise_suppression: bool,
    /// The adaptive filter's length in 4 ms blocks (0: AEC3's own 13,
    /// 52 ms, which leaves a room's reverberation to the suppressor).
    pub filter_blocks: usize,
    /// The echo reduction, dB, by AEC3's own estimate, a new canceller
    /// reaches before its suppressed output may pass anything (0: none;
    /// see [`LEARNED_ERLE_DB`]).
    pub learned_erle_db: f64,
}

/// The filter length Hark runs: 320 ms of a room's reverberation removed
/// by subtraction, not by the suppressor. Against 160 ms the person's
/// words while Hark speaks have 17–57 fewer errors in 100 in a reverberant
/// room (3–10 near the speaker), and the barge-in reacts sooner, for 0.1 %
/// more of a core (docs/benchmarks.md).
pub const FILTER_BLOCKS: usize = 80;

impl Stages {
    /// What the appliance runs.
    pub fn hark() -> Self {
        Self {
            noise_suppression: false,
            filter_blocks: FILTER_BLOCKS,
            learned_erle_db: LEARNED_ERLE_DB,
        }
    }
}

/// A new canceller knows nothing of the room: until its filter has learned
/// the echo, its suppressor lets Hark's voice and the room's reverberation
/// between its words through at nearly the level the microphone heard
/// them, and the voice detector, which does not judge by loudness, takes
/// that for a person: Hark's first speech after start would stop itself
/// within a second or two in a reverberant room. The suppressed output
/// (what decides a barge-in) stays silent until AEC3 reports this much echo
/// removed; the filter's output (what listens hear) is not held. How long
/// that takes depends on the room (some 3 s of Hark's voice near the
/// speaker, 6–10 s in a reverberant room); chosen on `hark-bench echo`'s
/// cold starts (docs/benchmarks.md).
pub const LEARNED_ERLE_DB: f64 = 10.0;

/// A suppressed frame this far under the microphone's (20 dB, as a power
/// ratio) is echo, not a person (see [`Canceller::process`]).
const SUPPRESSED_GATE: f32 = 0.01;

/// How far AEC3's suppressed output runs behind the microphone: two of its
/// 4 ms blocks. Measured (`the_suppressed_output_runs_two_blocks_behind`);
/// the gate compares each output frame with the microphone it came from.
const SUPPRESSED_LAG: usize = 128;

fn power(frame: &[f32]) -> f32 {
    frame.iter().map(|v| v * v).sum::<f32>()
}

/// One frame out of the canceller, two ways.
#[derive(Debug, Clone)]
pub struct Cleaned {
    /// The adaptive filter's output: the echo it models subtracted, the
    /// person's voice untouched. What listens hear.
    pub linear: [f32; FRAME],
    /// After AEC3's suppressor as well: what the filter left of the echo
    /// masked too, and the person's voice with it where the two overlap;
    /// a frame the suppressor took 20 dB or more from is silence. What
    /// decides a barge-in, where echo must never pass for a person.
    pub suppressed: [f32; FRAME],
}

impl Default for Cleaned {
    fn default() -> Self {
        Self {
            linear: [0.0; FRAME],
            suppressed: [0.0; FRAME],
        }
    }
}

/// One echo canceller: feed it what the speaker played and what the
/// microphone heard, 10 ms of each at a time, in step.
pub struct Canceller {
    pipeline: LinearPipeline,
    /// The previous microphone frame: the suppressed output of this one
    /// is mostly made of it.
    previous: [f32; FRAME],
    /// The echo reduction it must reach before the suppressed output
    /// passes anything ([`Stages::learned_erle_db`]); 0 once it has.
    learning: f64,
}

impl Canceller {
    pub fn new(stages: Stages) -> Result<Self, EchoError> {
        let format = AudioFormat::ten_ms(PIPELINE_RATE, 1);
        let mut config = aec3::api::config::EchoCanceller3Config::default();
        if stages.filter_blocks > 0 {
            config.filter.main.length_blocks = stages.filter_blocks;
            config.filter.shadow.length_blocks = stages.filter_blocks;
        }
        let pipeline = linear::builder(format, format)
            .aec3_config(config)
            .enable_high_pass_filter(true)
            .enable_noise_suppression(stages.noise_suppression)
            // Levels are the recogniser's business, not the canceller's.
            .enable_gain_controller2(false)
            .export_linear_output(true)
            .export_metrics(stages.learned_erle_db > 0.0)
            .build()
            .map_err(|e| EchoError::Start(e.to_string()))?;
        Ok(Self {
            pipeline,
            previous: [0.0; FRAME],
            learning: stages.learned_erle_db,
        })
    }

    /// Whether it has learned the room: its suppressed output passes
    /// what it does not take for echo.
    pub fn learned(&self) -> bool {
        self.learning == 0.0
    }

    /// One frame: `reference` is what the speaker played in these 10 ms
    /// (zeros when silent), `mic` what the microphone heard.
    pub fn process(
        &mut self,
        reference: &[f32; FRAME],
        mic: &[f32; FRAME],
        out: &mut Cleaned,
    ) -> Result<(), EchoError> {
        let failed = |e: aec3::graph::GraphError| EchoError::Frame(e.to_string());
        self.pipeline
            .handle_render_frame(reference)
            .map_err(failed)?;
        let produced = self
            .pipeline
            .process_capture_frame(mic, &mut out.suppressed)
            .map_err(failed)?;
        if !produced {
            // The pipeline holds the first frame back while it fills its
            // block: pass the microphone through rather than a gap.
            out.suppressed.copy_from_slice(mic);
        }
        // Where the suppressor took most of what the microphone heard, what
        // is left is echo it could not model: a person's voice over Hark
        // keeps most of its level. Silenced, it never passes for a person.
        // Compared with the microphone it was made from: against this
        // frame's, the tail of a loud frame of echo would be measured
        // against the quiet one after it and pass.
        let heard =
            power(&self.previous[FRAME - SUPPRESSED_LAG..]) + power(&mic[..FRAME - SUPPRESSED_LAG]);
        self.previous = *mic;
        if self.learning > 0.0 {
            // AEC3 reports its estimate once it leaves its initial state
            // (2.5 s of Hark's voice); before that, a placeholder.
            if let Some(metrics) = self.pipeline.try_pull_metrics().map_err(failed)?
                && metrics.payload().echo_return_loss_enhancement >= self.learning
            {
                self.learning = 0.0;
            }
        }
        if self.learning > 0.0 || power(&out.suppressed) < heard * SUPPRESSED_GATE {
            out.suppressed.fill(0.0);
        }
        match self.pipeline.try_pull_linear_output().map_err(failed)? {
            Some(frame) => out.linear.copy_from_slice(frame.payload().samples()),
            None => out.linear.copy_from_slice(&out.suppressed),
        }
        Ok(())
    }
}

/// What the speaker plays, placed at the capture position (samples of the
/// 16 kHz stream since capture started) where the microphone will hear it.
///
/// The playback thread writes each period as it hands it to the device,
/// at the capture position of that moment: the device and the air delay
/// the echo after that, never before, so the reference always leads and
/// AEC3's delay estimator finds the rest. The capture thread keeps the
/// clock (`heard`); the echo thread reads the reference for each frame of
/// the microphone. Slots carry the position they hold: one not written
/// for a position (Hark silent) reads as zero. Nothing here allocates
/// after [`Reference::new`] or waits.
pub struct Reference {
    samples: Box<[AtomicU32]>,
    /// Position + 1 of the sample in each slot (0: never written).
    tags: Box<[AtomicU64]>,
    /// The capture clock: for each of the last periods stored, when (ns
    /// after `base`) capture position 0 was heard by its account (see
    /// [`Reference::set_heard`]); `u64::MAX` where none yet.
    origins: Box<[AtomicU64]>,
    periods: AtomicU64,
    base: Instant,
}

/// Periods the capture clock remembers: some two and a half seconds.
const CLOCK_PERIODS: usize = 128;

impl Reference {
    /// Two seconds: far more than the playback thread ever writes ahead.
    pub fn new() -> Self {
        let len = 2 * PIPELINE_RATE as usize;
        Self {
            samples: (0..len).map(|_| AtomicU32::new(0)).collect(),
            tags: (0..len).map(|_| AtomicU64::new(0)).collect(),
            origins: (0..CLOCK_PERIODS)
                .map(|_| AtomicU64::new(u64::MAX))
                .collect(),
            periods: AtomicU64::new(0),
            base: Instant::now(),
        }
    }

    /// Nanoseconds on the clock's own scale: from an hour before `base`,
    /// so an origin is never before zero.
    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64 + 3_600_000_000_000
    }

    /// The capture thread: `position` samples are stored as of now.
    ///
    /// A read returns when its period is complete, or later when the
    /// thread was slow: each implies an origin at or after the true one,
    /// and the clock takes the earliest of the last few seconds' (older
    /// ones expire, so a burst at start or an overrun is forgotten).
    /// Placing speech by when one period happened to be read would move
    /// it by up to a period from one reply to the next, and AEC3's filter
    /// would have to learn the room again each time.
    pub fn set_heard(&self, position: u64) {
        let implied = self
            .now_ns()
            .saturating_sub(position * 1_000_000_000 / u64::from(PIPELINE_RATE));
        let period = self.periods.fetch_add(1, Ordering::AcqRel);
        self.origins[period as usize % CLOCK_PERIODS].store(implied, Ordering::Release);
    }

    /// The capture position of now (0 before capture stored anything).
    pub fn heard(&self) -> u64 {
        let origin = self
            .origins
            .iter()
            .map(|o| o.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX);
        if origin == u64::MAX {
            return 0;
        }
        self.now_ns().saturating_sub(origin) * u64::from(PIPELINE_RATE) / 1_000_000_000
    }

    /// Where sound the playback thread meant for capture position
    /// `planned` is heard: there, unless the microphone is already past
    /// it (the card ran dry and plays it only now), then now.
    pub fn place(&self, planned: u64) -> u64 {
        planned.max(self.heard())
    }

    /// The playback thread: `data` will be heard from capture position `at`.
    pub fn write(&self, at: u64, data: &[f32]) {
        let len = self.samples.len() as u64;
        for (i, v) in data.iter().enumerate() {
            let position = at + i as u64;
            let slot = (position % len) as usize;
            self.samples[slot].store(v.to_bits(), Ordering::Relaxed);
            self.tags[slot].store(position + 1, Ordering::Release);
        }
    }

    /// The echo thread: what the speaker played for the capture positions
    /// from `from` on (zero where it played nothing).
    pub fn read(&self, from: u64, out: &mut [f32]) {
        let len = self.samples.len() as u64;
        for (i, v) in out.iter_mut().enumerate() {
            let position = from + i as u64;
            let slot = (position % len) as usize;
            *v = if self.tags[slot].load(Ordering::Acquire) == position + 1 {
                f32::from_bits(self.samples[slot].load(Ordering::Relaxed))
            } else {
                0.0
            };
        }
    }
}

impl Default for Reference {
    fn default() -> Self {
        Self::new()
    }
}

/// The echo thread: reads the microphone's ring 10 ms at a time, takes
/// Hark's own speech out with the [`Reference`], and writes what is left
/// to the ring everything else listens to, at the same positions. Its own
/// thread, not the capture thread: AEC3 allocates small buffers per frame,
/// and the capture thread must not wait on the allocator.
pub struct EchoStage {
    ring: Arc<Ring>,
    suppressed: Arc<Ring>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// How often the echo thread looks for new audio: a capture period comes
/// every 20 ms; this adds at most 5 ms to what listeners hear.
const POLL: Duration = Duration::from_millis(5);

impl EchoStage {
    pub fn start(
        microphone: Arc<Ring>,
        reference: Arc<Reference>,
        stages: Stages,
    ) -> Result<Self, EchoError> {
        let ring = Arc::new(Ring::new(microphone.capacity()));
        let suppressed = Arc::new(Ring::new(microphone.capacity()));
        let stop = Arc::new(AtomicBool::new(false));
        // AEC3's graph is not `Send`: it is made on the thread that runs
        // it, which says whether it could.
        let (started_tx, started) = std::sync::mpsc::sync_channel(1);
        let thread = {
            let out = [Arc::clone(&ring), Arc::clone(&suppressed)];
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("hark-echo".into())
                .spawn(move || match Canceller::new(stages) {
                    Ok(mut canceller) => {
                        let _ = started_tx.send(Ok(()));
                        run(&microphone, &reference, &mut canceller, &out, &stop);
                    }
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                    }
                })
                .map_err(|e| EchoError::Start(e.to_string()))?
        };
        started
            .recv()
            .map_err(|_| EchoError::Start("its thread ended".into()))??;
        Ok(Self {
            ring,
            suppressed,
            stop,
            thread: Some(thread),
        })
    }

    /// The microphone without Hark's echo ([`Cleaned::linear`]), at the
    /// microphone's positions.
    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    /// The same with AEC3's suppressor too ([`Cleaned::suppressed`]).
    pub fn suppressed(&self) -> &Arc<Ring> {
        &self.suppressed
    }
}

impl Drop for EchoStage {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(
    microphone: &Ring,
    reference: &Reference,
    canceller: &mut Canceller,
    out: &[Arc<Ring>; 2],
    stop: &AtomicBool,
) {
    let mut reader = microphone.reader(0);
    let (mut mic, mut played) = ([0.0; FRAME], [0.0; FRAME]);
    let mut clean = Cleaned::default();
    let mut failed = false;
    let mut learned = canceller.learned();
    while !stop.load(Ordering::Acquire) {
        while reader.available() >= FRAME {
            let at = reader.position();
            if reader.read(&mut mic) < FRAME {
                // Fell a whole ring behind (never in practice): the frame is
                // incomplete; keep the positions in step with silence.
                mic.fill(0.0);
            }
            reference.read(at, &mut played);
            if let Err(e) = canceller.process(&played, &mic, &mut clean) {
                if !failed {
                    tracing::error!(error = %e, "echo cancellation failed; the microphone passes through");
                    failed = true;
                }
                clean.linear = mic;
                clean.suppressed = mic;
            }
            if !learned && canceller.learned() {
                learned = true;
                tracing::info!(
                    at,
                    "the echo canceller has learned the room: the person can speak over Hark"
                );
            }
            out[0].push(&clean.linear);
            out[1].push(&clean.suppressed);
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic noise-like signal, as speech's spectrum stands in
    /// for nothing here: the filter only needs something broadband.
    fn noise(n: usize, seed: u32) -> Vec<f32> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    }

    fn mean_power(x: &[f32]) -> f32 {
        power(x) / x.len().max(1) as f32
    }

    /// Runs `mic` and `reference` through a canceller with `stages`: the
    /// filter's output, the suppressed output, and the sample where it
    /// learned the room.
    fn run(stages: Stages, reference: &[f32], mic: &[f32]) -> (Vec<f32>, Vec<f32>, Option<usize>) {
        let mut canceller = Canceller::new(stages).expect("canceller");
        let mut clean = Cleaned::default();
        let (mut linear, mut suppressed, mut learned_at) = (Vec::new(), Vec::new(), None);
        for (i, (r, m)) in reference
            .chunks_exact(FRAME)
            .zip(mic.chunks_exact(FRAME))
            .enumerate()
        {
            canceller
                .process(
                    r.try_into().expect("frame"),
                    m.try_into().expect("frame"),
                    &mut clean,
                )
                .expect("frame");
            linear.extend_from_slice(&clean.linear);
            suppressed.extend_from_slice(&clean.suppressed);
            if learned_at.is_none() && canceller.learned() {
                learned_at = Some(i * FRAME);
            }
        }
        (linear, suppressed, learned_at)
    }

    /// The filter's output of Hark's canceller.
    fn cancel(reference: &[f32], mic: &[f32]) -> Vec<f32> {
        run(Stages::hark(), reference, mic).0
    }

    #[test]
    fn removes_a_delayed_echo_and_keeps_the_near_voice() {
        let seconds = 8;
        let n = seconds * PIPELINE_RATE as usize;
        let reference: Vec<f32> = noise(n, 1).iter().map(|v| v * 0.3).collect();
        // The echo: 30 ms late, quieter, with one reflection.
        let (delay, bounce) = (480, 1200);
        let echo: Vec<f32> = (0..n)
            .map(|i| {
                let direct = i.checked_sub(delay).map_or(0.0, |j| reference[j] * 0.5);
                let reflected = i.checked_sub(bounce).map_or(0.0, |j| reference[j] * 0.2);
                direct + reflected
            })
            .collect();
        let out = cancel(&reference, &echo);
        let tail = n / 2..n;
        let erle =
            10.0 * (mean_power(&echo[tail.clone()]) / mean_power(&out[tail]).max(1e-12)).log10();
        assert!(erle > 20.0, "echo reduced by only {erle:.1} dB");

        // With nothing played, what the microphone hears passes through.
        let near: Vec<f32> = noise(n, 2).iter().map(|v| v * 0.1).collect();
        let out = cancel(&vec![0.0; n], &near);
        let kept = 10.0 * (mean_power(&out[n / 2..]) / mean_power(&near[n / 2..])).log10();
        assert!(kept.abs() < 3.0, "the near voice changed by {kept:.1} dB");
    }

    #[test]
    fn a_new_canceller_lets_nothing_decide_a_barge_in_until_it_has_learned_the_room() {
        let n = 10 * PIPELINE_RATE as usize;
        let reference: Vec<f32> = noise(n, 1).iter().map(|v| v * 0.3).collect();
        // Hark's echo, 30 ms late, and a person for 0.3 s at 1 s and at 9 s.
        let person = noise(n, 3);
        let spoke = |i: usize| (16_000..20_800).contains(&i) || (144_000..148_800).contains(&i);
        let mic: Vec<f32> = (0..n)
            .map(|i| {
                let echo = i.checked_sub(480).map_or(0.0, |j| reference[j] * 0.5);
                echo + if spoke(i) { person[i] * 0.3 } else { 0.0 }
            })
            .collect();
        let (linear, suppressed, learned_at) = run(Stages::hark(), &reference, &mic);
        let learned_at = learned_at.expect("learned the room in 10 s of Hark's voice");
        assert!(
            (24_000..144_000).contains(&learned_at),
            "learned at {learned_at}"
        );
        // Before: nothing passes for a barge-in, not even the person; the
        // filter's output, what listens hear, keeps them.
        assert_eq!(power(&suppressed[..learned_at]), 0.0);
        assert!(mean_power(&linear[16_000..20_800]) > 0.001);
        // After: the person passes, and Hark's echo does not.
        assert!(mean_power(&suppressed[144_200..148_800]) > 0.001);
        assert!(mean_power(&suppressed[150_000..]) < 1e-6);
    }

    #[test]
    fn the_reference_gives_back_what_was_played_where_it_was_placed() {
        let reference = Reference::new();
        reference.write(1000, &[0.5; 320]);
        let mut out = [1.0; 480];
        reference.read(840, &mut out);
        assert!(out[..160].iter().all(|v| *v == 0.0), "before it: silence");
        assert!(out[160..].iter().all(|v| *v == 0.5));
        // Two seconds on, the same slots hold something else: the old
        // position reads as silence, not as the newer sound.
        let later = 1000 + 2 * u64::from(PIPELINE_RATE);
        reference.write(later, &[0.25; 320]);
        reference.read(1000, &mut out[..320]);
        assert!(out[..320].iter().all(|v| *v == 0.0));
        reference.read(later, &mut out[..320]);
        assert!(out[..320].iter().all(|v| *v == 0.25));
    }

    #[test]
    fn the_suppressed_output_runs_two_blocks_behind() {
        // A burst of sound with nothing played: the suppressor passes it,
        // late by the lag the gate allows for.
        let mut mic = vec![0.0; 100 * FRAME];
        mic[30 * FRAME + 50..40 * FRAME].copy_from_slice(&noise(10 * FRAME - 50, 7));
        let stages = Stages {
            learned_erle_db: 0.0,
            ..Stages::hark()
        };
        let (_, out, _) = run(stages, &vec![0.0; mic.len()], &mic);
        let along = |lag: usize| -> f32 { mic.iter().zip(&out[lag..]).map(|(a, b)| a * b).sum() };
        let lag = (0..2 * FRAME)
            .max_by(|a, b| along(*a).total_cmp(&along(*b)))
            .expect("lags");
        assert_eq!(lag, SUPPRESSED_LAG);
        // The frame after the burst holds its last 8 ms and is measured
        // against them: a voice is kept to its end.
        assert!(power(&out[40 * FRAME..41 * FRAME]) > 0.0);
    }

    #[test]
    fn sound_meant_for_a_moment_already_heard_is_placed_now() {
        let reference = Reference::new();
        reference.set_heard(16_000);
        let now = reference.heard();
        // Ahead of the microphone, as a card's buffer keeps it: where planned.
        assert_eq!(reference.place(now + 1_000), now + 1_000);
        // Behind it: the card ran dry and plays it from now on.
        let placed = reference.place(now - 1_000);
        assert!((now..now + 800).contains(&placed), "{placed} against {now}");
    }

    #[test]
    fn the_capture_clock_keeps_the_earliest_account_and_ignores_a_late_read() {
        let reference = Reference::new();
        assert_eq!(reference.heard(), 0, "no capture yet");
        // Capture stored 1 s as of now: position 16000 now.
        reference.set_heard(16_000);
        let at = reference.heard();
        assert!((16_000..16_000 + 800).contains(&at), "{at}");
        // A read that came 30 ms late implies a later origin: the clock
        // keeps the earlier one.
        std::thread::sleep(Duration::from_millis(30));
        reference.set_heard(16_000);
        let now = reference.heard();
        assert!(now >= 16_000 + 400, "{now}: the clock went on with time");
        // A burst that implies an earlier origin moves it.
        reference.set_heard(48_000);
        assert!(reference.heard() >= 48_000, "{}", reference.heard());
    }
}
