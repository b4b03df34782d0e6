//! What every section of the configuration file shares: the error naming
//! the key that is wrong, and the range check.

/// A value in the configuration that cannot be used: its key and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid value for `{key}`: {reason}")]
pub struct Invalid {
    pub key: &'static str,
    pub reason: String,
}

/// `value` of `key` checked against `lo`–`hi` (inclusive).
pub fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
    key: &'static str,
    value: T,
    (lo, hi): (T, T),
) -> Result<(), Invalid> {
    use std::cmp::Ordering::{Greater, Less};
    // Written with `partial_cmp` so NaN (TOML accepts `nan`) is out of range.
    let below = matches!(value.partial_cmp(&lo), Some(Less) | None);
    let above = matches!(value.partial_cmp(&hi), Some(Greater) | None);
    if below || above {
        return Err(Invalid {
            key,
            reason: format!("{value} is outside {lo}–{hi}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ends_are_in_and_nan_is_out() {
        assert!(check_range("k", 1, (1, 3)).is_ok());
        assert!(check_range("k", 3, (1, 3)).is_ok());
        let err = check_range("k", 4, (1, 3)).unwrap_err();
        assert_eq!(err.key, "k");
        assert_eq!(err.reason, "4 is outside 1–3");
        assert!(check_range("k", f64::NAN, (0.0, 1.0)).is_err());
    }
}
