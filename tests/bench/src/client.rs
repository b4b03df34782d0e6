//! Minimal MCP clients, one per transport, that do exactly what the bench
//! needs: the initialize handshake, then `tools/call get_status` (or
//! `list_captures`) one at a time, checking each answer is a successful
//! result for the id sent.
//!
//! They are hand-rolled rather than an SDK client so that the time measured is
//! the server's plus the wire's, not a client library's: a call is one write
//! and one read (one request and one response body on HTTP).

use std::{fmt, net::SocketAddr, path::PathBuf, str::FromStr};

use anyhow::{Context, anyhow, bail, ensure};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader},
    net::{TcpStream, UnixStream},
    task::JoinHandle,
};
use tokio_tungstenite::{
    WebSocketStream, client_async,
    tungstenite::{Message, client::IntoClientRequest},
};

/// The protocol version the bench negotiates (and sends on HTTP).
pub const PROTOCOL_VERSION: &str = "2025-06-18";

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hark-bench","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The read-only tools the bench calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tool {
    GetStatus,
    ListCaptures,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::GetStatus => "get_status",
            Tool::ListCaptures => "list_captures",
        }
    }
}

fn tool_call(id: u64, tool: Tool) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{}","arguments":{{}}}}}}"#,
        tool.name()
    )
}

/// A byte stream a client speaks over: TCP, or TLS over TCP.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// One of the four ways to reach an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Unix,
    Http,
    Websocket,
    /// Streamable HTTP over TLS (`[mcp.https]`), trusting the appliance's
    /// own certificate authority.
    Https,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
            Transport::Http => "http",
            Transport::Https => "https",
            Transport::Websocket => "websocket",
        })
    }
}

impl FromStr for Transport {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tcp" => Ok(Transport::Tcp),
            "unix" => Ok(Transport::Unix),
            "http" => Ok(Transport::Http),
            "websocket" | "ws" => Ok(Transport::Websocket),
            "https" => Ok(Transport::Https),
            other => Err(format!(
                "unknown transport `{other}` (tcp, unix, http, websocket, https)"
            )),
        }
    }
}

/// Where a server listens. A missing entry means it does not serve that
/// transport (the Python peer only speaks HTTP).
#[derive(Clone, Default)]
pub struct Endpoints {
    pub tcp: Option<SocketAddr>,
    /// Streamable HTTP and WebSocket, both at `/mcp`.
    pub http: Option<SocketAddr>,
    pub unix: Option<PathBuf>,
    /// HTTPS, and the TLS client that trusts the appliance's authority.
    pub https: Option<(SocketAddr, tokio_rustls::TlsConnector)>,
}

/// A TLS client trusting only the certificate authority in `ca_pem` (the
/// appliance's `tls/ca.pem`).
pub fn tls_trusting(ca_pem: &[u8]) -> anyhow::Result<tokio_rustls::TlsConnector> {
    use tokio_rustls::rustls::{
        ClientConfig, RootCertStore,
        pki_types::{CertificateDer, pem::PemObject},
    };
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem).context("the CA is not a PEM certificate")?)
        .context("the CA certificate is not usable")?;
    let config = ClientConfig::builder_with_provider(std::sync::Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(
        config,
    )))
}

/// A connected, initialised client.
pub enum Client {
    Tcp(LineClient<TcpStream>),
    Unix(LineClient<UnixStream>),
    Http(HttpClient),
    Websocket(WsClient),
}

impl Client {
    /// Connects over `transport` and completes the initialize handshake.
    pub async fn connect(endpoints: &Endpoints, transport: Transport) -> anyhow::Result<Self> {
        match transport {
            Transport::Tcp => {
                let addr = endpoints.tcp.context("the server has no TCP listener")?;
                let stream = TcpStream::connect(addr)
                    .await
                    .with_context(|| format!("cannot connect to tcp {addr}"))?;
                stream.set_nodelay(true)?;
                Ok(Client::Tcp(LineClient::handshake(stream).await?))
            }
            Transport::Unix => {
                let path = endpoints
                    .unix
                    .as_ref()
                    .context("the server has no Unix socket")?;
                let stream = UnixStream::connect(path)
                    .await
                    .with_context(|| format!("cannot connect to {}", path.display()))?;
                Ok(Client::Unix(LineClient::handshake(stream).await?))
            }
            Transport::Http => {
                let addr = endpoints.http.context("the server has no HTTP listener")?;
                Ok(Client::Http(HttpClient::handshake(addr, None).await?))
            }
            Transport::Https => {
                let (addr, tls) = endpoints
                    .https
                    .clone()
                    .context("the server has no HTTPS listener")?;
                Ok(Client::Http(HttpClient::handshake(addr, Some(tls)).await?))
            }
            Transport::Websocket => {
                let addr = endpoints.http.context("the server has no HTTP listener")?;
                Ok(Client::Websocket(WsClient::handshake(addr).await?))
            }
        }
    }

    /// One `tools/call get_status` round trip.
    pub async fn call(&mut self, id: u64) -> anyhow::Result<()> {
        self.call_tool(id, Tool::GetStatus).await
    }

    /// One `tools/call` round trip of `tool`.
    pub async fn call_tool(&mut self, id: u64, tool: Tool) -> anyhow::Result<()> {
        match self {
            Client::Tcp(c) => c.call(id, tool).await,
            Client::Unix(c) => c.call(id, tool).await,
            Client::Http(c) => c.call(id, tool).await,
            Client::Websocket(c) => c.call(id, tool).await,
        }
    }

    /// Ends the session the way a well-behaved client does (HTTP: `DELETE`).
    pub async fn close(self) {
        match self {
            Client::Http(c) => c.close().await,
            Client::Websocket(mut c) => {
                let _ = c.socket.close(None).await;
            }
            Client::Tcp(_) | Client::Unix(_) => {}
        }
    }
}

/// Checks that `message` answers request `id` with a successful result.
/// `Ok(false)` means it is some other message (a notification, another id).
fn check_response(message: &str, id: u64) -> anyhow::Result<bool> {
    let value: Value = serde_json::from_str(message)
        .with_context(|| format!("server sent invalid JSON: {}", clip(message)))?;
    if value.get("id").and_then(Value::as_u64) != Some(id) {
        return Ok(false);
    }
    if let Some(error) = value.get("error") {
        bail!("server answered id {id} with an error: {error}");
    }
    let result = value
        .get("result")
        .with_context(|| format!("response to id {id} has no result: {}", clip(message)))?;
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        bail!("tool call {id} failed: {result}");
    }
    Ok(true)
}

fn clip(text: &str) -> &str {
    match text.char_indices().nth(200) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// Newline-delimited JSON-RPC (raw TCP and the Unix socket).
pub struct LineClient<S> {
    stream: BufReader<S>,
    line: String,
}

impl<S: AsyncRead + AsyncWrite + Unpin> LineClient<S> {
    async fn handshake(stream: S) -> anyhow::Result<Self> {
        let mut client = Self {
            stream: BufReader::new(stream),
            line: String::new(),
        };
        client.send(INITIALIZE).await?;
        client.receive(0).await.context("initialize failed")?;
        client.send(INITIALIZED).await?;
        Ok(client)
    }

    async fn send(&mut self, message: &str) -> anyhow::Result<()> {
        // One write per message: the request leaves in one segment.
        let mut framed = String::with_capacity(message.len() + 1);
        framed.push_str(message);
        framed.push('\n');
        self.stream.write_all(framed.as_bytes()).await?;
        Ok(())
    }

    async fn receive(&mut self, id: u64) -> anyhow::Result<()> {
        loop {
            self.line.clear();
            let read = self.stream.read_line(&mut self.line).await?;
            ensure!(read > 0, "server closed the connection");
            if check_response(self.line.trim_end(), id)? {
                return Ok(());
            }
        }
    }

    async fn call(&mut self, id: u64, tool: Tool) -> anyhow::Result<()> {
        self.send(&tool_call(id, tool)).await?;
        self.receive(id).await
    }
}

/// Streamable HTTP over one keep-alive HTTP/1.1 connection.
pub struct HttpClient {
    addr: SocketAddr,
    tls: Option<tokio_rustls::TlsConnector>,
    host: String,
    session: Option<String>,
    sender: SendRequest<Full<Bytes>>,
    connection: JoinHandle<()>,
    /// The standalone `GET` event stream, when opened (see [`Self::open_event_stream`]).
    events: Option<JoinHandle<()>>,
}

async fn http_connect(
    addr: SocketAddr,
    tls: Option<&tokio_rustls::TlsConnector>,
) -> anyhow::Result<(SendRequest<Full<Bytes>>, JoinHandle<()>)> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("cannot connect to http {addr}"))?;
    stream.set_nodelay(true)?;
    let stream: Box<dyn Io> = match tls {
        Some(tls) => {
            let name = tokio_rustls::rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            Box::new(
                tls.connect(name, stream)
                    .await
                    .with_context(|| format!("TLS handshake with {addr} failed"))?,
            )
        }
        None => Box::new(stream),
    };
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("HTTP handshake failed")?;
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((sender, connection))
}

impl HttpClient {
    async fn handshake(
        addr: SocketAddr,
        tls: Option<tokio_rustls::TlsConnector>,
    ) -> anyhow::Result<Self> {
        let (sender, connection) = http_connect(addr, tls.as_ref()).await?;
        let mut client = Self {
            addr,
            tls,
            host: addr.to_string(),
            session: None,
            sender,
            connection,
            events: None,
        };
        let (status, headers, body) = client.post(INITIALIZE).await?;
        ensure!(
            status == StatusCode::OK,
            "initialize got HTTP {status}: {}",
            clip(&String::from_utf8_lossy(&body))
        );
        client.session = headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        ensure!(
            sse_answers(&body, 0)?,
            "initialize response has no result: {}",
            clip(&String::from_utf8_lossy(&body))
        );
        let (status, _, body) = client.post(INITIALIZED).await?;
        ensure!(
            status == StatusCode::ACCEPTED,
            "notifications/initialized got HTTP {status}: {}",
            clip(&String::from_utf8_lossy(&body))
        );
        Ok(client)
    }

    fn request(&self, method: http::Method) -> http::request::Builder {
        let mut builder = Request::builder()
            .method(method)
            .uri("/mcp")
            .header(header::HOST, &self.host)
            .header(header::ACCEPT, "application/json, text/event-stream");
        if let Some(session) = &self.session {
            builder = builder
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        builder
    }

    async fn post(
        &mut self,
        message: &str,
    ) -> anyhow::Result<(StatusCode, http::HeaderMap, Bytes)> {
        let request = self
            .request(http::Method::POST)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::copy_from_slice(message.as_bytes())))?;
        self.sender
            .ready()
            .await
            .context("HTTP connection closed")?;
        let response = self.sender.send_request(request).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok((parts.status, parts.headers, body))
    }

    async fn call(&mut self, id: u64, tool: Tool) -> anyhow::Result<()> {
        let (status, _, body) = self.post(&tool_call(id, tool)).await?;
        ensure!(
            status == StatusCode::OK,
            "tools/call got HTTP {status}: {}",
            clip(&String::from_utf8_lossy(&body))
        );
        ensure!(
            sse_answers(&body, id)?,
            "no response to id {id} in: {}",
            clip(&String::from_utf8_lossy(&body))
        );
        Ok(())
    }

    /// Opens the standalone `GET /mcp` event stream on a second connection,
    /// as SDK clients do, and keeps reading it (keep-alives) until closed.
    pub async fn open_event_stream(&mut self) -> anyhow::Result<()> {
        let (mut sender, connection) = http_connect(self.addr, self.tls.as_ref()).await?;
        let request = self
            .request(http::Method::GET)
            .header(header::ACCEPT, "text/event-stream")
            .body(Full::new(Bytes::new()))?;
        let response = sender.send_request(request).await?;
        ensure!(
            response.status() == StatusCode::OK,
            "GET event stream got HTTP {}",
            response.status()
        );
        let mut body = response.into_body();
        self.events = Some(tokio::spawn(async move {
            while let Some(Ok(_)) = body.frame().await {}
            drop(sender);
            connection.abort();
        }));
        Ok(())
    }

    async fn close(mut self) {
        if let Some(events) = self.events.take() {
            events.abort();
        }
        if self.session.is_some()
            && let Ok(request) = self
                .request(http::Method::DELETE)
                .body(Full::new(Bytes::new()))
            && self.sender.ready().await.is_ok()
            && let Ok(response) = self.sender.send_request(request).await
        {
            let _ = response.into_body().collect().await;
        }
        self.connection.abort();
    }
}

/// Whether an SSE (or plain JSON) response body carries the successful
/// response to `id`. Empty `data:` lines are priming events.
fn sse_answers(body: &[u8], id: u64) -> anyhow::Result<bool> {
    let text = std::str::from_utf8(body).context("response body is not UTF-8")?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        return check_response(trimmed.trim_end(), id);
    }
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if !data.is_empty() && check_response(data, id)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// MCP over WebSocket (subprotocol `mcp`, one message per text frame).
pub struct WsClient {
    socket: WebSocketStream<TcpStream>,
}

impl WsClient {
    async fn handshake(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to websocket {addr}"))?;
        stream.set_nodelay(true)?;
        let mut request = format!("ws://{addr}/mcp").into_client_request()?;
        request.headers_mut().insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            header::HeaderValue::from_static("mcp"),
        );
        let (socket, response) = client_async(request, stream)
            .await
            .context("WebSocket handshake failed")?;
        ensure!(
            response
                .headers()
                .get(header::SEC_WEBSOCKET_PROTOCOL)
                .is_some_and(|v| v == "mcp"),
            "server did not select the `mcp` subprotocol"
        );
        let mut client = Self { socket };
        client.socket.send(Message::text(INITIALIZE)).await?;
        client.receive(0).await.context("initialize failed")?;
        client.socket.send(Message::text(INITIALIZED)).await?;
        Ok(client)
    }

    async fn receive(&mut self, id: u64) -> anyhow::Result<()> {
        loop {
            match self.socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    if check_response(text.as_str(), id)? {
                        return Ok(());
                    }
                }
                Some(Ok(Message::Close(frame))) => bail!("server closed the WebSocket: {frame:?}"),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(anyhow!(e).context("WebSocket read failed")),
                None => bail!("server closed the connection"),
            }
        }
    }

    async fn call(&mut self, id: u64, tool: Tool) -> anyhow::Result<()> {
        self.socket.send(Message::text(tool_call(id, tool))).await?;
        self.receive(id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_response_after_a_priming_event() {
        let body = b"data: \nid: 0/0\nretry: 3000\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"isError\":false}}\nid: 1/0\n\n";
        assert!(sse_answers(body, 7).expect("valid"));
        assert!(!sse_answers(body, 8).expect("valid"));
    }

    #[test]
    fn tool_errors_and_jsonrpc_errors_fail_the_call() {
        assert!(check_response(r#"{"id":1,"result":{"isError":true}}"#, 1).is_err());
        assert!(check_response(r#"{"id":1,"error":{"code":-1,"message":"x"}}"#, 1).is_err());
        assert!(check_response(r#"{"id":1,"result":{}}"#, 1).expect("ok"));
    }
}
