//! What the room offers: the microphone, the speaker and the person's hand,
//! as narrow capabilities over plain data. The daemon's room implements
//! them; the MCP side parses a call's arguments, makes one call through the
//! capability it needs and formats the result, and its tests call a
//! simulated room instead.
//!
//! - [`Listen`]: hear the person (`transcribe_voice`);
//! - [`Speak`]: speak to them, stop, and the sentences a text is spoken in;
//! - [`Ask`]: a question and its answer (`converse`, `confirm`, `choose`);
//! - [`Files`]: speech from and to files (transcribe, detect the language,
//!   synthesise), and the voices;
//! - [`Volume`], [`Observe`] (what the room is doing), [`Hands`] (the
//!   simulated board, the self-test) and [`Pair`] (the person approves an
//!   agent).
//!
//! A call that is dropped is cancelled: its recording stops, its speech
//! stops, its transcription is abandoned. Results are plain data; with the
//! `schema` feature they also describe themselves as JSON Schema, for the
//! MCP side to publish as output schemas (their doc comments are the
//! fields' descriptions).
//!
//! One file per capability, each with its calls and results; `call.rs`
//! holds what they share (the boxed future, [`Failure`] and its [`Kind`],
//! the argument checks, [`Progress`]). Everything is re-exported here, so
//! a capability's types are `hark_core::room::…` whichever file has them.

mod agents;
mod ask;
mod call;
mod files;
mod hands;
mod listen;
mod observe;
mod pair;
mod pcm;
mod record;
mod speak;
mod volume;

pub use agents::*;
pub use ask::*;
pub use call::*;
pub use files::*;
pub use hands::*;
pub use listen::*;
pub use observe::*;
pub use pair::*;
pub use pcm::*;
pub use record::*;
pub use speak::*;
pub use volume::*;

/// Every capability of one room, each reachable alone: a tool takes the
/// one it needs.
#[derive(Clone)]
pub struct Capabilities {
    pub listen: std::sync::Arc<dyn Listen>,
    pub speak: std::sync::Arc<dyn Speak>,
    pub ask: std::sync::Arc<dyn Ask>,
    pub files: std::sync::Arc<dyn Files>,
    pub volume: std::sync::Arc<dyn Volume>,
    pub observe: std::sync::Arc<dyn Observe>,
    pub hands: std::sync::Arc<dyn Hands>,
    pub pair: std::sync::Arc<dyn Pair>,
    pub wake: std::sync::Arc<dyn WakeWord>,
    pub schedule: std::sync::Arc<dyn Schedule>,
    pub agents: std::sync::Arc<dyn AgentSettings>,
}

impl Capabilities {
    /// A room that has them all.
    pub fn of<R>(room: std::sync::Arc<R>) -> Self
    where
        R: Listen
            + Speak
            + Ask
            + Files
            + Volume
            + Observe
            + Hands
            + Pair
            + WakeWord
            + Schedule
            + AgentSettings
            + 'static,
    {
        Self {
            listen: room.clone(),
            speak: room.clone(),
            ask: room.clone(),
            files: room.clone(),
            volume: room.clone(),
            observe: room.clone(),
            hands: room.clone(),
            pair: room.clone(),
            wake: room.clone(),
            schedule: room.clone(),
            agents: room,
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn later_is_a_delay_or_a_time_and_a_timer_only_with_one() {
        use std::time::{Duration, SystemTime};
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(check_later(None, None, None, None, now).unwrap(), None);
        let later = check_later(Some(90.0), None, Some(true), None, now)
            .unwrap()
            .unwrap();
        assert_eq!(later.due, now + Duration::from_secs(90));
        assert_eq!(
            later.ring,
            Some(Duration::from_secs(60)),
            "a minute by default"
        );
        // `now` is 2027-01-15T08:00:00Z.
        let at = check_later(None, Some("2027-01-15T09:00:00Z"), None, None, now)
            .unwrap()
            .unwrap();
        assert_eq!(at.due, now + Duration::from_secs(3600));
        assert!(at.ring.is_none());
        let past = check_later(None, Some("2020-01-01T00:00:00Z"), None, None, now)
            .unwrap()
            .unwrap();
        assert_eq!(past.due, now, "a time past is said now");
        for (delay, at, ring, seconds, why) in [
            (
                Some(1.0),
                Some("2027-01-01T00:00:00Z"),
                None,
                None,
                "not both",
            ),
            (Some(-1.0), None, None, None, "delay_seconds must be"),
            (Some(f64::NAN), None, None, None, "delay_seconds must be"),
            (None, Some("soon"), None, None, "RFC 3339"),
            (None, Some("2099-01-01T00:00:00Z"), None, None, "seven days"),
            (None, None, Some(true), None, "need delay_seconds or at"),
            (Some(5.0), None, None, Some(10.0), "needs ring: true"),
            (
                Some(5.0),
                None,
                Some(true),
                Some(0.5),
                "ring_seconds must be",
            ),
        ] {
            let e = check_later(delay, at, ring, seconds, now).unwrap_err();
            assert!(e.message.contains(why), "{why}: {}", e.message);
            assert_eq!(e.kind, Kind::InvalidArgument);
        }
    }

    use super::*;

    #[test]
    fn questions_are_checked() {
        assert!(check_question("  ").is_err());
        let long = "why ".repeat(5000);
        let e = check_question(&long).unwrap_err();
        assert!(e.message.contains("at most 1000"), "{}", e.message);
        assert_eq!(check_question(" Delete it? ").unwrap(), "Delete it?");
    }

    #[test]
    fn the_options_are_read_out_numbered() {
        let options = vec![
            "Pizza.".to_owned(),
            "  sushi ".to_owned(),
            "tacos".to_owned(),
        ];
        assert_eq!(
            prompt("What shall we eat", &options),
            "What shall we eat? One: Pizza. Two: sushi. Three: tacos."
        );
        assert_eq!(
            prompt("Pick one.", &options[..2]),
            "Pick one. One: Pizza. Two: sushi."
        );
    }

    #[test]
    fn rates_and_volumes_are_checked() {
        assert_eq!(check_rate(None).unwrap(), None);
        assert_eq!(check_rate(Some(1.5)).unwrap(), Some(1.5));
        assert!(
            check_rate(Some(2.5))
                .unwrap_err()
                .message
                .contains("0.5 and 2.0")
        );
        assert_eq!(check_volume(100).unwrap(), 100);
        assert!(check_volume(101).is_err());
        assert!(check_volume(-1).is_err());
    }

    #[test]
    fn a_failures_context_is_an_object_of_its_fields_or_null() {
        let wire = |c: Context| serde_json::to_value(c).unwrap();
        assert_eq!(wire(Context::None), serde_json::Value::Null);
        assert_eq!(
            wire(Context::Floor {
                holder: Some("cursor".into()),
                waiting: Some(2)
            }),
            serde_json::json!({ "holder": "cursor", "waiting": 2 })
        );
        assert_eq!(
            wire(Context::Floor {
                holder: None,
                waiting: Some(8)
            }),
            serde_json::json!({ "waiting": 8 })
        );
        let long = check_text(&"a".repeat(12), 10).unwrap_err();
        assert_eq!(
            wire(long.context),
            serde_json::json!({ "characters": 12, "limit": 10 })
        );
    }
}
