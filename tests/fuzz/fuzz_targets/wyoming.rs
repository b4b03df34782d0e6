//! `cargo fuzz run wyoming`: see `tests/fuzz/checks/wyoming.rs`.

#![no_main]

#[path = "../checks/wyoming.rs"]
mod check;
#[path = "../checks/runtime.rs"]
mod runtime;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
