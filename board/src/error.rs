//! Why the board could not start: below the board and its ports, which
//! all fail this way.

use crate::{detect::DetectError, gpio::GpioError, profile::ProfileError};

/// Why the board could not start.
#[derive(Debug, thiserror::Error)]
pub enum BoardError {
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error(transparent)]
    Detect(#[from] DetectError),
    #[error("board profile {profile}: {source}")]
    Gpio {
        profile: String,
        // Boxed: the GPIO errors carry chip names and holders, and every
        // board result would otherwise be as large as the largest.
        #[source]
        source: Box<GpioError>,
    },
    #[error("cannot start the LED thread: {0}")]
    Thread(#[source] std::io::Error),
}
