//! The room's state: what its engines share at run time — the event
//! stream, the floor, the microphone and speaker, speech both ways, the
//! board, the person's stores — and where each subsystem reports how it
//! is. The daemon starts the engines and opens the board first
//! ([`Parts`]) and makes the room of them: nothing here is filled in
//! later, so no call ever finds an engine "starting".

use std::sync::{Arc, Weak, atomic::AtomicBool};

pub struct ApplianceState {
    pub bus: crate::events::Bus,
    pub floor: Arc<crate::floor::Floor>,
    pub agents_seen: Arc<hark_core::agents::Seen>,
    /// The voice inbox (none with `inbox.enabled = false`, or when it
    /// could not open: its subsystem says why).
    pub inbox: Option<Arc<crate::inbox::Inbox>>,
    pub yes_no: crate::words::YesNo,
    pub agents: crate::agents::Agents,
    /// Where agents' settings changed at run time are kept (none when its
    /// store could not open: changes then last until a restart).
    pub agent_store: Option<Arc<hark_store::agents::AgentStore>>,
    /// What was heard and spoken (likewise).
    pub history: Option<Arc<crate::history::History>>,
    /// Speech and timers kept for later (none when its store could not
    /// open: the log says why).
    pub schedule: Option<crate::schedule::Scheduler>,
    /// The mute switch for the threads that cannot wait on the event
    /// stream (capture, which records silence while it is on, and the wake
    /// word's): written by the conductor alone. Everyone else reads the
    /// event stream's snapshot (`muted`), which the conductor publishes
    /// right after.
    pub capture_muted: Arc<AtomicBool>,
    pub speaking: Arc<AtomicBool>,
    pub subsystems: hark_core::status::Subsystems,
    /// Weak: the audio engine owns the player and stops it at shutdown.
    player: Weak<hark_audio::playback::Player>,
    /// None with `audio.enabled = false`.
    pub microphone: Option<crate::stt::Microphone>,
    pub stt: Arc<crate::stt::SpeechToText>,
    pub tts: Arc<crate::tts::TextToSpeech>,
    /// The simulated board's controls, when that is the board.
    pub simulated_board: Option<hark_board::sim::SimControl>,
    /// The wake word detector's handle (none without the room's engines:
    /// tests).
    pub wake: Option<crate::wake::Wake>,
    /// Who else takes the person's own starts (Home Assistant's pipeline,
    /// when Hark is its satellite).
    pub starts: Option<Arc<dyn hark_core::room::TakeStarts>>,
    /// Where the button, the switch and the wake word are told; its task
    /// is started with the board ([`crate::start::start_board`]).
    pub conductor: crate::conductor::Conductor,
    pub selftest: crate::selftest::Bench,
    /// What the person went on to say after agents' listens ended their
    /// turns, under way and kept.
    pub continuing: crate::continuing::Continuing,
}

/// What the room is made of, each started before it: the daemon starts
/// the engines in order (each reporting to `bus` and `subsystems`), then
/// makes the room of them, so nothing in the room is ever "starting".
pub struct Parts {
    pub bus: crate::events::Bus,
    pub subsystems: hark_core::status::Subsystems,
    pub muted: Arc<AtomicBool>,
    pub speaking: Arc<AtomicBool>,
    pub player: Option<Arc<hark_audio::playback::Player>>,
    pub microphone: Option<crate::stt::Microphone>,
    pub stt: Arc<crate::stt::SpeechToText>,
    pub tts: Arc<crate::tts::TextToSpeech>,
    pub floor: Arc<crate::floor::Floor>,
    pub inbox: Option<Arc<crate::inbox::Inbox>>,
    pub history: Option<Arc<crate::history::History>>,
    pub schedule: Option<crate::schedule::Scheduler>,
    pub yes_no: crate::words::YesNo,
    pub agents: crate::agents::Agents,
    /// Where agents' settings changed at run time are kept.
    pub agent_store: Option<Arc<hark_store::agents::AgentStore>>,
    pub conductor: crate::conductor::Conductor,
    pub wake: Option<crate::wake::Wake>,
    pub simulated_board: Option<hark_board::sim::SimControl>,
    pub starts: Option<Arc<dyn hark_core::room::TakeStarts>>,
    pub selftest: crate::selftest::Bench,
}

impl Parts {
    /// A room with no engines: no audio, no speech either way, the
    /// default floor, no stores, no board, and a conductor whose task does
    /// not run (tests).
    pub fn quiet() -> Self {
        let bus = crate::events::Bus::default();
        let defaults = crate::config::FloorConfig::default();
        Self {
            floor: Arc::new(crate::floor::Floor::new(
                bus.clone(),
                defaults.max_queue,
                std::time::Duration::from_secs(defaults.max_hold_seconds),
            )),
            tts: Arc::new(crate::tts::TextToSpeech::off(&bus)),
            bus,
            subsystems: Default::default(),
            muted: Default::default(),
            speaking: Default::default(),
            player: None,
            microphone: None,
            stt: Arc::new(crate::stt::SpeechToText::off()),
            inbox: None,
            history: None,
            schedule: None,
            yes_no: Default::default(),
            agents: Default::default(),
            agent_store: None,
            conductor: crate::conductor::Conductor::new().0,
            wake: None,
            simulated_board: None,
            starts: None,
            selftest: Default::default(),
        }
    }
}

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
        Self::new(Parts::quiet())
    }
}

impl ApplianceState {
    pub fn new(parts: Parts) -> Self {
        Self {
            bus: parts.bus,
            floor: parts.floor,
            agents_seen: Default::default(),
            inbox: parts.inbox,
            yes_no: parts.yes_no,
            agents: parts.agents,
            agent_store: parts.agent_store,
            history: parts.history,
            schedule: parts.schedule,
            capture_muted: parts.muted,
            speaking: parts.speaking,
            subsystems: parts.subsystems,
            player: parts
                .player
                .as_ref()
                .map(Arc::downgrade)
                .unwrap_or_default(),
            microphone: parts.microphone,
            stt: parts.stt,
            tts: parts.tts,
            simulated_board: parts.simulated_board,
            wake: parts.wake,
            starts: parts.starts,
            conductor: parts.conductor,
            selftest: parts.selftest,
            continuing: Default::default(),
        }
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

    pub fn player(&self) -> Option<Arc<hark_audio::playback::Player>> {
        self.player.upgrade()
    }

    /// The player, for a task that outlives no audio engine (it plays
    /// while the player is there).
    pub fn weak_player(&self) -> Weak<hark_audio::playback::Player> {
        Weak::clone(&self.player)
    }
}
