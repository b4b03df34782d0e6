//! The person starts the conversation: a press of the button while no
//! agent is listening and Hark is quiet opens the microphone for a message
//! to the agents — the listening light and the chime at once, then record
//! until the person stops speaking (a tap) or lets the button go (held:
//! push-to-talk), transcribe, and put the words in the voice inbox
//! ([`crate::inbox`]), where a waiting agent gets them at once.
//!
//! When no agent can take the message now (none waits for the person, none
//! is subscribed to the inbox), Hark says so briefly and keeps it; the
//! message light shows until an agent takes it.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use hark_audio::earcon::Earcon;
use hark_core::room::PersonStart;

use crate::{
    conductor::Start,
    floor::Who,
    inbox::{Delivered, Inbox, NewMessage},
    listen::{self, Chime, Listen, ListenError},
    state::ApplianceState,
};

/// What Hark says when it keeps a message nobody can take now.
pub const KEPT: &str = "No agent is listening; I'll keep that.";

/// The press (or the wake word): starts the person's recording unless
/// something rules it out (said in the log, and with the error chime where
/// the person needs to know the press did nothing).
pub fn pressed(state: &Arc<ApplianceState>, how: Start) {
    let what = match how {
        Start::Press => "button pressed",
        Start::WakeWord { .. } => "wake word heard",
        Start::FollowUp { .. } => "follow-up",
    };
    if state.bus.snapshot().muted {
        tracing::info!("{what} while muted: nothing is recorded");
        state.voice.play(Earcon::Error);
        return;
    }
    // An agent waiting for the person has it first.
    if !state.bus.snapshot().person_listening.is_empty() {
        return;
    }
    let start = match how {
        Start::Press => Some(PersonStart::Press),
        Start::WakeWord { at } => Some(PersonStart::WakeWord { at }),
        // Hark's own follow-up to what an agent said: the agents'.
        Start::FollowUp { .. } => None,
    };
    if let (Some(start), Some(taker)) = (start, state.starts.as_ref())
        && taker.take(start)
    {
        tracing::info!("{what}: Home Assistant's pipeline runs");
        return;
    }
    let Some(inbox) = state.keeping.inbox.as_ref() else {
        tracing::info!(
            "{what} with nobody listening; the voice inbox is off (inbox.enabled = false), so nothing is recorded"
        );
        return;
    };
    if let Err(why) = state.ears.stt.engine() {
        tracing::warn!(why, "{what}, but nothing can hear the person");
        state.voice.play(Earcon::Error);
        return;
    }
    tracing::info!("{what} with nobody listening: recording a message for the agents");
    tokio::spawn(record(Arc::clone(state), Arc::clone(inbox), how));
}

async fn record(state: Arc<ApplianceState>, inbox: Arc<Inbox>, how: Start) {
    let announce = inbox.settings().announce;
    let timeout = match &how {
        Start::FollowUp { window, .. } => *window,
        _ => inbox.settings().listen,
    };
    let opened = SystemTime::now();
    // How far back the recording's first sample is: the pre-roll after a
    // press, the word's end after the wake word.
    let preroll = state
        .ears
        .microphone
        .as_ref()
        .map_or(Duration::ZERO, |mic| {
            let from = match how {
                Start::WakeWord { at } => at,
                _ => return mic.preroll,
            };
            let back = mic.ring.written().saturating_sub(from);
            Duration::from_secs_f64(back as f64 / f64::from(hark_audio::config::PIPELINE_RATE))
        });
    let (start_at, chime, tool) = match &how {
        Start::Press => (None, Chime::Alongside, "button"),
        Start::WakeWord { at } => (Some(*at), Chime::Alongside, "wake word"),
        // Hark has just spoken: the light shows it listens, no chime.
        Start::FollowUp { .. } => (None, Chime::None, "follow-up"),
    };
    // The person goes first: before every agent waiting for the floor.
    let turn = match state.floor.take(Who::Person, tool, true, timeout).await {
        Ok(turn) => turn,
        Err(e) => {
            tracing::warn!(error = %e, "the person's press found the floor busy");
            state.voice.play(Earcon::Error);
            return;
        }
    };
    let request = Listen {
        agent: None,
        timeout,
        language: None,
        chime,
        push_to_talk: true,
        turn: Some(turn),
        expect: listen::Expect::Anything,
        start_at,
        continuation: false,
        after: listen::After::default(),
    };
    let heard = match &how {
        Start::FollowUp { .. } => {
            let mut spoke = crate::window::SpokeFlag::default();
            let flag = spoke.flag();
            tokio::select! {
                heard = listen::listen(&state, request, &mut spoke) => heard,
                // Anyone waiting for the floor: an agent wants the person.
                () = crate::window::wanted(&state.voice.tts, &state.floor, &flag, |_| true) => {
                    tracing::info!("the follow-up gave way to an agent before the person spoke");
                    return;
                }
            }
        }
        _ => listen::listen(&state, request, &mut hark_core::room::Quiet).await,
    };
    let heard = match heard {
        Ok(heard) => heard,
        Err(ListenError::Muted) => {
            tracing::info!("the person's message was cut off by the mute switch; nothing kept");
            return;
        }
        Err(e) => {
            tracing::error!(error = %e, "the person's message could not be heard");
            state.voice.play(Earcon::Error);
            return;
        }
    };
    if !heard.speech {
        tracing::info!(end_reason = %heard.end_reason, "no speech after the press; nothing kept");
        return;
    }
    let known = state.keeping.agents_seen.names();
    let (addressed_to, addressed_key, by) = match &how {
        Start::FollowUp { agent, .. } => inbox.address_follow_up(&heard.text, &known, agent),
        _ => inbox.address(&heard.text, &known),
    };
    let message = message(
        &inbox,
        &heard,
        opened,
        preroll,
        (addressed_to.clone(), addressed_key, by),
    );
    match inbox.deliver(message).await {
        Ok(Delivered::To(_)) | Ok(Delivered::Kept { reachable: true }) => {}
        Ok(Delivered::Kept { reachable: false }) => {
            if announce {
                let words = match &addressed_to {
                    Some(agent) => format!("{agent} isn't listening; I'll keep that."),
                    None => KEPT.to_owned(),
                };
                say(&state.voice, words).await;
            }
        }
        Err(e) => {
            tracing::error!(error = %e, text = %heard.text, "the person's message could not be kept");
            state.voice.play(Earcon::Error);
            say(
                &state.voice,
                "Sorry, I couldn't keep that message.".to_owned(),
            )
            .await;
        }
    }
}

/// What the person said (`heard`, recorded from `back` before `opened`),
/// as a message for the voice inbox, addressed as `addressed` says (to,
/// its key, how).
pub fn message(
    inbox: &Inbox,
    heard: &hark_core::room::Heard,
    opened: SystemTime,
    back: Duration,
    (addressed_to, addressed_key, by): (Option<String>, Option<String>, &str),
) -> NewMessage {
    let transcribed_at = SystemTime::now();
    let start = Duration::from_secs_f64(heard.speech_start.unwrap_or(0.0).max(0.0));
    let duration = heard.speech_end.unwrap_or(0.0) - heard.speech_start.unwrap_or(0.0);
    NewMessage {
        text: heard.text.clone(),
        spoken_at: (opened + start).checked_sub(back).unwrap_or(opened),
        transcribed_at,
        duration: (duration.max(0.0) * 1000.0).round() / 1000.0,
        confidence: heard.confidence,
        addressed_to,
        addressed_key,
        addressed_by: by.to_owned(),
        expires_at: inbox.expires(transcribed_at),
        listen: Some(heard.listen),
    }
}

/// Hark's own words to the person (not an agent's).
pub async fn say(voice: &crate::state::Voice, words: String) {
    say_tracked(voice, words, None).await;
}

/// [`say`], with the request's progress sent to `events`; returns the
/// request's stop flag (`None`: nothing will be said).
pub async fn say_tracked(
    voice: &crate::state::Voice,
    words: String,
    events: Option<crate::tts::SpeechEvents>,
) -> Option<Arc<std::sync::atomic::AtomicBool>> {
    let tts = Some(Arc::clone(&voice.tts)).filter(|tts| tts.enabled)?;
    let spoken = tokio::task::spawn_blocking(move || {
        tts.speak(
            &words,
            None,
            None,
            crate::tts::Priority::Normal,
            events,
            None,
        )
    })
    .await;
    match spoken {
        Ok(Ok(accepted)) => Some(accepted.cancel),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cannot say Hark's own words");
            None
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use hark_core::{events::Event, room::TakeStarts};

    use super::*;

    /// Home Assistant's side, as the room sees it: it takes the starts it
    /// is offered (or declines them), and says which.
    struct Pipeline {
        takes: bool,
        offered: Mutex<Vec<PersonStart>>,
    }

    impl TakeStarts for Pipeline {
        fn take(&self, start: PersonStart) -> bool {
            self.offered.lock().unwrap().push(start);
            self.takes
        }
    }

    fn room(takes: bool) -> (Arc<ApplianceState>, Arc<Pipeline>) {
        let pipeline = Arc::new(Pipeline {
            takes,
            offered: Mutex::default(),
        });
        let state = ApplianceState {
            starts: Some(Arc::clone(&pipeline) as Arc<dyn TakeStarts>),
            ..ApplianceState::default()
        };
        (Arc::new(state), pipeline)
    }

    fn offered(pipeline: &Pipeline) -> Vec<PersonStart> {
        pipeline.offered.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn home_assistant_is_offered_the_press_and_the_wake_word_but_not_the_follow_up() {
        let (state, pipeline) = room(true);
        pressed(&state, Start::Press);
        pressed(&state, Start::WakeWord { at: 4800 });
        pressed(
            &state,
            Start::FollowUp {
                agent: "claude".into(),
                window: Duration::from_secs(5),
            },
        );
        assert_eq!(
            offered(&pipeline),
            [PersonStart::Press, PersonStart::WakeWord { at: 4800 }],
            "the follow-up after an agent's answer is the agents'"
        );
    }

    #[tokio::test]
    async fn nothing_starts_while_muted_or_while_the_person_is_already_recorded() {
        let (state, pipeline) = room(true);
        state.bus.publish(Event::Mute { on: true });
        pressed(&state, Start::Press);
        pressed(&state, Start::WakeWord { at: 1 });
        assert_eq!(offered(&pipeline), [], "muted: nothing is offered");
        state.bus.publish(Event::Mute { on: false });
        // The person's own recording is open (a press just before).
        let recording = crate::state::RecordingGuard::open(&state.bus, None);
        pressed(&state, Start::Press);
        assert_eq!(
            offered(&pipeline),
            [],
            "one recording of the person at a time"
        );
        drop(recording);
        pressed(&state, Start::Press);
        assert_eq!(offered(&pipeline), [PersonStart::Press]);
    }

    #[tokio::test]
    async fn home_assistant_is_offered_a_press_even_when_it_declines_it() {
        let (state, pipeline) = room(false);
        let mut events = state.bus.subscribe();
        pressed(&state, Start::Press);
        assert_eq!(offered(&pipeline), [PersonStart::Press]);
        // Declined, the press is the room's own; this room can record
        // nothing (no inbox, no speech to text), so the microphone stays
        // closed.
        tokio::task::yield_now().await;
        assert!(
            !hark_core::events::received(&mut events)
                .any(|e| matches!(e.event, Event::ListeningStarted { .. })),
            "nothing was recorded"
        );
        assert!(state.bus.snapshot().listening.is_empty());
    }
}
