//! The follow-up: when an agent has just answered the person — it heard
//! them (it took their message from the voice inbox, or its `converse`,
//! `confirm`, `choose` or `transcribe_voice` heard them) and then spoke —
//! Hark listens again for `wake.follow_up_seconds` without the wake word,
//! with the listening light and no chime, so the person can go on as in a
//! conversation. What they say goes to that agent's inbox (unless they
//! name another). Hands-free only: it opens while the wake word is on.
//!
//! It gives way: it does not open while speech waits, the floor is taken
//! or queued for, the microphone is muted or a recording is open, and it
//! closes at once, keeping nothing, if an agent asks for the floor or to
//! speak before the person has begun to speak.

use std::{collections::HashMap, sync::Arc, time::Duration};

use hark_core::events::{Event, SpeechEnded};
use tokio::{sync::broadcast::error::RecvError, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::{conductor::Start, state::ApplianceState};

/// How long after hearing the person an agent's speech still counts as
/// its answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);
/// How long the end of an answer waits for the speech queue to empty.
const SETTLE: Duration = Duration::from_millis(300);

/// Watches the event stream for answers and opens the follow-up after
/// each, until `token` is cancelled. `window`: how long it listens.
pub async fn serve(state: Arc<ApplianceState>, window: Duration, token: CancellationToken) {
    let mut events = state.bus.subscribe();
    // Agents (by key) that heard the person, and when.
    let mut heard: HashMap<String, Instant> = HashMap::new();
    loop {
        let event = tokio::select! {
            () = token.cancelled() => return,
            event = events.recv() => match event {
                Ok(event) => event,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            },
        };
        match &event.event {
            Event::InboxTaken { agent, .. } => {
                heard.insert(state.keeping.agents.key(agent), Instant::now());
            }
            Event::UtteranceTranscribed {
                agent: Some(agent),
                text,
                ..
            } if !text.trim().is_empty() => {
                heard.insert(state.keeping.agents.key(agent), Instant::now());
            }
            Event::SpeakingEnded {
                agent: Some(agent),
                outcome: SpeechEnded::Spoken,
                ..
            } => {
                let key = state.keeping.agents.key(agent);
                let answered = heard
                    .get(&key)
                    .is_some_and(|at| at.elapsed() <= ANSWER_WITHIN);
                if answered && settled(&state.voice.tts).await && may_open(&state) {
                    heard.remove(&key);
                    tracing::info!(agent, "the agent answered the person: following up");
                    crate::person::pressed(
                        &state,
                        Start::FollowUp {
                            agent: agent.clone(),
                            window,
                        },
                    );
                }
            }
            _ => {}
        }
        heard.retain(|_, at| at.elapsed() <= ANSWER_WITHIN);
    }
}

/// Whether the speech queue empties within [`SETTLE`]: the speech thread
/// publishes the end of a request a moment before it counts it done, and
/// a request queued behind it keeps it busy (the agent speaks on).
async fn settled(tts: &crate::tts::TextToSpeech) -> bool {
    let until = Instant::now() + SETTLE;
    while tts.pending() > 0 {
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Whether a follow-up may open now: hands-free is on, nothing waits to
/// be said or for the floor, the microphone is free and not muted.
fn may_open(state: &ApplianceState) -> bool {
    let hands_free = state.ears.wake.as_ref().is_some_and(crate::wake::Wake::on);
    let (floor, now) = (state.floor.status(), state.bus.snapshot());
    hands_free
        && state.voice.tts.pending() == 0
        && floor.holder.is_none()
        && floor.queue.is_empty()
        && !now.muted
        && !now.recording()
}
