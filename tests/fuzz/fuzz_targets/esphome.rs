//! `cargo fuzz run esphome`: see `tests/fuzz/checks/esphome.rs`.

#![no_main]

#[path = "../checks/esphome.rs"]
mod check;
#[path = "../checks/runtime.rs"]
mod runtime;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
