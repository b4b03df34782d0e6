//! The configuration file (`hark.toml`): parsed and checked as the daemon
//! and `hark config check` do.
//!
//! Beyond "does not panic": a configuration accepted is written back
//! (`hark config check` prints it) as a file that reads as the same one.
//!
//! Shared by the fuzz target (`tests/fuzz/fuzz_targets`) and the test that
//! replays the committed corpus on every `cargo test`.

use std::path::Path;

use hark::config::Config;

/// Panics on what the target must never do.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = Config::from_toml(text, Path::new("fuzz.toml")) {
        let written = config.to_toml();
        let again = Config::from_toml(&written, Path::new("written.toml"))
            .unwrap_or_else(|e| panic!("what was accepted reads back: {e}\n{written}"));
        assert_eq!(config, again);
    }
}
