//! Start-up: the room's engines in order — the board's profile (it names
//! the sound card), audio, speech to text, text to speech, the floor, the
//! stores — each reporting to the event stream and the subsystems, then
//! the room made of them. Nothing in the room is filled in later: the
//! board is opened and the wake word started before it; only the tasks
//! that act on the room (the board's lights, the conductor, the schedule,
//! the follow-up) start after, in [`start_board`].

use std::{sync::Arc, time::Duration};

use hark_core::status::{Health, Subsystem, SubsystemState, fixed};
use tokio_util::sync::CancellationToken;

use crate::{config::RoomConfig, state::ApplianceState};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Audio(#[from] crate::audio::AudioError),
    /// A start-up task on the blocking pool died (it panicked).
    #[error("{what} start-up failed")]
    Join {
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// The room made, the board it will serve (opened, its lights task not yet
/// started: it reads the room), the conductor's task, and the audio engine,
/// which shutdown stops last.
pub struct Started {
    pub state: ApplianceState,
    pub board: Option<crate::board::Opened>,
    pub conductor: crate::conductor::ConductorTask,
    pub audio: crate::audio::AudioEngine,
    /// The wake word's thread, while it runs: stop it before the audio.
    pub wake: Option<crate::wake::WakeService>,
    /// What writes the history: stopped after the speech and the audio, so
    /// what shutdown cut off is kept.
    pub history: Option<HistoryRecorder>,
}

/// The history's writer task and what stops it.
pub struct HistoryRecorder {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl HistoryRecorder {
    /// Writes what the event stream still holds, then ends (within
    /// `within`: a disk that no longer answers does not hold up the stop).
    pub async fn finish(self, within: std::time::Duration) {
        self.stop.cancel();
        if tokio::time::timeout(within, self.task).await.is_err() {
            tracing::warn!("the history's last writes did not finish in time");
        }
    }
}

/// Starts the room's engines in order, each reporting to the event
/// stream and the subsystems, and makes the room of them. `starts`: who
/// else takes the person's own starts (Home Assistant's pipeline, when Hark
/// is its satellite).
pub async fn start_room(
    config: &mut RoomConfig,
    health: &Health,
    token: &CancellationToken,
    starts: Option<Arc<dyn hark_core::room::TakeStarts>>,
) -> Result<Started, StartError> {
    let bus = crate::events::Bus::default();
    // Built once: speech, the inbox and the room share them.
    let agents = crate::agents::Agents::new(config.agents.clone());
    // Settings changed at run time, in place of `hark.toml`'s, before
    // anyone is served.
    let agent_store = {
        let dir = config.state_dir.clone();
        match tokio::task::spawn_blocking(move || hark_store::agents::AgentStore::open(&dir)).await
        {
            Ok(Ok((store, kept))) => {
                for (name, settings) in kept {
                    agents.set(&name, Some(settings));
                }
                Some(Arc::new(store))
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "agents' settings changed at run time cannot be kept");
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "agents' settings changed at run time cannot be kept");
                None
            }
        }
    };
    let subsystems = hark_core::status::Subsystems::default();
    let (muted, speaking) = (Arc::default(), Arc::default());
    // Which board this is, first: its profile names the sound card the
    // audio engine opens (unless the config names one).
    let board = crate::board::resolve(config, &subsystems)
        .and_then(|resolved| crate::board::Opened::open(config, resolved, &subsystems));
    // Capture starts before READY=1; a missing device is a state it reports
    // and retries, not a reason to fail.
    let mut audio = crate::audio::AudioEngine::start(
        &config.audio,
        &bus,
        &subsystems,
        &muted,
        &speaking,
        health,
    )?;
    let player = audio.player().cloned();
    let microphone = audio.microphone.take();
    // Loading the speech models, ONNX Runtime and the voice reads their
    // files: off the runtime's threads, one after the other.
    let (stt, tts, subsystems) = {
        let (config, bus, player, agents) =
            (config.clone(), bus.clone(), player.clone(), agents.clone());
        tokio::task::spawn_blocking(move || {
            let stt = crate::stt::SpeechToText::start(&config, &bus, &subsystems);
            let tts = crate::tts::TextToSpeech::start(&config, &bus, &subsystems, player, agents);
            // Loading read the model and voice files through buffers that
            // are free now.
            crate::memory::release_freed();
            (stt, tts, subsystems)
        })
        .await
        .map_err(|source| StartError::Join {
            what: "speech",
            source,
        })?
    };
    let tts = Arc::new(tts);
    let floor = Arc::new(crate::floor::Floor::new(
        bus.clone(),
        config.floor.max_queue,
        Duration::from_secs(config.floor.max_hold_seconds),
    ));
    // Whose speech may play follows the floor.
    {
        let (mut holder, tts, token) = (floor.speaker(), Arc::clone(&tts), token.clone());
        tokio::spawn(async move {
            loop {
                tts.floor_changed(holder.borrow_and_update().clone());
                tokio::select! {
                    () = token.cancelled() => return,
                    changed = holder.changed() => if changed.is_err() { return },
                }
            }
        });
    }
    let inbox = open_inbox(config, agents.clone(), &bus, &subsystems, token).await;
    let (history, recorder) = match open_history(config, &bus, &subsystems).await {
        Some((history, recorder)) => (Some(history), Some(recorder)),
        None => (None, None),
    };
    let schedule = {
        let (dir, bus) = (config.state_dir.clone(), bus.clone());
        match tokio::task::spawn_blocking(move || crate::schedule::Scheduler::open(&dir, bus)).await
        {
            Ok(Ok(schedule)) => {
                let status = schedule.clone();
                subsystems.set(
                    Subsystem::Schedule,
                    Arc::new(move || SubsystemState::Running(status.status())),
                );
                Some(schedule)
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "speech cannot be kept for later");
                subsystems.set(Subsystem::Schedule, fixed(SubsystemState::unavailable(&e)));
                None
            }
            Err(e) => {
                tracing::error!(error = %e, "speech cannot be kept for later");
                subsystems.set(Subsystem::Schedule, fixed(SubsystemState::unavailable(&e)));
                None
            }
        }
    };
    // The wake word hands what it hears to the conductor.
    let (conductor, conductor_task) = crate::conductor::Conductor::new();
    let ears = microphone.as_ref().map(|mic| crate::wake::Ears {
        ring: Arc::clone(&mic.ring),
        muted: Arc::clone(&muted),
        closed_while_speaking: config
            .audio
            .closes_while_speaking()
            .then(|| Arc::clone(&speaking)),
    });
    let (wake, wake_service) = start_wake(config, ears, conductor.clone(), &subsystems).await?;
    let state = ApplianceState {
        bus,
        floor,
        subsystems,
        ears: Arc::new(crate::state::Ears {
            microphone,
            stt: Arc::new(stt),
            capture_muted: muted,
            wake: Some(wake),
            yes_no: config.yes_no(),
            continuing: Default::default(),
        }),
        voice: Arc::new(crate::state::Voice::new(tts, player.as_ref())),
        keeping: Arc::new(crate::state::Keeping {
            inbox,
            history,
            schedule,
            agents,
            agent_store,
            agents_seen: Default::default(),
        }),
        conductor,
        selftest: board
            .as_ref()
            .map(crate::board::Opened::bench)
            .unwrap_or_default(),
        simulated_board: board.as_ref().and_then(crate::board::Opened::simulated),
        starts,
    };
    Ok(Started {
        state,
        board,
        conductor: conductor_task,
        audio,
        wake: wake_service,
        history: recorder,
    })
}

/// The wake word detector on `ears` (none without a microphone), handing
/// detections to `conductor`; its subsystem says how it is.
async fn start_wake(
    config: &RoomConfig,
    ears: Option<crate::wake::Ears>,
    conductor: crate::conductor::Conductor,
    subsystems: &hark_core::status::Subsystems,
) -> Result<(crate::wake::Wake, Option<crate::wake::WakeService>), StartError> {
    let wake_config = config.wake.clone();
    // Loading reads the models and the runtime: off the runtime's threads.
    let (wake, service) =
        tokio::task::spawn_blocking(move || crate::wake::start(&wake_config, ears, conductor))
            .await
            .map_err(|source| StartError::Join {
                what: "wake word",
                source,
            })?;
    let status = wake.clone();
    let enabled = config.wake.enabled;
    subsystems.set(
        Subsystem::Wake,
        Arc::new(move || match status.why_unavailable() {
            Some(_) if !enabled => SubsystemState::Disabled,
            Some(why) => SubsystemState::unavailable(why),
            None => {
                let s = status.status();
                SubsystemState::Running(format!(
                    "{} for {} at {} sensitivity{}",
                    match s.state {
                        hark_core::room::WakeState::Listening => "listening",
                        hark_core::room::WakeState::Off => "off",
                        hark_core::room::WakeState::Muted => "muted, not listening",
                        hark_core::room::WakeState::Speaking => "not listening while Hark speaks",
                        hark_core::room::WakeState::Unavailable => "failed",
                    },
                    s.words.join(", "),
                    s.sensitivity.as_str(),
                    s.detections.last().map_or_else(String::new, |d| format!(
                        "; last heard {} ({:.2}) at {}",
                        d.word, d.score, d.at
                    )),
                ))
            }
        }),
    );
    Ok((wake, service))
}

/// The voice inbox, when it is on and opens; its subsystem says which.
async fn open_inbox(
    config: &RoomConfig,
    agents: crate::agents::Agents,
    bus: &crate::events::Bus,
    subsystems: &hark_core::status::Subsystems,
    token: &CancellationToken,
) -> Option<Arc<crate::inbox::Inbox>> {
    if !config.inbox.enabled {
        subsystems.set(Subsystem::Inbox, fixed(SubsystemState::Disabled));
        return None;
    }
    let (dir, settings, bus) = (
        config.state_dir.clone(),
        config.inbox_settings(agents),
        bus.clone(),
    );
    let inbox = open_store(subsystems, Subsystem::Inbox, "the voice inbox", move || {
        crate::inbox::Inbox::open(&dir, settings, bus)
    })
    .await?;
    let status = Arc::clone(&inbox);
    subsystems.set(
        Subsystem::Inbox,
        Arc::new(move || SubsystemState::Running(status.status())),
    );
    tokio::spawn(Arc::clone(&inbox).expire(token.clone()));
    Some(inbox)
}

/// The history, likewise; it records what the event stream says.
async fn open_history(
    config: &RoomConfig,
    bus: &crate::events::Bus,
    subsystems: &hark_core::status::Subsystems,
) -> Option<(Arc<crate::history::History>, HistoryRecorder)> {
    if !config.history.enabled {
        subsystems.set(Subsystem::History, fixed(SubsystemState::Disabled));
        return None;
    }
    let (dir, settings) = (config.state_dir.clone(), config.history.settings());
    let history = open_store(subsystems, Subsystem::History, "the history", move || {
        crate::history::History::open(&dir, settings)
    })
    .await?;
    let status = Arc::clone(&history);
    subsystems.set(
        Subsystem::History,
        Arc::new(move || SubsystemState::Running(status.status())),
    );
    let stop = CancellationToken::new();
    let task = tokio::spawn(crate::history::record(
        Arc::clone(&history),
        bus.clone(),
        stop.clone(),
    ));
    Some((history, HistoryRecorder { stop, task }))
}

/// Opens a store with `open` (it reads its database: off the runtime); one
/// that cannot open is reported as `which`'s state and left out.
async fn open_store<T: Send + 'static, E: std::fmt::Display + Send + 'static>(
    subsystems: &hark_core::status::Subsystems,
    which: Subsystem,
    what: &'static str,
    open: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Option<Arc<T>> {
    let failed = |e: &dyn std::fmt::Display| {
        tracing::error!(error = %e, "{what} is unavailable");
        subsystems.set(which, fixed(SubsystemState::unavailable(e)));
        None
    };
    match tokio::task::spawn_blocking(open).await {
        Ok(Ok(store)) => Some(Arc::new(store)),
        Ok(Err(e)) => failed(&e),
        Err(e) => failed(&e),
    }
}

/// Starts the tasks that act on the room: the opened board's lights (they
/// read the room), the conductor that decides what its button and switch
/// mean, the schedule and the follow-up.
pub fn start_board(
    state: &Arc<ApplianceState>,
    config: &RoomConfig,
    opened: Option<crate::board::Opened>,
    conductor: crate::conductor::ConductorTask,
    token: &CancellationToken,
) -> Option<crate::board::BoardService> {
    // The lights show from here on (listening, muted …), before READY.
    let (board, contacts) = match opened.map(|opened| opened.serve(state, token)) {
        Some((board, contacts)) => (Some(board), contacts),
        None => (None, None),
    };
    // What the button and the mute switch mean, from here on.
    tokio::spawn(conductor.run(Arc::clone(state), contacts, token.clone()));
    // Speech and timers kept for later, at their times.
    if let Some(schedule) = state.keeping.schedule.clone() {
        tokio::spawn(schedule.serve(
            Arc::clone(&state.voice.tts),
            state.voice.weak_player(),
            token.clone(),
        ));
    }
    // The follow-up after an agent's answer (hands-free).
    if config.wake.follow_up_seconds > 0.0 {
        let window = Duration::from_secs_f64(config.wake.follow_up_seconds);
        tokio::spawn(crate::follow::serve(
            Arc::clone(state),
            window,
            token.clone(),
        ));
    }
    board
}
