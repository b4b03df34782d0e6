//! Stand-ins for the room, for the crate's tests and the fuzz target: a
//! speaker, a schedule and a recorder that note what they are asked, and a
//! device.

use std::sync::{Arc, Mutex};

use hark_core::room::{
    EndReason, Play, PlayCall, Record, RecordCall, Recorded, Schedule, Speak, SpeakCall,
    SpeechStatus,
};

use crate::{
    pipeline::Starts,
    server::{Device, Room, WakeWord},
};

/// A speaker that notes what it is asked to say (and when, for what
/// is kept for later), and a schedule that notes what is cancelled.
pub struct Recording {
    pub said: Mutex<Vec<String>>,
    pub cancelled: Mutex<Vec<i64>>,
    /// What the person says when recorded (nothing: silence).
    pub voice: Mutex<Vec<i16>>,
    /// The recordings asked for: where each was to start.
    pub recorded: Mutex<Vec<Option<u64>>>,
    /// What the person goes on to say just after a recording (nothing:
    /// they do not), taken by the next `record_more`.
    pub more: Mutex<Vec<i16>>,
    /// The person's starts that run Home Assistant's pipeline.
    pub starts: Arc<Starts>,
    /// Speech said now finishes only with a permit: a held speaker is
    /// still speaking until [`Recording::finish`].
    gate: tokio::sync::Semaphore,
}

impl Recording {
    pub fn new() -> Arc<Self> {
        Self::with_permits(tokio::sync::Semaphore::MAX_PERMITS)
    }

    /// A speaker that keeps speaking until [`Recording::finish`].
    pub fn held() -> Arc<Self> {
        Self::with_permits(0)
    }

    fn with_permits(permits: usize) -> Arc<Self> {
        Arc::new(Self {
            said: Mutex::new(Vec::new()),
            cancelled: Mutex::new(Vec::new()),
            voice: Mutex::new(Vec::new()),
            recorded: Mutex::new(Vec::new()),
            more: Mutex::new(Vec::new()),
            starts: Starts::new(true, false),
            gate: tokio::sync::Semaphore::new(permits),
        })
    }

    /// Lets `n` held speeches finish.
    pub fn finish(&self, n: usize) {
        self.gate.add_permits(n);
    }

    pub fn room(self: Arc<Self>) -> Room {
        Room {
            speak: self.clone(),
            fetch: crate::media::over_http(),
            play: self.clone(),
            schedule: self.clone(),
            record: self.clone(),
            starts: Arc::clone(&self.starts),
        }
    }
}

impl Schedule for Recording {
    fn scheduled(
        &self,
    ) -> hark_core::room::BoxFuture<
        '_,
        Result<Vec<hark_core::room::Scheduled>, hark_core::room::Failure>,
    > {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn cancel(
        &self,
        id: i64,
    ) -> hark_core::room::BoxFuture<'_, Result<hark_core::room::Scheduled, hark_core::room::Failure>>
    {
        Box::pin(async move {
            self.cancelled.lock().expect("lock").push(id);
            Err(hark_core::room::Failure {
                kind: hark_core::room::Kind::InvalidArgument,
                message: "noted".into(),
                context: hark_core::room::Context::None,
            })
        })
    }
}

/// Plays what it is given when it looks like audio (a RIFF header), noting
/// how many bytes and what for; anything else is not audio.
impl Play for Recording {
    fn play<'a>(
        &'a self,
        call: PlayCall,
    ) -> hark_core::room::BoxFuture<'a, Result<hark_core::room::Spoken, hark_core::room::Failure>>
    {
        Box::pin(async move {
            if !call.audio.starts_with(b"RIFF") {
                return Err(hark_core::room::Failure::new(
                    hark_core::room::Kind::AudioFormat,
                    format!("{} is not audio", call.source),
                ));
            }
            self.said.lock().expect("lock").push(format!(
                "played {} bytes: {}",
                call.audio.len(),
                call.label
            ));
            Ok(hark_core::room::Spoken {
                status: SpeechStatus::Spoken,
                text: call.label,
                voice: String::new(),
                engine: hark_core::room::Engine::Recording,
                fallback_reason: None,
                sentences: 1,
                priority: hark_core::room::Priority::Normal,
                seconds: None,
                scheduled: None,
                speech: None,
            })
        })
    }
}

impl Speak for Recording {
    fn speak<'a>(
        &'a self,
        call: SpeakCall,
        _: &'a mut dyn hark_core::room::Report,
    ) -> hark_core::room::BoxFuture<'a, Result<hark_core::room::Spoken, hark_core::room::Failure>>
    {
        Box::pin(async move {
            let scheduled = call.later.map(|later| {
                let mut said = self.said.lock().expect("lock");
                let now = std::time::SystemTime::now();
                let secs = later
                    .due
                    .duration_since(now)
                    .map_or(0, |d| d.as_secs_f64().round() as u64);
                let ago = now
                    .duration_since(later.set)
                    .map_or(0, |d| d.as_secs_f64().round() as u64);
                said.push(format!(
                    "{} in {secs} s, set {ago} s ago, ringing {:?}",
                    call.text, later.ring
                ));
                hark_core::room::Scheduled {
                    id: said.len() as i64,
                    kind: hark_core::room::LaterKind::Timer,
                    agent: call.agent.clone(),
                    text: call.text.clone(),
                    due_at: String::new(),
                    due_in_seconds: secs as f64,
                    ring_seconds: None,
                    ringing: false,
                }
            });
            if scheduled.is_none() {
                self.said.lock().expect("lock").push(call.text.clone());
                if let Ok(permit) = self.gate.acquire().await {
                    permit.forget();
                }
            }
            Ok(hark_core::room::Spoken {
                status: SpeechStatus::Spoken,
                text: call.text,
                voice: "test".into(),
                engine: hark_core::room::Engine::Piper,
                fallback_reason: None,
                sentences: 1,
                priority: call.priority,
                seconds: Some(1.0),
                scheduled,
                speech: None,
            })
        })
    }

    fn stop(&self) -> Result<usize, hark_core::room::Failure> {
        Ok(0)
    }

    fn sentences<'a>(
        &'a self,
        text: String,
    ) -> hark_core::room::BoxFuture<'a, Result<Vec<String>, hark_core::room::Failure>> {
        Box::pin(async move { Ok(vec![text]) })
    }
}

impl Record for Recording {
    fn record(
        &self,
        call: RecordCall,
    ) -> hark_core::room::BoxFuture<'_, Result<Recorded, hark_core::room::Failure>> {
        Box::pin(async move {
            self.recorded.lock().expect("lock").push(call.start_at);
            let samples = self.voice.lock().expect("lock").clone();
            Ok(Recorded {
                speech: !samples.is_empty(),
                samples,
                end_reason: EndReason::EndOfSpeech,
            })
        })
    }

    fn record_more(&self) -> hark_core::room::BoxFuture<'_, Option<Recorded>> {
        Box::pin(async move {
            let samples = std::mem::take(&mut *self.more.lock().expect("lock"));
            (!samples.is_empty()).then_some(Recorded {
                speech: true,
                samples,
                end_reason: EndReason::EndOfTurn,
            })
        })
    }
}

pub fn device() -> Device {
    Device {
        name: "hark".into(),
        friendly_name: "Hark".into(),
        mac_address: "02:00:00:00:00:01".into(),
        version: "0.1.0".into(),
        wake_words: vec![
            WakeWord {
                id: "okay_nabu".into(),
                phrase: "Okay Nabu".into(),
                trained_languages: vec!["en".into()],
            },
            WakeWord {
                id: "hey_jarvis".into(),
                phrase: "Hey Jarvis".into(),
                trained_languages: vec!["en".into()],
            },
        ],
        active_wake_word: Some("okay_nabu".into()),
    }
}
