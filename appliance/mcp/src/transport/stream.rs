//! Raw TCP and the Unix socket: newline-delimited JSON-RPC, exactly the
//! framing of an MCP stdio server, so `socat STDIO TCP:hark.local:7340` turns
//! the appliance into a stdio server for any client.

use std::{os::unix::fs::PermissionsExt, path::PathBuf, sync::Arc, time::Duration};

use bytes::{Buf, BytesMut};
use futures::StreamExt;
use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter},
    net::{TcpListener, UnixListener},
    sync::mpsc,
};
use tokio_util::codec::{Decoder, FramedRead};

use super::{
    framed::{self, Frame, OUTBOUND_QUEUE, Outbound},
    shared::{Shared, TransportError, accept_next, busy_error, keepalive},
};
use crate::connections::{ConnectionGuard, TransportKind, peer_of};

/// Splits a byte stream into lines of at most `max` bytes. A longer line is
/// reported once as [`Frame::TooLarge`] and skipped up to its newline, so the
/// next message is read normally. Never buffers more than `max` bytes.
#[derive(Debug)]
pub struct LineDecoder {
    max: usize,
    discarding: bool,
    /// How far into the buffer a newline has already been looked for.
    scanned: usize,
}

impl LineDecoder {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            discarding: false,
            scanned: 0,
        }
    }
}

impl Decoder for LineDecoder {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, Self::Error> {
        loop {
            let newline = buf[self.scanned..]
                .iter()
                .position(|b| *b == b'\n')
                .map(|i| i + self.scanned);
            match (self.discarding, newline) {
                (true, Some(end)) => {
                    buf.advance(end + 1);
                    self.scanned = 0;
                    self.discarding = false;
                }
                (true, None) => {
                    buf.clear();
                    self.scanned = 0;
                    return Ok(None);
                }
                (false, Some(end)) if end <= self.max => {
                    let line = buf.split_to(end + 1).freeze().slice(..end);
                    self.scanned = 0;
                    return Ok(Some(Frame::Data(line)));
                }
                (false, Some(end)) => {
                    buf.advance(end + 1);
                    self.scanned = 0;
                    return Ok(Some(Frame::TooLarge { fatal: false }));
                }
                (false, None) if buf.len() > self.max => {
                    buf.clear();
                    self.scanned = 0;
                    self.discarding = true;
                    return Ok(Some(Frame::TooLarge { fatal: false }));
                }
                (false, None) => {
                    self.scanned = buf.len();
                    return Ok(None);
                }
            }
        }
    }
}

/// Writes queued messages as lines; flushes whenever the queue runs dry so a
/// burst of responses costs one write.
async fn write_lines<W: AsyncWrite + Unpin>(write: W, mut rx: mpsc::Receiver<Outbound>) {
    let mut write = BufWriter::new(write);
    let mut line = Vec::with_capacity(1024);
    while let Some(item) = rx.recv().await {
        match item {
            Outbound::Message(message) => {
                line.clear();
                if let Err(e) = serde_json::to_writer(&mut line, &message) {
                    tracing::error!(error = %e, "cannot serialise a response");
                    continue;
                }
                line.push(b'\n');
                if write.write_all(&line).await.is_err() {
                    return;
                }
                if rx.is_empty() && write.flush().await.is_err() {
                    return;
                }
            }
            Outbound::Close { .. } => break,
        }
    }
    let _ = write.flush().await;
    let _ = write.shutdown().await;
}

/// Serves one accepted stream connection.
async fn serve_stream<S>(shared: Arc<Shared>, guard: ConnectionGuard, stream: S)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read, write) = tokio::io::split(stream);
    let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
    let writer = tokio::spawn(write_lines(write, rx));
    let frames = FramedRead::new(read, LineDecoder::new(shared.config.max_message_bytes))
        .take_while(|r| {
            if let Err(e) = r {
                tracing::debug!(error = %e, "read error");
            }
            std::future::ready(r.is_ok())
        })
        .filter_map(|r| std::future::ready(r.ok()));
    framed::serve(shared, guard, Box::pin(frames), tx, writer).await;
}

/// Tells a client over the connection limit why it is being closed.
async fn refuse_busy<S: AsyncWrite + Unpin>(mut stream: S, refusal: crate::budget::Refusal) {
    let message = busy_error(&refusal);
    let mut line = serde_json::to_vec(&message).unwrap_or_default();
    line.push(b'\n');
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&line).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

pub async fn run_tcp(shared: Arc<Shared>, listener: TcpListener) {
    while let Some((stream, addr)) =
        accept_next(&shared, TransportKind::Tcp, || listener.accept()).await
    {
        let _ = stream.set_nodelay(true);
        keepalive(&stream);
        let admitted = match shared.admit(TransportKind::Tcp, Some(addr.ip()), false) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                tracing::warn!(peer = %addr, %refusal, "refusing tcp client");
                tokio::spawn(refuse_busy(stream, refusal));
                continue;
            }
        };
        let guard = shared.connect(TransportKind::Tcp, peer_of(addr), admitted);
        let shared2 = Arc::clone(&shared);
        shared.tasks.spawn(async move {
            serve_stream(shared2, guard, stream).await;
        });
    }
}

pub async fn run_unix(shared: Arc<Shared>, listener: UnixListener) {
    while let Some((stream, _)) =
        accept_next(&shared, TransportKind::Unix, || listener.accept()).await
    {
        let peer = match stream.peer_cred() {
            Ok(cred) => format!(
                "uid={} pid={}",
                cred.uid(),
                cred.pid().map_or_else(|| "?".into(), |p| p.to_string())
            ),
            Err(_) => "unix".into(),
        };
        let admitted = match shared.admit(TransportKind::Unix, None, false) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                tracing::warn!(peer = %peer, %refusal, "refusing unix client");
                tokio::spawn(refuse_busy(stream, refusal));
                continue;
            }
        };
        let guard = shared.connect(TransportKind::Unix, peer, admitted);
        let shared2 = Arc::clone(&shared);
        shared.tasks.spawn(async move {
            serve_stream(shared2, guard, stream).await;
        });
    }
}

/// Binds the Unix socket: creates its directory, replaces a stale socket
/// left by a daemon that died, refuses to steal one that is still served.
pub fn bind_unix(path: &PathBuf, mode: u32) -> Result<UnixListener, TransportError> {
    let err = |source| TransportError::BindUnix {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another process is serving this socket",
            )));
        }
        std::fs::remove_file(path).map_err(err)?;
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(decoder: &mut LineDecoder, input: &[&[u8]]) -> Vec<String> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in input {
            buf.extend_from_slice(chunk);
            while let Some(frame) = decoder.decode(&mut buf).expect("no io error") {
                out.push(match frame {
                    Frame::Data(b) => String::from_utf8_lossy(&b).into_owned(),
                    Frame::TooLarge { .. } => "<too large>".into(),
                    Frame::Refuse { .. } => "<refuse>".into(),
                });
            }
        }
        out
    }

    #[test]
    fn splits_lines_across_chunks() {
        let mut d = LineDecoder::new(100);
        assert_eq!(
            frames(&mut d, &[b"{\"a\":", b"1}\n{\"b\"", b":2}\n"]),
            ["{\"a\":1}", "{\"b\":2}"]
        );
    }

    #[test]
    fn oversized_line_is_reported_once_and_skipped() {
        let mut d = LineDecoder::new(8);
        // Arrives in pieces, longer than the limit before its newline.
        assert_eq!(
            frames(&mut d, &[b"0123456789", b"abcdef", b"ghi\nok\n"]),
            ["<too large>", "ok"]
        );
        // Complete in one chunk.
        let mut d = LineDecoder::new(8);
        assert_eq!(
            frames(&mut d, &[b"0123456789\nfine\n"]),
            ["<too large>", "fine"]
        );
        // Exactly at the limit is accepted.
        let mut d = LineDecoder::new(4);
        assert_eq!(frames(&mut d, &[b"abcd\n"]), ["abcd"]);
    }

    #[test]
    fn buffer_never_exceeds_limit_while_discarding() {
        let mut d = LineDecoder::new(16);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[b'x'; 64]);
        assert!(matches!(
            d.decode(&mut buf),
            Ok(Some(Frame::TooLarge { .. }))
        ));
        for _ in 0..10 {
            buf.extend_from_slice(&[b'y'; 64]);
            assert!(matches!(d.decode(&mut buf), Ok(None)));
            assert!(buf.is_empty());
        }
    }
}
