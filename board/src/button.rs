//! Buttons: raw contact levels in, debounced and classified events out.
//!
//! Every backend (GPIO, the microcontroller link, the simulated board)
//! reports raw levels — the contact closed or open, bounces included — and
//! one classifier per button turns them into what the appliance acts on:
//! press, release, long press and double press. Keeping the timing here, not
//! in each backend, is what makes the simulated button behave like the real
//! one: a simulated tap that lasts 5 ms is a bounce, as it would be on the
//! board.
//!
//! Time is tokio's, so tests drive it with `tokio::time::pause`.

use std::time::Duration;

use tokio::{
    sync::mpsc,
    time::{Instant, sleep_until},
};

/// A button's contact as a backend reads it (after the pin's polarity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Pressed,
    Released,
}

/// What a button did, debounced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ButtonEvent {
    /// The button went down (after the debounce time).
    Press,
    /// The button came up.
    Release,
    /// Held for [`ButtonTiming::long_press`]; sent once per press, while
    /// the button is still down (its release follows later).
    LongPress,
    /// A press that began within [`ButtonTiming::double_press`] of the
    /// previous release; sent right after that second `Press`.
    DoublePress,
}

/// The classifier's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ButtonTiming {
    /// A level must hold this long to count; shorter changes are contact
    /// bounce. Tactile switches settle within 5–20 ms.
    pub debounce: Duration,
    /// Held this long: a long press.
    pub long_press: Duration,
    /// A press starting within this of the last release: a double press.
    pub double_press: Duration,
}

impl Default for ButtonTiming {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(30),
            long_press: Duration::from_millis(800),
            double_press: Duration::from_millis(350),
        }
    }
}

/// Debounces and classifies one button's levels. Pure state: `level` takes
/// raw levels with their time, `deadline` says when it next needs to be
/// woken, `wake` is called then. [`run`] drives it from a channel.
#[derive(Debug)]
pub struct Classifier {
    timing: ButtonTiming,
    /// The level events have been sent for.
    stable: Level,
    /// A different raw level seen at `since`, waiting out the debounce.
    pending: Option<(Level, Instant)>,
    /// When the current press began (stable), if the button is down.
    down_since: Option<Instant>,
    long_sent: bool,
    /// When the last press that may start a double press was released.
    last_release: Option<Instant>,
    /// The current press is the second of a double press.
    second_of_pair: bool,
}

impl Classifier {
    pub fn new(timing: ButtonTiming) -> Self {
        Self {
            timing,
            stable: Level::Released,
            pending: None,
            down_since: None,
            long_sent: false,
            last_release: None,
            second_of_pair: false,
        }
    }

    /// A raw level at `at`. Events come from [`Classifier::wake`] once the
    /// level has held for the debounce time.
    pub fn level(&mut self, level: Level, at: Instant) {
        if level == self.stable {
            // Back to where it was before the debounce ran out: a bounce.
            self.pending = None;
        } else if self.pending.map(|(l, _)| l) != Some(level) {
            self.pending = Some((level, at));
        }
    }

    /// When [`Classifier::wake`] next has something to do.
    pub fn deadline(&self) -> Option<Instant> {
        let settle = self.pending.map(|(_, since)| since + self.timing.debounce);
        let long = match (self.down_since, self.long_sent) {
            (Some(since), false) => Some(since + self.timing.long_press),
            _ => None,
        };
        match (settle, long) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Events due at `now`, in order, into `out`.
    pub fn wake(&mut self, now: Instant, out: &mut Vec<ButtonEvent>) {
        if let Some((level, since)) = self.pending
            && now >= since + self.timing.debounce
        {
            self.pending = None;
            self.stable = level;
            match level {
                Level::Pressed => {
                    // The press counts from when the contact closed, not
                    // from when the debounce confirmed it.
                    self.down_since = Some(since);
                    self.long_sent = false;
                    out.push(ButtonEvent::Press);
                    if self.last_release.is_some_and(|r| {
                        since.saturating_duration_since(r) <= self.timing.double_press
                    }) {
                        out.push(ButtonEvent::DoublePress);
                        self.second_of_pair = true;
                    }
                    self.last_release = None;
                }
                Level::Released => {
                    self.down_since = None;
                    out.push(ButtonEvent::Release);
                    // The end of a double press starts no new pair (a
                    // third quick press is not another double press); any
                    // other release may be the first half of one.
                    self.last_release = if std::mem::take(&mut self.second_of_pair) {
                        None
                    } else {
                        Some(since)
                    };
                }
            }
        }
        if let Some(since) = self.down_since
            && !self.long_sent
            && now >= since + self.timing.long_press
        {
            self.long_sent = true;
            out.push(ButtonEvent::LongPress);
        }
    }
}

/// Classifies the raw levels of one button from `levels` and sends its
/// events to `events` until either side closes.
pub async fn run(
    mut levels: mpsc::Receiver<Level>,
    events: mpsc::Sender<ButtonEvent>,
    timing: ButtonTiming,
) {
    let mut classifier = Classifier::new(timing);
    let mut out = Vec::with_capacity(4);
    loop {
        let deadline = classifier.deadline();
        tokio::select! {
            level = levels.recv() => match level {
                Some(level) => classifier.level(level, Instant::now()),
                None => return,
            },
            () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                classifier.wake(Instant::now(), &mut out);
                for event in out.drain(..) {
                    if events.send(event).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}
