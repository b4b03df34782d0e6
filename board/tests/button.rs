//! The button classifier on tokio's paused clock: raw levels with bounces in,
//! press, release, long press and double press out.

use std::time::Duration;

use hark_board::button::{ButtonEvent, ButtonTiming, Level, run};
use tokio::sync::mpsc;
use tokio::time::advance;

use ButtonEvent::{DoublePress, LongPress, Press, Release};
use Level::{Pressed, Released};

struct Rig {
    levels: mpsc::Sender<Level>,
    events: mpsc::Receiver<ButtonEvent>,
}

impl Rig {
    fn new() -> Self {
        let (levels, level_rx) = mpsc::channel(16);
        let (event_tx, events) = mpsc::channel(16);
        tokio::spawn(run(level_rx, event_tx, ButtonTiming::default()));
        Self { levels, events }
    }

    async fn set(&self, level: Level) {
        self.levels.send(level).await.unwrap();
        // Let the classifier take the level at this instant.
        tokio::task::yield_now().await;
    }

    /// Moves the clock on by `ms`, then returns the events sent by then.
    async fn after(&mut self, ms: u64) -> Vec<ButtonEvent> {
        advance(Duration::from_millis(ms)).await;
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        let mut out = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            out.push(event);
        }
        out
    }

    /// Contact bounce: `n` quick closings and openings 2 ms apart, then
    /// `level` for good (the debounce time counts from then).
    async fn bounce_to(&mut self, level: Level, n: usize) {
        let other = if level == Pressed { Released } else { Pressed };
        for i in 0..2 * n {
            self.set(if i % 2 == 0 { level } else { other }).await;
            assert_eq!(self.after(2).await, vec![], "no event while it bounces");
        }
        self.set(level).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_bouncy_press_and_release_are_one_press_and_one_release() {
    let mut rig = Rig::new();
    rig.bounce_to(Pressed, 5).await;
    assert_eq!(rig.after(29).await, vec![], "not before the debounce time");
    assert_eq!(rig.after(2).await, vec![Press]);
    assert_eq!(rig.after(200).await, vec![]);
    rig.bounce_to(Released, 3).await;
    assert_eq!(rig.after(31).await, vec![Release]);
    assert_eq!(rig.after(2000).await, vec![], "nothing more");
}

#[tokio::test(start_paused = true)]
async fn a_glitch_shorter_than_the_debounce_is_nothing() {
    let mut rig = Rig::new();
    rig.set(Pressed).await;
    assert_eq!(rig.after(10).await, vec![]);
    rig.set(Released).await;
    assert_eq!(rig.after(1000).await, vec![]);
}

#[tokio::test(start_paused = true)]
async fn holding_is_a_long_press_once_then_a_release() {
    let mut rig = Rig::new();
    rig.set(Pressed).await;
    assert_eq!(rig.after(31).await, vec![Press]);
    // The long press counts from when the contact closed.
    assert_eq!(rig.after(760).await, vec![]);
    assert_eq!(rig.after(10).await, vec![LongPress]);
    assert_eq!(rig.after(3000).await, vec![], "a long press is sent once");
    rig.set(Released).await;
    assert_eq!(rig.after(31).await, vec![Release]);
}

#[tokio::test(start_paused = true)]
async fn a_short_press_is_no_long_press() {
    let mut rig = Rig::new();
    rig.set(Pressed).await;
    assert_eq!(rig.after(400).await, vec![Press]);
    rig.set(Released).await;
    assert_eq!(rig.after(2000).await, vec![Release]);
}

#[tokio::test(start_paused = true)]
async fn two_quick_presses_are_a_double_press_and_a_third_is_not() {
    let mut rig = Rig::new();
    rig.set(Pressed).await;
    assert_eq!(rig.after(100).await, vec![Press]);
    rig.set(Released).await;
    assert_eq!(rig.after(150).await, vec![Release]);
    rig.bounce_to(Pressed, 3).await;
    assert_eq!(rig.after(40).await, vec![Press, DoublePress]);
    rig.set(Released).await;
    assert_eq!(rig.after(100).await, vec![Release]);
    rig.set(Pressed).await;
    assert_eq!(
        rig.after(40).await,
        vec![Press],
        "a third quick press starts over"
    );
    rig.set(Released).await;
    assert_eq!(rig.after(100).await, vec![Release]);
    rig.set(Pressed).await;
    assert_eq!(
        rig.after(40).await,
        vec![Press, DoublePress],
        "and pairs with the next"
    );
}

#[tokio::test(start_paused = true)]
async fn presses_further_apart_are_single_presses() {
    let mut rig = Rig::new();
    rig.set(Pressed).await;
    assert_eq!(rig.after(100).await, vec![Press]);
    rig.set(Released).await;
    assert_eq!(rig.after(400).await, vec![Release]);
    rig.set(Pressed).await;
    assert_eq!(rig.after(40).await, vec![Press]);
}

#[tokio::test(start_paused = true)]
async fn the_classifier_ends_when_its_backend_goes() {
    let (levels, level_rx) = mpsc::channel(4);
    let (event_tx, mut events) = mpsc::channel(4);
    let task = tokio::spawn(run(level_rx, event_tx, ButtonTiming::default()));
    drop(levels);
    task.await.unwrap();
    assert_eq!(events.recv().await, None);
}
