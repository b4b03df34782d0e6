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
    room: Duration,
    since: Instant,
    frames: u64,
    warned: bool,
}

impl Pacer {
    /// `ahead`: how far the device may run ahead of real time.
    pub fn new(rate: u32, ahead: Duration) -> Self {
        Self::with_room(rate, ahead, ahead / 2)
    }

    /// As [`Pacer::new`], where a device that ran `ahead` is held until
    /// it is `room` less ahead: as a card's buffer frees a period at a time.
    pub fn with_room(rate: u32, ahead: Duration, room: Duration) -> Self {
        Self {
            rate: f64::from(rate),
            ahead,
            room: room.min(ahead),
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

    /// Starts counting afresh if the stream has fallen behind real time
    /// (the device ran dry between two streams); one still ahead goes on.
    pub fn catch_up(&mut self) {
        let audio = Duration::from_secs_f64(self.frames as f64 / self.rate);
        if self.since.elapsed() >= audio {
            self.reset();
        }
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
            std::thread::sleep(audio - wall - self.ahead + self.room);
        } else if wall > audio + Duration::from_secs(1) {
            // We fell behind (an xrun, a suspended machine): start over
            // rather than let the device burst to catch up.
            self.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: u32 = 16_000;
    const PERIOD: usize = 320; // 20 ms

    fn card() -> Pacer {
        Pacer::with_room(RATE, Duration::from_millis(80), Duration::from_millis(20))
    }

    /// Writes `periods` periods and returns how long that took.
    fn write(pacer: &mut Pacer, periods: usize) -> Duration {
        let started = Instant::now();
        for _ in 0..periods {
            pacer.pace(PERIOD);
        }
        started.elapsed()
    }

    #[test]
    fn a_card_takes_a_whole_buffer_at_once_then_a_period_at_a_time() {
        let mut pacer = card();
        // Four periods fill the 80 ms buffer: no wait (a card starts
        // playing the first at once).
        assert!(write(&mut pacer, 4) < Duration::from_millis(30));
        // The fifth waits until a period has played: 100 ms written, held
        // to 60 ms ahead.
        assert!(write(&mut pacer, 1) >= Duration::from_millis(35));
    }

    #[test]
    fn a_stream_still_ahead_goes_on_where_it_was() {
        let mut pacer = card();
        write(&mut pacer, 4);
        pacer.catch_up();
        // Back to back: the buffer is still full, so the next period waits.
        assert!(write(&mut pacer, 1) >= Duration::from_millis(15));
    }

    #[test]
    fn after_a_gap_the_buffer_is_empty_again() {
        let mut pacer = card();
        write(&mut pacer, 2);
        std::thread::sleep(Duration::from_millis(60));
        pacer.catch_up();
        // The 40 ms written have played: a whole buffer fits again.
        assert!(write(&mut pacer, 4) < Duration::from_millis(30));
    }
}
