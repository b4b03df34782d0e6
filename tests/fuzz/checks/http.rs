//! HTTP requests and WebSocket frames, as a client on the LAN sends them:
//! the bytes go over a real loopback connection to the MCP side's HTTP
//! listener (Streamable HTTP, the WebSocket upgrade on `/mcp`, the status
//! page, `/events`, the scripts' endpoints, the Host/Origin guard), serving
//! a simulated room, and the client half-closes. Seeds hold whole requests
//! (JSON-RPC POSTs, chunked bodies, an upgrade followed by masked frames).
//!
//! Checks: nothing panics, in any task; the connection answers or closes
//! within 5 s of the client's last byte; what comes back is HTTP/1.x (or
//! HTTP/2 frames after HTTP/2's connection preface, which hyper also
//! serves); and a
//! first request naming a host under `.invalid` (RFC 2606: never this
//! appliance), as `Host` or `Origin`, is not served: 403 from the guard,
//! 400 from hyper when the head is malformed in a way it notices first, or
//! no answer at all: the client half-closes, and the server ends a
//! connection whose input has ended, answered or not, as that is how it
//! notices an agent that went away (docs/reliability.md). A response that
//! goes on (an event stream, a WebSocket session) is left 300 ms after it
//! starts, as a client that has seen enough.

#[path = "../../../appliance/mcp/tests/sim/mod.rs"]
#[allow(dead_code)]
mod sim;

use std::{
    io::{Read, Write},
    net::{Shutdown, SocketAddr, TcpStream},
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use hark_core::{events::Bus, room::Capabilities};
use hark_mcp::{
    ServerState,
    auth::Auth,
    config::{AuthConfig, McpConfig},
    transport::{Listeners, Shared},
};
use tokio_util::sync::CancellationToken;

/// Set by the panic hook: a panic in any of the server's tasks (which
/// tokio would otherwise swallow) fails the input that caused it.
static PANICKED: AtomicBool = AtomicBool::new(false);

/// The server's threads' name: only their panics count (other checks
/// replayed in the same process expect caught panics of their own).
const THREADS: &str = "fuzz-http-server";

struct Server {
    _runtime: tokio::runtime::Runtime,
    addr: SocketAddr,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        // The daemon runs with SIGPIPE ignored (Rust's `main` sets it up);
        // libFuzzer's `main` does not, and a write to a connection the
        // other side has closed would end the run with that signal instead
        // of the error the server handles.
        unsafe extern "C" {
            fn signal(signum: i32, handler: usize) -> usize;
        }
        const SIGPIPE: i32 = 13;
        const SIG_IGN: usize = 1;
        // SAFETY: setting a signal's disposition to "ignore", once, before
        // any thread of the server exists.
        unsafe {
            signal(SIGPIPE, SIG_IGN);
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some(THREADS) {
                PANICKED.store(true, Ordering::SeqCst);
            }
            previous(info);
        }));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(THREADS)
            .enable_all()
            .build()
            .expect("a runtime");
        let addr = runtime.block_on(async {
            // Streams the fuzzer left are noticed only at their next
            // keep-alive; room for them, so no input meets a full house.
            let mut config = McpConfig {
                max_connections: 4096,
                ..McpConfig::default()
            };
            config.tcp.enabled = false;
            config.unix.enabled = false;
            config.http.listen = SocketAddr::from(([127, 0, 0, 1], 0));
            let listeners = Listeners::bind(&config).await.expect("binds loopback");
            let addr = listeners
                .addresses()
                .into_iter()
                .find_map(|(_, a)| a.parse().ok())
                .expect("an HTTP address");
            let bus = Bus::new(256);
            let auth = Arc::new(Auth::with_store(
                &AuthConfig::default(),
                Err("no token store".into()),
            ));
            let state = Arc::new(ServerState::new(bus.clone(), auth, Instant::now()));
            let shared = Arc::new(Shared::new(
                config,
                "",
                Duration::from_secs(1),
                state,
                Capabilities::of(sim::SimRoom::new(bus)),
                CancellationToken::new(),
            ));
            drop(listeners.serve(&shared));
            addr
        });
        Server {
            _runtime: runtime,
            addr,
        }
    })
}

pub fn check(data: &[u8]) {
    let server = server();
    let mut stream = TcpStream::connect(server.addr).expect("connects to the HTTP listener");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    // The server may close before taking it all (a bad request): fine.
    let _ = stream.write_all(data);
    let _ = stream.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut enough: Option<Instant> = None;
    let mut reset = false;
    let patience = Instant::now() + Duration::from_secs(5);
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                let until =
                    *enough.get_or_insert_with(|| Instant::now() + Duration::from_millis(300));
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                stream.set_read_timeout(Some(left)).expect("a read timeout");
            }
            // A signal (libFuzzer's timer) interrupted the wait: not an
            // answer; wait on, to the same deadline.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                assert!(
                    Instant::now() < patience,
                    "the connection neither answered nor closed within 5 s"
                );
                continue;
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => {
                reset = true;
                break;
            }
            Err(_) if enough.is_some() => break,
            Err(e) => panic!("the connection neither answered nor closed within 5 s: {e}"),
        }
    }
    assert!(
        !PANICKED.load(Ordering::SeqCst),
        "a server task panicked (see above)"
    );
    const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    assert!(
        answer.is_empty()
            || answer.starts_with(b"HTTP/1.1 ")
            || answer.starts_with(b"HTTP/1.0 ")
            || data.starts_with(HTTP2_PREFACE),
        "not HTTP: {:?}",
        String::from_utf8_lossy(&answer[..answer.len().min(200)])
    );
    if names_an_invalid_host(data) {
        let status = answer.get(9..12);
        assert!(
            answer.is_empty() || matches!(status, Some(b"403") | Some(b"400")),
            "a request for another host was not refused (reset: {reset}): {:?}",
            String::from_utf8_lossy(&answer[..answer.len().min(200)])
        );
    }
}

/// The first request's head is complete and names, in `Host` or `Origin`,
/// a host under `.invalid`.
fn names_an_invalid_host(data: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    if !matches!(request.parse(data), Ok(httparse::Status::Complete(_))) {
        return false;
    }
    // hyper refuses a request with two Host headers as malformed (400);
    // the guard's rule is for well-formed ones.
    let hosts = request
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"))
        .count();
    if hosts != 1 {
        return false;
    }
    request.headers.iter().any(|h| {
        let named = h.name.eq_ignore_ascii_case("host") || h.name.eq_ignore_ascii_case("origin");
        let value = String::from_utf8_lossy(h.value).to_ascii_lowercase();
        let host = value
            .trim()
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .split(['/', ':'])
            .next()
            .unwrap_or("")
            .trim_end_matches('.')
            .to_owned();
        named && host.ends_with(".invalid")
    })
}
