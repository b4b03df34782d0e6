//! Whether an audio thread is still running, for the watchdog's health
//! check. A thread that ends says so in its state; a thread stuck inside
//! the device (a driver or sound server that stopped answering, a read or
//! write that never returns) says nothing at all, so each loop of the
//! capture and playback threads marks the time here, and the health check
//! fails once a thread has been silent for longer than any of its loops
//! can legitimately take ([`STALLED_AFTER`]).

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

/// How long an audio thread may go without a beat before the health check
/// calls it stalled. Every wait in the threads' loops is bounded far below
/// this: a period (20 ms) per read or write, 100 ms waiting for a clip,
/// 50 ms steps between retries, a buffer (80 ms) draining.
pub const STALLED_AFTER: Duration = Duration::from_secs(5);

/// The last time a thread went round its loop. Lock-free and free of
/// allocation, so the audio path can beat every period.
#[derive(Debug)]
pub struct Heartbeat {
    epoch: Instant,
    /// Milliseconds after `epoch`.
    last: AtomicU64,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
        }
    }
}

impl Heartbeat {
    /// The thread is running now.
    pub fn beat(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last.store(now, Ordering::Relaxed);
    }

    /// How long since the last beat (or since it was made, before any).
    pub fn silent_for(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// `Err` naming the thread and how long it has been silent, once that
    /// is longer than [`STALLED_AFTER`].
    pub fn check(&self, thread: &str) -> Result<(), String> {
        let silent = self.silent_for();
        if silent > STALLED_AFTER {
            return Err(format!(
                "the {thread} thread has not run for {} s (stuck in the device)",
                silent.as_secs()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_beat_resets_the_silence_and_a_long_silence_fails_the_check() {
        let heart = Heartbeat::default();
        heart.beat();
        assert!(heart.silent_for() < Duration::from_secs(1));
        assert_eq!(heart.check("capture"), Ok(()));
        // As if the last beat were six seconds ago.
        let stale = Heartbeat {
            epoch: Instant::now() - Duration::from_secs(6),
            last: AtomicU64::new(0),
        };
        let why = stale.check("capture").unwrap_err();
        assert!(
            why.starts_with("the capture thread has not run for 6 s"),
            "{why}"
        );
        stale.beat();
        assert_eq!(stale.check("capture"), Ok(()));
    }
}
