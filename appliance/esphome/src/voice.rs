//! Hark speaking for Home Assistant: its announcements, its pipeline's
//! replies and its timers are said in Hark's voice, as Home Assistant's
//! (the history and the logs name it the speaker). Below both the
//! connection ([`crate::server`]) and the pipeline's runs
//! ([`crate::pipeline`]), which both speak.

use hark_core::room::{Later, Priority, Quiet, Speak, SpeakCall, SpeechStatus};

/// Whose speech an announcement is, in the history and the logs.
pub const ANNOUNCER: &str = "Home Assistant";

/// What Home Assistant has Hark say now, in Hark's voice.
pub fn as_home_assistant(text: String, wait: bool, later: Option<Later>) -> SpeakCall {
    SpeakCall {
        language: None,
        agent: Some(ANNOUNCER.to_owned()),
        text,
        voice: None,
        rate: None,
        priority: Priority::Normal,
        wait,
        later,
    }
}

/// Says `text` for Home Assistant (`what`, for the log); whether it was
/// heard to the end.
pub async fn say(speak: &dyn Speak, text: String, what: &str) -> bool {
    match speak
        .speak(as_home_assistant(text, true, None), &mut Quiet)
        .await
    {
        Ok(spoken) => spoken.status == SpeechStatus::Spoken,
        Err(failure) => {
            tracing::info!(error = %failure.message, "{what} was not said");
            false
        }
    }
}
