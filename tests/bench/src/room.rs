//! `hark-bench room`: several agents in one room, timed on the real daemon
//! (release build, virtual sound card, simulated board).
//!
//! 1. **Floor hand-over.** Two agents call `transcribe_voice` at once over
//!    TCP; one holds the microphone, the other waits. A sentence is
//!    injected; the time from the first recording's end (its
//!    `listening_ended`) to the second agent's microphone opening (its
//!    `listening_started`), from the daemon's log (µs timestamps, debug for
//!    `hark_core::events`). The second agent's listen then times out and the
//!    round ends.
//! 2. **Event fan-out.** 32 clients read `GET /events` while the simulated
//!    mute switch moves as fast as its 1 ms debounce allows (every move an
//!    event, every event to 32 clients). Reported: events a second, the
//!    delay from publishing (the event's `at_ms`) to the last of the 32
//!    reading it, drops, and the capture thread's progress against the wall
//!    clock (`get_status` `capture.periods`: 50 a second when capture keeps
//!    up) compared with the same window without subscribers.
//! 3. **History write cost.** The daemon's history writer (`History::add`,
//!    SQLite WAL with `synchronous = FULL`) in this process, on this disk:
//!    per utterance, with and without the audio kept.
//!
//! No peer has an arbiter, an event stream or a history to compare with
//! (VoiceMode has a file lock; the satellites and desktop servers none), so
//! the figures stand against their targets.

use std::{
    fmt::Write as _,
    io::{BufRead, BufReader, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::{
    daemon::{self, Daemon, Rpc},
    figures::{ms, percentile, row},
    host::{Scratch, tidy},
};

const TARGET_HANDOVER_MS: f64 = 20.0;
const SUBSCRIBERS: usize = 32;

#[derive(Debug, Args)]
pub struct RoomArgs {
    /// Floor hand-overs measured.
    #[arg(long, default_value_t = 10)]
    handovers: usize,
    /// Seconds of each fan-out window.
    #[arg(long, default_value_t = 10)]
    fanout_seconds: u64,
    /// History rows written per configuration.
    #[arg(long, default_value_t = 200)]
    rows: usize,
    /// The hark binary to start (`cargo build --release -p hark`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/hark"))]
    hark: PathBuf,
    /// The model store with tiny.en q8_0 (made by `tests/run`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store"))]
    models_dir: PathBuf,
}

pub fn main(args: RoomArgs) -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let dir = scratch.0.join("daemon");
    let extra = [
        // The subscribers and the bench's own clients.
        "[mcp]".to_owned(),
        "max_connections = 64".to_owned(),
        "[tts]".to_owned(),
        "enabled = false".to_owned(),
        // The mute switch makes an event every time it moves.
        "[board]".to_owned(),
        "debounce_ms = 1".to_owned(),
    ];
    let (daemon, mut status) = daemon::start_listening(
        &tidy(&args.hark),
        &tidy(&args.models_dir),
        &dir,
        "info,hark_core::events=debug",
        &extra,
    )?;

    eprintln!("[room] {} floor hand-overs", args.handovers);
    let wav = dir.join("sentence.wav");
    let spoken = Command::new("espeak-ng")
        .arg("-w")
        .arg(&wav)
        .arg("What is the weather going to be like tomorrow morning?")
        .status()
        .context("cannot run espeak-ng")?;
    anyhow::ensure!(spoken.success(), "espeak-ng failed");
    let mut handovers = Vec::new();
    for round in 0..args.handovers {
        handovers.push(
            handover(&daemon, &mut status, &wav).with_context(|| format!("hand-over {round}"))?,
        );
    }

    eprintln!(
        "[room] fan-out, {} s without and with {SUBSCRIBERS} subscribers",
        args.fanout_seconds
    );
    let window = Duration::from_secs(args.fanout_seconds);
    let quiet = fanout(&daemon, &mut status, 0, window)?;
    let loaded = fanout(&daemon, &mut status, SUBSCRIBERS, window)?;
    drop(status);
    daemon.stop()?;

    eprintln!("[room] history, {} rows each", args.rows);
    let plain = history(&scratch.0.join("history-plain"), args.rows, false)?;
    let audio = history(&scratch.0.join("history-audio"), args.rows, true)?;
    print!(
        "{}",
        report(&args, &handovers, &quiet, &loaded, &plain, &audio)
    );
    Ok(())
}

/// One hand-over: ms from the first recording's end to the second's start.
fn handover(daemon: &Daemon, status: &mut Rpc, wav: &Path) -> anyhow::Result<f64> {
    status.wait_status("a free floor", Duration::from_secs(30), |s| {
        s["floor"]["holder"].is_null() && s["recording"] == false && s["speaking"] == false
    })?;
    let wall = SystemTime::now();
    let mut first = Rpc::tcp(daemon.tcp, "alpha")?;
    let mut second = Rpc::tcp(daemon.tcp, "beta")?;
    let a = first.start(
        "tools/call",
        json!({"name": "transcribe_voice", "arguments": {"timeout_seconds": 30}}),
    )?;
    status.wait_status("alpha holding the floor", Duration::from_secs(10), |s| {
        s["floor"]["holder"]["who"] == "alpha"
    })?;
    let _ = second.start(
        "tools/call",
        json!({"name": "transcribe_voice", "arguments": {"timeout_seconds": 60}}),
    )?;
    status.wait_status("beta waiting", Duration::from_secs(10), |s| {
        s["floor"]["queue"].as_array().is_some_and(|q| q.len() == 1)
            && s["recording"] == true
            && s["speaking"] == false
    })?;
    let done = Command::new(&daemon.binary)
        .arg("--config")
        .arg(&daemon.config)
        .arg("inject")
        .arg(wav)
        .output()?;
    anyhow::ensure!(done.status.success(), "hark inject failed");
    first.answer(a)?;
    // Beta's microphone opened; it has no more to do: leaving releases it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while daemon.logged("ListeningStarted", wall).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(second);
    let ended = daemon.logged("ListeningEnded", wall);
    let started = daemon.logged("ListeningStarted", wall);
    // alpha's recording ended first; beta's started after it.
    let (Some(end), Some(start)) = (ended.first(), started.get(1)) else {
        bail!("the log lacks the recordings' events ({ended:?}, {started:?})");
    };
    Ok(start.duration_since(*end).map(ms).unwrap_or(f64::NAN))
}

/// An event as a subscriber saw it: its sequence number, when it was
/// published (ms since the epoch), when the subscriber read it.
type Seen = (u64, u64, SystemTime);

/// One fan-out window.
struct Fanout {
    subscribers: usize,
    events_per_second: f64,
    /// Publish → the last subscriber reading it, ms (1 ms resolution).
    delays: Vec<f64>,
    dropped: u64,
    /// Capture periods a second during the window.
    periods_per_second: f64,
    overruns: u64,
}

fn fanout(
    daemon: &Daemon,
    status: &mut Rpc,
    subscribers: usize,
    window: Duration,
) -> anyhow::Result<Fanout> {
    let stop = Arc::new(AtomicBool::new(false));
    // For each subscriber: (seq, published at, received at) of the mute
    // events.
    let seen: Arc<Mutex<Vec<Vec<Seen>>>> = Arc::new(Mutex::new(vec![Vec::new(); subscribers]));
    let mut readers = Vec::new();
    for i in 0..subscribers {
        let mut stream = TcpStream::connect(daemon.http.context("the daemon serves no HTTP")?)?;
        stream.write_all(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")?;
        stream.set_read_timeout(Some(Duration::from_millis(200)))?;
        let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
        readers.push(std::thread::spawn(move || {
            let mut lines = BufReader::new(stream);
            let mut line = String::new();
            while !stop.load(Ordering::Relaxed) {
                line.clear();
                match lines.read_line(&mut line) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(_) => continue,
                }
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                let Ok(event) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if event["event"] == "mute"
                    && let (Some(seq), Some(at)) = (event["seq"].as_u64(), event["at_ms"].as_u64())
                {
                    let now = SystemTime::now();
                    if let Ok(mut seen) = seen.lock() {
                        seen[i].push((seq, at, now));
                    }
                }
            }
        }));
    }
    if subscribers > 0 {
        status.wait_status("the subscribers", Duration::from_secs(10), |s| {
            s["events"]["clients"].as_u64() == Some(subscribers as u64)
        })?;
    }
    let before = status.wait_status("a reading", Duration::ZERO, |_| true)?;
    let mut hand = Rpc::unix(&daemon.unix(), "hark-bench hand")?;
    let started = Instant::now();
    let mut moves = 0u64;
    while started.elapsed() < window {
        hand.request("hark/board", json!({"mute": moves.is_multiple_of(2)}))?;
        moves += 1;
        std::thread::sleep(Duration::from_millis(2));
    }
    hand.request("hark/board", json!({"mute": false}))?;
    let elapsed = started.elapsed();
    let after = status.wait_status("a reading", Duration::ZERO, |_| true)?;
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        let _ = reader.join();
    }
    let periods = |s: &Value| s["capture"]["periods"].as_u64().unwrap_or(0);
    let overruns = |s: &Value| s["capture"]["overruns"].as_u64().unwrap_or(0);
    let seen = seen
        .lock()
        .map_err(|_| anyhow::anyhow!("a reader panicked"))?;
    // For each event, the slowest subscriber's delay.
    let mut last: std::collections::BTreeMap<u64, (u64, SystemTime)> = Default::default();
    for subscriber in seen.iter() {
        for &(seq, at, received) in subscriber {
            let entry = last.entry(seq).or_insert((at, received));
            if received > entry.1 {
                entry.1 = received;
            }
        }
    }
    let delays = last
        .values()
        .filter_map(|(at, received)| {
            received
                .duration_since(SystemTime::UNIX_EPOCH + Duration::from_millis(*at))
                .ok()
                .map(ms)
        })
        .collect();
    Ok(Fanout {
        subscribers,
        events_per_second: moves as f64 / elapsed.as_secs_f64(),
        delays,
        dropped: after["events"]["dropped"].as_u64().unwrap_or(0)
            - before["events"]["dropped"].as_u64().unwrap_or(0),
        periods_per_second: (periods(&after) - periods(&before)) as f64 / elapsed.as_secs_f64(),
        overruns: overruns(&after) - overruns(&before),
    })
}

/// Per-row write times, ms.
fn history(dir: &Path, rows: usize, keep_audio: bool) -> anyhow::Result<Vec<f64>> {
    use hark_store::history::{History, Kind, New, Settings};
    let history = History::open(
        dir,
        Settings {
            max_rows: 10_000,
            keep: Duration::from_secs(30 * 24 * 3600),
            keep_audio,
        },
    )?;
    // A 3 s utterance's clip, as the listen hands whisper.
    let clip: Vec<f32> = (0..48_000)
        .map(|i| ((i as f32) * 0.05).sin() * 0.3)
        .collect();
    // The history's API is async (its writes run on its own thread).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let mut times = Vec::with_capacity(rows);
    for i in 0..rows {
        history.stash_audio(i as u64, &clip);
        let started = Instant::now();
        runtime.block_on(history.add(New {
            at: SystemTime::now(),
            kind: Kind::Heard,
            agent: Some("claude".into()),
            text: "What is the weather going to be like tomorrow morning?".into(),
            end_reason: Some("end_of_speech".into()),
            duration: Some(3.0),
            delivered_to: Some("claude".into()),
            listen: Some(i as u64),
        }))?;
        times.push(ms(started.elapsed()));
    }
    Ok(times)
}

fn report(
    args: &RoomArgs,
    handovers: &[f64],
    quiet: &Fanout,
    loaded: &Fanout,
    plain: &[f64],
    audio: &[f64],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Several agents, one room — {}\n\n{}\n",
        humantime::format_rfc3339_seconds(SystemTime::now()),
        crate::host::machine()
    );
    let _ = writeln!(
        out,
        "`hark-bench room`: {} hand-overs, fan-out windows of {} s, {} history rows per configuration.\n",
        args.handovers, args.fanout_seconds, args.rows
    );
    let _ = writeln!(
        out,
        "| floor hand-over, ms | median | p95 | max | target |\n|---|---|---|---|---|"
    );
    row(
        &mut out,
        "one agent's recording ends → the next agent's microphone open",
        handovers,
        2,
        Some(TARGET_HANDOVER_MS),
    );
    let _ = writeln!(
        out,
        "\n| event fan-out | events/s | publish → last reader, median / p95 / max ms | readers dropped | capture periods/s | capture overruns |\n|---|---|---|---|---|---|"
    );
    for f in [quiet, loaded] {
        let _ = writeln!(
            out,
            "| {} subscribers | {:.0} | {} | {} | {:.1} | {} |",
            f.subscribers,
            f.events_per_second,
            if f.delays.is_empty() {
                "—".to_owned()
            } else {
                format!(
                    "{:.0} / {:.0} / {:.0}",
                    percentile(&f.delays, 0.5),
                    percentile(&f.delays, 0.95),
                    percentile(&f.delays, 1.0)
                )
            },
            f.dropped,
            f.periods_per_second,
            f.overruns
        );
    }
    let _ = writeln!(
        out,
        "\n| history write per utterance, ms | median | p95 | max | |\n|---|---|---|---|---|"
    );
    row(
        &mut out,
        "the row (SQLite, WAL, synchronous = FULL)",
        plain,
        2,
        None,
    );
    row(
        &mut out,
        "the row and its 3 s of audio (`keep_audio`)",
        audio,
        2,
        None,
    );
    out
}
