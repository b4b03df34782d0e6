//! Holding a device to the wall clock.
//!
//! A sound card's clock paces `readi`/`writei` by itself. A device that
//! answers faster than real time — the virtual card (ALSA's `file` plugin is
//! not paced), or a broken driver — would turn an audio thread into a busy
//! loop: capture would flood the ring, playback would "finish" a sentence
//! instantly. [`Pacer`] sleeps whenever the audio moved further ahead of
//! real time than allowed; on real hardware it never sleeps.

use std::time::{Duration, Instant};

pub struct Pacer {
    rate: f64,
    ahead: Duration,
    since: Instant,
    frames: u64,
    warned: bool,
}

impl Pacer {
    /// `ahead`: how far the device may run ahead of real time.
    pub fn new(rate: u32, ahead: Duration) -> Self {
        Self {
            rate: f64::from(rate),
            ahead,
            since: Instant::now(),
            frames: 0,
            warned: false,
        }
    }

    /// Starts counting afresh (after a pause in the stream).
    pub fn reset(&mut self) {
        self.since = Instant::now();
        self.frames = 0;
    }

    /// Accounts for `frames` transferred, sleeping if that put the stream
    /// too far ahead of the wall clock.
    pub fn pace(&mut self, frames: usize) {
        self.frames += frames as u64;
        let audio = Duration::from_secs_f64(self.frames as f64 / self.rate);
        let wall = self.since.elapsed();
        if audio > wall + self.ahead {
            if !self.warned {
                tracing::debug!("device runs faster than real time; pacing it");
                self.warned = true;
            }
            std::thread::sleep(audio - wall - self.ahead / 2);
        } else if wall > audio + Duration::from_secs(1) {
            // We fell behind (an xrun, a suspended machine): start over
            // rather than let the device burst to catch up.
            self.reset();
        }
    }
}
