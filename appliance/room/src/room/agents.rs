//! Agents' settings at run time: what the status page and `agent_settings`
//! change (voice, rate, chime, aliases, announcing), checked, kept in the
//! agent store and applied at once through the shared [`Agents`] table,
//! which speech, the chimes and the inbox's addressing all read.
//!
//! [`Agents`]: hark_core::agents::Agents

use std::sync::Arc;

use hark_core::{
    agents::{AgentConfig, Effective, plain},
    room::{
        AgentChange, AgentSettings, AgentSettingsList, AgentSettingsView, BoxFuture, Failure, Kind,
    },
};
use hark_tts::voices::VoiceStore;

use super::{Room, failure};

/// Most aliases one agent may have.
pub const MAX_ALIASES: usize = 8;
/// Longest name or alias, in characters.
pub const MAX_NAME: usize = 64;

fn invalid(message: String) -> Failure {
    Failure::new(Kind::InvalidArgument, message)
}

/// A name or alias the person could say: some words, not too long.
fn check_name(what: &str, name: &str) -> Result<(), Failure> {
    if name.chars().count() > MAX_NAME {
        return Err(invalid(format!(
            "{what} `{name}` is longer than {MAX_NAME} characters"
        )));
    }
    if plain(name).is_empty() {
        return Err(invalid(format!(
            "{what} `{name}` has no letters or digits to say"
        )));
    }
    Ok(())
}

impl Room {
    /// The change applied to `current`, checked against the other agents'
    /// names and the voices installed.
    fn changed(
        &self,
        current: AgentConfig,
        name: &str,
        change: &AgentChange,
    ) -> Result<AgentConfig, Failure> {
        let mut next = current;
        if let Some(aliases) = &change.aliases {
            if aliases.len() > MAX_ALIASES {
                return Err(invalid(format!(
                    "at most {MAX_ALIASES} aliases, got {}",
                    aliases.len()
                )));
            }
            let own = self.state.keeping.agents.key(name);
            let mut seen: Vec<String> = vec![plain(name)];
            let mut kept = Vec::new();
            for alias in aliases.iter().map(|a| a.trim()) {
                check_name("the alias", alias)?;
                let key = plain(alias);
                if seen.contains(&key) {
                    continue;
                }
                // Another agent's name or alias would make "Claude, …"
                // mean two agents.
                if let Some(Effective { name: other, .. }) = self.state.keeping.agents.get(alias)
                    && plain(&other) != own
                {
                    return Err(invalid(format!(
                        "`{alias}` already names the agent `{other}`"
                    )));
                }
                seen.push(key);
                kept.push(alias.to_owned());
            }
            next.aliases = kept;
        }
        if let Some(rate) = change.rate {
            hark_core::room::check_rate(Some(rate))?;
            next.rate = Some(rate);
        }
        if let Some(chime) = change.chime {
            next.earcon = chime;
        }
        if let Some(announce) = change.announce {
            next.announce = announce;
        }
        Ok(next)
    }

    /// `voice` as a setting: `None` for the appliance's; an installed
    /// piper voice (its id as installed) or an espeak-ng one otherwise.
    async fn check_voice(&self, voice: &str) -> Result<Option<String>, Failure> {
        let voice = voice.trim();
        if voice.is_empty() || voice.eq_ignore_ascii_case("default") {
            return Ok(None);
        }
        if let Some(name) = voice.strip_prefix("espeak:") {
            let name = name.to_owned();
            // The lock espeak-ng is behind may be held for a sentence.
            let known = tokio::task::spawn_blocking(move || {
                hark_tts::espeak::Espeak::get().is_ok_and(|e| e.has_voice(&name))
            })
            .await
            .map_err(|e| failure::task(Kind::Voice, "checking", e))?;
            if !known {
                return Err(Failure::new(
                    Kind::VoiceNotFound,
                    format!(
                        "espeak-ng has no voice `{}` (`espeak-ng --voices` lists them: `espeak:de`, `espeak:en-us`, …)",
                        &voice["espeak:".len()..]
                    ),
                ));
            }
            return Ok(Some(voice.to_owned()));
        }
        let tts = Arc::clone(&self.state.voice.tts);
        let installed = tokio::task::spawn_blocking(move || {
            VoiceStore::open(&tts.voices_dir).and_then(|store| store.list())
        })
        .await
        .map_err(|e| failure::task(Kind::Voice, "listing", e))?
        .map_err(failure::voices)?;
        let key = hark_tts::catalog::id_key;
        installed
            .installed
            .iter()
            .find(|v| key(&v.id) == key(voice))
            .map(|v| Some(v.id.clone()))
            .ok_or_else(|| {
                let ids: Vec<&str> = installed.installed.iter().map(|v| v.id.as_str()).collect();
                Failure::new(
                    Kind::VoiceNotFound,
                    format!(
                        "no voice `{voice}` is installed (installed: {}; `espeak:<name>` for an espeak-ng voice, `default` for the appliance's)",
                        ids.join(", ")
                    ),
                )
            })
    }
}

impl AgentSettings for Room {
    fn agents(&self) -> BoxFuture<'_, Result<AgentSettingsList, Failure>> {
        Box::pin(async move {
            Ok(AgentSettingsList {
                agents: self
                    .state
                    .keeping
                    .agents
                    .all()
                    .into_iter()
                    .map(|e| AgentSettingsView::of(&e.name.clone(), Some(e)))
                    .collect(),
                default_voice: self.state.voice.tts.default_voice.clone(),
                kept: self.state.keeping.agent_store.as_ref().map_or_else(
                    || "in memory only: the agent store did not open".to_owned(),
                    |s| s.kept.clone(),
                ),
            })
        })
    }

    fn change_agent(
        &self,
        change: AgentChange,
    ) -> BoxFuture<'_, Result<AgentSettingsView, Failure>> {
        Box::pin(async move {
            let asked = change.agent.trim();
            check_name("the agent", asked)?;
            let agents = &self.state.keeping.agents;
            // The agent as it stands: by name or alias; a new name keeps
            // the spelling given.
            let found = agents.get(asked);
            let name = found.as_ref().map_or(asked.to_owned(), |e| e.name.clone());
            // The spellings its kept settings may be under.
            let spellings: Vec<String> = agents
                .all()
                .into_iter()
                .filter(|e| plain(&e.name) == plain(&name))
                .map(|e| e.name)
                .chain(std::iter::once(name.clone()))
                .collect();
            let store = self.state.keeping.agent_store.clone();
            if change.reset {
                if let Some(store) = &store {
                    store
                        .remove(spellings.clone())
                        .await
                        .map_err(|e| Failure::new(Kind::Settings, e.to_string()))?;
                }
                agents.set(&name, None);
            }
            let changes_something = change.aliases.is_some()
                || change.voice.is_some()
                || change.rate.is_some()
                || change.chime.is_some()
                || change.announce.is_some();
            if changes_something {
                // Read again: a reset just above brought hark.toml's back.
                let current = agents.get(&name).map(|e| e.config).unwrap_or_default();
                let mut next = self.changed(current, &name, &change)?;
                if let Some(voice) = &change.voice {
                    next.voice = self.check_voice(voice).await?;
                }
                // Kept first: what the agents hear is never what a restart
                // would lose.
                if let Some(store) = &store {
                    store
                        .put(&name, &next, spellings)
                        .await
                        .map_err(|e| Failure::new(Kind::Settings, e.to_string()))?;
                }
                agents.set(&name, Some(next));
            }
            tracing::info!(agent = %name, reset = change.reset, "agent settings changed");
            Ok(AgentSettingsView::of(&name, agents.get(&name)))
        })
    }
}
