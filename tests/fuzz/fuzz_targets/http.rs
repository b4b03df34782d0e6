//! `cargo fuzz run http`: see `tests/fuzz/checks/http.rs`.

#![no_main]

#[path = "../checks/http.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
