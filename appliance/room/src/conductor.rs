//! The conductor: the one place that decides what the person's hand on the
//! appliance means. A press, a hold, a tap and the mute switch arrive here
//! as the board's events, and one task, in one `match`, decides:
//!
//! - **the stop key**: a press while Hark speaks silences it (a `converse`
//!   then listens at once: barge-in; `confirm` takes the press as its
//!   answer, from the event stream);
//! - **push-to-talk**: a press while a recording waits holds it from now
//!   until the button comes up; a recording that opens while the button is
//!   already down is held at once; a tap (shorter than [`TAP`]) lets the
//!   voice detector end it instead;
//! - **the pairing answer**: a press while a pairing waits answers it (the
//!   pairing reads the press from the event stream) and starts nothing
//!   else;
//! - **the person's turn**: a press while nobody listens and Hark is quiet
//!   starts the person's own recording for the voice inbox;
//! - **the mute switch** closes the microphone;
//! - a press a self-test step waits for is the test's alone.
//!
//! Every move of the button and the switch is published on the event
//! stream first, so the calls that wait for one see it.
//!
//! The state these decisions need (whether the button is down, since when,
//! which recordings it may hold) lives in the task, not in flags spread
//! over the appliance; what it acts on is the [`Stage`] around it, which the
//! tests script under paused time.

use std::{
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hark_audio::utterance::Control;
use hark_board::{BoardEvent, button::ButtonEvent};
use hark_core::events::{Button, Event};
use tokio::{sync::mpsc, time::Instant};
use tokio_util::sync::CancellationToken;

/// A press shorter than this is a tap: it starts (or keeps) listening
/// until the person stops speaking. A longer one is push-to-talk: the
/// recording ends when the button comes up.
pub const TAP: Duration = Duration::from_millis(400);

/// Recordings that may register at once before the conductor reads them.
const COMMANDS: usize = 64;

/// What the conductor acts on: the speech, the floor, the pairings, the
/// self-test, the person's recording, the microphone's mute and the event
/// stream.
pub trait Stage: Send + Sync + 'static {
    /// Speech requests playing or waiting to.
    fn speech_pending(&self) -> usize;
    /// Sound is coming out of the speaker (speech or an earcon).
    fn speaker_playing(&self) -> bool;
    /// Stops the speech and drops what waits; how many requests went.
    fn stop_speech(&self) -> usize;
    /// Stops a timer that rings now; whether one did.
    fn stop_ringing(&self) -> bool;
    /// An agent's call has the turn with the person.
    fn floor_held_by_agent(&self) -> bool;
    /// A pairing waits for the button.
    fn pairing_waiting(&self) -> bool;
    /// A self-test step waits for the button.
    fn selftest_waits(&self) -> bool;
    /// Starts the person's own recording (which may still decline: the
    /// inbox off, the microphone muted, nothing to hear with).
    fn start_person(&self, how: Start);
    /// A recording has the microphone open (an agent's or the person's).
    fn recording(&self) -> bool;
    /// Keeps a wake word detection for the status and publishes it.
    fn wake_heard(&self, word: String, score: f32, started: bool);
    /// Closes (or opens) the microphone.
    fn set_muted(&self, on: bool);
    fn publish(&self, event: Event);
}

enum Command {
    /// A recording push-to-talk may hold while it runs.
    Recording(Weak<Control>),
    /// The wake word detector heard `word` with `score`; the word ended
    /// at ring position `at`.
    Wake { word: String, score: f32, at: u64 },
}

/// How the person's turn was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// A press of the button: the recording keeps a pre-roll.
    Press,
    /// The wake word, which ended at this capture ring position: the
    /// recording starts there, so the word and what came before it are
    /// never kept.
    WakeWord { at: u64 },
    /// The follow-up after `agent` answered the person: the microphone
    /// opens for `window` without the wake word, and gives way if an agent
    /// wants the floor before the person speaks ([`crate::follow`]).
    FollowUp {
        agent: String,
        window: std::time::Duration,
    },
}

/// The conductor's handle: what the rest of the appliance tells it.
#[derive(Clone)]
pub struct Conductor {
    commands: mpsc::Sender<Command>,
    has_button: Arc<AtomicBool>,
}

/// The conductor's task, to run with [`ConductorTask::run`].
pub struct ConductorTask {
    commands: mpsc::Receiver<Command>,
    has_button: Arc<AtomicBool>,
}

impl Conductor {
    pub fn new() -> (Conductor, ConductorTask) {
        let (tx, rx) = mpsc::channel(COMMANDS);
        let has_button = Arc::new(AtomicBool::new(false));
        (
            Conductor {
                commands: tx,
                has_button: Arc::clone(&has_button),
            },
            ConductorTask {
                commands: rx,
                has_button,
            },
        )
    }

    /// Lets push-to-talk reach `control` for as long as the recording
    /// runs. Without a running conductor (no board) nothing can hold it.
    pub fn recording(&self, control: &Arc<Control>) {
        if self
            .commands
            .try_send(Command::Recording(Arc::downgrade(control)))
            .is_err()
        {
            tracing::debug!("no conductor takes the recording; push-to-talk cannot hold it");
        }
    }

    /// The wake word detector heard a word (from its own thread: never
    /// waits; a full queue drops the detection, said in the log).
    pub fn woke(&self, word: String, score: f32, at: u64) {
        if self
            .commands
            .try_send(Command::Wake { word, score, at })
            .is_err()
        {
            tracing::warn!("the conductor is not taking wake words; one was dropped");
        }
    }

    /// The board has a working button: pairings can be approved.
    pub fn has_button(&self) -> bool {
        self.has_button.load(Ordering::Acquire)
    }
}

/// The decisions' own state.
struct Hand {
    /// When the button went down, while it is down.
    down_since: Option<Instant>,
    /// Recordings push-to-talk may hold.
    recorders: Vec<Weak<Control>>,
}

impl ConductorTask {
    /// Decides what the board's `events` mean until `token` is cancelled
    /// (without events, it still takes recordings, which nothing holds).
    /// Whether there is a button is known from the call on, before the
    /// task first runs.
    pub fn run(
        self,
        stage: impl Stage,
        events: Option<mpsc::Receiver<BoardEvent>>,
        token: CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send {
        self.has_button.store(events.is_some(), Ordering::Release);
        self.serve(stage, events, token)
    }

    async fn serve(
        self,
        stage: impl Stage,
        mut events: Option<mpsc::Receiver<BoardEvent>>,
        token: CancellationToken,
    ) {
        let ConductorTask {
            mut commands,
            has_button,
        } = self;
        let mut hand = Hand {
            down_since: None,
            recorders: Vec::new(),
        };
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                command = commands.recv() => match command {
                    Some(Command::Recording(control)) => hand.recording(control),
                    Some(Command::Wake { word, score, at }) => {
                        let started = hand.woke(&stage, at);
                        stage.wake_heard(word, score, started);
                    }
                    None => return,
                },
                event = next(&mut events) => match event {
                    Some(event) => hand.board(event, &stage),
                    // The board's contacts are gone.
                    None => {
                        events = None;
                        has_button.store(false, Ordering::Release);
                    }
                },
            }
        }
    }
}

/// The next board event; pending forever once there is none to come.
async fn next(events: &mut Option<mpsc::Receiver<BoardEvent>>) -> Option<BoardEvent> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

impl Hand {
    fn recording(&mut self, control: Weak<Control>) {
        self.recorders.retain(|r| r.strong_count() > 0);
        if let Some(live) = control.upgrade() {
            // A recording that opens while the button is down is held at
            // once: the person pressed before the microphone opened.
            if self.down_since.is_some() {
                live.hold();
            }
            self.recorders.push(control);
        }
    }

    fn live(&mut self) -> Vec<Arc<Control>> {
        self.recorders.retain(|r| r.strong_count() > 0);
        self.recorders.iter().filter_map(Weak::upgrade).collect()
    }

    fn board(&mut self, event: BoardEvent, stage: &impl Stage) {
        tracing::debug!(?event, "board event");
        match event {
            BoardEvent::Mute(on) => {
                stage.set_muted(on);
                stage.publish(Event::Mute { on });
                tracing::info!(muted = on, "mute switch");
            }
            BoardEvent::Button(button) => {
                stage.publish(Event::Button {
                    action: action(button),
                });
                match button {
                    ButtonEvent::Press => self.down_since = Some(Instant::now()),
                    ButtonEvent::Release => {}
                    // Long and double presses are for the calls that wait
                    // for them (`confirm`: a long press is "no"), on the
                    // stream.
                    ButtonEvent::LongPress | ButtonEvent::DoublePress => return,
                }
                // A self-test step waits for this press: it is the test's,
                // not a message for the agents, the stop key or an answer.
                if stage.selftest_waits() {
                    if button == ButtonEvent::Press {
                        tracing::info!("button pressed: the self-test takes it");
                    } else {
                        self.down_since = None;
                    }
                    return;
                }
                match button {
                    ButtonEvent::Press => self.pressed(stage),
                    _ => self.released(),
                }
            }
        }
    }

    fn pressed(&mut self, stage: &impl Stage) {
        // A ringing timer: the press stops it and is nothing else.
        if stage.stop_ringing() {
            stage.stop_speech();
            tracing::info!("button pressed: the timer stopped");
            return;
        }
        // The stop key: speech, not a chime (a press just after a chime
        // still starts the person's recording).
        let speech = stage.speech_pending() > 0;
        if speech || stage.speaker_playing() {
            let dropped = stage.stop_speech();
            if speech {
                tracing::info!(requests = dropped, "button pressed: speech stopped");
            }
        }
        // Push-to-talk: a waiting recording records from now until the
        // button comes up.
        let recorders = self.live();
        for recorder in &recorders {
            recorder.hold();
        }
        if !recorders.is_empty() {
            tracing::info!(recordings = recorders.len(), "push-to-talk: recording held");
        } else if stage.pairing_waiting() {
            tracing::info!("button pressed: it answers the pairing");
        } else if !stage.floor_held_by_agent() && !speech {
            // Nobody is listening: the person starts a conversation.
            stage.start_person(Start::Press);
        }
    }

    /// The wake word: what a press starts, but never an answer (a pairing
    /// is approved by hand only, and a self-test step waits for the
    /// button), and nothing while Hark already listens. It stops Hark's
    /// speech as the stop key does (a `converse` then listens at once),
    /// and otherwise starts the person's turn from the word's end. Whether
    /// it started the person's turn.
    fn woke(&mut self, stage: &impl Stage, at: u64) -> bool {
        if stage.selftest_waits() || stage.pairing_waiting() {
            tracing::info!("wake word heard while the button is awaited: ignored");
            return false;
        }
        // The stop word: a ringing timer stops, and that is all.
        if stage.stop_ringing() {
            stage.stop_speech();
            tracing::info!("wake word heard: the timer stopped");
            return false;
        }
        if stage.speech_pending() > 0 || stage.speaker_playing() {
            let dropped = stage.stop_speech();
            tracing::info!(requests = dropped, "wake word heard: speech stopped");
        }
        if stage.recording() {
            tracing::info!("wake word heard while Hark listens: nothing more to start");
            return false;
        }
        if stage.floor_held_by_agent() {
            return false;
        }
        stage.start_person(Start::WakeWord { at });
        true
    }

    fn released(&mut self) {
        let tap = self
            .down_since
            .take()
            .is_some_and(|down| down.elapsed() < TAP);
        let (mut ended, mut tapped) = (0, 0);
        for recorder in self.live() {
            if recorder.held() {
                if tap {
                    recorder.tap();
                    tapped += 1;
                } else {
                    recorder.release();
                    ended += 1;
                }
            }
        }
        if ended > 0 {
            tracing::info!(recordings = ended, "push-to-talk released: utterance ended");
        }
        if tapped > 0 {
            tracing::info!(
                recordings = tapped,
                "button tapped: listening until the person stops"
            );
        }
    }
}

/// The board's button event on the event stream.
pub fn action(event: ButtonEvent) -> Button {
    match event {
        ButtonEvent::Press => Button::Press,
        ButtonEvent::Release => Button::Release,
        ButtonEvent::LongPress => Button::LongPress,
        ButtonEvent::DoublePress => Button::DoublePress,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Mutex, atomic::AtomicUsize};

    use super::*;

    /// A room that does what the conductor asks and remembers it.
    #[derive(Default)]
    struct Room {
        speech: AtomicUsize,
        playing: AtomicBool,
        agent_holds_floor: AtomicBool,
        pairing: AtomicBool,
        selftest: AtomicBool,
        stopped: AtomicUsize,
        people: AtomicUsize,
        /// How each person's turn was started.
        starts: Mutex<Vec<Start>>,
        listening: AtomicBool,
        ringing: AtomicBool,
        muted: AtomicBool,
        events: Mutex<Vec<Event>>,
        wakes: Mutex<Vec<(String, bool)>>,
    }

    impl Stage for Arc<Room> {
        fn speech_pending(&self) -> usize {
            self.speech.load(Ordering::SeqCst)
        }
        fn speaker_playing(&self) -> bool {
            self.playing.load(Ordering::SeqCst)
        }
        fn stop_speech(&self) -> usize {
            self.stopped.fetch_add(1, Ordering::SeqCst);
            self.playing.store(false, Ordering::SeqCst);
            self.speech.swap(0, Ordering::SeqCst)
        }
        fn stop_ringing(&self) -> bool {
            self.ringing.swap(false, Ordering::SeqCst)
        }
        fn floor_held_by_agent(&self) -> bool {
            self.agent_holds_floor.load(Ordering::SeqCst)
        }
        fn pairing_waiting(&self) -> bool {
            self.pairing.load(Ordering::SeqCst)
        }
        fn selftest_waits(&self) -> bool {
            self.selftest.load(Ordering::SeqCst)
        }
        fn start_person(&self, how: Start) {
            self.people.fetch_add(1, Ordering::SeqCst);
            self.starts.lock().unwrap().push(how);
        }
        fn recording(&self) -> bool {
            self.listening.load(Ordering::SeqCst)
        }
        fn wake_heard(&self, word: String, _score: f32, started: bool) {
            self.wakes.lock().unwrap().push((word, started));
        }
        fn set_muted(&self, on: bool) {
            self.muted.store(on, Ordering::SeqCst);
        }
        fn publish(&self, event: Event) {
            self.events.lock().unwrap().push(event);
        }
    }

    struct Script {
        room: Arc<Room>,
        board: mpsc::Sender<BoardEvent>,
        conductor: Conductor,
        _token: tokio_util::sync::DropGuard,
    }

    impl Script {
        fn start() -> Script {
            let room = Arc::new(Room::default());
            let (board, events) = mpsc::channel(16);
            let (conductor, task) = Conductor::new();
            let token = CancellationToken::new();
            tokio::spawn(task.run(Arc::clone(&room), Some(events), token.clone()));
            Script {
                room,
                board,
                conductor,
                _token: token.drop_guard(),
            }
        }

        /// Sends `event` and lets the conductor act on it.
        async fn send(&self, event: BoardEvent) {
            self.board.send(event).await.unwrap();
            settle().await;
        }

        async fn press(&self) {
            self.send(BoardEvent::Button(ButtonEvent::Press)).await;
        }

        async fn release(&self) {
            self.send(BoardEvent::Button(ButtonEvent::Release)).await;
        }

        async fn recording(&self) -> Arc<Control> {
            let control = Arc::new(Control::default());
            self.conductor.recording(&control);
            settle().await;
            control
        }

        fn people(&self) -> usize {
            self.room.people.load(Ordering::SeqCst)
        }

        async fn wake(&self, at: u64) {
            self.conductor.woke("okay_nabu".into(), 0.93, at);
            settle().await;
        }

        fn wakes(&self) -> Vec<(String, bool)> {
            self.room.wakes.lock().unwrap().clone()
        }
    }

    /// Lets the spawned conductor run what it was sent (time is paused:
    /// nothing else moves).
    async fn settle() {
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_press_with_nothing_going_on_starts_the_persons_turn() {
        let s = Script::start();
        assert!(s.conductor.has_button());
        s.press().await;
        assert_eq!(s.people(), 1);
        assert_eq!(s.room.stopped.load(Ordering::SeqCst), 0);
        s.release().await;
        let events = s.room.events.lock().unwrap().clone();
        assert_eq!(
            events,
            [
                Event::Button {
                    action: Button::Press
                },
                Event::Button {
                    action: Button::Release
                }
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_press_while_hark_speaks_stops_it_and_starts_nothing_else() {
        let s = Script::start();
        s.room.speech.store(2, Ordering::SeqCst);
        s.room.playing.store(true, Ordering::SeqCst);
        s.press().await;
        assert_eq!(s.room.stopped.load(Ordering::SeqCst), 1, "the stop key");
        assert_eq!(s.people(), 0, "a stop is not a message");
        // Barge-in: converse, which holds the floor while it speaks, sees
        // the press on the stream and listens.
        assert!(s.room.events.lock().unwrap().contains(&Event::Button {
            action: Button::Press
        }));
    }

    #[tokio::test(start_paused = true)]
    async fn a_chime_playing_is_stopped_but_the_press_still_starts_the_persons_turn() {
        let s = Script::start();
        s.room.playing.store(true, Ordering::SeqCst);
        s.press().await;
        assert_eq!(s.room.stopped.load(Ordering::SeqCst), 1);
        assert_eq!(s.people(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_is_push_to_talk_and_its_release_ends_the_recording() {
        let s = Script::start();
        let control = s.recording().await;
        s.press().await;
        assert!(control.held(), "held from the press on");
        assert_eq!(s.people(), 0, "the press belongs to the recording");
        tokio::time::advance(Duration::from_millis(900)).await;
        s.release().await;
        assert!(!control.held());
        assert!(control.stopped(), "the release ends it");
    }

    #[tokio::test(start_paused = true)]
    async fn a_tap_leaves_the_end_to_the_detector() {
        let s = Script::start();
        let control = s.recording().await;
        s.press().await;
        tokio::time::advance(TAP - Duration::from_millis(100)).await;
        s.release().await;
        assert!(!control.held(), "a tap forgets the hold");
        assert!(!control.stopped(), "and does not end the recording");
    }

    #[tokio::test(start_paused = true)]
    async fn a_recording_that_opens_while_the_button_is_down_is_held_at_once() {
        let s = Script::start();
        s.room.agent_holds_floor.store(true, Ordering::SeqCst);
        s.press().await;
        assert_eq!(s.people(), 0, "an agent's turn: not the person's");
        let control = s.recording().await;
        assert!(control.held());
        tokio::time::advance(Duration::from_secs(2)).await;
        s.release().await;
        assert!(control.stopped());
        // A recording after the release is not held.
        assert!(!s.recording().await.held());
    }

    #[tokio::test(start_paused = true)]
    async fn a_press_while_a_pairing_waits_answers_it_and_nothing_else() {
        let s = Script::start();
        s.room.pairing.store(true, Ordering::SeqCst);
        s.press().await;
        assert_eq!(s.people(), 0);
        assert!(s.room.events.lock().unwrap().contains(&Event::Button {
            action: Button::Press
        }));
    }

    #[tokio::test(start_paused = true)]
    async fn the_mute_switch_closes_and_opens_the_microphone() {
        let s = Script::start();
        s.send(BoardEvent::Mute(true)).await;
        assert!(s.room.muted.load(Ordering::SeqCst));
        s.send(BoardEvent::Mute(false)).await;
        assert!(!s.room.muted.load(Ordering::SeqCst));
        let events = s.room.events.lock().unwrap().clone();
        assert_eq!(
            events,
            [Event::Mute { on: true }, Event::Mute { on: false }]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_press_the_selftest_waits_for_is_the_tests_alone() {
        let s = Script::start();
        s.room.selftest.store(true, Ordering::SeqCst);
        s.room.speech.store(1, Ordering::SeqCst);
        let control = s.recording().await;
        s.press().await;
        assert_eq!(s.people(), 0);
        assert_eq!(s.room.stopped.load(Ordering::SeqCst), 0);
        assert!(!control.held());
        assert_eq!(
            s.room.events.lock().unwrap().len(),
            1,
            "published all the same"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn long_and_double_presses_are_only_published() {
        let s = Script::start();
        let control = s.recording().await;
        s.send(BoardEvent::Button(ButtonEvent::LongPress)).await;
        s.send(BoardEvent::Button(ButtonEvent::DoublePress)).await;
        assert_eq!(s.people(), 0);
        assert!(!control.held());
        assert_eq!(s.room.events.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn without_its_contacts_the_board_approves_no_pairing() {
        let room = Arc::new(Room::default());
        let (board, events) = mpsc::channel(1);
        let (conductor, task) = Conductor::new();
        let token = CancellationToken::new();
        tokio::spawn(task.run(room, Some(events), token.clone()));
        settle().await;
        assert!(conductor.has_button());
        drop(board);
        settle().await;
        assert!(!conductor.has_button());
        token.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn the_wake_word_starts_the_persons_turn_from_where_it_ended() {
        let s = Script::start();
        s.wake(48_000).await;
        assert_eq!(s.people(), 1);
        assert_eq!(
            *s.room.starts.lock().unwrap(),
            [Start::WakeWord { at: 48_000 }]
        );
        assert_eq!(s.wakes(), [("okay_nabu".to_owned(), true)]);
        // A press is still a press.
        s.press().await;
        assert_eq!(s.room.starts.lock().unwrap()[1], Start::Press);
    }

    #[tokio::test(start_paused = true)]
    async fn the_wake_word_never_answers_a_pairing_or_a_selftest() {
        let s = Script::start();
        s.room.pairing.store(true, Ordering::SeqCst);
        s.wake(1).await;
        s.room.pairing.store(false, Ordering::SeqCst);
        s.room.selftest.store(true, Ordering::SeqCst);
        s.wake(2).await;
        assert_eq!(s.people(), 0);
        assert_eq!(
            s.wakes(),
            [
                ("okay_nabu".to_owned(), false),
                ("okay_nabu".to_owned(), false)
            ]
        );
        // Not on the event stream as a press either: a pairing reads the
        // button there.
        assert!(s.room.events.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_wake_word_while_hark_listens_or_an_agent_holds_the_floor_starts_nothing() {
        let s = Script::start();
        s.room.listening.store(true, Ordering::SeqCst);
        s.wake(1).await;
        s.room.listening.store(false, Ordering::SeqCst);
        s.room.agent_holds_floor.store(true, Ordering::SeqCst);
        s.wake(2).await;
        assert_eq!(s.people(), 0);
        assert!(s.wakes().iter().all(|(_, started)| !started));
    }

    #[tokio::test(start_paused = true)]
    async fn the_wake_word_while_hark_speaks_stops_it_and_listens() {
        let s = Script::start();
        s.room.speech.store(1, Ordering::SeqCst);
        s.room.playing.store(true, Ordering::SeqCst);
        s.wake(7).await;
        assert_eq!(s.room.stopped.load(Ordering::SeqCst), 1, "the stop word");
        assert_eq!(s.people(), 1, "and the person's turn");
    }

    #[tokio::test(start_paused = true)]
    async fn a_ringing_timer_is_stopped_by_a_press_or_the_wake_word_and_nothing_else_starts() {
        let s = Script::start();
        s.room.ringing.store(true, Ordering::SeqCst);
        s.press().await;
        assert!(
            !s.room.ringing.load(Ordering::SeqCst),
            "the press stopped it"
        );
        assert_eq!(s.people(), 0, "and started no turn");
        s.release().await;
        s.room.ringing.store(true, Ordering::SeqCst);
        s.wake(9).await;
        assert!(
            !s.room.ringing.load(Ordering::SeqCst),
            "the stop word stopped it"
        );
        assert_eq!(s.people(), 0);
        assert_eq!(s.wakes(), [("okay_nabu".to_owned(), false)]);
    }
}
