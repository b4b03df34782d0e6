//! `list_captures` — the history: what was heard in the room (agents'
//! listens and the person's messages) and what was spoken, newest first,
//! with who, when, why it ended, how long and whom it reached
//! ([`crate::history`]). Pages back with `before`.

use std::sync::Arc;

use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolError, success};
use crate::{
    history::{Capture, Kind, Query},
    mcp::HarkServer,
};

/// Most rows one call returns.
pub const MAX_LIMIT: u32 = 500;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListCaptures {
    /// Rows to return, newest first (1–500; default 20).
    pub limit: Option<u32>,
    /// Only rows older than this id: pass the smallest id of the previous
    /// page to page back.
    pub before: Option<i64>,
    /// Only this agent's rows (as `get_status` names it).
    pub agent: Option<String>,
    /// Only `heard` (an agent listened), `message` (the person spoke
    /// unprompted) or `spoken` rows.
    pub kind: Option<Kind>,
}

/// `list_captures`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Captures {
    /// Newest first: `id`, `at`, `kind`, `agent`, `text`, `end_reason`,
    /// `duration`, `delivered_to`, `audio`.
    pub captures: Vec<Capture>,
    /// Whether older rows match too (page back with `before`).
    pub more: bool,
}

#[tool_router(router = list_captures_router, vis = "pub(crate)")]
impl HarkServer {
    /// The history of the room, newest first: what the person said (to an
    /// agent that listened, or unprompted) and what was spoken, with who,
    /// when, why it ended and whom it reached.
    #[tool(
        name = "list_captures",
        output_schema = super::output_schema::<Captures>(),
        annotations(title = "History of the room", read_only_hint = true, open_world_hint = false)
    )]
    pub async fn list_captures(
        &self,
        Parameters(args): Parameters<ListCaptures>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.captures(args).await {
            Ok(captures) => {
                let text = captures
                    .captures
                    .iter()
                    .map(|c| {
                        format!(
                            "{} {} {}: {}",
                            c.at,
                            c.kind.as_str(),
                            c.agent.as_deref().unwrap_or(match c.kind {
                                Kind::Spoken => "hark",
                                _ => "person",
                            }),
                            c.text
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                success(
                    if text.is_empty() {
                        "(no captures)".to_owned()
                    } else {
                        text
                    },
                    captures,
                )
            }
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn captures(&self, args: ListCaptures) -> Result<Captures, ToolError> {
        let limit = args.limit.unwrap_or(20);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ToolError::invalid(format!(
                "limit must be 1–{MAX_LIMIT}, got {limit}"
            )));
        }
        let history = self.state.history.get().cloned().ok_or_else(|| {
            ToolError::new(
                "HistoryError",
                "the history is off on this appliance (history.enabled = false) or could not start (see get_status)",
            )
        })?;
        let query = Query {
            limit: limit as usize,
            before: args.before,
            agent: args.agent,
            kind: args.kind,
        };
        let (captures, more) = tokio::task::spawn_blocking(move || history_list(&history, &query))
            .await
            .map_err(|e| ToolError::new("HistoryError", format!("the history failed: {e}")))??;
        Ok(Captures { captures, more })
    }
}

fn history_list(
    history: &Arc<crate::history::History>,
    query: &Query,
) -> Result<(Vec<Capture>, bool), ToolError> {
    history
        .list(query)
        .map_err(|e| ToolError::new("HistoryError", e.to_string()))
}
