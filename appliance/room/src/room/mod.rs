//! The room: the appliance's capabilities ([`hark_core::room`]) on its
//! engines. Each call goes through here: what the MCP side (and the status
//! page, and scripts) may ask of the microphone, the speaker and the
//! person's hand, checked, done, and answered as plain data.
//!
//! - [`dialogue`]: an agent's turn with the person, written once: the
//!   floor, the question, the speech, the button, the listen
//!   (`transcribe_voice`, `converse`, `confirm`, `choose`);
//! - [`speech`]: speaking (`speak_text`, `POST /speak`, the dialogue's
//!   questions);
//! - [`files`]: speech from and to files, and the voices;
//! - [`hands`]: the simulated board, the self-test and pairing by the
//!   button.

pub mod agents;
pub mod dialogue;
pub mod files;
pub mod hands;
pub mod pcm;
pub mod record;
pub mod speech;

use std::sync::{Arc, atomic::Ordering};

use hark_core::{
    room::{
        BoxFuture, CaptureCounters, Failure, Kind, Observe, PlaybackCounters, RoomStatus, Schedule,
        Scheduled, Sensitivity, Volume, VolumeSet, WakeStatus, WakeWord,
    },
    status::Subsystem,
};

use crate::state::ApplianceState;

/// The appliance's room, on its state.
pub struct Room {
    state: Arc<ApplianceState>,
}

impl Room {
    pub fn new(state: Arc<ApplianceState>) -> Arc<Room> {
        Arc::new(Room { state })
    }
}

impl Observe for Room {
    fn status(&self) -> RoomStatus {
        let state = &self.state;
        RoomStatus {
            floor: state.floor.status(),
            volume: state.voice.player().map(|p| p.volume()),
            capture: state.ears.microphone.as_ref().map(|mic| CaptureCounters {
                periods: mic.stats.periods.load(Ordering::Relaxed),
                overruns: mic.stats.overruns.load(Ordering::Relaxed),
            }),
            playback: state.voice.player().map(|p| {
                let stats = p.stats();
                PlaybackCounters {
                    clips: stats.clips_played.load(Ordering::Relaxed),
                    underruns: stats.underruns.load(Ordering::Relaxed),
                }
            }),
            lights: crate::board::lights_name(&state.bus.snapshot()),
            simulated_board: state.simulated_board.is_some(),
            subsystems: Subsystem::ALL
                .into_iter()
                .map(|s| (s, state.subsystems.get(s)))
                .collect(),
            wake: state.ears.wake.as_ref().map(crate::wake::Wake::status),
            scheduled: state
                .keeping
                .schedule
                .as_ref()
                .map(crate::schedule::Scheduler::list)
                .unwrap_or_default(),
        }
    }
}

impl Schedule for Room {
    fn scheduled(&self) -> BoxFuture<'_, Result<Vec<Scheduled>, Failure>> {
        Box::pin(async move { Ok(self.schedule()?.list()) })
    }

    fn cancel(&self, id: i64) -> BoxFuture<'_, Result<Scheduled, Failure>> {
        Box::pin(async move {
            let cancelled = self.schedule()?.cancel(id).await?;
            tracing::info!(id, text = %cancelled.text, "speech kept for later cancelled");
            Ok(cancelled)
        })
    }
}

impl Room {
    fn schedule(&self) -> Result<&crate::schedule::Scheduler, Failure> {
        self.state.keeping.schedule.as_ref().ok_or_else(|| {
            Failure::new(
                Kind::Schedule,
                "nothing can be kept for later: the schedule store could not open (see the log)",
            )
        })
    }
}

impl WakeWord for Room {
    fn set_wake(
        &self,
        on: Option<bool>,
        sensitivity: Option<Sensitivity>,
    ) -> Result<WakeStatus, Failure> {
        let wake = self.state.ears.wake.as_ref().ok_or_else(|| {
            Failure::new(
                Kind::ModelNotLoaded,
                "there is no wake word: the audio engine is off (audio.enabled = false)",
            )
        })?;
        if on == Some(true)
            && let Some(why) = wake.why_unavailable()
        {
            return Err(Failure::new(
                Kind::ModelNotLoaded,
                format!("the wake word cannot run: {why}"),
            ));
        }
        wake.set(on, sensitivity);
        tracing::info!(?on, ?sensitivity, "wake word set from the status page");
        Ok(wake.status())
    }
}

impl Volume for Room {
    fn volume(&self) -> Option<u8> {
        self.state.voice.player().map(|p| p.volume())
    }

    fn set_volume(&self, volume: i64) -> BoxFuture<'_, Result<VolumeSet, Failure>> {
        Box::pin(async move {
            let volume = hark_core::room::check_volume(volume)?;
            let player = self.state.voice.player().ok_or_else(|| {
                Failure::new(
                    Kind::Speech,
                    "there is no speaker: the audio engine is not running (audio.enabled = false)",
                )
            })?;
            // The mixer call is a blocking ALSA control operation.
            let (result, player) =
                tokio::task::spawn_blocking(move || (player.set_volume(volume), player))
                    .await
                    .map_err(|e| {
                        Failure::new(Kind::Speech, format!("setting the volume failed: {e}"))
                    })?;
            let hardware_control = match result {
                Ok(()) => player.mixer_control().map(str::to_owned),
                Err(e) => {
                    tracing::warn!(error = %e, "hardware volume not set; software volume applies");
                    None
                }
            };
            Ok(VolumeSet {
                volume: player.volume(),
                hardware_control,
            })
        })
    }
}

/// The failures of the engines, as the room's.
pub mod failure {
    use hark_audio::{decode::DecodeError, files::PathError};
    use hark_core::room::{Failure, Kind};
    use hark_stt::recognizer::SttError;
    use hark_tts::{synth::TtsError, voices::VoicesError};

    use crate::{listen::ListenError, tts::SpeakError};

    pub fn stt(e: SttError) -> Failure {
        let kind = match &e {
            SttError::ModelMissing { .. } | SttError::ModelLoad { .. } | SttError::Stopped => {
                Kind::ModelNotLoaded
            }
            SttError::Busy { .. } => Kind::Busy,
            SttError::Cancelled => Kind::Cancelled,
            SttError::EnglishOnly { .. } | SttError::UnknownLanguage(_) => Kind::Language,
            SttError::UnknownModel { .. } | SttError::NoModelOfSize { .. } => Kind::ModelNotLoaded,
            SttError::Choice(_) => Kind::InvalidArgument,
            SttError::Whisper(_) | SttError::Live(_) | SttError::Unsupported(_) => {
                Kind::Transcription
            }
        };
        Failure::new(kind, e.to_string())
    }

    pub fn decode(e: DecodeError) -> Failure {
        let kind = match &e {
            DecodeError::TooLarge { .. } | DecodeError::TooLong { .. } => Kind::FileTooLarge,
            DecodeError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Kind::FileNotFound
            }
            _ => Kind::AudioFormat,
        };
        Failure::new(kind, e.to_string())
    }

    pub fn path(e: PathError) -> Failure {
        let kind = match &e {
            PathError::NotFound { .. } => Kind::FileNotFound,
            _ => Kind::PathNotAllowed,
        };
        Failure::new(kind, e.to_string())
    }

    pub fn listen(e: ListenError) -> Failure {
        let kind = match e {
            ListenError::Stt(e) => return stt(e),
            ListenError::NoEngine(_) | ListenError::EngineStopped => Kind::ModelNotLoaded,
            ListenError::NoMicrophone | ListenError::Stalled | ListenError::Recorder(_) => {
                Kind::Microphone
            }
            ListenError::Muted => Kind::MicrophoneMuted,
            ListenError::HeldTooLong(_) => Kind::FloorTimeout,
        };
        Failure::new(kind, e.to_string())
    }

    pub fn speak(e: SpeakError) -> Failure {
        let kind = match &e {
            SpeakError::Busy(_) => Kind::Busy,
            SpeakError::Tts(TtsError::UnknownVoice { .. }) => Kind::VoiceNotFound,
            SpeakError::Tts(TtsError::Rate(_) | TtsError::Unspeakable) => Kind::InvalidArgument,
            SpeakError::Tts(TtsError::Voices(_)) => Kind::Voice,
            _ => Kind::Speech,
        };
        Failure::new(kind, e.to_string())
    }

    pub fn tts(e: TtsError) -> Failure {
        speak(SpeakError::Tts(e))
    }

    pub fn voices(e: VoicesError) -> Failure {
        let kind = match &e {
            VoicesError::NotInstalled { .. } | VoicesError::UnknownVoice { .. } => {
                Kind::VoiceNotFound
            }
            _ => Kind::Voice,
        };
        Failure::new(kind, e.to_string())
    }

    /// A blocking task that did not come back.
    pub fn task(kind: Kind, what: &str, e: tokio::task::JoinError) -> Failure {
        Failure::new(kind, format!("{what} failed: {e}"))
    }
}
