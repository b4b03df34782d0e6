//! `confirm` — an agent asks the person a yes/no question before doing
//! something that matters, and gets the answer: spoken ("yes", "go ahead",
//! "no", "not now", … — `[confirm] yes/no`, see [`hark_core::words`]) or by the
//! button (a short press is yes, a long press no). While the microphone is
//! open for the answer the lights show "asking"; the button answers from
//! the moment the question starts. Anything that is neither yes nor no is
//! `unclear`, with the transcript — never a guess.

pub use hark_core::room::Confirmed;
use hark_core::room::Failure;
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    ToolResult as _,
    report::{CallReport, Doing},
    success,
};
use crate::server::HarkServer;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Confirm {
    /// The yes/no question to ask, e.g. "Shall I delete the 3 old
    /// backups?" (at most 1000 characters).
    pub question: String,
    /// Seconds to wait for the answer to begin after the question
    /// (0.5–300; default `mcp.record_timeout`, 15).
    pub timeout_seconds: Option<f64>,
    /// A voice id from `list_voices` (default: the appliance's voice).
    pub voice: Option<String>,
    /// Wait for the microphone when another call holds it (default true),
    /// up to `timeout_seconds`; false: `BusyError` at once.
    pub queue: Option<bool>,
}

#[tool_router(router = confirm_router, vis = "pub(crate)")]
impl HarkServer {
    /// Ask the person in the room a yes/no question and wait for the
    /// answer. Use it before anything risky or irreversible (deleting,
    /// sending, buying, running commands that change things): do it only on
    /// `yes`. They answer by voice or with the button (short press yes,
    /// long press no). `unclear` and `no_answer` mean: do not proceed.
    #[tool(
        name = "confirm",
        output_schema = super::output_schema::<Confirmed>(),
        annotations(
            title = "Ask the person yes or no",
            read_only_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn confirm(
        &self,
        Parameters(args): Parameters<Confirm>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.ask_yes_no(args, &context).await {
            Ok(confirmed) => success(confirmed.answer.as_str(), confirmed),
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn ask_yes_no(
        &self,
        args: Confirm,
        context: &RequestContext<RoleServer>,
    ) -> Result<Confirmed, Failure> {
        let question = self.question(
            context,
            args.question,
            args.voice,
            args.timeout_seconds,
            args.queue,
        );
        let mut report = CallReport::dialogue(self, context, Doing::Asking);
        let confirmed = self.room.ask.confirm(question, &mut report);
        super::unless_ended(
            self,
            context,
            confirmed,
            "confirm was cancelled; nothing was answered",
        )
        .await
    }
}
