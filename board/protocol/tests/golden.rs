//! Golden bytes for every message kind (and every LED pattern).
//!
//! The payloads were written by hand from postcard's wire format
//! (<https://postcard.jamesmunns.com/wire-format>), not produced by the code
//! under test: integers wider than a byte are varints (7 bits per byte, least
//! significant first, high bit = "more follows"), signed ones zig-zagged
//! first; `u8` and `bool` are one raw byte; enums are their variant index as
//! a varint, then the fields; strings are a varint length, then UTF-8.
//!
//! The wire bytes (payload ‖ CRC-16 LE, COBS, 0x00) were then computed by
//! `golden_wire.py` beside this file, with Python's own CRC and a separate
//! COBS implementation.
//!
//! Two worked by hand in full:
//!
//! * `Frame { seq: 2, msg: Ping { nonce: 0xDEADBEEF } }`: seq 2 → `02`; kind
//!   1 → `01`; 0xDEADBEEF in 7-bit groups from the bottom is 0x6F, 0x7D,
//!   0x36, 0x75, 0x0D, so with continuation bits `EF FD B6 F5 0D`. CRC
//!   0x5D75 → `75 5D`. No zero anywhere, so COBS is one run of 9 bytes: code
//!   `0A`, then the 9 bytes, then the delimiter.
//! * `Frame { seq: 0, msg: Ping { nonce: 0 } }`: payload `00 01 00`, CRC
//!   0xFFAD → `AD FF`; body `00 01 00 AD FF`. COBS: an empty run before the
//!   first zero → `01`; run `01` before the second zero → `02 01`; final run
//!   `AD FF` → `03 AD FF`; so `01 02 01 03 AD FF 00`.

use hark_board_protocol::{
    Ack, AckCode, ButtonEvent, Capabilities, Decoder, Edge, EncoderEvent, Frame, Hello, LedPattern,
    MAX_FRAME, MAX_PAYLOAD, Message, Name, PROTOCOL_VERSION, Rgb, encode,
};

struct Golden {
    frame: Frame,
    payload: &'static [u8],
    wire: &'static [u8],
}

fn name(s: &str) -> Name {
    Name::try_from(s).expect("fits")
}

fn goldens() -> Vec<Golden> {
    vec![
        Golden {
            // version 1.0 = 0x0100 = 256 → varint 80 02; capabilities 0x1F;
            // led_count 12 = 0C; "knob" = 04 6B 6E 6F 62.
            frame: Frame::new(
                1,
                Message::Hello(Hello {
                    version: PROTOCOL_VERSION,
                    capabilities: Capabilities::BUTTON
                        | Capabilities::ENCODER
                        | Capabilities::MUTE
                        | Capabilities::LED_RING
                        | Capabilities::VOLUME,
                    led_count: 12,
                    name: name("knob"),
                }),
            ),
            payload: &[
                0x01, 0x00, 0x80, 0x02, 0x1F, 0x0C, 0x04, 0x6B, 0x6E, 0x6F, 0x62,
            ],
            wire: &[
                0x02, 0x01, 0x0C, 0x80, 0x02, 0x1F, 0x0C, 0x04, 0x6B, 0x6E, 0x6F, 0x62, 0x72, 0x93,
                0x00,
            ],
        },
        Golden {
            frame: Frame::new(2, Message::Ping { nonce: 0xDEAD_BEEF }),
            payload: &[0x02, 0x01, 0xEF, 0xFD, 0xB6, 0xF5, 0x0D],
            wire: &[
                0x0A, 0x02, 0x01, 0xEF, 0xFD, 0xB6, 0xF5, 0x0D, 0x75, 0x5D, 0x00,
            ],
        },
        Golden {
            frame: Frame::new(0, Message::Ping { nonce: 0 }),
            payload: &[0x00, 0x01, 0x00],
            wire: &[0x01, 0x02, 0x01, 0x03, 0xAD, 0xFF, 0x00],
        },
        Golden {
            // seq 300 = 0b10_0101100 → AC 02.
            frame: Frame::new(300, Message::Pong { nonce: 5 }),
            payload: &[0xAC, 0x02, 0x02, 0x05],
            wire: &[0x07, 0xAC, 0x02, 0x02, 0x05, 0x23, 0x79, 0x00],
        },
        Golden {
            frame: Frame::new(
                3,
                Message::Ack(Ack {
                    seq: 7,
                    code: AckCode::OK,
                }),
            ),
            payload: &[0x03, 0x03, 0x07, 0x00],
            wire: &[0x04, 0x03, 0x03, 0x07, 0x03, 0xDB, 0xDF, 0x00],
        },
        Golden {
            // 0x1234 = 4660 = 36·128 + 52 → B4 24; the code is a raw byte.
            frame: Frame::new(
                4,
                Message::Ack(Ack {
                    seq: 0x1234,
                    code: AckCode::INVALID_ARGUMENT,
                }),
            ),
            payload: &[0x04, 0x03, 0xB4, 0x24, 0x02],
            wire: &[0x08, 0x04, 0x03, 0xB4, 0x24, 0x02, 0x89, 0xCB, 0x00],
        },
        Golden {
            // Pressed is variant 0; 1000 = 7·128 + 104 → E8 07.
            frame: Frame::new(
                5,
                Message::Button(ButtonEvent {
                    id: 0,
                    edge: Edge::Pressed,
                    at_ms: 1000,
                }),
            ),
            payload: &[0x05, 0x04, 0x00, 0x00, 0xE8, 0x07],
            wire: &[0x03, 0x05, 0x04, 0x01, 0x05, 0xE8, 0x07, 0xEB, 0x2D, 0x00],
        },
        Golden {
            // 70000 = 4·16384 + 34·128 + 112 → F0 A2 04.
            frame: Frame::new(
                6,
                Message::Button(ButtonEvent {
                    id: 1,
                    edge: Edge::Released,
                    at_ms: 70_000,
                }),
            ),
            payload: &[0x06, 0x04, 0x01, 0x01, 0xF0, 0xA2, 0x04],
            wire: &[
                0x0A, 0x06, 0x04, 0x01, 0x01, 0xF0, 0xA2, 0x04, 0x65, 0x52, 0x00,
            ],
        },
        Golden {
            // zig-zag(-3) = 5.
            frame: Frame::new(7, Message::Encoder(EncoderEvent { id: 1, delta: -3 })),
            payload: &[0x07, 0x05, 0x01, 0x05],
            wire: &[0x07, 0x07, 0x05, 0x01, 0x05, 0x89, 0x5D, 0x00],
        },
        Golden {
            // zig-zag(300) = 600 = 4·128 + 88 → D8 04.
            frame: Frame::new(8, Message::Encoder(EncoderEvent { id: 0, delta: 300 })),
            payload: &[0x08, 0x05, 0x00, 0xD8, 0x04],
            wire: &[0x03, 0x08, 0x05, 0x05, 0xD8, 0x04, 0x6E, 0x73, 0x00],
        },
        Golden {
            frame: Frame::new(6, Message::Mute { muted: true }),
            payload: &[0x06, 0x06, 0x01],
            wire: &[0x06, 0x06, 0x06, 0x01, 0xBB, 0xC4, 0x00],
        },
        Golden {
            frame: Frame::new(9, Message::Mute { muted: false }),
            payload: &[0x09, 0x06, 0x00],
            wire: &[0x03, 0x09, 0x06, 0x03, 0xAB, 0xF8, 0x00],
        },
        Golden {
            frame: Frame::new(10, Message::Volume { percent: 42 }),
            payload: &[0x0A, 0x07, 0x2A],
            wire: &[0x06, 0x0A, 0x07, 0x2A, 0xE2, 0x17, 0x00],
        },
        Golden {
            frame: Frame::new(11, Message::SetVolume { percent: 100 }),
            payload: &[0x0B, 0x08, 0x64],
            wire: &[0x06, 0x0B, 0x08, 0x64, 0xE6, 0x99, 0x00],
        },
        Golden {
            frame: Frame::new(12, Message::SetLeds(LedPattern::Off)),
            payload: &[0x0C, 0x09, 0x00],
            wire: &[0x03, 0x0C, 0x09, 0x03, 0x65, 0x03, 0x00],
        },
        Golden {
            frame: Frame::new(
                13,
                Message::SetLeds(LedPattern::Solid {
                    color: Rgb::new(0xFF, 0, 0),
                    brightness: 128,
                }),
            ),
            payload: &[0x0D, 0x09, 0x01, 0xFF, 0x00, 0x00, 0x80],
            wire: &[
                0x05, 0x0D, 0x09, 0x01, 0xFF, 0x01, 0x04, 0x80, 0x5C, 0x23, 0x00,
            ],
        },
        Golden {
            // 500 = 3·128 + 116 → F4 03.
            frame: Frame::new(
                14,
                Message::SetLeds(LedPattern::Blink {
                    color: Rgb::new(0, 0, 0xFF),
                    brightness: 255,
                    period_ms: 500,
                }),
            ),
            payload: &[0x0E, 0x09, 0x02, 0x00, 0x00, 0xFF, 0xFF, 0xF4, 0x03],
            wire: &[
                0x04, 0x0E, 0x09, 0x02, 0x01, 0x07, 0xFF, 0xFF, 0xF4, 0x03, 0x49, 0x39, 0x00,
            ],
        },
        Golden {
            // 1500 = 11·128 + 92 → DC 0B.
            frame: Frame::new(
                15,
                Message::SetLeds(LedPattern::Pulse {
                    color: Rgb::new(0, 0x80, 0xFF),
                    brightness: 200,
                    period_ms: 1500,
                }),
            ),
            payload: &[0x0F, 0x09, 0x03, 0x00, 0x80, 0xFF, 0xC8, 0xDC, 0x0B],
            wire: &[
                0x04, 0x0F, 0x09, 0x03, 0x08, 0x80, 0xFF, 0xC8, 0xDC, 0x0B, 0xA9, 0x06, 0x00,
            ],
        },
        Golden {
            frame: Frame::new(
                16,
                Message::SetLeds(LedPattern::Spin {
                    color: Rgb::new(0x10, 0x20, 0x30),
                    brightness: 64,
                    period_ms: 0,
                }),
            ),
            payload: &[0x10, 0x09, 0x04, 0x10, 0x20, 0x30, 0x40, 0x00],
            wire: &[
                0x08, 0x10, 0x09, 0x04, 0x10, 0x20, 0x30, 0x40, 0x03, 0x9A, 0xDA, 0x00,
            ],
        },
    ]
}

#[test]
fn postcard_payloads_match_the_hand_derived_bytes() {
    for g in goldens() {
        let mut buf = [0u8; MAX_PAYLOAD];
        let got = postcard::to_slice(&g.frame, &mut buf).expect("fits");
        assert_eq!(got, g.payload, "payload of {:?}", g.frame);
    }
}

#[test]
fn encoder_produces_the_golden_wire_bytes() {
    for g in goldens() {
        let mut out = [0u8; MAX_FRAME];
        let got = encode(&g.frame, &mut out).expect("encodes");
        assert_eq!(got, g.wire, "wire bytes of {:?}", g.frame);
    }
}

#[test]
fn decoder_reads_the_golden_wire_bytes() {
    for g in goldens() {
        let mut decoder = Decoder::new();
        let results: Vec<_> = decoder.feed(g.wire).collect();
        assert_eq!(results, vec![Ok(g.frame.clone())]);
        assert!(!decoder.is_mid_frame());
    }
}

#[test]
fn every_kind_and_led_pattern_has_a_golden() {
    let goldens = goldens();
    for kind in 0..Message::KINDS {
        let golden = goldens
            .iter()
            .find(|g| g.frame.msg.kind() == kind)
            .unwrap_or_else(|| panic!("no golden for kind {kind}"));
        // The kind is the varint after the sequence number: check `kind()`
        // agrees with postcard's variant index.
        let (_, rest) = postcard::take_from_bytes::<u16>(golden.payload).expect("seq");
        let (wire_kind, _) = postcard::take_from_bytes::<u32>(rest).expect("kind");
        assert_eq!(wire_kind, kind);
    }
    for variant in 0..5u8 {
        assert!(
            goldens
                .iter()
                .any(|g| matches!(g.frame.msg, Message::SetLeds(_))
                    && g.payload.get(2) == Some(&variant)),
            "no golden for LED pattern {variant}"
        );
    }
}

#[test]
fn kinds_constant_counts_the_variants() {
    // A kind one past the last known one must be unknown: if a variant is
    // added without bumping `KINDS`, the decoder would call it unknown.
    let last = Message::SetLeds(LedPattern::Off).kind();
    assert_eq!(last + 1, Message::KINDS);
}

#[test]
fn buffer_sizes_follow_from_max_size() {
    // Hello is the largest message: seq (3) + kind (1) + version (3) +
    // capabilities (3) + led_count (1) + name (1 + 24) = 36.
    assert_eq!(MAX_PAYLOAD, 36);
    // + CRC 2 = 38; COBS adds 1 (38 < 254); + delimiter = 40.
    assert_eq!(MAX_FRAME, 40);
    // The largest possible frame really fits.
    let big = Frame::new(
        u16::MAX,
        Message::Hello(Hello {
            version: hark_board_protocol::ProtocolVersion(u16::MAX),
            capabilities: Capabilities(u16::MAX),
            led_count: u8::MAX,
            name: name("xxxxxxxxxxxxxxxxxxxxxxxx"),
        }),
    );
    let mut out = [0u8; MAX_FRAME];
    assert_eq!(encode(&big, &mut out).expect("fits").len(), MAX_FRAME);
}
