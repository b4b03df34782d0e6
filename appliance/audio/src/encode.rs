//! Speech made into a file agents can use: WAV (16-bit PCM), Ogg Opus
//! (libopusenc, Debian's `libopusenc0`) or MP3 (LAME, Debian's
//! `libmp3lame0`, linked as the shared library it is packaged as).
//!
//! Mono in, mono out, at the voice's rate: libopusenc resamples to Opus's
//! 48 kHz itself and LAME takes 22 050 Hz as it is. The bit rates are
//! chosen for one voice, not music: Opus at 32 kb/s (speech is
//! transparent there), MP3 at 48 kb/s constant (no VBR header to patch
//! after the fact, so the bytes can be made in one pass, and every player
//! gets the duration right from the size).

use std::io::Cursor;

/// A file format speech can be written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Wav,
    OggOpus,
    Mp3,
}

impl Format {
    /// The format a file name's extension asks for (`.wav`, `.ogg`,
    /// `.opus`, `.mp3`; case does not matter).
    pub fn of_extension(extension: &str) -> Option<Self> {
        match extension.to_ascii_lowercase().as_str() {
            "wav" => Some(Format::Wav),
            "ogg" | "opus" | "oga" => Some(Format::OggOpus),
            "mp3" => Some(Format::Mp3),
            _ => None,
        }
    }

    /// Its MIME type.
    pub fn mime_type(self) -> &'static str {
        match self {
            Format::Wav => "audio/wav",
            Format::OggOpus => "audio/ogg",
            Format::Mp3 => "audio/mpeg",
        }
    }

    /// Its name in tool arguments and results (`wav`, `ogg`, `mp3`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Wav => "wav",
            Format::OggOpus => "ogg",
            Format::Mp3 => "mp3",
        }
    }
}

/// Opus's bit rate for one voice.
const OPUS_BITRATE: i32 = 32_000;
/// MP3's (constant) bit rate for one voice, kb/s.
const MP3_KBPS: i32 = 48;

#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("cannot encode WAV: {0}")]
    Wav(#[from] hound::Error),
    #[error("cannot encode Ogg Opus: {0}")]
    Opus(String),
    #[error("cannot encode MP3: {0}")]
    Mp3(String),
    #[error("{0} Hz cannot be encoded as {1} (8000–48000 Hz can)")]
    Rate(u32, &'static str),
}

/// `samples` (mono, −1 to 1, at `rate` Hz) as a file of `format`.
pub fn encode(samples: &[f32], rate: u32, format: Format) -> Result<Vec<u8>, EncodeError> {
    match format {
        Format::Wav => wav(samples, rate),
        Format::OggOpus => ogg_opus(samples, rate),
        Format::Mp3 => mp3(samples, rate),
    }
}

fn pcm16(samples: &[f32]) -> Vec<i16> {
    samples
        .iter()
        .map(|s| (s.clamp(-1.0, 1.0) * 32767.0) as i16)
        .collect()
}

/// 16-bit PCM WAV, mono.
fn wav(samples: &[f32], rate: u32) -> Result<Vec<u8>, EncodeError> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = Cursor::new(Vec::with_capacity(44 + samples.len() * 2));
    {
        let mut writer = hound::WavWriter::new(&mut out, spec)?;
        for s in pcm16(samples) {
            writer.write_sample(s)?;
        }
        writer.finalize()?;
    }
    Ok(out.into_inner())
}

fn ogg_opus(samples: &[f32], rate: u32) -> Result<Vec<u8>, EncodeError> {
    if !(8_000..=48_000).contains(&rate) {
        return Err(EncodeError::Rate(rate, "Ogg Opus"));
    }
    let fail = |e: opusenc::Error| EncodeError::Opus(e.to_string());
    let mut comments = opusenc::Comments::create();
    comments.add_string("ENCODER=Hark").map_err(fail)?;
    // Pulled page by page into memory: nothing touches the disk here.
    let mut encoder =
        opusenc::Encoder::create_pull(comments, rate as i32, 1, opusenc::MappingFamily::MonoStereo)
            .map_err(fail)?;
    // An int-valued control, which libopusenc passes on as libopus takes it.
    encoder.set_bitrate(OPUS_BITRATE).map_err(fail)?;
    let mut out = Vec::new();
    for chunk in samples.chunks(rate as usize) {
        encoder.write_float(chunk).map_err(fail)?;
        while let Some(page) = encoder.get_page(false) {
            out.extend_from_slice(page);
        }
    }
    encoder.drain().map_err(fail)?;
    while let Some(page) = encoder.get_page(true) {
        out.extend_from_slice(page);
    }
    Ok(out)
}

/// LAME's C API, the few calls a mono constant-rate encode needs.
mod lame {
    use std::ffi::{c_int, c_short, c_uchar, c_void};

    /// `MPEG_mode`'s `MONO`.
    pub const MONO: c_int = 3;

    #[link(name = "mp3lame")]
    unsafe extern "C" {
        pub fn lame_init() -> *mut c_void;
        pub fn lame_set_in_samplerate(flags: *mut c_void, rate: c_int) -> c_int;
        pub fn lame_set_num_channels(flags: *mut c_void, channels: c_int) -> c_int;
        pub fn lame_set_mode(flags: *mut c_void, mode: c_int) -> c_int;
        pub fn lame_set_brate(flags: *mut c_void, kbps: c_int) -> c_int;
        pub fn lame_set_bWriteVbrTag(flags: *mut c_void, write: c_int) -> c_int;
        pub fn lame_set_quality(flags: *mut c_void, quality: c_int) -> c_int;
        pub fn lame_init_params(flags: *mut c_void) -> c_int;
        pub fn lame_encode_buffer(
            flags: *mut c_void,
            left: *const c_short,
            right: *const c_short,
            samples: c_int,
            out: *mut c_uchar,
            out_size: c_int,
        ) -> c_int;
        pub fn lame_encode_flush(flags: *mut c_void, out: *mut c_uchar, out_size: c_int) -> c_int;
        pub fn lame_close(flags: *mut c_void) -> c_int;
    }
}

/// LAME's state, closed when dropped.
struct Lame(*mut std::ffi::c_void);

impl Drop for Lame {
    fn drop(&mut self) {
        // SAFETY: made by lame_init, closed once here.
        unsafe { lame::lame_close(self.0) };
    }
}

fn mp3(samples: &[f32], rate: u32) -> Result<Vec<u8>, EncodeError> {
    if !(8_000..=48_000).contains(&rate) {
        return Err(EncodeError::Rate(rate, "MP3"));
    }
    let check = |what: &str, code: i32| {
        if code < 0 {
            Err(EncodeError::Mp3(format!(
                "{what} failed (LAME error {code})"
            )))
        } else {
            Ok(code)
        }
    };
    // SAFETY: lame_init returns a fresh state or null; every call below
    // gets that state, and the buffers with their true lengths.
    let lame = Lame(unsafe { lame::lame_init() });
    if lame.0.is_null() {
        return Err(EncodeError::Mp3("lame_init returned nothing".into()));
    }
    unsafe {
        check(
            "setting the rate",
            lame::lame_set_in_samplerate(lame.0, rate as i32),
        )?;
        check("setting mono", lame::lame_set_num_channels(lame.0, 1))?;
        check("setting mono", lame::lame_set_mode(lame.0, lame::MONO))?;
        check(
            "setting the bit rate",
            lame::lame_set_brate(lame.0, MP3_KBPS),
        )?;
        check(
            "leaving out the VBR tag",
            lame::lame_set_bWriteVbrTag(lame.0, 0),
        )?;
        // 2 is LAME's "near best"; speech is short, the time is small.
        check("setting the quality", lame::lame_set_quality(lame.0, 2))?;
        check("initialising", lame::lame_init_params(lame.0))?;
    }
    let pcm = pcm16(samples);
    let mut out = Vec::new();
    // LAME's own bound: 1.25 × samples + 7200 bytes per call.
    const CHUNK: usize = 8192;
    let mut buf = vec![0u8; CHUNK * 5 / 4 + 7200];
    for chunk in pcm.chunks(CHUNK) {
        // SAFETY: `chunk` holds `chunk.len()` samples; `buf` its length.
        let n = check("encoding", unsafe {
            lame::lame_encode_buffer(
                lame.0,
                chunk.as_ptr(),
                std::ptr::null(),
                chunk.len() as i32,
                buf.as_mut_ptr(),
                buf.len() as i32,
            )
        })?;
        out.extend_from_slice(&buf[..n as usize]);
    }
    // SAFETY: as above; the flush writes at most 7200 bytes.
    let n = check("flushing", unsafe {
        lame::lame_encode_flush(lame.0, buf.as_mut_ptr(), buf.len() as i32)
    })?;
    out.extend_from_slice(&buf[..n as usize]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second of a 440 Hz tone at `rate`.
    fn tone(rate: u32) -> Vec<f32> {
        (0..rate)
            .map(|i| 0.5 * (i as f32 * 440.0 * std::f32::consts::TAU / rate as f32).sin())
            .collect()
    }

    #[test]
    fn formats_come_from_extensions() {
        assert_eq!(Format::of_extension("MP3"), Some(Format::Mp3));
        assert_eq!(Format::of_extension("opus"), Some(Format::OggOpus));
        assert_eq!(Format::of_extension("ogg"), Some(Format::OggOpus));
        assert_eq!(Format::of_extension("wav"), Some(Format::Wav));
        assert_eq!(Format::of_extension("flac"), None);
    }

    #[test]
    fn each_format_is_a_file_of_its_kind() {
        let samples = tone(22_050);
        let wav = encode(&samples, 22_050, Format::Wav).unwrap();
        assert_eq!(&wav[..4], b"RIFF");
        assert_eq!(wav.len(), 44 + 22_050 * 2);
        let ogg = encode(&samples, 22_050, Format::OggOpus).unwrap();
        assert_eq!(&ogg[..4], b"OggS");
        assert!(
            ogg.windows(8).any(|w| w == b"OpusHead"),
            "an Ogg Opus stream"
        );
        // 32 kb/s for a second, give or take the headers.
        assert!((2_000..8_000).contains(&ogg.len()), "{} bytes", ogg.len());
        let mp3 = encode(&samples, 22_050, Format::Mp3).unwrap();
        assert!(
            mp3.len() > 5_000 && mp3.len() < 8_000,
            "{} bytes",
            mp3.len()
        );
        // An MPEG audio frame sync at the start (no ID3 tag is written).
        assert_eq!((mp3[0], mp3[1] & 0xE0), (0xFF, 0xE0));
    }

    #[test]
    fn an_mp3_decodes_to_the_same_length_and_tone() {
        let samples = tone(22_050);
        let mp3 = encode(&samples, 22_050, Format::Mp3).unwrap();
        let limits = crate::decode::Limits {
            max_bytes: 1 << 20,
            max_seconds: 10,
        };
        let decoded = crate::decode::decode(mp3, None, &limits).unwrap();
        assert_eq!(decoded.format, "mp3");
        // LAME's padding adds at most a frame or two.
        assert!(
            (decoded.duration_secs - 1.0).abs() < 0.12,
            "{}",
            decoded.duration_secs
        );
        let rms = (decoded.samples.iter().map(|s| s * s).sum::<f32>()
            / decoded.samples.len() as f32)
            .sqrt();
        assert!((0.25..0.45).contains(&rms), "rms {rms} of a 0.5 sine");
    }

    #[test]
    fn rates_opus_and_lame_cannot_take_are_refused() {
        assert!(matches!(
            encode(&[0.0; 10], 96_000, Format::OggOpus),
            Err(EncodeError::Rate(96_000, _))
        ));
        assert!(matches!(
            encode(&[0.0; 10], 4_000, Format::Mp3),
            Err(EncodeError::Rate(4_000, _))
        ));
    }
}
