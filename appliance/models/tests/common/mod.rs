//! Test helpers: fake models and a small HTTP/1.1 server on loopback.
//!
//! The server is hand-written on `std::net` so each failure a download
//! can meet is one field away: a connection dropped after N bytes, a
//! Content-Length that overstates the body, a server that ignores `Range`,
//! an error status, a redirect, a server that never answers. It handles
//! one connection at a time and closes each after its response, and it
//! records every request before answering, so a test that has its result
//! can read what the server saw without waiting.

#![allow(dead_code)] // each test file uses a different part

use std::{
    io::{BufRead, BufReader, Write},
    net::{Shutdown, SocketAddr, TcpListener, TcpStream},
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread::JoinHandle,
};

use hark_models::ggml::header_bytes;

/// whisper's English-only and multilingual vocabulary sizes.
pub const EN_VOCAB: i32 = 51_864;
pub const MULTI_VOCAB: i32 = 51_865;
/// ggml ftypes: f16, and q8_0 with quantisation version 2.
pub const F16: i32 = 1;
pub const Q8_0: i32 = 2007;

/// A file that passes as a whisper.cpp model: a real header, then `len`
/// bytes in all of deterministic noise (different for each `seed`).
pub fn fake_model(len: usize, n_vocab: i32, ftype: i32, seed: u32) -> Vec<u8> {
    let mut out = header_bytes(n_vocab, ftype);
    out.extend(noise(len.saturating_sub(out.len()), seed));
    out.truncate(len);
    out
}

/// `len` bytes of deterministic noise, different for each `seed`.
pub fn noise(len: usize, seed: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    while out.len() < len {
        // xorshift32: cheap, and no two positions of a test body alike.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push(x as u8);
    }
    out
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn sha1_hex(bytes: &[u8]) -> String {
    use sha1::Digest;
    sha1::Sha1::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Fails the test, listing what is there, unless `dir` is empty.
pub fn assert_empty(dir: &Path) {
    let names = dir_names(dir);
    assert!(names.is_empty(), "{} holds {names:?}", dir.display());
}

/// File names in `dir`, sorted.
pub fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// How the server answers.
#[derive(Debug, Clone, Default)]
pub struct Behaviour {
    /// What every path except `/redirect` serves, unless `files` is set.
    pub body: Vec<u8>,
    /// Path → content, for tests that need several files (a piper voice is
    /// an `.onnx` and an `.onnx.json`). When it is not empty, a path that
    /// is not in it is answered 404.
    pub files: Vec<(String, Vec<u8>)>,
    /// Send only this many body bytes, then close the connection.
    pub drop_after: Option<usize>,
    /// Claim this many bytes more than are sent in Content-Length (a
    /// connection lost right at the end of the file).
    pub overstate_length: usize,
    /// How many responses `drop_after` and `overstate_length` apply to.
    pub faults: usize,
    /// Only responses for this path meet the faults, when set.
    pub fault_path: Option<String>,
    /// Answer 200 with the whole body even to a range request.
    pub ignore_range: bool,
    /// Answer this status (with a short text body) to everything.
    pub status: Option<u16>,
    /// Read the request and never answer (until the server is dropped).
    pub stall: bool,
    /// Send this many body bytes, then go silent without closing.
    pub stall_after: Option<usize>,
    /// Sent as `ETag`.
    pub etag: Option<String>,
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub path: String,
    pub range: Option<String>,
    pub if_range: Option<String>,
    /// The status answered (0: none, the server stalled).
    pub status: u16,
}

struct Shared {
    behaviour: Behaviour,
    seen: Vec<Seen>,
}

pub struct Server {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    /// Dropping it releases stalled handlers.
    release: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Mutex::new(Shared {
            behaviour,
            seen: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (release, released) = mpsc::channel::<()>();
        let thread = {
            let shared = shared.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    handle(stream, &shared, &released);
                }
            })
        };
        Self {
            addr,
            shared,
            stop,
            release: Some(release),
            thread: Some(thread),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Changes how the next requests are answered.
    pub fn set(&self, change: impl FnOnce(&mut Behaviour)) {
        change(&mut self.shared.lock().unwrap().behaviour);
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.lock().unwrap().seen.clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.release.take();
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn handle(mut stream: TcpStream, shared: &Mutex<Shared>, released: &mpsc::Receiver<()>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_owned();
    let (mut range, mut if_range) = (None, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = Some(value.trim().to_owned());
            match name.trim().to_ascii_lowercase().as_str() {
                "range" => range = value,
                "if-range" => if_range = value,
                _ => {}
            }
        }
    }

    let mut shared_guard = shared.lock().unwrap();
    let b = shared_guard.behaviour.clone();
    let mut fault = false;
    let mut seen = Seen {
        path: path.clone(),
        range: range.clone(),
        if_range: if_range.clone(),
        status: 0,
    };

    if b.stall {
        shared_guard.seen.push(seen);
        drop(shared_guard);
        let _ = released.recv();
        return;
    }

    let file = if b.files.is_empty() {
        Some(&b.body)
    } else {
        b.files
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, body)| body)
    };
    let mut headers = Vec::new();
    let (status, body): (u16, &[u8]) = if let Some(status) = b.status {
        (status, b"no such thing\n")
    } else if path == "/redirect" {
        headers.push("Location: /model.bin".to_owned());
        (302, b"")
    } else if let Some(file) = file {
        let len = file.len();
        // Faults hit responses that carry the file, not redirects.
        fault = b.faults > 0 && b.fault_path.as_ref().is_none_or(|p| *p == path);
        if fault {
            shared_guard.behaviour.faults -= 1;
        }
        if !b.ignore_range {
            headers.push("Accept-Ranges: bytes".to_owned());
        }
        if let Some(etag) = &b.etag {
            headers.push(format!("ETag: {etag}"));
        }
        let start = range
            .as_deref()
            .filter(|_| !b.ignore_range)
            .and_then(|r| r.strip_prefix("bytes="))
            .and_then(|r| r.strip_suffix('-'))
            .and_then(|s| s.parse::<usize>().ok());
        // If-Range with another validator means "send it all".
        let start = start.filter(|_| if_range.is_none() || if_range == b.etag);
        match start {
            Some(start) if start >= len => {
                headers.push(format!("Content-Range: bytes */{len}"));
                (416, b"")
            }
            Some(start) => {
                headers.push(format!("Content-Range: bytes {start}-{}/{len}", len - 1));
                (206, &file[start..])
            }
            None => (200, &file[..]),
        }
    } else {
        (404, b"no such file\n")
    };
    seen.status = status;
    shared_guard.seen.push(seen);
    drop(shared_guard);

    let claimed = body.len() + if fault { b.overstate_length } else { 0 };
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for h in headers {
        head.push_str(&h);
        head.push_str("\r\n");
    }
    head.push_str(&format!(
        "Content-Length: {claimed}\r\nConnection: close\r\n\r\n"
    ));
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let send = match (fault, b.drop_after) {
        (true, Some(n)) => n.min(body.len()),
        _ => body.len(),
    };
    let send = b.stall_after.map_or(send, |n| n.min(send));
    let _ = stream.write_all(&body[..send]);
    let _ = stream.flush();
    if b.stall_after.is_some() {
        let _ = released.recv();
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        500 => "Internal Server Error",
        _ => "Whatever",
    }
}
