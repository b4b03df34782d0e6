//! `hark-bench person`: the person starts a conversation, timed from the
//! outside on the real daemon (release build, virtual sound card, the
//! simulated board).
//!
//! 1. **Press to light and chime.** The bench puts the simulated button
//!    down through `hark/board` (the contact closes: the moment a finger
//!    presses), then polls, as fast as it can, `get_status` for the lights
//!    showing "listening" and the virtual speaker's WAV for its first new
//!    bytes (the chime reaching ALSA). The daemon's own log (at debug for
//!    the board) gives where the time goes: the button classifier's
//!    debounce (`board.debounce_ms`, 30 ms, part of every press on real
//!    hardware too), then the press to the lights. Each press is a tap into
//!    silence: the microphone closes again after `inbox.listen_seconds`.
//! 2. **Inbox delivery.** An agent waits in `wait_for_person` over TCP; the
//!    person taps and speaks a sentence (espeak-ng, injected into the
//!    virtual microphone). The time from the end of the transcription (the
//!    message's `transcribed_at`, taken the moment whisper returns) to the
//!    agent reading the result off its socket: keeping the message
//!    (SQLite, `synchronous = FULL`), handing it over, the JSON-RPC reply.
//!    The whole turn (end of the spoken sentence to the result) is shown
//!    beside it; most of it is the detector's hang-over and whisper.
//!
//! No peer has this path (VoiceMode, the desktop servers and the Home
//! Assistant satellites have no person-initiated message for an agent), so
//! the figures stand against their targets alone.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::{
    daemon::{self, Daemon, Rpc},
    figures::{ms, row},
    host::{Scratch, tidy},
};

/// Targets (docs/benchmarks.md).
const TARGET_PRESS_MS: f64 = 50.0;
const TARGET_DELIVERY_MS: f64 = 5.0;

#[derive(Debug, Args)]
pub struct PersonArgs {
    /// Presses measured.
    #[arg(long, default_value_t = 30)]
    presses: usize,
    /// Messages measured.
    #[arg(long, default_value_t = 10)]
    messages: usize,
    /// The hark binary to start (`cargo build --release -p hark`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/hark"))]
    hark: PathBuf,
    /// The model store with tiny.en q8_0 (made by `tests/run`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store"))]
    models_dir: PathBuf,
}

/// One press, in milliseconds from the contact closing.
#[derive(Debug, Clone, Copy)]
struct Press {
    /// The debounced press, from the daemon's log.
    debounced: Option<f64>,
    /// The daemon set the listening light, from its log.
    lights_set: Option<f64>,
    /// `get_status` shows the listening light.
    lights_seen: f64,
    /// The playback thread started writing the chime to ALSA (the
    /// `speaker` event, from the daemon's log).
    chime_written: Option<f64>,
    /// The chime's first samples in the virtual speaker's WAV file.
    chime: f64,
}

/// One message, in milliseconds.
#[derive(Debug, Clone)]
struct Delivery {
    /// From the end of the transcription to the agent's socket.
    delivery: f64,
    /// From the end of the spoken sentence to the agent's socket.
    turn: f64,
    text: String,
}

pub fn main(args: PersonArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.presses > 0 && args.messages > 0,
        "--presses and --messages must be at least 1"
    );
    let scratch = Scratch::new()?;
    let dir = scratch.0.join("daemon");
    let extra = [
        // Nothing needs a voice: the chime is the player's own.
        "[tts]".to_owned(),
        "enabled = false".to_owned(),
        "[inbox]".to_owned(),
        "listen_seconds = 1.0".to_owned(),
    ];
    let (daemon, mut status) = daemon::start_listening(
        &tidy(&args.hark),
        &tidy(&args.models_dir),
        &dir,
        "info,hark_room::board=debug,hark_room::conductor=debug,hark_core::events=debug",
        &extra,
    )?;
    let mut board = Rpc::unix(&daemon.unix(), "hark-bench hand")?;
    let speaker = dir.join("speaker.wav");

    eprintln!("[person] {} presses", args.presses);
    let mut presses = Vec::new();
    for round in 0..=args.presses {
        let press = press(&daemon, &mut board, &mut status, &speaker)
            .with_context(|| format!("press {round}"))?;
        // The first press warms the earcon's resampler and the log file.
        if round > 0 {
            presses.push(press);
        }
    }

    eprintln!("[person] {} messages", args.messages);
    let sentences = [
        "What is the weather going to be like tomorrow morning?",
        "The meeting has been moved to Thursday afternoon.",
        "Open the garage door and switch on the heating.",
    ];
    let mut wavs = Vec::new();
    for (i, sentence) in sentences.iter().enumerate() {
        let wav = dir.join(format!("message-{i}.wav"));
        let spoken = Command::new("espeak-ng")
            .arg("-w")
            .arg(&wav)
            .arg(sentence)
            .status()
            .context("cannot run espeak-ng")?;
        anyhow::ensure!(spoken.success(), "espeak-ng failed: {spoken}");
        wavs.push(wav);
    }
    let mut agent = Rpc::tcp(daemon.tcp, "hark-bench agent")?;
    let mut deliveries = Vec::new();
    for round in 0..args.messages {
        let wav = &wavs[round % wavs.len()];
        deliveries.push(
            deliver(&daemon, &mut board, &mut status, &mut agent, wav)
                .with_context(|| format!("message {round}"))?,
        );
    }
    drop((board, status, agent));
    daemon.stop()?;
    print!("{}", report(&presses, &deliveries, &args));
    Ok(())
}

fn lights(status: &Value) -> &str {
    status["subsystems"]["board"]
        .as_str()
        .and_then(|b| b.split("lights: ").nth(1))
        .and_then(|l| l.split(';').next())
        .unwrap_or("")
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn quiet(status: &mut Rpc) -> anyhow::Result<()> {
    status
        .wait_status("the appliance going quiet", Duration::from_secs(30), |s| {
            lights(s) == "idle" && s["speaking"] == false
        })
        .map(|_| ())
}

fn press(
    daemon: &Daemon,
    board: &mut Rpc,
    status: &mut Rpc,
    speaker: &Path,
) -> anyhow::Result<Press> {
    quiet(status)?;
    std::thread::sleep(Duration::from_millis(200));
    let before = size(speaker);
    let wall = SystemTime::now();
    let at = Instant::now();
    board.request("hark/board", json!({"button": "hold"}))?;
    let (mut lights_seen, mut chime) = (None, None);
    while lights_seen.is_none() || chime.is_none() {
        if chime.is_none() && size(speaker) > before {
            chime = Some(ms(at.elapsed()));
        }
        if lights_seen.is_none() {
            let now = status.call("get_status", json!({}))?;
            if lights(&now["structuredContent"]) == "listening" {
                lights_seen = Some(ms(at.elapsed()));
            }
        }
        if at.elapsed() > Duration::from_secs(5) {
            bail!("no light ({lights_seen:?}) or chime ({chime:?}) within 5 s");
        }
    }
    // A tap: the recording waits for speech, hears none, and closes.
    board.request("hark/board", json!({"button": "release"}))?;
    let since = |t: Option<SystemTime>| t.and_then(|t| t.duration_since(wall).ok()).map(ms);
    let first = |needle: &str| daemon.logged(needle, wall).first().copied();
    let debounced = since(first("board event event=Button(Press)"));
    let lights_set = since(first("lights status=listening"));
    let chime_written = since(first("Speaker { playing: true }"));
    Ok(Press {
        debounced,
        lights_set,
        chime_written,
        lights_seen: lights_seen.unwrap_or(f64::NAN),
        chime: chime.unwrap_or(f64::NAN),
    })
}

fn deliver(
    daemon: &Daemon,
    board: &mut Rpc,
    status: &mut Rpc,
    agent: &mut Rpc,
    wav: &Path,
) -> anyhow::Result<Delivery> {
    quiet(status)?;
    let id = agent.start(
        "tools/call",
        json!({"name": "wait_for_person", "arguments": {"timeout_seconds": 60}}),
    )?;
    status.wait_status("the agent waiting", Duration::from_secs(10), |s| {
        s["subsystems"]["inbox"]
            .as_str()
            .is_some_and(|i| i.contains("1 agent(s) waiting"))
    })?;
    board.request("hark/board", json!({"button": "press"}))?;
    status.wait_status("the chime after the press", Duration::from_secs(5), |s| {
        lights(s) == "listening" && s["speaking"] == false
    })?;
    let clip = hound::WavReader::open(wav)
        .map(|r| r.duration() as f64 / f64::from(r.spec().sample_rate))
        .with_context(|| format!("cannot read {}", wav.display()))?;
    let injected = Instant::now();
    daemon.inject(wav)?;
    let result = agent.answer(id)?;
    let received = SystemTime::now();
    let turn = ms(injected.elapsed()) - clip * 1000.0;
    let message = &result["structuredContent"]["message"];
    let transcribed = message["transcribed_at"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .with_context(|| format!("no transcribed_at in {result}"))?;
    let delivery = received
        .duration_since(transcribed)
        .map(ms)
        .context("the message was received before it was transcribed?")?;
    Ok(Delivery {
        delivery,
        turn,
        text: message["text"].as_str().unwrap_or("").to_owned(),
    })
}

fn report(presses: &[Press], deliveries: &[Delivery], args: &PersonArgs) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### The person starts — {}\n\n{}\n",
        humantime::format_rfc3339_seconds(SystemTime::now()),
        crate::host::machine()
    );
    let _ = writeln!(
        out,
        "{} presses (taps into silence) and {} messages, `hark-bench person`, release build, virtual sound card, simulated board.\n",
        args.presses, args.messages
    );
    let _ = writeln!(
        out,
        "| from the contact closing, ms | median | p95 | max | target |\n|---|---|---|---|---|"
    );
    let pick =
        |f: fn(&Press) -> Option<f64>| -> Vec<f64> { presses.iter().filter_map(f).collect() };
    row(
        &mut out,
        "debounced press (`board.debounce_ms` = 30)",
        &pick(|p| p.debounced),
        1,
        None,
    );
    row(
        &mut out,
        "listening light set (daemon's log)",
        &pick(|p| p.lights_set),
        1,
        None,
    );
    row(
        &mut out,
        "listening light in `get_status`",
        &pick(|p| Some(p.lights_seen)),
        1,
        Some(TARGET_PRESS_MS),
    );
    row(
        &mut out,
        "chime's first period written to ALSA (daemon's log)",
        &pick(|p| p.chime_written),
        1,
        Some(TARGET_PRESS_MS),
    );
    row(
        &mut out,
        "chime's first samples in the virtual speaker's WAV",
        &pick(|p| Some(p.chime)),
        1,
        None,
    );
    let after_debounce: Vec<f64> = presses
        .iter()
        .filter_map(|p| Some(p.lights_set? - p.debounced?))
        .collect();
    row(
        &mut out,
        "debounced press → light set",
        &after_debounce,
        1,
        None,
    );
    let _ = writeln!(
        out,
        "\n| message, ms | median | p95 | max | target |\n|---|---|---|---|---|"
    );
    let delivery: Vec<f64> = deliveries.iter().map(|d| d.delivery).collect();
    let turn: Vec<f64> = deliveries.iter().map(|d| d.turn).collect();
    row(
        &mut out,
        "end of transcription → the waiting agent",
        &delivery,
        1,
        Some(TARGET_DELIVERY_MS),
    );
    row(
        &mut out,
        "end of the spoken sentence → the waiting agent",
        &turn,
        1,
        None,
    );
    let heard: std::collections::BTreeSet<&str> =
        deliveries.iter().map(|d| d.text.as_str()).collect();
    let _ = writeln!(
        out,
        "\nHeard (each sentence, as the agents received it): {}",
        heard.into_iter().collect::<Vec<_>>().join(" / ")
    );
    out
}
