//! The raw TCP and Unix socket framing: newline-delimited JSON-RPC, split
//! by `LineDecoder` under a size limit, each line then decoded into a
//! message for rmcp or an error reply.
//!
//! Beyond "does not panic": however the stream is cut into reads, the
//! decoder yields exactly what splitting the whole input at its newlines
//! says (each line within the limit, one `TooLarge` for each longer line);
//! every line decodes to a message or a reply that serialises.
//!
//! Shared by the fuzz target (`tests/fuzz/fuzz_targets`) and the test that
//! replays the committed corpus on every `cargo test`.

use bytes::BytesMut;
use hark_mcp::{
    framing::{self, Decoded},
    transport::{framed::Frame, stream::LineDecoder},
};
use tokio_util::codec::Decoder;

#[derive(Debug, PartialEq)]
enum Seen {
    Line(Vec<u8>),
    TooLarge,
}

/// Panics on what the target must never do.
pub fn check(data: &[u8]) {
    // The first two bytes pick the size limit and how the stream is cut.
    let [limit, cut, bytes @ ..] = data else {
        return;
    };
    let max = 8 + usize::from(*limit) * 4;
    let step = usize::from(*cut % 97) + 1;

    let mut expected = Vec::new();
    let mut lines = bytes.split(|b| *b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let complete = lines.peek().is_some();
        if line.len() > max {
            expected.push(Seen::TooLarge);
        } else if complete {
            expected.push(Seen::Line(line.to_vec()));
        }
    }

    let mut decoder = LineDecoder::new(max);
    let mut buf = BytesMut::new();
    let mut seen = Vec::new();
    for chunk in bytes.chunks(step) {
        buf.extend_from_slice(chunk);
        while let Some(frame) = decoder.decode(&mut buf).expect("lines never fail") {
            assert!(
                buf.len() <= max + step,
                "buffers no more than the limit and a read"
            );
            seen.push(match frame {
                Frame::Data(line) => Seen::Line(line.to_vec()),
                Frame::TooLarge { fatal: false } => Seen::TooLarge,
                other => panic!("a line decoder yielded {other:?}"),
            });
        }
    }
    assert_eq!(seen, expected);

    for line in seen {
        if let Seen::Line(line) = line {
            match framing::decode(&line) {
                Decoded::Message(message) => {
                    serde_json::to_string(&message).expect("a decoded message serialises");
                }
                Decoded::Reply(reply) => {
                    serde_json::to_string(&reply).expect("an error reply serialises");
                }
                Decoded::Ignore => {}
            }
        }
    }
}
