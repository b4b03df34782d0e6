//! The voice store: installs over real HTTP on loopback (checksums,
//! resume, errors), installs from local files, validation, removal,
//! listing with the catalog and with voices `appliance/setup-voices` put
//! in the directory, and both spellings of voice ids.

// The model store's loopback HTTP server and checksum helpers: the same
// server, so both stores are tested against the same failures.
#[path = "../../models/tests/common/mod.rs"]
mod common;

use std::{
    fs,
    path::{Path, PathBuf},
};

use common::{Behaviour, Server, assert_empty, dir_names, md5_hex, noise, sha256_hex};
use hark_models::{Expected, FetchError, FetchOptions, Progress, ProgressEvent};
use hark_tts::{
    catalog,
    voices::{
        ADOPTED, FileOptions, InstalledFromUrl, InstalledVoice, OnnxProblem, Problem, VoiceRequest,
        VoiceStore, VoicesError, check_onnx,
    },
};

const SETUP: &str = "run `appliance/setup-voices tests/.voices/lib tests/.voices/voices` in the workspace root first";

/// Larger than the 256 KiB read size, so a download takes several reads.
const WEIGHTS: usize = 700_000;

// ---- fake voices ----

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_varint(field: u64, v: u64, out: &mut Vec<u8>) {
    varint(field << 3, out);
    varint(v, out);
}

fn field_bytes(field: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint((field << 3) | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn value_info(name: &str) -> Vec<u8> {
    let mut info = Vec::new();
    field_bytes(1, name.as_bytes(), &mut info);
    // A type (field 2) as real models have, so the name is not alone.
    field_bytes(2, &[0x0a, 0x02, 0x08, 0x07], &mut info);
    info
}

/// An ONNX `ModelProto` as piper exports them, with `inputs` as the graph's
/// inputs and `weights` bytes of noise (different for each `seed`) as an
/// initializer.
fn fake_onnx_with(inputs: &[&str], weights: usize, seed: u32) -> Vec<u8> {
    let mut node = Vec::new();
    field_bytes(1, b"input", &mut node);
    field_bytes(2, b"output", &mut node);
    field_bytes(4, b"Gather", &mut node);
    let mut tensor = Vec::new();
    field_varint(1, (weights / 4) as u64, &mut tensor);
    field_bytes(8, b"emb.weight", &mut tensor);
    field_bytes(9, &noise(weights, seed), &mut tensor);

    let mut graph = Vec::new();
    for _ in 0..50 {
        field_bytes(1, &node, &mut graph);
    }
    field_bytes(2, b"main_graph", &mut graph);
    field_bytes(5, &tensor, &mut graph);
    for name in inputs {
        field_bytes(11, &value_info(name), &mut graph);
    }
    field_bytes(12, &value_info("output"), &mut graph);

    let mut opset = Vec::new();
    field_varint(2, 15, &mut opset);
    let mut model = Vec::new();
    field_varint(1, 8, &mut model);
    field_bytes(2, b"pytorch", &mut model);
    field_bytes(3, b"2.0.0", &mut model);
    field_bytes(7, &graph, &mut model);
    field_bytes(8, &opset, &mut model);
    model
}

fn fake_onnx(seed: u32) -> Vec<u8> {
    fake_onnx_with(&["input", "input_lengths", "scales"], WEIGHTS, seed)
}

/// A valid piper config; `sample_rate` varies it between voices.
fn config_json(sample_rate: u32) -> Vec<u8> {
    format!(
        r#"{{
  "audio": {{"sample_rate": {sample_rate}, "quality": "low"}},
  "espeak": {{"voice": "en-us"}},
  "inference": {{"noise_scale": 0.667, "length_scale": 1, "noise_w": 0.8}},
  "phoneme_type": "espeak",
  "num_symbols": 10,
  "num_speakers": 1,
  "phoneme_id_map": {{"_": [0], "^": [1], "$": [2], " ": [3], "a": [4]}},
  "language": {{"code": "en_US"}},
  "dataset": "test"
}}
"#
    )
    .into_bytes()
}

/// Writes a voice's two files into `dir` as `<name>.onnx` and
/// `<name>.onnx.json`; returns their paths.
fn write_voice(dir: &Path, name: &str, onnx: &[u8], json: &[u8]) -> (PathBuf, PathBuf) {
    fs::create_dir_all(dir).unwrap();
    let onnx_path = dir.join(format!("{name}.onnx"));
    let json_path = dir.join(format!("{name}.onnx.json"));
    fs::write(&onnx_path, onnx).unwrap();
    fs::write(&json_path, json).unwrap();
    (onnx_path, json_path)
}

/// Installs a fake voice from files named `<name>.onnx(.json)` in `dir`.
fn install_fake(store: &VoiceStore, dir: &Path, name: &str, seed: u32) -> InstalledVoice {
    let (onnx, json) = write_voice(
        &dir.join("src"),
        name,
        &fake_onnx(seed),
        &config_json(16_000),
    );
    store.install_files(&onnx, &json).unwrap()
}

fn store() -> (tempfile::TempDir, VoiceStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = VoiceStore::open(dir.path().join("voices")).unwrap();
    (dir, store)
}

/// A server with one voice, `<id>.onnx` and `<id>.onnx.json`, under `/v/`.
fn serve_voice(id: &str, onnx: &[u8], json: &[u8]) -> Server {
    Server::start(Behaviour {
        files: vec![
            (format!("/v/{id}.onnx"), onnx.to_vec()),
            (format!("/v/{id}.onnx.json"), json.to_vec()),
        ],
        ..Behaviour::default()
    })
}

/// What the catalog would say of these files: size and MD5.
fn published(server: &Server, id: &str, onnx: &[u8], json: &[u8]) -> VoiceRequest {
    let expected = |bytes: &[u8]| Expected {
        md5: Some(md5_hex(bytes)),
        size: Some(bytes.len() as u64),
        ..Expected::default()
    };
    let mut request = VoiceRequest::url(&server.url(&format!("/v/{id}.onnx")), None).unwrap();
    request.onnx.expected = expected(onnx);
    request.json.expected = expected(json);
    request
}

fn install_recording(
    store: &VoiceStore,
    request: &VoiceRequest,
) -> (Result<InstalledFromUrl, VoicesError>, Vec<ProgressEvent>) {
    let mut events = Vec::new();
    let mut record = |e: &ProgressEvent| events.push(e.clone());
    let result = store.install_request(
        request,
        &FetchOptions::default(),
        Progress::Callback(&mut record),
    );
    (result, events)
}

/// `tests/.voices` in the workspace root (this crate is appliance/tts).
fn setup_voices_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.ancestors().nth(2).unwrap_or(manifest);
    root.join("tests/.voices/voices")
}

// ---- downloads ----

#[test]
fn a_download_matching_the_published_checksums_is_installed() {
    let (onnx, json) = (fake_onnx(1), config_json(16_000));
    let id = "en_US-test-low";
    let server = serve_voice(id, &onnx, &json);
    let (_dir, store) = store();
    let request = published(&server, id, &onnx, &json);

    let (result, events) = install_recording(&store, &request);
    let installed = result.unwrap();

    let v = &installed.voice;
    assert_eq!(v.id, id);
    assert_eq!(
        (v.size, v.sha256.as_str()),
        (onnx.len() as u64, sha256_hex(&onnx).as_str())
    );
    assert_eq!(v.json_sha256, sha256_hex(&json));
    assert_eq!(
        (v.language.as_deref(), v.quality.as_deref()),
        (Some("en_US"), Some("low"))
    );
    assert_eq!((v.sample_rate, v.num_speakers), (16_000, 1));
    assert_eq!(v.source, server.url(&format!("/v/{id}.onnx")));
    assert!(installed.onnx.md5 && installed.onnx.size && installed.json.md5);
    assert_eq!(installed.resumed_from, 0);
    assert_eq!(fs::read(&v.onnx).unwrap(), onnx);
    assert_eq!(fs::read(&v.json).unwrap(), json);
    let summary = installed.to_string();
    assert!(summary.contains("matches the published md5"), "{summary}");
    // The config first, then the model; each its own Started … Finished.
    let paths: Vec<String> = server.seen().iter().map(|s| s.path.clone()).collect();
    assert_eq!(
        paths,
        [format!("/v/{id}.onnx.json"), format!("/v/{id}.onnx")]
    );
    let finished = events
        .iter()
        .filter(|e| **e == ProgressEvent::Finished)
        .count();
    assert_eq!(finished, 2);
    assert_eq!(
        dir_names(store.dir()),
        [
            "en_US-test-low.onnx",
            "en_US-test-low.onnx.json",
            "manifest.json"
        ]
    );
    assert_eq!(store.get(id).unwrap(), Some(v.clone()));
    // The manifest on disk says the same.
    let reopened = VoiceStore::open(store.dir()).unwrap();
    assert_eq!(reopened.get(id).unwrap(), Some(v.clone()));
}

#[test]
fn a_url_without_checksums_installs_unverified_and_says_so() {
    let (onnx, json) = (fake_onnx(2), config_json(22_050));
    // Hugging Face's links end in `?download=true`; both files keep it.
    let server = Server::start(Behaviour {
        files: vec![
            ("/v/my-voice.onnx?download=true".into(), onnx.clone()),
            ("/v/my-voice.onnx.json?download=true".into(), json.clone()),
        ],
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    // The `.onnx.json` URL names the voice as well; the bar's code path
    // runs (drawn nowhere: stderr is not a terminal under the harness).
    let url = server.url("/v/my-voice.onnx.json?download=true");
    let installed = store.install_url(&url, Progress::Bar).unwrap();
    assert_eq!(installed.voice.id, "my-voice");
    assert!(!installed.onnx.is_verified());
    let summary = installed.to_string();
    assert!(
        summary.contains("NOT verified") && summary.contains(&sha256_hex(&onnx)),
        "{summary}"
    );
    let seen: Vec<String> = server.seen().iter().map(|s| s.path.clone()).collect();
    assert_eq!(
        seen,
        [
            "/v/my-voice.onnx.json?download=true",
            "/v/my-voice.onnx?download=true"
        ]
    );
}

#[test]
fn a_wrong_checksum_is_refused_and_nothing_is_left() {
    let (onnx, json) = (fake_onnx(3), config_json(16_000));
    let id = "en_US-test-low";
    let server = serve_voice(id, &onnx, &json);
    let (_dir, store) = store();
    let mut request = published(&server, id, &onnx, &json);
    let wrong = "0".repeat(32);
    request.onnx.expected.md5 = Some(wrong.clone());

    let err = install_recording(&store, &request).0.unwrap_err();
    match &err {
        VoicesError::Fetch(FetchError::ChecksumMismatch {
            algorithm,
            expected,
            actual,
            url,
        }) => {
            assert_eq!(*algorithm, "md5");
            assert_eq!(*expected, wrong);
            assert_eq!(*actual, md5_hex(&onnx));
            assert!(url.ends_with(".onnx"), "{url}");
        }
        other => panic!("expected a checksum mismatch, got {other:?}"),
    }
    assert!(err.to_string().contains(&wrong), "{err}");
    assert_eq!(store.get(id).unwrap(), None);
    assert!(store.list().unwrap().installed.is_empty());
    assert_empty(store.dir());

    // A wrong SHA-256 given with a URL is refused the same way.
    let url = server.url(&format!("/v/{id}.onnx"));
    let request = VoiceRequest::url(&url, Some(&"ab".repeat(32))).unwrap();
    let err = install_recording(&store, &request).0.unwrap_err();
    assert!(
        matches!(
            err,
            VoicesError::Fetch(FetchError::ChecksumMismatch {
                algorithm: "sha256",
                ..
            })
        ),
        "{err:?}"
    );
    assert_empty(store.dir());
}

#[test]
fn an_interrupted_download_resumes() {
    let (onnx, json) = (fake_onnx(4), config_json(16_000));
    let id = "en_US-test-low";
    let cut = 300_000;
    let server = Server::start(Behaviour {
        files: vec![
            (format!("/v/{id}.onnx"), onnx.clone()),
            (format!("/v/{id}.onnx.json"), json.clone()),
        ],
        drop_after: Some(cut),
        faults: 1,
        fault_path: Some(format!("/v/{id}.onnx")),
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let request = published(&server, id, &onnx, &json);

    let err = install_recording(&store, &request).0.unwrap_err();
    match &err {
        VoicesError::Fetch(FetchError::Interrupted { received, part, .. }) => {
            assert_eq!(*received, cut as u64);
            assert_eq!(fs::read(part).unwrap(), onnx[..cut]);
        }
        other => panic!("expected an interruption, got {other:?}"),
    }
    assert!(err.to_string().contains("resumes it"), "{err}");
    let listing = store.list().unwrap();
    assert!(listing.installed.is_empty());
    let partial: Vec<(&str, u64)> = listing
        .partial
        .iter()
        .map(|p| (p.name.as_str(), p.bytes))
        .collect();
    assert_eq!(
        partial,
        [
            ("en_US-test-low.onnx", cut as u64),
            ("en_US-test-low.onnx.json", json.len() as u64)
        ]
    );

    let (result, events) = install_recording(&store, &request);
    let installed = result.unwrap();

    // The config's part was whole (416), the model's continued (206).
    let seen = server.seen();
    let tail: Vec<(Option<String>, u16)> = seen[2..]
        .iter()
        .map(|s| (s.range.clone(), s.status))
        .collect();
    assert_eq!(
        tail,
        [
            (Some(format!("bytes={}-", json.len())), 416),
            (Some(format!("bytes={cut}-")), 206)
        ]
    );
    assert_eq!(installed.resumed_from, (cut + json.len()) as u64);
    assert!(installed.onnx.md5 && installed.json.md5);
    assert_eq!(
        fs::read(&installed.voice.onnx).unwrap(),
        onnx,
        "the resumed file differs"
    );
    assert!(events.contains(&ProgressEvent::Started {
        total: Some(onnx.len() as u64),
        resumed_from: cut as u64
    }));
    assert_eq!(
        dir_names(store.dir()),
        [
            "en_US-test-low.onnx",
            "en_US-test-low.onnx.json",
            "manifest.json"
        ]
    );
}

#[test]
fn a_404_names_the_url_and_installs_nothing() {
    let onnx = fake_onnx(5);
    // The model is there, its config is not.
    let server = Server::start(Behaviour {
        files: vec![("/v/lonely.onnx".to_owned(), onnx)],
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let url = server.url("/v/lonely.onnx");
    let err = store.install_url(&url, Progress::Silent).unwrap_err();
    let json_url = format!("{url}.json");
    assert!(
        matches!(&err, VoicesError::Fetch(FetchError::Status { url, status: 404 }) if *url == json_url),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&json_url) && message.contains("404 Not Found"),
        "{message}"
    );
    assert_eq!(
        server.seen().len(),
        1,
        "the model is not fetched without its config"
    );
    assert_empty(store.dir());
}

#[test]
fn downloads_that_are_not_a_voice_are_refused_and_deleted() {
    let id = "bad";
    let json = config_json(16_000);
    let page = b"<!DOCTYPE html><html><body>Sign in to continue</body></html>\n".repeat(10);
    let server = serve_voice(id, &page, &json);
    let (_dir, store) = store();
    let url = server.url("/v/bad.onnx");
    let err = store.install_url(&url, Progress::Silent).unwrap_err();
    assert!(
        matches!(&err, VoicesError::NotOnnx { file, problem: OnnxProblem::Text(_) } if *file == url),
        "{err:?}"
    );
    assert_empty(store.dir());

    // A config Hark cannot use is refused before the model is fetched,
    // naming the field.
    let mut broken: serde_json::Value = serde_json::from_slice(&json).unwrap();
    broken["espeak"] = serde_json::json!({});
    server.set(|b| {
        b.files = vec![
            ("/v/bad.onnx".to_owned(), fake_onnx(6)),
            (
                "/v/bad.onnx.json".to_owned(),
                serde_json::to_vec(&broken).unwrap(),
            ),
        ]
    });
    let requests_before = server.seen().len();
    let err = store.install_url(&url, Progress::Silent).unwrap_err();
    assert!(
        matches!(err, VoicesError::DownloadedConfig { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("espeak.voice") && message.contains(".onnx.json"),
        "{message}"
    );
    assert_eq!(
        server.seen().len(),
        requests_before + 1,
        "only the config was fetched"
    );
    assert_empty(store.dir());
}

#[test]
fn an_installed_voice_is_refused_before_downloading_unless_replaced() {
    let (onnx, json) = (fake_onnx(7), config_json(16_000));
    let server = serve_voice("v", &onnx, &json);
    let (_dir, store) = store();
    let request = VoiceRequest::url(&server.url("/v/v.onnx"), None).unwrap();
    install_recording(&store, &request).0.unwrap();

    let err = install_recording(&store, &request).0.unwrap_err();
    assert!(
        matches!(&err, VoicesError::Exists { id } if id == "v"),
        "{err:?}"
    );
    assert!(err.to_string().contains("--replace"), "{err}");
    assert_eq!(server.seen().len(), 2, "no second download");

    let newer = fake_onnx(8);
    server.set(|b| b.files[0].1 = newer.clone());
    let replace = FetchOptions {
        replace: true,
        ..FetchOptions::default()
    };
    let installed = store
        .install_request(&request, &replace, Progress::Silent)
        .unwrap();
    assert_eq!(fs::read(&installed.voice.onnx).unwrap(), newer);
    assert_eq!(store.list().unwrap().installed.len(), 1);
}

// ---- local files ----

#[test]
fn local_files_are_validated_copied_and_recorded() {
    let (dir, store) = store();
    let (onnx, json) = (fake_onnx(9), config_json(22_050));
    let (onnx_path, json_path) =
        write_voice(&dir.path().join("src"), "en_US-mine-medium", &onnx, &json);

    let v = store.install_files(&onnx_path, &json_path).unwrap();

    assert_eq!(v.id, "en_US-mine-medium");
    assert_eq!(
        (v.size, v.sha256.clone()),
        (onnx.len() as u64, sha256_hex(&onnx))
    );
    assert_eq!(
        (v.json_size, v.json_sha256.clone()),
        (json.len() as u64, sha256_hex(&json))
    );
    assert_eq!(v.sample_rate, 22_050);
    assert_eq!(v.source, format!("installed from {}", onnx_path.display()));
    assert_eq!(v.onnx, store.dir().join("en_US-mine-medium.onnx"));
    assert_eq!(v.json, store.dir().join("en_US-mine-medium.onnx.json"));
    assert_eq!(fs::read(&v.onnx).unwrap(), onnx);
    assert_eq!(fs::read(&v.json).unwrap(), json);
    assert!(onnx_path.is_file(), "the original stays where it was");
    // No temporary files left behind.
    assert_eq!(
        dir_names(store.dir()),
        [
            "en_US-mine-medium.onnx",
            "en_US-mine-medium.onnx.json",
            "manifest.json"
        ]
    );
    assert_eq!(store.get("en_US-mine-medium").unwrap(), Some(v.clone()));

    // Another id for the same files.
    let options = FileOptions {
        id: Some("custom".into()),
        replace: false,
    };
    let custom = store
        .install_files_with(&onnx_path, &json_path, &options)
        .unwrap();
    assert_eq!(custom.id, "custom");
    assert!(store.dir().join("custom.onnx").is_file());

    // A file name that is not <id>.onnx needs an id.
    let odd = dir.path().join("src/model.bin");
    fs::write(&odd, &onnx).unwrap();
    let err = store.install_files(&odd, &json_path).unwrap_err();
    assert!(matches!(err, VoicesError::NoId { .. }), "{err:?}");
    // An id that would reach outside the directory is refused.
    let options = FileOptions {
        id: Some("../escape".into()),
        replace: false,
    };
    let err = store
        .install_files_with(&onnx_path, &json_path, &options)
        .unwrap_err();
    assert!(matches!(err, VoicesError::BadId { .. }), "{err:?}");
}

#[test]
fn an_invalid_config_is_refused_naming_the_field() {
    let (dir, store) = store();
    let src = dir.path().join("src");
    let cases: [(&str, &[u8], &str); 4] = [
        ("no_rate", br#"{"audio": {}}"#, "audio.sample_rate"),
        (
            "bad_speakers",
            br#"{"audio": {"sample_rate": 22050}, "espeak": {"voice": "en-us"}, "num_speakers": 0}"#,
            "num_speakers",
        ),
        (
            "no_map",
            br#"{"audio": {"sample_rate": 22050}, "espeak": {"voice": "en-us"}, "num_speakers": 1}"#,
            "phoneme_id_map",
        ),
        ("not_json", b"<html>", "not valid JSON"),
    ];
    for (name, json, named) in cases {
        let (onnx_path, json_path) = write_voice(&src, name, &fake_onnx(10), json);
        let err = store.install_files(&onnx_path, &json_path).unwrap_err();
        assert!(matches!(err, VoicesError::Config { .. }), "{name}: {err:?}");
        let message = err.to_string();
        assert!(
            message.contains(named) && message.contains(&json_path.display().to_string()),
            "{name}: {message}"
        );
    }
    assert!(store.list().unwrap().installed.is_empty());
    assert_empty(store.dir());
}

#[test]
fn a_file_that_is_not_a_piper_onnx_model_is_refused() {
    let (dir, store) = store();
    let src = dir.path().join("src");
    let json = config_json(16_000);
    let model = fake_onnx(11);
    type Check = fn(&OnnxProblem) -> bool;
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        ("empty", Vec::new(), |p| matches!(p, OnnxProblem::Empty)),
        (
            "html",
            b"<!DOCTYPE html>\n<html>Not found</html>".to_vec(),
            |p| matches!(p, OnnxProblem::Text(_)),
        ),
        ("truncated", model[..model.len() / 2].to_vec(), |p| {
            matches!(p, OnnxProblem::Truncated(_))
        }),
        ("garbage", vec![0xff, 0x07, 0x00, 0x13, 0x37], |p| {
            matches!(p, OnnxProblem::NotProtobuf(_))
        }),
        (
            "not_piper",
            fake_onnx_with(&["pixel_values"], 1000, 12),
            |p| matches!(p, OnnxProblem::NotPiper(inputs) if inputs == &["pixel_values"]),
        ),
        ("no_graph", vec![0x08, 0x08, 0x12, 0x01, b'x'], |p| {
            matches!(p, OnnxProblem::NoGraph)
        }),
    ];
    for (name, onnx, expected) in cases {
        let (onnx_path, json_path) = write_voice(&src, name, &onnx, &json);
        let err = store.install_files(&onnx_path, &json_path).unwrap_err();
        match &err {
            VoicesError::NotOnnx { file, problem } => {
                assert!(expected(problem), "{name}: {problem:?}");
                assert_eq!(*file, onnx_path.display().to_string());
            }
            other => panic!("{name}: expected NotOnnx, got {other:?}"),
        }
        assert!(err.to_string().contains("not a piper voice model"), "{err}");
    }
    assert_empty(store.dir());
}

// ---- remove ----

#[test]
fn remove_deletes_files_and_entry() {
    let (dir, store) = store();
    let v = install_fake(&store, dir.path(), "gone", 13);

    let removed = store.remove("gone").unwrap();
    assert_eq!(removed.voice, Some(v.clone()));
    assert_eq!(removed.deleted, [v.onnx.clone(), v.json.clone()]);
    assert_eq!(store.get("gone").unwrap(), None);
    assert_eq!(dir_names(store.dir()), ["manifest.json"]);

    let err = store.remove("gone").unwrap_err();
    assert!(matches!(&err, VoicesError::NotInstalled { .. }), "{err:?}");
    assert!(err.to_string().contains("no voices are installed"), "{err}");
}

#[test]
fn unknown_voices_list_the_installed_ones() {
    let (dir, store) = store();
    for name in ["b-voice", "a-voice"] {
        install_fake(&store, dir.path(), name, 14);
    }
    let err = store.voice("c-voice").unwrap_err();
    match &err {
        VoicesError::NotInstalled { id, installed, .. } => {
            assert_eq!(id, "c-voice");
            assert_eq!(installed, &["a-voice", "b-voice"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains("installed: a-voice, b-voice"),
        "{err}"
    );
    assert!(matches!(
        store.remove("c-voice"),
        Err(VoicesError::NotInstalled { .. })
    ));
    let err = VoiceRequest::catalog("en_US-nobody-low").unwrap_err();
    assert!(
        matches!(&err, VoicesError::UnknownVoice { known, .. } if known.contains(&"en_US-lessac-medium")),
        "{err:?}"
    );
}

// ---- listing, adoption, the catalog ----

#[test]
fn list_shows_installed_adopted_catalog_and_problems() {
    let joe = setup_voices_dir();
    assert!(joe.join("en_US-joe-medium.onnx").is_file(), "{SETUP}");
    let dir = tempfile::tempdir().unwrap();
    let voices = dir.path().join("voices");
    fs::create_dir_all(&voices).unwrap();
    // What appliance/setup-voices leaves: the files and no manifest.
    for file in ["en_US-joe-medium.onnx", "en_US-joe-medium.onnx.json"] {
        fs::copy(joe.join(file), voices.join(file)).unwrap();
    }
    // Half a voice, a pair that does not validate, and a stray file.
    fs::write(voices.join("half.onnx"), fake_onnx(15)).unwrap();
    write_voice(&voices, "broken", &fake_onnx(16), br#"{"audio": {}}"#);
    fs::write(voices.join("notes.txt"), "hello").unwrap();

    let store = VoiceStore::open(&voices).unwrap();
    install_fake(&store, dir.path(), "en-us-lessac-medium", 17);
    let listing = store.list().unwrap();

    let ids: Vec<&str> = listing.installed.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["en_US-joe-medium", "en_US-lessac-medium"]);
    let joe_voice = &listing.installed[0];
    let published = catalog::find("en_US-joe-medium").unwrap();
    // Adopted and hashed: the figures are the catalog's.
    assert_eq!(Some(joe_voice.sha256.as_str()), published.onnx.sha256);
    assert_eq!(Some(joe_voice.json_sha256.as_str()), published.json.sha256);
    assert_eq!(
        (joe_voice.size, joe_voice.json_size),
        (published.onnx.size, published.json.size)
    );
    assert_eq!(joe_voice.sample_rate, 22_050);
    assert_eq!(joe_voice.language.as_deref(), Some("en_US"));
    assert_eq!(joe_voice.quality.as_deref(), Some("medium"));
    assert_eq!(joe_voice.source, ADOPTED);

    // Every catalog voice but the two installed ones.
    let available: Vec<&str> = listing.available.iter().map(|v| v.id).collect();
    assert_eq!(available.len(), catalog::CATALOG.len() - 2);
    assert!(
        !available.contains(&"en_US-joe-medium") && !available.contains(&"en_US-lessac-medium")
    );
    assert!(available.contains(&"en_GB-alan-low") && available.contains(&"en_US-libritts-high"));

    let mut problems = listing.problems.clone();
    problems.sort_by_key(|p| p.to_string());
    match problems.as_slice() {
        [
            Problem::Unmanaged { path },
            Problem::Invalid { id: broken, reason },
            Problem::Incomplete {
                id: half, missing, ..
            },
        ] => {
            assert_eq!(path, &voices.join("notes.txt"));
            assert_eq!(broken, "broken");
            assert!(reason.contains("audio.sample_rate"), "{reason}");
            assert_eq!(half, "half");
            assert_eq!(missing, &voices.join("half.onnx.json"));
        }
        other => panic!("{other:?}"),
    }
    for p in &problems {
        let text = p.to_string();
        assert!(
            text.contains("remove") || text.contains("not a voice file"),
            "{text}"
        );
    }

    // The adoption is in the manifest: a store opened later has it without
    // hashing again, with the same record.
    let manifest = fs::read_to_string(voices.join("manifest.json")).unwrap();
    assert!(
        manifest.contains(published.onnx.sha256.unwrap()),
        "{manifest}"
    );
    let again = VoiceStore::open(&voices).unwrap();
    assert_eq!(
        again.get("en_US-joe-medium").unwrap().as_ref(),
        Some(joe_voice)
    );

    // Problems are cleaned up with remove.
    let removed = store.remove("half").unwrap();
    assert_eq!(
        (removed.voice, removed.deleted),
        (None, vec![voices.join("half.onnx")])
    );
    store.remove("broken").unwrap();
    assert_eq!(store.list().unwrap().problems.len(), 1);
}

#[test]
fn the_real_joe_model_passes_the_onnx_check() {
    let model = setup_voices_dir().join("en_US-joe-medium.onnx");
    assert!(model.is_file(), "{SETUP}");
    check_onnx(&model).unwrap();
}

#[test]
fn joes_catalog_sha256_are_the_ones_setup_voices_pins() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../setup-voices");
    let script = fs::read_to_string(script).unwrap();
    let pinned = |var: &str| {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{var}=")))
            .unwrap_or_else(|| panic!("{var} is not in setup-voices"))
            .to_owned()
    };
    let joe = catalog::find("en_US-joe-medium").unwrap();
    assert_eq!(joe.onnx.sha256, Some(pinned("voice_onnx_sha").as_str()));
    assert_eq!(joe.json.sha256, Some(pinned("voice_json_sha").as_str()));
    assert_eq!(pinned("voice"), joe.id);
}

#[test]
fn both_spellings_name_the_same_voice_and_the_piper_one_is_shown() {
    let (dir, store) = store();
    // Files named in the seed's spelling install under piper's.
    let v = install_fake(&store, dir.path(), "en-gb-alan-low", 18);
    let (onnx, json) = (
        dir.path().join("src/en-gb-alan-low.onnx"),
        dir.path().join("src/en-gb-alan-low.onnx.json"),
    );
    assert_eq!(v.id, "en_GB-alan-low");
    assert!(store.dir().join("en_GB-alan-low.onnx").is_file());
    for id in ["en_GB-alan-low", "en-gb-alan-low", "EN-GB-ALAN-LOW"] {
        assert_eq!(
            store.get(id).unwrap().map(|v| v.id),
            Some("en_GB-alan-low".into()),
            "{id}"
        );
    }
    let err = store.install_files(&onnx, &json).unwrap_err();
    assert!(
        matches!(&err, VoicesError::Exists { id } if id == "en_GB-alan-low"),
        "{err:?}"
    );
    assert!(
        !store
            .list()
            .unwrap()
            .available
            .iter()
            .any(|c| c.id == "en_GB-alan-low")
    );

    // Catalog requests in both spellings are the same download.
    let seed = VoiceRequest::catalog("en-us-lessac-medium").unwrap();
    let piper = VoiceRequest::catalog("en_US-lessac-medium").unwrap();
    assert_eq!(seed, piper);
    assert_eq!(seed.id, "en_US-lessac-medium");
    assert_eq!(
        seed.onnx.url,
        "https://huggingface.co/rhasspy/piper-voices/resolve/v1.0.0/en/en_US/lessac/medium/en_US-lessac-medium.onnx"
    );
    assert_eq!(
        seed.onnx.expected.md5.as_deref(),
        Some("2fc642b535197b6305c7c8f92dc8b24f")
    );
    assert_eq!(seed.onnx.expected.size, Some(63_201_294));
    // The catalog's own URL gets the catalog's checksums, however linked.
    assert_eq!(VoiceRequest::parse(&seed.onnx.url).unwrap(), seed);
    let linked = VoiceRequest::parse(&format!("{}?download=true", seed.json.url)).unwrap();
    assert_eq!(linked.onnx.expected, seed.onnx.expected);
    assert_eq!(linked.onnx.url, format!("{}?download=true", seed.onnx.url));

    let removed = store.remove("en-gb-alan-low").unwrap();
    assert_eq!(removed.id, "en_GB-alan-low");
    assert_eq!(store.get("en_GB-alan-low").unwrap(), None);
}

#[test]
fn urls_must_name_a_voice_file() {
    for url in [
        "https://example.com/voices/",
        "https://example.com/voices/model.bin",
        "https://example.com/.onnx",
    ] {
        let err = VoiceRequest::url(url, None).unwrap_err();
        assert!(matches!(err, VoicesError::BadUrl { .. }), "{url}: {err:?}");
        assert!(err.to_string().contains(url), "{err}");
    }
    assert!(matches!(
        VoiceRequest::url("ftp://example.com/a.onnx", None),
        Err(VoicesError::Fetch(FetchError::BadUrl(_)))
    ));
    assert!(matches!(
        VoiceRequest::url("https://example.com/a.onnx", Some("abc")),
        Err(VoicesError::Fetch(FetchError::BadSha256(_)))
    ));
    let r = VoiceRequest::url("https://example.com/x/a.onnx.json", Some(&"AB".repeat(32))).unwrap();
    assert_eq!(r.id, "a");
    assert_eq!(r.onnx.url, "https://example.com/x/a.onnx");
    assert_eq!(r.json.url, "https://example.com/x/a.onnx.json");
    assert_eq!(r.onnx.expected.sha256, Some("ab".repeat(32)));
    assert_eq!(r.json.expected, Expected::default());
}

#[test]
fn a_corrupt_manifest_is_an_error_naming_it_and_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("manifest.json");
    for (content, says) in [
        ("{not json", "not valid manifest JSON"),
        (r#"{"version": 9, "voices": []}"#, "format version 9"),
    ] {
        fs::write(&manifest, content).unwrap();
        let err = VoiceStore::open(dir.path()).unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(err, VoicesError::ManifestCorrupt { .. })
                && message.contains(says)
                && message.contains(&manifest.display().to_string()),
            "{message}"
        );
        assert_eq!(fs::read_to_string(&manifest).unwrap(), content);
    }
    // An id that would make `remove` delete files elsewhere.
    let entry = serde_json::json!({"version": 1, "voices": [{
        "id": "../../etc/passwd", "language": null, "quality": null, "sample_rate": 16000,
        "num_speakers": 1, "size": 1, "sha256": "ab".repeat(32), "json_size": 1,
        "json_sha256": "ab".repeat(32), "source": "x", "added": "2026-01-01T00:00:00Z"
    }]});
    fs::write(&manifest, entry.to_string()).unwrap();
    let err = VoiceStore::open(dir.path()).unwrap_err();
    assert!(err.to_string().contains("invalid id"), "{err}");
}

#[test]
fn a_voice_whose_files_vanished_is_reported() {
    let (dir, store) = store();
    let v = install_fake(&store, dir.path(), "v", 19);
    fs::remove_file(&v.json).unwrap();
    let err = store.get("v").unwrap_err();
    assert!(
        matches!(&err, VoicesError::FilesMissing { missing, .. } if missing == std::slice::from_ref(&v.json)),
        "{err:?}"
    );
    assert!(err.to_string().contains("remove it"), "{err}");
    let problems = store.list().unwrap().problems;
    assert_eq!(
        problems,
        [Problem::FilesMissing {
            id: "v".into(),
            missing: vec![v.json.clone()]
        }]
    );
    store.remove("v").unwrap();
    assert!(store.list().unwrap().problems.is_empty());
}
