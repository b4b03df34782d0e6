//! What the person went on to say after agents' listens ended their
//! turns (see [`crate::continuation`]), kept in the room's state: the
//! continuations under way per agent, and those heard, whole, for the
//! agent's next listen.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
};

use hark_core::room::{Heard, Recorded};
use tokio::sync::Notify;

use crate::inbox::Message;

/// Continuations heard in this run, kept whole for the agent's next
/// listen (the inbox keeps the words; a restart keeps only those).
const KEEP_HEARD: usize = 16;

/// The continuations under way (a window open, a recording, a
/// transcription) per agent, and those heard, whole: an agent's next
/// listen waits for the first and returns the second.
#[derive(Default)]
pub struct Continuing {
    under_way: Mutex<HashMap<String, usize>>,
    settled: Notify,
    /// By agent key.
    heard: Mutex<Vec<(String, Heard)>>,
    /// Where the person's going on after Home Assistant's last recording
    /// arrives (`Record::record_more`).
    handed: Mutex<Option<tokio::sync::oneshot::Receiver<Recorded>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Continuing {
    /// Where the person's going on after Home Assistant's last recording
    /// arrives.
    pub fn handed(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<tokio::sync::oneshot::Receiver<Recorded>>> {
        lock(&self.handed)
    }

    /// One more continuation under way for the agent `key`.
    pub fn begin(&self, key: &str) {
        *lock(&self.under_way).entry(key.to_owned()).or_default() += 1;
    }

    /// One fewer for `key`: the last one's end wakes whoever waits for
    /// it ([`Self::settled`]).
    pub fn end(&self, key: &str) {
        let mut under_way = lock(&self.under_way);
        if let Some(n) = under_way.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                under_way.remove(key);
            }
        }
        drop(under_way);
        self.settled.notify_waiters();
    }

    pub fn keep(&self, key: String, heard: Heard) {
        let mut kept = lock(&self.heard);
        if kept.len() >= KEEP_HEARD {
            kept.remove(0);
        }
        kept.push((key, heard));
    }

    /// The whole of what a kept message was heard as, when this run heard
    /// it (the inbox keeps the words, not the listen's other fields).
    pub fn whole(&self, message: &Message) -> Option<Heard> {
        let key = message.new.addressed_key.as_deref()?;
        let mut kept = lock(&self.heard);
        let at = kept
            .iter()
            .position(|(k, h)| k == key && h.text == message.new.text)?;
        Some(kept.remove(at).1)
    }

    /// Waits until no continuation is under way for the agent `key`.
    pub async fn settled(&self, key: &str) {
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !lock(&self.under_way).contains_key(key) {
                return;
            }
            notified.await;
        }
    }
}
