//! The wire protocol between Hark (the host) and the board's microcontroller
//! (the MCU), which carries the push-to-talk button, a rotary encoder, the
//! mute switch and the LED ring, over a UART.
//!
//! The same crate builds into the firmware and into Hark: it is `no_std`
//! and needs no allocator. Every buffer is a fixed-size array whose size
//! comes from postcard's `MaxSize` at compile time ([`MAX_FRAME`]).
//!
//! # Frame layout
//!
//! ```text
//!  ┌──────────────── postcard payload ────────────────┐
//!  │ seq: varint u16 │ kind: varint │ fields of kind… │ CRC-16 (LE, 2 B) │
//!  └─────────────────────────────────────────────────────────────────────┘
//!                  │ COBS-encode the whole body (removes every 0x00)
//!                  ▼
//!  ┌──────────────────────────────────────────┬──────┐
//!  │ COBS(payload ‖ CRC)                      │ 0x00 │   ≤ MAX_FRAME bytes
//!  └──────────────────────────────────────────┴──────┘
//! ```
//!
//! * `seq` numbers the sender's frames (wrapping); acknowledgements name it.
//! * `kind` is the [`Message`] variant's index; the fields follow in
//!   postcard's encoding (integers wider than a byte as varints, `i16` in
//!   zig-zag, `u8` and `bool` as one byte, strings as length + UTF-8).
//! * The CRC is CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) over the
//!   payload, sent little-endian.
//! * COBS guarantees no 0x00 inside a frame, so 0x00 delimits frames and a
//!   receiver that lost its place (line noise, a cable plugged in mid-frame)
//!   is back in step at the next 0x00. A run of 0x00s is harmless; senders
//!   write one 0x00 after opening the port to end any half-frame.
//!
//! For example, the MCU reporting "mute on" as its frame 6 is the payload
//! `06 06 01` (seq 6, kind 6, `true`), CRC 0xC4BB sent as `BB C4`, COBS
//! `06 06 06 01 BB C4` (one run of five non-zero bytes), then `00`.
//!
//! # Using it
//!
//! Sending, on either side:
//!
//! ```
//! use hark_board_protocol::{encode, Frame, Message, MAX_FRAME};
//!
//! let mut out = [0u8; MAX_FRAME];
//! let bytes = encode(&Frame::new(7, Message::Ping { nonce: 42 }), &mut out)?;
//! // uart.write_all(bytes)
//! # assert_eq!(bytes.last(), Some(&0));
//! # Ok::<(), hark_board_protocol::EncodeError>(())
//! ```
//!
//! Receiving: keep one [`Decoder`] per port, feed it whatever each read
//! returned (any chunk size, from one byte up), and handle each result.
//! Errors are per frame; the decoder has already resynchronised when it
//! reports one, so the right reaction is to count or log it and carry on.
//!
//! ```
//! use hark_board_protocol::{Decoder, DecodeError, Message};
//!
//! let mut decoder = Decoder::new();
//! # let chunk: &[u8] = &[0x03, 0x02, 0x01, 0x00];
//! for result in decoder.feed(chunk) {
//!     match result {
//!         Ok(frame) => match frame.msg {
//!             Message::Ping { nonce } => { /* answer with Pong { nonce } */ }
//!             _ => {}
//!         },
//!         // From a newer peer: not an error, nothing to do.
//!         Err(DecodeError::UnknownKind { .. }) => {}
//!         Err(_line_noise_or_bug) => { /* count it */ }
//!     }
//! }
//! ```
//!
//! The firmware's loop is the same with its UART's receive buffer; on the
//! host, `hark_board::link` runs it over tokio-serial.
//!
//! # Conversation
//!
//! 1. The host opens the port, writes a 0x00, then [`Message::Hello`].
//! 2. The MCU answers with its `Hello` (version, [`Capabilities`], LED
//!    count, firmware name), then reports its current state
//!    ([`Message::Mute`], [`Message::Volume`]).
//! 3. The MCU sends events as they happen; the host sends commands
//!    ([`Message::SetLeds`], [`Message::SetVolume`]), which the MCU answers
//!    with [`Message::Ack`].
//! 4. The host pings at an interval; the MCU answers each ping with a pong.
//!    A host that hears nothing for its timeout reopens the port.
//! 5. An MCU that reboots sends `Hello` unprompted; the host then sends its
//!    own `Hello` again (and treats the MCU's answer as the reply, not as
//!    another reboot).
//!
//! # Versioning
//!
//! [`Hello`] carries a [`ProtocolVersion`], major.minor.
//!
//! * **Different major version:** incompatible. The host refuses the link
//!   (and retries later, as after any failed connection); nothing past the
//!   `Hello` is interpreted. `Hello` itself must therefore never change:
//!   kind 0, and its four fields in this order.
//! * **Newer minor version from the peer:** the host proceeds. A minor
//!   version may only *add*: new message kinds at the end of [`Message`],
//!   new capability bits, new [`AckCode`] values, new fields appended at
//!   the end of an existing message, as long as no frame grows beyond
//!   version 1.0's [`MAX_FRAME`]. An older receiver skips unknown kinds (the
//!   decoder reports [`DecodeError::UnknownKind`] and carries on), ignores
//!   unknown capability bits, treats unknown ack codes as errors, and
//!   ignores trailing fields.
//! * **Older minor version from the peer:** the newer side must not send it
//!   kinds or enum variants (e.g. new [`LedPattern`]s) introduced after the
//!   peer's minor version; it knows which from the peer's `Hello`.
//! * Existing kinds, variants and field types are never changed or
//!   reordered within a major version.
//!
//! # Features
//!
//! * `use-std`: for hosts; the error types implement `std::error::Error`
//!   (they implement `core::error::Error`, the same trait, without it too).
#![no_std]
#![warn(missing_docs)]

pub mod cobs;
mod codec;
mod crc;
mod message;

pub use cobs::CobsError;
pub use codec::{
    CRC_LEN, DELIMITER, DecodeError, Decoder, EncodeError, Feed, MAX_BODY, MAX_ENCODED, MAX_FRAME,
    MAX_PAYLOAD, encode, frame_payload,
};
pub use crc::crc16;
pub use message::{
    Ack, AckCode, ButtonEvent, Capabilities, Edge, EncoderEvent, Frame, Hello, LedPattern, Message,
    NAME_LEN, Name, PROTOCOL_VERSION, ProtocolVersion, Rgb,
};

// The buffers are sized for frames well under COBS's 254-byte run, and for a
// UART's receive FIFO-sized reads; catch an accidental blow-up at build time.
const _: () = assert!(MAX_FRAME <= 64);
