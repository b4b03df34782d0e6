//! The appliance's configuration: one TOML file, one struct per section.
//!
//! The daemon runs with no file at all (every field has a default), reads
//! `/etc/hark/hark.toml` when it exists, or the file given with `--config`.
//! Unknown keys are an error naming the key, so a typo never silently falls
//! back to a default. Every field documents its unit and range; the ranges are
//! the constants below and are checked by [`Config::validate`].

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize};

/// Where the daemon looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/hark/hark.toml";

/// Accepted range for `stt.threads`.
pub const STT_THREADS_RANGE: (u16, u16) = (1, 64);
/// Accepted range for `stt.beam_size`.
pub const BEAM_SIZE_RANGE: (u8, u8) = (1, 16);
/// Accepted range for `stt.max_audio_bytes` (1 KiB … 2 GiB).
pub const MAX_AUDIO_BYTES_RANGE: (u64, u64) = (1024, 2 << 30);
/// Accepted range for `service.shutdown_timeout_ms`.
pub const SHUTDOWN_TIMEOUT_RANGE: (u64, u64) = (100, 10_000);

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("invalid value for `{key}`: {reason}")]
    Invalid { key: &'static str, reason: String },
}

impl From<hark_core::config::Invalid> for ConfigError {
    fn from(e: hark_core::config::Invalid) -> Self {
        ConfigError::Invalid {
            key: e.key,
            reason: e.reason,
        }
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Process-level settings: logging, naming, shutdown.
    pub service: ServiceConfig,
    /// The MCP server and its transports.
    pub mcp: hark_mcp::config::McpConfig,
    /// Microphones, speaker, voice detection, and the virtual sound card.
    pub audio: hark_audio::AudioConfig,
    /// Speech to text: the whisper model and how it runs.
    pub stt: SttConfig,
    /// Text to speech: piper voices on ONNX Runtime, espeak-ng as fallback.
    pub tts: TtsConfig,
    /// The button, lights and mute switch (docs/hardware.md).
    pub board: BoardConfig,
    /// The voice inbox: what the person says to agents unprompted.
    pub inbox: InboxConfig,
    /// `[agents.NAME]`: per-agent settings, NAME being the agent's
    /// `clientInfo.name`.
    pub agents: std::collections::BTreeMap<String, hark_core::agents::AgentConfig>,
    /// How `confirm` hears yes and no.
    pub confirm: ConfirmConfig,
    /// Whose turn it is with the person: the microphone's queue.
    pub floor: FloorConfig,
    /// What was heard and spoken, kept for `list_captures`.
    pub history: HistoryConfig,
    /// Who may use the appliance: pairing, tokens, trusted clients.
    pub auth: hark_mcp::config::AuthConfig,
    /// Advertising the appliance on the LAN (mDNS / DNS-SD).
    pub discovery: hark_mcp::config::DiscoveryConfig,
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

impl Config {
    /// The voice inbox's settings.
    pub fn inbox_settings(&self) -> crate::inbox::Settings {
        crate::inbox::Settings {
            keep: Duration::from_secs(self.inbox.keep_minutes * 60),
            max_messages: self.inbox.max_messages,
            default_agent: Some(self.inbox.default_agent.trim().to_owned())
                .filter(|a| !a.is_empty()),
            agents: crate::agents::Agents::new(self.agents.clone()),
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
    /// Default language: `auto` (detected by multilingual models) or an ISO
    /// 639-1 code. English-only models (`.en`) always use `en`.
    pub language: String,
    /// Cut whisper's encoder context to short inputs: 2–3× faster on a
    /// few seconds of speech, but tiny.en loses words (docs/benchmarks.md);
    /// off by default. Results that look degenerate are decoded again at
    /// the full context.
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
        let engine = hark_stt::engine::EngineConfig::default();
        Self {
            enabled: true,
            model: "tiny.en-q8_0".into(),
            models_dir: PathBuf::from("/var/lib/hark/models"),
            threads: engine.threads,
            beam_size: engine.beam_size,
            language: engine.language,
            fit_audio_ctx: engine.fit_audio_ctx,
            audio_ctx_margin: engine.audio_ctx_margin,
            no_speech_threshold: engine.no_speech_threshold,
            queue: engine.queue,
            audio_dirs: Vec::new(),
            max_audio_bytes: 50_000_000,
            max_audio_seconds: 3600,
            flash_attn: engine.flash_attn,
            live_model: String::new(),
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

    pub fn engine(&self) -> hark_stt::engine::EngineConfig {
        hark_stt::engine::EngineConfig {
            model: self.model_path(),
            threads: self.threads,
            beam_size: self.beam_size,
            language: self.language.clone(),
            fit_audio_ctx: self.fit_audio_ctx,
            audio_ctx_margin: self.audio_ctx_margin,
            no_speech_threshold: self.no_speech_threshold,
            queue: self.queue,
            flash_attn: self.flash_attn,
            before_request: Some(crate::memory::make_room),
            after_request: Some(crate::memory::release_freed),
            on_busy: None,
            // With a live engine for the microphone, whisper waits for the
            // first file or other language (should the live engine fail to
            // load, the first listen loads it, in under 0.1 s).
            lazy: !self.live_model.trim().is_empty(),
        }
    }
}

/// `[service]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    /// Log filter (`error`, `warn`, `info`, `debug`, `trace`, or a tracing
    /// directive such as `hark=debug,rmcp=warn`). `RUST_LOG` overrides it.
    pub log_level: String,
    /// The appliance's host name as agents see it. Empty means the system host
    /// name. `NAME` and `NAME.local` are accepted in HTTP `Host` headers.
    pub hostname: String,
    /// How long shutdown waits for in-flight calls before cancelling them, in
    /// milliseconds (100–10000). systemd's stop timeout is far longer; this
    /// keeps `systemctl stop` under two seconds.
    pub shutdown_timeout_ms: u64,
    /// Where the appliance keeps what must last (the voice inbox). Created
    /// if missing; if it cannot be written, the inbox lasts until restart.
    pub state_dir: PathBuf,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            // rmcp logs every error response as a warning; Hark logs them
            // itself, with the client and the tool.
            // whisper.cpp describes every model load and state at info.
            log_level: "info,rmcp=error,whisper_rs=warn,ort=warn".into(),
            hostname: String::new(),
            shutdown_timeout_ms: 1500,
            state_dir: PathBuf::from("/var/lib/hark"),
        }
    }
}

impl Config {
    /// Parses and validates a TOML document. `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: origin.to_path_buf(),
            source: Box::new(source),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads the configuration the daemon should use: the explicit file if
    /// one is given (it must exist), else the default path if it exists, else
    /// the built-in defaults. Returns the file actually read, if any.
    pub fn load(explicit: Option<&Path>) -> Result<(Self, Option<PathBuf>), ConfigError> {
        let path = match explicit {
            Some(path) => path.to_path_buf(),
            None => {
                let default = PathBuf::from(DEFAULT_CONFIG_PATH);
                if !default.exists() {
                    let config = Config::default();
                    config.validate()?;
                    return Ok((config, None));
                }
                default
            }
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        Ok((Self::from_toml(&text, &path)?, Some(path)))
    }

    /// Checks every ranged field, naming the key that is out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.auth.validate()?;
        self.mcp.validate()?;
        check_range(
            "service.shutdown_timeout_ms",
            self.service.shutdown_timeout_ms,
            SHUTDOWN_TIMEOUT_RANGE,
        )?;
        self.audio.validate().map_err(|e| ConfigError::Invalid {
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
            return Err(ConfigError::Invalid {
                key: "stt.model",
                reason: "empty; name a model from `hark models list` or a ggml file".into(),
            });
        }
        if let Some(dir) = self.stt.audio_dirs.iter().find(|d| !d.is_absolute()) {
            return Err(ConfigError::Invalid {
                key: "stt.audio_dirs",
                reason: format!("`{}` is not an absolute path", dir.display()),
            });
        }
        if let Err(reason) = self.tts.engine.parse::<hark_tts::synth::EngineKind>() {
            return Err(ConfigError::Invalid {
                key: "tts.engine",
                reason,
            });
        }
        check_range("tts.threads", self.tts.threads, (1, 16))?;
        check_range("tts.max_loaded_voices", self.tts.max_loaded_voices, (1, 8))?;
        check_range("tts.max_chars", self.tts.max_chars, TTS_MAX_CHARS_RANGE)?;
        check_range("tts.queue", self.tts.queue, (1, 256))?;
        if self.tts.enabled && self.tts.voice.trim().is_empty() {
            return Err(ConfigError::Invalid {
                key: "tts.voice",
                reason: "empty; name a voice from `hark voices list`".into(),
            });
        }
        if let Some(dir) = self.tts.output_dirs.iter().find(|d| !d.is_absolute()) {
            return Err(ConfigError::Invalid {
                key: "tts.output_dirs",
                reason: format!("`{}` is not an absolute path", dir.display()),
            });
        }
        if self.board.board.trim().is_empty() {
            return Err(ConfigError::Invalid {
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
            if crate::words::words(name).is_empty() {
                return Err(ConfigError::Invalid {
                    key: "agents",
                    reason: format!("`[agents.\"{name}\"]` has no letters or digits to call it by"),
                });
            }
            if let Some(alias) = agent
                .aliases
                .iter()
                .find(|a| crate::words::words(a).is_empty())
            {
                return Err(ConfigError::Invalid {
                    key: "agents.aliases",
                    reason: format!(
                        "agent `{name}` has the alias {alias:?}, which has no letters or digits to say"
                    ),
                });
            }
            if let Some(rate) = agent.rate
                && !(0.5..=2.0).contains(&rate)
            {
                return Err(ConfigError::Invalid {
                    key: "agents.rate",
                    reason: format!("agent `{name}` has rate {rate}; use 0.5–2.0"),
                });
            }
            if agent.voice.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(ConfigError::Invalid {
                    key: "agents.voice",
                    reason: format!("agent `{name}` has an empty voice; name one or leave it out"),
                });
            }
        }
        if let Err(e) = crate::words::YesNo::new(&self.confirm.yes, &self.confirm.no) {
            return Err(ConfigError::Invalid {
                key: "confirm",
                reason: e.to_string(),
            });
        }
        if self.service.state_dir.as_os_str().is_empty() || !self.service.state_dir.is_absolute() {
            return Err(ConfigError::Invalid {
                key: "service.state_dir",
                reason: format!(
                    "`{}` is not an absolute path",
                    self.service.state_dir.display()
                ),
            });
        }
        if self.service.log_level.trim().is_empty() {
            return Err(ConfigError::Invalid {
                key: "service.log_level",
                reason: "empty; use info, debug, …".into(),
            });
        }
        Ok(())
    }

    /// The effective configuration as TOML, as `hark config check` prints it.
    pub fn to_toml(&self) -> String {
        // Serialising plain structs of strings, numbers and paths cannot fail.
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot render config: {e}\n"))
    }

    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_millis(self.service.shutdown_timeout_ms)
    }
}

fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
    key: &'static str,
    value: T,
    range: (T, T),
) -> Result<(), ConfigError> {
    Ok(hark_core::config::check_range(key, value, range)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, Path::new("test.toml"))
    }

    #[test]
    fn empty_file_gives_defaults() {
        let config = parse("").expect("empty config is valid");
        assert_eq!(config, Config::default());
        assert_eq!(config.mcp.tcp.listen.port(), 7340);
        assert_eq!(config.mcp.http.listen.port(), 7341);
        assert_eq!(config.mcp.max_connections, 32);
        assert_eq!(config.mcp.max_message_bytes, 16 << 20);
    }

    #[test]
    fn unknown_key_is_named() {
        let err = parse("[mcp]\nmax_conections = 4\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_conections"), "{err}");
        let err = parse("[mcp.tcp]\nport = 1\n").unwrap_err().to_string();
        assert!(err.contains("`port`"), "{err}");
        let err = parse("[speaker]\n").unwrap_err().to_string();
        assert!(err.contains("speaker"), "{err}");
    }

    #[test]
    fn out_of_range_is_named() {
        let err = parse("[mcp]\nmax_connections = 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("mcp.max_connections"), "{err}");
        let err = parse("[mcp]\nmax_message_bytes = 10\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("mcp.max_message_bytes"), "{err}");
        let err = parse("[mcp.unix]\nmode = 0o1777\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("mcp.unix.mode"), "{err}");
    }

    #[test]
    fn wrong_type_is_reported() {
        let err = parse("[mcp.tcp]\nlisten = 7340\n").unwrap_err().to_string();
        assert!(err.contains("listen"), "{err}");
        let err = parse("[mcp.tcp]\nlisten = \"not an address\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("listen"), "{err}");
    }

    #[test]
    fn all_transports_disabled_is_refused() {
        let err = parse(
            "[mcp.tcp]\nenabled = false\n[mcp.http]\nenabled = false\n[mcp.unix]\nenabled = false\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("every transport is disabled"), "{err}");
    }

    #[test]
    fn effective_config_round_trips() {
        let config = parse(
            "[service]\nhostname = \"kitchen\"\n[mcp]\nallowed_hosts = [\"kitchen.lan\"]\n[mcp.tcp]\nlisten = \"127.0.0.1:0\"\n",
        )
        .expect("valid");
        let again = parse(&config.to_toml()).expect("printed config parses");
        assert_eq!(config, again);
        assert_eq!(again.service.hostname, "kitchen");
    }

    #[test]
    fn audio_section_is_checked() {
        let err = parse("[audio.capture]\nchannels = 9\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("audio.capture.channels"), "{err}");
        let err = parse("[audio.vad]\nhangover = 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("hangover"), "{err}");
        let config = parse("[audio.capture]\ndevice = \"plughw:CARD=seeed2micvoicec\"\nchannels = 2\nformat = \"S32_LE\"\n")
            .expect("valid");
        assert_eq!(
            config.audio.capture.format,
            hark_audio::config::SampleFormat::S32Le
        );
    }

    #[test]
    fn realtime_priority_is_checked_and_printed() {
        let err = parse("[audio]\nrealtime_priority = 100\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("audio.realtime_priority"), "{err}");
        assert!(err.contains("100"), "{err}");
        // One key for both threads, under [audio] only.
        let err = parse("[audio.capture]\nrealtime_priority = 5\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("realtime_priority"), "{err}");
        let config = parse("[audio]\nrealtime_priority = 0\n").expect("0 is normal scheduling");
        assert_eq!(config.audio.capture_config().realtime_priority, 0);
        assert_eq!(config.audio.playback_config().realtime_priority, 0);
        let config = parse("[audio]\nrealtime_priority = 99\n").expect("99 is the top");
        assert_eq!(config.audio.capture_config().realtime_priority, 99);
        assert!(
            Config::default().to_toml().contains(
                "\n[audio]\nenabled = true\nhalf_duplex = true\nrealtime_priority = 10\n"
            ),
            "{}",
            Config::default().to_toml()
        );
    }

    #[test]
    fn origin_without_scheme_is_refused() {
        let err = parse("[mcp]\nallowed_origins = [\"example.com\"]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("mcp.allowed_origins"), "{err}");
    }

    #[test]
    fn turn_and_live_models_resolve_by_store_name_or_path() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let models = dir.path().join("models");
        let store = hark_models::Store::open(&models).expect("store");
        let onnx = dir.path().join("smart-turn-v3.2-cpu.onnx");
        std::fs::write(&onnx, b"\x08\x0a\x12\x0donnx.quantize").expect("model file");
        store
            .add(
                hark_models::ModelKind::SmartTurn,
                "smart-turn-v3.2",
                &onnx,
                &hark_models::AddOptions::import(&onnx),
            )
            .expect("imported");
        let mut stt = parse(&format!("[stt]\nmodels_dir = {:?}\n", models.display()))
            .expect("valid")
            .stt;
        // The default names what the set-up installs.
        assert_eq!(
            stt.turn_model_path().expect("by name"),
            models.join("smart-turn-v3.2.onnx")
        );
        stt.turn_model = onnx.display().to_string();
        assert_eq!(stt.turn_model_path().expect("by path"), onnx);
        // The live engine is off unless named; a name the store lacks, or
        // of another kind, is an error saying so.
        assert!(stt.live_model_dir().is_none());
        stt.live_model = "smart-turn-v3.2".into();
        let err = stt.live_model_dir().expect("configured").unwrap_err();
        assert!(err.to_string().contains("not a moonshine one"), "{err}");
        stt.live_model = "moonshine-tiny-en".into();
        let err = stt.live_model_dir().expect("configured").unwrap_err();
        assert!(
            err.to_string().contains("installed: smart-turn-v3.2"),
            "{err}"
        );
    }
}
