//! The person goes on: an agent's listen ended the person's turn at a
//! pause, and within `audio.vad.continue_ms` — before the agent answered —
//! they speak again. What they add is the rest of that turn, and it goes
//! to the same agent:
//!
//! - the microphone the listen had is kept for it: the floor is handed to
//!   the person at once (past the queue), so the next agent in line does
//!   not hear it; no light, chime or event shows until the voice begins;
//! - what they say is recorded and transcribed as a listen does (its own
//!   end of turn; cut again, it goes on the same way) and kept in the voice
//!   inbox for that agent only (`addressed_by: continuation`);
//! - the agent's next `transcribe_voice` or `converse` returns it at once,
//!   without opening the microphone (`continuation: true`; a `converse`
//!   does not say its question, written before the rest was heard:
//!   `speech_status: skipped`), and `wait_for_person` and the inbox's
//!   pushes deliver it as a message, like anything the person says to an
//!   agent.
//!
//! It gives way before the person has begun to speak: when speech waits
//! to be said (the agent's answer came first), when the same agent asks
//! for the microphone again (its new listen hears the person instead) or
//! when the person presses the button; then it closes keeping nothing.
//! Other agents wait for the window: it is short, and what the person
//! adds is not theirs.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use hark_core::room::{Heard, Recorded};

use crate::{
    continuing::Continuing,
    floor::{Turn, Who},
    inbox::{BY_CONTINUATION, Message},
    listen::{self, After, Chime, Listen},
    state::{ApplianceState, Ears, Keeping},
};

/// One continuation under way for an agent, until dropped.
struct UnderWay {
    ears: Arc<Ears>,
    key: String,
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        self.ears.continuing.end(&self.key);
    }
}

/// Counts a continuation under way for the agent `key` until the returned
/// guard drops.
fn begin(ears: &Arc<Ears>, key: String) -> UnderWay {
    ears.continuing.begin(&key);
    UnderWay {
        ears: Arc::clone(ears),
        key,
    }
}

/// A listen's [`After`] for an agent's listen: what the person goes on to
/// say is kept for that agent (when the inbox keeps anything).
pub fn keep(state: &Arc<ApplianceState>) -> After {
    let state = Arc::clone(state);
    After::then(move |left| match left.agent {
        Some(agent) if may_follow(&state.ears, left.ended) && state.keeping.inbox.is_some() => {
            open(&state, left.turn, agent, left.language, left.from);
        }
        _ => drop(left.turn),
    })
}

/// A listen's [`After`] for a recording for Home Assistant's pipeline:
/// what the person goes on to say is recorded and handed to `to`.
pub fn hand_over(state: &Arc<ApplianceState>, to: tokio::sync::oneshot::Sender<Recorded>) -> After {
    let state = Arc::clone(state);
    After::then(move |left| {
        if may_follow(&state.ears, left.ended) {
            open_for(&state, left.turn, to, left.from);
        }
    })
}

/// Whether the turn a listen recorded may go on: one that ended at a
/// pause (not by the button, a timeout or its length), with the window
/// on (`audio.vad.continue_ms`).
fn may_follow(ears: &Ears, ended: hark_core::room::EndReason) -> bool {
    use hark_core::room::EndReason;
    window(ears) > Duration::ZERO && matches!(ended, EndReason::EndOfTurn | EndReason::EndOfSpeech)
}

fn window(ears: &Ears) -> Duration {
    let ms = ears
        .microphone
        .as_ref()
        .map_or(0, |mic| mic.vad.continue_ms);
    Duration::from_millis(u64::from(ms))
}

/// Opens the window after `agent`'s listen ended the person's turn: the
/// listen's floor is handed to the person now, and what they say from
/// capture position `from` on is heard for `agent` (see the module docs).
fn open(
    state: &Arc<ApplianceState>,
    turn: Turn,
    agent: String,
    language: Option<String>,
    from: u64,
) {
    let under_way = begin(&state.ears, state.keeping.agents.key(&agent));
    let mut request = going_on(&state.ears, turn, from);
    request.agent = Some(agent);
    request.language = language;
    // Cut again, it goes on the same way.
    request.after = keep(state);
    tokio::spawn(hear(Arc::clone(state), request, under_way));
}

/// The listen for the person's going on: from `from`, on the floor handed
/// over from `turn`, for as long as the window lasts, showing nothing
/// unless the voice begins.
fn going_on(ears: &Ears, turn: Turn, from: u64) -> Listen {
    Listen {
        agent: None,
        timeout: window(ears),
        language: None,
        chime: Chime::None,
        // A press is the person starting anew (the window gives way to
        // it), not push-to-talk on what they might add.
        push_to_talk: false,
        turn: Some(turn.hand_to(Who::Person, "continuation")),
        expect: listen::Expect::Anything,
        start_at: Some(from),
        continuation: true,
        after: After::default(),
    }
}

/// Opens the window after a recording for Home Assistant's pipeline ended
/// the person's turn: as [`open`], and what they go on to say is recorded
/// and handed to `to` (nothing is sent when they do not).
fn open_for(
    state: &Arc<ApplianceState>,
    turn: Turn,
    to: tokio::sync::oneshot::Sender<Recorded>,
    from: u64,
) {
    let request = going_on(&state.ears, turn, from);
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let mut spoke = crate::window::SpokeFlag::default();
        let flag = spoke.flag();
        let recorded = tokio::select! {
            recorded = listen::record(&state, request, &mut spoke) => recorded,
            // Home Assistant's next recording is the person's.
            () = crate::window::wanted(&state.voice.tts, &state.floor, &flag, |p| p.who == "person") => return,
        };
        match recorded {
            Ok(recorded) if recorded.speech => {
                tracing::info!(
                    "the person went on after the turn ended; handed to Home Assistant's pipeline"
                );
                let _ = to.send(recorded);
            }
            Ok(_) => {}
            Err(e) => tracing::info!(error = %e, "what the person went on to say was not recorded"),
        }
    });
}

async fn hear(state: Arc<ApplianceState>, request: Listen, under_way: UnderWay) {
    let agent = request.agent.clone().unwrap_or_default();
    let mut spoke = crate::window::SpokeFlag::default();
    let flag = spoke.flag();
    let opened = SystemTime::now();
    let heard = tokio::select! {
        heard = listen::listen(&state, request, &mut spoke) => heard,
        () = crate::window::wanted(&state.voice.tts, &state.floor, &flag, |p| {
            p.who == "person" || state.keeping.agents.key(&p.who) == under_way.key
        }) => {
            tracing::debug!(agent, "the window for the person to go on gave way");
            return;
        }
    };
    let heard = match heard {
        Ok(heard) if heard.speech => heard,
        Ok(_) => return,
        Err(e) => {
            tracing::info!(error = %e, agent, "what the person went on to say was not heard");
            return;
        }
    };
    let Some(inbox) = state.keeping.inbox.as_ref() else {
        return;
    };
    tracing::info!(agent, text = %heard.text, "the person went on after the turn ended; kept for the agent");
    // Recorded from where the turn ended, with no pre-roll.
    let message = crate::person::message(
        inbox,
        &heard,
        opened,
        Duration::ZERO,
        (
            Some(agent.clone()),
            Some(under_way.key.clone()),
            BY_CONTINUATION,
        ),
    );
    state.ears.continuing.keep(under_way.key.clone(), heard);
    if let Err(e) = inbox.deliver(message).await {
        tracing::error!(error = %e, agent, "what the person went on to say could not be kept");
    }
    drop(under_way);
}

/// The rest of `agent`'s last turn, if the person went on: waits for a
/// continuation under way to be kept, then takes the oldest kept for the
/// agent. `None`: nothing to return; the listen opens the microphone.
pub async fn take(ears: &Ears, keeping: &Keeping, agent: &str) -> Option<Heard> {
    let inbox = keeping.inbox.as_ref()?;
    ears.continuing.settled(&keeping.agents.key(agent)).await;
    let message = match inbox.take_continuation(agent).await {
        Ok(message) => message?,
        Err(e) => {
            tracing::warn!(error = %e, agent, "cannot read the continuations kept for the agent");
            return None;
        }
    };
    tracing::info!(
        agent,
        id = message.id,
        "the listen returns what the person went on to say"
    );
    Some(whole(&ears.continuing, message))
}

/// A kept continuation as a listen's result: as heard, or (heard before a
/// restart) from what the inbox keeps.
fn whole(continuing: &Continuing, message: Message) -> Heard {
    let mut heard = continuing.whole(&message).unwrap_or_else(|| Heard {
        text: message.new.text.clone(),
        speech: true,
        end_reason: hark_core::room::EndReason::EndOfSpeech,
        duration: message.new.duration,
        language: None,
        speech_start: None,
        speech_end: None,
        segments: Vec::new(),
        confidence: message.new.confidence,
        model: None,
        transcribe_ms: None,
        speculative: false,
        continuation: true,
        listen: 0,
    });
    heard.continuation = true;
    heard
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeping(dir: &std::path::Path) -> Keeping {
        let agents = crate::agents::Agents::default();
        let settings = crate::config::RoomConfig::default().inbox_settings(agents.clone());
        let inbox =
            crate::inbox::Inbox::open(dir, settings, crate::events::Bus::default()).expect("inbox");
        Keeping {
            inbox: Some(Arc::new(inbox)),
            agents,
            ..Keeping::default()
        }
    }

    fn heard(text: &str) -> Heard {
        Heard {
            text: text.into(),
            speech: true,
            end_reason: hark_core::room::EndReason::EndOfSpeech,
            duration: 2.5,
            language: Some("en".into()),
            speech_start: Some(0.1),
            speech_end: Some(2.3),
            segments: Vec::new(),
            confidence: Some(0.9),
            model: Some("small.en".into()),
            transcribe_ms: Some(420),
            speculative: false,
            continuation: false,
            listen: 7,
        }
    }

    #[tokio::test]
    async fn the_next_listen_waits_for_what_the_person_is_still_saying_and_gets_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (ears, keeping) = (Arc::new(Ears::default()), Arc::new(keeping(dir.path())));
        assert!(
            take(&ears, &keeping, "claude").await.is_none(),
            "nothing under way, nothing kept: the listen opens the microphone"
        );
        // The person goes on after claude's listen ended their turn.
        let key = keeping.agents.key("claude");
        let under_way = begin(&ears, key.clone());
        let taking = {
            let (ears, keeping) = (Arc::clone(&ears), Arc::clone(&keeping));
            tokio::spawn(async move { take(&ears, &keeping, "claude").await })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!taking.is_finished(), "it waits while the person speaks");
        // Heard and kept, as `hear` keeps it, then no longer under way.
        let said = heard("and the red one too");
        let inbox = keeping.inbox.as_ref().unwrap();
        let message = crate::person::message(
            inbox,
            &said,
            SystemTime::now(),
            Duration::ZERO,
            (Some("claude".into()), Some(key.clone()), BY_CONTINUATION),
        );
        ears.continuing.keep(key, said.clone());
        inbox.deliver(message).await.unwrap();
        drop(under_way);
        let got = tokio::time::timeout(Duration::from_secs(30), taking)
            .await
            .expect("the wait ends once it is kept")
            .unwrap()
            .expect("what the person went on to say");
        assert_eq!(got.text, said.text);
        assert!(got.continuation);
        assert_eq!(got.model, said.model, "whole, not only the words");
        assert!(
            take(&ears, &keeping, "claude").await.is_none(),
            "taken once"
        );
        assert!(inbox.waiting_for(None).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn another_agents_listen_does_not_wait_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let (ears, keeping) = (Arc::new(Ears::default()), keeping(dir.path()));
        let _under_way = begin(&ears, keeping.agents.key("claude"));
        let other = tokio::time::timeout(Duration::from_secs(30), take(&ears, &keeping, "cursor"))
            .await
            .expect("cursor's listen does not wait for claude's continuation");
        assert!(other.is_none());
    }
}
