//! What the self-test's steps share, below the steps themselves
//! ([`super::serve`], [`super::hand`]): why a step fails, and how a step
//! finds the floor, the board and its contacts.

use std::{sync::Arc, time::Duration};

use hark_board::{
    Board,
    profile::{InputPin, Profile},
    sim::SimError,
};

use super::lights::LightsError;
use crate::floor::{Floor, FloorError, Turn, Who};

/// Longest a step waits for the floor (an agent's call in progress).
const FLOOR_WAIT: Duration = Duration::from_secs(10);

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{0}")]
    Invalid(String),
    #[error("there is no board: {0}")]
    NoBoard(String),
    #[error("this board has no {what} ({board})")]
    NoContact { what: &'static str, board: String },
    #[error("this is not the simulated board ({0}): a person has to move its button and switch")]
    NotSimulated(String),
    #[error("the simulated board: {0}")]
    Sim(#[from] SimError),
    #[error("the microphone and speaker are busy: {0}")]
    Busy(#[from] FloorError),
    #[error("there is no speaker: {0}")]
    NoSpeaker(String),
    #[error("the {what} did not play: {why}")]
    NotPlayed { what: &'static str, why: String },
    #[error("the sentence was not said: {0}")]
    NotSpoken(String),
    #[error("there is no microphone: {0}")]
    NoMicrophone(String),
    #[error(
        "the mute switch is on: the microphone records silence while it is; turn it off and try again"
    )]
    Muted,
    #[error("the microphone stopped delivering sound after {got:.1} of {wanted:.1} s ({state})")]
    Stalled {
        got: f64,
        wanted: f64,
        state: String,
    },
    #[error("that recording is gone: a newer one replaced it")]
    ClipGone,
    #[error(transparent)]
    Lights(#[from] LightsError),
    #[error("no {what} seen within {seconds} s on {on}{hint}")]
    NotSeen {
        what: &'static str,
        seconds: f64,
        on: String,
        hint: String,
    },
    #[error(
        "the microcontroller link's device {device} does not exist (board profile {profile}, `link.device`): is the microcontroller plugged in, and is the path right?"
    )]
    LinkMissing { device: String, profile: String },
    #[error("cannot look at the microcontroller link's device {device}: {source}")]
    LinkUnreadable {
        device: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the event stream ended: the daemon is stopping")]
    Stopping,
    #[error("the step was cancelled")]
    Cancelled,
}

pub async fn take_floor(floor: &Arc<Floor>) -> Result<Turn, StepError> {
    Ok(floor.take(Who::Hark, "selftest", true, FLOOR_WAIT).await?)
}

pub fn board(
    bench: &super::Bench,
    subsystems: &hark_core::status::Subsystems,
) -> Result<Arc<Board>, StepError> {
    bench.board().ok_or_else(|| {
        StepError::NoBoard(
            subsystems
                .get(hark_core::status::Subsystem::Board)
                .to_string(),
        )
    })
}

/// A contact as the person finds it: the simulated one, a GPIO pin of the
/// profile, or the microcontroller's.
pub fn contact_name(
    board: &Board,
    what: &str,
    pin: impl Fn(&Profile) -> Option<InputPin>,
) -> Option<String> {
    if board.simulated_control().is_some() {
        return Some(format!("the simulated {what}"));
    }
    let profile = board.profile()?;
    let link = profile
        .link
        .as_ref()
        .map(|l| l.device.display().to_string());
    match (pin(profile), link) {
        (Some(pin), None) => Some(format!("the {what} (GPIO {} of {})", pin.pin, profile.name)),
        (Some(pin), Some(device)) => Some(format!(
            "the {what} (GPIO {} of {}, or the microcontroller's at {device})",
            pin.pin, profile.name
        )),
        (None, Some(device)) => Some(format!(
            "the {what} on the microcontroller at {device} ({})",
            profile.name
        )),
        (None, None) => None,
    }
}
