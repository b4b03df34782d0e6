//! Wyoming as a client on the LAN sends it: the bytes, cut into reads of
//! a size the input picks, read as events under small limits; then the same
//! bytes served by a whole session (`hark_wyoming::session`) whose speech
//! services stand in for the room (they count what they are given).
//!
//! Beyond "does not panic": every event read is within the limits, and
//! written back it reads as the same event; a session ends (the client
//! closed, or a broken frame), and everything it wrote reads back as
//! events, an `error` only with a `text`.
//!
//! Shared by the fuzz target (`tests/fuzz/fuzz_targets`) and the test that
//! replays the committed corpus on every `cargo test`.

use std::sync::{Arc, atomic::AtomicBool};

use hark_wyoming::{
    event::{Limits, read_event, write_event},
    session::{Settings, serve},
    testing::Counting,
};
use tokio::io::BufReader;

use super::runtime::runtime;

/// Panics on what the target must never do.
pub fn check(data: &[u8]) {
    // The first two bytes pick the limits and the size of each read.
    let [limit, cut, bytes @ ..] = data else {
        return;
    };
    let limits = Limits {
        header: 16 + usize::from(*limit) * 8,
        data: 8 + usize::from(*limit) * 4,
        payload: 8 + usize::from(*limit) * 16,
    };
    let step = usize::from(*cut % 61) + 1;
    runtime().block_on(async {
        let mut reader = BufReader::with_capacity(step, bytes);
        let mut line = Vec::new();
        while let Ok(Some(event)) = read_event(&mut reader, &limits, &mut line).await {
            assert!(
                event.payload.len() <= limits.payload,
                "payload over its limit"
            );
            let mut wire = Vec::new();
            write_event(&mut wire, &event).await.expect("written");
            let mut again = BufReader::new(&wire[..]);
            let back = read_event(&mut again, &Limits::default(), &mut Vec::new())
                .await
                .expect("what Hark writes reads back")
                .expect("an event");
            assert_eq!(back, event, "written, it reads back the same");
        }

        let mut answers = Vec::new();
        let settings = Settings {
            limits,
            max_seconds: 2,
            max_text: 256,
            ..Settings::default()
        };
        let spoke = AtomicBool::new(false);
        let _ = serve(
            BufReader::with_capacity(step, bytes),
            &mut answers,
            Arc::new(Counting),
            settings,
            &spoke,
        )
        .await;
        let mut reader = BufReader::new(&answers[..]);
        let mut line = Vec::new();
        loop {
            match read_event(&mut reader, &Limits::default(), &mut line).await {
                Ok(Some(event)) if event.kind == "error" => {
                    assert!(
                        event.data["text"].is_string(),
                        "an error says what: {event:?}"
                    )
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => panic!("Hark wrote what is not an event: {e}"),
            }
        }
    });
}
