//! [`PcmSpeech`]: speech as raw samples, for protocols that carry PCM
//! (Wyoming).

use super::call::{BoxFuture, Failure};

/// Audio handed over whole, as samples: what protocols that carry raw PCM
/// (Wyoming) send and take, with no file or encoding around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pcm {
    /// Samples a second.
    pub rate: u32,
    /// Mono, −1 to 1.
    pub samples: Vec<f32>,
}

/// What was said in some [`Pcm`].
#[derive(Debug, Clone, PartialEq)]
pub struct PcmText {
    /// The text; empty when nothing was said.
    pub text: String,
    /// Its language (ISO 639-1).
    pub language: String,
}

/// Text made into speech.
#[derive(Debug, Clone, PartialEq)]
pub struct PcmVoice {
    pub audio: Pcm,
    /// The voice that spoke.
    pub voice: String,
}

/// A speech-to-text model on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedModel {
    pub name: String,
    /// ISO 639-1 codes it understands.
    pub languages: Vec<String>,
}

/// A voice on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedVoice {
    pub name: String,
    /// Its language, e.g. `en_US`.
    pub languages: Vec<String>,
}

/// A wake word on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedWord {
    /// Its model's name (`okay_nabu`): what a detection names.
    pub name: String,
    /// What the person says ("Okay Nabu").
    pub phrase: String,
    /// ISO 639-1 codes of the speakers it was trained on.
    pub languages: Vec<String>,
}

/// What speech to text, text to speech and the wake word can do here now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Offer {
    pub models: Vec<OfferedModel>,
    pub voices: Vec<OfferedVoice>,
    /// The default voice.
    pub voice: Option<String>,
    /// The wake words a stream can be searched for (none when the
    /// detector's runtime is missing).
    pub words: Vec<OfferedWord>,
}

/// A wake word heard in a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Spotted {
    /// The word's model name.
    pub name: String,
    /// Where in the stream it was heard: samples at [`SPOTTER_RATE`] from
    /// the first fed.
    pub at: u64,
}

/// The rate a [`PcmSpotter`] takes.
pub const SPOTTER_RATE: u32 = 16_000;

/// A wake word detector on one stream of audio (Home Assistant's
/// satellites stream theirs): each detector starts from nothing and keeps
/// its state between feeds. Feeding runs the models: call it off the
/// runtime's threads.
pub trait PcmSpotter: Send {
    /// `samples` (mono, [`SPOTTER_RATE`], −1 to 1), the next of the
    /// stream: the word heard in them, if any. After a word it hears
    /// nothing for a second, so one saying is one detection.
    fn feed(&mut self, samples: &[f32]) -> Result<Option<Spotted>, Failure>;
}

pub trait PcmSpeech: Send + Sync {
    /// What was said in `audio`, in `language` (ISO 639-1, `None`: the
    /// configured one).
    fn transcribe_pcm(
        &self,
        audio: Pcm,
        language: Option<String>,
    ) -> BoxFuture<'_, Result<PcmText, Failure>>;

    /// A first reading of speech still coming in (`audio` so far), from
    /// the live engine: `None` when there is none for `language`, or it is
    /// busy with the room's microphone, which comes first.
    fn draft_pcm(
        &self,
        audio: Pcm,
        language: Option<String>,
    ) -> BoxFuture<'_, Result<Option<String>, Failure>>;

    /// `text` spoken in `voice` (`None`: the default), not played.
    fn synthesize_pcm(
        &self,
        text: String,
        voice: Option<String>,
    ) -> BoxFuture<'_, Result<PcmVoice, Failure>>;

    /// The models, installed voices and wake words on offer.
    fn offer(&self) -> BoxFuture<'_, Result<Offer, Failure>>;

    /// A detector for `words` (model names; `None`: every installed one).
    fn spotter(
        &self,
        words: Option<Vec<String>>,
    ) -> BoxFuture<'_, Result<Box<dyn PcmSpotter>, Failure>>;
}
