//! The speeches asked for through `POST /speak`, followed on the event
//! stream to their end for `GET /speak/{id}`: kept in the server's state,
//! below the scripts' endpoints that fill and read them.

use std::{sync::Arc, time::Duration};

use hark_core::events;
use serde::Serialize;

/// How a speech asked for through `POST /speak` is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Progress {
    Queued,
    Speaking,
    Spoken,
    Stopped,
    Failed,
    /// Its end was not seen (the event stream ran ahead of the watcher).
    Unknown,
}

impl From<events::SpeechEnded> for Progress {
    fn from(outcome: events::SpeechEnded) -> Self {
        match outcome {
            events::SpeechEnded::Spoken => Progress::Spoken,
            events::SpeechEnded::Stopped => Progress::Stopped,
            events::SpeechEnded::Failed => Progress::Failed,
        }
    }
}

/// One speech asked for through `POST /speak`, for `GET /speak/{id}`.
#[derive(Debug, Clone, Serialize)]
pub struct Followed {
    pub speech: u64,
    pub status: Progress,
    pub agent: String,
    pub text: String,
    /// Seconds played, once it ended.
    pub seconds: Option<f64>,
}

/// The speeches asked for through `POST /speak`, the newest [`FOLLOWED`].
#[derive(Debug, Default)]
pub struct Speeches(std::sync::Mutex<std::collections::VecDeque<Followed>>);

/// How many speeches `GET /speak/{id}` can tell about.
pub const FOLLOWED: usize = 256;
/// The longest a speech is followed: a queue this long is stuck.
const FOLLOW_FOR: Duration = Duration::from_secs(3600);

impl Speeches {
    fn update(&self, speech: u64, change: impl FnOnce(&mut Followed)) {
        let mut all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(followed) = all.iter_mut().find(|f| f.speech == speech) {
            change(followed);
        }
    }

    /// What is known of `speech`.
    pub fn get(&self, speech: u64) -> Option<Followed> {
        let all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        all.iter().find(|f| f.speech == speech).cloned()
    }

    /// Keeps `speech` and follows it on `events` (subscribed before it was
    /// queued) until it ends.
    pub fn follow(
        self: &Arc<Self>,
        speech: u64,
        agent: &str,
        text: &str,
        mut events: events::Events,
    ) {
        {
            let mut all = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if all.len() >= FOLLOWED {
                all.pop_front();
            }
            all.push_back(Followed {
                speech,
                status: Progress::Queued,
                agent: agent.to_owned(),
                text: text.to_owned(),
                seconds: None,
            });
        }
        let speeches = Arc::clone(self);
        tokio::spawn(async move {
            let watch = async {
                while let Some(event) = events::next(&mut events, "POST /speak").await {
                    match &event.event {
                        events::Event::SpeakingStarted { speech: id, .. } if *id == speech => {
                            speeches.update(speech, |f| f.status = Progress::Speaking);
                        }
                        events::Event::SpeakingEnded {
                            speech: id,
                            outcome,
                            seconds,
                            ..
                        } if *id == speech => {
                            speeches.update(speech, |f| {
                                f.status = Progress::from(*outcome);
                                f.seconds = Some(*seconds);
                            });
                            return;
                        }
                        // Stopped (or failed) before a sound of it played.
                        events::Event::SpeechDropped {
                            speech: id,
                            outcome,
                            ..
                        } if *id == speech => {
                            speeches.update(speech, |f| {
                                f.status = Progress::from(*outcome);
                                f.seconds = Some(0.0);
                            });
                            return;
                        }
                        _ => {}
                    }
                }
            };
            if tokio::time::timeout(FOLLOW_FOR, watch).await.is_err() {
                speeches.update(speech, |f| f.status = Progress::Unknown);
            }
        });
    }
}
