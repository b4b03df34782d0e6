//! An agent's turn with the person, written once. Every call that talks
//! with the person goes through the same steps, in this order:
//!
//! 1. **the floor**: the microphone (and the speaker) for this agent, at
//!    once or after those before it, within the call's timeout; a muted
//!    microphone fails the call first, since nothing could be heard;
//! 2. **the question** (`confirm`, `choose`): the "asking" light until the
//!    call ends;
//! 3. **the speech**, played through, cut at the floor's `max_hold`; the
//!    event stream is watched from before it, so a press while it plays is
//!    seen (barge-in for `converse`, an answer for `confirm`);
//! 4. **the listen**, raced against the button when the button answers.
//!
//! `transcribe_voice` is 1 and 4; `converse` 1, 3 and 4; `confirm` and
//! `choose` all four. Dropping a call at any step cancels it: its place
//! in the queue, its speech, its recording.

use std::time::Duration;

use hark_core::{
    events::{Button, Event, Events},
    room::{
        Ask, BoxFuture, ChoiceOutcome, Chosen, Confirmed, ConverseCall, Conversed, Failure, Heard,
        Listen, ListenCall, Progress, Question, RECORD_TIMEOUT_RANGE, Report, SpeakCall, SpeechEnd,
        SpeechStatus, Spoken, YesNo, check_question, check_timeout, prompt,
    },
    words::{self, Answer},
};
use tokio::time::Instant;

use super::{Room, failure, speech};
use crate::{
    board::ButtonAnswer,
    floor::{Turn, Who},
    listen::{self, Chime, ListenError, barge::Watch},
    state::ApplianceState,
};

/// Marks an agent's question as waiting for the person on the event
/// stream (the "asking" light) until it drops.
struct Asking<'a> {
    bus: &'a crate::events::Bus,
    id: u64,
    answer: hark_core::events::Answered,
}

impl<'a> Asking<'a> {
    fn new(bus: &'a crate::events::Bus, agent: String) -> Self {
        let id = bus.next_id();
        bus.publish(Event::AnswerAwaited { ask: id, agent });
        Self {
            bus,
            id,
            answer: hark_core::events::Answered::Cancelled,
        }
    }

    fn answered(&mut self, answer: impl Into<hark_core::events::Answered>) {
        self.answer = answer.into();
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.bus.publish(Event::AnswerEnded {
            ask: self.id,
            answer: self.answer,
        });
    }
}

/// What a listen in a dialogue ended with.
enum Listened {
    Heard(Heard),
    /// The button answered first.
    Button(Answer),
}

/// One agent's turn with the person.
struct Dialogue<'a> {
    state: &'a std::sync::Arc<ApplianceState>,
    agent: String,
    /// The answer's wait, from the end of what was said.
    timeout: Duration,
    /// How long the call waited for the floor.
    waited: Duration,
    turn: Option<Turn>,
    /// The event stream from before anything was said.
    events: Events,
    report: &'a mut dyn Report,
}

impl<'a> Dialogue<'a> {
    /// Step 1. With `listens`, the floor is taken (and a muted microphone
    /// refused); a `converse` that only speaks takes none.
    async fn open(
        room: &'a Room,
        agent: String,
        tool: &'static str,
        timeout: Option<f64>,
        queue: bool,
        listens: bool,
        report: &'a mut dyn Report,
    ) -> Result<Dialogue<'a>, Failure> {
        let state = &room.state;
        let default = state.ears.stt.record_timeout;
        let timeout = check_timeout(timeout, default, RECORD_TIMEOUT_RANGE)?;
        if listens && state.bus.snapshot().muted {
            // Nothing could be heard: say so before speaking, not after.
            return Err(failure::listen(ListenError::Muted));
        }
        let asked = Instant::now();
        let turn = if listens {
            report.report(Progress::WaitingForFloor).await;
            let turn = state
                .floor
                .take(Who::Agent(agent.clone()), tool, queue, timeout)
                .await
                .map_err(Failure::from)?;
            Some(turn)
        } else {
            None
        };
        report.report(Progress::Granted).await;
        // Subscribed before anything is said: a press while it plays counts.
        let events = state.bus.subscribe();
        Ok(Dialogue {
            state,
            agent,
            timeout,
            waited: asked.elapsed(),
            turn,
            events,
            report,
        })
    }

    /// Step 1 for a question put to the person.
    async fn question(
        room: &'a Room,
        question: &Question,
        tool: &'static str,
        listens: bool,
        report: &'a mut dyn Report,
    ) -> Result<Dialogue<'a>, Failure> {
        let agent = question.agent.clone();
        Self::open(
            room,
            agent,
            tool,
            question.timeout,
            question.queue,
            listens,
            report,
        )
        .await
    }

    /// Step 2: the asking light while the call lasts.
    fn ask(&self) -> Asking<'a> {
        Asking::new(&self.state.bus, self.agent.clone())
    }

    /// Step 3: says `call` (in the agent's voice) to the end.
    async fn say(&mut self, mut call: SpeakCall) -> Result<Spoken, Failure> {
        call.agent = Some(self.agent.clone());
        call.wait = true;
        let deadline = self.turn.as_ref().map(|t| speech::Deadline {
            at: t.deadline,
            max_hold: self.state.floor.max_hold,
        });
        speech::say(
            (&self.state.voice, &self.state.keeping),
            call,
            deadline,
            self.report,
        )
        .await
    }

    /// Whether the person pressed the button since the dialogue opened.
    fn pressed(&mut self) -> bool {
        hark_core::events::received(&mut self.events).any(|event| {
            matches!(
                event.event,
                Event::Button {
                    action: Button::Press
                }
            )
        })
    }

    /// The request for step 4: the dialogue's floor, its agent.
    fn request(
        &mut self,
        timeout: Duration,
        chime: Chime,
        push_to_talk: bool,
        expect: listen::Expect,
    ) -> listen::Listen {
        listen::Listen {
            agent: Some(self.agent.clone()),
            timeout,
            language: None,
            chime,
            push_to_talk,
            turn: self.turn.take(),
            expect,
            start_at: None,
            continuation: false,
            after: crate::continuation::keep(self.state),
        }
    }

    /// Before step 3: what the person went on to say after this agent's
    /// last listen ended their turn, if they did ([`crate::continuation`]).
    async fn went_on(&mut self) -> Option<Heard> {
        crate::continuation::take(&self.state.ears, &self.state.keeping, &self.agent).await
    }

    /// Step 4: listens (push-to-talk holds the recording).
    async fn hear(&mut self, request: listen::Listen) -> Result<Heard, Failure> {
        listen::listen(self.state, request, self.report)
            .await
            .map_err(failure::listen)
    }

    /// Step 4 when the button answers too: a press ends it instead (and
    /// push-to-talk does not hold the recording).
    async fn hear_or_press(
        &mut self,
        timeout: Duration,
        chime: Chime,
        button: &mut ButtonAnswer,
    ) -> Result<Listened, Failure> {
        let request = self.request(timeout, chime, false, listen::Expect::YesNo);
        let heard = listen::listen(self.state, request, self.report);
        tokio::select! {
            heard = heard => heard.map(Listened::Heard).map_err(failure::listen),
            answer = button.next(&mut self.events) => Ok(Listened::Button(answer)),
        }
    }
}

impl Listen for Room {
    fn listen<'a>(
        &'a self,
        call: ListenCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Heard, Failure>> {
        Box::pin(async move {
            let ListenCall {
                agent,
                timeout,
                queue,
                language,
            } = call;
            let mut dialogue = Dialogue::open(
                self,
                agent,
                "transcribe_voice",
                timeout,
                queue,
                true,
                report,
            )
            .await?;
            // The rest of the last turn, when the person went on: theirs
            // already, without opening the microphone.
            if let Some(heard) = dialogue.went_on().await {
                return Ok(heard);
            }
            // The wait for the microphone counts against the timeout; what
            // is left is at least long enough to start speaking.
            let waited = dialogue.waited;
            let timeout = dialogue
                .timeout
                .saturating_sub(waited)
                .max(Duration::from_millis(500));
            // Handed the floor by another listen: the microphone opens at
            // once (the chime plays alongside).
            let chime = if waited > Duration::from_millis(50) {
                Chime::Alongside
            } else {
                Chime::First
            };
            let mut request = dialogue.request(timeout, chime, true, listen::Expect::Anything);
            request.language = language;
            dialogue.hear(request).await
        })
    }
}

impl Ask for Room {
    fn converse<'a>(
        &'a self,
        call: ConverseCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Conversed, Failure>> {
        Box::pin(async move {
            let ConverseCall {
                question,
                rate,
                priority,
                listen,
            } = call;
            // The floor from before speaking: nobody else speaks or listens
            // between the question and the answer.
            let mut dialogue =
                Dialogue::question(self, &question, "converse", listen, report).await?;
            // The person went on after the last turn: that is the reply, and
            // the question, written before it was heard, is not said.
            if listen && let Some(heard) = dialogue.went_on().await {
                return Ok(Conversed {
                    spoken: String::new(),
                    speech_status: SpeechEnd::Skipped,
                    voice: None,
                    engine: None,
                    speech_seconds: None,
                    heard: Some(heard),
                });
            }
            // With echo cancellation, the person's voice over the question
            // stops it too.
            let watch = listen
                .then(|| Watch::start(&self.state.ears, &self.state.voice.tts, &self.state.bus))
                .flatten();
            let spoken = dialogue
                .say(SpeakCall {
                    language: None,
                    agent: None,
                    text: question.text,
                    voice: question.voice,
                    rate,
                    priority,
                    wait: true,
                    later: None,
                })
                .await;
            let voice = watch.and_then(Watch::finish);
            let spoken = spoken?;
            // A press during the speech belongs to this call (barge-in),
            // not to the voice inbox.
            let interrupted =
                spoken.status == SpeechStatus::Stopped && (voice.is_some() || dialogue.pressed());
            let mut conversed = Conversed {
                spoken: spoken.text,
                speech_status: match (interrupted, spoken.status) {
                    (true, _) => SpeechEnd::Interrupted,
                    (false, SpeechStatus::Stopped) => SpeechEnd::Stopped,
                    (false, _) => SpeechEnd::Spoken,
                },
                voice: Some(spoken.voice),
                engine: Some(spoken.engine),
                speech_seconds: spoken.seconds,
                heard: None,
            };
            if !listen {
                return Ok(conversed);
            }
            let chime = if interrupted {
                Chime::None
            } else {
                Chime::First
            };
            let mut request =
                dialogue.request(dialogue.timeout, chime, true, listen::Expect::Reply);
            // The answer from where the voice began, with the pre-roll a
            // listen keeps before its detector fires.
            request.start_at = voice.map(|at| {
                let preroll = self.state.ears.microphone.as_ref().map_or(0, |mic| {
                    (mic.preroll.as_secs_f64() * f64::from(hark_audio::config::PIPELINE_RATE))
                        as u64
                });
                at.saturating_sub(preroll)
            });
            conversed.heard = Some(dialogue.hear(request).await?);
            Ok(conversed)
        })
    }

    fn confirm<'a>(
        &'a self,
        question: Question,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Confirmed, Failure>> {
        Box::pin(async move {
            let text = check_question(&question.text)?;
            let mut dialogue = Dialogue::question(self, &question, "confirm", true, report).await?;
            let mut asking = dialogue.ask();
            // From before the question: a press while it is spoken answers
            // it.
            let mut button = ButtonAnswer::default();
            dialogue
                .say(SpeakCall {
                    language: None,
                    agent: None,
                    text,
                    voice: question.voice,
                    rate: None,
                    priority: Default::default(),
                    wait: true,
                    later: None,
                })
                .await?;
            if let Some(answer) = button.drain(&mut dialogue.events) {
                asking.answered(YesNo::from(answer));
                return Ok(Confirmed::by_button(answer));
            }
            // The button is down already: the person is answering.
            let chime = if button.down() {
                Chime::None
            } else {
                Chime::First
            };
            let timeout = dialogue.timeout;
            let heard = match dialogue.hear_or_press(timeout, chime, &mut button).await? {
                Listened::Button(answer) => {
                    asking.answered(YesNo::from(answer));
                    return Ok(Confirmed::by_button(answer));
                }
                Listened::Heard(heard) => heard,
            };
            if !heard.speech {
                asking.answered(YesNo::NoAnswer);
                return Ok(Confirmed::no_answer());
            }
            let answer = self.state.ears.yes_no.classify(&heard.text);
            let confirmed = Confirmed::by_voice(answer, heard);
            asking.answered(confirmed.answer);
            Ok(confirmed)
        })
    }

    fn choose<'a>(
        &'a self,
        question: Question,
        options: Vec<String>,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Chosen, Failure>> {
        Box::pin(async move {
            let text = check_question(&question.text)?;
            words::check_options(&options).map_err(|e| Failure::invalid(e.to_string()))?;
            let mut dialogue = Dialogue::question(self, &question, "choose", true, report).await?;
            let mut asking = dialogue.ask();
            dialogue
                .say(SpeakCall {
                    language: None,
                    agent: None,
                    text: prompt(&text, &options),
                    voice: question.voice,
                    rate: None,
                    priority: Default::default(),
                    wait: true,
                    later: None,
                })
                .await?;
            let request = dialogue.request(
                dialogue.timeout,
                Chime::First,
                true,
                listen::Expect::OneOf(options.clone()),
            );
            let heard = dialogue.hear(request).await?;
            if !heard.speech {
                asking.answered(ChoiceOutcome::NoAnswer);
                return Ok(Chosen::no_answer());
            }
            let choice = words::choose(&heard.text, &options);
            let chosen = Chosen::by_voice(choice, &options, heard.text);
            asking.answered(chosen.outcome);
            Ok(chosen)
        })
    }
}
