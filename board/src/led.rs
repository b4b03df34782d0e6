//! Lights: patterns rendered to frames, and the outputs that show them.
//!
//! A [`Pattern`] is a function of time; [`Pattern::frame`] renders it for
//! `n` LEDs at time `t` (pure, so tests check any instant without waiting).
//! [`Lights`] runs the patterns on a thread of its own at [`FRAME_RATE`]:
//! an SPI write or a GPIO write is a system call, and the async runtime's
//! threads must never wait on hardware. The thread shows a frame only when
//! it differs from the last, so a steady light costs nothing.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        mpsc::{RecvTimeoutError, SyncSender, sync_channel},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// A colour, 8 bits per channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    pub const OFF: Rgb = Rgb(0, 0, 0);

    /// The colour at `level` (0–1) of its brightness.
    pub fn scaled(self, level: f32) -> Rgb {
        let level = level.clamp(0.0, 1.0);
        let scale = |c: u8| (f32::from(c) * level).round() as u8;
        Rgb(scale(self.0), scale(self.1), scale(self.2))
    }
}

/// How a light changes over time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(tag = "pattern", rename_all = "lowercase")]
pub enum Pattern {
    Off,
    /// Every LED on.
    Solid {
        color: Rgb,
    },
    /// Every LED on for the first half of each period, off for the second.
    Blink {
        color: Rgb,
        period_ms: u32,
    },
    /// Every LED fading up and down (a raised cosine), never quite off.
    Pulse {
        color: Rgb,
        period_ms: u32,
    },
    /// One lit LED with a fading tail going round once per period (on a
    /// single LED: a pulse).
    Spin {
        color: Rgb,
        period_ms: u32,
    },
    /// A running timer: an arc of the ring, lit in proportion to the time
    /// left, that shrinks as it runs (`left_ms` of `total_ms` at the
    /// pattern's start); the LED at its end dims as its share runs out.
    /// Dark when the time is up. On a single LED: a slow pulse, since one
    /// LED cannot show a proportion.
    Countdown {
        color: Rgb,
        left_ms: u32,
        total_ms: u32,
    },
}

/// How often animated patterns are redrawn. Fast enough for a smooth pulse;
/// a 12-LED APA102 frame is 60 bytes, a few microseconds on the bus.
pub const FRAME_RATE: u32 = 50;

/// A pulse's lowest level: the light stays visibly on.
const PULSE_FLOOR: f32 = 0.15;

/// A countdown's pulse on a single LED (and over links that cannot draw
/// the arc): slow, so it reads as "waiting", not as activity.
pub const COUNTDOWN_PULSE_MS: u32 = 2000;

impl Pattern {
    /// Whether the pattern changes with time.
    pub fn animated(&self) -> bool {
        matches!(
            self,
            Pattern::Blink { .. }
                | Pattern::Pulse { .. }
                | Pattern::Spin { .. }
                | Pattern::Countdown { .. }
        )
    }

    /// The pattern's colours for `out.len()` LEDs at `t` from its start.
    pub fn frame(&self, t: Duration, out: &mut [Rgb]) {
        // Position within the period, 0–1.
        let phase = |period_ms: u32| {
            let period = u128::from(period_ms.max(1));
            (t.as_millis() % period) as f32 / period as f32
        };
        match *self {
            Pattern::Off => out.fill(Rgb::OFF),
            Pattern::Solid { color } => out.fill(color),
            Pattern::Blink { color, period_ms } => {
                out.fill(if phase(period_ms) < 0.5 {
                    color
                } else {
                    Rgb::OFF
                });
            }
            Pattern::Pulse { color, period_ms } => {
                out.fill(color.scaled(pulse_level(phase(period_ms))));
            }
            Pattern::Spin { color, period_ms } => {
                let n = out.len();
                if n < 2 {
                    out.fill(color.scaled(pulse_level(phase(period_ms))));
                    return;
                }
                let head = phase(period_ms) * n as f32;
                for (i, led) in out.iter_mut().enumerate() {
                    // How far this LED is behind the head, in LEDs.
                    let behind = (head - i as f32).rem_euclid(n as f32);
                    let level = if behind < 1.0 {
                        1.0
                    } else {
                        (1.0 - (behind - 1.0) / 3.0).max(0.0).powi(2)
                    };
                    *led = color.scaled(level);
                }
            }
            Pattern::Countdown {
                color,
                left_ms,
                total_ms,
            } => {
                let n = out.len();
                if n < 2 {
                    out.fill(color.scaled(pulse_level(phase(COUNTDOWN_PULSE_MS))));
                    return;
                }
                let left = u128::from(left_ms).saturating_sub(t.as_millis());
                let share = left as f32 / total_ms.max(1) as f32;
                // How many LEDs the time left fills, the last one in part.
                let lit = share.clamp(0.0, 1.0) * n as f32;
                for (i, led) in out.iter_mut().enumerate() {
                    *led = color.scaled((lit - i as f32).clamp(0.0, 1.0));
                }
            }
        }
    }
}

/// Raised cosine between the floor and full, starting at the floor.
fn pulse_level(phase: f32) -> f32 {
    let wave = 0.5 - 0.5 * (phase * std::f32::consts::TAU).cos();
    PULSE_FLOOR + (1.0 - PULSE_FLOOR) * wave
}

/// Why a light could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum LedError {
    #[error("cannot write the LED frame to {device}: {source}")]
    Write {
        device: String,
        #[source]
        source: std::io::Error,
    },
}

/// An LED output: GPIO LEDs, an addressable ring, the simulated board's.
pub trait LedOutput: Send {
    /// The LEDs it drives.
    fn count(&self) -> usize;
    /// Shows one colour per LED (`frame.len() == count()`).
    fn show(&mut self, frame: &[Rgb]) -> Result<(), LedError>;
    /// A name for logs and status.
    fn describe(&self) -> String;
}

/// A pattern on some of the LEDs: bit `i` of `leds` set lights LED `i`
/// (boards with one GPIO LED per state light only that state's LED).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Light {
    pub pattern: Pattern,
    #[serde(skip)]
    pub leds: u64,
}

impl Light {
    pub const OFF: Light = Light {
        pattern: Pattern::Off,
        leds: 0,
    };

    /// `pattern` on every LED.
    pub fn all(pattern: Pattern) -> Light {
        Light {
            pattern,
            leds: u64::MAX,
        }
    }

    /// Renders the light for `out.len()` LEDs at `t`.
    pub fn frame(&self, t: Duration, out: &mut [Rgb]) {
        self.pattern.frame(t, out);
        for (i, led) in out.iter_mut().enumerate() {
            if i >= 64 || self.leds & (1 << i) == 0 {
                *led = Rgb::OFF;
            }
        }
    }
}

/// What is shown now, for status reports: the light and the last frame.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Shown {
    #[serde(flatten)]
    pub light: Light,
    pub frame: Vec<Rgb>,
}

/// Runs patterns on an LED output from a thread of its own. Dropping it
/// turns the LEDs off and ends the thread.
pub struct Lights {
    /// The pattern to show; the thread reads it when woken.
    wanted: Arc<Mutex<Light>>,
    wake: Option<SyncSender<()>>,
    shown: Arc<Mutex<Shown>>,
    thread: Option<JoinHandle<()>>,
}

impl Lights {
    pub fn start(mut output: Box<dyn LedOutput>) -> std::io::Result<Lights> {
        let count = output.count();
        let shown = Arc::new(Mutex::new(Shown {
            light: Light::OFF,
            frame: vec![Rgb::OFF; count],
        }));
        let wanted = Arc::new(Mutex::new(Light::OFF));
        // One pending wake is enough: the thread reads the newest pattern.
        let (wake, rx) = sync_channel::<()>(1);
        let on_thread = Arc::clone(&shown);
        let wanted_on_thread = Arc::clone(&wanted);
        let thread = std::thread::Builder::new()
            .name("hark-leds".into())
            .spawn(move || {
                let mut light = Light::OFF;
                let mut started = Instant::now();
                let mut frame = vec![Rgb::OFF; count];
                let mut last: Option<Vec<Rgb>> = None;
                let tick = Duration::from_secs(1) / FRAME_RATE;
                loop {
                    let wait = if light.pattern.animated() {
                        tick
                    } else {
                        Duration::from_secs(3600)
                    };
                    match rx.recv_timeout(wait) {
                        Ok(()) => {
                            let next = *wanted_on_thread
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner);
                            if next != light {
                                light = next;
                                started = Instant::now();
                            }
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                    light.frame(started.elapsed(), &mut frame);
                    if last.as_deref() != Some(&frame[..]) {
                        show(&mut *output, &frame);
                        last = Some(frame.clone());
                    }
                    *on_thread.lock().unwrap_or_else(PoisonError::into_inner) = Shown {
                        light,
                        frame: frame.clone(),
                    };
                }
                // Shutdown, SIGTERM included: the LEDs go dark.
                frame.fill(Rgb::OFF);
                show(&mut *output, &frame);
                *on_thread.lock().unwrap_or_else(PoisonError::into_inner) = Shown {
                    light: Light::OFF,
                    frame,
                };
            })?;
        Ok(Lights {
            wanted,
            wake: Some(wake),
            shown,
            thread: Some(thread),
        })
    }

    /// Shows `light` from now on. Never blocks: the light is stored and
    /// the thread woken; changes made faster than it shows them collapse
    /// into the newest, which is the one that must end up lit.
    pub fn set(&self, light: Light) {
        *self.wanted.lock().unwrap_or_else(PoisonError::into_inner) = light;
        if let Some(wake) = &self.wake {
            // Full: a wake is pending and will read this pattern.
            // Disconnected: the thread is gone (shutdown).
            let _ = wake.try_send(());
        }
    }

    /// The light and frame shown last.
    pub fn shown(&self) -> Shown {
        self.shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Lights {
    fn drop(&mut self) {
        drop(self.wake.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn show(output: &mut dyn LedOutput, frame: &[Rgb]) {
    if let Err(e) = output.show(frame) {
        // A light that fails must not take the appliance down; it is
        // logged (rate: once per change of frame).
        tracing::warn!(output = %output.describe(), error = %e, "cannot show the LEDs");
    }
}
