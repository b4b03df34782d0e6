//! A stand-in for the room's speech services, for tests of the protocol
//! side (the crate's own and the `wyoming` fuzz target's): it says how
//! much audio it was given, speaks a text as one sample per character, and
//! fails when the text says "fail". The daemon never uses it.

use hark_core::room::{
    BoxFuture, Failure, Kind, Offer, OfferedModel, OfferedVoice, Pcm, PcmSpeech, PcmText, PcmVoice,
};

/// The most samples [`Counting`] makes for one text.
const MOST: usize = 5000;

pub struct Counting;

impl PcmSpeech for Counting {
    fn transcribe_pcm(
        &self,
        audio: Pcm,
        language: Option<String>,
    ) -> BoxFuture<'_, Result<PcmText, Failure>> {
        Box::pin(async move {
            // What the protocol side hands on is audio as the engines take it.
            assert!(
                audio
                    .samples
                    .iter()
                    .all(|s| s.is_finite() && s.abs() <= 1.0),
                "samples out of range"
            );
            Ok(PcmText {
                text: format!("{} samples at {} Hz", audio.samples.len(), audio.rate),
                language: language.unwrap_or_else(|| "en".into()),
            })
        })
    }

    fn synthesize_pcm(
        &self,
        text: String,
        voice: Option<String>,
    ) -> BoxFuture<'_, Result<PcmVoice, Failure>> {
        Box::pin(async move {
            if text.contains("fail") {
                return Err(Failure::new(Kind::Speech, "cannot say that"));
            }
            Ok(PcmVoice {
                audio: Pcm {
                    rate: 22_050,
                    samples: vec![0.25; text.chars().count().min(MOST)],
                },
                voice: voice.unwrap_or_else(|| "joe".into()),
            })
        })
    }

    fn offer(&self) -> BoxFuture<'_, Result<Offer, Failure>> {
        Box::pin(async {
            Ok(Offer {
                models: vec![OfferedModel {
                    name: "tiny.en".into(),
                    languages: vec!["en".into()],
                }],
                voices: vec![OfferedVoice {
                    name: "joe".into(),
                    languages: vec!["en_US".into()],
                }],
                voice: None,
            })
        })
    }
}
