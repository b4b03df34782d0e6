//! One client's connection: events read in order and answered in order.
//!
//! - `describe` → `info` (what is on offer now).
//! - `transcribe` (its `language` kept), then `audio-start`,
//!   `audio-chunk`s and `audio-stop` → `transcript` (`text`, `language`),
//!   streamed: `transcript-start` as the audio begins, a `transcript-chunk`
//!   for each word the live engine's drafts agree on while the audio
//!   comes, the rest of the final text as a last chunk, the `transcript`
//!   (the final text, whole: what counts) and `transcript-stop`.
//! - `synthesize` → `audio-start`, `audio-chunk`s, `audio-stop`.
//! - `synthesize-start`, `synthesize-chunk`s, `synthesize-stop`: each
//!   sentence as it is complete → `audio-start`, `audio-chunk`s,
//!   `audio-stop`; then `synthesize-stopped`. A `synthesize` sent inside
//!   such a stream repeats its text for older servers and is not spoken
//!   twice.
//! - `detect` (its `names` kept), then `audio-start` (16 kHz), chunks and
//!   `audio-stop`: each wake word heard → `detection` (`name`,
//!   `timestamp`: milliseconds into the stream) as the audio comes; none
//!   by the end → `not-detected`. Nothing of the stream is kept.
//! - `ping` → `pong`.
//!
//! A request that cannot be served is answered with an `error` event
//! (`text`, `code`) and the connection goes on; events of other types are
//! dropped, as the protocol asks. Only a broken frame ends the connection,
//! after an `error` saying what was wrong.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use hark_core::room::{Failure, Kind, Pcm, PcmSpeech, PcmSpotter, SPOTTER_RATE};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncWrite};

use crate::{
    audio::{self, AudioError, AudioFormat, Heard},
    event::{Event, FrameError, Limits, read_event, write_event},
    info::info,
};

/// How a session is bounded.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub limits: Limits,
    /// The longest audio transcribed at once.
    pub max_seconds: u32,
    /// The most text a stream of `synthesize-chunk`s may hold unspoken.
    pub max_text: usize,
    /// How long the client may send nothing before the connection closes.
    pub idle: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            max_seconds: 120,
            max_text: 16 * 1024,
            idle: Duration::from_secs(60),
        }
    }
}

/// Why a session ended early.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("cannot write to the client: {0}")]
    Write(#[from] std::io::Error),
}

/// A text stream being spoken sentence by sentence.
#[derive(Debug, Default)]
struct Stream {
    voice: Option<String>,
    text: String,
}

/// Seconds of new audio before the next draft.
const DRAFT_EVERY: f64 = 1.0;
/// Drafts stop past this much audio: each reads all of it, and a command
/// to Home Assistant is short; the final text still comes.
const DRAFT_MOST: f64 = 30.0;

/// The drafts of a stream being transcribed: its words sent as they come.
#[derive(Default)]
struct Drafting {
    /// The draft running now.
    running: Option<tokio::task::JoinHandle<Result<Option<String>, Failure>>>,
    /// Samples heard when the last draft began.
    drafted: usize,
    /// The last draft's words.
    last: Vec<String>,
    /// The words sent, each agreed on by two drafts in a row.
    sent: Vec<String>,
    /// `transcript-start` was sent.
    started: bool,
}

impl Drafting {
    /// Takes in a draft's text: the words that became agreed, to send.
    fn agree(&mut self, text: &str) -> Option<String> {
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        let agreed = words
            .iter()
            .zip(&self.last)
            .take_while(|(a, b)| same_word(a, b))
            .count();
        self.last = words;
        if agreed <= self.sent.len() {
            return None;
        }
        let new = self.last[self.sent.len()..agreed].to_vec();
        let chunk = join_after(&self.sent, &new);
        self.sent.extend(new);
        Some(chunk)
    }

    /// What the final text adds to the words sent: all of it past them
    /// when it begins with them, nothing more when the drafts went wrong
    /// (the `transcript` that follows has it right).
    fn rest(&self, text: &str) -> Option<String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let begins = words.len() >= self.sent.len()
            && words.iter().zip(&self.sent).all(|(a, b)| same_word(a, b));
        if !begins || words.len() == self.sent.len() {
            return None;
        }
        let new: Vec<String> = words[self.sent.len()..]
            .iter()
            .map(|w| (*w).to_owned())
            .collect();
        Some(join_after(&self.sent, &new))
    }
}

impl Drop for Drafting {
    /// A draft nobody will read stops with the stream (its engine request
    /// is abandoned).
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.abort();
        }
    }
}

/// Words compared as said: case and punctuation aside.
fn same_word(a: &str, b: &str) -> bool {
    let plain = |w: &str| {
        w.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    plain(a) == plain(b)
}

/// `new` as the chunk that follows `sent`: a space between them.
fn join_after(sent: &[String], new: &[String]) -> String {
    let text = new.join(" ");
    if sent.is_empty() {
        text
    } else {
        format!(" {text}")
    }
}

/// A stream being searched for a wake word (after `detect`).
struct Detecting {
    /// The words asked for (`None`: any installed).
    names: Option<Vec<String>>,
    /// Loaded at `audio-start`; lent to a blocking thread for each chunk.
    spotter: Option<Box<dyn PcmSpotter>>,
    /// A word was heard in this stream.
    spotted: bool,
}

struct Session<W> {
    services: Arc<dyn PcmSpeech>,
    settings: Settings,
    writer: W,
    heard: Heard,
    language: Option<String>,
    stream: Option<Stream>,
    detect: Option<Detecting>,
    drafting: Drafting,
}

/// Serves one connection until the client closes it or stays silent past
/// `settings.idle` (`Ok`), or sends what is not a Wyoming event. `spoke`
/// is set once a whole event has come (the connection is in use, not
/// merely open).
pub async fn serve<R, W>(
    mut reader: R,
    writer: W,
    services: Arc<dyn PcmSpeech>,
    settings: Settings,
    spoke: &AtomicBool,
) -> Result<(), SessionError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut session = Session {
        services,
        settings,
        writer,
        heard: Heard::new(settings.max_seconds),
        language: None,
        stream: None,
        detect: None,
        drafting: Drafting::default(),
    };
    let mut line = Vec::new();
    loop {
        let next = read_event(&mut reader, &settings.limits, &mut line);
        let event = match tokio::time::timeout(settings.idle, next).await {
            Err(_) => {
                tracing::debug!(idle = ?settings.idle, "closing a silent Wyoming connection");
                return Ok(());
            }
            Ok(Ok(Some(event))) => event,
            Ok(Ok(None)) => return Ok(()),
            Ok(Err(e)) => {
                // Said before closing, so the client's log shows why.
                let _ = session.error("BadEvent", &e.to_string()).await;
                return Err(e.into());
            }
        };
        spoke.store(true, Ordering::Relaxed);
        session.handle(event).await?;
    }
}

impl<W: AsyncWrite + Unpin> Session<W> {
    async fn send(&mut self, event: &Event) -> std::io::Result<()> {
        write_event(&mut self.writer, event).await
    }

    async fn error(&mut self, code: &str, text: &str) -> std::io::Result<()> {
        self.send(&Event::new("error").with_data(json!({"text": text, "code": code})))
            .await
    }

    async fn failed(&mut self, failure: &Failure) -> std::io::Result<()> {
        self.error(failure.kind.name(), &failure.message).await
    }

    async fn refused(&mut self, error: &AudioError) -> std::io::Result<()> {
        self.error("AudioFormatError", &error.to_string()).await
    }

    async fn handle(&mut self, event: Event) -> std::io::Result<()> {
        match event.kind.as_str() {
            "describe" => match self.services.offer().await {
                Ok(offer) => self.send(&info(&offer)).await,
                Err(failure) => self.failed(&failure).await,
            },
            "ping" => self.send(&Event::new("pong").with_data(json!({}))).await,
            "transcribe" => {
                self.language = text_field(&event.data, "language");
                self.detect = None;
                Ok(())
            }
            "detect" => {
                let names = event.data.get("names").and_then(Value::as_array).map(|n| {
                    n.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                });
                self.detect = Some(Detecting {
                    names,
                    spotter: None,
                    spotted: false,
                });
                Ok(())
            }
            "audio-start" => match AudioFormat::of(&event, "audio-start") {
                Ok(format) if self.detect.is_some() => self.start_detecting(format).await,
                Ok(format) => {
                    // A stream left without its end is ended first.
                    if std::mem::take(&mut self.drafting).started {
                        self.send(&Event::new("transcript-stop")).await?;
                    }
                    self.heard.start(format);
                    // Said as the audio begins: a client waiting for words
                    // knows they will come.
                    self.start_transcript(self.language.clone()).await
                }
                Err(e) => self.refused(&e).await,
            },
            "audio-chunk" => match self.heard.chunk(&event) {
                Ok(()) if self.detect.is_some() => self.detect_in_chunk().await,
                Ok(()) => self.draft().await,
                Err(AudioError::NotStarted) => Ok(()),
                Err(e) => {
                    // The rest of this stream would be heard with a gap or
                    // in the wrong format: none of it is transcribed.
                    self.heard.take();
                    self.detect = None;
                    let streamed = std::mem::take(&mut self.drafting).started;
                    self.refused(&e).await?;
                    if streamed {
                        self.send(&Event::new("transcript-stop")).await?;
                    }
                    Ok(())
                }
            },
            "audio-stop" if self.detect.is_some() => {
                self.heard.take();
                match self.detect.take() {
                    Some(detecting) if detecting.spotter.is_some() && !detecting.spotted => {
                        self.send(&Event::new("not-detected")).await
                    }
                    _ => Ok(()),
                }
            }
            "audio-stop" => self.transcribe().await,
            "synthesize" if self.stream.is_some() => Ok(()),
            "synthesize" => {
                let Some(text) = text_field(&event.data, "text") else {
                    return self
                        .error("InvalidArgumentError", "`synthesize` has no `text`")
                        .await;
                };
                self.speak(text, voice(&event.data)).await
            }
            "synthesize-start" => {
                self.stream = Some(Stream {
                    voice: voice(&event.data),
                    text: String::new(),
                });
                Ok(())
            }
            "synthesize-chunk" => self.stream_chunk(&event).await,
            "synthesize-stop" => {
                let Some(stream) = self.stream.take() else {
                    return Ok(());
                };
                if !stream.text.trim().is_empty() {
                    self.speak(stream.text, stream.voice).await?;
                }
                self.send(&Event::new("synthesize-stopped")).await
            }
            _ => Ok(()),
        }
    }

    /// A `detect`'s stream begins: its detector is loaded, or the client
    /// is told why there is none (and the stream is ignored).
    async fn start_detecting(&mut self, format: AudioFormat) -> std::io::Result<()> {
        let Some(detecting) = self.detect.as_mut() else {
            return Ok(());
        };
        if format.rate != SPOTTER_RATE {
            self.detect = None;
            return self
                .error(
                    "AudioFormatError",
                    &format!(
                        "wake word detection takes {SPOTTER_RATE} Hz audio; this stream is {} Hz",
                        format.rate
                    ),
                )
                .await;
        }
        match self.services.spotter(detecting.names.clone()).await {
            Ok(spotter) => {
                detecting.spotter = Some(spotter);
                detecting.spotted = false;
                self.heard.start(format);
                Ok(())
            }
            Err(failure) => {
                self.detect = None;
                self.failed(&failure).await
            }
        }
    }

    /// The chunk just heard, searched for the wake word; nothing of it is
    /// kept.
    async fn detect_in_chunk(&mut self) -> std::io::Result<()> {
        let samples = self.heard.drain();
        let Some(mut spotter) = self.detect.as_mut().and_then(|d| d.spotter.take()) else {
            return Ok(());
        };
        // The models run on a blocking thread; the session waits for them,
        // so the client's next chunk waits in the socket (bounded).
        let fed = tokio::task::spawn_blocking(move || {
            let result = spotter.feed(&samples);
            (spotter, result)
        })
        .await;
        let (spotter, result) = match fed {
            Ok(fed) => fed,
            Err(e) => {
                self.detect = None;
                self.heard.take();
                let failure = Failure::new(
                    Kind::WakeWord,
                    format!("the wake word detector stopped: {e}"),
                );
                return self.failed(&failure).await;
            }
        };
        match result {
            Ok(spotted) => {
                let Some(detecting) = self.detect.as_mut() else {
                    return Ok(());
                };
                detecting.spotter = Some(spotter);
                let Some(spotted) = spotted else {
                    return Ok(());
                };
                detecting.spotted = true;
                let timestamp = spotted.at * 1000 / u64::from(SPOTTER_RATE);
                self.send(
                    &Event::new("detection")
                        .with_data(json!({"name": spotted.name, "timestamp": timestamp})),
                )
                .await
            }
            Err(failure) => {
                self.detect = None;
                self.heard.take();
                self.failed(&failure).await
            }
        }
    }

    /// The draft that finished, sent as far as it is agreed; the next one
    /// begun once a second more is heard. Nothing here waits for a draft.
    async fn draft(&mut self) -> std::io::Result<()> {
        if let Some(running) = self.drafting.running.take_if(|r| r.is_finished()) {
            let text = match running.await {
                Ok(Ok(text)) => text,
                // A draft is a courtesy: the final text still comes.
                Ok(Err(failure)) => {
                    tracing::debug!(%failure, "a Wyoming draft failed");
                    None
                }
                Err(_) => None,
            };
            if let Some(chunk) = text.and_then(|text| self.drafting.agree(&text)) {
                self.send(&Event::new("transcript-chunk").with_data(json!({"text": chunk})))
                    .await?;
            }
        }
        let (rate, samples) = self.heard.so_far();
        let seconds = |n: usize| n as f64 / f64::from(rate.max(1));
        if self.drafting.running.is_some()
            || seconds(samples.len() - self.drafting.drafted) < DRAFT_EVERY
            || seconds(samples.len()) > DRAFT_MOST
        {
            return Ok(());
        }
        self.drafting.drafted = samples.len();
        let audio = Pcm {
            rate,
            samples: samples.to_vec(),
        };
        let (services, language) = (Arc::clone(&self.services), self.language.clone());
        self.drafting.running = Some(tokio::spawn(async move {
            services.draft_pcm(audio, language).await
        }));
        Ok(())
    }

    /// `transcript-start`, once a stream.
    async fn start_transcript(&mut self, language: Option<String>) -> std::io::Result<()> {
        if self.drafting.started {
            return Ok(());
        }
        self.drafting.started = true;
        self.send(&Event::new("transcript-start").with_data(json!({"language": language})))
            .await
    }

    async fn transcribe(&mut self) -> std::io::Result<()> {
        let Some((rate, samples)) = self.heard.take() else {
            return Ok(());
        };
        // The draft still running is dropped, and stops.
        if let Some(running) = self.drafting.running.take() {
            running.abort();
        }
        let language = self.language.take();
        match self
            .services
            .transcribe_pcm(Pcm { rate, samples }, language.clone())
            .await
        {
            Ok(heard) => {
                self.start_transcript(language).await?;
                let drafting = std::mem::take(&mut self.drafting);
                if let Some(rest) = drafting.rest(&heard.text) {
                    self.send(&Event::new("transcript-chunk").with_data(json!({"text": rest})))
                        .await?;
                }
                self.send(
                    &Event::new("transcript")
                        .with_data(json!({"text": heard.text, "language": heard.language})),
                )
                .await?;
                self.send(&Event::new("transcript-stop")).await
            }
            Err(failure) => {
                self.failed(&failure).await?;
                if std::mem::take(&mut self.drafting).started {
                    self.send(&Event::new("transcript-stop")).await?;
                }
                Ok(())
            }
        }
    }

    async fn stream_chunk(&mut self, event: &Event) -> std::io::Result<()> {
        let Some(stream) = self.stream.as_mut() else {
            return Ok(());
        };
        let Some(text) = text_field(&event.data, "text") else {
            return Ok(());
        };
        if stream.text.len() + text.len() > self.settings.max_text {
            let limit = self.settings.max_text;
            self.stream = None;
            return self
                .error(
                    "InvalidArgumentError",
                    &format!(
                        "the text stream holds more than {limit} bytes without the end of a sentence"
                    ),
                )
                .await;
        }
        stream.text.push_str(&text);
        let done = complete(&stream.text);
        if done == 0 {
            return Ok(());
        }
        let rest = stream.text.split_off(done);
        let sentences = std::mem::replace(&mut stream.text, rest);
        let voice = stream.voice.clone();
        self.speak(sentences, voice).await
    }

    /// `text` spoken as one audio stream, a sentence at a time: the
    /// `audio-start` and the first sentence's chunks as soon as it is made
    /// (a long answer starts playing while the rest is made), each next
    /// sentence's chunks as it is made, then `audio-stop`.
    async fn speak(&mut self, text: String, voice: Option<String>) -> std::io::Result<()> {
        let mut rate: Option<u32> = None;
        for sentence in sentences(&text) {
            let spoken = match self.services.synthesize_pcm(sentence, voice.clone()).await {
                Ok(spoken) => spoken,
                Err(failure) => {
                    // What was sent stays a whole stream.
                    if rate.is_some() {
                        self.send(&Event::new("audio-stop")).await?;
                    }
                    return self.failed(&failure).await;
                }
            };
            if rate != Some(spoken.audio.rate) {
                // Only a voice that changed mid-text (a fallback) changes
                // the rate: a new stream says so.
                if rate.is_some() {
                    self.send(&Event::new("audio-stop")).await?;
                }
                let format = AudioFormat {
                    rate: spoken.audio.rate,
                    width: 2,
                    channels: 1,
                };
                self.send(&Event {
                    kind: "audio-start".into(),
                    data: format.data(),
                    payload: Vec::new(),
                })
                .await?;
                rate = Some(spoken.audio.rate);
            }
            for chunk in audio::chunks(spoken.audio.rate, &spoken.audio.samples) {
                self.send(&chunk).await?;
            }
        }
        if rate.is_some() {
            self.send(&Event::new("audio-stop")).await?;
        }
        Ok(())
    }
}

/// A string field of an event's data.
fn text_field(data: &serde_json::Map<String, Value>, field: &str) -> Option<String> {
    data.get(field).and_then(Value::as_str).map(str::to_owned)
}

/// The voice a `synthesize` asks for: `voice.name`.
fn voice(data: &serde_json::Map<String, Value>) -> Option<String> {
    data.get("voice")
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// `text`'s sentences, each trimmed (the whole text when none is left,
/// so that what cannot be said is refused as it is).
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(end) = first_end(rest) {
        let (sentence, after) = rest.split_at(end);
        if !sentence.trim().is_empty() {
            out.push(sentence.trim().to_owned());
        }
        rest = after;
    }
    if !rest.trim().is_empty() {
        out.push(rest.trim().to_owned());
    }
    if out.is_empty() {
        out.push(text.to_owned());
    }
    out
}

/// The end of `text`'s first sentence (after the space or line break that
/// follows it), by the rule of [`complete`].
fn first_end(text: &str) -> Option<usize> {
    let mut previous: Option<char> = None;
    for (at, c) in text.char_indices() {
        if ends_sentence(previous, c) {
            return Some(at + c.len_utf8());
        }
        previous = Some(c);
    }
    None
}

/// `c` after `previous` closes a sentence: a line break, or white space
/// after a stop.
fn ends_sentence(previous: Option<char>, c: char) -> bool {
    let stop = matches!(previous, Some('.' | '!' | '?' | '…' | '。' | '！' | '？'));
    c == '\n' || (c.is_whitespace() && stop)
}

/// Bytes of `text` that are whole sentences: up to the last sentence end
/// (`.`, `!`, `?`, `…` and their full-width forms) followed by white space,
/// or the last line break.
fn complete(text: &str) -> usize {
    let mut done = 0;
    let mut previous: Option<char> = None;
    for (at, c) in text.char_indices() {
        if ends_sentence(previous, c) {
            done = at + c.len_utf8();
        }
        previous = Some(c);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Counting;
    use tokio::io::{AsyncWriteExt, BufReader};

    /// Sends `events` (then closes), and reads every event answered.
    async fn exchange(events: &[Event]) -> (Vec<Event>, Result<(), SessionError>) {
        let mut wire = Vec::new();
        for event in events {
            write_event(&mut wire, event).await.expect("written");
        }
        exchange_bytes(wire).await
    }

    async fn exchange_bytes(wire: Vec<u8>) -> (Vec<Event>, Result<(), SessionError>) {
        exchange_with(vec![wire], Settings::default(), Duration::ZERO).await
    }

    /// Sends each of `pieces`, pausing `pause` after each (a microphone's
    /// pace), then closes; reads every event answered.
    async fn exchange_with(
        pieces: Vec<Vec<u8>>,
        settings: Settings,
        pause: Duration,
    ) -> (Vec<Event>, Result<(), SessionError>) {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server);
        let served = tokio::spawn(async move {
            let spoke = AtomicBool::new(false);
            serve(
                BufReader::new(server_read),
                server_write,
                Arc::new(Counting),
                settings,
                &spoke,
            )
            .await
        });
        let (client_read, mut client_write) = tokio::io::split(client);
        for piece in pieces {
            client_write.write_all(&piece).await.expect("sent");
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
        }
        client_write.shutdown().await.expect("closed");
        let result = served.await.expect("the session ran");
        let mut reader = BufReader::new(client_read);
        let mut line = Vec::new();
        let mut answers = Vec::new();
        while let Ok(Some(event)) = read_event(&mut reader, &Limits::default(), &mut line).await {
            answers.push(event);
        }
        (answers, result)
    }

    fn kinds(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.kind.as_str()).collect()
    }

    fn chunk(samples: usize) -> Event {
        Event::new("audio-chunk")
            .with_data(json!({"rate": 16000, "width": 2, "channels": 1}))
            .with_payload(vec![0; samples * 2])
    }

    #[tokio::test]
    async fn audio_between_start_and_stop_is_transcribed_in_the_language_asked() {
        let format = json!({"rate": 16000, "width": 2, "channels": 1});
        let (answers, result) = exchange(&[
            Event::new("transcribe").with_data(json!({"language": "de"})),
            Event::new("audio-start").with_data(format.clone()),
            chunk(1000),
            chunk(600),
            Event::new("audio-stop"),
            // A second request on the same connection, no language named.
            Event::new("transcribe"),
            Event::new("audio-start").with_data(format),
            chunk(10),
            Event::new("audio-stop"),
        ])
        .await;
        result.expect("the client closed");
        let transcripts: Vec<&Event> = answers.iter().filter(|e| e.kind == "transcript").collect();
        assert_eq!(transcripts.len(), 2, "{:?}", kinds(&answers));
        assert_eq!(transcripts[0].data["text"], "1600 samples at 16000 Hz");
        assert_eq!(transcripts[0].data["language"], "de");
        assert_eq!(transcripts[1].data["text"], "10 samples at 16000 Hz");
        assert_eq!(transcripts[1].data["language"], "en");
        // Each streamed too (under a second: no drafts, the whole text in
        // one chunk), for clients that read streams.
        let stream = [
            "transcript-start",
            "transcript-chunk",
            "transcript",
            "transcript-stop",
        ];
        assert_eq!(kinds(&answers), [stream, stream].concat());
        assert_eq!(answers[0].data["language"], "de");
        assert_eq!(answers[1].data["text"], "1600 samples at 16000 Hz");
    }

    #[tokio::test]
    async fn a_transcript_streams_the_words_drafts_agree_on_while_the_audio_comes() {
        let mut events = vec![
            Event::new("transcribe"),
            Event::new("audio-start").with_data(json!({"rate": 16000, "width": 2, "channels": 1})),
        ];
        // Four seconds, as a microphone sends them: a chunk at a time.
        events.extend((0..40).map(|_| chunk(1600)));
        events.push(Event::new("audio-stop"));
        let mut pieces = Vec::new();
        for event in &events {
            let mut wire = Vec::new();
            write_event(&mut wire, event).await.expect("written");
            pieces.push(wire);
        }
        let (answers, result) =
            exchange_with(pieces, Settings::default(), Duration::from_millis(2)).await;
        result.expect("the client closed");
        // Drafts at 1, 2 and 3 s read "Turn", "Turn the", "Turn the
        // kitchen": two in a row agree on "Turn", then on "the".
        assert_eq!(
            kinds(&answers),
            [
                "transcript-start",
                "transcript-chunk",
                "transcript-chunk",
                "transcript",
                "transcript-stop"
            ]
        );
        assert_eq!(answers[1].data["text"], "Turn");
        assert_eq!(answers[2].data["text"], " the");
        // The final text is whole, whatever the drafts said.
        assert_eq!(answers[3].data["text"], "64000 samples at 16000 Hz");
    }

    #[test]
    fn drafts_send_only_agreed_words_and_the_final_text_the_rest() {
        let mut d = Drafting::default();
        assert_eq!(d.agree("Turn the"), None);
        assert_eq!(d.agree("turn the kitch"), Some("turn the".into()));
        // A draft that takes a word back sends nothing.
        assert_eq!(d.agree("Turn a kitchen"), None);
        assert_eq!(d.agree("Turn the kitchen lights"), None);
        assert_eq!(
            d.agree("Turn the kitchen lights off"),
            Some(" kitchen lights".into())
        );
        assert_eq!(d.rest("Turn the kitchen lights off."), Some(" off.".into()));
        assert_eq!(d.rest("Turn the kitchen lights"), None);
        // The final text went another way: the transcript carries it.
        assert_eq!(d.rest("Turn on the kitchen lights"), None);
        assert_eq!(Drafting::default().rest("Hello."), Some("Hello.".into()));
        assert_eq!(Drafting::default().rest(""), None);
    }

    #[tokio::test]
    async fn synthesis_comes_back_as_one_audio_stream() {
        let (answers, result) = exchange(&[
            Event::new("synthesize")
                .with_data(json!({"text": "Hello there.", "voice": {"name": "amy"}})),
            Event::new("ping"),
        ])
        .await;
        result.expect("the client closed");
        assert_eq!(
            kinds(&answers),
            ["audio-start", "audio-chunk", "audio-stop", "pong"]
        );
        assert_eq!(answers[0].data["rate"], 22_050);
        assert_eq!(answers[1].payload.len(), "Hello there.".len() * 2);
    }

    #[tokio::test]
    async fn a_long_text_is_one_stream_made_a_sentence_at_a_time() {
        let (answers, result) = exchange(&[
            Event::new("synthesize")
                .with_data(json!({"text": "It is ten. The oven is hot!\nDone"})),
            // A sentence that cannot be said ends what was sent as a whole
            // stream, then says why.
            Event::new("synthesize").with_data(json!({"text": "Fine. Then fail."})),
        ])
        .await;
        result.expect("the client closed");
        assert_eq!(
            kinds(&answers),
            [
                "audio-start",
                "audio-chunk",
                "audio-chunk",
                "audio-chunk",
                "audio-stop",
                "audio-start",
                "audio-chunk",
                "audio-stop",
                "error",
            ]
        );
        let sizes: Vec<usize> = answers[1..4].iter().map(|e| e.payload.len() / 2).collect();
        assert_eq!(
            sizes,
            ["It is ten.".len(), "The oven is hot!".len(), "Done".len()]
        );
        assert_eq!(answers[8].data["code"], "SpeechError");
    }

    #[test]
    fn a_text_is_cut_into_trimmed_sentences() {
        assert_eq!(sentences("One. Two?  Three"), ["One.", "Two?", "Three"]);
        assert_eq!(sentences("3.50 euros. Yes"), ["3.50 euros.", "Yes"]);
        assert_eq!(sentences("a\n\nb"), ["a", "b"]);
        // Nothing to say is handed on as it is, to be refused.
        assert_eq!(sentences("  "), ["  "]);
    }

    #[tokio::test]
    async fn a_text_stream_is_spoken_sentence_by_sentence_and_its_repeat_ignored() {
        let chunk = |text: &str| Event::new("synthesize-chunk").with_data(json!({"text": text}));
        let (answers, result) = exchange(&[
            Event::new("synthesize-start"),
            chunk("The oven is"),
            chunk(" hot. The bread"),
            chunk(" is done"),
            // What Home Assistant also sends, for servers without streams.
            Event::new("synthesize")
                .with_data(json!({"text": "The oven is hot. The bread is done"})),
            Event::new("synthesize-stop"),
        ])
        .await;
        result.expect("the client closed");
        assert_eq!(
            kinds(&answers),
            [
                "audio-start",
                "audio-chunk",
                "audio-stop", // "The oven is hot. "
                "audio-start",
                "audio-chunk",
                "audio-stop", // "The bread is done"
                "synthesize-stopped",
            ]
        );
        assert_eq!(answers[1].payload.len(), "The oven is hot.".len() * 2);
        assert_eq!(answers[4].payload.len(), "The bread is done".len() * 2);
    }

    #[tokio::test]
    async fn what_cannot_be_done_is_an_error_and_the_connection_goes_on() {
        let (answers, result) = exchange(&[
            Event::new("synthesize"),
            Event::new("synthesize").with_data(json!({"text": "please fail"})),
            Event::new("audio-start").with_data(json!({"rate": 16000, "width": 3, "channels": 1})),
            Event::new("audio-start").with_data(json!({"rate": 16000, "width": 2, "channels": 1})),
            Event::new("audio-chunk")
                .with_data(json!({"rate": 16000, "width": 2, "channels": 1}))
                .with_payload(vec![0; 3]),
            // Dropped with the broken stream: nothing to transcribe.
            Event::new("audio-stop"),
            Event::new("no-such-event"),
            Event::new("ping"),
        ])
        .await;
        result.expect("the client closed");
        // The broken stream began as a transcript, and ends as one.
        assert_eq!(
            kinds(&answers),
            [
                "error",
                "error",
                "error",
                "transcript-start",
                "error",
                "transcript-stop",
                "pong"
            ]
        );
        assert_eq!(answers[0].data["text"], "`synthesize` has no `text`");
        assert_eq!(answers[1].data["code"], "SpeechError");
        assert!(
            answers[2].data["text"]
                .as_str()
                .is_some_and(|t| t.contains("`width` 3"))
        );
        assert!(
            answers[4].data["text"]
                .as_str()
                .is_some_and(|t| t.contains("not whole frames"))
        );
    }

    fn loud_chunk(samples: usize, loud_at: usize) -> Event {
        let mut payload = vec![0; samples * 2];
        payload[loud_at * 2..loud_at * 2 + 2].copy_from_slice(&30_000i16.to_le_bytes());
        chunk(0).with_payload(payload)
    }

    #[tokio::test]
    async fn a_wake_word_is_detected_as_the_stream_comes_and_its_absence_said_at_the_end() {
        let format = json!({"rate": 16000, "width": 2, "channels": 1});
        let (answers, result) = exchange(&[
            Event::new("detect").with_data(json!({"names": ["loud"]})),
            Event::new("audio-start").with_data(format.clone()),
            chunk(16_000),
            loud_chunk(1600, 799),
            Event::new("ping"),
            Event::new("audio-stop"),
            // Any word, heard nowhere in this stream.
            Event::new("detect"),
            Event::new("audio-start").with_data(format.clone()),
            chunk(1600),
            Event::new("audio-stop"),
            // A word that never sounds, in a loud stream.
            Event::new("detect").with_data(json!({"names": ["quiet"]})),
            Event::new("audio-start").with_data(format),
            loud_chunk(1600, 0),
            Event::new("audio-stop"),
        ])
        .await;
        result.expect("the client closed");
        assert_eq!(
            kinds(&answers),
            ["detection", "pong", "not-detected", "not-detected"]
        );
        assert_eq!(answers[0].data["name"], "loud");
        // 16 000 + 800 samples in: 1.05 s.
        assert_eq!(answers[0].data["timestamp"], 1050);
    }

    #[tokio::test]
    async fn a_wake_word_search_keeps_nothing_and_runs_past_the_transcription_limit() {
        let settings = Settings {
            max_seconds: 1,
            ..Settings::default()
        };
        let mut wire = Vec::new();
        let format = json!({"rate": 16000, "width": 2, "channels": 1});
        let mut events = vec![
            Event::new("detect"),
            Event::new("audio-start").with_data(format.clone()),
        ];
        // Five seconds, where one may be transcribed.
        events.extend((0..50).map(|_| chunk(1600)));
        events.push(loud_chunk(1600, 0));
        events.push(Event::new("audio-stop"));
        // Transcription after it still holds to its limit.
        events.push(Event::new("transcribe"));
        events.push(Event::new("audio-start").with_data(format));
        events.extend((0..11).map(|_| chunk(1600)));
        events.push(Event::new("audio-stop"));
        for event in &events {
            write_event(&mut wire, event).await.expect("written");
        }
        let (answers, result) = exchange_with(vec![wire], settings, Duration::ZERO).await;
        result.expect("the client closed");
        assert_eq!(
            kinds(&answers),
            ["detection", "transcript-start", "error", "transcript-stop"]
        );
        assert_eq!(answers[0].data["timestamp"], 5000);
        assert!(
            answers[2].data["text"]
                .as_str()
                .is_some_and(|t| t.contains("longer than 1 s")),
            "{:?}",
            answers[2].data
        );
    }

    #[tokio::test]
    async fn a_wake_word_that_cannot_be_searched_for_is_an_error_and_its_stream_ignored() {
        let (answers, result) = exchange(&[
            Event::new("detect").with_data(json!({"names": ["nope"]})),
            Event::new("audio-start").with_data(json!({"rate": 16000, "width": 2, "channels": 1})),
            loud_chunk(1600, 0),
            Event::new("audio-stop"),
            Event::new("detect"),
            Event::new("audio-start").with_data(json!({"rate": 22050, "width": 2, "channels": 1})),
            Event::new("audio-chunk")
                .with_data(json!({"rate": 22050, "width": 2, "channels": 1}))
                .with_payload(vec![0xff; 64]),
            Event::new("audio-stop"),
        ])
        .await;
        result.expect("the client closed");
        // The streams after the errors are not transcribed either.
        assert_eq!(kinds(&answers), ["error", "error"]);
        assert_eq!(answers[0].data["code"], "WakeWordError");
        assert!(
            answers[0].data["text"]
                .as_str()
                .is_some_and(|t| t.contains("`nope`"))
        );
        assert_eq!(answers[1].data["code"], "AudioFormatError");
        assert!(
            answers[1].data["text"]
                .as_str()
                .is_some_and(|t| t.contains("22050 Hz"))
        );
    }

    #[tokio::test]
    async fn a_broken_frame_is_named_before_the_connection_closes() {
        let (answers, result) =
            exchange_bytes(b"{\"type\": \"ping\"}\nnot an event\n".to_vec()).await;
        assert!(
            matches!(result, Err(SessionError::Frame(FrameError::Header(_)))),
            "{result:?}"
        );
        assert_eq!(kinds(&answers), ["pong", "error"]);
        assert_eq!(answers[1].data["code"], "BadEvent");
    }

    #[test]
    fn sentences_end_at_a_stop_followed_by_space_or_a_line_break() {
        assert_eq!(complete("Hello there"), 0);
        assert_eq!(complete("Hello there. How"), "Hello there. ".len());
        assert_eq!(complete("It costs 3.50 euros"), 0);
        assert_eq!(complete("Wait! Really? Yes"), "Wait! Really? ".len());
        assert_eq!(complete("a list\nnext"), "a list\n".len());
        assert_eq!(complete("终于。 好"), "终于。 ".len());
    }
}
