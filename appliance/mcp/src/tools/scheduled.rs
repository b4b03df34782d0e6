//! `list_scheduled` and `cancel_scheduled` — speech and timers kept for
//! later (`speak_text` with `delay_seconds` or `at`): what is kept, the
//! soonest first, and cancelling one by its id (a ringing timer stops).

pub use hark_core::room::Scheduled;
use rmcp::{
    ErrorData, handler::server::wrapper::Parameters, model::CallToolResult, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolResult as _, success};
use crate::server::HarkServer;

#[derive(Debug, Serialize, JsonSchema)]
pub struct ScheduledList {
    /// A timer ringing now first, then the soonest.
    pub scheduled: Vec<Scheduled>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CancelScheduled {
    /// The id `speak_text` or `list_scheduled` gave.
    pub id: i64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Cancelled {
    /// What was cancelled.
    pub cancelled: Scheduled,
}

#[tool_router(router = scheduled_router, vis = "pub(crate)")]
impl HarkServer {
    /// List the speech and timers kept to be said later (`speak_text` with
    /// `delay_seconds` or `at`), a ringing timer first, then the soonest.
    #[tool(
        name = "list_scheduled",
        output_schema = super::output_schema::<ScheduledList>(),
        annotations(
            title = "Speech and timers kept for later",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    pub async fn list_scheduled(&self) -> Result<CallToolResult, ErrorData> {
        Ok(match self.room.schedule.scheduled().await {
            Ok(scheduled) => success(
                match scheduled.len() {
                    0 => "nothing is kept for later".to_owned(),
                    n => format!("{n} kept for later"),
                },
                ScheduledList { scheduled },
            ),
            Err(e) => e.into_result(),
        })
    }

    /// Cancel speech or a timer kept for later, by its id; a ringing timer
    /// stops.
    #[tool(
        name = "cancel_scheduled",
        output_schema = super::output_schema::<Cancelled>(),
        annotations(
            title = "Cancel speech or a timer kept for later",
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    pub async fn cancel_scheduled(
        &self,
        Parameters(CancelScheduled { id }): Parameters<CancelScheduled>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.room.schedule.cancel(id).await {
            Ok(cancelled) => success(
                format!("cancelled {id}: {}", cancelled.text),
                Cancelled { cancelled },
            ),
            Err(e) => e.into_result(),
        })
    }
}
