//! Model names.
//!
//! A name becomes part of file names in the store (`ggml-<name>.bin`,
//! `<name>.part`), so it is checked before anything touches the disk: a
//! name must never reach outside the models directory or hide a file.

/// The longest name accepted, in bytes (all allowed characters are ASCII).
pub const MAX_NAME_LEN: usize = 64;

/// What is wrong with a model name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameProblem {
    #[error("it is empty")]
    Empty,
    #[error("it is longer than {MAX_NAME_LEN} characters")]
    TooLong,
    #[error("it contains a path separator")]
    Separator,
    #[error("it contains `..`")]
    DotDot,
    #[error("it starts with a dot")]
    LeadingDot,
    #[error("it contains {0:?}; allowed are ASCII letters, digits, `.`, `_` and `-`")]
    Character(char),
}

/// Checks a model name: 1 to [`MAX_NAME_LEN`] characters from
/// `[A-Za-z0-9._-]`, not starting with a dot, without `..`.
pub fn check_name(name: &str) -> Result<(), NameProblem> {
    if name.is_empty() {
        return Err(NameProblem::Empty);
    }
    // Separators and `..` are reported as such, before the generic
    // character rule, because they are what a path traversal looks like.
    if name.contains(['/', '\\']) {
        return Err(NameProblem::Separator);
    }
    if name.contains("..") {
        return Err(NameProblem::DotDot);
    }
    if name.starts_with('.') {
        return Err(NameProblem::LeadingDot);
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(NameProblem::Character(c));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameProblem::TooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whisper_cpp_names_are_accepted() {
        for name in [
            "tiny",
            "tiny.en",
            "tiny.en-q8_0",
            "large-v3-turbo-q5_0",
            "a",
        ] {
            assert_eq!(check_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn bad_names_say_why() {
        let long = "x".repeat(MAX_NAME_LEN + 1);
        let cases = [
            ("", NameProblem::Empty),
            ("a/b", NameProblem::Separator),
            ("../etc", NameProblem::Separator),
            ("a\\b", NameProblem::Separator),
            ("a..b", NameProblem::DotDot),
            ("..", NameProblem::DotDot),
            (".hidden", NameProblem::LeadingDot),
            ("tiny en", NameProblem::Character(' ')),
            ("tiny\0", NameProblem::Character('\0')),
            ("modèle", NameProblem::Character('è')),
            (long.as_str(), NameProblem::TooLong),
        ];
        for (name, problem) in cases {
            assert_eq!(check_name(name), Err(problem), "{name:?}");
        }
        assert_eq!(check_name(&"x".repeat(MAX_NAME_LEN)), Ok(()));
    }
}
