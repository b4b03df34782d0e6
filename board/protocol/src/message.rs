//! The messages, each carried in a [`Frame`] with a sequence number.
//!
//! postcard encodes an enum as its variant's index (a varint) followed by the
//! variant's fields, so **the order of the variants below is the wire
//! format**: new kinds are only ever appended, never inserted or reordered
//! (see the crate docs on versioning).

use core::ops::BitOr;

use postcard::experimental::max_size::MaxSize;
use serde::{Deserialize, Serialize};

/// Bytes available for the firmware's name in [`Hello`].
pub const NAME_LEN: usize = 24;

/// A firmware or host name: UTF-8, at most [`NAME_LEN`] bytes.
pub type Name = heapless::String<NAME_LEN>;

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::new(1, 0);

/// One frame on the wire: a sender's sequence number and a message.
///
/// Each side numbers its own frames, starting anywhere and adding one
/// (wrapping) per frame sent; [`Message::Ack`] names the sequence number of
/// the frame it acknowledges.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub struct Frame {
    /// The sender's sequence number of this frame.
    pub seq: u16,
    /// What the frame says.
    pub msg: Message,
}

impl Frame {
    /// A frame with sequence number `seq` carrying `msg`.
    pub const fn new(seq: u16, msg: Message) -> Self {
        Self { seq, msg }
    }
}

/// Everything the host and the microcontroller (MCU) say to each other.
///
/// "host → MCU" and "MCU → host" give the direction; a message received in
/// the wrong direction is ignored (logged) by the receiver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub enum Message {
    /// Kind 0, both directions. The host sends it when it opens the port; the
    /// MCU answers every host `Hello` with its own, and also sends one
    /// unprompted when it boots (so the host notices an MCU reset). Right
    /// after its `Hello` the MCU reports its current state ([`Message::Mute`],
    /// [`Message::Volume`]) for the controls it has.
    Hello(Hello),
    /// Kind 1, both directions: "are you there?". The receiver answers with a
    /// [`Message::Pong`] carrying the same nonce. The host pings at its
    /// heartbeat interval and presumes the link dead when nothing arrives
    /// within its heartbeat timeout.
    Ping {
        /// Any value; echoed back in the pong.
        nonce: u32,
    },
    /// Kind 2, both directions: the answer to a [`Message::Ping`].
    Pong {
        /// The nonce of the ping being answered.
        nonce: u32,
    },
    /// Kind 3, MCU → host: the outcome of a command ([`Message::SetLeds`],
    /// [`Message::SetVolume`]).
    Ack(Ack),
    /// Kind 4, MCU → host: a button changed state (after the MCU's debounce).
    Button(ButtonEvent),
    /// Kind 5, MCU → host: a rotary encoder turned.
    Encoder(EncoderEvent),
    /// Kind 6, MCU → host: the hardware mute switch changed (and once after
    /// `Hello`, with its current position).
    Mute {
        /// `true`: the microphones are muted.
        muted: bool,
    },
    /// Kind 7, MCU → host: the volume the MCU holds changed (a volume knob
    /// owned by the MCU), and once after `Hello`.
    Volume {
        /// Volume in percent, 0–100.
        percent: u8,
    },
    /// Kind 8, host → MCU: set the volume the MCU holds or displays. Acked;
    /// a value above 100 is refused with [`AckCode::INVALID_ARGUMENT`].
    SetVolume {
        /// Volume in percent, 0–100.
        percent: u8,
    },
    /// Kind 9, host → MCU: show a pattern on the LED ring. Acked; refused
    /// with [`AckCode::UNSUPPORTED`] by a board without an LED ring.
    SetLeds(LedPattern),
}

impl Message {
    /// How many kinds this version knows: a kind (variant index) at or above
    /// this is from a newer peer and is skipped by the decoder.
    pub const KINDS: u32 = 10;

    /// This message's kind: its variant index, the varint after the
    /// sequence number on the wire.
    pub const fn kind(&self) -> u32 {
        match self {
            Message::Hello(_) => 0,
            Message::Ping { .. } => 1,
            Message::Pong { .. } => 2,
            Message::Ack(_) => 3,
            Message::Button(_) => 4,
            Message::Encoder(_) => 5,
            Message::Mute { .. } => 6,
            Message::Volume { .. } => 7,
            Message::SetVolume { .. } => 8,
            Message::SetLeds(_) => 9,
        }
    }
}

/// A protocol version: major in the high byte, minor in the low byte.
///
/// Peers with the same major version interoperate; see the crate docs for
/// what a minor version may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, MaxSize)]
pub struct ProtocolVersion(pub u16);

impl ProtocolVersion {
    /// Version `major.minor`.
    pub const fn new(major: u8, minor: u8) -> Self {
        Self(((major as u16) << 8) | minor as u16)
    }

    /// The major version: a change here breaks compatibility.
    pub const fn major(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// The minor version: additions only.
    pub const fn minor(self) -> u8 {
        // Truncation keeps the low byte, which is the minor version.
        self.0 as u8
    }

    /// Whether a peer speaking `other` can talk to one speaking `self`.
    pub const fn is_compatible_with(self, other: ProtocolVersion) -> bool {
        self.major() == other.major()
    }
}

impl core::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.major(), self.minor())
    }
}

/// Kind 0's content: who is talking, and what it has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub struct Hello {
    /// The sender's protocol version (normally [`PROTOCOL_VERSION`]).
    pub version: ProtocolVersion,
    /// MCU: the controls it has. Host: the controls it can use.
    pub capabilities: Capabilities,
    /// MCU: LEDs on the ring (0 without [`Capabilities::LED_RING`]).
    /// Host: 0.
    pub led_count: u8,
    /// Firmware name and version, or the host's, for logs (e.g.
    /// `"hark-knob 1.2.0"`).
    pub name: Name,
}

/// Capability bits in [`Hello`]. Unknown bits (from a newer minor version)
/// are kept and ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, MaxSize)]
pub struct Capabilities(pub u16);

impl Capabilities {
    /// No capabilities.
    pub const NONE: Self = Self(0);
    /// Push-to-talk button(s): sends [`Message::Button`].
    pub const BUTTON: Self = Self(1 << 0);
    /// Rotary encoder(s): sends [`Message::Encoder`].
    pub const ENCODER: Self = Self(1 << 1);
    /// Mute switch: sends [`Message::Mute`].
    pub const MUTE: Self = Self(1 << 2);
    /// LED ring of [`Hello::led_count`] LEDs: accepts [`Message::SetLeds`].
    pub const LED_RING: Self = Self(1 << 3);
    /// Holds a volume: sends [`Message::Volume`], accepts
    /// [`Message::SetVolume`].
    pub const VOLUME: Self = Self(1 << 4);
    /// Every capability this version defines.
    pub const ALL: Self = Self(0x1f);

    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Whether every bit of `other` is set in `self`.
    pub const fn contains(self, other: Capabilities) -> bool {
        self.0 & other.0 == other.0
    }

    /// The bits of both.
    pub const fn union(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 | other.0)
    }
}

impl BitOr for Capabilities {
    type Output = Capabilities;

    fn bitor(self, rhs: Capabilities) -> Capabilities {
        self.union(rhs)
    }
}

/// Kind 3's content: the outcome of the frame numbered `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub struct Ack {
    /// The sequence number of the acknowledged frame (the receiver's view of
    /// the sender's numbering).
    pub seq: u16,
    /// [`AckCode::OK`] or why not.
    pub code: AckCode,
}

/// The outcome in an [`Ack`]: 0 is success, anything else an error.
///
/// A plain byte rather than an enum so that a newer firmware's new error
/// codes still decode on an older host (which treats them as a generic
/// error) instead of making the whole frame undecodable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, MaxSize)]
pub struct AckCode(pub u8);

impl AckCode {
    /// Done.
    pub const OK: Self = Self(0);
    /// The board lacks the hardware for this command.
    pub const UNSUPPORTED: Self = Self(1);
    /// A field is out of range (e.g. volume above 100).
    pub const INVALID_ARGUMENT: Self = Self(2);
    /// The MCU cannot do it now; the host may retry later.
    pub const BUSY: Self = Self(3);

    /// Whether the command succeeded.
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }
}

impl core::fmt::Display for AckCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            AckCode::OK => f.write_str("ok"),
            AckCode::UNSUPPORTED => f.write_str("unsupported"),
            AckCode::INVALID_ARGUMENT => f.write_str("invalid argument"),
            AckCode::BUSY => f.write_str("busy"),
            AckCode(other) => write!(f, "error {other}"),
        }
    }
}

/// Kind 4's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub struct ButtonEvent {
    /// Which button (0 is push-to-talk).
    pub id: u8,
    /// Pressed or released.
    pub edge: Edge,
    /// The MCU's clock at the edge, in milliseconds since it booted; wraps
    /// after 2³² ms (49.7 days). Only differences between events mean
    /// anything (e.g. a long press).
    pub at_ms: u32,
}

/// A button's change of state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub enum Edge {
    /// Went down (variant 0).
    Pressed,
    /// Came up (variant 1).
    Released,
}

/// Kind 5's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub struct EncoderEvent {
    /// Which encoder (0 is the main knob).
    pub id: u8,
    /// Detents turned since the last event: positive is clockwise. The MCU
    /// may merge several detents into one event.
    pub delta: i16,
}

/// A colour, 8 bits per channel, before [brightness](LedPattern) scaling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub struct Rgb {
    /// Red, 0–255.
    pub r: u8,
    /// Green, 0–255.
    pub g: u8,
    /// Blue, 0–255.
    pub b: u8,
}

impl Rgb {
    /// A colour from its channels.
    pub const fn new(r: u8, g: u8, b: u8) -> Self {
        Self { r, g, b }
    }
}

/// Kind 9's content: what the LED ring shows until the next command.
///
/// `brightness` scales the colour, 0 (dark) to 255 (full); `period_ms` is
/// one full cycle in milliseconds (on + off, dim + bright, one revolution).
/// A period of 0 is treated by the MCU as its default speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, MaxSize)]
pub enum LedPattern {
    /// All LEDs dark (variant 0).
    Off,
    /// All LEDs one colour (variant 1).
    Solid {
        /// Colour.
        color: Rgb,
        /// 0–255.
        brightness: u8,
    },
    /// All LEDs on and off, half a period each (variant 2).
    Blink {
        /// Colour.
        color: Rgb,
        /// 0–255.
        brightness: u8,
        /// Milliseconds per on + off cycle.
        period_ms: u16,
    },
    /// All LEDs fading between dark and `brightness` (variant 3).
    Pulse {
        /// Colour.
        color: Rgb,
        /// 0–255, at the peak.
        brightness: u8,
        /// Milliseconds per dark → bright → dark cycle.
        period_ms: u16,
    },
    /// A lit segment running round the ring (variant 4).
    Spin {
        /// Colour.
        color: Rgb,
        /// 0–255.
        brightness: u8,
        /// Milliseconds per revolution.
        period_ms: u16,
    },
}
