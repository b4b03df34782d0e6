//! `hark-bench tts`: text-to-speech speed and memory, Hark's piper engine
//! (crate `hark-tts`) against piper-tts from PyPI, in one run, with the same
//! voice file, the same ONNX Runtime and the same intra-op thread count.
//!
//! 1. Three texts: one sentence, a 3-sentence paragraph and a 10-sentence
//!    paragraph ([`TEXTS`]).
//! 2. Hark: ONNX Runtime loaded from `--lib`, the voice from `--voice` with
//!    `--threads` intra-op threads. A run is timed from the text to the last
//!    piece's samples, planned and made as the daemon's speech thread does:
//!    `Synthesizer::plan` with `Lead::Early` (all sentences phonemized, the
//!    first cut after its first clause or words), then for each piece
//!    `Synthesizer::render` (ids, `PiperModel::synthesize`, normalisation).
//!    The time at which the first piece's samples exist is the time to first
//!    audio. The ids compared with the peers' are per sentence
//!    (`Synthesizer::prepare`), which is how piper cuts a text.
//! 3. The peers in `tts_peers.py serve`, each a Python process in a venv the
//!    bench creates under `tests/bench/.venv-tts`: piper-tts 1.2.0
//!    (piper-phonemize 1.1.0, the espeak-ng 1.51 phonemes Hark makes) and
//!    piper-tts 1.8.0 (a newer, bundled espeak-ng), both on onnxruntime
//!    1.31.1 with the same thread count, timed around piper's per-sentence
//!    generator. They hold their voice and speak a text when asked.
//!    All systems take turns ([`interleave`]): per text one unmeasured
//!    warm-up each, then `--runs` rounds of one run each; ratios compare the
//!    runs of a round.
//! 4. Memory: a fresh process (the bench re-executes itself with a hidden
//!    flag; each peer in its own Python process) reports its RSS before
//!    loading, with the runtime, with the voice loaded, its peak (VmHWM)
//!    after speaking the paragraph, and with a second session of the voice.
//! 5. With `--daemon`, the real `hark` binary with tiny.en q8_0 (and, once
//!    the daemon has a TTS configuration, a voice: see
//!    [`daemon_voice_config`]): its VmRSS and VmHWM after start, with the
//!    model loaded, and after a transcription.

use std::{
    fmt::Write as _,
    io::{BufRead, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::AtomicBool,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use clap::Args;
use hark_tts::{
    espeak::Espeak,
    phonemize::{BOS, PAD, PhonemeIdMap},
    piper::OnnxRuntime,
    synth::{EngineKind, Lead, SynthConfig, Synthesizer},
    voice::VoiceConfig,
};
use serde_json::{Value, json};

use crate::{
    daemon::{self, Daemon, Rpc},
    host::{Scratch, tidy},
    procfs,
};

/// Benchmarks text to speech: Hark's piper engine against piper-tts (PyPI)
/// with the same voice, runtime and threads; real-time factor, time to
/// first audio and memory per loaded voice. Prints a markdown report.
#[derive(Debug, Args)]
pub struct TtsArgs {
    /// Measured runs per text and system (after one unmeasured warm-up).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// ONNX Runtime intra-op threads, for Hark and the peers alike.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// ONNX Runtime's shared library (`appliance/setup-voices
    /// tests/.voices/lib tests/.voices/voices` installs it).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.voices/lib/libonnxruntime.so.1.31.1"))]
    lib: PathBuf,
    /// The piper voice's `.onnx`; its config is the same path + `.json`.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.voices/voices/en_US-joe-medium.onnx"))]
    voice: PathBuf,
    /// Directory of the peers' venvs (one per piper-tts release); created,
    /// and the pinned packages of `tts_peers.py requirements` installed,
    /// when they are missing.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-tts"))]
    venv: PathBuf,
    /// Python that creates the venvs.
    #[arg(long, default_value = "python3")]
    python: PathBuf,
    /// The peers' script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/tts_peers.py"))]
    peer_script: PathBuf,
    /// piper-tts releases to compare with, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1.2.0,1.8.0")]
    peers: Vec<String>,
    /// Skip the peers.
    #[arg(long)]
    no_peer: bool,
    /// Also start the real daemon and report its memory.
    #[arg(long)]
    daemon: bool,
    /// The hark binary for --daemon (`cargo build --release -p hark`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/hark"))]
    hark: PathBuf,
    /// The model store with tiny.en q8_0, for --daemon (tests/run makes it).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store"))]
    models_dir: PathBuf,
    /// A line appended to the daemon's config file (repeatable), e.g. a
    /// `[tts]` section.
    #[arg(long)]
    daemon_config: Vec<String>,
    /// Internal: load the voice, speak the paragraph and print the process's
    /// memory as JSON (the memory measurement's child).
    #[arg(long, hide = true)]
    probe_memory: bool,
}

/// The texts: name and text. No digits or abbreviations, which phonemizers
/// expand differently. The sentences of the paragraph are of similar
/// length, so its first one is about a third of the audio.
const TEXTS: [(&str, &str); 3] = [
    (
        "1 sentence",
        "Turn on the kitchen lights and set a timer for the pasta, please.",
    ),
    (
        "3 sentences",
        "The weather today will be mild, with a light breeze from the west. Rain is expected in \
         the late afternoon, so take an umbrella if you go out. Tomorrow should be dry and a \
         little warmer.",
    ),
    (
        "10 sentences",
        "Here is a summary of your morning. You have three new messages, and one of them is \
         marked as urgent. The plumber called to say that he will arrive at half past nine \
         instead of nine. Your sister asked whether you are still coming to dinner on Saturday. \
         The library reminded you that two of your books are due back on Friday. The weather \
         will be cloudy at first, with sunny spells later in the day. There is a delay on the \
         northern line, so allow some extra time for your journey. Your first meeting has moved \
         to the small conference room on the second floor. Remember to bring the printed \
         slides, because the projector there does not work. That is everything for now, have a \
         good day.",
    ),
];

/// The text whose time to first audio has a target, and which the memory
/// probes speak.
const PARAGRAPH: usize = 1;

/// The issues' targets.
const TARGET_RATIO: f64 = 1.0;
/// First audio over full synthesis, on the paragraph.
const TARGET_FIRST_AUDIO: f64 = 0.25;
/// First audio on the paragraph (a typical reply), in milliseconds.
const TARGET_FIRST_AUDIO_MS: f64 = 200.0;
const TARGET_DAEMON_MB: f64 = 300.0;

/// One timed run: text in, all audio out.
#[derive(Debug, Clone, Copy)]
struct Run {
    total_ms: f64,
    first_ms: f64,
    samples: usize,
}

/// One system on one text.
struct TextResult {
    sentences: usize,
    /// Model runs per text: Hark's sentences and the first one's cut
    /// (`Lead::Early`), the peers' sentences.
    pieces: usize,
    /// The ids fed to the model, per sentence.
    ids: Vec<Vec<i64>>,
    runs: Vec<Run>,
    rate: f64,
}

impl TextResult {
    fn totals(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.total_ms).collect()
    }

    fn firsts(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.first_ms).collect()
    }

    /// Real-time factor of each run: synthesis time over audio time. The
    /// voice's duration noise makes the audio length vary a little from run
    /// to run, so the factor, not the time, is what the ratios compare.
    fn rtfs(&self) -> Vec<f64> {
        self.runs
            .iter()
            .map(|r| r.total_ms / 1000.0 / (r.samples as f64 / self.rate))
            .collect()
    }

    /// First audio over full synthesis, per run.
    fn first_shares(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.first_ms / r.total_ms).collect()
    }

    fn audio_seconds(&self) -> f64 {
        median(
            &self
                .runs
                .iter()
                .map(|r| r.samples as f64 / self.rate)
                .collect::<Vec<_>>(),
        )
    }
}

/// A system under test: its results per text, or why it did not run.
struct System {
    name: String,
    result: Result<Vec<TextResult>, String>,
}

impl System {
    fn text(&self, i: usize) -> Option<&TextResult> {
        self.result.as_ref().ok()?.get(i)
    }
}

struct MemoryProbe {
    start_kb: u64,
    runtime_kb: u64,
    loaded_kb: u64,
    /// After speaking the paragraph.
    spoke_kb: u64,
    peak_kb: u64,
    two_voices_kb: u64,
    peak_two_voices_kb: u64,
}

struct Memory {
    name: String,
    result: Result<MemoryProbe, String>,
}

/// The daemon's memory at each step, or why the part failed.
struct DaemonRun {
    binary: PathBuf,
    voice_config: Vec<String>,
    steps: Vec<(String, procfs::Memory)>,
    stt: String,
    transcript: String,
    result: Result<(), String>,
}

pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `a`'s RTF over `b`'s, round by round (the runs of one round were taken
/// next to each other).
fn round_ratios(a: &TextResult, b: &TextResult) -> Vec<f64> {
    a.rtfs().iter().zip(b.rtfs()).map(|(a, b)| a / b).collect()
}

/// [`round_ratios`]' median.
fn paired_ratio(a: &TextResult, b: &TextResult) -> f64 {
    median(&round_ratios(a, b))
}

/// The geometric mean of per-round ratios, with a 95 % bootstrap interval
/// (2000 resamples, a fixed seed so a report can be reproduced from its
/// figures). NaN when there are none.
fn pooled_ratio(ratios: &[f64]) -> (f64, f64, f64) {
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let estimate = (logs.iter().sum::<f64>() / n as f64).exp();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut pick = || {
        // xorshift64*: a plain, reproducible generator is all resampling needs.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as usize % n
    };
    let mut means: Vec<f64> = (0..2000)
        .map(|_| (0..n).map(|_| logs[pick()]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    (estimate, means[50].exp(), means[1949].exp())
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

pub fn main(args: TtsArgs) -> anyhow::Result<()> {
    let voice = tidy(&args.voice);
    let config = config_path(&voice);
    let lib = tidy(&args.lib);
    if args.probe_memory {
        return probe(&args, &lib, &voice);
    }
    anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
    let setup = "run `appliance/setup-voices tests/.voices/lib tests/.voices/voices` in the \
                 workspace root, or pass --lib and --voice";
    for file in [&lib, &voice, &config] {
        anyhow::ensure!(file.is_file(), "no {} ({setup})", file.display());
    }
    let scratch = Scratch::new()?;
    let mut load = vec![("start".to_owned(), procfs::loadavg())];

    eprintln!(
        "[tts] Hark: {} on {}, {} intra-op thread(s)",
        voice.display(),
        lib.display(),
        args.threads
    );
    let texts = scratch.0.join("texts.json");
    let texts_json: Vec<&str> = TEXTS.iter().map(|(_, t)| *t).collect();
    std::fs::write(&texts, serde_json::to_vec(&texts_json)?)
        .with_context(|| format!("cannot write {}", texts.display()))?;

    // Every system up and holding its voice before any run, so that the
    // runs can be taken in turns.
    let mut entrants = Vec::new();
    let mut systems = Vec::new();
    match HarkVoice::load(&lib, &voice, args.threads) {
        Ok(hark) => entrants.push(Entrant::Hark(hark)),
        Err(e) => systems.push(System {
            name: "Hark".into(),
            result: Err(format!("{e:#}")),
        }),
    }
    let mut pythons = Vec::new();
    let mut versions = Vec::new();
    for peer in &args.peers {
        let name = format!("piper-tts {peer}");
        let started = if args.no_peer {
            Err("--no-peer given".to_owned())
        } else {
            peer_python(&args, peer)
                .inspect(|python| pythons.push((name.clone(), python.clone())))
                .and_then(|python| PeerProcess::start(&args, &python, &voice, &config, &texts))
                .map_err(|e| format!("{e:#}"))
        };
        match started {
            Ok(process) => {
                eprintln!("[tts] {name}: {}", process.name);
                versions.push((process.name.clone(), process.versions.clone()));
                entrants.push(Entrant::Peer(process));
            }
            Err(why) => {
                eprintln!("[tts] {name} skipped: {why}");
                systems.push(System {
                    name,
                    result: Err(why),
                });
            }
        }
    }
    systems.splice(0..0, interleave(&args, entrants));
    load.push(("after synthesis".into(), procfs::loadavg()));

    eprintln!("[tts] memory: Hark");
    let mut memory = vec![Memory {
        name: "Hark".into(),
        result: hark_memory(&args, &lib, &voice).map_err(|e| format!("{e:#}")),
    }];
    for peer in &args.peers {
        let name = format!("piper-tts {peer}");
        let result = match pythons.iter().find(|(n, _)| *n == name) {
            Some((_, python)) => {
                eprintln!("[tts] memory: {name}");
                peer_memory(&args, python, &voice, &config).map_err(|e| format!("{e:#}"))
            }
            None => Err("did not start".to_owned()),
        };
        memory.push(Memory { name, result });
    }

    let daemon = args.daemon.then(|| {
        eprintln!("[tts] daemon: {}", tidy(&args.hark).display());
        daemon(&args, &scratch.0)
    });
    load.push(("end".into(), procfs::loadavg()));

    print!(
        "{}",
        render(
            &args,
            &voice,
            &systems,
            &memory,
            &versions,
            daemon.as_ref(),
            &load
        )
    );
    Ok(())
}

/// piper's convention: the config beside the model, `.onnx` + `.json`.
fn config_path(voice: &Path) -> PathBuf {
    let mut config = voice.as_os_str().to_owned();
    config.push(".json");
    PathBuf::from(config)
}

/// A voice ready to speak, as the daemon holds one: Hark's synthesiser
/// (`hark_tts::synth`) with the voice's directory as its voice store.
struct HarkVoice {
    synth: Synthesizer,
    rate: u32,
}

impl HarkVoice {
    fn load(lib: &Path, voice: &Path, threads: usize) -> anyhow::Result<Self> {
        Espeak::get().context("libespeak-ng")?;
        let id = voice
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".onnx"))
            .with_context(|| format!("{} is not a <voice>.onnx file", voice.display()))?
            .to_owned();
        let dir = voice
            .parent()
            .with_context(|| format!("{} has no directory", voice.display()))?
            .to_path_buf();
        let synth = Synthesizer::new(SynthConfig {
            engine: EngineKind::Piper,
            onnxruntime: lib.to_path_buf(),
            voices_dir: dir,
            voice: id.clone(),
            threads,
            espeak_voice: "en-us".into(),
            max_loaded_voices: 1,
        });
        if let Some(problem) = synth.runtime_problem() {
            bail!("ONNX Runtime: {problem}");
        }
        if let Some(problem) = synth.voice_problem() {
            bail!("voice {id}: {problem}");
        }
        let rate = VoiceConfig::from_path(&config_path(voice))?.sample_rate;
        Ok(Self { synth, rate })
    }

    /// The ids Hark feeds the model for `text`, per sentence (as piper
    /// cuts it; the daemon cuts the first sentence early, see `pieces`).
    fn ids(&mut self, text: &str) -> anyhow::Result<Vec<Vec<i64>>> {
        Ok(self
            .synth
            .prepare(text, None, 1.0)?
            .pieces
            .into_iter()
            .map(|p| p.ids)
            .collect())
    }

    /// How many pieces the daemon's speech thread speaks `text` in.
    fn pieces(&mut self, text: &str) -> anyhow::Result<usize> {
        Ok(self.synth.plan(text, None, 1.0, Lead::Early)?.pieces.len())
    }

    /// Text in, all audio out, the way the daemon's speech thread makes it:
    /// the text planned (phonemized, the first sentence cut early) first,
    /// then piece by piece.
    fn speak(&mut self, text: &str) -> anyhow::Result<Run> {
        let started = Instant::now();
        let utterance = self.synth.plan(text, None, 1.0, Lead::Early)?;
        anyhow::ensure!(
            utterance.engine == EngineKind::Piper,
            "espeak-ng spoke: {:?}",
            utterance.fallback
        );
        let never = AtomicBool::new(false);
        let mut first = None;
        let mut samples = 0;
        for index in 0..utterance.pieces.len() {
            let chunk = self.synth.render(&utterance, index, &never)?;
            anyhow::ensure!(
                chunk.engine == EngineKind::Piper,
                "espeak-ng spoke: {:?}",
                chunk.fallback
            );
            first.get_or_insert_with(|| started.elapsed());
            samples += chunk.samples.len();
            std::hint::black_box(&chunk.samples);
        }
        let total = started.elapsed();
        Ok(Run {
            total_ms: total.as_secs_f64() * 1000.0,
            first_ms: first.unwrap_or(total).as_secs_f64() * 1000.0,
            samples,
        })
    }
}

/// A system ready to speak: Hark in this process, a peer in its own.
enum Entrant {
    Hark(HarkVoice),
    Peer(PeerProcess),
}

impl Entrant {
    fn name(&self) -> String {
        match self {
            Self::Hark(_) => "Hark".into(),
            Self::Peer(p) => p.name.clone(),
        }
    }

    fn rate(&self) -> f64 {
        match self {
            Self::Hark(h) => f64::from(h.rate),
            Self::Peer(p) => p.rate,
        }
    }

    /// The ids the system feeds the model for text `i`, per sentence.
    fn ids(&mut self, i: usize) -> anyhow::Result<Vec<Vec<i64>>> {
        match self {
            Self::Hark(h) => h.ids(TEXTS[i].1),
            Self::Peer(p) => p
                .ids
                .get(i)
                .cloned()
                .with_context(|| format!("{} has no ids for text {i}", p.name)),
        }
    }

    /// Model runs for text `i`: Hark's pieces, a peer's sentences.
    fn pieces(&mut self, i: usize) -> anyhow::Result<usize> {
        match self {
            Self::Hark(h) => h.pieces(TEXTS[i].1),
            Self::Peer(_) => Ok(self.ids(i)?.len()),
        }
    }

    fn speak(&mut self, i: usize) -> anyhow::Result<Run> {
        match self {
            Self::Hark(h) => h.speak(TEXTS[i].1),
            Self::Peer(p) => p.speak(i),
        }
    }
}

/// Every text on every system: one warm-up each, then `--runs` rounds in
/// which each system speaks the text once, the order rotating from round
/// to round. The machine's speed drifts by more than the differences being
/// measured (the same system's median moved by 15 % between runs of the
/// bench), and in turns the drift falls on all systems alike. A system that
/// fails drops out with its error; the others go on.
fn interleave(args: &TtsArgs, entrants: Vec<Entrant>) -> Vec<System> {
    struct Seat {
        entrant: Entrant,
        texts: Vec<TextResult>,
        failed: Option<String>,
    }
    let mut seats: Vec<Seat> = entrants
        .into_iter()
        .map(|entrant| Seat {
            entrant,
            texts: Vec::new(),
            failed: None,
        })
        .collect();
    for (i, (name, _)) in TEXTS.iter().enumerate() {
        eprintln!("[tts] {name}");
        for seat in seats.iter_mut().filter(|s| s.failed.is_none()) {
            let ready = seat.entrant.ids(i).and_then(|ids| {
                let pieces = seat.entrant.pieces(i)?;
                seat.entrant.speak(i)?; // warm-up
                Ok((ids, pieces))
            });
            match ready {
                Ok((ids, pieces)) => seat.texts.push(TextResult {
                    sentences: ids.len(),
                    pieces,
                    ids,
                    runs: Vec::with_capacity(args.runs),
                    rate: seat.entrant.rate(),
                }),
                Err(e) => seat.failed = Some(format!("{e:#}")),
            }
        }
        for round in 0..args.runs {
            let n = seats.len();
            for k in 0..n {
                let seat = &mut seats[(round + k) % n];
                if seat.failed.is_some() {
                    continue;
                }
                match seat.entrant.speak(i) {
                    Ok(run) => {
                        if let Some(t) = seat.texts.last_mut() {
                            t.runs.push(run);
                        }
                    }
                    Err(e) => seat.failed = Some(format!("{e:#}")),
                }
            }
        }
        for seat in &seats {
            if let (None, Some(t)) = (&seat.failed, seat.texts.last()) {
                eprintln!(
                    "[tts]   {}: median {:.0} ms, RTF {:.3}, first audio {:.0} ms",
                    seat.entrant.name(),
                    median(&t.totals()),
                    median(&t.rtfs()),
                    median(&t.firsts())
                );
            }
        }
    }
    seats
        .into_iter()
        .map(|seat| System {
            name: seat.entrant.name(),
            result: match seat.failed {
                Some(e) => Err(e),
                None => Ok(seat.texts),
            },
        })
        .collect()
}

/// The memory child: runtime, voice, the paragraph, a second voice.
fn probe(args: &TtsArgs, lib: &Path, voice: &Path) -> anyhow::Result<()> {
    let rss = || procfs::memory(std::process::id());
    let start = rss()?.rss_kib;
    Espeak::get().context("libespeak-ng")?;
    // The runtime alone, then the voice: the synthesiser loads both.
    OnnxRuntime::load(lib)?;
    let runtime = rss()?.rss_kib;
    let mut first = HarkVoice::load(lib, voice, args.threads)?;
    let loaded = rss()?.rss_kib;
    let run = first.speak(TEXTS[PARAGRAPH].1)?;
    let (spoke, peak) = {
        let m = rss()?;
        (m.rss_kib, m.peak_kib)
    };
    let mut second = HarkVoice::load(lib, voice, args.threads)?;
    let two = rss()?.rss_kib;
    second.speak(TEXTS[PARAGRAPH].1)?;
    println!(
        "{}",
        json!({
            "rss_start_kb": start,
            "rss_runtime_kb": runtime,
            "rss_loaded_kb": loaded,
            "rss_spoke_kb": spoke,
            "peak_rss_kb": peak,
            "rss_two_voices_kb": two,
            "peak_two_voices_kb": rss()?.peak_kib,
            "samples": run.samples,
        })
    );
    Ok(())
}

/// Runs the bench itself again as the memory child (a fresh process, so its
/// figures are the engine's alone).
fn hark_memory(args: &TtsArgs, lib: &Path, voice: &Path) -> anyhow::Result<MemoryProbe> {
    let exe = std::env::current_exe().context("cannot find the bench's executable")?;
    let output = Command::new(exe)
        .arg("tts")
        .arg("--probe-memory")
        .arg("--threads")
        .arg(args.threads.to_string())
        .arg("--lib")
        .arg(lib)
        .arg("--voice")
        .arg(voice)
        .output()
        .context("cannot start the memory child")?;
    parse_memory(&output)
}

fn parse_memory(output: &std::process::Output) -> anyhow::Result<MemoryProbe> {
    let v = procfs::child_json(output)?;
    let kb = |k: &str| v[k].as_u64().with_context(|| format!("no {k}"));
    Ok(MemoryProbe {
        start_kb: kb("rss_start_kb")?,
        runtime_kb: kb("rss_runtime_kb")?,
        loaded_kb: kb("rss_loaded_kb")?,
        spoke_kb: kb("rss_spoke_kb")?,
        peak_kb: kb("peak_rss_kb")?,
        two_voices_kb: kb("rss_two_voices_kb")?,
        peak_two_voices_kb: kb("peak_two_voices_kb")?,
    })
}

/// The venv of one piper-tts release, with its pinned packages, creating
/// it and installing them from PyPI when needed.
fn peer_python(args: &TtsArgs, peer: &str) -> anyhow::Result<PathBuf> {
    anyhow::ensure!(
        !peer.is_empty() && peer.chars().all(|c| c.is_ascii_digit() || c == '.'),
        "{peer:?} is not a piper-tts version"
    );
    let venv = tidy(&args.venv).join(format!("piper-tts-{peer}"));
    let python = venv.join("bin/python");
    let script = tidy(&args.peer_script);
    if !python.is_file() {
        eprintln!("[tts] creating {}", venv.display());
        let status = Command::new(&args.python)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .with_context(|| format!("cannot run {}", args.python.display()))?;
        anyhow::ensure!(status.success(), "`python3 -m venv` failed: {status}");
    }
    let check = Command::new(&python)
        .arg(&script)
        .args(["check", "--peer", peer])
        .status()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !check.success() {
        let requirements = Command::new(&python)
            .arg(&script)
            .args(["requirements", "--peer", peer])
            .output()?;
        anyhow::ensure!(
            requirements.status.success(),
            "`tts_peers.py requirements --peer {peer}` failed: {}",
            procfs::last_line(&requirements.stderr)
        );
        let requirements = String::from_utf8_lossy(&requirements.stdout).into_owned();
        let pins: Vec<&str> = requirements.split_whitespace().collect();
        eprintln!("[tts] pip install {}", pins.join(" "));
        let status = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--only-binary", ":all:"])
            .args(&pins)
            .status()
            .context("cannot run pip")?;
        anyhow::ensure!(
            status.success(),
            "pip install {} failed: {status}",
            pins.join(" ")
        );
    }
    Ok(python)
}

/// A peer in its own Python process (`tts_peers.py serve`), holding its
/// voice and speaking a text each time it is asked.
struct PeerProcess {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    name: String,
    versions: Value,
    rate: f64,
    /// Per text, the ids piper fed the model, per sentence.
    ids: Vec<Vec<Vec<i64>>>,
}

impl PeerProcess {
    fn start(
        args: &TtsArgs,
        python: &Path,
        voice: &Path,
        config: &Path,
        texts: &Path,
    ) -> anyhow::Result<Self> {
        let mut child = Command::new(python)
            .arg(tidy(&args.peer_script))
            .arg("serve")
            .arg("--model")
            .arg(voice)
            .arg("--config")
            .arg(config)
            .args(["--threads", &args.threads.to_string()])
            .arg("--texts")
            .arg(texts)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot run tts_peers.py")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("tts_peers.py has no pipes");
        };
        let mut process = Self {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            name: String::new(),
            versions: Value::Null,
            rate: f64::NAN,
            ids: Vec::new(),
        };
        let hello = process.line()?;
        process.name = hello["name"].as_str().unwrap_or("piper-tts ?").to_owned();
        process.versions = hello["versions"].clone();
        process.rate = hello["sample_rate"].as_f64().context("no sample_rate")?;
        process.ids = hello["texts"]
            .as_array()
            .context("no texts")?
            .iter()
            .map(|t| serde_json::from_value(t["ids"].clone()).context("ids"))
            .collect::<anyhow::Result<_>>()?;
        Ok(process)
    }

    /// The next JSON line the peer prints.
    fn line(&mut self) -> anyhow::Result<Value> {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line)?;
        if n == 0 {
            let status = self.child.wait()?;
            bail!("tts_peers.py ended: {status}");
        }
        serde_json::from_str(&line).context("tts_peers.py's JSON")
    }

    fn speak(&mut self, i: usize) -> anyhow::Result<Run> {
        writeln!(self.stdin, "{i}")?;
        self.stdin.flush()?;
        let v = self.line()?;
        let number = |k: &str| v[k].as_f64().with_context(|| format!("no {k}"));
        Ok(Run {
            total_ms: number("total_ms")?,
            first_ms: number("first_ms")?,
            samples: number("samples")? as usize,
        })
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        // End of input ends the script; kill it if it is stuck mid-text.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn peer_memory(
    args: &TtsArgs,
    python: &Path,
    voice: &Path,
    config: &Path,
) -> anyhow::Result<MemoryProbe> {
    let output = Command::new(python)
        .arg(tidy(&args.peer_script))
        .arg("memory")
        .arg("--model")
        .arg(voice)
        .arg("--config")
        .arg(config)
        .args(["--threads", &args.threads.to_string()])
        .args(["--text", TEXTS[PARAGRAPH].1])
        .output()
        .context("cannot run tts_peers.py")?;
    parse_memory(&output)
}

/// How a peer's ids compare with Hark's, sentence by sentence.
fn compare_ids(hark: &TextResult, peer: &TextResult, pad: (usize, usize)) -> String {
    if hark.ids == peer.ids {
        return "same".into();
    }
    if hark.ids.len() != peer.ids.len() {
        return format!(
            "other sentences: {} here, {} in Hark",
            peer.ids.len(),
            hark.ids.len()
        );
    }
    // piper-tts 1.2.0's Python drops the pad after `^`.
    let (at, len) = pad;
    let without_pad = |ids: &Vec<i64>| {
        let mut ids = ids.clone();
        if ids.len() >= at + len {
            ids.drain(at..at + len);
        }
        ids
    };
    if hark
        .ids
        .iter()
        .zip(&peer.ids)
        .all(|(h, p)| &without_pad(h) == p)
    {
        return "same but the pad after `^`".into();
    }
    let differ = hark
        .ids
        .iter()
        .zip(&peer.ids)
        .filter(|(h, p)| h != p && &without_pad(h) != *p)
        .count();
    format!("{differ} of {} sentences differ", hark.ids.len())
}

/// The config lines that give the daemon its voice: `--voice`'s directory
/// as the voice store, ONNX Runtime from `--lib`, `--threads`.
fn daemon_voice_config(args: &TtsArgs) -> Vec<String> {
    let voice = tidy(&args.voice);
    let id = voice
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".onnx"))
        .unwrap_or("en_US-joe-medium")
        .to_owned();
    let dir = voice.parent().map(Path::to_path_buf).unwrap_or_default();
    vec![
        "[tts]".into(),
        format!("voices_dir = {}", daemon::toml_str(&dir)),
        format!("onnxruntime = {}", daemon::toml_str(&tidy(&args.lib))),
        format!("voice = {}", Value::String(id)),
        format!("threads = {}", args.threads),
    ]
}

/// Makes the daemon speak the paragraph once, through the virtual speaker.
/// Returns the name of the step to record.
fn daemon_speak(rpc: &mut Rpc) -> anyhow::Result<Option<String>> {
    let result = rpc.call(
        "speak_text",
        json!({ "text": TEXTS[PARAGRAPH].1, "wait": true }),
    )?;
    anyhow::ensure!(
        result["isError"].as_bool() != Some(true),
        "speak_text failed: {result}"
    );
    let engine = result["structuredContent"]["engine"]
        .as_str()
        .unwrap_or("?");
    anyhow::ensure!(
        engine == "piper",
        "espeak-ng spoke instead of the voice: {result}"
    );
    Ok(Some(
        "after speaking the paragraph (one medium voice loaded)".into(),
    ))
}

/// Starts the daemon, transcribes once, and records its memory on the way.
fn daemon(args: &TtsArgs, scratch: &Path) -> DaemonRun {
    let binary = tidy(&args.hark);
    let mut voice_config = daemon_voice_config(args);
    voice_config.extend(args.daemon_config.iter().cloned());
    let mut run = DaemonRun {
        binary: binary.clone(),
        voice_config: voice_config.clone(),
        steps: Vec::new(),
        stt: String::new(),
        transcript: String::new(),
        result: Ok(()),
    };
    let result = daemon_steps(args, &binary, scratch, &voice_config, &mut run);
    if let Err(e) = &result {
        eprintln!("[tts] daemon failed: {e:#}");
    }
    run.result = result.map_err(|e| format!("{e:#}"));
    run
}

fn daemon_steps(
    args: &TtsArgs,
    binary: &Path,
    scratch: &Path,
    extra: &[String],
    run: &mut DaemonRun,
) -> anyhow::Result<()> {
    let models_dir = tidy(&args.models_dir);
    anyhow::ensure!(
        models_dir.join("ggml-tiny.en-q8_0.bin").is_file(),
        "no tiny.en q8_0 in {} (`tests/run` makes it with appliance/setup-models, or pass --models-dir)",
        models_dir.display()
    );
    let dir = scratch.join("daemon");
    std::fs::create_dir_all(&dir)?;
    // The utterance to transcribe: the paragraph, spoken by espeak-ng.
    let wav = dir.join("paragraph.wav");
    let spoken = Command::new("espeak-ng")
        .args(["-v", "en-us", "-w"])
        .arg(&wav)
        .arg(TEXTS[PARAGRAPH].1)
        .status()
        .context("cannot run espeak-ng")?;
    anyhow::ensure!(spoken.success(), "espeak-ng failed: {spoken}");

    let daemon = Daemon::start(binary, &dir, &daemon::config(&dir, &models_dir, extra))?;
    run.steps.push(("ready (READY=1)".into(), daemon.memory()?));
    let mut rpc = Rpc::tcp(daemon.tcp, "hark-bench tts")?;
    run.stt = daemon.wait_stt(&mut rpc)?;
    run.steps
        .push(("speech-to-text model loaded".into(), daemon.memory()?));
    run.transcript = daemon_transcribe(&mut rpc, &wav)?;
    run.steps.push((
        "after transcribing the paragraph (espeak-ng's speech)".into(),
        daemon.memory()?,
    ));
    if let Some(step) = daemon_speak(&mut rpc)? {
        run.steps.push((step, daemon.memory()?));
        // A transcription right after speech, while the voice still holds
        // its working memory (the daemon keeps it for IDLE_RELEASE): the
        // speech-to-text worker has it given back first (memory::make_room).
        daemon_transcribe(&mut rpc, &wav)?;
        run.steps.push((
            "transcribing again at once after speaking".into(),
            daemon.memory()?,
        ));
        std::thread::sleep(hark_room::tts::IDLE_RELEASE + Duration::from_secs(1));
        run.steps.push((
            format!(
                "idle for {} s (working memory given back)",
                (hark_room::tts::IDLE_RELEASE + Duration::from_secs(1)).as_secs()
            ),
            daemon.memory()?,
        ));
    }
    drop(rpc);
    daemon.stop()
}

/// `transcribe_audio` on `wav`; its transcript.
fn daemon_transcribe(rpc: &mut Rpc, wav: &Path) -> anyhow::Result<String> {
    let result = rpc.call("transcribe_audio", json!({ "audio_path": wav }))?;
    anyhow::ensure!(
        result["isError"].as_bool() != Some(true),
        "transcribe_audio failed: {result}"
    );
    Ok(result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .trim()
        .to_owned())
}

/// espeak-ng's version line (Debian's; Hark links the same library).
fn espeak_version() -> String {
    Command::new("espeak-ng")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let version = text
                .split(':')
                .nth(1)?
                .split_whitespace()
                .next()?
                .to_owned();
            Some(version)
        })
        .unwrap_or_else(|| "?".into())
}

fn render(
    args: &TtsArgs,
    voice: &Path,
    systems: &[System],
    memory: &[Memory],
    versions: &[(String, Value)],
    daemon: Option<&DaemonRun>,
    load: &[(String, String)],
) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let voice_name = voice.file_stem().map_or_else(
        || voice.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    let _ = writeln!(out, "## Text to speech (hark-bench tts)\n");
    let _ = writeln!(
        out,
        "{cores} cores; voice `{voice_name}`; {} ONNX Runtime intra-op thread(s); {} measured \
         runs per cell after one warm-up. Hark: ONNX Runtime from `{}`, espeak-ng {}.",
        args.threads,
        args.runs,
        tidy(&args.lib)
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        espeak_version(),
    );
    for (name, v) in versions {
        let _ = writeln!(out, "\n{name}: `{v}`");
    }
    let load: Vec<String> = load
        .iter()
        .map(|(phase, l)| format!("{phase} {l}"))
        .collect();
    let _ = writeln!(out, "\n1-minute load average: {}.", load.join("; "));

    let peers: Vec<&System> = systems.iter().filter(|s| s.name != "Hark").collect();
    let hark = systems.iter().find(|s| s.name == "Hark");
    let pad_at = hark_pad_position(args);

    let _ = writeln!(out, "\n### Synthesis: text in, all audio out\n");
    let mut header =
        "| text | system | sentences | audio s | median ms | min ms | RTF median | RTF min |"
            .to_owned();
    let mut rule = "|---|---|--:|--:|--:|--:|--:|--:|".to_owned();
    for peer in &peers {
        let _ = write!(header, " RTF × {} |", peer.name);
        rule.push_str("--:|");
    }
    header.push_str(" ids vs Hark |");
    rule.push_str("---|");
    let _ = writeln!(out, "{header}\n{rule}");
    for (i, (name, _)) in TEXTS.iter().enumerate() {
        for system in systems {
            match (&system.result, system.text(i)) {
                (Ok(_), Some(t)) => {
                    let rtf = median(&t.rtfs());
                    let _ = write!(
                        out,
                        "| {name} | {} | {} | {:.2} | {:.0} | {:.0} | {rtf:.3} | {:.3} |",
                        system.name,
                        t.sentences,
                        t.audio_seconds(),
                        median(&t.totals()),
                        min(&t.totals()),
                        min(&t.rtfs()),
                    );
                    for peer in &peers {
                        let ratio = peer
                            .text(i)
                            .map_or("–".to_owned(), |p| format!("{:.2}×", paired_ratio(t, p)));
                        let _ = write!(out, " {ratio} |");
                    }
                    let ids = match hark.and_then(|h| h.text(i)) {
                        Some(h) if system.name != "Hark" => compare_ids(h, t, pad_at),
                        _ => "–".into(),
                    };
                    let _ = writeln!(out, " {ids} |");
                }
                (Err(e), _) if i == 0 => {
                    let _ = write!(out, "| {name} | {} | – | – | – | – | – | – |", system.name);
                    for _ in &peers {
                        out.push_str(" – |");
                    }
                    let _ = writeln!(out, " did not run: {} |", e.replace('|', "\\|"));
                }
                _ => {}
            }
        }
    }
    let _ = writeln!(
        out,
        "\nRTF: synthesis time over audio time (below 1 is faster than real time); \
         RTF × peer: the row's RTF over the peer's, run against run of the same round, \
         median over the rounds (target for Hark ≤ {TARGET_RATIO:.1}×)."
    );
    let _ = writeln!(
        out,
        "\nThe systems take turns: for each text every system speaks it once unmeasured, then \
         in each of {} rounds every system speaks it once, the order rotating from round to \
         round. Comparing runs of the same round cancels the machine's drift, which is larger \
         than the differences measured here.",
        args.runs
    );

    let _ = writeln!(out, "\n### Time to first audio\n");
    let _ = writeln!(
        out,
        "| text | system | pieces | first audio median ms | min ms | full median ms | first / full (median) | target ≤ {TARGET_FIRST_AUDIO} and ≤ {TARGET_FIRST_AUDIO_MS:.0} ms |"
    );
    let _ = writeln!(out, "|---|---|--:|--:|--:|--:|--:|---|");
    for (i, (name, _)) in TEXTS.iter().enumerate() {
        for system in systems {
            let Some(t) = system.text(i) else { continue };
            if t.pieces < 2 {
                continue;
            }
            let share = median(&t.first_shares());
            let target = if i == PARAGRAPH && system.name == "Hark" {
                if share <= TARGET_FIRST_AUDIO && median(&t.firsts()) <= TARGET_FIRST_AUDIO_MS {
                    "met"
                } else {
                    "**not met**"
                }
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {:.0} | {:.0} | {:.0} | {share:.2} | {target} |",
                system.name,
                t.pieces,
                median(&t.firsts()),
                min(&t.firsts()),
                median(&t.totals()),
            );
        }
    }
    let _ = writeln!(
        out,
        "\nFirst audio: the first piece's samples exist (Hark: phonemes of the whole text, \
         then the first piece through the model, as the daemon speaks it: the first sentence's \
         first clause or words, the rest of that sentence the next piece; piper-tts: the first \
         chunk of its per-sentence generator, a whole sentence). first / full is per run, then \
         the median."
    );

    let _ = writeln!(
        out,
        "\n### Memory: a fresh process loads the voice and speaks the paragraph ({})\n",
        TEXTS[PARAGRAPH].0
    );
    let _ = writeln!(
        out,
        "| process | RSS start MiB | + runtime MiB | + voice MiB | voice Δ MiB | spoke MiB | peak (VmHWM) MiB | 2nd voice Δ MiB | peak, 2 voices MiB |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for m in memory {
        match &m.result {
            Ok(p) => {
                let _ = writeln!(
                    out,
                    "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    m.name,
                    procfs::mib(p.start_kb),
                    procfs::mib(p.runtime_kb),
                    procfs::mib(p.loaded_kb),
                    procfs::mib(p.loaded_kb.saturating_sub(p.runtime_kb)),
                    procfs::mib(p.spoke_kb),
                    procfs::mib(p.peak_kb),
                    procfs::mib(p.two_voices_kb.saturating_sub(p.spoke_kb)),
                    procfs::mib(p.peak_two_voices_kb),
                );
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "| {} | did not run: {} | | | | | | | |",
                    m.name,
                    e.replace('|', "\\|")
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "\n+ runtime: Hark with libespeak-ng initialised and ONNX Runtime loaded; piper-tts with \
         numpy, onnxruntime and piper imported. + voice: the voice loaded (one ONNX session); \
         voice Δ is what that added, the memory per loaded voice. Spoke: RSS after speaking the \
         paragraph; peak: VmHWM then. 2nd voice Δ: RSS added by a second session of the same \
         voice, loaded after that; peak, 2 voices: VmHWM after the second also spoke."
    );

    if let Some(d) = daemon {
        render_daemon(&mut out, d);
    }
    render_targets(&mut out, systems, daemon);
    out
}

/// The targets against this run: the RTF ratio against the first
/// peer that ran (piper-tts 1.2.0 by default: the same phonemes), Hark's
/// first audio on the paragraph, and the daemon's resident memory.
fn render_targets(out: &mut String, systems: &[System], daemon: Option<&DaemonRun>) {
    let yes_no = |ok: bool| if ok { "yes" } else { "**no**" };
    let _ = writeln!(out, "\n### Targets\n");
    let _ = writeln!(out, "| target | measured | met |");
    let _ = writeln!(out, "|---|---|---|");
    let hark = systems.iter().find(|s| s.name == "Hark");
    let peer = systems
        .iter()
        .find(|s| s.name != "Hark" && s.result.is_ok());
    match (hark, peer) {
        (Some(h), Some(p)) if h.result.is_ok() => {
            let ratios: Vec<f64> = (0..TEXTS.len())
                .filter_map(|i| Some(paired_ratio(h.text(i)?, p.text(i)?)))
                .collect();
            let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.3}×")).collect();
            let pairs: Vec<f64> = (0..TEXTS.len())
                .filter_map(|i| Some(round_ratios(h.text(i)?, p.text(i)?)))
                .flatten()
                .collect();
            let (ratio, low, high) = pooled_ratio(&pairs);
            let verdict = if high <= TARGET_RATIO {
                "yes"
            } else if low <= TARGET_RATIO {
                "level: the interval holds 1.0"
            } else {
                "**no**"
            };
            let _ = writeln!(
                out,
                "| RTF ≤ {TARGET_RATIO:.1}× {} (same voice and threads) | {} ({}); all {} rounds: {ratio:.3}× (95 % interval {low:.3}–{high:.3}) | {verdict} |",
                p.name,
                shown.join(" / "),
                TEXTS.map(|(name, _)| name).join(" / "),
                pairs.len(),
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "| RTF ≤ {TARGET_RATIO:.1}× piper-tts | no peer ran | – |"
            );
        }
    }
    if let Some(t) = hark.and_then(|h| h.text(PARAGRAPH)) {
        let share = median(&t.first_shares());
        let first = median(&t.firsts());
        let _ = writeln!(
            out,
            "| first audio ≤ {TARGET_FIRST_AUDIO} of the full synthesis ({}) | {share:.2} ({first:.0} of {:.0} ms) | {} |",
            TEXTS[PARAGRAPH].0,
            median(&t.totals()),
            yes_no(share <= TARGET_FIRST_AUDIO),
        );
        let _ = writeln!(
            out,
            "| first audio ≤ {TARGET_FIRST_AUDIO_MS:.0} ms ({}) | {first:.0} ms | {} |",
            TEXTS[PARAGRAPH].0,
            yes_no(first <= TARGET_FIRST_AUDIO_MS),
        );
    }
    let target_mib = TARGET_DAEMON_MB * 1e6 / 1_048_576.0;
    let daemon_row = match daemon {
        None => ("not measured (no --daemon)".to_owned(), "–"),
        Some(d) => match d.steps.last() {
            None => ("the daemon part failed".to_owned(), "–"),
            Some((_, m)) if d.voice_config.is_empty() => (
                format!(
                    "{:.1} MiB VmRSS, {:.1} MiB VmHWM **without a voice**",
                    procfs::mib(m.rss_kib),
                    procfs::mib(m.peak_kib)
                ),
                "–",
            ),
            Some((_, m)) => (
                format!(
                    "{:.1} MiB VmRSS, {:.1} MiB VmHWM",
                    procfs::mib(m.rss_kib),
                    procfs::mib(m.peak_kib)
                ),
                // The peak: resident memory must stay under the target
                // while transcribing and speaking, not just afterwards.
                yes_no(procfs::mib(m.peak_kib) < target_mib),
            ),
        },
    };
    let _ = writeln!(
        out,
        "| daemon with tiny.en q8_0 and one medium voice < {TARGET_DAEMON_MB:.0} MB ({target_mib:.0} MiB) resident | {} | {} |",
        daemon_row.0, daemon_row.1
    );
}

fn render_daemon(out: &mut String, d: &DaemonRun) {
    let _ = writeln!(out, "\n### The daemon: `{}`\n", d.binary.display());
    if d.voice_config.is_empty() {
        let _ = writeln!(
            out,
            "Speech to text with tiny.en q8_0; **no voice loaded**.\n"
        );
    } else {
        let _ = writeln!(
            out,
            "Speech to text with tiny.en q8_0, and these config lines: `{}`\n",
            d.voice_config.join("` `")
        );
    }
    if !d.stt.is_empty() {
        let _ = writeln!(out, "Speech to text: {}.\n", d.stt);
    }
    if !d.steps.is_empty() {
        let _ = writeln!(out, "| step | VmRSS MiB | VmHWM MiB |");
        let _ = writeln!(out, "|---|--:|--:|");
    }
    for (step, m) in &d.steps {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} |",
            step.replace('|', "\\|"),
            procfs::mib(m.rss_kib),
            procfs::mib(m.peak_kib)
        );
    }
    if !d.transcript.is_empty() {
        let _ = writeln!(out, "\nTranscript: {}", d.transcript);
    }
    if let Err(e) = &d.result {
        let _ = writeln!(out, "\nThe daemon part failed: {}", e.replace('\n', " / "));
    }
    let target_mib = TARGET_DAEMON_MB * 1e6 / 1_048_576.0;
    let _ = writeln!(
        out,
        "\nTarget: under {TARGET_DAEMON_MB:.0} MB ({target_mib:.0} MiB) resident with tiny.en \
         q8_0 and one medium voice loaded."
    );
}

/// Where the pad after `^` sits in Hark's ids (after the ids of `^`) and
/// how many ids it has, from the voice's map; (1, 1) if the map cannot be
/// read (then the comparison just finds the ids different).
fn hark_pad_position(args: &TtsArgs) -> (usize, usize) {
    VoiceConfig::from_path(&config_path(&tidy(&args.voice)))
        .ok()
        .and_then(|c| PhonemeIdMap::new(&c.phoneme_id_map).ok())
        .and_then(|m| Some((m.get(BOS)?.len(), m.get(PAD)?.len())))
        .unwrap_or((1, 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ids: Vec<Vec<i64>>) -> TextResult {
        TextResult {
            sentences: ids.len(),
            pieces: ids.len(),
            ids,
            runs: vec![
                Run {
                    total_ms: 300.0,
                    first_ms: 100.0,
                    samples: 22050,
                },
                Run {
                    total_ms: 200.0,
                    first_ms: 100.0,
                    samples: 44100,
                },
            ],
            rate: 22050.0,
        }
    }

    #[test]
    fn medians_and_factors() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        let t = text(vec![]);
        assert_eq!(t.rtfs(), vec![0.3, 0.1]);
        assert_eq!(median(&t.first_shares()), (1.0 / 3.0 + 0.5) / 2.0);
        assert_eq!(t.audio_seconds(), 1.5);
    }

    #[test]
    fn ratios_pair_the_runs_of_a_round() {
        let a = text(vec![]);
        let mut b = text(vec![]);
        // b's first run is as fast as a's, its second twice as slow: the
        // ratios are 1 and 0.5, whatever the medians of each alone.
        b.runs[1].total_ms = 400.0;
        assert_eq!(paired_ratio(&a, &b), 0.75);
        assert_eq!(paired_ratio(&a, &a), 1.0);
    }

    #[test]
    fn pooled_ratio_is_a_geometric_mean_with_an_interval() {
        let (r, low, high) = pooled_ratio(&[2.0, 0.5, 1.0]);
        assert!((r - 1.0).abs() < 1e-12, "{r}");
        assert!(low < 1.0 && high > 1.0, "{low}–{high}");
        let (r, low, high) = pooled_ratio(&[1.1; 10]);
        assert!((r - 1.1).abs() < 1e-12 && (low - 1.1).abs() < 1e-12 && (high - 1.1).abs() < 1e-12);
        assert!(pooled_ratio(&[]).0.is_nan());
    }

    #[test]
    fn ids_are_compared_allowing_for_the_missing_pad() {
        let hark = text(vec![vec![1, 0, 20, 0, 2], vec![1, 0, 21, 0, 2]]);
        assert_eq!(compare_ids(&hark, &hark, (1, 1)), "same");
        let v12 = text(vec![vec![1, 20, 0, 2], vec![1, 21, 0, 2]]);
        assert_eq!(
            compare_ids(&hark, &v12, (1, 1)),
            "same but the pad after `^`"
        );
        let other = text(vec![vec![1, 0, 20, 0, 2], vec![1, 0, 22, 0, 2]]);
        assert_eq!(
            compare_ids(&hark, &other, (1, 1)),
            "1 of 2 sentences differ"
        );
        let fewer = text(vec![vec![1, 0, 20, 0, 2]]);
        assert_eq!(
            compare_ids(&hark, &fewer, (1, 1)),
            "other sentences: 1 here, 2 in Hark"
        );
    }

    #[test]
    fn hark_is_timed_on_the_pieces_the_daemon_speaks() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../.voices");
        let lib = PathBuf::from(format!("{root}/lib/libonnxruntime.so.1.31.1"));
        let voice = PathBuf::from(format!("{root}/voices/en_US-joe-medium.onnx"));
        let mut hark = HarkVoice::load(&lib, &voice, 1).unwrap();
        let paragraph = TEXTS[PARAGRAPH].1;
        // Compared with piper's per sentence; spoken with the first
        // sentence cut after its first clause, as the speech thread does.
        assert_eq!(hark.ids(paragraph).unwrap().len(), 3);
        assert_eq!(hark.pieces(paragraph).unwrap(), 4);
        let run = hark.speak(paragraph).unwrap();
        assert!(run.first_ms < run.total_ms / 2.0, "{run:?}");
    }

    #[test]
    fn the_config_is_beside_the_model() {
        assert_eq!(
            config_path(Path::new("/v/en_US-joe-medium.onnx")),
            Path::new("/v/en_US-joe-medium.onnx.json")
        );
    }
}
