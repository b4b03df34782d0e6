//! The self-test's wire: the steps `hark selftest` asks the daemon for
//! (`hark/selftest` on the Unix socket) and what each answers, shared by
//! the daemon that serves them and the command that runs them; and how a
//! recording is measured and judged ([`signal`]).

pub mod signal;

use serde::{Deserialize, Serialize};

use signal::Levels;

/// Accepted tone frequencies, Hz, and lengths, ms.
pub const TONE_HZ: (f32, f32) = (100.0, 4000.0);
pub const TONE_MS: (u32, u32) = (100, 5000);
/// Longest sentence the speech step says, characters.
pub const MAX_TEXT: usize = 300;
/// Accepted recording lengths, ms.
pub const RECORD_MS: (u32, u32) = (200, 10_000);
/// Accepted time per status in a light cycle, ms.
pub const LIGHTS_MS: (u32, u32) = (100, 5000);
/// Accepted waits for a person's hand, ms.
pub const WAIT_MS: (u32, u32) = (200, 300_000);
/// Which press a button step waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Press {
    /// Down and up again before it is long.
    Press,
    /// Held down past the long-press time.
    LongPress,
}

/// One step (the request's params).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Which board this is and what it has.
    Board,
    /// Plays a tone of `hz` for `ms`.
    Tone { hz: f32, ms: u32 },
    /// Says `text` in Hark's own voice.
    Speak { text: String },
    /// Records `ms` from the microphone (after the listening chime, with
    /// `chime`), measures it and keeps it for `play`.
    Record {
        ms: u32,
        #[serde(default)]
        chime: bool,
    },
    /// Plays recording `clip` back.
    Play { clip: u64 },
    /// Shows every status of the lights in turn, `ms` each.
    Lights { ms: u32 },
    /// Waits up to `timeout_ms` for `expect` on the button; with
    /// `simulate`, the simulated board's button is moved first.
    Button {
        expect: Press,
        #[serde(default)]
        simulate: bool,
        timeout_ms: u32,
    },
    /// Waits up to `timeout_ms` for the mute switch to move and come back;
    /// with `simulate`, the simulated switch is moved.
    Mute {
        #[serde(default)]
        simulate: bool,
        timeout_ms: u32,
    },
    /// The microcontroller link, if the profile has one.
    Link,
}

impl Request {
    pub fn name(&self) -> &'static str {
        match self {
            Request::Board => "board",
            Request::Tone { .. } => "tone",
            Request::Speak { .. } => "speak",
            Request::Record { .. } => "record",
            Request::Play { .. } => "play",
            Request::Lights { .. } => "lights",
            Request::Button { .. } => "button",
            Request::Mute { .. } => "mute",
            Request::Link => "link",
        }
    }

    /// Checks the numbers against their ranges.
    pub fn check(&self) -> Result<(), String> {
        fn within<T: PartialOrd + std::fmt::Display>(
            name: &str,
            value: T,
            (low, high): (T, T),
        ) -> Result<(), String> {
            if value < low || value > high {
                return Err(format!("`{name}` must be {low}–{high}, got {value}"));
            }
            Ok(())
        }
        match self {
            Request::Tone { hz, ms } => {
                within("hz", *hz, TONE_HZ)?;
                within("ms", *ms, TONE_MS)
            }
            Request::Speak { text }
                if text.trim().is_empty() || text.chars().count() > MAX_TEXT =>
            {
                Err(format!("`text` must be 1–{MAX_TEXT} characters"))
            }
            Request::Record { ms, .. } => within("ms", *ms, RECORD_MS),
            Request::Lights { ms } => within("ms", *ms, LIGHTS_MS),
            Request::Button { timeout_ms, .. } | Request::Mute { timeout_ms, .. } => {
                within("timeout_ms", *timeout_ms, WAIT_MS)
            }
            _ => Ok(()),
        }
    }
}

/// What the board is and has (`board`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoardInfo {
    /// Which board, and why (`get_status`'s board line).
    pub board: String,
    /// The profile's name; none for the simulated board.
    pub profile: Option<String>,
    pub simulated: bool,
    /// The push-to-talk button, as the person finds it ("the push-to-talk
    /// button (GPIO 17 of generic-pi)"); none without one.
    pub button: Option<String>,
    pub mute: Option<String>,
    /// The lights; none without any.
    pub lights: Option<String>,
    /// Whether Hark draws the lights itself and can see what they showed
    /// (not a microcontroller's ring, which draws its own).
    pub lights_drawn: bool,
    /// The microcontroller link's device.
    pub link: Option<String>,
    /// The audio subsystem's state.
    pub audio: String,
}

/// A tone or a recording played (`tone`, `play`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Played {
    pub seconds: f64,
}

/// The sentence said (`speak`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spoken {
    /// `piper` or `espeak`.
    pub engine: String,
    pub voice: String,
    /// Why espeak-ng spoke instead of piper, when it did.
    pub fallback: Option<String>,
    pub seconds: f64,
}

/// A recording (`record`): its number for `play`, and its levels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    pub clip: u64,
    pub levels: Levels,
}

/// What a light cycle drew (`lights`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shown {
    /// LEDs on the output.
    pub leds: usize,
    pub statuses: Vec<LightSeen>,
}

/// The classified events a button or switch step saw, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moved {
    pub events: Vec<Seen>,
}

/// One event: `press`, `release`, `long_press`, `mute_on`, `mute_off`,
/// milliseconds after the step began waiting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub event: String,
    pub at_ms: u64,
}

/// The microcontroller link (`link`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkState {
    /// The device the profile names; none: the board has no link.
    pub device: Option<String>,
    /// Whether the device node exists.
    pub present: bool,
    /// Whether the microcontroller answers (handshake done, heartbeat
    /// alive); none: no link to ask.
    pub connected: Option<bool>,
}

/// What one status drew during the cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LightSeen {
    /// The status (`muted`, `listening`, …).
    pub status: String,
    /// Whether this board has a light for it (a board with one LED per
    /// purpose may have none for some statuses).
    pub expected: bool,
    /// The most LEDs lit at once while it showed.
    pub lit: usize,
    /// The brightest channel seen, 0–255.
    pub peak: u8,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_by_name_and_range() {
        let parse = |v: serde_json::Value| serde_json::from_value::<Request>(v);
        assert_eq!(
            parse(serde_json::json!({"step": "record", "ms": 1000})).unwrap(),
            Request::Record {
                ms: 1000,
                chime: false
            }
        );
        assert!(parse(serde_json::json!({"step": "dance"})).is_err());
        assert!(parse(serde_json::json!({"step": "record", "ms": 1000, "loud": 1})).is_err());
        let e = Request::Record {
            ms: 60_000,
            chime: false,
        }
        .check()
        .unwrap_err();
        assert!(e.to_string().contains("200–10000"), "{e}");
        assert!(Request::Speak { text: " ".into() }.check().is_err());
        let wire = serde_json::to_value(Request::Button {
            expect: Press::LongPress,
            simulate: true,
            timeout_ms: 5000,
        })
        .unwrap();
        assert_eq!(wire["step"], "button");
        assert_eq!(wire["expect"], "long_press");
    }
}
