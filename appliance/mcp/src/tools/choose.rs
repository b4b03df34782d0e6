//! `choose` — an agent asks the person to pick one of a few options: the
//! question and the numbered options are spoken, then the person answers
//! with the option's words ("sushi"), its number ("the second one") or
//! "none". Matching is in [`hark_core::words::choose`]; nothing that matches no
//! option (or two equally) is guessed: `choice` is null and `outcome` says
//! why.

pub use hark_core::room::Chosen;
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
pub struct Choose {
    /// The question, e.g. "Which restaurant should I book?" (at most 1000
    /// characters).
    pub question: String,
    /// The options, 2 to 8, each different and at most 200 characters; they
    /// are read out numbered.
    pub options: Vec<String>,
    /// Seconds to wait for the answer to begin after the options are read
    /// (0.5–300; default `mcp.record_timeout`, 15).
    pub timeout_seconds: Option<f64>,
    /// A voice id from `list_voices` (default: the appliance's voice).
    pub voice: Option<String>,
    /// Wait for the microphone when another call holds it (default true),
    /// up to `timeout_seconds`; false: `BusyError` at once.
    pub queue: Option<bool>,
}

#[tool_router(router = choose_router, vis = "pub(crate)")]
impl HarkServer {
    /// Ask the person in the room to pick one of 2–8 options. The question
    /// and the numbered options are read out; the person answers with the
    /// option, its number ("the second one") or "none". `choice` is null
    /// when nothing clearly matched: ask again or fall back, never guess.
    #[tool(
        name = "choose",
        output_schema = super::output_schema::<Chosen>(),
        annotations(
            title = "Ask the person to choose",
            read_only_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn choose(
        &self,
        Parameters(args): Parameters<Choose>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.ask_choice(args, &context).await {
            Ok(chosen) => {
                let text = chosen
                    .choice
                    .clone()
                    .unwrap_or_else(|| chosen.outcome.as_str().to_owned());
                success(text, chosen)
            }
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn ask_choice(
        &self,
        args: Choose,
        context: &RequestContext<RoleServer>,
    ) -> Result<Chosen, Failure> {
        let question = self.question(
            context,
            args.question,
            args.voice,
            args.timeout_seconds,
            args.queue,
        );
        let mut report = CallReport::dialogue(self, context, Doing::Asking);
        let chosen = self.room.ask.choose(question, args.options, &mut report);
        super::unless_ended(
            self,
            context,
            chosen,
            "choose was cancelled; nothing was chosen",
        )
        .await
    }
}
