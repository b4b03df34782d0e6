//! "Record until end of speech, timeout, stop request or cancel": reads the
//! capture ring from the pre-roll on, runs the voice detector, and returns
//! 16 kHz mono samples with the speech's timing.
//!
//! Time is counted in captured audio, so a recording behaves the same whether
//! audio arrives in real time or faster; a wall-clock guard ends it if
//! capture stops delivering (device unplugged) so a caller never waits
//! forever.

use std::{
    sync::atomic::{AtomicBool, AtomicU8, Ordering},
    time::{Duration, Instant},
};

use crate::{
    config::{PIPELINE_RATE, VadConfig},
    ring::Ring,
    vad::{Event, Segmenter},
};

/// Why a recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// The detector heard speech and then the hang-over of silence.
    EndOfSpeech,
    /// At a pause, the end-of-turn model said the person had finished.
    EndOfTurn,
    /// No speech began before the timeout.
    NoSpeech,
    /// Speech went on to the maximum utterance length.
    MaxLength,
    /// A stop was requested (push-to-talk released): keep what was heard.
    Stopped,
    /// Cancelled: the caller does not want the audio.
    Cancelled,
    /// Capture delivered no audio for too long (device gone).
    CaptureStalled,
}

/// Ask a running recording to end, hold it open (push-to-talk), and see
/// whether it has heard speech, from any thread. The fields: the run state,
/// speech heard, held by push-to-talk, and a tap waiting to be applied.
#[derive(Debug, Default)]
pub struct Control(AtomicU8, AtomicBool, AtomicBool, AtomicBool);

impl Control {
    const RUN: u8 = 0;
    const STOP: u8 = 1;
    const CANCEL: u8 = 2;

    pub fn stop(&self) {
        let _ = self
            .0
            .compare_exchange(Self::RUN, Self::STOP, Ordering::AcqRel, Ordering::Acquire);
    }

    pub fn cancel(&self) {
        self.0.store(Self::CANCEL, Ordering::Release);
    }

    fn state(&self) -> u8 {
        self.0.load(Ordering::Acquire)
    }

    /// Push-to-talk pressed: what follows is speech, from now until
    /// [`Control::release`], whatever the detector thinks (a pause in the
    /// middle does not end it, and the timeout no longer applies).
    pub fn hold(&self) {
        self.2.store(true, Ordering::Release);
    }

    /// Push-to-talk released: the recording ends here and keeps what was
    /// heard (as [`Control::stop`]). Without a hold, nothing happens.
    pub fn release(&self) {
        if self.2.swap(false, Ordering::AcqRel) {
            self.stop();
        }
    }

    /// The press that held the recording was only a tap: forget the hold
    /// and let the detector decide where speech starts and ends, as if the
    /// button had not been pressed (the person tapped to talk rather than
    /// holding the button down).
    pub fn tap(&self) {
        if self.2.swap(false, Ordering::AcqRel) {
            self.3.store(true, Ordering::Release);
        }
    }

    /// Whether push-to-talk holds the recording open.
    pub fn held(&self) -> bool {
        self.2.load(Ordering::Acquire)
    }

    /// True once the detector has heard the start of speech.
    pub fn speech_started(&self) -> bool {
        self.1.load(Ordering::Acquire)
    }

    /// Whether the recording was asked to end, keeping what it heard (a
    /// stop, or push-to-talk released).
    pub fn stopped(&self) -> bool {
        self.state() == Self::STOP
    }
}

/// Asks how likely it is that the person has finished their turn, given
/// the turn's audio so far: a probability, or `None` when it cannot say
/// (the silence rule decides then).
pub type TurnCheck = std::sync::Arc<dyn Fn(&[f32]) -> Option<f32> + Send + Sync>;

/// What the words of the speech up to a pause say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    /// They read as a finished sentence.
    Finished,
    /// They may go on: an opening clause with no sentence after it yet
    /// ("When you have a moment."). Not a reason to hold the pause open,
    /// but none to end the turn early either: the silence rule decides.
    Open,
    /// They stop in the middle of a sentence ("Send a message to."):
    /// hold the pause open.
    Midway,
    /// They are a whole answer of the kind the agent asked for ("Yes." to
    /// a yes/no question, one of the options offered): the turn ends at
    /// the first decision point, whatever the model says of the voice.
    Answer,
}

/// What the words of the speech up to a pause (its speech span) say, or
/// `None` when they are not known yet (the live transcript is not in).
pub type WordsCheck = std::sync::Arc<dyn Fn((Duration, Duration)) -> Option<Words> + Send + Sync>;

/// Below this probability the end-of-turn model says "not yet" (its own
/// threshold): without words, that holds the pause open.
const NOT_YET: f32 = 0.5;

/// End of turn rather than end of silence. At a pause of `pause`, and again
/// every `every` while it lasts, the model's answer is read; it was asked
/// `lead` earlier, so its tens of ms are spent while the pause grows
/// rather than after, and an answer counts only if the pause lasts to its
/// point (a closure inside a word ends sooner). An ask says "finished"
/// when its probability is at least `sure`. With `words`, an answer waits
/// until they are in. The turn ends early when an answer read in the
/// first `quick` points of the schedule (`pause`, `pause + every`, …) says
/// finished, or later `agree` in a row do (`agree` 0: later answers never
/// end it, and the model is not asked past the first points), none before
/// them in the pause having said "not yet", and the words (if there are
/// `words`) read as a finished sentence. Otherwise the silence decides,
/// for as long as the pause's signals say: `midway` where the words stop
/// midway (or, without words, the model says "not yet"), `doubted` where
/// they read as finished but the model is sure the person is not done,
/// `finished` where they read as a finished sentence the model was unsure
/// of, `fallback` (the silence rule's) otherwise — and never less than `pace`
/// times the longest pause the person already came back from in this
/// turn. The detector's own hang-over (`audio.vad.max_pause_ms`) bounds
/// every wait.
#[derive(Clone)]
pub struct EndOfTurn {
    pub pause: Duration,
    pub every: Duration,
    /// How long before each decision point the model is asked: its answer
    /// (tens of ms) is ready when the pause reaches the point, and counts
    /// only if it does.
    pub lead: Duration,
    pub sure: f32,
    pub quick: u32,
    pub agree: u32,
    pub fallback: Duration,
    /// With words: an answer in a pause under this probability holds it
    /// open as words stopped midway do. On real speech the model
    /// is surest at a thinking pause (0.01–0.05 where the live engine's
    /// punctuation reads "We're just saying some words."), while the words'
    /// full stop is a guess (docs/benchmarks.md, end of turn). 0: never.
    pub doubt: f32,
    /// The speaker's own pace: the silence that ends a turn is at least
    /// this many times the longest pause the person has already come back
    /// from in this recording (up to the detector's hang-over). A person
    /// who stopped 1.2 s to think and went on is given longer than a
    /// stranger's 800 ms at the next pause. 0: the fallback alone.
    pub pace: f32,
    /// The silence that ends a turn whose words read as a finished
    /// sentence when the model was not sure of it: shorter than the
    /// fallback (the words say the thought is complete), so an unsure
    /// model costs well under a second.
    pub finished: Duration,
    /// The silence that ends a pause whose words read as a finished
    /// sentence while the model is sure the person is not done (under
    /// `doubt`): longer than `finished`, and bounded.
    pub doubted: Duration,
    /// The silence that ends a pause whose words stopped midway (or,
    /// without words, that the model called unfinished): the longest
    /// wait the signals ask for, short of the detector's hang-over.
    pub midway: Duration,
    pub check: TurnCheck,
    pub words: Option<WordsCheck>,
}

impl EndOfTurn {
    /// Whether an answer read at `point` (samples of silence) is one of
    /// the first `quick` of the schedule.
    fn quick_at(&self, point: u64) -> bool {
        let window = self.pause + self.every * self.quick.saturating_sub(1);
        self.quick > 0 && point <= duration_to_samples(window)
    }
}

impl std::fmt::Debug for EndOfTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndOfTurn")
            .field("pause", &self.pause)
            .field("every", &self.every)
            .field("lead", &self.lead)
            .field("sure", &self.sure)
            .field("quick", &self.quick)
            .field("agree", &self.agree)
            .field("fallback", &self.fallback)
            .field("doubt", &self.doubt)
            .field("pace", &self.pace)
            .field("finished", &self.finished)
            .field("doubted", &self.doubted)
            .field("midway", &self.midway)
            .field("words", &self.words.is_some())
            .finish()
    }
}

/// What the recorder shows of a recording while it goes on, so speech can
/// be transcribed before the person has finished. `audio` is everything
/// recorded so far (from the pre-roll on); spans are offsets into it.
#[derive(Debug, Clone, Copy)]
pub enum SoFar<'a> {
    /// Speech goes on; it began at `start`.
    Speaking { audio: &'a [f32], start: Duration },
    /// Speech paused for `Watch::pause` (shown once a pause): if the
    /// recording ends at this pause, its speech span is `speech`, exactly.
    /// `again`: the same pause shown a second time (see `Watch::again`),
    /// with all the audio recorded since.
    Paused {
        audio: &'a [f32],
        speech: (Duration, Duration),
        again: bool,
    },
    /// Speech went on after a pause shown with [`SoFar::Paused`].
    Resumed,
}

/// Where the recorder shows its [`SoFar`]s. Called on the recorder's
/// thread: it must return at once (copy what it needs and hand it on).
pub type Watcher = std::sync::Arc<dyn Fn(SoFar<'_>) + Send + Sync>;

/// How often, and to whom, a recording shows itself while speech goes on.
#[derive(Clone)]
pub struct Watch {
    /// A [`SoFar::Speaking`] each time this much more speech is recorded
    /// (`None`: only pauses are shown).
    pub every: Option<Duration>,
    /// Silence after the voice stops that counts as a pause (no speech so
    /// far is shown during one).
    pub pause: Duration,
    /// Whether pauses are shown ([`SoFar::Paused`], [`SoFar::Resumed`]):
    /// only a watcher that starts work at a pause needs the copy.
    pub pauses: bool,
    /// A pause the end-of-turn rule holds open as a sentence stopped midway
    /// is shown once more when it has lasted this long. The words read
    /// midway may be the detector's fault: a quiet last word it did not
    /// count as voice ("turn on the … lights") sits in the pause, and a
    /// second transcription of the audio recorded since can hear it (the
    /// watcher decides whether anything sounded there).
    pub again: Option<Duration>,
    pub watcher: Watcher,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("every", &self.every)
            .field("pause", &self.pause)
            .field("pauses", &self.pauses)
            .field("again", &self.again)
            .finish()
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    /// How long to wait for speech to begin.
    pub timeout: Duration,
    /// Audio kept from before the recording started.
    pub preroll: Duration,
    /// Start at this ring position instead of a pre-roll back (the end of
    /// the wake word: nothing before it is kept).
    pub start_at: Option<u64>,
    pub vad: VadConfig,
    /// How often the ring is polled for new audio.
    pub poll: Duration,
    /// End the recording if no audio arrives for this long (wall clock).
    pub stall: Duration,
    /// Ask an end-of-turn model at pauses (`None`: the silence rule).
    pub end_of_turn: Option<EndOfTurn>,
    /// Show the recording while speech goes on.
    pub watch: Option<Watch>,
}

impl Options {
    pub fn new(timeout: Duration, preroll: Duration, vad: VadConfig) -> Self {
        Self {
            timeout,
            preroll,
            start_at: None,
            vad,
            poll: Duration::from_millis(10),
            stall: Duration::from_secs(3),
            end_of_turn: None,
            watch: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Utterance {
    /// 16 kHz mono, from the start of the pre-roll to where recording ended.
    pub samples: Vec<f32>,
    /// Where speech began and ended, relative to `samples[0]`.
    pub speech: Option<(Duration, Duration)>,
    pub reason: EndReason,
    /// Audio lost because the recorder fell behind capture (should be 0).
    pub dropped: u64,
    /// The capture ring's position where recording ended: what the person
    /// says after the turn is read from here.
    pub end: u64,
}

fn samples_to_duration(samples: u64) -> Duration {
    Duration::from_secs_f64(samples as f64 / f64::from(PIPELINE_RATE))
}

fn duration_to_samples(d: Duration) -> u64 {
    (d.as_secs_f64() * f64::from(PIPELINE_RATE)) as u64
}

/// A pause the end-of-turn model is being asked about (see [`EndOfTurn`]).
struct Asked {
    voiced_end: u64,
    /// The silence (samples) at which the next answer is read: its point.
    next: u64,
    in_a_row: u32,
    held: bool,
    /// An answer in this pause said "not yet" (below [`NOT_YET`]).
    doubted: bool,
    /// An answer in this pause was under [`EndOfTurn::doubt`]: the model
    /// sure the person is not done.
    sure_not: bool,
    /// How the words of this pause read when last read.
    read: Option<Words>,
    /// The model's answer to the ask made for the decision point `next`:
    /// it waits for the pause to reach the point and for the words, and no
    /// further ask is made meanwhile.
    pending: Option<Option<f32>>,
}

impl Asked {
    /// Takes in one ask's answer `p` read with `words` (as they stand
    /// now). Returns whether the turn ends here.
    fn answer(&mut self, turn: &EndOfTurn, p: Option<f32>, words: Option<Words>) -> bool {
        if words == Some(Words::Answer) {
            return true;
        }
        self.read = words;
        let finished = p.is_some_and(|p| p >= turn.sure);
        let not_yet = p.is_some_and(|p| p < NOT_YET);
        self.in_a_row = if finished { self.in_a_row + 1 } else { 0 };
        self.sure_not |= p.is_some_and(|p| p < turn.doubt);
        self.held = match words {
            // The words decide as they stand: a second look
            // (`Watch::again`) may find the sentence finished.
            Some(read) => read == Words::Midway || self.sure_not,
            None => self.held || not_yet,
        };
        // Sure at once, or sure again and again: a pause that outlasts the
        // first asks is as often a comma spoken slowly, which the model
        // comes to call finished the longer it lasts (docs/benchmarks.md,
        // the turn). Quick by the silence it was read at, not by count: an
        // answer that waited for slow words makes the next one late too.
        // A pause the model called unfinished is left to the silence rule
        // (no further ask is made): its later "finished" is the silence
        // growing ("Book a table for two at … the Italian place": 0.10 at
        // first, 0.95 and 0.98 600 ms into the thinking pause).
        let quick = turn.quick_at(self.next);
        self.doubted |= not_yet;
        let agreed = finished && (quick || turn.agree > 0 && self.in_a_row >= turn.agree);
        !self.held && agreed && words.is_none_or(|w| w == Words::Finished)
    }
}

/// Where [`show`] is: the last [`SoFar::Speaking`] shown, the pause (its
/// voice's end) last shown as [`SoFar::Paused`], and the pause last shown
/// a second time.
#[derive(Default)]
struct Shown {
    at: Option<u64>,
    pause: Option<u64>,
    again: Option<u64>,
}

/// Shows the recording to `watch` where it is due: a pause once, when it
/// has lasted `watch.pause`, and again at `watch.again` if `held_open`; the
/// end of that pause when speech resumes; and speech every `watch.every`
/// while it goes on.
fn show(
    watch: &Watch,
    samples: &[f32],
    origin: u64,
    speech_start: Option<u64>,
    pause: Option<(u64, u64, u64)>,
    held_open: bool,
    shown: &mut Shown,
) {
    let Some(start) = speech_start else {
        return;
    };
    let now = origin + samples.len() as u64;
    let at = |sample: u64| samples_to_duration(sample.saturating_sub(origin));
    // A pause shown, then voice again (a later voiced end, or voice now):
    // what was shown is no longer where speech ends.
    let voiced_end = pause.map(|(_, end, _)| end);
    if let Some(end) = shown.pause
        && voiced_end != Some(end)
    {
        shown.pause = None;
        (watch.watcher)(SoFar::Resumed);
    }
    if let Some((start, end, quiet)) = pause
        && quiet >= duration_to_samples(watch.pause)
    {
        let again = held_open
            && shown.pause == Some(end)
            && shown.again != Some(end)
            && watch
                .again
                .is_some_and(|again| quiet >= duration_to_samples(again));
        if watch.pauses && (shown.pause != Some(end) || again) {
            if again {
                shown.again = Some(end);
            }
            shown.pause = Some(end);
            (watch.watcher)(SoFar::Paused {
                audio: samples,
                speech: (at(start), at(end)),
                again,
            });
        }
        return;
    }
    if let Some(every) = watch.every {
        let due = shown.at.unwrap_or(start) + duration_to_samples(every).max(1);
        if now >= due {
            shown.at = Some(now);
            (watch.watcher)(SoFar::Speaking {
                audio: samples,
                start: at(start),
            });
        }
    }
}

/// Records one utterance from `ring`. Blocking: run it on its own thread
/// (or `spawn_blocking`), never on the async runtime's threads.
pub fn record(ring: &Ring, options: &Options, control: &Control) -> Utterance {
    let (mut reader, timeout_at) = match options.start_at {
        Some(position) => (
            ring.reader_at(position),
            ring.written() + duration_to_samples(options.timeout),
        ),
        None => {
            let reader = ring.reader(duration_to_samples(options.preroll) as usize);
            let at = reader.position() + duration_to_samples(options.preroll + options.timeout);
            (reader, at)
        }
    };
    let origin = reader.position();
    let max_len = duration_to_samples(Duration::from_secs(u64::from(options.vad.max_utterance_s)));
    let mut segmenter = Segmenter::new(&options.vad, origin);
    let mut samples = Vec::with_capacity((max_len + duration_to_samples(options.preroll)) as usize);
    // A detector frame at a time: after falling behind (an ask of the
    // end-of-turn model runs on this thread and takes some tens of ms), a
    // pause is still shown and asked about at the silence it is due at,
    // not at the end of a long read.
    let mut chunk = vec![0.0f32; crate::vad::FRAME];
    let mut speech: Option<(u64, u64)> = None;
    let mut speech_start: Option<u64> = None;
    // Where the detector heard speech begin, apart from a start that
    // push-to-talk set, so a tap can undo the hold.
    let mut detected_start: Option<u64> = None;
    let mut last_audio = Instant::now();
    // The pause being asked about: where its voice stopped, the silence at
    // which to ask next, how many asks in a row said "finished", and
    // whether it is held open (a sentence stopped midway).
    let mut asked: Option<Asked> = None;
    let mut shown = Shown::default();

    let reason = loop {
        match control.state() {
            Control::CANCEL => break EndReason::Cancelled,
            Control::STOP => break EndReason::Stopped,
            _ => {}
        }
        let n = reader.read(&mut chunk);
        if n == 0 {
            if last_audio.elapsed() > options.stall {
                break EndReason::CaptureStalled;
            }
            std::thread::sleep(options.poll);
            continue;
        }
        last_audio = Instant::now();
        if control.3.swap(false, Ordering::AcqRel) {
            speech_start = detected_start;
            control.1.store(detected_start.is_some(), Ordering::Release);
        }
        let held = control.held();
        if held && speech_start.is_none() {
            // Push-to-talk: speech starts where the button went down.
            speech_start = Some(origin + samples.len() as u64);
            control.1.store(true, Ordering::Release);
        }
        let mut rest = &chunk[..n];
        let mut ended = None;
        while !rest.is_empty() {
            let (used, event) = segmenter.push(rest);
            samples.extend_from_slice(&rest[..used]);
            rest = &rest[used..];
            match event {
                Some(Event::SpeechStart { at }) => {
                    // The first start counts: after a pause held open by
                    // push-to-talk the detector starts again.
                    detected_start.get_or_insert(at);
                    speech_start.get_or_insert(at);
                    control.1.store(true, Ordering::Release);
                }
                // Held by push-to-talk: a pause is not the end.
                Some(Event::SpeechEnd { .. }) if held => {}
                Some(Event::SpeechEnd { start, end }) => {
                    speech = Some((start, end));
                    ended = Some(EndReason::EndOfSpeech);
                    break;
                }
                None => {}
            }
        }
        if let Some(reason) = ended {
            break reason;
        }
        if let Some(watch) = &options.watch {
            let pause = segmenter.pause().filter(|_| !held);
            // Held open by the end-of-turn rule: this pause, not an earlier one.
            let held_open = asked
                .as_ref()
                .is_some_and(|a| a.held && pause.is_some_and(|(_, end, _)| end == a.voiced_end));
            show(
                watch,
                &samples,
                origin,
                speech_start,
                pause,
                held_open,
                &mut shown,
            );
        }
        if let (Some(turn), Some((start, voiced_end, quiet)), false) =
            (&options.end_of_turn, segmenter.pause(), held)
        {
            if asked.as_ref().is_none_or(|a| a.voiced_end != voiced_end) {
                asked = Some(Asked {
                    voiced_end,
                    next: duration_to_samples(turn.pause).max(1),
                    in_a_row: 0,
                    held: false,
                    doubted: false,
                    sure_not: false,
                    read: None,
                    pending: None,
                });
            }
            if let Some(ask) = asked.as_mut() {
                let span = (
                    samples_to_duration(start.saturating_sub(origin)),
                    samples_to_duration(voiced_end.saturating_sub(origin)),
                );
                let words = || turn.words.as_ref().map(|w| w(span));
                if ask.pending.is_none() && quiet + duration_to_samples(turn.lead) >= ask.next {
                    // Words that already decide (held open, or left to
                    // the silence rule) leave the model nothing to say:
                    // it is not asked, which spares a core its tens of
                    // ms an ask all through a long pause held open. Nor
                    // after a "not yet": no answer could end the pause
                    // then. The words are still read on the schedule, as
                    // a second look (`Watch::again`) may find a sentence
                    // held open midway finished after all.
                    let decided = ask.doubted
                        || (turn.agree == 0 && !turn.quick_at(ask.next))
                        || matches!(
                            words(),
                            Some(Some(Words::Midway | Words::Open | Words::Answer))
                        );
                    // The turn so far with the pause after it: the model
                    // hears the silence too, as it was trained to. Asked
                    // while the live engine still works on the words (on
                    // another thread), so their times overlap.
                    ask.pending = Some(if decided {
                        None
                    } else {
                        let from = (start.saturating_sub(origin) as usize).min(samples.len());
                        (turn.check)(&samples[from..])
                    });
                }
                // The answer counts once the pause has lasted to its
                // decision point (speech resuming before then starts a new
                // pause and drops it) and the words are in.
                let read = || Some(words()).filter(|w| *w != Some(None));
                // Nor does the silence rule end a pause whose words are
                // still being made: they may hold it open, and on a long
                // turn the live engine takes longer than the rule's wait
                // (a 25 s monologue cut at "…some speech errors, but" 7 s
                // before its end). The detector's own hang-over, the
                // longest pause, bounds the wait should they never come.
                // Looked at before the answer is read, so words that come
                // in between are read with it.
                // How long this pause must last to end the turn: what the
                // pause's signals say (held open, a finished sentence, or
                // neither), and never less than the person's own pace.
                let paced = (segmenter.longest_pause() as f64 * f64::from(turn.pace)) as u64;
                let wait = match (ask.held, ask.read) {
                    (true, Some(Words::Finished)) => turn.doubted,
                    (true, _) => turn.midway,
                    (false, Some(Words::Finished)) => turn.finished,
                    (false, _) => turn.fallback,
                };
                let silence_ends = quiet >= duration_to_samples(wait).max(paced)
                    && (turn.words.is_none() || read().is_some());
                if let Some(p) = ask.pending.filter(|_| quiet >= ask.next)
                    && let Some(words) = read()
                {
                    ask.pending = None;
                    if ask.answer(turn, p, words.flatten()) {
                        speech = Some((start, voiced_end));
                        break EndReason::EndOfTurn;
                    }
                    // On the schedule, so a late read does not push every
                    // later ask back.
                    ask.next = (ask.next + duration_to_samples(turn.every).max(1)).max(quiet + 1);
                }
                if silence_ends {
                    speech = Some((start, voiced_end));
                    break EndReason::EndOfSpeech;
                }
            }
        }
        let now = origin + samples.len() as u64;
        match speech_start {
            None if now >= timeout_at => break EndReason::NoSpeech,
            Some(start) if now - start >= max_len => {
                speech = Some((start, now));
                break EndReason::MaxLength;
            }
            _ => {}
        }
    };

    if matches!(reason, EndReason::Stopped | EndReason::CaptureStalled)
        && let Some(start) = speech_start
    {
        speech = Some((start, origin + samples.len() as u64));
    }
    if reason == EndReason::Cancelled {
        samples.clear();
        speech = None;
    }
    Utterance {
        speech: speech.map(|(s, e)| {
            (
                samples_to_duration(s.saturating_sub(origin)),
                samples_to_duration(e.saturating_sub(origin)),
            )
        }),
        samples,
        reason,
        dropped: reader.dropped(),
        end: reader.position(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;
    use crate::testing::spoken;

    /// Records `text` spoken into a ring, then silence, with the end-of-turn
    /// model answering `asks` in turn (and its last answer after that) and
    /// the words read as `words`. Returns how the recording ended, how far
    /// into the pause (ms), and the silence (ms) at each ask.
    fn turn(asks: &[f32], words: Option<Words>) -> (EndReason, f64, Vec<f64>) {
        turn_with(
            asks,
            words.map(|w| -> WordsCheck { Arc::new(move |_| Some(w)) }),
        )
    }

    fn turn_with(asks: &[f32], words: Option<WordsCheck>) -> (EndReason, f64, Vec<f64>) {
        turn_of(spoken("Turn on the lights."), Duration::ZERO, asks, words)
    }

    /// [`turn_with`] on `speech`, the model asked `lead` before each
    /// decision point.
    fn turn_of(
        speech: Vec<f32>,
        lead: Duration,
        asks: &[f32],
        words: Option<WordsCheck>,
    ) -> (EndReason, f64, Vec<f64>) {
        turn_agreeing(speech, lead, asks, words, 2)
    }

    /// [`turn_of`], later answers ending the turn when `agree` in a row
    /// say finished (0: never).
    fn turn_agreeing(
        speech: Vec<f32>,
        lead: Duration,
        asks: &[f32],
        words: Option<WordsCheck>,
        agree: u32,
    ) -> (EndReason, f64, Vec<f64>) {
        turn_tuned(speech, lead, asks, words, agree, |_| {})
    }

    /// [`turn_agreeing`] with the rule changed by `tune`.
    fn turn_tuned(
        speech: Vec<f32>,
        lead: Duration,
        asks: &[f32],
        words: Option<WordsCheck>,
        agree: u32,
        tune: impl FnOnce(&mut EndOfTurn),
    ) -> (EndReason, f64, Vec<f64>) {
        let ring = Arc::new(Ring::new(16_000 * 20));
        let vad = VadConfig {
            // As the listen path sets it: the longest pause inside a sentence.
            hangover_ms: 2_000,
            ..VadConfig::default()
        };
        let mut options = Options::new(Duration::from_secs(5), Duration::from_millis(300), vad);
        let (asked, silences) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(Mutex::new(Vec::new())),
        );
        let (answers, count, heard) = (asks.to_vec(), Arc::clone(&asked), Arc::clone(&silences));
        options.end_of_turn = Some(EndOfTurn {
            pause: Duration::from_millis(150),
            every: Duration::from_millis(50),
            lead,
            sure: 0.9,
            quick: 2,
            agree,
            fallback: Duration::from_millis(800),
            doubt: 0.0,
            pace: 0.0,
            // As the silence rule and the detector's hang-over: the tests
            // of the finished and held waits set their own.
            finished: Duration::from_millis(800),
            doubted: Duration::from_millis(2_000),
            midway: Duration::from_millis(2_000),
            check: Arc::new(move |audio: &[f32]| {
                let quiet = audio.iter().rev().take_while(|s| **s == 0.0).count();
                heard.lock().unwrap().push(quiet as f64 / 16.0);
                let i = count.fetch_add(1, Ordering::SeqCst);
                answers.get(i).or(answers.last()).copied()
            }),
            words,
        });
        if let Some(turn) = options.end_of_turn.as_mut() {
            tune(turn);
        }
        let control = Arc::new(Control::default());
        let (r, c) = (Arc::clone(&ring), Arc::clone(&control));
        let recorder = std::thread::spawn(move || record(&r, &options, &c));
        std::thread::sleep(Duration::from_millis(50));
        let mut audio = speech;
        audio.extend(vec![0.0; 16_000 * 4]);
        ring.push(&audio);
        let utterance = recorder.join().expect("recorder");
        let (_, end) = utterance.speech.expect("speech");
        let into_pause = (utterance.samples.len() as f64 / 16_000.0 - end.as_secs_f64()) * 1000.0;
        let silences = silences.lock().unwrap().clone();
        (utterance.reason, into_pause, silences)
    }

    /// Words that are not in for the first `reads` reads, then `words`.
    fn words_after(reads: usize, words: Words) -> WordsCheck {
        let count = AtomicUsize::new(0);
        Arc::new(move |_| (count.fetch_add(1, Ordering::SeqCst) >= reads).then_some(words))
    }

    /// Asserts the recording ended `into` ms into the pause, within `range`.
    fn ended_within(into: f64, range: std::ops::Range<f64>) {
        assert!(range.contains(&into), "ended {into:.0} ms into the pause");
    }

    #[test]
    fn a_sure_first_ask_ends_the_turn_there() {
        let (reason, into, asks) = turn(&[0.95], Some(Words::Finished));
        assert_eq!(reason, EndReason::EndOfTurn);
        ended_within(into, 140.0..200.0);
        assert_eq!(asks.len(), 1, "{asks:?}");
    }

    #[test]
    fn later_in_the_pause_the_model_must_be_sure_twice() {
        // Unsure at 150 and 200 ms; sure once at 250, then unsure; then
        // sure twice in a row.
        let (reason, into, asks) = turn(&[0.6, 0.6, 0.95, 0.6, 0.95, 0.95], Some(Words::Finished));
        assert_eq!(reason, EndReason::EndOfTurn);
        assert_eq!(asks.len(), 6, "{asks:?}");
        ended_within(into, 390.0..450.0);
        // Asked every 50 ms from 150 ms of silence on, on the schedule (a
        // read is one 16 ms frame), each time with the pause's silence in
        // the audio: the audio's trailing zeros stop a few ms short of the
        // detector's silence, which counts from the end of a frame.
        assert!((130.0..=150.0).contains(&asks[0]), "{asks:?}");
        for pair in asks.windows(2) {
            assert!((32.0..=64.0).contains(&(pair[1] - pair[0])), "{asks:?}");
        }
        assert!((234.0..=266.0).contains(&(asks[5] - asks[0])), "{asks:?}");
    }

    #[test]
    fn an_answer_asked_ahead_counts_at_its_point() {
        let (reason, into, asks) = turn_of(
            spoken("Turn on the lights."),
            Duration::from_millis(50),
            &[0.95],
            Some(Arc::new(|_| Some(Words::Finished))),
        );
        assert_eq!(reason, EndReason::EndOfTurn);
        // Asked at 100 ms of silence, read at 150.
        assert_eq!(asks.len(), 1, "{asks:?}");
        assert!((80.0..=100.0).contains(&asks[0]), "{asks:?}");
        ended_within(into, 145.0..200.0);
    }

    #[test]
    fn a_gap_shorter_than_the_point_drops_the_answer() {
        // "Turn on the … lights." with a 120 ms gap, the model sure at
        // every ask: the answer asked at the gap (100 ms) does not count,
        // since speech resumed before 150 ms.
        let quiet = |s: &f32| s.abs() < 1e-3;
        let trimmed = |text: &str| {
            let mut v = spoken(text);
            let end = v.iter().rposition(|s| !quiet(s)).map_or(0, |i| i + 1);
            v.truncate(end);
            let start = v.iter().position(|s| !quiet(s)).unwrap_or(0);
            v.split_off(start)
        };
        let mut speech = trimmed("Turn on the");
        speech.extend(vec![0.0; 16 * 120]);
        speech.extend(trimmed("lights."));
        let (reason, into, asks) = turn_of(
            speech,
            Duration::from_millis(50),
            &[0.99],
            Some(Arc::new(|_| Some(Words::Finished))),
        );
        assert_eq!(reason, EndReason::EndOfTurn);
        assert_eq!(asks.len(), 2, "asked at the gap and at the end: {asks:?}");
        ended_within(into, 145.0..200.0);
    }

    #[test]
    fn with_no_agreement_asked_for_only_the_first_points_decide() {
        // Unsure at 150 and 200 ms, then sure and sure again: with
        // `agree` 0 the silence rule ends the pause, and the model is
        // not asked past its first two points.
        let later = [0.6, 0.6, 0.95, 0.95, 0.95];
        let speech = || spoken("Turn on the lights.");
        let words = || Some(Arc::new(|_| Some(Words::Finished)) as WordsCheck);
        let (reason, into, asks) = turn_agreeing(speech(), Duration::ZERO, &later, words(), 0);
        assert_eq!(reason, EndReason::EndOfSpeech);
        ended_within(into, 790.0..850.0);
        assert_eq!(asks.len(), 2, "{asks:?}");
        // Sure at the second point still ends it there.
        let (reason, into, _) = turn_agreeing(speech(), Duration::ZERO, &[0.6, 0.95], words(), 0);
        assert_eq!(reason, EndReason::EndOfTurn);
        ended_within(into, 190.0..250.0);
    }

    #[test]
    fn an_answer_waits_for_the_words() {
        // The words come in 5 reads (16 ms each) after the first ask fell
        // due at 150 ms: the recorder looks for them only from then on.
        let words = words_after(5, Words::Finished);
        let (reason, into, asks) = turn_with(&[0.95], Some(words));
        assert_eq!(reason, EndReason::EndOfTurn);
        // Asked on time, while the words were still being made (the two
        // run side by side); its answer ended the turn once they were in,
        // and no second ask was made meanwhile.
        assert_eq!(asks.len(), 1, "{asks:?}");
        assert!((130.0..=150.0).contains(&asks[0]), "{asks:?}");
        ended_within(into, 200.0..300.0);
    }

    #[test]
    fn an_answer_is_read_with_the_words_when_they_come() {
        // Sure, but the words come in midway: the pause is held open.
        let words = words_after(5, Words::Midway);
        let (reason, into, asks) = turn_with(&[0.95], Some(words));
        assert_eq!(reason, EndReason::EndOfSpeech);
        assert_eq!(asks.len(), 1, "{asks:?}");
        ended_within(into, 1_990.0..2_050.0);
    }

    #[test]
    fn after_a_not_yet_only_silence_ends_the_pause() {
        // "Not yet" at 150 ms, then sure again and again: the silence
        // growing, not the sentence ending.
        let (reason, into, asks) = turn(&[0.3, 0.95], Some(Words::Finished));
        assert_eq!(reason, EndReason::EndOfSpeech);
        ended_within(into, 790.0..850.0);
        assert_eq!(asks.len(), 1, "no more asks after it: {asks:?}");
        // Unsure without "not yet" (0.6), then sure: the second ask may
        // still end it alone.
        let (reason, into, _) = turn(&[0.6, 0.95], Some(Words::Finished));
        assert_eq!(reason, EndReason::EndOfTurn);
        ended_within(into, 190.0..250.0);
    }

    #[test]
    fn a_not_yet_held_midway_is_let_go_when_a_second_look_hears_it_finished() {
        // Asked before the words were in ("not yet"); they came in midway
        // ("Turn on that"), holding the pause open; a second look then
        // heard it finished ("Turn on the lights."): the silence rule
        // ends it, as it would have without the words, not the longest
        // pause.
        let reads = AtomicUsize::new(0);
        let words: WordsCheck = Arc::new(move |_| match reads.fetch_add(1, Ordering::SeqCst) {
            0..2 => None,
            2..12 => Some(Words::Midway),
            _ => Some(Words::Finished),
        });
        let (reason, into, asks) = turn_with(&[0.3], Some(words));
        assert_eq!(reason, EndReason::EndOfSpeech);
        assert_eq!(asks.len(), 1, "no more asks after the not yet: {asks:?}");
        ended_within(into, 790.0..850.0);
    }

    #[test]
    fn the_silence_rule_waits_for_slow_words() {
        // The model is unsure (0.3: the silence rule's), and the words come
        // in long after its 800 ms (the recorder reads them about every
        // 10 ms of audio once the rule would end the pause): midway, they
        // hold the pause open to the detector's hang-over (2 s); finished,
        // the turn ends when they come; never, the hang-over ends it.
        for (words, range) in [
            (Some(Words::Midway), 1950.0..2100.0),
            (Some(Words::Finished), 900.0..1900.0),
            (None, 1950.0..2100.0),
        ] {
            let count = AtomicUsize::new(0);
            let check: WordsCheck = Arc::new(move |_| {
                (count.fetch_add(1, Ordering::SeqCst) >= 60)
                    .then_some(words)
                    .flatten()
            });
            let (reason, into, _) = turn_with(&[0.3], Some(check));
            assert_eq!(reason, EndReason::EndOfSpeech, "{words:?}");
            assert!(
                range.contains(&into),
                "{words:?}: ended {into:.0} ms into the pause"
            );
        }
    }

    #[test]
    fn an_answer_read_late_for_slow_words_is_not_quick() {
        // The words come in 20 reads (about 320 ms) after the first ask
        // fell due: the second answer is read near 350 ms of silence, past
        // the quick asks' 150 and 200 ms, so sure once is not enough.
        let words = words_after(20, Words::Finished);
        let (reason, into, asks) = turn_with(&[0.6, 0.95, 0.95], Some(words));
        assert_eq!(reason, EndReason::EndOfTurn);
        assert_eq!(asks.len(), 3, "{asks:?}");
        assert!(into > 400.0, "ended {into:.0} ms into the pause");
    }

    #[test]
    fn an_expected_answer_ends_the_turn_at_the_first_point_whatever_the_model_says() {
        // "Yes." to a yes/no question: the model's 0.2 would leave it to
        // the silence rule.
        let (reason, into, asks) = turn(&[0.2], Some(Words::Answer));
        assert_eq!(reason, EndReason::EndOfTurn);
        ended_within(into, 140.0..200.0);
        assert!(asks.is_empty(), "the words decide; no ask: {asks:?}");
    }

    #[test]
    fn a_model_sure_the_person_is_not_done_holds_a_pause_the_words_call_finished() {
        let doubting = |asks: &[f32]| {
            turn_tuned(
                spoken("Turn on the lights."),
                Duration::ZERO,
                asks,
                Some(Arc::new(|_| Some(Words::Finished))),
                2,
                |t| t.doubt = 0.1,
            )
        };
        // 0.02 at a thinking pause: held to the detector's hang-over (2 s).
        let (reason, into, _) = doubting(&[0.02]);
        assert_eq!(reason, EndReason::EndOfSpeech);
        ended_within(into, 1950.0..2100.0);
        // 0.3: unsure, not sure of "not yet": the silence rule's 800 ms.
        let (reason, into, _) = doubting(&[0.3]);
        assert_eq!(reason, EndReason::EndOfSpeech);
        ended_within(into, 790.0..850.0);
    }

    #[test]
    fn each_pause_waits_as_long_as_its_signals_say() {
        // The listen path's waits: 600 ms after a finished sentence the
        // model was unsure of, 800 ms (the silence rule) after words that
        // may go on, 1 s after a finished sentence the model is sure is
        // not the end, 1.5 s after words stopped midway; the detector's
        // hang-over (2 s) is never reached.
        let waiting = |asks: &[f32], words: Words| {
            turn_tuned(
                spoken("Turn on the lights."),
                Duration::ZERO,
                asks,
                Some(Arc::new(move |_| Some(words))),
                0,
                |t| {
                    t.doubt = 0.1;
                    t.finished = Duration::from_millis(600);
                    t.doubted = Duration::from_millis(1_000);
                    t.midway = Duration::from_millis(1_500);
                },
            )
        };
        for (asks, words, range) in [
            // Finished words, the model unsure.
            (&[0.3][..], Words::Finished, 590.0..650.0),
            // Finished words, the model sure the person is not done.
            (&[0.02][..], Words::Finished, 990.0..1_050.0),
            // Words that may go on.
            (&[0.3][..], Words::Open, 790.0..850.0),
            // Words stopped midway, the model sure they are finished.
            (&[0.99][..], Words::Midway, 1_490.0..1_550.0),
        ] {
            let (reason, into, _) = waiting(asks, words);
            assert_eq!(reason, EndReason::EndOfSpeech, "{words:?} {asks:?}");
            assert!(
                range.contains(&into),
                "{words:?} {asks:?}: ended {into:.0} ms into the pause"
            );
        }
    }

    #[test]
    fn a_person_who_came_back_from_a_long_pause_is_given_longer() {
        // Speech, a pause of thought (300 ms of zeros and espeak's own
        // silences around them, well under 800 ms), speech, then silence.
        // The model is unsure throughout: the silence decides, and with
        // the pace rule it waits twice the first pause when that is longer
        // than 800 ms.
        let mut speech = spoken("Turn on the lights.");
        speech.extend(vec![0.0; 16 * 300]);
        speech.extend(spoken("In the kitchen."));
        let run = |pace: f32| {
            turn_tuned(
                speech.clone(),
                Duration::ZERO,
                &[0.6],
                Some(Arc::new(|_| Some(Words::Finished))),
                2,
                |t| t.pace = pace,
            )
        };
        let (reason, into, _) = run(0.0);
        assert_eq!(reason, EndReason::EndOfSpeech);
        ended_within(into, 790.0..850.0);
        let (reason, into, _) = run(2.0);
        assert_eq!(reason, EndReason::EndOfSpeech);
        ended_within(into, 900.0..1600.0);
    }

    #[test]
    fn a_probable_finish_below_sure_waits_for_the_silence_rule() {
        let (reason, into, _) = turn(&[0.8], Some(Words::Finished));
        assert_eq!(reason, EndReason::EndOfSpeech);
        ended_within(into, 790.0..850.0);
    }

    #[test]
    fn words_that_may_go_on_leave_it_to_the_silence_rule() {
        let (reason, into, asks) = turn(&[0.99], Some(Words::Open));
        assert_eq!(reason, EndReason::EndOfSpeech);
        // Nothing the model says could change that: it is not asked.
        assert!(asks.is_empty(), "{asks:?}");
        ended_within(into, 790.0..850.0);
    }

    #[test]
    fn words_stopped_midway_hold_the_pause_open() {
        let (reason, into, asks) = turn(&[0.99], Some(Words::Midway));
        assert_eq!(reason, EndReason::EndOfSpeech);
        assert!(asks.is_empty(), "{asks:?}");
        ended_within(into, 1_990.0..2_050.0);
        // Without words, the model's "not yet" holds it too.
        let (_, into, _) = turn(&[0.3], None);
        ended_within(into, 1_990.0..2_050.0);
        // And its "finished" ends it without them.
        let (reason, into, _) = turn(&[0.95], None);
        assert_eq!(reason, EndReason::EndOfTurn);
        assert!(into < 200.0, "ended {into:.0} ms into the pause");
    }
}
