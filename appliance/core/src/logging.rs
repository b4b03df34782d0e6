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
        .with_writer(|| Tee(Vec::new()))
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

/// Log lines kept for the status page.
const RECENT_LINES: usize = 200;

static RECENT: std::sync::Mutex<std::collections::VecDeque<String>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

/// The last `n` log lines, oldest first, without terminal colours.
pub fn recent(n: usize) -> Vec<String> {
    let recent = RECENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    recent
        .iter()
        .skip(recent.len().saturating_sub(n))
        .map(|line| strip_ansi(line))
        .collect()
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ … a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Writes one formatted event to stderr, and keeps it for the status page.
struct Tee(Vec<u8>);

impl std::io::Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), &self.0);
        let text = String::from_utf8_lossy(&self.0);
        let mut recent = RECENT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if recent.len() == RECENT_LINES {
                recent.pop_front();
            }
            recent.push_back(line.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn colours_are_stripped_from_kept_lines() {
        assert_eq!(
            super::strip_ansi("\u{1b}[2m2026\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m ready"),
            "2026  INFO ready"
        );
    }
}
