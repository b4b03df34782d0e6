//! The detector hears the end of speech where the voice falls silent, on
//! the voice the appliance speaks with (piper's en_US-joe-medium, from
//! tests/.voices): its words die away over a few tens of ms, and the
//! detector's score alone would carry that tail on for another 40–100 ms,
//! which the end of every turn waits out.

use std::{
    path::PathBuf,
    sync::{Mutex, OnceLock, atomic::AtomicBool},
};

use hark_audio::{
    clip::Clip,
    config::{PIPELINE_RATE, VadConfig},
    vad::{Event, Segmenter},
};
use hark_tts::synth::{EngineKind, SynthConfig, Synthesizer};

/// `text` spoken by the piper voice, at 16 kHz.
fn piper(text: &str) -> Vec<f32> {
    static SYNTH: OnceLock<Mutex<Synthesizer>> = OnceLock::new();
    let voices = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/.voices");
    let synth = SYNTH.get_or_init(|| {
        let lib = voices.join("lib/libonnxruntime.so");
        assert!(
            lib.exists(),
            "{} is missing: run `appliance/setup-voices tests/.voices/lib tests/.voices/voices`",
            lib.display()
        );
        Mutex::new(Synthesizer::new(SynthConfig {
            engine: EngineKind::Piper,
            onnxruntime: lib,
            voices_dir: voices.join("voices"),
            voice: "en_US-joe-medium".into(),
            threads: 1,
            espeak_voice: "en-us".into(),
            max_loaded_voices: 1,
        }))
    });
    let mut synth = synth.lock().unwrap_or_else(|e| e.into_inner());
    let utterance = synth.prepare(text, None, 1.0).expect("planned");
    let (mut samples, mut rate) = (Vec::new(), 0);
    for index in 0..utterance.pieces.len() {
        let chunk = synth
            .render(&utterance, index, &AtomicBool::new(false))
            .expect("rendered");
        assert_eq!(chunk.engine, EngineKind::Piper, "{:?}", chunk.fallback);
        rate = chunk.rate;
        samples.extend(chunk.samples);
    }
    Clip { samples, rate }
        .resampled(PIPELINE_RATE)
        .expect("resampled")
        .samples
}

/// After the last 10 ms window above −40 dBFS.
fn true_end(clip: &[f32]) -> usize {
    clip.chunks(160)
        .enumerate()
        .rfind(|(_, w)| (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt() > 0.01)
        .map_or(0, |(i, _)| (i + 1) * 160)
}

#[test]
fn the_speech_ends_where_the_voice_falls_silent() {
    for text in [
        "Turn on the lights.",
        "What time is it in Tokyo?",
        "Please remind me to call my mother tomorrow morning.",
        "I would like a summary of the report on the quarterly budget, and then send it to Anna and David.",
    ] {
        // Silence in front and behind, as from a clean source or a quiet
        // room: nothing but the voice can carry the speech on.
        let speech = piper(text);
        let lead = 8_000;
        let mut audio = vec![0.0; lead];
        audio.extend_from_slice(&speech);
        audio.extend(vec![0.0; 16_000]);
        let truth = (lead + true_end(&speech)) as f64;
        let mut segmenter = Segmenter::new(&VadConfig::default(), 0);
        let (mut rest, mut events) = (&audio[..], Vec::new());
        while !rest.is_empty() {
            let (used, event) = segmenter.push(rest);
            rest = &rest[used..];
            events.extend(event);
        }
        let [Event::SpeechStart { .. }, Event::SpeechEnd { start, end }] = events[..] else {
            panic!("{text}: one stretch of speech, not {events:?}");
        };
        let late_ms = (end as f64 - truth) / 16.0;
        eprintln!("{text}: the speech ended {late_ms:+.0} ms from the voice's end");
        // A 16 ms frame either side, and the last sound dying away.
        assert!(
            (-20.0..=35.0).contains(&late_ms),
            "{text}: the speech ended {late_ms:.0} ms after the voice fell below −40 dBFS"
        );
        assert!(
            (start as f64) < lead as f64 + 1_600.0,
            "{text}: began at {start}"
        );
    }
}
