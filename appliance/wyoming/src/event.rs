//! Wyoming's events on the wire, as the `wyoming` 1.x Python package
//! (Home Assistant's) writes and reads them: a JSON header on a line of its
//! own (`type`, optionally `data`, `data_length`, `payload_length`), then
//! `data_length` bytes of JSON merged over the header's `data`, then
//! `payload_length` bytes of payload (PCM audio in `audio-chunk`).
//!
//! The protocol has no framing limits of its own; a peer on the LAN could
//! announce a payload of any size. [`Limits`] bounds each part, and what
//! breaks them, like what is not JSON, is a [`FrameError`] naming the part.

use serde_json::{Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// One event: its type (`describe`, `audio-chunk`, …), its data and its
/// payload (empty when it has none).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    pub kind: String,
    pub data: Map<String, Value>,
    pub payload: Vec<u8>,
}

impl Event {
    pub fn new(kind: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            ..Self::default()
        }
    }

    /// With `data` (a JSON object; anything else is dropped).
    pub fn with_data(mut self, data: Value) -> Self {
        if let Value::Object(map) = data {
            self.data = map;
        }
        self
    }

    pub fn with_payload(mut self, payload: Vec<u8>) -> Self {
        self.payload = payload;
        self
    }
}

/// The most each part of an event may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The header line, without its newline.
    pub header: usize,
    /// The additional data after the header.
    pub data: usize,
    /// The payload.
    pub payload: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header: 64 * 1024,
            data: 1024 * 1024,
            // A second of 48 kHz stereo 32-bit audio is 384 000 bytes;
            // Home Assistant sends chunks of a few kilobytes.
            payload: 1024 * 1024,
        }
    }
}

/// Why an event could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("the event's header line is longer than {limit} bytes")]
    HeaderTooLong { limit: usize },
    #[error("the event's header is not a JSON object: {0}")]
    Header(String),
    #[error("the event's header has no `type` string")]
    NoType,
    #[error("the event's `{field}` is not a byte count (a whole number, 0 or more)")]
    BadLength { field: &'static str },
    #[error("the event's {part} is {length} bytes, over the limit of {limit}")]
    TooLarge {
        part: &'static str,
        length: u64,
        limit: usize,
    },
    #[error("the event's additional data is not a JSON object: {0}")]
    Data(String),
    #[error("the connection ended in the middle of an event")]
    Truncated,
    #[error(transparent)]
    Io(std::io::Error),
}

impl From<std::io::Error> for FrameError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Self::Truncated
        } else {
            Self::Io(e)
        }
    }
}

/// Reads the next event; `None` when the peer closed between events.
/// `line` is scratch space kept between calls. Blank lines between
/// events are skipped.
pub async fn read_event<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limits: &Limits,
    line: &mut Vec<u8>,
) -> Result<Option<Event>, FrameError> {
    loop {
        if !read_line(reader, limits.header, line).await? {
            return Ok(None);
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            break;
        }
    }
    let header: Value =
        serde_json::from_slice(line).map_err(|e| FrameError::Header(e.to_string()))?;
    let Value::Object(mut header) = header else {
        return Err(FrameError::Header("it is not an object".into()));
    };
    let Some(Value::String(kind)) = header.remove("type") else {
        return Err(FrameError::NoType);
    };
    let mut data = match header.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(FrameError::Data(
                "`data` in the header is not an object".into(),
            ));
        }
    };
    let data_length = length(&header, "data_length", "additional data", limits.data)?;
    let payload_length = length(&header, "payload_length", "payload", limits.payload)?;
    if data_length > 0 {
        let mut bytes = vec![0; data_length];
        reader.read_exact(&mut bytes).await?;
        match serde_json::from_slice(&bytes) {
            Ok(Value::Object(more)) => data.extend(more),
            Ok(_) => return Err(FrameError::Data("it is not an object".into())),
            Err(e) => return Err(FrameError::Data(e.to_string())),
        }
    }
    let mut payload = vec![0; payload_length];
    reader.read_exact(&mut payload).await?;
    Ok(Some(Event {
        kind,
        data,
        payload,
    }))
}

/// A header's byte count, checked against its limit.
fn length(
    header: &Map<String, Value>,
    field: &'static str,
    part: &'static str,
    limit: usize,
) -> Result<usize, FrameError> {
    let length = match header.get(field) {
        None | Some(Value::Null) => return Ok(0),
        Some(value) => value.as_u64().ok_or(FrameError::BadLength { field })?,
    };
    if length > limit as u64 {
        return Err(FrameError::TooLarge {
            part,
            length,
            limit,
        });
    }
    Ok(length as usize)
}

/// Reads up to a newline into `line` (without it); false at the end of
/// input before any byte.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    limit: usize,
    line: &mut Vec<u8>,
) -> Result<bool, FrameError> {
    line.clear();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(false)
            } else {
                Err(FrameError::Truncated)
            };
        }
        let (taken, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (at, true),
            None => (buf.len(), false),
        };
        // Checked before copying: a peer that never sends a newline costs
        // at most the limit.
        if line.len() + taken > limit {
            return Err(FrameError::HeaderTooLong { limit });
        }
        line.extend_from_slice(&buf[..taken]);
        reader.consume(taken + usize::from(done));
        if done {
            return Ok(true);
        }
    }
}

/// Writes `event` as the Python package does: the data after the header
/// (`data_length`), then the payload (`payload_length`).
pub async fn write_event<W: AsyncWrite + Unpin>(
    writer: &mut W,
    event: &Event,
) -> std::io::Result<()> {
    let data = if event.data.is_empty() {
        Vec::new()
    } else {
        serde_json::to_vec(&event.data)?
    };
    let mut header = Map::new();
    header.insert("type".into(), Value::String(event.kind.clone()));
    if !data.is_empty() {
        header.insert("data_length".into(), data.len().into());
    }
    if !event.payload.is_empty() {
        header.insert("payload_length".into(), event.payload.len().into());
    }
    let mut bytes = serde_json::to_vec(&header)?;
    bytes.push(b'\n');
    bytes.extend_from_slice(&data);
    bytes.extend_from_slice(&event.payload);
    writer.write_all(&bytes).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::BufReader;

    async fn read_all(bytes: &[u8], limits: Limits) -> Vec<Result<Event, String>> {
        let mut reader = BufReader::with_capacity(7, bytes);
        let mut line = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_event(&mut reader, &limits, &mut line).await {
                Ok(Some(event)) => out.push(Ok(event)),
                Ok(None) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            }
        }
    }

    #[tokio::test]
    async fn events_written_read_back_the_same() {
        let events = [
            Event::new("describe"),
            Event::new("transcribe").with_data(json!({"language": "en", "name": "whisper"})),
            Event::new("audio-chunk")
                .with_data(json!({"rate": 16000, "width": 2, "channels": 1}))
                .with_payload((0..=255).collect()),
            Event::new("synthesize").with_data(json!({"text": "Grüße, ☕\nzwei Zeilen"})),
        ];
        let mut wire = Vec::new();
        for event in &events {
            write_event(&mut wire, event).await.expect("written");
        }
        let read: Vec<Event> = read_all(&wire, Limits::default())
            .await
            .into_iter()
            .map(|e| e.expect("read"))
            .collect();
        assert_eq!(read, events);
    }

    #[tokio::test]
    async fn data_after_the_header_is_merged_over_the_headers_data() {
        let more = br#"{"text": "from the data part", "voice": {"name": "joe"}}"#;
        let wire = [
            format!(
                "{{\"type\": \"synthesize\", \"data\": {{\"text\": \"inline\", \"keep\": 1}}, \"data_length\": {}, \"version\": \"1.10.2\"}}\n",
                more.len()
            )
            .into_bytes(),
            more.to_vec(),
            b"\n{\"type\":\"audio-stop\",\"payload_length\":null}\n".to_vec(),
        ]
        .concat();
        let read = read_all(&wire, Limits::default()).await;
        let event = read[0].as_ref().expect("read");
        assert_eq!(
            Value::Object(event.data.clone()),
            json!({"text": "from the data part", "keep": 1, "voice": {"name": "joe"}})
        );
        // The blank line between events is skipped.
        assert_eq!(read[1].as_ref().expect("read").kind, "audio-stop");
        assert_eq!(read.len(), 2);
    }

    #[tokio::test]
    async fn each_broken_part_is_named() {
        let limits = Limits {
            header: 100,
            data: 50,
            payload: 64,
        };
        let cases: [(&[u8], &str); 9] = [
            (b"not json\n", "header is not a JSON object"),
            (
                b"[1, 2]\n",
                "header is not a JSON object: it is not an object",
            ),
            (b"{\"data\": {}}\n", "no `type`"),
            (
                b"{\"type\": \"x\", \"payload_length\": -4}\n",
                "`payload_length` is not a byte count",
            ),
            (
                b"{\"type\": \"x\", \"payload_length\": 65}\n",
                "payload is 65 bytes, over the limit of 64",
            ),
            (
                b"{\"type\": \"x\", \"data_length\": 51}\n",
                "additional data is 51 bytes, over the limit of 50",
            ),
            (
                b"{\"type\": \"x\", \"data_length\": 3}\n[1]",
                "additional data is not a JSON object",
            ),
            (
                b"{\"type\": \"x\", \"payload_length\": 10}\nabc",
                "ended in the middle of an event",
            ),
            (b"{\"type\": \"x\"", "ended in the middle of an event"),
        ];
        for (wire, expected) in cases {
            let read = read_all(wire, limits).await;
            let error = read.last().and_then(|r| r.as_ref().err());
            assert!(
                error.is_some_and(|e| e.contains(expected)),
                "{:?}: {read:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let long = [vec![b' '; 101], b"{}\n".to_vec()].concat();
        let read = read_all(&long, limits).await;
        assert!(
            matches!(&read[..], [Err(e)] if e.contains("longer than 100 bytes")),
            "{read:?}"
        );
    }

    #[tokio::test]
    async fn the_end_of_input_between_events_is_not_an_error() {
        assert!(read_all(b"", Limits::default()).await.is_empty());
        let read = read_all(b"{\"type\": \"ping\"}\n\n", Limits::default()).await;
        assert_eq!(read.len(), 1, "{read:?}");
    }
}
