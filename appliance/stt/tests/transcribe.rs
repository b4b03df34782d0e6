//! The engine with the real tiny.en, f16 and q8_0, on speech made at test
//! time: accuracy (word error rate), silence and noise, cancellation, a full
//! queue, languages, word timings.

mod common;

use std::sync::{Arc, OnceLock, atomic::Ordering};

use hark_stt::{
    engine::Engine,
    import::Quantisation,
    recognizer::{EngineConfig, Request, SttError},
};

/// One test at a time: each runs whisper (and piper, Moonshine) on every
/// core there is, so two at once only take turns on the cores and both
/// take longer (measured on 2 cores: 136 s one after the other, 210–280 s
/// side by side).
static CORES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cores() -> std::sync::MutexGuard<'static, ()> {
    // A test that failed while holding it poisons it; the next may run.
    CORES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn engine(model: std::path::PathBuf) -> Engine {
    Engine::start(EngineConfig {
        model,
        ..EngineConfig::default()
    })
    .expect("engine starts")
}

/// Who speaks the sentences.
#[derive(Clone, Copy, Debug)]
enum Speaker {
    /// espeak-ng's own voice.
    Espeak,
    /// Hark's piper voice (en_US-joe-medium), as the appliance speaks.
    Piper,
}

impl Speaker {
    /// `sentence` in this voice, as 16 kHz samples.
    fn say(self, dir: &std::path::Path, sentence: &str) -> Vec<f32> {
        match self {
            Speaker::Espeak => common::speak(dir, sentence, "en-us"),
            Speaker::Piper => common::piper(dir, sentence),
        }
    }
}

/// Every sentence spoken by `speaker`, made once per test binary: the
/// tests that compare models and engines hear the same audio (piper's voice
/// is drawn anew each time it speaks).
fn spoken(speaker: Speaker) -> &'static [Vec<f32>] {
    static ESPEAK: OnceLock<Vec<Vec<f32>>> = OnceLock::new();
    static PIPER: OnceLock<Vec<Vec<f32>>> = OnceLock::new();
    let cell = match speaker {
        Speaker::Espeak => &ESPEAK,
        Speaker::Piper => &PIPER,
    };
    cell.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        common::SENTENCES
            .iter()
            .map(|sentence| speaker.say(dir.path(), sentence))
            .collect()
    })
}

/// Word errors of whisper tiny.en in `quantisation` on every sentence in
/// each voice: (errors, words) per voice, in the order given.
fn whisper_errors(quantisation: Quantisation, speakers: &[Speaker]) -> Vec<(usize, usize)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = engine(common::import(dir.path(), quantisation));
    speakers
        .iter()
        .map(|&speaker| {
            let (mut errors, mut total) = (0, 0);
            for (sentence, audio) in common::SENTENCES.iter().zip(spoken(speaker)) {
                let t = engine
                    .transcribe_blocking(Request::new(audio.clone()))
                    .expect("transcribed");
                let (reference, hypothesis) = (common::words(sentence), common::words(&t.text));
                let e = common::word_errors(&reference, &hypothesis);
                eprintln!(
                    "{speaker:?} {quantisation} ctx {:4}{} {:5} ms  confidence {:.2}  {e} errors  {:?}",
                    t.audio_ctx,
                    if t.refit { " refit" } else { "" },
                    t.elapsed_ms,
                    t.confidence,
                    t.text
                );
                assert_eq!(t.language, "en");
                assert!(t.confidence > 0.0 && t.confidence <= 1.0);
                errors += e;
                total += reference.len();
            }
            (errors, total)
        })
        .collect()
}

/// Word errors of the live engine (Moonshine tiny-en) on every sentence
/// spoken by `speaker`.
fn live_errors(speaker: Speaker) -> usize {
    let moonshine_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/.models/moonshine-voice/tiny-en");
    let mut live = hark_stt::moonshine::Moonshine::load(&common::onnx_runtime(), &moonshine_dir, 2)
        .expect("Moonshine loads (run tests/setup.sh)");
    let mut errors = 0;
    for (sentence, audio) in common::SENTENCES.iter().zip(spoken(speaker)) {
        let said = live.transcribe(audio).expect("Moonshine transcribes").text;
        let e = common::word_errors(&common::words(sentence), &common::words(&said));
        eprintln!("{speaker:?} live {e} errors  {said:?}");
        errors += e;
    }
    errors
}

/// At most 15 % of the words misread: both voices are clear speech that
/// tiny.en hears almost whole (10 of 104 words on espeak-ng's, 0–7 on
/// piper's, measured on x86-64), so a bound five words above the worst
/// seen fails only on a broken model, import or decoding.
fn at_most_15_percent(errors: usize, total: usize) -> bool {
    errors * 100 <= total * 15
}

#[test]
fn q8_0_as_shipped_and_the_live_engine_hear_both_test_voices() {
    let _cores = cores();
    let [(whisper, total), (piper_whisper, piper_total)] =
        whisper_errors(Quantisation::Q8_0, &[Speaker::Espeak, Speaker::Piper])[..]
    else {
        unreachable!("one figure per voice")
    };
    let live = live_errors(Speaker::Espeak);
    let piper_live = live_errors(Speaker::Piper);
    eprintln!("espeak-ng: whisper q8_0 {whisper} and live {live} errors in {total} words");
    eprintln!(
        "piper: whisper q8_0 {piper_whisper} and live {piper_live} errors in {piper_total} words"
    );
    assert!(
        at_most_15_percent(whisper, total),
        "espeak-ng: whisper q8_0 misread {whisper} of {total} words"
    );
    assert!(
        at_most_15_percent(piper_whisper, piper_total),
        "piper: whisper q8_0 misread {piper_whisper} of {piper_total} words"
    );
    // The live engine hears the microphone in whisper's place, so it must
    // not hear much worse (whisper keeps files and other languages). Which
    // of the two misreads a word or two fewer is a figure, and one that
    // moves with the machine's arithmetic: `hark-bench wer` measures it on
    // recorded people (docs/benchmarks.md, word errors).
    // espeak-ng's audio is the same every run (measured on x86-64: live 9,
    // whisper 10 of 104): a live engine ten words worse than whisper (one
    // in ten more) has broken; 11 words of room.
    assert!(
        live <= whisper + total / 10,
        "espeak-ng: the live engine misread {live} of {total} words, whisper tiny.en {whisper}"
    );
    // piper's voice is drawn anew each run (its noise is random), and the
    // counts move between runs by more than the two engines differ
    // (measured: live 1–7, whisper 3–7; once live 7 against whisper 3), so
    // here the live engine only has to hear piper's voice: at most one word
    // in five wrong (13 words above the worst seen). The comparison is the
    // turn bench's and `hark-bench wer`'s, on recorded people and over more
    // takes.
    assert!(
        piper_live * 5 <= piper_total,
        "piper: the live engine misread {piper_live} of {piper_total} words (whisper tiny.en {piper_whisper})"
    );
}

#[test]
fn f16_hears_both_test_voices() {
    let _cores = cores();
    for ((errors, total), voice) in
        whisper_errors(Quantisation::F16, &[Speaker::Espeak, Speaker::Piper])
            .into_iter()
            .zip(["espeak-ng", "piper"])
    {
        eprintln!("{voice}: whisper f16 {errors} errors in {total} words");
        assert!(
            at_most_15_percent(errors, total),
            "{voice}: whisper f16 misread {errors} of {total} words"
        );
    }
}

/// Everything but recognition on one engine, to import only once.
#[test]
fn silence_noise_cancellation_queue_language_and_words() {
    let _cores = cores();
    let dir = tempfile::tempdir().expect("tempdir");
    let model = common::import(dir.path(), Quantisation::Q8_0);
    let engine = engine(model.clone());
    assert_eq!(engine.info().quantisation, "q8_0");
    assert!(!engine.info().multilingual);

    // Silence and noise are not speech: no invented text.
    let silence = vec![0.0f32; 16_000 * 3];
    let t = engine
        .transcribe_blocking(Request::new(silence))
        .expect("silence");
    assert_eq!(t.text, "", "silence gave {t:?}");
    let mut seed = 0x2545_f491_u32;
    let noise: Vec<f32> = (0..16_000 * 3)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            (seed as f32 / u32::MAX as f32 - 0.5) * 0.06
        })
        .collect();
    let t = engine
        .transcribe_blocking(Request::new(noise))
        .expect("noise");
    assert_eq!(t.text, "", "noise gave {t:?}");

    // Word timings: in order, inside the audio, the words of the sentence.
    let speech = common::speak(dir.path(), common::SENTENCES[0], "en-us");
    let seconds = speech.len() as f64 / 16_000.0;
    let mut request = Request::new(speech.clone());
    request.word_timestamps = true;
    let t = engine.transcribe_blocking(request).expect("words");
    let words: Vec<_> = t
        .segments
        .iter()
        .flat_map(|s| s.words.clone().unwrap_or_default())
        .collect();
    // Most of the sentence's nine words come with timings (all but a
    // misheard one on x86-64); none or a few means the timings are lost.
    assert!(words.len() >= 6, "{words:?}");
    for pair in words.windows(2) {
        assert!(pair[0].start <= pair[1].start, "{pair:?}");
    }
    assert!(
        words
            .iter()
            .all(|w| w.start >= 0.0 && w.end <= seconds + 0.01 && w.start <= w.end)
    );
    assert_eq!(
        common::words(
            &words
                .iter()
                .map(|w| w.word.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        common::words(&t.text)
    );

    // The fitted encoder context (opt-in) on a sentence every configuration
    // gets right: a shorter context, the same words.
    let fitted = Engine::start(EngineConfig {
        model: model.clone(),
        fit_audio_ctx: true,
        ..EngineConfig::default()
    })
    .expect("fitted engine");
    let weather = common::speak(dir.path(), common::SENTENCES[2], "en-us");
    let t = fitted
        .transcribe_blocking(Request::new(weather))
        .expect("fitted");
    assert!(t.audio_ctx < 1500 && !t.refit, "{t:?}");
    // Heard right on x86-64; two words of room for another machine's
    // rounding, while a context cut short of the speech loses its end.
    let said = common::words(common::SENTENCES[2]);
    let misread = common::word_errors(&said, &common::words(&t.text));
    assert!(
        misread <= 2,
        "{misread} of {} words misread: {t:?}",
        said.len()
    );
    drop(fitted);

    // Languages: an English-only model refuses others, by name.
    let mut request = Request::new(speech.clone());
    request.language = Some("de".into());
    match engine.transcribe_blocking(request) {
        Err(SttError::EnglishOnly { language, model }) => {
            assert_eq!(language, "de");
            assert!(model.contains("tiny.en"), "{model}");
        }
        other => panic!("expected EnglishOnly, got {other:?}"),
    }
    // `auto` asks for the language spoken, which it cannot tell.
    let mut request = Request::new(speech.clone());
    request.language = Some("auto".into());
    assert!(
        matches!(
            engine.transcribe_blocking(request),
            Err(SttError::EnglishOnly { ref language, .. }) if language == "auto"
        ),
        "auto on an English-only model"
    );
    let mut request = Request::new(speech.clone());
    request.language = Some("klingon".into());
    assert!(matches!(
        engine.transcribe_blocking(request),
        Err(SttError::UnknownLanguage(_))
    ));
    assert!(matches!(
        engine.submit_detect(speech.clone(), Arc::default()),
        Err(SttError::EnglishOnly { .. })
    ));

    // Cancelled before it runs, and while it runs: the worker stops early
    // and serves the next request.
    let request = Request::new(speech.clone());
    request.cancel.store(true, Ordering::Relaxed);
    assert!(matches!(
        engine.transcribe_blocking(request),
        Err(SttError::Cancelled)
    ));
    let long: Vec<f32> = speech.iter().cycle().take(16_000 * 25).copied().collect();
    let request = Request::new(long);
    let cancel = Arc::clone(&request.cancel);
    let started = std::time::Instant::now();
    let answer = engine.submit(request).expect("queued");
    std::thread::sleep(std::time::Duration::from_millis(300));
    cancel.store(true, Ordering::Relaxed);
    assert!(matches!(
        answer.blocking_recv(),
        Ok(Err(SttError::Cancelled))
    ));
    eprintln!("cancelled after {:?}", started.elapsed());
    let kitchen = common::speak(dir.path(), common::SENTENCES[1], "en-us");
    let t = engine
        .transcribe_blocking(Request::new(kitchen))
        .expect("after a cancel");
    assert!(
        common::words(&t.text).contains(&"kitchen".to_owned()),
        "{t:?}"
    );

    // A full queue answers Busy at once instead of waiting.
    let small = Engine::start(EngineConfig {
        model,
        queue: 1,
        ..EngineConfig::default()
    })
    .expect("second engine");
    let mut answers = Vec::new();
    let mut busy = 0;
    for _ in 0..4 {
        match small.submit(Request::new(speech.clone())) {
            Ok(rx) => answers.push(rx),
            Err(SttError::Busy { .. }) => busy += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(busy >= 2, "{busy} of 4 refused");
    for rx in answers {
        assert!(rx.blocking_recv().expect("answered").is_ok());
    }
}

#[test]
fn a_lazy_engine_reads_the_header_at_start_and_loads_on_the_first_request() {
    let tmp = tempfile::tempdir().unwrap();
    let model = common::import(tmp.path(), Quantisation::Q8_0);
    let engine = Engine::start(EngineConfig {
        model,
        lazy: true,
        ..EngineConfig::default()
    })
    .expect("lazy engine starts");
    let info = engine.info().clone();
    assert_eq!(
        (
            info.kind.as_str(),
            info.quantisation.as_str(),
            info.multilingual
        ),
        ("tiny", "q8_0", false),
        "{info:?}"
    );
    let audio = common::speak(tmp.path(), common::SENTENCES[1], "en-us");
    let transcript = engine
        .transcribe_blocking(Request::new(audio))
        .expect("transcribes once loaded");
    assert!(
        transcript.text.to_lowercase().contains("kitchen"),
        "{transcript:?}"
    );

    // A file that is not a whisper model is refused at start, lazy or not.
    let bad = tmp.path().join("ggml-bad.bin");
    std::fs::write(
        &bad,
        b"not a model at all, only some bytes to fill a header",
    )
    .unwrap();
    let e = Engine::start(EngineConfig {
        model: bad,
        lazy: true,
        ..EngineConfig::default()
    })
    .err()
    .expect("refused");
    assert!(e.to_string().contains("ggml-bad.bin"), "{e}");
}
