//! `hark-bench eot`: where the turn ends, on real recorded speech — the
//! curve of dead air after the true end of speech against the share of
//! turns cut off while the person was still speaking, for end-of-turn
//! rules side by side: silence alone at several hang-overs, Smart Turn
//! alone at several waits and thresholds, and Hark's rules.
//!
//! Each clip goes once through the appliance's own voice detector (the
//! `hark-audio` segmenter, audio time, faster than real time). At every
//! pause it records what each signal says there: Smart Turn v3.2's
//! probability at several lengths of silence (asked with the turn's audio
//! from its start, the silence included, as the daemon asks), and the live
//! engine's words (Moonshine tiny-en on the speech up to the pause, read
//! as finished, open or stopped midway). A rule is then a function of a
//! pause's signals: end here, after so much silence, or not. Every rule
//! sees the same pauses, so the comparison is exact, and a new rule costs
//! no model time.
//!
//! Hark's own rule is not written again here: the row "the daemon's
//! recorder" runs `hark-audio`'s recorder on each clip with the rule the
//! listen path builds (`hark_room::listen::turn_rule`), Smart Turn asked
//! where the recorder asks and Moonshine's words for the span it reads.
//! Compute is not in these figures (the recorder counts audio, and the
//! words are in when it reads them; in the daemon they are asked ahead of
//! each decision point): `hark-bench turn` measures the whole turn.
//!
//! A turn is cut when the rule ends it more than 100 ms before the clip's
//! true end of speech (word timings where the set has them, else the
//! audio); dead air is the rule's end minus the true end.

use std::{
    collections::HashMap,
    fmt::Write as _,
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Args;
use hark_audio::{
    config::VadConfig,
    ring::Ring,
    utterance::{self, Control, EndReason, Options},
    vad::{FRAME, Segmenter},
};
use hark_room::listen::Expect;
use hark_stt::turn::{Reading, read};

use crate::{
    figures::percentile,
    host::tidy,
    speech::{self, RealClip},
    stt,
};

#[derive(Debug, Args)]
pub struct EotArgs {
    #[command(flatten)]
    speech: speech::SpeechDir,
    /// Smart Turn v3.2 (`bash tests/setup.sh` unpacks it).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/smart-turn/smart-turn-v3.2-cpu.onnx"))]
    smart_turn: PathBuf,
    #[command(flatten)]
    live: stt::LivePaths,
    /// Also print every pause's signals, a line each.
    #[arg(long)]
    pauses: bool,
    /// At most this many turns from each source (speaker or recording).
    #[arg(long, default_value_t = 8)]
    per_source: usize,
    /// How the person is heard: as recorded, in a noisy room, from across
    /// a reverberant room, or with a thinking pause in mid-sentence.
    #[arg(long, value_enum, default_value_t = Condition::Clean)]
    condition: Condition,
}

/// How the person is heard (see [`prepare`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Condition {
    /// As recorded, then digital silence.
    Clean,
    /// A room's own noise (NST's recording of a room with its speaker
    /// silent, looped) under the speech and after it, 10 dB below it.
    Noisy,
    /// Across a reverberant room (RT60 0.6 s), 12 dB quieter, with the
    /// room's noise 20 dB below the quieter speech.
    Far,
    /// A thinking pause of [`THINKING_S`] put into the middle of the
    /// speech, at its quietest moment (between words).
    Pause,
}

/// The thinking pause [`Condition::Pause`] puts into each turn, s.
const THINKING_S: f64 = 0.8;

impl Condition {
    fn describe(self) -> &'static str {
        match self {
            Condition::Clean => "as recorded, then digital silence",
            Condition::Noisy => {
                "in a noisy room: a recorded room's noise 10 dB below the speech, under it and after it"
            }
            Condition::Far => {
                "from across a room: simulated reverberation (RT60 0.6 s), 12 dB quieter, the room's noise 20 dB below that"
            }
            Condition::Pause => {
                "with a thinking pause: 0.8 s of silence put into the middle of each turn, at its quietest moment"
            }
        }
    }
}

/// Silence lengths (ms) at which Smart Turn is asked at each pause.
const WAITS: [u32; 9] = [150, 200, 250, 300, 400, 500, 600, 800, 1000];
/// A turn ending this much before the true end of speech is cut (the true
/// end's own uncertainty: a word's fading tail).
const CUT_TOLERANCE_S: f64 = 0.1;
/// Silence appended to each clip: the virtual microphone's after a clip.
const TAIL_S: f64 = 4.0;
/// The live engine reads the words at a pause from this much silence on,
/// as the daemon shows it a pause (no rule ends a turn sooner).
const WORDS_FROM_S: f64 = 0.1;

/// The engines the signals and the recorder use, shared as the daemon
/// shares them with its recorder thread.
pub struct Engines {
    model: Arc<Mutex<hark_stt::turn::SmartTurn>>,
    live: Arc<Mutex<hark_stt::moonshine::Moonshine>>,
    /// The live engine's words for a clip's span, kept across the
    /// recorder's runs (the same span is read once).
    heard: Arc<Mutex<HashMap<Span, String>>>,
}

/// A clip's id and a span of its speech (from, to).
type Span = (String, Duration, Duration);

impl Engines {
    fn complete(&self, audio: &[f32]) -> anyhow::Result<f32> {
        let mut model = self.model.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(model.complete(audio)?)
    }

    fn words(&self, speech: &[f32]) -> anyhow::Result<String> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(live.transcribe(speech)?.text)
    }
}

/// A clip and [`TAIL_S`] of digital silence after it.
fn with_tail(clip: &RealClip) -> Vec<f32> {
    let mut input = clip.samples.clone();
    input.extend(std::iter::repeat_n(0.0, (TAIL_S * 16_000.0) as usize));
    input
}

/// RMS of samples.
fn rms(x: &[f32]) -> f32 {
    (x.iter().map(|v| v * v).sum::<f32>() / x.len().max(1) as f32).sqrt()
}

/// The clip as the microphone hears it in `condition`, with [`TAIL_S`]
/// after it (its samples then hold the tail; [`pauses`] and [`recorded`]
/// add none), and where its speech now ends. `noise`: a recorded room's
/// noise, looped as long as needed.
pub fn prepare(clip: &RealClip, condition: Condition, noise: &[f32]) -> RealClip {
    let mut out = clip.clone();
    let at = |s: f64| ((s * 16_000.0) as usize).min(clip.samples.len());
    let speech_rms =
        rms(&clip.samples[at(clip.speech.0)..at(clip.speech.1).max(at(clip.speech.0) + 1)]);
    let mut samples = with_tail(clip);
    let add_noise = |samples: &mut Vec<f32>, below_db: f32, level: f32| {
        let gain = level * 10f32.powf(-below_db / 20.0) / rms(noise).max(1e-9);
        for (i, s) in samples.iter_mut().enumerate() {
            *s += noise[i % noise.len()] * gain;
        }
    };
    match condition {
        Condition::Clean => {}
        Condition::Noisy => add_noise(&mut samples, 10.0, speech_rms),
        Condition::Far => {
            let room = crate::echo::Room {
                name: "far",
                delay_ms: 0.0,
                rt60: 0.6,
                wet: 0.8,
            };
            let quieter = 10f32.powf(-12.0 / 20.0);
            samples = crate::echo::convolve(&samples, &crate::echo::impulse(&room, 7))
                .into_iter()
                .map(|v| v * quieter)
                .collect();
            add_noise(&mut samples, 20.0, speech_rms * quieter);
        }
        Condition::Pause => {
            // The quietest 30 ms of the middle third of the speech: a gap
            // between words, or a stop inside one.
            let (from, to) = (clip.speech.0, clip.speech.1);
            let third = (to - from) / 3.0;
            let window = 480;
            let (a, b) = (at(from + third), at(to - third));
            let quietest = (a..b.saturating_sub(window).max(a))
                .step_by(80)
                .min_by(|&x, &y| {
                    rms(&samples[x..x + window]).total_cmp(&rms(&samples[y..y + window]))
                })
                .map_or(a, |x| x + window / 2);
            let gap = (THINKING_S * 16_000.0) as usize;
            samples.splice(quietest..quietest, std::iter::repeat_n(0.0, gap));
            out.speech.1 += THINKING_S;
            out.pauses.push((
                quietest as f64 / 16_000.0,
                quietest as f64 / 16_000.0 + THINKING_S,
            ));
        }
    }
    out.samples = samples;
    out
}

/// One pause in a clip's speech, as the detector saw it.
#[derive(Debug, Clone)]
pub struct Pause {
    /// Where the voice stopped, seconds into the clip.
    pub at: f64,
    /// How long the silence lasted, seconds (to the end of the input after
    /// the last word).
    pub length: f64,
    /// Smart Turn's probability at each of [`WAITS`] the pause reached.
    pub asks: Vec<(u32, f32)>,
    /// The live engine's words up to the pause, and how they read.
    pub words: String,
    pub reading: Reading,
}

impl Pause {
    pub fn ask(&self, wait: u32) -> Option<f32> {
        self.asks.iter().find(|(w, _)| *w == wait).map(|(_, p)| *p)
    }
}

/// A rule: given a pause, the silence (ms) after which it ends the turn
/// there, or `None` to keep listening through it. It ends the turn only if
/// the pause lasts that long.
pub type Rule = Box<dyn Fn(&Pause) -> Option<u32>>;

/// The signals at every pause of a clip: the detector run over the clip
/// and [`TAIL_S`] of silence.
pub fn pauses(clip: &RealClip, engines: &Engines) -> anyhow::Result<Vec<Pause>> {
    let vad = VadConfig {
        // Longer than any pause: the rules, not the detector, end turns.
        hangover_ms: 10_000,
        ..VadConfig::default()
    };
    let input = &clip.samples;
    let mut segmenter = Segmenter::new(&vad, 0);
    let mut out: Vec<Pause> = Vec::new();
    let mut current: Option<u64> = None;
    let seconds = |s: u64| s as f64 / 16_000.0;
    for (i, frame) in input.chunks(FRAME).enumerate() {
        let _ = segmenter.push(frame);
        let now = ((i + 1) * FRAME).min(input.len());
        let Some((start, voiced_end, quiet)) = segmenter.pause() else {
            current = None;
            continue;
        };
        if current != Some(voiced_end) {
            current = Some(voiced_end);
            out.push(Pause {
                at: seconds(voiced_end),
                length: 0.0,
                asks: Vec::new(),
                words: String::new(),
                reading: Reading::Finished,
            });
        }
        let Some(pause) = out.last_mut() else {
            continue;
        };
        let was = pause.length;
        pause.length = seconds(quiet);
        if was < WORDS_FROM_S && pause.length >= WORDS_FROM_S {
            pause.words = engines.words(&input[start as usize..voiced_end as usize])?;
            pause.reading = read(&pause.words);
        }
        for wait in WAITS {
            if quiet >= u64::from(wait) * 16 && pause.ask(wait).is_none() {
                let p = engines.complete(&input[start as usize..now])?;
                pause.asks.push((wait, p));
            }
        }
    }
    Ok(out)
}

/// Where `rule` ends the turn in a clip with these pauses, seconds into the
/// clip (`None`: it never did).
pub fn ended(rule: &Rule, pauses: &[Pause]) -> Option<f64> {
    pauses.iter().find_map(|p| {
        let wait = f64::from(rule(p)?) / 1000.0;
        (p.length >= wait).then_some(p.at + wait)
    })
}

/// Where the voice comes back after a turn ended at `end` inside one of
/// these pauses (`None`: it did not end inside one).
pub fn resumes(pauses: &[Pause], end: f64) -> Option<f64> {
    pauses
        .iter()
        .find(|p| p.at <= end && end < p.at + p.length)
        .map(|p| p.at + p.length)
}

/// Of the turns cut under `ends` (those `take` keeps), how many the
/// daemon's window for the person to go on (`audio.vad.continue_ms`)
/// catches: their voice comes back within it, so the rest reaches the
/// same agent.
fn caught(
    clips: &[RealClip],
    signals: &[Vec<Pause>],
    ends: &[Option<f64>],
    take: impl Fn(&RealClip) -> bool,
) -> usize {
    let window = f64::from(VadConfig::default().continue_ms) / 1000.0;
    clips
        .iter()
        .zip(signals)
        .zip(ends)
        .filter(|((clip, pauses), end)| {
            take(clip)
                && end.is_some_and(|end| {
                    end < clip.speech.1 - CUT_TOLERANCE_S
                        && resumes(pauses, end).is_some_and(|back| back - end <= window)
                })
        })
        .count()
}

/// How a rule did on a set of clips.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub turns: usize,
    pub cut: usize,
    /// Dead air of the turns not cut, ms.
    pub dead_air: Vec<f64>,
}

impl Outcome {
    pub fn add(&mut self, clip: &RealClip, end: Option<f64>) {
        self.turns += 1;
        match end {
            Some(end) if end >= clip.speech.1 - CUT_TOLERANCE_S => {
                self.dead_air.push((end - clip.speech.1) * 1000.0);
            }
            _ => self.cut += 1,
        }
    }

    pub fn cut_share(&self) -> f64 {
        self.cut as f64 / self.turns.max(1) as f64
    }
}

/// Silence alone: every pause of `ms` ends the turn.
pub fn silence(ms: u32) -> Rule {
    Box::new(move |_| Some(ms))
}

/// Smart Turn alone, as pipecat deploys it: asked once the silence reaches
/// `wait`, the turn ends there when it says at least `sure`; otherwise
/// `fallback` ms of silence ends it.
pub fn smart_turn(wait: u32, sure: f32, fallback: u32) -> Rule {
    Box::new(move |p| match p.ask(wait) {
        Some(prob) if prob >= sure => Some(wait),
        _ => Some(fallback),
    })
}

/// The live path's rule as the daemon shipped it before the real-speech
/// set: asked at 150 and 200 ms, the turn ends at an ask of at least 0.95
/// when the words read finished (an earlier ask under 0.5 stops that);
/// words stopped midway hold the pause open to 2500 ms; otherwise the
/// silence rule's 800 ms.
pub fn hark_before() -> Rule {
    Box::new(|p| {
        for wait in [150, 200] {
            let prob = p.ask(wait)?;
            if prob < 0.5 {
                break;
            }
            if prob >= 0.95 && p.reading == Reading::Finished {
                return Some(wait);
            }
        }
        Some(if p.reading == Reading::Midway {
            2500
        } else {
            800
        })
    })
}

/// Where the daemon's recorder ends the turn in `clip`, seconds into it
/// (`None`: it never did): `hark-audio`'s recorder with the rule the listen
/// path builds for a listen expecting `expect`, the detector's hang-over
/// the longest pause inside a turn as the listen path sets it.
pub fn recorded(
    clip: &RealClip,
    engines: &Engines,
    expect: &Expect,
    pause_ms: u32,
) -> anyhow::Result<Option<f64>> {
    let input = clip.samples.clone();
    let vad = VadConfig {
        end_of_turn: hark_audio::config::EndOfTurnRule::SmartTurn,
        pause_ms,
        ..VadConfig::default()
    };
    let model = Arc::clone(&engines.model);
    let check: utterance::TurnCheck = Arc::new(move |audio: &[f32]| {
        let mut model = model.lock().unwrap_or_else(PoisonError::into_inner);
        model.complete(audio).ok()
    });
    // The live words for the span the recorder reads, once a span.
    let (live, heard, audio, yes_no, expected, id) = (
        Arc::clone(&engines.live),
        Arc::clone(&engines.heard),
        Arc::new(input.clone()),
        hark_core::words::YesNo::default(),
        expect.clone(),
        clip.id.clone(),
    );
    let words: utterance::WordsCheck = Arc::new(move |span: (Duration, Duration)| {
        let mut heard = heard.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (id.clone(), span.0, span.1);
        let text = match heard.get(&key) {
            Some(text) => text.clone(),
            None => {
                let at = |d: Duration| ((d.as_secs_f64() * 16_000.0) as usize).min(audio.len());
                let mut live = live.lock().unwrap_or_else(PoisonError::into_inner);
                let text = live.transcribe(&audio[at(span.0)..at(span.1)]).ok()?.text;
                heard.insert(key, text.clone());
                text
            }
        };
        Some(hark_room::listen::words_at_pause(&text, &expected, &yes_no))
    });
    let mut options = Options::new(
        Duration::from_secs(5),
        // The whole clip is in the ring before recording starts: the
        // pre-roll reaches back to its first sample.
        Duration::from_secs_f64(input.len() as f64 / 16_000.0),
        VadConfig {
            hangover_ms: vad.max_pause_ms,
            ..vad.clone()
        },
    );
    options.end_of_turn = Some(hark_room::listen::turn_rule(
        &vad,
        expect,
        check,
        Some(words),
    ));
    let ring = Ring::new(input.len() + FRAME);
    ring.push(&input);
    let utterance = utterance::record(&ring, &options, &Control::default());
    Ok(match utterance.reason {
        EndReason::EndOfTurn | EndReason::EndOfSpeech | EndReason::MaxLength => {
            Some(utterance.samples.len() as f64 / 16_000.0)
        }
        _ => None,
    })
}

pub fn main(args: EotArgs) -> anyhow::Result<()> {
    let all = speech::load(&tidy(&args.speech.speech))?;
    let runtime = hark_onnx::OnnxRuntime::load(&tidy(&args.live.onnxruntime))?;
    let engines = Engines {
        model: Arc::new(Mutex::new(
            hark_stt::turn::SmartTurn::load(&runtime, &tidy(&args.smart_turn))
                .context("loading Smart Turn")?,
        )),
        live: Arc::new(Mutex::new(
            hark_stt::moonshine::Moonshine::load(&runtime, &tidy(&args.live.moonshine), 1)
                .context("loading Moonshine")?,
        )),
        heard: Arc::default(),
    };
    // English turns with speech in them (the rules read English words),
    // every source capped to the same number of clips.
    let noise: Vec<f32> = all
        .iter()
        .find(|c| c.subset == "no speech")
        .map(|c| c.samples.clone())
        .context("the real-speech set has no recording of a room without speech")?;
    let clips: Vec<RealClip> = speech::capped(&all, args.per_source)
        .iter()
        .map(|c| prepare(c, args.condition, &noise))
        .collect();
    let started = Instant::now();
    let defaults = VadConfig::default().pause_ms;
    let settings: Vec<u32> = [150, 200, 250, 300, 350, 400, 500]
        .into_iter()
        .chain([defaults])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut signals = Vec::new();
    let mut daemon: Vec<Vec<Option<f64>>> = vec![Vec::new(); settings.len()];
    for (n, clip) in clips.iter().enumerate() {
        eprintln!("[eot] {}/{} {}", n + 1, clips.len(), clip.id);
        signals.push(pauses(clip, &engines)?);
        for (ends, &pause_ms) in daemon.iter_mut().zip(&settings) {
            ends.push(recorded(clip, &engines, &Expect::Anything, pause_ms)?);
        }
    }
    eprintln!(
        "[eot] {} clips in {:.0} s",
        clips.len(),
        started.elapsed().as_secs_f64()
    );
    let mut families: Vec<Family> = families()
        .into_iter()
        .map(|(name, rules)| Family {
            name,
            points: rules
                .into_iter()
                .map(|(knob, rule)| (knob, signals.iter().map(|p| ended(&rule, p)).collect()))
                .collect(),
        })
        .collect();
    // The daemon's rule with its first decision point moved (the knob a
    // person sets, `audio.vad.pause_ms`), its defaults first.
    let mut points: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    for (pause_ms, ends) in settings.iter().zip(daemon) {
        let name = if *pause_ms == defaults {
            "its defaults".to_owned()
        } else {
            format!("pause_ms = {pause_ms}")
        };
        points.push((name, ends));
    }
    points.sort_by_key(|(name, _)| name != "its defaults");
    families.push(Family {
        name: DAEMON.to_owned(),
        points,
    });
    println!(
        "{}",
        render(&clips, &signals, args.per_source, args.condition, &families)
    );
    if args.condition == Condition::Clean {
        println!("{}", answers(&clips, &engines)?);
    }
    if args.pauses {
        println!("{}", pause_table(&clips, &signals));
    }
    Ok(())
}

/// The daemon's own rule, run through its recorder.
const DAEMON: &str =
    "**Hark: the daemon's recorder** (live words + Smart Turn, the speaker's pace)";

/// A kind of rule and its settings swept: each point a setting's name and
/// where it ends every clip (in the clips' order).
struct Family {
    name: String,
    points: Vec<(String, Vec<Option<f64>>)>,
}

/// The rules compared, as families of settings.
fn families() -> Vec<(String, Vec<(String, Rule)>)> {
    let silence_family = (200..=3000)
        .step_by(100)
        .map(|ms| (format!("{ms} ms"), silence(ms)))
        .collect();
    let mut alone = Vec::new();
    for wait in WAITS {
        for sure in [0.3, 0.5, 0.7, 0.8, 0.9, 0.95] {
            for fallback in [1000, 1500, 2000, 3000] {
                alone.push((
                    format!("at {wait} ms, p ≥ {sure}, else {fallback} ms"),
                    smart_turn(wait, sure, fallback),
                ));
            }
        }
    }
    vec![
        ("silence alone".to_owned(), silence_family),
        (
            "Smart Turn alone (asked once; else a long silence)".to_owned(),
            alone,
        ),
        (
            "Hark before the real set (signals replay)".to_owned(),
            vec![("as shipped".to_owned(), hark_before())],
        ),
    ]
}

/// How the turns of `clips` (those `take` keeps) came out under `ends`.
fn outcome(clips: &[RealClip], ends: &[Option<f64>], take: impl Fn(&RealClip) -> bool) -> Outcome {
    let mut o = Outcome::default();
    for (clip, &end) in clips.iter().zip(ends) {
        if take(clip) {
            o.add(clip, end);
        }
    }
    o
}

/// `cut (share) | median | p90` of an outcome.
fn cells(o: &Outcome) -> String {
    format!(
        "{}/{} ({:.1} %) | {:.0} | {:.0}",
        o.cut,
        o.turns,
        o.cut_share() * 100.0,
        percentile(&o.dead_air, 0.5),
        percentile(&o.dead_air, 0.9)
    )
}

/// The family's best point at a cut rate: the lowest median dead air of
/// the settings that cut at most `share` of the turns, as `median (p90)`
/// with the setting, or "—" when every setting cuts more.
fn at_cut(
    clips: &[RealClip],
    family: &Family,
    share: f64,
    take: &dyn Fn(&RealClip) -> bool,
) -> String {
    family
        .points
        .iter()
        .map(|(knob, ends)| (knob, outcome(clips, ends, take)))
        .filter(|(_, o)| o.turns > 0 && o.cut_share() <= share + 1e-9)
        .min_by(|a, b| percentile(&a.1.dead_air, 0.5).total_cmp(&percentile(&b.1.dead_air, 0.5)))
        .map_or("—".to_owned(), |(knob, o)| {
            format!(
                "{:.0} ({:.0}) · {knob}",
                percentile(&o.dead_air, 0.5),
                percentile(&o.dead_air, 0.9)
            )
        })
}

/// A table row: `name`, then how the turns came out under `ends` on the
/// whole set and on the held-out split.
fn split_row(out: &mut String, name: &str, clips: &[RealClip], ends: &[Option<f64>]) {
    let _ = writeln!(
        out,
        "| {name} | {} | {} |",
        cells(&outcome(clips, ends, |_| true)),
        cells(&outcome(clips, ends, |c| speech::held_out(&c.group)))
    );
}

/// [`split_row`] with, after each split, how many of its cut turns the
/// window for the person to go on catches.
fn split_row_caught(
    out: &mut String,
    name: &str,
    clips: &[RealClip],
    signals: &[Vec<Pause>],
    ends: &[Option<f64>],
) {
    let held = |c: &RealClip| speech::held_out(&c.group);
    let _ = writeln!(
        out,
        "| {name} | {} | {} | {} | {} |",
        cells(&outcome(clips, ends, |_| true)),
        caught(clips, signals, ends, |_| true),
        cells(&outcome(clips, ends, held)),
        caught(clips, signals, ends, held)
    );
}

/// The tables: the headline (whole set and held-out split), the curve of
/// every family, and the daemon's rule by source.
fn render(
    clips: &[RealClip],
    signals: &[Vec<Pause>],
    per_source: usize,
    condition: Condition,
    families: &[Family],
) -> String {
    let held = |c: &RealClip| speech::held_out(&c.group);
    let whole = |_: &RealClip| true;
    let mut groups: Vec<&str> = clips.iter().map(|c| c.group.as_str()).collect();
    groups.sort_unstable();
    groups.dedup();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## End of turn on real speech: {condition:?}\n\n{} English turns from {} sources, at most {per_source} from each \
         (held out, never tuned on: {}; {} turns), heard {}. Dead air: the rule's end after the true end of \
         speech, turns not cut; cut: ended more than {:.0} ms before it.\n",
        clips.len(),
        groups.len(),
        speech::HELD_OUT.join(", "),
        clips.iter().filter(|c| held(c)).count(),
        condition.describe(),
        CUT_TOLERANCE_S * 1000.0
    );
    let thinking: Vec<String> = clips
        .iter()
        .filter(|c| c.longest_pause() >= 1.0)
        .map(|c| format!("{} {:.2} s", c.id, c.longest_pause()))
        .collect();
    let _ = writeln!(
        out,
        "Longest pauses between words (word timings): {}.\n",
        thinking.join(", ")
    );
    let _ = writeln!(
        out,
        "### The defaults and the baselines\n\nCaught: cut turns where the person's voice comes back within `audio.vad.continue_ms` ({} ms) of the \
         end, so the daemon hears the rest for the same agent.\n\n\
         | rule | whole set: cut | median | p90 | caught | held out: cut | median | p90 | caught |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|",
        VadConfig::default().continue_ms
    );
    let shown = [
        ("silence alone", "800 ms"),
        ("silence alone", "1000 ms"),
        (
            "Smart Turn alone (asked once; else a long silence)",
            "at 200 ms, p ≥ 0.5, else 3000 ms",
        ),
        ("Hark before the real set (signals replay)", "as shipped"),
        (DAEMON, "its defaults"),
    ];
    for (family, knob) in shown {
        let Some(f) = families.iter().find(|f| f.name == family) else {
            continue;
        };
        let Some((_, ends)) = f.points.iter().find(|(k, _)| k == knob) else {
            continue;
        };
        split_row_caught(&mut out, &format!("{family}, {knob}"), clips, signals, ends);
    }
    let _ = writeln!(
        out,
        "\n### The curve: dead air, median (p90) ms, at a cut rate\n\nEach family's best setting that cuts at most so many turns.\n\n\
         | rules | whole set: 3 % | 5 % | 10 % | held out: 3 % | 5 % | 10 % |\n|---|---|---|---|---|---|---|"
    );
    for f in families {
        let _ = write!(out, "| {} |", f.name);
        for take in [&whole as &dyn Fn(&RealClip) -> bool, &held] {
            for share in [0.03, 0.05, 0.10] {
                let _ = write!(out, " {} |", at_cut(clips, f, share, take));
            }
        }
        out.push('\n');
    }
    if let Some(f) = families.iter().find(|f| f.name == DAEMON) {
        let _ = writeln!(
            out,
            "\n### The daemon's rule by its first decision point (`audio.vad.pause_ms`)\n\n| setting | whole set: cut | median | p90 | held out: cut | median | p90 |\n|---|--:|--:|--:|--:|--:|--:|"
        );
        for (knob, ends) in &f.points {
            split_row(&mut out, knob, clips, ends);
        }
    }
    let _ = writeln!(
        out,
        "\n### By source: the daemon's rule (and silence 800 ms)\n\n| source | turns | cut | median | p90 | silence 800 ms: cut | median |\n|---|--:|--:|--:|--:|--:|--:|"
    );
    let daemon = families
        .iter()
        .find(|f| f.name == DAEMON)
        .map(|f| &f.points[0].1);
    let silence800 = families
        .iter()
        .find(|f| f.name == "silence alone")
        .and_then(|f| f.points.iter().find(|(k, _)| k == "800 ms"))
        .map(|(_, e)| e);
    if let (Some(daemon), Some(silence800)) = (daemon, silence800) {
        for g in &groups {
            let in_group = |c: &RealClip| c.group == *g;
            let d = outcome(clips, daemon, in_group);
            let s = outcome(clips, silence800, in_group);
            let _ = writeln!(
                out,
                "| {g}{} | {} | {} | {:.0} | {:.0} | {} | {:.0} |",
                if speech::held_out(g) {
                    " (held out)"
                } else {
                    ""
                },
                d.turns,
                d.cut,
                percentile(&d.dead_air, 0.5),
                percentile(&d.dead_air, 0.9),
                s.cut,
                percentile(&s.dead_air, 0.5)
            );
        }
    }
    out
}

/// The short answers as answers to the question an agent would have
/// asked: "no" to a `confirm`, the others to a `choose` offering them among
/// two more options. Where the turn ends, against no expectation.
fn answers(clips: &[RealClip], engines: &Engines) -> anyhow::Result<String> {
    let pause_ms = VadConfig::default().pause_ms;
    let mut out = String::from(
        "### Short answers, with what the agent asked\n\n| clip | said | asked | dead air, no expectation | dead air, expected |\n|---|---|---|--:|--:|\n",
    );
    for clip in clips.iter().filter(|c| c.subset == "short answers") {
        let yes_no = hark_core::words::YesNo::default();
        let expect = if yes_no.classify(&clip.text) == hark_core::words::Answer::Unclear {
            Expect::OneOf(vec![
                clip.text.clone(),
                "Tuesday".into(),
                "the red one".into(),
            ])
        } else {
            Expect::YesNo
        };
        let asked = match &expect {
            Expect::YesNo => "confirm".to_owned(),
            _ => "choose".to_owned(),
        };
        let air = |end: Option<f64>| {
            end.map_or("never".to_owned(), |e| {
                format!("{:.0} ms", (e - clip.speech.1) * 1000.0)
            })
        };
        let _ = writeln!(
            out,
            "| {} | {} | {asked} | {} | {} |",
            clip.id,
            clip.text,
            air(recorded(clip, engines, &Expect::Anything, pause_ms)?),
            air(recorded(clip, engines, &expect, pause_ms)?),
        );
    }
    Ok(out)
}

fn pause_table(clips: &[RealClip], signals: &[Vec<Pause>]) -> String {
    let mut out = String::from("clip\tgroup\tsubset\ttrue_end\tat\tlength\treading\tasks\twords\n");
    for (clip, pauses) in clips.iter().zip(signals) {
        for p in pauses.iter().filter(|p| p.length >= 0.1) {
            let asks: Vec<String> = p.asks.iter().map(|(w, a)| format!("{w}:{a:.2}")).collect();
            let _ = writeln!(
                out,
                "{}\t{}\t{}\t{:.2}\t{:.2}\t{:.2}\t{:?}\t{}\t{}",
                clip.id,
                clip.group,
                clip.subset,
                clip.speech.1,
                p.at,
                p.length,
                p.reading,
                asks.join(" "),
                p.words
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(at: f64, length: f64, p: f32, reading: Reading) -> Pause {
        Pause {
            at,
            length,
            asks: WAITS.iter().map(|w| (*w, p)).collect(),
            words: String::new(),
            reading,
        }
    }

    fn clip(end: f64) -> RealClip {
        RealClip {
            id: "c".into(),
            subset: "s".into(),
            group: "g".into(),
            language: "en".into(),
            text: "t".into(),
            samples: Vec::new(),
            speech: (0.0, end),
            evaluation_only: false,
            pauses: Vec::new(),
        }
    }

    #[test]
    fn a_rule_ends_at_the_first_pause_long_enough() {
        let pauses = [
            pause(1.0, 0.5, 0.1, Reading::Midway),
            pause(2.0, 5.0, 0.1, Reading::Finished),
        ];
        assert_eq!(ended(&silence(800), &pauses), Some(2.8));
        assert_eq!(ended(&silence(400), &pauses), Some(1.4));
    }

    #[test]
    fn a_cut_is_caught_when_the_voice_comes_back_within_the_window() {
        let pauses = [
            pause(1.0, 1.2, 0.1, Reading::Finished),
            pause(3.0, 2.6, 0.1, Reading::Finished),
            pause(6.0, 5.0, 0.1, Reading::Finished),
        ];
        assert_eq!(resumes(&pauses, 1.7), Some(2.2));
        assert_eq!(resumes(&pauses, 2.5), None);
        let clips = [clip(7.0), clip(7.0), clip(7.0)];
        let signals = vec![pauses.to_vec(); 3];
        // Cut at 1.7 (back 0.5 s later), cut at 3.3 (back 2.3 s later:
        // past the 2 s window), and one not cut.
        let ends = [Some(1.7), Some(3.3), Some(7.2)];
        assert_eq!(caught(&clips, &signals, &ends, |_| true), 1);
    }

    #[test]
    fn a_turn_ended_before_the_true_end_is_cut_and_has_no_dead_air() {
        let mut o = Outcome::default();
        o.add(&clip(2.0), Some(1.4));
        o.add(&clip(2.0), Some(2.3));
        o.add(&clip(2.0), None);
        assert_eq!((o.turns, o.cut), (3, 2));
        assert_eq!(o.dead_air.len(), 1);
        assert!((o.dead_air[0] - 300.0).abs() < 1e-6);
    }

    #[test]
    fn smart_turn_alone_ends_on_a_sure_ask_or_waits_out_its_fallback() {
        let sure = pause(1.0, 5.0, 0.9, Reading::Finished);
        let unsure = pause(1.0, 5.0, 0.2, Reading::Finished);
        assert_eq!(smart_turn(200, 0.5, 3000)(&sure), Some(200));
        assert_eq!(smart_turn(200, 0.5, 3000)(&unsure), Some(3000));
    }

    #[test]
    fn before_the_real_set_words_midway_held_a_pause_open() {
        let midway = pause(1.0, 5.0, 0.99, Reading::Midway);
        let finished = pause(1.0, 5.0, 0.99, Reading::Finished);
        assert_eq!(hark_before()(&midway), Some(2500));
        assert_eq!(hark_before()(&finished), Some(150));
    }
}
