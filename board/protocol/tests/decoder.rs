//! The decoder fed like a UART feeds it: in chunks of any size, with noise,
//! cut-off frames and corruption between good frames.

use hark_board_protocol::{
    Ack, AckCode, ButtonEvent, Capabilities, CobsError, DecodeError, Decoder, Edge, EncoderEvent,
    Frame, Hello, LedPattern, MAX_ENCODED, MAX_FRAME, Message, Name, PROTOCOL_VERSION, Rgb, encode,
};

type Results = Vec<Result<Frame, DecodeError>>;

fn wire(frame: &Frame) -> Vec<u8> {
    let mut out = [0u8; MAX_FRAME];
    encode(frame, &mut out).expect("encodes").to_vec()
}

/// A frame from raw payload bytes (for kinds this version cannot build).
fn wire_from_payload(payload: &[u8]) -> Vec<u8> {
    let mut out = [0u8; MAX_FRAME];
    hark_board_protocol::frame_payload(payload, &mut out)
        .expect("a payload that fits")
        .to_vec()
}

fn sample_frames() -> Vec<Frame> {
    let hello = Hello {
        version: PROTOCOL_VERSION,
        capabilities: Capabilities::ALL,
        led_count: 24,
        name: Name::try_from("hark-knob 1.2.0").expect("fits"),
    };
    vec![
        Frame::new(0, Message::Hello(hello)),
        Frame::new(1, Message::Ping { nonce: u32::MAX }),
        Frame::new(2, Message::Pong { nonce: 0 }),
        Frame::new(
            3,
            Message::Ack(Ack {
                seq: 65535,
                code: AckCode(200),
            }),
        ),
        Frame::new(
            4,
            Message::Button(ButtonEvent {
                id: 0,
                edge: Edge::Pressed,
                at_ms: u32::MAX,
            }),
        ),
        Frame::new(
            5,
            Message::Encoder(EncoderEvent {
                id: 255,
                delta: i16::MIN,
            }),
        ),
        Frame::new(6, Message::Mute { muted: true }),
        Frame::new(7, Message::Volume { percent: 0 }),
        Frame::new(8, Message::SetVolume { percent: 255 }),
        Frame::new(
            u16::MAX,
            Message::SetLeds(LedPattern::Spin {
                color: Rgb::new(1, 2, 3),
                brightness: 0,
                period_ms: u16::MAX,
            }),
        ),
    ]
}

fn feed_in_chunks(decoder: &mut Decoder, bytes: &[u8], chunk: usize) -> Results {
    bytes
        .chunks(chunk)
        .flat_map(|c| decoder.feed(c).collect::<Vec<_>>())
        .collect()
}

#[test]
fn every_sample_round_trips() {
    for frame in sample_frames() {
        let mut decoder = Decoder::new();
        let results: Results = decoder.feed(&wire(&frame)).collect();
        assert_eq!(results, vec![Ok(frame)]);
    }
}

#[test]
fn any_chunk_size_gives_the_same_frames() {
    let frames = sample_frames();
    let stream: Vec<u8> = frames.iter().flat_map(wire).collect();
    for chunk in [1, 2, 3, 5, 7, 13, 40, 64, stream.len()] {
        let mut decoder = Decoder::new();
        let results = feed_in_chunks(&mut decoder, &stream, chunk);
        let expected: Results = frames.iter().cloned().map(Ok).collect();
        assert_eq!(results, expected, "chunk size {chunk}");
        assert!(!decoder.is_mid_frame());
    }
}

#[test]
fn idle_delimiters_are_ignored() {
    let frame = Frame::new(1, Message::Mute { muted: false });
    let mut stream = vec![0, 0, 0];
    stream.extend(wire(&frame));
    stream.extend([0, 0]);
    stream.extend(wire(&frame));
    let mut decoder = Decoder::new();
    let results: Results = decoder.feed(&stream).collect();
    assert_eq!(results, vec![Ok(frame.clone()), Ok(frame)]);
}

#[test]
fn good_frames_survive_garbage_truncation_and_bad_crcs() {
    let a = Frame::new(1, Message::Ping { nonce: 7 });
    let b = Frame::new(2, Message::Volume { percent: 55 });
    let c = Frame::new(3, Message::Mute { muted: true });

    let mut bad_crc = wire(&b);
    // Flip a payload bit of the COBS-encoded frame: index 2 is a data byte
    // (the frame has no zero before the CRC, so it is one COBS run).
    bad_crc[2] ^= 0x01;

    let wire_c = wire(&c);
    let mut stream = Vec::new();
    // Garbage (noise, or the tail of a frame sent before we started
    // listening), then a delimiter.
    stream.extend([0x13, 0x37, 0xFF, 0x00]);
    stream.extend(wire(&a));
    // A frame cut short: its first half, then the line resumes with a frame.
    stream.extend(&wire_c[..3]);
    stream.push(0);
    stream.extend(bad_crc);
    stream.extend(wire(&b));
    stream.extend(&wire_c);

    for chunk in [1, 4, stream.len()] {
        let mut decoder = Decoder::new();
        let results = feed_in_chunks(&mut decoder, &stream, chunk);
        assert_eq!(results.len(), 6, "{results:?}");
        assert!(results[0].is_err(), "garbage is reported");
        assert_eq!(results[1], Ok(a.clone()));
        assert!(
            matches!(
                results[2],
                Err(DecodeError::Cobs(CobsError::Truncated)) | Err(DecodeError::Crc { .. })
            ),
            "truncated frame: {:?}",
            results[2]
        );
        assert!(
            matches!(results[3], Err(DecodeError::Crc { .. })),
            "bad CRC: {:?}",
            results[3]
        );
        assert_eq!(results[4], Ok(b.clone()));
        assert_eq!(results[5], Ok(c.clone()));
    }
}

#[test]
fn short_garbage_is_too_short() {
    let mut decoder = Decoder::new();
    let results: Results = decoder.feed(&[0x02, 0x05, 0x00]).collect();
    assert_eq!(results, vec![Err(DecodeError::TooShort { len: 1 })]);
}

#[test]
fn unknown_kind_is_skipped_and_the_next_frame_decodes() {
    // seq 9, kind 10 (one past this version's last), two bytes of fields.
    let unknown = wire_from_payload(&[0x09, 0x0A, 0x11, 0x22]);
    // kind 300 (a two-byte varint), no fields.
    let far_future = wire_from_payload(&[0x0A, 0xAC, 0x02]);
    let next = Frame::new(11, Message::Pong { nonce: 3 });
    let mut stream = unknown;
    stream.extend(far_future);
    stream.extend(wire(&next));

    let mut decoder = Decoder::new();
    let results: Results = decoder.feed(&stream).collect();
    assert_eq!(
        results,
        vec![
            Err(DecodeError::UnknownKind { seq: 9, kind: 10 }),
            Err(DecodeError::UnknownKind { seq: 10, kind: 300 }),
            Ok(next),
        ]
    );
    assert!(results[0].as_ref().is_err_and(DecodeError::is_unknown_kind));
}

#[test]
fn trailing_fields_from_a_newer_minor_version_are_ignored() {
    // Volume { percent: 42 } with one more (future) field appended.
    let extended = wire_from_payload(&[0x05, 0x07, 0x2A, 0x99, 0x01]);
    let mut decoder = Decoder::new();
    let results: Results = decoder.feed(&extended).collect();
    assert_eq!(
        results,
        vec![Ok(Frame::new(5, Message::Volume { percent: 42 }))]
    );
}

#[test]
fn intact_but_malformed_frames_are_reported_as_such() {
    // Mute with 2 for a bool; Hello cut after the version; an unknown LED
    // pattern variant (a newer minor version's, sent against the rules).
    for payload in [
        &[0x01, 0x06, 0x02][..],
        &[0x01, 0x00, 0x80, 0x02][..],
        &[0x01, 0x09, 0x07][..],
        // A sequence number that overflows u16.
        &[0xFF, 0xFF, 0xFF, 0x01][..],
    ] {
        let mut decoder = Decoder::new();
        let results: Results = decoder.feed(&wire_from_payload(payload)).collect();
        assert!(
            matches!(results[..], [Err(DecodeError::Malformed { .. })]),
            "{payload:02x?}: {results:?}"
        );
    }
}

#[test]
fn oversized_input_is_dropped_up_to_the_next_delimiter() {
    let good = Frame::new(1, Message::Ping { nonce: 1 });
    let mut stream = vec![0x42; 1000];
    stream.push(0);
    stream.extend(wire(&good));
    // Exactly one byte too many.
    stream.extend(vec![0x42; MAX_ENCODED + 1]);
    stream.push(0);
    stream.extend(wire(&good));

    for chunk in [1, 17, stream.len()] {
        let mut decoder = Decoder::new();
        let results = feed_in_chunks(&mut decoder, &stream, chunk);
        assert_eq!(
            results,
            vec![
                Err(DecodeError::Oversized { len: 1000 }),
                Ok(good.clone()),
                Err(DecodeError::Oversized {
                    len: MAX_ENCODED + 1
                }),
                Ok(good.clone()),
            ],
            "chunk size {chunk}"
        );
    }
}

#[test]
fn a_frame_of_exactly_the_maximum_size_is_accepted() {
    let frame = Frame::new(
        u16::MAX,
        Message::Hello(Hello {
            version: hark_board_protocol::ProtocolVersion(u16::MAX),
            capabilities: Capabilities(u16::MAX),
            led_count: 255,
            name: Name::try_from("abcdefghijklmnopqrstuvwx").expect("fits"),
        }),
    );
    let bytes = wire(&frame);
    assert_eq!(bytes.len(), MAX_FRAME);
    let mut decoder = Decoder::new();
    let results = feed_in_chunks(&mut decoder, &bytes, 1);
    assert_eq!(results, vec![Ok(frame)]);
}

#[test]
fn dropping_the_iterator_early_leaves_the_rest_for_later() {
    let a = Frame::new(1, Message::Ping { nonce: 1 });
    let b = Frame::new(2, Message::Ping { nonce: 2 });
    let mut stream = wire(&a);
    stream.extend(wire(&b));
    let mut decoder = Decoder::new();
    let rest = {
        let mut feed = decoder.feed(&stream);
        assert_eq!(feed.next(), Some(Ok(a)));
        feed.remaining()
    };
    let results: Results = decoder.feed(rest).collect();
    assert_eq!(results, vec![Ok(b)]);
}

#[test]
fn reset_forgets_a_partial_frame() {
    let frame = Frame::new(1, Message::Ping { nonce: 1 });
    let bytes = wire(&frame);
    let mut decoder = Decoder::new();
    assert_eq!(decoder.feed(&bytes[..4]).count(), 0);
    assert!(decoder.is_mid_frame());
    decoder.reset();
    let results: Results = decoder.feed(&bytes).collect();
    assert_eq!(results, vec![Ok(frame)]);
}

/// xorshift64: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

fn random_frame(rng: &mut Rng) -> Frame {
    let seq = rng.next() as u16;
    let color = Rgb::new(rng.byte(), rng.byte(), rng.byte());
    let msg = match rng.below(14) {
        0 => {
            let len = rng.below(25);
            let mut name = Name::new();
            for _ in 0..len {
                // Printable ASCII and, now and then, a NUL byte in the
                // string (a zero inside the payload for COBS to handle).
                let c = if rng.below(8) == 0 {
                    '\0'
                } else {
                    char::from(b' ' + (rng.byte() % 95))
                };
                name.push(c).expect("within NAME_LEN");
            }
            Message::Hello(Hello {
                version: hark_board_protocol::ProtocolVersion(rng.next() as u16),
                capabilities: Capabilities(rng.next() as u16),
                led_count: rng.byte(),
                name,
            })
        }
        1 => Message::Ping {
            nonce: rng.next() as u32,
        },
        2 => Message::Pong {
            nonce: rng.next() as u32,
        },
        3 => Message::Ack(Ack {
            seq: rng.next() as u16,
            code: AckCode(rng.byte()),
        }),
        4 => Message::Button(ButtonEvent {
            id: rng.byte(),
            edge: if rng.below(2) == 0 {
                Edge::Pressed
            } else {
                Edge::Released
            },
            at_ms: rng.next() as u32,
        }),
        5 => Message::Encoder(EncoderEvent {
            id: rng.byte(),
            delta: rng.next() as i16,
        }),
        6 => Message::Mute {
            muted: rng.below(2) == 0,
        },
        7 => Message::Volume {
            percent: rng.byte(),
        },
        8 => Message::SetVolume {
            percent: rng.byte(),
        },
        9 => Message::SetLeds(LedPattern::Off),
        10 => Message::SetLeds(LedPattern::Solid {
            color,
            brightness: rng.byte(),
        }),
        11 => Message::SetLeds(LedPattern::Blink {
            color,
            brightness: rng.byte(),
            period_ms: rng.next() as u16,
        }),
        12 => Message::SetLeds(LedPattern::Pulse {
            color,
            brightness: rng.byte(),
            period_ms: rng.next() as u16,
        }),
        _ => Message::SetLeds(LedPattern::Spin {
            color,
            brightness: rng.byte(),
            period_ms: rng.next() as u16,
        }),
    };
    Frame::new(seq, msg)
}

/// Random buffers fed in random chunks: nothing panics, and the decoder's
/// state stays bounded (it always recovers at a delimiter).
#[test]
fn stress_random_bytes_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut decoder = Decoder::new();
    let probe = Frame::new(1, Message::Ping { nonce: 99 });
    for _ in 0..5_000 {
        let len = rng.below(200);
        // Zero-heavy or zero-free at random, to hit both short and long
        // runs between delimiters.
        let zero_odds = [2, 16, 256, usize::MAX][rng.below(4)];
        let buf: Vec<u8> = (0..len)
            .map(|_| {
                if zero_odds != usize::MAX && rng.below(zero_odds) == 0 {
                    0
                } else {
                    rng.byte() | 1
                }
            })
            .collect();
        let mut rest = &buf[..];
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(1 + rng.below(rest.len()));
            for _ in decoder.feed(chunk) {}
            rest = tail;
        }
        // Whatever came before, a delimiter and a good frame decode.
        let mut resync = vec![0];
        resync.extend(wire(&probe));
        let results: Results = decoder.feed(&resync).collect();
        assert_eq!(results.last(), Some(&Ok(probe.clone())));
    }
}

/// Streams of valid frames where some frames are corrupted (bit flips,
/// dropped, inserted or truncated bytes): no panic, and every frame whose
/// bytes were left alone comes out, in order.
#[test]
fn stress_corrupted_streams_keep_every_intact_frame() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut decoded_total = 0usize;
    for _ in 0..2_000 {
        let mut stream = Vec::new();
        let mut intact = Vec::new();
        for _ in 0..1 + rng.below(8) {
            let frame = random_frame(&mut rng);
            let mut bytes = wire(&frame);
            if rng.below(3) == 0 {
                let at = rng.below(bytes.len());
                match rng.below(4) {
                    0 => bytes[at] ^= 1 << rng.below(8),
                    1 => {
                        bytes.remove(at);
                    }
                    2 => bytes.insert(at, rng.byte()),
                    _ => bytes.truncate(at),
                }
                // A corruption that removed or moved the delimiter merges
                // this frame with the next; end it so the next stays
                // intact, as a real line's next frame would after an idle
                // delimiter.
                if bytes.last() != Some(&0) {
                    bytes.push(0);
                }
            } else {
                intact.push(frame);
            }
            stream.extend(bytes);
        }
        let mut decoder = Decoder::new();
        let mut decoded = Vec::new();
        let mut rest = &stream[..];
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at(1 + rng.below(rest.len()));
            decoded.extend(decoder.feed(chunk).filter_map(Result::ok));
            rest = tail;
        }
        // Corruption caught by the CRC never yields a frame here; a 16-bit
        // CRC lets about 1 in 65536 through, so allow extra frames but
        // require each intact one, in order.
        let mut it = decoded.iter();
        for want in &intact {
            assert!(
                it.any(|got| got == want),
                "intact frame {want:?} missing from {decoded:?}"
            );
        }
        decoded_total += intact.len();
    }
    assert!(decoded_total > 4_000);
}
