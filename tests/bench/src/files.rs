//! Files as an agent transcribes them: `transcribe_audio` over MCP on the
//! real-speech set's English clips, whole, every source capped equally,
//! against faster-whisper (the peer most desktop voice servers run) on the
//! same clips in the same run, interleaved clip by clip.
//!
//! The systems are the daemon as shipped (its default for files), the same
//! daemon asked for other models by name (`--model`), and daemons of their
//! own with other settings (`--config`). Each clip is asked of every system
//! once, the order rotating from clip to clip; one unmeasured call each
//! first. Hark's time is the whole call at the client (the file read,
//! decoded and resampled, the transcription, the reply); the peer's is its
//! `transcribe` call alone, the samples already in memory.
//!
//! The report gives each system's pooled word errors, on the whole capped
//! set and on the held-out split, the median and p90 time a clip and the
//! ratio to the peer's median; then the errors by clip length and by
//! subset, on the sources the rules are chosen on (the held-out split
//! apart), which is what a rule choosing an engine by the audio is shaped
//! by.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    time::Instant,
};

use clap::Args;
use serde_json::{Value, json};

use crate::{
    daemon::{self, Daemon, Rpc},
    figures::percentile,
    host::{Scratch, tidy},
    procfs,
    speech::{self, RealClip},
    stt, turn,
};

#[derive(Debug, Args)]
pub struct FilesArgs {
    #[command(flatten)]
    speech: speech::SpeechDir,
    /// At most this many clips from each source.
    #[arg(long, default_value_t = 8)]
    per_source: usize,
    /// The hark binary (`cargo build --release -p hark`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/release/hark"))]
    hark: PathBuf,
    /// The model store with tiny.en q8_0 (made by `tests/run`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/store"))]
    models_dir: PathBuf,
    /// The voices directory (its ONNX Runtime runs the live engine, named
    /// `moonshine-tiny-en` in the model store as shipped).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.voices/voices"))]
    voices: PathBuf,
    #[command(flatten)]
    live: stt::LivePaths,
    #[command(flatten)]
    peers: stt::PeerVenv,
    /// Also ask the shipped daemon with `model` set to this (repeatable).
    #[arg(long = "model", default_value = "moonshine-tiny-en")]
    models: Vec<String>,
    /// A daemon of its own: `LABEL=LINES`, config lines separated by `;`
    /// added to the shipped ones (`fitted=[stt];fit_audio_ctx = true`).
    #[arg(long = "config")]
    configs: Vec<String>,
    #[command(flatten)]
    peer: turn::PeerSettings,
    /// Write every clip's answers, one JSON object a line, to this file.
    #[arg(long)]
    detail: Option<PathBuf>,
}

/// One clip of the set, as a file every daemon may read.
struct Clip {
    id: String,
    group: String,
    subset: String,
    text: String,
    seconds: f64,
    held_out: bool,
    /// The WAV file's name, in every daemon's own directory.
    wav: String,
    /// Raw S16 for the peer.
    raw: PathBuf,
}

/// What one system made of one clip.
#[derive(Debug, Clone, Default)]
struct Answer {
    errors: usize,
    words: usize,
    ms: f64,
    text: String,
    /// The model the result names.
    model: String,
    /// The result's mean token probability (Hark's; the peer's script
    /// gives none).
    confidence: Option<f64>,
}

enum Asks {
    Hark {
        daemon: usize,
        model: Option<String>,
    },
    Peer,
}

struct System {
    label: String,
    asks: Asks,
}

pub fn main(args: FilesArgs) -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let all = speech::load(&tidy(&args.speech.speech))?;
    let set = speech::capped(&all, args.per_source);
    anyhow::ensure!(!set.is_empty(), "the real-speech set has no English clips");

    // The shipped configuration (image/deb/hark.toml): the live engine
    // named, so `model` can ask for it and a default may choose it.
    let shipped = vec![
        "[stt]".to_owned(),
        "live_model = \"moonshine-tiny-en\"".to_owned(),
        "[tts]".to_owned(),
        format!("voices_dir = {}", daemon::toml_str(&tidy(&args.voices))),
        format!(
            "onnxruntime = {}",
            daemon::toml_str(&tidy(&args.live.onnxruntime))
        ),
    ];
    let mut configs = vec![("shipped".to_owned(), shipped.clone())];
    for c in &args.configs {
        let (label, lines) = c
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--config {c:?}: want LABEL=LINES"))?;
        let mut all = shipped.clone();
        all.extend(lines.split(';').map(|l| l.trim().to_owned()));
        configs.push((label.to_owned(), all));
    }
    let mut daemons: Vec<(Daemon, Rpc)> = Vec::new();
    let mut dirs = Vec::new();
    for (i, (label, lines)) in configs.iter().enumerate() {
        eprintln!("[files] starting the daemon `{label}`");
        let dir = scratch.0.join(format!("d{i}"));
        let (d, mut status) = daemon::start_listening(
            &tidy(&args.hark),
            &tidy(&args.models_dir),
            &dir,
            "warn",
            lines,
        )?;
        let line = d.wait_stt(&mut status)?;
        anyhow::ensure!(
            line.contains("live: ready"),
            "the daemon `{label}` has no live engine: {line}"
        );
        let rpc = Rpc::tcp(d.tcp, "hark-bench files")?;
        daemons.push((d, rpc));
        dirs.push(dir);
    }

    let mut systems = vec![System {
        label: "Hark, default".into(),
        asks: Asks::Hark {
            daemon: 0,
            model: None,
        },
    }];
    for m in &args.models {
        systems.push(System {
            label: format!("Hark, model `{m}`"),
            asks: Asks::Hark {
                daemon: 0,
                model: Some(m.clone()),
            },
        });
    }
    for (i, (label, _)) in configs.iter().enumerate().skip(1) {
        systems.push(System {
            label: format!("Hark, {label}"),
            asks: Asks::Hark {
                daemon: i,
                model: None,
            },
        });
    }
    let mut peer = args.peer.start(&args.peers, &args.live.ct2)?;
    if peer.is_some() {
        systems.push(System {
            label: "faster-whisper tiny.en int8 (peer)".into(),
            asks: Asks::Peer,
        });
    }

    let clips = write_clips(&set, &dirs, &scratch.0)?;
    let load_start = procfs::loadavg();
    let started = Instant::now();
    // One unmeasured call each: models load when first asked.
    for system in &systems {
        ask(system, &clips[0], &mut daemons, peer.as_mut())?;
    }
    let mut answers: Vec<Vec<Answer>> = vec![vec![Answer::default(); clips.len()]; systems.len()];
    for (c, clip) in clips.iter().enumerate() {
        if c % 20 == 0 {
            eprintln!("[files] clip {} of {}", c + 1, clips.len());
        }
        for k in 0..systems.len() {
            let s = (c + k) % systems.len();
            answers[s][c] = ask(&systems[s], clip, &mut daemons, peer.as_mut())?;
        }
    }
    let load = (load_start, procfs::loadavg());
    let took = started.elapsed();
    if let Some(path) = &args.detail {
        detail(path, &clips, &systems, &answers)?;
    }
    for (d, _) in daemons {
        d.stop()?;
    }
    print!(
        "{}",
        report(&args, &clips, &systems, &answers, &load, took.as_secs_f64())
    );
    Ok(())
}

/// Every clip as a WAV file in each daemon's directory (the one it may
/// read from), and as raw samples for the peer.
fn write_clips(set: &[RealClip], dirs: &[PathBuf], scratch: &Path) -> anyhow::Result<Vec<Clip>> {
    let raw_dir = scratch.join("raw");
    std::fs::create_dir_all(&raw_dir)?;
    let mut clips = Vec::new();
    for (i, c) in set.iter().enumerate() {
        let wav = format!("clip-{i}.wav");
        let first = dirs[0].join(&wav);
        speech::write_wav(&first, &c.samples)?;
        for dir in &dirs[1..] {
            std::fs::copy(&first, dir.join(&wav))?;
        }
        let raw = raw_dir.join(format!("clip-{i}.raw"));
        let audio = hark_audio::clip::Clip {
            samples: c.samples.clone(),
            rate: 16_000,
        };
        std::fs::write(&raw, audio.to_s16_le(1))?;
        clips.push(Clip {
            id: c.id.clone(),
            group: c.group.clone(),
            subset: c.subset.clone(),
            text: c.text.clone(),
            seconds: c.samples.len() as f64 / 16_000.0,
            held_out: speech::held_out(&c.group),
            wav,
            raw,
        });
    }
    Ok(clips)
}

fn ask(
    system: &System,
    clip: &Clip,
    daemons: &mut [(Daemon, Rpc)],
    peer: Option<&mut turn::Peer>,
) -> anyhow::Result<Answer> {
    let (ms, text, model, confidence) = match &system.asks {
        Asks::Hark { daemon, model } => {
            let (d, rpc) = &mut daemons[*daemon];
            let path = d.dir.join(&clip.wav);
            let mut arguments = json!({ "audio_path": path.display().to_string() });
            if let Some(m) = model {
                arguments["model"] = Value::String(m.clone());
            }
            let started = Instant::now();
            let result = rpc.call("transcribe_audio", arguments)?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            let content = &result["structuredContent"];
            anyhow::ensure!(
                result["isError"] != true,
                "{}: transcribe_audio of {} failed: {result}",
                system.label,
                clip.id
            );
            (
                ms,
                content["text"].as_str().unwrap_or_default().to_owned(),
                content["model"].as_str().unwrap_or_default().to_owned(),
                content["confidence"].as_f64(),
            )
        }
        Asks::Peer => {
            let peer = peer.ok_or_else(|| anyhow::anyhow!("no peer"))?;
            let (ms, text) = peer.transcribe(&clip.raw)?;
            (ms, text, "faster-whisper tiny.en int8".to_owned(), None)
        }
    };
    let (errors, words) = stt::word_errors(&clip.text, &text);
    Ok(Answer {
        errors,
        words,
        ms,
        text,
        model,
        confidence,
    })
}

fn detail(
    path: &Path,
    clips: &[Clip],
    systems: &[System],
    answers: &[Vec<Answer>],
) -> anyhow::Result<()> {
    let mut out = String::new();
    for (c, clip) in clips.iter().enumerate() {
        let heard: Vec<Value> = systems
            .iter()
            .enumerate()
            .map(|(s, system)| {
                let a = &answers[s][c];
                json!({ "system": system.label, "errors": a.errors, "ms": a.ms,
                        "text": a.text, "model": a.model, "confidence": a.confidence })
            })
            .collect();
        let line = json!({ "id": clip.id, "group": clip.group, "subset": clip.subset,
                           "held_out": clip.held_out, "seconds": clip.seconds,
                           "words": answers[0][c].words, "said": clip.text, "heard": heard });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    std::fs::write(path, out)?;
    Ok(())
}

/// Pooled word errors of `answers` over the clips `keep` picks, percent.
fn pooled(clips: &[Clip], answers: &[Answer], keep: impl Fn(&Clip) -> bool) -> (f64, usize) {
    let (mut errors, mut words, mut n) = (0, 0, 0);
    for (clip, a) in clips.iter().zip(answers) {
        if keep(clip) {
            errors += a.errors;
            words += a.words;
            n += 1;
        }
    }
    (100.0 * errors as f64 / words.max(1) as f64, n)
}

fn report(
    args: &FilesArgs,
    clips: &[Clip],
    systems: &[System],
    answers: &[Vec<Answer>],
    load: &(String, String),
    took: f64,
) -> String {
    let mut out = String::new();
    let held = clips.iter().filter(|c| c.held_out).count();
    let sources: std::collections::BTreeSet<&str> =
        clips.iter().map(|c| c.group.as_str()).collect();
    let _ = writeln!(out, "## Files: transcribe_audio (hark-bench files)\n");
    let _ = writeln!(
        out,
        "{} {} English clips of the real-speech set, whole, from {} sources capped at {} \
         (held out: {held} clips of {}); every clip asked of every system once, interleaved; \
         faster-whisper on {} threads, beam {}. Load {} at the start, {} at the end; {:.0} s.\n",
        crate::host::machine(),
        clips.len(),
        sources.len(),
        args.per_source,
        speech::HELD_OUT.join(", "),
        args.peer.threads,
        args.peer.beam,
        load.0,
        load.1,
        took,
    );
    let peer_median = systems
        .iter()
        .position(|s| matches!(s.asks, Asks::Peer))
        .map(|p| percentile(&answers[p].iter().map(|a| a.ms).collect::<Vec<_>>(), 0.5));
    let _ = writeln!(
        out,
        "| system | word errors, all | held out | median ms a clip | p90 | × peer's median | held out: median / p90 | models that wrote it |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|--:|--:|---|");
    for (s, system) in systems.iter().enumerate() {
        let a = &answers[s];
        let (all, _) = pooled(clips, a, |_| true);
        let (out_wer, _) = pooled(clips, a, |c| c.held_out);
        let ms: Vec<f64> = a.iter().map(|a| a.ms).collect();
        let held_ms: Vec<f64> = a
            .iter()
            .zip(clips)
            .filter(|(_, c)| c.held_out)
            .map(|(a, _)| a.ms)
            .collect();
        let median = percentile(&ms, 0.5);
        let ratio = peer_median.map_or("—".to_owned(), |p| format!("{:.2}×", median / p));
        let mut models: Vec<&str> = a.iter().map(|a| a.model.as_str()).collect();
        models.sort_unstable();
        models.dedup();
        let _ = writeln!(
            out,
            "| {} | {all:.1} % | {out_wer:.1} % | {median:.0} | {:.0} | {ratio} | {:.0} / {:.0} | {} |",
            system.label,
            percentile(&ms, 0.9),
            percentile(&held_ms, 0.5),
            percentile(&held_ms, 0.9),
            models.join(", "),
        );
    }

    // By length and by subset, on the sources rules are chosen on.
    let tuning = |c: &Clip| !c.held_out;
    let buckets: [(&str, f64, f64); 4] = [
        ("under 5 s", 0.0, 5.0),
        ("5–10 s", 5.0, 10.0),
        ("10–20 s", 10.0, 20.0),
        ("20 s and more", 20.0, f64::INFINITY),
    ];
    let _ = writeln!(
        out,
        "\nWord errors by clip length, the sources rules are chosen on (not the held-out split):\n"
    );
    let header: Vec<&str> = systems.iter().map(|s| s.label.as_str()).collect();
    let _ = writeln!(out, "| length | clips | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|--:|{}", "--:|".repeat(systems.len()));
    for (name, from, to) in buckets {
        let keep = |c: &Clip| tuning(c) && c.seconds >= from && c.seconds < to;
        let n = clips.iter().filter(|c| keep(c)).count();
        let cells: Vec<String> = (0..systems.len())
            .map(|s| {
                let ms: Vec<f64> = answers[s]
                    .iter()
                    .zip(clips)
                    .filter(|(_, c)| keep(c))
                    .map(|(a, _)| a.ms)
                    .collect();
                format!(
                    "{:.1} % ({:.0} ms)",
                    pooled(clips, &answers[s], keep).0,
                    percentile(&ms, 0.5)
                )
            })
            .collect();
        let _ = writeln!(out, "| {name} | {n} | {} |", cells.join(" | "));
    }
    let subsets: std::collections::BTreeSet<&str> = clips
        .iter()
        .filter(|c| tuning(c))
        .map(|c| c.subset.as_str())
        .collect();
    let _ = writeln!(out, "\nBy subset, the same sources:\n");
    let _ = writeln!(out, "| subset | clips | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|--:|{}", "--:|".repeat(systems.len()));
    for subset in subsets {
        let keep = |c: &Clip| tuning(c) && c.subset == subset;
        let n = clips.iter().filter(|c| keep(c)).count();
        let cells: Vec<String> = (0..systems.len())
            .map(|s| format!("{:.1} %", pooled(clips, &answers[s], keep).0))
            .collect();
        let _ = writeln!(out, "| {subset} | {n} | {} |", cells.join(" | "));
    }
    out
}
