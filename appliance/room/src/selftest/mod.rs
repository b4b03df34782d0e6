//! The daemon's side of `hark selftest` (the command is in `hark-client`):
//! each step is one `hark/selftest` request on the daemon's Unix socket
//! ([`serve`]), served only there, like
//! `hark/board`: no agent on the network can press the button or record
//! the room through it.
//!
//! On the simulated board the command needs nobody: the daemon moves the
//! simulated button and switch itself and the test checks that the
//! classified events came back on the event stream.
//!
//! The daemon side keeps a little state here ([`Bench`]): the board's
//! lights task to ask for a light cycle, whether a step holds the button
//! (a press during a button step is the test's, not a message for the
//! agents), and the last recording, for its playback.

pub mod hand;
pub mod lights;
pub mod serve;
pub mod signal;
pub mod step;

use std::sync::{
    Mutex, PoisonError, Weak,
    atomic::{AtomicU64, AtomicUsize, Ordering},
};

use hark_audio::clip::Clip;
use hark_board::Board;
use tokio::sync::mpsc;

pub use lights::LightsRequest;

/// The daemon's side of the self-test, in `ApplianceState`.
#[derive(Default)]
pub struct Bench {
    /// None without a board.
    board: Option<BoardAccess>,
    /// Button steps waiting now: while any does, presses are the test's.
    button: AtomicUsize,
    /// The last recording and its number (one at a time: a second replaces
    /// the first, so memory stays bounded).
    clip: Mutex<Option<(u64, Clip)>>,
    next_clip: AtomicU64,
}

/// How the self-test reaches the board: weakly, so the board still goes
/// (LEDs dark, pins released) at shutdown while a step runs.
struct BoardAccess {
    board: Weak<Board>,
    lights: mpsc::Sender<LightsRequest>,
}

impl Bench {
    /// The self-test of a room with `board`, whose lights task takes
    /// light cycles through `lights`.
    pub fn with_board(board: Weak<Board>, lights: mpsc::Sender<LightsRequest>) -> Self {
        Self {
            board: Some(BoardAccess { board, lights }),
            ..Self::default()
        }
    }

    /// Whether a button step holds the button now.
    pub fn has_button(&self) -> bool {
        self.button.load(Ordering::Acquire) > 0
    }

    /// Holds the button for a step until the guard drops.
    pub(super) fn take_button(&self) -> ButtonTaken<'_> {
        self.button.fetch_add(1, Ordering::AcqRel);
        ButtonTaken(self)
    }

    fn board(&self) -> Option<std::sync::Arc<Board>> {
        self.board
            .as_ref()
            .and_then(|access| access.board.upgrade())
    }

    fn lights(&self) -> Option<mpsc::Sender<LightsRequest>> {
        self.board.as_ref().map(|access| access.lights.clone())
    }

    /// Keeps `clip`, replacing the last one; returns its number.
    fn keep(&self, clip: Clip) -> u64 {
        let id = self.next_clip.fetch_add(1, Ordering::Relaxed) + 1;
        *self.clip.lock().unwrap_or_else(PoisonError::into_inner) = Some((id, clip));
        id
    }

    /// Recording `id`, if it is still the last one.
    fn clip(&self, id: u64) -> Option<Clip> {
        self.clip
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|(kept, _)| *kept == id)
            .map(|(_, clip)| clip.clone())
    }
}

/// See [`Bench::take_button`].
pub(super) struct ButtonTaken<'a>(&'a Bench);

impl Drop for ButtonTaken<'_> {
    fn drop(&mut self) {
        self.0.button.fetch_sub(1, Ordering::AcqRel);
    }
}
