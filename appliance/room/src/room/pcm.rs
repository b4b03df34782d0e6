//! Speech from and to raw samples, for the protocols that carry PCM
//! (Wyoming): the same engines as the files agents hand over, with no file
//! format around the audio, and nothing played in the room.

use std::sync::Arc;

use hark_audio::clip::Clip;
use hark_core::room::{
    BoxFuture, Failure, Kind, Offer, OfferedModel, OfferedVoice, OfferedWord, Pcm, PcmSpeech,
    PcmSpotter, PcmText, PcmVoice,
};
use hark_stt::recognizer::Request;
use hark_stt::whisper::languages;
use hark_tts::voices::VoiceStore;

use crate::stt::{Handed, Via};

use super::{
    Room, failure,
    files::{engine, transcribed},
    speech,
};

/// The rate the speech-to-text engines take.
const ENGINE_RATE: u32 = 16_000;

impl PcmSpeech for Room {
    fn transcribe_pcm(
        &self,
        audio: Pcm,
        language: Option<String>,
    ) -> BoxFuture<'_, Result<PcmText, Failure>> {
        Box::pin(async move {
            let (stt, whisper) = engine(self)?;
            let samples = to_engine_rate(audio).await?;
            let seconds = samples.len() as f64 / f64::from(ENGINE_RATE);
            // The live engine for English audio short enough, unless
            // something waits for it (`stt.live_wyoming_seconds`); whisper
            // again where it was unsure (`stt.live_unsure_below`).
            let handed = Handed {
                via: Via::Wyoming,
                language: language.as_deref(),
                seconds,
                timings: false,
            };
            let mut request = Request::new(samples);
            request.language = language.clone();
            let transcript = stt
                .hear_handed(&whisper, handed, request)
                .await
                .map_err(failure::stt)?;
            // The protocol has no field for it: which engine heard it is
            // said here.
            tracing::info!(
                model = %transcript.model,
                seconds,
                ms = transcript.elapsed_ms,
                "samples handed over transcribed"
            );
            Ok(PcmText {
                text: transcript.text.trim().to_owned(),
                language: transcript.language,
            })
        })
    }

    fn draft_pcm(
        &self,
        audio: Pcm,
        language: Option<String>,
    ) -> BoxFuture<'_, Result<Option<String>, Failure>> {
        Box::pin(async move {
            // The live engine hears English only, and serves the room's
            // microphone first: a draft for a client waits for nothing.
            let Some(live) = self.state.ears.stt.live() else {
                return Ok(None);
            };
            if language.as_deref().is_some_and(|l| l != "en") || live.busy() || live.queued() > 0 {
                return Ok(None);
            }
            let mut request = Request::new(to_engine_rate(audio).await?);
            request.language = Some("en".into());
            request.draft = true;
            let transcript = transcribed(live, request).await?;
            Ok(Some(transcript.text.trim().to_owned()))
        })
    }

    fn synthesize_pcm(
        &self,
        text: String,
        voice: Option<String>,
    ) -> BoxFuture<'_, Result<PcmVoice, Failure>> {
        Box::pin(async move {
            let tts = speech::tts(&self.state.voice)?;
            let speakable = speech::check_text(&text, tts.max_chars)?;
            let rendered = {
                let tts = Arc::clone(&tts);
                tokio::task::spawn_blocking(move || tts.render(&speakable, voice.as_deref(), 1.0))
                    .await
                    .map_err(|e| failure::task(Kind::Speech, "synthesis", e))?
                    .map_err(failure::speak)?
            };
            // As for files: the voice's working memory goes back now.
            tokio::task::spawn_blocking(move || tts.release_idle());
            Ok(PcmVoice {
                audio: Pcm {
                    rate: rendered.rate,
                    samples: rendered.samples,
                },
                voice: rendered.voice,
            })
        })
    }

    fn offer(&self) -> BoxFuture<'_, Result<Offer, Failure>> {
        Box::pin(async move {
            let mut offer = Offer::default();
            if let Ok((_, engine)) = engine(self) {
                let info = engine.info();
                // An English-only model with a multilingual one beside it
                // hears every language whisper knows.
                let multilingual = info.multilingual || info.other_languages.is_some();
                offer.models.push(OfferedModel {
                    name: info.name.clone(),
                    languages: languages(multilingual),
                });
            }
            if let Ok(tts) = speech::tts(&self.state.voice) {
                offer.voice = Some(tts.default_voice.clone());
                let dir = tts.voices_dir.clone();
                let listing = tokio::task::spawn_blocking(move || VoiceStore::open(&dir)?.list())
                    .await
                    .map_err(|e| failure::task(Kind::Voice, "listing", e))?
                    .map_err(failure::voices)?;
                offer.voices = listing
                    .installed
                    .into_iter()
                    .map(|v| OfferedVoice {
                        name: v.id,
                        languages: v.language.into_iter().collect(),
                    })
                    .collect();
            }
            if let Some(wake) = self.state.ears.wake.as_ref() {
                let files = wake.files().clone();
                offer.words = tokio::task::spawn_blocking(move || offered_words(&files))
                    .await
                    .map_err(|e| failure::task(Kind::WakeWord, "listing wake words", e))?;
            }
            Ok(offer)
        })
    }

    fn spotter(
        &self,
        words: Option<Vec<String>>,
    ) -> BoxFuture<'_, Result<Box<dyn PcmSpotter>, Failure>> {
        Box::pin(async move {
            let wake = self.state.ears.wake.as_ref().ok_or_else(|| {
                Failure::new(Kind::WakeWord, "there is no wake word detector here")
            })?;
            let (files, sensitivity) = (wake.files().clone(), wake.sensitivity());
            let spotter = tokio::task::spawn_blocking(move || {
                let words = match words {
                    Some(words) if !words.is_empty() => words,
                    _ => crate::wake::installed_words(&files.models),
                };
                if words.is_empty() {
                    return Err(Failure::new(
                        Kind::WakeWord,
                        format!(
                            "no wake word models are installed in {} (wake.models_dir)",
                            files.models.display()
                        ),
                    ));
                }
                crate::wake::StreamSpotter::load(&files, words, sensitivity)
                    .map_err(|e| Failure::new(Kind::WakeWord, e.to_string()))
            })
            .await
            .map_err(|e| failure::task(Kind::WakeWord, "loading the wake word", e))??;
            Ok(Box::new(spotter) as Box<dyn PcmSpotter>)
        })
    }
}

/// `audio` at the rate the speech-to-text engines take.
async fn to_engine_rate(audio: Pcm) -> Result<Vec<f32>, Failure> {
    if audio.rate == ENGINE_RATE {
        return Ok(audio.samples);
    }
    let clip = Clip {
        samples: audio.samples,
        rate: audio.rate,
    };
    Ok(
        tokio::task::spawn_blocking(move || clip.resampled(ENGINE_RATE))
            .await
            .map_err(|e| failure::task(Kind::AudioFormat, "resampling", e))?
            .map_err(|e| Failure::new(Kind::AudioFormat, e.to_string()))?
            .samples,
    )
}

/// The wake words whose manifests read, when their runtime is there: a
/// stream can be searched for each.
fn offered_words(files: &crate::wake::Files) -> Vec<OfferedWord> {
    if !files.runtime.exists() {
        return Vec::new();
    }
    crate::wake::installed_words(&files.models)
        .into_iter()
        .filter_map(|name| {
            let manifest =
                hark_wake::detector::Manifest::read(&files.models.join(format!("{name}.json")))
                    .ok()?;
            Some(OfferedWord {
                name,
                phrase: manifest.wake_word,
                languages: manifest.trained_languages,
            })
        })
        .collect()
}
