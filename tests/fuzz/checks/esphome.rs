//! What Home Assistant (or anyone on the LAN allowed to) sends Hark's
//! ESPHome API: the bytes, delivered in pieces of a size the input picks,
//! served by a whole connection (`hark_esphome::server::connection`) whose
//! room stands in (it notes what it is asked to say and keep).
//!
//! Beyond "does not panic" and "ends": everything Hark writes is whole
//! frames of the messages a device sends, each decoding as its message.
//!
//! Shared by the fuzz target (`tests/fuzz/fuzz_targets`) and the test that
//! replays the committed corpus on every `cargo test`.

use std::time::Duration;

use hark_esphome::{
    frame,
    media::MediaError,
    messages::{self as m, Kind},
    server::{Room, connection},
    testing::{Recording, device},
};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::runtime::runtime;

/// Panics on what the target must never do.
pub fn check(data: &[u8]) {
    // The first byte picks the size of each piece the connection reads.
    let [cut, bytes @ ..] = data else {
        return;
    };
    let step = usize::from(*cut % 61) + 1;
    runtime().block_on(async {
        let (client, ours) = tokio::io::duplex(step);
        let device = device();
        // Announcements' audio is not fetched: the check reaches no network.
        let room = Room {
            fetch: std::sync::Arc::new(|url: &str| {
                Err(MediaError::Fetch {
                    url: url.to_owned(),
                    reason: "the fuzz check fetches nothing".to_owned(),
                })
            }),
            ..Recording::new().room()
        };
        let served = connection(
            ours,
            &device,
            room,
            Duration::from_secs(5),
            CancellationToken::new(),
        );
        let (mut from_hark, mut to_hark) = tokio::io::split(client);
        // Sent and read at once: the pieces are small, and a client that
        // only wrote would leave Hark's answers nowhere to go.
        let send = async {
            // A connection that ends early leaves the rest unsent.
            let _ = to_hark.write_all(bytes).await;
            let _ = to_hark.shutdown().await;
        };
        let read = async {
            let mut out = Vec::new();
            let _ = from_hark.read_to_end(&mut out).await;
            out
        };
        let talk = async { tokio::join!(send, read).1 };
        let (_, out) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(served, talk)
        })
        .await
        .expect("a connection ends when its client has");
        let mut at = 0;
        while at < out.len() {
            let f = frame::decode(&out[at..])
                .expect("Hark writes frames")
                .expect("whole frames");
            let fits = match f.kind {
                m::HelloResponse::KIND => m::HelloResponse::decode(f.payload).is_ok(),
                m::AuthenticationResponse::KIND => {
                    m::AuthenticationResponse::decode(f.payload).is_ok()
                }
                m::DisconnectResponse::KIND => m::DisconnectResponse::decode(f.payload).is_ok(),
                m::PingResponse::KIND => m::PingResponse::decode(f.payload).is_ok(),
                m::DeviceInfoResponse::KIND => m::DeviceInfoResponse::decode(f.payload).is_ok(),
                m::ListEntitiesDoneResponse::KIND => {
                    m::ListEntitiesDoneResponse::decode(f.payload).is_ok()
                }
                m::VoiceAssistantAnnounceFinished::KIND => {
                    m::VoiceAssistantAnnounceFinished::decode(f.payload).is_ok()
                }
                m::VoiceAssistantConfigurationResponse::KIND => {
                    m::VoiceAssistantConfigurationResponse::decode(f.payload).is_ok()
                }
                // A question asked (`start_conversation`) starts a run.
                m::VoiceAssistantRequest::KIND => {
                    m::VoiceAssistantRequest::decode(f.payload).is_ok()
                }
                m::VoiceAssistantAudio::KIND => m::VoiceAssistantAudio::decode(f.payload).is_ok(),
                other => panic!("Hark sent message type {other}, which a device does not send"),
            };
            assert!(fits, "message type {} does not decode", f.kind);
            at += f.used;
        }
    });
}
