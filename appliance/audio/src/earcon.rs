//! Earcons: the short sounds that tell a person what the appliance is doing
//! without a screen — the microphone opened, it closed, something failed.
//! Generated in code (no files to ship or lose), each under 200 ms, with
//! raised-cosine edges so they start and end without a click.

use std::f32::consts::PI;

use crate::clip::Clip;

/// The pitch of an agent's listening chime, so the person can tell by ear
/// which agent is listening (`[agents.NAME] earcon`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tone {
    /// 660 Hz then 990 Hz.
    #[default]
    Default,
    /// A fifth higher: 990 Hz then 1485 Hz.
    High,
    /// A fifth lower: 440 Hz then 660 Hz.
    Low,
    /// Three rising notes: 660, 880, 1100 Hz.
    Triple,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Earcon {
    /// Listening started: a rising two-note chime.
    ListenStart,
    /// Listening started for an agent with a chime of its own.
    ListenStartIn(Tone),
    /// Listening ended: the same two notes, falling.
    ListenStop,
    /// Something failed: a low double buzz.
    Error,
    /// A timer rings: four quick high beeps, repeated until it is stopped.
    Alarm,
}

const RATE: u32 = crate::config::PIPELINE_RATE;

/// An earcon's notes: raised-cosine edges this long.
const NOTE_EDGE_MS: u32 = 8;

/// A sine of `hz` for `ms` at `amplitude`, with raised-cosine edges of
/// `edge_ms` (at most half the tone) so it starts and ends without a click:
/// the self-test's tone, and each note of the earcons.
pub fn tone(hz: f32, ms: u32, amplitude: f32, edge_ms: u32) -> Clip {
    let mut samples = Vec::with_capacity((RATE * ms / 1000) as usize);
    note_with(hz, ms, amplitude, edge_ms, &mut samples);
    Clip {
        samples,
        rate: RATE,
    }
}

fn note(hz: f32, ms: u32, amp: f32, out: &mut Vec<f32>) {
    note_with(hz, ms, amp, NOTE_EDGE_MS, out);
}

fn note_with(hz: f32, ms: u32, amp: f32, edge_ms: u32, out: &mut Vec<f32>) {
    let n = (RATE * ms / 1000) as usize;
    let edge = ((RATE * edge_ms / 1000) as usize).min(n / 2).max(1);
    for i in 0..n {
        let envelope = if i < edge {
            0.5 - 0.5 * (PI * i as f32 / edge as f32).cos()
        } else if i >= n - edge {
            0.5 - 0.5 * (PI * (n - i) as f32 / edge as f32).cos()
        } else {
            1.0
        };
        out.push((2.0 * PI * hz * i as f32 / RATE as f32).sin() * amp * envelope);
    }
}

fn gap(ms: u32, out: &mut Vec<f32>) {
    out.extend(std::iter::repeat_n(0.0, (RATE * ms / 1000) as usize));
}

impl Earcon {
    pub fn clip(self) -> Clip {
        let mut samples = Vec::with_capacity(RATE as usize / 5);
        match self {
            Earcon::ListenStart | Earcon::ListenStartIn(Tone::Default) => {
                note(660.0, 70, 0.35, &mut samples);
                gap(15, &mut samples);
                note(990.0, 90, 0.35, &mut samples);
            }
            Earcon::ListenStartIn(Tone::High) => {
                note(990.0, 70, 0.35, &mut samples);
                gap(15, &mut samples);
                note(1485.0, 90, 0.35, &mut samples);
            }
            Earcon::ListenStartIn(Tone::Low) => {
                note(440.0, 70, 0.35, &mut samples);
                gap(15, &mut samples);
                note(660.0, 90, 0.35, &mut samples);
            }
            Earcon::ListenStartIn(Tone::Triple) => {
                note(660.0, 45, 0.35, &mut samples);
                gap(10, &mut samples);
                note(880.0, 45, 0.35, &mut samples);
                gap(10, &mut samples);
                note(1100.0, 70, 0.35, &mut samples);
            }
            Earcon::ListenStop => {
                note(990.0, 70, 0.3, &mut samples);
                gap(15, &mut samples);
                note(660.0, 90, 0.3, &mut samples);
            }
            Earcon::Error => {
                note(220.0, 80, 0.4, &mut samples);
                gap(30, &mut samples);
                note(220.0, 80, 0.4, &mut samples);
            }
            Earcon::Alarm => {
                for i in 0..4 {
                    if i > 0 {
                        gap(15, &mut samples);
                    }
                    note(1760.0, 30, 0.4, &mut samples);
                }
            }
        }
        Clip {
            samples,
            rate: RATE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earcons_are_short_audible_clickless_and_distinct() {
        let clips: Vec<Clip> = [
            Earcon::ListenStart,
            Earcon::ListenStop,
            Earcon::Error,
            Earcon::ListenStartIn(Tone::High),
            Earcon::ListenStartIn(Tone::Low),
            Earcon::ListenStartIn(Tone::Triple),
            Earcon::Alarm,
        ]
        .into_iter()
        .map(Earcon::clip)
        .collect();
        for clip in &clips {
            assert!(clip.duration_secs() < 0.2, "{}", clip.duration_secs());
            let peak = clip.samples.iter().fold(0.0f32, |m, s| m.max(s.abs()));
            assert!(peak > 0.2 && peak <= 0.4, "{peak}");
            // Starts and ends at (near) zero: no click.
            assert!(clip.samples[0].abs() < 1e-3);
            assert!(clip.samples.last().map_or(0.0, |s| s.abs()) < 0.01);
        }
        for (i, a) in clips.iter().enumerate() {
            for b in &clips[i + 1..] {
                assert_ne!(a, b, "each earcon sounds different");
            }
        }
        assert_eq!(
            Earcon::ListenStartIn(Tone::Default).clip(),
            Earcon::ListenStart.clip()
        );
    }
}
