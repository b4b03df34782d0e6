//! Smart Turn v3.2 (tests/.models/smart-turn, from pipecat-ai 1.14.0):
//! Hark's features against the package's own numpy extractor on the same
//! speech, the same probability as ONNX Runtime gives the reference's
//! features, and the decisions on a finished and an unfinished sentence.

mod common;

use std::path::PathBuf;
use std::process::Command;

use hark_stt::turn::{FRAMES, Features, MODEL, N_MELS, SmartTurn};

fn dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/.models/smart-turn");
    assert!(
        dir.join(MODEL).exists(),
        "{} is missing: run tests/setup.sh",
        dir.display()
    );
    dir
}

/// The reference: the package's extractor and onnxruntime in Python, on
/// the same samples. Returns its features and probability.
fn reference(tmp: &std::path::Path, audio: &[f32]) -> (Vec<f32>, f32) {
    let raw = tmp.join("audio.f32");
    let out = tmp.join("features.f32");
    let bytes: Vec<u8> = audio.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&raw, bytes).unwrap();
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/.venv/bin/python");
    let script = r#"
import sys, numpy as np, onnxruntime as ort
sys.path.insert(0, sys.argv[1])
from reference_features import compute_whisper_log_mel_features
audio = np.fromfile(sys.argv[2], dtype=np.float32)
n = 8 * 16000
audio = audio[-n:] if len(audio) > n else np.pad(audio, (n - len(audio), 0))
f = compute_whisper_log_mel_features(audio)
f.astype(np.float32).tofile(sys.argv[3])
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1] + "/smart-turn-v3.2-cpu.onnx", so)
p = s.run(None, {"input_features": f[None, :, :]})[0]
print(float(np.asarray(p).reshape(-1)[0]))
"#;
    let done = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(dir())
        .arg(&raw)
        .arg(&out)
        .output()
        .expect("tests/.venv (tests/setup.sh makes it)");
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let p: f32 = String::from_utf8_lossy(&done.stdout)
        .trim()
        .parse()
        .unwrap();
    let features = std::fs::read(&out)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (features, p)
}

#[test]
fn features_and_probabilities_match_the_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let mut model = SmartTurn::load(&common::onnx_runtime(), &dir().join(MODEL)).expect("load");
    let features = Features::new();
    for text in [
        "Could you remind me to call the dentist tomorrow morning?",
        "I was thinking that maybe we could",
    ] {
        let audio = common::piper(tmp.path(), text);
        let (expected, p_ref) = reference(tmp.path(), &audio);
        let got = features.compute(&audio);
        assert_eq!(got.len(), N_MELS * FRAMES);
        assert_eq!(expected.len(), got.len());
        let worst = got
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 2e-3, "{text}: features differ by up to {worst}");
        // The same features give the same probability: the session is
        // set up as the reference's (optimisation level, threads).
        let same = model.predict(&expected).expect("predict");
        assert!(
            (same - p_ref).abs() < 1e-3,
            "{text}: {same} on the reference's features against its {p_ref}"
        );
        // Hark's own features: the int8 model's output moves in steps and
        // amplifies the features' last-digit differences (up to 0.029 seen
        // over piper's varying takes), never enough to change a decision.
        let p = model.complete(&audio).expect("predict");
        assert!(
            (p - p_ref).abs() < 0.1 && (p > 0.5) == (p_ref > 0.5),
            "{text}: {p} against the reference's {p_ref}"
        );
    }
}

#[test]
fn a_finished_sentence_is_complete_and_a_broken_off_one_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let mut model = SmartTurn::load(&common::onnx_runtime(), &dir().join(MODEL)).expect("load");
    let finished = model
        .complete(&common::piper(
            tmp.path(),
            "Please turn off the lights in the kitchen.",
        ))
        .unwrap();
    let unfinished = model
        .complete(&common::piper(
            tmp.path(),
            "Please turn off the lights in the, um, and",
        ))
        .unwrap();
    assert!(finished > 0.5, "finished: {finished}");
    assert!(unfinished < 0.5, "unfinished: {unfinished}");
}

#[test]
fn a_wrong_file_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("not-a-model.onnx");
    std::fs::write(&bad, b"nothing like a model").unwrap();
    let e = SmartTurn::load(&common::onnx_runtime(), &bad)
        .err()
        .expect("refused");
    assert!(e.to_string().contains("not-a-model.onnx"), "{e}");
    let e = SmartTurn::load(&common::onnx_runtime(), &tmp.path().join("missing.onnx"))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("missing.onnx"), "{e}");
}

#[test]
fn features_of_the_wrong_size_are_refused() {
    let mut model = SmartTurn::load(&common::onnx_runtime(), &dir().join(MODEL)).expect("load");
    let e = model.predict(&[0.0; 80]).expect_err("refused");
    assert!(e.to_string().contains("not 80"), "{e}");
}
