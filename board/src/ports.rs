//! The board's ports, one trait each, so that a backend is a value picked
//! at start-up (librespot's backend table, here chosen by the profile):
//!
//! | port | trait | backends |
//! |---|---|---|
//! | push-to-talk button, mute switch | [`Contact`] | [`crate::contact::GpioContact`], [`ChannelContact`] (the simulated board, the microcontroller link) |
//! | LEDs | [`LedOutput`] | [`crate::gpio::GpioLeds`], [`crate::gpio::Apa102`], [`crate::sim::SimLeds`] |
//! | microcontroller link | [`Opener`] | [`crate::link::SerialOpener`]; tests open pseudo-terminals and pipes |
//!
//! A contact reports raw levels, bounces included; the board runs the same
//! debounce and classifier ([`crate::button`]) behind every one of them.

use tokio::{sync::mpsc, task::JoinHandle};

pub use crate::led::LedOutput;
pub use crate::link::Opener;
use crate::{button::Level, error::BoardError};

/// Keeps a started contact's backend running; dropping it stops the
/// backend and releases what it holds (a GPIO pin).
pub type Running = Box<dyn Send + Sync>;

/// A button or a switch: a contact that is closed or open.
pub trait Contact: Send {
    /// What it is, for logs.
    fn describe(&self) -> String;

    /// Starts reporting raw levels to `levels` (call inside a tokio
    /// runtime).
    fn start(self: Box<Self>, levels: mpsc::Sender<Level>) -> Result<Running, BoardError>;
}

/// A contact whose levels arrive on a channel: the simulated board's
/// (moved by `hark button` / `hark mute`) and a microcontroller's (from its
/// link's events).
pub struct ChannelContact {
    name: String,
    levels: mpsc::Receiver<Level>,
}

impl ChannelContact {
    /// The contact, and the sender its levels come from.
    pub fn new(name: impl Into<String>) -> (mpsc::Sender<Level>, ChannelContact) {
        let (tx, levels) = mpsc::channel(64);
        (
            tx,
            ChannelContact {
                name: name.into(),
                levels,
            },
        )
    }
}

/// Aborts a forwarding task when dropped.
pub(crate) struct AbortOnDrop(pub(crate) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Contact for ChannelContact {
    fn describe(&self) -> String {
        self.name.clone()
    }

    fn start(self: Box<Self>, levels: mpsc::Sender<Level>) -> Result<Running, BoardError> {
        let mut from = self.levels;
        let task = tokio::spawn(async move {
            while let Some(level) = from.recv().await {
                if levels.send(level).await.is_err() {
                    break;
                }
            }
        });
        Ok(Box::new(AbortOnDrop(task)))
    }
}
