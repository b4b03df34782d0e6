//! `agent_settings` (admin) — each agent's voice, rate, chime, aliases and
//! announcing, changed at run time: applied at once, kept across restarts
//! in place of `hark.toml`'s `[agents.NAME]` until reset. The status page
//! changes them through the same function (`POST /api/agent-settings`).

use hark_core::room::Failure;
use hark_core::{
    agents::Chime,
    room::{AgentChange, AgentSettingsList, AgentSettingsView},
};
use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolResult as _, success};
use crate::server::HarkServer;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSettingsArgs {
    /// The agent to change or show, by name or alias (a paired agent's
    /// token name). Omitted: every agent, changing nothing.
    pub agent: Option<String>,
    /// Other names the person calls it by (at most 8); the first is said
    /// when Hark announces it. `[]` removes them.
    pub aliases: Option<Vec<String>>,
    /// A voice id from `list_voices`, `espeak:<name>`, or `default` for
    /// the appliance's voice.
    pub voice: Option<String>,
    /// Its speaking rate when a call gives none, 0.5–2.0.
    pub rate: Option<f64>,
    /// Its listening chime: `default`, `high`, `low` or `triple`.
    pub chime: Option<Chime>,
    /// Say its name before its speech when another agent spoke last.
    pub announce: Option<bool>,
    /// Drop what was changed at run time (back to `hark.toml`'s settings
    /// or the defaults); other fields given apply after.
    #[serde(default)]
    pub reset: bool,
}

/// Shows or changes agents' settings: the tool's and the status page's.
pub(crate) async fn apply(
    server: &crate::state::ServerState,
    room: &hark_core::room::Capabilities,
    args: AgentSettingsArgs,
) -> Result<AgentSettingsList, Failure> {
    use hark_core::agents::plain;
    let mut list = room.agents.agents().await?;
    // The paired agents (not the status page's browsers), by token name.
    let paired: Vec<String> = server
        .auth
        .store()
        .map(|s| s.list())
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.name)
        .filter(|name| !name.starts_with(crate::auth::BROWSER_PREFIX))
        .collect();
    let Some(agent) = args.agent else {
        let changes = args.aliases.is_some()
            || args.voice.is_some()
            || args.rate.is_some()
            || args.chime.is_some()
            || args.announce.is_some()
            || args.reset;
        if changes {
            return Err(Failure::invalid(
                "name the agent to change (`agent`)".to_owned(),
            ));
        }
        // Paired agents without settings have the defaults.
        for name in paired {
            if !list.agents.iter().any(|a| plain(&a.name) == plain(&name)) {
                list.agents.push(AgentSettingsView::of(&name, None));
            }
        }
        list.agents.sort_by_key(|a| plain(&a.name));
        return Ok(list);
    };
    // An agent without settings yet is named as it was paired.
    let wanted = plain(&agent);
    let known = list
        .agents
        .iter()
        .any(|a| plain(&a.name) == wanted || a.aliases.iter().any(|x| plain(x) == wanted));
    let agent = match paired.into_iter().find(|name| plain(name) == wanted) {
        Some(name) if !known => name,
        _ => agent,
    };
    let changed = room
        .agents
        .change_agent(AgentChange {
            agent,
            aliases: args.aliases,
            voice: args.voice,
            rate: args.rate,
            chime: args.chime,
            announce: args.announce,
            reset: args.reset,
        })
        .await?;
    list.agents = vec![changed];
    Ok(list)
}

#[tool_router(router = agent_settings_router, vis = "pub(crate)")]
impl HarkServer {
    /// Show or change each agent's voice, speaking rate, listening chime,
    /// aliases and announcing, at once and kept across restarts. Without
    /// `agent`: every agent's settings.
    #[tool(
        name = "agent_settings",
        output_schema = super::output_schema::<AgentSettingsList>(),
        annotations(
            title = "Agents' settings",
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn agent_settings(
        &self,
        Parameters(args): Parameters<AgentSettingsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match apply(&self.state, &self.room, args).await {
            Ok(list) => {
                let text = list
                    .agents
                    .iter()
                    .map(|a| {
                        format!(
                            "{}: voice {}, rate {}, chime {}, aliases [{}], {}",
                            a.name,
                            a.voice.as_deref().unwrap_or(&list.default_voice),
                            a.rate.unwrap_or(1.0),
                            a.chime.name(),
                            a.aliases.join(", "),
                            if a.announce {
                                "announced"
                            } else {
                                "not announced"
                            },
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                success(text, list)
            }
            Err(e) => e.into_result(),
        })
    }
}
