//! A call's progress, from the room to the client: each step becomes a
//! progress notification (when the client asked for them), and what the
//! call is doing is shown beside its client in `get_status`.
//!
//! MCP requires a notification's progress to grow with each one, so the
//! steps are counted: a listen's three steps (`listening`, `speech
//! detected`, `transcribing`) in order, with the partial transcripts
//! between the second and the third at 1 − 1/(n+1) of the way; a speech's
//! two per sentence (made, then heard).

use hark_core::room::{BoxFuture, Progress, Report};
use rmcp::{RoleServer, service::RequestContext};

use crate::{connections::DoingGuard, server::HarkServer};

/// What the call shows itself doing once it has the person's turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    /// `transcribe_voice`: listening.
    Listening,
    /// `speak_text` and `converse`: speaking, then (`converse`) listening.
    Speaking,
    /// `confirm` and `choose`: asking, until the answer.
    Asking,
}

impl Doing {
    fn label(self) -> &'static str {
        match self {
            Doing::Listening => "listening",
            Doing::Speaking => "speaking",
            Doing::Asking => "asking",
        }
    }
}

pub struct CallReport<'a> {
    server: &'a HarkServer,
    context: &'a RequestContext<RoleServer>,
    doing: Doing,
    shown: Option<DoingGuard>,
    /// The next notification's progress value.
    next: f64,
    total: Option<f64>,
    /// Notifications per sentence (`speak_text`: made and heard), to make
    /// the total from the sentence count.
    per_sentence: Option<f64>,
    /// Partial transcripts since the last step.
    partials: u32,
}

impl<'a> CallReport<'a> {
    /// A listen's report: the three steps counted from 0 of 3.
    pub fn listen(server: &'a HarkServer, context: &'a RequestContext<RoleServer>) -> Self {
        Self::new(server, context, Doing::Listening, 0.0, Some(3.0), None)
    }

    /// A speech's report (`speak_text` with `wait`): two steps a sentence.
    pub fn speech(server: &'a HarkServer, context: &'a RequestContext<RoleServer>) -> Self {
        Self::new(server, context, Doing::Speaking, 1.0, None, Some(2.0))
    }

    /// A dialogue's report (`converse`, `confirm`, `choose`): speech, then
    /// a listen, counted on from 1 with no total known in advance.
    pub fn dialogue(
        server: &'a HarkServer,
        context: &'a RequestContext<RoleServer>,
        doing: Doing,
    ) -> Self {
        Self::new(server, context, doing, 1.0, None, None)
    }

    fn new(
        server: &'a HarkServer,
        context: &'a RequestContext<RoleServer>,
        doing: Doing,
        next: f64,
        total: Option<f64>,
        per_sentence: Option<f64>,
    ) -> Self {
        Self {
            server,
            context,
            doing,
            shown: None,
            next,
            total,
            per_sentence,
            partials: 0,
        }
    }

    fn show(&mut self, what: &'static str) {
        match &self.shown {
            Some(shown) => shown.now(what),
            None => self.shown = self.server.doing(self.context, what),
        }
    }

    async fn step(&mut self, message: &str) {
        super::progress(self.context, self.next, self.total, message).await;
        self.next += 1.0;
        self.partials = 0;
    }
}

impl Report for CallReport<'_> {
    fn report(&mut self, progress: Progress) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            match progress {
                Progress::WaitingForFloor => {
                    self.show("waiting for the microphone");
                    super::note(self.context, "waiting for the microphone");
                }
                Progress::Granted => self.show(self.doing.label()),
                Progress::Speaking { pieces } => {
                    if let Some(per) = self.per_sentence {
                        self.total = Some(per * pieces as f64);
                    }
                    if self.doing != Doing::Asking {
                        self.show("speaking");
                    }
                }
                Progress::Synthesized { index, count } => {
                    self.step(&format!("synthesized sentence {} of {count}", index + 1))
                        .await;
                }
                Progress::Playing { index, count } => {
                    self.step(&format!("playing sentence {} of {count}", index + 1))
                        .await;
                }
                Progress::Listening => {
                    if self.doing != Doing::Asking {
                        self.show("listening");
                    }
                    self.step("listening").await;
                }
                Progress::SpeechDetected => self.step("speech detected").await,
                Progress::Transcribing => self.step("transcribing").await,
                Progress::Partial(text) => {
                    // Between the step before and the next: rising with
                    // every one, however many there are.
                    self.partials += 1;
                    let n = f64::from(self.partials);
                    let at = self.next - 1.0 + n / (n + 1.0);
                    super::progress(
                        self.context,
                        at,
                        self.total,
                        &format!("heard so far: {text}"),
                    )
                    .await;
                }
            }
        })
    }
}
