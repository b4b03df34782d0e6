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
    sync::{
        Arc, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hark_audio::{
    earcon::Earcon,
    utterance::{self, Control, EndReason, Options},
};
use hark_core::room::{EndReason as Ended, Progress, Report};
use hark_stt::engine::{Request, SttError};

use crate::{events::Event, state::ApplianceState};

pub use hark_core::room::{Heard, NO_SPEECH};
/// Audio kept before the detected start of speech: the detector decides a
/// little after the first sound.
const LEAD: Duration = Duration::from_millis(250);
/// Audio kept after the detected end: word endings trail off below the
/// detector's threshold.
const TAIL: Duration = Duration::from_millis(400);
/// A pause held open because the words up to it stop midway is looked at
/// again this long into it (at least 200 ms after the first look), if
/// something sounded since, up to that sound: a quiet last word the
/// detector missed ("turn on the … lights") has been spoken by then, and
/// the turn need not wait out `audio.vad.max_pause_ms` (docs/benchmarks.md,
/// the turn).
const LOOK_AGAIN: Duration = Duration::from_millis(500);
/// Quiet a second look keeps after the last sound (samples): about what
/// the first look had after the voice (it is shown a pause 150 ms in).
/// The rest of the pause is left out, as the live engine reads words
/// into quiet.
const QUIET_AFTER_SOUND: usize = 16_000 * 150 / 1000;
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
/// The first points of a pause's schedule (150 and 200 ms), where one
/// answer may end the turn. Later in a pause the model is not asked
/// (`TURN_AGREE` 0) and the silence rule decides: its "finished" grows
/// with the silence, at a comma spoken slowly as at an end. With two sure
/// answers in a row allowed to end it later, the bench's turns were cut
/// at ", and then …" in 3 of 24 (0.96 and 0.97 at 270–320 ms; 0.95, 0.97
/// and 0.98 at 210–290 ms), while the finished sentences it ended that
/// way would have ended at 800 ms instead of 300–470 (docs/benchmarks.md,
/// the turn).
const TURN_QUICK: u32 = 2;
const TURN_AGREE: u32 = 0;
/// The live engine is shown a pause this long before the first answer is
/// read, as the model is asked for it: the words (Moonshine takes some
/// tens of ms on a few seconds of speech) and the answer are made side by
/// side.
const WORDS_AHEAD: Duration = Duration::from_millis(50);

/// The live transcript of the speech up to a pause, and that pause's span.
type AtPause = Arc<std::sync::Mutex<Option<((Duration, Duration), String)>>>;

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

/// Abandons the transcription when the listen is dropped before it ends.
struct AbandonOnDrop(Arc<AtomicBool>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The part of a recording that goes to speech to text: the detector's
/// speech span, from [`LEAD`] before it to [`TAIL`] after (as far as the
/// recording goes), as sample offsets.
fn clip_range((start, end): (Duration, Duration), len: usize) -> std::ops::Range<usize> {
    let rate = 16_000.0;
    let from = (start.saturating_sub(LEAD).as_secs_f64() * rate) as usize;
    let to = (((end + TAIL).as_secs_f64() * rate) as usize).min(len);
    from.min(to)..to
}

/// What a recording shows while it goes on, copied off the recorder's
/// thread (see [`utterance::SoFar`]).
enum Glimpse {
    /// The speech so far, for a partial transcript.
    Speaking(Vec<f32>),
    /// The first pause: the clip the turn's transcription would get if the
    /// turn ends here, where it starts in the recording, and the span.
    Paused {
        clip: Vec<f32>,
        from: usize,
        speech: (Duration, Duration),
        /// The second look at a pause held open: the clip runs to the
        /// end of what was recorded.
        again: bool,
    },
    Resumed,
}

/// A transcription running on the engine ahead of the end of the turn;
/// dropping it abandons it.
struct Pass {
    reply: tokio::sync::oneshot::Receiver<Result<hark_stt::engine::Transcript, SttError>>,
    _abandon: AbandonOnDrop,
}

impl Pass {
    fn submit(
        engine: &hark_stt::engine::Engine,
        audio: Vec<f32>,
        language: Option<String>,
        draft: bool,
    ) -> Result<Self, SttError> {
        let mut request = Request::new(audio);
        request.language = language;
        request.draft = draft;
        let abandon = AbandonOnDrop(Arc::clone(&request.cancel));
        Ok(Self {
            reply: engine.submit(request)?,
            _abandon: abandon,
        })
    }

    /// [`Pass::submit`] ahead of the turn's end, where a refusal (a full
    /// queue) only means the final pass starts later.
    fn ahead(
        engine: &hark_stt::engine::Engine,
        audio: Vec<f32>,
        language: Option<String>,
        draft: bool,
    ) -> Option<Self> {
        Self::submit(engine, audio, language, draft)
            .map_err(|e| tracing::debug!(error = %e, "no transcription ahead of the turn's end"))
            .ok()
    }

    /// The transcript, or `None` if the engine dropped the request.
    async fn done(&mut self) -> Option<Result<hark_stt::engine::Transcript, SttError>> {
        (&mut self.reply).await.ok()
    }
}

/// Waits for the pass, if there is one; forever otherwise (a disabled
/// `select!` branch).
async fn finished(
    pass: &mut Option<Pass>,
) -> Option<Result<hark_stt::engine::Transcript, SttError>> {
    match pass {
        Some(pass) => pass.done().await,
        None => std::future::pending().await,
    }
}

/// The final pass begun at the first pause: its clip (kept for the history
/// and for whisper if the live engine fails), and its result once it is in.
struct Speculative {
    speech: (Duration, Duration),
    from: usize,
    clip: Vec<f32>,
    pass: Option<Pass>,
    result: Option<Result<hark_stt::engine::Transcript, SttError>>,
    /// A second look's: what the first look heard. The end-of-turn rule
    /// reads the new words only if they go further (words the first look
    /// could not hear yet), not a second reading of the same ones.
    before: Option<String>,
}

/// Waits for the early pass, if one runs; forever otherwise.
async fn early(
    speculative: &mut Option<Speculative>,
) -> Option<Result<hark_stt::engine::Transcript, SttError>> {
    match speculative {
        Some(early) => finished(&mut early.pass).await,
        None => std::future::pending().await,
    }
}

/// The words of a pass at a pause for the end-of-turn rule to read. A pass
/// that ran away ("…send it to Anna and then send it to") ends on whatever
/// word the loop stopped at, often one no sentence ends on: read, it would
/// hold a finished sentence open to `audio.vad.max_pause_ms`. It reads as
/// no words instead, which leaves the end to the model and the silence.
fn words_to_read(heard: &hark_stt::engine::Transcript) -> &str {
    if heard.truncated { "" } else { &heard.text }
}

/// Tells the event stream and the listening call what the person has said
/// so far.
async fn so_far_heard(
    state: &ApplianceState,
    agent: &Option<String>,
    listen: u64,
    text: &str,
    progress: &mut dyn Report,
) {
    if text.is_empty() {
        return;
    }
    state.bus.publish(Event::UtterancePartial {
        listen,
        agent: agent.clone(),
        text: text.to_owned(),
    });
    progress.report(Progress::Partial(text.to_owned())).await;
}

/// The watcher that copies what the recorder shows into `glimpses`
/// (bounded: a partial that finds it full is skipped; a lost pause only
/// means no early start, since the final span is compared before an early
/// result is used).
fn watcher(glimpses: tokio::sync::mpsc::Sender<Glimpse>) -> utterance::Watcher {
    Arc::new(move |so_far| {
        let glimpse = match so_far {
            utterance::SoFar::Speaking { audio, start } => {
                let from = clip_range((start, start), audio.len()).start;
                Glimpse::Speaking(audio[from..].to_vec())
            }
            utterance::SoFar::Paused {
                audio,
                speech,
                again,
            } => {
                let mut range = clip_range(speech, audio.len());
                if again {
                    range.end = audio.len();
                }
                Glimpse::Paused {
                    from: range.start,
                    clip: audio[range].to_vec(),
                    speech,
                    again,
                }
            }
            utterance::SoFar::Resumed => Glimpse::Resumed,
        };
        if glimpses.try_send(glimpse).is_err() {
            tracing::debug!("listening fell behind the recording; a glimpse was skipped");
        }
    })
}

pub fn play(state: &ApplianceState, earcon: Earcon) {
    if let Some(player) = state.player()
        && let Err(e) = player.play(&earcon.clip())
    {
        tracing::debug!(error = %e, "earcon not played");
    }
}

/// Plays `earcon` and waits until it has been heard (at most 2 s): before
/// a recording opens, since with half duplex the speaker mutes capture.
pub async fn play_through(state: &ApplianceState, earcon: Earcon) {
    let Some(player) = state.player() else { return };
    match player.play(&earcon.clip()) {
        Ok(done) => {
            let _ = tokio::task::spawn_blocking(move || done.recv_timeout(Duration::from_secs(2)))
                .await;
        }
        Err(e) => tracing::debug!(error = %e, "earcon not played"),
    }
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

/// Seconds of 16 kHz samples.
fn seconds_of(samples: usize) -> f64 {
    samples as f64 / 16_000.0
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
    let stt = &state.stt;
    // The live engine for English, whisper otherwise.
    let engine = Arc::clone(
        stt.microphone(request.language.as_deref())
            .map_err(|why| ListenError::NoEngine(why.to_owned()))?,
    );
    let mic = state.microphone.as_ref().ok_or(ListenError::NoMicrophone)?;
    let turn = request.turn;
    let deadline = turn.as_ref().map(|t| t.deadline);
    let max_hold = state.floor().max_hold.as_secs();
    // Watched from before the check, so a mute between the two is seen.
    let mut mute = state.bus.watch();
    if state.muted.load(Ordering::Acquire) || mute.borrow_and_update().muted {
        return Err(ListenError::Muted);
    }
    // Each agent's own chime, so the person hears who listens.
    let chime = match &request.agent {
        Some(agent) => Earcon::ListenStartIn(tone(state.agents().earcon(agent))),
        None => Earcon::ListenStart,
    };
    if request.chime == Chime::First {
        play_through(state, chime).await;
    }
    // The microphone shows open from here until the guard drops, whatever
    // ends the recording.
    let mut recording = state.start_recording(request.agent.clone());
    if request.chime == Chime::Alongside {
        play(state, chime);
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
    let live = stt.live().is_some_and(|live| Arc::ptr_eq(live, &engine));
    let pause = Duration::from_millis(u64::from(mic.vad.pause_ms));
    // The live engine's transcript of the speech up to the current pause
    // (the early pass's), for the end-of-turn rule to read.
    let at_pause: AtPause = Arc::default();
    // End of turn: the model and the words decide at pauses; the
    // detector's own hang-over becomes the longest pause inside a turn.
    if mic.vad.end_of_turn == hark_audio::config::EndOfTurnRule::SmartTurn
        && let Some(model) = stt.turn.as_ref()
    {
        let model = Arc::clone(model);
        let words = (live && stt.speculative).then(|| {
            let at_pause = Arc::clone(&at_pause);
            let check: utterance::WordsCheck = Arc::new(move |span| {
                let heard = at_pause.lock().unwrap_or_else(PoisonError::into_inner);
                heard
                    .as_ref()
                    .filter(|(at, _)| *at == span)
                    .map(|(_, text)| match hark_stt::turn::read(text) {
                        hark_stt::turn::Reading::Finished => utterance::Words::Finished,
                        hark_stt::turn::Reading::Open => utterance::Words::Open,
                        hark_stt::turn::Reading::Midway => utterance::Words::Midway,
                    })
            });
            check
        });
        options.end_of_turn = Some(hark_audio::utterance::EndOfTurn {
            pause,
            every: TURN_ASK_EVERY,
            lead: TURN_ASK_LEAD,
            sure: TURN_SURE,
            quick: TURN_QUICK,
            agree: TURN_AGREE,
            words,
            fallback: Duration::from_millis(u64::from(mic.vad.hangover_ms)),
            check: Arc::new(move |audio: &[f32]| {
                let mut model = model
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
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
            }),
        });
        options.vad.hangover_ms = mic.vad.max_pause_ms;
    }
    // Transcribe ahead of the end of the turn: partial transcripts while
    // the person speaks (the live engine only: it costs a few tens of ms
    // per pass), and the final pass begun at the first pause.
    let partial_every = stt.partial_every.filter(|_| live);
    let (glimpse_tx, mut glimpses) = tokio::sync::mpsc::channel(8);
    if partial_every.is_some() || stt.speculative {
        // Only the words of the live engine hold a pause open.
        let words = options
            .end_of_turn
            .as_ref()
            .is_some_and(|turn| turn.words.is_some());
        options.watch = Some(utterance::Watch {
            every: partial_every,
            // The words are wanted at the first ask; whisper, too slow to
            // be read there, starts at the pause itself (fewer passes
            // thrown away when speech resumes). Not before 100 ms: shorter
            // gaps are mostly the closures inside words.
            pause: if words {
                pause
                    .saturating_sub(WORDS_AHEAD)
                    .max(Duration::from_millis(100))
            } else {
                pause
            },
            pauses: stt.speculative,
            again: words.then(|| LOOK_AGAIN.max(pause + Duration::from_millis(200))),
            watcher: watcher(glimpse_tx),
        });
    }
    let mut partial: Option<Pass> = None;
    let mut speculative: Option<Speculative> = None;
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
            Some(glimpse) = glimpses.recv() => match glimpse {
                Glimpse::Speaking(audio) => {
                    // One pass at a time: one still running is skipped.
                    if partial.is_none() && speculative.is_none() {
                        partial = Pass::ahead(&engine, audio, request.language.clone(), true);
                    }
                }
                Glimpse::Paused { mut clip, from, speech, again } => {
                    let first = speculative
                        .as_ref()
                        .filter(|early| again && early.speech == speech && early.from == from);
                    // A second look hears further only if something sounded
                    // after the first, and is given the clip up to that
                    // sound: over quiet the live engine may read words in
                    // ("… that we could do."), which would let a thinking
                    // pause go.
                    let seen = first.map(|early| early.clip.len());
                    match seen.map(|seen| (seen, hark_stt::level::sound_after(&clip, seen))) {
                        Some((_, None)) => {
                            tracing::debug!(speech = ?speech,
                                "a pause held open as mid-sentence: nothing sounded after the first look; still held");
                            continue;
                        }
                        Some((seen, Some(end))) => {
                            tracing::debug!(first = seconds_of(seen), sound_end = seconds_of(end),
                                recorded = seconds_of(clip.len()), "something sounded after the first look");
                            clip.truncate(end + QUIET_AFTER_SOUND);
                        }
                        None => {}
                    }
                    // The pause's pass matters more than one on less audio.
                    partial = None;
                    let before = first
                        .and_then(|early| early.result.as_ref()?.as_ref().ok())
                        .map(|heard| heard.text.clone());
                    if again {
                        tracing::debug!(speech = ?speech, heard = ?before,
                            "a pause held open as mid-sentence: transcribing all of it again");
                    } else if stt.speculative {
                        tracing::debug!(speech = ?speech, "the final transcription starts early, at a pause");
                    }
                    speculative = stt.speculative.then(|| Speculative {
                        speech,
                        from,
                        pass: Pass::ahead(&engine, clip.clone(), request.language.clone(), false),
                        clip,
                        result: None,
                        before,
                    });
                }
                Glimpse::Resumed => {
                    if speculative.take().is_some() {
                        tracing::debug!("the early transcription is thrown away: speech resumed");
                    }
                }
            },
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
                recording.ended(Ended::HeldTooLong);
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
                    recording.ended(Ended::Muted);
                    tracing::info!("listening ended: the microphone was muted");
                    return Err(ListenError::Muted);
                }
            }
            _ = tick.tick(), if !announced => {
                if control.speech_started() {
                    announced = true;
                    recording.speech_detected();
                    progress.report(Progress::SpeechDetected).await;
                }
            }
            done = finished(&mut partial) => {
                partial = None;
                match done {
                    // Speech cut off mid-word can set the live engine
                    // running on ("…moved to to to to"): such a text is
                    // not what the person said so far.
                    Some(Ok(so_far)) if so_far.truncated => {
                        tracing::debug!(text = %so_far.text, "a partial transcript ran away; not shown");
                    }
                    Some(Ok(so_far)) => {
                        so_far_heard(state, &request.agent, recording.id, &so_far.text, progress).await;
                    }
                    _ => {}
                }
            }
            done = early(&mut speculative) => {
                if let Some(early) = speculative.as_mut() {
                    early.pass = None;
                    if let Some(Ok(so_far)) = &done {
                        let further = early
                            .before
                            .as_deref()
                            .is_none_or(|before| hark_stt::turn::heard_further(before, &so_far.text));
                        if let Some(before) = early.before.as_deref() {
                            // What the second look decided, for whoever
                            // reads why a pause was held to its longest.
                            tracing::debug!(before, now = ?so_far.text, further,
                                "the pause held open, looked at again");
                        }
                        if further {
                            *at_pause.lock().unwrap_or_else(PoisonError::into_inner) =
                                Some((early.speech, words_to_read(so_far).to_owned()));
                            if so_far.truncated {
                                tracing::debug!(text = %so_far.text,
                                    "the pass at the pause ran away; the end-of-turn model decides alone");
                            } else {
                                so_far_heard(state, &request.agent, recording.id, &so_far.text, progress).await;
                            }
                        }
                    }
                    early.result = done;
                }
            }
        }
    };
    drop(partial);
    let reason = match utterance.reason {
        EndReason::EndOfSpeech => Ended::EndOfSpeech,
        EndReason::EndOfTurn => Ended::EndOfTurn,
        EndReason::NoSpeech => Ended::Timeout,
        EndReason::MaxLength => Ended::MaxLength,
        EndReason::Stopped => Ended::Stopped,
        EndReason::Cancelled => Ended::Cancelled,
        EndReason::CaptureStalled => Ended::Stalled,
    };
    recording.ended(reason);
    let listen_id = recording.id;
    drop(recording);
    // The next caller may listen while this one transcribes.
    drop(turn);
    play(state, Earcon::ListenStop);
    tracing::info!(%reason, speech = ?utterance.speech,
        seconds = seconds_of(utterance.samples.len()), "utterance recorded");
    if utterance.reason == EndReason::CaptureStalled {
        return Err(ListenError::Stalled);
    }
    let recorded = seconds(Duration::from_secs_f64(
        utterance.samples.len() as f64 / 16_000.0,
    ));
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
            listen: listen_id,
        });
    };

    progress.report(Progress::Transcribing).await;
    // The pass begun at the pause is the turn's if the turn ended there.
    let early = speculative.filter(|early| {
        let kept = early.speech == (start, end);
        if !kept {
            tracing::debug!("the early transcription is thrown away: the turn ended later");
        }
        kept
    });
    let (from, clip, mut early) = match early {
        Some(mut early) => (early.from, std::mem::take(&mut early.clip), Some(early)),
        None => {
            let range = clip_range((start, end), utterance.samples.len());
            (range.start, utterance.samples[range].to_vec(), None)
        }
    };
    if let Some(history) = state.history.as_ref() {
        history.stash_audio(listen_id, &clip);
    }
    let offset = seconds_of(from);
    // Whisper takes a clip the live engine fails on; only then is a copy
    // of the clip kept for it.
    let mut retry = stt
        .engine()
        .ok()
        .filter(|whisper| !Arc::ptr_eq(whisper, &engine))
        .map(|whisper| (Arc::clone(whisper), clip.clone()));
    let (mut engine, mut audio) = (engine, clip);
    let mut from_early;
    let transcript = loop {
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
        from_early = outcome.is_some();
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => Pass::submit(
                &engine,
                std::mem::take(&mut audio),
                request.language.clone(),
                false,
            )?
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
                None => break cut,
            },
            other => break other?,
        }
    };
    if transcript.truncated {
        tracing::warn!(
            seconds = transcript.duration,
            "the live engine ran out of its token budget on this turn and whisper is not there; the transcript is cut"
        );
    }
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
        model: Some(engine.info().name.clone()),
        transcribe_ms: Some(transcript.elapsed_ms),
        speculative: from_early,
        listen: listen_id,
    };
    if heard.speech {
        state.bus.publish(Event::UtteranceTranscribed {
            listen: listen_id,
            agent: request.agent,
            text: heard.text.clone(),
            confidence: heard.confidence,
            duration: seconds(end.saturating_sub(start)),
            end_reason: reason,
        });
    }
    Ok(heard)
}

#[cfg(test)]
mod tests {
    use hark_stt::turn::{Reading, read};

    use super::*;

    fn transcript(text: &str, truncated: bool) -> hark_stt::engine::Transcript {
        hark_stt::engine::Transcript {
            text: text.to_owned(),
            language: "en".to_owned(),
            language_probability: None,
            duration: 3.0,
            segments: Vec::new(),
            confidence: 0.9,
            dropped_segments: 0,
            audio_ctx: 0,
            refit: false,
            elapsed_ms: 40,
            truncated,
        }
    }

    #[test]
    fn a_pass_that_ran_away_holds_no_pause_open() {
        let text = "Send it to Anna and then send it to Anna and then send it to";
        assert_eq!(
            read(words_to_read(&transcript(text, false))),
            Reading::Midway
        );
        assert_eq!(
            read(words_to_read(&transcript(text, true))),
            Reading::Finished
        );
    }
}
