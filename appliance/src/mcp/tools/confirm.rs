//! `confirm` — an agent asks the person a yes/no question before doing
//! something that matters, and gets the answer: spoken ("yes", "go ahead",
//! "no", "not now", … — `[confirm] yes/no`, see [`crate::words`]) or by the
//! button (a short press is yes, a long press no). While the microphone is
//! open for the answer the lights show "asking"; the button answers from
//! the moment the question starts. Anything that is neither yes nor no is
//! `unclear`, with the transcript — never a guess.

use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ToolError,
    speak_text::{Speech, SpeechProgress},
    success,
    transcribe_voice::ListenProgress,
};
use crate::{
    events::Event,
    listen::{self, Chime, Heard, Listen, ListenError},
    mcp::HarkServer,
    state::ApplianceState,
    words::Answer,
};

/// Longest question `confirm` and `choose` speak, in characters: a
/// question is a sentence or two; more belongs in `speak_text` first.
pub const QUESTION_MAX_CHARS: usize = 1000;

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

/// `confirm`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Confirmed {
    /// `yes`, `no`, `no_answer` (nothing said or pressed in time) or
    /// `unclear` (something else was said: see `transcript`).
    pub answer: String,
    /// `voice` or `button`; null with `no_answer`.
    pub by: Option<String>,
    /// What the person said, when they answered by voice.
    pub transcript: Option<String>,
    /// How sure: the transcript's mean token probability (0–1) for a spoken
    /// answer, 1 for the button.
    pub confidence: Option<f32>,
}

/// The question checked: not empty, not over [`QUESTION_MAX_CHARS`].
pub fn check_question(question: &str) -> Result<String, ToolError> {
    let trimmed = question.trim();
    if trimmed.is_empty() {
        return Err(ToolError::invalid(
            "question is empty; give the question to ask the person",
        ));
    }
    let chars = trimmed.chars().count();
    if chars > QUESTION_MAX_CHARS {
        return Err(ToolError::invalid(format!(
            "question is {chars} characters; a question may have at most {QUESTION_MAX_CHARS}: say the details with speak_text first"
        ))
        .with_context(serde_json::json!({ "characters": chars, "limit": QUESTION_MAX_CHARS })));
    }
    Ok(trimmed.to_owned())
}

/// Marks an agent's question as waiting for the person on the event
/// stream (the "asking" light) until it drops.
pub struct Asking<'a> {
    state: &'a ApplianceState,
    id: u64,
    answer: &'static str,
}

impl<'a> Asking<'a> {
    pub fn new(state: &'a ApplianceState, agent: String) -> Self {
        let id = state.bus.next_id();
        state.bus.publish(Event::AnswerAwaited { ask: id, agent });
        Self {
            state,
            id,
            answer: "cancelled",
        }
    }

    pub fn answered(&mut self, answer: &'static str) {
        self.answer = answer;
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.state.bus.publish(Event::AnswerEnded {
            ask: self.id,
            answer: self.answer.to_owned(),
        });
    }
}

fn answer_name(answer: Answer) -> &'static str {
    match answer {
        Answer::Yes => "yes",
        Answer::No => "no",
        Answer::Unclear => "unclear",
    }
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
            Ok(confirmed) => success(confirmed.answer.clone(), confirmed),
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn ask_yes_no(
        &self,
        args: Confirm,
        context: &RequestContext<RoleServer>,
    ) -> Result<Confirmed, ToolError> {
        let question = check_question(&args.question)?;
        let timeout = self.listen_timeout(args.timeout_seconds)?;
        if self.state.muted.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ListenError::Muted.into());
        }
        let agent = self.agent_name(context);
        let turn = self
            .take_floor(context, "confirm", args.queue.unwrap_or(true), timeout)
            .await?;
        let _doing = self.doing(context, "asking");
        let mut asking = Asking::new(&self.state, agent.clone());
        // From before the question: a press while it is spoken answers it.
        let mut events = self.state.bus.subscribe();
        let mut button = crate::board::ButtonAnswer::default();
        let by_button = |answer: Answer| Confirmed {
            answer: answer_name(answer).into(),
            by: Some("button".into()),
            transcript: None,
            confidence: Some(1.0),
        };
        let mut progress = SpeechProgress::new(context, None);
        let speech = Speech {
            deadline: Some(turn.deadline),
            ..Speech::plain(question, args.voice)
        };
        self.say(speech, true, context, &mut progress).await?;
        let early = button.drain(&mut events);
        if let Some(answer) = early {
            asking.answered(answer_name(answer));
            return Ok(by_button(answer));
        }
        let request = Listen {
            agent: Some(agent),
            timeout,
            language: None,
            // The button is down already: the person is answering.
            chime: if button.down() {
                Chime::None
            } else {
                Chime::First
            },
            // A press here is an answer, not push-to-talk.
            push_to_talk: false,
            turn: Some(turn),
        };
        let mut listening = ListenProgress::new(context, progress.step(), None);
        let heard: Heard = tokio::select! {
            heard = listen::listen(&self.state, request, &mut listening) => heard?,
            answer = button.next(&mut events) => {
                asking.answered(answer_name(answer));
                return Ok(by_button(answer));
            }
            _ = super::call_ended(self, context) => {
                return Err(ToolError::new("CancelledError", "confirm was cancelled; nothing was answered"));
            }
        };
        if !heard.speech {
            asking.answered("no_answer");
            return Ok(Confirmed {
                answer: "no_answer".into(),
                by: None,
                transcript: None,
                confidence: None,
            });
        }
        let answer = self.state.yes_no().classify(&heard.text);
        asking.answered(answer_name(answer));
        Ok(Confirmed {
            answer: answer_name(answer).into(),
            by: Some("voice".into()),
            transcript: Some(heard.text),
            confidence: heard.confidence,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_checked() {
        assert!(check_question("  ").is_err());
        let long = "why ".repeat(5000);
        let e = check_question(&long).unwrap_err();
        assert!(e.message.contains("at most 1000"), "{}", e.message);
        assert_eq!(check_question(" Delete it? ").unwrap(), "Delete it?");
    }
}
