//! The appliance's configuration: one TOML file, one struct per section.
//! Each crate owns its sections and checks them (`hark-mcp`: `[mcp]`,
//! `[auth]`, `[discovery]`; `hark-room`: `[audio]`, `[stt]`, `[tts]`,
//! `[board]`, `[inbox]`, `[agents.NAME]`, `[confirm]`, `[floor]`,
//! `[history]`); the daemon's own is `[service]`.
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

use hark_core::config::check_range;
use hark_room::config::{
    BoardConfig, ConfirmConfig, FloorConfig, HistoryConfig, InboxConfig, RoomConfig, SttConfig,
    TtsConfig, WakeConfig,
};
use serde::{Deserialize, Serialize};

/// Where the daemon looks for its configuration when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/hark/hark.toml";

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
    /// The wake word: saying it starts the person's turn, as a press does.
    pub wake: WakeConfig,
    /// Who may use the appliance: pairing, tokens, trusted clients.
    pub auth: hark_mcp::config::AuthConfig,
    /// Advertising the appliance on the LAN (mDNS / DNS-SD).
    pub discovery: hark_mcp::config::DiscoveryConfig,
    /// The Wyoming services for Home Assistant (off by default).
    pub wyoming: hark_wyoming::config::WyomingConfig,
    /// Hark as a Home Assistant voice satellite over the ESPHome native
    /// API (off by default).
    pub esphome: hark_esphome::config::EsphomeConfig,
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
        self.wyoming.validate()?;
        self.esphome.validate()?;
        check_range(
            "service.shutdown_timeout_ms",
            self.service.shutdown_timeout_ms,
            SHUTDOWN_TIMEOUT_RANGE,
        )?;
        self.room().validate()?;
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

    /// The room's view of the configuration: its sections, and the two
    /// settings it takes from the daemon's and the MCP side's.
    pub fn room(&self) -> RoomConfig {
        RoomConfig {
            audio: self.audio.clone(),
            stt: self.stt.clone(),
            tts: self.tts.clone(),
            board: self.board.clone(),
            inbox: self.inbox.clone(),
            agents: self.agents.clone(),
            confirm: self.confirm.clone(),
            floor: self.floor.clone(),
            history: self.history.clone(),
            wake: self.wake.clone(),
            record_timeout: self.mcp.record_timeout,
            state_dir: self.service.state_dir.clone(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, Path::new("test.toml"))
    }

    #[test]
    fn empty_file_gives_defaults() {
        let config = parse("").expect("empty config is valid");
        // The room's view of the defaults is the room's own defaults: its
        // copies of `mcp.record_timeout` and `service.state_dir` agree.
        assert_eq!(config.room(), hark_room::config::RoomConfig::default());
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
