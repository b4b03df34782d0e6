//! whisper.cpp as a [`Recognizer`]: one context, loaded once (or on the
//! first request, [`LazyWhisper`]) and reused, a fresh state per request.
//!
//! Short utterances are the common case (an agent asking a question and
//! listening for the answer), and whisper's encoder costs the same for 2 s as
//! for 30 s. With [`EngineConfig::fit_audio_ctx`] (the daemon's default;
//! English-only models) the encoder context is cut to the utterance plus a
//! margin; a context too tight makes whisper repeat itself, so a result
//! that looks repeated, or runs faster than anyone speaks, is decoded again
//! at the full context (see [`looks_degenerate`]).
//!
//! Silence and noise make whisper invent text ("Thanks for watching!").
//! Segments whisper itself rates as probably not speech (no-speech
//! probability over the threshold and low token probability) are dropped;
//! `transcribe_voice` also only hands over the detector's speech span.

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use whisper_rs::{
    FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters, WhisperState,
};

use crate::fallback;
use crate::recognizer::{
    EngineConfig, LanguageGuess, ModelInfo, Recognizer, Request, SAMPLE_RATE, Segment, SttError,
    Transcript, Word,
};

/// whisper's encoder frames per second of audio (one per 20 ms).
const CTX_PER_SECOND: f64 = 50.0;
/// whisper.cpp warns about and misreads inputs under a second.
const MIN_INPUT: usize = SAMPLE_RATE as usize + SAMPLE_RATE as usize / 20;

/// The models loaded when first needed whose last load failed (a file
/// damaged or cut short after the daemon checked its header), by name, with
/// why. A load is tried again on the next request, and a success clears it,
/// so a file put right needs no restart.
#[derive(Clone, Default)]
pub(crate) struct LoadFailures(Arc<Mutex<std::collections::BTreeMap<String, String>>>);

impl LoadFailures {
    pub(crate) fn set(&self, model: &str, failure: Option<String>) {
        let mut failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match failure {
            Some(why) => failures.insert(model.to_owned(), why),
            None => failures.remove(model),
        };
    }

    pub(crate) fn list(&self) -> Vec<(String, String)> {
        let failures = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        failures
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// whisper.cpp: one context, a fresh state per request.
pub(crate) struct Whisper {
    ctx: WhisperContext,
    config: EngineConfig,
    multilingual: bool,
    name: String,
    info: ModelInfo,
}

/// The model's name: the store's `ggml-<name>.bin` (whisper.cpp's own
/// naming) without its prefix and extension.
fn model_name(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().trim_start_matches("ggml-").to_owned())
        .unwrap_or_default()
}

/// Whisper loaded on the first request ([`EngineConfig::lazy`]); its
/// info read from the model's header at start.
pub(crate) struct LazyWhisper {
    config: EngineConfig,
    info: ModelInfo,
    loaded: Option<Whisper>,
    failures: LoadFailures,
}

impl LazyWhisper {
    /// The model's header read and checked; nothing loaded yet.
    pub(crate) fn checked(config: EngineConfig, failures: &LoadFailures) -> Result<Self, SttError> {
        let header =
            hark_models::ggml::read_header(&config.model).map_err(|e| SttError::ModelLoad {
                path: config.model.clone(),
                reason: e.to_string(),
            })?;
        let info = ModelInfo {
            path: config.model.clone(),
            name: model_name(&config.model),
            kind: header.kind.to_owned(),
            multilingual: header.language == hark_models::Language::Multilingual,
            quantisation: header.quantisation,
            load_ms: 0,
            other_languages: None,
        };
        tracing::info!(model = %info.path.display(), "speech-to-text model checked; it loads when first needed");
        Ok(Self {
            config,
            info,
            loaded: None,
            failures: failures.clone(),
        })
    }

    fn whisper(&mut self) -> Result<&mut Whisper, SttError> {
        let whisper = match self.loaded.take() {
            Some(whisper) => whisper,
            None => {
                let loaded = Whisper::load(self.config.clone());
                let failure = loaded.as_ref().err().map(ToString::to_string);
                self.failures.set(&self.info.name, failure);
                loaded?
            }
        };
        Ok(self.loaded.insert(whisper))
    }
}

impl Recognizer for LazyWhisper {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError> {
        self.whisper()?.transcribe(request)
    }

    fn detect(&mut self, audio: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
        self.whisper()?.detect(audio)
    }
}

impl Recognizer for Whisper {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError> {
        Whisper::transcribe(self, request)
    }

    fn detect(&mut self, audio: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
        Whisper::detect(self, audio)
    }
}

impl Whisper {
    /// Loads the model (blocking: it reads the whole file).
    pub(crate) fn load(config: EngineConfig) -> Result<Self, SttError> {
        let started = Instant::now();
        let path = config.model.to_string_lossy().into_owned();
        let mut params = WhisperContextParameters::default();
        params.flash_attn(config.flash_attn);
        // whisper.cpp says only that it failed; a header that read well
        // and a load that fails is almost always a damaged file.
        let damaged = |e: whisper_rs::WhisperError| SttError::ModelLoad {
            path: config.model.clone(),
            reason: format!(
                "{e} (a damaged or incomplete file? `hark models verify` checks it against its checksum)"
            ),
        };
        let ctx = WhisperContext::new_with_params(&path, params).map_err(damaged)?;
        // A state is made per request (see `Worker::decode`); making one
        // now proves the model can run before the daemon says it is ready.
        drop(ctx.create_state().map_err(damaged)?);
        let info = ModelInfo {
            path: config.model.clone(),
            name: model_name(&config.model),
            kind: ctx
                .model_type_readable_str_lossy()
                .map(|s| s.into_owned())
                .unwrap_or_default(),
            multilingual: ctx.is_multilingual(),
            quantisation: hark_models::ggml::ftype_name(ctx.model_ftype()),
            load_ms: started.elapsed().as_millis() as u64,
            other_languages: None,
        };
        tracing::info!(model = %info.path.display(), kind = %info.kind, quantisation = %info.quantisation,
            multilingual = info.multilingual, load_ms = info.load_ms, "speech-to-text model loaded");
        Ok(Self {
            ctx,
            multilingual: info.multilingual,
            name: info.name.clone(),
            config,
            info,
        })
    }

    /// The language to decode in, checked against the model.
    fn language(&self, requested: Option<&str>) -> Result<Option<String>, SttError> {
        let wanted = requested
            .filter(|l| !l.is_empty())
            .unwrap_or(&self.config.language)
            .to_ascii_lowercase();
        if !self.multilingual {
            // `auto` asks for the language spoken, which an English-only
            // model cannot tell: it would write any speech as English.
            return if wanted == "en" {
                Ok(Some("en".into()))
            } else if wanted == "auto" || whisper_rs::get_lang_id(&wanted).is_some() {
                Err(SttError::EnglishOnly {
                    language: wanted,
                    model: self.name.clone(),
                })
            } else {
                Err(SttError::UnknownLanguage(wanted))
            };
        }
        if wanted == "auto" {
            return Ok(None);
        }
        if whisper_rs::get_lang_id(&wanted).is_none() {
            return Err(SttError::UnknownLanguage(wanted));
        }
        Ok(Some(wanted))
    }

    fn transcribe(&mut self, request: Request) -> Result<Transcript, SttError> {
        let started = Instant::now();
        let asked = self.language(request.language.as_deref())?;
        let duration = request.audio.len() as f64 / f64::from(SAMPLE_RATE);
        let mut audio = request.audio;
        if audio.len() < MIN_INPUT {
            audio.resize(MIN_INPUT, 0.0);
        }
        // `auto`: one encoder pass names the language, with its
        // probability, and the transcription runs in it. Left to
        // whisper.cpp, `auto` detects in an encoder pass of its own and
        // keeps no probability, which took a third pass.
        let (language, language_probability) = match asked {
            Some(language) => (language, None),
            None => {
                let top = self.detect(&audio)?.into_iter().next().ok_or_else(|| {
                    SttError::Whisper("language detection gave no language".into())
                })?;
                (top.language, Some(top.probability))
            }
        };
        let full = self.ctx.model_n_audio_ctx().max(1) as u32;
        // English-only models only: the fit was measured on tiny.en and
        // recorded English (docs/benchmarks.md, Files); a multilingual
        // model, and the other languages it serves, keep the whole window.
        let fitted = fitted_ctx(
            audio.len(),
            self.config.audio_ctx_margin,
            full,
            self.config.fit_audio_ctx && !self.ctx.is_multilingual(),
        );
        let mut result = self.decode(
            &audio,
            &language,
            fitted,
            request.word_timestamps,
            &request.cancel,
        )?;
        let mut refit = false;
        if fitted < full && looks_degenerate(&result, duration) {
            tracing::debug!(
                audio_ctx = fitted,
                text = %result.iter().map(|s| s.text.as_str()).collect::<String>(),
                "fitted encoder context gave a degenerate result; decoding at the full context"
            );
            result = self.decode(
                &audio,
                &language,
                full,
                request.word_timestamps,
                &request.cancel,
            )?;
            refit = true;
        }
        let segments = result;
        let total = segments.len();
        let threshold = self.config.no_speech_threshold;
        let kept: Vec<Segment> = segments
            .into_iter()
            .filter(|s| {
                let silent = s.no_speech_probability > threshold && s.confidence < 0.5;
                let keep = !(silent || s.text.trim().is_empty() || is_annotation(&s.text));
                if !keep {
                    tracing::debug!(text = %s.text, no_speech = s.no_speech_probability,
                        confidence = s.confidence, "segment dropped as not speech");
                }
                keep
            })
            .map(cut_loop)
            // Padding is silence; nothing said can end after the audio does.
            .map(|mut s| {
                s.end = s.end.min(duration);
                s.start = s.start.min(s.end);
                s
            })
            .collect();
        let dropped = total - kept.len();
        let text = kept
            .iter()
            .map(|s| s.text.trim())
            .collect::<Vec<_>>()
            .join(" ");
        let confidence = if kept.is_empty() {
            0.0
        } else {
            kept.iter().map(|s| s.confidence).sum::<f32>() / kept.len() as f32
        };
        // After whisper.cpp's own fallback: the kept segments judged as a
        // whole, by the same rules.
        let doubt = (!kept.is_empty())
            .then(|| {
                fallback::doubt(fallback::Judged {
                    text: &text,
                    mean_log_prob: kept.iter().map(|s| f64::from(s.mean_log_prob)).sum::<f64>()
                        / kept.len() as f64,
                    truncated: false,
                })
            })
            .flatten();
        Ok(Transcript {
            text,
            language,
            language_probability,
            duration,
            segments: kept,
            confidence,
            dropped_segments: dropped,
            audio_ctx: if refit { full } else { fitted },
            refit,
            elapsed_ms: started.elapsed().as_millis() as u64,
            truncated: false,
            doubt,
            model: self.name.clone(),
        })
    }

    /// One whisper.cpp pass in `language` (a code: detection happens
    /// before): the segments.
    fn decode(
        &mut self,
        audio: &[f32],
        language: &str,
        audio_ctx: u32,
        words: bool,
        cancel: &Arc<AtomicBool>,
    ) -> Result<Vec<Segment>, SttError> {
        let strategy = if self.config.beam_size > 1 {
            SamplingStrategy::BeamSearch {
                beam_size: i32::from(self.config.beam_size),
                patience: -1.0,
            }
        } else {
            SamplingStrategy::Greedy { best_of: 1 }
        };
        let mut params = FullParams::new(strategy);
        params.set_n_threads(i32::from(self.config.threads.max(1)));
        params.set_language(Some(language));
        params.set_audio_ctx(audio_ctx as i32);
        // Each request stands alone: no text carried over from the last one.
        params.set_no_context(true);
        params.set_token_timestamps(words);
        params.set_no_speech_thold(self.config.no_speech_threshold);
        // whisper.cpp's temperature fallback (its own defaults, set here so
        // that both engines follow the rules of `crate::fallback`): a pass
        // whose tokens average under −1 log-probability, or whose last
        // tokens' entropy falls under 2.4 (its stand-in for whisper's
        // compression ratio: a loop), is decoded again 0.2 warmer.
        params.set_temperature(0.0);
        params.set_temperature_inc(fallback::TEMPERATURES[0]);
        params.set_entropy_thold(fallback::WHISPER_ENTROPY_MIN);
        params.set_logprob_thold(fallback::MEAN_LOG_PROB_MIN as f32);
        params.set_print_progress(false);
        params.set_print_realtime(false);
        params.set_print_special(false);
        params.set_print_timestamps(false);
        // whisper-rs 0.16's closure-based abort callback hands its
        // trampoline a pointer of the wrong type (it always aborts), so the
        // raw C callback reads the cancel flag directly.
        // SAFETY: the flag is an `AtomicBool` behind `cancel`, which outlives
        // `full` below; the callback only loads it.
        unsafe {
            params.set_abort_callback(Some(abort_requested));
            params.set_abort_callback_user_data(Arc::as_ptr(cancel) as *mut std::ffi::c_void);
        }
        // A fresh state per pass (5–15 ms), dropped at the end of it:
        // whisper.cpp's temperature fallback draws from a generator kept in
        // the state, so a reused state would make the same audio transcribe
        // differently depending on what came before; and only one state is
        // ever alive, which keeps the peak memory down.
        let mut state = self.fresh_state()?;
        let outcome = state.full(params, audio);
        if cancel.load(Ordering::Relaxed) {
            return Err(SttError::Cancelled);
        }
        outcome.map_err(|e| SttError::Whisper(e.to_string()))?;

        let eot = self.ctx.token_eot();
        let mut segments = Vec::new();
        for segment in state.as_iter() {
            let text = segment
                .to_str_lossy()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            let mut probs = Vec::new();
            let mut log_probs = 0.0f32;
            let mut word_list: Vec<Word> = Vec::new();
            for i in 0..segment.n_tokens() {
                let Some(token) = segment.get_token(i) else {
                    continue;
                };
                let data = token.token_data();
                // Special tokens (timestamps, end of text, language) carry
                // no words.
                if data.id >= eot {
                    continue;
                }
                probs.push(data.p);
                log_probs += data.plog;
                if words {
                    let piece = token
                        .to_str_lossy()
                        .map(|t| t.into_owned())
                        .unwrap_or_default();
                    let (t0, t1) = (data.t0 as f64 / 100.0, data.t1 as f64 / 100.0);
                    match word_list.last_mut() {
                        Some(last) if !piece.starts_with(' ') && !piece.is_empty() => {
                            last.word.push_str(&piece);
                            last.end = t1.max(last.end);
                            last.probability = last.probability.min(data.p);
                        }
                        _ => word_list.push(Word {
                            word: piece,
                            start: t0,
                            end: t1,
                            probability: data.p,
                        }),
                    }
                }
            }
            for w in &mut word_list {
                w.word = w.word.trim().to_owned();
            }
            word_list.retain(|w| !w.word.is_empty());
            let confidence = if probs.is_empty() {
                0.0
            } else {
                probs.iter().sum::<f32>() / probs.len() as f32
            };
            segments.push(Segment {
                start: segment.start_timestamp() as f64 / 100.0,
                end: segment.end_timestamp() as f64 / 100.0,
                text: text.trim().to_owned(),
                confidence,
                no_speech_probability: segment.no_speech_probability(),
                words: words.then_some(word_list),
                mean_log_prob: log_probs / probs.len().max(1) as f32,
            });
        }
        Ok(segments)
    }

    fn fresh_state(&self) -> Result<WhisperState, SttError> {
        self.ctx
            .create_state()
            .map_err(|e| SttError::Whisper(format!("cannot make a whisper state: {e}")))
    }

    fn detect(&mut self, audio: &[f32]) -> Result<Vec<LanguageGuess>, SttError> {
        let threads = usize::from(self.config.threads.max(1));
        let mut state = self.fresh_state()?;
        state
            .pcm_to_mel(audio, threads)
            .map_err(|e| SttError::Whisper(e.to_string()))?;
        let (_, probs) = state
            .lang_detect(0, threads)
            .map_err(|e| SttError::Whisper(e.to_string()))?;
        let mut guesses: Vec<LanguageGuess> = probs
            .iter()
            .enumerate()
            .filter_map(|(id, p)| {
                let id = id as i32;
                Some(LanguageGuess {
                    language: whisper_rs::get_lang_str(id)?.to_owned(),
                    name: whisper_rs::get_lang_str_full(id)?.to_owned(),
                    probability: *p,
                })
            })
            .collect();
        guesses.sort_by(|a, b| b.probability.total_cmp(&a.probability));
        guesses.truncate(5);
        Ok(guesses)
    }
}

/// whisper.cpp's and ggml's log lines into `tracing`, whisper.cpp's through
/// [`whisper_log`] rather than whisper-rs's own hook.
pub(crate) fn install_logging() {
    static OURS: std::sync::Once = std::sync::Once::new();
    whisper_rs::install_logging_hooks();
    // SAFETY: the callback is a plain function that lives for the whole
    // program and takes no user data.
    OURS.call_once(|| unsafe {
        whisper_rs_sys::whisper_log_set(Some(whisper_log), std::ptr::null_mut());
    });
}

/// How whisper.cpp's log line `text` at `level` is logged: as whisper-rs
/// logs it (its target, so `whisper_rs=warn` filters it), except that a
/// cancelled transcription's "failed to encode" or "failed to decode" is
/// no error: the abort callback stopped whisper.cpp because the caller
/// asked, and a real failure comes back to the caller as an error it
/// reports.
fn whisper_level(level: whisper_rs_sys::ggml_log_level, text: &str) -> tracing::Level {
    match level {
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_ERROR
            if text.ends_with("failed to encode") || text.ends_with("failed to decode") =>
        {
            tracing::Level::DEBUG
        }
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_ERROR => tracing::Level::ERROR,
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_WARN => tracing::Level::WARN,
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_INFO => tracing::Level::INFO,
        whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_DEBUG => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    }
}

unsafe extern "C" fn whisper_log(
    level: whisper_rs_sys::ggml_log_level,
    text: *const std::ffi::c_char,
    _: *mut std::ffi::c_void,
) {
    if text.is_null() {
        return;
    }
    // SAFETY: whisper.cpp passes a NUL-terminated string valid for the call.
    let text = unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    const TARGET: &str = "whisper_rs::whisper_logging_hook";
    match whisper_level(level, text) {
        tracing::Level::ERROR => tracing::error!(target: TARGET, "{text}"),
        tracing::Level::WARN => tracing::warn!(target: TARGET, "{text}"),
        tracing::Level::INFO => tracing::info!(target: TARGET, "{text}"),
        tracing::Level::DEBUG => tracing::debug!(target: TARGET, "{text}"),
        _ => tracing::trace!(target: TARGET, "{text}"),
    }
}

/// whisper.cpp's abort callback: the request's cancel flag.
unsafe extern "C" fn abort_requested(flag: *mut std::ffi::c_void) -> bool {
    // SAFETY: `decode` passes a pointer to an `AtomicBool` it keeps alive
    // for the whole call.
    unsafe { (*(flag as *const AtomicBool)).load(Ordering::Relaxed) }
}

/// The languages a model understands (ISO 639-1 codes, whisper's own
/// order): every one whisper knows for a multilingual model, English for
/// an English-only one.
pub fn languages(multilingual: bool) -> Vec<String> {
    if !multilingual {
        return vec!["en".to_owned()];
    }
    (0..=whisper_rs::get_lang_max_id())
        .filter_map(whisper_rs::get_lang_str)
        .map(str::to_owned)
        .collect()
}

/// The encoder context for `samples` of audio: the audio's frames plus
/// `margin`, rounded up to a multiple of 64 (ggml's kernels prefer it), or
/// the full context when fitting is off or would not save anything.
pub fn fitted_ctx(samples: usize, margin: u16, full: u32, fit: bool) -> u32 {
    if !fit {
        return full;
    }
    let frames = (samples as f64 / f64::from(SAMPLE_RATE) * CTX_PER_SECOND).ceil() as u32;
    let ctx = (frames + u32::from(margin)).div_ceil(64) * 64;
    ctx.min(full)
}

/// whisper's descriptions of non-speech — `[BLANK_AUDIO]`, `(music)`,
/// `*laughs*` — which are not words anyone said.
pub fn is_annotation(text: &str) -> bool {
    let t = text.trim();
    let wrapped = |open: char, close: char| {
        t.starts_with(open)
            && t.ends_with(close)
            && t[1..t.len() - 1].chars().all(|c| c != open && c != close)
    };
    t.len() >= 2 && (wrapped('[', ']') || wrapped('(', ')') || wrapped('*', '*'))
}

/// Signs that whisper lost its way, as it does when the encoder context is
/// a little too small for the audio: the same run of words repeated back to
/// back, or more words than anyone says in the time.
/// A segment still looping after whisper.cpp's fallback (every
/// temperature failed, and it keeps the last) loses the loop at its end:
/// the words said once are kept ([`fallback::loop_cut`]). Only a segment
/// that compresses like a loop is touched, so a person's own "no, no, no"
/// stays.
fn cut_loop(mut segment: Segment) -> Segment {
    if fallback::compression_ratio(&segment.text) <= fallback::COMPRESSION_RATIO_MAX {
        return segment;
    }
    let said: Vec<&str> = segment.text.split_whitespace().collect();
    let words: Vec<String> = said.iter().map(|w| plain(w)).collect();
    if let Some(at) = fallback::loop_cut(&words) {
        tracing::debug!(text = %segment.text, kept = at, "a looping segment cut");
        let kept = said[..at].join(" ");
        segment.text = kept.trim_end_matches([',', ';']).to_owned();
        if let Some(timed) = segment.words.as_mut() {
            timed.truncate(at);
        }
    }
    segment
}

/// A whitespace-separated piece of a transcript as the word it is:
/// lower-case, without the punctuation around it.
fn plain(piece: &str) -> String {
    piece
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase()
}

pub fn looks_degenerate(segments: &[Segment], duration: f64) -> bool {
    let text: String = segments
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let words: Vec<String> = text
        .split_whitespace()
        .map(plain)
        .filter(|w| !w.is_empty())
        .collect();
    // Fast speech is about 4 words a second; 6 is not speech.
    if words.len() as f64 > 6.0 * duration.max(1.0) + 2.0 {
        return true;
    }
    // A run of 3 or more words immediately repeated.
    for n in 3..=words.len() / 2 {
        for start in 0..=words.len() - 2 * n {
            if words[start..start + n] == words[start + n..start + 2 * n] {
                return true;
            }
        }
    }
    // The same sentence twice (segments repeated).
    segments
        .windows(2)
        .any(|w| w[0].text.len() > 8 && w[0].text.trim() == w[1].text.trim())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_multilingual_model_offers_whispers_languages() {
        assert_eq!(super::languages(false), ["en"]);
        let all = super::languages(true);
        assert!(all.len() > 90, "{}", all.len());
        for code in ["en", "de", "sv", "zh", "haw"] {
            assert!(all.iter().any(|l| l == code), "{code} in {all:?}");
        }
    }

    fn segment(text: &str) -> super::Segment {
        super::Segment {
            start: 0.0,
            end: 5.0,
            text: text.into(),
            confidence: 0.5,
            no_speech_probability: 0.0,
            words: None,
            mean_log_prob: 0.0,
        }
    }

    #[test]
    fn a_segment_still_looping_keeps_what_was_said_once() {
        let looped = segment(
            " I am a slave of the slave of the slave of the slave of the slave of the slave of the slave of the slave,",
        );
        assert_eq!(super::cut_loop(looped).text, "I am a slave of the");
        let runaway = segment(
            " Montreal, forced, a line, a line, a line, a line, a line, a line, a line, a line, a line, a line, a line, a line, a",
        );
        assert_eq!(super::cut_loop(runaway).text, "Montreal, forced, a line");
        // A person repeating themselves does not compress like a loop.
        for said in [
            " No, no, no, not that one.",
            " Word, another word, here's some more word, word, word, word.",
        ] {
            assert_eq!(super::cut_loop(segment(said)).text, said);
        }
    }

    #[test]
    fn a_cancelled_encoder_is_no_error_in_the_log() {
        use whisper_rs_sys::{
            ggml_log_level_GGML_LOG_LEVEL_ERROR as ERROR,
            ggml_log_level_GGML_LOG_LEVEL_WARN as WARN,
        };
        assert_eq!(
            whisper_level(ERROR, "whisper_full_with_state: failed to encode"),
            tracing::Level::DEBUG
        );
        assert_eq!(
            whisper_level(ERROR, "whisper_full_with_state: failed to decode"),
            tracing::Level::DEBUG
        );
        assert_eq!(
            whisper_level(ERROR, "whisper_init: failed to load model"),
            tracing::Level::ERROR
        );
        assert_eq!(
            whisper_level(WARN, "failed to encode"),
            tracing::Level::WARN
        );
    }

    use super::*;

    fn seg(text: &str) -> Segment {
        Segment {
            start: 0.0,
            end: 1.0,
            text: text.into(),
            confidence: 0.9,
            no_speech_probability: 0.0,
            words: None,
            mean_log_prob: 0.0,
        }
    }

    #[test]
    fn fitted_context_covers_the_audio_plus_margin() {
        // 3 s = 150 frames, + 128 = 278 → 320.
        assert_eq!(fitted_ctx(48_000, 128, 1500, true), 320);
        assert_eq!(fitted_ctx(48_000, 128, 1500, false), 1500);
        // 29 s needs more than the full context allows.
        assert_eq!(fitted_ctx(29 * 16_000, 128, 1500, true), 1500);
        assert_eq!(fitted_ctx(0, 0, 1500, true), 0);
    }

    #[test]
    fn repeated_runs_and_impossible_rates_are_degenerate() {
        assert!(!looks_degenerate(
            &[seg("The quick brown fox jumps over the lazy dog.")],
            3.0
        ));
        assert!(looks_degenerate(
            &[seg(
                "the quick brown fox the quick brown fox the quick brown fox"
            )],
            5.0
        ));
        assert!(looks_degenerate(
            &[seg("Turn on the lights."), seg("Turn on the lights.")],
            3.0
        ));
        let many = "word ".repeat(40);
        assert!(looks_degenerate(&[seg(many.trim())], 3.0));
        // Repeating one or two words is how people talk ("no, no").
        assert!(!looks_degenerate(&[seg("No, no, I said stop.")], 2.0));
    }

    #[test]
    fn non_speech_annotations_are_recognised() {
        for t in ["[BLANK_AUDIO]", " (upbeat music)", "*laughs*", "[Music]"] {
            assert!(is_annotation(t), "{t}");
        }
        for t in ["Turn on (the) lights", "[a] and [b]", "", "(", "hello"] {
            assert!(!is_annotation(t), "{t}");
        }
    }

    #[test]
    fn ggml_file_types_name_their_quantisation() {
        use hark_models::ggml::ftype_name;
        assert_eq!(ftype_name(1), "f16");
        assert_eq!(ftype_name(2007), "q8_0");
        assert_eq!(ftype_name(2009), "q5_1");
    }
}
