//! The board link against a simulated microcontroller that speaks the
//! protocol the way firmware does: it answers `Hello` with its own and a
//! state report, pongs pings, applies and acks LED and volume commands, and
//! sends the events a test scripts.
//!
//! Most tests run over a real pseudo-terminal pair
//! (`tokio_serial::SerialStream::pair()`), with real time: the kernel moves
//! pty bytes asynchronously, which tokio's paused clock cannot see, so it
//! would jump ahead and fire timeouts spuriously. Intervals are short and
//! each wait is bounded by `STEP`; nothing asserts on wall-clock durations.
//! The timing tests (backoff, heartbeat, restarts) run over an in-memory
//! `tokio::io::duplex` pipe with the paused clock, where virtual time is
//! exact.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hark_board::link::{Command, Link, LinkConfig, LinkError, LinkEvent, SendError};
use hark_board_protocol::{
    Ack, AckCode, ButtonEvent, Capabilities, Decoder, Edge, EncoderEvent, Frame, Hello, LedPattern,
    MAX_FRAME, Message, Name, PROTOCOL_VERSION, ProtocolVersion, Rgb, encode,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use tokio_serial::SerialStream;
use tokio_util::sync::CancellationToken;

/// The longest a test waits for any one thing.
const STEP: Duration = Duration::from_secs(2);

/// The simulated microcontroller's personality.
#[derive(Clone)]
struct Mcu {
    name: &'static str,
    version: ProtocolVersion,
    capabilities: Capabilities,
    led_count: u8,
    volume: u8,
    /// Answers anything at all (off: a hung MCU).
    answers: bool,
}

impl Default for Mcu {
    fn default() -> Self {
        Self {
            name: "sim-mcu 0.1",
            version: PROTOCOL_VERSION,
            capabilities: Capabilities::ALL,
            led_count: 12,
            volume: 40,
            answers: true,
        }
    }
}

/// What a test makes the MCU do.
enum Script {
    /// Send this message in a frame.
    Send(Message),
    /// Write these bytes as they are.
    Raw(Vec<u8>),
    /// Stop answering (pings, Hello, commands): a hung MCU.
    GoSilent,
    /// Stop reading the port, so the host's writes back up.
    StopReading,
    /// Close the port: the cable is pulled.
    Hangup,
}

/// The test's side of one simulated MCU connection.
struct McuConn {
    script: mpsc::UnboundedSender<Script>,
    /// Every message the MCU received from the host, in order.
    seen: mpsc::UnboundedReceiver<Message>,
    /// The LED pattern it shows.
    leds: Arc<Mutex<LedPattern>>,
}

impl McuConn {
    fn script(&self, script: Script) {
        self.script.send(script).expect("MCU task running");
    }

    fn send(&self, msg: Message) {
        self.script(Script::Send(msg));
    }

    /// Waits until the MCU receives a message matching `want`; returns it.
    async fn saw(&mut self, want: impl Fn(&Message) -> bool) -> Message {
        timeout(STEP, async {
            loop {
                let msg = self.seen.recv().await.expect("MCU task running");
                if want(&msg) {
                    return msg;
                }
            }
        })
        .await
        .expect("the MCU received the expected message in time")
    }
}

fn spawn_mcu<P>(port: P, mcu: Mcu) -> McuConn
where
    P: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (script_tx, script) = mpsc::unbounded_channel();
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let leds = Arc::new(Mutex::new(LedPattern::Off));
    tokio::spawn(run_mcu(port, mcu, script, seen_tx, leds.clone()));
    McuConn {
        script: script_tx,
        seen,
        leds,
    }
}

/// The firmware's main loop, in miniature.
async fn run_mcu<P>(
    mut port: P,
    mut mcu: Mcu,
    mut script: mpsc::UnboundedReceiver<Script>,
    seen: mpsc::UnboundedSender<Message>,
    leds: Arc<Mutex<LedPattern>>,
) where
    P: AsyncRead + AsyncWrite + Unpin,
{
    let mut decoder = Decoder::new();
    let mut seq: u16 = 1000;
    let mut buf = [0u8; 256];
    let mut reading = true;
    let mut scripted = true;
    loop {
        tokio::select! {
            read = port.read(&mut buf), if reading => {
                let n = match read {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let frames: Vec<Frame> = decoder.feed(&buf[..n]).filter_map(Result::ok).collect();
                for frame in frames {
                    let _ = seen.send(frame.msg.clone());
                    if !mcu.answers {
                        continue;
                    }
                    for reply in replies(&mcu, &frame, &leds) {
                        if write(&mut port, &mut seq, reply).await.is_err() {
                            return;
                        }
                    }
                }
            }
            step = script.recv(), if scripted => match step {
                None => scripted = false,
                Some(Script::Send(msg)) => {
                    if write(&mut port, &mut seq, msg).await.is_err() {
                        return;
                    }
                }
                Some(Script::Raw(bytes)) => {
                    if port.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Some(Script::GoSilent) => mcu.answers = false,
                Some(Script::StopReading) => reading = false,
                Some(Script::Hangup) => return,
            },
        }
    }
}

/// What firmware answers to a frame from the host.
fn replies(mcu: &Mcu, frame: &Frame, leds: &Mutex<LedPattern>) -> Vec<Message> {
    let ack = |code| {
        Message::Ack(Ack {
            seq: frame.seq,
            code,
        })
    };
    match &frame.msg {
        Message::Hello(_) => {
            let mut out = vec![Message::Hello(Hello {
                version: mcu.version,
                capabilities: mcu.capabilities,
                led_count: mcu.led_count,
                name: Name::try_from(mcu.name).expect("short name"),
            })];
            if mcu.capabilities.contains(Capabilities::MUTE) {
                out.push(Message::Mute { muted: false });
            }
            if mcu.capabilities.contains(Capabilities::VOLUME) {
                out.push(Message::Volume {
                    percent: mcu.volume,
                });
            }
            out
        }
        Message::Ping { nonce } => vec![Message::Pong { nonce: *nonce }],
        Message::SetLeds(pattern) => {
            if mcu.capabilities.contains(Capabilities::LED_RING) {
                *leds.lock().expect("not poisoned") = *pattern;
                vec![ack(AckCode::OK)]
            } else {
                vec![ack(AckCode::UNSUPPORTED)]
            }
        }
        Message::SetVolume { percent } if *percent > 100 => vec![ack(AckCode::INVALID_ARGUMENT)],
        Message::SetVolume { .. } => vec![ack(AckCode::OK)],
        _ => Vec::new(),
    }
}

async fn write<P: AsyncWrite + Unpin>(port: &mut P, seq: &mut u16, msg: Message) -> io::Result<()> {
    let mut out = [0u8; MAX_FRAME];
    let bytes = encode(&Frame::new(*seq, msg), &mut out).map_err(io::Error::other)?;
    *seq = seq.wrapping_add(1);
    port.write_all(bytes).await?;
    port.flush().await
}

/// A frame built from a raw payload (for kinds and corruptions the encoder
/// cannot make).
fn raw_frame(payload: &[u8]) -> Vec<u8> {
    let mut out = [0u8; MAX_FRAME];
    hark_board_protocol::frame_payload(payload, &mut out)
        .expect("a payload that fits")
        .to_vec()
}

/// Opens "ports" on demand: each successful open makes a new pair, hands the
/// host its end, and starts a simulated MCU (the next in `mcus`, the last one
/// repeating) on the other.
struct Rig {
    conns: mpsc::UnboundedReceiver<McuConn>,
    /// Calls to the opener.
    opens: Arc<AtomicUsize>,
    /// Opens still to fail (the device is missing).
    fail_next: Arc<AtomicUsize>,
    /// When each open happened.
    open_times: Arc<Mutex<Vec<Instant>>>,
}

impl Rig {
    async fn next_mcu(&mut self) -> McuConn {
        timeout(STEP, self.conns.recv())
            .await
            .expect("the link opened the port in time")
            .expect("opener alive")
    }
}

fn rig<P, F>(mcus: Vec<Mcu>, make_pair: F) -> (Rig, impl hark_board::link::Opener)
where
    P: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn() -> io::Result<(P, P)> + Send + Sync + 'static,
{
    let (conns_tx, conns) = mpsc::unbounded_channel();
    let opens = Arc::new(AtomicUsize::new(0));
    let fail_next = Arc::new(AtomicUsize::new(0));
    let open_times = Arc::new(Mutex::new(Vec::new()));
    let successes = Arc::new(AtomicUsize::new(0));
    let make_pair = Arc::new(make_pair);
    let (o, f, t) = (opens.clone(), fail_next.clone(), open_times.clone());
    let opener = move || {
        let (opens, fail_next, open_times) = (o.clone(), f.clone(), t.clone());
        let (successes, conns_tx, make_pair) =
            (successes.clone(), conns_tx.clone(), make_pair.clone());
        let mcus = mcus.clone();
        async move {
            opens.fetch_add(1, Ordering::SeqCst);
            open_times
                .lock()
                .expect("not poisoned")
                .push(Instant::now());
            if fail_next
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(io::Error::new(io::ErrorKind::NotFound, "no such device"));
            }
            let i = successes.fetch_add(1, Ordering::SeqCst);
            let mcu = mcus[i.min(mcus.len() - 1)].clone();
            let (host, device) = make_pair()?;
            let _ = conns_tx.send(spawn_mcu(device, mcu));
            Ok(host)
        }
    };
    let rig = Rig {
        conns,
        opens,
        fail_next,
        open_times,
    };
    (rig, opener)
}

fn pty_pair() -> io::Result<(SerialStream, SerialStream)> {
    // The second end is the tty (what /dev/ttyACM0 would be): the host's.
    let (master, slave) = SerialStream::pair().map_err(io::Error::from)?;
    Ok((slave, master))
}

fn duplex_pair() -> io::Result<(tokio::io::DuplexStream, tokio::io::DuplexStream)> {
    Ok(tokio::io::duplex(4096))
}

/// Short real-time settings for the pty tests.
fn fast_config() -> LinkConfig {
    LinkConfig {
        heartbeat_interval: Duration::from_millis(50),
        heartbeat_timeout: Duration::from_millis(500),
        reconnect_min: Duration::from_millis(5),
        reconnect_max: Duration::from_millis(40),
        ..LinkConfig::new("/dev/sim-mcu", 115_200)
    }
}

async fn next(link: &mut Link) -> LinkEvent {
    next_within(link, STEP).await
}

async fn next_within(link: &mut Link, limit: Duration) -> LinkEvent {
    timeout(limit, link.next_event())
        .await
        .expect("an event in time")
        .expect("the link is running")
}

/// Expects `Connected` and the MCU's state report; returns its Hello.
async fn connected(link: &mut Link) -> Hello {
    let hello = match next(link).await {
        LinkEvent::Connected { hello } => hello,
        other => panic!("expected Connected, got {other:?}"),
    };
    assert!(matches!(next(link).await, LinkEvent::Mute(false)));
    assert!(matches!(next(link).await, LinkEvent::Volume(40)));
    hello
}

#[tokio::test]
async fn the_whole_link_works() {
    let (mut rig, opener) = rig(vec![Mcu::default()], pty_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(fast_config(), opener, shutdown.clone());
    let handle = link.handle();

    let hello = connected(&mut link).await;
    assert_eq!(hello.name.as_str(), "sim-mcu 0.1");
    assert_eq!(hello.capabilities, Capabilities::ALL);
    assert_eq!(hello.led_count, 12);
    assert!(handle.is_connected());

    let mut mcu = rig.next_mcu().await;
    // The host introduced itself.
    let host_hello = mcu.saw(|m| matches!(m, Message::Hello(_))).await;
    let Message::Hello(host_hello) = host_hello else {
        unreachable!()
    };
    assert_eq!(host_hello.version, PROTOCOL_VERSION);
    assert!(host_hello.name.starts_with("hark "));

    // Events flow, in order.
    mcu.send(Message::Button(ButtonEvent {
        id: 0,
        edge: Edge::Pressed,
        at_ms: 1_000,
    }));
    mcu.send(Message::Encoder(EncoderEvent { id: 0, delta: -2 }));
    mcu.send(Message::Button(ButtonEvent {
        id: 0,
        edge: Edge::Released,
        at_ms: 1_750,
    }));
    mcu.send(Message::Mute { muted: true });
    mcu.send(Message::Volume { percent: 70 });
    assert!(matches!(
        next(&mut link).await,
        LinkEvent::Button {
            id: 0,
            pressed: true,
            at_ms: 1_000
        }
    ));
    assert!(matches!(
        next(&mut link).await,
        LinkEvent::Encoder { id: 0, delta: -2 }
    ));
    assert!(matches!(
        next(&mut link).await,
        LinkEvent::Button {
            id: 0,
            pressed: false,
            at_ms: 1_750
        }
    ));
    assert!(matches!(next(&mut link).await, LinkEvent::Mute(true)));
    assert!(matches!(next(&mut link).await, LinkEvent::Volume(70)));

    // Commands reach the MCU, which applies them.
    let pulse = LedPattern::Pulse {
        color: Rgb::new(0, 128, 255),
        brightness: 200,
        period_ms: 1_500,
    };
    handle.send(Command::Leds(pulse)).expect("queued");
    mcu.saw(|m| *m == Message::SetLeds(pulse)).await;
    assert_eq!(*mcu.leds.lock().expect("not poisoned"), pulse);
    handle.send(Command::Volume(55)).expect("queued");
    mcu.saw(|m| *m == Message::SetVolume { percent: 55 }).await;

    // A command the MCU refuses comes back.
    handle.send(Command::Volume(150)).expect("queued");
    match next(&mut link).await {
        LinkEvent::Rejected { command, code } => {
            assert_eq!(command, Command::Volume(150));
            assert_eq!(code, AckCode::INVALID_ARGUMENT);
        }
        other => panic!("expected Rejected, got {other:?}"),
    }

    // The host pings, and answers the MCU's pings.
    mcu.saw(|m| matches!(m, Message::Ping { .. })).await;
    mcu.send(Message::Ping { nonce: 77 });
    mcu.saw(|m| *m == Message::Pong { nonce: 77 }).await;

    stop(link, &shutdown).await;
    assert!(matches!(
        handle.send(Command::Volume(1)),
        Err(SendError::Closed { .. })
    ));
    assert_eq!(rig.opens.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn garbage_on_the_wire_is_survived() {
    let (mut rig, opener) = rig(vec![Mcu::default()], pty_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(fast_config(), opener, shutdown.clone());
    connected(&mut link).await;
    let mcu = rig.next_mcu().await;

    let mut out = [0u8; MAX_FRAME];
    let good = encode(
        &Frame::new(1, Message::Encoder(EncoderEvent { id: 1, delta: 5 })),
        &mut out,
    )
    .expect("encodes")
    .to_vec();
    let mut bad_crc = good.clone();
    bad_crc[3] ^= 0x40;

    // Line noise ended by a zero; a frame cut in half; a corrupted frame; a
    // frame of a kind from a newer firmware; a long run without a delimiter.
    mcu.script(Script::Raw(vec![0x55, 0xAA, 0xFF, 0x13, 0x00]));
    mcu.script(Script::Raw(good[..4].to_vec()));
    mcu.script(Script::Raw(vec![0x00]));
    mcu.script(Script::Raw(bad_crc));
    mcu.script(Script::Raw(raw_frame(&[0x05, 0x63, 0x01, 0x02])));
    mcu.script(Script::Raw(vec![0x7E; 300]));
    mcu.script(Script::Raw(vec![0x00]));
    mcu.script(Script::Raw(good));
    mcu.send(Message::Mute { muted: true });

    // Only the intact frames come out; the link never dropped.
    assert!(matches!(
        next(&mut link).await,
        LinkEvent::Encoder { id: 1, delta: 5 }
    ));
    assert!(matches!(next(&mut link).await, LinkEvent::Mute(true)));
    assert!(link.handle().is_connected());
    assert_eq!(rig.opens.load(Ordering::SeqCst), 1);

    stop(link, &shutdown).await;
}

#[tokio::test]
async fn heartbeat_timeout_detects_a_silent_mcu_and_reconnects() {
    let (mut rig, opener) = rig(vec![Mcu::default()], pty_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(fast_config(), opener, shutdown.clone());
    connected(&mut link).await;
    let mcu = rig.next_mcu().await;

    // The MCU hangs: the port stays open, nothing comes back.
    mcu.script(Script::GoSilent);
    match next(&mut link).await {
        LinkEvent::Disconnected {
            reason: LinkError::HeartbeatTimeout { device, .. },
        } => assert_eq!(device.to_str(), Some("/dev/sim-mcu")),
        other => panic!("expected a heartbeat timeout, got {other:?}"),
    }
    assert!(!link.handle().is_connected());

    // The port is reopened and the (new) MCU answers.
    connected(&mut link).await;
    let mcu = rig.next_mcu().await;
    mcu.send(Message::Mute { muted: true });
    assert!(matches!(next(&mut link).await, LinkEvent::Mute(true)));

    stop(link, &shutdown).await;
}

#[tokio::test]
async fn a_pulled_cable_is_reported_and_the_link_comes_back() {
    let (mut rig, opener) = rig(vec![Mcu::default()], pty_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(fast_config(), opener, shutdown.clone());
    connected(&mut link).await;
    let mcu = rig.next_mcu().await;
    mcu.send(Message::Button(ButtonEvent {
        id: 0,
        edge: Edge::Pressed,
        at_ms: 5,
    }));
    assert!(matches!(
        next(&mut link).await,
        LinkEvent::Button { pressed: true, .. }
    ));

    // The device vanishes, and the next three opens fail.
    rig.fail_next.store(3, Ordering::SeqCst);
    mcu.script(Script::Hangup);
    match next(&mut link).await {
        LinkEvent::Disconnected {
            reason: LinkError::Read { .. } | LinkError::Closed { .. },
        } => {}
        other => panic!("expected a read error or EOF, got {other:?}"),
    }

    // It comes back: Connected again, and events flow again.
    connected(&mut link).await;
    assert_eq!(rig.opens.load(Ordering::SeqCst), 1 + 3 + 1);
    let mcu = rig.next_mcu().await;
    mcu.send(Message::Encoder(EncoderEvent { id: 0, delta: 3 }));
    assert!(matches!(
        next(&mut link).await,
        LinkEvent::Encoder { id: 0, delta: 3 }
    ));

    stop(link, &shutdown).await;
}

#[tokio::test]
async fn a_cable_pulled_mid_frame_leaves_no_phantom_event_and_the_next_frames_decode() {
    let (mut rig, opener) = rig(vec![Mcu::default()], pty_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(fast_config(), opener, shutdown.clone());
    connected(&mut link).await;
    let mcu = rig.next_mcu().await;
    // Half of a button press's frame reaches the wire, then the cable goes.
    let press = Frame {
        seq: 7,
        msg: Message::Button(ButtonEvent {
            id: 0,
            edge: Edge::Pressed,
            at_ms: 9,
        }),
    };
    let mut out = [0u8; MAX_FRAME];
    let whole = encode(&press, &mut out)
        .expect("a frame that fits")
        .to_vec();
    mcu.script(Script::Raw(whole[..whole.len() / 2].to_vec()));
    mcu.script(Script::Hangup);
    match next(&mut link).await {
        LinkEvent::Disconnected {
            reason: LinkError::Read { .. } | LinkError::Closed { .. },
        } => {}
        other => panic!("the half frame is no event; expected the loss, got {other:?}"),
    }
    // Plugged back in: the half frame does not stick to the next one.
    connected(&mut link).await;
    let mcu = rig.next_mcu().await;
    mcu.send(Message::Button(ButtonEvent {
        id: 0,
        edge: Edge::Released,
        at_ms: 12,
    }));
    assert!(matches!(
        next(&mut link).await,
        LinkEvent::Button { pressed: false, .. }
    ));
    stop(link, &shutdown).await;
}

#[tokio::test]
async fn an_mcu_without_leds_rejects_led_commands() {
    let bare = Mcu {
        capabilities: Capabilities::BUTTON | Capabilities::MUTE | Capabilities::VOLUME,
        led_count: 0,
        ..Mcu::default()
    };
    let (_rig, opener) = rig(vec![bare], pty_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(fast_config(), opener, shutdown.clone());
    let hello = connected(&mut link).await;
    assert!(!hello.capabilities.contains(Capabilities::LED_RING));
    link.handle()
        .send(Command::Leds(LedPattern::Off))
        .expect("queued");
    match next(&mut link).await {
        LinkEvent::Rejected { command, code } => {
            assert_eq!(command, Command::Leds(LedPattern::Off));
            assert_eq!(code, AckCode::UNSUPPORTED);
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    stop(link, &shutdown).await;
}

#[tokio::test]
async fn send_reports_disconnected_full_and_shut_down() {
    // Never connected: the device is missing.
    let (rig_missing, opener) = rig(vec![Mcu::default()], duplex_pair);
    rig_missing.fail_next.store(usize::MAX, Ordering::SeqCst);
    let shutdown = CancellationToken::new();
    let link = Link::spawn(fast_config(), opener, shutdown.clone());
    let err = link
        .handle()
        .send(Command::Volume(10))
        .expect_err("not connected");
    assert!(matches!(err, SendError::Disconnected { .. }), "{err}");
    assert!(err.to_string().contains("/dev/sim-mcu"), "{err}");
    assert_eq!(err.into_command(), Command::Volume(10));
    stop(link, &shutdown).await;

    // Connected, but the MCU stopped reading: the pipe fills, the task
    // blocks writing, and the one-slot queue fills.
    let (mut rig, opener) = rig(vec![Mcu::default()], || Ok(tokio::io::duplex(64)));
    let shutdown = CancellationToken::new();
    let config = LinkConfig {
        command_capacity: 1,
        ..fast_config()
    };
    let mut link = Link::spawn(config, opener, shutdown.clone());
    connected(&mut link).await;
    let mcu = rig.next_mcu().await;
    mcu.script(Script::StopReading);
    let handle = link.handle();
    let mut full = false;
    for _ in 0..200 {
        tokio::task::yield_now().await;
        match handle.send(Command::Volume(20)) {
            Ok(()) => {}
            Err(SendError::Full { command, .. }) => {
                assert_eq!(command, Command::Volume(20));
                full = true;
                break;
            }
            Err(other) => panic!("expected Full, got {other}"),
        }
    }
    assert!(full, "the queue never filled");
    stop(link, &shutdown).await;
}

// Timing, in virtual time over an in-memory pipe.

fn slow_config() -> LinkConfig {
    LinkConfig {
        heartbeat_interval: Duration::from_secs(1),
        heartbeat_timeout: Duration::from_secs(3),
        reconnect_min: Duration::from_millis(100),
        reconnect_max: Duration::from_secs(1),
        ..LinkConfig::new("/dev/sim-mcu", 115_200)
    }
}

#[tokio::test(start_paused = true)]
async fn reconnect_backoff_doubles_up_to_the_maximum() {
    let (rig, opener) = rig(vec![Mcu::default()], duplex_pair);
    rig.fail_next.store(usize::MAX, Ordering::SeqCst);
    let shutdown = CancellationToken::new();
    let link = Link::spawn(slow_config(), opener, shutdown.clone());
    tokio::time::sleep(Duration::from_millis(4_650)).await;
    shutdown.cancel();
    link.join().await.expect("no panic");

    let times = rig.open_times.lock().expect("not poisoned").clone();
    let gaps: Vec<u128> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis())
        .collect();
    // Opens at 0, 0.1, 0.3, 0.7, 1.5, 2.5, 3.5 and 4.5 s.
    assert_eq!(gaps, [100, 200, 400, 800, 1000, 1000, 1000]);
}

#[tokio::test(start_paused = true)]
async fn heartbeat_timeout_is_exactly_the_configured_silence() {
    let (mut rig, opener) = rig(vec![Mcu::default()], duplex_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(slow_config(), opener, shutdown.clone());
    connected(&mut link).await;
    let mut mcu = rig.next_mcu().await;

    // Pongs keep it alive through many heartbeat intervals.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(link.handle().is_connected());
    mcu.saw(|m| matches!(m, Message::Ping { .. })).await;

    mcu.script(Script::GoSilent);
    // Let the MCU task take the script step before the clock moves on.
    tokio::task::yield_now().await;
    let silent_from = Instant::now();
    match next_within(&mut link, Duration::from_secs(10)).await {
        LinkEvent::Disconnected {
            reason: LinkError::HeartbeatTimeout { timeout, .. },
        } => assert_eq!(timeout, Duration::from_secs(3)),
        other => panic!("expected a heartbeat timeout, got {other:?}"),
    }
    // The last pong came at most one interval before the MCU went silent.
    let waited = silent_from.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited <= Duration::from_secs(3),
        "{waited:?}"
    );
    shutdown.cancel();
    link.join().await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn an_mcu_reboot_is_a_disconnect_and_a_connect() {
    let (mut rig, opener) = rig(vec![Mcu::default()], duplex_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(slow_config(), opener, shutdown.clone());
    connected(&mut link).await;
    let mut mcu = rig.next_mcu().await;
    mcu.saw(|m| matches!(m, Message::Hello(_))).await;

    // The firmware reboots and says Hello unprompted.
    let mcu_hello = Hello {
        version: PROTOCOL_VERSION,
        capabilities: Capabilities::ALL,
        led_count: 12,
        name: Name::try_from("sim-mcu 0.2").expect("short"),
    };
    mcu.send(Message::Hello(mcu_hello.clone()));
    match next(&mut link).await {
        LinkEvent::Disconnected {
            reason: LinkError::McuRestarted { .. },
        } => {}
        other => panic!("expected McuRestarted, got {other:?}"),
    }
    match next(&mut link).await {
        LinkEvent::Connected { hello } => assert_eq!(hello, mcu_hello),
        other => panic!("expected Connected, got {other:?}"),
    }
    // The host said Hello again; the MCU's answer (and its state report) is
    // taken as the reply, not as another reboot.
    mcu.saw(|m| matches!(m, Message::Hello(_))).await;
    assert!(matches!(next(&mut link).await, LinkEvent::Mute(false)));
    assert!(matches!(next(&mut link).await, LinkEvent::Volume(40)));
    mcu.send(Message::Mute { muted: true });
    assert!(matches!(next(&mut link).await, LinkEvent::Mute(true)));
    assert_eq!(rig.opens.load(Ordering::SeqCst), 1);

    shutdown.cancel();
    link.join().await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn an_incompatible_major_version_is_refused() {
    let future = Mcu {
        version: ProtocolVersion::new(PROTOCOL_VERSION.major() + 1, 0),
        ..Mcu::default()
    };
    let (rig, opener) = rig(vec![future], duplex_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(slow_config(), opener, shutdown.clone());
    // No Connected, ever; the link keeps retrying.
    let quiet = timeout(Duration::from_secs(5), link.next_event()).await;
    assert!(quiet.is_err(), "unexpected event {quiet:?}");
    assert!(rig.opens.load(Ordering::SeqCst) >= 3);
    assert!(!link.handle().is_connected());
    shutdown.cancel();
    link.join().await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn a_newer_minor_version_and_unknown_kinds_are_accepted() {
    let newer = Mcu {
        version: ProtocolVersion::new(PROTOCOL_VERSION.major(), PROTOCOL_VERSION.minor() + 3),
        capabilities: Capabilities(Capabilities::ALL.bits() | 0x0100),
        ..Mcu::default()
    };
    let (mut rig, opener) = rig(vec![newer], duplex_pair);
    let shutdown = CancellationToken::new();
    let mut link = Link::spawn(slow_config(), opener, shutdown.clone());
    let hello = connected(&mut link).await;
    assert_eq!(hello.version.minor(), PROTOCOL_VERSION.minor() + 3);
    let mcu = rig.next_mcu().await;
    // A message kind this host does not know, then one it does.
    mcu.script(Script::Raw(raw_frame(&[0x01, 0x2A, 0x09])));
    mcu.send(Message::Mute { muted: true });
    assert!(matches!(next(&mut link).await, LinkEvent::Mute(true)));
    shutdown.cancel();
    link.join().await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn dropping_the_events_stops_the_task_without_a_shutdown_signal() {
    let (_rig, opener) = rig(vec![Mcu::default()], duplex_pair);
    let mut link = Link::spawn(slow_config(), opener, CancellationToken::new());
    connected(&mut link).await;
    let handle = link.handle();
    timeout(STEP, link.join())
        .await
        .expect("the task ends")
        .expect("no panic");
    assert!(matches!(
        handle.send(Command::Volume(1)),
        Err(SendError::Closed { .. })
    ));
}

/// A simulated board with a microcontroller linked over a pseudo-terminal,
/// its events, and the microcontroller once it has said hello.
async fn linked_board() -> (
    Rig,
    hark_board::Board,
    mpsc::Receiver<hark_board::BoardEvent>,
    McuConn,
) {
    use hark_board::{Board, BoardConfig};

    let (mut rig, opener) = rig(vec![Mcu::default()], pty_pair);
    let config = BoardConfig {
        board: "simulated".into(),
        ..BoardConfig::default()
    };
    let mut board = Board::open(&config, std::path::Path::new("/")).expect("board");
    let events = board.take_events().expect("events");
    board
        .attach_link(Link::spawn(fast_config(), opener, CancellationToken::new()))
        .expect("link attached");
    let mut mcu = rig.next_mcu().await;
    mcu.saw(|m| matches!(m, Message::Hello(_))).await;
    (rig, board, events, mcu)
}

/// The link inside a board: the microcontroller's button and mute switch
/// come out as the board's events, through the same classifiers as GPIO
/// ones, and the lights go to its ring as patterns (again after a
/// reconnect).
#[tokio::test]
async fn a_board_takes_its_button_mute_and_lights_through_the_link() {
    use hark_board::{BoardEvent, button, status::Status};

    let (mut rig, board, mut events, mut mcu) = linked_board().await;
    // What the MCU shows on connecting: the board's current (idle) light.
    mcu.saw(|m| matches!(m, Message::SetLeds(LedPattern::Off)))
        .await;

    mcu.send(Message::Button(ButtonEvent {
        id: 0,
        edge: Edge::Pressed,
        at_ms: 10,
    }));
    assert_eq!(
        board_event(&mut events).await,
        Some(BoardEvent::Button(button::ButtonEvent::Press))
    );
    mcu.send(Message::Button(ButtonEvent {
        id: 0,
        edge: Edge::Released,
        at_ms: 200,
    }));
    assert_eq!(
        board_event(&mut events).await,
        Some(BoardEvent::Button(button::ButtonEvent::Release))
    );
    mcu.send(Message::Mute { muted: true });
    assert_eq!(board_event(&mut events).await, Some(BoardEvent::Mute(true)));

    board.show(Status::Muted, None);
    let shown = mcu
        .saw(|m| matches!(m, Message::SetLeds(LedPattern::Solid { .. })))
        .await;
    assert_eq!(
        shown,
        Message::SetLeds(LedPattern::Solid {
            color: Rgb { r: 255, g: 0, b: 0 },
            brightness: 255
        })
    );
    assert_eq!(
        *mcu.leds.lock().expect("not poisoned"),
        LedPattern::Solid {
            color: Rgb { r: 255, g: 0, b: 0 },
            brightness: 255
        }
    );

    // A running timer: protocol 1.0 cannot draw its countdown, so the ring
    // pulses slowly in the timer's colour.
    board.show(
        Status::Timer,
        Some(hark_board::status::Countdown {
            set_ms: 0,
            due_ms: u64::MAX,
        }),
    );
    let timer = mcu
        .saw(|m| matches!(m, Message::SetLeds(LedPattern::Pulse { .. })))
        .await;
    assert!(
        matches!(
            timer,
            Message::SetLeds(LedPattern::Pulse {
                period_ms: 2000,
                ..
            })
        ),
        "{timer:?}"
    );
    board.show(Status::Muted, None);

    // The cable is pulled and put back: the ring gets the light again.
    mcu.script(Script::Hangup);
    let mut mcu = rig.next_mcu().await;
    mcu.saw(|m| {
        matches!(
            m,
            Message::SetLeds(LedPattern::Solid {
                color: Rgb { r: 255, g: 0, b: 0 },
                ..
            })
        )
    })
    .await;
    drop(board);
}

#[tokio::test]
async fn a_button_held_when_the_cable_is_pulled_is_let_go() {
    use hark_board::{BoardEvent, button};

    let (_rig, board, mut events, mcu) = linked_board().await;
    // The person holds push-to-talk; the cable is pulled in the middle of
    // the next frame (the release that never arrives).
    mcu.send(Message::Button(ButtonEvent {
        id: 0,
        edge: Edge::Pressed,
        at_ms: 10,
    }));
    assert_eq!(
        board_event(&mut events).await,
        Some(BoardEvent::Button(button::ButtonEvent::Press))
    );
    let release = Frame {
        seq: 9,
        msg: Message::Button(ButtonEvent {
            id: 0,
            edge: Edge::Released,
            at_ms: 900,
        }),
    };
    let mut out = [0u8; MAX_FRAME];
    let whole = encode(&release, &mut out)
        .expect("a frame that fits")
        .to_vec();
    mcu.script(Script::Raw(whole[..whole.len() / 2].to_vec()));
    mcu.script(Script::Hangup);
    // A button no one can see is not held: push-to-talk ends, as if the
    // person had let go, rather than keeping the microphone open for good.
    assert_eq!(
        board_event(&mut events).await,
        Some(BoardEvent::Button(button::ButtonEvent::Release))
    );
    drop(board);
}

/// Shuts the link down and waits for its task to end.
async fn stop(link: Link, shutdown: &CancellationToken) {
    shutdown.cancel();
    timeout(STEP, link.join())
        .await
        .expect("the task ends")
        .expect("no panic");
}

async fn board_event(
    events: &mut mpsc::Receiver<hark_board::BoardEvent>,
) -> Option<hark_board::BoardEvent> {
    timeout(STEP, events.recv())
        .await
        .expect("a board event in time")
}
