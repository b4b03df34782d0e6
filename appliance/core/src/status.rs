//! Typed statuses: each part of the appliance `get_status` reports on
//! ([`Subsystem`]) and how it is ([`SubsystemState`]). What reads a status
//! matches on the enum; only the wire shows its text, the same text a
//! person reads in `get_status` and on the status page.
//!
//! A subsystem's state is read live from its engine when asked
//! ([`Subsystems`]): the source is a function the engine registers, so the
//! status is never stale and nobody polls.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Arc, Mutex, PoisonError},
};

/// The parts of the appliance with a state line in `get_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subsystem {
    Audio,
    Stt,
    Tts,
    Board,
    Inbox,
    History,
    /// Speech and timers kept for later.
    Schedule,
    Wake,
}

impl Subsystem {
    pub const ALL: [Subsystem; 8] = [
        Subsystem::Audio,
        Subsystem::Stt,
        Subsystem::Tts,
        Subsystem::Board,
        Subsystem::Inbox,
        Subsystem::History,
        Subsystem::Schedule,
        Subsystem::Wake,
    ];

    /// The name `get_status` shows it under.
    pub fn as_str(self) -> &'static str {
        match self {
            Subsystem::Audio => "audio",
            Subsystem::Stt => "stt",
            Subsystem::Tts => "tts",
            Subsystem::Board => "board",
            Subsystem::Inbox => "inbox",
            Subsystem::History => "history",
            Subsystem::Schedule => "schedule",
            Subsystem::Wake => "wake",
        }
    }
}

impl fmt::Display for Subsystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a subsystem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubsystemState {
    /// Its engine has not started (yet).
    NotConfigured,
    /// Turned off in the configuration.
    Disabled,
    /// It cannot be used, and why.
    Unavailable(String),
    /// It runs; the text says how ("ready; model tiny.en-q8_0 …",
    /// "capture device missing; speaker ready").
    Running(String),
}

impl SubsystemState {
    pub fn running(text: impl Into<String>) -> Self {
        SubsystemState::Running(text.into())
    }

    pub fn unavailable(why: impl fmt::Display) -> Self {
        SubsystemState::Unavailable(why.to_string())
    }

    pub fn is_unavailable(&self) -> bool {
        matches!(self, SubsystemState::Unavailable(_))
    }
}

impl fmt::Display for SubsystemState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubsystemState::NotConfigured => f.write_str("not configured"),
            SubsystemState::Disabled => f.write_str("disabled"),
            SubsystemState::Unavailable(why) => write!(f, "unavailable: {why}"),
            SubsystemState::Running(text) => f.write_str(text),
        }
    }
}

/// Where a subsystem's state is read from when asked.
pub type Source = Arc<dyn Fn() -> SubsystemState + Send + Sync>;

/// A state that does not change.
pub fn fixed(state: SubsystemState) -> Source {
    Arc::new(move || state.clone())
}

/// Every subsystem's source; "not configured" until its engine registers.
#[derive(Default)]
pub struct Subsystems {
    sources: Mutex<BTreeMap<Subsystem, Source>>,
}

impl Subsystems {
    /// Sets where `subsystem`'s state is read from.
    pub fn set(&self, subsystem: Subsystem, source: Source) {
        self.sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(subsystem, source);
    }

    /// Adds to a subsystem's line: `more` after what it says now (`"ready;
    /// model …; live: ready, …"`, `"unavailable: …; live: ready, …"`). A
    /// subsystem that is disabled or not configured shows that alone.
    pub fn extend(&self, subsystem: Subsystem, more: Arc<dyn Fn() -> String + Send + Sync>) {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let before = sources.get(&subsystem).cloned();
        let line: Source = Arc::new(move || match before.as_ref().map(|before| before()) {
            Some(SubsystemState::Running(text)) => {
                SubsystemState::Running(format!("{text}; {}", more()))
            }
            Some(SubsystemState::Unavailable(why)) => {
                SubsystemState::Unavailable(format!("{why}; {}", more()))
            }
            Some(other) => other,
            None => SubsystemState::Running(more()),
        });
        sources.insert(subsystem, line);
    }

    /// `subsystem`'s state now.
    pub fn get(&self, subsystem: Subsystem) -> SubsystemState {
        let source = self
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&subsystem)
            .cloned();
        source.map_or(SubsystemState::NotConfigured, |source| source())
    }
}

/// One health check: `Ok` while the component works, else why not.
pub type Check = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The checks the watchdog runs before each `WATCHDOG=1`. The listeners
/// register here; the audio and inference threads register their heartbeats
/// when they exist.
#[derive(Default)]
pub struct Health {
    checks: Mutex<Vec<(String, Check)>>,
}

impl Health {
    pub fn add(&self, name: impl Into<String>, check: Check) {
        self.checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.into(), check));
    }

    /// Runs every check; the first failure names the component.
    pub fn check(&self) -> Result<(), String> {
        let checks = self.checks.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, check) in checks.iter() {
            check().map_err(|why| format!("{name}: {why}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_reads_as_get_status_shows_it() {
        assert_eq!(SubsystemState::NotConfigured.to_string(), "not configured");
        assert_eq!(SubsystemState::Disabled.to_string(), "disabled");
        assert_eq!(
            SubsystemState::unavailable("no model").to_string(),
            "unavailable: no model"
        );
        assert_eq!(SubsystemState::running("ready").to_string(), "ready");
    }

    #[test]
    fn subsystems_start_not_configured_and_read_their_source() {
        let subsystems = Subsystems::default();
        for s in Subsystem::ALL {
            assert_eq!(subsystems.get(s), SubsystemState::NotConfigured);
        }
        subsystems.set(
            Subsystem::Audio,
            fixed(SubsystemState::running("capture device missing")),
        );
        assert_eq!(
            subsystems.get(Subsystem::Audio).to_string(),
            "capture device missing"
        );
    }

    #[test]
    fn an_extension_adds_to_a_line_with_a_state_to_say() {
        let subsystems = Subsystems::default();
        subsystems.set(Subsystem::Stt, fixed(SubsystemState::running("ready")));
        subsystems.extend(Subsystem::Stt, Arc::new(|| "live: ready".to_owned()));
        assert_eq!(
            subsystems.get(Subsystem::Stt).to_string(),
            "ready; live: ready"
        );
        subsystems.set(Subsystem::Tts, fixed(SubsystemState::unavailable("gone")));
        subsystems.extend(Subsystem::Tts, Arc::new(|| "more".to_owned()));
        assert_eq!(
            subsystems.get(Subsystem::Tts),
            SubsystemState::unavailable("gone; more")
        );
        subsystems.set(Subsystem::Board, fixed(SubsystemState::Disabled));
        subsystems.extend(Subsystem::Board, Arc::new(|| "more".to_owned()));
        assert_eq!(subsystems.get(Subsystem::Board), SubsystemState::Disabled);
    }

    #[test]
    fn health_names_the_failing_component() {
        let health = Health::default();
        health.add("tcp listener", Box::new(|| Ok(())));
        assert_eq!(health.check(), Ok(()));
        health.add("audio", Box::new(|| Err("capture thread stalled".into())));
        assert_eq!(health.check(), Err("audio: capture thread stalled".into()));
    }
}
