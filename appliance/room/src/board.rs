//! The board inside the daemon (crate `hark-board`): the lights follow the
//! appliance's state, the mute switch closes the microphone, a press of the
//! button while Hark speaks stops the speech (seed 000's stop key), and
//! holding it while `transcribe_voice` waits records until it comes up
//! (push-to-talk).
//!
//! A press while nobody listens and Hark is quiet starts the person's own
//! recording for the voice inbox ([`crate::person`]).
//!
//! The lights follow the event stream's snapshot ([`crate::events`]), never
//! a request: the listening light is on exactly while a recording has the
//! microphone open, the mute light exactly while the mute is on
//! (docs/hardware.md). The board's button and switch are published on the
//! stream, where `confirm` and `converse` see them.

use std::{
    path::Path,
    sync::{Arc, Mutex, PoisonError, atomic::Ordering},
};

use hark_board::{
    Board, BoardError, BoardEvent,
    board::{self, Resolved},
    detect::Machine,
    led::Rgb,
    profile::Profile,
    status::{Countdown, Status},
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use hark_core::status::{Subsystem, SubsystemState, fixed};

use crate::{
    config::RoomConfig,
    events::{Button, Event, Events},
    selftest::lights::{self, Cycle, LightsError, LightsRequest},
    state::ApplianceState,
    words::Answer,
};

/// The running board and the task serving it.
pub struct BoardService {
    board: Arc<Board>,
    task: JoinHandle<()>,
}

/// The board opened, before the room is made of its parts: the room gets
/// its simulated controls and the self-test's way to it from here, the
/// conductor its button and switch, and its lights task starts once the
/// room it shows is there ([`Opened::serve`]).
pub struct Opened {
    board: Arc<Board>,
    contacts: Option<tokio::sync::mpsc::Receiver<BoardEvent>>,
    /// `hark selftest` asks the lights task for light cycles; one at a time.
    cycles: tokio::sync::mpsc::Sender<LightsRequest>,
    cycle_requests: tokio::sync::mpsc::Receiver<LightsRequest>,
}

impl Opened {
    /// Opens the board the config names (inside the runtime). A board that
    /// cannot be opened is reported in `get_status` and the logs, and the
    /// appliance runs without it rather than not at all.
    pub fn open(
        config: &RoomConfig,
        resolved: Resolved,
        subsystems: &hark_core::status::Subsystems,
    ) -> Option<Self> {
        let mut board = match Board::start(&config.board.board(), resolved) {
            Ok(board) => board,
            Err(e) => {
                unavailable(subsystems, &e);
                return None;
            }
        };
        tracing::info!(board = %board.describe(), "board ready");
        let contacts = board.take_events();
        let (cycles, cycle_requests) = tokio::sync::mpsc::channel(1);
        Some(Self {
            board: Arc::new(board),
            contacts,
            cycles,
            cycle_requests,
        })
    }

    /// The simulated board's controls, when that is the board.
    pub fn simulated(&self) -> Option<hark_board::sim::SimControl> {
        self.board.simulated_control().cloned()
    }

    /// The self-test's side, reaching this board (weakly: it still goes
    /// at shutdown while a step runs) and its lights task.
    pub fn bench(&self) -> crate::selftest::Bench {
        crate::selftest::Bench::with_board(Arc::downgrade(&self.board), self.cycles.clone())
    }

    /// Starts the lights task on the room's state, reports the board in
    /// its subsystem and hands over the button and switch (the
    /// conductor's).
    pub fn serve(
        self,
        state: &Arc<ApplianceState>,
        token: &CancellationToken,
    ) -> (
        BoardService,
        Option<tokio::sync::mpsc::Receiver<BoardEvent>>,
    ) {
        let Self {
            board,
            contacts,
            cycle_requests,
            ..
        } = self;
        let shown = Arc::new(Mutex::new((Status::Idle, None)));
        {
            // The event stream, not the whole state: the state holds this
            // closure, and must not be kept alive by it.
            let (board, shown, bus) = (
                Arc::downgrade(&board),
                Arc::clone(&shown),
                state.bus.clone(),
            );
            state.subsystems.set(
                Subsystem::Board,
                Arc::new(move || {
                    let Some(board) = board.upgrade() else {
                        return SubsystemState::running("stopped");
                    };
                    let (status, timer) = *shown.lock().unwrap_or_else(PoisonError::into_inner);
                    let countdown = timer
                        .map(|timer| counting(&board, timer))
                        .unwrap_or_default();
                    SubsystemState::Running(format!(
                        "{}; lights: {status}; mute {}{countdown}",
                        board.describe(),
                        if bus.snapshot().muted { "on" } else { "off" }
                    ))
                }),
            );
        }
        let task = tokio::spawn(serve(
            Arc::clone(&board),
            cycle_requests,
            Arc::clone(state),
            shown,
            token.clone(),
        ));
        (BoardService { board, task }, contacts)
    }
}

impl BoardService {
    /// Stops the task; the LEDs go dark and the pins are released when the
    /// last reference to the board goes (here, once the task has ended).
    pub async fn shutdown(self) {
        self.task.abort();
        let _ = self.task.await;
        match Arc::into_inner(self.board) {
            Some(board) => {
                // The LED thread shows a dark frame and ends; the pins go
                // back to how they were found.
                drop(board);
                tracing::info!("board stopped: LEDs dark, pins released");
            }
            None => tracing::warn!("the board is still in use at shutdown"),
        }
    }
}

fn unavailable(subsystems: &hark_core::status::Subsystems, error: &BoardError) {
    tracing::error!(error = %error, "the board cannot be used");
    subsystems.set(Subsystem::Board, fixed(SubsystemState::unavailable(error)));
}

/// Chooses the board (see `hark_board::board::resolve`) and, when it is a
/// profile's hardware and `audio.capture.device` is left at `default`,
/// takes the profile's sound card for capture. A board that cannot be
/// chosen is reported (`None`): the appliance runs without one.
pub fn resolve(
    config: &mut RoomConfig,
    subsystems: &hark_core::status::Subsystems,
) -> Option<Resolved> {
    let (resolved, machine) = match board::resolve(&config.board.board(), Path::new("/")) {
        Ok(found) => found,
        Err(e) => {
            unavailable(subsystems, &e);
            return None;
        }
    };
    if let Resolved::Hardware(profile) = &resolved
        && let Some(applied) = apply_profile(&mut config.audio.capture, profile, &machine)
    {
        tracing::info!(profile = %profile.name, capture = %applied, "audio capture from the board profile");
    }
    Some(resolved)
}

/// Fills `capture` from `profile` on `machine` when the config left the
/// device at `default`: the profile's card as `plughw:CARD=<id>`, its
/// channel count and rate, its microphones' channels (`select`) and their
/// positions (`geometry`, for the beamformer). Returns what was applied, or
/// `None` when nothing was (a device named in the config, or the card not
/// present).
pub fn apply_profile(
    capture: &mut hark_audio::config::CaptureConfig,
    profile: &Profile,
    machine: &Machine,
) -> Option<String> {
    if capture.device != "default" {
        return None;
    }
    let card = machine.card_for(profile)?;
    let audio = &profile.audio;
    let channels = u32::from(audio.capture_channels);
    let mic_channels: Vec<u32> = match &audio.mic_channels {
        Some(channels) => channels.iter().map(|&c| u32::from(c)).collect(),
        None => (0..profile.mics.len() as u32).collect(),
    };
    // A position for every device channel (the beamformer's contract);
    // channels without a microphone sit at the centre and are not selected.
    let mut geometry = vec![[0.0f32; 2]; channels as usize];
    for (mic, &channel) in profile.mics.iter().zip(&mic_channels) {
        if let Some(slot) = geometry.get_mut(channel as usize) {
            *slot = [mic[0] as f32, mic[1] as f32];
        }
    }
    capture.device = format!("plughw:CARD={}", card.id);
    capture.channels = channels;
    capture.rate = audio.rate;
    capture.select = mic_channels;
    capture.geometry = geometry;
    Some(format!(
        "{}, {} channels at {} Hz, microphones on channels {:?}",
        capture.device, capture.channels, capture.rate, capture.select
    ))
}

async fn serve(
    board: Arc<Board>,
    cycle_requests: tokio::sync::mpsc::Receiver<LightsRequest>,
    state: Arc<ApplianceState>,
    shown: Arc<Mutex<Shown>>,
    token: CancellationToken,
) {
    // The lights follow the event stream's snapshot: they change when the
    // state does, never on a timer. A self-test's light cycle shows its
    // statuses instead, on its own clock, until the mute or an open
    // microphone takes the lights back (`selftest::lights`).
    let mut now = state.bus.watch();
    let mut cycle_requests = Some(cycle_requests);
    let mut cycle: Option<Cycle> = None;
    let mut last = None;
    loop {
        let activity = lights(&now.borrow_and_update());
        let status = Status::of(activity);
        if lights::promised(status)
            && let Some(interrupted) = cycle.take()
        {
            tracing::info!(%status, "light cycle ended: the {status} light comes first");
            interrupted.abort(LightsError::Interrupted(status));
        }
        if cycle.as_ref().is_some_and(Cycle::abandoned) {
            cycle = None;
        }
        // A timer's countdown is drawn from its own times, so a new timer
        // that ends sooner changes the light as a new status would.
        let wanted = match cycle.as_ref() {
            Some(cycle) => (cycle.showing(), None),
            None => (
                status,
                (status == Status::Timer)
                    .then_some(activity.timer)
                    .flatten(),
            ),
        };
        if last != Some(wanted) {
            board.show(wanted.0, wanted.1);
            *shown.lock().unwrap_or_else(PoisonError::into_inner) = wanted;
            tracing::debug!(status = %wanted.0, test = cycle.is_some(), "lights");
            last = Some(wanted);
        }
        let next_look = cycle.as_ref().map(Cycle::next_sample);
        tokio::select! {
            () = token.cancelled() => break,
            changed = now.changed() => if changed.is_err() { break },
            request = next_from(&mut cycle_requests) => match request {
                Some(request) if cycle.is_some() => request.refuse(LightsError::Busy),
                Some(request) if lights::promised(status) => {
                    request.refuse(LightsError::Promised(status));
                }
                Some(request) => {
                    tracing::info!(each_ms = request.each.as_millis() as u64, "light cycle for the self-test");
                    cycle = Some(Cycle::new(request, tokio::time::Instant::now()));
                }
                None => cycle_requests = None,
            },
            () = look_at(next_look) => {
                let drawn = board.shown();
                // The simulated LEDs keep what the output itself was given.
                let frame = board.simulated_leds().map_or(drawn.frame, |leds| leds.frame());
                if let Some(running) = cycle.as_mut()
                    && running.sample(tokio::time::Instant::now(), &drawn.light, &frame)
                        == lights::Progress::Done
                    && let Some(done) = cycle.take()
                {
                    done.finish();
                }
            }
        }
    }
}

/// Sleeps until `at`; forever without a cycle.
async fn look_at(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The next message on `from` (the board's contacts' events, light-cycle
/// requests); pending forever once there is none to come.
async fn next_from<T>(from: &mut Option<tokio::sync::mpsc::Receiver<T>>) -> Option<T> {
    match from {
        Some(from) => from.recv().await,
        None => std::future::pending().await,
    }
}

/// What the lights show for the appliance's state (docs/hardware.md).
pub fn lights(now: &crate::events::Snapshot) -> hark_board::status::Activity {
    hark_board::status::Activity {
        muted: now.muted,
        listening: now.recording(),
        asking: !now.asking.is_empty(),
        speaking: now.speaker,
        transcribing: now.transcribing,
        error: !now.failed.is_empty(),
        pairing: !now.pairing.is_empty(),
        message_waiting: now.inbox_waiting > 0,
        ringing: now.timer_ringing,
        timer: now.timer.map(|span| Countdown {
            set_ms: span.set_at_ms,
            due_ms: span.due_at_ms,
        }),
    }
}

/// What the lights task last showed: the status, and the countdown it
/// drew for a running timer.
type Shown = (Status, Option<Countdown>);

/// The status line's countdown: the time left and the LEDs it lights (read
/// back from what the output drew, the simulated LEDs' own frame here).
fn counting(board: &Board, timer: Countdown) -> String {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let frame = board
        .simulated_leds()
        .map_or_else(|| board.shown().frame, |leds| leds.frame());
    let lit = frame
        .iter()
        .filter(|Rgb(r, g, b)| *r.max(g).max(b) >= lights::LIT)
        .count();
    format!(
        "; timer: {} s of {} s left, {lit} of {} LEDs lit",
        timer.left_ms(now_ms).div_ceil(1000),
        timer.total_ms().div_ceil(1000),
        frame.len()
    )
}

/// The name of what the lights show (`listening`, `pairing`, …).
pub fn lights_name(now: &crate::events::Snapshot) -> &'static str {
    Status::of(lights(now)).as_str()
}

/// The conductor acts on the appliance: its speech, floor, pairings,
/// self-test, the person's recording, the mute and the event stream.
impl crate::conductor::Stage for Arc<ApplianceState> {
    fn speech_pending(&self) -> usize {
        self.voice.tts.pending()
    }

    fn speaker_playing(&self) -> bool {
        // The player raises it; the audio events' thread publishes it.
        self.bus.snapshot().speaker
    }

    fn stop_speech(&self) -> usize {
        self.voice.tts.stop()
    }

    fn stop_ringing(&self) -> bool {
        self.keeping
            .schedule
            .as_ref()
            .is_some_and(crate::schedule::Scheduler::stop_ringing)
    }

    fn floor_held_by_agent(&self) -> bool {
        self.floor.held_by_agent()
    }

    fn pairing_waiting(&self) -> bool {
        !self.bus.snapshot().pairing.is_empty()
    }

    fn selftest_waits(&self) -> bool {
        self.selftest.has_button()
    }

    fn start_person(&self, how: crate::conductor::Start) {
        crate::person::pressed(self, how);
    }

    fn recording(&self) -> bool {
        self.bus.snapshot().recording()
    }

    fn wake_heard(&self, word: String, score: f32, started: bool) {
        let score = (score * 1000.0).round() / 1000.0;
        if let Some(wake) = &self.ears.wake {
            wake.record(&word, score, started);
        }
        self.bus.publish(Event::WakeWord {
            word,
            score,
            started,
        });
    }

    fn set_muted(&self, on: bool) {
        self.ears.capture_muted.store(on, Ordering::Release);
    }

    fn publish(&self, event: Event) {
        self.bus.publish(event);
    }
}

/// The button as an answer (`confirm`, a pairing): a press that comes up
/// before it is long is yes; one held long is no (at once, while still
/// down).
#[derive(Debug, Default)]
pub struct ButtonAnswer {
    down: bool,
    long: bool,
}

impl ButtonAnswer {
    /// Whether the button is down now (pressed since the answer was
    /// awaited).
    pub fn down(&self) -> bool {
        self.down
    }

    pub fn feed(&mut self, event: &Event) -> Option<Answer> {
        let Event::Button { action } = event else {
            return None;
        };
        match action {
            Button::Press => {
                (self.down, self.long) = (true, false);
                None
            }
            Button::LongPress if self.down => {
                self.long = true;
                Some(Answer::No)
            }
            Button::Release if self.down && !self.long => {
                self.down = false;
                Some(Answer::Yes)
            }
            Button::Release => {
                self.down = false;
                None
            }
            Button::LongPress | Button::DoublePress => None,
        }
    }

    /// An answer already given by what `events` has received.
    pub fn drain(&mut self, events: &mut Events) -> Option<Answer> {
        crate::events::received(events).find_map(|event| self.feed(&event.event))
    }

    /// The next answer the button gives.
    pub async fn next(&mut self, events: &mut Events) -> Answer {
        loop {
            match crate::events::next(events, "button answer").await {
                Some(event) => {
                    if let Some(answer) = self.feed(&event.event) {
                        return answer;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use hark_audio::config::CaptureConfig;
    use hark_board::detect::AlsaCard;

    use super::*;

    fn press(action: Button) -> Event {
        Event::Button { action }
    }

    #[test]
    fn health_and_the_inbox_reach_the_lights() {
        let mut now = crate::events::Snapshot {
            failed: [crate::events::Part::Microphone].into(),
            inbox_waiting: 1,
            ..Default::default()
        };
        let shown = lights(&now);
        assert!(shown.error && shown.message_waiting, "{shown:?}");
        assert_eq!(lights_name(&now), "error");
        now.muted = true;
        assert_eq!(lights_name(&now), "muted");
    }

    #[test]
    fn a_short_press_is_yes_and_a_long_press_no() {
        let mut b = ButtonAnswer::default();
        assert_eq!(b.feed(&press(Button::Press)), None);
        assert_eq!(b.feed(&press(Button::Release)), Some(Answer::Yes));
        let mut b = ButtonAnswer::default();
        assert_eq!(b.feed(&press(Button::Press)), None);
        assert_eq!(b.feed(&press(Button::LongPress)), Some(Answer::No));
        assert_eq!(
            b.feed(&press(Button::Release)),
            None,
            "its release is no second answer"
        );
        // A release whose press came before the question is nothing.
        let mut b = ButtonAnswer::default();
        assert_eq!(b.feed(&press(Button::Release)), None);
        assert_eq!(b.feed(&Event::Mute { on: true }), None);
    }

    fn machine(id: &str, name: &str) -> Machine {
        Machine {
            model: Some("Raspberry Pi 4 Model B Rev 1.4".into()),
            cards: vec![
                AlsaCard {
                    index: 0,
                    id: "Headphones".into(),
                    driver: "bcm2835_headpho".into(),
                    name: "bcm2835 Headphones".into(),
                    long_name: "bcm2835 Headphones".into(),
                },
                AlsaCard {
                    index: 1,
                    id: id.into(),
                    driver: "driver".into(),
                    name: name.into(),
                    long_name: name.into(),
                },
            ],
            model_path: "/proc/device-tree/model".into(),
        }
    }

    #[test]
    fn a_hat_profile_gives_capture_its_card_channels_and_geometry() {
        let profile = Profile::builtin("respeaker-2mic").unwrap();
        let mut capture = CaptureConfig::default();
        let applied = apply_profile(
            &mut capture,
            &profile,
            &machine("seeed2micvoicec", "seeed-2mic-voicecard"),
        );
        assert!(applied.is_some());
        assert_eq!(capture.device, "plughw:CARD=seeed2micvoicec");
        assert_eq!((capture.channels, capture.rate), (2, 16_000));
        assert_eq!(capture.select, vec![0, 1]);
        assert_eq!(capture.geometry, vec![[-0.029, 0.0], [0.029, 0.0]]);
    }

    #[test]
    fn a_usb_array_selects_its_microphone_channels() {
        let profile = Profile::builtin("usb-mic-array").unwrap();
        let mut capture = CaptureConfig::default();
        apply_profile(
            &mut capture,
            &profile,
            &machine("ArrayUAC10", "ReSpeaker 4 Mic Array (UAC1.0)"),
        )
        .unwrap();
        assert_eq!(capture.device, "plughw:CARD=ArrayUAC10");
        assert_eq!(capture.channels, 6);
        assert_eq!(capture.select, vec![1, 2, 3, 4]);
        assert_eq!(capture.geometry.len(), 6);
        assert_eq!(
            capture.geometry[0],
            [0.0, 0.0],
            "no microphone on channel 0"
        );
        assert_ne!(capture.geometry[1], [0.0, 0.0]);
        // The positions are the profile's, in metres, around the centre.
        let sum: f32 = capture.geometry.iter().map(|p| p[0] + p[1]).sum();
        assert!(sum.abs() < 1e-6, "{:?}", capture.geometry);
    }

    #[test]
    fn a_device_named_in_the_config_or_a_missing_card_is_left_alone() {
        let profile = Profile::builtin("respeaker-2mic").unwrap();
        let mut capture = CaptureConfig {
            device: "hw:3,0".into(),
            ..CaptureConfig::default()
        };
        let before = capture.clone();
        let here = machine("seeed2micvoicec", "seeed-2mic-voicecard");
        assert!(apply_profile(&mut capture, &profile, &here).is_none());
        assert_eq!(capture, before);
        let mut capture = CaptureConfig::default();
        let elsewhere = machine("vc4hdmi", "vc4-hdmi");
        assert!(apply_profile(&mut capture, &profile, &elsewhere).is_none());
        assert_eq!(capture, CaptureConfig::default());
    }
}
