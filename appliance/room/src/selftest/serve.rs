//! The daemon's side of `hark selftest`: one `hark/selftest` request per
//! step, `{"step": "tone", …}`, served on the Unix socket only. Each step
//! uses what the appliance already has — the player, Hark's own speech,
//! the capture ring, the board's lights task, the event stream — and
//! answers with what it measured, or fails with a JSON-RPC error
//! (`STEP_FAILED`, the MCP side's) whose message says what is wrong.
//!
//! Steps that use the microphone, the speaker or the button take the floor
//! as Hark ([`Who::Hark`]) first, so no agent talks over the tone or hears
//! the test's recording, and a press during a button step is the test's
//! ([`super::Bench::has_button`]): it starts no message for the agents.
//! A step's recording opens the microphone like any other: the listening
//! light shows. The button and switch steps are in [`super::hand`].

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use hark_audio::{CaptureState, clip::Clip, earcon::Earcon, playback::Outcome, ring::Ring};
use hark_board::{Board, profile::Leds};
use hark_core::selftest::{BoardInfo, LinkState, Played, Press, Recorded, Request, Shown, Spoken};
use hark_core::status::Subsystems;
use serde_json::Value;

use super::{
    Bench,
    hand::{Expect, wait_for_hand},
    lights::{LightsError, LightsRequest},
    signal::{self, RATE},
    step::{StepError, board, contact_name, take_floor},
};
use crate::{
    state::ApplianceState,
    tts::{Priority, SpeechEvent, SpeechOutcome},
};

/// The tone's amplitude: −12 dBFS, clearly audible, far from clipping.
const TONE_AMPLITUDE: f32 = 0.25;
/// Longest the speech step waits for its sentence to be said.
const SPEECH_WAIT: Duration = Duration::from_secs(60);
/// A microphone that delivers nothing for this long has stalled.
const STALL: Duration = Duration::from_secs(3);
/// How often the recording looks for new samples in the ring.
const POLL: Duration = Duration::from_millis(10);

/// Serves one `hark/selftest` request (the MCP side races it against the
/// call ending: dropped, the step stops).
pub async fn serve(
    state: &Arc<ApplianceState>,
    params: Value,
) -> Result<Value, hark_core::room::Refusal> {
    use hark_core::room::Refusal;
    let request: Request = serde_json::from_value(params)
        .map_err(|e| Refusal::Invalid(format!("Invalid params for `hark/selftest`: {e}")))?;
    let step = request.name();
    match run(state, request).await {
        Ok(value) => {
            tracing::info!(step, "self-test step done");
            Ok(value)
        }
        Err(StepError::Invalid(why)) => Err(Refusal::Invalid(format!(
            "Invalid params for `hark/selftest`: {why}"
        ))),
        Err(e) => {
            tracing::info!(step, error = %e, "self-test step failed");
            Err(Refusal::Failed {
                message: e.to_string(),
                step: step.to_owned(),
            })
        }
    }
}

async fn run(state: &Arc<ApplianceState>, request: Request) -> Result<Value, StepError> {
    request.check().map_err(StepError::Invalid)?;
    match request {
        Request::Board => value(board_info(&state.selftest, &state.subsystems)),
        Request::Tone { hz, ms } => {
            let _turn = take_floor(&state.floor).await?;
            value(
                play(
                    &state.voice,
                    &state.subsystems,
                    &signal::tone(hz, ms, TONE_AMPLITUDE),
                    "tone",
                )
                .await,
            )
        }
        Request::Speak { text } => value(speak(state, text).await),
        Request::Record { ms, chime } => value(record(state, ms, chime).await),
        Request::Play { clip } => {
            let clip = state.selftest.clip(clip).ok_or(StepError::ClipGone)?;
            let _turn = take_floor(&state.floor).await?;
            value(play(&state.voice, &state.subsystems, &clip, "recording").await)
        }
        Request::Lights { ms } => value(
            lights(
                &state.selftest,
                &state.subsystems,
                Duration::from_millis(u64::from(ms)),
            )
            .await,
        ),
        Request::Button {
            expect,
            simulate,
            timeout_ms,
        } => {
            let expect = match expect {
                Press::Press => Expect::Press,
                Press::LongPress => Expect::LongPress,
            };
            value(wait_for_hand(state, expect, simulate, timeout_ms).await)
        }
        Request::Mute {
            simulate,
            timeout_ms,
        } => {
            let from = state.bus.snapshot().muted;
            value(wait_for_hand(state, Expect::Mute { from }, simulate, timeout_ms).await)
        }
        Request::Link => value(link(&state.selftest, &state.subsystems).await),
    }
}

/// A step's answer as JSON.
fn value<T: serde::Serialize>(answer: Result<T, StepError>) -> Result<Value, StepError> {
    answer.and_then(|v| serde_json::to_value(v).map_err(|e| StepError::Invalid(e.to_string())))
}

/// The lights as the person finds them, and whether Hark draws them.
fn lights_name(board: &Board) -> (Option<String>, bool) {
    let Some(profile) = board.profile() else {
        let count = board.simulated_leds().map_or(0, |leds| leds.frame().len());
        return (Some(format!("{count} simulated LEDs")), true);
    };
    match (&profile.leds, &profile.link) {
        (Leds::Gpio(leds), _) => {
            let pins: Vec<String> = leds
                .pins
                .iter()
                .map(|led| format!("{} ({})", led.pin, led.role))
                .collect();
            (
                Some(format!(
                    "LEDs on GPIO {} of {}",
                    pins.join(", "),
                    profile.name
                )),
                true,
            )
        }
        (Leds::Apa102(ring), _) => (
            Some(format!(
                "{} APA102 LEDs on SPI{} of {}",
                ring.count, ring.spi_bus, profile.name
            )),
            true,
        ),
        (Leds::None, Some(link)) => (
            Some(format!(
                "the microcontroller's LED ring at {}",
                link.device.display()
            )),
            false,
        ),
        (Leds::None, None) => (None, false),
    }
}

fn board_info(bench: &Bench, subsystems: &Subsystems) -> Result<BoardInfo, StepError> {
    let board = board(bench, subsystems)?;
    let (lights, lights_drawn) = lights_name(&board);
    Ok(BoardInfo {
        board: board.describe().to_owned(),
        profile: board.profile().map(|p| p.name.clone()),
        simulated: board.simulated_control().is_some(),
        button: contact_name(&board, "push-to-talk button", |p| p.button),
        mute: contact_name(&board, "mute switch", |p| p.mute),
        lights,
        lights_drawn,
        link: board
            .profile()
            .and_then(|p| p.link.as_ref())
            .map(|l| l.device.display().to_string()),
        audio: subsystems
            .get(hark_core::status::Subsystem::Audio)
            .to_string(),
    })
}

/// Plays `clip` and waits until it has been heard.
async fn play(
    voice: &crate::state::Voice,
    subsystems: &Subsystems,
    clip: &Clip,
    what: &'static str,
) -> Result<Played, StepError> {
    let player = voice.player().ok_or_else(|| {
        StepError::NoSpeaker(
            subsystems
                .get(hark_core::status::Subsystem::Audio)
                .to_string(),
        )
    })?;
    let done = player.play(clip).map_err(|e| StepError::NotPlayed {
        what,
        why: e.to_string(),
    })?;
    let seconds = clip.duration_secs();
    // The queue may hold a chime before it; a device that never drains is
    // a failure, said with the speaker's state.
    let wait = Duration::from_secs_f64(seconds) + Duration::from_secs(5);
    let outcome = tokio::task::spawn_blocking(move || done.recv_timeout(wait)).await;
    let why = match outcome {
        Ok(Ok(Outcome::Finished)) => {
            return Ok(Played {
                seconds: (seconds * 1000.0).round() / 1000.0,
            });
        }
        Ok(Ok(Outcome::Stopped)) => {
            "it was stopped before its end (the button, or stop_speaking)".to_owned()
        }
        Ok(Ok(Outcome::Failed)) => format!("the speaker failed: {}", player.stats().describe()),
        _ => format!(
            "it had not finished {} s after it should have: {}",
            (wait.as_secs_f64() - seconds).round(),
            player.stats().describe()
        ),
    };
    Err(StepError::NotPlayed { what, why })
}

/// Raises a flag when dropped: stops a speech request or a recording
/// whose step ended early.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

async fn speak(state: &Arc<ApplianceState>, text: String) -> Result<Spoken, StepError> {
    let tts = Some(Arc::clone(&state.voice.tts))
        .filter(|tts| tts.enabled)
        .ok_or_else(|| {
            StepError::NotSpoken(
                state
                    .subsystems
                    .get(hark_core::status::Subsystem::Tts)
                    .to_string(),
            )
        })?;
    let _turn = take_floor(&state.floor).await?;
    let (progress, mut heard) = crate::tts::speech_events();
    // Planning reads the voice's model when it is not loaded: off the
    // runtime.
    let accepted = tokio::task::spawn_blocking(move || {
        tts.speak(&text, None, None, Priority::Normal, Some(progress), None)
    })
    .await
    .map_err(|e| StepError::NotSpoken(e.to_string()))?
    .map_err(|e| StepError::NotSpoken(e.to_string()))?;
    let _stop = SetOnDrop(Arc::clone(&accepted.cancel));
    let finished = tokio::time::timeout(SPEECH_WAIT, async {
        while let Some(event) = heard.recv().await {
            if let SpeechEvent::Finished(finished) = event {
                return Some(finished);
            }
        }
        None
    })
    .await;
    match finished {
        Ok(Some(finished)) => match finished.outcome {
            SpeechOutcome::Spoken => Ok(Spoken {
                engine: finished.engine.to_string(),
                voice: accepted.voice,
                fallback: finished.fallback,
                seconds: (finished.seconds * 100.0).round() / 100.0,
            }),
            SpeechOutcome::Stopped => Err(StepError::NotSpoken(
                "it was stopped before its end (the button, or stop_speaking)".into(),
            )),
            SpeechOutcome::Failed(why) => Err(StepError::NotSpoken(why)),
        },
        Ok(None) => Err(StepError::NotSpoken("the speech thread stopped".into())),
        Err(_) => Err(StepError::NotSpoken(format!(
            "not said within {} s: {}",
            SPEECH_WAIT.as_secs(),
            state.subsystems.get(hark_core::status::Subsystem::Tts)
        ))),
    }
}

async fn record(state: &Arc<ApplianceState>, ms: u32, chime: bool) -> Result<Recorded, StepError> {
    let mic = state.ears.microphone.as_ref().ok_or_else(|| {
        StepError::NoMicrophone(
            state
                .subsystems
                .get(hark_core::status::Subsystem::Audio)
                .to_string(),
        )
    })?;
    if state.bus.snapshot().muted {
        return Err(StepError::Muted);
    }
    if mic.stats.state() != CaptureState::Capturing {
        return Err(StepError::NoMicrophone(mic.stats.describe()));
    }
    let _turn = take_floor(&state.floor).await?;
    if chime {
        crate::audio::play_through(state.voice.player(), Earcon::ListenStart).await;
    }
    // The microphone shows open (the listening light) while it records.
    let mut recording = crate::state::RecordingGuard::open(&state.bus, None);
    let stop = Arc::new(AtomicBool::new(false));
    let _stop = SetOnDrop(Arc::clone(&stop));
    let (ring, bus, stats) = (
        Arc::clone(&mic.ring),
        state.bus.clone(),
        Arc::clone(&mic.stats),
    );
    let wanted = RATE as usize * ms as usize / 1000;
    let samples = tokio::task::spawn_blocking(move || {
        read_ring(&ring, wanted, &bus, &stop).map_err(|got| match got {
            Cut::Muted => StepError::Muted,
            Cut::Stopped => StepError::Cancelled,
            Cut::Stalled(got) => StepError::Stalled {
                got: got as f64 / f64::from(RATE),
                wanted: wanted as f64 / f64::from(RATE),
                state: stats.describe(),
            },
        })
    })
    .await
    .map_err(|_| StepError::Cancelled)??;
    recording.ended(hark_core::room::EndReason::Selftest);
    drop(recording);
    let levels = signal::measure(&samples);
    let clip = state.selftest.keep(Clip {
        samples,
        rate: RATE,
    });
    Ok(Recorded { clip, levels })
}

/// Why a recording ended before it had all its samples.
enum Cut {
    Muted,
    Stopped,
    /// With this many samples.
    Stalled(usize),
}

/// Reads the next `wanted` samples from the ring (on a blocking thread).
fn read_ring(
    ring: &Ring,
    wanted: usize,
    bus: &crate::events::Bus,
    stop: &AtomicBool,
) -> Result<Vec<f32>, Cut> {
    let mut reader = ring.reader(0);
    let mut samples = Vec::with_capacity(wanted);
    let mut chunk = vec![0.0f32; 1600];
    let mut last_audio = Instant::now();
    while samples.len() < wanted {
        if stop.load(Ordering::Acquire) {
            return Err(Cut::Stopped);
        }
        if bus.snapshot().muted {
            return Err(Cut::Muted);
        }
        let room = (wanted - samples.len()).min(chunk.len());
        let n = reader.read(&mut chunk[..room]);
        if n == 0 {
            if last_audio.elapsed() > STALL {
                return Err(Cut::Stalled(samples.len()));
            }
            std::thread::sleep(POLL);
            continue;
        }
        last_audio = Instant::now();
        samples.extend_from_slice(&chunk[..n]);
    }
    Ok(samples)
}

async fn lights(
    bench: &Bench,
    subsystems: &Subsystems,
    each: Duration,
) -> Result<Shown, StepError> {
    let leds = board(bench, subsystems)?.shown().frame.len();
    let tasks = bench.lights().ok_or_else(|| {
        StepError::NoBoard(
            subsystems
                .get(hark_core::status::Subsystem::Board)
                .to_string(),
        )
    })?;
    let (done, result) = tokio::sync::oneshot::channel();
    tasks
        .send(LightsRequest { each, done })
        .await
        .map_err(|_| LightsError::Stopped)?;
    // Dropping `result` (the step cancelled) ends the cycle at its next
    // look.
    let statuses = result.await.map_err(|_| LightsError::Stopped)??;
    Ok(Shown { leds, statuses })
}

async fn link(bench: &Bench, subsystems: &Subsystems) -> Result<LinkState, StepError> {
    let (device, profile, connected) = {
        let board = board(bench, subsystems)?;
        let connected = board.link_connected();
        let Some((link, profile)) = board
            .profile()
            .and_then(|p| p.link.as_ref().map(|l| (l.device.clone(), p.name.clone())))
        else {
            return Ok(LinkState {
                device: None,
                present: false,
                connected: None,
            });
        };
        (link, profile, connected)
    };
    let shown = device.display().to_string();
    let looked = {
        let device = device.clone();
        tokio::task::spawn_blocking(move || std::fs::metadata(device)).await
    };
    match looked {
        Ok(Ok(_)) => Ok(LinkState {
            device: Some(shown),
            present: true,
            connected,
        }),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(StepError::LinkMissing {
            device: shown,
            profile,
        }),
        Ok(Err(source)) => Err(StepError::LinkUnreadable {
            device: shown,
            source,
        }),
        Err(_) => Err(StepError::Cancelled),
    }
}
