//! Decoding real files of every supported format, made at test time: WAV
//! with `hound`, FLAC and OGG/Vorbis with `sox`, MP3 with `lame` (all
//! installed by `appliance/setup-build`).

use std::path::{Path, PathBuf};
use std::process::Command;

use hark_audio::decode::{DecodeError, Decoded, Limits, decode, decode_file};

const FREQ: f64 = 440.0;
const AMP: f32 = 0.5;
/// RMS of a full-scale-`AMP` sine.
const SINE_RMS: f64 = AMP as f64 / std::f64::consts::SQRT_2;

fn tone(rate: u32, seconds: f64) -> Vec<f32> {
    (0..(f64::from(rate) * seconds).round() as usize)
        .map(|i| {
            (2.0 * std::f64::consts::PI * FREQ * i as f64 / f64::from(rate)).sin() as f32 * AMP
        })
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Bits {
    I8,
    I16,
    I24,
    I32,
    F32,
}

/// Writes `channels` (each a list of samples in −1..1) as a WAV file.
fn write_wav(path: &Path, rate: u32, bits: Bits, channels: &[Vec<f32>]) {
    let (bits_per_sample, sample_format) = match bits {
        Bits::I8 => (8, hound::SampleFormat::Int),
        Bits::I16 => (16, hound::SampleFormat::Int),
        Bits::I24 => (24, hound::SampleFormat::Int),
        Bits::I32 => (32, hound::SampleFormat::Int),
        Bits::F32 => (32, hound::SampleFormat::Float),
    };
    let spec = hound::WavSpec {
        channels: channels.len() as u16,
        sample_rate: rate,
        bits_per_sample,
        sample_format,
    };
    let mut w = hound::WavWriter::create(path, spec).expect("wav writer");
    for i in 0..channels[0].len() {
        for channel in channels {
            let s = f64::from(channel[i]);
            let full = |bits: u32| (s * f64::from((1u32 << (bits - 1)) - 1)).round();
            let written = match bits {
                Bits::I8 => w.write_sample(full(8) as i8),
                Bits::I16 => w.write_sample(full(16) as i16),
                Bits::I24 => w.write_sample(full(24) as i32),
                Bits::I32 => w.write_sample(full(32) as i32),
                Bits::F32 => w.write_sample(s as f32),
            };
            written.expect("write sample");
        }
    }
    w.finalize().expect("finalize wav");
}

/// Runs an encoder, with a clear message when it is missing.
fn run(program: &str, args: &[&Path]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("cannot run `{program}` ({e}); run appliance/setup-build"));
    assert!(status.success(), "`{program} {args:?}` failed: {status}");
}

/// Encodes `wav` to `ext` ("flac", "ogg" or "mp3") next to it.
fn encode(wav: &Path, ext: &str) -> PathBuf {
    let out = wav.with_extension(ext);
    match ext {
        // A fixed 128 kbit/s (its default at 44.1 kHz, and it keeps every rate
        // the tests use): at LAME's default for 8 kHz (8 kbit/s) the first
        // frame is too small for the LAME tag, and without it no decoder
        // (LAME's own included) can trim the encoder delay: +94 ms.
        "mp3" => run(
            "lame",
            &[Path::new("--quiet"), Path::new("-b128"), wav, &out],
        ),
        _ => run("sox", &[wav, &out]),
    }
    out
}

/// Frequency from the interpolated rising zero crossings of a steady
/// stretch (the middle, away from codec and resampler edges).
fn frequency(samples: &[f32]) -> f64 {
    let crossings: Vec<f64> = samples
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] < 0.0 && w[1] >= 0.0)
        .map(|(i, w)| i as f64 + f64::from(-w[0] / (w[1] - w[0])))
        .collect();
    assert!(
        crossings.len() > 10,
        "no tone: {} crossings",
        crossings.len()
    );
    let (first, last) = (crossings[0], crossings[crossings.len() - 1]);
    (crossings.len() - 1) as f64 * 16_000.0 / (last - first)
}

fn rms(samples: &[f32]) -> f64 {
    (samples.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / samples.len() as f64).sqrt()
}

fn middle(samples: &[f32]) -> &[f32] {
    let edge = samples.len() / 5;
    &samples[edge..samples.len() - edge]
}

/// The decoded audio is `seconds` long (±20 ms), a 440 Hz tone (±2 Hz) with
/// RMS `expected_rms` (±5 %), at 16 kHz.
fn assert_tone(d: &Decoded, seconds: f64, expected_rms: f64, what: &str) {
    assert_tone_within(d, seconds, expected_rms, 0.05, what);
}

/// As [`assert_tone`], with the level within `level_tolerance` (relative).
fn assert_tone_within(
    d: &Decoded,
    seconds: f64,
    expected_rms: f64,
    level_tolerance: f64,
    what: &str,
) {
    assert!(
        (d.duration_secs - seconds).abs() <= 0.020,
        "{what}: lasts {} s, expected {seconds} s",
        d.duration_secs
    );
    let output_secs = d.samples.len() as f64 / 16_000.0;
    assert!(
        (output_secs - seconds).abs() <= 0.020,
        "{what}: {} samples at 16 kHz = {output_secs} s, expected {seconds} s",
        d.samples.len()
    );
    let hz = frequency(middle(&d.samples));
    assert!((hz - FREQ).abs() < 2.0, "{what}: {hz} Hz, expected {FREQ}");
    let level = rms(middle(&d.samples));
    assert!(
        (level / expected_rms - 1.0).abs() < level_tolerance,
        "{what}: RMS {level}, expected {expected_rms}"
    );
    assert!(
        d.samples.iter().all(|s| s.is_finite() && s.abs() <= 1.0),
        "{what}: samples out of range"
    );
}

#[test]
fn wav_in_every_sample_format_and_rate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits::default();
    for (bits, rate, channels) in [
        (Bits::I8, 8_000, 1),
        (Bits::I16, 16_000, 1),
        (Bits::I16, 44_100, 2),
        (Bits::I24, 48_000, 2),
        (Bits::I32, 22_050, 1),
        (Bits::F32, 48_000, 1),
        (Bits::F32, 44_100, 2),
        // Shares no useful factor with 16 kHz: the sinc resampler.
        (Bits::I16, 11_111, 1),
    ] {
        let what = format!("{bits:?} {rate} Hz ×{channels}");
        let path = dir.path().join(format!("{bits:?}-{rate}-{channels}.wav"));
        let signal = tone(rate, 1.5);
        write_wav(&path, rate, bits, &vec![signal; channels]);
        let d = decode_file(&path, &limits).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(d.format, "wav", "{what}");
        assert_eq!(d.source_rate, rate, "{what}");
        assert_eq!(usize::from(d.source_channels), channels, "{what}");
        assert_eq!(d.skipped_packets, 0, "{what}");
        assert_tone(&d, 1.5, SINE_RMS, &what);
    }
}

#[test]
fn stereo_is_averaged_to_mono() {
    let dir = tempfile::tempdir().expect("tempdir");
    for rate in [44_100, 48_000, 8_000] {
        let path = dir.path().join(format!("left-{rate}.wav"));
        let left = tone(rate, 1.0);
        let right = vec![0.0; left.len()];
        write_wav(&path, rate, Bits::I16, &[left, right]);
        let d = decode_file(&path, &Limits::default()).expect("decode");
        assert_eq!(d.source_channels, 2);
        assert_tone(
            &d,
            1.0,
            SINE_RMS / 2.0,
            &format!("L=tone R=silence at {rate} Hz"),
        );
    }
    // Four channels, the tone on one: a quarter.
    let path = dir.path().join("quad.wav");
    let first = tone(48_000, 1.0);
    let silence = vec![0.0; first.len()];
    write_wav(
        &path,
        48_000,
        Bits::I16,
        &[silence.clone(), first, silence.clone(), silence],
    );
    let d = decode_file(&path, &Limits::default()).expect("decode");
    assert_eq!(d.source_channels, 4);
    assert_tone(&d, 1.0, SINE_RMS / 4.0, "4 channels");
}

#[test]
fn flac_mp3_and_ogg_vorbis() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (rate, channels) in [(44_100, 2), (48_000, 1), (8_000, 1)] {
        let wav = dir.path().join(format!("tone-{rate}-{channels}.wav"));
        write_wav(&wav, rate, Bits::I16, &vec![tone(rate, 2.0); channels]);
        for ext in ["flac", "mp3", "ogg"] {
            let what = format!("{ext} {rate} Hz ×{channels}");
            let file = encode(&wav, ext);
            // Named by path, and sent as bytes with a misleading name: the
            // format comes from the contents.
            let by_path =
                decode_file(&file, &Limits::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let bytes = std::fs::read(&file).expect("read");
            let by_bytes = decode(bytes, Some("upload.wav"), &Limits::default())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(by_path, by_bytes, "{what}");
            assert_eq!(by_path.format, ext, "{what}");
            assert_eq!(by_path.source_rate, rate, "{what}");
            assert_eq!(usize::from(by_path.source_channels), channels, "{what}");
            assert_eq!(by_path.skipped_packets, 0, "{what}");
            // LAME encodes this tone 5 % quieter (its own decoder agrees).
            let tolerance = if ext == "flac" { 0.05 } else { 0.10 };
            assert_tone_within(&by_path, 2.0, SINE_RMS, tolerance, &what);
        }
    }
}

#[test]
fn empty_input_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("empty.wav");
    std::fs::write(&path, b"").expect("write");
    assert!(matches!(
        decode_file(&path, &Limits::default()),
        Err(DecodeError::Empty)
    ));
    assert!(matches!(
        decode(Vec::new(), None, &Limits::default()),
        Err(DecodeError::Empty)
    ));
}

#[test]
fn text_named_like_audio_is_not_audio() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notes.wav");
    std::fs::write(&path, "Remember to buy milk.\n".repeat(200)).expect("write");
    let e = decode_file(&path, &Limits::default()).expect_err("text");
    assert!(matches!(e, DecodeError::NotAudio { .. }), "{e}");
    let message = e.to_string();
    assert!(
        message.contains("notes.wav")
            && message.contains("not a recognised audio file (WAV, FLAC, MP3 or OGG/Vorbis)"),
        "{message}"
    );
    // A few bytes, and a RIFF file that is not a WAV (an AVI).
    for bytes in [&b"hi"[..], b"RIFF\x10\0\0\0AVI LIST"] {
        let e = decode(bytes, Some("x.mp3"), &Limits::default()).expect_err("not audio");
        assert!(matches!(e, DecodeError::NotAudio { .. }), "{bytes:?}: {e}");
    }
}

/// A 10 s stereo tone in every format (long enough that OGG's few KB of
/// headers are a small part of the file).
fn ten_seconds_in_every_format(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let wav = dir.join("ten.wav");
    write_wav(
        &wav,
        44_100,
        Bits::I16,
        &[tone(44_100, 10.0), tone(44_100, 10.0)],
    );
    let mut files = vec![(wav.clone(), "wav")];
    for ext in ["flac", "mp3", "ogg"] {
        files.push((encode(&wav, ext), ext));
    }
    files
}

#[test]
fn truncated_files_decode_what_is_there_or_are_corrupt() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, format) in ten_seconds_in_every_format(dir.path()) {
        let bytes = std::fs::read(&path).expect("read");
        // Cut in the middle (an interrupted upload): the first part decodes.
        let d = decode(bytes[..bytes.len() / 2].to_vec(), None, &Limits::default())
            .unwrap_or_else(|e| panic!("{format} cut in half: {e}"));
        assert_eq!(d.format, format);
        assert!(
            d.duration_secs > 2.5 && d.duration_secs < 5.1,
            "{format}: half the file lasts {} s",
            d.duration_secs
        );
        assert_eq!(
            d.samples.len(),
            (d.duration_secs * 16_000.0).ceil() as usize
        );
        let hz = frequency(middle(&d.samples));
        assert!((hz - FREQ).abs() < 2.0, "{format}: {hz} Hz");
        // Cut inside the header (a WAV's is 44 bytes): nothing to decode,
        // and the error says which format.
        for cut in [6, 40] {
            let e = decode(bytes[..cut].to_vec(), None, &Limits::default()).expect_err(format);
            match &e {
                DecodeError::Corrupt { format: f, .. } => assert_eq!(*f, format, "{e}"),
                other => panic!("{format} cut to {cut} bytes: {other}"),
            }
            assert!(e.to_string().contains("damaged"), "{e}");
        }
    }
}

#[test]
fn damage_in_the_middle_keeps_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, format) in ten_seconds_in_every_format(dir.path()) {
        let mut bytes = std::fs::read(&path).expect("read");
        // Deterministic junk over 512 bytes in the middle.
        let start = bytes.len() / 2;
        let mut x = 0x1234_5678u32;
        for b in &mut bytes[start..start + 512] {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        // The demuxers resynchronise on the next good frame or page, so at
        // most a page (OGG: up to about 1.7 s here) is lost.
        let d = decode(bytes, None, &Limits::default())
            .unwrap_or_else(|e| panic!("{format} damaged in the middle: {e}"));
        assert_eq!(d.format, format);
        assert!(
            d.duration_secs > 7.0 && d.duration_secs < 10.05,
            "{format}: {} s",
            d.duration_secs
        );
        assert!(d.samples.iter().all(|s| s.is_finite()), "{format}");
    }
}

#[test]
fn other_wav_encodings_decode_or_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("tone.wav");
    write_wav(&wav, 8_000, Bits::I16, &[tone(8_000, 1.0)]);
    // A-law (telephony) decodes.
    let alaw = dir.path().join("alaw.wav");
    run("sox", &[&wav, Path::new("-e"), Path::new("a-law"), &alaw]);
    let d = decode_file(&alaw, &Limits::default()).expect("a-law");
    assert_tone(&d, 1.0, SINE_RMS, "A-law WAV");
    // IMA ADPCM does not, and the message says what it is.
    let adpcm = dir.path().join("adpcm.wav");
    run(
        "sox",
        &[&wav, Path::new("-e"), Path::new("ima-adpcm"), &adpcm],
    );
    let e = decode_file(&adpcm, &Limits::default()).expect_err("adpcm");
    assert!(
        matches!(e, DecodeError::Unsupported { format: "wav", .. }),
        "{e}"
    );
    assert!(e.to_string().starts_with("the WAV file uses ADPCM"), "{e}");
    // A header and no samples.
    let empty = dir.path().join("silence.wav");
    write_wav(&empty, 16_000, Bits::I16, &[Vec::new()]);
    let e = decode_file(&empty, &Limits::default()).expect_err("no samples");
    assert!(matches!(e, DecodeError::NoSamples { format: "wav" }), "{e}");
}

#[test]
fn oversize_is_refused_from_the_size_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A sparse file of 64 GiB: reading it would take minutes and more memory
    // than the machine has, so passing quickly shows it was not read.
    let path = dir.path().join("huge.wav");
    let file = std::fs::File::create(&path).expect("create");
    file.set_len(64 << 30).expect("set_len");
    let e = decode_file(&path, &Limits::default()).expect_err("huge");
    let DecodeError::TooLarge { size, limit } = e else {
        panic!("{e}");
    };
    assert_eq!(size, 64 << 30);
    assert_eq!(limit, 50 * 1024 * 1024);

    // A payload, by its length.
    let wav = dir.path().join("small.wav");
    write_wav(&wav, 16_000, Bits::I16, &[tone(16_000, 0.5)]);
    let bytes = std::fs::read(&wav).expect("read");
    let limits = Limits {
        max_bytes: 1_000,
        ..Limits::default()
    };
    let e = decode(bytes.clone(), None, &limits).expect_err("payload");
    assert!(
        matches!(e, DecodeError::TooLarge { size, limit: 1_000 } if size == bytes.len() as u64),
        "{e}"
    );
    assert!(matches!(
        decode_file(&wav, &limits),
        Err(DecodeError::TooLarge { .. })
    ));
}

#[test]
fn too_long_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("three.wav");
    write_wav(&wav, 16_000, Bits::I16, &[tone(16_000, 3.0)]);
    let limits = Limits {
        max_seconds: 2,
        ..Limits::default()
    };
    // WAV is measured while decoding; compressed formats from their headers.
    for path in [
        wav.clone(),
        encode(&wav, "flac"),
        encode(&wav, "ogg"),
        encode(&wav, "mp3"),
    ] {
        let e = decode_file(&path, &limits).expect_err("too long");
        let DecodeError::TooLong { seconds, limit } = e else {
            panic!("{}: {e}", path.display());
        };
        assert_eq!(limit, 2);
        assert!(
            seconds > 2.0 && seconds <= 3.1,
            "{}: {seconds} s",
            path.display()
        );
    }
    // Exactly at the limit is fine.
    let d = decode_file(
        &wav,
        &Limits {
            max_seconds: 3,
            ..limits
        },
    )
    .expect("at the limit");
    assert_tone(&d, 3.0, SINE_RMS, "3 s at a 3 s limit");
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("absent.flac");
    let e = decode_file(&path, &Limits::default()).expect_err("missing");
    assert!(
        matches!(&e, DecodeError::Io { path: p, .. } if *p == path),
        "{e}"
    );
    assert!(e.to_string().contains("absent.flac"), "{e}");
}
