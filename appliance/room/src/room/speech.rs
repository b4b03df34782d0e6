//! Speaking: a text checked, planned and queued for the speaker in its
//! agent's voice, and, when the caller waits, played through with each
//! sentence reported as it is made and heard. What `speak_text`,
//! `POST /speak` and the dialogue's questions share.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use hark_core::room::{
    BoxFuture, Engine, Failure, Kind, Play, PlayCall, Progress, Report, Speak, SpeakCall,
    SpeechStatus, Spoken,
};
use hark_tts::synth::EngineKind;
use tokio::time::Instant;

use super::{Room, failure};
use crate::tts::{Accepted, SpeakError, SpeechEvent, SpeechOutcome, TextToSpeech};

/// The text-to-speech service, or why it is not there.
pub fn tts(voice: &crate::state::Voice) -> Result<Arc<TextToSpeech>, Failure> {
    let tts = Arc::clone(&voice.tts);
    if !tts.enabled {
        return Err(failure::speak(SpeakError::Disabled));
    }
    Ok(tts)
}

/// The text made speakable, or why it cannot be spoken.
pub fn check_text(text: &str, max_chars: usize) -> Result<String, Failure> {
    hark_core::room::check_text(text, max_chars)?;
    let speakable = hark_tts::text::speakable(text);
    if !speakable.chars().any(char::is_alphanumeric) {
        return Err(Failure::invalid(
            "text has nothing to say: only emoji, markup or punctuation",
        ));
    }
    Ok(speakable)
}

pub fn engine(kind: EngineKind) -> Engine {
    match kind {
        EngineKind::Piper => Engine::Piper,
        EngineKind::Espeak => Engine::Espeak,
        EngineKind::Recording => Engine::Recording,
    }
}

/// Stops a speech request if the call waiting for it goes away first.
struct StopOnDrop(Option<Arc<AtomicBool>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = &self.0 {
            cancel.store(true, Ordering::Release);
        }
    }
}

/// Checks `call`, queues it and, if it waits, plays it through. With a
/// `deadline` (the floor's `max_hold` of a call that holds it while it
/// speaks), speech still playing then is stopped and the call fails.
pub async fn say(
    (voice, keeping): (&crate::state::Voice, &crate::state::Keeping),
    mut call: SpeakCall,
    deadline: Option<Deadline>,
    report: &mut dyn Report,
) -> Result<Spoken, Failure> {
    let tts = tts(voice)?;
    call.voice = language_voice(
        &keeping.agents,
        &tts,
        call.agent.as_deref(),
        call.voice.take(),
        call.language.as_deref(),
    )
    .await?;
    if let Some(later) = call.later {
        return keep(keeping, &tts, call, later).await;
    }
    let (events_tx, events) = crate::tts::speech_events();
    let wait = call.wait;
    let (spoken, accepted) = queue(&tts, call, wait.then_some(events_tx)).await?;
    if !wait {
        return Ok(spoken);
    }
    through(spoken, &accepted, events, deadline, report).await
}

/// When a call that holds the floor while it speaks is cut off: at `at`,
/// the floor's `max_hold` after it took it.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub at: Instant,
    pub max_hold: std::time::Duration,
}

/// The voice a call is spoken in when it gives a language and no voice:
/// the agent's or the appliance's if that speaks the language, else an
/// installed piper voice of it, else espeak-ng's voice for it. Without a
/// language, the call's voice as it is.
pub(super) async fn language_voice(
    agents: &crate::agents::Agents,
    tts: &Arc<TextToSpeech>,
    agent: Option<&str>,
    voice: Option<String>,
    language: Option<&str>,
) -> Result<Option<String>, Failure> {
    let Some(language) = language.map(str::trim).filter(|l| !l.is_empty()) else {
        return Ok(voice);
    };
    if voice.is_some() {
        return Ok(voice);
    }
    // espeak-ng's names for it: `pt-br`, then `pt`.
    let full = language.to_ascii_lowercase().replace('_', "-");
    let primary = full.split('-').next().unwrap_or_default().to_owned();
    if !(2..=3).contains(&primary.len()) || !primary.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(Failure::invalid(format!(
            "language `{language}` is not a language code: use ISO 639-1 such as `de` or `es`, or a voice's `de_DE`"
        )));
    }
    // Who would speak otherwise, first: the agent's voice, the appliance's.
    let preferred: Vec<String> = agent
        .and_then(|a| agents.voice(a))
        .into_iter()
        .chain(std::iter::once(tts.default_voice.clone()))
        .collect();
    let dir = tts.voices_dir.clone();
    let chosen = tokio::task::spawn_blocking(move || {
        let installed = hark_tts::voices::VoiceStore::open(&dir)
            .and_then(|store| store.list())
            .map(|listing| listing.installed)
            .unwrap_or_default();
        let is_it = |code: &str| language_matches(code, &full);
        let of_it =
            |v: &&hark_tts::voices::InstalledVoice| v.language.as_deref().is_some_and(is_it);
        let speaks = |id: &str| match id.strip_prefix("espeak:") {
            Some(name) => is_it(name),
            None => installed.iter().filter(of_it).any(|v| v.id == id),
        };
        if let Some(voice) = preferred.iter().find(|v| speaks(v)) {
            return Some(voice.clone());
        }
        if let Some(voice) = installed.iter().find(of_it) {
            return Some(voice.id.clone());
        }
        let espeak = hark_tts::espeak::Espeak::get().ok()?;
        [full.clone(), primary]
            .into_iter()
            .find(|name| espeak.has_voice(name))
            .map(|name| format!("espeak:{name}"))
    })
    .await
    .map_err(|e| failure::task(Kind::Voice, "choosing a voice", e))?;
    chosen.map(Some).ok_or_else(|| {
        Failure::new(
            Kind::VoiceNotFound,
            format!(
                "no voice speaks `{language}`: no piper voice of it is installed (list_voices shows the catalog's) and espeak-ng has none"
            ),
        )
    })
}

/// Follows queued speech until it has been played (or stopped),
/// reporting each piece made and heard; dropped, it stops the speech.
async fn through(
    mut spoken: Spoken,
    accepted: &Accepted,
    mut events: tokio::sync::mpsc::Receiver<SpeechEvent>,
    deadline: Option<Deadline>,
    report: &mut dyn Report,
) -> Result<Spoken, Failure> {
    let mut stop = StopOnDrop(Some(Arc::clone(&accepted.cancel)));
    report
        .report(Progress::Speaking {
            pieces: accepted.pieces,
        })
        .await;
    let finished = loop {
        let event = tokio::select! {
            event = events.recv() => event,
            () = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline.at).await,
                    None => std::future::pending().await,
                }
            } => {
                let max = deadline.map_or(0, |d| d.max_hold.as_secs());
                return Err(Failure::new(Kind::FloorTimeout, format!(
                    "this call held the floor longer than floor.max_hold_seconds ({max} s) and was cut off; its speech was stopped"
                )));
            }
        };
        let progress = match event {
            Some(SpeechEvent::Synthesized { index, count }) => {
                Progress::Synthesized { index, count }
            }
            Some(SpeechEvent::Playing { index, count }) => Progress::Playing { index, count },
            Some(SpeechEvent::Finished(finished)) => break finished,
            None => return Err(failure::speak(SpeakError::Stopped)),
        };
        report.report(progress).await;
    };
    // Finished: nothing left to stop.
    stop.0 = None;
    spoken.engine = engine(finished.engine);
    if finished.fallback.is_some() {
        spoken.fallback_reason = finished.fallback;
    }
    spoken.seconds = Some((finished.seconds * 100.0).round() / 100.0);
    match finished.outcome {
        SpeechOutcome::Spoken => spoken.status = SpeechStatus::Spoken,
        SpeechOutcome::Stopped => spoken.status = SpeechStatus::Stopped,
        SpeechOutcome::Failed(reason) => return Err(Failure::new(Kind::Speech, reason)),
    }
    Ok(spoken)
}

/// Checks `call` and queues it; `events` gets the request's progress.
async fn queue(
    tts: &Arc<TextToSpeech>,
    call: SpeakCall,
    events: Option<crate::tts::SpeechEvents>,
) -> Result<(Spoken, Accepted), Failure> {
    let SpeakCall {
        agent,
        text,
        voice,
        rate,
        priority,
        ..
    } = call;
    let speakable = check_text(&text, tts.max_chars)?;
    let rate = hark_core::room::check_rate(rate)?;
    // Planning reads phonemes, and the voice's model if it is not loaded.
    let accepted = {
        let tts = Arc::clone(tts);
        tokio::task::spawn_blocking(move || {
            tts.speak(&speakable, voice.as_deref(), rate, priority, events, agent)
        })
        .await
        .map_err(|e| failure::task(Kind::Speech, "speech planning", e))?
        .map_err(failure::speak)?
    };
    let spoken = Spoken {
        status: SpeechStatus::Queued,
        text,
        voice: accepted.voice.clone(),
        engine: engine(accepted.engine),
        fallback_reason: accepted.fallback.clone(),
        sentences: accepted.pieces,
        priority,
        seconds: None,
        scheduled: None,
        speech: Some(accepted.id),
    };
    Ok((spoken, accepted))
}

/// Checks `call` and keeps it to be said `later`.
async fn keep(
    keeping: &crate::state::Keeping,
    tts: &Arc<TextToSpeech>,
    call: SpeakCall,
    later: hark_core::room::Later,
) -> Result<Spoken, Failure> {
    let schedule = keeping.schedule.as_ref().ok_or_else(|| {
        Failure::new(
            Kind::Schedule,
            "speech cannot be kept for later: the schedule store could not open (see the log)",
        )
    })?;
    if call.wait {
        return Err(Failure::invalid(
            "wait cannot go with delay_seconds or at: the call would outlast its time",
        ));
    }
    check_text(&call.text, tts.max_chars)?;
    let rate = hark_core::room::check_rate(call.rate)?;
    // The voice it will be said in: the call's, else the agent's own, else
    // the appliance's (as the speech thread chooses it).
    let voice = call
        .voice
        .clone()
        .or_else(|| {
            let agent = call.agent.as_deref()?;
            keeping.agents.voice(agent)
        })
        .unwrap_or_else(|| tts.default_voice.clone());
    let known = {
        let (dir, voice) = (tts.voices_dir.clone(), voice.clone());
        tokio::task::spawn_blocking(move || {
            voice.starts_with("espeak:") || dir.join(format!("{voice}.onnx")).is_file()
        })
        .await
        .unwrap_or(false)
    };
    if !known {
        return Err(Failure::new(
            Kind::VoiceNotFound,
            format!("voice `{voice}` is not installed (list_voices shows the installed ones)"),
        ));
    }
    let entry = hark_store::schedule::Entry {
        id: 0,
        agent: call.agent,
        text: call.text.clone(),
        voice: call.voice,
        rate: rate.map(f64::from),
        set: later.set,
        due: later.due,
        ring: later.ring,
    };
    let kept = schedule.add(entry).await?;
    Ok(Spoken {
        status: SpeechStatus::Scheduled,
        text: call.text,
        engine: if voice.starts_with("espeak:") {
            Engine::Espeak
        } else {
            Engine::Piper
        },
        voice,
        fallback_reason: None,
        sentences: 0,
        priority: call.priority,
        seconds: None,
        scheduled: Some(kept),
        speech: None,
    })
}

/// How long audio made elsewhere may play, and how large its file may be.
const PLAY_LIMITS: hark_audio::decode::Limits = hark_audio::decode::Limits {
    max_bytes: 16 * 1024 * 1024,
    max_seconds: 300,
};

impl Play for Room {
    fn play<'a>(&'a self, call: PlayCall) -> BoxFuture<'a, Result<Spoken, Failure>> {
        Box::pin(async move {
            let tts = tts(&self.state.voice)?;
            let PlayCall {
                agent,
                label,
                audio,
                source,
            } = call;
            // Decoding is CPU work on untrusted bytes: off the runtime.
            let decoded = tokio::task::spawn_blocking(move || {
                hark_audio::decode::decode(audio, Some(&source), &PLAY_LIMITS)
            })
            .await
            .map_err(|e| failure::task(Kind::AudioFormat, "decoding the audio", e))?
            .map_err(|e| Failure::new(Kind::AudioFormat, e.to_string()))?;
            let (events_tx, events) = crate::tts::speech_events();
            // Queueing takes no planning: nothing here blocks.
            let accepted = tts
                .play_recording(
                    &label,
                    decoded.samples,
                    hark_audio::config::PIPELINE_RATE,
                    Some(events_tx),
                    agent,
                )
                .map_err(failure::speak)?;
            let spoken = Spoken {
                status: SpeechStatus::Queued,
                text: label,
                voice: String::new(),
                engine: Engine::Recording,
                fallback_reason: None,
                sentences: 1,
                priority: hark_core::room::Priority::Normal,
                seconds: None,
                scheduled: None,
                speech: Some(accepted.id),
            };
            through(spoken, &accepted, events, None, &mut hark_core::room::Quiet).await
        })
    }
}

impl Speak for Room {
    fn speak<'a>(
        &'a self,
        call: SpeakCall,
        report: &'a mut dyn Report,
    ) -> BoxFuture<'a, Result<Spoken, Failure>> {
        Box::pin(say(
            (&self.state.voice, &self.state.keeping),
            call,
            None,
            report,
        ))
    }

    fn stop(&self) -> Result<usize, Failure> {
        Ok(tts(&self.state.voice)?.stop())
    }

    fn sentences<'a>(&'a self, text: String) -> BoxFuture<'a, Result<Vec<String>, Failure>> {
        Box::pin(async move {
            let tts = tts(&self.state.voice)?;
            if text.chars().count() > tts.max_chars {
                return Err(Failure::invalid(format!(
                    "text is longer than {} characters (tts.max_chars)",
                    tts.max_chars
                )));
            }
            let (ranges, text) = tokio::task::spawn_blocking(move || {
                tts.sentences(&text).map(|ranges| (ranges, text))
            })
            .await
            .map_err(|e| failure::task(Kind::Speech, "segmenting", e))?
            .map_err(failure::speak)?;
            Ok(ranges
                .into_iter()
                .filter_map(|range| text.get(range))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect())
        })
    }
}

/// Language codes compared loosely: `en_US`, `en-us` and `EN_us` are one.
pub(super) fn language_matches(code: &str, wanted: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let (code, wanted) = (norm(code), norm(wanted));
    code == wanted || code.split('_').next() == Some(wanted.as_str())
}

#[cfg(test)]
mod tests {
    use std::{
        collections::BTreeMap,
        time::{Duration, SystemTime},
    };

    use hark_core::room::{Priority, Quiet};

    use super::*;
    use crate::state::{Keeping, Voice};

    /// The voice and the keeping `say` is given: espeak-ng (nothing to
    /// load), no speaker, the schedule in `dir`, and an agent `claude`
    /// whose own voice is espeak-ng's German.
    fn parts(dir: &std::path::Path) -> (Voice, Keeping) {
        let bus = crate::events::Bus::default();
        let agents = crate::agents::Agents::new(BTreeMap::from([(
            "claude".to_owned(),
            hark_core::agents::AgentConfig {
                voice: Some("espeak:de".into()),
                ..Default::default()
            },
        )]));
        let mut config = crate::config::RoomConfig::default();
        config.tts.engine = "espeak".into();
        config.tts.voices_dir = dir.join("voices");
        let tts = TextToSpeech::start(&config, &bus, &Default::default(), None, agents.clone());
        let keeping = Keeping {
            schedule: Some(crate::schedule::Scheduler::open(dir, bus).expect("schedule")),
            agents,
            ..Keeping::default()
        };
        (Voice::new(Arc::new(tts), None), keeping)
    }

    fn later(agent: Option<&str>, voice: Option<&str>, wait: bool) -> SpeakCall {
        let now = SystemTime::now();
        SpeakCall {
            agent: agent.map(str::to_owned),
            text: "The tea is ready.".into(),
            voice: voice.map(str::to_owned),
            language: None,
            rate: None,
            priority: Priority::Normal,
            wait,
            later: Some(hark_core::room::Later {
                set: now,
                due: now + Duration::from_secs(600),
                ring: None,
            }),
        }
    }

    async fn said(parts: (&Voice, &Keeping), call: SpeakCall) -> Result<Spoken, Failure> {
        say(parts, call, None, &mut Quiet).await
    }

    #[tokio::test]
    async fn speech_for_later_is_kept_in_its_agents_voice_and_not_said_now() {
        let dir = tempfile::tempdir().unwrap();
        let (voice, keeping) = parts(dir.path());
        let spoken = said((&voice, &keeping), later(Some("claude"), None, false))
            .await
            .expect("kept");
        assert_eq!(spoken.status, SpeechStatus::Scheduled);
        assert_eq!(spoken.voice, "espeak:de", "the agent's own voice");
        assert_eq!(spoken.engine, Engine::Espeak);
        assert_eq!(spoken.speech, None, "nothing was queued to speak");
        let kept = keeping.schedule.as_ref().unwrap().list();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].text, "The tea is ready.");
        assert_eq!(kept[0].agent.as_deref(), Some("claude"));
        assert_eq!(Some(kept[0].id), spoken.scheduled.map(|s| s.id));
        assert_eq!(voice.tts.pending(), 0);
    }

    #[tokio::test]
    async fn speech_for_later_that_could_never_be_said_is_refused_and_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (voice, keeping) = parts(dir.path());
        // A voice that is not installed.
        let refused = said((&voice, &keeping), later(None, Some("nl_NL-nobody"), false))
            .await
            .unwrap_err();
        assert_eq!(refused.kind, Kind::VoiceNotFound, "{refused:?}");
        assert!(refused.message.contains("nl_NL-nobody"), "{refused:?}");
        // Waiting for it to be played would outlast the call.
        let refused = said((&voice, &keeping), later(None, None, true))
            .await
            .unwrap_err();
        assert_eq!(refused.kind, Kind::InvalidArgument, "{refused:?}");
        assert!(keeping.schedule.as_ref().unwrap().list().is_empty());
    }

    #[tokio::test]
    async fn speech_now_without_a_speaker_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let (voice, keeping) = parts(dir.path());
        let mut call = later(None, None, false);
        call.later = None;
        let refused = said((&voice, &keeping), call).await.unwrap_err();
        assert!(refused.message.contains("speaker"), "{refused:?}");
    }
}
