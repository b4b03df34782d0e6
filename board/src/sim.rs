//! The simulated board: for machines without GPIO (laptops, CI, this
//! appliance's development VM). It is not a mock: its button feeds raw
//! contact levels through the same debounce and classifier as a GPIO
//! button, its mute switch is a switch with a position, and its LEDs take
//! the same frames a ring would, kept for `get_status` and the logs.
//!
//! `hark button press|hold|release` and `hark mute on|off` reach it through
//! the running daemon ([`SimControl`]).

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::sync::mpsc;

use crate::{
    button::Level,
    led::{LedError, LedOutput, Rgb},
};

/// How long `press` holds the simulated button down: a quick tap by a
/// person, well past the debounce time and well short of a long press.
pub const TAP: Duration = Duration::from_millis(120);

/// Why the simulated board refused a control.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("the board is shutting down")]
    Closed,
}

/// The hands on the simulated board's button and mute switch.
#[derive(Debug, Clone)]
pub struct SimControl {
    button: mpsc::Sender<Level>,
    mute: mpsc::Sender<Level>,
    /// The switch's position, as a person would see it.
    muted: Arc<Mutex<bool>>,
}

impl SimControl {
    /// A control feeding raw levels to the button's and the mute switch's
    /// classifiers (a switch is debounced like a button).
    pub fn new(button: mpsc::Sender<Level>, mute: mpsc::Sender<Level>) -> Self {
        Self {
            button,
            mute,
            muted: Arc::new(Mutex::new(false)),
        }
    }

    /// A tap: down, [`TAP`], up.
    pub async fn press(&self) -> Result<(), SimError> {
        self.hold().await?;
        tokio::time::sleep(TAP).await;
        self.release().await
    }

    /// Puts the button down and keeps it there.
    pub async fn hold(&self) -> Result<(), SimError> {
        self.button
            .send(Level::Pressed)
            .await
            .map_err(|_| SimError::Closed)
    }

    /// Lets the button up.
    pub async fn release(&self) -> Result<(), SimError> {
        self.button
            .send(Level::Released)
            .await
            .map_err(|_| SimError::Closed)
    }

    /// Moves the mute switch.
    pub async fn mute(&self, on: bool) -> Result<(), SimError> {
        *self.muted.lock().unwrap_or_else(PoisonError::into_inner) = on;
        let level = if on { Level::Pressed } else { Level::Released };
        self.mute.send(level).await.map_err(|_| SimError::Closed)
    }

    /// Where the mute switch is.
    pub fn muted(&self) -> bool {
        *self.muted.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The simulated board's LEDs: `count` of them, like a ring.
#[derive(Debug)]
pub struct SimLeds {
    frame: Arc<Mutex<Vec<Rgb>>>,
    writes: Arc<AtomicU64>,
}

/// A view of the simulated LEDs from outside the LED thread.
#[derive(Debug, Clone)]
pub struct SimLedView {
    frame: Arc<Mutex<Vec<Rgb>>>,
    writes: Arc<AtomicU64>,
}

impl SimLeds {
    pub fn new(count: usize) -> (SimLeds, SimLedView) {
        let frame = Arc::new(Mutex::new(vec![Rgb::OFF; count]));
        let writes = Arc::new(AtomicU64::new(0));
        (
            SimLeds {
                frame: Arc::clone(&frame),
                writes: Arc::clone(&writes),
            },
            SimLedView { frame, writes },
        )
    }
}

impl SimLedView {
    /// The colours the LEDs show now.
    pub fn frame(&self) -> Vec<Rgb> {
        self.frame
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Frames written so far (an output is written only when its frame
    /// changes).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }
}

impl LedOutput for SimLeds {
    fn count(&self) -> usize {
        self.frame
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn show(&mut self, frame: &[Rgb]) -> Result<(), LedError> {
        let mut shown = self.frame.lock().unwrap_or_else(PoisonError::into_inner);
        shown.clear();
        shown.extend_from_slice(frame);
        self.writes.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    fn describe(&self) -> String {
        format!("simulated LEDs ({})", self.count())
    }
}
