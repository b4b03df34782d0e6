//! The voice keeps ONNX Runtime's working memory between runs and gives it
//! back on request. A test binary of its own: it reads the process's
//! resident memory, which other tests running alongside would disturb.

use std::path::{Path, PathBuf};

use hark_tts::espeak::Espeak;
use hark_tts::phonemize::{PhonemeIdMap, phonemize};
use hark_tts::piper::{OnnxRuntime, PiperModel};
use hark_tts::voice::{Scales, VoiceConfig};

const SETUP: &str = "run `appliance/setup-voices tests/.voices/lib tests/.voices/voices` in the workspace root first";

fn installed(relative: &str) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = manifest
        .ancestors()
        .nth(2)
        .unwrap_or(manifest)
        .join("tests/.voices")
        .join(relative);
    assert!(path.is_file(), "{} is missing: {SETUP}", path.display());
    path
}

/// VmRSS of this process, in KiB.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn working_memory_is_kept_between_runs_and_given_back_on_request() {
    let runtime = OnnxRuntime::load(&installed("lib/libonnxruntime.so.1.31.1")).unwrap();
    let config = VoiceConfig::from_path(&installed("voices/en_US-joe-medium.onnx.json")).unwrap();
    let map = PhonemeIdMap::new(&config.phoneme_id_map).unwrap();
    let mut model = PiperModel::load(
        &runtime,
        &installed("voices/en_US-joe-medium.onnx"),
        config.clone(),
        1,
    )
    .unwrap();
    let silence = map.ids(&[]).ids;
    // Nothing spoken yet: nothing to give back.
    assert!(!model.holds_memory());
    assert!(!model.release_memory(&silence).unwrap());

    // About six seconds of speech in one run: the arena grows by tens of
    // megabytes.
    let text = "The library reminded you that two of your books are due back on \
                Friday, and that the reading room will be closed for repairs.";
    let sentences = phonemize(Espeak::get().unwrap(), "en-us", text).unwrap();
    assert_eq!(sentences.len(), 1);
    let ids = map.ids(&sentences[0].phonemes()).ids;
    let scales = Scales {
        noise: 0.0,
        noise_w: 0.0,
        ..config.scales(1.0)
    };
    let first = model.synthesize(&ids, scales, None).unwrap();
    assert!(first.len() > 5 * 22050, "{} samples", first.len());
    assert!(model.holds_memory());

    let holding = resident_kib();
    assert!(model.release_memory(&silence).unwrap());
    let released = resident_kib();
    assert!(!model.holds_memory());
    assert!(
        released + 20 * 1024 < holding,
        "resident memory went from {holding} KiB to {released} KiB when the working memory was given back"
    );
    // Once given back, there is nothing more to give.
    assert!(!model.release_memory(&silence).unwrap());

    // The voice speaks the same afterwards.
    let again = model.synthesize(&ids, scales, None).unwrap();
    assert_eq!(again, first);
    assert!(model.holds_memory());
}
