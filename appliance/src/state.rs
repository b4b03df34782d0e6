//! The room's state: what its engines share at run time — the event
//! stream, the floor, the microphone and speaker, speech both ways, the
//! board, the person's stores — and where each subsystem reports how it
//! is. The engines plug in here as they start: the audio engine sets the
//! microphone and the speaker, speech-to-text and text-to-speech their
//! services, the board its simulated controls. Until an engine has started
//! its subsystem reads "not configured".

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak, atomic::AtomicBool};

pub struct ApplianceState {
    /// The event stream. Recordings, speech, the button, the mute switch,
    /// the inbox and the parts' health are published here; the lights and
    /// `get_status` read its snapshot (docs/architecture.md).
    pub bus: crate::events::Bus,
    /// Whose turn it is with the person (the microphone and the speaker);
    /// while an agent has it, a press of the button belongs to its call,
    /// not to the voice inbox.
    pub floor: OnceLock<Arc<crate::floor::Floor>>,
    /// Names of the agents that have connected since the start, for
    /// addressing messages ("Claude, …"); the MCP side notes them.
    pub agents_seen: Arc<hark_core::agents::Seen>,
    /// The voice inbox, once started (not with `inbox.enabled = false`).
    pub inbox: OnceLock<Arc<crate::inbox::Inbox>>,
    /// How `confirm` hears yes and no (`[confirm]`).
    pub yes_no: OnceLock<crate::words::YesNo>,
    /// `[agents.NAME]`: names, voices, chimes.
    pub agents: OnceLock<crate::agents::Agents>,
    /// What was heard and spoken (not with `history.enabled = false`).
    pub history: OnceLock<Arc<crate::history::History>>,
    /// True while the mute switch (or `hark mute on`) has the microphone
    /// closed; shared with capture, which then stores silence.
    pub muted: Arc<AtomicBool>,
    /// True while the speaker plays (VoxCtrl's `speaking`); shared with the
    /// playback thread, which raises it, and capture (half duplex).
    pub speaking: Arc<AtomicBool>,
    /// Each subsystem's state, read live from its engine.
    pub subsystems: hark_core::status::Subsystems,
    /// The speaker, once the audio engine runs. Weak: the engine owns it and
    /// stops it at shutdown.
    player: Mutex<Weak<hark_audio::playback::Player>>,
    /// The capture ring and detector settings, once the audio engine runs.
    pub microphone: OnceLock<crate::stt::Microphone>,
    /// Speech to text, once started.
    pub stt: OnceLock<Arc<crate::stt::SpeechToText>>,
    /// Text to speech, once started.
    pub tts: OnceLock<Arc<crate::tts::TextToSpeech>>,
    /// The simulated board's button and mute switch, when that is the
    /// board (`hark button`, `hark mute`).
    pub simulated_board: OnceLock<hark_board::sim::SimControl>,
    /// What a press, a hold and the mute switch mean (`crate::conductor`):
    /// recordings register here for push-to-talk.
    pub conductor: crate::conductor::Conductor,
    /// The conductor's task, until the daemon starts it.
    pub conductor_task: Mutex<Option<crate::conductor::ConductorTask>>,
    /// The end-of-turn model, when `audio.vad.end_of_turn = "smart-turn"`
    /// and it loaded.
    pub turn: OnceLock<Arc<Mutex<hark_stt::turn::SmartTurn>>>,
    /// `hark selftest`'s side in the daemon: the board's lights task, the
    /// button while a step waits for it, the last recording.
    pub selftest: crate::selftest::Bench,
}

/// Keeps the microphone shown as open while a recording runs, and tells
/// the event stream when it opens, hears speech and closes.
pub struct RecordingGuard {
    state: Arc<ApplianceState>,
    pub id: u64,
    speech: bool,
    reason: hark_core::room::EndReason,
}

impl RecordingGuard {
    /// The detector heard speech begin (once per recording).
    pub fn speech_detected(&mut self) {
        if !std::mem::replace(&mut self.speech, true) {
            self.state
                .bus
                .publish(crate::events::Event::SpeechDetected { listen: self.id });
        }
    }

    /// Why the recording ended, reported when the guard drops (default
    /// `cancelled`).
    pub fn ended(&mut self, reason: hark_core::room::EndReason) {
        self.reason = reason;
    }
}

impl Drop for RecordingGuard {
    fn drop(&mut self) {
        self.state
            .bus
            .publish(crate::events::Event::ListeningEnded {
                listen: self.id,
                reason: self.reason,
            });
    }
}

impl Default for ApplianceState {
    fn default() -> Self {
        let (conductor, conductor_task) = crate::conductor::Conductor::new();
        Self {
            bus: crate::events::Bus::default(),
            floor: OnceLock::new(),
            agents_seen: Default::default(),
            inbox: OnceLock::new(),
            yes_no: OnceLock::new(),
            agents: OnceLock::new(),
            history: OnceLock::new(),
            muted: Arc::new(AtomicBool::new(false)),
            speaking: Arc::new(AtomicBool::new(false)),
            subsystems: Default::default(),
            player: Mutex::new(Weak::new()),
            microphone: OnceLock::new(),
            stt: OnceLock::new(),
            tts: OnceLock::new(),
            simulated_board: OnceLock::new(),
            conductor,
            conductor_task: Mutex::new(Some(conductor_task)),
            turn: OnceLock::new(),
            selftest: Default::default(),
        }
    }
}

impl ApplianceState {
    /// True while any recording has the microphone open.
    pub fn recording(&self) -> bool {
        self.bus.snapshot().recording()
    }

    /// Marks the microphone open until the guard is dropped. `agent`: who
    /// listens (`None`: the person started it with the button).
    pub fn start_recording(self: &Arc<Self>, agent: Option<String>) -> RecordingGuard {
        let id = self.bus.next_id();
        self.bus
            .publish(crate::events::Event::ListeningStarted { listen: id, agent });
        RecordingGuard {
            state: Arc::clone(self),
            id,
            speech: false,
            reason: hark_core::room::EndReason::Cancelled,
        }
    }

    /// The floor (made with the default limits if the daemon has not set
    /// it up from the config: unit tests).
    pub fn floor(&self) -> Arc<crate::floor::Floor> {
        Arc::clone(self.floor.get_or_init(|| {
            let defaults = crate::config::FloorConfig::default();
            Arc::new(crate::floor::Floor::new(
                self.bus.clone(),
                defaults.max_queue,
                std::time::Duration::from_secs(defaults.max_hold_seconds),
            ))
        }))
    }

    /// The configured agents (none before the daemon set them up).
    pub fn agents(&self) -> crate::agents::Agents {
        self.agents.get().cloned().unwrap_or_default()
    }

    /// `confirm`'s yes and no words.
    pub fn yes_no(&self) -> crate::words::YesNo {
        self.yes_no.get().cloned().unwrap_or_default()
    }

    pub fn set_player(&self, player: &Arc<hark_audio::playback::Player>) {
        *self.player.lock().unwrap_or_else(PoisonError::into_inner) = Arc::downgrade(player);
    }

    /// The speaker, if the audio engine is running.
    pub fn player(&self) -> Option<Arc<hark_audio::playback::Player>> {
        self.player
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade()
    }
}
