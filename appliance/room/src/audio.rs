//! The audio engine inside the daemon: starts capture (and, on machines
//! without a sound card, the virtual card's microphone), reports its state
//! in `get_status`, registers its health check, and stops it at shutdown.
//! The engine itself is the `hark-audio` crate.

use std::{path::Path, sync::Arc};

use hark_audio::{
    AudioConfig, Capture, CaptureError,
    config::VIRTUAL_CARD_ALSA_CONF,
    earcon::Earcon,
    echo::{EchoStage, Reference, Stages},
    playback::{PlaybackError, Player},
    virtual_mic::{MicFormat, VirtualMic, VirtualMicError},
    virtual_room::RoomSpec,
};

use hark_core::status::{Subsystem, SubsystemState, fixed};

use std::sync::atomic::AtomicBool;

use hark_core::{
    events::Bus,
    status::{Health, Subsystems},
};

#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    #[error("cannot prepare the virtual sound card in {dir}: {source}")]
    VirtualCardSetup {
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    VirtualMic(#[from] VirtualMicError),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error(transparent)]
    Echo(#[from] hark_audio::echo::EchoError),
    #[error(transparent)]
    Playback(#[from] PlaybackError),
}

/// Points ALSA at the virtual card's configuration. ALSA reads these
/// variables when a device is opened, so this must run in `main` before any
/// thread exists (setting the environment is only sound then).
pub fn prepare_virtual_card(config: &AudioConfig) -> Result<(), AudioError> {
    let card = &config.virtual_card;
    let dir = card
        .mic_fifo
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let err = |source| AudioError::VirtualCardSetup {
        dir: dir.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let conf = dir.join("virtual-card.conf");
    std::fs::write(&conf, VIRTUAL_CARD_ALSA_CONF).map_err(err)?;
    let base = std::env::var("ALSA_CONFIG_PATH")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/usr/share/alsa/alsa.conf".into());
    // SAFETY: called from `main` before the runtime or any other thread
    // starts, so nothing can read the environment concurrently.
    unsafe {
        std::env::set_var("ALSA_CONFIG_PATH", format!("{base}:{}", conf.display()));
        std::env::set_var("HARK_VIRTUAL_MIC", &card.mic_fifo);
        std::env::set_var("HARK_VIRTUAL_SPEAKER", &card.speaker_wav);
    }
    Ok(())
}

/// The running engine. Dropping it stops capture, then the virtual
/// microphone, and joins their threads.
pub struct AudioEngine {
    /// What the listens read: the capture ring and its settings (none with
    /// `audio.enabled = false`).
    pub microphone: Option<crate::stt::Microphone>,
    capture: Option<Capture>,
    /// Takes Hark's own speech out of the microphone (`[audio.echo]`).
    _echo: Option<EchoStage>,
    player: Option<Arc<Player>>,
    virtual_mic: Option<VirtualMic>,
    bridge: Option<Bridge>,
}

/// The thread that turns the audio threads' wake-ups into events: the
/// capture and playback threads only raise atomics and poke a bounded
/// channel ([`hark_audio::changed`]); this thread reads the atomics and
/// publishes what changed, so the audio path never touches the event
/// stream's locks.
struct Bridge {
    wake: std::sync::mpsc::SyncSender<()>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bridge {
    fn start(
        bus: crate::events::Bus,
        capture: Arc<hark_audio::CaptureStats>,
        player: Arc<hark_audio::playback::PlayerStats>,
    ) -> std::io::Result<Self> {
        use std::sync::atomic::{AtomicBool, Ordering};

        use hark_audio::{CaptureState, playback::PlaybackState};

        use crate::events::{Event, Part};
        let (wake, woken) = hark_audio::changed::channel();
        capture.changed.connect(wake.clone());
        player.changed.connect(wake.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("hark-audio-events".into())
            .spawn(move || {
                let (mut speaker, mut mic_ok, mut speaker_ok) = (false, None, None);
                // Publishes a part's health when it changes; `None`: still
                // starting, nothing to say yet.
                let health = |part, now: Option<bool>, last: &mut Option<bool>, state: String| {
                    if now != *last
                        && let Some(ok) = now
                    {
                        bus.publish(Event::Health { part, ok, state });
                    }
                    *last = now.or(*last);
                };
                loop {
                    let playing = player.speaking.load(Ordering::Acquire);
                    if playing != speaker {
                        speaker = playing;
                        bus.publish(Event::Speaker { playing });
                    }
                    let mic = match capture.state() {
                        CaptureState::Starting => None,
                        CaptureState::Capturing => Some(true),
                        _ => Some(false),
                    };
                    health(Part::Microphone, mic, &mut mic_ok, capture.describe());
                    let out = match player.state() {
                        PlaybackState::Starting => None,
                        PlaybackState::Ready => Some(true),
                        _ => Some(false),
                    };
                    health(Part::Speaker, out, &mut speaker_ok, player.describe());
                    if woken.recv().is_err() || stopping.load(Ordering::Acquire) {
                        break;
                    }
                }
            })?;
        Ok(Self {
            wake,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        // A full channel already holds a wake-up: either way it wakes.
        let _ = self.wake.try_send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl AudioEngine {
    /// Starts capture and playback, reporting to `bus` and `subsystems`;
    /// `muted` silences the microphone, and the player sets `speaking`
    /// while it plays.
    pub fn start(
        config: &AudioConfig,
        bus: &Bus,
        subsystems: &Subsystems,
        muted: &Arc<AtomicBool>,
        speaking: &Arc<AtomicBool>,
        health: &Health,
    ) -> Result<Self, AudioError> {
        if !config.enabled {
            subsystems.set(Subsystem::Audio, fixed(SubsystemState::Disabled));
            return Ok(Self {
                microphone: None,
                capture: None,
                _echo: None,
                player: None,
                virtual_mic: None,
                bridge: None,
            });
        }
        let virtual_mic = if config.virtual_card.enabled {
            let (c, card) = (&config.capture, &config.virtual_card);
            let room = card.room.then(|| RoomSpec {
                speaker: card.speaker_wav.clone(),
                speaker_rate: config.playback.rate,
                speaker_channels: config.playback.channels,
                mic_rate: c.rate,
                gain_db: card.room_gain_db,
                rt60: card.room_rt60,
            });
            Some(VirtualMic::start_in_room(
                &card.mic_fifo,
                Some(&card.inject_fifo),
                MicFormat {
                    rate: c.rate,
                    channels: c.channels,
                    period: std::time::Duration::from_millis(u64::from(c.period_ms)),
                },
                room,
            )?)
        } else {
            None
        };
        // With echo cancellation, what the speaker plays is the reference,
        // placed by the capture clock.
        let reference = config.echo.cancel.then(|| Arc::new(Reference::new()));
        let player = Arc::new(Player::start_with_reference(
            config.playback_config(),
            Arc::clone(speaking),
            reference.clone(),
        )?);
        // Silence while muted, and (half duplex, without echo cancellation)
        // while the speaker plays.
        let mut mute = vec![Arc::clone(muted)];
        if config.closes_while_speaking() {
            mute.push(Arc::clone(speaking));
        }
        let capture = Capture::start_clocked(
            config.capture_config(),
            mute,
            Box::new(hark_audio::capture::open_alsa),
            reference.clone(),
        )?;
        let echo = match reference {
            Some(reference) => Some(EchoStage::start(
                Arc::clone(capture.ring()),
                reference,
                Stages::hark(),
            )?),
            None => None,
        };
        let heard = echo.as_ref().map_or(capture.ring(), EchoStage::ring);
        let microphone = Some(crate::stt::Microphone {
            ring: Arc::clone(heard),
            vad: config.vad.clone(),
            preroll: std::time::Duration::from_millis(u64::from(config.capture.preroll_ms)),
            barge_in: echo.as_ref().map(|echo| crate::stt::BargeIn {
                ring: Arc::clone(echo.suppressed()),
                ms: config.echo.barge_in_ms,
            }),
            stats: Arc::clone(capture.stats()),
        });
        let (capture_stats, player_stats) =
            (Arc::clone(capture.stats()), Arc::clone(player.stats()));
        subsystems.set(
            Subsystem::Audio,
            Arc::new(move || {
                SubsystemState::Running(format!(
                    "{}; speaker {}",
                    capture_stats.describe(),
                    player_stats.describe()
                ))
            }),
        );
        let (capture_stats, player_stats) =
            (Arc::clone(capture.stats()), Arc::clone(player.stats()));
        health.add(
            "audio threads",
            Box::new(move || {
                use hark_audio::{CaptureState, playback::PlaybackState};
                if capture_stats.state() == CaptureState::Stopped {
                    return Err("the capture thread stopped".into());
                }
                if player_stats.state() == PlaybackState::Stopped {
                    return Err("the playback thread stopped".into());
                }
                capture_stats.heartbeat.check("capture")?;
                player_stats.heartbeat.check("playback")
            }),
        );
        let bridge = match Bridge::start(
            bus.clone(),
            Arc::clone(capture.stats()),
            Arc::clone(player.stats()),
        ) {
            Ok(bridge) => Some(bridge),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the audio events thread; the lights will not show the speaker or audio faults");
                None
            }
        };
        Ok(Self {
            microphone,
            capture: Some(capture),
            _echo: echo,
            player: Some(player),
            virtual_mic,
            bridge,
        })
    }
}

impl AudioEngine {
    /// The speaker, when audio runs.
    pub fn player(&self) -> Option<&Arc<Player>> {
        self.player.as_ref()
    }
}

impl Drop for AudioEngine {
    fn drop(&mut self) {
        drop(self.bridge.take());
        // Capture first: it may be reading the virtual microphone's FIFO.
        drop(self.capture.take());
        drop(self.player.take());
        drop(self.virtual_mic.take());
    }
}

/// Plays `earcon` on `player` and waits until it has been heard (at most
/// 2 s): before a recording opens, since with half duplex the speaker
/// mutes capture; and between a timer's rings.
pub async fn play_through(player: Option<Arc<Player>>, earcon: Earcon) {
    let Some(player) = player else { return };
    match player.play(&earcon.clip()) {
        Ok(done) => {
            let _ = tokio::task::spawn_blocking(move || {
                done.recv_timeout(std::time::Duration::from_secs(2))
            })
            .await;
        }
        Err(e) => tracing::debug!(error = %e, "earcon not played"),
    }
}
