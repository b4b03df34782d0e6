//! The store on a real directory: manifest, add, verify, remove, names.

mod common;

use std::{fs, path::Path};

use common::{EN_VOCAB, F16, MULTI_VOCAB, Q8_0, dir_names, fake_model, noise, sha256_hex};
use hark_models::{
    AddOptions, Language, ModelEntry, ModelKind, NameProblem, Store, StoreError, Transfer,
    VerifyOutcome,
    manifest::{ManifestError, files_digest},
    resolve,
};

const LEN: usize = 400_000;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("models")).unwrap();
    (dir, store)
}

/// Writes a fake model outside the store and returns its path and bytes.
fn model_file(
    dir: &Path,
    file: &str,
    n_vocab: i32,
    ftype: i32,
    seed: u32,
) -> (std::path::PathBuf, Vec<u8>) {
    let bytes = fake_model(LEN, n_vocab, ftype, seed);
    let path = dir.join(file);
    fs::write(&path, &bytes).unwrap();
    (path, bytes)
}

#[test]
fn a_missing_directory_and_manifest_are_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("var/lib/hark/models");
    let store = Store::open(&models).unwrap();
    assert!(models.is_dir());
    let listing = store.list().unwrap();
    assert!(
        listing.models.is_empty() && listing.unmanaged.is_empty() && listing.partial.is_empty()
    );
    // Reading never writes a manifest.
    assert!(dir_names(&models).is_empty());
}

#[test]
fn manifest_round_trip() {
    let (dir, store) = store();
    let (en, en_bytes) = model_file(dir.path(), "en.bin", EN_VOCAB, F16, 1);
    let (multi, multi_bytes) = model_file(dir.path(), "multi.bin", MULTI_VOCAB, Q8_0, 2);

    let a = store
        .add_file("tiny.en", &en, &AddOptions::import(&en))
        .unwrap();
    let b = store
        .add_file(
            "base-q8_0",
            &multi,
            &AddOptions {
                source: "https://example.com/ggml-base-q8_0.bin".into(),
                replace: false,
                transfer: Transfer::Copy,
            },
        )
        .unwrap();

    assert_eq!(a.file, "ggml-tiny.en.bin");
    assert_eq!(
        (a.size, a.sha256.clone()),
        (LEN as u64, sha256_hex(&en_bytes))
    );
    assert_eq!((a.language, a.quantisation.as_str()), (Language::En, "f16"));
    assert_eq!(a.source, format!("imported from {}", en.display()));
    assert_eq!(
        (b.language, b.quantisation.as_str()),
        (Language::Multilingual, "q8_0")
    );
    assert_eq!(b.sha256, sha256_hex(&multi_bytes));
    for e in [&a, &b] {
        let t = e.added.as_bytes();
        assert!(
            e.added.len() == 20 && t[4] == b'-' && t[10] == b'T' && t[19] == b'Z',
            "{}",
            e.added
        );
    }
    // Copying leaves the originals.
    assert!(en.is_file() && multi.is_file());

    // Another Store on the same directory (another process) reads it back.
    let reopened = Store::open(store.dir()).unwrap();
    let listing = reopened.list().unwrap();
    assert_eq!(listing.models, [b.clone(), a.clone()], "sorted by name");
    assert!(listing.missing.is_empty() && listing.unmanaged.is_empty());
    assert_eq!(reopened.get("tiny.en").unwrap(), a);
    assert_eq!(
        fs::read(reopened.path("base-q8_0").unwrap()).unwrap(),
        multi_bytes
    );

    // The file itself: the documented fields, nothing half-written beside it.
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(store.dir().join("manifest.json")).unwrap()).unwrap();
    assert_eq!(json["version"], 1);
    let first = &json["models"][0];
    for field in [
        "name",
        "file",
        "sha256",
        "size",
        "language",
        "quantisation",
        "source",
        "added",
    ] {
        assert!(!first[field].is_null(), "{field} missing from {first}");
    }
    assert_eq!(first["language"], "multilingual");
    assert_eq!(json["models"][1]["language"], "en");
    assert_eq!(
        dir_names(store.dir()),
        ["ggml-base-q8_0.bin", "ggml-tiny.en.bin", "manifest.json"]
    );
}

#[test]
fn move_takes_the_file() {
    let (dir, store) = store();
    let (src, bytes) = model_file(dir.path(), "converted.bin", EN_VOCAB, F16, 3);
    let options = AddOptions {
        transfer: Transfer::Move,
        ..AddOptions::import(&src)
    };
    store.add_file("m", &src, &options).unwrap();
    assert!(!src.exists());
    assert_eq!(fs::read(store.path("m").unwrap()).unwrap(), bytes);
}

#[test]
fn add_refuses_to_overwrite_unless_told() {
    let (dir, store) = store();
    let (one, _) = model_file(dir.path(), "one.bin", EN_VOCAB, F16, 4);
    let (two, two_bytes) = model_file(dir.path(), "two.bin", EN_VOCAB, F16, 5);
    let first = store
        .add_file("m", &one, &AddOptions::import(&one))
        .unwrap();

    let err = store
        .add_file("m", &two, &AddOptions::import(&two))
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Exists { name } if name == "m"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("`m` is already installed"),
        "{err}"
    );
    assert_eq!(store.get("m").unwrap(), first, "the manifest is unchanged");

    let replace = AddOptions {
        replace: true,
        ..AddOptions::import(&two)
    };
    let second = store.add_file("m", &two, &replace).unwrap();
    assert_eq!(second.sha256, sha256_hex(&two_bytes));
    assert_eq!(fs::read(store.path("m").unwrap()).unwrap(), two_bytes);
    assert_eq!(store.list().unwrap().models, [second]);
    assert_eq!(dir_names(store.dir()), ["ggml-m.bin", "manifest.json"]);
}

#[test]
fn verify_detects_corruption() {
    let (dir, store) = store();
    let (src, _) = model_file(dir.path(), "m.bin", EN_VOCAB, F16, 6);
    let entry = store
        .add_file("m", &src, &AddOptions::import(&src))
        .unwrap();
    let path = store.path("m").unwrap();
    assert!(store.verify("m").unwrap().is_ok());

    // One flipped bit in the middle: same size, different hash.
    let mut bytes = fs::read(&path).unwrap();
    bytes[LEN / 2] ^= 0x01;
    fs::write(&path, &bytes).unwrap();
    let report = store.verify("m").unwrap();
    assert!(!report.is_ok());
    match &report.outcome {
        VerifyOutcome::HashMismatch { actual_sha256 } => {
            assert_eq!(*actual_sha256, sha256_hex(&bytes));
            assert_ne!(*actual_sha256, entry.sha256);
        }
        other => panic!("expected a hash mismatch, got {other:?}"),
    }
    assert!(report.to_string().contains("CORRUPT"), "{report}");

    fs::write(&path, &bytes[..LEN - 1]).unwrap();
    assert!(matches!(
        store.verify("m").unwrap().outcome,
        VerifyOutcome::SizeMismatch { actual } if actual == LEN as u64 - 1
    ));

    fs::remove_file(&path).unwrap();
    assert!(matches!(
        store.verify("m").unwrap().outcome,
        VerifyOutcome::Missing
    ));
    assert!(matches!(
        store.path("m"),
        Err(StoreError::FileMissing { .. })
    ));
    assert_eq!(store.list().unwrap().missing, ["m"]);
}

#[test]
fn verify_all_reports_every_model() {
    let (dir, store) = store();
    for (name, seed) in [("a", 7), ("b", 8), ("c", 9)] {
        let (src, _) = model_file(dir.path(), &format!("{name}.bin"), EN_VOCAB, F16, seed);
        store
            .add_file(name, &src, &AddOptions::import(&src))
            .unwrap();
    }
    fs::write(store.path("b").unwrap(), b"overwritten").unwrap();
    let reports = store.verify_all().unwrap();
    let summary: Vec<(&str, bool)> = reports
        .iter()
        .map(|r| (r.name.as_str(), r.is_ok()))
        .collect();
    assert_eq!(summary, [("a", true), ("b", false), ("c", true)]);
}

#[test]
fn remove_deletes_file_and_entry() {
    let (dir, store) = store();
    for (name, seed) in [("keep", 10), ("drop", 11)] {
        let (src, _) = model_file(dir.path(), &format!("{name}.bin"), EN_VOCAB, F16, seed);
        store
            .add_file(name, &src, &AddOptions::import(&src))
            .unwrap();
    }
    let removed = store.remove("drop").unwrap();
    assert_eq!(removed.name, "drop");
    assert_eq!(dir_names(store.dir()), ["ggml-keep.bin", "manifest.json"]);
    assert_eq!(store.list().unwrap().models.len(), 1);

    let err = store.remove("drop").unwrap_err();
    assert!(
        matches!(&err, StoreError::NotFound { installed, .. } if installed == &["keep"]),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("`drop`") && message.contains("installed: keep"),
        "{message}"
    );
}

#[test]
fn unknown_names_list_the_installed_models() {
    let (dir, store) = store();
    let err = store.get("tiny").unwrap_err();
    assert!(err.to_string().contains("no models are installed"), "{err}");

    for (name, seed) in [("base.en", 12), ("tiny.en", 13)] {
        let (src, _) = model_file(dir.path(), &format!("{name}.bin"), EN_VOCAB, F16, seed);
        store
            .add_file(name, &src, &AddOptions::import(&src))
            .unwrap();
    }
    for err in [
        store.get("tiny").unwrap_err(),
        store.path("tiny").unwrap_err(),
        store.verify("tiny").unwrap_err(),
        store.remove("tiny").unwrap_err(),
    ] {
        let message = err.to_string();
        assert!(message.contains("installed: base.en, tiny.en"), "{message}");
        assert!(
            message.contains(&store.dir().display().to_string()),
            "{message}"
        );
    }
}

#[test]
fn bad_names_are_refused_with_the_reason() {
    let (dir, store) = store();
    let (src, _) = model_file(dir.path(), "m.bin", EN_VOCAB, F16, 14);
    let cases = [
        ("../evil", NameProblem::Separator),
        ("a/b", NameProblem::Separator),
        ("a..b", NameProblem::DotDot),
        (".hidden", NameProblem::LeadingDot),
        ("", NameProblem::Empty),
        ("tiny en", NameProblem::Character(' ')),
    ];
    for (name, problem) in cases {
        let err = store
            .add_file(name, &src, &AddOptions::import(&src))
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::BadName { name: n, problem: p } if n == name && *p == problem),
            "{name:?}: {err:?}"
        );
        assert!(err.to_string().contains(&problem.to_string()), "{err}");
        for err in [
            store.get(name).unwrap_err(),
            store.remove(name).unwrap_err(),
            store.path(name).unwrap_err(),
        ] {
            assert!(
                matches!(err, StoreError::BadName { .. }),
                "{name:?}: {err:?}"
            );
        }
    }
    assert!(dir_names(store.dir()).is_empty());
    assert_eq!(
        dir_names(dir.path()),
        ["m.bin", "models"],
        "nothing written outside"
    );
}

#[test]
fn a_corrupt_manifest_is_an_error_naming_it_and_is_kept() {
    let (dir, store) = store();
    let (src, _) = model_file(dir.path(), "m.bin", EN_VOCAB, F16, 15);
    store
        .add_file("m", &src, &AddOptions::import(&src))
        .unwrap();
    let manifest = store.dir().join("manifest.json");
    let garbage = b"{\"version\": 1, \"models\": [ {\"name\": \"m\", \"fi";
    fs::write(&manifest, garbage).unwrap();

    let err = Store::open(store.dir()).unwrap_err();
    assert!(
        matches!(err, StoreError::Manifest(ManifestError::Corrupt { .. })),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&manifest.display().to_string()),
        "{message}"
    );
    // An open store meets it too, and adding does not paper over it.
    assert!(store.list().is_err());
    assert!(store.get("m").is_err());
    let (other, _) = model_file(dir.path(), "n.bin", EN_VOCAB, F16, 16);
    assert!(
        store
            .add_file("n", &other, &AddOptions::import(&other))
            .is_err()
    );
    assert_eq!(fs::read(&manifest).unwrap(), garbage, "never rewritten");
}

#[test]
fn a_file_that_is_not_a_model_is_refused() {
    let (dir, store) = store();
    let src = dir.path().join("notes.txt");
    fs::write(&src, "these are not weights, just some words long enough").unwrap();
    let err = store
        .add_file("m", &src, &AddOptions::import(&src))
        .unwrap_err();
    assert!(matches!(err, StoreError::NotAModel { .. }), "{err:?}");
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert!(dir_names(store.dir()).is_empty());
}

#[test]
fn list_reports_partial_and_unmanaged_files() {
    let (dir, store) = store();
    let (src, _) = model_file(dir.path(), "m.bin", EN_VOCAB, F16, 17);
    store
        .add_file("m", &src, &AddOptions::import(&src))
        .unwrap();
    fs::write(store.dir().join("tiny.en.part"), vec![0u8; 1234]).unwrap();
    fs::write(store.dir().join("ggml-hand-copied.bin"), b"x").unwrap();
    fs::write(store.dir().join(".manifest.json.99.tmp"), b"{").unwrap();

    let listing = store.list().unwrap();
    assert_eq!(listing.models.len(), 1);
    assert_eq!(listing.partial.len(), 1);
    assert_eq!(
        (listing.partial[0].name.as_str(), listing.partial[0].bytes),
        ("tiny.en", 1234)
    );
    assert_eq!(
        listing.unmanaged,
        [store.dir().join("ggml-hand-copied.bin")]
    );
    assert!(listing.missing.is_empty());
}

/// A Moonshine directory as moonshine-voice ships it (the `.ort` files
/// start with ONNX Runtime's FlatBuffer identifier), its licence beside
/// the weights, a sample clip that is not part of the model.
fn moonshine_dir(dir: &Path, seed: u32) -> std::path::PathBuf {
    let src = dir.join(format!("tiny-en-{seed}"));
    fs::create_dir_all(&src).unwrap();
    for (file, len) in [
        ("encoder_model.ort", 30_000),
        ("decoder_model_merged.ort", 70_000),
    ] {
        let mut bytes = vec![0x14, 0, 0, 0];
        bytes.extend_from_slice(b"ORTM");
        bytes.extend(noise(len, seed));
        fs::write(src.join(file), bytes).unwrap();
    }
    fs::write(src.join("tokenizer.bin"), noise(2_000, seed + 1)).unwrap();
    fs::write(src.join("LICENSE"), b"MIT License\n").unwrap();
    fs::write(src.join("beckett.wav"), b"RIFF....WAVE").unwrap();
    src
}

/// Adds `src` as the user's own files are added (a copy).
fn import(
    store: &Store,
    kind: ModelKind,
    name: &str,
    src: &Path,
) -> Result<ModelEntry, StoreError> {
    store.add(kind, name, src, &AddOptions::import(src))
}

fn smart_turn_file(dir: &Path, seed: u32) -> std::path::PathBuf {
    let path = dir.join("smart-turn-v3.2-cpu.onnx");
    let mut bytes = b"\x08\x0a\x12\x0donnx.quantize".to_vec();
    bytes.extend(noise(50_000, seed));
    fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn a_directory_model_is_added_listed_verified_and_removed() {
    let (dir, store) = store();
    let src = moonshine_dir(dir.path(), 20);
    let entry = import(&store, ModelKind::Moonshine, "moonshine-tiny-en", &src).unwrap();
    assert_eq!(entry.kind, ModelKind::Moonshine);
    assert_eq!(entry.file, "moonshine-tiny-en");
    assert_eq!(entry.language, Language::En);
    let names: Vec<&str> = entry.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "LICENSE",
            "decoder_model_merged.ort",
            "encoder_model.ort",
            "tokenizer.bin"
        ]
    );
    for f in &entry.files {
        let bytes = fs::read(src.join(&f.name)).unwrap();
        assert_eq!(
            (f.size, f.sha256.as_str()),
            (bytes.len() as u64, sha256_hex(&bytes).as_str())
        );
    }
    assert_eq!(entry.size, entry.files.iter().map(|f| f.size).sum::<u64>());
    assert_eq!(entry.sha256, files_digest(&entry.files));

    // In place under its name, without the sample clip or a temporary.
    let path = store.path("moonshine-tiny-en").unwrap();
    assert_eq!(path, store.dir().join("moonshine-tiny-en"));
    assert_eq!(
        dir_names(&path),
        [
            "LICENSE",
            "decoder_model_merged.ort",
            "encoder_model.ort",
            "tokenizer.bin"
        ]
    );
    assert_eq!(
        dir_names(store.dir()),
        ["manifest.json", "moonshine-tiny-en"]
    );
    let listing = store.list().unwrap();
    assert_eq!(listing.models, std::slice::from_ref(&entry));
    assert!(listing.missing.is_empty() && listing.unmanaged.is_empty());
    assert_eq!(
        Store::open(store.dir())
            .unwrap()
            .get("moonshine-tiny-en")
            .unwrap(),
        entry,
        "read back by another process"
    );

    let report = store.verify("moonshine-tiny-en").unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.files.len(), 4);
    assert!(report.to_string().contains("ok (4 files"), "{report}");

    let removed = store.remove("moonshine-tiny-en").unwrap();
    assert_eq!(removed, entry);
    assert!(!path.exists());
    assert_eq!(dir_names(store.dir()), ["manifest.json"]);
    assert!(src.join("encoder_model.ort").is_file(), "the source stays");
}

#[test]
fn verify_names_each_changed_or_missing_file_of_a_directory_model() {
    let (dir, store) = store();
    let src = moonshine_dir(dir.path(), 21);
    import(&store, ModelKind::Moonshine, "m", &src).unwrap();
    let path = store.path("m").unwrap();

    // One bit of the decoder: same size, another hash.
    let decoder = path.join("decoder_model_merged.ort");
    let mut bytes = fs::read(&decoder).unwrap();
    bytes[40_000] ^= 0x01;
    fs::write(&decoder, &bytes).unwrap();
    let report = store.verify("m").unwrap();
    assert!(!report.is_ok());
    let failed: Vec<(&str, &VerifyOutcome)> = report
        .failed_files()
        .map(|f| (f.file.as_str(), &f.outcome))
        .collect();
    assert!(
        matches!(failed.as_slice(), [("decoder_model_merged.ort", VerifyOutcome::HashMismatch { actual_sha256 })] if *actual_sha256 == sha256_hex(&bytes)),
        "{failed:?}"
    );
    let text = report.to_string();
    assert!(
        text.contains("1 of its 4 files") && text.contains("decoder_model_merged.ort: CORRUPT"),
        "{text}"
    );
    assert!(
        !text.contains("tokenizer.bin"),
        "only the failed files: {text}"
    );

    fs::remove_file(path.join("tokenizer.bin")).unwrap();
    let report = store.verify("m").unwrap();
    let failed: Vec<&str> = report.failed_files().map(|f| f.file.as_str()).collect();
    assert_eq!(failed, ["decoder_model_merged.ort", "tokenizer.bin"]);
    assert!(
        report.to_string().contains("tokenizer.bin: MISSING"),
        "{report}"
    );
    assert!(!store.verify_all().unwrap()[0].is_ok());

    fs::remove_dir_all(&path).unwrap();
    let report = store.verify("m").unwrap();
    assert!(matches!(report.outcome, VerifyOutcome::Missing) && report.files.is_empty());
    assert_eq!(store.list().unwrap().missing, ["m"]);
    assert!(matches!(
        store.path("m"),
        Err(StoreError::FileMissing { .. })
    ));
    // Removing what is left of it works too.
    store.remove("m").unwrap();
    assert!(store.list().unwrap().models.is_empty());
}

#[test]
fn a_directory_that_is_not_a_moonshine_model_leaves_nothing_behind() {
    let (dir, store) = store();
    let src = moonshine_dir(dir.path(), 22);
    fs::remove_file(src.join("decoder_model_merged.ort")).unwrap();
    let err = import(&store, ModelKind::Moonshine, "m", &src).unwrap_err();
    assert!(matches!(err, StoreError::NotOfKind { .. }), "{err:?}");
    assert!(
        err.to_string().contains("decoder_model_merged.ort"),
        "{err}"
    );

    let src = moonshine_dir(dir.path(), 23);
    fs::write(src.join("encoder_model.ort"), b"<html>404</html>").unwrap();
    let err = import(&store, ModelKind::Moonshine, "m", &src).unwrap_err();
    assert!(err.to_string().contains("encoder_model.ort"), "{err}");
    assert!(
        dir_names(store.dir()).is_empty(),
        "no half model, no temporary"
    );
}

#[test]
fn a_directory_model_is_replaced_only_when_asked() {
    let (dir, store) = store();
    let one = moonshine_dir(dir.path(), 24);
    let two = moonshine_dir(dir.path(), 25);
    let first = import(&store, ModelKind::Moonshine, "m", &one).unwrap();
    let err = import(&store, ModelKind::Moonshine, "m", &two).unwrap_err();
    assert!(matches!(err, StoreError::Exists { .. }), "{err:?}");
    assert_eq!(store.get("m").unwrap(), first);

    let replace = AddOptions {
        replace: true,
        ..AddOptions::import(&two)
    };
    let second = store
        .add(ModelKind::Moonshine, "m", &two, &replace)
        .unwrap();
    assert_ne!(second.sha256, first.sha256);
    assert!(store.verify("m").unwrap().is_ok());
    assert_eq!(
        fs::read(store.path("m").unwrap().join("tokenizer.bin")).unwrap(),
        fs::read(two.join("tokenizer.bin")).unwrap()
    );
    assert_eq!(
        dir_names(store.dir()),
        ["m", "manifest.json"],
        "the old one is gone"
    );
}

#[test]
fn an_unmanaged_directory_is_not_overwritten() {
    let (dir, store) = store();
    let src = moonshine_dir(dir.path(), 26);
    let by_hand = store.dir().join("m");
    fs::create_dir(&by_hand).unwrap();
    fs::write(by_hand.join("notes"), b"mine").unwrap();
    let err = import(&store, ModelKind::Moonshine, "m", &src).unwrap_err();
    assert!(
        matches!(&err, StoreError::InTheWay { path } if *path == by_hand),
        "{err:?}"
    );
    assert_eq!(fs::read(by_hand.join("notes")).unwrap(), b"mine");
    assert_eq!(store.list().unwrap().unmanaged, [by_hand]);
}

#[test]
fn a_smart_turn_file_is_added_as_any_language() {
    let (dir, store) = store();
    let src = smart_turn_file(dir.path(), 27);
    let entry = import(&store, ModelKind::SmartTurn, "smart-turn-v3.2", &src).unwrap();
    assert_eq!(
        (entry.kind, entry.file.as_str(), entry.language),
        (ModelKind::SmartTurn, "smart-turn-v3.2.onnx", Language::Any)
    );
    assert_eq!(entry.sha256, sha256_hex(&fs::read(&src).unwrap()));
    assert!(entry.files.is_empty());
    assert_eq!(
        store
            .path_of("smart-turn-v3.2", ModelKind::SmartTurn)
            .unwrap(),
        store.dir().join("smart-turn-v3.2.onnx")
    );
    let err = store
        .path_of("smart-turn-v3.2", ModelKind::Moonshine)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`smart-turn-v3.2` is a smart-turn model, not a moonshine one"),
        "{err}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(store.dir().join("manifest.json")).unwrap()).unwrap();
    assert_eq!(json["version"], 2);
    assert_eq!(json["models"][0]["language"], "any");

    let empty = dir.path().join("empty.onnx");
    fs::write(&empty, b"").unwrap();
    let err = import(&store, ModelKind::SmartTurn, "t", &empty).unwrap_err();
    assert!(
        err.to_string()
            .contains("is not a smart-turn model: it is empty"),
        "{err}"
    );

    // Kinds share the directory: Moonshine `a.onnx` would be Smart Turn
    // `a`'s file.
    import(&store, ModelKind::SmartTurn, "a", &src).unwrap();
    let moon = moonshine_dir(dir.path(), 28);
    let err = import(&store, ModelKind::Moonshine, "a.onnx", &moon).unwrap_err();
    assert!(
        matches!(&err, StoreError::FileTaken { owner, .. } if owner == "a"),
        "{err:?}"
    );
}

#[test]
fn settings_resolve_by_name_by_path_and_by_hand() {
    let (dir, store) = store();
    let src = moonshine_dir(dir.path(), 29);
    import(&store, ModelKind::Moonshine, "moonshine-tiny-en", &src).unwrap();
    let turn = smart_turn_file(dir.path(), 30);
    import(&store, ModelKind::SmartTurn, "smart-turn-v3.2", &turn).unwrap();
    let models = store.dir();

    assert_eq!(
        resolve(models, "moonshine-tiny-en", ModelKind::Moonshine).unwrap(),
        models.join("moonshine-tiny-en")
    );
    assert_eq!(
        resolve(models, "smart-turn-v3.2", ModelKind::SmartTurn).unwrap(),
        models.join("smart-turn-v3.2.onnx")
    );
    // A path is a path, whether or not anything is there.
    assert_eq!(
        resolve(models, "/opt/turn.onnx", ModelKind::SmartTurn).unwrap(),
        Path::new("/opt/turn.onnx")
    );
    // The wrong kind, or a name nobody installed, says so.
    assert!(matches!(
        resolve(models, "smart-turn-v3.2", ModelKind::Moonshine),
        Err(StoreError::WrongKind { .. })
    ));
    let err = resolve(models, "smart-turn-v9", ModelKind::SmartTurn).unwrap_err();
    assert!(
        err.to_string()
            .contains("installed: moonshine-tiny-en, smart-turn-v3.2"),
        "{err}"
    );
    // A model copied in by hand under the store's name for it.
    fs::create_dir(models.join("tiny-by-hand")).unwrap();
    assert_eq!(
        resolve(models, "tiny-by-hand", ModelKind::Moonshine).unwrap(),
        models.join("tiny-by-hand")
    );
    // Resolving never makes the directory.
    let nowhere = dir.path().join("no/such/models");
    assert!(resolve(&nowhere, "smart-turn-v3.2", ModelKind::SmartTurn).is_err());
    assert!(!nowhere.exists());
    assert!(matches!(
        resolve(models, "a..b", ModelKind::SmartTurn),
        Err(StoreError::BadName { .. })
    ));
}
