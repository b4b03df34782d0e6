//! The fuzz targets' checks (`tests/fuzz/checks/`), replayed over their
//! committed corpora on every `cargo test`: the seeds from the tests and
//! docs, and every input that once made a target fail, kept as a
//! regression. `tests/fuzz/run` is what explores beyond them.

use std::path::{Path, PathBuf};

#[path = "../../tests/fuzz/checks/audio.rs"]
mod audio;
#[path = "../../tests/fuzz/checks/config.rs"]
mod config;
#[path = "../../tests/fuzz/checks/esphome.rs"]
mod esphome;
#[path = "../../tests/fuzz/checks/http.rs"]
mod http;
#[path = "../../tests/fuzz/checks/ndjson.rs"]
mod ndjson;
#[path = "../../tests/fuzz/checks/stores.rs"]
mod stores;
#[path = "../../tests/fuzz/checks/wyoming.rs"]
mod wyoming;
// The async checks' shared runtime (`super::runtime` to them).
#[path = "../../tests/fuzz/checks/runtime.rs"]
mod runtime;

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} has no seeds", dir.display());
    files
}

fn replay(target: &str, check: fn(&[u8])) {
    for file in corpus(target) {
        let data = std::fs::read(&file).expect("a corpus file reads");
        // The file's name in the panic message, whatever fails.
        let result = std::panic::catch_unwind(|| check(&data));
        assert!(result.is_ok(), "{} fails its check", file.display());
    }
}

#[test]
fn the_ndjson_corpus_passes() {
    replay("ndjson", ndjson::check);
}

#[test]
fn the_audio_corpus_passes() {
    replay("audio", audio::check);
}

#[test]
fn the_config_corpus_passes() {
    replay("config", config::check);
}

#[test]
fn the_stores_corpus_passes() {
    replay("stores", stores::check);
}

#[test]
fn the_http_corpus_passes() {
    replay("http", http::check);
}

#[test]
fn the_wyoming_corpus_passes() {
    replay("wyoming", wyoming::check);
}

#[test]
fn the_esphome_corpus_passes() {
    replay("esphome", esphome::check);
}
