//! Barge-in by voice: while Hark speaks the question of a `converse`, the
//! person starting to answer stops it, and the answer is recorded from
//! where their voice began.
//!
//! Only with echo cancellation (`[audio.echo] cancel`): without it the
//! microphone is closed while Hark speaks (half duplex), or hears Hark
//! itself. A thread of its own reads the microphone (after the canceller
//! and its suppressor, where echo does not pass for a person)
//! from the moment the question starts playing, through the voice detector with
//! `barge_in_ms` of speech needed; when it fires it stops the speech and
//! keeps the position. Polled every 10 ms, like a recording.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use hark_audio::vad::{Event, Segmenter};

/// A watch over the microphone while Hark speaks.
pub struct Watch {
    stop: Arc<AtomicBool>,
    /// The ring position + 1 where the person's voice began (0: not yet).
    heard: Arc<AtomicU64>,
}

impl Watch {
    /// Starts watching, when echo cancellation lets the microphone hear
    /// the person over Hark.
    pub fn start(
        ears: &crate::state::Ears,
        tts: &Arc<crate::tts::TextToSpeech>,
        bus: &crate::events::Bus,
    ) -> Option<Self> {
        let mic = ears.microphone.as_ref()?;
        let barge_in = mic.barge_in.clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let heard = Arc::new(AtomicU64::new(0));
        let config = hark_audio::echo::barge_in_rule(&mic.vad, barge_in.ms);
        let (ring, tts) = (barge_in.ring, Arc::clone(tts));
        let (stopped, found) = (Arc::clone(&stop), Arc::clone(&heard));
        // Subscribed now: the question's first sound is not missed.
        let mut events = bus.subscribe();
        let spawned = std::thread::Builder::new()
            .name("hark-barge-in".into())
            .spawn(move || {
                // Only what is heard once the question plays: the listen
                // before it ended with its own earcon, and the person
                // talking before Hark starts is not talking over it.
                while !hark_core::events::received(&mut events)
                    .any(|e| matches!(e.event, hark_core::events::Event::SpeakingStarted { .. }))
                {
                    if stopped.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let mut reader = ring.reader(0);
                let mut segmenter = Segmenter::new(&config, reader.position());
                let mut buffer = [0.0f32; 320];
                while !stopped.load(Ordering::Acquire) {
                    let n = reader.read(&mut buffer);
                    if n == 0 {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    let mut fed = 0;
                    while fed < n {
                        let (used, event) = segmenter.push(&buffer[fed..n]);
                        fed += used;
                        if let Some(Event::SpeechStart { at }) = event {
                            found.store(at + 1, Ordering::Release);
                            let dropped = tts.stop();
                            tracing::info!(
                                at,
                                dropped,
                                "the person spoke over Hark: speech stopped"
                            );
                            return;
                        }
                    }
                }
            });
        match spawned {
            Ok(_) => Some(Self { stop, heard }),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch for barge-in by voice");
                None
            }
        }
    }

    /// Ends the watch: where the person's voice began, if it stopped Hark.
    pub fn finish(self) -> Option<u64> {
        self.stop.store(true, Ordering::Release);
        self.heard.load(Ordering::Acquire).checked_sub(1)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}
