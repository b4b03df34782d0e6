//! What a paired agent may do. Four scopes, each a kind of reach into the
//! room or the appliance: the microphone, the speaker, files on the
//! appliance, and its administration. Every tool, resource and HTTP
//! endpoint names the one scope it needs (or none: `get_status`); a
//! paired agent's token carries the scopes it was given.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The microphone: hearing the person.
    Listen,
    /// The speaker: talking to the person.
    Speak,
    /// Reading and writing audio files on the appliance.
    Files,
    /// Voices, volume, tokens, the history of what was heard.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Listen, Scope::Speak, Scope::Files, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Listen => "listen",
            Scope::Speak => "speak",
            Scope::Files => "files",
            Scope::Admin => "admin",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// What the scope lets an agent do, in words a person can approve.
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Listen => "hear the room through the microphone",
            Scope::Speak => "speak through the speaker",
            Scope::Files => "read and write audio files on the appliance",
            Scope::Admin => "change voices, volume, tokens and read the history",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scopes(u8);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("unknown scope `{0}`; the scopes are listen, speak, files and admin (or all)")]
    Unknown(String),
    #[error("no scopes given; name at least one of listen, speak, files, admin")]
    Empty,
}

impl Scopes {
    pub const NONE: Scopes = Scopes(0);
    pub const ALL: Scopes = Scopes(0b1111);
    /// What a pairing grants unless more is asked for.
    pub const DEFAULT: Scopes = Scopes(0b0011);

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    pub fn with(self, scope: Scope) -> Self {
        Scopes(self.0 | scope.bit())
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Scope::as_str).collect()
    }

    /// `listen,speak`, `listen speak`, or `all`.
    pub fn parse(text: &str) -> Result<Self, ScopeError> {
        let mut scopes = Scopes::NONE;
        for word in text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
        {
            let word = word.to_ascii_lowercase();
            scopes = match word.as_str() {
                "all" => Scopes::ALL,
                _ => match Scope::ALL.iter().find(|s| s.as_str() == word) {
                    Some(scope) => scopes.with(*scope),
                    None => return Err(ScopeError::Unknown(word)),
                },
            };
        }
        if scopes == Scopes::NONE {
            return Err(ScopeError::Empty);
        }
        Ok(scopes)
    }

    /// From the names stored with a token; unknown names (from a later
    /// version) are dropped, never widened.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        names.into_iter().fold(Scopes::NONE, |acc, name| {
            match Scope::ALL.iter().find(|s| s.as_str() == name) {
                Some(scope) => acc.with(*scope),
                None => acc,
            }
        })
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parsing() {
        assert_eq!(Scopes::parse("listen,speak"), Ok(Scopes::DEFAULT));
        assert_eq!(Scopes::parse(" Speak  listen "), Ok(Scopes::DEFAULT));
        assert_eq!(Scopes::parse("all"), Ok(Scopes::ALL));
        assert_eq!(
            Scopes::parse("listen,admin").map(|s| s.names()),
            Ok(vec!["listen", "admin"])
        );
        assert_eq!(
            Scopes::parse("listen,root"),
            Err(ScopeError::Unknown("root".into()))
        );
        assert_eq!(Scopes::parse(" , "), Err(ScopeError::Empty));
        assert_eq!(Scopes::ALL.to_string(), "listen,speak,files,admin");
    }

    #[test]
    fn stored_names_never_widen() {
        assert_eq!(
            Scopes::from_names(["speak", "superuser"]),
            Scopes::NONE.with(Scope::Speak)
        );
    }
}
