//! How the audio threads tell the rest of the daemon that their state
//! changed (the device went missing, the speaker started or stopped)
//! without ever waiting or allocating: a bounded channel of one empty
//! message. A full channel means a wake-up is already pending, so a failed
//! send loses nothing — whoever wakes reads the state itself from the
//! threads' atomics ([`crate::CaptureStats`], [`crate::playback::PlayerStats`]).

use std::sync::{
    OnceLock,
    mpsc::{Receiver, SyncSender, sync_channel},
};

/// The sending side, kept by an audio thread's stats. Until someone asks
/// to be told ([`Changed::connect`]) it does nothing.
#[derive(Debug, Default)]
pub struct Changed(OnceLock<SyncSender<()>>);

impl Changed {
    /// Wakes the receiver, or does nothing if a wake-up is pending (or no
    /// one listens). Never blocks, never allocates.
    pub fn notify(&self) {
        if let Some(tx) = self.0.get() {
            let _ = tx.try_send(());
        }
    }

    /// Sends wake-ups to `tx` from now on. Only the first call counts.
    pub fn connect(&self, tx: SyncSender<()>) {
        let _ = self.0.set(tx);
    }
}

/// A wake-up channel: give the sender to one or more [`Changed`], wait on
/// the receiver.
pub fn channel() -> (SyncSender<()>, Receiver<()>) {
    sync_channel(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_ups_coalesce_and_never_block() {
        let changed = Changed::default();
        changed.notify(); // nobody listens: nothing happens
        let (tx, rx) = channel();
        changed.connect(tx);
        for _ in 0..1000 {
            changed.notify();
        }
        assert!(rx.try_recv().is_ok(), "one wake-up is pending");
        assert!(rx.try_recv().is_err(), "and only one");
        changed.notify();
        assert!(rx.try_recv().is_ok());
    }
}
