//! The room's state: what its engines share at run time, as a few handles
//! that each own one concern — the ears ([`Ears`]: microphone, speech to
//! text, wake word), the voice ([`Voice`]: speech engine, player), the
//! keeping ([`Keeping`]: inbox, history, schedule, agents) — beside the
//! event stream, the floor, the subsystems' reports and the board's side
//! (conductor, self-test, simulated controls). A function takes the
//! handles it uses, not the room.
//!
//! The daemon starts the engines and opens the board first
//! ([`crate::start::start_room`]) and makes the room of them: nothing here
//! is filled in later, so no call ever finds an engine "starting".
//!
//! Where live state lives (docs/architecture.md): the mute and who holds
//! the button are the conductor's, published on the event stream's
//! snapshot; who speaks is the floor's; whether the speaker plays is the
//! player's, published on the snapshot (`speaker`): only the wake word's
//! thread, which cannot wait, reads the player's flag itself.

use std::sync::{Arc, Weak, atomic::AtomicBool};

pub struct ApplianceState {
    pub bus: crate::events::Bus,
    pub floor: Arc<crate::floor::Floor>,
    pub subsystems: hark_core::status::Subsystems,
    pub ears: Arc<Ears>,
    pub voice: Arc<Voice>,
    pub keeping: Arc<Keeping>,
    /// Where the button, the switch and the wake word are told; its task
    /// is started with the board ([`crate::start::start_board`]).
    pub conductor: crate::conductor::Conductor,
    pub selftest: crate::selftest::Bench,
    /// The simulated board's controls, when that is the board.
    pub simulated_board: Option<hark_board::sim::SimControl>,
    /// Who else takes the person's own starts (Home Assistant's pipeline,
    /// when Hark is its satellite).
    pub starts: Option<Arc<dyn hark_core::room::TakeStarts>>,
}

/// How the room hears: its microphone, speech to text, the wake word, the
/// words that answer yes or no, and what the person went on to say after
/// an agent's listen ended their turn.
pub struct Ears {
    /// None with `audio.enabled = false`.
    pub microphone: Option<crate::stt::Microphone>,
    pub stt: Arc<crate::stt::SpeechToText>,
    /// The mute switch for the threads that cannot wait on the event
    /// stream (capture, which records silence while it is on, and the wake
    /// word's): written by the conductor alone. Everyone else reads the
    /// event stream's snapshot (`muted`), which the conductor publishes
    /// right after.
    pub capture_muted: Arc<AtomicBool>,
    /// The wake word detector's handle (none without the room's engines:
    /// tests).
    pub wake: Option<crate::wake::Wake>,
    pub yes_no: crate::words::YesNo,
    /// What the person went on to say after agents' listens ended their
    /// turns, under way and kept.
    pub continuing: crate::continuing::Continuing,
}

impl Default for Ears {
    /// No microphone and nothing to hear with (tests).
    fn default() -> Self {
        Self {
            microphone: None,
            stt: Arc::new(crate::stt::SpeechToText::off()),
            capture_muted: Arc::default(),
            wake: None,
            yes_no: Default::default(),
            continuing: Default::default(),
        }
    }
}

/// How the room speaks: the speech engine and its queue, and the player.
pub struct Voice {
    pub tts: Arc<crate::tts::TextToSpeech>,
    /// Weak: the audio engine owns the player and stops it at shutdown.
    /// Whether it plays is on the event stream's snapshot (`speaker`).
    player: Weak<hark_audio::playback::Player>,
}

impl Voice {
    pub fn new(
        tts: Arc<crate::tts::TextToSpeech>,
        player: Option<&Arc<hark_audio::playback::Player>>,
    ) -> Self {
        Self {
            tts,
            player: player.map(Arc::downgrade).unwrap_or_default(),
        }
    }

    /// No speech engine and no speaker (tests).
    pub fn quiet(bus: &crate::events::Bus) -> Self {
        Self::new(Arc::new(crate::tts::TextToSpeech::off(bus)), None)
    }

    pub fn player(&self) -> Option<Arc<hark_audio::playback::Player>> {
        self.player.upgrade()
    }

    /// Plays `earcon` now, beside any speech (not at all without a
    /// speaker).
    pub fn play(&self, earcon: hark_audio::earcon::Earcon) {
        if let Some(player) = self.player()
            && let Err(e) = player.play(&earcon.clip())
        {
            tracing::debug!(error = %e, "earcon not played");
        }
    }

    /// The player, for a task that outlives no audio engine (it plays
    /// while the player is there).
    pub fn weak_player(&self) -> Weak<hark_audio::playback::Player> {
        Weak::clone(&self.player)
    }
}

/// What the room keeps: the person's messages, what was said, speech and
/// timers for later, and the agents (configured, changed at run time,
/// seen).
#[derive(Default)]
pub struct Keeping {
    /// The voice inbox (none with `inbox.enabled = false`, or when it
    /// could not open: its subsystem says why).
    pub inbox: Option<Arc<crate::inbox::Inbox>>,
    /// What was heard and spoken (likewise).
    pub history: Option<Arc<crate::history::History>>,
    /// Speech and timers kept for later (none when its store could not
    /// open: the log says why).
    pub schedule: Option<crate::schedule::Scheduler>,
    pub agents: crate::agents::Agents,
    /// Where agents' settings changed at run time are kept (none when its
    /// store could not open: changes then last until a restart).
    pub agent_store: Option<Arc<hark_store::agents::AgentStore>>,
    pub agents_seen: Arc<hark_core::agents::Seen>,
}

impl Default for ApplianceState {
    /// A room with no engines: no audio, no speech either way, the
    /// default floor, no stores, no board, and a conductor whose task does
    /// not run (tests).
    fn default() -> Self {
        let bus = crate::events::Bus::default();
        let defaults = crate::config::FloorConfig::default();
        Self {
            floor: Arc::new(crate::floor::Floor::new(
                bus.clone(),
                defaults.max_queue,
                std::time::Duration::from_secs(defaults.max_hold_seconds),
            )),
            voice: Arc::new(Voice::quiet(&bus)),
            bus,
            subsystems: Default::default(),
            ears: Default::default(),
            keeping: Default::default(),
            conductor: crate::conductor::Conductor::new().0,
            selftest: Default::default(),
            simulated_board: None,
            starts: None,
        }
    }
}

/// The microphone open for a recording, on the event stream: opened with
/// [`RecordingGuard::open`], closed when dropped.
pub struct RecordingGuard {
    bus: crate::events::Bus,
    pub id: u64,
    speech: bool,
    reason: hark_core::room::EndReason,
}

impl RecordingGuard {
    /// Marks the microphone open until the guard is dropped. `agent`: who
    /// listens (`None`: the person started it with the button).
    pub fn open(bus: &crate::events::Bus, agent: Option<String>) -> Self {
        let id = bus.next_id();
        bus.publish(crate::events::Event::ListeningStarted { listen: id, agent });
        Self {
            bus: bus.clone(),
            id,
            speech: false,
            reason: hark_core::room::EndReason::Cancelled,
        }
    }

    /// The detector heard speech begin (once per recording).
    pub fn speech_detected(&mut self) {
        if !std::mem::replace(&mut self.speech, true) {
            self.bus
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
        self.bus.publish(crate::events::Event::ListeningEnded {
            listen: self.id,
            reason: self.reason,
        });
    }
}
