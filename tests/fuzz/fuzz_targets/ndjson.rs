//! `cargo fuzz run ndjson`: see `tests/fuzz/checks/ndjson.rs`.

#![no_main]

#[path = "../checks/ndjson.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
