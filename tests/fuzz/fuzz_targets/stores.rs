//! `cargo fuzz run stores`: see `tests/fuzz/checks/stores.rs`.

#![no_main]

#[path = "../checks/stores.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
