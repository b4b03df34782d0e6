//! The agents the appliance knows by name: their `[agents.NAME]` settings
//! (what the person calls them, their voice, rate and chime, whether Hark
//! says their name when they start speaking), and the one way names are
//! compared, so that "claude-code", "Claude Code" and an alias "claude" are
//! the same agent to the inbox, the speech queue and the floor.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::words;

/// `[agents.NAME]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Other names the person may call the agent by ("claude" for
    /// `claude-code`; a name speech-to-text hears differently, "clod").
    /// The first is also the name Hark says when it announces the agent.
    pub aliases: Vec<String>,
    /// The voice the agent speaks in when a call names none (a voice id
    /// from `hark voices list`). Unset: `tts.voice`.
    pub voice: Option<String>,
    /// The agent's speaking rate when a call gives none (0.5–2.0).
    pub rate: Option<f64>,
    /// The agent's listening chime: `default`, `high`, `low` or `triple`,
    /// so the person hears which agent listens.
    pub earcon: Chime,
    /// Say the agent's name before its speech when the previous speech was
    /// another agent's ("Claude says: …").
    pub announce: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            aliases: Vec::new(),
            voice: None,
            rate: None,
            earcon: Chime::Default,
            announce: true,
        }
    }
}

/// The pitch of an agent's listening chime, so the person can tell by ear
/// which agent is listening (`[agents.NAME] earcon`). The audio engine plays
/// each as a tone of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Chime {
    /// The appliance's own two rising notes.
    #[default]
    Default,
    /// A fifth higher.
    High,
    /// A fifth lower.
    Low,
    /// Three rising notes.
    Triple,
}

impl Chime {
    /// Its name in settings.
    pub fn name(self) -> &'static str {
        match self {
            Chime::Default => "default",
            Chime::High => "high",
            Chime::Low => "low",
            Chime::Triple => "triple",
        }
    }
}

/// Where an agent's settings come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `[agents.NAME]` in `hark.toml`.
    Config,
    /// Changed at run time (the status page, `agent_settings`): kept in
    /// the state directory, in place of `hark.toml`'s until reset.
    RunTime,
}

/// The agents' settings: `hark.toml`'s, and those changed at run time in
/// their place. Clones share them, so a change applies everywhere at once
/// (speech, chimes, the inbox's addressing). Reads take a lock held only
/// to copy a value out, never across anything that waits.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    table: std::sync::Arc<std::sync::RwLock<Table>>,
}

#[derive(Debug, Default)]
struct Table {
    /// `[agents.NAME]`.
    configured: BTreeMap<String, AgentConfig>,
    /// Changed at run time, by the name's compared form ([`plain`]), with
    /// the name as it was given: another spelling replaces it.
    changed: BTreeMap<String, (String, AgentConfig)>,
}

impl Table {
    /// Every agent's settings in effect: a run-time change replaces the
    /// configured agent of the same name (in any spelling).
    fn effective(&self) -> impl Iterator<Item = (&String, &AgentConfig, Source)> {
        self.configured
            .iter()
            .filter(|(name, _)| !self.changed.contains_key(&plain(name)))
            .map(|(name, agent)| (name, agent, Source::Config))
            .chain(
                self.changed
                    .values()
                    .map(|(name, agent)| (name, agent, Source::RunTime)),
            )
    }

    /// The agent `name` is (by its name or an alias).
    fn find(&self, name: &str) -> Option<(&String, &AgentConfig, Source)> {
        let wanted = plain(name);
        // A name beats another agent's alias.
        self.effective()
            .find(|(n, _, _)| plain(n) == wanted)
            .or_else(|| {
                self.effective()
                    .find(|(_, a, _)| a.aliases.iter().any(|x| plain(x) == wanted))
            })
    }
}

/// One agent's settings in effect, and where they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Effective {
    pub name: String,
    pub config: AgentConfig,
    pub source: Source,
}

/// The form names are compared in: "Claude-Code" and "claude code" are one.
pub fn plain(name: &str) -> String {
    words::words(name).join(" ")
}

impl Agents {
    pub fn new(configured: BTreeMap<String, AgentConfig>) -> Self {
        Self {
            table: std::sync::Arc::new(std::sync::RwLock::new(Table {
                configured,
                changed: BTreeMap::new(),
            })),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Puts `name`'s run-time settings in place (`None`: back to
    /// `hark.toml`'s). A change under another spelling of the same name
    /// replaces it.
    pub fn set(&self, name: &str, config: Option<AgentConfig>) {
        let mut table = self
            .table
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = plain(name);
        match config {
            Some(config) => table.changed.insert(key, (name.to_owned(), config)),
            None => table.changed.remove(&key),
        };
    }

    /// `name`'s settings in effect, if it has any (configured or changed).
    pub fn get(&self, name: &str) -> Option<Effective> {
        self.read().find(name).map(|(n, config, source)| Effective {
            name: n.clone(),
            config: config.clone(),
            source,
        })
    }

    /// Every agent with settings, by name.
    pub fn all(&self) -> Vec<Effective> {
        let mut all: Vec<Effective> = self
            .read()
            .effective()
            .map(|(name, config, source)| Effective {
                name: name.clone(),
                config: config.clone(),
                source,
            })
            .collect();
        all.sort_by_key(|e| plain(&e.name));
        all
    }

    /// The key `name` is compared by: its agent's, else its own.
    pub fn key(&self, name: &str) -> String {
        match self.read().find(name) {
            Some((configured, _, _)) => plain(configured),
            None => plain(name),
        }
    }

    /// Every agent with settings and its aliases (for addressing).
    pub fn names(&self) -> Vec<(String, Vec<String>)> {
        self.read()
            .effective()
            .map(|(name, a, _)| (name.clone(), a.aliases.clone()))
            .collect()
    }

    /// The voice the agent speaks in when a call names none.
    pub fn voice(&self, name: &str) -> Option<String> {
        self.read().find(name).and_then(|(_, a, _)| a.voice.clone())
    }

    /// The agent's speaking rate when a call gives none.
    pub fn rate(&self, name: &str) -> Option<f32> {
        self.read()
            .find(name)
            .and_then(|(_, a, _)| a.rate)
            .map(|r| r as f32)
    }

    /// The agent's listening chime.
    pub fn earcon(&self, name: &str) -> Chime {
        self.read()
            .find(name)
            .map_or(Chime::Default, |(_, a, _)| a.earcon)
    }

    /// What Hark says before the agent's speech when the speaker changes,
    /// or `None` when the agent asked not to be announced.
    pub fn announcement(&self, name: &str) -> Option<String> {
        let found = self.get(name);
        let (spoken, announce) = match found {
            Some(Effective {
                name: configured,
                config: agent,
                ..
            }) => (
                agent
                    .aliases
                    .first()
                    .cloned()
                    .unwrap_or_else(|| plain(&configured)),
                agent.announce,
            ),
            None => (plain(name), true),
        };
        if !announce || spoken.is_empty() {
            return None;
        }
        // Capitalised, as a name at the start of a sentence.
        let mut chars = spoken.chars();
        let name: String = chars
            .next()
            .map(|first| first.to_uppercase().chain(chars).collect())
            .unwrap_or_default();
        Some(format!("{name} says:"))
    }
}

/// The names of the agents that have connected since the start, for the
/// person to address messages to ("Claude, …"): the MCP side notes them,
/// the person's recording reads them.
#[derive(Debug, Default)]
pub struct Seen(std::sync::Mutex<std::collections::BTreeSet<String>>);

impl Seen {
    pub fn note(&self, name: &str) {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !seen.contains(name) {
            seen.insert(name.to_owned());
        }
    }

    /// Every name seen so far.
    pub fn names(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents() -> Agents {
        let mut configured = BTreeMap::new();
        configured.insert(
            "claude-code".to_owned(),
            AgentConfig {
                aliases: vec!["claude".into()],
                voice: Some("en_US-amy-low".into()),
                rate: Some(1.2),
                earcon: Chime::High,
                announce: true,
            },
        );
        configured.insert(
            "quiet-bot".to_owned(),
            AgentConfig {
                announce: false,
                ..AgentConfig::default()
            },
        );
        Agents::new(configured)
    }

    #[test]
    fn names_aliases_and_spellings_are_one_agent() {
        let a = agents();
        for name in ["claude-code", "Claude Code", "claude", "CLAUDE"] {
            assert_eq!(a.key(name), "claude code", "{name}");
            assert_eq!(a.voice(name).as_deref(), Some("en_US-amy-low"), "{name}");
        }
        assert_eq!(a.key("Cursor"), "cursor");
        assert_eq!(a.voice("cursor"), None);
        assert_eq!(a.rate("claude"), Some(1.2));
        assert_eq!(a.earcon("claude"), Chime::High);
        assert_eq!(a.earcon("cursor"), Chime::Default);
    }

    #[test]
    fn a_change_at_run_time_replaces_the_configured_agent_until_reset() {
        let a = agents();
        let shared = a.clone();
        // Another spelling of the same name: it replaces, it does not add.
        a.set(
            "Claude Code",
            Some(AgentConfig {
                aliases: vec!["clod".into()],
                voice: Some("de_DE-thorsten-medium".into()),
                rate: Some(0.9),
                earcon: Chime::Triple,
                announce: false,
            }),
        );
        for name in ["claude-code", "clod"] {
            assert_eq!(
                shared.voice(name).as_deref(),
                Some("de_DE-thorsten-medium"),
                "{name}"
            );
            assert_eq!(shared.key(name), "claude code", "{name}");
        }
        assert_eq!(shared.key("claude"), "claude", "the old alias is gone");
        assert_eq!(shared.rate("clod"), Some(0.9));
        assert_eq!(shared.earcon("clod"), Chime::Triple);
        assert_eq!(shared.announcement("claude-code"), None);
        let all = shared.all();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(
            (all[0].name.as_str(), all[0].source),
            ("Claude Code", Source::RunTime)
        );
        // A name never set before gets settings of its own.
        a.set(
            "cursor",
            Some(AgentConfig {
                earcon: Chime::Low,
                ..AgentConfig::default()
            }),
        );
        assert_eq!(shared.earcon("Cursor"), Chime::Low);
        a.set("claude-code", None);
        assert_eq!(shared.voice("claude").as_deref(), Some("en_US-amy-low"));
        assert_eq!(shared.get("claude").unwrap().source, Source::Config);
    }

    #[test]
    fn announcements_say_the_name_people_use() {
        let a = agents();
        assert_eq!(
            a.announcement("claude-code").as_deref(),
            Some("Claude says:")
        );
        assert_eq!(a.announcement("cursor").as_deref(), Some("Cursor says:"));
        assert_eq!(
            a.announcement("my-agent").as_deref(),
            Some("My agent says:")
        );
        assert_eq!(a.announcement("quiet-bot"), None);
    }
}
