//! The piper voice on the real ONNX Runtime, with the real voice, both as
//! `appliance/setup-voices` installs them. Missing files fail the tests
//! (with the command to run) rather than skip them: a skipped voice test
//! would pass on a machine where Hark cannot speak.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use hark_tts::piper::{
    OnnxRuntime, PiperError, PiperModel, RuntimeError, normalize, normalize_shared,
};
use hark_tts::voice::{Scales, VoiceConfig, VoiceError};

const SETUP: &str = "run `appliance/setup-voices tests/.voices/lib tests/.voices/voices` in the workspace root first";

/// "Hello, world!" as piper (piper-tts 1.8.0 and piper-phonemize 1.1.0)
/// turns it into ids for this voice.
const HELLO_WORLD: [i64; 33] = [
    1, 0, 20, 0, 59, 0, 24, 0, 120, 0, 27, 0, 100, 0, 8, 0, 3, 0, 35, 0, 120, 0, 62, 0, 122, 0, 24,
    0, 17, 0, 4, 0, 2,
];
/// Its phonemes, as NFD code points.
const HELLO_WORLD_PHONEMES: [&str; 15] = [
    "h", "ə", "l", "ˈ", "o", "ʊ", ",", " ", "w", "ˈ", "ɜ", "ː", "l", "d", "!",
];

/// "The quick brown fox jumps over the lazy dog, then it runs all the way
/// back home." through piper-phonemize 1.1.0: about 4 s of speech.
const QUICK_BROWN_FOX: [i64; 187] = [
    1, 0, 41, 0, 59, 0, 3, 0, 23, 0, 35, 0, 120, 0, 74, 0, 23, 0, 3, 0, 15, 0, 88, 0, 120, 0, 14,
    0, 100, 0, 26, 0, 3, 0, 19, 0, 120, 0, 51, 0, 122, 0, 23, 0, 31, 0, 3, 0, 17, 0, 108, 0, 120,
    0, 102, 0, 25, 0, 28, 0, 31, 0, 3, 0, 121, 0, 27, 0, 100, 0, 34, 0, 60, 0, 3, 0, 41, 0, 59, 0,
    3, 0, 24, 0, 120, 0, 18, 0, 74, 0, 38, 0, 21, 0, 3, 0, 17, 0, 120, 0, 51, 0, 122, 0, 66, 0, 8,
    0, 3, 0, 41, 0, 120, 0, 61, 0, 26, 0, 3, 0, 74, 0, 32, 0, 3, 0, 88, 0, 120, 0, 102, 0, 26, 0,
    38, 0, 3, 0, 120, 0, 54, 0, 122, 0, 24, 0, 3, 0, 41, 0, 59, 0, 3, 0, 35, 0, 120, 0, 18, 0, 74,
    0, 3, 0, 15, 0, 120, 0, 39, 0, 23, 0, 3, 0, 20, 0, 120, 0, 27, 0, 100, 0, 25, 0, 10, 0, 2,
];

/// `tests/.voices` in the workspace root (this crate is appliance/tts).
fn voices_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.ancestors().nth(2).unwrap_or(manifest);
    root.join("tests/.voices")
}

fn installed(relative: &str) -> PathBuf {
    let path = voices_root().join(relative);
    assert!(path.is_file(), "{} is missing: {SETUP}", path.display());
    path
}

fn library() -> PathBuf {
    installed("lib/libonnxruntime.so.1.31.1")
}

fn model_path() -> PathBuf {
    installed("voices/en_US-joe-medium.onnx")
}

fn config_path() -> PathBuf {
    installed("voices/en_US-joe-medium.onnx.json")
}

fn runtime() -> OnnxRuntime {
    OnnxRuntime::load(&library()).unwrap()
}

fn joe_config() -> VoiceConfig {
    VoiceConfig::from_path(&config_path()).unwrap()
}

/// One model for the tests that speak: loading 63 MB per test would
/// dominate the run. One intra-op thread keeps the output bit-identical
/// between runs (and is what the appliance uses).
fn joe() -> MutexGuard<'static, PiperModel> {
    static MODEL: OnceLock<Mutex<PiperModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let model = PiperModel::load(&runtime(), &model_path(), joe_config(), 1).unwrap();
            Mutex::new(model)
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn silent_scales(config: &VoiceConfig, rate: f32) -> Scales {
    Scales {
        noise: 0.0,
        noise_w: 0.0,
        ..config.scales(rate)
    }
}

fn rms(audio: &[f32]) -> f32 {
    (audio.iter().map(|s| s * s).sum::<f32>() / audio.len() as f32).sqrt()
}

#[test]
fn joe_config_is_read() {
    let config = joe_config();
    assert_eq!(config.sample_rate, 22050);
    assert_eq!(config.quality.as_deref(), Some("medium"));
    assert_eq!(config.espeak_voice, "en-us");
    assert_eq!(config.noise_scale, 0.667);
    assert_eq!(config.length_scale, 1.0);
    assert_eq!(config.noise_w, 0.8);
    assert_eq!(config.num_speakers, 1);
    assert!(config.speaker_id_map.is_empty());
    assert_eq!(config.phoneme_type, "espeak");
    assert_eq!(config.phoneme_id_map.len(), 151);
    assert_eq!(config.phoneme_id_map["_"], vec![0]);
    assert_eq!(config.num_symbols, Some(256));
    assert_eq!(config.language.as_deref(), Some("en_US"));
    assert_eq!(config.dataset.as_deref(), Some("joe"));
    assert!(!config.is_multi_speaker());
}

#[test]
fn the_reference_ids_are_this_voices() {
    // `^ _ p _ p _ … $`: each phoneme's id, as the config maps it.
    let config = joe_config();
    let map = &config.phoneme_id_map;
    assert_eq!(HELLO_WORLD[..2], [map["^"][0], map["_"][0]]);
    assert_eq!(HELLO_WORLD[HELLO_WORLD.len() - 1], map["$"][0]);
    for (i, phoneme) in HELLO_WORLD_PHONEMES.iter().enumerate() {
        assert_eq!(HELLO_WORLD[2 + 2 * i], map[*phoneme][0], "{phoneme}");
        assert_eq!(HELLO_WORLD[3 + 2 * i], map["_"][0]);
    }
}

#[test]
fn scales_follow_the_speaking_rate() {
    let config = joe_config();
    let normal = config.scales(1.0);
    assert_eq!(
        normal,
        Scales {
            noise: 0.667,
            length: 1.0,
            noise_w: 0.8
        }
    );
    assert_eq!(config.scales(2.0).length, 0.5);
    assert_eq!(config.scales(0.5).length, 2.0);
    assert_eq!(config.scales(10.0).length, 0.5, "clamped to 2.0");
    assert_eq!(config.scales(0.0).length, 2.0, "clamped to 0.5");
    assert_eq!(config.scales(f32::NAN).length, 1.0);
    assert_eq!(config.scales(2.0).noise, 0.667);
}

#[test]
fn hello_world_is_spoken() {
    let mut model = joe();
    assert_eq!(model.sample_rate(), 22050);
    let scales = model.config().scales(1.0);
    let audio = model.synthesize(&HELLO_WORLD, scales, None).unwrap();
    let seconds = audio.len() as f32 / 22050.0;
    assert!(
        (0.5..=3.0).contains(&seconds),
        "{seconds} s for \"Hello, world!\""
    );
    let peak = audio.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    assert!(peak > 0.05, "peak {peak}: silent");
    assert!(rms(&audio) > 0.005, "rms {}: silent", rms(&audio));
}

#[test]
fn without_noise_the_output_is_deterministic() {
    let mut model = joe();
    let scales = silent_scales(model.config(), 1.0);
    let first = model.synthesize(&HELLO_WORLD, scales, None).unwrap();
    let second = model.synthesize(&HELLO_WORLD, scales, None).unwrap();
    assert!(!first.is_empty());
    assert!(first == second, "same ids, noise 0: samples differ");
}

#[test]
fn faster_speech_is_shorter() {
    let mut model = joe();
    let config = model.config().clone();
    let fast = model
        .synthesize(&HELLO_WORLD, silent_scales(&config, 2.0), None)
        .unwrap();
    let slow = model
        .synthesize(&HELLO_WORLD, silent_scales(&config, 0.5), None)
        .unwrap();
    // Four times the length scale; durations are rounded up per phoneme, so
    // not exactly 4×.
    assert!(
        slow.len() > 3 * fast.len(),
        "rate 0.5: {} samples, rate 2.0: {} samples",
        slow.len(),
        fast.len()
    );
}

#[test]
fn a_sentence_has_speech_of_plausible_length() {
    // How fast it is made is measured by `hark-bench tts`, not asserted here.
    let mut model = joe();
    let scales = model.config().scales(1.0);
    let audio = model.synthesize(&QUICK_BROWN_FOX, scales, None).unwrap();
    let seconds = audio.len() as f32 / 22050.0;
    assert!((2.0..=7.0).contains(&seconds), "{seconds} s");
    assert!(rms(&audio) > 0.005);
}

#[test]
fn normalize_peaks_at_one_and_keeps_silence() {
    let mut audio = joe()
        .synthesize(&HELLO_WORLD, joe_config().scales(1.0), None)
        .unwrap();
    let before: Vec<f32> = audio.clone();
    normalize(&mut audio);
    let peak = audio.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    assert_eq!(peak, 1.0);
    // A gain, not a distortion: every sample scales by the same factor.
    let gain = audio[before.len() / 2] / before[before.len() / 2];
    for (a, b) in audio.iter().zip(&before) {
        assert!((a - b * gain).abs() < 1e-5);
    }

    let mut silence = vec![0.0f32; 1000];
    normalize(&mut silence);
    assert!(silence.iter().all(|s| *s == 0.0));

    // Near-silence is raised ×100 at most, not to full scale.
    let mut hiss = vec![0.001f32, -0.002, 0.0005];
    normalize(&mut hiss);
    assert!((hiss[1] + 0.2).abs() < 1e-6, "{hiss:?}");

    let mut empty: Vec<f32> = Vec::new();
    normalize(&mut empty);

    let mut broken = vec![0.5f32, f32::NAN, -0.25, f32::INFINITY];
    assert_eq!(normalize(&mut broken), 0.5, "the peak before scaling");
    assert_eq!(broken, vec![1.0, 0.0, -0.5, 0.0]);
}

#[test]
fn the_rest_of_a_sentence_keeps_its_first_piece_gain_unless_it_would_clip() {
    let mut first = vec![0.2f32, -0.4, 0.1];
    let peak = normalize(&mut first);
    assert_eq!((peak, first[1]), (0.4, -1.0));
    // Quieter than the first piece: scaled by the same 1 / 0.4, so the
    // model's own level step between the pieces is kept.
    let mut quieter = vec![0.1f32, -0.2];
    assert_eq!(normalize_shared(&mut quieter, peak), 0.2);
    assert_eq!(quieter, vec![0.25, -0.5]);
    // Louder: turned down to full scale, never past it.
    let mut louder = vec![0.8f32, -0.2];
    assert_eq!(normalize_shared(&mut louder, peak), 0.8);
    assert_eq!(louder, vec![1.0, -0.25]);
    // Near-silence keeps the floor; a broken shared peak is ignored.
    let mut hiss = vec![0.001f32, -0.002];
    normalize_shared(&mut hiss, f32::NAN);
    assert!((hiss[1] + 0.2).abs() < 1e-6, "{hiss:?}");
}

#[test]
fn bad_requests_are_errors() {
    let mut model = joe();
    let scales = model.config().scales(1.0);
    assert!(matches!(
        model.synthesize(&[], scales, None),
        Err(PiperError::EmptyIds)
    ));
    match model.synthesize(&[1, 0, 300, 0, 2], scales, None) {
        Err(PiperError::BadId {
            id: 300,
            position: 2,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        model.synthesize(&[1, -1, 2], scales, None),
        Err(PiperError::BadId { id: -1, .. })
    ));
    for bad in [
        Scales {
            length: 0.0,
            ..scales
        },
        Scales {
            noise: -0.1,
            ..scales
        },
        Scales {
            noise_w: f32::NAN,
            ..scales
        },
        Scales {
            length: f32::INFINITY,
            ..scales
        },
    ] {
        assert!(
            matches!(
                model.synthesize(&HELLO_WORLD, bad, None),
                Err(PiperError::BadScales { .. })
            ),
            "{bad:?}"
        );
    }
    let err = model.synthesize(&HELLO_WORLD, scales, Some(1)).unwrap_err();
    assert!(matches!(err, PiperError::Speaker(_)), "{err}");
    // The model still speaks after refusing.
    assert!(
        !model
            .synthesize(&HELLO_WORLD, scales, None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn models_and_errors_cross_threads() {
    // The appliance speaks from a blocking task and reports errors through
    // anyhow: both need these bounds.
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<PiperModel>();
    send_sync::<OnnxRuntime>();
    send_sync::<PiperError>();
    send_sync::<VoiceError>();
    send_sync::<VoiceConfig>();
}

#[test]
fn the_runtime_loads_once() {
    let rt = runtime();
    let again = runtime();
    assert_eq!(rt.library(), again.library());
    // The installed symlink is the same file: not a second runtime.
    let via_link = OnnxRuntime::load(&voices_root().join("lib/libonnxruntime.so")).unwrap();
    assert_eq!(via_link.library(), rt.library());

    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("libonnxruntime.so.1.31.1");
    std::fs::copy(library(), &other).unwrap();
    match OnnxRuntime::load(&other) {
        Err(e @ RuntimeError::AlreadyLoaded { .. }) => {
            let message = e.to_string();
            assert!(message.contains(&other.display().to_string()), "{message}");
            assert!(
                message.contains(&rt.library().display().to_string()),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missing_model_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nobody.onnx");
    let err = PiperModel::load(&runtime(), &missing, joe_config(), 1).unwrap_err();
    assert!(matches!(err, PiperError::ModelRead { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );

    let err = PiperModel::load(&runtime(), dir.path(), joe_config(), 1).unwrap_err();
    assert!(matches!(err, PiperError::ModelRead { .. }), "{err:?}");
}

#[test]
fn a_corrupt_model_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = dir.path().join("corrupt.onnx");
    // Deterministic "random" bytes (xorshift): no rand dependency.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    std::fs::write(&corrupt, bytes).unwrap();
    let err = PiperModel::load(&runtime(), &corrupt, joe_config(), 1).unwrap_err();
    assert!(matches!(err, PiperError::ModelInvalid { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&corrupt.display().to_string()),
        "{err}"
    );

    // An interrupted download: the real model cut in half.
    let truncated = dir.path().join("truncated.onnx");
    let model = std::fs::read(model_path()).unwrap();
    std::fs::write(&truncated, &model[..model.len() / 2]).unwrap();
    let err = PiperModel::load(&runtime(), &truncated, joe_config(), 1).unwrap_err();
    assert!(matches!(err, PiperError::ModelInvalid { .. }), "{err:?}");

    let empty = dir.path().join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    let err = PiperModel::load(&runtime(), &empty, joe_config(), 1).unwrap_err();
    assert!(matches!(err, PiperError::ModelInvalid { .. }), "{err:?}");
}

#[test]
fn a_config_claiming_speakers_the_model_lacks_is_refused() {
    let mut config = joe_config();
    config.num_speakers = 4;
    let err = PiperModel::load(&runtime(), &model_path(), config, 1).unwrap_err();
    assert!(matches!(err, PiperError::ModelInterface { .. }), "{err:?}");
    assert!(err.to_string().contains("\"sid\""), "{err}");
}

/// Protobuf, by hand: enough to write a valid ONNX model that is not a
/// piper voice (one Identity node, float input "x", output "y").
mod onnx {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn bytes(out: &mut Vec<u8>, field: u64, data: &[u8]) {
        varint(out, (field << 3) | 2);
        varint(out, data.len() as u64);
        out.extend_from_slice(data);
    }

    fn number(out: &mut Vec<u8>, field: u64, v: u64) {
        varint(out, field << 3);
        varint(out, v);
    }

    fn value_info(name: &str) -> Vec<u8> {
        let mut dim = Vec::new();
        bytes(&mut dim, 2, b"n"); // Dimension.dim_param
        let mut shape = Vec::new();
        bytes(&mut shape, 1, &dim); // TensorShapeProto.dim
        let mut tensor = Vec::new();
        number(&mut tensor, 1, 1); // elem_type FLOAT
        bytes(&mut tensor, 2, &shape);
        let mut ty = Vec::new();
        bytes(&mut ty, 1, &tensor); // TypeProto.tensor_type
        let mut info = Vec::new();
        bytes(&mut info, 1, name.as_bytes());
        bytes(&mut info, 2, &ty);
        info
    }

    pub fn identity_model() -> Vec<u8> {
        let mut node = Vec::new();
        bytes(&mut node, 1, b"x");
        bytes(&mut node, 2, b"y");
        bytes(&mut node, 4, b"Identity");
        let mut graph = Vec::new();
        bytes(&mut graph, 1, &node);
        bytes(&mut graph, 2, b"not-piper");
        bytes(&mut graph, 11, &value_info("x"));
        bytes(&mut graph, 12, &value_info("y"));
        let mut opset = Vec::new();
        number(&mut opset, 2, 13);
        let mut model = Vec::new();
        number(&mut model, 1, 8); // ir_version
        bytes(&mut model, 8, &opset);
        bytes(&mut model, 7, &graph);
        model
    }
}

#[test]
fn a_model_that_is_not_a_piper_voice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("identity.onnx");
    std::fs::write(&path, onnx::identity_model()).unwrap();
    let err = PiperModel::load(&runtime(), &path, joe_config(), 1).unwrap_err();
    match &err {
        PiperError::ModelInterface { problem, .. } => {
            assert!(problem.contains("no input \"input\""), "{problem}");
            assert!(problem.contains("\"x\""), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

// Config validation: every rule, each naming its field.

fn joe_json() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(config_path()).unwrap()).unwrap()
}

/// Applies `edit` to joe's config and expects the error to name `field`.
fn expect_field(field: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut json = joe_json();
    edit(&mut json);
    let err = VoiceConfig::from_json(&json.to_string()).unwrap_err();
    assert_eq!(err.field(), Some(field), "{err}");
    assert!(err.to_string().contains(&format!("`{field}`")), "{err}");
}

fn remove(json: &mut serde_json::Value, path: &[&str]) {
    let (last, parents) = path.split_last().unwrap();
    let mut value = json;
    for key in parents {
        value = &mut value[*key];
    }
    value.as_object_mut().unwrap().remove(*last);
}

#[test]
fn invalid_configs_name_the_field() {
    use serde_json::json;
    expect_field("audio.sample_rate", |j| {
        j["audio"]["sample_rate"] = json!(4000)
    });
    expect_field("audio.sample_rate", |j| {
        j["audio"]["sample_rate"] = json!(96000)
    });
    expect_field("audio.sample_rate", |j| {
        j["audio"]["sample_rate"] = json!(-22050)
    });
    expect_field("audio.sample_rate", |j| {
        j["audio"]["sample_rate"] = json!("22050")
    });
    expect_field("audio.sample_rate", |j| {
        j["audio"]["sample_rate"] = json!(22050.5)
    });
    expect_field("audio.sample_rate", |j| {
        remove(j, &["audio", "sample_rate"])
    });
    expect_field("audio.sample_rate", |j| remove(j, &["audio"]));
    expect_field("audio", |j| j["audio"] = json!(22050));
    expect_field("espeak.voice", |j| remove(j, &["espeak", "voice"]));
    expect_field("espeak.voice", |j| j["espeak"]["voice"] = json!(""));
    expect_field("espeak.voice", |j| j["espeak"]["voice"] = json!(7));
    expect_field("phoneme_type", |j| j["phoneme_type"] = json!("text"));
    expect_field("phoneme_type", |j| j["phoneme_type"] = json!(1));
    expect_field("phoneme_id_map", |j| j["phoneme_id_map"] = json!({}));
    expect_field("phoneme_id_map", |j| remove(j, &["phoneme_id_map"]));
    expect_field("phoneme_id_map", |j| j["phoneme_id_map"] = json!(["a"]));
    expect_field("phoneme_id_map", |j| j["phoneme_id_map"]["a"] = json!([]));
    expect_field("phoneme_id_map", |j| j["phoneme_id_map"]["a"] = json!([-1]));
    expect_field("phoneme_id_map", |j| {
        j["phoneme_id_map"]["a"] = json!([256])
    });
    expect_field("phoneme_id_map", |j| {
        j["phoneme_id_map"]["a"] = json!(["1"])
    });
    expect_field("phoneme_id_map", |j| remove(j, &["phoneme_id_map", "^"]));
    expect_field("phoneme_id_map", |j| remove(j, &["phoneme_id_map", "_"]));
    expect_field("phoneme_id_map", |j| remove(j, &["phoneme_id_map", "$"]));
    expect_field("inference.noise_scale", |j| {
        j["inference"]["noise_scale"] = json!(-0.1)
    });
    expect_field("inference.noise_scale", |j| {
        j["inference"]["noise_scale"] = json!("0.6")
    });
    expect_field("inference.length_scale", |j| {
        j["inference"]["length_scale"] = json!(0)
    });
    expect_field("inference.length_scale", |j| {
        j["inference"]["length_scale"] = json!(-1.0)
    });
    expect_field("inference.length_scale", |j| {
        j["inference"]["length_scale"] = json!(1e300)
    });
    expect_field("inference.noise_w", |j| {
        j["inference"]["noise_w"] = json!(-0.8)
    });
    expect_field("inference", |j| j["inference"] = json!([0.667, 1, 0.8]));
    expect_field("num_speakers", |j| j["num_speakers"] = json!(0));
    expect_field("num_speakers", |j| remove(j, &["num_speakers"]));
    expect_field("num_speakers", |j| j["num_speakers"] = json!(1.5));
    expect_field("num_symbols", |j| j["num_symbols"] = json!(0));
    expect_field("speaker_id_map", |j| {
        j["speaker_id_map"] = json!({"joe": 1})
    });
    expect_field("speaker_id_map", |j| j["speaker_id_map"] = json!(["joe"]));
    expect_field("language.code", |j| j["language"]["code"] = json!(5));
    expect_field("dataset", |j| j["dataset"] = json!(["joe"]));
    expect_field("(top level)", |j| *j = json!([1, 2, 3]));
}

#[test]
fn optional_config_fields_take_pipers_defaults() {
    let mut json = joe_json();
    for key in [
        "inference",
        "phoneme_type",
        "num_symbols",
        "speaker_id_map",
        "language",
        "dataset",
    ] {
        json.as_object_mut().unwrap().remove(key);
    }
    remove(&mut json, &["audio", "quality"]);
    let config = VoiceConfig::from_json(&json.to_string()).unwrap();
    assert_eq!(
        (config.noise_scale, config.length_scale, config.noise_w),
        (0.667, 1.0, 0.8)
    );
    assert_eq!(config.phoneme_type, "espeak");
    assert_eq!(config.num_symbols, None);
    assert_eq!(config.quality, None);
    assert_eq!(config.language, None);

    // A multi-speaker voice's map is kept.
    let mut json = joe_json();
    json["num_speakers"] = serde_json::json!(2);
    json["speaker_id_map"] = serde_json::json!({"a": 0, "b": 1});
    let config = VoiceConfig::from_json(&json.to_string()).unwrap();
    assert!(config.is_multi_speaker());
    assert_eq!(config.speaker_id_map["b"], 1);
}

#[test]
fn unreadable_configs_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.onnx.json");
    let err = VoiceConfig::from_path(&missing).unwrap_err();
    assert!(matches!(err, VoiceError::Read { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&missing.display().to_string()),
        "{err}"
    );

    let broken = dir.path().join("broken.onnx.json");
    std::fs::write(&broken, "{\"audio\": ").unwrap();
    let err = VoiceConfig::from_path(&broken).unwrap_err();
    assert!(matches!(err, VoiceError::Json { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&broken.display().to_string()),
        "{err}"
    );

    let mut json = joe_json();
    json["audio"]["sample_rate"] = serde_json::json!(1);
    let bad = dir.path().join("bad.onnx.json");
    std::fs::write(&bad, json.to_string()).unwrap();
    let err = VoiceConfig::from_path(&bad).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&bad.display().to_string()), "{message}");
    assert!(message.contains("audio.sample_rate"), "{message}");
}
