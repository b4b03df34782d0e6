//! The person's hand: the simulated board moved from the command line, the
//! self-test's steps, and pairing by the button (Hark asks aloud, the
//! pairing light shows, a short press approves).

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use hark_core::{
    events::Event,
    room::{BoardControl, BoxFuture, ButtonAction, Hands, Pair, PairAsk, PairRefusal, Refusal},
    status::Subsystem,
    words::Answer,
};
use serde_json::{Value, json};

use super::Room;
use crate::{board::ButtonAnswer, floor::Who, state::ApplianceState, tts::SpeechEvent};

impl Hands for Room {
    fn control(&self, control: BoardControl) -> BoxFuture<'_, Result<Value, Refusal>> {
        Box::pin(async move {
            let state = &self.state;
            let Some(board) = state.simulated_board.as_ref() else {
                let status = state.subsystems.get(Subsystem::Board);
                return Err(Refusal::Unavailable(if status.is_unavailable() {
                    format!("there is no simulated board to control: the board is {status}")
                } else {
                    format!(
                        "there is no simulated board to control: this appliance has a real one ({status}); press its button or move its switch"
                    )
                }));
            };
            let closed =
                |e: hark_board::sim::SimError| Refusal::Broken(format!("the simulated board: {e}"));
            match (control.button, control.mute) {
                (Some(action), None) => match action {
                    ButtonAction::Press => board.press().await.map_err(closed)?,
                    ButtonAction::Hold => board.hold().await.map_err(closed)?,
                    ButtonAction::Release => board.release().await.map_err(closed)?,
                },
                (None, Some(on)) => board.mute(on).await.map_err(closed)?,
                _ => {
                    return Err(Refusal::Invalid(
                        "hark/board takes exactly one of `button` and `mute`".into(),
                    ));
                }
            }
            Ok(json!({ "muted": board.muted() }))
        })
    }

    fn selftest(&self, request: Value) -> BoxFuture<'_, Result<Value, Refusal>> {
        Box::pin(crate::selftest::serve::serve(&self.state, request))
    }
}

/// Tells the event stream the pairing ended (the light stops), however the
/// ask ends.
struct Requested<'a> {
    state: &'a ApplianceState,
    id: u64,
    agent: String,
    outcome: hark_core::events::PairingOutcome,
}

impl Drop for Requested<'_> {
    fn drop(&mut self) {
        self.state.bus.publish(Event::PairingEnded {
            pairing: self.id,
            agent: std::mem::take(&mut self.agent),
            outcome: self.outcome,
        });
    }
}

/// Stops Hark's own speech request when dropped.
struct StopSpeech(Option<Arc<AtomicBool>>);

impl Drop for StopSpeech {
    fn drop(&mut self) {
        if let Some(cancel) = &self.0 {
            cancel.store(true, Ordering::Release);
        }
    }
}

impl Pair for Room {
    fn ask(&self, ask: PairAsk) -> BoxFuture<'_, Result<(), PairRefusal>> {
        Box::pin(async move {
            let state = &self.state;
            if !state.conductor.has_button() {
                return Err(PairRefusal::NoButton(
                    state.subsystems.get(Subsystem::Board).to_string(),
                ));
            }
            // Hark asks the person itself: the floor keeps agents'
            // questions (and their button answers) and speech out of the
            // way meanwhile.
            let turn = state
                .floor
                .take(Who::Hark, "pair", true, ask.timeout)
                .await
                .map_err(|_| PairRefusal::Busy)?;
            // Subscribed before the light shows: a press from then on
            // counts.
            let mut events = state.bus.subscribe();
            let id = state.bus.next_id();
            state.bus.publish(Event::PairingRequested {
                pairing: id,
                agent: ask.agent.clone(),
                address: ask.address.clone(),
                scopes: ask.scopes.clone(),
            });
            let mut requested = Requested {
                state,
                id,
                agent: ask.agent.clone(),
                outcome: hark_core::events::PairingOutcome::Cancelled,
            };
            // The prompt; the time to answer runs from its end. It stops
            // when the pairing ends first (the agent left, or a long press).
            let (progress, mut spoken) = crate::tts::speech_events();
            let _prompt = StopSpeech(
                crate::person::say_tracked(&state.voice, ask.prompt, Some(progress)).await,
            );
            let decided = ask.decided;
            let decided = async move {
                match decided {
                    Some(decided) => match decided.await {
                        Ok(true) => Answer::Yes,
                        Ok(false) => Answer::No,
                        Err(_) => std::future::pending().await,
                    },
                    None => std::future::pending().await,
                }
            };
            let mut button = ButtonAnswer::default();
            let answered = async {
                tokio::select! {
                    answer = button.next(&mut events) => answer,
                    answer = decided => answer,
                }
            };
            let timeout = ask.timeout;
            let no_answer = async move {
                while let Some(event) = spoken.recv().await {
                    if matches!(event, SpeechEvent::Finished(_)) {
                        break;
                    }
                }
                tokio::time::sleep(timeout).await;
            };
            let answer = tokio::select! {
                answer = answered => Some(answer),
                () = no_answer => None,
            };
            match answer {
                Some(Answer::Yes) => {
                    requested.outcome = hark_core::events::PairingOutcome::Approved;
                    Ok(())
                }
                Some(_) => {
                    requested.outcome = hark_core::events::PairingOutcome::Refused;
                    drop(requested);
                    drop(turn);
                    crate::person::say(&state.voice, "Refused.".to_owned()).await;
                    Err(PairRefusal::Refused)
                }
                None => {
                    requested.outcome = hark_core::events::PairingOutcome::TimedOut;
                    Err(PairRefusal::TimedOut)
                }
            }
        })
    }

    fn say(&self, words: String) {
        let voice = Arc::clone(&self.state.voice);
        tokio::spawn(async move { crate::person::say(&voice, words).await });
    }
}
