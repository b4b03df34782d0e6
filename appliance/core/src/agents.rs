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

/// The configured agents: built once at start-up; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    configured: std::sync::Arc<BTreeMap<String, AgentConfig>>,
}

/// The form names are compared in: "Claude-Code" and "claude code" are one.
pub fn plain(name: &str) -> String {
    words::words(name).join(" ")
}

impl Agents {
    pub fn new(configured: BTreeMap<String, AgentConfig>) -> Self {
        Self {
            configured: std::sync::Arc::new(configured),
        }
    }

    /// The configured agent `name` is (by its name or an alias).
    fn find(&self, name: &str) -> Option<(&String, &AgentConfig)> {
        let wanted = plain(name);
        self.configured.iter().find(|(configured, agent)| {
            plain(configured) == wanted || agent.aliases.iter().any(|a| plain(a) == wanted)
        })
    }

    /// The key `name` is compared by: its configured agent's, else its own.
    pub fn key(&self, name: &str) -> String {
        match self.find(name) {
            Some((configured, _)) => plain(configured),
            None => plain(name),
        }
    }

    /// Every configured agent with its aliases (for addressing).
    pub fn names(&self) -> impl Iterator<Item = (&String, &Vec<String>)> {
        self.configured.iter().map(|(name, a)| (name, &a.aliases))
    }

    /// The voice the agent speaks in when a call names none.
    pub fn voice(&self, name: &str) -> Option<&str> {
        self.find(name).and_then(|(_, a)| a.voice.as_deref())
    }

    /// The agent's speaking rate when a call gives none.
    pub fn rate(&self, name: &str) -> Option<f32> {
        self.find(name).and_then(|(_, a)| a.rate).map(|r| r as f32)
    }

    /// The agent's listening chime.
    pub fn earcon(&self, name: &str) -> Chime {
        self.find(name).map_or(Chime::Default, |(_, a)| a.earcon)
    }

    /// What Hark says before the agent's speech when the speaker changes,
    /// or `None` when the agent asked not to be announced.
    pub fn announcement(&self, name: &str) -> Option<String> {
        let (spoken, announce) = match self.find(name) {
            Some((configured, agent)) => (
                agent
                    .aliases
                    .first()
                    .cloned()
                    .unwrap_or_else(|| plain(configured)),
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
            assert_eq!(a.voice(name), Some("en_US-amy-low"), "{name}");
        }
        assert_eq!(a.key("Cursor"), "cursor");
        assert_eq!(a.voice("cursor"), None);
        assert_eq!(a.rate("claude"), Some(1.2));
        assert_eq!(a.earcon("claude"), Chime::High);
        assert_eq!(a.earcon("cursor"), Chime::Default);
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
