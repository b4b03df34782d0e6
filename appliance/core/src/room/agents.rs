//! [`AgentSettings`]: agents' settings changed at run time.

use super::call::{BoxFuture, Failure};
use serde::Serialize;

/// A change to an agent's settings (`agent_settings`, the status page).
/// What is not given stays as it is.
#[derive(Debug, Clone, Default)]
pub struct AgentChange {
    /// The agent, by name or alias.
    pub agent: String,
    /// Other names the person calls it by; the first is said when it is
    /// announced.
    pub aliases: Option<Vec<String>>,
    /// A voice id from `list_voices`, `espeak:<name>`, or `default` (or
    /// empty): `tts.voice`.
    pub voice: Option<String>,
    /// Its speaking rate, 0.5–2.0.
    pub rate: Option<f64>,
    pub chime: Option<crate::agents::Chime>,
    pub announce: Option<bool>,
    /// Drop what was changed at run time: `hark.toml`'s settings (or the
    /// defaults) again. Other fields given are applied after.
    pub reset: bool,
}

/// Where an agent's settings in effect come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SettingsSource {
    /// Nothing set: the appliance's defaults.
    Defaults,
    /// `[agents.NAME]` in `hark.toml`.
    Config,
    /// Changed at run time, kept across restarts.
    RunTime,
}

/// One agent's settings in effect.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentSettingsView {
    pub name: String,
    pub aliases: Vec<String>,
    /// Its voice; null: the appliance's (`default_voice`).
    pub voice: Option<String>,
    /// Its speaking rate; null: 1.0.
    pub rate: Option<f64>,
    /// `default`, `high`, `low` or `triple`.
    pub chime: crate::agents::Chime,
    /// Hark says its name before its speech when another agent spoke last.
    pub announce: bool,
    pub source: SettingsSource,
}

impl AgentSettingsView {
    /// An agent's settings in effect, or the defaults under `name`.
    pub fn of(name: &str, found: Option<crate::agents::Effective>) -> Self {
        let (name, config, source) = match found {
            Some(e) => (
                e.name,
                e.config,
                match e.source {
                    crate::agents::Source::Config => SettingsSource::Config,
                    crate::agents::Source::RunTime => SettingsSource::RunTime,
                },
            ),
            None => (
                name.to_owned(),
                crate::agents::AgentConfig::default(),
                SettingsSource::Defaults,
            ),
        };
        Self {
            name,
            aliases: config.aliases,
            voice: config.voice,
            rate: config.rate,
            chime: config.earcon,
            announce: config.announce,
            source,
        }
    }
}

/// `agent_settings`' structured result.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentSettingsList {
    pub agents: Vec<AgentSettingsView>,
    /// The appliance's voice (`tts.voice`), for agents that set none.
    pub default_voice: String,
    /// Where changes are kept (or why only in memory).
    pub kept: String,
}

pub trait AgentSettings: Send + Sync {
    /// Every agent with settings (`hark.toml`'s or changed).
    fn agents(&self) -> BoxFuture<'_, Result<AgentSettingsList, Failure>>;

    /// Applies a change at once and keeps it; the agent's settings after.
    fn change_agent(
        &self,
        change: AgentChange,
    ) -> BoxFuture<'_, Result<AgentSettingsView, Failure>>;
}
