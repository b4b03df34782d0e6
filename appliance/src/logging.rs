//! Structured logs on stderr. Under systemd (`JOURNAL_STREAM` set) the journal
//! stamps every line itself, so lines carry no timestamp and no colour there.

use tracing_subscriber::{EnvFilter, fmt};

#[derive(Debug, thiserror::Error)]
#[error("invalid log filter `{filter}`: {reason}")]
pub struct LogFilterError {
    filter: String,
    reason: String,
}

/// Installs the global subscriber. `RUST_LOG` wins over `level`.
pub fn init(level: &str) -> Result<(), LogFilterError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.trim().is_empty() => env,
        _ => level.to_owned(),
    };
    let env_filter = EnvFilter::try_new(&filter).map_err(|e| LogFilterError {
        filter: filter.clone(),
        reason: e.to_string(),
    })?;
    let builder = fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let result = if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().with_ansi(false).try_init()
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
    // Already installed (tests): keep the existing subscriber.
    let _ = result;
    Ok(())
}
