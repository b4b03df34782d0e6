//! Home Assistant's own audio: an announcement's `media_id`, a URL on Home
//! Assistant (its TTS proxy, or any media it was asked to announce),
//! fetched to be played through Hark's speaker.
//!
//! The URL comes from a connection inside `esphome.allow`; what it answers
//! is only ever decoded and played, never sent anywhere, and it is bounded
//! in size and time so a slow or endless answer cannot hold Hark.

use std::{io::Read, sync::Arc, time::Duration};

/// How Home Assistant's audio is fetched (blocking). The appliance fetches
/// over HTTP ([`over_http`]); the fuzz check, which must not reach the
/// network, puts a stand-in here.
pub type Fetch = Arc<dyn Fn(&str) -> Result<Vec<u8>, MediaError> + Send + Sync>;

/// [`fetch`], as the appliance does it.
pub fn over_http() -> Fetch {
    Arc::new(fetch)
}

/// The largest file fetched (a five-minute announcement as WAV is ~10 MB).
pub const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Connecting, and the wait for the answer to begin.
const CONNECT: Duration = Duration::from_secs(5);
/// The whole fetch.
const WHOLE: Duration = Duration::from_secs(30);

/// Why Home Assistant's audio could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("`{url}` is not an http or https URL")]
    Scheme { url: String },
    #[error("cannot fetch `{url}`: {reason}")]
    Fetch { url: String, reason: String },
    #[error("`{url}` answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("`{url}` is larger than {MAX_BYTES} bytes")]
    TooLarge { url: String },
}

/// Whether `url` is Home Assistant's text-to-speech of an announcement's
/// words (its TTS proxy), which Hark says in its own voice instead.
pub fn is_tts(url: &str) -> bool {
    url.contains("/api/tts_proxy/")
}

/// Fetches `url` whole (blocking: call it off the async runtime).
pub fn fetch(url: &str) -> Result<Vec<u8>, MediaError> {
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(MediaError::Scheme {
            url: url.to_owned(),
        });
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(CONNECT))
        .timeout_recv_response(Some(CONNECT))
        .timeout_global(Some(WHOLE))
        .user_agent(concat!("hark/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let fetch_error = |e: &dyn std::fmt::Display| MediaError::Fetch {
        url: url.to_owned(),
        reason: e.to_string(),
    };
    let response = agent.get(url).call().map_err(|e| fetch_error(&e))?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(MediaError::Status {
            url: url.to_owned(),
            status,
        });
    }
    // One byte past the limit tells a file that is too large.
    let mut bytes = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fetch_error(&e))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(MediaError::TooLarge {
            url: url.to_owned(),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_urls_are_fetched() {
        for url in [
            "file:///etc/passwd",
            "ftp://ha/x.mp3",
            "/api/tts_proxy/x.mp3",
        ] {
            assert!(
                matches!(fetch(url), Err(MediaError::Scheme { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn home_assistants_tts_is_told_from_other_media() {
        assert!(is_tts("http://192.168.1.5:8123/api/tts_proxy/abc123.mp3"));
        assert!(!is_tts("http://192.168.1.5:8123/local/doorbell.wav"));
        assert!(!is_tts("media-source://media_source/local/chime.mp3"));
    }

    /// A one-shot HTTP server on loopback answering `answer` to the first
    /// request.
    fn serve(answer: Vec<u8>) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
        let port = listener.local_addr().expect("address").port();
        std::thread::spawn(move || {
            use std::io::Write;
            if let Ok((mut stream, _)) = listener.accept() {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(&answer);
            }
        });
        format!("http://127.0.0.1:{port}/media/x.wav")
    }

    #[test]
    fn a_file_is_fetched_whole_and_failures_are_named() {
        let body = b"RIFF....WAVE".repeat(100);
        let mut ok = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        ok.extend_from_slice(&body);
        assert_eq!(fetch(&serve(ok)).expect("fetched"), body);

        let missing = serve(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec());
        let err = fetch(&missing).expect_err("a 404");
        assert!(
            matches!(err, MediaError::Status { status: 404, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("HTTP 404"), "{err}");

        // Nobody listening.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bound");
            l.local_addr().expect("address").port()
        };
        let err = fetch(&format!("http://127.0.0.1:{closed}/x.mp3")).expect_err("refused");
        assert!(matches!(err, MediaError::Fetch { .. }), "{err}");
    }

    #[test]
    fn a_file_past_the_limit_is_refused() {
        let mut answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        answer.resize(answer.len() + MAX_BYTES as usize + 10, b'x');
        let err = fetch(&serve(answer)).expect_err("too large");
        assert!(matches!(err, MediaError::TooLarge { .. }), "{err}");
    }
}
