//! `transcribe_voice` — seed 000's tool: opens the microphone, waits for the
//! person in the room to speak, ends on end of speech (or the timeout), and
//! returns what they said, or exactly `(no speech detected)`.
//!
//! The recording runs on a blocking thread reading the capture ring; this
//! task only waits for it, so a cancelled call (`notifications/cancelled`)
//! or a client that goes away stops the recording within one poll (10 ms)
//! and the microphone shows closed again. Only the detector's speech span
//! (with a little audio around it) goes to whisper: silence before and after
//! is where whisper invents text.

use std::{sync::Arc, time::Duration};

use hark_audio::{
    earcon::Earcon,
    utterance::{self, Control, EndReason, Options},
};
use hark_stt::engine::Request;
use rmcp::{
    ErrorData, RoleServer, handler::server::wrapper::Parameters, model::CallToolResult,
    service::RequestContext, tool, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{ToolError, success};
use crate::{config::RECORD_TIMEOUT_RANGE, mcp::HarkServer};

/// seed 000's answer when nothing was said.
pub const NO_SPEECH: &str = "(no speech detected)";
/// Audio kept before the detected start of speech: the detector decides a
/// little after the first sound.
const LEAD: Duration = Duration::from_millis(250);
/// Audio kept after the detected end: word endings trail off below the
/// detector's threshold.
const TAIL: Duration = Duration::from_millis(400);

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeVoice {
    /// Maximum seconds to wait for speech to begin before returning
    /// `(no speech detected)` (0.5–300; default `mcp.record_timeout`, 15).
    pub timeout_seconds: Option<f64>,
    /// Language spoken, ISO 639-1 (`en`, `de`, …) or `auto`; only
    /// multilingual models accept languages other than English.
    pub language: Option<String>,
}

/// `transcribe_voice`'s structured result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Heard {
    /// What was said, or `(no speech detected)`.
    pub text: String,
    /// Whether speech was heard and transcribed.
    pub speech: bool,
    /// Why listening ended: `end_of_speech`, `timeout`, `max_length`,
    /// `stopped`.
    pub end_reason: String,
    /// Seconds of audio recorded, pre-roll included.
    pub duration: f64,
    /// Language of the text (ISO 639-1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// When speech began and ended, seconds from the start of the recording.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speech_start: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speech_end: Option<f64>,
    /// Segments with `start`, `end` (seconds from the start of the
    /// recording), `text` and `confidence`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<serde_json::Value>,
    /// Mean token probability, 0–1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f32>,
    /// The model that transcribed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Transcription time, milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcribe_ms: Option<u64>,
}

/// Sends a progress notification (of 3 steps) when the client asked for them.
async fn progress(context: &RequestContext<RoleServer>, step: f64, message: &str) {
    super::progress(context, step, Some(3.0), message).await;
}

fn earcon(server: &HarkServer, earcon: Earcon) {
    if let Some(player) = server.state.player()
        && let Err(e) = player.play(&earcon.clip())
    {
        tracing::debug!(error = %e, "earcon not played");
    }
}

/// The answer while the mute switch is on: the person in the room has
/// closed the microphone, and only they can open it again.
fn muted() -> ToolError {
    ToolError::new(
        "MicrophoneMutedError",
        "the microphone is muted: the mute switch on the appliance is on, and only the person in \
         the room can turn it off",
    )
}

fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

#[tool_router(router = transcribe_voice_router, vis = "pub(crate)")]
impl HarkServer {
    /// Open the microphone, wait for the person in the room to speak, and
    /// return what they said when they stop (or `(no speech detected)`).
    #[tool(
        name = "transcribe_voice",
        output_schema = super::output_schema::<Heard>(),
        annotations(
            title = "Listen to the room",
            read_only_hint = false,
            open_world_hint = true
        )
    )]
    pub async fn transcribe_voice(
        &self,
        Parameters(args): Parameters<TranscribeVoice>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(match self.listen(args, &context).await {
            Ok(result) => result,
            Err(e) => e.into_result(),
        })
    }
}

impl HarkServer {
    async fn listen(
        &self,
        args: TranscribeVoice,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ToolError> {
        let stt =
            self.state.stt.get().ok_or_else(|| {
                ToolError::new("ModelNotLoadedError", "speech-to-text is starting")
            })?;
        let engine = Arc::clone(
            stt.engine()
                .map_err(|why| ToolError::new("ModelNotLoadedError", why))?,
        );
        let mic = self.state.microphone.get().ok_or_else(|| {
            ToolError::new(
                "MicrophoneError",
                "there is no microphone: the audio engine is not running (audio.enabled = false)",
            )
        })?;
        if self.state.muted.load(std::sync::atomic::Ordering::Acquire) {
            return Err(muted());
        }
        let timeout = match args.timeout_seconds {
            None => stt.record_timeout,
            Some(t)
                if t.is_finite() && t >= RECORD_TIMEOUT_RANGE.0 && t <= RECORD_TIMEOUT_RANGE.1 =>
            {
                Duration::from_secs_f64(t)
            }
            Some(t) => {
                return Err(ToolError::invalid(format!(
                    "timeout_seconds must be {}–{} seconds, got {t}",
                    RECORD_TIMEOUT_RANGE.0, RECORD_TIMEOUT_RANGE.1
                )));
            }
        };

        // The chime first, to its end: with half duplex the microphone is
        // muted while the speaker plays, so listening starts after it — and
        // `recording`, the listening light and the `listening` progress
        // say so only from then on, when speech is heard.
        if let Some(player) = self.state.player() {
            match player.play(&Earcon::ListenStart.clip()) {
                Ok(done) => {
                    let _ = tokio::task::spawn_blocking(move || {
                        done.recv_timeout(Duration::from_secs(2))
                    })
                    .await;
                }
                Err(e) => tracing::debug!(error = %e, "earcon not played"),
            }
        }
        // Listening: the microphone shows open from here until the guard
        // drops, whatever ends the recording.
        let recording = self.state.start_recording();
        progress(context, 0.0, "listening").await;
        let control = Arc::new(Control::default());
        // Push-to-talk: the board's button holds this recording open while
        // it is down and ends it when it comes up.
        self.state.add_recorder(&control);
        let options = Options::new(timeout, mic.preroll, mic.vad.clone());
        let (ring, ctl) = (Arc::clone(&mic.ring), Arc::clone(&control));
        let mut recorder =
            tokio::task::spawn_blocking(move || utterance::record(&ring, &options, &ctl));
        let mut announced = false;
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let utterance = loop {
            tokio::select! {
                done = &mut recorder => {
                    break done.map_err(|e| ToolError::new("MicrophoneError", format!("the recording failed: {e}")))?;
                }
                _ = super::call_ended(self, context) => {
                    // Cancelled or disconnected: release the microphone now.
                    control.cancel();
                    let _ = recorder.await;
                    drop(recording);
                    tracing::info!("listening cancelled by the client");
                    return Err(ToolError::new("CancelledError", "listening was cancelled"));
                }
                _ = tick.tick() => {
                    if self.state.muted.load(std::sync::atomic::Ordering::Acquire) {
                        // The mute switch went on mid-recording: nothing
                        // heard is kept (capture stores silence from now
                        // on; what came before is dropped with the
                        // recording).
                        control.cancel();
                        let _ = recorder.await;
                        drop(recording);
                        tracing::info!("listening ended: the microphone was muted");
                        return Err(muted());
                    }
                    if !announced && control.speech_started() {
                        announced = true;
                        progress(context, 1.0, "speech detected").await;
                    }
                }
            }
        };
        drop(recording);
        earcon(self, Earcon::ListenStop);
        tracing::info!(reason = ?utterance.reason, speech = ?utterance.speech,
            seconds = utterance.samples.len() as f64 / 16_000.0, "utterance recorded");

        let reason = match utterance.reason {
            EndReason::EndOfSpeech => "end_of_speech",
            EndReason::NoSpeech => "timeout",
            EndReason::MaxLength => "max_length",
            EndReason::Stopped => "stopped",
            EndReason::Cancelled => "cancelled",
            EndReason::CaptureStalled => {
                return Err(ToolError::new(
                    "MicrophoneError",
                    "the microphone stopped delivering audio (device unplugged or failing); see get_status",
                ));
            }
        };
        let recorded = seconds(Duration::from_secs_f64(
            utterance.samples.len() as f64 / 16_000.0,
        ));
        let Some((start, end)) = utterance.speech else {
            return Ok(success(
                NO_SPEECH,
                Heard {
                    text: NO_SPEECH.into(),
                    speech: false,
                    end_reason: reason.into(),
                    duration: recorded,
                    language: None,
                    speech_start: None,
                    speech_end: None,
                    segments: Vec::new(),
                    confidence: None,
                    model: None,
                    transcribe_ms: None,
                },
            ));
        };

        progress(context, 2.0, "transcribing").await;
        let rate = 16_000.0;
        let from = ((start.saturating_sub(LEAD)).as_secs_f64() * rate) as usize;
        let to = (((end + TAIL).as_secs_f64() * rate) as usize).min(utterance.samples.len());
        let clip = utterance.samples[from.min(to)..to].to_vec();
        let offset = from as f64 / rate;
        let mut request = Request::new(clip);
        request.language = args.language;
        let cancel = Arc::clone(&request.cancel);
        let answer = engine.submit(request)?;
        let transcript = tokio::select! {
            answer = answer => answer.map_err(|_| ToolError::new("ModelNotLoadedError", "the speech-to-text engine stopped"))??,
            _ = super::call_ended(self, context) => {
                cancel.store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(ToolError::new("CancelledError", "transcription was cancelled"));
            }
        };
        let text = if transcript.text.is_empty() {
            NO_SPEECH.to_owned()
        } else {
            transcript.text.clone()
        };
        let segments: Vec<_> = transcript
            .segments
            .iter()
            .map(|s| {
                json!({
                    "start": seconds(Duration::from_secs_f64(s.start + offset)),
                    "end": seconds(Duration::from_secs_f64(s.end + offset)),
                    "text": s.text,
                    "confidence": s.confidence,
                })
            })
            .collect();
        Ok(success(
            text.clone(),
            Heard {
                text,
                speech: !transcript.text.is_empty(),
                end_reason: reason.into(),
                duration: recorded,
                language: Some(transcript.language.clone()),
                speech_start: Some(seconds(start)),
                speech_end: Some(seconds(end)),
                segments,
                confidence: Some(transcript.confidence),
                model: Some(engine.info().name.clone()),
                transcribe_ms: Some(transcript.elapsed_ms),
            },
        ))
    }
}
