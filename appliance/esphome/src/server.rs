//! The device's side of the ESPHome native API: Home Assistant connects,
//! says hello, asks what the device is and what it has, and keeps the
//! connection with pings. Hark answers as a voice satellite with no other
//! entities, offers its wake words (the voice assistant's configuration),
//! and says Home Assistant's announcements in its own voice.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tokio_util::sync::CancellationToken;

use hark_core::room::{
    Later, PersonStart, Play, PlayCall, Quiet, Record, Schedule, Speak, SpeechStatus,
};

use crate::{
    config::EsphomeConfig,
    frame::{self, FrameError},
    messages::{self as m, Kind},
    pipeline::{self, Incoming, Starts},
    voice::{ANNOUNCER, as_home_assistant, say},
};

/// The API version Hark speaks (what ESPHome 2025 devices say).
pub const API_VERSION: (u32, u32) = (1, 10);

/// A wake word the satellite offers Home Assistant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeWord {
    /// The model's name (`okay_nabu`).
    pub id: String,
    /// What the person says (`Okay Nabu`).
    pub phrase: String,
    pub trained_languages: Vec<String>,
}

/// What Hark says it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// The node name (`hark`), which Home Assistant keys the device on.
    pub name: String,
    /// What Home Assistant shows (`Hark`).
    pub friendly_name: String,
    /// A stable MAC-shaped identifier (`AA:BB:…`).
    pub mac_address: String,
    /// Hark's version.
    pub version: String,
    pub wake_words: Vec<WakeWord>,
    /// The wake word listened for (its id).
    pub active_wake_word: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("the client sent message type {0} before its hello")]
    NoHello(u32),
    #[error("message type {kind} does not decode: {error}")]
    Decode {
        kind: u32,
        error: prost::DecodeError,
    },
    #[error("the client sent nothing for {0} s")]
    Idle(u64),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// How a connection ended, when it ended well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The client said goodbye (`DisconnectRequest`).
    Disconnected,
    /// The client closed the connection.
    Closed,
    /// The daemon is stopping, or a newer connection took the place.
    Stopped,
}

/// Announcements waiting to be said, per connection: past this, Home
/// Assistant is told at once that one failed.
const ANNOUNCEMENTS: usize = 4;

/// What a connection may ask of the room: saying announcements, and
/// Home Assistant's timers kept as Hark's own.
#[derive(Clone)]
pub struct Room {
    pub speak: Arc<dyn Speak>,
    /// Home Assistant's own audio for announcements: fetched, then played.
    pub fetch: crate::media::Fetch,
    pub play: Arc<dyn Play>,
    pub schedule: Arc<dyn Schedule>,
    /// The person's turns, recorded for Home Assistant's pipeline.
    pub record: Arc<dyn Record>,
    /// The person's starts that run the pipeline.
    pub starts: Arc<Starts>,
}

/// How long a finished timer rings unless the button or the wake word
/// stops it first.
pub const TIMER_RING: Duration = Duration::from_secs(300);

/// Serves one connection until it ends.
pub async fn connection<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    device: &Device,
    room: Room,
    idle: Duration,
    stop: CancellationToken,
) -> Result<Ended, ConnectionError> {
    let speak = Arc::clone(&room.speak);
    let play = (Arc::clone(&room.fetch), Arc::clone(&room.play));
    // Home Assistant's timer ids → Hark's scheduled timers.
    let mut timers: std::collections::HashMap<String, i64> = Default::default();
    let mut input: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 4096];
    let mut output: Vec<u8> = Vec::with_capacity(1024);
    let mut hello = false;
    let mut active = device.active_wake_word.clone();
    // Announcements are said beside the connection (a ping must be
    // answered while Hark speaks); their answers come back here.
    // (heard to the end, then listen: `ask_question`).
    let (done_tx, mut done) = tokio::sync::mpsc::channel::<(bool, bool)>(ANNOUNCEMENTS);
    let mut saying = 0usize;
    // Dropping the connection stops what it is saying.
    let announcements = stop.child_token();
    let _stop_announcements = announcements.clone().drop_guard();
    // The pipeline's runs: the person's starts (once Home Assistant
    // subscribed), what a run sends, and Home Assistant's answers to it.
    let id = NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let _unsubscribe = Unsubscribe(Arc::clone(&room.starts), id);
    let mut starts: Option<tokio::sync::mpsc::Receiver<PersonStart>> = None;
    let (sent, mut to_send) = tokio::sync::mpsc::channel::<Vec<u8>>(pipeline::OUTGOING);
    let mut running: Option<tokio::sync::mpsc::Sender<Incoming>> = None;
    loop {
        // Every whole frame received so far.
        let mut used = 0;
        while let Some(frame) = frame::decode(&input[used..])? {
            used += frame.used;
            if !hello && frame.kind != m::HelloRequest::KIND {
                return Err(ConnectionError::NoHello(frame.kind));
            }
            output.clear();
            match frame.kind {
                m::HelloRequest::KIND => {
                    let request: m::HelloRequest = decode(frame.kind, frame.payload)?;
                    tracing::info!(
                        client = %request.client_info,
                        api = %format!("{}.{}", request.api_version_major, request.api_version_minor),
                        "ESPHome API client said hello"
                    );
                    hello = true;
                    put(
                        &m::HelloResponse {
                            api_version_major: API_VERSION.0,
                            api_version_minor: API_VERSION.1,
                            server_info: format!("Hark {}", device.version),
                            name: device.name.clone(),
                        },
                        &mut output,
                    );
                }
                m::AuthenticationRequest::KIND => {
                    // No password to check: every password is the right one,
                    // as on an ESPHome device without one.
                    put(
                        &m::AuthenticationResponse {
                            invalid_password: false,
                        },
                        &mut output,
                    );
                }
                m::DeviceInfoRequest::KIND => put(&device_info(device), &mut output),
                m::ListEntitiesRequest::KIND => put(&m::ListEntitiesDoneResponse {}, &mut output),
                m::PingRequest::KIND => put(&m::PingResponse {}, &mut output),
                m::DisconnectRequest::KIND => {
                    put(&m::DisconnectResponse {}, &mut output);
                    stream.write_all(&output).await?;
                    stream.flush().await?;
                    return Ok(Ended::Disconnected);
                }
                m::SubscribeVoiceAssistantRequest::KIND => {
                    let request: m::SubscribeVoiceAssistantRequest =
                        decode(frame.kind, frame.payload)?;
                    // The proto's flag is 1; aioesphomeapi (Home
                    // Assistant's client) sends 4. Either way the run's
                    // answer says where the audio goes.
                    let api_audio = request.flags & (1 | 4) != 0;
                    tracing::info!(
                        subscribe = request.subscribe,
                        api_audio,
                        "Home Assistant subscribed to the voice assistant"
                    );
                    if request.subscribe {
                        starts = Some(room.starts.subscribe(id));
                    } else {
                        room.starts.unsubscribe(id);
                        starts = None;
                    }
                }
                m::VoiceAssistantResponse::KIND => {
                    let answer = decode(frame.kind, frame.payload)?;
                    hand(&running, Incoming::Answer(answer));
                }
                m::VoiceAssistantEventResponse::KIND => {
                    let event = decode(frame.kind, frame.payload)?;
                    hand(&running, Incoming::Event(event));
                }
                m::VoiceAssistantConfigurationRequest::KIND => {
                    put(&configuration(device, active.as_deref()), &mut output);
                }
                m::VoiceAssistantAnnounceRequest::KIND => {
                    let request: m::VoiceAssistantAnnounceRequest =
                        decode(frame.kind, frame.payload)?;
                    if saying >= ANNOUNCEMENTS {
                        tracing::info!("an announcement refused: {ANNOUNCEMENTS} already wait");
                        put(
                            &m::VoiceAssistantAnnounceFinished { success: false },
                            &mut output,
                        );
                    } else {
                        saying += 1;
                        tokio::spawn(announce(
                            request,
                            Arc::clone(&speak),
                            play.clone(),
                            done_tx.clone(),
                            announcements.clone(),
                        ));
                    }
                }
                m::VoiceAssistantTimerEventResponse::KIND => {
                    let event: m::VoiceAssistantTimerEventResponse =
                        decode(frame.kind, frame.payload)?;
                    timer(&room, &mut timers, event).await;
                }
                m::VoiceAssistantSetConfiguration::KIND => {
                    let request: m::VoiceAssistantSetConfiguration =
                        decode(frame.kind, frame.payload)?;
                    // Only words Hark has; the first of them (Hark listens
                    // for one at a time).
                    let chosen = request
                        .active_wake_words
                        .iter()
                        .find(|id| device.wake_words.iter().any(|w| &w.id == *id))
                        .cloned();
                    tracing::info!(wake_word = ?chosen, "Home Assistant chose the wake word");
                    active = chosen;
                }
                // Subscriptions to entities' states, logs, Home Assistant's
                // services and states: Hark has nothing to send on them yet.
                m::SubscribeStatesRequest::KIND
                | m::SubscribeLogsRequest::KIND
                | m::SubscribeHomeassistantServicesRequest::KIND
                | m::SubscribeHomeAssistantStatesRequest::KIND
                | m::PingResponse::KIND => {}
                other => tracing::debug!(kind = other, "ESPHome API message not served"),
            }
            if !output.is_empty() {
                stream.write_all(&output).await?;
            }
        }
        input.drain(..used);
        let read = tokio::select! {
            read = tokio::time::timeout(idle, stream.read(&mut chunk)) => match read {
                Ok(read) => read?,
                Err(_) => return Err(ConnectionError::Idle(idle.as_secs())),
            },
            Some((success, listen)) = done.recv() => {
                saying = saying.saturating_sub(1);
                output.clear();
                put(&m::VoiceAssistantAnnounceFinished { success }, &mut output);
                stream.write_all(&output).await?;
                // `ask_question`: the answer runs the pipeline, as
                // ESPHome devices do once the question was heard.
                if listen {
                    let run = Run { room: &room, sent: &sent, stop: &announcements };
                    run.begin(&mut running, PersonStart::Press, String::new());
                }
                continue;
            }
            Some(start) = next_start(&mut starts) => {
                let phrase = active
                    .as_ref()
                    .and_then(|a| device.wake_words.iter().find(|w| &w.id == a))
                    .map(|w| w.phrase.clone())
                    .filter(|_| matches!(start, PersonStart::WakeWord { .. }))
                    .unwrap_or_default();
                let run = Run { room: &room, sent: &sent, stop: &announcements };
                run.begin(&mut running, start, phrase);
                continue;
            }
            Some(frame) = to_send.recv() => {
                stream.write_all(&frame).await?;
                continue;
            }
            () = stop.cancelled() => return Ok(Ended::Stopped),
        };
        if read == 0 {
            return Ok(Ended::Closed);
        }
        input.extend_from_slice(&chunk[..read]);
    }
}

/// What a connection's runs of the pipeline share.
struct Run<'a> {
    room: &'a Room,
    sent: &'a tokio::sync::mpsc::Sender<Vec<u8>>,
    stop: &'a CancellationToken,
}

impl Run<'_> {
    /// Starts a run (one at a time): the person's `start`, the wake word's
    /// `phrase` (empty without one).
    fn begin(
        &self,
        running: &mut Option<tokio::sync::mpsc::Sender<Incoming>>,
        start: PersonStart,
        phrase: String,
    ) {
        if running.as_ref().is_some_and(|r| !r.is_closed()) {
            tracing::info!(
                "the person started again while Home Assistant's pipeline runs: ignored"
            );
            return;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        *running = Some(tx);
        tokio::spawn(pipeline::converse(
            start,
            phrase,
            Arc::clone(&self.room.speak),
            Arc::clone(&self.room.record),
            self.sent.clone(),
            rx,
            self.stop.clone(),
        ));
    }
}

/// Plays an announcement and reports whether it was heard to the end.
/// Words Home Assistant only turned into speech (its TTS proxy) are said
/// in Hark's voice, as everything Hark says; other audio (a chime, a
/// recording, an announcement without words) is fetched and played as it
/// is, and if it cannot be, its words, if any, are said instead.
async fn announce(
    request: m::VoiceAssistantAnnounceRequest,
    speak: Arc<dyn Speak>,
    (fetch, play): (crate::media::Fetch, Arc<dyn Play>),
    done: tokio::sync::mpsc::Sender<(bool, bool)>,
    stop: CancellationToken,
) {
    let text = request.text.trim().to_owned();
    let media = request.media_id.trim().to_owned();
    let heard = async {
        if !media.is_empty() && (text.is_empty() || !crate::media::is_tts(&media)) {
            match played(&fetch, play.as_ref(), &media, &text).await {
                Ok(heard) => return heard,
                Err(reason) => {
                    tracing::warn!(%media, %reason, "Home Assistant's audio for an announcement cannot be played");
                }
            }
        }
        if text.is_empty() {
            tracing::info!(%media, "an announcement with no words and no audio Hark could play");
            return false;
        }
        say(speak.as_ref(), text.clone(), "an announcement").await
    };
    let success = tokio::select! {
        heard = heard => heard,
        () = stop.cancelled() => false,
    };
    // A question not heard is not waited on for an answer.
    let _ = done
        .send((success, success && request.start_conversation))
        .await;
}

/// Fetches Home Assistant's audio at `url` and plays it: whether it was
/// heard to the end, or why it could not be played.
async fn played(
    fetch: &crate::media::Fetch,
    play: &dyn Play,
    url: &str,
    text: &str,
) -> Result<bool, String> {
    let audio = {
        let (url, fetch) = (url.to_owned(), Arc::clone(fetch));
        tokio::task::spawn_blocking(move || fetch(&url))
            .await
            .map_err(|e| format!("the fetch failed: {e}"))?
            .map_err(|e| e.to_string())?
    };
    let label = if text.is_empty() {
        "(Home Assistant's audio)".to_owned()
    } else {
        text.to_owned()
    };
    let spoken = play
        .play(PlayCall {
            agent: Some(ANNOUNCER.to_owned()),
            label,
            audio,
            source: url.to_owned(),
        })
        .await
        .map_err(|failure| failure.message)?;
    Ok(spoken.status == SpeechStatus::Spoken)
}

/// A timer of Home Assistant's becomes one of Hark's: said and rung at its
/// end ("The pasta timer is done."), until the button or the wake word
/// stops it, shown ringing on the lights and in `get_status`; kept across
/// restarts like any. Paused, it is taken off; resumed or changed, put
/// back at its new end; cancelled, gone. Finished on Home Assistant's side,
/// Hark's own is ringing (or about to): it is left to ring.
async fn timer(
    room: &Room,
    timers: &mut std::collections::HashMap<String, i64>,
    event: m::VoiceAssistantTimerEventResponse,
) {
    let id = event.timer_id.clone();
    let unschedule = |scheduled: Option<i64>| async move {
        if let Some(scheduled) = scheduled
            && let Err(failure) = room.schedule.cancel(scheduled).await
        {
            tracing::debug!(error = %failure.message, "a timer was already gone");
        }
    };
    match event.event_type {
        m::timer::STARTED | m::timer::UPDATED => {
            unschedule(timers.remove(&id)).await;
            if !event.is_active {
                tracing::info!(timer = %id, "Home Assistant's timer paused");
                return;
            }
            let text = match event.name.trim() {
                "" => "Your timer is done.".to_owned(),
                name => format!("The {name} timer is done."),
            };
            // Its countdown on the lights is the whole timer, as Home
            // Assistant set it, not what is left now.
            let now = std::time::SystemTime::now();
            let left = Duration::from_secs(u64::from(event.seconds_left));
            let total = Duration::from_secs(u64::from(event.total_seconds)).max(left);
            let call = as_home_assistant(
                text,
                false,
                Some(Later {
                    set: now.checked_sub(total - left).unwrap_or(now),
                    due: now + left,
                    ring: Some(TIMER_RING),
                }),
            );
            match room.speak.speak(call, &mut Quiet).await {
                Ok(spoken) => {
                    if let Some(scheduled) = spoken.scheduled {
                        tracing::info!(
                            timer = %id,
                            seconds = event.seconds_left,
                            scheduled = scheduled.id,
                            "Home Assistant's timer kept"
                        );
                        timers.insert(id, scheduled.id);
                    }
                }
                Err(failure) => {
                    tracing::warn!(timer = %id, error = %failure.message, "Home Assistant's timer not kept");
                }
            }
        }
        m::timer::CANCELLED => {
            tracing::info!(timer = %id, "Home Assistant's timer cancelled");
            unschedule(timers.remove(&id)).await;
        }
        m::timer::FINISHED => {
            tracing::info!(timer = %id, "Home Assistant's timer finished");
            timers.remove(&id);
        }
        other => tracing::debug!(kind = other, "a timer event not known"),
    }
}

/// Connections so far, for the one the person's starts go to.
static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A connection's end: the person's starts no longer go to it.
struct Unsubscribe(Arc<Starts>, u64);

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        self.0.unsubscribe(self.1);
    }
}

/// The next start for this connection, once Home Assistant subscribed.
async fn next_start(
    starts: &mut Option<tokio::sync::mpsc::Receiver<PersonStart>>,
) -> Option<PersonStart> {
    match starts {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Hands Home Assistant's answer or event to the run, if one runs.
fn hand(running: &Option<tokio::sync::mpsc::Sender<Incoming>>, what: Incoming) {
    match running {
        Some(run) if run.try_send(what).is_ok() => {}
        _ => tracing::debug!("a voice assistant message with no run going"),
    }
}

fn decode<T: Kind>(kind: u32, payload: &[u8]) -> Result<T, ConnectionError> {
    T::decode(payload).map_err(|error| ConnectionError::Decode { kind, error })
}

fn put<T: Kind>(message: &T, out: &mut Vec<u8>) {
    frame::encode(T::KIND, &message.encode_to_vec(), out);
}

fn device_info(device: &Device) -> m::DeviceInfoResponse {
    m::DeviceInfoResponse {
        uses_password: false,
        name: device.name.clone(),
        mac_address: device.mac_address.clone(),
        esphome_version: format!("hark {}", device.version),
        compilation_time: String::new(),
        model: "Hark voice appliance".into(),
        project_name: "hark.voice-appliance".into(),
        project_version: device.version.clone(),
        manufacturer: "Hark".into(),
        friendly_name: device.friendly_name.clone(),
        // A voice assistant whose audio comes over this connection, with
        // a speaker: what Home Assistant needs to make it a satellite.
        voice_assistant_feature_flags: m::feature::VOICE_ASSISTANT
            | m::feature::SPEAKER
            | m::feature::API_AUDIO
            | m::feature::ANNOUNCE
            | m::feature::START_CONVERSATION
            | m::feature::TIMERS,
        suggested_area: String::new(),
        api_encryption_supported: false,
    }
}

fn configuration(device: &Device, active: Option<&str>) -> m::VoiceAssistantConfigurationResponse {
    m::VoiceAssistantConfigurationResponse {
        available_wake_words: device
            .wake_words
            .iter()
            .map(|w| m::VoiceAssistantWakeWord {
                id: w.id.clone(),
                wake_word: w.phrase.clone(),
                trained_languages: w.trained_languages.clone(),
            })
            .collect(),
        active_wake_words: active.map(str::to_owned).into_iter().collect(),
        max_active_wake_words: 1,
    }
}

/// Binds `esphome.listen`.
pub async fn bind(config: &EsphomeConfig) -> std::io::Result<TcpListener> {
    TcpListener::bind(config.listen).await
}

/// Serves the API on `listener` until `shutdown`: addresses outside
/// `esphome.allow` are closed at once; past `esphome.max_connections` the
/// oldest connection makes way.
pub async fn run(
    listener: TcpListener,
    device: Arc<Device>,
    room: Room,
    config: EsphomeConfig,
    shutdown: CancellationToken,
) {
    let open: Arc<Mutex<VecDeque<(u64, CancellationToken)>>> = Default::default();
    let mut next = 0u64;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept an ESPHome API connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => return,
        };
        if !config.allows(peer.ip()) {
            tracing::info!(%peer, "refused an ESPHome API connection: not in esphome.allow");
            drop(stream);
            continue;
        }
        next += 1;
        let id = next;
        let stop = shutdown.child_token();
        {
            let mut open = open.lock().unwrap_or_else(PoisonError::into_inner);
            open.push_back((id, stop.clone()));
            while open.len() > config.max_connections {
                if let Some((_, oldest)) = open.pop_front() {
                    tracing::info!("closing the oldest ESPHome API connection to make way");
                    oldest.cancel();
                }
            }
        }
        let device = Arc::clone(&device);
        let room = room.clone();
        let open = Arc::clone(&open);
        let idle = Duration::from_secs(config.idle_secs);
        tokio::spawn(async move {
            serve(stream, peer, &device, room, idle, stop).await;
            open.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|(i, _)| *i != id);
        });
    }
}

async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    device: &Device,
    room: Room,
    idle: Duration,
    stop: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    tracing::info!(%peer, "ESPHome API connection");
    match connection(stream, device, room, idle, stop).await {
        Ok(ended) => tracing::info!(%peer, ?ended, "ESPHome API connection ended"),
        Err(e) => tracing::info!(%peer, error = %e, "ESPHome API connection closed"),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use hark_core::room::TakeStarts;

    use super::*;
    use crate::testing::{Recording, device};

    fn frames(messages: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (kind, payload) in messages {
            frame::encode(*kind, payload, &mut out);
        }
        out
    }

    /// Runs a connection on what `client` sends, then what the device
    /// answered, frame by frame.
    async fn exchange(client: Vec<u8>) -> (Result<Ended, ConnectionError>, Vec<(u32, Vec<u8>)>) {
        let (mut near, served) = start(Recording::new().room());
        near.write_all(&client).await.expect("sent");
        near.shutdown().await.expect("closed");
        let mut answer = Vec::new();
        near.read_to_end(&mut answer).await.expect("read");
        let ended = served.await.expect("joined");
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(f) = frame::decode(&answer[at..]).expect("frames") {
            out.push((f.kind, f.payload.to_vec()));
            at += f.used;
        }
        (ended, out)
    }

    /// A connection on `room`, served beside the test; the client's end.
    fn start(
        room: Room,
    ) -> (
        tokio::io::DuplexStream,
        tokio::task::JoinHandle<Result<Ended, ConnectionError>>,
    ) {
        let (near, far) = tokio::io::duplex(1 << 16);
        let device = device();
        let served = tokio::spawn(async move {
            connection(
                far,
                &device,
                room,
                Duration::from_secs(5),
                CancellationToken::new(),
            )
            .await
        });
        (near, served)
    }

    /// The next frame the device sends.
    async fn next_frame(near: &mut tokio::io::DuplexStream, buf: &mut Vec<u8>) -> (u32, Vec<u8>) {
        loop {
            if let Some(f) = frame::decode(buf).expect("frames") {
                let out = (f.kind, f.payload.to_vec());
                let used = f.used;
                buf.drain(..used);
                return out;
            }
            let mut chunk = [0u8; 1024];
            let n = tokio::time::timeout(Duration::from_secs(5), near.read(&mut chunk))
                .await
                .expect("the device answers within 5 s")
                .expect("read");
            assert!(n > 0, "the device closed");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Home Assistant's side: says hello, subscribes to the voice
    /// assistant with the audio over the API, and waits until the person's
    /// starts go to it.
    async fn subscribed(recording: &Arc<Recording>) -> (tokio::io::DuplexStream, Vec<u8>) {
        let (mut near, _served) = start(recording.clone().room());
        near.write_all(&frames(&[
            (
                m::HelloRequest::KIND,
                m::HelloRequest::default().encode_to_vec(),
            ),
            (
                m::SubscribeVoiceAssistantRequest::KIND,
                m::SubscribeVoiceAssistantRequest {
                    subscribe: true,
                    flags: 1,
                }
                .encode_to_vec(),
            ),
            (m::PingRequest::KIND, vec![]),
        ]))
        .await
        .expect("sent");
        let mut buf = Vec::new();
        // The ping's answer: the subscription before it was read.
        while next_frame(&mut near, &mut buf).await.0 != m::PingResponse::KIND {}
        (near, buf)
    }

    fn event(kind: i32, data: &[(&str, &str)]) -> (u32, Vec<u8>) {
        let event = m::VoiceAssistantEventResponse {
            event_type: kind,
            data: data
                .iter()
                .map(|(name, value)| m::VoiceAssistantEventData {
                    name: (*name).into(),
                    value: (*value).into(),
                })
                .collect(),
        };
        (m::VoiceAssistantEventResponse::KIND, event.encode_to_vec())
    }

    fn answer(port: u32) -> (u32, Vec<u8>) {
        let answer = m::VoiceAssistantResponse { port, error: false };
        (m::VoiceAssistantResponse::KIND, answer.encode_to_vec())
    }

    /// A run's audio, read to the piece with `end`.
    async fn audio_to_the_end(near: &mut tokio::io::DuplexStream, buf: &mut Vec<u8>) -> Vec<i16> {
        let mut samples = Vec::new();
        loop {
            let (kind, payload) = next_frame(near, buf).await;
            assert_eq!(kind, m::VoiceAssistantAudio::KIND);
            let audio = m::VoiceAssistantAudio::decode(&payload[..]).expect("audio");
            samples.extend(
                audio
                    .data
                    .chunks(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]])),
            );
            if audio.end {
                return samples;
            }
        }
    }

    /// A run the wake word (ending at `at`) started, answered with port 0,
    /// its audio read to the end.
    async fn a_run_heard(
        recording: &Arc<Recording>,
        at: u64,
    ) -> (tokio::io::DuplexStream, Vec<u8>) {
        let (mut near, mut buf) = subscribed(recording).await;
        assert!(recording.starts.take(PersonStart::WakeWord { at }));
        assert_eq!(
            next_frame(&mut near, &mut buf).await.0,
            m::VoiceAssistantRequest::KIND
        );
        near.write_all(&frames(&[answer(0)])).await.expect("sent");
        audio_to_the_end(&mut near, &mut buf).await;
        (near, buf)
    }

    #[tokio::test]
    async fn the_wake_word_runs_home_assistants_pipeline_and_its_reply_is_said() {
        let recording = Recording::new();
        let voice: Vec<i16> = (0..3000).map(|i| (i * 7 % 2000) as i16 - 1000).collect();
        *recording.voice.lock().expect("lock") = voice.clone();
        let (mut near, mut buf) = subscribed(&recording).await;
        // A press is the agents' (`run_on_press` off); the wake word is
        // Home Assistant's.
        assert!(!recording.starts.take(PersonStart::Press));
        assert!(recording.starts.take(PersonStart::WakeWord { at: 1234 }));
        let (kind, payload) = next_frame(&mut near, &mut buf).await;
        assert_eq!(kind, m::VoiceAssistantRequest::KIND);
        let request = m::VoiceAssistantRequest::decode(&payload[..]).expect("request");
        assert!(request.start);
        assert_eq!(request.wake_word_phrase, "Okay Nabu");
        near.write_all(&frames(&[answer(0)])).await.expect("sent");
        // The person's turn, recorded from the wake word's end, as audio.
        let mut heard = Vec::new();
        loop {
            let (kind, payload) = next_frame(&mut near, &mut buf).await;
            assert_eq!(kind, m::VoiceAssistantAudio::KIND);
            let audio = m::VoiceAssistantAudio::decode(&payload[..]).expect("audio");
            heard.extend(
                audio
                    .data
                    .chunks_exact(2)
                    .map(|b| i16::from_le_bytes([b[0], b[1]])),
            );
            if audio.end {
                break;
            }
        }
        assert_eq!(heard, voice);
        assert_eq!(*recording.recorded.lock().expect("lock"), [Some(1234)]);
        near.write_all(&frames(&[
            event(m::event::RUN_START, &[]),
            event(m::event::STT_END, &[("text", "turn on the lights")]),
            event(
                m::event::INTENT_END,
                &[("conversation_id", "c1"), ("continue_conversation", "0")],
            ),
            event(m::event::TTS_START, &[("text", "The lights are on.")]),
            event(m::event::TTS_END, &[("url", "http://ha/tts.flac")]),
            event(m::event::RUN_END, &[]),
        ]))
        .await
        .expect("sent");
        for _ in 0..100 {
            if recording.said.lock().expect("lock").len() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            *recording.said.lock().expect("lock"),
            ["The lights are on."]
        );
        // One run at a time, but the next start after it runs again.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(recording.starts.take(PersonStart::WakeWord { at: 5000 }));
        let (kind, _) = next_frame(&mut near, &mut buf).await;
        assert_eq!(kind, m::VoiceAssistantRequest::KIND);
    }

    #[tokio::test]
    async fn a_reply_that_asks_back_listens_again_and_silence_ends_the_run() {
        let recording = Recording::new();
        *recording.voice.lock().expect("lock") = vec![100; 2048];
        let (mut near, mut buf) = a_run_heard(&recording, 10).await;
        near.write_all(&frames(&[
            event(
                m::event::INTENT_END,
                &[("conversation_id", "c7"), ("continue_conversation", "1")],
            ),
            event(m::event::TTS_START, &[("text", "Which room?")]),
            event(m::event::RUN_END, &[]),
        ]))
        .await
        .expect("sent");
        // The follow-up: the same conversation, no wake word; the person
        // now says nothing, and the run is ended.
        *recording.voice.lock().expect("lock") = Vec::new();
        let (kind, payload) = next_frame(&mut near, &mut buf).await;
        assert_eq!(kind, m::VoiceAssistantRequest::KIND);
        let again = m::VoiceAssistantRequest::decode(&payload[..]).expect("request");
        assert!(again.start && again.wake_word_phrase.is_empty());
        assert_eq!(again.conversation_id, "c7");
        near.write_all(&frames(&[answer(0)])).await.expect("sent");
        let (kind, payload) = next_frame(&mut near, &mut buf).await;
        assert_eq!(kind, m::VoiceAssistantRequest::KIND);
        assert!(
            !m::VoiceAssistantRequest::decode(&payload[..])
                .expect("stop")
                .start
        );
        assert_eq!(*recording.said.lock().expect("lock"), ["Which room?"]);
        assert_eq!(*recording.recorded.lock().expect("lock"), [Some(10), None]);
    }

    #[tokio::test]
    async fn what_the_person_adds_after_the_turn_runs_next_in_the_same_conversation() {
        let recording = Recording::new();
        *recording.voice.lock().expect("lock") = vec![100; 2048];
        // The person goes on after the first turn: 1500 samples more.
        *recording.more.lock().expect("lock") = vec![200; 1500];
        let (mut near, mut buf) = a_run_heard(&recording, 10).await;
        near.write_all(&frames(&[
            event(m::event::INTENT_END, &[("conversation_id", "c9")]),
            event(m::event::TTS_START, &[("text", "Book what?")]),
            event(m::event::RUN_END, &[]),
        ]))
        .await
        .expect("sent");
        // The rest: a run in the same conversation, with what was added.
        let (kind, payload) = next_frame(&mut near, &mut buf).await;
        assert_eq!(kind, m::VoiceAssistantRequest::KIND);
        let again = m::VoiceAssistantRequest::decode(&payload[..]).expect("request");
        assert!(again.start && again.wake_word_phrase.is_empty());
        assert_eq!(again.conversation_id, "c9");
        near.write_all(&frames(&[answer(0)])).await.expect("sent");
        let samples = audio_to_the_end(&mut near, &mut buf).await;
        assert_eq!(
            samples,
            vec![200; 1500],
            "the rest, not the first part again"
        );
        near.write_all(&frames(&[
            event(m::event::TTS_START, &[("text", "Booked for four.")]),
            event(m::event::RUN_END, &[]),
        ]))
        .await
        .expect("sent");
        for _ in 0..100 {
            if !recording.said.lock().expect("lock").is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The reply to half a sentence was not said; the whole one's was.
        assert_eq!(*recording.said.lock().expect("lock"), ["Booked for four."]);
        // Recorded once: the rest came with the first recording.
        assert_eq!(*recording.recorded.lock().expect("lock"), [Some(10)]);
    }

    #[tokio::test]
    async fn a_question_is_said_then_its_answer_runs_the_pipeline() {
        let recording = Recording::new();
        *recording.voice.lock().expect("lock") = vec![300; 1500];
        let (mut near, mut buf) = subscribed(&recording).await;
        let ask = m::VoiceAssistantAnnounceRequest {
            text: "Which room?".into(),
            start_conversation: true,
            ..Default::default()
        };
        near.write_all(&frames(&[(
            m::VoiceAssistantAnnounceRequest::KIND,
            ask.encode_to_vec(),
        )]))
        .await
        .expect("sent");
        let (kind, payload) = next_frame(&mut near, &mut buf).await;
        assert_eq!(kind, m::VoiceAssistantAnnounceFinished::KIND);
        assert!(
            m::VoiceAssistantAnnounceFinished::decode(&payload[..])
                .expect("finished")
                .success
        );
        // Then the answer: a run with no wake word, recorded from now.
        let (kind, payload) = next_frame(&mut near, &mut buf).await;
        assert_eq!(kind, m::VoiceAssistantRequest::KIND);
        let request = m::VoiceAssistantRequest::decode(&payload[..]).expect("request");
        assert!(request.start && request.wake_word_phrase.is_empty());
        near.write_all(&frames(&[answer(0)])).await.expect("sent");
        let samples = audio_to_the_end(&mut near, &mut buf).await;
        assert_eq!(samples.len(), 1500);
        assert_eq!(*recording.said.lock().expect("lock"), ["Which room?"]);
        assert_eq!(*recording.recorded.lock().expect("lock"), [None]);
    }

    #[tokio::test]
    async fn without_a_subscription_the_person_starts_are_the_agents() {
        let recording = Recording::new();
        let (mut near, _served) = start(recording.clone().room());
        near.write_all(&frames(&[(
            m::HelloRequest::KIND,
            m::HelloRequest::default().encode_to_vec(),
        )]))
        .await
        .expect("sent");
        let mut buf = Vec::new();
        next_frame(&mut near, &mut buf).await;
        assert!(!recording.starts.take(PersonStart::WakeWord { at: 1 }));
        // Gone with its connection.
        let (near, _buf) = subscribed(&recording).await;
        drop(near);
        for _ in 0..100 {
            if !recording.starts.take(PersonStart::WakeWord { at: 1 }) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("a closed connection still takes the person's starts");
    }

    #[tokio::test]
    async fn announcements_are_said_and_answered_and_pings_go_on_meanwhile() {
        // Hark is still saying the first until the test lets it finish.
        let saying = Recording::held();
        let (mut near, served) = start(saying.clone().room());
        let announce = |text: &str, media: &str| m::VoiceAssistantAnnounceRequest {
            text: text.into(),
            media_id: media.into(),
            ..Default::default()
        };
        // The closed port answers at once: audio that cannot be fetched.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
            l.local_addr().expect("address").port()
        };
        near.write_all(&frames(&[
            (
                m::HelloRequest::KIND,
                m::HelloRequest::default().encode_to_vec(),
            ),
            (
                m::VoiceAssistantAnnounceRequest::KIND,
                // Home Assistant's TTS of the words: said in Hark's voice.
                announce("The washing is done.", "http://ha/api/tts_proxy/x.mp3").encode_to_vec(),
            ),
            (m::PingRequest::KIND, vec![]),
            (
                m::VoiceAssistantAnnounceRequest::KIND,
                announce(
                    "",
                    &format!("http://127.0.0.1:{closed}/api/tts_proxy/y.mp3"),
                )
                .encode_to_vec(),
            ),
        ]))
        .await
        .expect("sent");
        let mut buf = Vec::new();
        let finished = |payload: &[u8]| {
            m::VoiceAssistantAnnounceFinished::decode(payload)
                .expect("finished")
                .success
        };
        // While the first is being said: the ping answered, and the one
        // without words, whose audio cannot be had, refused.
        let mut answers = Vec::new();
        for _ in 0..3 {
            answers.push(next_frame(&mut near, &mut buf).await);
        }
        let kinds: Vec<u32> = answers.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds[0], m::HelloResponse::KIND);
        assert!(kinds.contains(&m::PingResponse::KIND), "{kinds:?}");
        let refused = answers
            .iter()
            .find(|(k, _)| *k == m::VoiceAssistantAnnounceFinished::KIND)
            .expect("the wordless one answered at once");
        assert!(!finished(&refused.1));
        assert_eq!(*saying.said.lock().expect("lock"), ["The washing is done."]);
        // Said to the end: now it is answered, and well.
        saying.finish(1);
        let (kind, payload) = next_frame(&mut near, &mut buf).await;
        assert_eq!(kind, m::VoiceAssistantAnnounceFinished::KIND);
        assert!(finished(&payload));
        near.shutdown().await.expect("closed");
        let mut rest = Vec::new();
        near.read_to_end(&mut rest).await.expect("read");
        assert_eq!(served.await.expect("joined").expect("ended"), Ended::Closed);
    }

    /// Serves `body` with a 200 to each request on loopback; its URL
    /// with `path`.
    fn media_server(body: &'static [u8], path: &str) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
        let port = listener.local_addr().expect("address").port();
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(body);
            }
        });
        format!("http://127.0.0.1:{port}{path}")
    }

    #[tokio::test]
    async fn home_assistants_own_audio_is_played_and_its_words_said_if_it_cannot_be() {
        let saying = Recording::new();
        let (mut near, _served) = start(saying.clone().room());
        let audio = media_server(b"RIFF\0\0\0\0WAVEfmt ", "/local/doorbell.wav");
        let page = media_server(b"<html>not audio</html>", "/local/page.wav");
        let announce = |text: &str, media: &str| {
            m::VoiceAssistantAnnounceRequest {
                text: text.into(),
                media_id: media.into(),
                ..Default::default()
            }
            .encode_to_vec()
        };
        let kind = m::VoiceAssistantAnnounceRequest::KIND;
        let mut buf = Vec::new();
        near.write_all(&frames(&[(
            m::HelloRequest::KIND,
            m::HelloRequest::default().encode_to_vec(),
        )]))
        .await
        .expect("sent");
        next_frame(&mut near, &mut buf).await;
        // One at a time, so what was said is in order.
        let mut answers = Vec::new();
        for request in [
            // Audio without words: played as it is.
            announce("", &audio),
            // Audio that is not Home Assistant's TTS, with words: the audio.
            announce("Someone is at the door.", &audio),
            // Audio that turns out not to be audio: the words instead.
            announce("The post came.", &page),
            // Neither: nothing to play.
            announce("", &page),
        ] {
            near.write_all(&frames(&[(kind, request)]))
                .await
                .expect("sent");
            let (k, payload) = next_frame(&mut near, &mut buf).await;
            assert_eq!(k, m::VoiceAssistantAnnounceFinished::KIND);
            answers.push(
                m::VoiceAssistantAnnounceFinished::decode(payload.as_slice())
                    .expect("finished")
                    .success,
            );
        }
        assert_eq!(answers, [true, true, true, false]);
        assert_eq!(
            *saying.said.lock().expect("lock"),
            [
                "played 16 bytes: (Home Assistant's audio)",
                "played 16 bytes: Someone is at the door.",
                "The post came.",
            ]
        );
    }

    #[tokio::test]
    async fn home_assistants_timers_become_harks() {
        let saying = Recording::new();
        let (mut near, served) = start(saying.clone().room());
        let event = |kind: i32, id: &str, name: &str, left: u32, active: bool| {
            m::VoiceAssistantTimerEventResponse {
                event_type: kind,
                timer_id: id.into(),
                name: name.into(),
                total_seconds: 600,
                seconds_left: left,
                is_active: active,
            }
            .encode_to_vec()
        };
        let kind = m::VoiceAssistantTimerEventResponse::KIND;
        near.write_all(&frames(&[
            (
                m::HelloRequest::KIND,
                m::HelloRequest::default().encode_to_vec(),
            ),
            (kind, event(m::timer::STARTED, "a", "pasta", 600, true)),
            (kind, event(m::timer::STARTED, "b", "", 30, true)),
            // Paused, then resumed with less left.
            (kind, event(m::timer::UPDATED, "a", "pasta", 500, false)),
            (kind, event(m::timer::UPDATED, "a", "pasta", 500, true)),
            (kind, event(m::timer::CANCELLED, "b", "", 20, false)),
            (kind, event(m::timer::FINISHED, "a", "pasta", 0, false)),
            (m::PingRequest::KIND, vec![]),
        ]))
        .await
        .expect("sent");
        let mut buf = Vec::new();
        // The hello's answer, then the ping's: every event before it is done.
        assert_eq!(
            next_frame(&mut near, &mut buf).await.0,
            m::HelloResponse::KIND
        );
        assert_eq!(
            next_frame(&mut near, &mut buf).await.0,
            m::PingResponse::KIND
        );
        let ring = format!("{:?}", Some(TIMER_RING));
        assert_eq!(
            *saying.said.lock().expect("lock"),
            [
                // The countdown on the lights is the whole timer's: set as
                // long ago as Home Assistant's total less what is left.
                format!("The pasta timer is done. in 600 s, set 0 s ago, ringing {ring}"),
                format!("Your timer is done. in 30 s, set 570 s ago, ringing {ring}"),
                format!("The pasta timer is done. in 500 s, set 100 s ago, ringing {ring}"),
            ]
        );
        // Paused: the first taken off; cancelled: the second; finished:
        // the resumed one is left to ring.
        assert_eq!(*saying.cancelled.lock().expect("lock"), [1, 2]);
        near.shutdown().await.expect("closed");
        let mut rest = Vec::new();
        near.read_to_end(&mut rest).await.expect("read");
        served.await.expect("joined").expect("ended");
    }

    #[tokio::test]
    async fn hello_device_info_entities_and_goodbye() {
        let hello = m::HelloRequest {
            client_info: "aioesphomeapi".into(),
            api_version_major: 1,
            api_version_minor: 19,
        };
        let (ended, answers) = exchange(frames(&[
            (m::HelloRequest::KIND, hello.encode_to_vec()),
            (m::DeviceInfoRequest::KIND, vec![]),
            (m::ListEntitiesRequest::KIND, vec![]),
            (m::SubscribeStatesRequest::KIND, vec![]),
            (m::PingRequest::KIND, vec![]),
            (m::DisconnectRequest::KIND, vec![]),
        ]))
        .await;
        assert_eq!(ended.expect("ended well"), Ended::Disconnected);
        let kinds: Vec<u32> = answers.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, [2, 10, 19, 8, 6]);
        let hello = m::HelloResponse::decode(&answers[0].1[..]).expect("hello");
        assert_eq!((hello.api_version_major, hello.name.as_str()), (1, "hark"));
        let info = m::DeviceInfoResponse::decode(&answers[1].1[..]).expect("info");
        assert_eq!(info.friendly_name, "Hark");
        assert_eq!(info.voice_assistant_feature_flags, 0b11_1111);
        assert!(!info.uses_password && !info.api_encryption_supported);
    }

    #[tokio::test]
    async fn the_wake_words_and_the_choice_of_one() {
        let choose = m::VoiceAssistantSetConfiguration {
            active_wake_words: vec!["not_installed".into(), "hey_jarvis".into()],
        };
        let (_, answers) = exchange(frames(&[
            (
                m::HelloRequest::KIND,
                m::HelloRequest::default().encode_to_vec(),
            ),
            (m::VoiceAssistantConfigurationRequest::KIND, vec![]),
            (
                m::VoiceAssistantSetConfiguration::KIND,
                choose.encode_to_vec(),
            ),
            (m::VoiceAssistantConfigurationRequest::KIND, vec![]),
        ]))
        .await;
        let before = m::VoiceAssistantConfigurationResponse::decode(&answers[1].1[..]).expect("c");
        assert_eq!(before.available_wake_words.len(), 2);
        assert_eq!(before.available_wake_words[0].wake_word, "Okay Nabu");
        assert_eq!(before.active_wake_words, ["okay_nabu"]);
        assert_eq!(before.max_active_wake_words, 1);
        let after = m::VoiceAssistantConfigurationResponse::decode(&answers[2].1[..]).expect("c");
        assert_eq!(after.active_wake_words, ["hey_jarvis"]);
    }

    #[tokio::test]
    async fn nothing_before_hello_and_no_encryption() {
        let (ended, answers) = exchange(frames(&[(m::DeviceInfoRequest::KIND, vec![])])).await;
        assert!(
            matches!(ended, Err(ConnectionError::NoHello(9))),
            "{ended:?}"
        );
        assert!(answers.is_empty());
        let (ended, _) = exchange(vec![1, 0, 0]).await;
        assert!(matches!(
            ended,
            Err(ConnectionError::Frame(FrameError::Encrypted))
        ));
    }
}
