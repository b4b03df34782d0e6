//! Word errors of the engines on the same audio: the live engine
//! (Moonshine tiny-en as the daemon runs it, and greedy only), Hark's
//! whisper tiny.en q8_0 and faster-whisper tiny.en int8 (the peer), every
//! system hearing every clip once, in one run.
//!
//! The measure is the real-speech set (`tests/.speech`, recorded people):
//! its English clips, whole, per subset, pooled without the clips kept for
//! evaluation only. A second table keeps the synthetic voices of earlier
//! runs: the turn bench's sentences by six espeak-ng voices and takes of
//! the appliance's piper voice. Both count runaway transcripts, the
//! decoder looping ("six, six, six…"): more than twice the words said,
//! plus three.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    sync::atomic::AtomicBool,
    time::Instant,
};

use clap::Args;
use hark_stt::engine::Engine;
use hark_stt::recognizer::{EngineConfig, Request};

use crate::{
    figures::percentile,
    host::{Scratch, tidy},
    procfs,
    speech::{self, RealClip},
    stt, turn,
};

#[derive(Debug, Args)]
pub struct WerArgs {
    #[command(flatten)]
    speech: speech::SpeechDir,
    /// Only one of the two sets.
    #[arg(long, value_enum)]
    only: Option<Set>,
    /// Takes of every sentence by the piper voice.
    #[arg(long, default_value_t = 3)]
    piper_takes: usize,
    /// whisper tiny.en q8_0 (made by `tests/run`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store/ggml-tiny.en-q8_0.bin"))]
    whisper: PathBuf,
    #[command(flatten)]
    live: stt::LivePaths,
    #[command(flatten)]
    peers: stt::PeerVenv,
    /// Threads for every system; beam width for both whispers.
    #[arg(long, default_value_t = 2)]
    threads: u16,
    #[arg(long, default_value_t = 5)]
    beam: u8,
    /// Skip faster-whisper.
    #[arg(long)]
    no_peer: bool,
    /// The multilingual whisper base q8_0 (`appliance/setup-models`
    /// installs it), heard with language `auto`; skipped when missing.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store/ggml-base-q8_0.bin"))]
    base: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Set {
    /// Recorded people (`tests/.speech`).
    Real,
    /// espeak-ng and piper.
    Synthetic,
}

const SYSTEMS: [&str; 5] = [
    "Hark live: Moonshine tiny-en (as the daemon runs it)",
    "Moonshine tiny-en, greedy only",
    "Hark whisper tiny.en q8_0 (beam 5)",
    "faster-whisper tiny.en int8 (beam 5)",
    "Hark whisper base q8_0, multilingual, language auto (beam 5)",
];

/// A clip: its group (the voice that spoke it, or the real set's subset),
/// the sentence, and the audio (16 kHz mono, as floats and as the raw S16
/// file the peer reads).
struct Clip {
    id: String,
    voice: String,
    text: String,
    samples: Vec<f32>,
    raw: PathBuf,
    evaluation_only: bool,
    /// ISO 639-1; the tables of errors count English only.
    language: String,
}

/// What one system made of one clip.
#[derive(Clone, Default)]
struct Heard {
    errors: usize,
    words: usize,
    ms: f64,
    text: String,
    /// More than twice the words said, plus three: a decoder loop.
    runaway: bool,
    /// The language the system answered in (or its error).
    language: String,
    /// The engine still doubted its transcript after its fallback.
    doubt: bool,
}

pub fn main(args: WerArgs) -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let real = if args.only == Some(Set::Synthetic) {
        Vec::new()
    } else {
        real_clips(&scratch.0, &speech::load(&tidy(&args.speech.speech))?)?
    };
    let synthetic = if args.only == Some(Set::Real) {
        Vec::new()
    } else {
        synthetic_clips(&scratch.0, args.piper_takes)?
    };

    let load_start = procfs::loadavg();
    let runtime = hark_onnx::OnnxRuntime::load(&tidy(&args.live.onnxruntime))?;
    let threads = usize::from(args.threads.max(1));
    let mut systems = Systems {
        moonshine: hark_stt::moonshine::Moonshine::load(
            &runtime,
            &tidy(&args.live.moonshine),
            threads,
        )?,
        whisper: Engine::start(EngineConfig {
            model: tidy(&args.whisper),
            threads: args.threads,
            beam_size: args.beam,
            language: "en".into(),
            ..EngineConfig::default()
        })?,
        base: if tidy(&args.base).is_file() {
            Some(Engine::start(EngineConfig {
                model: tidy(&args.base),
                threads: args.threads,
                beam_size: args.beam,
                language: "auto".into(),
                ..EngineConfig::default()
            })?)
        } else {
            eprintln!(
                "[wer] no {}: whisper base not measured",
                args.base.display()
            );
            None
        },
        peer: if args.no_peer {
            None
        } else {
            Some(turn::Peer::start(
                &args.peers,
                &args.live.ct2,
                args.threads,
                args.beam,
            )?)
        },
    };
    let heard_real = systems.hear("real", &real)?;
    let heard_synthetic = systems.hear("synthetic", &synthetic)?;
    let load = (load_start, procfs::loadavg());
    if !real.is_empty() {
        let (about, rows) = real_rows(&real);
        let report = report(
            "real speech",
            &about,
            &args,
            &real,
            &heard_real,
            rows,
            &load,
        );
        print!("{report}");
    }
    if !synthetic.is_empty() {
        let (about, rows) = synthetic_rows(&synthetic, args.piper_takes);
        let report = report(
            "synthetic voices",
            &about,
            &args,
            &synthetic,
            &heard_synthetic,
            rows,
            &load,
        );
        print!("{report}");
    }
    Ok(())
}

/// The real set's English clips with words to say.
fn real_clips(dir: &Path, set: &[RealClip]) -> anyhow::Result<Vec<Clip>> {
    let mut clips = Vec::new();
    for clip in set.iter().filter(|c| !c.text.trim().is_empty()) {
        let mut made = clip_of(
            dir,
            clips.len(),
            &clip.subset,
            &clip.text,
            clip.samples.clone(),
        )?;
        made.id.clone_from(&clip.id);
        made.evaluation_only = clip.evaluation_only;
        made.language.clone_from(&clip.language);
        clips.push(made);
    }
    anyhow::ensure!(!clips.is_empty(), "the real set has no English clips");
    Ok(clips)
}

/// The turn bench's sentences by six espeak-ng voices and `piper_takes`
/// takes of piper's.
fn synthetic_clips(dir: &Path, piper_takes: usize) -> anyhow::Result<Vec<Clip>> {
    let sentences: Vec<String> = turn::UTTERANCES
        .iter()
        .map(|s| (*s).to_owned())
        .chain(turn::PAUSED.iter().map(|(a, b)| format!("{a} {b}")))
        .collect();
    eprintln!("[wer] speaking {} sentences", sentences.len());
    let mut clips = Vec::new();
    for voice in hark_tts::test_voice::ESPEAK_VOICES {
        for text in &sentences {
            let wav = dir.join("espeak.wav");
            stt::espeak(&wav, voice, text)?;
            let clip = hark_audio::clip::Clip::read_wav(&wav)
                .and_then(|c| c.resampled(16_000))
                .map_err(|e| anyhow::anyhow!("{}: {e}", wav.display()))?;
            clips.push(clip_of(dir, clips.len(), voice, text, clip.samples)?);
        }
    }
    for take in 0..piper_takes {
        for text in &sentences {
            let (samples, rate) = hark_tts::test_voice::speak(text);
            let clip = hark_audio::clip::Clip { samples, rate }
                .resampled(16_000)
                .map_err(|e| anyhow::anyhow!("piper's take: {e}"))?;
            let voice = format!("piper (take {})", take + 1);
            clips.push(clip_of(dir, clips.len(), &voice, text, clip.samples)?);
        }
    }
    Ok(clips)
}

/// The systems under test, loaded once for both sets.
struct Systems {
    moonshine: hark_stt::moonshine::Moonshine,
    whisper: Engine,
    peer: Option<turn::Peer>,
    base: Option<Engine>,
}

impl Systems {
    /// What every system made of every clip: `[system][clip]`.
    fn hear(&mut self, set: &str, clips: &[Clip]) -> anyhow::Result<Vec<Vec<Heard>>> {
        let mut heard: Vec<Vec<Heard>> = vec![Vec::new(); SYSTEMS.len()];
        for (i, clip) in clips.iter().enumerate() {
            if i % 14 == 0 {
                eprintln!(
                    "[wer] {set}: {} ({} of {} clips)",
                    clip.voice,
                    i + 1,
                    clips.len()
                );
            }
            let started = Instant::now();
            let live = self.moonshine.transcribe(&clip.samples)?;
            let mut h = score(clip, started, live.text);
            if let Some(d) = live.doubt {
                h.language = format!("en ({d:?})");
                h.doubt = true;
            }
            heard[0].push(h);
            let started = Instant::now();
            let greedy =
                self.moonshine
                    .transcribe_until(&clip.samples, &AtomicBool::new(false), false)?;
            heard[1].push(score(clip, started, greedy.text));
            let started = Instant::now();
            // English only, asked in English: on a clip in another
            // language, what it invents is the answer.
            let answer = self
                .whisper
                .transcribe_blocking(Request::new(clip.samples.clone()));
            heard[2].push(answered(clip, started, answer));
            if let Some(peer) = self.peer.as_mut() {
                let (took, text) = peer.transcribe(&clip.raw)?;
                let mut h = score(clip, Instant::now(), text);
                h.ms = took;
                heard[3].push(h);
            }
            if let Some(base) = self.base.as_ref() {
                let started = Instant::now();
                let answer = base.transcribe_blocking(Request::new(clip.samples.clone()));
                heard[4].push(answered(clip, started, answer));
            }
        }
        Ok(heard)
    }
}

fn clip_of(
    dir: &Path,
    index: usize,
    voice: &str,
    text: &str,
    samples: Vec<f32>,
) -> anyhow::Result<Clip> {
    // The sets share the scratch directory: each file is named by its
    // group too, so one set's clips never overwrite another's.
    let group: String = voice
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let raw = dir.join(format!("{group}-{index}.raw"));
    let audio = hark_audio::clip::Clip {
        samples,
        rate: 16_000,
    };
    std::fs::write(&raw, audio.to_s16_le(1))?;
    Ok(Clip {
        id: format!("{voice} {index}"),
        voice: voice.to_owned(),
        text: text.to_owned(),
        samples: audio.samples,
        raw,
        evaluation_only: false,
        language: "en".into(),
    })
}

fn score(clip: &Clip, started: Instant, text: String) -> Heard {
    let (errors, words) = stt::word_errors(&clip.text, &text);
    let (_, said) = stt::word_errors(&text, "");
    Heard {
        errors,
        words,
        ms: started.elapsed().as_secs_f64() * 1000.0,
        runaway: said > 2 * words + 3,
        text,
        language: "en".into(),
        doubt: false,
    }
}

/// [`score`] for an engine's answer: its text and language, or its error
/// as the text.
fn answered(
    clip: &Clip,
    started: Instant,
    answer: Result<hark_stt::recognizer::Transcript, hark_stt::recognizer::SttError>,
) -> Heard {
    match answer {
        Ok(t) => Heard {
            doubt: t.doubt.is_some(),
            language: match t.doubt {
                Some(d) => format!("{} ({d:?})", t.language),
                None => t.language,
            },
            ..score(clip, started, t.text)
        },
        Err(e) => Heard {
            language: "error".into(),
            ..score(clip, started, format!("[{e}]"))
        },
    }
}

/// What the real set's report says it measured, and its rows.
fn real_rows(clips: &[Clip]) -> (String, Vec<(String, Pick<'_>)>) {
    let about = format!(
        "{} clips: the English clips of the real-speech set (`tests/.speech`), whole. Pooled leaves out the clips kept for evaluation only. A runaway is a transcript of more than twice the words said, plus three.",
        clips.len()
    );
    let mut rows = groups(clips);
    rows.push(("**pooled**".to_owned(), Pick::Pooled));
    (about, rows)
}

/// What the synthetic set's report says it measured, and its rows.
fn synthetic_rows(clips: &[Clip], piper_takes: usize) -> (String, Vec<(String, Pick<'_>)>) {
    let about = format!(
        "{} clips: the turn bench's {} sentences by {} espeak-ng voices and {} takes of piper's en_US-joe-medium.",
        clips.len(),
        clips.len() / (hark_tts::test_voice::ESPEAK_VOICES.len() + piper_takes).max(1),
        hark_tts::test_voice::ESPEAK_VOICES.len(),
        piper_takes,
    );
    let mut rows = groups(clips);
    rows.extend([
        ("**espeak-ng, all six**".to_owned(), Pick::Espeak),
        ("**piper, all takes**".to_owned(), Pick::Piper),
        ("**all**".to_owned(), Pick::Pooled),
    ]);
    (about, rows)
}

/// A row per voice or subset, in the clips' order; those kept for
/// evaluation only say so.
fn groups(clips: &[Clip]) -> Vec<(String, Pick<'_>)> {
    let mut rows: Vec<(String, Pick)> = Vec::new();
    for clip in clips.iter().filter(|c| c.language == "en") {
        if !rows
            .iter()
            .any(|(_, p)| matches!(p, Pick::Voice(v) if *v == clip.voice))
        {
            let name = if clip.evaluation_only {
                format!("{} (evaluation only)", clip.voice)
            } else {
                clip.voice.clone()
            };
            rows.push((name, Pick::Voice(&clip.voice)));
        }
    }
    rows
}

/// One set's report: what was heard, the errors per row, the times, and
/// where the systems differ.
fn report(
    set: &str,
    about: &str,
    args: &WerArgs,
    clips: &[Clip],
    heard: &[Vec<Heard>],
    rows: Vec<(String, Pick)>,
    load: &(String, String),
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Word errors on {set} — {}\n\n{}\n\n{about} Every system hears every clip once; {} threads, beam {} for both whispers. Load average at the start: {}; at the end: {}.\n",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        crate::host::machine(),
        args.threads,
        args.beam,
        load.0,
        load.1,
    );
    table(&mut out, clips, heard, rows);
    times(&mut out, heard);
    differences(&mut out, clips, heard);
    other_languages(&mut out, clips, heard);
    out
}

/// What every system answered to speech in other languages: the English
/// models asked in English (in `auto` they refuse with a language error),
/// the multilingual one in `auto`.
fn other_languages(out: &mut String, clips: &[Clip], heard: &[Vec<Heard>]) {
    let others: Vec<usize> = (0..clips.len())
        .filter(|&i| clips[i].language != "en")
        .collect();
    if others.is_empty() {
        return;
    }
    let systems = present(heard);
    let _ = write!(
        out,
        "\n#### Other languages: the English models asked in English, base in `auto`\n\n| clip | said |"
    );
    for &s in &systems {
        let _ = write!(out, " {} |", SYSTEMS[s]);
    }
    let _ = writeln!(out, "\n|---|---|{}", "---|".repeat(systems.len()));
    for i in others {
        let clip = &clips[i];
        let _ = write!(
            out,
            "| {} ({}) | {} |",
            clip.id,
            clip.language,
            cell(&clip.text)
        );
        for &s in &systems {
            let h = &heard[s][i];
            let _ = write!(out, " {}: {} |", h.language, cell(&h.text));
        }
        let _ = writeln!(out);
    }
}

/// The systems that heard the clips (the peer may have been skipped).
fn present(heard: &[Vec<Heard>]) -> Vec<usize> {
    (0..SYSTEMS.len())
        .filter(|&s| !heard[s].is_empty())
        .collect()
}

/// Errors (and runaways) per row and system.
fn table(out: &mut String, clips: &[Clip], heard: &[Vec<Heard>], rows: Vec<(String, Pick)>) {
    let systems = present(heard);
    let _ = write!(out, "| clips | words |");
    for &s in &systems {
        let _ = write!(out, " {} errors |", SYSTEMS[s]);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---|--:|{}", "--:|".repeat(systems.len()));
    let sum = |s: usize, pick: &Pick| -> (usize, usize, usize, usize) {
        clips
            .iter()
            .zip(&heard[s])
            .filter(|(c, _)| pick.takes(c))
            .fold((0, 0, 0, 0), |(e, w, r, d), (_, h)| {
                (
                    e + h.errors,
                    w + h.words,
                    r + usize::from(h.runaway),
                    d + usize::from(h.doubt),
                )
            })
    };
    for (name, pick) in rows {
        let n = clips.iter().filter(|c| pick.takes(c)).count();
        let words = sum(systems[0], &pick).1;
        let _ = write!(out, "| {name} ({n}) | {words} |");
        for &s in &systems {
            let (e, w, r, d) = sum(s, &pick);
            let mut runaway = String::new();
            if r > 0 {
                let _ = write!(runaway, ", {r} runaway");
            }
            if d > 0 {
                let _ = write!(runaway, ", {d} in doubt");
            }
            let _ = write!(
                out,
                " {e} ({:.1} %{runaway}) |",
                100.0 * e as f64 / w.max(1) as f64
            );
        }
        let _ = writeln!(out);
    }
}

/// Median and p90 time a clip per system.
fn times(out: &mut String, heard: &[Vec<Heard>]) {
    let _ = writeln!(
        out,
        "\n| system | median ms a clip | p90 ms |\n|---|--:|--:|"
    );
    for s in present(heard) {
        let times: Vec<f64> = heard[s].iter().map(|h| h.ms).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            SYSTEMS[s],
            percentile(&times, 0.5).round(),
            percentile(&times, 0.9).round(),
        );
    }
}

/// Where the live engine and the peer differ, or any system ran away,
/// what each heard.
fn differences(out: &mut String, clips: &[Clip], heard: &[Vec<Heard>]) {
    let _ = writeln!(
        out,
        "\n| clip | said | live errors | live heard | whisper errors | whisper heard | peer errors | peer heard |\n|---|---|--:|---|--:|---|--:|---|"
    );
    let none = Heard::default();
    for (i, clip) in clips.iter().enumerate() {
        if clip.language != "en" {
            continue;
        }
        let live = &heard[0][i];
        let whisper = heard[2].get(i).unwrap_or(&none);
        let peer = heard[3].get(i).unwrap_or(&none);
        let ran = heard.iter().any(|h| h.get(i).is_some_and(|h| h.runaway));
        if ran || live.errors != peer.errors || whisper.errors != peer.errors {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                clip.id,
                cell(&clip.text),
                live.errors,
                cell(&live.text),
                whisper.errors,
                cell(&whisper.text),
                peer.errors,
                cell(&peer.text)
            );
        }
    }
}

/// `text` fit for a table cell: one line, no bars, at most 160 characters.
fn cell(text: &str) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| if c == '|' || c == '\n' { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(160) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// The clips a row of the report counts.
enum Pick<'a> {
    Voice(&'a str),
    Espeak,
    Piper,
    /// Every clip not kept for evaluation only.
    Pooled,
}

impl Pick<'_> {
    fn takes(&self, clip: &Clip) -> bool {
        match self {
            Pick::Voice(v) => clip.voice == *v,
            Pick::Espeak => !clip.voice.starts_with("piper"),
            Pick::Piper => clip.voice.starts_with("piper"),
            Pick::Pooled => !clip.evaluation_only && clip.language == "en",
        }
    }
}
