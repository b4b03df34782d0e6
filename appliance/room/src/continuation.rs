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
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, SystemTime},
};

use hark_core::room::{Heard, Recorded};
use tokio::sync::Notify;

use crate::{
    floor::{Turn, Who},
    inbox::{BY_CONTINUATION, Message},
    listen::{self, After, Chime, Listen},
    state::ApplianceState,
};

/// Continuations heard in this run, kept whole for the agent's next
/// listen (the inbox keeps the words; a restart keeps only those).
const KEEP_HEARD: usize = 16;

/// The continuations under way (a window open, a recording, a
/// transcription) per agent, and those heard, whole: an agent's next
/// listen waits for the first and returns the second.
#[derive(Default)]
pub struct Continuing {
    under_way: Mutex<HashMap<String, usize>>,
    settled: Notify,
    /// By agent key.
    heard: Mutex<Vec<(String, Heard)>>,
    /// Where the person's going on after Home Assistant's last recording
    /// arrives (`Record::record_more`).
    handed: Mutex<Option<tokio::sync::oneshot::Receiver<Recorded>>>,
}

/// One continuation under way for an agent, until dropped.
struct UnderWay {
    state: Arc<ApplianceState>,
    key: String,
}

impl Drop for UnderWay {
    fn drop(&mut self) {
        let continuing = &self.state.continuing;
        let mut under_way = lock(&continuing.under_way);
        if let Some(n) = under_way.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                under_way.remove(&self.key);
            }
        }
        drop(under_way);
        continuing.settled.notify_waiters();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Continuing {
    /// Where the person's going on after Home Assistant's last recording
    /// arrives.
    pub fn handed(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<tokio::sync::oneshot::Receiver<Recorded>>> {
        lock(&self.handed)
    }

    fn begin(state: &Arc<ApplianceState>, key: String) -> UnderWay {
        *lock(&state.continuing.under_way)
            .entry(key.clone())
            .or_default() += 1;
        UnderWay {
            state: Arc::clone(state),
            key,
        }
    }

    fn keep(&self, key: String, heard: Heard) {
        let mut kept = lock(&self.heard);
        if kept.len() >= KEEP_HEARD {
            kept.remove(0);
        }
        kept.push((key, heard));
    }

    /// The whole of what a kept message was heard as, when this run heard
    /// it (the inbox keeps the words, not the listen's other fields).
    fn whole(&self, message: &Message) -> Option<Heard> {
        let key = message.new.addressed_key.as_deref()?;
        let mut kept = lock(&self.heard);
        let at = kept
            .iter()
            .position(|(k, h)| k == key && h.text == message.new.text)?;
        Some(kept.remove(at).1)
    }

    /// Waits until no continuation is under way for the agent `key`.
    async fn settled(&self, key: &str) {
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !lock(&self.under_way).contains_key(key) {
                return;
            }
            notified.await;
        }
    }
}

/// Whether the turn a listen recorded may go on: one that ended at a
/// pause (not by the button, a timeout or its length), with the window
/// on (`audio.vad.continue_ms`).
pub fn may_follow(state: &ApplianceState, ended: hark_core::room::EndReason) -> bool {
    use hark_core::room::EndReason;
    window(state) > Duration::ZERO && matches!(ended, EndReason::EndOfTurn | EndReason::EndOfSpeech)
}

fn window(state: &ApplianceState) -> Duration {
    let ms = state
        .microphone
        .as_ref()
        .map_or(0, |mic| mic.vad.continue_ms);
    Duration::from_millis(u64::from(ms))
}

/// Opens the window after `agent`'s listen ended the person's turn: the
/// listen's floor is handed to the person now, and what they say from
/// capture position `from` on is heard for `agent` (see the module docs).
pub fn open(
    state: &Arc<ApplianceState>,
    turn: Turn,
    agent: String,
    language: Option<String>,
    from: u64,
) {
    let under_way = Continuing::begin(state, state.agents.key(&agent));
    let mut request = going_on(state, turn, from);
    request.agent = Some(agent);
    request.language = language;
    // Cut again, it goes on the same way.
    request.after = After::KeepForAgent;
    tokio::spawn(hear(Arc::clone(state), request, under_way));
}

/// The listen for the person's going on: from `from`, on the floor handed
/// over from `turn`, for as long as the window lasts, showing nothing
/// unless the voice begins.
fn going_on(state: &ApplianceState, turn: Turn, from: u64) -> Listen {
    Listen {
        agent: None,
        timeout: window(state),
        language: None,
        chime: Chime::None,
        // A press is the person starting anew (the window gives way to
        // it), not push-to-talk on what they might add.
        push_to_talk: false,
        turn: Some(turn.hand_to(Who::Person, "continuation")),
        expect: listen::Expect::Anything,
        start_at: Some(from),
        continuation: true,
        after: After::Nothing,
    }
}

/// Opens the window after a recording for Home Assistant's pipeline ended
/// the person's turn: as [`open`], and what they go on to say is recorded
/// and handed to `to` (nothing is sent when they do not).
pub fn open_for(
    state: &Arc<ApplianceState>,
    turn: Turn,
    to: tokio::sync::oneshot::Sender<Recorded>,
    from: u64,
) {
    let request = going_on(state, turn, from);
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let mut spoke = crate::follow::SpokeFlag::default();
        let flag = spoke.flag();
        let recorded = tokio::select! {
            recorded = listen::record(&state, request, &mut spoke) => recorded,
            // Home Assistant's next recording is the person's.
            () = crate::follow::wanted(&state, &flag, |p| p.who == "person") => return,
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
    let mut spoke = crate::follow::SpokeFlag::default();
    let flag = spoke.flag();
    let opened = SystemTime::now();
    let heard = tokio::select! {
        heard = listen::listen(&state, request, &mut spoke) => heard,
        () = crate::follow::wanted(&state, &flag, |p| {
            p.who == "person" || state.agents.key(&p.who) == under_way.key
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
    let Some(inbox) = state.inbox.as_ref() else {
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
    state.continuing.keep(under_way.key.clone(), heard);
    if let Err(e) = inbox.deliver(message).await {
        tracing::error!(error = %e, agent, "what the person went on to say could not be kept");
    }
    drop(under_way);
}

/// The rest of `agent`'s last turn, if the person went on: waits for a
/// continuation under way to be kept, then takes the oldest kept for the
/// agent. `None`: nothing to return; the listen opens the microphone.
pub async fn take(state: &ApplianceState, agent: &str) -> Option<Heard> {
    let inbox = state.inbox.as_ref()?;
    state.continuing.settled(&state.agents.key(agent)).await;
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
    Some(whole(&state.continuing, message))
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
