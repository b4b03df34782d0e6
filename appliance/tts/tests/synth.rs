//! The synthesiser with the real ONNX Runtime and the real joe voice (as
//! `appliance/setup-voices` installs them into tests/.voices): planning
//! text into pieces, rendering them, and espeak-ng taking over when piper
//! cannot speak.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use hark_tts::synth::{EngineKind, MAX_PIECE_PHONEMES, SynthConfig, Synthesizer, TtsError};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/.voices")
}

fn config(voices_dir: PathBuf) -> SynthConfig {
    let lib = root().join("lib/libonnxruntime.so");
    assert!(
        lib.exists(),
        "{} is missing: run `appliance/setup-voices tests/.voices/lib tests/.voices/voices` in the workspace root first",
        lib.display()
    );
    SynthConfig {
        engine: EngineKind::Piper,
        onnxruntime: lib,
        voices_dir,
        voice: "en_US-joe-medium".into(),
        threads: 1,
        espeak_voice: "en-us".into(),
        max_loaded_voices: 2,
    }
}

fn joe() -> Synthesizer {
    Synthesizer::new(config(root().join("voices")))
}

fn rms(samples: &[f32]) -> f32 {
    (samples.iter().map(|s| s * s).sum::<f32>() / samples.len().max(1) as f32).sqrt()
}

#[test]
fn a_paragraph_is_planned_per_sentence_and_each_piece_speaks() {
    let mut synth = joe();
    assert_eq!(synth.runtime_problem(), None);
    let text = "Good morning. The kettle is on! Shall I read the news?";
    let utterance = synth.prepare(text, None, 1.0).unwrap();
    assert_eq!(utterance.engine, EngineKind::Piper);
    assert_eq!(utterance.voice, "en_US-joe-medium");
    assert_eq!(utterance.pieces.len(), 3);
    let spoken: Vec<&str> = utterance
        .pieces
        .iter()
        .map(|p| text[p.text.clone()].trim())
        .collect();
    assert_eq!(
        spoken,
        [
            "Good morning.",
            "The kettle is on!",
            "Shall I read the news?"
        ]
    );
    let never = AtomicBool::new(false);
    for index in 0..3 {
        let chunk = synth.render(&utterance, index, &never).unwrap();
        assert_eq!(chunk.engine, EngineKind::Piper);
        assert_eq!(chunk.rate, 22050);
        let seconds = chunk.samples.len() as f32 / 22050.0;
        assert!((0.4..4.0).contains(&seconds), "piece {index}: {seconds} s");
        assert!(rms(&chunk.samples) > 0.05, "piece {index} is near silent");
        let peak = chunk.samples.iter().fold(0.0f32, |m, s| m.max(s.abs()));
        assert!(
            (peak - 1.0).abs() < 1e-6,
            "normalised to full scale: {peak}"
        );
    }
}

#[test]
fn a_long_sentence_is_cut_after_clauses() {
    let mut synth = joe();
    let clause = "When the kettle boils, and the toast pops up, and the radio plays the morning news, \
        and the cat asks for breakfast, and the post arrives at the door, and the neighbours start their car, \
        and the sun comes through the kitchen window, and the children look for their shoes, \
        and the dog wants to go out, ";
    let sentence = format!("{clause}{clause}we sit down for a moment and enjoy the quiet.");
    let sentence = sentence.as_str();
    let utterance = synth.prepare(sentence, None, 1.0).unwrap();
    assert!(
        utterance.pieces.len() > 1,
        "{} pieces",
        utterance.pieces.len()
    );
    // Contiguous, in order, cut only after a comma.
    for pair in utterance.pieces.windows(2) {
        assert!(pair[0].text.end <= pair[1].text.start + 1);
        assert!(sentence[pair[0].text.clone()].trim_end().ends_with(','));
    }
    for piece in &utterance.pieces {
        // ids are `^ _ (p _)* $`: two per phoneme plus three.
        assert!((piece.ids.len() - 3) / 2 <= MAX_PIECE_PHONEMES);
    }
}

#[test]
fn rate_changes_the_length_and_is_bounded() {
    let mut synth = joe();
    let never = AtomicBool::new(false);
    let mut length = |rate: f32| {
        let u = synth
            .prepare("Please close the window.", None, rate)
            .unwrap();
        synth.render(&u, 0, &never).unwrap().samples.len()
    };
    let (slow, fast) = (length(0.5), length(2.0));
    // Four times the length scale; pauses and rounding make it less.
    assert!(slow > 2 * fast, "rate 0.5: {slow}, rate 2.0: {fast}");
    for bad in [0.49, 2.01, f32::NAN] {
        assert!(matches!(
            synth.prepare("Hello.", None, bad),
            Err(TtsError::Rate(_))
        ));
    }
}

#[test]
fn unknown_voices_name_the_installed_ones() {
    let mut synth = joe();
    let err = synth
        .prepare("Hello.", Some("en_GB-nobody-low"), 1.0)
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, TtsError::UnknownVoice { .. }), "{message}");
    assert!(message.contains("en_GB-nobody-low"), "{message}");
    assert!(message.contains("en_US-joe-medium"), "{message}");
}

#[test]
fn espeak_voices_are_always_there() {
    let mut synth = joe();
    let utterance = synth
        .prepare("Hello there.", Some("espeak:en-us"), 1.0)
        .unwrap();
    assert_eq!(utterance.engine, EngineKind::Espeak);
    let chunk = synth
        .render(&utterance, 0, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(chunk.engine, EngineKind::Espeak);
    assert!(rms(&chunk.samples) > 0.05);
}

#[test]
fn text_without_words_is_refused() {
    let mut synth = joe();
    assert!(matches!(
        synth.prepare("\" ( ) \"", None, 1.0),
        Err(TtsError::Unspeakable)
    ));
}

#[test]
fn a_missing_default_voice_falls_back_to_espeak_with_the_reason() {
    let empty = tempfile::tempdir().unwrap();
    let mut synth = Synthesizer::new(config(empty.path().to_path_buf()));
    let problem = synth.voice_problem().expect("the status names the problem");
    assert!(problem.contains("en_US-joe-medium"), "{problem}");
    let utterance = synth.prepare("The voice is gone.", None, 1.0).unwrap();
    assert_eq!(utterance.engine, EngineKind::Espeak);
    let reason = utterance.fallback.clone().unwrap_or_default();
    assert!(reason.contains("not installed"), "{reason}");
    let chunk = synth
        .render(&utterance, 0, &AtomicBool::new(false))
        .unwrap();
    assert!(rms(&chunk.samples) > 0.05);
}

#[test]
fn a_corrupt_voice_falls_back_to_espeak_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let voices = root().join("voices");
    std::fs::copy(
        voices.join("en_US-joe-medium.onnx.json"),
        dir.path().join("en_US-joe-medium.onnx.json"),
    )
    .unwrap();
    // Starts like a protobuf, so the store accepts it; ONNX Runtime will not.
    let mut garbage = vec![0x08u8, 0x07, 0x12, 0x04];
    garbage.extend((0..100_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    std::fs::write(dir.path().join("en_US-joe-medium.onnx"), garbage).unwrap();
    let mut synth = Synthesizer::new(config(dir.path().to_path_buf()));
    let utterance = synth.prepare("Still speaking.", None, 1.0).unwrap();
    assert_eq!(utterance.engine, EngineKind::Espeak);
    let reason = utterance.fallback.clone().unwrap_or_default();
    assert!(!reason.is_empty());
    assert!(synth.voice_problem().is_some());
}
