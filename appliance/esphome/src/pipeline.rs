//! The voice assistant's runs: the person's start (the wake word, or a
//! press when `esphome.run_on_press`) runs Home Assistant's pipeline.
//!
//! A run, as an ESPHome satellite does it: Hark asks Home Assistant to
//! start (`VoiceAssistantRequest`, with the wake word said), Home Assistant
//! answers with port 0 (the audio over this connection), Hark records the
//! person's turn as its own listens do (its end of the turn, the chime, the
//! light, push-to-talk) and sends it as `VoiceAssistantAudio`, ended by an
//! empty one with `end`. Home Assistant's events follow; its reply (the
//! text its speech would say, from the TTS start) is said in Hark's voice,
//! and the run ends at `RUN_END`. When the reply asks for an answer
//! (`continue_conversation`), Hark listens again in the same conversation.
//!
//! A cut turn is not lost: when the person goes on speaking just after
//! Hark ended their turn (`audio.vad.continue_ms`, while Home Assistant
//! works on the first part), what they add is recorded and sent as the
//! next run of the same conversation, at once after this one; this run's
//! reply is not said when the rest was heard before it came (it answered
//! half a sentence).
//!
//! Only one connection takes the person's starts: the one that subscribed
//! last (Home Assistant keeps one).

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use hark_core::room::{PersonStart, Record, RecordCall, Recorded, Speak, TakeStarts};

use crate::{
    messages::{self as m, Kind},
    voice::{ANNOUNCER, say},
};

/// Starts waiting for a connection to take them: a person does not start
/// twice before the first is taken.
const STARTS: usize = 2;
/// What a run's connection may still have to send: requests, then the
/// audio in [`CHUNK`]s (some 30 s of it; a longer turn waits for room).
pub const OUTGOING: usize = 512;
/// Samples in one `VoiceAssistantAudio`: 64 ms, as ESPHome devices send.
const CHUNK: usize = 1024;
/// How long Home Assistant may take to answer a start.
const ANSWER: Duration = Duration::from_secs(5);
/// How long Home Assistant may be silent between two events of a run.
const QUIET: Duration = Duration::from_secs(60);
/// How long the person has to begin speaking.
const SPEAK_WITHIN: f64 = 8.0;
/// Follow-ups in one conversation before Hark stops listening again.
const FOLLOW_UPS: usize = 5;

/// Which of the person's starts run Home Assistant's pipeline, and the
/// connection they go to.
pub struct Starts {
    on_wake_word: bool,
    on_press: bool,
    taker: Mutex<Option<(u64, mpsc::Sender<PersonStart>)>>,
}

impl Starts {
    pub fn new(on_wake_word: bool, on_press: bool) -> Arc<Self> {
        Arc::new(Self {
            on_wake_word,
            on_press,
            taker: Mutex::new(None),
        })
    }

    /// Connection `id` subscribed: the starts go to it from now on.
    pub fn subscribe(&self, id: u64) -> mpsc::Receiver<PersonStart> {
        let (tx, rx) = mpsc::channel(STARTS);
        *self.taker.lock().unwrap_or_else(PoisonError::into_inner) = Some((id, tx));
        rx
    }

    /// Connection `id` unsubscribed or ended.
    pub fn unsubscribe(&self, id: u64) {
        let mut taker = self.taker.lock().unwrap_or_else(PoisonError::into_inner);
        if taker.as_ref().is_some_and(|(i, _)| *i == id) {
            *taker = None;
        }
    }
}

impl TakeStarts for Starts {
    fn take(&self, start: PersonStart) -> bool {
        let wanted = match start {
            PersonStart::WakeWord { .. } => self.on_wake_word,
            PersonStart::Press => self.on_press,
        };
        if !wanted {
            return false;
        }
        let taker = self.taker.lock().unwrap_or_else(PoisonError::into_inner);
        taker
            .as_ref()
            .is_some_and(|(_, tx)| tx.try_send(start).is_ok())
    }
}

/// What the connection hands a run: Home Assistant's answer and events.
#[derive(Debug)]
pub enum Incoming {
    Answer(m::VoiceAssistantResponse),
    Event(m::VoiceAssistantEventResponse),
}

/// Why a run ended early.
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error("Home Assistant did not answer the start within {0:?}")]
    NoAnswer(Duration),
    #[error("Home Assistant could not start its pipeline")]
    Refused,
    #[error("Home Assistant wants the audio over UDP (port {0}); Hark sends it over the API")]
    Udp(u32),
    #[error("Home Assistant sent nothing for {0:?}")]
    Silent(Duration),
    #[error("the connection ended")]
    Closed,
    #[error("the person was not recorded: {0}")]
    Record(String),
}

/// One conversation with Home Assistant's pipeline, from the person's
/// start; its follow-ups too.
pub async fn converse(
    start: PersonStart,
    phrase: String,
    speak: Arc<dyn Speak>,
    record: Arc<dyn Record>,
    out: mpsc::Sender<Vec<u8>>,
    mut incoming: mpsc::Receiver<Incoming>,
    stop: CancellationToken,
) {
    let mut turn = Turn::Listen(match start {
        PersonStart::WakeWord { at } => Some(at),
        PersonStart::Press => None,
    });
    let mut phrase = phrase;
    let mut conversation = String::new();
    for _ in 0..=FOLLOW_UPS {
        let ears = Ears {
            speak: &speak,
            record: record.as_ref(),
        };
        let once = run(turn, &phrase, &conversation, ears, &out, &mut incoming);
        let ended = tokio::select! {
            ended = once => ended,
            () = stop.cancelled() => return,
        };
        match ended {
            Ok(Next::Listen(next)) => {
                // The reply asks for an answer: listen again, in the same
                // conversation, with no wake word.
                conversation = next;
                turn = Turn::Listen(None);
                phrase.clear();
            }
            Ok(Next::Rest(next, rest)) => {
                // The person went on: the rest of their turn, in the same
                // conversation, recorded already.
                conversation = next;
                turn = Turn::Recorded(rest);
                phrase.clear();
            }
            Ok(Next::Done) => return,
            Err(e) => {
                tracing::info!(error = %e, "Home Assistant's pipeline run ended");
                if !matches!(e, RunError::Closed) {
                    let _ = send(&out, &abort()).await;
                }
                return;
            }
        }
    }
}

fn abort() -> m::VoiceAssistantRequest {
    m::VoiceAssistantRequest {
        start: false,
        ..Default::default()
    }
}

/// Queues `message` for the connection, waiting while its queue is full
/// (a long turn's audio is more than it holds); an error once it is gone.
async fn send<T: Kind>(out: &mpsc::Sender<Vec<u8>>, message: &T) -> Result<(), RunError> {
    let mut frame = Vec::new();
    crate::frame::encode(T::KIND, &message.encode_to_vec(), &mut frame);
    out.send(frame).await.map_err(|_| RunError::Closed)
}

/// What a run uses of the room: the person's turn recorded, the reply
/// said.
#[derive(Clone, Copy)]
struct Ears<'a> {
    speak: &'a Arc<dyn Speak>,
    record: &'a dyn Record,
}

/// What a run sends.
enum Turn {
    /// The person's turn, recorded from this microphone position (the wake
    /// word's end; `None`: from now).
    Listen(Option<u64>),
    /// What the person went on to say after the last run's turn.
    Recorded(Recorded),
}

/// What follows a run.
enum Next {
    Done,
    /// The reply wants an answer, in this conversation.
    Listen(String),
    /// The person went on after the turn: this, in this conversation.
    Rest(String, Recorded),
}

/// One run.
async fn run(
    turn: Turn,
    phrase: &str,
    conversation: &str,
    ears: Ears<'_>,
    out: &mpsc::Sender<Vec<u8>>,
    incoming: &mut mpsc::Receiver<Incoming>,
) -> Result<Next, RunError> {
    send(
        out,
        &m::VoiceAssistantRequest {
            start: true,
            conversation_id: conversation.to_owned(),
            flags: 0,
            audio_settings: None,
            wake_word_phrase: phrase.to_owned(),
        },
    )
    .await?;
    let answer = loop {
        match tokio::time::timeout(ANSWER, incoming.recv()).await {
            Err(_) => return Err(RunError::NoAnswer(ANSWER)),
            Ok(None) => return Err(RunError::Closed),
            Ok(Some(Incoming::Answer(answer))) => break answer,
            // Events of a run before this one's answer: not this run's.
            Ok(Some(Incoming::Event(_))) => {}
        }
    };
    if answer.error {
        return Err(RunError::Refused);
    }
    if answer.port != 0 {
        return Err(RunError::Udp(answer.port));
    }
    tracing::info!("Home Assistant's pipeline started");
    let recorded = match turn {
        Turn::Listen(start_at) => ears
            .record
            .record(RecordCall {
                who: ANNOUNCER.to_owned(),
                start_at,
                timeout: SPEAK_WITHIN,
            })
            .await
            .map_err(|f| RunError::Record(f.message))?,
        Turn::Recorded(recorded) => recorded,
    };
    if !recorded.speech {
        tracing::info!("the person said nothing: the run is ended");
        send(out, &abort()).await?;
        return Ok(Next::Done);
    }
    for chunk in recorded.samples.chunks(CHUNK) {
        let data = chunk.iter().flat_map(|s| s.to_le_bytes()).collect();
        send(out, &m::VoiceAssistantAudio { data, end: false }).await?;
    }
    send(
        out,
        &m::VoiceAssistantAudio {
            data: Vec::new(),
            end: true,
        },
    )
    .await?;
    let mut reply: Option<tokio::task::JoinHandle<bool>> = None;
    let mut follow = None;
    let mut conversation_id = conversation.to_owned();
    // What the person goes on to say while Home Assistant works on this.
    let mut more = Some(ears.record.record_more());
    let mut rest: Option<Recorded> = None;
    loop {
        let next = tokio::select! {
            // The rest, once heard, decides whether the reply is said.
            biased;
            went_on = async { more.as_mut().expect("while there").await }, if more.is_some() => {
                more = None;
                rest = went_on;
                continue;
            }
            next = tokio::time::timeout(QUIET, incoming.recv()) => next,
        };
        let event = match next {
            Err(_) => return Err(RunError::Silent(QUIET)),
            Ok(None) => return Err(RunError::Closed),
            Ok(Some(Incoming::Answer(_))) => continue,
            Ok(Some(Incoming::Event(event))) => event,
        };
        match event.event_type {
            m::event::STT_END => {
                tracing::info!(
                    text = event.value("text").unwrap_or(""),
                    "Home Assistant heard"
                );
            }
            m::event::INTENT_END => {
                if let Some(id) = event.value("conversation_id") {
                    conversation_id = id.to_owned();
                }
                if event.value("continue_conversation") == Some("1") {
                    follow = Some(conversation_id.clone());
                }
            }
            m::event::TTS_START => {
                let text = event.value("text").unwrap_or("").trim().to_owned();
                if rest.is_some() {
                    tracing::info!(
                        text,
                        "Home Assistant's reply to the first part is not said: the person went on"
                    );
                } else if !text.is_empty() && reply.is_none() {
                    let speak = Arc::clone(ears.speak);
                    reply = Some(tokio::spawn(async move {
                        say(speak.as_ref(), text, "Home Assistant's reply").await
                    }));
                }
            }
            m::event::ERROR => {
                tracing::info!(
                    code = event.value("code").unwrap_or(""),
                    message = event.value("message").unwrap_or(""),
                    "Home Assistant's pipeline failed"
                );
            }
            m::event::RUN_END => break,
            _ => {}
        }
    }
    // Said or not, the moment for the person to go on ends (the reply
    // waiting to be said closes it, unless they had begun).
    if let Some(more) = more {
        rest = rest.or(more.await);
    }
    // The reply is heard to its end before the next turn listens.
    let heard = match reply {
        Some(saying) => saying.await.unwrap_or(false),
        None => false,
    };
    if let Some(rest) = rest {
        tracing::info!(
            "the person went on after the turn: the rest runs next, in the same conversation"
        );
        return Ok(Next::Rest(conversation_id, rest));
    }
    Ok(match follow.filter(|_| heard) {
        Some(conversation) => Next::Listen(conversation),
        None => Next::Done,
    })
}
