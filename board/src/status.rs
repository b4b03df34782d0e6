//! The one mapping from what the appliance is doing to what its lights show.
//! docs/hardware.md documents the same table; change both together.
//!
//! The order of [`Status`] is the order of precedence when several things
//! are true at once. Two rules are promises to the person in the room and
//! come first: the mute light shows for as long as the mute is on, and the
//! listening light shows whenever the microphone is open. Nothing an agent
//! or a tool does can override either: the appliance computes the status
//! from its own state ([`Activity`]), and there is no way to set a light
//! directly.

use serde::Serialize;

use crate::led::{COUNTDOWN_PULSE_MS, Light, Pattern, Rgb};

/// What the appliance is doing, as far as the lights care. Every field is
/// read from the appliance's own state, never from a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Activity {
    /// The mute switch (or `hark mute on`) has the microphone closed.
    pub muted: bool,
    /// A recording has the microphone open.
    pub listening: bool,
    /// The speaker is playing speech.
    pub speaking: bool,
    /// Speech to text is working on a request.
    pub transcribing: bool,
    /// A subsystem the person relies on has failed (no microphone, no
    /// speaker, the model missing).
    pub error: bool,
    /// A pairing waits for the button (`hark pair`).
    pub pairing: bool,
    /// An agent asked the person a question (`confirm`, `choose`) and the
    /// microphone is open for the answer (with `listening`).
    pub asking: bool,
    /// The person left a message in the voice inbox that no agent has
    /// taken yet.
    pub message_waiting: bool,
    /// A timer is ringing (its time is up; the button or the wake word
    /// stops it).
    pub ringing: bool,
    /// The running timer that ends soonest, drawn as a countdown.
    pub timer: Option<Countdown>,
}

/// A running timer as the lights count it down: when it was set and when
/// it is due, in milliseconds since the Unix epoch (wall-clock times, as
/// the schedule keeps them across restarts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Countdown {
    pub set_ms: u64,
    pub due_ms: u64,
}

impl Countdown {
    /// What is left at `now_ms`.
    pub fn left_ms(self, now_ms: u64) -> u64 {
        self.due_ms.saturating_sub(now_ms)
    }

    /// The timer's whole length.
    pub fn total_ms(self) -> u64 {
        self.due_ms.saturating_sub(self.set_ms)
    }

    /// The countdown as drawn from `now_ms` on.
    pub fn pattern(self, now_ms: u64) -> Pattern {
        // Timers are kept for at most a week; u32 milliseconds hold 49 days.
        let ms = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Pattern::Countdown {
            color: TIMER,
            left_ms: ms(self.left_ms(now_ms)),
            total_ms: ms(self.total_ms().max(1)),
        }
    }
}

/// A timer's colour: counting down, and ringing.
const TIMER: Rgb = Rgb(255, 40, 140);

/// What the lights show, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Muted,
    /// The microphone is open for the answer to an agent's question (a
    /// short press answers yes, a long press no): the listening light in
    /// its own colour.
    Asking,
    Listening,
    /// A timer's time is up and it rings. Above the error light: with the
    /// speaker failed, the light is all that tells the person.
    Ringing,
    Error,
    Speaking,
    Transcribing,
    Pairing,
    /// A timer runs: its countdown.
    Timer,
    /// A message from the person waits in the voice inbox.
    Message,
    Idle,
}

impl Status {
    pub const ALL: [Status; 11] = [
        Status::Muted,
        Status::Asking,
        Status::Listening,
        Status::Ringing,
        Status::Error,
        Status::Speaking,
        Status::Transcribing,
        Status::Pairing,
        Status::Timer,
        Status::Message,
        Status::Idle,
    ];

    pub fn of(activity: Activity) -> Status {
        if activity.muted {
            Status::Muted
        } else if activity.listening && activity.asking {
            Status::Asking
        } else if activity.listening {
            Status::Listening
        } else if activity.ringing {
            Status::Ringing
        } else if activity.error {
            Status::Error
        } else if activity.speaking {
            Status::Speaking
        } else if activity.transcribing {
            Status::Transcribing
        } else if activity.pairing {
            Status::Pairing
        } else if activity.timer.is_some() {
            Status::Timer
        } else if activity.message_waiting {
            Status::Message
        } else {
            Status::Idle
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Muted => "muted",
            Status::Asking => "asking",
            Status::Listening => "listening",
            Status::Ringing => "ringing",
            Status::Error => "error",
            Status::Speaking => "speaking",
            Status::Transcribing => "transcribing",
            Status::Pairing => "pairing",
            Status::Timer => "timer",
            Status::Message => "message",
            Status::Idle => "idle",
        }
    }

    /// The pattern on a ring or on the status's own LED. A timer's
    /// countdown is drawn from its own times ([`Countdown::pattern`]); here,
    /// for the self-test and the table, three quarters left.
    pub fn pattern(self) -> Pattern {
        const RED: Rgb = Rgb(255, 0, 0);
        const BLUE: Rgb = Rgb(0, 80, 255);
        const AMBER: Rgb = Rgb(255, 120, 0);
        const GREEN: Rgb = Rgb(0, 200, 60);
        const WHITE: Rgb = Rgb(160, 160, 160);
        const PURPLE: Rgb = Rgb(160, 0, 255);
        const CYAN: Rgb = Rgb(0, 220, 200);
        const YELLOW: Rgb = Rgb(255, 200, 0);
        match self {
            // Steady, unmistakable, for as long as it is true.
            Status::Muted => Pattern::Solid { color: RED },
            Status::Listening => Pattern::Solid { color: BLUE },
            // Steady like the listening light (the microphone is open),
            // in a colour of its own: answer now.
            Status::Asking => Pattern::Solid { color: CYAN },
            // Fast, in the timer's colour: a glance across the room tells
            // it from the error light's slow amber.
            Status::Ringing => Pattern::Blink {
                color: TIMER,
                period_ms: 500,
            },
            Status::Error => Pattern::Blink {
                color: AMBER,
                period_ms: 1000,
            },
            Status::Speaking => Pattern::Pulse {
                color: GREEN,
                period_ms: 1200,
            },
            Status::Transcribing => Pattern::Spin {
                color: WHITE,
                period_ms: 900,
            },
            Status::Pairing => Pattern::Spin {
                color: PURPLE,
                period_ms: 2000,
            },
            Status::Timer => Pattern::Countdown {
                color: TIMER,
                left_ms: 45_000,
                total_ms: 60_000,
            },
            // Slow, so it reads as "something is waiting", not as activity.
            Status::Message => Pattern::Pulse {
                color: YELLOW,
                period_ms: 3000,
            },
            Status::Idle => Pattern::Off,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which statuses each LED of a board shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedRoles {
    /// A ring or a single status LED: every LED shows every status.
    Shared,
    /// One GPIO LED per purpose: LED `i` lights for the statuses in
    /// `roles[i]` (an LED may serve several, e.g. one red LED for muted and
    /// error).
    PerLed(Vec<Vec<Status>>),
}

/// The light for `status` on a board whose LEDs have `roles` (a timer's
/// countdown as [`Status::pattern`] samples it).
pub fn light(status: Status, roles: &LedRoles) -> Light {
    shaped(status, status.pattern(), roles)
}

/// The light for `status` at `now_ms`, with `timer` (the running timer
/// that ends soonest) counted down from its own times.
pub fn light_at(status: Status, timer: Option<Countdown>, now_ms: u64, roles: &LedRoles) -> Light {
    let pattern = match (status, timer) {
        (Status::Timer, Some(timer)) => timer.pattern(now_ms),
        _ => status.pattern(),
    };
    shaped(status, pattern, roles)
}

/// `pattern` on the LEDs that show `status`.
fn shaped(status: Status, pattern: Pattern, roles: &LedRoles) -> Light {
    match roles {
        LedRoles::Shared => Light::all(pattern),
        LedRoles::PerLed(roles) => {
            let pattern = match pattern {
                // A "ready" LED is lit steadily when the appliance is
                // idle, where a ring stays dark.
                Pattern::Off => Pattern::Solid {
                    color: Rgb(255, 255, 255),
                },
                // One LED of several cannot show a proportion (the arc
                // would light whichever LEDs it covers): it pulses slowly.
                Pattern::Countdown { color, .. } => Pattern::Pulse {
                    color,
                    period_ms: COUNTDOWN_PULSE_MS,
                },
                pattern => pattern,
            };
            let leds = roles
                .iter()
                .enumerate()
                .take(64)
                .filter(|(_, serves)| serves.contains(&status))
                .fold(0u64, |mask, (i, _)| mask | (1 << i));
            Light { pattern, leds }
        }
    }
}
