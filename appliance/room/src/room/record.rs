//! Recordings for someone who transcribes them: Home Assistant's pipeline,
//! run from Hark as its satellite. The person started it (the wake word),
//! so it goes before every agent waiting for the floor, and it records as
//! a listen does, without the transcription.

use std::time::Duration;

use hark_core::{
    floor::Who,
    room::{BoxFuture, Failure, Quiet, Record, RecordCall, Recorded},
};

use super::{Room, failure};
use crate::listen::{self, Chime, Listen};

/// Where a recording's tool shows in the floor and `get_status`.
const TOOL: &str = "satellite";

impl Record for Room {
    fn record(&self, call: RecordCall) -> BoxFuture<'_, Result<Recorded, Failure>> {
        Box::pin(async move {
            let timeout = Duration::from_secs_f64(call.timeout.clamp(0.5, 600.0));
            let turn = self
                .state
                .floor
                .take(Who::Person, TOOL, true, timeout)
                .await
                .map_err(Failure::from)?;
            tracing::info!(who = %call.who, "recording the person for {}", call.who);
            // What the person goes on to say after the turn comes back
            // through `record_more`.
            let (more, rest) = tokio::sync::oneshot::channel();
            *self.state.ears.continuing.handed() = Some(rest);
            let request = Listen {
                agent: None,
                timeout,
                language: None,
                chime: Chime::Alongside,
                push_to_talk: true,
                turn: Some(turn),
                expect: listen::Expect::Anything,
                start_at: call.start_at,
                continuation: false,
                after: crate::continuation::hand_over(&self.state, more),
            };
            listen::record(&self.state, request, &mut Quiet)
                .await
                .map_err(failure::listen)
        })
    }

    fn record_more(&self) -> BoxFuture<'_, Option<Recorded>> {
        Box::pin(async move {
            let rest = self.state.ears.continuing.handed().take()?;
            rest.await.ok()
        })
    }
}
