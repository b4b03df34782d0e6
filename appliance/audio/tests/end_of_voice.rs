//! The detector hears the end of speech where the voice falls silent, on
//! the voice the appliance speaks with (piper's en_US-joe-medium, from
//! tests/.voices): its words die away over a few tens of ms, and the
//! detector's score alone would carry that tail on for another 40–100 ms,
//! which the end of every turn waits out.

use hark_audio::{
    clip::Clip,
    config::{PIPELINE_RATE, VadConfig},
    vad::{Event, Segmenter},
};

/// `text` spoken by the piper voice, at 16 kHz.
fn piper(text: &str) -> Vec<f32> {
    let (samples, rate) = hark_tts::test_voice::speak(text);
    Clip { samples, rate }
        .resampled(PIPELINE_RATE)
        .expect("resampled")
        .samples
}

/// After the last 10 ms window above −40 dBFS.
fn true_end(clip: &[f32]) -> usize {
    clip.chunks(160)
        .enumerate()
        .rfind(|(_, w)| (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt() > 0.01)
        .map_or(0, |(i, _)| (i + 1) * 160)
}

/// Where the voice first rises above −40 dBFS RMS (10 ms windows): piper
/// draws each take's lead-in anew, and some start with a few hundred ms of
/// breath.
fn true_start(clip: &[f32]) -> usize {
    clip.chunks(160)
        .position(|w| (w.iter().map(|s| s * s).sum::<f32>() / w.len() as f32).sqrt() > 0.01)
        .map_or(0, |i| i * 160)
}

#[test]
fn the_speech_ends_where_the_voice_falls_silent() {
    let mut lateness = Vec::new();
    for text in [
        "Turn on the lights.",
        "What time is it in Tokyo?",
        "Please remind me to call my mother tomorrow morning.",
        "I would like a summary of the report on the quarterly budget, and then send it to Anna and David.",
    ] {
        // Silence in front and behind, as from a clean source or a quiet
        // room: nothing but the voice can carry the speech on.
        let speech = piper(text);
        let lead = 8_000;
        let mut audio = vec![0.0; lead];
        audio.extend_from_slice(&speech);
        audio.extend(vec![0.0; 16_000]);
        let truth = (lead + true_end(&speech)) as f64;
        let mut segmenter = Segmenter::new(&VadConfig::default(), 0);
        let (mut rest, mut events) = (&audio[..], Vec::new());
        while !rest.is_empty() {
            let (used, event) = segmenter.push(rest);
            rest = &rest[used..];
            events.extend(event);
        }
        let [Event::SpeechStart { .. }, Event::SpeechEnd { start, end }] = events[..] else {
            panic!("{text}: one stretch of speech, not {events:?}");
        };
        let late_ms = (end as f64 - truth) / 16.0;
        eprintln!("{text}: the speech ended {late_ms:+.0} ms from the voice's end");
        // A 16 ms frame either side, and the last sound dying away: piper
        // speaks each take a little differently (−6 to 40 ms seen over 40
        // takes), so one sentence's bound is loose and the mean is tighter.
        assert!(
            (-40.0..=80.0).contains(&late_ms),
            "{text}: the speech ended {late_ms:.0} ms after the voice fell below −40 dBFS"
        );
        let onset = lead + true_start(&speech);
        assert!(
            (start as usize) < onset + 1_600,
            "{text}: began at {start}, the voice at {onset}"
        );
        lateness.push(late_ms);
    }
    // The detector's score alone carries the tail on by 40–100 ms; ending
    // on the voice's level, the mean is 5–20 ms (measured on x86-64).
    let mean = lateness.iter().sum::<f64>() / lateness.len() as f64;
    assert!(
        mean <= 32.0,
        "ended {mean:.0} ms late on average: {lateness:?}"
    );
}
