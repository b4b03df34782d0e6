//! A window for the person: the room listens for them (a follow-up, the
//! moment after their turn to go on) before they have begun to speak, and
//! gives way when speech waits to be said or an agent it yields to waits
//! for the floor. Shared by the person's start, the follow-up and the
//! continuation, below all three; it reads only the speech queue and the
//! floor.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hark_core::room::{BoxFuture, Progress, Report};

use crate::{floor::Floor, tts::TextToSpeech};

/// How often a window for the person (a follow-up, the moment after a
/// turn to go on) looks whether someone wants the floor or the speaker.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Resolves when, while a window for the person listens and they have not
/// begun to speak (`spoke`), speech waits to be said or someone `yields_to`
/// admits waits for the floor: the window then gives way. Once the person
/// speaks, never.
pub async fn wanted(
    tts: &TextToSpeech,
    floor: &Floor,
    spoke: &AtomicBool,
    yields_to: impl Fn(&hark_core::room::Place) -> bool,
) {
    let mut tick = tokio::time::interval(LOOK_EVERY);
    loop {
        tick.tick().await;
        if spoke.load(Ordering::Acquire) {
            return std::future::pending().await;
        }
        if tts.pending() > 0 || floor.status().queue.iter().any(&yields_to) {
            return;
        }
    }
}

/// The listen's progress, read for one thing: the person began to speak.
#[derive(Default)]
pub struct SpokeFlag(Arc<AtomicBool>);

impl SpokeFlag {
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

impl Report for SpokeFlag {
    fn report(&mut self, progress: Progress) -> BoxFuture<'_, ()> {
        if matches!(progress, Progress::SpeechDetected) {
            self.0.store(true, Ordering::Release);
        }
        Box::pin(async {})
    }
}
