//! `hark-bench wyoming`: Hark's Wyoming speech to text and text to speech
//! against Home Assistant's own Wyoming servers, measured by one client,
//! `wyoming-bench` (PyPI), on the same machine in the same run.
//!
//! 1. The real-speech set's English clips (not those kept for evaluation
//!    only), one wyoming-bench corpus per subset (`ID.wav`, 16 kHz mono
//!    16-bit, and `ID.txt`, its transcript) in a scratch directory.
//! 2. A venv (`tests/.venv-wyoming`) with the pins of `wyoming_peers.py
//!    requirements`: wyoming-bench 2026.10.0, wyoming-faster-whisper 3.8.1,
//!    wyoming-piper 2.5.2 and the engines under them.
//! 3. Hark's daemon with `[wyoming]` on, on a free loopback port, the live
//!    engine on (as the SD image ships it), whisper tiny.en q8_0 and the
//!    piper voice; wyoming-faster-whisper on the same tiny.en (its
//!    CTranslate2 folder, int8) and wyoming-piper on the same voice file,
//!    both started by `wyoming_peers.py` so that nothing is downloaded.
//! 4. One untimed warm-up per server (a clip, a sentence: the models load),
//!    then `--rounds` rounds: in each, for every subset, `wyoming-bench stt
//!    … --rounds 1 --warmup 0 -v --mode both` for Hark and for the peer,
//!    which goes first alternating, then `wyoming-bench tts` the same way.
//!    wyoming-bench measures one server after the other; calling it once
//!    per server and round is what interleaves them, so that whatever else
//!    the machine does falls on both alike.
//! 5. Its `-v` lines (one per measurement) are parsed; the report gives per
//!    mode and subset the medians, the word errors pooled over the subset,
//!    and Hark's median over the peer's. A peer that could not run is a
//!    row saying why.

use std::{
    collections::{BTreeMap, HashMap},
    ffi::OsString,
    fmt::Write as _,
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant, SystemTime},
};

use anyhow::Context;
use serde_json::Value;

use crate::{
    daemon::{self, Daemon},
    host::{Scratch, tidy},
    procfs, speech,
    stt::{self, LivePaths},
    tts::median,
};

/// Benchmarks Hark's Wyoming speech to text and text to speech against
/// wyoming-faster-whisper and wyoming-piper, with wyoming-bench, on
/// recorded people. About 10 min on an idle 2-core machine; much longer
/// when other work shares the cores (whisper.cpp's threads then wait on
/// each other).
#[derive(Debug, clap::Args)]
pub struct WyomingArgs {
    /// Rounds: in each, every subset's corpus and the texts go through
    /// wyoming-bench once per server, which server goes first alternating.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// At most this many clips of each subset (default: all).
    #[arg(long)]
    clips: Option<usize>,
    /// Every this many of the `variations` subset (one speaker's 51 takes
    /// of a few phrases: 285 s of audio); the other subsets whole.
    #[arg(long, default_value_t = 3)]
    variations_every: usize,
    /// Only speech to text, or only text to speech.
    #[arg(long, value_enum)]
    only: Option<Only>,
    /// Seconds between audio chunks in wyoming-bench's streaming mode (its
    /// `--chunk-delay`): 0 sends them as fast as the socket takes them;
    /// 0.064 is real time for its 1024-sample chunks, as a satellite sends.
    #[arg(long, default_value_t = 0.0)]
    chunk_delay: f64,
    /// Threads whisper computes with, in Hark and in faster-whisper.
    #[arg(long, default_value_t = 2)]
    threads: u16,
    /// Beam width of both whispers.
    #[arg(long, default_value_t = 5)]
    beam: u8,
    /// ONNX Runtime threads of Hark's voice (`tts.threads`: 1, as the
    /// appliance ships). wyoming-piper has no such setting: piper-tts makes
    /// its session with ONNX Runtime's default, one thread per core.
    #[arg(long, default_value_t = 1)]
    tts_threads: usize,
    /// Hark without its live engine (no Moonshine drafts, so no
    /// `transcript-chunk` before the end): how much the drafts cost whisper
    /// on these cores.
    #[arg(long)]
    no_live: bool,
    /// The hark binary (`cargo build --release -p hark`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/hark"))]
    hark: PathBuf,
    /// The model store with tiny.en q8_0 (made by `tests/run`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store"))]
    models_dir: PathBuf,
    /// The piper voice both servers speak with (its `.onnx.json` beside
    /// it; `appliance/setup-voices`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.voices/voices/en_US-joe-medium.onnx"))]
    voice: PathBuf,
    #[command(flatten)]
    live: LivePaths,
    #[command(flatten)]
    speech: speech::SpeechDir,
    /// The venv for wyoming-bench and the peers; created, and the pinned
    /// packages of `wyoming_peers.py requirements` installed, when they are
    /// missing.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv-wyoming"))]
    venv: PathBuf,
    /// Python that creates the venv.
    #[arg(long, default_value = "python3")]
    python: PathBuf,
    /// The peers' script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/wyoming_peers.py"))]
    peer_script: PathBuf,
    /// Measure Hark alone (wyoming-bench still comes from the venv).
    #[arg(long)]
    no_peer: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Only {
    Stt,
    Tts,
}

/// wyoming-bench's modes, as its `-v` lines name them.
const MODES: [&str; 2] = ["non_streaming", "streaming"];
const HARK: usize = 0;
const PEER: usize = 1;
const STT_PEER: &str = "wyoming-faster-whisper";
const TTS_PEER: &str = "wyoming-piper";

/// What an assistant says back: one to four sentences, no digits.
const TEXTS: [&str; 4] = [
    "Okay, the kitchen lights are on.",
    "It is twelve degrees and cloudy right now. Expect light rain after lunch.",
    "Your pasta timer is set for ten minutes. I will tell you when it is done. Anything else?",
    "You have two new messages. The first is from Anna, about the meeting on Thursday. \
     The second is from the garage: your car is ready to collect. Shall I read them to you?",
];
const WARM_UP_TEXT: &str = "Hello there.";

/// How long a peer may take to load its model and listen.
const PEER_START: Duration = Duration::from_secs(180);

/// One server, mode and corpus (or the texts): what wyoming-bench measured.
#[derive(Debug, Default)]
struct Cell {
    total_ms: Vec<f64>,
    ttft_ms: Vec<f64>,
    rtf: Vec<f64>,
    audio_s: Vec<f64>,
    /// Speech to text: word errors and reference words, summed.
    errors: usize,
    words: usize,
    /// Measurements that failed: `ID: why`.
    failed: Vec<String>,
    /// Passes (a wyoming-bench run's mode) that measured nothing, and why:
    /// the mode not supported, the server unreachable.
    skipped: Vec<String>,
    /// Why the server never ran (it did not start, --no-peer).
    not_run: Option<String>,
}

impl Cell {
    fn runs(&self) -> String {
        let mut runs = self.total_ms.len().to_string();
        if !self.failed.is_empty() {
            let _ = write!(runs, ", {} failed", self.failed.len());
        }
        if !self.skipped.is_empty() && !self.total_ms.is_empty() {
            let _ = write!(runs, ", {} pass(es) skipped", self.skipped.len());
        }
        runs
    }

    /// Why nothing was measured.
    fn why_empty(&self) -> String {
        self.not_run
            .iter()
            .chain(&self.skipped)
            .next()
            .cloned()
            .or_else(|| {
                self.failed
                    .first()
                    .map(|f| format!("every measurement failed: {f}"))
            })
            .unwrap_or_else(|| "not run".into())
    }

    fn wer(&self) -> Option<f64> {
        (self.words > 0).then(|| 100.0 * self.errors as f64 / self.words as f64)
    }

    fn absorb(&mut self, other: &Cell) {
        self.total_ms.extend(&other.total_ms);
        self.ttft_ms.extend(&other.ttft_ms);
        self.rtf.extend(&other.rtf);
        self.audio_s.extend(&other.audio_s);
        self.errors += other.errors;
        self.words += other.words;
        self.failed.extend(other.failed.iter().cloned());
        self.skipped.extend(other.skipped.iter().cloned());
        if self.not_run.is_none() {
            self.not_run.clone_from(&other.not_run);
        }
    }
}

/// Cells by mode, then server.
type Cells = [[Cell; 2]; 2];

struct Subset {
    name: String,
    dir: PathBuf,
    /// Clips in the corpus, of how many the set has in the subset.
    clips: usize,
    of: usize,
    seconds: f64,
    /// Reference words per clip id, counted as wyoming-bench counts them.
    words: HashMap<String, usize>,
    cells: Cells,
}

/// A peer server: its process, killed when dropped.
struct Peer {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Peer {
    /// Starts `python script MODE ARGS… --port P` and waits until it
    /// accepts a connection (the faster-whisper peer listens once its model
    /// is loaded).
    fn start(
        python: &Path,
        script: &Path,
        mode: &str,
        args: &[OsString],
        log: &Path,
    ) -> anyhow::Result<Peer> {
        let port = free_port()?;
        let out = std::fs::File::create(log)?;
        let child = Command::new(python)
            .arg(script)
            .arg(mode)
            .args(["--port", &port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("cannot run {}", python.display()))?;
        let mut peer = Peer {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log: log.to_path_buf(),
        };
        let started = Instant::now();
        loop {
            if let Some(status) = peer.child.try_wait()? {
                eprintln!("[wyoming] {mode} exited; its log ends:\n{}", peer.tail());
                anyhow::bail!("it exited ({status}): {}", peer.last_line());
            }
            if TcpStream::connect_timeout(&peer.addr, Duration::from_secs(1)).is_ok() {
                eprintln!(
                    "[wyoming] {mode} listens on {} after {:.1} s",
                    peer.addr,
                    started.elapsed().as_secs_f64()
                );
                return Ok(peer);
            }
            if started.elapsed() > PEER_START {
                eprintln!(
                    "[wyoming] {mode} is not listening; its log ends:\n{}",
                    peer.tail()
                );
                anyhow::bail!(
                    "it did not listen within {PEER_START:?}: {}",
                    peer.last_line()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// The log's last line: a Python exception's message.
    fn last_line(&self) -> String {
        procfs::last_line(&std::fs::read(&self.log).unwrap_or_default())
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on now (bound and released: the peer binds it
/// a moment later).
fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub fn main(args: WyomingArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.rounds > 0, "--rounds must be at least 1");
    anyhow::ensure!(args.clips != Some(0), "--clips must be at least 1");
    let scratch = Scratch::new()?;
    let started = SystemTime::now();
    let load_start = procfs::loadavg();

    let mut subsets = if args.only == Some(Only::Tts) {
        Vec::new()
    } else {
        corpora(&args, &scratch.0)?
    };
    let warm_up_corpus = scratch.0.join("corpus-warm-up");
    if let Some(first) = subsets.first() {
        write_warm_up(&warm_up_corpus, &first.dir)?;
    }

    let python = stt::peer_venv(&args.venv, &args.python, &args.peer_script)?;
    let tools = Tools {
        bench: python.with_file_name("wyoming-bench"),
        script: tidy(&args.peer_script),
        python,
    };
    anyhow::ensure!(
        tools.bench.is_file(),
        "no wyoming-bench beside {}",
        tools.python.display()
    );
    let versions = Command::new(&tools.python)
        .arg(&tools.script)
        .arg("versions")
        .output()
        .ok()
        .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
        .unwrap_or(Value::Null);

    let voice = tidy(&args.voice);
    let voice_id = voice
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".onnx"))
        .context("--voice must name a .onnx file")?
        .to_owned();
    let extra = [
        "[wyoming]".to_owned(),
        "enabled = true".to_owned(),
        "listen = \"127.0.0.1:0\"".to_owned(),
        "[stt]".to_owned(),
        if args.no_live {
            "live_model = \"\"".to_owned()
        } else {
            format!(
                "live_model = {}",
                daemon::toml_str(&tidy(&args.live.moonshine))
            )
        },
        format!("threads = {}", args.threads),
        format!("beam_size = {}", args.beam),
        "language = \"en\"".to_owned(),
        "[tts]".to_owned(),
        format!(
            "voices_dir = {}",
            daemon::toml_str(voice.parent().unwrap_or(Path::new(".")))
        ),
        format!(
            "onnxruntime = {}",
            daemon::toml_str(&tidy(&args.live.onnxruntime))
        ),
        format!("voice = {}", Value::String(voice_id.clone())),
        format!("threads = {}", args.tts_threads),
    ];
    let mut tts: Cells = Default::default();
    let hark = tidy(&args.hark);
    daemon::with_daemon(
        &hark,
        &tidy(&args.models_dir),
        &scratch.0.join("hark"),
        &extra,
        |daemon, _| {
            run(
                &args,
                &scratch.0,
                daemon,
                &tools,
                &warm_up_corpus,
                &mut subsets,
                &mut tts,
            )
        },
    )?;

    let context = RunInfo {
        started,
        load: (load_start, procfs::loadavg()),
        versions,
        voice_id,
    };
    print!("{}", render(&args, &context, &subsets, &tts));
    Ok(())
}

/// The English clips of the real-speech set, by subset, each written as a
/// wyoming-bench corpus under `dir/corpus`.
fn corpora(args: &WyomingArgs, dir: &Path) -> anyhow::Result<Vec<Subset>> {
    let clips = speech::load(&tidy(&args.speech.speech))?;
    let mut by_subset: BTreeMap<String, Vec<speech::RealClip>> = BTreeMap::new();
    for clip in clips {
        if clip.language == "en" && !clip.evaluation_only {
            by_subset.entry(clip.subset.clone()).or_default().push(clip);
        }
    }
    anyhow::ensure!(
        !by_subset.is_empty(),
        "no English clips in the real-speech set"
    );
    let mut subsets = Vec::new();
    for (name, clips) in by_subset {
        let of = clips.len();
        let seconds_all: f64 = clips
            .iter()
            .map(|c| c.samples.len() as f64 / 16_000.0)
            .sum();
        let every = if name == "variations" {
            args.variations_every.max(1)
        } else {
            1
        };
        let chosen: Vec<speech::RealClip> = clips
            .into_iter()
            .step_by(every)
            .take(args.clips.unwrap_or(usize::MAX))
            .collect();
        let slug: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let corpus = dir.join("corpus").join(&slug);
        std::fs::create_dir_all(&corpus)?;
        let mut words = HashMap::new();
        let mut seconds = 0.0;
        for clip in &chosen {
            let id: String = clip
                .id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            speech::write_wav(&corpus.join(format!("{id}.wav")), &clip.samples)?;
            std::fs::write(corpus.join(format!("{id}.txt")), &clip.text)?;
            words.insert(id, bench_words(&clip.text));
            seconds += clip.samples.len() as f64 / 16_000.0;
        }
        eprintln!(
            "[wyoming] subset {name:?}: {of} English clips ({seconds_all:.1} s); {} in the corpus ({seconds:.1} s)",
            chosen.len()
        );
        subsets.push(Subset {
            name,
            dir: corpus,
            clips: chosen.len(),
            of,
            seconds,
            words,
            cells: Default::default(),
        });
    }
    Ok(subsets)
}

/// The warm-up corpus: the first clip of `corpus`.
fn write_warm_up(dir: &Path, corpus: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut wavs: Vec<PathBuf> = std::fs::read_dir(corpus)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wav"))
        .collect();
    wavs.sort();
    let wav = wavs.first().context("an empty corpus")?;
    std::fs::copy(wav, dir.join("warm-up.wav"))?;
    std::fs::copy(wav.with_extension("txt"), dir.join("warm-up.txt"))?;
    Ok(())
}

/// Words as wyoming-bench counts them: lower case, every character that is
/// neither a word character nor white space made a space, split on white
/// space (its `tokenize_words`).
fn bench_words(text: &str) -> usize {
    text.to_lowercase()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c.is_whitespace() {
                c
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .count()
}

/// The venv's Python, the peers' script and wyoming-bench.
struct Tools {
    python: PathBuf,
    script: PathBuf,
    bench: PathBuf,
}

/// Everything measured while the daemon runs: the peers started, the
/// warm-ups, the rounds.
fn run(
    args: &WyomingArgs,
    scratch: &Path,
    daemon: &Daemon,
    tools: &Tools,
    warm_up_corpus: &Path,
    subsets: &mut [Subset],
    tts: &mut Cells,
) -> anyhow::Result<()> {
    let hark = daemon
        .wyoming
        .context("the daemon's ready line names no wyoming= address")?;
    eprintln!("[wyoming] Hark serves Wyoming on {hark}");
    let do_stt = args.only != Some(Only::Tts);
    let do_tts = args.only != Some(Only::Stt);
    let ct2 = tidy(&args.live.ct2);
    let voice = tidy(&args.voice);
    // A peer that does not run is a row saying why.
    let start = |on: bool, mode: &str, peer_args: Vec<OsString>| -> Result<Peer, String> {
        if args.no_peer {
            return Err("--no-peer given".into());
        }
        if !on {
            return Err("not asked for".into());
        }
        if mode == "faster-whisper" && !ct2.join("model.bin").is_file() {
            return Err(format!(
                "no CTranslate2 model at {} (`bash tests/setup.sh`, or pass --ct2)",
                ct2.display()
            ));
        }
        eprintln!("[wyoming] starting {mode}");
        Peer::start(
            &tools.python,
            &tools.script,
            mode,
            &peer_args,
            &scratch.join(format!("{mode}.log")),
        )
        .map_err(|e| {
            let why = format!("{mode} did not start: {e:#}");
            eprintln!("[wyoming] {why}");
            why
        })
    };
    let fw_data = scratch.join("faster-whisper-data");
    let piper_data = scratch.join("piper-downloads");
    std::fs::create_dir_all(&fw_data)?;
    std::fs::create_dir_all(&piper_data)?;
    let stt_peer = start(
        do_stt,
        "faster-whisper",
        vec![
            "--model".into(),
            ct2.clone().into(),
            "--data-dir".into(),
            fw_data.into(),
            "--threads".into(),
            args.threads.to_string().into(),
            "--beam".into(),
            args.beam.to_string().into(),
            "--language".into(),
            "en".into(),
        ],
    );
    let tts_peer = start(
        do_tts,
        "piper",
        vec![
            "--voice".into(),
            voice.into(),
            "--data-dir".into(),
            piper_data.into(),
        ],
    );
    if let Err(why) = &stt_peer {
        for subset in subsets.iter_mut() {
            for mode in &mut subset.cells {
                mode[PEER].not_run = Some(why.clone());
            }
        }
    }
    if let Err(why) = &tts_peer {
        for mode in tts.iter_mut() {
            mode[PEER].not_run = Some(why.clone());
        }
    }
    let stt_addr = [Some(hark), stt_peer.as_ref().ok().map(|p| p.addr)];
    let tts_addr = [Some(hark), tts_peer.as_ref().ok().map(|p| p.addr)];
    let names = ["hark", "peer"];

    // One untimed call per server and service: the models load (Hark's
    // whisper waits for its first request beside the live engine; piper
    // loads its voice at the first).
    for server in [HARK, PEER] {
        if do_stt
            && !subsets.is_empty()
            && let Some(addr) = stt_addr[server]
        {
            let out = wyoming_bench(&tools.bench, &stt_command(args, addr, warm_up_corpus))?;
            eprintln!(
                "[wyoming] warm-up, {} speech to text: {}",
                names[server],
                summary_of(&out)
            );
        }
        if do_tts && let Some(addr) = tts_addr[server] {
            let out = wyoming_bench(&tools.bench, &tts_command(addr, &[WARM_UP_TEXT]))?;
            eprintln!(
                "[wyoming] warm-up, {} text to speech: {}",
                names[server],
                summary_of(&out)
            );
        }
    }

    let mut turn = 0usize;
    for round in 0..args.rounds {
        if do_stt {
            for subset in subsets.iter_mut() {
                for server in order(turn) {
                    let Some(addr) = stt_addr[server] else {
                        continue;
                    };
                    let out = wyoming_bench(&tools.bench, &stt_command(args, addr, &subset.dir))?;
                    let mut cells: [Cell; 2] = Default::default();
                    record(&out, Some(&subset.words), &mut cells);
                    eprintln!(
                        "[wyoming] round {}/{} {} {}: {}",
                        round + 1,
                        args.rounds,
                        subset.name,
                        names[server],
                        progress(&cells)
                    );
                    for (mode, cell) in cells.iter().enumerate() {
                        subset.cells[mode][server].absorb(cell);
                    }
                }
                turn += 1;
            }
        }
        if do_tts {
            for server in order(turn) {
                let Some(addr) = tts_addr[server] else {
                    continue;
                };
                let out = wyoming_bench(&tools.bench, &tts_command(addr, &TEXTS))?;
                let mut cells: [Cell; 2] = Default::default();
                record(&out, None, &mut cells);
                eprintln!(
                    "[wyoming] round {}/{} texts {}: {}",
                    round + 1,
                    args.rounds,
                    names[server],
                    progress(&cells)
                );
                for (mode, cell) in cells.iter().enumerate() {
                    tts[mode][server].absorb(cell);
                }
            }
            turn += 1;
        }
    }
    Ok(())
}

/// Hark first on even turns, the peer on odd ones.
fn order(turn: usize) -> [usize; 2] {
    if turn.is_multiple_of(2) {
        [HARK, PEER]
    } else {
        [PEER, HARK]
    }
}

fn progress(cells: &[Cell; 2]) -> String {
    MODES
        .iter()
        .zip(cells)
        .map(|(mode, c)| {
            if c.total_ms.is_empty() {
                format!("{mode} not run ({})", c.why_empty())
            } else {
                format!(
                    "{mode} median {:.0} ms over {}",
                    median(&c.total_ms),
                    c.runs()
                )
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn stt_command(args: &WyomingArgs, addr: SocketAddr, corpus: &Path) -> Vec<OsString> {
    let mut command: Vec<OsString> = vec![
        "stt".into(),
        addr.to_string().into(),
        "--corpus".into(),
        corpus.into(),
    ];
    command.extend(
        [
            "--rounds",
            "1",
            "--warmup",
            "0",
            "-v",
            "--config",
            r#"{"language":"en"}"#,
            "--mode",
            "both",
            "--chunk-delay",
        ]
        .map(OsString::from),
    );
    command.push(args.chunk_delay.to_string().into());
    command
}

fn tts_command(addr: SocketAddr, texts: &[&str]) -> Vec<OsString> {
    let mut command: Vec<OsString> = vec!["tts".into(), addr.to_string().into(), "--texts".into()];
    command.extend(texts.iter().map(OsString::from));
    command.extend(["--rounds", "1", "--warmup", "0", "-v", "--mode", "both"].map(OsString::from));
    command
}

/// Runs wyoming-bench; its standard output. A run in which every
/// measurement failed exits with 1: its lines say why, so that is no error
/// here.
fn wyoming_bench(bench: &Path, args: &[OsString]) -> anyhow::Result<String> {
    let output = Command::new(bench)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", bench.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    anyhow::ensure!(
        output.status.success() || output.status.code() == Some(1),
        "wyoming-bench failed ({}): {}",
        output.status,
        procfs::last_line(&output.stderr)
    );
    if !output.status.success() && stdout.lines().all(|l| parse(l).is_none()) {
        anyhow::bail!(
            "wyoming-bench failed ({}) and measured nothing: {}",
            output.status,
            procfs::last_line(&output.stderr)
        );
    }
    Ok(stdout)
}

/// A warm-up's outcome, for the log.
fn summary_of(out: &str) -> String {
    let mut cells: [Cell; 2] = Default::default();
    record(out, None, &mut cells);
    progress(&cells)
}

/// One `-v` line of wyoming-bench (stt/bench.py `_print_verbose_stt`,
/// tts/bench.py `_print_verbose`) or one of its notices.
#[derive(Debug, PartialEq)]
enum Line {
    /// `[MODE] rN [ID] total=…ms ttft=…ms [WER=…%] audio=…s …`
    Measured {
        mode: usize,
        id: Option<String>,
        total_ms: f64,
        ttft_ms: Option<f64>,
        wer: Option<f64>,
        audio_s: f64,
    },
    /// `[MODE] rN [ID] FAIL: why`
    Failed { mode: usize, what: String },
    /// `[streaming] NOT SUPPORTED by HOST:PORT (why); skipping …`
    Skipped { mode: usize, why: String },
    /// `[unreachable] …` or `[preflight] …`: the server could not be asked.
    Down(String),
}

fn parse(line: &str) -> Option<Line> {
    let line = line.trim();
    let (tag, rest) = line.strip_prefix('[')?.split_once("] ")?;
    if tag == "unreachable" || tag == "preflight" {
        return Some(Line::Down(rest.to_owned()));
    }
    let mode = MODES.iter().position(|m| *m == tag)?;
    if let Some(skipped) = rest.strip_prefix("NOT SUPPORTED") {
        let why = match (skipped.find('('), skipped.rfind(')')) {
            (Some(a), Some(b)) if a < b => &skipped[a + 1..b],
            _ => skipped.trim(),
        };
        // Without the server's word for it, wyoming-bench tries one
        // request on the corpus's shortest clip (or the first text) and
        // gives each event 8 s: a slow answer reads as no streaming.
        let why = if why.contains("not advertised") {
            format!("not supported ({why})")
        } else {
            format!(
                "skipped by wyoming-bench's streaming probe, which waits 8 s for each event: {why}"
            )
        };
        return Some(Line::Skipped { mode, why });
    }
    let rest = rest.strip_prefix('r')?;
    let (round, rest) = rest.split_once(' ')?;
    round.parse::<usize>().ok()?;
    if let Some((id, why)) = rest.split_once("FAIL: ") {
        let id = id.trim();
        return Some(Line::Failed {
            mode,
            what: if id.is_empty() {
                why.to_owned()
            } else {
                format!("{id}: {why}")
            },
        });
    }
    let mut id = None;
    let mut fields = HashMap::new();
    for token in rest.split_whitespace() {
        match token.split_once('=') {
            Some((k, v)) => {
                fields.insert(k, v);
            }
            None => id = Some(token.to_owned()),
        }
    }
    let number = |key: &str, unit: &str| -> Option<f64> {
        fields.get(key)?.strip_suffix(unit)?.parse().ok()
    };
    Some(Line::Measured {
        mode,
        id,
        total_ms: number("total", "ms")?,
        ttft_ms: number("ttft", "ms"),
        wer: number("WER", "%"),
        audio_s: number("audio", "s")?,
    })
}

/// Adds wyoming-bench's output to `cells` (by mode). With `words` (speech
/// to text), each clip's WER times its reference words gives its word
/// errors, so that they can be pooled: the line's WER has one decimal of a
/// percent, exact for references under 500 words.
fn record(out: &str, words: Option<&HashMap<String, usize>>, cells: &mut [Cell; 2]) {
    let mut down = None;
    for line in out.lines().filter_map(parse) {
        match line {
            Line::Measured {
                mode,
                id,
                total_ms,
                ttft_ms,
                wer,
                audio_s,
            } => {
                let cell = &mut cells[mode];
                cell.total_ms.push(total_ms);
                cell.ttft_ms.extend(ttft_ms);
                cell.audio_s.push(audio_s);
                if audio_s > 0.0 {
                    cell.rtf.push(total_ms / 1000.0 / audio_s);
                }
                if let (Some(words), Some(id), Some(wer)) = (words, id, wer)
                    && let Some(&n) = words.get(&id)
                {
                    cell.errors += (wer / 100.0 * n as f64).round() as usize;
                    cell.words += n;
                }
            }
            Line::Failed { mode, what } => cells[mode].failed.push(what),
            Line::Skipped { mode, why } => cells[mode].skipped.push(why),
            Line::Down(why) => down = Some(why),
        }
    }
    if let Some(why) = down {
        for cell in cells.iter_mut() {
            cell.skipped.push(format!("unreachable: {why}"));
        }
    }
}

/// `hark`'s median over `peer`'s, if both have one.
fn ratio(hark: &[f64], peer: &[f64]) -> String {
    if hark.is_empty() || peer.is_empty() {
        return "–".into();
    }
    format!("{:.2}×", median(hark) / median(peer))
}

fn ms(values: &[f64]) -> String {
    if values.is_empty() {
        "–".into()
    } else {
        format!("{:.0}", median(values))
    }
}

/// What the report says about the run besides the cells.
struct RunInfo {
    started: SystemTime,
    load: (String, String),
    versions: Value,
    voice_id: String,
}

fn render(args: &WyomingArgs, context: &RunInfo, subsets: &[Subset], tts: &Cells) -> String {
    let mut out = String::new();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let date = humantime::format_rfc3339_seconds(context.started).to_string();
    let version = |p: &str| {
        context.versions[p]
            .as_str()
            .map_or_else(|| "?".to_owned(), str::to_owned)
    };
    let _ = writeln!(
        out,
        "## Wyoming: Hark against Home Assistant's servers (hark-bench wyoming)\n"
    );
    let _ = writeln!(
        out,
        "{} (`uname -m`), {cores} cores (nproc; {}), Linux {kernel}; {date}; 1-minute load average {} at the \
         start, {} at the end. Everything on 127.0.0.1; client and servers share the cores.\n",
        std::env::consts::ARCH,
        crate::host::cpu(),
        context.load.0,
        context.load.1,
    );
    let _ = writeln!(
        out,
        "Client: wyoming-bench {} (`--rounds 1 --warmup 0 -v --mode both`), run once per server, corpus and \
         round, the server that goes first alternating; {} round(s) after one untimed warm-up per server. \
         Hark: `{}`, Wyoming on, whisper tiny.en q8_0 (beam {}, {} threads, en), the live engine \
         (Moonshine tiny-en) {}; voice {} with {} ONNX Runtime thread(s). Peers: wyoming-faster-whisper {} \
         (faster-whisper {}, CTranslate2 {}: the same tiny.en from its CTranslate2 folder, int8, beam {}, {} \
         threads, en, no VAD); wyoming-piper {} (piper-tts {}, onnxruntime {}: the same voice file, ONNX \
         Runtime's default threads, one per core). Both peers offline: local model and voice, no downloads.\n",
        version("wyoming-bench"),
        args.rounds,
        tidy(&args.hark).display(),
        args.beam,
        args.threads,
        if args.no_live { "off" } else { "on" },
        context.voice_id,
        args.tts_threads,
        version("wyoming-faster-whisper"),
        version("faster-whisper"),
        version("ctranslate2"),
        args.beam,
        args.threads,
        version("wyoming-piper"),
        version("piper-tts"),
        version("onnxruntime"),
    );
    if !context.versions.is_null() {
        let _ = writeln!(out, "Versions: `{}`\n", context.versions);
    }

    if !subsets.is_empty() {
        render_stt(&mut out, args, subsets);
    }
    if tts
        .iter()
        .flatten()
        .any(|c| !c.total_ms.is_empty() || c.not_run.is_some() || !c.skipped.is_empty())
    {
        render_tts(&mut out, tts);
    }
    out
}

fn render_stt(out: &mut String, args: &WyomingArgs, subsets: &[Subset]) {
    let _ = writeln!(out, "### Speech to text\n");
    let _ = writeln!(
        out,
        "Recorded people: the real-speech set's English clips (not those kept for evaluation only), a \
         corpus per subset{}{}. Audio sent with wyoming-bench's defaults (1024-sample chunks, {} s between \
         them in streaming mode, 0.5 s of silence appended). Total: from the request to the final \
         `transcript` (non-streaming) or `transcript-stop` (streaming); TTFT: to the first \
         `transcript-chunk`, in non-streaming mode too when the server sends chunks (Hark does, \
         faster-whisper does not); RTF: total over the clip's length. WER: wyoming-bench's per clip (lower \
         case, punctuation removed, nothing else normalised: \"10\" for \"ten\" is an error, for both \
         servers), pooled over the subset's clips and rounds (each clip's WER × its reference words). × \
         peer: Hark's median over the peer's.\n",
        if args.variations_every > 1 {
            format!(
                " (of the variations every {})",
                ordinal(args.variations_every)
            )
        } else {
            String::new()
        },
        args.clips
            .map_or_else(String::new, |n| format!(", at most {n} clips a subset")),
        args.chunk_delay,
    );
    let _ = writeln!(out, "| subset | clips | audio s |");
    let _ = writeln!(out, "|---|--:|--:|");
    for s in subsets {
        let _ = writeln!(
            out,
            "| {} | {} of {} | {:.1} |",
            s.name, s.clips, s.of, s.seconds
        );
    }
    let _ = writeln!(out);
    let servers = ["Hark", STT_PEER];
    for (mode, name) in MODES.iter().enumerate() {
        let _ = writeln!(out, "#### {name}\n");
        let _ = writeln!(
            out,
            "| subset | server | runs | median total ms | median TTFT ms | median RTF | WER % (pooled) | total × peer | TTFT × peer |"
        );
        let _ = writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|");
        let mut all: [Cell; 2] = Default::default();
        let mut rows: Vec<(String, [&Cell; 2])> = subsets
            .iter()
            .map(|s| (s.name.clone(), [&s.cells[mode][HARK], &s.cells[mode][PEER]]))
            .collect();
        for s in subsets {
            for server in [HARK, PEER] {
                all[server].absorb(&s.cells[mode][server]);
            }
        }
        if subsets.len() > 1 {
            rows.push(("all".into(), [&all[HARK], &all[PEER]]));
        }
        for (subset, cells) in rows {
            for server in [HARK, PEER] {
                let c = cells[server];
                let (other_total, other_ttft) = (&cells[PEER].total_ms, &cells[PEER].ttft_ms);
                if c.total_ms.is_empty() {
                    let _ = writeln!(
                        out,
                        "| {subset} | {} | {} | not run: {} | – | – | – | – | – |",
                        servers[server],
                        c.runs(),
                        escape(&c.why_empty())
                    );
                    continue;
                }
                let (total_ratio, ttft_ratio) = if server == HARK {
                    (
                        ratio(&c.total_ms, other_total),
                        ratio(&c.ttft_ms, other_ttft),
                    )
                } else {
                    (String::new(), String::new())
                };
                let _ = writeln!(
                    out,
                    "| {subset} | {} | {} | {} | {} | {} | {} | {total_ratio} | {ttft_ratio} |",
                    servers[server],
                    c.runs(),
                    ms(&c.total_ms),
                    ms(&c.ttft_ms),
                    if c.rtf.is_empty() {
                        "–".into()
                    } else {
                        format!("{:.3}", median(&c.rtf))
                    },
                    c.wer().map_or("–".into(), |w| format!("{w:.1}")),
                );
            }
        }
        let _ = writeln!(out);
        if mode == 1 {
            // Home Assistant reads a server without transcript streaming
            // the non-streaming way: that is the peer Hark's streaming
            // stands against there.
            let against: Vec<String> = subsets
                .iter()
                .filter(|s| {
                    s.cells[1][PEER].total_ms.is_empty()
                        && !s.cells[0][PEER].total_ms.is_empty()
                        && !s.cells[1][HARK].total_ms.is_empty()
                })
                .map(|s| {
                    format!(
                        "{} {}",
                        s.name,
                        ratio(&s.cells[1][HARK].total_ms, &s.cells[0][PEER].total_ms)
                    )
                })
                .collect();
            if !against.is_empty() {
                let _ = writeln!(
                    out,
                    "The peer does not stream transcripts, so Home Assistant asks it the non-streaming way: \
                     Hark's streaming total over the peer's non-streaming total: {}.\n",
                    against.join(", ")
                );
            }
        }
    }
    failures(
        out,
        subsets.iter().flat_map(|s| {
            (0..2).flat_map(move |mode| {
                [HARK, PEER].map(|server| {
                    (
                        format!("{} {} {}", servers[server], MODES[mode], s.name),
                        &s.cells[mode][server],
                    )
                })
            })
        }),
    );
}

fn render_tts(out: &mut String, tts: &Cells) {
    let _ = writeln!(out, "### Text to speech\n");
    let texts: Vec<String> = TEXTS.iter().map(|t| format!("\"{t}\"")).collect();
    let _ = writeln!(
        out,
        "Texts (1 to 4 sentences): {}. wyoming-bench appends a random nonce to each (`--unique`, its \
         default, so that nothing is served from a cache); in streaming mode it sends them a sentence a \
         `synthesize-chunk`. TTFT: from the request to the first audio; total: to the last; RTF: total \
         over the length of the audio the server returned; medians over texts and rounds. × peer: Hark's \
         median over the peer's.\n",
        texts.join(" ")
    );
    let _ = writeln!(
        out,
        "| mode | server | runs | median TTFT ms | median total ms | median RTF | median audio s | TTFT × peer | total × peer | RTF × peer |"
    );
    let _ = writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    let servers = ["Hark", TTS_PEER];
    for (mode, name) in MODES.iter().enumerate() {
        for server in [HARK, PEER] {
            let c = &tts[mode][server];
            if c.total_ms.is_empty() {
                let _ = writeln!(
                    out,
                    "| {name} | {} | {} | not run: {} | – | – | – | – | – | – |",
                    servers[server],
                    c.runs(),
                    escape(&c.why_empty())
                );
                continue;
            }
            let peer = &tts[mode][PEER];
            let ratios = if server == HARK {
                format!(
                    "{} | {} | {}",
                    ratio(&c.ttft_ms, &peer.ttft_ms),
                    ratio(&c.total_ms, &peer.total_ms),
                    ratio(&c.rtf, &peer.rtf)
                )
            } else {
                " | | ".into()
            };
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {:.3} | {:.2} | {ratios} |",
                servers[server],
                c.runs(),
                ms(&c.ttft_ms),
                ms(&c.total_ms),
                median(&c.rtf),
                median(&c.audio_s),
            );
        }
    }
    let _ = writeln!(out);
    failures(
        out,
        (0..2).flat_map(|mode| {
            [HARK, PEER].map(|server| {
                (
                    format!("{} {}", servers[server], MODES[mode]),
                    &tts[mode][server],
                )
            })
        }),
    );
}

/// Lists the failed measurements, and the passes skipped in cells that
/// have measurements from other passes (a cell with none says why in its
/// row).
fn failures<'a>(out: &mut String, cells: impl Iterator<Item = (String, &'a Cell)>) {
    let mut notes = Vec::new();
    for (name, c) in cells {
        if !c.failed.is_empty() {
            let first = c.failed.iter().take(3).cloned().collect::<Vec<_>>();
            notes.push(format!(
                "- {name}: {} measurement(s) failed, e.g. {}",
                c.failed.len(),
                first.join("; ")
            ));
        }
        if !c.skipped.is_empty() && !c.total_ms.is_empty() {
            notes.push(format!(
                "- {name}: {} pass(es) skipped: {}",
                c.skipped.len(),
                c.skipped[0]
            ));
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "Not measured:\n{}\n", notes.join("\n"));
    }
}

fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn ordinal(n: usize) -> String {
    match n {
        2 => "second".into(),
        3 => "third".into(),
        n => format!("{n}th"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verbose_lines_parse() {
        assert_eq!(
            parse("[non_streaming] r0 ps-cards-001 total=600ms ttft=n/a WER=33.3% audio=1.10s"),
            Some(Line::Measured {
                mode: 0,
                id: Some("ps-cards-001".into()),
                total_ms: 600.0,
                ttft_ms: None,
                wer: Some(33.3),
                audio_s: 1.1,
            })
        );
        assert_eq!(
            parse(
                "[streaming] r0 sent=2 ttft=279ms total=1060ms audio=6.80s bytes=300032 cycles=2"
            ),
            Some(Line::Measured {
                mode: 1,
                id: None,
                total_ms: 1060.0,
                ttft_ms: Some(279.0),
                wer: None,
                audio_s: 6.8,
            })
        );
        assert_eq!(
            parse("[streaming] r2 a-b FAIL: timed out (>60s per event)"),
            Some(Line::Failed {
                mode: 1,
                what: "a-b: timed out (>60s per event)".into()
            })
        );
        assert_eq!(
            parse(
                "  [streaming] NOT SUPPORTED by 127.0.0.1:10391 (not advertised by server); \
                 skipping streaming mode"
            ),
            Some(Line::Skipped {
                mode: 1,
                why: "not supported (not advertised by server)".into()
            })
        );
        assert_eq!(
            parse("  [unreachable] 127.0.0.1:1 unavailable: ConnectionRefusedError; skipping"),
            Some(Line::Down(
                "127.0.0.1:1 unavailable: ConnectionRefusedError; skipping".into()
            ))
        );
        assert_eq!(parse("[warmup:streaming] x: ok"), None);
        assert_eq!(parse("  [non_streaming] ok=6 fail=0"), None);
        assert_eq!(parse("=== 127.0.0.1:10391 (faster-whisper) ==="), None);
    }

    #[test]
    fn word_errors_are_pooled_from_each_clips_wer() {
        let words = HashMap::from([("a".to_owned(), 3), ("b".to_owned(), 9)]);
        let out = "[non_streaming] r0 a total=600ms ttft=n/a WER=33.3% audio=1.10s\n\
                   [non_streaming] r0 b total=700ms ttft=n/a WER=11.1% audio=3.50s\n\
                   [streaming] NOT SUPPORTED by h:1 (not advertised by server); skipping";
        let mut cells: [Cell; 2] = Default::default();
        record(out, Some(&words), &mut cells);
        assert_eq!((cells[0].errors, cells[0].words), (2, 12));
        assert_eq!(cells[0].total_ms, [600.0, 700.0]);
        assert!(cells[1].total_ms.is_empty());
        assert_eq!(
            cells[1].skipped,
            ["not supported (not advertised by server)"]
        );
        assert_eq!(
            cells[1].why_empty(),
            "not supported (not advertised by server)"
        );
    }

    #[test]
    fn words_are_counted_as_wyoming_bench_counts_them() {
        assert_eq!(bench_words("I really don't know, Mr. Smith!"), 7);
        assert_eq!(bench_words("  ten   of clubs "), 3);
    }
}
