//! `hark-bench wake`: the wake word as the daemon runs it (`hark_room::wake`'s
//! spotter, 10 ms at a time), on the audio `tests/bench/wake-data` builds:
//!
//! - **false wakes an hour** on hours of recorded speech and music nobody says
//!   a wake word in (Debian packages, and the real-speech set), per source,
//!   word and sensitivity;
//! - **missed words** on espeak-ng saying each word in 13 voices at 3 speeds,
//!   near, across a simulated reverberant room, and that with music at
//!   10 dB SNR (no package has people saying them: a synthetic voice, said
//!   so wherever the figure goes);
//! - **how late**: from the end of the word to the detection, in audio, and
//!   the spotter's own time a 10 ms chunk;
//! - **CPU**: processing time per second of audio, one word and all four,
//!   against pymicro-wakeword (the peer) on the same files in the same run,
//!   interleaved file by file.

use std::{
    collections::BTreeMap,
    io::BufRead,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context;
use clap::Args;
use hark_core::room::Sensitivity;
use hark_room::wake::{CHUNK, Spotter};
use serde_json::Value;

use crate::speech;

const RATE: f64 = 16_000.0;

#[derive(Debug, Args)]
pub struct WakeArgs {
    /// What `tests/bench/wake-data` built.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.wake-data"))]
    data: PathBuf,
    /// The models and TensorFlow Lite (`appliance/setup-models` unpacks them).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.models/micro-wakeword"))]
    wake: PathBuf,
    #[command(flatten)]
    speech: speech::SpeechDir,
    /// The Python with pymicro-wakeword (`bash tests/setup.sh`).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python"))]
    python: PathBuf,
    /// Leave the peer out.
    #[arg(long)]
    no_peer: bool,
}

const WORDS: [&str; 4] = ["okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"];

struct Negative {
    source: String,
    path: Option<PathBuf>,
    samples: Vec<f32>,
}

struct Positive {
    word: String,
    condition: String,
    voice: String,
    samples: Vec<f32>,
    word_end: u64,
}

pub fn main(args: WakeArgs) -> anyhow::Result<()> {
    let manifest_path = args.data.join("manifest.json");
    let manifest: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).with_context(|| {
            format!(
                "cannot read {} (run tests/bench/wake-data)",
                manifest_path.display()
            )
        })?)?;
    let mut negatives = Vec::new();
    let mut positives = Vec::new();
    for entry in &manifest {
        let file = args.data.join(entry["file"].as_str().context("a file")?);
        let samples = read(&file)?;
        match entry["kind"].as_str() {
            Some("negative") => negatives.push(Negative {
                source: entry["source"].as_str().unwrap_or("?").to_owned(),
                path: Some(file),
                samples,
            }),
            Some("positive") => positives.push(Positive {
                word: entry["word"].as_str().unwrap_or("?").to_owned(),
                condition: entry["condition"].as_str().unwrap_or("?").to_owned(),
                voice: entry["voice"].as_str().unwrap_or("?").to_owned(),
                samples,
                word_end: entry["word_end"].as_u64().unwrap_or(0),
            }),
            _ => {}
        }
    }
    // The real-speech set, as one recording.
    let real: Vec<f32> = speech::load(&args.speech.speech)?
        .into_iter()
        .flat_map(|c| c.samples)
        .collect();
    negatives.push(Negative {
        source: "real-speech".into(),
        path: None,
        samples: real,
    });
    let lib = args.wake.join("lib/libtensorflowlite_c.so");
    let models = args.wake.join("models");
    let spotter = |words: &[&str]| -> anyhow::Result<Spotter> {
        let words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
        Ok(Spotter::new(hark_room::wake::load(&models, &lib, &words)?))
    };

    println!("## Wake word\n\n{}\n", crate::audio::report::machine());

    // False wakes: each word alone, at each level, on every negative.
    let mut hours: BTreeMap<String, f64> = BTreeMap::new();
    for n in &negatives {
        *hours.entry(n.source.clone()).or_default() += n.samples.len() as f64 / RATE / 3600.0;
    }
    let total_hours: f64 = hours.values().sum();
    // (word, level, source) -> detections
    let mut wakes: BTreeMap<(usize, usize, String), u64> = BTreeMap::new();
    // CPU: one word at the default level.
    let mut one_word = Duration::ZERO;
    for (w, word) in WORDS.iter().enumerate() {
        for (l, level) in Sensitivity::ALL.iter().enumerate() {
            let mut s = spotter(&[word])?;
            for n in &negatives {
                s.reset()?;
                let started = Instant::now();
                let heard = run(&mut s, &n.samples, *level)?;
                if *level == Sensitivity::Default && w == 0 {
                    one_word += started.elapsed();
                }
                *wakes.entry((w, l, n.source.clone())).or_default() += heard.len() as u64;
            }
        }
    }
    println!(
        "False wakes an hour: each word alone at each sensitivity, on {total_hours:.2} h nobody says a wake word in ({}).\n",
        hours
            .iter()
            .map(|(s, h)| format!("{s} {:.0} min", h * 60.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("| word | sensitivity | false wakes | an hour | where |");
    println!("|---|---|--:|--:|---|");
    for (w, word) in WORDS.iter().enumerate() {
        for (l, level) in Sensitivity::ALL.iter().enumerate() {
            let by: Vec<(String, u64)> = wakes
                .iter()
                .filter(|((ww, ll, _), n)| *ww == w && *ll == l && **n > 0)
                .map(|((_, _, s), n)| (s.clone(), *n))
                .collect();
            let count: u64 = by.iter().map(|(_, n)| n).sum();
            println!(
                "| {word} | {} | {count} | {:.2} | {} |",
                level.as_str(),
                count as f64 / total_hours,
                by.iter()
                    .map(|(s, n)| format!("{s} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    // Missed words and how late.
    println!(
        "\nMissed words: espeak-ng (synthetic) saying each word, {} clips a word: near (40 dB SNR), far (a simulated room, RT60 0.6 s, 12 dB quieter, 25 dB SNR), noisy (far, music at 10 dB SNR). Late: from the end of the word to the detection, in the audio (median, p90).\n",
        positives.len() / WORDS.len()
    );
    println!("| word | sensitivity | missed near | far | noisy | all | late median ms | p90 ms |");
    println!("|---|---|--:|--:|--:|--:|--:|--:|");
    let mut chunk_times = Vec::new();
    for word in WORDS {
        for level in Sensitivity::ALL {
            let mut s = spotter(&[word])?;
            let mut missed: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
            let mut late = Vec::new();
            for p in positives.iter().filter(|p| p.word == word) {
                s.reset()?;
                let started = Instant::now();
                let heard = run(&mut s, &p.samples, level)?;
                if level == Sensitivity::Default {
                    chunk_times
                        .push(started.elapsed().as_secs_f64() / (p.samples.len() / CHUNK) as f64);
                }
                // Heard within the word or the 1.5 s after it.
                let hit = heard.iter().find(|&&at| {
                    at + (RATE as u64) / 2 >= p.word_end && at <= p.word_end + (1.5 * RATE) as u64
                });
                let e = missed.entry(p.condition.as_str()).or_default();
                e.1 += 1;
                match hit {
                    Some(&at) => late.push((at as f64 - p.word_end as f64) / RATE * 1000.0),
                    None => {
                        e.0 += 1;
                        if level == Sensitivity::Default {
                            eprintln!(
                                "missed {word} ({}, {}, {})",
                                p.voice,
                                p.condition,
                                level.as_str()
                            );
                        }
                    }
                }
            }
            let pct = |c: &str| {
                missed.get(c).map_or("–".into(), |(m, n)| {
                    format!("{:.0} %", 100.0 * f64::from(*m) / f64::from(*n))
                })
            };
            let (m, n) = missed
                .values()
                .fold((0, 0), |(a, b), (m, n)| (a + m, b + n));
            late.sort_by(f64::total_cmp);
            let q = |f: f64| {
                if late.is_empty() {
                    "–".to_owned()
                } else {
                    format!("{:.0}", late[((late.len() - 1) as f64 * f) as usize])
                }
            };
            println!(
                "| {word} | {} | {} | {} | {} | {:.0} % | {} | {} |",
                level.as_str(),
                pct("near"),
                pct("far"),
                pct("noisy"),
                100.0 * f64::from(m) / f64::from(n.max(1)),
                q(0.5),
                q(0.9)
            );
        }
    }
    chunk_times.sort_by(f64::total_cmp);

    // CPU: all four words in one spotter (as one front end feeds them in
    // the daemon), against the peer, file by file.
    println!(
        "\nCPU, % of one core (processing time per second of audio): Hark's spotter in this process, the peer (pymicro-wakeword 2.5.0 with pymicro-features, one front end for all models) in Python on the same files, alternating file by file.\n"
    );
    let mut all4 = spotter(&WORDS)?;
    let (mut hark_time, mut peer_time, mut audio_s) = (Duration::ZERO, 0.0f64, 0.0f64);
    let mut peer_wakes: BTreeMap<String, u64> = BTreeMap::new();
    let mut peer_error = None;
    for n in negatives.iter().filter(|n| n.path.is_some()) {
        all4.reset()?;
        let started = Instant::now();
        run(&mut all4, &n.samples, Sensitivity::Default)?;
        hark_time += started.elapsed();
        audio_s += n.samples.len() as f64 / RATE;
        if args.no_peer || peer_error.is_some() {
            continue;
        }
        match peer(
            &args.python,
            &lib,
            &models,
            n.path.as_deref().unwrap_or(Path::new("")),
        ) {
            Ok((seconds, counts)) => {
                peer_time += seconds;
                for (word, c) in counts {
                    *peer_wakes.entry(word).or_default() += c;
                }
            }
            Err(e) => peer_error = Some(e),
        }
    }
    let one_word_audio: f64 = negatives
        .iter()
        .map(|n| n.samples.len() as f64 / RATE)
        .sum();
    println!("| | % of one core | |");
    println!("|---|--:|---|");
    println!(
        "| Hark, one word (okay_nabu) | {:.2} | over {:.1} h |",
        100.0 * one_word.as_secs_f64() / one_word_audio,
        one_word_audio / 3600.0
    );
    let hark_all = 100.0 * hark_time.as_secs_f64() / audio_s;
    println!(
        "| Hark, all four words | {hark_all:.2} | over {:.1} h |",
        audio_s / 3600.0
    );
    match peer_error {
        Some(e) => println!("| peer | – | {} |", format!("{e:#}").replace('|', "/")),
        None if args.no_peer => println!("| peer | – | left out (--no-peer) |"),
        None => {
            let peer_all = 100.0 * peer_time / audio_s;
            println!(
                "| peer, all four words | {peer_all:.2} | Hark uses {:.2}× the peer's time |",
                hark_all / peer_all
            );
            println!(
                "\nThe peer's false wakes on the same {:.2} h (package files; each model's own cutoff): {}.",
                audio_s / 3600.0,
                peer_wakes
                    .iter()
                    .map(|(w, n)| format!("{w} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    if !chunk_times.is_empty() {
        println!(
            "\nThe spotter's time a 10 ms chunk, one word: median {:.3} ms, p99 {:.3} ms; the detector thread looks for audio every 20 ms.",
            chunk_times[chunk_times.len() / 2] * 1000.0,
            chunk_times[(chunk_times.len() - 1) * 99 / 100] * 1000.0
        );
    }
    Ok(())
}

/// Feeds `samples` to `spotter` a chunk at a time; where each detection was
/// (stream position at the end of its chunk).
fn run(spotter: &mut Spotter, samples: &[f32], level: Sensitivity) -> anyhow::Result<Vec<u64>> {
    let mut heard = Vec::new();
    let mut end = 0u64;
    for chunk in samples.chunks(CHUNK) {
        end += chunk.len() as u64;
        if spotter.feed(chunk, end, level)?.is_some() {
            heard.push(end);
        }
    }
    Ok(heard)
}

/// The peer on one file: its seconds processing, its detections per word.
fn peer(
    python: &Path,
    lib: &Path,
    models: &Path,
    file: &Path,
) -> anyhow::Result<(f64, BTreeMap<String, u64>)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/wake_peer.py");
    let out = Command::new(python)
        .arg(script)
        .arg(lib)
        .arg(models)
        .arg(file)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "the peer failed on {}",
        file.display()
    );
    let line = out
        .stdout
        .lines()
        .next()
        .context("the peer said nothing")??;
    let v: Value = serde_json::from_str(&line)?;
    let counts = v["detections"]
        .as_object()
        .context("detections")?
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
        .collect();
    Ok((v["seconds"].as_f64().unwrap_or(0.0), counts))
}

/// A 16 kHz WAV file's samples (hark-audio's reader, mono).
fn read(path: &Path) -> anyhow::Result<Vec<f32>> {
    let clip = hark_audio::clip::Clip::read_wav(path)?;
    anyhow::ensure!(clip.rate == 16_000, "{}: not 16 kHz", path.display());
    Ok(clip.samples)
}
