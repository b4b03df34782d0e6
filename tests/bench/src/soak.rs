//! `hark-bench soak`: the appliance used for a long time. Each cycle one
//! agent listens to the person, one has Hark speak, one converses (Hark
//! asks, the person answers) and the person leaves a message with the
//! button that a waiting agent takes, all through the virtual sound card
//! with recordings of real people from the speech set; four more agents
//! stay connected, asking `get_status` every second. After every cycle the
//! daemon's resident memory, open file descriptors and threads are read
//! from /proc.
//!
//! What must hold, and is checked: peak resident memory grows less than
//! 5 % after the warm-up (the first tenth of the cycles; judged from 100
//! cycles on, as a handful of cycles shows first-time allocations, not
//! growth), descriptors and threads end within [`SPARE`] of the most seen
//! during the warm-up (tokio's blocking threads come and go; a leak of one
//! a cycle does not hide in that), and the history holds a row for every
//! utterance (each listen, answer and message heard, each sentence
//! spoken). `--csv` writes the samples; `tests/bench/plot_soak.py` draws
//! them.

use std::{
    io::Write as _,
    net::SocketAddr,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, ensure};
use serde_json::{Value, json};

use crate::{
    daemon::{self, Daemon, Rpc},
    procfs, speech,
};

#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// Cycles of listen, speak, converse and a message.
    #[arg(long, default_value_t = 1000)]
    cycles: usize,
    /// Stop starting cycles after this many minutes, and judge the cycles
    /// run: a cycle takes real time (the person speaks into the virtual
    /// card), so 1000 cycles take about four hours. The report says how
    /// many ran.
    #[arg(long)]
    minutes: Option<f64>,
    /// Where to write one line per cycle: cycle, seconds, RSS KiB, peak
    /// RSS KiB, descriptors, threads.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// The longest recording the person says (seconds): shorter ones make
    /// shorter cycles.
    #[arg(long, default_value_t = 3.0)]
    clip_seconds: f64,
    /// The hark binary to start (`cargo build --release -p hark`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/hark"))]
    hark: PathBuf,
    /// The model store with tiny.en q8_0 (made by `tests/run`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store"))]
    models_dir: PathBuf,
    #[command(flatten)]
    speech: speech::SpeechDir,
}

/// One reading of the daemon's resources.
#[derive(Debug, Clone, Copy)]
struct Sample {
    cycle: usize,
    seconds: f64,
    rss_kib: u64,
    peak_kib: u64,
    fds: usize,
    threads: usize,
}

/// What the cycles did, to be found in the history.
#[derive(Debug, Default)]
struct Done {
    heard: usize,
    messages: usize,
    spoken: usize,
    /// Seconds spent in each step (listen, speak, converse, message),
    /// summed over the cycles: where a cycle's time goes.
    steps: [f64; 4],
}

impl Done {
    /// Adds the time since `mark` to step `k` and restarts the mark.
    fn took(&mut self, k: usize, mark: &mut Instant) {
        self.steps[k] += mark.elapsed().as_secs_f64();
        *mark = Instant::now();
    }
}

pub fn main(args: SoakArgs) -> anyhow::Result<()> {
    ensure!(args.cycles >= 3, "--cycles must be at least 3");
    let dir = std::env::temp_dir().join(format!("hark-bench-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let wavs: Vec<PathBuf> = speech::short_english(&args.speech.speech, &dir, args.clip_seconds)?
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    let extra = [
        // Every row kept: the check counts them all.
        "[history]".to_owned(),
        format!("max_rows = {}", args.cycles * 8 + 100),
    ];
    daemon::with_daemon(
        &args.hark,
        &args.models_dir,
        &dir,
        &extra,
        |daemon, watcher| soak(&args, daemon, watcher, &wavs),
    )
}

fn soak(
    args: &SoakArgs,
    daemon: &Daemon,
    watcher: &mut Rpc,
    wavs: &[PathBuf],
) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let idle: Vec<_> = (0..4)
        .map(|n| {
            let (tcp, stop) = (daemon.tcp, Arc::clone(&stop));
            std::thread::spawn(move || poll(tcp, n, &stop))
        })
        .collect();
    let mut listener = Rpc::tcp(daemon.tcp, "soak listener")?;
    let mut speaker = Rpc::tcp(daemon.tcp, "soak speaker")?;
    let mut asker = Rpc::tcp(daemon.tcp, "soak asker")?;
    let mut reader = Rpc::tcp(daemon.tcp, "soak reader")?;
    let mut board = Rpc::unix(&daemon.unix(), "soak hand")?;
    let mut csv = match &args.csv {
        Some(path) => Some(std::fs::File::create(path)?),
        None => None,
    };
    if let Some(csv) = &mut csv {
        writeln!(csv, "cycle,seconds,rss_kib,peak_kib,fds,threads")?;
    }
    let began = Instant::now();
    let mut samples = Vec::with_capacity(args.cycles);
    let mut done = Done::default();
    let deadline = args.minutes.map(|m| Duration::from_secs_f64(m * 60.0));
    for cycle in 0..args.cycles {
        if deadline.is_some_and(|d| began.elapsed() > d) && cycle >= 3 {
            eprintln!(
                "[soak] the {} min deadline passed after {cycle} cycles",
                args.minutes.unwrap_or_default()
            );
            break;
        }
        let wav = |k: usize| &wavs[(cycle * 3 + k) % wavs.len()];
        let step = (|| -> anyhow::Result<()> {
            let mut mark = Instant::now();
            // An agent listens.
            let id = listener.start(
                "tools/call",
                json!({"name": "transcribe_voice", "arguments": {"timeout_seconds": 30}}),
            )?;
            speak_when_open(daemon, watcher, wav(0))?;
            heard(listener.answer(id)?, "transcribe_voice")?;
            done.heard += 1;
            done.took(0, &mut mark);
            // Hark speaks for another.
            let said = speaker.call(
                "speak_text",
                json!({"text": format!("Cycle {cycle}."), "wait": true}),
            )?;
            ensure!(
                said["structuredContent"]["status"] == "spoken",
                "speak_text answered {said}"
            );
            done.spoken += 1;
            done.took(1, &mut mark);
            // A third asks, and the person answers.
            let id = asker.start(
                "tools/call",
                json!({"name": "converse", "arguments": {
                    "text": "Anything else?", "timeout_seconds": 30}}),
            )?;
            speak_when_open(daemon, watcher, wav(1))?;
            heard(asker.answer(id)?, "converse")?;
            done.spoken += 1;
            done.heard += 1;
            done.took(2, &mut mark);
            // The person leaves a message for the agent waiting for one.
            let id = reader.start(
                "tools/call",
                json!({"name": "wait_for_person", "arguments": {"timeout_seconds": 60}}),
            )?;
            watcher.wait_status("the agent waiting", Duration::from_secs(10), |s| {
                s["subsystems"]["inbox"]
                    .as_str()
                    .is_some_and(|i| i.contains("1 agent(s) waiting"))
            })?;
            board.request("hark/board", json!({"button": "press"}))?;
            speak_when_open(daemon, watcher, wav(2))?;
            let got = reader.answer(id)?;
            ensure!(
                got["structuredContent"]["received"] == true,
                "wait_for_person answered {got}"
            );
            done.messages += 1;
            done.took(3, &mut mark);
            Ok(())
        })();
        step.with_context(|| format!("cycle {cycle}"))?;
        let sample = sample(daemon.pid(), cycle, began)?;
        if let Some(csv) = &mut csv {
            writeln!(
                csv,
                "{},{:.1},{},{},{},{}",
                sample.cycle,
                sample.seconds,
                sample.rss_kib,
                sample.peak_kib,
                sample.fds,
                sample.threads
            )?;
        }
        if cycle % 50 == 0 {
            eprintln!(
                "[soak] cycle {cycle}: RSS {} MiB, peak {} MiB, {} descriptors, {} threads",
                sample.rss_kib / 1024,
                sample.peak_kib / 1024,
                sample.fds,
                sample.threads
            );
        }
        samples.push(sample);
    }
    stop.store(true, Ordering::Release);
    for thread in idle {
        thread
            .join()
            .map_err(|_| anyhow::anyhow!("an idle agent panicked"))??;
    }
    let rows = history(watcher)?;
    print!("{}", report(args, &samples, &done, &rows));
    check(&samples, &done, &rows)
}

/// Waits for the microphone to open and Hark to be quiet (the chime, or
/// the question, played), then plays `wav` into the room.
fn speak_when_open(
    daemon: &Daemon,
    watcher: &mut Rpc,
    wav: &std::path::Path,
) -> anyhow::Result<()> {
    watcher.wait_status("the microphone open", Duration::from_secs(60), |s| {
        s["recording"] == true && s["speaking"] == false
    })?;
    std::thread::sleep(Duration::from_millis(250));
    watcher.wait_status("Hark quiet", Duration::from_secs(30), |s| {
        s["speaking"] == false
    })?;
    daemon.inject(wav)
}

fn heard(result: Value, tool: &str) -> anyhow::Result<()> {
    ensure!(result["isError"] != true, "{tool} failed: {result}");
    let text = result["structuredContent"]["text"].as_str().unwrap_or("");
    let speech = result["structuredContent"]["speech"] != false;
    ensure!(
        speech && !text.trim().is_empty(),
        "{tool} heard nothing: {result}"
    );
    Ok(())
}

/// An agent that stays connected and asks how things are every second.
fn poll(tcp: SocketAddr, n: usize, stop: &AtomicBool) -> anyhow::Result<()> {
    let mut rpc = Rpc::tcp(tcp, &format!("soak idle {n}"))?;
    while !stop.load(Ordering::Acquire) {
        rpc.call("get_status", json!({}))?;
        std::thread::sleep(Duration::from_secs(1));
    }
    Ok(())
}

fn sample(pid: u32, cycle: usize, began: Instant) -> anyhow::Result<Sample> {
    let memory = procfs::memory(pid)?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|t| t.trim().parse().ok())
        .context("no Threads: in /proc/PID/status")?;
    Ok(Sample {
        cycle,
        seconds: began.elapsed().as_secs_f64(),
        rss_kib: memory.rss_kib,
        peak_kib: memory.peak_kib,
        fds,
        threads,
    })
}

/// The history's rows by kind: (heard, message, spoken).
fn history(watcher: &mut Rpc) -> anyhow::Result<(usize, usize, usize)> {
    let mut counts = (0, 0, 0);
    let mut before: Option<i64> = None;
    loop {
        let mut args = json!({"limit": 500});
        if let Some(id) = before {
            args["before"] = json!(id);
        }
        let page = watcher.call("list_captures", args)?["structuredContent"].take();
        let rows = page["captures"].as_array().context("no captures")?;
        for row in rows {
            match row["kind"].as_str() {
                Some("heard") => counts.0 += 1,
                Some("message") => counts.1 += 1,
                Some("spoken") => counts.2 += 1,
                _ => {}
            }
        }
        before = rows.iter().filter_map(|r| r["id"].as_i64()).min();
        if page["more"] != true || before.is_none() {
            return Ok(counts);
        }
    }
}

/// Descriptors and threads the end may hold beyond the warm-up's most.
const SPARE: usize = 2;

/// After the warm-up (the first tenth of the cycles).
fn warm(samples: &[Sample]) -> &Sample {
    &samples[samples.len() / 10]
}

fn check(samples: &[Sample], done: &Done, rows: &(usize, usize, usize)) -> anyhow::Result<()> {
    let (first, last) = (warm(samples), samples[samples.len() - 1]);
    let growth = last.peak_kib as f64 / first.peak_kib as f64 - 1.0;
    ensure!(
        samples.len() < 100 || growth < 0.05,
        "peak RSS grew {:.1} % after the warm-up ({} → {} KiB)",
        growth * 100.0,
        first.peak_kib,
        last.peak_kib
    );
    let warmup = &samples[..=samples.len() / 10];
    let most = |f: fn(&Sample) -> usize| warmup.iter().map(f).max().unwrap_or(0);
    ensure!(
        last.fds <= most(|s| s.fds) + SPARE,
        "open descriptors went from {} (the warm-up's most) to {}",
        most(|s| s.fds),
        last.fds
    );
    ensure!(
        last.threads <= most(|s| s.threads) + SPARE,
        "threads went from {} (the warm-up's most) to {}",
        most(|s| s.threads),
        last.threads
    );
    ensure!(
        *rows == (done.heard, done.messages, done.spoken),
        "the history holds {rows:?} (heard, message, spoken) for {done:?}"
    );
    Ok(())
}

fn report(
    args: &SoakArgs,
    samples: &[Sample],
    done: &Done,
    rows: &(usize, usize, usize),
) -> String {
    let (first, last) = (warm(samples), samples[samples.len() - 1]);
    let max = |f: fn(&Sample) -> u64| samples.iter().map(f).max().unwrap_or(0);
    format!(
        "hark-bench soak: {} of {} cycles in {:.0} min\n\n\
         | after the warm-up (cycle {}) → the end | RSS MiB | peak RSS MiB | descriptors | threads |\n\
         |---|--:|--:|--:|--:|\n\
         | warm | {:.1} | {:.1} | {} | {} |\n\
         | end | {:.1} | {:.1} | {} | {} |\n\
         | most seen | {:.1} | {:.1} | {} | {} |\n\n\
         history: {} heard, {} messages, {} spoken; the cycles made {} heard, {} messages, {} spoken\n\
         a cycle's steps on average: listen {:.1} s, speak {:.1} s, converse {:.1} s, message {:.1} s\n",
        samples.len(),
        args.cycles,
        last.seconds / 60.0,
        first.cycle,
        first.rss_kib as f64 / 1024.0,
        first.peak_kib as f64 / 1024.0,
        first.fds,
        first.threads,
        last.rss_kib as f64 / 1024.0,
        last.peak_kib as f64 / 1024.0,
        last.fds,
        last.threads,
        max(|s| s.rss_kib) as f64 / 1024.0,
        max(|s| s.peak_kib) as f64 / 1024.0,
        max(|s| s.fds as u64),
        max(|s| s.threads as u64),
        rows.0,
        rows.1,
        rows.2,
        done.heard,
        done.messages,
        done.spoken,
        done.steps[0] / samples.len() as f64,
        done.steps[1] / samples.len() as f64,
        done.steps[2] / samples.len() as f64,
        done.steps[3] / samples.len() as f64,
    )
}
