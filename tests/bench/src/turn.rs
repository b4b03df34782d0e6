//! `hark-bench turn`: the turn's latency — from the true end of speech to
//! the transcript at an MCP client — on the real daemon (release build,
//! virtual sound card), for four pipelines in one run, in turns:
//!
//! - **Hark live**: Moonshine tiny-en for the microphone, Smart Turn at
//!   each pause (from 150 ms of silence), the final pass started at the pause
//!   (`stt.speculative`), partial transcripts on.
//! - **Hark default**: whisper tiny.en q8_0 and the 800 ms silence rule,
//!   the final pass started at the first 150 ms pause.
//! - **Hark whisper + silence**: the appliance as it was before — the
//!   same, with nothing ahead of the end.
//! - **Peer: silence, then faster-whisper int8**: the same silence rule
//!   (the recording's end is the whisper daemon's, from its log, in the same
//!   round), then faster-whisper (CTranslate2 int8, the same tiny.en, beam
//!   5, 2 threads) transcribing the clip in a process of its own
//!   (`stt_peers.py serve`), asked right after that turn. That is how the
//!   desktop voice servers and the satellites' pipelines work: wait for a
//!   fixed silence, then decode.
//!
//! The clips are spoken by the appliance's own piper voice (`hark say
//! --out` on the live daemon, which also loads the voice there for the
//! memory figure): utterances of 1–10 s, and a pause set — sentences with
//! a 700 ms pause in the middle of a clause, where a turn must not end. The
//! bench writes each clip into the daemon's inject FIFO itself; the true
//! end of speech is the moment of that write plus the offset of the clip's
//! last 10 ms above −40 dBFS (the virtual microphone plays it out in real
//! time from the write; the card's period of buffering counts against Hark,
//! as a real microphone's would). A turn is a `transcribe_voice` call; its
//! latency ends when the answer is read off the socket.
//!
//! With `--real`, the clips are recorded people instead: the real-speech
//! set's pooled English clips (`tests/.speech`), once each, their true end
//! of speech from the set's word timings where it has them; no pause set.
//!
//! Also: the live daemon's peak memory (VmHWM) with whisper, Moonshine,
//! Smart Turn and one voice loaded and used; and the time from
//! `speak_text` to the reply's first sound in the virtual speaker's file.

use std::{
    fmt::Write as _,
    io::{BufRead, BufReader, Write},
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::{
    audio::signal::{true_end, true_start},
    daemon::{self, Daemon, Rpc},
    figures::{ms, percentile},
    host::{Scratch, tidy},
    speech, stt,
};

/// Targets (docs/benchmarks.md): the spoken utterances' median turn, and
/// recorded people's (every turn, the live path's defaults).
const TARGET_MEDIAN_MS: f64 = 250.0;
const TARGET_REAL_MEDIAN_MS: f64 = 400.0;
const TARGET_PEAK_MIB: f64 = 400.0;

#[derive(Debug, Args)]
pub struct TurnArgs {
    /// Rounds: each clip spoken once to each system per round, the order
    /// of the systems rotating; each round has a take of its own of every
    /// clip.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The hark binary (`cargo build --release -p hark`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/hark"))]
    hark: PathBuf,
    /// The model store with tiny.en q8_0 (made by `tests/run`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store"))]
    models_dir: PathBuf,
    /// Smart Turn v3.2 (`bash tests/setup.sh` unpacks it).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/smart-turn/smart-turn-v3.2-cpu.onnx"))]
    smart_turn: PathBuf,
    /// The voices directory and ONNX Runtime (`appliance/setup-voices`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.voices/voices"))]
    voices: PathBuf,
    #[command(flatten)]
    live: stt::LivePaths,
    #[command(flatten)]
    peers: stt::PeerVenv,
    #[command(flatten)]
    peer: PeerSettings,
    /// The pause inside the pause set's sentences, ms.
    #[arg(long, default_value_t = 700)]
    pause_ms: u64,
    /// `speak_text` calls timed for the first sound.
    #[arg(long, default_value_t = 10)]
    replies: usize,
    /// The daemons' log level (their logs stay in the scratch directory
    /// with `--keep`).
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Keep the scratch directory (clips, configs, logs) and print where.
    #[arg(long)]
    keep: bool,
    /// Recorded people instead of the piper voice: the real-speech set's
    /// English turns, every source capped to `--per-source`, once each (no
    /// pause set; `--rounds` is 1).
    #[arg(long)]
    real: bool,
    /// With `--real`, at most this many turns from each source.
    #[arg(long, default_value_t = 8)]
    per_source: usize,
    #[command(flatten)]
    speech: crate::speech::SpeechDir,
}

/// Utterances of about 1 to 10 s, without digits (WER compares words).
pub const UTTERANCES: [&str; 8] = [
    "Turn on the lights.",
    "What time is it in Tokyo?",
    "Please remind me to call my mother tomorrow morning.",
    "Can you read me the last message from the team about the release?",
    "The meeting has been moved to Thursday afternoon, so please tell everyone before lunch.",
    "I would like a summary of the report on the quarterly budget, and then send it to Anna and David.",
    "Find the cheapest flight to Lisbon next weekend, book a window seat, and add the trip to my calendar.",
    "When you have a moment, could you look through the notes from yesterday's design review and tell me which \
     questions are still open, and who said they would answer them?",
];

/// The pause set: a sentence cut in the middle of a clause, where people
/// stop to think; the turn goes on after the pause.
pub const PAUSED: [(&str, &str); 6] = [
    (
        "So I was thinking that we could",
        "go to the park on Saturday morning.",
    ),
    ("Send a message to", "Sarah saying that I will be late."),
    (
        "I need to buy some milk and",
        "a loaf of bread on the way home.",
    ),
    (
        "The thing I wanted to ask you about is",
        "whether the report is finished.",
    ),
    (
        "Can you find the email from",
        "the landlord about the heating?",
    ),
    (
        "Book a table for two at",
        "the Italian place near the station.",
    ),
];

const LIVE: &str = "Hark live: Moonshine + Smart Turn, early final pass";
const DEFAULT: &str = "Hark default: whisper + silence, early final pass";
const WHISPER: &str = "Hark whisper + silence (before)";
const PEER: &str = "Peer: silence, then faster-whisper int8";

struct Clip {
    text: String,
    /// Capture-format bytes (16 kHz mono S16_LE) for the inject FIFO.
    bytes: Vec<u8>,
    /// The same, as a file for the peer.
    raw: PathBuf,
    /// Offset of the true end of speech in the clip.
    end: Duration,
    /// Pause set: where the second part starts.
    resumes: Option<Duration>,
    /// Where speech starts in the clip (the first 10 ms above −40 dBFS).
    start: Duration,
    /// A recorded person's clip from a held-out source (`--real`).
    held_out: bool,
}

impl Clip {
    fn seconds(&self) -> f64 {
        self.end.as_secs_f64()
    }
}

#[derive(Debug, Clone, Default)]
struct Turn {
    latency_ms: f64,
    /// When the recording ended, from the true end of speech (the log).
    recorded_ms: f64,
    text: String,
    end_reason: String,
    speculative: bool,
    /// Pause set: the recording ended before the second part began.
    cut: bool,
    /// The daemon's own transcription time (`transcribe_ms`).
    transcribe_ms: Option<f64>,
    /// The listen ended before the person did, and what they said next
    /// came back as its continuation (in `text`).
    continued: bool,
}

struct System {
    name: &'static str,
    daemon: Daemon,
    rpc: Rpc,
    status: Rpc,
}

pub fn main(args: TurnArgs) -> anyhow::Result<()> {
    let mut scratch = Scratch::new()?;
    let base = [
        "[tts]".to_owned(),
        format!("voices_dir = {}", daemon::toml_str(&tidy(&args.voices))),
        format!(
            "onnxruntime = {}",
            daemon::toml_str(&tidy(&args.live.onnxruntime))
        ),
    ];
    let live_extra = [
        "[stt]".to_owned(),
        format!(
            "live_model = {}",
            daemon::toml_str(&tidy(&args.live.moonshine))
        ),
        format!("turn_model = {}", daemon::toml_str(&tidy(&args.smart_turn))),
        "speculative = true".to_owned(),
        "[audio.vad]".to_owned(),
        "end_of_turn = \"smart-turn\"".to_owned(),
    ];
    let whisper_extra = [
        "[stt]".to_owned(),
        "speculative = false".to_owned(),
        "partial_ms = 0".to_owned(),
    ];
    let default_extra: [String; 0] = [];
    let start = |name: &'static str, dir: &str, extra: &[String]| -> anyhow::Result<System> {
        let lines: Vec<String> = extra.iter().chain(base.iter()).cloned().collect();
        let (daemon, status) = daemon::start_listening(
            &tidy(&args.hark),
            &tidy(&args.models_dir),
            &scratch.0.join(dir),
            &args.log_level,
            &lines,
        )?;
        let rpc = Rpc::tcp(daemon.tcp, "hark-bench agent")?;
        Ok(System {
            name,
            daemon,
            rpc,
            status,
        })
    };
    eprintln!("[turn] starting the daemons");
    let mut live = start(LIVE, "live", &live_extra)?;
    let stt_line = live.daemon.wait_stt(&mut live.status)?;
    anyhow::ensure!(
        stt_line.contains("live: ready") && stt_line.contains("end of turn: smart-turn"),
        "the live daemon has no live engine or end-of-turn model: {stt_line}"
    );
    let whisper = start(WHISPER, "whisper", &whisper_extra)?;
    let default = start(DEFAULT, "default", &default_extra)?;

    eprintln!("[turn] speaking the clips with the live daemon's voice, a take a round");
    let clips_dir = scratch.0.join("clips");
    std::fs::create_dir_all(&clips_dir)?;
    // A take of every clip for each round: piper speaks each take a little
    // differently (a comma's pause, the fall at the end), and whether the
    // end-of-turn rule cuts a sentence at a comma depends on the take.
    let mut takes = Vec::new();
    let rounds = if args.real {
        takes.push((real_clips(&args, &clips_dir)?, Vec::new()));
        0
    } else {
        args.rounds.max(1)
    };
    for round in 0..rounds {
        let mut clips = Vec::new();
        for (i, text) in UTTERANCES.iter().enumerate() {
            clips.push(spoken(
                &live.daemon,
                &clips_dir,
                &format!("u{i}-{round}"),
                text,
                None,
            )?);
        }
        let mut paused = Vec::new();
        for (i, (first, second)) in PAUSED.iter().enumerate() {
            let pause = Duration::from_millis(args.pause_ms);
            paused.push(spoken(
                &live.daemon,
                &clips_dir,
                &format!("p{i}-{round}"),
                first,
                Some((second, pause)),
            )?);
        }
        takes.push((clips, paused));
    }
    // The first round's takes stand for the clips in the report (the
    // texts are the same; the lengths differ by tens of ms).
    let (clips, paused) = &takes[0];

    let mut peer = args.peer.start(&args.peers, &args.live.ct2)?;

    let mut systems = [live, default, whisper];
    // [system][clip] → turns; the peer's per clip.
    let mut turns: Vec<Vec<Vec<Turn>>> = vec![vec![Vec::new(); clips.len()]; systems.len()];
    let mut pause_turns: Vec<Vec<Vec<Turn>>> = vec![vec![Vec::new(); paused.len()]; systems.len()];
    let mut peer_turns: Vec<Vec<Turn>> = vec![Vec::new(); clips.len()];

    // One unmeasured turn each: the first call loads what loads lazily.
    for system in &mut systems {
        let _ = turn(system, &clips[2])?;
    }
    for (round, (clips, paused)) in takes.iter().enumerate() {
        eprintln!("[turn] round {} of {}", round + 1, takes.len());
        for (c, clip) in clips.iter().enumerate() {
            for k in 0..systems.len() {
                let s = (k + round + c) % systems.len();
                let t = turn(&mut systems[s], clip)?;
                if systems[s].name == WHISPER
                    && let Some(peer) = peer.as_mut()
                {
                    let (ms, text) = peer.transcribe(&clip.raw)?;
                    peer_turns[c].push(Turn {
                        latency_ms: t.recorded_ms + ms,
                        recorded_ms: t.recorded_ms,
                        text,
                        end_reason: t.end_reason.clone(),
                        ..Turn::default()
                    });
                }
                turns[s][c].push(t);
            }
        }
        for (c, clip) in paused.iter().enumerate() {
            for k in 0..systems.len() {
                let s = (k + round + c) % systems.len();
                pause_turns[s][c].push(turn(&mut systems[s], clip)?);
            }
        }
    }

    // The live engine alone on every take's whole clip, in this process
    // (nothing else running): what it hears when no rule cuts the turn
    // and the clip is not cut to the detected speech.
    eprintln!("[turn] Moonshine alone on the whole clips");
    let runtime = hark_onnx::OnnxRuntime::load(&tidy(&args.live.onnxruntime))?;
    let mut moonshine =
        hark_stt::moonshine::Moonshine::load(&runtime, &tidy(&args.live.moonshine), 1)?;
    let mut alone: Vec<Vec<Turn>> = vec![Vec::new(); clips.len()];
    for (takes, _) in &takes {
        for (c, clip) in takes.iter().enumerate() {
            let audio = crate::audio::signal::from_s16_le(&clip.bytes);
            let started = std::time::Instant::now();
            let heard = moonshine.transcribe(&audio)?;
            alone[c].push(Turn {
                latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                text: heard.text,
                ..Turn::default()
            });
        }
    }

    eprintln!("[turn] first sound of speak_text");
    let first_sound = replies(&mut systems[0], args.replies)?;
    let memory = systems[0].daemon.memory()?;
    let default_memory = systems[1].daemon.memory()?;
    let mut names: Vec<&str> = systems.iter().map(|s| s.name).collect();
    let mut all = turns;
    if peer.is_some() {
        names.push(PEER);
        all.push(peer_turns);
    }
    let versions = peer.as_mut().map(|p| p.versions.clone());
    println!(
        "{}",
        render(
            &args,
            &names,
            clips,
            &all,
            paused,
            &pause_turns,
            &first_sound,
            (memory.peak_kib, default_memory.peak_kib),
            versions.as_ref(),
        )
    );
    println!(
        "{}",
        misheard(&names, clips, &all, &alone, (paused, &pause_turns))
    );
    for system in systems {
        system.daemon.stop()?;
    }
    if args.keep {
        let kept = std::mem::take(&mut scratch.0);
        let sets = [("utterances", &all[..]), ("pause set", &pause_turns[..])];
        std::fs::write(kept.join("turns.tsv"), takes_table(&names, &sets))?;
        eprintln!("[turn] kept {}", kept.display());
    }
    Ok(())
}

/// Every take of every system, a line each (tab-separated), for a look
/// behind the medians: which takes were slow, and where their time went.
fn takes_table(names: &[&str], sets: &[(&str, &[Vec<Vec<Turn>>])]) -> String {
    let mut out = String::from(
        "system\tset\tclip\tround\tlatency_ms\trecorded_ms\ttranscribe_ms\tend_reason\tspeculative\tcut\ttext\n",
    );
    for (set, systems) in sets {
        for (name, clips) in names.iter().zip(systems.iter()) {
            for (c, takes) in clips.iter().enumerate() {
                for (round, t) in takes.iter().enumerate() {
                    out.push_str(&format!(
                        "{name}\t{set}\t{}\t{}\t{:.0}\t{:.0}\t{}\t{}\t{}\t{}\t{}\n",
                        c + 1,
                        round + 1,
                        t.latency_ms,
                        t.recorded_ms,
                        t.transcribe_ms
                            .map_or(String::new(), |ms| format!("{ms:.0}")),
                        t.end_reason,
                        t.speculative,
                        t.cut,
                        t.text,
                    ));
                }
            }
        }
    }
    out
}

/// Has the daemon speak `text` (and, for the pause set, a pause and
/// `then`) into a WAV file; the clip in the capture format with its true
/// end.
fn spoken(
    daemon: &Daemon,
    dir: &Path,
    name: &str,
    text: &str,
    then: Option<(&str, Duration)>,
) -> anyhow::Result<Clip> {
    let say = |text: &str, out: &Path| -> anyhow::Result<Vec<f32>> {
        let host = daemon.tcp.to_string();
        daemon.cli(
            "say",
            [
                std::ffi::OsStr::new("--out"),
                out.as_os_str(),
                text.as_ref(),
                "--host".as_ref(),
                host.as_ref(),
            ],
        )?;
        let clip = hark_audio::clip::Clip::read_wav(out)
            .and_then(|c| c.resampled(16_000))
            .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
        Ok(clip.samples)
    };
    let mut resumes = None;
    let mut full_text = text.to_owned();
    let samples = match then {
        None => say(text, &dir.join(format!("{name}.wav")))?,
        Some((second, pause)) => {
            // One sentence with a comma where the person stops to think:
            // the voice's intonation carries on over it, as a person's
            // does, and the comma's own silence is then drawn out to
            // `pause`.
            full_text = format!("{text} {second}");
            let samples = say(
                &format!("{text}, {second}"),
                &dir.join(format!("{name}.wav")),
            )?;
            let (from, to) = longest_gap(&samples)
                .with_context(|| format!("no pause found in {name}: {full_text}"))?;
            let silence = (pause.as_secs_f64() * 16_000.0) as usize;
            let mut out = samples[..from].to_vec();
            out.extend(std::iter::repeat_n(0.0, silence.max(to - from)));
            resumes = Some(Duration::from_secs_f64(out.len() as f64 / 16_000.0));
            out.extend_from_slice(&samples[to..]);
            out
        }
    };
    let end = Duration::from_secs_f64(true_end(&samples) as f64 / 16_000.0);
    let start = Duration::from_secs_f64(true_start(&samples) as f64 / 16_000.0);
    let bytes = hark_audio::clip::Clip {
        samples,
        rate: 16_000,
    }
    .to_s16_le(1);
    let raw = dir.join(format!("{name}.raw"));
    std::fs::write(&raw, &bytes)?;
    Ok(Clip {
        text: full_text,
        bytes,
        raw,
        end,
        resumes,
        start,
        held_out: false,
    })
}

/// The real-speech set's English turns (`--real`), every source capped to
/// `--per-source` as `hark-bench eot` takes them: the true end of speech
/// from the set's word timings where it has them, else the audio.
fn real_clips(args: &TurnArgs, dir: &Path) -> anyhow::Result<Vec<Clip>> {
    let mut clips = Vec::new();
    let all = speech::load(&tidy(&args.speech.speech))?;
    for clip in speech::capped(&all, args.per_source) {
        let samples = clip.samples;
        let end = if clip.speech.1 > 0.0 {
            Duration::from_secs_f64(clip.speech.1)
        } else {
            Duration::from_secs_f64(true_end(&samples) as f64 / 16_000.0)
        };
        let start = Duration::from_secs_f64(true_start(&samples) as f64 / 16_000.0);
        let bytes = hark_audio::clip::Clip {
            samples,
            rate: 16_000,
        }
        .to_s16_le(1);
        let raw = dir.join(format!("{}.raw", clip.id));
        std::fs::write(&raw, &bytes)?;
        clips.push(Clip {
            text: clip.text,
            bytes,
            raw,
            end,
            resumes: None,
            start,
            held_out: speech::held_out(&clip.group),
        });
    }
    anyhow::ensure!(
        !clips.is_empty(),
        "the real-speech set has no pooled English clips"
    );
    Ok(clips)
}

/// The longest quiet stretch (10 ms windows under −40 dBFS) between the
/// first and the last loud window: the comma's pause, as sample offsets.
fn longest_gap(samples: &[f32]) -> Option<(usize, usize)> {
    let window = 160;
    let loud: Vec<bool> = samples
        .chunks(window)
        .map(|w| (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt() > 0.01)
        .collect();
    let first = loud.iter().position(|l| *l)?;
    let last = loud.iter().rposition(|l| *l)?;
    let mut best: Option<(usize, usize)> = None;
    let mut run = None;
    for (i, l) in loud.iter().enumerate().take(last + 1).skip(first) {
        match (l, run) {
            (false, None) => run = Some(i),
            (true, Some(start)) => {
                if best.is_none_or(|(a, b)| i - start > b - a) {
                    best = Some((start, i));
                }
                run = None;
            }
            _ => {}
        }
    }
    best.map(|(a, b)| (a * window, b * window))
}

/// One turn: listen, speak the clip into the microphone, read the answer.
fn turn(system: &mut System, clip: &Clip) -> anyhow::Result<Turn> {
    let id = system.rpc.start(
        "tools/call",
        json!({"name": "transcribe_voice", "arguments": {"timeout_seconds": 15}}),
    )?;
    system
        .status
        .wait_status("the microphone opening", Duration::from_secs(20), |s| {
            s["recording"] == true
        })?;
    let path = system.daemon.dir.join("run").join("inject.fifo");
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(0o4000) // O_NONBLOCK: no reader is an error, not a hang
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let written = SystemTime::now();
    let mut sent = 0;
    while sent < clip.bytes.len() {
        match fifo.write(&clip.bytes[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e).context("writing the clip"),
        }
    }
    drop(fifo);
    let result = system.rpc.answer(id)?;
    let answered = SystemTime::now();
    let truth = written + clip.end;
    let since = |t: SystemTime| match t.duration_since(truth) {
        Ok(d) => ms(d),
        Err(e) => -ms(e.duration()),
    };
    let recorded = system
        .daemon
        .logged("utterance recorded", written)
        .into_iter()
        .next()
        .context("no `utterance recorded` in the daemon's log")?;
    let s = &result["structuredContent"];
    anyhow::ensure!(
        result["isError"] != true,
        "{}: transcribe_voice failed: {result}",
        system.name
    );
    let mut turn = Turn {
        continued: false,
        latency_ms: since(answered),
        recorded_ms: since(recorded),
        text: s["text"].as_str().unwrap_or_default().to_owned(),
        end_reason: s["end_reason"].as_str().unwrap_or_default().to_owned(),
        speculative: s["speculative"] == true,
        transcribe_ms: s["transcribe_ms"].as_f64(),
        // In the audio, not on the clock (the capture path's latency would
        // count a recording that ended inside the pause as one that did
        // not): the speech the daemon kept is shorter than the clip's
        // speech up to the second part.
        cut: clip.resumes.is_some_and(|at| {
            let kept =
                s["speech_end"].as_f64().unwrap_or(0.0) - s["speech_start"].as_f64().unwrap_or(0.0);
            kept < (at - clip.start).as_secs_f64()
        }),
    };
    // The listen-stop chime and the lights: quiet before the next turn.
    system
        .status
        .wait_status("the appliance going quiet", Duration::from_secs(30), |s| {
            s["recording"] == false && s["speaking"] == false
        })?;
    // A turn whose recording ended while the clip still played: what the
    // person says after it, within the window to go on
    // (`audio.vad.continue_ms`), is kept for this agent and its next
    // listen returns it at once. The window hears the ring from where the
    // recording ended, however late the answer came. Collected here, as
    // the rest of this turn, so the next clip's listen hears the next
    // clip; its words join the turn's.
    let played = written + Duration::from_secs_f64(clip.bytes.len() as f64 / 32_000.0);
    if recorded < played && went_on(system, recorded) {
        // Cut again, the rest comes in pieces, one listen each.
        loop {
            let rest = system
                .rpc
                .call("transcribe_voice", json!({"timeout_seconds": 15}))?;
            let r = &rest["structuredContent"];
            anyhow::ensure!(
                rest["isError"] != true && r["continuation"] == true,
                "{}: the rest of a cut turn did not come back as its continuation: {rest}",
                system.name
            );
            let words = r["text"].as_str().unwrap_or_default();
            turn.text = format!("{} {words}", turn.text).trim().to_owned();
            turn.continued = true;
            let now = system.status.call("get_status", json!({}))?;
            if now["structuredContent"]["messages_waiting"].as_u64() == Some(0) {
                break;
            }
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    Ok(turn)
}

/// Whether the person went on after the recording that ended at
/// `recorded`: the daemon says so when it keeps what they added. The
/// window's own recording (one no listen asked for) with speech in it says
/// a rest is coming, however its transcription and the next window's
/// timeout are ordered in the log; a window that closed with nothing heard
/// (its timeout, no speech) and no such recording says there is none. A
/// rest transcribed to nothing says neither, and after a minute that is
/// taken as nothing.
fn went_on(system: &System, recorded: SystemTime) -> bool {
    let log = |needle: &str| !system.daemon.logged(needle, recorded).is_empty();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if log("the person went on after the turn ended") {
            return true;
        }
        let rest = !system
            .daemon
            .logged_where(
                |l| {
                    l.contains("utterance recorded")
                        && l.contains("speech=Some")
                        && !l.contains("tool=transcribe_voice")
                },
                recorded,
            )
            .is_empty();
        if !rest && log("reason=timeout speech=None") {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// `speak_text` of a typical reply to its first samples in the virtual
/// speaker's file, `n` times.
fn replies(system: &mut System, n: usize) -> anyhow::Result<Vec<f64>> {
    let speaker = system.daemon.dir.join("speaker.wav");
    let size = || std::fs::metadata(&speaker).map_or(0, |m| m.len());
    let mut times = Vec::new();
    for i in 0..=n {
        let before = size();
        let started = Instant::now();
        let id = system.rpc.start(
            "tools/call",
            json!({"name": "speak_text", "arguments": {
                "text": "Sure, I moved the meeting to Thursday afternoon and told the team. Anything else?",
                "wait": false,
            }}),
        )?;
        let first = loop {
            if size() > before {
                break started.elapsed();
            }
            if started.elapsed() > Duration::from_secs(20) {
                bail!("no sound within 20 s of speak_text");
            }
            std::thread::sleep(Duration::from_micros(500));
        };
        system.rpc.answer(id)?;
        system
            .status
            .wait_status("the speech ending", Duration::from_secs(60), |s| {
                s["speaking"] == false
            })?;
        // The first reply loads the voice's working memory.
        if i > 0 {
            times.push(ms(first));
        }
    }
    Ok(times)
}

/// faster-whisper in a process of its own, asked one clip at a time.
pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    versions: Value,
}

/// faster-whisper beside Hark in a bench that asks Hark over MCP (`turn`,
/// `files`).
#[derive(Debug, Args)]
pub struct PeerSettings {
    /// Threads and beam width for faster-whisper (Hark's whisper: 2 and 5).
    #[arg(long, default_value_t = 2)]
    pub threads: u16,
    #[arg(long, default_value_t = 5)]
    pub beam: u8,
    /// Skip faster-whisper.
    #[arg(long)]
    pub no_peer: bool,
}

impl PeerSettings {
    /// faster-whisper on the CTranslate2 folder `ct2`, started; `None` with
    /// `--no-peer`.
    pub fn start(&self, venv: &stt::PeerVenv, ct2: &Path) -> anyhow::Result<Option<Peer>> {
        if self.no_peer {
            return Ok(None);
        }
        Peer::start(venv, ct2, self.threads, self.beam).map(Some)
    }
}

impl Peer {
    pub fn start(
        peers: &stt::PeerVenv,
        ct2: &Path,
        threads: u16,
        beam: u8,
    ) -> anyhow::Result<Self> {
        let python = peers.python()?;
        let mut child = Command::new(&python)
            .arg(tidy(&peers.peer_script))
            .args(["serve", "--peer", "faster-whisper", "--ct2"])
            .arg(tidy(ct2))
            .args(["--threads", &threads.to_string()])
            .args(["--beam", &beam.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot run stt_peers.py serve")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let ready: Value = serde_json::from_str(&line)
            .with_context(|| format!("stt_peers.py serve said {line:?}"))?;
        anyhow::ensure!(ready["ready"] == true, "stt_peers.py serve: {ready}");
        let versions = Command::new(&python)
            .arg("-c")
            .arg("import importlib.metadata as m; print(m.version('faster-whisper'), m.version('ctranslate2'))")
            .output()
            .map(|o| Value::String(String::from_utf8_lossy(&o.stdout).trim().to_owned()))
            .unwrap_or(Value::Null);
        Ok(Self {
            child,
            stdin,
            stdout,
            versions,
        })
    }

    pub fn transcribe(&mut self, raw: &Path) -> anyhow::Result<(f64, String)> {
        writeln!(self.stdin, "{}", raw.display())?;
        self.stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let answer: Value = serde_json::from_str(&line)
            .with_context(|| format!("stt_peers.py serve said {line:?}"))?;
        if let Some(e) = answer["error"].as_str() {
            bail!("faster-whisper: {e}");
        }
        Ok((
            answer["ms"].as_f64().context("no ms")?,
            answer["text"].as_str().unwrap_or_default().to_owned(),
        ))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The word error rate of a system's turns over `clips`, pooled (all
/// edits over all reference words), in percent.
fn pooled_wer(clips: &[Clip], turns: &[Vec<Turn>]) -> f64 {
    let (mut errors, mut words) = (0, 0);
    for (clip, turns) in clips.iter().zip(turns) {
        for t in turns {
            let (e, n) = stt::word_errors(&clip.text, &t.text);
            errors += e;
            words += n;
        }
    }
    100.0 * errors as f64 / words.max(1) as f64
}

/// Where the words went wrong: each system's turns with errors (clip,
/// round, what was heard), and the live engine alone on the whole clips
/// against each system's pooled WER, so cuts and misreadings can be told
/// apart.
fn misheard(
    names: &[&str],
    clips: &[Clip],
    turns: &[Vec<Vec<Turn>>],
    alone: &[Vec<Turn>],
    (paused, pause_turns): (&[Clip], &[Vec<Vec<Turn>>]),
) -> String {
    let mut out = String::new();
    let alone_ms: Vec<f64> = alone.iter().flatten().map(|t| t.latency_ms).collect();
    let _ = writeln!(
        out,
        "Moonshine tiny-en alone on every take's whole clip (in the bench's process, 1 thread): \
         WER {:.1} %, median {:.0} ms a clip.\n",
        pooled_wer(clips, alone),
        percentile(&alone_ms, 0.5),
    );
    let _ = writeln!(
        out,
        "| system | clip | round | errors | heard |\n|---|--:|--:|--:|---|"
    );
    let utterances = names
        .iter()
        .map(|name| format!("{name}, utterances"))
        .zip(turns.iter().map(Vec::as_slice))
        .chain(std::iter::once((
            "Moonshine alone, whole clip".to_owned(),
            alone,
        )))
        .map(|(name, system)| (name, clips, system));
    let pause_set = names
        .iter()
        .map(|name| format!("{name}, pause set"))
        .zip(pause_turns.iter().map(Vec::as_slice))
        .map(|(name, system)| (name, paused, system));
    for (name, clips, system) in utterances.chain(pause_set) {
        for (c, (clip, turns)) in clips.iter().zip(system).enumerate() {
            for (round, t) in turns.iter().enumerate() {
                let (errors, _) = stt::word_errors(&clip.text, &t.text);
                if errors > 0 {
                    let cut = if t.recorded_ms < 0.0 { " (cut)" } else { "" };
                    let _ = writeln!(
                        out,
                        "| {name} | {} | {} | {errors}{cut} | {} |",
                        c + 1,
                        round + 1,
                        t.text.replace('|', "/"),
                    );
                }
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn render(
    args: &TurnArgs,
    names: &[&str],
    clips: &[Clip],
    turns: &[Vec<Vec<Turn>>],
    paused: &[Clip],
    pause_turns: &[Vec<Vec<Turn>>],
    first_sound: &[f64],
    (peak_kib, default_peak_kib): (u64, u64),
    versions: Option<&Value>,
) -> String {
    let mut out = String::new();
    let about = if args.real {
        format!(
            "Recorded people: {} English turns of the real-speech set, at most {} from each source \
             ({} from held-out sources: {}), once each, {:.1}–{:.1} s of speech; the true end of speech from \
             the set's word timings where it has them; faster-whisper {}.\n",
            clips.len(),
            args.per_source,
            clips.iter().filter(|c| c.held_out).count(),
            speech::HELD_OUT.join(", "),
            clips
                .iter()
                .map(Clip::seconds)
                .fold(f64::INFINITY, f64::min),
            clips.iter().map(Clip::seconds).fold(0.0, f64::max),
            versions.and_then(Value::as_str).unwrap_or("not run"),
        )
    } else {
        format!(
            "{} rounds; {} utterances of {:.1}–{:.1} s and {} with a {} ms pause \
             mid-sentence, spoken by en_US-joe-medium (a take a round; speech s: the first round's); \
             faster-whisper {}.\n",
            args.rounds,
            clips.len(),
            clips
                .iter()
                .map(Clip::seconds)
                .fold(f64::INFINITY, f64::min),
            clips.iter().map(Clip::seconds).fold(0.0, f64::max),
            paused.len(),
            args.pause_ms,
            versions.and_then(Value::as_str).unwrap_or("not run"),
        )
    };
    let _ = writeln!(
        out,
        "### The turn — {}\n\n{}\n\n{about}",
        humantime::format_rfc3339_seconds(SystemTime::now()),
        crate::host::machine(),
    );
    // Per clip: the median latency of each system.
    let _ = write!(out, "| clip | speech s |");
    for name in names {
        let _ = write!(out, " {name} ms |");
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---|--:|{}", "--:|".repeat(names.len()));
    for (c, clip) in clips.iter().enumerate() {
        let _ = write!(out, "| {} | {:.1} |", c + 1, clip.seconds());
        for system in turns {
            let v: Vec<f64> = system[c].iter().map(|t| t.latency_ms).collect();
            let _ = write!(out, " {:.0} |", percentile(&v, 0.5));
        }
        let _ = writeln!(out);
    }
    // Pooled, every turn: the median and tail from the true end of speech
    // to the transcript, the turns cut; the held-out sources apart; WER;
    // how often the early pass was kept. Turns under 5 s last, for the
    // runs before the whole set was the measure.
    let _ = writeln!(
        out,
        "\n| system | median ms | p90 ms | cut before the end (the rest caught as the continuation) | held out: median ms | p90 ms | cut | recording ended after ms (median) | WER % | early pass kept | median < 5 s ms |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let short: Vec<usize> = (0..clips.len())
        .filter(|&c| clips[c].seconds() < 5.0)
        .collect();
    let held: Vec<usize> = (0..clips.len()).filter(|&c| clips[c].held_out).collect();
    let mut medians = Vec::new();
    for (name, system) in names.iter().zip(turns) {
        let pick = |cs: &[usize]| -> Vec<f64> {
            cs.iter()
                .flat_map(|&c| system[c].iter().map(|t| t.latency_ms))
                .collect()
        };
        // The recording ended before the speech did: a sentence cut.
        let cuts = |cs: &[usize]| -> usize {
            cs.iter()
                .flat_map(|&c| system[c].iter())
                .filter(|t| t.recorded_ms < 0.0)
                .count()
        };
        let all: Vec<usize> = (0..clips.len()).collect();
        let (under, every, held_out) = (pick(&short), pick(&all), pick(&held));
        let recorded: Vec<f64> = system.iter().flatten().map(|t| t.recorded_ms).collect();
        let wer = pooled_wer(clips, system);
        let kept = system.iter().flatten().filter(|t| t.speculative).count();
        // Cut turns whose rest reached the agent as the continuation.
        let caught = system
            .iter()
            .flatten()
            .filter(|t| t.recorded_ms < 0.0 && t.continued)
            .count();
        let total = system.iter().flatten().count();
        medians.push(percentile(&every, 0.5));
        let _ = writeln!(
            out,
            "| {name} | {:.0} | {:.0} | {} of {total} ({caught} caught) | {:.0} | {:.0} | {} of {} | {:.0} | {:.1} | {kept} of {total} | {:.0} |",
            percentile(&every, 0.5),
            percentile(&every, 0.9),
            cuts(&all),
            percentile(&held_out, 0.5),
            percentile(&held_out, 0.9),
            cuts(&held),
            held_out.len(),
            percentile(&recorded, 0.5),
            wer,
            percentile(&under, 0.5),
        );
    }
    let target = if args.real {
        TARGET_REAL_MEDIAN_MS
    } else {
        TARGET_MEDIAN_MS
    };
    if let (Some(live), Some(peer)) = (medians.first(), names.iter().position(|n| *n == PEER)) {
        let _ = writeln!(
            out,
            "\nOn every turn, the live path's median is {:.1}× faster than the peer's ({:.0} against {:.0} ms); \
             target median ≤ {target:.0} ms: {}.",
            medians[peer] / live,
            live,
            medians[peer],
            if *live <= target {
                "met"
            } else {
                "**not met**"
            },
        );
    }
    // The pause set.
    let _ = writeln!(
        out,
        "\n| pause set | turns cut at the pause | end reasons | recording ended after the true end ms (median) | WER % |"
    );
    let _ = writeln!(out, "|---|--:|---|--:|--:|");
    for (s, system) in pause_turns.iter().enumerate() {
        let every: Vec<&Turn> = system.iter().flatten().collect();
        let cut = every.iter().filter(|t| t.cut).count();
        let mut reasons: Vec<String> = every.iter().map(|t| t.end_reason.clone()).collect();
        reasons.sort();
        reasons.dedup_by(|a, b| a == b);
        let after: Vec<f64> = every.iter().map(|t| t.recorded_ms).collect();
        let wer = pooled_wer(paused, system);
        let _ = writeln!(
            out,
            "| {} | {cut} of {} | {} | {:.0} | {:.1} |",
            names[s],
            every.len(),
            reasons.join(", "),
            percentile(&after, 0.5),
            wer,
        );
    }
    let _ = writeln!(
        out,
        "\nThe peer uses the same silence rule as Hark whisper + silence, so its pause-set cuts are that row's."
    );
    let peak = peak_kib as f64 / 1024.0;
    let default_peak = default_peak_kib as f64 / 1024.0;
    let _ = writeln!(
        out,
        "\n| other | value | target |\n|---|--:|---|\n\
         | peak RSS of the live daemon (whisper, Moonshine, Smart Turn, one voice; VmHWM) | {peak:.0} MiB | ≤ {TARGET_PEAK_MIB:.0} MiB: {} |\n\
         | peak RSS of the default daemon (whisper, no voice used) | {default_peak:.0} MiB | |\n\
         | speak_text to first sound, median of {} | {:.0} ms | ≤ 200 ms: {} |",
        if peak <= TARGET_PEAK_MIB {
            "met"
        } else {
            "**not met**"
        },
        first_sound.len(),
        percentile(first_sound, 0.5),
        if percentile(first_sound, 0.5) <= 200.0 {
            "met"
        } else {
            "**not met**"
        },
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_true_end_is_the_last_loud_window_and_the_start_the_first() {
        let mut s = vec![0.0f32; 16_000];
        s[8_000..8_100].fill(0.5);
        assert_eq!(true_end(&s), 8_160);
        assert_eq!(true_end(&[0.0; 100]), 0);
        assert_eq!(true_start(&s), 8_000);
    }

    #[test]
    fn the_longest_gap_is_inside_the_speech() {
        let mut s = vec![0.0f32; 16_000];
        s[1_600..3_200].fill(0.5); // 100–200 ms
        s[4_800..6_400].fill(0.5); // a 100 ms gap before
        s[9_600..11_200].fill(0.5); // a 200 ms gap before
        assert_eq!(longest_gap(&s), Some((6_400, 9_600)));
        assert_eq!(longest_gap(&[0.0; 1_000]), None);
    }
}
