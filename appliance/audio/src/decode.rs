//! Audio files that agents send (base64 bytes) or name (paths), decoded to
//! 16 kHz mono `f32` for speech recognition.
//!
//! Formats: WAV (8/16/24/32-bit integer PCM, 32/64-bit float), FLAC, MP3
//! and OGG/Vorbis, at any sample rate from 4 kHz to 768 kHz and any channel
//! count. Channels are averaged to mono; the rate is converted with
//! `rubato`'s FFT resampler (a windowed-sinc resampler for the rare rates whose
//! ratio to 16 kHz needs an impractically long FFT).
//!
//! ```no_run
//! use hark_audio::decode::{Limits, decode, decode_file};
//! # fn bytes() -> Vec<u8> { Vec::new() }
//! let limits = Limits::default();
//! let clip = decode(bytes(), Some("question.mp3"), &limits)?;
//! println!("{} s of {} at {} Hz", clip.duration_secs, clip.format, clip.source_rate);
//! let clip = decode_file(std::path::Path::new("/data/audio/note.flac"), &limits)?;
//! # Ok::<(), hark_audio::decode::DecodeError>(())
//! ```
//!
//! Input is untrusted: every failure is a [`DecodeError`] whose message tells
//! the agent what to do about it. Sizes are checked before anything is read or
//! decoded, durations while decoding (so a lying header cannot make it decode
//! more than [`Limits::max_seconds`]). Damage in the middle costs only the
//! damaged frames or pages: the demuxers resynchronise, and a packet the codec
//! still rejects is skipped and counted ([`Decoded::skipped_packets`]). A
//! stream cut short decodes to what it holds. A panic inside the decoder
//! library becomes [`DecodeError::Corrupt`].
//!
//! Decoding runs in the caller's thread and is CPU-bound: call it from a
//! blocking thread, never from the async runtime.

use std::io::{Cursor, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use audioadapter_buffers::direct::InterleavedSlice;
use rubato::{
    Async, Fft, FixedAsync, FixedSync, Resampler, SincInterpolationParameters,
    SincInterpolationType, WindowFunction,
};
use symphonia::core::audio::{AudioBuffer, AudioBufferRef, Signal};
use symphonia::core::codecs::{self, CODEC_TYPE_NULL, CodecType, DecoderOptions};
use symphonia::core::conv::IntoSample;
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::{FormatOptions, FormatReader};
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;
use symphonia::core::sample::Sample;

use crate::config::PIPELINE_RATE;

/// The lowest source sample rate accepted, in Hz.
pub const MIN_RATE: u32 = 4_000;
/// The highest source sample rate accepted, in Hz.
pub const MAX_RATE: u32 = 768_000;

/// Consecutive demuxer errors tolerated before the rest of the stream is
/// given up.
const MAX_READER_ERRORS: u32 = 8;

/// How much audio one request may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest file or payload, in bytes (after base64 decoding).
    /// Default 50 MiB.
    pub max_bytes: u64,
    /// The longest audio, in seconds. Default 3600 (one hour).
    pub max_seconds: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 50 * 1024 * 1024,
            max_seconds: 3600,
        }
    }
}

/// A decoded file: 16 kHz mono samples in −1.0..=1.0, and what it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// 16 kHz mono.
    pub samples: Vec<f32>,
    /// The file's sample rate, in Hz.
    pub source_rate: u32,
    /// The file's channel count (averaged into `samples`).
    pub source_channels: u16,
    /// The length of the decoded audio, in seconds.
    pub duration_secs: f64,
    /// The container: `"wav"`, `"flac"`, `"mp3"` or `"ogg"`.
    pub format: &'static str,
    /// Packets the codec rejected and that were skipped (each a gap of a few
    /// ms to a few tens of ms), plus one if the stream ended in damaged data.
    /// Damage the demuxer skips while resynchronising is not counted. 0 for
    /// a sound file.
    pub skipped_packets: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Zero bytes: usually an encoding step that produced nothing.
    #[error("the audio is empty (0 bytes); send the audio file's contents")]
    Empty,
    /// Over [`Limits::max_bytes`]; for a file, checked before reading it.
    #[error(
        "the audio is {size} bytes, more than the limit of {limit} bytes; send a shorter \
         recording, or compress it (FLAC, MP3 or OGG/Vorbis)"
    )]
    TooLarge { size: u64, limit: u64 },
    /// Over [`Limits::max_seconds`]. `seconds` is the length the header
    /// gives, or how much had been decoded when the limit was passed.
    #[error(
        "the audio lasts {seconds:.1} s or more, more than the limit of {limit} s; split it \
         into parts of at most {limit} s and send them one at a time"
    )]
    TooLong { seconds: f64, limit: u32 },
    /// The bytes start like none of the supported formats (a text file, an
    /// image, a path sent instead of the file's contents…).
    #[error(
        "{} is not a recognised audio file (WAV, FLAC, MP3 or OGG/Vorbis): its contents match \
         none of them; send the audio file itself in one of these formats",
        what(.name)
    )]
    NotAudio { name: Option<String> },
    /// A supported container holding something Hark cannot decode: Opus or
    /// Speex in OGG, ADPCM in WAV, an out-of-range sample rate…
    #[error(
        "the {} file uses {what}, which Hark cannot decode; convert it to 16-bit PCM WAV, \
         FLAC, MP3 or OGG/Vorbis at 8–48 kHz",
        label(.format)
    )]
    Unsupported { format: &'static str, what: String },
    /// The header is damaged, or no packet at all could be decoded.
    #[error(
        "the {} data is damaged: {reason}{}; check that the whole file was sent, or \
         re-encode it",
        label(.format),
        detail(.source)
    )]
    Corrupt {
        format: &'static str,
        reason: String,
        #[source]
        source: Option<SymphoniaError>,
    },
    /// A container with no audio stream in it.
    #[error("the {} file holds no audio track; send a file that contains audio", label(.format))]
    NoAudioTrack { format: &'static str },
    /// A well-formed file with no samples (a WAV header and nothing else).
    #[error("the {} file holds no audio (0 samples); send a file with the recording in it", label(.format))]
    NoSamples { format: &'static str },
    /// Opening, sizing or reading a named file failed.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The resampler refused its settings or a block: a bug, not bad input.
    #[error("cannot resample {rate} Hz to 16 kHz (a bug in Hark, please report it): {source}")]
    Resample {
        rate: u32,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn what(name: &Option<String>) -> String {
    match name {
        Some(name) => format!("`{name}`"),
        None => "the data".to_owned(),
    }
}

fn label(format: &str) -> String {
    format.to_ascii_uppercase()
}

fn detail(source: &Option<SymphoniaError>) -> String {
    source
        .as_ref()
        .map(|e| format!(" ({e})"))
        .unwrap_or_default()
}

/// Decodes a whole file held in memory. `name_hint` (a file name or path)
/// only appears in error messages: the format is recognised from the bytes,
/// whatever the name says. A `Vec<u8>` is used in place; a slice is copied.
pub fn decode(
    bytes: impl Into<Vec<u8>>,
    name_hint: Option<&str>,
    limits: &Limits,
) -> Result<Decoded, DecodeError> {
    let bytes = bytes.into();
    let size = bytes.len() as u64;
    if size == 0 {
        return Err(DecodeError::Empty);
    }
    if size > limits.max_bytes {
        return Err(DecodeError::TooLarge {
            size,
            limit: limits.max_bytes,
        });
    }
    let sniffed = sniff(&bytes);
    // symphonia is a parser of untrusted input written by others; a panic in
    // it must cost this request, not the thread serving every agent.
    match catch_unwind(AssertUnwindSafe(|| {
        decode_stream(bytes, name_hint, sniffed, limits)
    })) {
        Ok(result) => result,
        Err(_) => Err(match sniffed {
            Some(format) => DecodeError::Corrupt {
                format,
                reason: "the decoder failed on it".to_owned(),
                source: None,
            },
            None => DecodeError::NotAudio {
                name: name_hint.map(str::to_owned),
            },
        }),
    }
}

/// Decodes a file by path. The size is checked from its metadata before it
/// is read. This does not check where the file is: resolve agents' paths
/// with [`crate::files::AllowedDirs::resolve_read`] first.
pub fn decode_file(path: &Path, limits: &Limits) -> Result<Decoded, DecodeError> {
    let io = |source| DecodeError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size == 0 {
        return Err(DecodeError::Empty);
    }
    if size > limits.max_bytes {
        return Err(DecodeError::TooLarge {
            size,
            limit: limits.max_bytes,
        });
    }
    // The file may grow between the metadata and the read: read one byte
    // past the limit at most, to tell.
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limits.max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limits.max_bytes {
        return Err(DecodeError::TooLarge {
            size: bytes.len() as u64,
            limit: limits.max_bytes,
        });
    }
    decode(bytes, Some(&path.display().to_string()), limits)
}

/// The container, from the first bytes; `None` if they match none we decode.
fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let riff = bytes.starts_with(b"RIFF");
    if riff && bytes.get(8..12) == Some(&b"WAVE"[..]) {
        Some("wav")
    } else if riff && bytes.len() < 12 {
        // Cut before the RIFF type: most likely a WAV, reported as damaged.
        Some("wav")
    } else if bytes.starts_with(b"fLaC") {
        Some("flac")
    } else if bytes.starts_with(b"OggS") {
        Some("ogg")
    } else if bytes.starts_with(b"ID3") {
        // An ID3v2 tag, usually before MP3.
        Some("mp3")
    } else if let [0xFF, second, ..] = bytes
        && second & 0xE0 == 0xE0
    {
        // An MPEG audio frame sync.
        Some("mp3")
    } else {
        None
    }
}

/// The container name, from the codec where it tells (an ID3 tag can precede
/// FLAC too), else from the first bytes.
fn format_name(sniffed: Option<&'static str>, codec: CodecType) -> &'static str {
    match codec {
        _ if sniffed == Some("ogg") => "ogg",
        codecs::CODEC_TYPE_FLAC => "flac",
        codecs::CODEC_TYPE_MP1 | codecs::CODEC_TYPE_MP2 | codecs::CODEC_TYPE_MP3 => "mp3",
        codecs::CODEC_TYPE_VORBIS => "ogg",
        _ if is_pcm(codec) => "wav",
        _ => sniffed.unwrap_or("audio"),
    }
}

fn is_pcm(codec: CodecType) -> bool {
    symphonia::default::get_codecs()
        .get_codec(codec)
        .is_some_and(|d| d.short_name.starts_with("pcm"))
}

/// A name for a codec Hark has no decoder for.
fn codec_description(codec: CodecType) -> String {
    match codec {
        codecs::CODEC_TYPE_OPUS => "Opus".to_owned(),
        codecs::CODEC_TYPE_SPEEX => "Speex".to_owned(),
        codecs::CODEC_TYPE_AAC => "AAC".to_owned(),
        codecs::CODEC_TYPE_ALAC => "ALAC".to_owned(),
        codecs::CODEC_TYPE_ADPCM_G722
        | codecs::CODEC_TYPE_ADPCM_G726
        | codecs::CODEC_TYPE_ADPCM_G726LE
        | codecs::CODEC_TYPE_ADPCM_MS
        | codecs::CODEC_TYPE_ADPCM_IMA_WAV
        | codecs::CODEC_TYPE_ADPCM_IMA_QT => "ADPCM".to_owned(),
        other => format!("an unsupported encoding ({other})"),
    }
}

/// A reader for the container in `bytes`.
fn probe(bytes: Vec<u8>, hint: &Hint) -> Result<Box<dyn FormatReader>, SymphoniaError> {
    let options = FormatOptions {
        // Trims MP3 encoder delay and padding, so durations are exact.
        enable_gapless: true,
        ..Default::default()
    };
    symphonia::default::get_probe()
        .format(
            hint,
            MediaSourceStream::new(Box::new(Cursor::new(bytes)), Default::default()),
            &options,
            &MetadataOptions::default(),
        )
        .map(|probed| probed.format)
}

/// Probe, pick the track, decode every packet into the resampler.
fn decode_stream(
    bytes: Vec<u8>,
    name_hint: Option<&str>,
    sniffed: Option<&'static str>,
    limits: &Limits,
) -> Result<Decoded, DecodeError> {
    let not_audio = || DecodeError::NotAudio {
        name: name_hint.map(str::to_owned),
    };
    let mut hint = Hint::new();
    if let Some(ext) = name_hint
        .map(Path::new)
        .and_then(Path::extension)
        .and_then(|e| e.to_str())
    {
        hint.with_extension(ext);
    }
    let probed = probe(bytes, &hint);
    let mut reader = match (probed, sniffed) {
        (Ok(reader), _) => reader,
        (Err(_), None) => return Err(not_audio()),
        (Err(SymphoniaError::Unsupported(what)), Some(format)) => {
            return Err(DecodeError::Unsupported {
                format,
                what: format!("a variant Hark's decoder lacks ({what})"),
            });
        }
        (Err(e), Some(format)) => {
            return Err(DecodeError::Corrupt {
                format,
                reason: "its header is damaged or cut short".to_owned(),
                source: Some(e),
            });
        }
    };
    let Some(track) = reader
        .default_track()
        .filter(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .or_else(|| {
            reader
                .tracks()
                .iter()
                .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        })
    else {
        return Err(match sniffed {
            Some(format) => DecodeError::NoAudioTrack { format },
            None => not_audio(),
        });
    };
    let track_id = track.id;
    let params = track.codec_params.clone();
    let format = format_name(sniffed, params.codec);
    let mut decoder =
        match symphonia::default::get_codecs().make(&params, &DecoderOptions::default()) {
            Ok(decoder) => decoder,
            Err(SymphoniaError::Unsupported(_)) => {
                return Err(DecodeError::Unsupported {
                    format,
                    what: codec_description(params.codec),
                });
            }
            Err(e) => {
                return Err(DecodeError::Corrupt {
                    format,
                    reason: "its codec parameters are invalid".to_owned(),
                    source: Some(e),
                });
            }
        };
    // Compressed formats give lengths computed from their contents (FLAC's
    // STREAMINFO, OGG's last granule, the MP3 Xing frame count): refuse
    // early. A WAV header's length is often a placeholder (streamed WAV), so
    // WAV is measured while decoding, which is cheap for PCM.
    if let (Some(frames), Some(rate), false) =
        (params.n_frames, params.sample_rate, format == "wav")
        && rate > 0
    {
        let seconds = frames as f64 / f64::from(rate);
        if seconds > f64::from(limits.max_seconds) {
            return Err(DecodeError::TooLong {
                seconds,
                limit: limits.max_seconds,
            });
        }
    }

    let mut out: Option<To16k> = None;
    let mut mono = Vec::new();
    let mut rate = 0u32;
    let mut channels = 0u16;
    let mut frames = 0u64;
    let mut skipped = 0usize;
    let mut reader_errors = 0u32;
    let mut stream_error = None;
    loop {
        let packet = match reader.next_packet() {
            Ok(packet) => {
                reader_errors = 0;
                packet
            }
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break;
            }
            // A chained OGG stream starts a new one: transcribe the first.
            Err(SymphoniaError::ResetRequired) => break,
            Err(SymphoniaError::DecodeError(e)) if reader_errors < MAX_READER_ERRORS => {
                // The demuxer resynchronises after a damaged page or frame;
                // give it a few tries, then keep what was decoded.
                reader_errors += 1;
                skipped += 1;
                tracing::debug!(format, error = e, "skipping damaged data");
                continue;
            }
            Err(e) => {
                stream_error = Some(e);
                break;
            }
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(decoded) => decoded,
            Err(SymphoniaError::DecodeError(e)) => {
                skipped += 1;
                tracing::debug!(format, error = e, "skipping a damaged packet");
                continue;
            }
            Err(SymphoniaError::IoError(e)) => {
                skipped += 1;
                tracing::debug!(format, error = %e, "skipping a short packet");
                continue;
            }
            Err(SymphoniaError::ResetRequired) => break,
            Err(e @ SymphoniaError::Unsupported(_)) => {
                return Err(DecodeError::Unsupported {
                    format,
                    what: format!("a feature Hark's decoder lacks ({e})"),
                });
            }
            Err(e) => {
                stream_error = Some(e);
                break;
            }
        };
        let spec = *decoded.spec();
        let count = spec.channels.count();
        if count == 0 || decoded.frames() == 0 {
            continue;
        }
        if out.is_none() {
            if !(MIN_RATE..=MAX_RATE).contains(&spec.rate) {
                return Err(DecodeError::Unsupported {
                    format,
                    what: format!("a sample rate of {} Hz", spec.rate),
                });
            }
            rate = spec.rate;
            channels = u16::try_from(count).unwrap_or(u16::MAX);
            out = Some(To16k::new(rate)?);
        } else if spec.rate != rate {
            return Err(DecodeError::Unsupported {
                format,
                what: format!(
                    "a sample rate that changes from {rate} Hz to {} Hz",
                    spec.rate
                ),
            });
        }
        mono.clear();
        mix_to_mono(&decoded, &mut mono);
        frames += mono.len() as u64;
        if frames > u64::from(limits.max_seconds) * u64::from(rate) {
            return Err(DecodeError::TooLong {
                seconds: frames as f64 / f64::from(rate),
                limit: limits.max_seconds,
            });
        }
        if let Some(out) = &mut out {
            out.push(&mono)?;
        }
    }

    let Some(out) = out.filter(|_| frames > 0) else {
        return Err(match (sniffed, stream_error) {
            (None, _) => not_audio(),
            (Some(_), None) if skipped == 0 && params.n_frames.unwrap_or(0) == 0 => {
                DecodeError::NoSamples { format }
            }
            (Some(_), source) => DecodeError::Corrupt {
                format,
                reason: if skipped == 0 {
                    "it ends before its first audio; it was probably cut short".to_owned()
                } else {
                    format!("none of it could be decoded ({skipped} damaged packets)")
                },
                source,
            },
        });
    };
    if let Some(e) = &stream_error {
        // Keep what came before: a truncated upload still has its start.
        skipped += 1;
        tracing::warn!(format, error = %e, "audio stream ends in damaged data; keeping what was decoded");
    }
    if let Some(expected) = params.n_frames
        && frames < expected
        && format != "wav"
    {
        tracing::warn!(
            format,
            frames,
            expected,
            "audio is shorter than its header says"
        );
    }
    let mut samples = out.finish()?;
    // Resampling full-scale input rings past full scale (by more than 2×
    // on a fuzzed file): what leaves here is in range, as documented.
    for sample in &mut samples {
        *sample = sample.clamp(-1.0, 1.0);
    }
    let duration_secs = frames as f64 / f64::from(rate);
    tracing::debug!(
        format,
        rate,
        channels,
        duration_secs,
        skipped,
        "decoded audio"
    );
    Ok(Decoded {
        samples,
        source_rate: rate,
        source_channels: channels,
        duration_secs,
        format,
        skipped_packets: skipped,
    })
}

/// Appends the average of all channels of `decoded` to `mono`.
fn mix_to_mono(decoded: &AudioBufferRef<'_>, mono: &mut Vec<f32>) {
    match decoded {
        AudioBufferRef::U8(b) => mix(b, mono),
        AudioBufferRef::U16(b) => mix(b, mono),
        AudioBufferRef::U24(b) => mix(b, mono),
        AudioBufferRef::U32(b) => mix(b, mono),
        AudioBufferRef::S8(b) => mix(b, mono),
        AudioBufferRef::S16(b) => mix(b, mono),
        AudioBufferRef::S24(b) => mix(b, mono),
        AudioBufferRef::S32(b) => mix(b, mono),
        AudioBufferRef::F32(b) => mix(b, mono),
        AudioBufferRef::F64(b) => mix(b, mono),
    }
}

fn mix<S: Sample + IntoSample<f32>>(buffer: &AudioBuffer<S>, mono: &mut Vec<f32>) {
    let planes = buffer.planes();
    let planes = planes.planes();
    let start = mono.len();
    mono.resize(start + buffer.frames(), 0.0);
    let scale = 1.0 / planes.len().max(1) as f32;
    for plane in planes {
        for (acc, &s) in mono[start..].iter_mut().zip(plane.iter()) {
            *acc += s.into_sample();
        }
    }
    for acc in &mut mono[start..] {
        // A float file may hold NaN, infinities or values far past full
        // scale (found by fuzzing): the models downstream need finite
        // audio in range, so those are silence and clipping.
        *acc = if acc.is_finite() {
            (*acc * scale).clamp(-1.0, 1.0)
        } else {
            0.0
        };
    }
}

/// Above this many input frames per FFT block the FFT resampler's tables get
/// large (a rate like 44 101 Hz shares no factor with 16 000), so a sinc
/// resampler is used instead.
const MAX_FFT_BLOCK: usize = 4096;

/// Frames per resampler call.
const CHUNK: usize = 1024;

/// Source-rate mono in, 16 kHz mono out, block by block, so only the 16 kHz
/// result is held whole. The resampler's start-up delay is trimmed and its
/// tail flushed, so the output is exactly `ceil(input × 16000 / rate)` long
/// and lines up with the input.
struct To16k {
    resampler: Option<Box<dyn Resampler<f32>>>,
    rate: u32,
    pending: Vec<f32>,
    chunk: usize,
    to_trim: usize,
    consumed: u64,
    out: Vec<f32>,
    block: Vec<f32>,
}

impl To16k {
    fn new(rate: u32) -> Result<Self, DecodeError> {
        let err = |e: rubato::ResamplerConstructionError| DecodeError::Resample {
            rate,
            source: Box::new(e),
        };
        let resampler: Option<Box<dyn Resampler<f32>>> = if rate == PIPELINE_RATE {
            None
        } else if (rate / gcd(rate, PIPELINE_RATE)) as usize <= MAX_FFT_BLOCK {
            Some(Box::new(
                Fft::<f32>::new(
                    rate as usize,
                    PIPELINE_RATE as usize,
                    CHUNK,
                    1,
                    FixedSync::Input,
                )
                .map_err(err)?,
            ))
        } else {
            let sinc = SincInterpolationParameters {
                sinc_len: 256,
                f_cutoff: None,
                oversampling_factor: 256,
                interpolation: SincInterpolationType::Cubic,
                window: WindowFunction::BlackmanHarris2,
            };
            Some(Box::new(
                Async::<f32>::new_sinc(
                    f64::from(PIPELINE_RATE) / f64::from(rate),
                    1.0,
                    &sinc,
                    CHUNK,
                    1,
                    FixedAsync::Input,
                )
                .map_err(err)?,
            ))
        };
        let (chunk, to_trim, block) = match &resampler {
            Some(r) => (
                r.input_frames_next(),
                r.output_delay(),
                vec![0.0; r.output_frames_max()],
            ),
            None => (0, 0, Vec::new()),
        };
        Ok(Self {
            resampler,
            rate,
            pending: Vec::with_capacity(chunk * 2),
            chunk,
            to_trim,
            consumed: 0,
            out: Vec::new(),
            block,
        })
    }

    fn push(&mut self, samples: &[f32]) -> Result<(), DecodeError> {
        self.consumed += samples.len() as u64;
        if self.resampler.is_none() {
            self.out.extend_from_slice(samples);
            return Ok(());
        }
        self.pending.extend_from_slice(samples);
        let mut start = 0;
        while self.pending.len() - start >= self.chunk {
            self.process(start)?;
            start += self.chunk;
        }
        self.pending.drain(..start);
        Ok(())
    }

    /// Resamples `pending[start..start + chunk]` onto the output.
    fn process(&mut self, start: usize) -> Result<(), DecodeError> {
        let rate = self.rate;
        let err =
            |e: Box<dyn std::error::Error + Send + Sync>| DecodeError::Resample { rate, source: e };
        let Some(resampler) = &mut self.resampler else {
            return Ok(());
        };
        let input = InterleavedSlice::new(&self.pending[start..start + self.chunk], 1, self.chunk)
            .map_err(|e| err(Box::new(e)))?;
        let room = self.block.len();
        let mut output =
            InterleavedSlice::new_mut(&mut self.block, 1, room).map_err(|e| err(Box::new(e)))?;
        let (_, written) = resampler
            .process_into_buffer(&input, &mut output, None)
            .map_err(|e| err(Box::new(e)))?;
        let trim = self.to_trim.min(written);
        self.to_trim -= trim;
        self.out.extend_from_slice(&self.block[trim..written]);
        Ok(())
    }

    /// Flushes the last partial block and the resampler's delay line.
    fn finish(mut self) -> Result<Vec<f32>, DecodeError> {
        let expected = (self.consumed as f64 * f64::from(PIPELINE_RATE) / f64::from(self.rate))
            .ceil() as usize;
        if self.resampler.is_some() {
            // The last partial block padded with silence, then silence until
            // the delayed end of the real samples has come out. The bound
            // only guards against a resampler that never outputs.
            let mut rounds = 0;
            while self.out.len() < expected && rounds < 64 {
                self.pending.resize(self.chunk, 0.0);
                self.process(0)?;
                self.pending.fill(0.0);
                rounds += 1;
            }
        }
        self.out.truncate(expected);
        Ok(self.out)
    }
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(freq: f32, rate: u32, seconds: f32) -> Vec<f32> {
        (0..(rate as f32 * seconds) as usize)
            .map(|i| (2.0 * std::f32::consts::PI * freq * i as f32 / rate as f32).sin() * 0.5)
            .collect()
    }

    #[test]
    fn sniffs_the_containers_from_their_first_bytes() {
        assert_eq!(sniff(b"RIFF\0\0\0\0WAVEfmt "), Some("wav"));
        assert_eq!(sniff(b"fLaC\0\0\0\x22"), Some("flac"));
        assert_eq!(sniff(b"OggS\0\x02"), Some("ogg"));
        assert_eq!(sniff(b"ID3\x04\0"), Some("mp3"));
        assert_eq!(sniff(&[0xFF, 0xFB, 0x90, 0x64]), Some("mp3"));
        assert_eq!(sniff(b"RIFF\0\0\0\0AVI "), None);
        assert_eq!(sniff(b"hello, world"), None);
        assert_eq!(sniff(b"RIFF\0\0"), Some("wav"));
        assert_eq!(sniff(b"RIF"), None);
    }

    #[test]
    fn names_containers_by_codec() {
        assert_eq!(format_name(Some("mp3"), codecs::CODEC_TYPE_FLAC), "flac");
        assert_eq!(format_name(Some("ogg"), codecs::CODEC_TYPE_FLAC), "ogg");
        assert_eq!(format_name(None, codecs::CODEC_TYPE_PCM_S24LE), "wav");
        assert_eq!(format_name(None, codecs::CODEC_TYPE_PCM_U8), "wav");
        assert_eq!(format_name(Some("wav"), codecs::CODEC_TYPE_ADPCM_MS), "wav");
        assert_eq!(codec_description(codecs::CODEC_TYPE_OPUS), "Opus");
    }

    #[test]
    fn resampling_in_uneven_pieces_matches_the_length_and_keeps_the_start() {
        for rate in [8_000, 16_000, 22_050, 44_100, 48_000, 11_111] {
            let input = sine(440.0, rate, 1.3);
            let mut r = To16k::new(rate).expect("resampler");
            // Uneven pieces, like codec packets.
            for piece in input.chunks(777) {
                r.push(piece).expect("push");
            }
            let out = r.finish().expect("finish");
            let expected = (input.len() as f64 * 16_000.0 / f64::from(rate)).ceil() as usize;
            assert_eq!(out.len(), expected, "{rate} Hz");
            // The delay is trimmed: the sine starts at 0 rising, so the
            // first few ms are small and positive, not a run of silence.
            let peak = out[8..40].iter().fold(0f32, |m, s| m.max(*s));
            assert!(peak > 0.2, "{rate} Hz: start missing, peak {peak}");
        }
    }

    #[test]
    fn mono_mix_averages_channels() {
        use symphonia::core::audio::{Channels, SignalSpec};
        let spec = SignalSpec::new(48_000, Channels::FRONT_LEFT | Channels::FRONT_RIGHT);
        let mut buf = AudioBuffer::<i16>::new(4, spec);
        buf.render_reserved(Some(4));
        buf.chan_mut(0).copy_from_slice(&[16_384; 4]);
        buf.chan_mut(1).copy_from_slice(&[0; 4]);
        let mut mono = vec![1.0];
        mix_to_mono(
            &AudioBufferRef::S16(std::borrow::Cow::Borrowed(&buf)),
            &mut mono,
        );
        assert_eq!(mono.len(), 5);
        assert_eq!(mono[0], 1.0);
        assert!(
            mono[1..].iter().all(|s| (s - 0.25).abs() < 1e-6),
            "{mono:?}"
        );
    }

    #[test]
    fn errors_tell_what_to_do() {
        let e = DecodeError::NotAudio {
            name: Some("notes.wav".to_owned()),
        };
        assert!(
            e.to_string().starts_with(
                "`notes.wav` is not a recognised audio file (WAV, FLAC, MP3 or OGG/Vorbis)"
            ),
            "{e}"
        );
        let e = DecodeError::TooLarge {
            size: 60,
            limit: 50,
        };
        assert!(e.to_string().contains("60 bytes"), "{e}");
        let e = DecodeError::Unsupported {
            format: "ogg",
            what: "Opus".to_owned(),
        };
        assert!(e.to_string().starts_with("the OGG file uses Opus"), "{e}");
    }

    #[test]
    fn empty_and_oversize_input_are_refused_before_decoding() {
        let limits = Limits {
            max_bytes: 10,
            ..Limits::default()
        };
        assert!(matches!(
            decode(Vec::new(), None, &limits),
            Err(DecodeError::Empty)
        ));
        assert!(matches!(
            decode(vec![0u8; 11], None, &limits),
            Err(DecodeError::TooLarge {
                size: 11,
                limit: 10
            })
        ));
    }
}
