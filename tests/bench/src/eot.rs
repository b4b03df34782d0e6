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
    speech::{self, RealClip},
    stt, tidy,
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
}

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
    let input = with_tail(clip);
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
) -> anyhow::Result<Option<f64>> {
    let input = with_tail(clip);
    let vad = VadConfig {
        end_of_turn: hark_audio::config::EndOfTurnRule::SmartTurn,
        ..VadConfig::default()
    };
    let model = Arc::clone(&engines.model);
    let check: utterance::TurnCheck = Arc::new(move |audio: &[f32]| {
        let mut model = model.lock().unwrap_or_else(PoisonError::into_inner);
        model.complete(audio).ok()
    });
    // The live words for the span the recorder reads, once a span.
    let heard: Arc<Mutex<HashMap<(Duration, Duration), utterance::Words>>> = Arc::default();
    let (live, audio, yes_no, expected) = (
        Arc::clone(&engines.live),
        Arc::new(input.clone()),
        hark_core::words::YesNo::default(),
        expect.clone(),
    );
    let words: utterance::WordsCheck = Arc::new(move |span: (Duration, Duration)| {
        let mut heard = heard.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(words) = heard.get(&span) {
            return Some(*words);
        }
        let at = |d: Duration| ((d.as_secs_f64() * 16_000.0) as usize).min(audio.len());
        let mut live = live.lock().unwrap_or_else(PoisonError::into_inner);
        let text = live.transcribe(&audio[at(span.0)..at(span.1)]).ok()?.text;
        let words = hark_room::listen::words_at_pause(&text, &expected, &yes_no);
        heard.insert(span, words);
        Some(words)
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
    let clips = speech::load(&tidy(&args.speech.speech))?;
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
    };
    // English turns with speech in them: the rules read English words.
    let clips: Vec<RealClip> = clips
        .into_iter()
        .filter(|c| c.language == "en" && !c.text.is_empty())
        .collect();
    let started = Instant::now();
    let mut signals = Vec::new();
    let mut daemon = Vec::new();
    for (n, clip) in clips.iter().enumerate() {
        eprintln!("[eot] {}/{} {}", n + 1, clips.len(), clip.id);
        signals.push(pauses(clip, &engines)?);
        daemon.push(recorded(clip, &engines, &Expect::Anything)?);
    }
    eprintln!(
        "[eot] {} clips in {:.0} s",
        clips.len(),
        started.elapsed().as_secs_f64()
    );
    let mut rows: Vec<(String, Vec<Option<f64>>)> = rules()
        .into_iter()
        .map(|(name, rule)| (name, signals.iter().map(|p| ended(&rule, p)).collect()))
        .collect();
    rows.push((
        "**Hark now: the daemon's recorder** (live words + Smart Turn, sure not-yet holds, the speaker's pace)"
            .to_owned(),
        daemon.clone(),
    ));
    println!("{}", render(&clips, &rows));
    println!("{}", answers(&clips, &engines, &daemon)?);
    if args.pauses {
        println!("{}", pause_table(&clips, &signals));
    }
    Ok(())
}

/// The rules compared, by name.
fn rules() -> Vec<(String, Rule)> {
    let mut rules: Vec<(String, Rule)> = Vec::new();
    for ms in [300, 400, 500, 600, 700, 800, 1000, 1200, 1500, 2000] {
        rules.push((format!("silence {ms} ms"), silence(ms)));
    }
    for wait in [150, 200, 300, 500] {
        for sure in [0.5, 0.7, 0.9] {
            rules.push((
                format!("Smart Turn at {wait} ms, p ≥ {sure}, else 3000 ms"),
                smart_turn(wait, sure, 3000),
            ));
        }
    }
    rules.push((
        "Hark before (live words + Smart Turn)".to_owned(),
        hark_before(),
    ));
    rules
}

/// The table: each row a rule's end of every clip (in `clips`' order).
fn render(clips: &[RealClip], rows: &[(String, Vec<Option<f64>>)]) -> String {
    let mut subsets: Vec<&str> = clips.iter().map(|c| c.subset.as_str()).collect();
    subsets.sort_unstable();
    subsets.dedup();
    let mut out = String::new();
    let pooled = clips.iter().filter(|c| !c.evaluation_only).count();
    let _ = writeln!(
        out,
        "## End of turn on real speech\n\n{} English clips ({} pooled; evaluation-only clips apart). \
         Dead air: the rule's end after the true end of speech, turns not cut; cut: ended more than \
         {:.0} ms before it.\n",
        clips.len(),
        pooled,
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
    let _ = write!(out, "| rule | cut | dead air median | p90 |");
    for s in &subsets {
        let _ = write!(out, " {s} |");
    }
    let _ = write!(out, "\n|---|--:|--:|--:|");
    for _ in &subsets {
        let _ = write!(out, "--:|");
    }
    out.push('\n');
    for (name, ends) in rows {
        let mut all = Outcome::default();
        let mut by: Vec<Outcome> = vec![Outcome::default(); subsets.len()];
        for (clip, &end) in clips.iter().zip(ends) {
            if !clip.evaluation_only {
                all.add(clip, end);
            }
            if let Some(i) = subsets.iter().position(|s| *s == clip.subset) {
                by[i].add(clip, end);
            }
        }
        let _ = write!(
            out,
            "| {name} | {}/{} ({:.1} %) | {:.0} | {:.0} |",
            all.cut,
            all.turns,
            all.cut_share() * 100.0,
            percentile(&all.dead_air, 0.5),
            percentile(&all.dead_air, 0.9)
        );
        for o in &by {
            let _ = write!(
                out,
                " {:.0} ms, {}/{} cut |",
                percentile(&o.dead_air, 0.5),
                o.cut,
                o.turns
            );
        }
        out.push('\n');
    }
    out
}

/// The short answers as answers to the question an agent would have
/// asked: "no" to a `confirm`, the others to a `choose` offering them among
/// two more options. Where the turn ends, against no expectation.
fn answers(
    clips: &[RealClip],
    engines: &Engines,
    daemon: &[Option<f64>],
) -> anyhow::Result<String> {
    let mut out = String::from(
        "### Short answers, with what the agent asked\n\n| clip | said | asked | dead air, no expectation | dead air, expected |\n|---|---|---|--:|--:|\n",
    );
    for (clip, anything) in clips.iter().zip(daemon) {
        if clip.subset != "short answers" {
            continue;
        }
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
            air(*anything),
            air(recorded(clip, engines, &expect)?),
        );
    }
    Ok(out)
}

fn pause_table(clips: &[RealClip], signals: &[Vec<Pause>]) -> String {
    let mut out = String::from("clip\tsubset\ttrue_end\tat\tlength\treading\tasks\twords\n");
    for (clip, pauses) in clips.iter().zip(signals) {
        for p in pauses.iter().filter(|p| p.length >= 0.1) {
            let asks: Vec<String> = p.asks.iter().map(|(w, a)| format!("{w}:{a:.2}")).collect();
            let _ = writeln!(
                out,
                "{}\t{}\t{:.2}\t{:.2}\t{:.2}\t{:?}\t{}\t{}",
                clip.id,
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
