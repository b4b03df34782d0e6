//! The UART link to the board's microcontroller (MCU), host side.
//!
//! The MCU carries the push-to-talk button, a rotary encoder, the mute
//! switch and the LED ring; it speaks [`hark_board_protocol`] (postcard
//! messages in COBS frames with a CRC). [`Link::spawn`] starts one tokio task
//! that owns the port and:
//!
//! 1. opens it (through an [`Opener`]), writes a 0x00 (ending any
//!    half-frame the MCU's receiver holds) and a `Hello`;
//! 2. waits for the MCU's `Hello` (within the heartbeat timeout), refuses an
//!    incompatible major protocol version, and reports
//!    [`LinkEvent::Connected`] with the MCU's capabilities;
//! 3. forwards the MCU's events as [`LinkEvent`]s on a bounded channel,
//!    sends the commands given to [`LinkHandle::send`], answers the MCU's
//!    pings, and pings the MCU every heartbeat interval;
//! 4. when the port fails (open error, read or write error, end of file) or
//!    nothing arrives for the heartbeat timeout, reports
//!    [`LinkEvent::Disconnected`] (if it was connected), waits, and opens the
//!    port again, doubling the wait from `reconnect_min` up to
//!    `reconnect_max` while it keeps failing;
//! 5. ends when its [`CancellationToken`] is cancelled, or when the event
//!    receiver is dropped (nobody is listening; [`Link::join`] does that).
//!
//! ```no_run
//! use hark_board::link::{Command, Link, LinkConfig, LinkEvent};
//! use hark_board_protocol::{LedPattern, Rgb};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run() {
//! let shutdown = CancellationToken::new();
//! let mut link = Link::spawn_serial(LinkConfig::new("/dev/serial0", 115_200), shutdown.clone());
//! let handle = link.handle();
//! while let Some(event) = link.next_event().await {
//!     match event {
//!         LinkEvent::Connected { hello } => {
//!             // The MCU's LED state is unknown after (re)connecting: re-apply.
//!             let _ = handle.send(Command::Leds(LedPattern::Solid {
//!                 color: Rgb::new(0, 0, 255),
//!                 brightness: 64,
//!             }));
//!         }
//!         LinkEvent::Button { pressed: true, .. } => { /* start listening */ }
//!         _ => {}
//!     }
//! }
//! # }
//! ```
//!
//! # Shutdown
//!
//! The task watches a [`tokio_util::sync::CancellationToken`]: cancel it (on
//! SIGTERM or Ctrl-C), then [`Link::join`] to wait until the port is closed.
//! A token rather than a bare future so every await point of the task —
//! opening, the handshake, reading, waiting for a full event channel,
//! backing off — can watch the same signal.
//!
//! # Commands
//!
//! [`LinkHandle::send`] never waits: it queues the command (bounded) or
//! returns it inside a [`SendError`] when the queue is full or the MCU is not
//! connected. Commands queued when the link drops are discarded: they would
//! be stale by the time it is back, and the MCU forgets its state when it
//! resets, so the host re-applies its state on [`LinkEvent::Connected`]. The
//! MCU acknowledges each command; one it refuses comes back as
//! [`LinkEvent::Rejected`].
//!
//! # What the hardware needs
//!
//! The daemon's user must be in the `dialout` group to open `/dev/serial0`
//! (the 40-pin header's UART on GPIO 14/15; on a Pi, enable it with
//! `enable_uart=1` and keep the serial console off it) or a USB adapter such
//! as `/dev/ttyACM0`. The port is opened 8N1, without flow control, and
//! exclusively (TIOCEXCL), so a second Hark, or a terminal program, gets an
//! [`LinkError::Open`] naming the device rather than half the bytes.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hark_board_protocol::{
    AckCode, Capabilities, DecodeError, Decoder, Edge, Frame, Hello, LedPattern, MAX_FRAME,
    Message, Name, PROTOCOL_VERSION, encode,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_serial::SerialPortBuilderExt;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

/// How the link runs. Durations are wall-clock time on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkConfig {
    /// Serial device, e.g. `/dev/serial0` or `/dev/ttyACM0`; named in every
    /// error and log line.
    pub device: PathBuf,
    /// Baud rate, bits per second (the MCU's firmware must match).
    pub baud: u32,
    /// How often the host pings the MCU. Default 1 s.
    pub heartbeat_interval: Duration,
    /// How long without any intact frame from the MCU before the link is
    /// presumed dead; also the limit for the MCU's `Hello` and for one
    /// write. Default 3 s; should be several heartbeat intervals.
    pub heartbeat_timeout: Duration,
    /// First wait before reopening after a failure. Default 250 ms.
    pub reconnect_min: Duration,
    /// Longest wait between attempts; the wait doubles up to this while the
    /// port keeps failing. Default 10 s.
    pub reconnect_max: Duration,
    /// Events buffered for a slow consumer before the link stops reading
    /// the port (the UART then buffers). Default 64.
    pub event_capacity: usize,
    /// Commands queued by [`LinkHandle::send`] before it reports
    /// [`SendError::Full`]. Default 16.
    pub command_capacity: usize,
}

impl LinkConfig {
    /// The defaults for `device` at `baud` bits per second.
    pub fn new(device: impl Into<PathBuf>, baud: u32) -> Self {
        Self {
            device: device.into(),
            baud,
            heartbeat_interval: Duration::from_secs(1),
            heartbeat_timeout: Duration::from_secs(3),
            reconnect_min: Duration::from_millis(250),
            reconnect_max: Duration::from_secs(10),
            event_capacity: 64,
            command_capacity: 16,
        }
    }

    /// The defaults for a board profile's `[link]` table.
    pub fn from_profile(link: &crate::profile::Link) -> Self {
        Self::new(link.device.clone(), link.baud)
    }
}

/// What the link tells the host, in the order it happened.
#[derive(Debug)]
pub enum LinkEvent {
    /// The MCU answered the handshake: what it is and what it has. Re-apply
    /// LED and volume state now.
    Connected {
        /// The MCU's `Hello`.
        hello: Hello,
    },
    /// A button went down or up (debounced by the MCU).
    Button {
        /// Which button (0 is push-to-talk).
        id: u8,
        /// `true` on press, `false` on release.
        pressed: bool,
        /// The MCU's clock at the edge, milliseconds since it booted
        /// (wrapping); only differences between events mean anything.
        at_ms: u32,
    },
    /// An encoder turned.
    Encoder {
        /// Which encoder (0 is the main knob).
        id: u8,
        /// Detents, positive clockwise.
        delta: i16,
    },
    /// The mute switch is now on (`true`) or off; also sent on connecting.
    Mute(bool),
    /// The volume the MCU holds, percent (0–100); also sent on connecting.
    Volume(u8),
    /// The MCU refused a command.
    Rejected {
        /// The command.
        command: Command,
        /// Why, e.g. [`AckCode::UNSUPPORTED`].
        code: AckCode,
    },
    /// The link went down after being connected; the task is reconnecting.
    Disconnected {
        /// Why.
        reason: LinkError,
    },
}

/// What the host asks of the MCU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Show a pattern on the LED ring.
    Leds(LedPattern),
    /// Set the volume the MCU holds or shows, percent (0–100; the MCU
    /// refuses more).
    Volume(u8),
}

impl Command {
    fn message(self) -> Message {
        match self {
            Command::Leds(pattern) => Message::SetLeds(pattern),
            Command::Volume(percent) => Message::SetVolume { percent },
        }
    }
}

/// Why the link is down. Every variant names the device.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The device could not be opened: it does not exist (unplugged USB
    /// adapter, UART not enabled), the user lacks permission (not in
    /// `dialout`), or another process holds it.
    #[error("cannot open {}: {source}", device.display())]
    Open {
        /// The device.
        device: PathBuf,
        /// The OS's reason.
        #[source]
        source: io::Error,
    },
    /// Reading failed: typically the USB adapter was unplugged (EIO).
    #[error("reading {}: {source}", device.display())]
    Read {
        /// The device.
        device: PathBuf,
        /// The OS's reason.
        #[source]
        source: io::Error,
    },
    /// Writing failed.
    #[error("writing {}: {source}", device.display())]
    Write {
        /// The device.
        device: PathBuf,
        /// The OS's reason.
        #[source]
        source: io::Error,
    },
    /// A write did not complete in time: the MCU is not reading (a UART
    /// with flow control, or a stuck pseudo-terminal).
    #[error("writing {} took longer than {timeout:?}", device.display())]
    WriteTimeout {
        /// The device.
        device: PathBuf,
        /// The limit (the heartbeat timeout).
        timeout: Duration,
    },
    /// The port reported end of file: its other end went away.
    #[error("{} closed", device.display())]
    Closed {
        /// The device.
        device: PathBuf,
    },
    /// The MCU did not answer `Hello`: wrong baud rate, no firmware, or a
    /// different protocol on the line.
    #[error("no Hello from the microcontroller on {} within {timeout:?}", device.display())]
    HelloTimeout {
        /// The device.
        device: PathBuf,
        /// The limit (the heartbeat timeout).
        timeout: Duration,
    },
    /// Nothing intact arrived for the heartbeat timeout, pongs included:
    /// the MCU hangs, or the line is broken.
    #[error("nothing from the microcontroller on {} for {timeout:?}", device.display())]
    HeartbeatTimeout {
        /// The device.
        device: PathBuf,
        /// The heartbeat timeout.
        timeout: Duration,
    },
    /// The MCU speaks an incompatible (different major) protocol version:
    /// update its firmware or Hark.
    #[error(
        "microcontroller on {} ({name}) speaks protocol {theirs}, incompatible with Hark's {ours}",
        device.display()
    )]
    IncompatibleVersion {
        /// The device.
        device: PathBuf,
        /// The firmware's name.
        name: Name,
        /// Its version.
        theirs: hark_board_protocol::ProtocolVersion,
        /// Ours.
        ours: hark_board_protocol::ProtocolVersion,
    },
    /// The MCU sent an unprompted `Hello`: it rebooted, and lost its LED and
    /// volume state. A [`LinkEvent::Connected`] follows at once.
    #[error("microcontroller on {} restarted", device.display())]
    McuRestarted {
        /// The device.
        device: PathBuf,
    },
    /// A frame could not be encoded (not expected: buffers are sized for
    /// the largest frame).
    #[error("encoding a frame for {}: {source}", device.display())]
    Encode {
        /// The device.
        device: PathBuf,
        /// The encoder's reason.
        #[source]
        source: hark_board_protocol::EncodeError,
    },
}

/// Why [`LinkHandle::send`] did not queue a command; each carries it back.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The MCU is not connected (yet, or any more).
    #[error("board link on {} is not connected", device.display())]
    Disconnected {
        /// The device.
        device: PathBuf,
        /// The command not sent.
        command: Command,
    },
    /// The command queue is full: the link is slower than the commands.
    #[error("board link command queue on {} is full", device.display())]
    Full {
        /// The device.
        device: PathBuf,
        /// The command not sent.
        command: Command,
    },
    /// The link task has ended (shut down).
    #[error("board link on {} has shut down", device.display())]
    Closed {
        /// The device.
        device: PathBuf,
        /// The command not sent.
        command: Command,
    },
}

impl SendError {
    /// The command that was not sent.
    pub fn into_command(self) -> Command {
        match self {
            SendError::Disconnected { command, .. }
            | SendError::Full { command, .. }
            | SendError::Closed { command, .. } => command,
        }
    }
}

/// Opens the port, again after each failure: the real serial device, or
/// anything else that reads and writes bytes (a pseudo-terminal or an
/// in-memory pipe in tests).
///
/// Any `FnMut() -> impl Future<Output = io::Result<Port>>` closure is an
/// opener.
pub trait Opener: Send + 'static {
    /// The open port.
    type Port: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Opens the port.
    fn open(&mut self) -> impl Future<Output = io::Result<Self::Port>> + Send;
}

impl<F, Fut, P> Opener for F
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = io::Result<P>> + Send,
    P: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Port = P;

    fn open(&mut self) -> impl Future<Output = io::Result<P>> + Send {
        self()
    }
}

/// The real serial port: `device` at `baud`, 8N1, no flow control,
/// exclusive.
#[derive(Debug, Clone)]
pub struct SerialOpener {
    device: PathBuf,
    baud: u32,
}

impl SerialOpener {
    /// An opener for `device` at `baud` bits per second.
    pub fn new(device: impl Into<PathBuf>, baud: u32) -> Self {
        Self {
            device: device.into(),
            baud,
        }
    }
}

impl Opener for SerialOpener {
    type Port = tokio_serial::SerialStream;

    async fn open(&mut self) -> io::Result<tokio_serial::SerialStream> {
        // serialport takes the path as a string; a non-UTF-8 device path is
        // passed lossily and then fails to open, with the path in the error.
        tokio_serial::new(self.device.to_string_lossy(), self.baud)
            .data_bits(tokio_serial::DataBits::Eight)
            .parity(tokio_serial::Parity::None)
            .stop_bits(tokio_serial::StopBits::One)
            .flow_control(tokio_serial::FlowControl::None)
            .open_native_async()
            .map_err(io::Error::from)
    }
}

/// Sends commands to the MCU; cheap to clone.
#[derive(Debug, Clone)]
pub struct LinkHandle {
    device: Arc<Path>,
    commands: mpsc::Sender<Command>,
    connected: Arc<AtomicBool>,
}

impl LinkHandle {
    /// Queues `command` without waiting. Fails, handing the command back,
    /// when the MCU is not connected, the queue is full, or the link has
    /// shut down.
    pub fn send(&self, command: Command) -> Result<(), SendError> {
        let device = || self.device.to_path_buf();
        if !self.is_connected() {
            if self.commands.is_closed() {
                return Err(SendError::Closed {
                    device: device(),
                    command,
                });
            }
            return Err(SendError::Disconnected {
                device: device(),
                command,
            });
        }
        self.commands.try_send(command).map_err(|e| match e {
            mpsc::error::TrySendError::Full(command) => SendError::Full {
                device: device(),
                command,
            },
            mpsc::error::TrySendError::Closed(command) => SendError::Closed {
                device: device(),
                command,
            },
        })
    }

    /// Whether the MCU is connected (handshake done, link alive) right now.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// The device this link runs on.
    pub fn device(&self) -> &Path {
        &self.device
    }
}

/// A running link: its events, a handle for commands, and its task.
#[derive(Debug)]
pub struct Link {
    handle: LinkHandle,
    events: mpsc::Receiver<LinkEvent>,
    task: JoinHandle<()>,
}

impl Link {
    /// Starts the link task on the current tokio runtime, opening the port
    /// with `opener`. It runs until `shutdown` is cancelled or the event
    /// receiver is dropped.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (as `tokio::spawn` does).
    pub fn spawn<O: Opener>(config: LinkConfig, opener: O, shutdown: CancellationToken) -> Link {
        let device: Arc<Path> = Arc::from(config.device.as_path());
        // mpsc channels panic on a zero capacity; a zero in the config means
        // "as small as possible".
        let (event_tx, events) = mpsc::channel(config.event_capacity.max(1));
        let (command_tx, commands) = mpsc::channel(config.command_capacity.max(1));
        let connected = Arc::new(AtomicBool::new(false));
        let span = info_span!("board_link", device = %config.device.display());
        let task = Task {
            config,
            opener,
            shutdown,
            events: event_tx,
            commands,
            connected: connected.clone(),
            seq: 0,
            nonce: 0,
        };
        let task = tokio::spawn(task.run().instrument(span));
        Link {
            handle: LinkHandle {
                device,
                commands: command_tx,
                connected,
            },
            events,
            task,
        }
    }

    /// [`Link::spawn`] on the real serial port `config.device`.
    pub fn spawn_serial(config: LinkConfig, shutdown: CancellationToken) -> Link {
        let opener = SerialOpener::new(config.device.clone(), config.baud);
        Link::spawn(config, opener, shutdown)
    }

    /// A handle for sending commands.
    pub fn handle(&self) -> LinkHandle {
        self.handle.clone()
    }

    /// The next event; `None` once the task has ended.
    pub async fn next_event(&mut self) -> Option<LinkEvent> {
        self.events.recv().await
    }

    /// Stops the task and waits until it has closed the port. Dropping the
    /// event receiver is what stops it, so cancelling the shutdown token
    /// first is not required (but is what a daemon does, to stop everything
    /// at once). Returns the task's panic, if it panicked.
    pub async fn join(self) -> Result<(), tokio::task::JoinError> {
        drop(self.events);
        self.task.await
    }

    /// The parts, for callers that route events and commands separately.
    pub fn into_parts(self) -> (LinkHandle, mpsc::Receiver<LinkEvent>, JoinHandle<()>) {
        (self.handle, self.events, self.task)
    }
}

/// How a session (one open port) ended.
enum End {
    /// Shutdown, or nobody listens to events: the task ends.
    Stop,
    /// The port failed; `connected` says whether the handshake had
    /// completed (so a `Disconnected` is due).
    Failed { error: LinkError, connected: bool },
}

/// Frames in flight awaiting acks, at most this many (older ones are
/// forgotten: their acks are then merely logged).
const MAX_IN_FLIGHT: usize = 32;

/// Bytes per read: a UART at 115200 baud delivers ~11.5 bytes per ms.
const READ_CHUNK: usize = 256;

/// The host's name in its `Hello`.
const HOST_NAME: &str = concat!("hark ", env!("CARGO_PKG_VERSION"));

struct Task<O> {
    config: LinkConfig,
    opener: O,
    shutdown: CancellationToken,
    events: mpsc::Sender<LinkEvent>,
    commands: mpsc::Receiver<Command>,
    connected: Arc<AtomicBool>,
    /// Our next frame's sequence number.
    seq: u16,
    /// Our next ping's nonce.
    nonce: u32,
}

/// One open port's state.
struct Session<P> {
    port: P,
    decoder: Decoder,
    /// Commands sent and not yet acked, by sequence number.
    in_flight: VecDeque<(u16, Command)>,
    /// We sent `Hello` and the MCU's next `Hello` is its answer, not a
    /// reboot.
    hello_pending: bool,
    /// When the last intact frame arrived.
    last_rx: Instant,
    /// Frames read with the MCU's `Hello`, not handled yet.
    pending: Vec<Frame>,
}

impl<O: Opener> Task<O> {
    async fn run(mut self) {
        let mut wait = self.config.reconnect_min;
        // Log the first of a run of open failures loudly, the rest quietly: a
        // board without its MCU plugged in would otherwise fill the journal.
        let mut open_failures = 0u32;
        loop {
            let opened = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                () = self.events.closed() => break,
                opened = self.opener.open() => opened,
            };
            match opened {
                Err(source) => {
                    let error = LinkError::Open {
                        device: self.config.device.clone(),
                        source,
                    };
                    if open_failures == 0 {
                        warn!(%error, "board link down; retrying");
                    } else {
                        debug!(%error, attempt = open_failures + 1, "still down");
                    }
                    open_failures = open_failures.saturating_add(1);
                }
                Ok(port) => {
                    open_failures = 0;
                    match self.session(port).await {
                        End::Stop => break,
                        End::Failed { error, connected } => {
                            self.connected.store(false, Ordering::Release);
                            self.discard_commands();
                            if connected {
                                warn!(%error, "board link lost; reconnecting");
                                // A link that worked gets a quick retry.
                                wait = self.config.reconnect_min;
                                if !self.emit(LinkEvent::Disconnected { reason: error }).await {
                                    break;
                                }
                            } else {
                                warn!(%error, "board link handshake failed; retrying");
                            }
                        }
                    }
                }
            }
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                () = self.events.closed() => break,
                () = tokio::time::sleep(wait) => {}
            }
            wait = wait.saturating_mul(2).min(self.config.reconnect_max);
        }
        self.connected.store(false, Ordering::Release);
        // Closing the command queue makes `LinkHandle::send` say "shut
        // down" rather than "disconnected".
        self.commands.close();
        debug!("board link task ended");
    }

    /// Runs one open port until it fails or the task stops.
    async fn session(&mut self, port: O::Port) -> End {
        let mut s = Session {
            port,
            decoder: Decoder::new(),
            in_flight: VecDeque::new(),
            hello_pending: true,
            last_rx: Instant::now(),
            pending: Vec::new(),
        };
        let fail = |error| End::Failed {
            error,
            connected: false,
        };
        // A lone delimiter first: whatever half-frame the MCU's decoder
        // holds (from before we opened) ends here, so our Hello is clean.
        if let Err(error) = self.write_bytes(&mut s, &[0]).await {
            return fail(error);
        }
        if let Err(error) = self.send_hello(&mut s).await {
            return fail(error);
        }
        let hello = match self.handshake(&mut s).await {
            Ok(Some(hello)) => hello,
            Ok(None) => return End::Stop,
            Err(error) => return fail(error),
        };
        info!(
            firmware = %hello.name,
            version = %hello.version,
            capabilities = format_args!("{:#06x}", hello.capabilities.bits()),
            leds = hello.led_count,
            "board link connected"
        );
        self.connected.store(true, Ordering::Release);
        if !self.emit(LinkEvent::Connected { hello }).await {
            return End::Stop;
        }
        match self.serve(&mut s).await {
            Ok(()) => End::Stop,
            Err(error) => End::Failed {
                error,
                connected: true,
            },
        }
    }

    /// Waits for the MCU's `Hello`. `Ok(None)`: stop.
    async fn handshake(&mut self, s: &mut Session<O::Port>) -> Result<Option<Hello>, LinkError> {
        let timeout = self.config.heartbeat_timeout;
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; READ_CHUNK];
        loop {
            let n = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return Ok(None),
                () = self.events.closed() => return Ok(None),
                read = s.port.read(&mut buf) => self.check_read(read)?,
                () = tokio::time::sleep_until(deadline) => {
                    return Err(LinkError::HelloTimeout {
                        device: self.config.device.clone(),
                        timeout,
                    });
                }
            };
            let mut frames = Vec::new();
            for result in s.decoder.feed(&buf[..n]) {
                match result {
                    Ok(frame) => frames.push(frame),
                    Err(error) => log_decode_error(&error),
                }
            }
            let mut frames = frames.into_iter();
            while let Some(frame) = frames.next() {
                s.last_rx = Instant::now();
                match frame.msg {
                    Message::Hello(hello) => {
                        self.check_version(&hello)?;
                        s.hello_pending = false;
                        // Frames after the Hello in the same read (the
                        // MCU's state report) are handled once `Connected`
                        // has been reported.
                        s.pending = frames.collect();
                        return Ok(Some(hello));
                    }
                    Message::Ping { nonce } => {
                        self.send(s, Message::Pong { nonce }).await?;
                    }
                    other => debug!(kind = other.kind(), "frame before Hello ignored"),
                }
            }
        }
    }

    fn check_version(&self, hello: &Hello) -> Result<(), LinkError> {
        if PROTOCOL_VERSION.is_compatible_with(hello.version) {
            if hello.version > PROTOCOL_VERSION {
                // Newer minor: fine; its new kinds are skipped by the decoder.
                info!(theirs = %hello.version, ours = %PROTOCOL_VERSION,
                    "microcontroller speaks a newer minor protocol version");
            }
            Ok(())
        } else {
            Err(LinkError::IncompatibleVersion {
                device: self.config.device.clone(),
                name: hello.name.clone(),
                theirs: hello.version,
                ours: PROTOCOL_VERSION,
            })
        }
    }

    /// The connected loop. `Ok(())`: stop.
    async fn serve(&mut self, s: &mut Session<O::Port>) -> Result<(), LinkError> {
        let interval = self.config.heartbeat_interval;
        let timeout = self.config.heartbeat_timeout;
        let mut ping = tokio::time::interval_at(Instant::now() + interval, interval);
        // After a stall (slow consumer), ping once, not a burst.
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut buf = [0u8; READ_CHUNK];
        let mut frames = std::mem::take(&mut s.pending);
        loop {
            for frame in frames.drain(..) {
                if !self.handle_frame(s, frame).await? {
                    return Ok(());
                }
            }
            let deadline = s.last_rx + timeout;
            tokio::select! {
                // Shutdown first; then bytes already read, so a busy
                // consumer does not make a live MCU look dead.
                biased;
                () = self.shutdown.cancelled() => return Ok(()),
                // Nobody listens any more: stop rather than wait for the
                // next event to find out.
                () = self.events.closed() => return Ok(()),
                read = s.port.read(&mut buf) => {
                    let n = self.check_read(read)?;
                    for result in s.decoder.feed(&buf[..n]) {
                        match result {
                            Ok(frame) => frames.push(frame),
                            Err(error) => {
                                // An intact frame of a newer kind still
                                // proves the MCU alive.
                                if error.is_unknown_kind() {
                                    s.last_rx = Instant::now();
                                }
                                log_decode_error(&error);
                            }
                        }
                    }
                }
                Some(command) = self.commands.recv() => {
                    let seq = self.send(s, command.message()).await?;
                    if s.in_flight.len() == MAX_IN_FLIGHT {
                        s.in_flight.pop_front();
                    }
                    s.in_flight.push_back((seq, command));
                }
                _ = ping.tick() => {
                    let nonce = self.nonce;
                    self.nonce = self.nonce.wrapping_add(1);
                    self.send(s, Message::Ping { nonce }).await?;
                }
                () = tokio::time::sleep_until(deadline) => {
                    return Err(LinkError::HeartbeatTimeout {
                        device: self.config.device.clone(),
                        timeout,
                    });
                }
            }
        }
    }

    /// Acts on one frame from the MCU. `Ok(false)`: stop.
    async fn handle_frame(
        &mut self,
        s: &mut Session<O::Port>,
        frame: Frame,
    ) -> Result<bool, LinkError> {
        s.last_rx = Instant::now();
        let event = match frame.msg {
            Message::Hello(hello) => {
                self.check_version(&hello)?;
                if s.hello_pending {
                    // The answer to our own Hello (sent after a reboot).
                    s.hello_pending = false;
                    return Ok(true);
                }
                // Unprompted: the MCU rebooted. Its state is gone, and so
                // are our commands' acks; tell it who we are again.
                s.in_flight.clear();
                let reason = LinkError::McuRestarted {
                    device: self.config.device.clone(),
                };
                warn!(error = %reason, "board link reset");
                if !self.emit(LinkEvent::Disconnected { reason }).await {
                    return Ok(false);
                }
                self.send_hello(s).await?;
                LinkEvent::Connected { hello }
            }
            Message::Ping { nonce } => {
                self.send(s, Message::Pong { nonce }).await?;
                return Ok(true);
            }
            Message::Pong { nonce } => {
                debug!(nonce, "pong");
                return Ok(true);
            }
            Message::Ack(ack) => {
                let Some(at) = s.in_flight.iter().position(|(seq, _)| *seq == ack.seq) else {
                    debug!(seq = ack.seq, code = %ack.code, "ack for no command in flight");
                    return Ok(true);
                };
                let Some((_, command)) = s.in_flight.remove(at) else {
                    return Ok(true);
                };
                if ack.code.is_ok() {
                    return Ok(true);
                }
                warn!(?command, code = %ack.code, "microcontroller refused a command");
                LinkEvent::Rejected {
                    command,
                    code: ack.code,
                }
            }
            Message::Button(button) => LinkEvent::Button {
                id: button.id,
                pressed: button.edge == Edge::Pressed,
                at_ms: button.at_ms,
            },
            Message::Encoder(encoder) => LinkEvent::Encoder {
                id: encoder.id,
                delta: encoder.delta,
            },
            Message::Mute { muted } => LinkEvent::Mute(muted),
            Message::Volume { percent } => {
                if percent > 100 {
                    warn!(
                        percent,
                        "microcontroller reported a volume above 100%; clamped"
                    );
                }
                LinkEvent::Volume(percent.min(100))
            }
            Message::SetVolume { .. } | Message::SetLeds(_) => {
                warn!(
                    kind = frame.msg.kind(),
                    "host-to-microcontroller command received from the microcontroller; ignored"
                );
                return Ok(true);
            }
        };
        Ok(self.emit(event).await)
    }

    /// Sends an event, unless the task is told to stop meanwhile. Returns
    /// whether to carry on.
    async fn emit(&mut self, event: LinkEvent) -> bool {
        tokio::select! {
            biased;
            () = self.shutdown.cancelled() => false,
            sent = self.events.send(event) => sent.is_ok(),
        }
    }

    async fn send_hello(&mut self, s: &mut Session<O::Port>) -> Result<(), LinkError> {
        let mut name = Name::new();
        // HOST_NAME is short ASCII; were it too long, the name is cut, not
        // the Hello.
        for c in HOST_NAME.chars() {
            if name.push(c).is_err() {
                break;
            }
        }
        let hello = Hello {
            version: PROTOCOL_VERSION,
            capabilities: Capabilities::ALL,
            led_count: 0,
            name,
        };
        s.hello_pending = true;
        self.send(s, Message::Hello(hello)).await.map(drop)
    }

    /// Sends `msg` in a frame; returns the frame's sequence number.
    async fn send(&mut self, s: &mut Session<O::Port>, msg: Message) -> Result<u16, LinkError> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let mut out = [0u8; MAX_FRAME];
        let bytes =
            encode(&Frame::new(seq, msg), &mut out).map_err(|source| LinkError::Encode {
                device: self.config.device.clone(),
                source,
            })?;
        self.write_bytes(s, bytes).await?;
        Ok(seq)
    }

    async fn write_bytes(
        &mut self,
        s: &mut Session<O::Port>,
        bytes: &[u8],
    ) -> Result<(), LinkError> {
        let timeout = self.config.heartbeat_timeout;
        let write = async {
            s.port.write_all(bytes).await?;
            s.port.flush().await
        };
        match tokio::time::timeout(timeout, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(LinkError::Write {
                device: self.config.device.clone(),
                source,
            }),
            Err(_elapsed) => Err(LinkError::WriteTimeout {
                device: self.config.device.clone(),
                timeout,
            }),
        }
    }

    fn check_read(&self, read: io::Result<usize>) -> Result<usize, LinkError> {
        match read {
            Ok(0) => Err(LinkError::Closed {
                device: self.config.device.clone(),
            }),
            Ok(n) => Ok(n),
            Err(source) => Err(LinkError::Read {
                device: self.config.device.clone(),
                source,
            }),
        }
    }

    /// Drops commands queued for a link that went down (see the module
    /// docs on why they are not kept).
    fn discard_commands(&mut self) {
        let mut dropped = 0usize;
        while self.commands.try_recv().is_ok() {
            dropped += 1;
        }
        if dropped > 0 {
            debug!(dropped, "discarded commands queued for the lost link");
        }
    }
}

fn log_decode_error(error: &DecodeError) {
    if error.is_unknown_kind() {
        // A newer firmware's message: expected, not a fault.
        debug!(%error, "skipped a frame");
    } else {
        warn!(%error, "bad frame from the microcontroller; skipped");
    }
}
