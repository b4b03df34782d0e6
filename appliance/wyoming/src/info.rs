//! `describe` → `info`: what Hark offers Home Assistant, in the shape the
//! `wyoming` package's `Info` reads (programs, each with its models,
//! voices or wake words, each an artifact with a name, an attribution,
//! whether it is installed, a description and a version).

use hark_core::room::Offer;
use serde_json::{Value, json};

use crate::event::Event;

fn attribution() -> Value {
    json!({"name": "Hark", "url": "https://github.com/hark-voice/hark"})
}

/// The `info` event for `offer`.
pub fn info(offer: &Offer) -> Event {
    let version = env!("CARGO_PKG_VERSION");
    let models: Vec<Value> = offer
        .models
        .iter()
        .map(|m| {
            json!({
                "name": m.name,
                "languages": m.languages,
                "attribution": {"name": "OpenAI Whisper", "url": "https://github.com/openai/whisper"},
                "installed": true,
                "description": format!("whisper {} (whisper.cpp)", m.name),
                "version": Value::Null,
            })
        })
        .collect();
    let voices: Vec<Value> = offer
        .voices
        .iter()
        .map(|v| {
            json!({
                "name": v.name,
                "languages": v.languages,
                "attribution": {"name": "rhasspy", "url": "https://github.com/rhasspy/piper"},
                "installed": true,
                "description": v.name,
                "version": Value::Null,
                "speakers": Value::Null,
            })
        })
        .collect();
    let words: Vec<Value> = offer
        .words
        .iter()
        .map(|w| {
            json!({
                "name": w.name,
                "languages": w.languages,
                "phrase": w.phrase,
                "attribution": {"name": "microWakeWord", "url": "https://github.com/kahrendt/microWakeWord"},
                "installed": true,
                "description": w.phrase,
                "version": Value::Null,
            })
        })
        .collect();
    // A program with nothing in it is left out, not listed empty.
    let program = |name: &str, what: &str, items: (&str, Vec<Value>), streams: &str| {
        let (key, items) = items;
        let mut program = json!({
            "name": name,
            "attribution": attribution(),
            "installed": true,
            "description": what,
            "version": version,
        });
        if !streams.is_empty() {
            program[streams] = json!(true);
        }
        program[key] = Value::Array(items);
        program
    };
    let asr: Vec<Value> = (!models.is_empty())
        .then(|| {
            program(
                "hark-stt",
                "Hark's speech to text",
                ("models", models),
                "supports_transcript_streaming",
            )
        })
        .into_iter()
        .collect();
    let tts: Vec<Value> = (!voices.is_empty())
        .then(|| {
            program(
                "hark-tts",
                "Hark's text to speech",
                ("voices", voices),
                "supports_synthesize_streaming",
            )
        })
        .into_iter()
        .collect();
    let wake: Vec<Value> = (!words.is_empty())
        .then(|| program("hark-wake", "Hark's wake word", ("models", words), ""))
        .into_iter()
        .collect();
    Event::new("info").with_data(json!({
        "asr": asr,
        "tts": tts,
        "handle": [],
        "intent": [],
        "wake": wake,
        "mic": [],
        "snd": [],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hark_core::room::{OfferedModel, OfferedVoice, OfferedWord};

    #[test]
    fn what_is_on_offer_is_listed_and_nothing_else() {
        let offer = Offer {
            models: vec![OfferedModel {
                name: "tiny.en-q8_0".into(),
                languages: vec!["en".into()],
            }],
            voices: vec![OfferedVoice {
                name: "en_US-joe-medium".into(),
                languages: vec!["en_US".into()],
            }],
            voice: Some("en_US-joe-medium".into()),
            words: vec![OfferedWord {
                name: "okay_nabu".into(),
                phrase: "Okay Nabu".into(),
                languages: vec!["en".into(), "de".into()],
            }],
        };
        let event = info(&offer);
        assert_eq!(event.kind, "info");
        let asr = &event.data["asr"][0];
        assert_eq!(asr["models"][0]["name"], "tiny.en-q8_0");
        assert_eq!(asr["models"][0]["languages"], json!(["en"]));
        let tts = &event.data["tts"][0];
        assert_eq!(tts["voices"][0]["name"], "en_US-joe-medium");
        assert_eq!(tts["supports_synthesize_streaming"], true);
        assert_eq!(asr["supports_transcript_streaming"], true);
        let wake = &event.data["wake"][0];
        assert_eq!(wake["models"][0]["name"], "okay_nabu");
        assert_eq!(wake["models"][0]["phrase"], "Okay Nabu");
        // Nothing offered: no program at all, rather than one with nothing.
        let empty = info(&Offer::default());
        assert_eq!(empty.data["asr"], json!([]));
        assert_eq!(empty.data["tts"], json!([]));
        assert_eq!(empty.data["wake"], json!([]));
    }
}
