//! The room's sections of the configuration: `[audio]` (crate
//! `hark-audio`), `[stt]`, `[tts]`, `[board]`, `[inbox]`, `[agents.NAME]`,
//! `[confirm]`, `[floor]` and `[history]`, and what the room takes from
//! the daemon's own sections. The daemon's configuration file composes
//! them ([`RoomConfig`] is its view of them); each checks its own ranges.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use hark_core::config::{Invalid, check_range};
use serde::{Deserialize, Serialize};

/// Accepted range for `stt.threads`.
pub const STT_THREADS_RANGE: (u16, u16) = (1, 64);
/// Accepted range for `stt.beam_size`.
pub const BEAM_SIZE_RANGE: (u8, u8) = (1, 16);
/// Accepted range for `stt.max_audio_bytes` (1 KiB … 2 GiB).
pub const MAX_AUDIO_BYTES_RANGE: (u64, u64) = (1024, 2 << 30);

/// What the room is configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomConfig {
    pub audio: hark_audio::AudioConfig,
    pub stt: SttConfig,
    pub tts: TtsConfig,
    pub board: BoardConfig,
    pub inbox: InboxConfig,
    pub agents: BTreeMap<String, hark_core::agents::AgentConfig>,
    pub confirm: ConfirmConfig,
    pub floor: FloorConfig,
    pub history: HistoryConfig,
    pub wake: WakeConfig,
    /// `mcp.record_timeout`: how long a listen waits for speech to begin
    /// when the call gives no timeout, in seconds.
    pub record_timeout: f64,
    /// `service.state_dir`: where the inbox and the history keep their
    /// databases.
    pub state_dir: PathBuf,
}

impl Default for RoomConfig {
    fn default() -> Self {
        Self {
            audio: Default::default(),
            stt: Default::default(),
            tts: Default::default(),
            board: Default::default(),
            inbox: Default::default(),
            agents: Default::default(),
            confirm: Default::default(),
            floor: Default::default(),
            history: Default::default(),
            wake: Default::default(),
            record_timeout: 15.0,
            state_dir: PathBuf::from("/var/lib/hark"),
        }
    }
}

impl RoomConfig {
    /// Checks every ranged field of the room's sections, naming the key
    /// that is wrong.
    pub fn validate(&self) -> Result<(), Invalid> {
        self.audio.validate().map_err(|e| Invalid {
            key: e.key,
            reason: e.reason,
        })?;
        check_range("stt.threads", self.stt.threads, STT_THREADS_RANGE)?;
        check_range("stt.beam_size", self.stt.beam_size, BEAM_SIZE_RANGE)?;
        check_range("stt.audio_ctx_margin", self.stt.audio_ctx_margin, (0, 1500))?;
        check_range(
            "stt.no_speech_threshold",
            self.stt.no_speech_threshold,
            (0.0, 1.0),
        )?;
        check_range("stt.queue", self.stt.queue, (1, 256))?;
        check_range(
            "stt.live_files_seconds",
            self.stt.live_files_seconds,
            (0, 3600),
        )?;
        check_range(
            "stt.live_wyoming_seconds",
            self.stt.live_wyoming_seconds,
            (0, 3600),
        )?;
        check_range(
            "stt.live_unsure_below",
            self.stt.live_unsure_below,
            (0.0, 1.0),
        )?;
        check_range("floor.max_queue", self.floor.max_queue, MAX_QUEUE_RANGE)?;
        check_range(
            "floor.max_hold_seconds",
            self.floor.max_hold_seconds,
            MAX_HOLD_RANGE,
        )?;
        check_range("history.max_rows", self.history.max_rows, MAX_ROWS_RANGE)?;
        check_range("history.keep_days", self.history.keep_days, KEEP_DAYS_RANGE)?;
        check_range(
            "wake.follow_up_seconds",
            self.wake.follow_up_seconds,
            (0.0, 30.0),
        )?;
        if self.wake.enabled && self.wake.words.is_empty() {
            return Err(Invalid {
                key: "wake.words",
                reason: "empty; name a model such as \"okay_nabu\"".into(),
            });
        }
        if let Some(word) = self.wake.words.iter().find(|w| {
            w.is_empty()
                || !w
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }) {
            return Err(Invalid {
                key: "wake.words",
                reason: format!(
                    "`{word}` is not a model name (letters, digits, `_` and `-`, as in okay_nabu)"
                ),
            });
        }
        if self.stt.partial_ms != 0 {
            check_range("stt.partial_ms", self.stt.partial_ms, (200, 10_000))?;
        }
        check_range(
            "stt.max_audio_bytes",
            self.stt.max_audio_bytes,
            MAX_AUDIO_BYTES_RANGE,
        )?;
        check_range(
            "stt.max_audio_seconds",
            self.stt.max_audio_seconds,
            (1, 24 * 3600),
        )?;
        if self.stt.enabled && self.stt.model.trim().is_empty() {
            return Err(Invalid {
                key: "stt.model",
                reason: "empty; name a model from `hark models list` or a ggml file".into(),
            });
        }
        if let Some(dir) = self.stt.audio_dirs.iter().find(|d| !d.is_absolute()) {
            return Err(Invalid {
                key: "stt.audio_dirs",
                reason: format!("`{}` is not an absolute path", dir.display()),
            });
        }
        if let Some(dir) = self.stt.output_dirs.iter().find(|d| !d.is_absolute()) {
            return Err(Invalid {
                key: "stt.output_dirs",
                reason: format!("`{}` is not an absolute path", dir.display()),
            });
        }
        if let Err(reason) = self.tts.engine.parse::<hark_tts::synth::EngineKind>() {
            return Err(Invalid {
                key: "tts.engine",
                reason,
            });
        }
        check_range("tts.threads", self.tts.threads, (1, 16))?;
        check_range("tts.max_loaded_voices", self.tts.max_loaded_voices, (1, 8))?;
        check_range("tts.max_chars", self.tts.max_chars, TTS_MAX_CHARS_RANGE)?;
        check_range("tts.queue", self.tts.queue, (1, 256))?;
        if self.tts.enabled && self.tts.voice.trim().is_empty() {
            return Err(Invalid {
                key: "tts.voice",
                reason: "empty; name a voice from `hark voices list`".into(),
            });
        }
        if let Some(dir) = self.tts.output_dirs.iter().find(|d| !d.is_absolute()) {
            return Err(Invalid {
                key: "tts.output_dirs",
                reason: format!("`{}` is not an absolute path", dir.display()),
            });
        }
        if self.board.board.trim().is_empty() {
            return Err(Invalid {
                key: "board.board",
                reason: "empty; use auto, simulated, a profile name or a profile file".into(),
            });
        }
        check_range("board.debounce_ms", self.board.debounce_ms, (1, 500))?;
        check_range(
            "board.long_press_ms",
            self.board.long_press_ms,
            (100, 10_000),
        )?;
        check_range(
            "board.double_press_ms",
            self.board.double_press_ms,
            (50, 2000),
        )?;
        check_range("board.simulated_leds", self.board.simulated_leds, (1, 64))?;
        check_range(
            "inbox.keep_minutes",
            self.inbox.keep_minutes,
            KEEP_MINUTES_RANGE,
        )?;
        check_range(
            "inbox.max_messages",
            self.inbox.max_messages,
            MAX_MESSAGES_RANGE,
        )?;
        check_range(
            "inbox.listen_seconds",
            self.inbox.listen_seconds,
            LISTEN_SECONDS_RANGE,
        )?;
        for (name, agent) in &self.agents {
            if hark_core::words::words(name).is_empty() {
                return Err(Invalid {
                    key: "agents",
                    reason: format!("`[agents.\"{name}\"]` has no letters or digits to call it by"),
                });
            }
            if let Some(alias) = agent
                .aliases
                .iter()
                .find(|a| hark_core::words::words(a).is_empty())
            {
                return Err(Invalid {
                    key: "agents.aliases",
                    reason: format!(
                        "agent `{name}` has the alias {alias:?}, which has no letters or digits to say"
                    ),
                });
            }
            if let Some(rate) = agent.rate
                && !(0.5..=2.0).contains(&rate)
            {
                return Err(Invalid {
                    key: "agents.rate",
                    reason: format!("agent `{name}` has rate {rate}; use 0.5–2.0"),
                });
            }
            if agent.voice.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(Invalid {
                    key: "agents.voice",
                    reason: format!("agent `{name}` has an empty voice; name one or leave it out"),
                });
            }
        }
        if let Err(e) = hark_core::words::YesNo::new(&self.confirm.yes, &self.confirm.no) {
            return Err(Invalid {
                key: "confirm",
                reason: e.to_string(),
            });
        }
        Ok(())
    }
}

/// `[wake]`: the wake word, which starts the person's turn as a press of
/// the button does.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WakeConfig {
    /// Listen for the wake word. Off: only the button starts a turn.
    pub enabled: bool,
    /// The words, by model name in `models_dir`: `okay_nabu`,
    /// `hey_jarvis`, `hey_mycroft`, `alexa` (the microWakeWord models the
    /// set-up installs). Any of them wakes the appliance.
    pub words: Vec<String>,
    /// `low`, `default` or `high`: how sure a model must be
    /// (docs/benchmarks.md gives each level's false wakes an hour and
    /// missed words).
    pub sensitivity: hark_core::room::Sensitivity,
    /// Where the models are: `NAME.json` and the `.tflite` it names, with
    /// their LICENSE (appliance/setup-models installs them).
    pub models_dir: PathBuf,
    /// TensorFlow Lite's C library, which runs them.
    pub runtime: PathBuf,
    /// After an agent answers the person (it heard them, then spoke), the
    /// microphone opens again for this many seconds without the wake word
    /// (0–30; 0: never). Only while the wake word is on.
    pub follow_up_seconds: f64,
}

impl Default for WakeConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            words: vec!["okay_nabu".to_owned()],
            sensitivity: Default::default(),
            models_dir: PathBuf::from("/usr/share/hark/wake"),
            runtime: PathBuf::from("/usr/lib/hark/libtensorflowlite_c.so"),
            follow_up_seconds: 5.0,
        }
    }
}

/// Accepted range for `history.max_rows`.
pub const MAX_ROWS_RANGE: (usize, usize) = (10, 1_000_000);
/// Accepted range for `history.keep_days`.
pub const KEEP_DAYS_RANGE: (u64, u64) = (1, 3650);

/// `[history]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HistoryConfig {
    /// Keep a history of what was heard and spoken.
    pub enabled: bool,
    /// Rows kept at most (10–1000000); the oldest go first.
    pub max_rows: usize,
    /// Rows older than this many days go (1–3650).
    pub keep_days: u64,
    /// Keep the audio of what was heard too, as WAV files beside the
    /// database (deleted with their rows). Off: only the words.
    pub keep_audio: bool,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_rows: 10_000,
            keep_days: 30,
            keep_audio: false,
        }
    }
}

impl HistoryConfig {
    pub fn settings(&self) -> crate::history::Settings {
        crate::history::Settings {
            max_rows: self.max_rows,
            keep: Duration::from_secs(self.keep_days * 24 * 3600),
            keep_audio: self.keep_audio,
        }
    }
}

/// Accepted range for `inbox.keep_minutes` (a minute to 30 days).
pub const KEEP_MINUTES_RANGE: (u64, u64) = (1, 30 * 24 * 60);
/// Accepted range for `inbox.max_messages`.
pub const MAX_MESSAGES_RANGE: (usize, usize) = (1, 10_000);
/// Accepted range for `inbox.listen_seconds`.
pub const LISTEN_SECONDS_RANGE: (f64, f64) = (1.0, 60.0);

/// `[inbox]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct InboxConfig {
    /// A press of the button while no agent listens records a message for
    /// the agents. Off: such a press does nothing (but stop speech).
    pub enabled: bool,
    /// A message no agent has taken is kept this long, in minutes
    /// (1–43200), then dropped.
    pub keep_minutes: u64,
    /// Messages kept waiting at most (1–10000); beyond, the oldest is
    /// dropped (logged).
    pub max_messages: usize,
    /// The agent a message goes to when the person names none (its
    /// `clientInfo.name`). Empty: whichever agent asks first.
    pub default_agent: String,
    /// After a tap of the button, how long to wait for the person to start
    /// speaking, in seconds (1–60).
    pub listen_seconds: f64,
    /// Say so when no agent can take the message now ("No agent is
    /// listening; I'll keep that.").
    pub announce: bool,
}

impl Default for InboxConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            keep_minutes: 24 * 60,
            max_messages: 200,
            default_agent: String::new(),
            listen_seconds: 8.0,
            announce: true,
        }
    }
}

/// Accepted range for `floor.max_queue`.
pub const MAX_QUEUE_RANGE: (usize, usize) = (1, 64);
/// Accepted range for `floor.max_hold_seconds`.
pub const MAX_HOLD_RANGE: (u64, u64) = (10, 3600);

/// `[floor]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FloorConfig {
    /// Calls that may wait for the microphone at once (1–64); more get
    /// `BusyError`.
    pub max_queue: usize,
    /// Longest one call may hold the floor (its speech and its listening),
    /// in seconds (10–3600); past it the call ends with `BusyError`.
    pub max_hold_seconds: u64,
}

impl Default for FloorConfig {
    fn default() -> Self {
        Self {
            max_queue: 8,
            max_hold_seconds: 600,
        }
    }
}

/// `[confirm]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConfirmConfig {
    /// Answers that mean yes (words or short phrases, any case).
    pub yes: Vec<String>,
    /// Answers that mean no.
    pub no: Vec<String>,
}

impl Default for ConfirmConfig {
    fn default() -> Self {
        let list = |l: &[&str]| l.iter().map(|w| (*w).to_owned()).collect();
        Self {
            yes: list(crate::words::YesNo::DEFAULT_YES),
            no: list(crate::words::YesNo::DEFAULT_NO),
        }
    }
}

impl RoomConfig {
    /// The voice inbox's settings, with the agents messages are addressed
    /// to.
    pub fn inbox_settings(&self, agents: crate::agents::Agents) -> crate::inbox::Settings {
        crate::inbox::Settings {
            keep: Duration::from_secs(self.inbox.keep_minutes * 60),
            max_messages: self.inbox.max_messages,
            default_agent: Some(self.inbox.default_agent.trim().to_owned())
                .filter(|a| !a.is_empty()),
            agents,
            listen: Duration::from_secs_f64(self.inbox.listen_seconds),
            announce: self.inbox.announce,
        }
    }

    /// `confirm`'s word lists (checked by `validate`).
    pub fn yes_no(&self) -> crate::words::YesNo {
        crate::words::YesNo::new(&self.confirm.yes, &self.confirm.no).unwrap_or_default()
    }
}

/// `[board]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BoardConfig {
    /// `auto` (detect the board; the simulated board where there is no
    /// GPIO), `simulated`, a shipped profile (`generic-pi`,
    /// `respeaker-2mic`, `respeaker-4mic`, `usb-mic-array`) or a profile
    /// file's path.
    pub board: String,
    /// A button or switch level must hold this long to count, ms (1–500).
    pub debounce_ms: u64,
    /// Held this long: a long press, ms (100–10000).
    pub long_press_ms: u64,
    /// A press this soon after a release: a double press, ms (50–2000).
    pub double_press_ms: u64,
    /// LEDs on the simulated board (1–64).
    pub simulated_leds: usize,
}

impl Default for BoardConfig {
    fn default() -> Self {
        let timing = hark_board::button::ButtonTiming::default();
        Self {
            board: "auto".into(),
            debounce_ms: timing.debounce.as_millis() as u64,
            long_press_ms: timing.long_press.as_millis() as u64,
            double_press_ms: timing.double_press.as_millis() as u64,
            simulated_leds: 12,
        }
    }
}

impl BoardConfig {
    /// The board crate's settings (ranges checked by `validate`).
    pub fn board(&self) -> hark_board::BoardConfig {
        hark_board::BoardConfig {
            board: self.board.clone(),
            timing: hark_board::button::ButtonTiming {
                debounce: Duration::from_millis(self.debounce_ms),
                long_press: Duration::from_millis(self.long_press_ms),
                double_press: Duration::from_millis(self.double_press_ms),
            },
            simulated_leds: self.simulated_leds,
        }
    }
}

/// Accepted range for `tts.max_chars`.
pub const TTS_MAX_CHARS_RANGE: (usize, usize) = (1, 1_000_000);

/// `[tts]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TtsConfig {
    /// Serve the speech tools at all.
    pub enabled: bool,
    /// `piper` (neural voices; espeak-ng speaks when piper cannot) or
    /// `espeak` (always espeak-ng's own voice).
    pub engine: String,
    /// The voice used when a call names none: an id from `hark voices list`.
    pub voice: String,
    /// The voice store `hark voices` manages.
    pub voices_dir: PathBuf,
    /// ONNX Runtime's shared library (1.31 or newer), loaded at start.
    pub onnxruntime: PathBuf,
    /// ONNX Runtime threads per voice (1–16). One is fastest on two cores:
    /// more threads contend with speech recognition and the audio threads.
    pub threads: usize,
    /// espeak-ng voice for the fallback (an espeak-ng name such as `en-us`).
    pub espeak_voice: String,
    /// Piper voices kept loaded at once (1–8); each holds its model in
    /// memory (a medium voice about 70 MB).
    pub max_loaded_voices: usize,
    /// Longest text one call may speak or synthesise, in characters.
    pub max_chars: usize,
    /// Speech requests that may wait behind the one speaking (1–256); more
    /// get a "busy" error.
    pub queue: usize,
    /// Directories `synthesize_speech` may write WAV files into
    /// (`output_path`). Empty: audio is only returned inline.
    pub output_dirs: Vec<PathBuf>,
}

impl Default for TtsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            engine: "piper".into(),
            voice: "en_US-joe-medium".into(),
            voices_dir: PathBuf::from("/var/lib/hark/voices"),
            onnxruntime: PathBuf::from("/usr/lib/hark/libonnxruntime.so"),
            threads: 1,
            espeak_voice: "en-us".into(),
            max_loaded_voices: 2,
            max_chars: 20_000,
            queue: 16,
            output_dirs: Vec::new(),
        }
    }
}

impl TtsConfig {
    /// The synthesiser's settings. `engine` was checked by `validate`.
    pub fn synth(&self) -> hark_tts::synth::SynthConfig {
        hark_tts::synth::SynthConfig {
            engine: self
                .engine
                .parse()
                .unwrap_or(hark_tts::synth::EngineKind::Piper),
            onnxruntime: self.onnxruntime.clone(),
            voices_dir: self.voices_dir.clone(),
            voice: self.voice.clone(),
            threads: self.threads,
            espeak_voice: self.espeak_voice.clone(),
            max_loaded_voices: self.max_loaded_voices,
        }
    }
}

/// How long Wyoming's audio may be for the live engine to hear it
/// (`stt.live_wyoming_seconds`), chosen on recorded people
/// (docs/benchmarks.md, Files): it hears turns up to 20 s as well as
/// whisper, 25 s monologues worse.
pub const LIVE_WYOMING_SECONDS: u32 = 20;

/// Below this mean token probability the live engine's reading of audio
/// handed over is heard again by whisper (`stt.live_unsure_below`), chosen
/// on recorded people (docs/benchmarks.md, Files): on the sources rules
/// are chosen on, 0.7 left the fewest words wrong (14.4 % against 15.6 %
/// for either engine alone), and about one clip in six is heard twice.
pub const LIVE_UNSURE_BELOW: f32 = 0.7;

/// `[stt]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SttConfig {
    /// Load a model and serve the transcription tools.
    pub enabled: bool,
    /// The whisper model: a name installed in `models_dir` (see
    /// `hark models list`) or a path to a ggml file.
    pub model: String,
    /// The model store `hark models` manages.
    pub models_dir: PathBuf,
    /// Threads whisper computes with (1–64); 0 is not allowed. The default
    /// is the number of cores, at most 4. The live engine uses as many,
    /// but with the end-of-turn model on, at most one fewer than the cores.
    pub threads: u16,
    /// Beam search width (1–16); 1 decodes greedily, faster but worse on
    /// short clips.
    pub beam_size: u8,
    /// Default language: an ISO 639-1 code (`en` by default), or `auto`:
    /// the language spoken, detected by the multilingual model. English
    /// goes to `model` and the live engine; `auto` and other languages to
    /// `multilingual_model` when `model` is English-only (slower: it
    /// detects the language first, docs/benchmarks.md).
    pub language: String,
    /// A multilingual whisper model beside an English-only `model`, by
    /// name in `models_dir` or by path: it serves `auto`, other languages
    /// and `detect_language`, and loads when first asked. Empty: none, and
    /// those requests are a language error. The set-up installs
    /// `base-q8_0` (whisper base, 78 MiB).
    pub multilingual_model: String,
    /// Cut an English-only whisper model's encoder context to the audio
    /// (plus `audio_ctx_margin`) instead of its whole 30 s window: on
    /// recorded people half the time a file for nearly the same words
    /// (17.5 % of words wrong against 17.0 %, docs/benchmarks.md, Files).
    /// Results that look degenerate are decoded again at the full context;
    /// multilingual models always use it.
    pub fit_audio_ctx: bool,
    /// Encoder frames (50 per second of audio) added to the fitted context
    /// (0–1500).
    pub audio_ctx_margin: u16,
    /// Segments whisper rates as not speech above this probability (0–1)
    /// are dropped, so silence does not come back as invented text.
    pub no_speech_threshold: f32,
    /// Transcription requests that may wait for the engine (1–256); more
    /// get a "busy" error.
    pub queue: usize,
    /// Directories `transcribe_audio` may read files from (`audio_path`).
    /// Empty: agents can only send audio inline (`audio_base64`).
    pub audio_dirs: Vec<PathBuf>,
    /// Directories the transcription tools may write files in
    /// (`output_file`, `output_directory`: text, JSON or subtitles).
    /// Empty: transcriptions only come back in the reply.
    pub output_dirs: Vec<PathBuf>,
    /// Largest audio file accepted, in bytes (1024–2147483648), after base64
    /// decoding. Inline audio is also bounded by `mcp.max_message_bytes`.
    pub max_audio_bytes: u64,
    /// Longest audio accepted, in seconds.
    pub max_audio_seconds: u32,
    /// Use whisper.cpp's flash attention (default on): a third less peak
    /// memory (145 against 213 MiB for tiny.en) and no slower
    /// (docs/benchmarks.md). Off only to compare.
    pub flash_attn: bool,
    /// The live engine for the microphone (transcribe_voice, converse,
    /// confirm, choose, the inbox): a Moonshine model directory, by path
    /// (with a `/`) or by name in `models_dir` (`moonshine-tiny-en`, see
    /// `hark models list`); empty: whisper hears the microphone too.
    /// `model` (whisper) keeps files, subtitles, word timestamps and other
    /// languages, and takes over if the live engine fails.
    pub live_model: String,
    /// Files in English (`transcribe_audio`, `transcribe_batch`,
    /// `POST /transcribe`) up to this many seconds long go to the live
    /// engine when the caller names no model and nothing waits for it (the
    /// microphone comes first). 0, the default: whisper hears files; on
    /// recorded people it gets more words right (17.5 % wrong against
    /// 21.0 %), within faster-whisper's time (docs/benchmarks.md, Files).
    /// Word timestamps and subtitles always go to whisper (0–3600).
    pub live_files_seconds: u32,
    /// The same for Home Assistant's speech over Wyoming, a person waiting
    /// for their command: up to 20 s goes to the live engine by default,
    /// longer to whisper (on recorded people 19.5 % of words wrong in 82
    /// ms a clip, against faster-whisper's 20.0 % in 693; 0: whisper only;
    /// 0–3600).
    pub live_wyoming_seconds: u32,
    /// Audio handed over (Wyoming's, and files when `live_files_seconds`
    /// sends them) that the live engine heard with a mean token
    /// probability below this is heard again by whisper, whose transcript
    /// is kept: the live engine is fast and as good as whisper where it is
    /// sure, and misses most where it is not (a game's clipped radio
    /// lines). On recorded people 17.3 % of words wrong against 19.5 %
    /// without, in 83 ms a clip's median (docs/benchmarks.md, Files). 0:
    /// never; 1: always (0–1).
    pub live_unsure_below: f32,
    /// While the person speaks, the live engine transcribes what they have
    /// said so far every this many milliseconds of speech, and listening
    /// calls get it as progress (`heard so far: …`) and the event stream as
    /// `utterance_partial`; 0: no partial transcripts. Only with the live
    /// engine (whisper's 30 s window makes each pass cost as much as the
    /// final one).
    pub partial_ms: u32,
    /// Start the final transcription at the first pause (`audio.vad.pause_ms`)
    /// instead of when the turn has ended, so the transcript is ready or
    /// nearly when it does; thrown away if speech resumes.
    pub speculative: bool,
    /// The end-of-turn model (`audio.vad.end_of_turn = "smart-turn"`): a
    /// Smart Turn ONNX file, by path (with a `/`) or by name in
    /// `models_dir` (the set-up installs `smart-turn-v3.2`).
    pub turn_model: String,
}

impl Default for SttConfig {
    fn default() -> Self {
        let engine = hark_stt::recognizer::EngineConfig::default();
        Self {
            enabled: true,
            model: "tiny.en-q8_0".into(),
            models_dir: PathBuf::from("/var/lib/hark/models"),
            threads: engine.threads,
            beam_size: engine.beam_size,
            language: engine.language,
            multilingual_model: "base-q8_0".into(),
            fit_audio_ctx: true,
            audio_ctx_margin: engine.audio_ctx_margin,
            no_speech_threshold: engine.no_speech_threshold,
            queue: engine.queue,
            audio_dirs: Vec::new(),
            output_dirs: Vec::new(),
            max_audio_bytes: 50_000_000,
            max_audio_seconds: 3600,
            flash_attn: engine.flash_attn,
            live_model: String::new(),
            live_files_seconds: 0,
            live_wyoming_seconds: LIVE_WYOMING_SECONDS,
            live_unsure_below: LIVE_UNSURE_BELOW,
            partial_ms: 700,
            speculative: true,
            turn_model: "smart-turn-v3.2".into(),
        }
    }
}

impl SttConfig {
    /// The live model's directory, if one is configured, or why the name
    /// finds none.
    pub fn live_model_dir(&self) -> Option<Result<PathBuf, hark_models::StoreError>> {
        let name = self.live_model.trim();
        if name.is_empty() {
            return None;
        }
        Some(hark_models::resolve(
            &self.models_dir,
            name,
            hark_models::ModelKind::Moonshine,
        ))
    }

    /// The end-of-turn model's file, or why the name finds none.
    pub fn turn_model_path(&self) -> Result<PathBuf, hark_models::StoreError> {
        hark_models::resolve(
            &self.models_dir,
            self.turn_model.trim(),
            hark_models::ModelKind::SmartTurn,
        )
    }

    /// The model file `model` names: a path if it contains a slash, else a
    /// name in the model store. A name the store cannot find becomes the
    /// file it would have (`ggml-<name>.bin`), which whisper then reports
    /// missing.
    pub fn model_path(&self) -> PathBuf {
        let kind = hark_models::ModelKind::Whisper;
        hark_models::resolve(&self.models_dir, &self.model, kind)
            .unwrap_or_else(|_| self.models_dir.join(kind.file_name(&self.model)))
    }

    /// The multilingual model's file, if one is configured (a name the
    /// store cannot find becomes the file it would have, which the engine
    /// then reports missing).
    pub fn multilingual_model_path(&self) -> Option<PathBuf> {
        let name = self.multilingual_model.trim();
        if name.is_empty() {
            return None;
        }
        let kind = hark_models::ModelKind::Whisper;
        Some(
            hark_models::resolve(&self.models_dir, name, kind)
                .unwrap_or_else(|_| self.models_dir.join(kind.file_name(name))),
        )
    }

    pub fn engine(&self) -> hark_stt::recognizer::EngineConfig {
        hark_stt::recognizer::EngineConfig {
            model: self.model_path(),
            threads: self.threads,
            beam_size: self.beam_size,
            language: self.language.clone(),
            multilingual: self.multilingual_model_path(),
            fit_audio_ctx: self.fit_audio_ctx,
            audio_ctx_margin: self.audio_ctx_margin,
            no_speech_threshold: self.no_speech_threshold,
            queue: self.queue,
            flash_attn: self.flash_attn,
            before_request: Some(crate::memory::make_room),
            after_request: Some(crate::memory::release_freed),
            on_busy: None,
            store: Some(self.models_dir.clone()),
            // With a live engine for the microphone, whisper waits for the
            // first file or other language (should the live engine fail to
            // load, the first listen loads it, in under 0.1 s).
            lazy: !self.live_model.trim().is_empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass() {
        assert_eq!(RoomConfig::default().validate(), Ok(()));
    }

    #[test]
    fn every_ranged_key_is_checked_and_named() {
        let refused = |change: &dyn Fn(&mut RoomConfig)| {
            let mut config = RoomConfig::default();
            change(&mut config);
            config.validate().map_err(|e| e.key)
        };
        assert_eq!(refused(&|c| c.floor.max_queue = 0), Err("floor.max_queue"));
        assert_eq!(
            refused(&|c| c.floor.max_hold_seconds = 0),
            Err("floor.max_hold_seconds")
        );
        assert_eq!(
            refused(&|c| c.history.max_rows = 1),
            Err("history.max_rows")
        );
        assert_eq!(
            refused(&|c| c.history.keep_days = u64::MAX),
            Err("history.keep_days")
        );
        assert_eq!(refused(&|c| c.stt.queue = 0), Err("stt.queue"));
        assert_eq!(
            refused(&|c| c.stt.live_files_seconds = 3601),
            Err("stt.live_files_seconds")
        );
        assert_eq!(
            refused(&|c| c.stt.live_wyoming_seconds = 3601),
            Err("stt.live_wyoming_seconds")
        );
        assert_eq!(
            refused(&|c| c.stt.live_unsure_below = 1.5),
            Err("stt.live_unsure_below")
        );
        assert_eq!(
            refused(&|c| c.audio.vad.sensitivity = f32::NAN),
            Err("audio.vad.sensitivity")
        );
    }
}
