//! A simulated room for the MCP side's tests: the device's rules are the
//! core's own (the floor — one call at a time on the microphone, the queue
//! or `BusyError`, its events —, the timeout's, question's, rate's and
//! volume's checks, `choose`'s spoken prompt, yes/no and options matched by
//! the core's words), with a scripted person instead of a microphone and a
//! transcript of what the speaker said instead of sound. No models: the
//! file tools answer as a device without them does, and the text rules
//! that need the voice engine (what is speakable) are not kept.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU8, AtomicU64, Ordering},
    },
    time::Duration,
};

use hark_core::{
    events::{Bus, Event},
    floor::{Floor, Turn, Who},
    room::{
        Ask, BoardControl, BoxFuture, Chosen, Confirmed, ConverseCall, Conversed, Detected,
        EndReason, Engine, Failure, Files, Hands, Heard, InstallCall, InstalledVoice, Kind, Listen,
        ListenCall, ModelList, NO_SPEECH, Observe, Pair, PairAsk, PairRefusal, Progress, Question,
        RECORD_TIMEOUT_RANGE, Refusal, RemovedVoice, Report, RoomStatus, Schedule, Scheduled,
        Speak, SpeakCall, SpeechEnd, SpeechStatus, Spoken, SynthesizeCall, Transcription, Voices,
        Volume, VolumeSet, WakeStatus, WakeWord, check_question, check_rate, check_text,
        check_timeout, check_volume, prompt,
    },
    status::{Subsystem, SubsystemState},
    words,
};
use serde_json::Value;

/// `tts.max_chars`'s default.
const MAX_CHARS: usize = 20_000;

/// What the person says next: `text` once `after` has passed since the
/// microphone opened.
#[derive(Debug, Clone)]
pub struct Utterance {
    pub text: String,
    pub after: Duration,
}

pub struct SimRoom {
    bus: Bus,
    /// The agents' settings (changes last as long as the room).
    agents: hark_core::agents::Agents,
    person: Mutex<VecDeque<Utterance>>,
    /// The microphone: the room's floor, with its default limits.
    floor: Arc<Floor>,
    spoken: Mutex<Vec<String>>,
    volume: AtomicU8,
    listens: AtomicU64,
    speeches: AtomicU64,
}

impl SimRoom {
    pub fn new(bus: Bus) -> Arc<Self> {
        Arc::new(Self {
            floor: Arc::new(Floor::new(bus.clone(), 8, Duration::from_secs(600))),
            agents: Default::default(),
            bus,
            person: Mutex::default(),
            spoken: Mutex::default(),
            volume: AtomicU8::new(70),
            listens: AtomicU64::new(0),
            speeches: AtomicU64::new(0),
        })
    }

    /// The person will say `text` `after_ms` after the next listen opens.
    pub fn will_say(&self, text: &str, after_ms: u64) {
        lock(&self.person).push_back(Utterance {
            text: text.to_owned(),
            after: Duration::from_millis(after_ms),
        });
    }

    /// Everything the speaker said, in order.
    pub fn spoken(&self) -> Vec<String> {
        lock(&self.spoken).clone()
    }

    /// What the person has yet to say.
    pub fn waiting_utterances(&self) -> usize {
        lock(&self.person).len()
    }

    /// Takes the microphone for `who` doing `tool`, on the room's floor.
    async fn take_floor(
        &self,
        who: &str,
        tool: &'static str,
        queue: bool,
        timeout: Duration,
        report: &mut dyn Report,
    ) -> Result<Turn, Failure> {
        report.report(Progress::WaitingForFloor).await;
        let turn = self
            .floor
            .take(Who::Agent(who.to_owned()), tool, queue, timeout)
            .await?;
        report.report(Progress::Granted).await;
        Ok(turn)
    }

    async fn hear(&self, agent: &str, timeout: Duration, report: &mut dyn Report) -> Heard {
        let listen = self.listens.fetch_add(1, Ordering::Relaxed) + 1;
        let ended = Ended {
            bus: &self.bus,
            listen,
            reason: EndReason::Cancelled,
        };
        self.bus.publish(Event::ListeningStarted {
            listen,
            agent: Some(agent.to_owned()),
        });
        report.report(Progress::Listening).await;
        let next = lock(&self.person).pop_front();
        let Some(utterance) = next.filter(|u| u.after < timeout) else {
            tokio::time::sleep(timeout).await;
            ended.end(EndReason::Timeout);
            return heard(listen, NO_SPEECH.into(), false, EndReason::Timeout, timeout);
        };
        tokio::time::sleep(utterance.after).await;
        self.bus.publish(Event::SpeechDetected { listen });
        report.report(Progress::SpeechDetected).await;
        if let Some(first) = utterance.text.split_whitespace().next() {
            report.report(Progress::Partial(first.to_owned())).await;
        }
        ended.end(EndReason::EndOfSpeech);
        report.report(Progress::Transcribing).await;
        let duration = utterance.after + Duration::from_millis(600);
        self.bus.publish(Event::UtteranceTranscribed {
            listen,
            agent: Some(agent.to_owned()),
            text: utterance.text.clone(),
            confidence: Some(0.9),
            duration: duration.as_secs_f64(),
            end_reason: EndReason::EndOfSpeech,
        });
        heard(
            listen,
            utterance.text,
            true,
            EndReason::EndOfSpeech,
            duration,
        )
    }

    async fn say(&self, agent: Option<&str>, text: &str, report: &mut dyn Report) -> f64 {
        let pieces = split(text);
        report
            .report(Progress::Speaking {
                pieces: pieces.len(),
            })
            .await;
        let speech = self.speeches.fetch_add(1, Ordering::Relaxed) + 1;
        self.bus.publish(Event::SpeakingStarted {
            speech,
            agent: agent.map(str::to_owned),
            text: text.to_owned(),
        });
        let count = pieces.len();
        for (index, piece) in pieces.into_iter().enumerate() {
            report.report(Progress::Synthesized { index, count }).await;
            report.report(Progress::Playing { index, count }).await;
            // A sentence takes a while to say: long enough for a test to
            // see a call speaking.
            tokio::time::sleep(Duration::from_millis(20)).await;
            lock(&self.spoken).push(piece);
        }
        let seconds = text.len() as f64 / 15.0;
        self.bus.publish(Event::SpeakingEnded {
            speech,
            agent: agent.map(str::to_owned),
            text: text.to_owned(),
            outcome: hark_core::events::SpeechEnded::Spoken,
            seconds,
        });
        seconds
    }
}

/// Publishes the end of a listen, `Cancelled` if the call went away.
struct Ended<'a> {
    bus: &'a Bus,
    listen: u64,
    reason: EndReason,
}

impl Ended<'_> {
    fn end(mut self, reason: EndReason) {
        self.reason = reason;
    }
}

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.bus.publish(Event::ListeningEnded {
            listen: self.listen,
            reason: self.reason,
        });
    }
}

fn heard(listen: u64, text: String, speech: bool, end: EndReason, duration: Duration) -> Heard {
    Heard {
        text,
        speech,
        end_reason: end,
        duration: duration.as_secs_f64(),
        language: speech.then(|| "en".into()),
        speech_start: None,
        speech_end: None,
        segments: Vec::new(),
        confidence: speech.then_some(0.9),
        model: speech.then(|| "simulated".into()),
        transcribe_ms: speech.then_some(1),
        speculative: false,
        continuation: false,
        listen,
    }
}

fn split(text: &str) -> Vec<String> {
    text.split_inclusive(['.', '?', '!'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn listen_timeout(timeout: Option<f64>) -> Result<Duration, Failure> {
    check_timeout(timeout, Duration::from_secs(15), RECORD_TIMEOUT_RANGE)
}

impl Listen for SimRoom {
    fn listen<'a>(
        &'a self,
        call: ListenCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Heard, Failure>> {
        Box::pin(async move {
            let timeout = listen_timeout(call.timeout)?;
            let _floor = self
                .take_floor(&call.agent, "transcribe_voice", call.queue, timeout, report)
                .await?;
            Ok(self.hear(&call.agent, timeout, report).await)
        })
    }
}

impl Speak for SimRoom {
    fn speak<'a>(
        &'a self,
        call: SpeakCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Spoken, Failure>> {
        Box::pin(async move {
            check_text(&call.text, MAX_CHARS)?;
            check_rate(call.rate)?;
            let sentences = split(&call.text).len();
            let mut spoken = Spoken {
                status: SpeechStatus::Queued,
                text: call.text.clone(),
                voice: call.voice.clone().unwrap_or_else(|| "simulated".into()),
                engine: Engine::Piper,
                fallback_reason: None,
                sentences,
                priority: call.priority,
                seconds: None,
                scheduled: None,
                speech: None,
            };
            if call.wait {
                spoken.seconds = Some(self.say(call.agent.as_deref(), &call.text, report).await);
                spoken.status = SpeechStatus::Spoken;
            } else {
                lock(&self.spoken).extend(split(&call.text));
            }
            Ok(spoken)
        })
    }

    fn stop(&self) -> Result<usize, Failure> {
        Ok(0)
    }

    fn sentences<'a>(&'a self, text: String) -> BoxFuture<'a, Result<Vec<String>, Failure>> {
        Box::pin(async move { Ok(split(&text)) })
    }
}

impl SimRoom {
    /// The dialogue's sequence: the floor, the question spoken, the answer
    /// heard.
    async fn ask_and_hear(
        &self,
        question: &Question,
        spoken: &str,
        tool: &'static str,
        report: &mut dyn Report,
    ) -> Result<(Heard, f64), Failure> {
        let timeout = listen_timeout(question.timeout)?;
        let _floor = self
            .take_floor(&question.agent, tool, question.queue, timeout, report)
            .await?;
        let seconds = self.say(Some(&question.agent), spoken, report).await;
        Ok((self.hear(&question.agent, timeout, report).await, seconds))
    }
}

impl Ask for SimRoom {
    fn converse<'a>(
        &'a self,
        call: ConverseCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Conversed, Failure>> {
        Box::pin(async move {
            let q = &call.question;
            check_text(&q.text, MAX_CHARS)?;
            let (heard, seconds) = match call.listen {
                true => {
                    let (heard, seconds) =
                        self.ask_and_hear(q, &q.text, "converse", report).await?;
                    (Some(heard), seconds)
                }
                false => (None, self.say(Some(&q.agent), &q.text, report).await),
            };
            Ok(Conversed {
                spoken: q.text.clone(),
                speech_status: SpeechEnd::Spoken,
                voice: Some(q.voice.clone().unwrap_or_else(|| "simulated".into())),
                engine: Some(Engine::Piper),
                speech_seconds: Some(seconds),
                heard,
            })
        })
    }

    fn confirm<'a>(
        &'a self,
        question: Question,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Confirmed, Failure>> {
        Box::pin(async move {
            let text = check_question(&question.text)?;
            let (heard, _) = self
                .ask_and_hear(&question, &text, "confirm", report)
                .await?;
            if !heard.speech {
                return Ok(Confirmed::no_answer());
            }
            let answer = words::YesNo::default().classify(&heard.text);
            Ok(Confirmed::by_voice(answer, heard))
        })
    }

    fn choose<'a>(
        &'a self,
        question: Question,
        options: Vec<String>,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Chosen, Failure>> {
        Box::pin(async move {
            let text = check_question(&question.text)?;
            words::check_options(&options).map_err(|e| Failure::invalid(e.to_string()))?;
            let said = prompt(&text, &options);
            let (heard, _) = self
                .ask_and_hear(&question, &said, "choose", report)
                .await?;
            if !heard.speech {
                return Ok(Chosen::no_answer());
            }
            let choice = words::choose(&heard.text, &options);
            Ok(Chosen::by_voice(choice, &options, heard.text))
        })
    }
}

impl Volume for SimRoom {
    fn volume(&self) -> Option<u8> {
        Some(self.volume.load(Ordering::Relaxed))
    }

    fn set_volume(&self, volume: i64) -> BoxFuture<'_, Result<VolumeSet, Failure>> {
        Box::pin(async move {
            let volume = check_volume(volume)?;
            self.volume.store(volume, Ordering::Relaxed);
            Ok(VolumeSet {
                volume,
                hardware_control: None,
            })
        })
    }
}

impl Schedule for SimRoom {
    fn scheduled(&self) -> BoxFuture<'_, Result<Vec<Scheduled>, Failure>> {
        Box::pin(async { Ok(vec![]) })
    }

    fn cancel(&self, id: i64) -> BoxFuture<'_, Result<Scheduled, Failure>> {
        Box::pin(async move {
            Err(Failure::new(
                Kind::NotScheduled,
                format!("nothing kept for later has id {id}"),
            ))
        })
    }
}

impl WakeWord for SimRoom {
    fn set_wake(
        &self,
        _on: Option<bool>,
        _sensitivity: Option<hark_core::room::Sensitivity>,
    ) -> Result<WakeStatus, Failure> {
        Err(Failure::new(
            Kind::ModelNotLoaded,
            "the simulated room has no wake word",
        ))
    }
}

impl Observe for SimRoom {
    fn status(&self) -> RoomStatus {
        let floor = self.floor.status();
        RoomStatus {
            lights: if floor.holder.is_some() {
                "listening"
            } else {
                "idle"
            },
            floor,
            volume: self.volume(),
            capture: None,
            playback: None,
            simulated_board: true,
            subsystems: vec![
                (Subsystem::Audio, SubsystemState::running("simulated room")),
                (Subsystem::Stt, SubsystemState::unavailable("no model")),
                (Subsystem::Tts, SubsystemState::running("simulated speaker")),
            ],
            wake: None,
            scheduled: vec![],
        }
    }
}

fn no_models<T>() -> Result<T, Failure> {
    Err(Failure::new(
        Kind::ModelNotLoaded,
        "the simulated room has no speech models",
    ))
}

impl Files for SimRoom {
    fn transcribe(
        &self,
        _: hark_core::room::TranscribeCall,
    ) -> BoxFuture<'_, Result<Transcription, Failure>> {
        Box::pin(async { no_models() })
    }

    fn detect_language(
        &self,
        _: hark_core::room::AudioInput,
    ) -> BoxFuture<'_, Result<Detected, Failure>> {
        Box::pin(async { no_models() })
    }

    fn synthesize(
        &self,
        _: SynthesizeCall,
    ) -> BoxFuture<'_, Result<hark_core::room::Synthesized, Failure>> {
        Box::pin(async { no_models() })
    }

    fn voices(&self, _: Option<String>, _: usize) -> BoxFuture<'_, Result<Voices, Failure>> {
        Box::pin(async {
            Ok(Voices {
                voices: Vec::new(),
                total: 0,
                piper_unavailable: Some("the simulated room has no voices".into()),
            })
        })
    }

    fn install_voice(&self, _: InstallCall) -> BoxFuture<'_, Result<InstalledVoice, Failure>> {
        Box::pin(async { no_models() })
    }

    fn models(&self) -> BoxFuture<'_, Result<ModelList, Failure>> {
        Box::pin(async {
            Ok(ModelList {
                models: Vec::new(),
                default: String::new(),
            })
        })
    }

    fn remove_voice(&self, id: String) -> BoxFuture<'_, Result<RemovedVoice, Failure>> {
        Box::pin(async move {
            Err(Failure::new(
                Kind::VoiceNotFound,
                format!("no voice `{id}` is installed"),
            ))
        })
    }
}

impl Hands for SimRoom {
    fn control(&self, control: BoardControl) -> BoxFuture<'_, Result<Value, Refusal>> {
        Box::pin(async move {
            if control.button.is_none() && control.mute.is_none() {
                return Err(Refusal::Invalid("give button or mute".into()));
            }
            Ok(serde_json::to_value(control).unwrap_or(Value::Null))
        })
    }

    fn selftest(&self, _: Value) -> BoxFuture<'_, Result<Value, Refusal>> {
        Box::pin(async {
            Err(Refusal::Unavailable(
                "the simulated room has no self-test".into(),
            ))
        })
    }
}

impl Pair for SimRoom {
    fn ask(&self, ask: PairAsk) -> BoxFuture<'_, Result<(), PairRefusal>> {
        Box::pin(async move {
            // Nobody presses the button in these tests.
            lock(&self.spoken).push(ask.prompt);
            tokio::time::sleep(ask.timeout).await;
            Err(PairRefusal::TimedOut)
        })
    }

    fn say(&self, words: String) {
        lock(&self.spoken).push(words);
    }
}

impl hark_core::room::AgentSettings for SimRoom {
    fn agents(&self) -> BoxFuture<'_, Result<hark_core::room::AgentSettingsList, Failure>> {
        Box::pin(async move {
            Ok(hark_core::room::AgentSettingsList {
                agents: self
                    .agents
                    .all()
                    .into_iter()
                    .map(|e| hark_core::room::AgentSettingsView::of(&e.name.clone(), Some(e)))
                    .collect(),
                default_voice: "sim".into(),
                kept: "in memory only".into(),
            })
        })
    }

    fn change_agent(
        &self,
        change: hark_core::room::AgentChange,
    ) -> BoxFuture<'_, Result<hark_core::room::AgentSettingsView, Failure>> {
        Box::pin(async move {
            let mut config = self
                .agents
                .get(&change.agent)
                .map(|e| e.config)
                .unwrap_or_default();
            if let Some(voice) = change.voice {
                config.voice = Some(voice);
            }
            self.agents.set(&change.agent, Some(config));
            Ok(hark_core::room::AgentSettingsView::of(
                &change.agent,
                self.agents.get(&change.agent),
            ))
        })
    }
}
