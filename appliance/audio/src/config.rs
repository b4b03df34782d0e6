//! `[audio]` configuration: the capture device and how its channels become
//! the 16 kHz mono stream the detector and speech-to-text use, and the voice
//! detector's timing. Every field documents its unit and range; ranges are
//! checked by [`AudioConfig::validate`], which names the offending key.

use serde::{Deserialize, Serialize};

/// The rate everything after capture works at: what whisper and the voice
/// detector expect.
pub const PIPELINE_RATE: u32 = 16_000;

/// Seconds of `samples` at the pipeline's rate.
pub fn seconds_of(samples: usize) -> f64 {
    samples as f64 / f64::from(PIPELINE_RATE)
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid value for `{key}`: {reason}")]
pub struct ConfigError {
    pub key: &'static str,
    pub reason: String,
}

/// Sample formats Hark reads from a capture device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SampleFormat {
    #[serde(rename = "S16_LE")]
    S16Le,
    #[serde(rename = "S32_LE")]
    S32Le,
    #[serde(rename = "FLOAT_LE")]
    FloatLe,
}

impl SampleFormat {
    pub fn name(self) -> &'static str {
        match self {
            SampleFormat::S16Le => "S16_LE",
            SampleFormat::S32Le => "S32_LE",
            SampleFormat::FloatLe => "FLOAT_LE",
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            SampleFormat::S16Le => 2,
            SampleFormat::S32Le | SampleFormat::FloatLe => 4,
        }
    }
}

/// `[audio]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioConfig {
    /// Run the audio engine. Off, the daemon serves MCP without microphones
    /// or speaker and reports audio as "disabled".
    pub enabled: bool,
    /// While the speaker plays, capture keeps silence instead of what the
    /// microphones hear, so Hark does not listen to itself.
    pub half_duplex: bool,
    /// `SCHED_FIFO` priority of the capture and playback threads (0–99; 0
    /// keeps normal scheduling), so speech recognition on every core cannot
    /// make them miss a period. Needs `CAP_SYS_NICE` or an `RLIMIT_RTPRIO`
    /// at least this high (the systemd unit allows 20); without it the
    /// threads log a warning and run at normal priority. See
    /// [`crate::realtime`].
    pub realtime_priority: u8,
    /// Capture: the microphones.
    pub capture: CaptureConfig,
    /// Playback: the speaker.
    pub playback: PlaybackConfig,
    /// The voice detector that ends an utterance.
    pub vad: VadConfig,
    /// Echo cancellation and barge-in by voice.
    pub echo: EchoConfig,
    /// The virtual sound card, for machines without one.
    pub virtual_card: VirtualCardConfig,
}

impl Default for AudioConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            half_duplex: true,
            realtime_priority: crate::realtime::DEFAULT_PRIORITY,
            capture: CaptureConfig::default(),
            playback: PlaybackConfig::default(),
            vad: VadConfig::default(),
            echo: EchoConfig::default(),
            virtual_card: VirtualCardConfig::default(),
        }
    }
}

impl AudioConfig {
    /// Whether the microphones are closed while the speaker plays: half
    /// duplex, unless echo cancellation keeps them open.
    pub fn closes_while_speaking(&self) -> bool {
        self.half_duplex && !self.echo.cancel
    }

    /// What [`Capture::start`](crate::Capture::start) is given: `[audio.capture]`
    /// with the section's one `realtime_priority`.
    pub fn capture_config(&self) -> CaptureConfig {
        CaptureConfig {
            realtime_priority: self.realtime_priority,
            ..self.capture.clone()
        }
    }

    /// What [`Player::start`](crate::playback::Player::start) is given:
    /// `[audio.playback]` with the section's one `realtime_priority`.
    pub fn playback_config(&self) -> PlaybackConfig {
        PlaybackConfig {
            realtime_priority: self.realtime_priority,
            ..self.playback.clone()
        }
    }
}

/// `[audio.virtual_card]`: ALSA's `file` plugin as a sound card. Capture
/// reads a FIFO the daemon feeds in real time (silence, or what is injected
/// with `hark inject`); playback writes a WAV file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VirtualCardConfig {
    /// Use the virtual card. Set `audio.capture.device = "hark_virtual_mic"`
    /// to capture from it.
    pub enabled: bool,
    /// The FIFO the card's capture side reads.
    pub mic_fifo: std::path::PathBuf,
    /// The FIFO `hark inject` writes utterances into (raw S16_LE in the
    /// capture format).
    pub inject_fifo: std::path::PathBuf,
    /// The WAV file the card's playback side writes.
    pub speaker_wav: std::path::PathBuf,
    /// The microphone hears the speaker as in a room (see
    /// `virtual_room.rs`), so echo cancellation and barge-in by voice work
    /// on the virtual card as on an appliance.
    pub room: bool,
    /// The speaker's level at the microphone, dB (−40 … +10).
    pub room_gain_db: f32,
    /// The room's reverberation time, seconds (0.1–2.0).
    pub room_rt60: f32,
}

impl Default for VirtualCardConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            mic_fifo: "/run/hark/virtual-mic.fifo".into(),
            inject_fifo: "/run/hark/inject.fifo".into(),
            speaker_wav: "/run/hark/speaker.wav".into(),
            room: false,
            room_gain_db: 0.0,
            room_rt60: 0.4,
        }
    }
}

/// The virtual card's capture device (see [`VIRTUAL_CARD_ALSA_CONF`]).
pub const VIRTUAL_MIC_DEVICE: &str = "hark_virtual_mic";

/// The ALSA configuration that defines the virtual card's devices
/// (`hark_virtual_mic`, `hark_virtual_speaker`); the paths come from
/// `HARK_VIRTUAL_MIC` and `HARK_VIRTUAL_SPEAKER`.
pub const VIRTUAL_CARD_ALSA_CONF: &str = include_str!("../virtual-card.conf");

/// `[audio.capture]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// ALSA device name: `default`, `plughw:CARD=seeed2micvoicec`, `hw:1,0`, …
    pub device: String,
    /// Channels to open (1–8): the array's microphone count.
    pub channels: u32,
    /// Device sample rate in Hz: 16000, or 44100/48000 (resampled to 16 kHz).
    pub rate: u32,
    /// Sample format: "S16_LE", "S32_LE" or "FLOAT_LE".
    pub format: SampleFormat,
    /// ALSA period in milliseconds (5–100): how much audio each read returns.
    pub period_ms: u32,
    /// ALSA buffer size in periods (2–16).
    pub periods: u32,
    /// Gain per channel in dB (−40 … +40), in device channel order. Missing
    /// entries are 0 dB.
    pub gains_db: Vec<f32>,
    /// Channels (0-based) mixed into the mono stream. Empty: all of them.
    pub select: Vec<u32>,
    /// Microphone positions in metres, `[x, y]` per device channel, in the
    /// array's plane (the board profile gives them). Needed for `beamform`.
    pub geometry: Vec<[f32; 2]>,
    /// Combine the selected channels by delay-and-sum beamforming towards
    /// the loudest direction instead of a plain mix (see `beam.rs` for the
    /// method and its limits).
    pub beamform: bool,
    /// Audio kept from before a listener starts, in milliseconds (0–2000),
    /// so the first syllable before the detector fires is not lost.
    pub preroll_ms: u32,
    /// Seconds of 16 kHz audio the capture ring holds (2–120). A consumer
    /// further behind than this loses the oldest audio (counted).
    pub ring_seconds: u32,
    /// `SCHED_FIFO` priority of the capture thread (0: normal scheduling).
    /// Not a key of its own: [`AudioConfig::capture_config`] fills it in
    /// from `[audio] realtime_priority`.
    #[serde(skip)]
    pub realtime_priority: u8,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            device: "default".into(),
            channels: 1,
            rate: PIPELINE_RATE,
            format: SampleFormat::S16Le,
            period_ms: 20,
            periods: 4,
            gains_db: Vec::new(),
            select: Vec::new(),
            geometry: Vec::new(),
            beamform: false,
            preroll_ms: 300,
            ring_seconds: 40,
            realtime_priority: 0,
        }
    }
}

/// `[audio.playback]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlaybackConfig {
    /// ALSA device name: `default`, `plughw:CARD=seeed2micvoicec`, …
    pub device: String,
    /// Device sample rate in Hz (8000–192000). Clips are resampled to it.
    pub rate: u32,
    /// Channels (1–2); mono speech goes to every channel.
    pub channels: u32,
    /// ALSA period in milliseconds (5–100).
    pub period_ms: u32,
    /// ALSA buffer size in periods (2–16).
    pub periods: u32,
    /// Volume, 0–100 (software gain on a logarithmic curve; also set on the
    /// card's mixer control when `mixer_control` names one). Changeable at
    /// run time.
    pub volume: u8,
    /// The card's mixer control to set the volume on (`Speaker`,
    /// `Playback`, `PCM`, …). Empty: software volume only.
    pub mixer_control: String,
    /// Fade applied when speech is stopped, in milliseconds (1–50), so a stop
    /// does not click.
    pub fade_ms: u32,
    /// `SCHED_FIFO` priority of the playback thread (0: normal scheduling).
    /// Not a key of its own: [`AudioConfig::playback_config`] fills it in
    /// from `[audio] realtime_priority`.
    #[serde(skip)]
    pub realtime_priority: u8,
}

impl Default for PlaybackConfig {
    fn default() -> Self {
        Self {
            device: "default".into(),
            rate: 48_000,
            channels: 2,
            period_ms: 20,
            periods: 4,
            volume: 80,
            mixer_control: String::new(),
            fade_ms: 8,
            realtime_priority: 0,
        }
    }
}

/// `[audio.echo]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EchoConfig {
    /// Take Hark's own speech out of what the microphones hear (AEC3, with
    /// what the speaker plays as the reference), and keep the microphones
    /// open while Hark speaks: `half_duplex` no longer applies. The wake
    /// word then stops Hark mid-sentence, and in a `converse` the person's
    /// voice does.
    pub cancel: bool,
    /// How much speech, in milliseconds (50–1000), stops Hark in a
    /// `converse` (barge-in by voice).
    pub barge_in_ms: u32,
}

impl Default for EchoConfig {
    fn default() -> Self {
        Self {
            cancel: false,
            barge_in_ms: 120,
        }
    }
}

/// `[audio.vad]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VadConfig {
    /// Silence after speech that ends the utterance, in milliseconds (100–5000).
    pub hangover_ms: u32,
    /// Speech shorter than this is not an utterance (a cough, a click), in
    /// milliseconds (0–2000).
    pub min_speech_ms: u32,
    /// Longest utterance, in seconds (1–120); recording stops there.
    pub max_utterance_s: u32,
    /// How readily sound counts as speech, 0.0–1.0 (0.5: the detector's
    /// recommended threshold; higher catches quieter speech and more noise).
    pub sensitivity: f32,
    /// What ends a turn: `silence` (`hangover_ms` of it) or `smart-turn`
    /// (at each pause of `pause_ms`, the end-of-turn model decides; a turn
    /// it keeps calling unfinished ends after `max_pause_ms`).
    pub end_of_turn: EndOfTurnRule,
    /// The pause at which the end-of-turn model is asked, ms (100–2000).
    pub pause_ms: u32,
    /// The longest pause inside a turn, ms (500–10000).
    pub max_pause_ms: u32,
    /// How long after an agent's listen ended the person's turn Hark still
    /// hears them go on, ms (0–10000; 0: not at all): what they add then is
    /// kept for that agent (its next listen returns it), not heard by the
    /// next in line.
    pub continue_ms: u32,
}

/// `audio.vad.end_of_turn`
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndOfTurnRule {
    #[default]
    Silence,
    SmartTurn,
}

impl Default for VadConfig {
    fn default() -> Self {
        Self {
            hangover_ms: 800,
            end_of_turn: EndOfTurnRule::Silence,
            pause_ms: 300,
            max_pause_ms: 2000,
            continue_ms: 2000,
            min_speech_ms: 200,
            max_utterance_s: 30,
            sensitivity: 0.5,
        }
    }
}

fn range<T: PartialOrd + std::fmt::Display + Copy>(
    key: &'static str,
    value: T,
    lo: T,
    hi: T,
) -> Result<(), ConfigError> {
    // `contains`: NaN (TOML accepts `nan`) is outside every range.
    if !(lo..=hi).contains(&value) {
        return Err(ConfigError {
            key,
            reason: format!("{value} is outside {lo}–{hi}"),
        });
    }
    Ok(())
}

impl AudioConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        range(
            "audio.realtime_priority",
            self.realtime_priority,
            0,
            crate::realtime::MAX_PRIORITY,
        )?;
        let c = &self.capture;
        if c.device.trim().is_empty() {
            return Err(ConfigError {
                key: "audio.capture.device",
                reason: "empty; use `default` or an ALSA device name".into(),
            });
        }
        range("audio.capture.channels", c.channels, 1, 8)?;
        if ![16_000, 44_100, 48_000].contains(&c.rate) {
            return Err(ConfigError {
                key: "audio.capture.rate",
                reason: format!("{} Hz is not one of 16000, 44100, 48000", c.rate),
            });
        }
        range("audio.capture.period_ms", c.period_ms, 5, 100)?;
        range("audio.capture.periods", c.periods, 2, 16)?;
        range("audio.capture.preroll_ms", c.preroll_ms, 0, 2000)?;
        range("audio.capture.ring_seconds", c.ring_seconds, 2, 120)?;
        if c.gains_db.len() > c.channels as usize {
            return Err(ConfigError {
                key: "audio.capture.gains_db",
                reason: format!("{} gains for {} channels", c.gains_db.len(), c.channels),
            });
        }
        for gain in &c.gains_db {
            range("audio.capture.gains_db", *gain, -40.0, 40.0)?;
        }
        for channel in &c.select {
            if *channel >= c.channels {
                return Err(ConfigError {
                    key: "audio.capture.select",
                    reason: format!(
                        "channel {channel} does not exist; channels are 0–{}",
                        c.channels - 1
                    ),
                });
            }
        }
        if c.beamform {
            if c.geometry.len() != c.channels as usize {
                return Err(ConfigError {
                    key: "audio.capture.geometry",
                    reason: format!(
                        "beamforming needs a position for each of the {} channels, got {}",
                        c.channels,
                        c.geometry.len()
                    ),
                });
            }
            let used = if c.select.is_empty() {
                c.channels as usize
            } else {
                c.select.len()
            };
            if used < 2 {
                return Err(ConfigError {
                    key: "audio.capture.beamform",
                    reason: "beamforming needs at least two channels".into(),
                });
            }
            if c.geometry
                .iter()
                .flatten()
                .any(|v| !v.is_finite() || v.abs() > 0.5)
            {
                return Err(ConfigError {
                    key: "audio.capture.geometry",
                    reason: "positions are in metres and within 0.5 m of the array centre".into(),
                });
            }
        }
        let p = &self.playback;
        if p.device.trim().is_empty() {
            return Err(ConfigError {
                key: "audio.playback.device",
                reason: "empty; use `default` or an ALSA device name".into(),
            });
        }
        range("audio.playback.rate", p.rate, 8_000, 192_000)?;
        range("audio.playback.channels", p.channels, 1, 2)?;
        range("audio.playback.period_ms", p.period_ms, 5, 100)?;
        range("audio.playback.periods", p.periods, 2, 16)?;
        range("audio.playback.volume", p.volume, 0, 100)?;
        range("audio.playback.fade_ms", p.fade_ms, 1, 50)?;
        let v = &self.vad;
        range("audio.vad.hangover_ms", v.hangover_ms, 100, 5000)?;
        range("audio.vad.pause_ms", v.pause_ms, 100, 2000)?;
        range("audio.vad.max_pause_ms", v.max_pause_ms, 500, 10000)?;
        range("audio.vad.continue_ms", v.continue_ms, 0, 10000)?;
        range("audio.vad.min_speech_ms", v.min_speech_ms, 0, 2000)?;
        range("audio.vad.max_utterance_s", v.max_utterance_s, 1, 120)?;
        range("audio.vad.sensitivity", v.sensitivity, 0.0, 1.0)?;
        range("audio.echo.barge_in_ms", self.echo.barge_in_ms, 50, 1000)?;
        let card = &self.virtual_card;
        range(
            "audio.virtual_card.room_gain_db",
            card.room_gain_db,
            -40.0,
            10.0,
        )?;
        range("audio.virtual_card.room_rt60", card.room_rt60, 0.1, 2.0)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert_eq!(AudioConfig::default().validate(), Ok(()));
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut c = AudioConfig::default();
        c.capture.rate = 22_050;
        assert_eq!(c.validate().unwrap_err().key, "audio.capture.rate");
        let mut c = AudioConfig::default();
        c.capture.channels = 4;
        c.capture.select = vec![0, 4];
        assert_eq!(c.validate().unwrap_err().key, "audio.capture.select");
        let mut c = AudioConfig::default();
        c.vad.sensitivity = 1.5;
        assert_eq!(c.validate().unwrap_err().key, "audio.vad.sensitivity");
        c.vad.sensitivity = f32::NAN;
        assert_eq!(c.validate().unwrap_err().key, "audio.vad.sensitivity");
        let mut c = AudioConfig::default();
        c.capture.gains_db = vec![0.0, 1.0];
        assert_eq!(c.validate().unwrap_err().key, "audio.capture.gains_db");
        let c = AudioConfig {
            realtime_priority: 100,
            ..AudioConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "audio.realtime_priority");
    }

    #[test]
    fn realtime_priority_reaches_both_audio_threads() {
        let defaults = AudioConfig::default();
        assert_eq!(
            defaults.realtime_priority,
            crate::realtime::DEFAULT_PRIORITY
        );
        assert_eq!(
            defaults.capture_config().realtime_priority,
            defaults.realtime_priority
        );
        assert_eq!(
            defaults.playback_config().realtime_priority,
            defaults.realtime_priority
        );
        let c = AudioConfig {
            realtime_priority: 0,
            ..AudioConfig::default()
        };
        assert_eq!(
            (
                c.capture_config().realtime_priority,
                c.playback_config().realtime_priority
            ),
            (0, 0)
        );
    }
}
