//! One listen: open the microphone, wait for the person to speak, record
//! until they stop (or the button comes up, or the timeout), transcribe.
//! `transcribe_voice`, `converse`, `confirm`, `choose` and the voice inbox's
//! person-initiated recording all listen through [`listen`], so they share
//! the chimes, the listening light, push-to-talk, the mute rules and the
//! handling of silence.
//!
//! The recording runs on a blocking thread reading the capture ring; this
//! future only waits for it. Dropping the future cancels the listen: the
//! recording stops within one poll (10 ms), the microphone shows closed
//! again and a transcription in progress is abandoned, so callers may race
//! it against a cancellation, the client leaving or a button answer with
//! `select!`. Only the detector's speech span (with a little audio around
//! it) goes to whisper: silence before and after is where whisper invents
//! text.

use std::{
    sync::{Arc, PoisonError},
    time::Duration,
};

use hark_audio::{
    config::seconds_of,
    earcon::Earcon,
    utterance::{self, Control, EndReason, Options},
};
use hark_core::room::{EndReason as Ended, Progress, Report};
use hark_stt::engine::Engine;
use hark_stt::recognizer::{SttError, Transcript};

use crate::{events::Event, state::ApplianceState};

mod ahead;
pub mod barge;

use ahead::{Ahead, AtPause, Glimpse, Pass, Speculative, clip_range, watcher};

pub use hark_core::room::{Heard, NO_SPEECH};
/// A pause held open because the words up to it stop midway is looked at
/// again this long into it (at least 200 ms after the first look), if
/// something sounded since, up to that sound: a quiet last word the
/// detector missed ("turn on the … lights") has been spoken by then, and
/// the turn need not wait out `audio.vad.max_pause_ms` (docs/benchmarks.md,
/// the turn).
const LOOK_AGAIN: Duration = Duration::from_millis(500);
/// After the first answer, read at `audio.vad.pause_ms` of silence, the
/// end-of-turn model's answers are read this often while the pause lasts.
const TURN_ASK_EVERY: Duration = Duration::from_millis(50);
/// Each answer of the end-of-turn model is asked for this long before it
/// is read (its tens of ms then overlap the pause, and the live engine's
/// words, instead of following them); it counts only if the pause lasts.
const TURN_ASK_LEAD: Duration = Duration::from_millis(50);
/// The probability at which an ask says "finished". Smart Turn's own
/// threshold is 0.5, but on the appliance's voice it gave 0.8–0.98 at many
/// pauses where a sentence went on after a comma (0.91 at the first ask in
/// "…the quarterly budget, and then…"), 0.96–0.99 at most finished
/// sentences, and 0.5–0.9 at ends that a second ask or the silence rule
/// catches anyway (docs/benchmarks.md, the turn).
const TURN_SURE: f32 = 0.95;
/// The first point of a pause's schedule (`audio.vad.pause_ms`, 300 ms)
/// is the one answer that may end the turn early. Later in a pause the
/// model is not asked (`TURN_AGREE` 0) and the silence decides: its
/// "finished" grows with the silence, at a comma spoken slowly as at an
/// end. Asked at 150 and 200 ms as before the wider set, it ended turns
/// at the pause between two sentences of one turn, which people make
/// 160–250 ms long (a telephone prompt's "There is a temporary greeting.
/// · …", a card list's "Eight of spades. · Four of clubs"): 13 of 55
/// turns cut, against 2 of 55 asked at 300 ms (docs/benchmarks.md, end of
/// turn on real speech).
const TURN_QUICK: u32 = 1;
const TURN_AGREE: u32 = 0;
/// The live engine is shown a pause this long before the first answer is
/// read, as the model is asked for it: the words (Moonshine takes some
/// tens of ms on a few seconds of speech) and the answer are made side by
/// side.
const WORDS_AHEAD: Duration = Duration::from_millis(50);
/// With the live engine's words, a pause where an answer of the model is
/// under this ("not yet") is not ended by its first answer, however sure a
/// later one is; the silence ends it (`TURN_DOUBTED`). The model's "not
/// yet" is right at thinking pauses and inside hesitations, and wrong at
/// the finished lines of some voices it has not met (a game's actors:
/// "What did you call me?" 0.01; docs/benchmarks.md, end of turn on real
/// speech). Held to the detector's 2.5 s before, such a line waited 2.5 s.
const TURN_DOUBT: f32 = 0.5;
/// The silence that ends a pause the model said "not yet" at where the
/// words read as finished: as long as `TURN_FINISHED`. Held 100 ms longer
/// (the silence rule's 800 ms), the whole set's median dead air rose from
/// about 700 to 771 ms and its p90 past a second, for no turn less cut:
/// on voices it has not met the model says "not yet" at most finished
/// lines.
const TURN_DOUBTED: Duration = Duration::from_millis(700);
/// The silence that ends a turn is at least this many times the longest
/// pause the person already came back from in it (their own pace), up to
/// `audio.vad.max_pause_ms`. A speaker who thinks aloud came back from
/// pauses of 0.9, 1.2 and 1.5 s, each after a shorter one not half as
/// long (a monologue of the real-speech set, cut at 1.5 times).
const TURN_PACE: f32 = 2.5;
/// The silence that ends a turn whose words read as a finished sentence
/// the model was unsure of (it scores read sentences inside a paragraph
/// 0.01–0.3, the reader's voice not falling): the words say the thought is
/// complete, so the wait is short of the silence rule's.
/// 700 ms, not the 600 the tuning sources preferred: a speaker's pause
/// after a complete clause ("…what your country can do for you," and his
/// 660 ms before going on) is read finished, and the model's answer there
/// is 0.45–0.6 at 200–250 ms from one run to the next (the audio it is
/// given ends a frame earlier or later), so no threshold on it holds the
/// pause reliably. A pause longer than this after a complete clause is
/// cut, and what follows it is the person going on (`crate::continuation`).
const TURN_FINISHED: Duration = Duration::from_millis(700);
/// The silence that ends a pause whose words stop midway ("…that we
/// could", "Send a message to"): the clearest sign of a thought not
/// finished, and rare at a real end (a misheard word), so the longest wait
/// the signals ask for; short of `audio.vad.max_pause_ms` all the same.
const TURN_MIDWAY: Duration = Duration::from_millis(1_500);
/// After an agent's own words (`converse`) the person may think before
/// answering, and more so mid-reply: the silence rule's share of the end
/// of turn is this much longer.
const REPLY_THINK: f32 = 1.5;
/// An expected answer (a yes or a no, one of the options offered) ends the
/// turn at the first decision point when it is this many words at most
/// beyond the option's own: "Yes." and "Yes please." end the turn, "yes,
/// but only the first one" is a sentence the person may still be in.
const ANSWER_SLACK_WORDS: usize = 2;

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("{0}")]
    NoEngine(String),
    #[error("there is no microphone: the audio engine is not running (audio.enabled = false)")]
    NoMicrophone,
    #[error(
        "the microphone is muted: the mute switch on the appliance is on, and only the person in the room can turn it off"
    )]
    Muted,
    #[error(
        "the microphone stopped delivering audio (device unplugged or failing); see get_status"
    )]
    Stalled,
    #[error("the recording failed: {0}")]
    Recorder(String),
    #[error("the speech-to-text engine stopped")]
    EngineStopped,
    #[error(
        "this call held the microphone longer than floor.max_hold_seconds ({0} s) and was cut off; what was said is dropped"
    )]
    HeldTooLong(u64),
    #[error(transparent)]
    Stt(#[from] SttError),
}

/// What to listen for.
#[derive(Debug)]
pub struct Listen {
    /// Who listens: an agent's name, or `None` for the person's own
    /// recording (the button).
    pub agent: Option<String>,
    /// How long to wait for speech to begin.
    pub timeout: Duration,
    /// Language spoken (ISO 639-1 or `auto`); `None`: `stt.language`.
    pub language: Option<String>,
    pub chime: Chime,
    /// Whether the button's push-to-talk holds this recording. Not for
    /// `confirm`, where a press is an answer.
    pub push_to_talk: bool,
    /// The floor this listen holds: let go the moment the recording ends
    /// (the next caller's microphone opens while this one transcribes), and
    /// its `floor.max_hold_seconds` ends the recording.
    pub turn: Option<crate::floor::Turn>,
    /// What the agent asked for: the end of the turn reads the live words
    /// with it.
    pub expect: Expect,
    /// Record from this capture ring position (the wake word's end)
    /// instead of a pre-roll back.
    pub start_at: Option<u64>,
    /// The person going on after a listen ended their turn
    /// ([`crate::continuation`]): no light, no event and no chime unless
    /// the voice begins.
    pub continuation: bool,
    /// What becomes of what the person says just after the turn ends.
    pub after: After,
}

/// What becomes of what the person goes on to say just after a listen
/// ended their turn (`audio.vad.continue_ms`): given where the listen left
/// them ([`Left`]) when the turn held speech. Made by
/// [`crate::continuation`] (kept for the listen's agent, or recorded for
/// Home Assistant's pipeline); the default lets the floor pass on at once.
#[derive(Default)]
pub struct After(Option<Box<dyn FnOnce(Left) + Send>>);

impl After {
    pub fn then(go_on: impl FnOnce(Left) + Send + 'static) -> Self {
        Self(Some(Box::new(go_on)))
    }
}

impl std::fmt::Debug for After {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "After(then)"
        } else {
            "After(nothing)"
        })
    }
}

/// Where a listen that heard speech left the person, for [`After`].
pub struct Left {
    /// The listen's floor, to hand on or let go.
    pub turn: crate::floor::Turn,
    /// Why the turn ended.
    pub ended: Ended,
    /// The capture position the recording ended at.
    pub from: u64,
    pub agent: Option<String>,
    pub language: Option<String>,
}

/// What kind of answer the agent waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Expect {
    /// Anything (`transcribe_voice`, the person's own recording).
    #[default]
    Anything,
    /// A yes or a no (`confirm`).
    YesNo,
    /// One of these options (`choose`).
    OneOf(Vec<String>),
    /// A reply to what the agent just said (`converse`).
    Reply,
}

/// How the live words `text` at a pause read for the end of the turn,
/// given what the agent asked for.
pub fn words_at_pause(
    text: &str,
    expect: &Expect,
    yes_no: &hark_core::words::YesNo,
) -> utterance::Words {
    use hark_core::words::{self, Answer, Choice};
    let reading = match hark_stt::turn::read(text) {
        hark_stt::turn::Reading::Finished => utterance::Words::Finished,
        hark_stt::turn::Reading::Open => utterance::Words::Open,
        hark_stt::turn::Reading::Midway => return utterance::Words::Midway,
    };
    let said = words::words(text).len();
    let answered = match expect {
        Expect::YesNo => said <= 1 + ANSWER_SLACK_WORDS && yes_no.classify(text) != Answer::Unclear,
        Expect::OneOf(options) => {
            let longest = options
                .iter()
                .map(|o| words::words(o).len())
                .max()
                .unwrap_or(1);
            said <= longest + ANSWER_SLACK_WORDS
                && matches!(
                    words::choose(text, options),
                    Choice::Named(_) | Choice::Ordinal(_) | Choice::NoneOfThem
                )
        }
        Expect::Anything | Expect::Reply => false,
    };
    if answered {
        utterance::Words::Answer
    } else {
        reading
    }
}

/// The rising chime that says "speak now".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chime {
    /// Play it to its end, then open the microphone: with half duplex the
    /// speaker mutes capture, so speech begun during it would be lost.
    First,
    /// Open the microphone (and show the light) at once and play it
    /// alongside: the person pressed the button and waits for the light.
    Alongside,
    /// No chime: the person interrupted Hark and is already speaking.
    None,
}

/// Cancels the recording when the listen is dropped before it ends.
struct CancelOnDrop(Arc<Control>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Tells the event stream and the listening call what the person has said
/// so far.
async fn so_far_heard(
    bus: &crate::events::Bus,
    agent: &Option<String>,
    listen: u64,
    text: &str,
    progress: &mut dyn Report,
) {
    if text.is_empty() {
        return;
    }
    bus.publish(Event::UtterancePartial {
        listen,
        agent: agent.clone(),
        text: text.to_owned(),
    });
    progress.report(Progress::Partial(text.to_owned())).await;
}

/// The tone an agent's chime is played in.
fn tone(chime: hark_core::agents::Chime) -> hark_audio::earcon::Tone {
    use hark_audio::earcon::Tone;
    use hark_core::agents::Chime;
    match chime {
        Chime::Default => Tone::Default,
        Chime::High => Tone::High,
        Chime::Low => Tone::Low,
        Chime::Triple => Tone::Triple,
    }
}

fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Listens once (see the module docs). Fails at once while the mute is on,
/// and with [`ListenError::Muted`] if it goes on mid-recording (nothing
/// heard is kept).
pub async fn listen(
    state: &Arc<ApplianceState>,
    request: Listen,
    progress: &mut dyn Report,
) -> Result<Heard, ListenError> {
    let stt = &state.ears.stt;
    let language = request.language.clone();
    let agent = request.agent.clone();
    let Turn {
        utterance,
        reason,
        listen_id,
        ahead,
        engine,
    } = record_turn(state, request, progress, stt.speculative).await?;
    let recorded = seconds(Duration::from_secs_f64(seconds_of(utterance.samples.len())));
    let Some((start, end)) = utterance.speech else {
        return Ok(Heard {
            text: NO_SPEECH.into(),
            speech: false,
            end_reason: reason,
            duration: recorded,
            language: None,
            speech_start: None,
            speech_end: None,
            segments: Vec::new(),
            confidence: None,
            model: None,
            transcribe_ms: None,
            speculative: false,
            continuation: false,
            listen: listen_id,
        });
    };

    progress.report(Progress::Transcribing).await;
    let (from, clip, early) = match ahead.for_turn((start, end)) {
        Some(mut early) => (early.from, std::mem::take(&mut early.clip), Some(early)),
        None => {
            let range = clip_range((start, end), utterance.samples.len());
            (range.start, utterance.samples[range].to_vec(), None)
        }
    };
    if let Some(history) = state.keeping.history.as_ref() {
        history.stash_audio(listen_id, &clip);
    }
    let (transcript, from_early) = transcribe(stt, engine, clip, early, language).await?;
    let offset = seconds_of(from);
    let text = if transcript.text.is_empty() {
        NO_SPEECH.to_owned()
    } else {
        transcript.text.clone()
    };
    let segments: Vec<_> = transcript
        .segments
        .iter()
        .map(|s| {
            serde_json::json!({
                "start": seconds(Duration::from_secs_f64(s.start + offset)),
                "end": seconds(Duration::from_secs_f64(s.end + offset)),
                "text": s.text,
                "confidence": s.confidence,
            })
        })
        .collect();
    let heard = Heard {
        text,
        speech: !transcript.text.is_empty(),
        end_reason: reason,
        duration: recorded,
        language: Some(transcript.language.clone()),
        speech_start: Some(seconds(start)),
        speech_end: Some(seconds(end)),
        segments,
        confidence: Some(transcript.confidence),
        model: Some(transcript.model.clone()),
        transcribe_ms: Some(transcript.elapsed_ms),
        speculative: from_early,
        continuation: false,
        listen: listen_id,
    };
    if heard.speech {
        state.bus.publish(Event::UtteranceTranscribed {
            listen: listen_id,
            agent,
            text: heard.text.clone(),
            confidence: heard.confidence,
            duration: seconds(end.saturating_sub(start)),
            end_reason: reason,
        });
    }
    Ok(heard)
}

/// Records one turn for someone who transcribes it themselves (Home
/// Assistant's pipeline): as [`listen`] records, without the final
/// transcription. The live engine still reads the words at pauses (with
/// `stt.speculative`): the end of the turn is decided on them as for an
/// agent's listen, so a finished sentence is not held to the longest pause.
pub async fn record(
    state: &Arc<ApplianceState>,
    request: Listen,
    progress: &mut dyn Report,
) -> Result<hark_core::room::Recorded, ListenError> {
    let turn = record_turn(state, request, progress, state.ears.stt.speculative).await?;
    let samples = turn
        .utterance
        .samples
        .iter()
        .map(|v| (v.clamp(-1.0, 1.0) * 32767.0) as i16)
        .collect();
    Ok(hark_core::room::Recorded {
        samples,
        speech: turn.utterance.speech.is_some(),
        end_reason: turn.reason,
    })
}

/// A recording to its end: what [`record_turn`] gives the transcription.
struct Turn {
    utterance: utterance::Utterance,
    reason: Ended,
    listen_id: u64,
    /// The passes begun ahead of the end of the turn.
    ahead: Ahead,
    /// The engine that transcribes it.
    engine: Arc<Engine>,
}

/// Records one turn (see the module docs): the floor, the chimes and the
/// light, push-to-talk, the mute, the end of the turn. `speculative`:
/// begin the final transcription at the first pause.
async fn record_turn(
    state: &Arc<ApplianceState>,
    request: Listen,
    progress: &mut dyn Report,
    speculative: bool,
) -> Result<Turn, ListenError> {
    let stt = &state.ears.stt;
    // The live engine for English, whisper otherwise.
    let engine = Arc::clone(
        stt.microphone(request.language.as_deref())
            .map_err(|why| ListenError::NoEngine(why.to_owned()))?,
    );
    let mic = state
        .ears
        .microphone
        .as_ref()
        .ok_or(ListenError::NoMicrophone)?;
    let turn = request.turn;
    let deadline = turn.as_ref().map(|t| t.deadline);
    let max_hold = state.floor.max_hold.as_secs();
    // Watched from before the check, so a mute between the two is seen.
    let mut mute = state.bus.watch();
    if mute.borrow_and_update().muted {
        return Err(ListenError::Muted);
    }
    // Each agent's own chime, so the person hears who listens.
    let chime = match &request.agent {
        Some(agent) => Earcon::ListenStartIn(tone(state.keeping.agents.earcon(agent))),
        None => Earcon::ListenStart,
    };
    if request.chime == Chime::First {
        crate::audio::play_through(state.voice.player(), chime).await;
    }
    // The microphone shows open from here until the guard drops, whatever
    // ends the recording; the person's going on shows once their voice
    // begins.
    let mut recording = (!request.continuation)
        .then(|| crate::state::RecordingGuard::open(&state.bus, request.agent.clone()));
    if request.chime == Chime::Alongside {
        state.voice.play(chime);
    }
    progress.report(Progress::Listening).await;
    let control = Arc::new(Control::default());
    let _cancel = CancelOnDrop(Arc::clone(&control));
    if request.push_to_talk {
        // The board's button holds this recording open while it is down and
        // ends it when it comes up.
        state.conductor.recording(&control);
    }
    let mut options = Options::new(request.timeout, mic.preroll, mic.vad.clone());
    options.start_at = request.start_at;
    let live = stt.live().is_some_and(|live| Arc::ptr_eq(live, &engine));
    let at_pause: AtPause = Arc::default();
    if let Some(end_of_turn) = end_of_turn(
        &state.ears.yes_no,
        mic,
        stt,
        live,
        &at_pause,
        &request.expect,
    ) {
        // The model and the words decide at pauses; the detector's own
        // hang-over becomes the longest pause inside a turn.
        options.end_of_turn = Some(end_of_turn);
        options.vad.hangover_ms = mic.vad.max_pause_ms;
    }
    // Transcribe ahead of the end of the turn: partial transcripts while
    // the person speaks (the live engine only: it costs a few tens of ms
    // per pass), and the final pass begun at the first pause.
    let (glimpse_tx, mut glimpses) = tokio::sync::mpsc::channel(8);
    options.watch = watch(mic, stt, live, &options, glimpse_tx);
    let mut ahead = Ahead::new(
        Arc::clone(&engine),
        request.language.clone(),
        speculative,
        at_pause,
    );
    let (ring, ctl) = (Arc::clone(&mic.ring), Arc::clone(&control));
    let mut recorder =
        tokio::task::spawn_blocking(move || utterance::record(&ring, &options, &ctl));
    // The recorder raises a flag when speech begins; look at it every 50 ms
    // until it has.
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    let mut announced = false;
    let utterance = loop {
        tokio::select! {
            // Ahead of the recorder: the glimpse of a pause it shows just
            // before it ends the turn there starts the final pass.
            biased;
            Some(glimpse) = glimpses.recv() => ahead.glimpse(glimpse),
            done = &mut recorder => {
                break done.map_err(|e| ListenError::Recorder(e.to_string()))?;
            }
            () = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            } => {
                control.cancel();
                let _ = recorder.await;
                if let Some(recording) = recording.as_mut() {
                    recording.ended(Ended::HeldTooLong);
                }
                tracing::warn!(max_hold, "listening cut off: the floor was held too long");
                return Err(ListenError::HeldTooLong(max_hold));
            }
            changed = mute.changed() => {
                if changed.is_ok() && mute.borrow_and_update().muted {
                    // The mute switch went on mid-recording: nothing heard
                    // is kept (capture stores silence from now on; what
                    // came before is dropped with the recording).
                    control.cancel();
                    let _ = recorder.await;
                    if let Some(recording) = recording.as_mut() {
                        recording.ended(Ended::Muted);
                    }
                    tracing::info!("listening ended: the microphone was muted");
                    return Err(ListenError::Muted);
                }
            }
            _ = tick.tick(), if !announced => {
                if control.speech_started() {
                    announced = true;
                    recording
                        .get_or_insert_with(|| crate::state::RecordingGuard::open(&state.bus, request.agent.clone()))
                        .speech_detected();
                    progress.report(Progress::SpeechDetected).await;
                }
            }
            done = ahead.done() => {
                if let (Some(text), Some(recording)) = (ahead.settle(done), recording.as_ref()) {
                    so_far_heard(&state.bus, &request.agent, recording.id, &text, progress).await;
                }
            }
        }
    };
    // A partial transcript is not wanted any more: abandoned now.
    ahead.stop_partial();
    let reason = match utterance.reason {
        EndReason::EndOfSpeech => Ended::EndOfSpeech,
        EndReason::EndOfTurn => Ended::EndOfTurn,
        EndReason::NoSpeech => Ended::Timeout,
        EndReason::MaxLength => Ended::MaxLength,
        EndReason::Stopped => Ended::Stopped,
        EndReason::Cancelled => Ended::Cancelled,
        EndReason::CaptureStalled => Ended::Stalled,
    };
    // Speech the ticks did not see begin (it ended within one) shows too.
    if utterance.speech.is_some() && recording.is_none() {
        recording = Some(crate::state::RecordingGuard::open(
            &state.bus,
            request.agent.clone(),
        ));
    }
    let shown = recording.is_some();
    let listen_id = recording.as_ref().map_or(0, |r| r.id);
    if let Some(mut recording) = recording {
        recording.ended(reason);
    }
    // The next caller may listen while this one transcribes; when the
    // person may go on, the floor is theirs for a moment first.
    match (turn, request.after.0) {
        (Some(turn), Some(go_on)) if utterance.speech.is_some() => go_on(Left {
            turn,
            ended: reason,
            from: utterance.end,
            agent: request.agent.clone(),
            language: request.language.clone(),
        }),
        (turn, _) => drop(turn),
    }
    if shown {
        state.voice.play(Earcon::ListenStop);
    }
    tracing::info!(%reason, speech = ?utterance.speech,
        seconds = seconds_of(utterance.samples.len()), "utterance recorded");
    if utterance.reason == EndReason::CaptureStalled {
        return Err(ListenError::Stalled);
    }
    Ok(Turn {
        utterance,
        reason,
        listen_id,
        ahead,
        engine,
    })
}

/// The end-of-turn rule for this listen, when the model decides: it is
/// asked at pauses, and (with the live engine's words at a pause, in
/// `at_pause`) the words may hold a pause open.
fn end_of_turn(
    yes_no: &crate::words::YesNo,
    mic: &crate::stt::Microphone,
    stt: &crate::stt::SpeechToText,
    live: bool,
    at_pause: &AtPause,
    expect: &Expect,
) -> Option<utterance::EndOfTurn> {
    if mic.vad.end_of_turn != hark_audio::config::EndOfTurnRule::SmartTurn {
        return None;
    }
    let model = Arc::clone(stt.turn.as_ref()?);
    let words = (live && stt.speculative).then(|| {
        let at_pause = Arc::clone(at_pause);
        let (expect, yes_no) = (expect.clone(), yes_no.clone());
        let check: utterance::WordsCheck = Arc::new(move |span| {
            let heard = at_pause.lock().unwrap_or_else(PoisonError::into_inner);
            heard
                .as_ref()
                .filter(|(at, _)| *at == span)
                .map(|(_, text)| words_at_pause(text, &expect, &yes_no))
        });
        check
    });
    let check: utterance::TurnCheck = Arc::new(move |audio: &[f32]| {
        let mut model = model.lock().unwrap_or_else(PoisonError::into_inner);
        let asked = std::time::Instant::now();
        match model.complete(audio) {
            Ok(p) => {
                tracing::debug!(
                    probability = p,
                    seconds = seconds_of(audio.len()),
                    ms = asked.elapsed().as_millis() as u64,
                    "end of turn?"
                );
                Some(p)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the end-of-turn model failed; silence decides");
                None
            }
        }
    });
    Some(turn_rule(&mic.vad, expect, check, words))
}

/// The end-of-turn rule for a listen that expects `expect`, with the
/// model's `check` and (from the live engine) the `words` at a pause: the
/// listen path's, and `hark-bench eot`'s when it replays the recorder on
/// recorded people.
pub fn turn_rule(
    vad: &hark_audio::config::VadConfig,
    expect: &Expect,
    check: utterance::TurnCheck,
    words: Option<utterance::WordsCheck>,
) -> utterance::EndOfTurn {
    let fallback = Duration::from_millis(u64::from(vad.hangover_ms));
    utterance::EndOfTurn {
        pause: Duration::from_millis(u64::from(vad.pause_ms)),
        every: TURN_ASK_EVERY,
        lead: TURN_ASK_LEAD,
        sure: TURN_SURE,
        quick: TURN_QUICK,
        agree: TURN_AGREE,
        words,
        fallback: if *expect == Expect::Reply {
            fallback.mul_f32(REPLY_THINK)
        } else {
            fallback
        },
        doubt: TURN_DOUBT,
        pace: TURN_PACE,
        finished: TURN_FINISHED,
        doubted: TURN_DOUBTED,
        midway: TURN_MIDWAY,
        check,
    }
}

/// What the recorder shows of the speech so far, and when: partial
/// transcripts need it every `stt.partial_ms` (the live engine only), the
/// early final pass at pauses. `None`: nothing is transcribed ahead.
fn watch(
    mic: &crate::stt::Microphone,
    stt: &crate::stt::SpeechToText,
    live: bool,
    options: &Options,
    glimpses: tokio::sync::mpsc::Sender<Glimpse>,
) -> Option<utterance::Watch> {
    let partial_every = stt.partial_every.filter(|_| live);
    if partial_every.is_none() && !stt.speculative {
        return None;
    }
    let pause = Duration::from_millis(u64::from(mic.vad.pause_ms));
    // Only the words of the live engine hold a pause open.
    let words = options
        .end_of_turn
        .as_ref()
        .is_some_and(|turn| turn.words.is_some());
    Some(utterance::Watch {
        every: partial_every,
        // The words are wanted at the first ask; whisper, too slow to be
        // read there, starts at the pause itself (fewer passes thrown away
        // when speech resumes). Not before 100 ms: shorter gaps are mostly
        // the closures inside words.
        pause: if words {
            pause
                .saturating_sub(WORDS_AHEAD)
                .max(Duration::from_millis(100))
        } else {
            pause
        },
        pauses: stt.speculative,
        again: words.then(|| LOOK_AGAIN.max(pause + Duration::from_millis(200))),
        watcher: watcher(glimpses),
    })
}

/// The turn's transcript: the early pass's when it holds it, else a pass
/// on `clip`; whisper takes over a clip the live engine fails on or runs
/// away with (the transcript names the model that wrote it). Also whether
/// the early pass was used.
async fn transcribe(
    stt: &crate::stt::SpeechToText,
    engine: Arc<Engine>,
    clip: Vec<f32>,
    mut early: Option<Speculative>,
    language: Option<String>,
) -> Result<(Transcript, bool), ListenError> {
    // Only when whisper could take over is a copy of the clip kept for it.
    let mut retry = stt
        .engine()
        .ok()
        .filter(|whisper| !Arc::ptr_eq(whisper, &engine))
        .map(|whisper| (Arc::clone(whisper), clip.clone()));
    let (mut engine, mut audio) = (engine, clip);
    loop {
        let outcome = match early.take() {
            Some(Speculative {
                result: Some(result),
                ..
            }) => Some(result),
            Some(Speculative {
                pass: Some(mut pass),
                ..
            }) => pass.done().await,
            _ => None,
        };
        let from_early = outcome.is_some();
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => Pass::submit(&engine, std::mem::take(&mut audio), language.clone(), false)?
                .done()
                .await
                .ok_or(ListenError::EngineStopped)?,
        };
        match outcome {
            Err(e @ (SttError::Live(_) | SttError::Unsupported(_))) => match retry.take() {
                Some((whisper, copy)) => {
                    tracing::warn!(error = %e, "the live engine failed; whisper transcribes this one");
                    (engine, audio) = (whisper, copy);
                }
                None => return Err(e.into()),
            },
            // A runaway decode: whisper's reading of the clip, not the
            // live engine's repetitions.
            Ok(cut) if cut.truncated => match retry.take() {
                Some((whisper, copy)) => {
                    tracing::warn!(
                        seconds = cut.duration,
                        "the live engine ran out of its token budget on this turn; whisper transcribes it"
                    );
                    (engine, audio) = (whisper, copy);
                }
                None => {
                    tracing::warn!(
                        seconds = cut.duration,
                        "the live engine ran out of its token budget on this turn and whisper is not there; the transcript is cut"
                    );
                    return Ok((cut, from_early));
                }
            },
            other => return Ok((other?, from_early)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hark_audio::utterance::Words;
    use hark_core::words::YesNo;

    use super::{Expect, words_at_pause};

    fn read(text: &str, expect: &Expect) -> Words {
        words_at_pause(text, expect, &YesNo::default())
    }

    #[test]
    fn a_yes_or_a_no_is_the_whole_answer_to_a_yes_no_question() {
        assert_eq!(read("Yes.", &Expect::YesNo), Words::Answer);
        assert_eq!(read("No, thanks.", &Expect::YesNo), Words::Answer);
        // Not a yes or a no, or a sentence that may go on: as read.
        assert_eq!(read("Let me think.", &Expect::YesNo), Words::Finished);
        assert_eq!(read("Yes, but", &Expect::YesNo), Words::Midway);
        assert_eq!(
            read("Yes, but only the first one on the list.", &Expect::YesNo),
            Words::Finished
        );
        // Without the question, "Yes." is only a finished sentence.
        assert_eq!(read("Yes.", &Expect::Anything), Words::Finished);
        assert_eq!(read("Yes.", &Expect::Reply), Words::Finished);
    }

    #[test]
    fn a_reply_to_the_agent_is_given_longer_to_think_than_other_turns() {
        let vad = hark_audio::config::VadConfig::default();
        let rule = |expect: &Expect| super::turn_rule(&vad, expect, Arc::new(|_| None), None);
        let silence = std::time::Duration::from_millis(u64::from(vad.hangover_ms));
        assert_eq!(rule(&Expect::Anything).fallback, silence);
        assert_eq!(rule(&Expect::YesNo).fallback, silence);
        assert_eq!(rule(&Expect::Reply).fallback, silence.mul_f32(1.5));
    }

    #[test]
    fn one_of_the_options_offered_is_the_whole_answer_to_a_choice() {
        let options = Expect::OneOf(vec!["Firefox".into(), "Chromium".into(), "six".into()]);
        assert_eq!(read("Firefox.", &options), Words::Answer);
        assert_eq!(read("Six.", &options), Words::Answer);
        assert_eq!(read("The second one.", &options), Words::Answer);
        assert_eq!(read("None of them.", &options), Words::Answer);
        assert_eq!(read("Hmm, I wonder.", &options), Words::Finished);
        assert_eq!(read("Firefox and", &options), Words::Midway);
        assert_eq!(
            read(
                "Firefox, I think, because the other one crashed twice.",
                &options
            ),
            Words::Finished
        );
    }
}
