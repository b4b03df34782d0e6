//! Word errors of the engines on the same audio, over more voices than the
//! turn bench's one: the live engine (Moonshine tiny-en, as the daemon runs
//! it and greedy only), Hark's whisper tiny.en q8_0 and faster-whisper int8
//! (the turn bench's peer). The sentences are the turn bench's (its
//! utterances and its pause set's sentences said whole); the voices are six
//! of espeak-ng's (the same audio every run, some far from any voice the
//! models learnt from) and takes of the appliance's piper voice (drawn
//! anew each take). Every system hears every clip once; the report gives
//! the errors per voice and the median time a clip.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    sync::atomic::AtomicBool,
    time::Instant,
};

use clap::Args;
use hark_stt::engine::{Engine, EngineConfig, Request};

use crate::{Scratch, figures::percentile, procfs, stt, tidy, turn};

#[derive(Debug, Args)]
pub struct WerArgs {
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
}

const SYSTEMS: [&str; 4] = [
    "Hark live: Moonshine tiny-en (as the daemon runs it)",
    "Moonshine tiny-en, greedy only",
    "Hark whisper tiny.en q8_0 (beam 5)",
    "faster-whisper tiny.en int8 (beam 5)",
];

/// A clip: the voice that spoke it, the sentence, and the audio (16 kHz
/// mono, as floats and as the raw S16 file the peer reads).
struct Clip {
    voice: String,
    text: String,
    samples: Vec<f32>,
    raw: PathBuf,
}

/// What one system made of one clip.
#[derive(Clone, Default)]
struct Heard {
    errors: usize,
    words: usize,
    ms: f64,
    text: String,
}

pub fn main(args: WerArgs) -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let sentences: Vec<String> = turn::UTTERANCES
        .iter()
        .map(|s| (*s).to_owned())
        .chain(turn::PAUSED.iter().map(|(a, b)| format!("{a} {b}")))
        .collect();

    eprintln!("[wer] speaking {} sentences", sentences.len());
    let mut clips = Vec::new();
    for voice in hark_tts::test_voice::ESPEAK_VOICES {
        for text in &sentences {
            let wav = scratch.0.join("espeak.wav");
            stt::espeak(&wav, voice, text)?;
            let clip = hark_audio::clip::Clip::read_wav(&wav)
                .and_then(|c| c.resampled(16_000))
                .map_err(|e| anyhow::anyhow!("{}: {e}", wav.display()))?;
            clips.push(clip_of(&scratch.0, clips.len(), voice, text, clip.samples)?);
        }
    }
    for take in 0..args.piper_takes {
        for text in &sentences {
            let (samples, rate) = hark_tts::test_voice::speak(text);
            let clip = hark_audio::clip::Clip { samples, rate }
                .resampled(16_000)
                .map_err(|e| anyhow::anyhow!("piper's take: {e}"))?;
            let voice = format!("piper (take {})", take + 1);
            clips.push(clip_of(
                &scratch.0,
                clips.len(),
                &voice,
                text,
                clip.samples,
            )?);
        }
    }

    let load_start = procfs::loadavg();
    let runtime = hark_onnx::OnnxRuntime::load(&tidy(&args.live.onnxruntime))?;
    let threads = usize::from(args.threads.max(1));
    let mut moonshine =
        hark_stt::moonshine::Moonshine::load(&runtime, &tidy(&args.live.moonshine), threads)?;
    let whisper = Engine::start(EngineConfig {
        model: tidy(&args.whisper),
        threads: args.threads,
        beam_size: args.beam,
        language: "en".into(),
        ..EngineConfig::default()
    })?;
    let mut peer = if args.no_peer {
        None
    } else {
        Some(turn::Peer::start(
            &args.peers,
            &args.live.ct2,
            args.threads,
            args.beam,
        )?)
    };

    // [system][clip]
    let mut heard: Vec<Vec<Heard>> = vec![Vec::new(); SYSTEMS.len()];
    for (i, clip) in clips.iter().enumerate() {
        if i % 14 == 0 {
            eprintln!("[wer] {} ({} of {} clips)", clip.voice, i + 1, clips.len());
        }
        let started = Instant::now();
        let live = moonshine.transcribe(&clip.samples)?;
        heard[0].push(score(clip, started, live.text));
        let started = Instant::now();
        let greedy = moonshine.transcribe_until(&clip.samples, &AtomicBool::new(false), false)?;
        heard[1].push(score(clip, started, greedy.text));
        let started = Instant::now();
        let text = whisper
            .transcribe_blocking(Request::new(clip.samples.clone()))?
            .text;
        heard[2].push(score(clip, started, text));
        if let Some(peer) = peer.as_mut() {
            let (took, text) = peer.transcribe(&clip.raw)?;
            let mut h = score(clip, Instant::now(), text);
            h.ms = took;
            heard[3].push(h);
        }
    }
    let load_end = procfs::loadavg();
    print!("{}", render(&args, &clips, &heard, (load_start, load_end)));
    Ok(())
}

fn clip_of(
    dir: &Path,
    index: usize,
    voice: &str,
    text: &str,
    samples: Vec<f32>,
) -> anyhow::Result<Clip> {
    let raw = dir.join(format!("clip-{index}.raw"));
    let audio = hark_audio::clip::Clip {
        samples,
        rate: 16_000,
    };
    std::fs::write(&raw, audio.to_s16_le(1))?;
    Ok(Clip {
        voice: voice.to_owned(),
        text: text.to_owned(),
        samples: audio.samples,
        raw,
    })
}

fn score(clip: &Clip, started: Instant, text: String) -> Heard {
    let (errors, words) = stt::word_errors(&clip.text, &text);
    Heard {
        errors,
        words,
        ms: started.elapsed().as_secs_f64() * 1000.0,
        text,
    }
}

fn render(args: &WerArgs, clips: &[Clip], heard: &[Vec<Heard>], load: (String, String)) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "### Word errors — {}\n\n{}\n\n{} clips: the turn bench's {} sentences by {} espeak-ng voices and {} takes of piper's en_US-joe-medium; every system hears every clip once; {} threads, beam {} for both whispers. Load average at the start: {}; at the end: {}.\n",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        crate::machine(),
        clips.len(),
        clips.len() / (hark_tts::test_voice::ESPEAK_VOICES.len() + args.piper_takes).max(1),
        hark_tts::test_voice::ESPEAK_VOICES.len(),
        args.piper_takes,
        args.threads,
        args.beam,
        load.0,
        load.1,
    );
    let mut voices: Vec<&str> = Vec::new();
    for clip in clips {
        if !voices.contains(&clip.voice.as_str()) {
            voices.push(&clip.voice);
        }
    }
    let systems: Vec<usize> = (0..SYSTEMS.len())
        .filter(|&s| !heard[s].is_empty())
        .collect();
    let _ = write!(out, "| voice | words |");
    for &s in &systems {
        let _ = write!(out, " {} errors |", SYSTEMS[s]);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---|--:|{}", "--:|".repeat(systems.len()));
    let sum = |s: usize, pick: &Pick| -> (usize, usize) {
        clips
            .iter()
            .zip(&heard[s])
            .filter(|(c, _)| pick.takes(c))
            .fold((0, 0), |(e, w), (_, h)| (e + h.errors, w + h.words))
    };
    let rows = voices
        .iter()
        .map(|v| ((*v).to_owned(), Pick::Voice(v)))
        .chain([
            ("**espeak-ng, all six**".to_owned(), Pick::Espeak),
            ("**piper, all takes**".to_owned(), Pick::Piper),
            ("**all**".to_owned(), Pick::All),
        ]);
    for (name, pick) in rows {
        let words = sum(systems[0], &pick).1;
        let _ = write!(out, "| {name} | {words} |");
        for &s in &systems {
            let (e, w) = sum(s, &pick);
            let _ = write!(out, " {e} ({:.1} %) |", 100.0 * e as f64 / w.max(1) as f64);
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "\n| system | median ms a clip | p90 ms |\n|---|--:|--:|"
    );
    for &s in &systems {
        let times: Vec<f64> = heard[s].iter().map(|h| h.ms).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            SYSTEMS[s],
            percentile(&times, 0.5).round(),
            percentile(&times, 0.9).round(),
        );
    }
    // Where the live engine and the peer differ, what each heard.
    let _ = writeln!(
        out,
        "\n| voice | sentence | live errors | live heard | peer errors | peer heard |\n|---|---|--:|---|--:|---|"
    );
    if let Some(peer) = heard.get(3).filter(|p| !p.is_empty()) {
        for ((clip, live), peer) in clips.iter().zip(&heard[0]).zip(peer) {
            if live.errors != peer.errors {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    clip.voice, clip.text, live.errors, live.text, peer.errors, peer.text
                );
            }
        }
    }
    out
}

/// The clips a row of the report counts.
enum Pick<'a> {
    Voice(&'a str),
    Espeak,
    Piper,
    All,
}

impl Pick<'_> {
    fn takes(&self, clip: &Clip) -> bool {
        match self {
            Pick::Voice(v) => clip.voice == *v,
            Pick::Espeak => !clip.voice.starts_with("piper"),
            Pick::Piper => clip.voice.starts_with("piper"),
            Pick::All => true,
        }
    }
}
