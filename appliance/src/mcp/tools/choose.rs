//! `choose` — an agent asks the person to pick one of a few options: the
//! question and the numbered options are spoken, then the person answers
//! with the option's words ("sushi"), its number ("the second one") or
//! "none". Matching is in [`crate::words::choose`]; nothing that matches no
//! option (or two equally) is guessed: `choice` is null and `outcome` says
//! why.

use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ToolError,
    confirm::{Asking, check_question},
    speak_text::{Speech, SpeechProgress},
    success,
    transcribe_voice::ListenProgress,
};
use crate::{
    listen::{self, Chime, Listen, ListenError},
    mcp::HarkServer,
    words::{self, Choice},
};

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

/// `choose`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Chosen {
    /// The option picked, as given; null when none was.
    pub choice: Option<String>,
    /// Its position in `options`, from 0; null when none was picked.
    pub index: Option<usize>,
    /// `chosen`, `none` (the person said none of them), `unclear` (no
    /// option matched, or two equally: see `transcript`) or `no_answer`.
    pub outcome: String,
    /// `voice`; null with `no_answer`.
    pub by: Option<String>,
    /// How the option was recognised: `words` (its own words) or `ordinal`
    /// ("the second one").
    pub matched_by: Option<String>,
    /// What the person said.
    pub transcript: Option<String>,
}

const NUMBERS: [&str; 8] = [
    "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight",
];

/// What is read out: the question, then each option with its number.
pub fn prompt(question: &str, options: &[String]) -> String {
    let mut text = question.trim().to_owned();
    if !text.ends_with(['?', '.', '!']) {
        text.push('?');
    }
    for (number, option) in NUMBERS.iter().zip(options) {
        let option = option
            .trim()
            .trim_end_matches(['.', '!', '?', ',', ';', ':']);
        text.push_str(&format!(" {number}: {option}."));
    }
    text
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
                    .unwrap_or_else(|| chosen.outcome.clone());
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
    ) -> Result<Chosen, ToolError> {
        let question = check_question(&args.question)?;
        words::check_options(&args.options).map_err(|e| ToolError::invalid(e.to_string()))?;
        let timeout = self.listen_timeout(args.timeout_seconds)?;
        if self.state.muted.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ListenError::Muted.into());
        }
        let agent = self.agent_name(context);
        let turn = self
            .take_floor(context, "choose", args.queue.unwrap_or(true), timeout)
            .await?;
        let _doing = self.doing(context, "asking");
        let mut asking = Asking::new(&self.state, agent.clone());
        let mut progress = SpeechProgress::new(context, None);
        let speech = Speech {
            deadline: Some(turn.deadline),
            ..Speech::plain(prompt(&question, &args.options), args.voice)
        };
        self.say(speech, true, context, &mut progress).await?;
        let request = Listen {
            agent: Some(agent),
            timeout,
            language: None,
            chime: Chime::First,
            push_to_talk: true,
            turn: Some(turn),
        };
        let mut listening = ListenProgress::new(context, progress.step(), None);
        let heard = tokio::select! {
            heard = listen::listen(&self.state, request, &mut listening) => heard?,
            _ = super::call_ended(self, context) => {
                return Err(ToolError::new("CancelledError", "choose was cancelled; nothing was chosen"));
            }
        };
        if !heard.speech {
            asking.answered("no_answer");
            return Ok(Chosen {
                choice: None,
                index: None,
                outcome: "no_answer".into(),
                by: None,
                matched_by: None,
                transcript: None,
            });
        }
        let (index, outcome, matched_by) = match words::choose(&heard.text, &args.options) {
            Choice::Named(i) => (Some(i), "chosen", Some("words")),
            Choice::Ordinal(i) => (Some(i), "chosen", Some("ordinal")),
            Choice::NoneOfThem => (None, "none", None),
            Choice::Unclear => (None, "unclear", None),
        };
        asking.answered(outcome);
        Ok(Chosen {
            choice: index.and_then(|i| args.options.get(i).cloned()),
            index,
            outcome: outcome.into(),
            by: Some("voice".into()),
            matched_by: matched_by.map(str::to_owned),
            transcript: Some(heard.text),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_are_read_out_numbered() {
        let options = vec![
            "Pizza.".to_owned(),
            "  sushi ".to_owned(),
            "tacos".to_owned(),
        ];
        assert_eq!(
            prompt("What shall we eat", &options),
            "What shall we eat? One: Pizza. Two: sushi. Three: tacos."
        );
        assert_eq!(
            prompt("Pick one.", &options[..2]),
            "Pick one. One: Pizza. Two: sushi."
        );
    }
}
