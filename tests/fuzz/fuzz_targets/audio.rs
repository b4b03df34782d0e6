//! `cargo fuzz run audio`: see `tests/fuzz/checks/audio.rs`.

#![no_main]

#[path = "../checks/audio.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // Hark catches a panic inside symphonia (a parser of untrusted input
    // written by others) and answers that the file is corrupt, which the
    // check expects. libfuzzer-sys's hook aborts on any panic, caught or
    // not; the default hook only prints it. A panic that escapes still
    // ends the run as a crash.
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| drop(std::panic::take_hook()));
    check::check(data)
});
