//! The self-test's button and mute-switch steps: wait on the event stream
//! for the classified events of a press, a long press, or the switch moved
//! over and back — a person's hand, or on the simulated board the daemon's
//! own ([`Hand`]), which moves the simulated contacts as `hark button` and
//! `hark mute` do and reacts to what the classifier reports.

use std::{sync::Arc, time::Duration};

use hark_board::{
    profile::{InputPin, Profile},
    sim::{SimControl, SimError},
};

use hark_core::selftest::{Moved, Seen};

use super::step::{StepError, board, contact_name, take_floor};
use crate::{
    events::{self, Button, Event},
    state::ApplianceState,
};

/// What a button or switch step waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Press,
    LongPress,
    /// The switch moved away from `from` and back.
    Mute {
        from: bool,
    },
}

/// What the simulated board's hand does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// A tap.
    Tap,
    Hold,
    Release,
    Mute(bool),
}

/// Follows the classified events of one button or switch step.
#[derive(Debug)]
pub struct Watch {
    expect: Expect,
    /// 0: waiting for the first event; 1: for the second; 2: done.
    stage: u8,
    /// The press under way turned long (`Expect::Press`).
    went_long: bool,
    /// Presses of the wrong kind, for the hint.
    wrong: u32,
    pub seen: Vec<Seen>,
}

impl Watch {
    pub fn new(expect: Expect) -> Watch {
        Watch {
            expect,
            stage: 0,
            went_long: false,
            wrong: 0,
            seen: Vec::new(),
        }
    }

    /// What the simulated hand does first.
    pub fn first_act(&self) -> Act {
        match self.expect {
            Expect::Press => Act::Tap,
            Expect::LongPress => Act::Hold,
            Expect::Mute { from } => Act::Mute(!from),
        }
    }

    pub fn done(&self) -> bool {
        self.stage == 2
    }

    /// Takes an event from the stream, `at` after the wait began; returns
    /// what the simulated hand does next, if anything.
    pub fn feed(&mut self, event: &Event, at: Duration) -> Option<Act> {
        let at_ms = at.as_millis() as u64;
        let mut seen = |name: &str| {
            self.seen.push(Seen {
                event: name.to_owned(),
                at_ms,
            })
        };
        match (self.expect, event) {
            (Expect::Press | Expect::LongPress, Event::Button { action }) => {
                let name = match action {
                    Button::Press => "press",
                    Button::Release => "release",
                    Button::LongPress => "long_press",
                    // Not what any step asks for.
                    Button::DoublePress => return None,
                };
                seen(name);
                match (self.expect, action) {
                    (Expect::Press, Button::Press) => {
                        self.stage = 1;
                        self.went_long = false;
                    }
                    (Expect::Press, Button::LongPress) => self.went_long = true,
                    (Expect::Press, Button::Release) if self.stage == 1 => {
                        if self.went_long {
                            self.wrong += 1;
                            self.stage = 0;
                        } else {
                            self.stage = 2;
                        }
                    }
                    (Expect::LongPress, Button::LongPress) => {
                        self.stage = 1;
                        return Some(Act::Release);
                    }
                    (Expect::LongPress, Button::Release) => {
                        if self.stage == 1 {
                            self.stage = 2;
                        } else {
                            self.wrong += 1;
                        }
                    }
                    _ => {}
                }
                None
            }
            (Expect::Mute { from }, Event::Mute { on }) => {
                seen(if *on { "mute_on" } else { "mute_off" });
                if self.stage == 0 && *on != from {
                    self.stage = 1;
                    return Some(Act::Mute(from));
                }
                if self.stage == 1 && *on == from {
                    self.stage = 2;
                }
                None
            }
            _ => None,
        }
    }

    /// What was waited for, for the failure.
    pub fn what(&self) -> &'static str {
        match self.expect {
            Expect::Press => "press",
            Expect::LongPress => "long press",
            Expect::Mute { from: false } => "mute switch movement (on, then off again)",
            Expect::Mute { from: true } => "mute switch movement (off, then on again)",
        }
    }

    /// What went wrong instead, if anything did.
    pub fn hint(&self) -> String {
        match (self.expect, self.wrong, self.stage) {
            (Expect::Press, n @ 1.., _) => {
                format!("; {n} long press(es) seen instead: press it briefly")
            }
            (Expect::LongPress, n @ 1.., _) => {
                format!("; {n} short press(es) seen instead: hold it down for about a second")
            }
            (Expect::Mute { .. }, _, 1) => "; it moved once but not back".to_owned(),
            _ => String::new(),
        }
    }
}

/// The simulated board's hand, for one step: it puts back what it moved
/// when the step ends early (the button up, the switch where it was).
struct Hand {
    sim: SimControl,
    holding: bool,
    /// Where the switch was before the step, while it is moved.
    moved_from: Option<bool>,
}

impl Hand {
    async fn act(&mut self, act: Act) -> Result<(), SimError> {
        match act {
            Act::Tap => self.sim.press().await,
            Act::Hold => {
                self.holding = true;
                self.sim.hold().await
            }
            Act::Release => {
                self.holding = false;
                self.sim.release().await
            }
            Act::Mute(on) => {
                match self.moved_from {
                    Some(from) if from == on => self.moved_from = None,
                    Some(_) => {}
                    None => self.moved_from = Some(!on),
                }
                self.sim.mute(on).await
            }
        }
    }
}

impl Drop for Hand {
    fn drop(&mut self) {
        let (sim, holding, moved_from) = (self.sim.clone(), self.holding, self.moved_from);
        if !holding && moved_from.is_none() {
            return;
        }
        tokio::spawn(async move {
            if holding {
                let _ = sim.release().await;
            }
            if let Some(from) = moved_from {
                let _ = sim.mute(from).await;
            }
        });
    }
}

pub(super) async fn wait_for_hand(
    state: &Arc<ApplianceState>,
    expect: Expect,
    simulate: bool,
    timeout_ms: u32,
) -> Result<Moved, StepError> {
    let (on, sim) = {
        let board = board(&state.selftest, &state.subsystems)?;
        let (what, pin): (&'static str, fn(&Profile) -> Option<InputPin>) = match expect {
            Expect::Mute { .. } => ("mute switch", |p| p.mute),
            _ => ("push-to-talk button", |p| p.button),
        };
        let on = contact_name(&board, what, pin).ok_or_else(|| StepError::NoContact {
            what,
            board: board.describe().to_owned(),
        })?;
        let sim = match simulate {
            true => Some(
                board
                    .simulated_control()
                    .cloned()
                    .ok_or_else(|| StepError::NotSimulated(board.describe().to_owned()))?,
            ),
            false => None,
        };
        (on, sim)
    };
    let _turn = take_floor(&state.floor).await?;
    // The mute switch does what it always does; a press is the test's.
    let _taken = (!matches!(expect, Expect::Mute { .. })).then(|| state.selftest.take_button());
    // Subscribed before the hand moves: every event from here on counts.
    let mut events = state.bus.subscribe();
    let mut watch = Watch::new(expect);
    let mut hand = sim.map(|sim| Hand {
        sim,
        holding: false,
        moved_from: None,
    });
    // Events carry the time they were published: the times are the
    // classifier's, not when this loop got round to them.
    let began_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    if let Some(hand) = hand.as_mut() {
        hand.act(watch.first_act()).await?;
    }
    let timeout = Duration::from_millis(u64::from(timeout_ms));
    let waited = tokio::time::timeout(timeout, async {
        while !watch.done() {
            let event = events::next(&mut events, "selftest")
                .await
                .ok_or(StepError::Stopping)?;
            let at = Duration::from_millis(event.at_ms.saturating_sub(began_ms));
            if let Some(act) = watch.feed(&event.event, at)
                && let Some(hand) = hand.as_mut()
            {
                hand.act(act).await?;
            }
        }
        Ok::<_, StepError>(())
    })
    .await;
    match waited {
        Ok(Ok(())) => Ok(Moved { events: watch.seen }),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(StepError::NotSeen {
            what: watch.what(),
            seconds: timeout.as_secs_f64(),
            on,
            hint: watch.hint(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn button(action: Button) -> Event {
        Event::Button { action }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_press_is_down_and_up_before_it_is_long() {
        let mut w = Watch::new(Expect::Press);
        assert_eq!(w.first_act(), Act::Tap);
        // A long one first: not it, and said in the hint.
        w.feed(&button(Button::Press), ms(30));
        w.feed(&button(Button::LongPress), ms(830));
        w.feed(&button(Button::Release), ms(900));
        assert!(!w.done());
        assert!(w.hint().contains("1 long press"), "{}", w.hint());
        w.feed(&button(Button::Press), ms(1030));
        assert_eq!(w.feed(&button(Button::Release), ms(1150)), None);
        assert!(w.done());
        let names: Vec<&str> = w.seen.iter().map(|s| s.event.as_str()).collect();
        assert_eq!(
            names,
            ["press", "long_press", "release", "press", "release"]
        );
        assert_eq!(w.seen[3].at_ms, 1030);
    }

    #[test]
    fn a_long_press_releases_the_simulated_hand_and_ends_on_release() {
        let mut w = Watch::new(Expect::LongPress);
        assert_eq!(w.first_act(), Act::Hold);
        w.feed(&button(Button::Press), ms(30));
        w.feed(&button(Button::Release), ms(150));
        assert!(w.hint().contains("1 short press"), "{}", w.hint());
        w.feed(&button(Button::Press), ms(300));
        assert_eq!(
            w.feed(&button(Button::LongPress), ms(1100)),
            Some(Act::Release)
        );
        assert!(!w.done());
        // A double press and the mute are not this step's.
        w.feed(&button(Button::DoublePress), ms(1150));
        w.feed(&Event::Mute { on: true }, ms(1160));
        w.feed(&button(Button::Release), ms(1200));
        assert!(w.done());
        assert_eq!(w.seen.len(), 5);
    }

    #[test]
    fn the_switch_goes_over_and_back() {
        let mut w = Watch::new(Expect::Mute { from: false });
        assert_eq!(w.first_act(), Act::Mute(true));
        w.feed(&button(Button::Press), ms(10));
        assert_eq!(
            w.feed(&Event::Mute { on: true }, ms(30)),
            Some(Act::Mute(false))
        );
        assert!(w.hint().contains("not back"));
        assert_eq!(w.feed(&Event::Mute { on: false }, ms(60)), None);
        assert!(w.done());
        let names: Vec<&str> = w.seen.iter().map(|s| s.event.as_str()).collect();
        assert_eq!(names, ["mute_on", "mute_off"]);
        // Started muted: off, then on again.
        let w = Watch::new(Expect::Mute { from: true });
        assert_eq!(w.first_act(), Act::Mute(false));
        assert!(w.what().contains("off, then on"));
    }

    #[tokio::test]
    async fn the_simulated_hand_moves_the_board_and_the_classified_events_come_back() {
        let opened = crate::board::Opened::open(
            &crate::config::RoomConfig::default(),
            hark_board::board::Resolved::Simulated("a test".into()),
            &Default::default(),
        )
        .expect("the simulated board opens");
        let (conductor, conductor_task) = crate::conductor::Conductor::new();
        let state = Arc::new(ApplianceState {
            simulated_board: opened.simulated(),
            selftest: opened.bench(),
            conductor,
            ..ApplianceState::default()
        });
        let token = tokio_util::sync::CancellationToken::new();
        let (board, contacts) = opened.serve(&state, &token);
        // The conductor publishes what the contacts do.
        tokio::spawn(conductor_task.run(Arc::clone(&state), contacts, token.clone()));
        let names = |moved: &Moved| -> Vec<String> {
            moved.events.iter().map(|e| e.event.clone()).collect()
        };
        let pressed = wait_for_hand(&state, Expect::Press, true, 5000)
            .await
            .unwrap();
        assert_eq!(names(&pressed), ["press", "release"]);
        assert!(pressed.events[0].at_ms >= 25, "{pressed:?}");
        assert!(
            !state.selftest.has_button(),
            "the button is the appliance's again"
        );
        let switched = wait_for_hand(&state, Expect::Mute { from: false }, true, 5000)
            .await
            .unwrap();
        assert_eq!(names(&switched), ["mute_on", "mute_off"]);
        assert!(!state.bus.snapshot().muted);
        // Nobody presses: the step fails naming the button, in time.
        let missed = wait_for_hand(&state, Expect::LongPress, false, 300)
            .await
            .unwrap_err();
        assert_eq!(
            missed.to_string(),
            "no long press seen within 0.3 s on the simulated push-to-talk button"
        );
        token.cancel();
        board.shutdown().await;
    }
}
