//! Audio as Wyoming carries it: `audio-start`, `audio-chunk`s and
//! `audio-stop`, each naming its format (`rate` in Hz, `width` in bytes
//! per sample, `channels`), the chunks' payload little-endian signed PCM
//! with the channels interleaved.
//!
//! What is heard ([`Heard`]) is gathered as mono `f32` at the sender's
//! rate, bounded in length; what is said goes out as 16-bit mono chunks
//! ([`chunks`]).

use serde_json::{Map, Value};

use crate::event::Event;

/// A stream's format, as its events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioFormat {
    /// Samples a second, per channel.
    pub rate: u32,
    /// Bytes a sample: 2 or 4 (signed). 8-bit audio is refused: raw PCM
    /// of one byte is signed to some senders (Python's `audioop`) and
    /// unsigned to others (WAV).
    pub width: u16,
    pub channels: u16,
}

/// The rates Hark takes: telephone to studio.
pub const RATES: std::ops::RangeInclusive<u32> = 8_000..=192_000;
/// The channels Hark takes (mixed down to one).
pub const CHANNELS: std::ops::RangeInclusive<u16> = 1..=8;

/// Why audio could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudioError {
    #[error("`{event}` has no `{field}` (a whole number)")]
    Missing {
        event: &'static str,
        field: &'static str,
    },
    #[error("`rate` {0} is not one Hark takes (8000 to 192000 Hz)")]
    Rate(u64),
    #[error("`width` {0} is not one Hark takes (2 or 4 bytes a sample)")]
    Width(u64),
    #[error("`channels` {0} is not one Hark takes (1 to 8)")]
    Channels(u64),
    #[error(
        "an `audio-chunk` of {rate} Hz, {width} bytes, {channels} channel(s) came in a stream that started as {started}"
    )]
    Changed {
        rate: u32,
        width: u16,
        channels: u16,
        started: String,
    },
    #[error(
        "an `audio-chunk`'s payload of {bytes} bytes is not whole frames of {frame} bytes ({channels} channel(s) of {width} bytes)"
    )]
    Partial {
        bytes: usize,
        frame: usize,
        channels: u16,
        width: u16,
    },
    #[error("the audio is longer than {seconds} s, the most Hark transcribes at once")]
    TooLong { seconds: u32 },
    #[error("an `audio-chunk` came before `audio-start`")]
    NotStarted,
}

impl AudioFormat {
    /// The format `event` (`audio-start` or `audio-chunk`) names.
    pub fn of(event: &Event, name: &'static str) -> Result<Self, AudioError> {
        let field = |field: &'static str| {
            event
                .data
                .get(field)
                .and_then(Value::as_u64)
                .ok_or(AudioError::Missing { event: name, field })
        };
        let (rate, width, channels) = (field("rate")?, field("width")?, field("channels")?);
        let rate = u32::try_from(rate)
            .ok()
            .filter(|r| RATES.contains(r))
            .ok_or(AudioError::Rate(rate))?;
        let width = match width {
            2 | 4 => width as u16,
            _ => return Err(AudioError::Width(width)),
        };
        let channels = u16::try_from(channels)
            .ok()
            .filter(|c| CHANNELS.contains(c))
            .ok_or(AudioError::Channels(channels))?;
        Ok(Self {
            rate,
            width,
            channels,
        })
    }

    fn frame(&self) -> usize {
        usize::from(self.width) * usize::from(self.channels)
    }

    fn describe(&self) -> String {
        format!(
            "{} Hz, {} bytes, {} channel(s)",
            self.rate, self.width, self.channels
        )
    }

    /// The format's fields, for the events Hark sends.
    pub fn data(&self) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("rate".into(), self.rate.into());
        map.insert("width".into(), self.width.into());
        map.insert("channels".into(), self.channels.into());
        map
    }
}

/// One stream of audio being heard: mono samples at the stream's rate.
#[derive(Debug)]
pub struct Heard {
    format: Option<AudioFormat>,
    samples: Vec<f32>,
    max_seconds: u32,
}

impl Heard {
    pub fn new(max_seconds: u32) -> Self {
        Self {
            format: None,
            samples: Vec::new(),
            max_seconds,
        }
    }

    /// `audio-start`: a new stream in `format`; what came before is dropped.
    pub fn start(&mut self, format: AudioFormat) {
        self.format = Some(format);
        self.samples.clear();
    }

    /// Whether a stream has started (and not been taken).
    pub fn started(&self) -> bool {
        self.format.is_some()
    }

    /// `audio-chunk`: its samples, mixed to mono. A chunk may name no
    /// format of its own only if a stream began with `audio-start`.
    pub fn chunk(&mut self, event: &Event) -> Result<(), AudioError> {
        let started = self.format.ok_or(AudioError::NotStarted)?;
        let format = AudioFormat::of(event, "audio-chunk")?;
        if format != started {
            return Err(AudioError::Changed {
                rate: format.rate,
                width: format.width,
                channels: format.channels,
                started: started.describe(),
            });
        }
        let frame = format.frame();
        if !event.payload.len().is_multiple_of(frame) {
            return Err(AudioError::Partial {
                bytes: event.payload.len(),
                frame,
                channels: format.channels,
                width: format.width,
            });
        }
        let frames = event.payload.len() / frame;
        let most = format.rate as usize * self.max_seconds as usize;
        if self.samples.len() + frames > most {
            return Err(AudioError::TooLong {
                seconds: self.max_seconds,
            });
        }
        self.samples.reserve(frames);
        let width = usize::from(format.width);
        for frame in event.payload.chunks_exact(frame) {
            let sum: f32 = frame.chunks_exact(width).map(sample).sum();
            self.samples.push(sum / f32::from(format.channels));
        }
        Ok(())
    }

    /// `audio-stop`: the stream's rate and samples; the next stream starts
    /// afresh.
    /// The stream's rate and the samples heard so far (none before
    /// `audio-start`).
    pub fn so_far(&self) -> (u32, &[f32]) {
        (self.format.map_or(0, |f| f.rate), &self.samples)
    }

    /// The samples heard since the last drain, the stream going on (a wake
    /// word search keeps none of it).
    pub fn drain(&mut self) -> Vec<f32> {
        std::mem::take(&mut self.samples)
    }

    pub fn take(&mut self) -> Option<(u32, Vec<f32>)> {
        let format = self.format.take()?;
        Some((format.rate, std::mem::take(&mut self.samples)))
    }
}

/// One little-endian sample, in −1 to 1.
fn sample(bytes: &[u8]) -> f32 {
    match *bytes {
        [a, b] => f32::from(i16::from_le_bytes([a, b])) / 32_768.0,
        [a, b, c, d] => i32::from_le_bytes([a, b, c, d]) as f32 / 2_147_483_648.0,
        _ => 0.0,
    }
}

/// Samples a chunk Hark sends: as the Wyoming services Home Assistant
/// ships send them.
pub const CHUNK_SAMPLES: usize = 1024;

/// `samples` (−1 to 1) at `rate` as the `audio-chunk`s that carry them:
/// 16-bit mono, [`CHUNK_SAMPLES`] a chunk.
pub fn chunks(rate: u32, samples: &[f32]) -> impl Iterator<Item = Event> + '_ {
    let format = AudioFormat {
        rate,
        width: 2,
        channels: 1,
    };
    samples.chunks(CHUNK_SAMPLES).map(move |chunk| {
        let payload = chunk
            .iter()
            .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32_767.0) as i16).to_le_bytes())
            .collect();
        Event {
            kind: "audio-chunk".into(),
            data: format.data(),
            payload,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(rate: u32, width: u16, channels: u16, payload: Vec<u8>) -> Event {
        Event::new("audio-chunk")
            .with_data(json!({"rate": rate, "width": width, "channels": channels}))
            .with_payload(payload)
    }

    fn format(rate: u32, width: u16, channels: u16) -> AudioFormat {
        AudioFormat {
            rate,
            width,
            channels,
        }
    }

    #[test]
    fn stereo_and_both_widths_mix_down_to_mono() {
        let mut heard = Heard::new(10);
        heard.start(format(16_000, 2, 2));
        // Left full scale down, right silent; then both at a half.
        let payload = [i16::MIN, 0, 16_384, 16_384]
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        heard.chunk(&chunk(16_000, 2, 2, payload)).expect("taken");
        assert_eq!(heard.take(), Some((16_000, vec![-0.5, 0.5])));
        assert!(!heard.started());

        heard.start(format(48_000, 4, 1));
        let payload = [i32::MAX / 2]
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        heard.chunk(&chunk(48_000, 4, 1, payload)).expect("taken");
        let (_, samples) = heard.take().expect("a stream");
        assert!((samples[0] - 0.5).abs() < 1e-6, "{samples:?}");
    }

    #[test]
    fn what_cannot_be_taken_is_named() {
        let mut heard = Heard::new(1);
        assert_eq!(
            heard.chunk(&chunk(16_000, 2, 1, vec![0, 0])),
            Err(AudioError::NotStarted)
        );
        heard.start(format(16_000, 2, 1));
        let error = heard
            .chunk(&chunk(22_050, 2, 1, vec![0, 0]))
            .expect_err("another format");
        assert!(error.to_string().contains("started as 16000 Hz"), "{error}");
        let error = heard
            .chunk(&chunk(16_000, 2, 1, vec![0, 0, 0]))
            .expect_err("half a sample");
        assert!(
            error
                .to_string()
                .contains("3 bytes is not whole frames of 2"),
            "{error}"
        );
        heard
            .chunk(&chunk(16_000, 2, 1, vec![0; 32_000]))
            .expect("a second");
        assert_eq!(
            heard.chunk(&chunk(16_000, 2, 1, vec![0, 0])),
            Err(AudioError::TooLong { seconds: 1 })
        );
        let cases = [
            (
                json!({"rate": 16000, "width": 3, "channels": 1}),
                AudioError::Width(3),
            ),
            (
                json!({"rate": 8000, "width": 1, "channels": 1}),
                AudioError::Width(1),
            ),
            (
                json!({"rate": 4000, "width": 2, "channels": 1}),
                AudioError::Rate(4000),
            ),
            (
                json!({"rate": 16000, "width": 2, "channels": 0}),
                AudioError::Channels(0),
            ),
            (
                json!({"rate": 16000, "width": 2}),
                AudioError::Missing {
                    event: "audio-start",
                    field: "channels",
                },
            ),
        ];
        for (data, error) in cases {
            let event = Event::new("audio-start").with_data(data);
            assert_eq!(AudioFormat::of(&event, "audio-start"), Err(error));
        }
    }

    #[test]
    fn speech_goes_out_in_16_bit_chunks_that_read_back() {
        let samples: Vec<f32> = (0..2500)
            .map(|i| ((i % 100) as f32 - 50.0) / 50.0)
            .collect();
        let events: Vec<Event> = chunks(22_050, &samples).collect();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0].payload.len(), CHUNK_SAMPLES * 2);
        assert_eq!(events[2].payload.len(), (2500 - 2 * CHUNK_SAMPLES) * 2);
        let mut heard = Heard::new(10);
        heard.start(format(22_050, 2, 1));
        for event in &events {
            heard.chunk(event).expect("taken");
        }
        let (rate, back) = heard.take().expect("a stream");
        assert_eq!(rate, 22_050);
        assert_eq!(back.len(), samples.len());
        assert!(
            back.iter().zip(&samples).all(|(a, b)| (a - b).abs() < 1e-3),
            "what was sent reads back"
        );
    }
}
