//! `cargo fuzz run wyoming`: see `tests/fuzz/checks/wyoming.rs`.

#![no_main]

#[path = "../checks/wyoming.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
