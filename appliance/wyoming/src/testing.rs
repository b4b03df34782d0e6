//! A stand-in for the room's speech services, for tests of the protocol
//! side (the crate's own and the `wyoming` fuzz target's): it says how
//! much audio it was given (its drafts read [`DRAFTED`], a word a second
//! heard), speaks a text as one sample per character,
//! fails when the text says "fail", and hears its wake word, `loud`, in a
//! sample at 0.9 of full scale or more (`quiet` is installed too, never
//! heard; any other name is not installed). The daemon never uses it.

use hark_core::room::{
    BoxFuture, Failure, Kind, Offer, OfferedModel, OfferedVoice, OfferedWord, Pcm, PcmSpeech,
    PcmSpotter, PcmText, PcmVoice, Spotted,
};

/// The most samples [`Counting`] makes for one text.
const MOST: usize = 5000;

/// What [`Counting`]'s drafts read, a word for each second heard.
pub const DRAFTED: &str = "Turn the kitchen lights off.";

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

    fn draft_pcm(
        &self,
        audio: Pcm,
        _language: Option<String>,
    ) -> BoxFuture<'_, Result<Option<String>, Failure>> {
        Box::pin(async move {
            // A word a second, from a sentence that ends.
            let seconds = audio.samples.len() / audio.rate.max(1) as usize;
            let words: Vec<&str> = DRAFTED.split(' ').take(seconds).collect();
            Ok(Some(words.join(" ")))
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
                words: ["loud", "quiet"]
                    .map(|name| OfferedWord {
                        name: name.into(),
                        phrase: name.into(),
                        languages: vec!["en".into()],
                    })
                    .into(),
            })
        })
    }

    fn spotter(
        &self,
        words: Option<Vec<String>>,
    ) -> BoxFuture<'_, Result<Box<dyn PcmSpotter>, Failure>> {
        Box::pin(async move {
            let words = words.unwrap_or_else(|| vec!["loud".into()]);
            if let Some(other) = words
                .iter()
                .find(|w| !["loud", "quiet"].contains(&w.as_str()))
            {
                return Err(Failure::new(
                    Kind::WakeWord,
                    format!("wake word `{other}` is not installed"),
                ));
            }
            Ok(Box::new(Loud {
                listening: words.iter().any(|w| w == "loud"),
                fed: 0,
            }) as Box<dyn PcmSpotter>)
        })
    }
}

/// [`Counting`]'s wake word detector.
struct Loud {
    listening: bool,
    fed: u64,
}

impl PcmSpotter for Loud {
    fn feed(&mut self, samples: &[f32]) -> Result<Option<Spotted>, Failure> {
        let at = samples.iter().position(|s| s.abs() >= 0.9);
        let spotted = at.filter(|_| self.listening).map(|at| Spotted {
            name: "loud".into(),
            at: self.fed + at as u64 + 1,
        });
        self.fed += samples.len() as u64;
        Ok(spotted)
    }
}
