//! Cycling every light for the self-test: each status of the lights table
//! in turn, for a while each, on the board's own lights task — the one
//! place that decides what the lights show (`crate::board`), so the cycle
//! never fights the appliance's state for the LEDs.
//!
//! The two promises of docs/hardware.md outrank the test: a cycle does not
//! start while the mute or an open microphone has the lights, and ends at
//! once if either comes on during it. The lights then show that, as always.
//!
//! While a status shows, what the LED output drew is sampled every
//! [`SAMPLE`] (the simulated LEDs' own frame, or the frame sent to GPIO or
//! SPI): a blinking or pulsing pattern is dark part of the time, so a
//! single look could miss it.

use std::time::Duration;

use hark_board::{
    led::{Light, Pattern, Rgb},
    status::Status,
};
use hark_core::selftest::LightSeen;
use tokio::{sync::oneshot, time::Instant};

/// How often a showing status's frame is looked at.
pub const SAMPLE: Duration = Duration::from_millis(40);
/// A channel at least this bright counts as lit (a quarter: what a plain
/// GPIO LED shows as on, docs/hardware.md).
pub const LIT: u8 = 64;

/// Statuses that are promises: while one is true it shows, test or not.
pub fn promised(status: Status) -> bool {
    matches!(status, Status::Muted | Status::Listening | Status::Asking)
}

/// Why a cycle did not run to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LightsError {
    #[error(
        "the {0} light is on, and stays on for as long as that is true; try again when it is off"
    )]
    Promised(Status),
    #[error("the {0} light came on during the cycle and took the lights back")]
    Interrupted(Status),
    #[error("another light cycle is running")]
    Busy,
    #[error("the board's lights task has stopped")]
    Stopped,
}

/// A request to cycle every light, `each` per status.
#[derive(Debug)]
pub struct LightsRequest {
    pub each: Duration,
    pub done: oneshot::Sender<Result<Vec<LightSeen>, LightsError>>,
}

impl LightsRequest {
    /// Answers that the cycle cannot run.
    pub fn refuse(self, why: LightsError) {
        // The asker gone is nothing to report.
        let _ = self.done.send(Err(why));
    }
}

/// What a sample decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Still on this status, or moved to the next.
    Running,
    /// Every status has shown.
    Done,
}

/// A cycle in progress.
#[derive(Debug)]
pub struct Cycle {
    done: oneshot::Sender<Result<Vec<LightSeen>, LightsError>>,
    each: Duration,
    index: usize,
    /// When the current status's turn ends.
    until: Instant,
    next_sample: Instant,
    current: Option<LightSeen>,
    seen: Vec<LightSeen>,
}

impl Cycle {
    pub fn new(request: LightsRequest, now: Instant) -> Cycle {
        Cycle {
            done: request.done,
            each: request.each,
            index: 0,
            until: now + request.each,
            next_sample: now + SAMPLE,
            current: None,
            seen: Vec::with_capacity(Status::ALL.len()),
        }
    }

    /// The status to show now.
    pub fn showing(&self) -> Status {
        Status::ALL[self.index.min(Status::ALL.len() - 1)]
    }

    /// When to sample next.
    pub fn next_sample(&self) -> Instant {
        self.next_sample
    }

    /// Whoever asked has gone: nobody waits for the result.
    pub fn abandoned(&self) -> bool {
        self.done.is_closed()
    }

    /// Looks at what the output drew (`light`: the light being drawn,
    /// `frame`: its colours), and moves on when the status's turn is over.
    pub fn sample(&mut self, now: Instant, light: &Light, frame: &[Rgb]) -> Progress {
        let lit = frame
            .iter()
            .filter(|Rgb(r, g, b)| *r.max(g).max(b) >= LIT)
            .count();
        let peak = frame
            .iter()
            .map(|Rgb(r, g, b)| *r.max(g).max(b))
            .max()
            .unwrap_or(0);
        let count = frame.len().min(64);
        let mask = if count == 64 {
            u64::MAX
        } else {
            (1u64 << count) - 1
        };
        let expected = light.pattern != Pattern::Off && light.leds & mask != 0;
        let status = self.showing();
        let current = self.current.get_or_insert_with(|| LightSeen {
            status: status.as_str().to_owned(),
            expected,
            lit: 0,
            peak: 0,
        });
        current.expected |= expected;
        current.lit = current.lit.max(lit);
        current.peak = current.peak.max(peak);
        self.next_sample = now + SAMPLE;
        if now < self.until {
            return Progress::Running;
        }
        if let Some(seen) = self.current.take() {
            self.seen.push(seen);
        }
        self.index += 1;
        self.until = now + self.each;
        if self.index >= Status::ALL.len() {
            Progress::Done
        } else {
            Progress::Running
        }
    }

    /// Hands over what every status drew.
    pub fn finish(self) {
        let _ = self.done.send(Ok(self.seen));
    }

    /// Ends the cycle early.
    pub fn abort(self, why: LightsError) {
        let _ = self.done.send(Err(why));
    }
}

#[cfg(test)]
mod tests {
    use hark_board::status::{LedRoles, light};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_status_is_shown_and_what_it_drew_kept() {
        let (done, result) = oneshot::channel();
        let start = Instant::now();
        let mut cycle = Cycle::new(
            LightsRequest {
                each: Duration::from_millis(200),
                done,
            },
            start,
        );
        // One LED per purpose: the listening LED and the error LED only.
        let roles = LedRoles::PerLed(vec![
            vec![Status::Listening, Status::Asking],
            vec![Status::Error],
        ]);
        let mut shown = Vec::new();
        let end = loop {
            let now = cycle.next_sample();
            let status = cycle.showing();
            if shown.last() != Some(&status) {
                shown.push(status);
            }
            let light = light(status, &roles);
            let mut frame = vec![Rgb::OFF; 2];
            light.frame(Duration::from_millis(100), &mut frame);
            if cycle.sample(now, &light, &frame) == Progress::Done {
                break now;
            }
        };
        assert_eq!(shown, Status::ALL.to_vec(), "each status in order");
        assert!(end - start >= Duration::from_millis(200 * 9));
        cycle.finish();
        let seen = result.await.unwrap().unwrap();
        assert_eq!(seen.len(), Status::ALL.len());
        let by = |name: &str| seen.iter().find(|s| s.status == name).unwrap().clone();
        assert!(by("listening").expected && by("listening").lit == 1);
        assert!(by("error").expected && by("error").lit == 1);
        assert!(
            !by("muted").expected && by("muted").lit == 0,
            "no muted LED"
        );
        assert!(!by("speaking").expected);
    }

    #[tokio::test]
    async fn an_aborted_cycle_says_why() {
        let (done, result) = oneshot::channel();
        let cycle = Cycle::new(
            LightsRequest {
                each: Duration::from_millis(200),
                done,
            },
            Instant::now(),
        );
        assert!(!cycle.abandoned());
        cycle.abort(LightsError::Interrupted(Status::Muted));
        let why = result.await.unwrap().unwrap_err();
        assert!(why.to_string().contains("muted light came on"), "{why}");
        assert!(promised(Status::Muted) && promised(Status::Listening));
        assert!(!promised(Status::Speaking));
    }
}
