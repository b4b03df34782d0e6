//! The audio engine through real ALSA, on the virtual sound card (ALSA's
//! `file` plugin reading a FIFO fed by the virtual microphone).
//!
//! A custom harness: ALSA reads `ALSA_CONFIG_PATH` and the card reads
//! `HARK_VIRTUAL_MIC` from the environment, which must be set before any
//! thread exists. One process, one environment: the tests run one after
//! another, each starting and stopping its own feeder on the same FIFO.

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use hark_audio::{
    Capture, CaptureState,
    capture::{self, CaptureDevice},
    clip::Clip,
    config::{CaptureConfig, PlaybackConfig, VadConfig},
    dsp::DcBlocker,
    playback::{Outcome, PlaybackState, Player},
    utterance::{self, Control, EndReason, Options},
    virtual_mic::{MicFormat, VirtualMic},
};

struct Env {
    dir: PathBuf,
    fifo: PathBuf,
    speaker: PathBuf,
}

fn device_config(channels: u32, rate: u32) -> CaptureConfig {
    CaptureConfig {
        device: "hark_virtual_mic".into(),
        channels,
        rate,
        ..CaptureConfig::default()
    }
}

fn mic(env: &Env, channels: u32, rate: u32) -> VirtualMic {
    VirtualMic::start(
        &env.fifo,
        None,
        MicFormat {
            rate,
            channels,
            period: Duration::from_millis(20),
        },
    )
    .expect("virtual mic")
}

/// A virtual microphone and a capture on it, once capture is running.
fn capturing(env: &Env, channels: u32, rate: u32) -> (VirtualMic, Capture) {
    let mic = mic(env, channels, rate);
    let capture = Capture::start(device_config(channels, rate), Vec::new()).expect("capture");
    wait_for("capturing", Duration::from_secs(10), || {
        capture.stats().state() == CaptureState::Capturing
    });
    (mic, capture)
}

fn s16(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0).round() as i16).to_le_bytes())
        .collect()
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for {what}");
}

/// Reads `n` samples from the ring starting now (blocking, bounded).
fn read_samples(capture: &Capture, start: u64, n: usize) -> Vec<f32> {
    let ring = capture.ring();
    wait_for("captured audio", Duration::from_secs(20), || {
        ring.written() >= start + n as u64
    });
    let back = (ring.written() - start) as usize;
    let mut reader = ring.reader(back);
    let mut out = vec![0.0; n];
    let got = reader.read(&mut out);
    assert_eq!(got, n);
    out
}

/// Finds where `needle` starts in `hay` (best correlation).
fn locate(hay: &[f32], needle: &[f32]) -> usize {
    let mut best = (f32::MIN, 0);
    for offset in 0..hay.len().saturating_sub(needle.len()) {
        let score: f32 = hay[offset..offset + needle.len()]
            .iter()
            .zip(needle)
            .map(|(a, b)| a * b)
            .sum();
        if score > best.0 {
            best = (score, offset);
        }
    }
    best.1
}

fn tone(freq: f32, rate: u32, seconds: f32, amp: f32) -> Vec<f32> {
    (0..(rate as f32 * seconds) as usize)
        .map(|i| (2.0 * std::f32::consts::PI * freq * i as f32 / rate as f32).sin() * amp)
        .collect()
}

/// A reproducible noise generator (xorshift), −amp…amp.
fn noise(n: usize, amp: f32, seed: u32) -> Vec<f32> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32 * 2.0 - 1.0) * amp
        })
        .collect()
}

fn capture_known_signal(env: &Env) {
    let (mic, capture) = capturing(env, 1, 16_000);
    let start = capture.ring().written();
    // A chirp-like signal no stretch of silence resembles.
    let signal: Vec<f32> = (0..8000)
        .map(|i| {
            let t = i as f32 / 16_000.0;
            (2.0 * std::f32::consts::PI * (300.0 + 2000.0 * t) * t).sin() * 0.5
        })
        .collect();
    mic.inject(&s16(&signal));
    let captured = read_samples(&capture, start, 16_000);
    let at = locate(&captured, &signal);
    // What the engine should deliver: the signal, quantised to 16 bits, with
    // the DC blocker applied.
    let mut expected: Vec<f32> = signal
        .iter()
        .map(|s| f32::from((s * 32767.0).round() as i16) / 32768.0)
        .collect();
    // Silence before the signal leaves the blocker at rest, so a fresh one
    // reproduces what the engine did.
    assert!(captured[..at].iter().all(|s| *s == 0.0));
    DcBlocker::default().process(&mut expected);
    let worst = captured[at..at + signal.len()]
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 2e-3, "largest sample difference {worst}");
    assert_eq!(
        capture
            .stats()
            .overruns
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    println!("capture_known_signal: ok (signal at sample {at}, max diff {worst:.2e})");
}

fn four_channels_select_the_speech_channel(env: &Env) {
    let mic = mic(env, 4, 16_000);
    let mut config = device_config(4, 16_000);
    config.select = vec![2];
    let capture = Capture::start(config, Vec::new()).expect("capture");
    wait_for("capturing", Duration::from_secs(10), || {
        capture.stats().state() == CaptureState::Capturing
    });
    let start = capture.ring().written();
    let voice = tone(440.0, 16_000, 0.5, 0.4);
    let n0 = noise(voice.len(), 0.6, 1);
    let n1 = noise(voice.len(), 0.6, 2);
    let n3 = noise(voice.len(), 0.6, 3);
    let interleaved: Vec<f32> = (0..voice.len())
        .flat_map(|i| [n0[i], n1[i], voice[i], n3[i]])
        .collect();
    mic.inject(&s16(&interleaved));
    let captured = read_samples(&capture, start, 16_000);
    let at = locate(&captured, &voice);
    let seg = &captured[at + 800..at + voice.len() - 800];
    let err: f32 = seg
        .iter()
        .zip(&voice[800..voice.len() - 800])
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f32>()
        / seg.len() as f32;
    assert!(
        err < 1e-4,
        "mean squared difference from the speech channel {err}"
    );
    println!("four_channels_select_the_speech_channel: ok (mse {err:.2e})");
}

fn resample_48k(env: &Env) {
    let (mic, capture) = capturing(env, 1, 48_000);
    let start = capture.ring().written();
    mic.inject(&s16(&tone(1000.0, 48_000, 2.0, 0.5)));
    let captured = read_samples(&capture, start, 32_000);
    let loud: Vec<f32> = captured
        .iter()
        .copied()
        .skip_while(|s| s.abs() < 0.1)
        .collect();
    let window = &loud[1_600..1_600 + 16_000];
    let crossings = window
        .windows(2)
        .filter(|w| w[0] < 0.0 && w[1] >= 0.0)
        .count();
    assert!((crossings as i32 - 1000).abs() <= 1, "{crossings} Hz");
    println!("resample_48k: ok ({crossings} Hz)");
}

fn speech_clip(dir: &Path, text: &str) -> Vec<f32> {
    let wav = dir.join("speech.wav");
    let raw = dir.join("speech.raw");
    let ok = Command::new("espeak-ng")
        .args(["-w", wav.to_str().expect("utf-8 path"), text])
        .status()
        .expect("espeak-ng is installed (appliance/setup-build)");
    assert!(ok.success());
    let ok = Command::new("sox")
        .args([
            wav.to_str().expect("path"),
            "-r",
            "16000",
            "-c",
            "1",
            "-b",
            "16",
            "-e",
            "signed",
            "-t",
            "raw",
            raw.to_str().expect("path"),
        ])
        .status()
        .expect("sox is installed (appliance/setup-build)");
    assert!(ok.success());
    std::fs::read(&raw)
        .expect("raw speech")
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect()
}

/// Where speech truly ends in a clean clip: the last 10 ms window whose RMS
/// is above −40 dBFS.
fn true_end(clip: &[f32]) -> usize {
    let win = 160;
    let mut end = 0;
    for (i, w) in clip.chunks(win).enumerate() {
        let rms = (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt();
        if rms > 0.01 {
            end = (i + 1) * win;
        }
    }
    end
}

/// Records one utterance on its own thread while `clip` is spoken into
/// the virtual microphone.
fn record_injected(
    mic: &VirtualMic,
    capture: &Capture,
    options: Options,
    clip: &[f32],
) -> utterance::Utterance {
    let control = Control::default();
    let ring = capture.ring().clone();
    let recorder = std::thread::spawn(move || utterance::record(&ring, &options, &control));
    std::thread::sleep(Duration::from_millis(100));
    mic.inject(&s16(clip));
    recorder.join().expect("recorder")
}

fn end_of_speech(env: &Env) {
    let speech = speech_clip(
        &env.dir,
        "Hark, what is the weather like in the kitchen today?",
    );
    let lead = 16_000; // 1 s before speech
    let mut clip = vec![0.0f32; lead];
    clip.extend_from_slice(&speech);
    clip.extend(vec![0.0f32; 32_000]);
    let hiss = noise(clip.len(), 0.003, 7);
    for (s, n) in clip.iter_mut().zip(hiss) {
        *s += n;
    }
    let truth_end = lead + true_end(&speech);

    let (mic, capture) = capturing(env, 1, 16_000);
    let vad = VadConfig::default();
    let options = Options::new(
        Duration::from_secs(5),
        Duration::from_millis(300),
        vad.clone(),
    );
    let control = Control::default();
    let ring = capture.ring().clone();
    let recorder = std::thread::spawn(move || utterance::record(&ring, &options, &control));
    std::thread::sleep(Duration::from_millis(100));
    let injected_at = Instant::now();
    mic.inject(&s16(&clip));
    let utterance = recorder.join().expect("recorder");
    let decided_after = injected_at.elapsed();
    assert_eq!(utterance.reason, EndReason::EndOfSpeech);
    let (start, end) = utterance.speech.expect("speech timing");
    // Locate the clip in what was recorded to compare against the truth.
    let at = locate(&utterance.samples, &speech[..4000]) as i64 - lead as i64;
    let detected_end = (end.as_secs_f64() * 16_000.0) as i64 - at;
    let error_ms = (detected_end - truth_end as i64) as f64 / 16.0;
    assert!(
        error_ms.abs() <= 150.0,
        "speech end off by {error_ms:.0} ms"
    );
    let detected_start = (start.as_secs_f64() * 16_000.0) as i64 - at;
    let start_error_ms = (detected_start - lead as i64) as f64 / 16.0;
    assert!(
        start_error_ms.abs() <= 150.0,
        "speech start off by {start_error_ms:.0} ms"
    );
    println!(
        "end_of_speech: ok (end {error_ms:+.0} ms, start {start_error_ms:+.0} ms, decided {:.2} s after injection)",
        decided_after.as_secs_f64()
    );
}

fn silence_times_out(env: &Env) {
    let (_mic, capture) = capturing(env, 1, 16_000);
    let options = Options::new(
        Duration::from_secs(1),
        Duration::from_millis(300),
        VadConfig::default(),
    );
    let started = Instant::now();
    let utterance = utterance::record(capture.ring(), &options, &Control::default());
    assert_eq!(utterance.reason, EndReason::NoSpeech);
    assert!(utterance.speech.is_none());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    println!("silence_times_out: ok ({:.2} s)", took.as_secs_f64());
}

fn pre_roll_keeps_the_onset(env: &Env) {
    let (mic, capture) = capturing(env, 1, 16_000);
    // A marker tone, then the recorder starts 200 ms after it was captured.
    let marker = tone(2000.0, 16_000, 0.1, 0.5);
    let before = capture.ring().written();
    mic.inject(&s16(&marker));
    let ring = capture.ring().clone();
    wait_for("marker captured", Duration::from_secs(5), || {
        ring.written() > before + 1600 + 3200
    });
    let control = Control::default();
    control.stop(); // take just the pre-roll
    let options = Options::new(
        Duration::from_secs(1),
        Duration::from_millis(300),
        VadConfig::default(),
    );
    let utterance = utterance::record(&ring, &options, &control);
    assert_eq!(utterance.reason, EndReason::Stopped);
    assert_eq!(
        utterance.samples.len(),
        0,
        "a stopped recording keeps only what it read"
    );
    // Now with the recorder running: the marker must be in its first 300 ms.
    let before = ring.written();
    mic.inject(&s16(&marker));
    wait_for("marker captured", Duration::from_secs(5), || {
        ring.written() > before + 1600 + 3200
    });
    let control = std::sync::Arc::new(Control::default());
    let c2 = control.clone();
    let ring2 = ring.clone();
    let recorder = std::thread::spawn(move || utterance::record(&ring2, &options, &c2));
    std::thread::sleep(Duration::from_millis(50));
    control.stop();
    let utterance = recorder.join().expect("recorder");
    let energy: f32 = utterance.samples.iter().take(4800).map(|s| s * s).sum();
    assert!(
        energy > 10.0,
        "the marker from before the start is in the pre-roll ({energy})"
    );
    println!("pre_roll_keeps_the_onset: ok");
}

fn push_to_talk_holds_through_pauses(env: &Env) {
    let speech = speech_clip(&env.dir, "Turn the lights on in the kitchen, please.");
    let (mic, capture) = capturing(env, 1, 16_000);
    // A 1 s timeout: a held recording outlasts it.
    let options = Options::new(
        Duration::from_secs(1),
        Duration::from_millis(300),
        VadConfig::default(),
    );
    let control = std::sync::Arc::new(Control::default());
    control.hold();
    assert!(control.held());
    let (ring, held) = (capture.ring().clone(), control.clone());
    let recorder = std::thread::spawn(move || utterance::record(&ring, &options, &held));
    // Speech, then 2.5 s of silence: far past the detector's hang-over and
    // the timeout.
    let mut clip = speech.clone();
    clip.extend(vec![0.0f32; 40_000]);
    let ring = capture.ring().clone();
    let before = ring.written();
    mic.inject(&s16(&clip));
    wait_for("the clip captured", Duration::from_secs(15), || {
        ring.written() >= before + clip.len() as u64
    });
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !recorder.is_finished(),
        "held open past the end of speech and the timeout"
    );
    control.release();
    assert!(!control.held());
    let utterance = recorder.join().expect("recorder");
    assert_eq!(utterance.reason, EndReason::Stopped);
    let (start, end) = utterance.speech.expect("speech timing");
    let recorded = utterance.samples.len() as f64 / 16_000.0;
    // Speech runs from where the button went down (after the pre-roll) to
    // where it came up.
    assert!(start <= Duration::from_millis(400), "{start:?}");
    assert!(
        (end.as_secs_f64() - recorded).abs() < 0.05,
        "{end:?} of {recorded} s"
    );
    let at = locate(&utterance.samples, &speech[..4000]);
    assert!(
        at + speech.len() <= utterance.samples.len(),
        "the whole sentence is in the recording"
    );
    println!("push_to_talk_holds_through_pauses: ok ({recorded:.1} s held)");
}

/// What a watcher was shown, in order: `S` speech so far (its length in
/// samples), `P` a pause (its speech span), `R` resumed.
#[derive(Debug, Clone, PartialEq)]
enum Shown {
    S(usize),
    P(Duration, Duration),
    R,
}

fn a_recording_shows_speech_and_pauses_as_it_goes(env: &Env) {
    let first = speech_clip(&env.dir, "Put the kettle on and");
    let second = speech_clip(&env.dir, "then call my sister about dinner.");
    let mut clip = vec![0.0f32; 8_000];
    clip.extend_from_slice(&first);
    // With espeak's own trailing silence, a pause shorter than the
    // 800 ms hang-over: not the end.
    clip.extend(vec![0.0f32; 4_800]);
    clip.extend_from_slice(&second);
    clip.extend(vec![0.0f32; 24_000]);
    let (mic, capture) = capturing(env, 1, 16_000);
    let shown = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&shown);
    let mut options = Options::new(
        Duration::from_secs(5),
        Duration::from_millis(300),
        VadConfig::default(),
    );
    options.watch = Some(utterance::Watch {
        every: Some(Duration::from_millis(500)),
        pause: Duration::from_millis(200),
        pauses: true,
        again: None,
        watcher: Arc::new(move |so_far| {
            let shown = match so_far {
                utterance::SoFar::Speaking { audio, .. } => Shown::S(audio.len()),
                utterance::SoFar::Paused { speech, .. } => Shown::P(speech.0, speech.1),
                utterance::SoFar::Resumed => Shown::R,
            };
            seen.lock().expect("shown").push(shown);
        }),
    });
    let utterance = record_injected(&mic, &capture, options, &clip);
    assert_eq!(utterance.reason, EndReason::EndOfSpeech);
    let (start, end) = utterance.speech.expect("speech timing");
    let shown = shown.lock().expect("shown").clone();
    let pauses: Vec<_> = shown
        .iter()
        .enumerate()
        .filter_map(|(i, s)| matches!(s, Shown::P(..)).then_some(i))
        .collect();
    // The mid-sentence pause, taken back when speech resumed, then the
    // final one: its span is exactly the recording's.
    assert_eq!(pauses.len(), 2, "{shown:?}");
    assert_eq!(shown[pauses[0] + 1], Shown::R, "{shown:?}");
    assert_eq!(shown[pauses[1]], Shown::P(start, end), "{shown:?}");
    assert_eq!(pauses[1], shown.len() - 1, "nothing after the last pause");
    let Shown::P(first_start, first_end) = shown[pauses[0]] else {
        unreachable!()
    };
    assert_eq!(first_start, start);
    let first_half = first_end.as_secs_f64() - start.as_secs_f64();
    let spoken = true_end(&first) as f64 / 16_000.0;
    assert!(
        (first_half - spoken).abs() < 0.25,
        "the first pause ends the first half: {first_half:.2} s against {spoken:.2} s"
    );
    // Speech so far every 500 ms of it, growing, on both sides of the pause.
    let sizes: Vec<usize> = shown
        .iter()
        .filter_map(|s| if let Shown::S(n) = s { Some(*n) } else { None })
        .collect();
    assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
    assert!(matches!(shown[0], Shown::S(_)), "{shown:?}");
    assert!(
        shown[pauses[0]..pauses[1]]
            .iter()
            .any(|s| matches!(s, Shown::S(_))),
        "{shown:?}"
    );
    println!(
        "a_recording_shows_speech_and_pauses_as_it_goes: ok ({} shown)",
        shown.len()
    );
}

/// A pause the words hold open is shown a second time, with all the audio
/// since; when that second look finds the sentence finished, the turn ends
/// there instead of at the longest pause. `found`: whether the second look
/// finds it finished. Returns the silence recorded after the speech and
/// how many second looks were shown.
fn held_pause(env: &Env, found: bool) -> (f64, usize, EndReason) {
    let speech = speech_clip(&env.dir, "Turn on the lights.");
    let mut clip = vec![0.0f32; 8_000];
    clip.extend_from_slice(&speech);
    clip.extend(vec![0.0f32; 56_000]);
    let (mic, capture) = capturing(env, 1, 16_000);
    // As the daemon sets it with an end-of-turn model: the detector's own
    // hang-over is the longest pause inside a turn.
    let vad = VadConfig {
        hangover_ms: 2_500,
        ..VadConfig::default()
    };
    let mut options = Options::new(Duration::from_secs(5), Duration::from_millis(300), vad);
    let looked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&looked);
    options.watch = Some(utterance::Watch {
        every: None,
        pause: Duration::from_millis(200),
        pauses: true,
        again: Some(Duration::from_millis(500)),
        watcher: Arc::new(move |so_far| {
            if let utterance::SoFar::Paused {
                again: true,
                audio,
                speech,
            } = so_far
            {
                // Everything recorded is shown, past the speech's end.
                assert!(audio.len() as f64 / 16_000.0 >= speech.1.as_secs_f64() + 0.5);
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }),
    });
    let read = Arc::clone(&looked);
    options.end_of_turn = Some(utterance::EndOfTurn {
        pause: Duration::from_millis(200),
        every: Duration::from_millis(100),
        lead: Duration::from_millis(50),
        sure: 0.9,
        quick: 2,
        agree: 2,
        fallback: Duration::from_millis(800),
        doubt: 0.0,
        pace: 0.0,
        finished: Duration::from_millis(800),
        doubted: Duration::from_millis(1_000),
        // Held open for 1.5 s at most, short of the detector's 2.5 s.
        midway: Duration::from_millis(1_500),
        // The model calls every pause finished; the words decide.
        check: Arc::new(|_| Some(1.0)),
        // Midway ("turn on the") until a second look has been shown, then
        // as `found` says (the listen path reads the second look's words).
        words: Some(Arc::new(move |_| {
            Some(
                if read.load(std::sync::atomic::Ordering::SeqCst) == 0 || !found {
                    utterance::Words::Midway
                } else {
                    utterance::Words::Finished
                },
            )
        })),
    });
    let utterance = record_injected(&mic, &capture, options, &clip);
    let (_, end) = utterance.speech.expect("speech timing");
    let silence = utterance.samples.len() as f64 / 16_000.0 - end.as_secs_f64();
    let looks = looked.load(std::sync::atomic::Ordering::SeqCst);
    (silence, looks, utterance.reason)
}

fn a_pause_held_midway_is_looked_at_again(env: &Env) {
    let (silence, looks, reason) = held_pause(env, true);
    assert_eq!(looks, 1, "one second look");
    assert_eq!(reason, EndReason::EndOfTurn);
    // At the first ask after the second look (500 ms), well before the
    // silence rule (800 ms) and the longest pause (2.5 s).
    assert!((0.5..0.75).contains(&silence), "{silence:.2} s of silence");
    let (held, looks, reason) = held_pause(env, false);
    assert_eq!(looks, 1, "one second look, not one per ask");
    assert_eq!(reason, EndReason::EndOfSpeech);
    assert!(
        (1.4..2.4).contains(&held),
        "still midway: held for the hold (1.5 s), not the longest pause (2.5 s): {held:.2} s"
    );
    println!(
        "a_pause_held_midway_is_looked_at_again: ok (ended {silence:.2} s into the pause; held {held:.2} s)"
    );
}

fn a_tap_leaves_the_recording_to_the_detector(env: &Env) {
    let speech = speech_clip(&env.dir, "Remind me to water the plants.");
    let (mic, capture) = capturing(env, 1, 16_000);
    let options = Options::new(
        Duration::from_secs(4),
        Duration::from_millis(300),
        VadConfig::default(),
    );
    // A tap: held for a moment, then let go as a tap, before the person
    // speaks. The recording goes on and ends where the speech ends.
    let control = std::sync::Arc::new(Control::default());
    control.hold();
    let (ring, tapped) = (capture.ring().clone(), control.clone());
    let recorder = std::thread::spawn(move || utterance::record(&ring, &options, &tapped));
    std::thread::sleep(Duration::from_millis(150));
    control.tap();
    assert!(!control.held(), "a tap is not a hold");
    std::thread::sleep(Duration::from_millis(600));
    assert!(!recorder.is_finished(), "a tap does not end the recording");
    let mut clip = speech.clone();
    clip.extend(vec![0.0f32; 24_000]);
    mic.inject(&s16(&clip));
    let utterance = recorder.join().expect("recorder");
    assert_eq!(utterance.reason, EndReason::EndOfSpeech);
    let (start, end) = utterance.speech.expect("speech timing");
    let at = locate(&utterance.samples, &speech[..4000]) as f64 / 16_000.0;
    // Speech starts where the detector heard it, not where the tap was.
    assert!(
        (start.as_secs_f64() - at).abs() < 0.3,
        "speech at {start:?}, the clip at {at:.2} s"
    );
    assert!(
        end > start + Duration::from_millis(800),
        "{start:?}..{end:?}"
    );

    // A tap and then nothing: the timeout applies again.
    let options = Options::new(
        Duration::from_secs(1),
        Duration::from_millis(300),
        VadConfig::default(),
    );
    let control = Control::default();
    control.hold();
    control.tap();
    let started = Instant::now();
    let utterance = utterance::record(capture.ring(), &options, &control);
    assert_eq!(utterance.reason, EndReason::NoSpeech);
    assert!(started.elapsed() < Duration::from_secs(4));
    println!("a_tap_leaves_the_recording_to_the_detector: ok");
}

fn device_missing_then_back(env: &Env) {
    // Nothing feeds the card's FIFO path yet: remove it so the plugin cannot
    // open its infile.
    let _ = std::fs::remove_file(&env.fifo);
    let capture = Capture::start(device_config(1, 16_000), Vec::new()).expect("capture");
    wait_for("device reported missing", Duration::from_secs(10), || {
        matches!(
            capture.stats().state(),
            CaptureState::DeviceMissing | CaptureState::DeviceError
        )
    });
    let described = capture.stats().describe();
    assert!(described.starts_with("capture device"), "{described}");
    // The device appears: capture recovers on its next retry.
    let mic = mic(env, 1, 16_000);
    wait_for("capture recovered", Duration::from_secs(10), || {
        capture.stats().state() == CaptureState::Capturing
    });
    let start = capture.ring().written();
    mic.inject(&s16(&tone(440.0, 16_000, 0.2, 0.5)));
    let captured = read_samples(&capture, start, 8000);
    assert!(captured.iter().any(|s| s.abs() > 0.3));
    println!("device_missing_then_back: ok ({described})");
}

fn feeder_gone_mid_stream(env: &Env) {
    use std::sync::atomic::Ordering::Relaxed;
    let (mic, capture) = capturing(env, 1, 16_000);
    // The microphone's feeder goes away mid-stream: the file plugin then
    // answers instantly with nothing. Capture must not spin.
    drop(mic);
    std::thread::sleep(Duration::from_millis(500));
    let periods = capture.stats().periods.load(Relaxed);
    std::thread::sleep(Duration::from_millis(1000));
    let per_second = capture.stats().periods.load(Relaxed) - periods;
    assert!(
        per_second < 80,
        "{per_second} reads in a second without a feeder"
    );
    // It comes back on the same FIFO: audio flows again.
    let mic = self::mic(env, 1, 16_000);
    let start = capture.ring().written();
    mic.inject(&s16(&tone(440.0, 16_000, 0.2, 0.5)));
    let captured = read_samples(&capture, start, 16_000);
    assert!(
        captured.iter().any(|s| s.abs() > 0.3),
        "the tone arrived after the feeder returned"
    );
    println!("feeder_gone_mid_stream: ok ({per_second} reads/s while gone)");
}

fn speaker(rate: u32) -> Player {
    Player::start(
        PlaybackConfig {
            device: "hark_virtual_speaker".into(),
            rate,
            channels: 1,
            volume: 100,
            ..PlaybackConfig::default()
        },
        Default::default(),
    )
    .expect("player")
}

/// The samples the virtual speaker wrote so far (the WAV's length fields are
/// only final once the device closes, so read to the end of the file).
fn speaker_samples(env: &Env) -> Vec<i16> {
    let bytes = std::fs::read(&env.speaker).expect("speaker.wav");
    let data = bytes
        .windows(4)
        .position(|w| w == b"data")
        .expect("a data chunk")
        + 8;
    bytes[data..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

fn play_a_clip(env: &Env) {
    let player = speaker(16_000);
    wait_for("player ready", Duration::from_secs(10), || {
        player.stats().state() == PlaybackState::Ready
    });
    let tone = tone(440.0, 16_000, 0.5, 0.5);
    let done = player
        .play(&Clip {
            samples: tone.clone(),
            rate: 16_000,
        })
        .expect("queued");
    wait_for("speaking", Duration::from_secs(2), || {
        player
            .stats()
            .speaking
            .load(std::sync::atomic::Ordering::Acquire)
    });
    let started = Instant::now();
    assert_eq!(
        done.recv_timeout(Duration::from_secs(5)),
        Ok(Outcome::Finished)
    );
    let took = started.elapsed();
    // Played in real time, not dumped at once.
    assert!(took >= Duration::from_millis(400), "{took:?}");
    wait_for("silent", Duration::from_secs(2), || {
        !player
            .stats()
            .speaking
            .load(std::sync::atomic::Ordering::Acquire)
    });
    let written = speaker_samples(env);
    let expected: Vec<i16> = tone.iter().map(|v| (v * 32767.0) as i16).collect();
    assert!(written.len() >= expected.len());
    assert_eq!(
        &written[..expected.len()],
        &expected[..],
        "the WAV holds the clip sample for sample"
    );
    assert!(written[expected.len()..].iter().all(|s| *s == 0));
    println!(
        "play_a_clip: ok ({:.2} s for 0.5 s of audio)",
        took.as_secs_f64()
    );
}

fn stop_silences_within_50ms(env: &Env) {
    let player = speaker(16_000);
    wait_for("player ready", Duration::from_secs(10), || {
        player.stats().state() == PlaybackState::Ready
    });
    let long = Clip {
        samples: tone(300.0, 16_000, 3.0, 0.5),
        rate: 16_000,
    };
    let first = player.play(&long).expect("queued");
    let second = player.play(&long).expect("queued");
    std::thread::sleep(Duration::from_millis(500));
    player.stop();
    assert_eq!(
        first.recv_timeout(Duration::from_secs(2)),
        Ok(Outcome::Stopped)
    );
    assert_eq!(
        second.recv_timeout(Duration::from_secs(2)),
        Ok(Outcome::Stopped)
    );
    let latency = player
        .stats()
        .last_stop_latency()
        .expect("a stop was measured");
    assert!(
        latency <= Duration::from_millis(50),
        "silent {latency:?} after the stop"
    );
    let written = speaker_samples(env);
    let seconds = written.len() as f64 / 16_000.0;
    assert!(
        (0.4..1.0).contains(&seconds),
        "{seconds:.2} s were played, not 3 s"
    );
    // The stop fades instead of cutting: the last samples are small.
    let tail = written
        .iter()
        .rev()
        .skip_while(|s| **s == 0)
        .take(8)
        .map(|s| s.unsigned_abs())
        .max();
    assert!(tail.unwrap_or(0) < 4000, "no click at the stop ({tail:?})");
    // A clip queued after the stop plays.
    let after = player
        .play(&Clip {
            samples: tone(300.0, 16_000, 0.1, 0.5),
            rate: 16_000,
        })
        .expect("queued");
    assert_eq!(
        after.recv_timeout(Duration::from_secs(2)),
        Ok(Outcome::Finished)
    );
    println!(
        "stop_silences_within_50ms: ok (silent after {:.1} ms)",
        latency.as_secs_f64() * 1000.0
    );
}

fn half_duplex_mutes_capture_while_speaking(env: &Env) {
    use std::sync::{Arc, atomic::AtomicBool, atomic::Ordering::Release};
    let mic = mic(env, 1, 16_000);
    let speaking = Arc::new(AtomicBool::new(true));
    let capture =
        Capture::start(device_config(1, 16_000), vec![Arc::clone(&speaking)]).expect("capture");
    wait_for("capturing", Duration::from_secs(10), || {
        capture.stats().state() == CaptureState::Capturing
    });
    let start = capture.ring().written();
    mic.inject(&s16(&tone(440.0, 16_000, 0.3, 0.5)));
    let heard = read_samples(&capture, start, 8000);
    assert!(
        heard.iter().all(|s| *s == 0.0),
        "nothing is heard while the speaker plays"
    );
    speaking.store(false, Release);
    let start = capture.ring().written();
    mic.inject(&s16(&tone(440.0, 16_000, 0.3, 0.5)));
    let heard = read_samples(&capture, start, 8000);
    assert!(
        heard.iter().any(|s| s.abs() > 0.3),
        "and heard again once it stops"
    );
    println!("half_duplex_mutes_capture_while_speaking: ok");
}

/// The real ALSA device, with errors injected into its reads on cue.
struct Faulty {
    inner: Box<dyn CaptureDevice>,
    plan: Arc<Mutex<VecDeque<i32>>>,
}

impl CaptureDevice for Faulty {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, alsa::Error> {
        if let Some(errno) = self.plan.lock().expect("plan").pop_front() {
            return Err(alsa::Error::new("snd_pcm_readi", errno));
        }
        self.inner.read(buf)
    }

    fn recover(&mut self, err: alsa::Error) -> Result<(), alsa::Error> {
        self.inner.recover(err)
    }
}

fn device_errors_mid_stream(env: &Env) {
    use std::sync::atomic::Ordering::Relaxed;
    let mic = mic(env, 1, 16_000);
    let plan: Arc<Mutex<VecDeque<i32>>> = Arc::default();
    let opener_plan = Arc::clone(&plan);
    let capture = Capture::start_with(
        device_config(1, 16_000),
        Vec::new(),
        Box::new(move |config| {
            let (inner, period) = capture::open_alsa(config)?;
            let faulty: Box<dyn CaptureDevice> = Box::new(Faulty {
                inner,
                plan: Arc::clone(&opener_plan),
            });
            Ok((faulty, period))
        }),
    )
    .expect("capture");
    wait_for("capturing", Duration::from_secs(10), || {
        capture.stats().state() == CaptureState::Capturing
    });
    // An overrun (EPIPE): recovered in place on the real device, counted,
    // no reopen.
    plan.lock().expect("plan").push_back(32);
    wait_for("overrun counted", Duration::from_secs(5), || {
        capture.stats().overruns.load(Relaxed) == 1
    });
    assert_eq!(capture.stats().opens.load(Relaxed), 1);
    let start = capture.ring().written();
    mic.inject(&s16(&tone(440.0, 16_000, 0.2, 0.5)));
    assert!(
        read_samples(&capture, start, 8000)
            .iter()
            .any(|s| s.abs() > 0.3)
    );
    // The device vanishes (ENODEV): a state, then a reopen once it is back.
    plan.lock().expect("plan").push_back(19);
    wait_for("device reported missing", Duration::from_secs(5), || {
        capture.stats().state() == CaptureState::DeviceMissing
    });
    assert_eq!(capture.stats().describe(), "capture device missing");
    wait_for("reopened", Duration::from_secs(10), || {
        capture.stats().opens.load(Relaxed) == 2
            && capture.stats().state() == CaptureState::Capturing
    });
    // An I/O error (EIO) that recovers: capture carries on.
    plan.lock().expect("plan").push_back(5);
    let start = capture.ring().written();
    mic.inject(&s16(&tone(440.0, 16_000, 0.2, 0.5)));
    assert!(
        read_samples(&capture, start, 8000)
            .iter()
            .any(|s| s.abs() > 0.3)
    );
    println!("device_errors_mid_stream: ok (overrun recovered in place, ENODEV reopened)");
}

fn unsupported_format_names_what_the_device_supports(_env: &Env) {
    let mut config = device_config(1, 16_000);
    config.device = "hark_test_no_float".into();
    config.format = hark_audio::config::SampleFormat::FloatLe;
    let capture = Capture::start(config, Vec::new()).expect("capture");
    wait_for("the error", Duration::from_secs(10), || {
        capture.stats().state() == CaptureState::DeviceError
    });
    let described = capture.stats().describe();
    assert!(described.contains("`hark_test_no_float`"), "{described}");
    assert!(described.contains("cannot capture FLOAT_LE"), "{described}");
    assert!(described.contains("formats S16_LE, S32_LE"), "{described}");
    println!("unsupported_format_names_what_the_device_supports: ok ({described})");
}

type Test = fn(&Env);

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("mic.fifo");
    let speaker = dir.path().join("speaker.wav");
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("virtual-card.conf");
    // A device that cannot capture floats (ALSA's mu-law plugin takes only
    // integer formats), for the "what it supports" error.
    let test_conf = dir.path().join("test-devices.conf");
    std::fs::write(
        &test_conf,
        "pcm.hark_test_no_float { type mulaw slave { pcm \"null\" format MU_LAW } }\n",
    )
    .expect("test ALSA config");
    // SAFETY: no other thread exists yet.
    unsafe {
        std::env::set_var(
            "ALSA_CONFIG_PATH",
            format!(
                "/usr/share/alsa/alsa.conf:{}:{}",
                conf.display(),
                test_conf.display()
            ),
        );
        std::env::set_var("HARK_VIRTUAL_MIC", &fifo);
        std::env::set_var("HARK_VIRTUAL_SPEAKER", &speaker);
    }
    let env = Env {
        dir: dir.path().to_path_buf(),
        fifo,
        speaker,
    };
    let tests: &[(&str, Test)] = &[
        ("capture_known_signal", capture_known_signal),
        (
            "four_channels_select_the_speech_channel",
            four_channels_select_the_speech_channel,
        ),
        ("resample_48k", resample_48k),
        ("end_of_speech", end_of_speech),
        (
            "a_recording_shows_speech_and_pauses_as_it_goes",
            a_recording_shows_speech_and_pauses_as_it_goes,
        ),
        (
            "a_pause_held_midway_is_looked_at_again",
            a_pause_held_midway_is_looked_at_again,
        ),
        ("silence_times_out", silence_times_out),
        ("pre_roll_keeps_the_onset", pre_roll_keeps_the_onset),
        (
            "a_tap_leaves_the_recording_to_the_detector",
            a_tap_leaves_the_recording_to_the_detector,
        ),
        (
            "push_to_talk_holds_through_pauses",
            push_to_talk_holds_through_pauses,
        ),
        ("device_missing_then_back", device_missing_then_back),
        ("feeder_gone_mid_stream", feeder_gone_mid_stream),
        ("device_errors_mid_stream", device_errors_mid_stream),
        (
            "unsupported_format_names_what_the_device_supports",
            unsupported_format_names_what_the_device_supports,
        ),
        ("play_a_clip", play_a_clip),
        (
            "half_duplex_mutes_capture_while_speaking",
            half_duplex_mutes_capture_while_speaking,
        ),
        ("stop_silences_within_50ms", stop_silences_within_50ms),
    ];
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let mut passed = 0;
    for (name, test) in tests {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        test(&env);
        passed += 1;
    }
    println!("{passed} passed, 0 failed");
}
