//! Feeds the decoder arbitrary bytes in arbitrary chunks.
//!
//! Checks, beyond "does not panic": every frame that comes out re-encodes
//! and decodes to itself, and after any input a delimiter followed by a good
//! frame yields that frame (the decoder always resynchronises).

#![no_main]

use hark_board_protocol::{Decoder, Frame, MAX_FRAME, Message, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the chunk sizes, so the fuzzer explores how the
    // stream is split as well as its content.
    let Some((&split, bytes)) = data.split_first() else {
        return;
    };
    let mut decoder = Decoder::new();
    let mut rest = bytes;
    let mut step = usize::from(split % 64) + 1;
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(step.min(rest.len()));
        for frame in decoder.feed(chunk).flatten() {
            let mut out = [0u8; MAX_FRAME];
            let wire = encode(&frame, &mut out).expect("a decoded frame re-encodes");
            let mut again = Decoder::new();
            let mut results = again.feed(wire);
            assert_eq!(results.next(), Some(Ok(frame)));
            assert_eq!(results.next(), None);
        }
        rest = tail;
        // Vary the chunk size as we go (deterministically).
        step = step % 61 + 1;
    }

    let probe = Frame::new(7, Message::Ping { nonce: 0xC0FFEE });
    let mut out = [0u8; MAX_FRAME];
    let wire = encode(&probe, &mut out).expect("encodes");
    // Ends whatever partial frame the input left; its result is whatever it is.
    for _ in decoder.feed(&[0]) {}
    let decoded: Vec<_> = decoder.feed(wire).collect();
    assert_eq!(decoded, vec![Ok(probe)]);
});
