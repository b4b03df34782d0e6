//! For tests in other crates: sentences spoken by the appliance's own piper
//! voice (en_US-joe-medium, installed in tests/.voices by
//! `appliance/setup-voices`), as it speaks them. Panics with what to run
//! when the voice is not there.

use std::{
    path::PathBuf,
    sync::{Mutex, OnceLock, PoisonError, atomic::AtomicBool},
};

use crate::synth::{EngineKind, SynthConfig, Synthesizer};

/// espeak-ng voices for word-error tests and benches: American and
/// British English, a Scottish accent, and two of its variants (a higher
/// voice, a lower one). Some are far from any voice a speech model learnt
/// from; espeak-ng speaks them the same every run.
pub const ESPEAK_VOICES: [&str; 6] = [
    "en-us",
    "en",
    "en-gb-x-rp",
    "en-us+f3",
    "en+m3",
    "en-gb-scotland",
];

/// `text` spoken by the voice: its samples and their rate.
pub fn speak(text: &str) -> (Vec<f32>, u32) {
    static SYNTH: OnceLock<Mutex<Synthesizer>> = OnceLock::new();
    let synth = SYNTH.get_or_init(|| {
        let voices = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/.voices");
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
    let mut synth = synth.lock().unwrap_or_else(PoisonError::into_inner);
    let utterance = synth.prepare(text, None, 1.0).expect("planned");
    assert_eq!(
        utterance.engine,
        EngineKind::Piper,
        "{:?}",
        utterance.fallback
    );
    let (mut samples, mut rate) = (Vec::new(), 0);
    for index in 0..utterance.pieces.len() {
        let chunk = synth
            .render(&utterance, index, &AtomicBool::new(false))
            .expect("rendered");
        assert_eq!(chunk.engine, EngineKind::Piper, "{:?}", chunk.fallback);
        rate = chunk.rate;
        samples.extend(chunk.samples);
    }
    (samples, rate)
}
