//! Stop-to-silence latency: the player plays a long clip on the virtual
//! speaker, the bench calls `stop()` after a varying delay and reads the
//! engine's own measure (`stats().last_stop_latency()`: from the stop
//! request to the device's buffer dropped), and, as a check from outside,
//! the time from calling `stop()` to receiving the clip's `Stopped` outcome.

use std::{
    sync::{Arc, atomic::AtomicBool, atomic::Ordering},
    time::{Duration, Instant},
};

use anyhow::Context;
use hark_audio::{
    clip::Clip,
    config::PlaybackConfig,
    playback::{Outcome, PlaybackState, Player},
};

use super::signal::{self, RATE};

#[derive(Debug)]
pub struct StopResult {
    /// The engine's stop → silence, one per trial that stopped.
    pub engine: Vec<Duration>,
    /// stop() → `Outcome::Stopped` received, as the bench saw it.
    pub observed: Vec<Duration>,
    pub trials: usize,
    /// Trials where the clip did not report `Stopped` (should be none).
    pub failures: Vec<String>,
    pub underruns: u64,
    pub config: PlaybackConfig,
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    anyhow::bail!("timed out after {timeout:?} waiting for {what}")
}

/// A long clip: `speech` over and over, to at least 3 s.
fn long_clip(speech: &[f32]) -> Clip {
    let mut samples = Vec::new();
    while samples.len() < 3 * RATE && !speech.is_empty() {
        samples.extend_from_slice(speech);
        samples.extend(std::iter::repeat_n(0.0, signal::samples(100)));
    }
    Clip {
        samples,
        rate: RATE as u32,
    }
}

pub fn measure(speech: &[f32], trials: usize) -> anyhow::Result<StopResult> {
    // The daemon's defaults (48 kHz stereo, 20 ms periods, 4 of them, 8 ms
    // fade) on the virtual speaker.
    let config = PlaybackConfig {
        device: "hark_virtual_speaker".into(),
        ..PlaybackConfig::default()
    };
    let speaking = Arc::new(AtomicBool::new(false));
    let player =
        Player::start(config.clone(), Arc::clone(&speaking)).context("cannot start the player")?;
    wait_for("the virtual speaker", Duration::from_secs(10), || {
        player.stats().state() == PlaybackState::Ready
    })
    .with_context(|| format!("the player is {}", player.stats().describe()))?;
    let clip = long_clip(speech);
    let mut result = StopResult {
        engine: Vec::new(),
        observed: Vec::new(),
        trials,
        failures: Vec::new(),
        underruns: 0,
        config,
    };
    // Delays of 150–850 ms from an xorshift sequence: the stop lands at a
    // different point of a period each time.
    let mut x = 0x2545_f491_u32;
    for trial in 0..trials {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let delay = Duration::from_millis(150 + u64::from(x % 700));
        let done = player.play(&clip).context("cannot queue the clip")?;
        wait_for("the speaker to start", Duration::from_secs(2), || {
            speaking.load(Ordering::Acquire)
        })?;
        std::thread::sleep(delay);
        let stopped_at = Instant::now();
        player.stop();
        match done.recv_timeout(Duration::from_secs(2)) {
            Ok(Outcome::Stopped) => {
                result.observed.push(stopped_at.elapsed());
                // Written before the outcome is sent, so it is this stop's.
                match player.stats().last_stop_latency() {
                    Some(latency) => result.engine.push(latency),
                    None => result
                        .failures
                        .push(format!("trial {trial}: stopped, but no latency recorded")),
                }
            }
            other => result
                .failures
                .push(format!("trial {trial}: {other:?} instead of Stopped")),
        }
        wait_for("the speaker to go quiet", Duration::from_secs(2), || {
            !speaking.load(Ordering::Acquire)
        })?;
    }
    result.underruns = player.stats().underruns.load(Ordering::Relaxed);
    Ok(result)
}
