//! Speech made into a file agents can use: WAV (16-bit PCM), Ogg Opus
//! (libopusenc, Debian's `libopusenc0`) or MP3 (LAME, Debian's
//! `libmp3lame0`), each linked as the shared library it is packaged as,
//! through the few C declarations below.
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

/// libopusenc's C API (`opus/opusenc.h`), the few calls a mono encode into
/// memory needs. Declared here, with C's own `c_char` for its strings: the
/// type is signed on x86-64 and unsigned on arm64, and a binding that fixes
/// it to one does not build for the appliance.
mod ope {
    use std::ffi::{c_char, c_int, c_uchar, c_void};

    /// `OPE_OK`.
    pub const OK: c_int = 0;
    /// Mapping family 0: mono or stereo, no surround.
    pub const MONO_STEREO: c_int = 0;
    /// libopus's `OPUS_SET_BITRATE_REQUEST`, passed on by `ope_encoder_ctl`.
    pub const SET_BITRATE: c_int = 4002;

    #[link(name = "opusenc")]
    unsafe extern "C" {
        pub fn ope_comments_create() -> *mut c_void;
        pub fn ope_comments_add(
            comments: *mut c_void,
            tag: *const c_char,
            value: *const c_char,
        ) -> c_int;
        pub fn ope_comments_destroy(comments: *mut c_void);
        pub fn ope_encoder_create_pull(
            comments: *mut c_void,
            rate: i32,
            channels: c_int,
            family: c_int,
            error: *mut c_int,
        ) -> *mut c_void;
        pub fn ope_encoder_ctl(encoder: *mut c_void, request: c_int, ...) -> c_int;
        pub fn ope_encoder_write_float(
            encoder: *mut c_void,
            pcm: *const f32,
            samples: c_int,
        ) -> c_int;
        pub fn ope_encoder_get_page(
            encoder: *mut c_void,
            page: *mut *mut c_uchar,
            len: *mut i32,
            flush: c_int,
        ) -> c_int;
        pub fn ope_encoder_drain(encoder: *mut c_void) -> c_int;
        pub fn ope_encoder_destroy(encoder: *mut c_void);
        pub fn ope_strerror(error: c_int) -> *const c_char;
    }
}

/// An owned libopusenc object, destroyed when dropped.
struct Owned(
    *mut std::ffi::c_void,
    unsafe extern "C" fn(*mut std::ffi::c_void),
);

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: made by its create function, destroyed once here.
        unsafe { (self.1)(self.0) };
    }
}

/// `code` as an error naming `what` failed, with libopusenc's own words.
fn opus_check(what: &str, code: std::ffi::c_int) -> Result<(), EncodeError> {
    if code == ope::OK {
        return Ok(());
    }
    // SAFETY: ope_strerror returns a static string for any code.
    let reason = unsafe { std::ffi::CStr::from_ptr(ope::ope_strerror(code)) };
    Err(EncodeError::Opus(format!(
        "{what}: {}",
        reason.to_string_lossy()
    )))
}

/// Moves the pages the encoder has ready (all of them with `flush`) into
/// `out`.
fn opus_pages(encoder: &Owned, out: &mut Vec<u8>, flush: bool) {
    let mut page: *mut std::ffi::c_uchar = std::ptr::null_mut();
    let mut len: i32 = 0;
    // SAFETY: the page stays valid until the next call on the encoder; it
    // is copied out before that.
    while unsafe { ope::ope_encoder_get_page(encoder.0, &mut page, &mut len, i32::from(flush)) }
        != 0
    {
        if !page.is_null() && len > 0 {
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(page, len as usize) });
        }
    }
}

fn ogg_opus(samples: &[f32], rate: u32) -> Result<Vec<u8>, EncodeError> {
    if !(8_000..=48_000).contains(&rate) {
        return Err(EncodeError::Rate(rate, "Ogg Opus"));
    }
    // SAFETY: each object is checked for null before use and owned by an
    // `Owned` from then on; the encoder takes a copy of the comments.
    let comments = unsafe { ope::ope_comments_create() };
    if comments.is_null() {
        return Err(EncodeError::Opus("no memory for the comments".into()));
    }
    let comments = Owned(comments, ope::ope_comments_destroy);
    opus_check("adding the encoder's name", unsafe {
        ope::ope_comments_add(comments.0, c"ENCODER".as_ptr(), c"Hark".as_ptr())
    })?;
    let mut error = ope::OK;
    // Pulled page by page into memory: nothing touches the disk here.
    let encoder = unsafe {
        ope::ope_encoder_create_pull(comments.0, rate as i32, 1, ope::MONO_STEREO, &mut error)
    };
    if encoder.is_null() {
        opus_check("creating the encoder", error)?;
        return Err(EncodeError::Opus("creating the encoder failed".into()));
    }
    let encoder = Owned(encoder, ope::ope_encoder_destroy);
    // The variadic control takes an opus_int32, as libopus reads it.
    opus_check("setting the bit rate", unsafe {
        ope::ope_encoder_ctl(encoder.0, ope::SET_BITRATE, OPUS_BITRATE)
    })?;
    let mut out = Vec::new();
    for chunk in samples.chunks(rate as usize) {
        // SAFETY: `chunk` holds `chunk.len()` mono samples.
        opus_check("encoding", unsafe {
            ope::ope_encoder_write_float(encoder.0, chunk.as_ptr(), chunk.len() as i32)
        })?;
        opus_pages(&encoder, &mut out, false);
    }
    opus_check("finishing the stream", unsafe {
        ope::ope_encoder_drain(encoder.0)
    })?;
    opus_pages(&encoder, &mut out, true);
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
