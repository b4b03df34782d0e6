//! Transcription ahead of the end of the turn, while the person still
//! speaks: partial transcripts (the live engine only: a few tens of ms a
//! pass), and the final pass begun at a pause, kept if the turn ends
//! there. [`Ahead`] owns both passes and what the recorder shows of the
//! speech so far; the listen asks it what to show and, at the end, for
//! the pass that may already hold the turn's transcript.

use std::{
    sync::{
        Arc, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hark_audio::{config::PIPELINE_RATE, utterance};
use hark_stt::engine::Engine;
use hark_stt::recognizer::{Request, SttError, Transcript};

use hark_audio::config::seconds_of;

/// Audio kept before the detected start of speech: the detector decides a
/// little after the first sound.
const LEAD: Duration = Duration::from_millis(250);
/// Audio kept after the detected end: word endings trail off below the
/// detector's threshold.
const TAIL: Duration = Duration::from_millis(400);
/// Quiet a look at a pause keeps after the voice (the first look) or the
/// last sound (a second look), samples. The rest of the pause is left
/// out, as the live engine reads words into quiet: shown a pause 250 ms in
/// (and later when the recorder runs behind), the first look read "…that
/// we could" as "…that we could do.", a finished sentence where the
/// person was thinking.
const QUIET_AFTER_SOUND: usize = PIPELINE_RATE as usize * 150 / 1000;
/// The live transcript of the speech up to a pause, and that pause's span.
pub(super) type AtPause = Arc<std::sync::Mutex<Option<((Duration, Duration), String)>>>;

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
pub(super) fn clip_range((start, end): (Duration, Duration), len: usize) -> std::ops::Range<usize> {
    let rate = f64::from(PIPELINE_RATE);
    let from = (start.saturating_sub(LEAD).as_secs_f64() * rate) as usize;
    let to = (((end + TAIL).as_secs_f64() * rate) as usize).min(len);
    from.min(to)..to
}

/// What a recording shows while it goes on, copied off the recorder's
/// thread (see [`utterance::SoFar`]).
pub(super) enum Glimpse {
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
pub(super) struct Pass {
    reply: tokio::sync::oneshot::Receiver<Result<hark_stt::recognizer::Transcript, SttError>>,
    _abandon: AbandonOnDrop,
}

impl Pass {
    pub(super) fn submit(
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
    pub(super) async fn done(
        &mut self,
    ) -> Option<Result<hark_stt::recognizer::Transcript, SttError>> {
        (&mut self.reply).await.ok()
    }
}

/// Waits for the pass, if there is one; forever otherwise (a disabled
/// `select!` branch).
async fn finished(
    pass: &mut Option<Pass>,
) -> Option<Result<hark_stt::recognizer::Transcript, SttError>> {
    match pass {
        Some(pass) => pass.done().await,
        None => std::future::pending().await,
    }
}

/// The final pass begun at the first pause: its clip (kept for the history
/// and for whisper if the live engine fails), and its result once it is in.
pub(super) struct Speculative {
    speech: (Duration, Duration),
    pub(super) from: usize,
    pub(super) clip: Vec<f32>,
    pub(super) pass: Option<Pass>,
    pub(super) result: Option<Result<hark_stt::recognizer::Transcript, SttError>>,
    /// A second look's: what the first look heard. The end-of-turn rule
    /// reads the new words only if they go further (words the first look
    /// could not hear yet), not a second reading of the same ones.
    before: Option<String>,
}

/// Waits for the early pass, if one runs; forever otherwise.
async fn early(
    speculative: &mut Option<Speculative>,
) -> Option<Result<hark_stt::recognizer::Transcript, SttError>> {
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
fn words_to_read(heard: &hark_stt::recognizer::Transcript) -> &str {
    if heard.truncated { "" } else { &heard.text }
}

/// The watcher that copies what the recorder shows into `glimpses`
/// (bounded: a partial that finds it full is skipped; a lost pause only
/// means no early start, since the final span is compared before an early
/// result is used).
pub(super) fn watcher(glimpses: tokio::sync::mpsc::Sender<Glimpse>) -> utterance::Watcher {
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
                } else {
                    let voice_end = (speech.1.as_secs_f64() * f64::from(PIPELINE_RATE)) as usize;
                    range.end = range
                        .end
                        .min(voice_end + QUIET_AFTER_SOUND)
                        .max(range.start);
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

/// A pass ahead of the turn's end that has finished.
pub(super) enum Done {
    Partial(Option<Result<Transcript, SttError>>),
    Early(Option<Result<Transcript, SttError>>),
}

/// The passes ahead of the end of the turn.
pub(super) struct Ahead {
    engine: Arc<Engine>,
    language: Option<String>,
    /// `stt.speculative`: the final pass starts at a pause.
    speculative_on: bool,
    partial: Option<Pass>,
    speculative: Option<Speculative>,
    /// The live engine's words up to the current pause, for the
    /// end-of-turn rule.
    at_pause: AtPause,
}

impl Ahead {
    pub(super) fn new(
        engine: Arc<Engine>,
        language: Option<String>,
        speculative_on: bool,
        at_pause: AtPause,
    ) -> Self {
        Self {
            engine,
            language,
            speculative_on,
            partial: None,
            speculative: None,
            at_pause,
        }
    }

    /// What the recorder showed: a pass starts (or is thrown away).
    pub(super) fn glimpse(&mut self, glimpse: Glimpse) {
        match glimpse {
            Glimpse::Speaking(audio) => {
                // One pass at a time: one still running is skipped.
                if self.partial.is_none() && self.speculative.is_none() {
                    self.partial = Pass::ahead(&self.engine, audio, self.language.clone(), true);
                }
            }
            Glimpse::Paused {
                mut clip,
                from,
                speech,
                again,
            } => {
                let first = self
                    .speculative
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
                        return;
                    }
                    Some((seen, Some(end))) => {
                        tracing::debug!(
                            first = seconds_of(seen),
                            sound_end = seconds_of(end),
                            recorded = seconds_of(clip.len()),
                            "something sounded after the first look"
                        );
                        clip.truncate(end + QUIET_AFTER_SOUND);
                    }
                    None => {}
                }
                // The pause's pass matters more than one on less audio.
                self.partial = None;
                let before = first
                    .and_then(|early| early.result.as_ref()?.as_ref().ok())
                    .map(|heard| heard.text.clone());
                if again {
                    tracing::debug!(speech = ?speech, heard = ?before,
                        "a pause held open as mid-sentence: transcribing all of it again");
                } else if self.speculative_on {
                    tracing::debug!(speech = ?speech, "the final transcription starts early, at a pause");
                }
                self.speculative = self.speculative_on.then(|| Speculative {
                    speech,
                    from,
                    pass: Pass::ahead(&self.engine, clip.clone(), self.language.clone(), false),
                    clip,
                    result: None,
                    before,
                });
            }
            Glimpse::Resumed => {
                if self.speculative.take().is_some() {
                    tracing::debug!("the early transcription is thrown away: speech resumed");
                }
            }
        }
    }

    /// The next pass to finish; forever while none runs.
    pub(super) async fn done(&mut self) -> Done {
        tokio::select! {
            done = finished(&mut self.partial) => Done::Partial(done),
            done = early(&mut self.speculative) => Done::Early(done),
        }
    }

    /// Takes a finished pass in; the words to show the person's listener,
    /// if any.
    pub(super) fn settle(&mut self, done: Done) -> Option<String> {
        match done {
            Done::Partial(done) => {
                self.partial = None;
                match done {
                    // Speech cut off mid-word can set the live engine
                    // running on ("…moved to to to to"): such a text is
                    // not what the person said so far.
                    Some(Ok(so_far)) if so_far.truncated => {
                        tracing::debug!(text = %so_far.text, "a partial transcript ran away; not shown");
                        None
                    }
                    Some(Ok(so_far)) => Some(so_far.text),
                    _ => None,
                }
            }
            Done::Early(done) => {
                let early = self.speculative.as_mut()?;
                early.pass = None;
                let mut shown = None;
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
                        *self.at_pause.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some((early.speech, words_to_read(so_far).to_owned()));
                        if so_far.truncated {
                            tracing::debug!(text = %so_far.text,
                                "the pass at the pause ran away; the end-of-turn model decides alone");
                        } else {
                            shown = Some(so_far.text.clone());
                        }
                    }
                }
                early.result = done;
                shown
            }
        }
    }

    /// Abandons the partial pass, if one runs.
    pub(super) fn stop_partial(&mut self) {
        self.partial = None;
    }

    /// The recording has ended with speech over `span`: the pass begun at
    /// the pause is the turn's if the turn ended there.
    pub(super) fn for_turn(self, span: (Duration, Duration)) -> Option<Speculative> {
        self.speculative.filter(|early| {
            let kept = early.speech == span;
            if !kept {
                tracing::debug!("the early transcription is thrown away: the turn ended later");
            }
            kept
        })
    }
}

#[cfg(test)]
mod tests {
    use hark_stt::turn::{Reading, read};

    use super::*;

    fn transcript(text: &str, truncated: bool) -> hark_stt::recognizer::Transcript {
        hark_stt::recognizer::Transcript {
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
            doubt: None,
            model: "moonshine-tiny-en".into(),
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
