//! `list_captures` — the history: what was heard in the room (agents'
//! listens and the person's messages) and what was spoken, newest first,
//! with who, when, why it ended, how long and whom it reached
//! ([`hark_store::history`]). Pages back with `before`.

use hark_core::room::Failure;
use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolResult as _, success};
use crate::server::HarkServer;
use hark_store::history::{self, Query};

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

/// What a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An agent listened (`transcribe_voice`, `converse`, `confirm`,
    /// `choose`) and the person spoke.
    Heard,
    /// The person spoke a message unprompted (the button).
    Message,
    /// Hark spoke an agent's text (or its own words).
    Spoken,
}

impl From<Kind> for history::Kind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Heard => history::Kind::Heard,
            Kind::Message => history::Kind::Message,
            Kind::Spoken => history::Kind::Spoken,
        }
    }
}

impl From<history::Kind> for Kind {
    fn from(kind: history::Kind) -> Self {
        match kind {
            history::Kind::Heard => Kind::Heard,
            history::Kind::Message => Kind::Message,
            history::Kind::Spoken => Kind::Spoken,
        }
    }
}

/// One row, as `list_captures` returns it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Capture {
    pub id: i64,
    /// When (RFC 3339, UTC).
    pub at: String,
    pub kind: Kind,
    /// The agent that listened or spoke; null for the person's message and
    /// for Hark's own words.
    pub agent: Option<String>,
    pub text: String,
    /// Why the recording ended (`end_of_speech`, `stopped`, …), or how the
    /// speech ended (`spoken`, `stopped`, `failed`).
    pub end_reason: Option<String>,
    /// Seconds of speech.
    pub duration: Option<f64>,
    /// Whom the utterance reached: the listening agent, or the agent that
    /// took the person's message (null while it waits).
    pub delivered_to: Option<String>,
    /// The kept audio's file name in `history-audio/` (with
    /// `history.keep_audio`).
    pub audio: Option<String>,
}

impl From<history::Capture> for Capture {
    fn from(row: history::Capture) -> Self {
        Capture {
            id: row.id,
            at: row.at,
            kind: row.kind.into(),
            agent: row.agent,
            text: row.text,
            end_reason: row.end_reason,
            duration: row.duration,
            delivered_to: row.delivered_to,
            audio: row.audio,
        }
    }
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
                            history::Kind::from(c.kind).as_str(),
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
    async fn captures(&self, args: ListCaptures) -> Result<Captures, Failure> {
        let limit = args.limit.unwrap_or(20);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Failure::invalid(format!(
                "limit must be 1–{MAX_LIMIT}, got {limit}"
            )));
        }
        let history = self.state.history.as_ref().ok_or_else(|| {
            Failure::new(
                hark_core::room::Kind::History,
                "the history is off on this appliance (history.enabled = false) or could not start (see get_status)",
            )
        })?;
        let query = Query {
            limit: limit as usize,
            before: args.before,
            agent: args.agent,
            kind: args.kind.map(Into::into),
        };
        let (captures, more) = history
            .list(query)
            .await
            .map_err(|e| Failure::new(hark_core::room::Kind::History, e.to_string()))?;
        Ok(Captures {
            captures: captures.into_iter().map(Capture::from).collect(),
            more,
        })
    }
}
