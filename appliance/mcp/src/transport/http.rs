//! HTTP on one port: Streamable HTTP at `/mcp` (rmcp's service: POST, the GET
//! event stream, DELETE, session ids, `MCP-Protocol-Version`) and, on the same
//! path, the WebSocket upgrade (see [`super::ws`]). Host and Origin are
//! checked first for both.

use std::{convert::Infallible, sync::Arc, time::Duration};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::{body::Incoming, service::service_fn};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto,
};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, ProtocolVersion,
    ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::{io::AsyncWriteExt, net::TcpListener};
use tracing::Instrument;

use super::{
    bearer,
    body::{Body, text_response},
    page, plain, scripts,
    shared::{Shared, accept_next, keepalive},
    ws,
};
use crate::{
    auth::Scope,
    connections::{ClientIdentity, TransportKind, peer_of},
    {
        framing::METHODS,
        framing::{self, Decoded},
        server::HarkServer,
    },
};

type McpService = StreamableHttpService<HarkServer, LocalSessionManager>;

/// rmcp's two ways of serving `/mcp`.
#[derive(Clone)]
struct McpServices {
    /// With sessions: `initialize`, then requests naming the session.
    session: McpService,
    /// Without: a request that names no session is served on its own and
    /// answered with JSON when it can be ([`super::plain`]).
    stateless: McpService,
}

/// Longest wait for an HTTP request to begin on an open connection.
const HTTP_REQUEST_WAIT: Duration = Duration::from_secs(30);

/// Each HTTP connection's socket send buffer.
const SEND_BUFFER: usize = 128 * 1024;

/// hyper's per-connection read and write buffer (its default is 400 KiB).
const HTTP_WRITE_BUFFER: usize = 64 * 1024;

/// The one path MCP is served at.
pub const MCP_PATH: &str = "/mcp";

fn mcp_services(shared: &Arc<Shared>) -> McpServices {
    McpServices {
        session: mcp_service(shared, false),
        stateless: mcp_service(shared, true),
    }
}

fn mcp_service(shared: &Arc<Shared>, stateless: bool) -> McpService {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(!stateless)
        .with_json_response(stateless)
        // Checked by our guard for HTTP and WebSocket alike.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_cancellation_token(shared.shutdown.child_token())
        .with_max_request_body_bytes(shared.config.max_message_bytes)
        .with_sse_keep_alive(Some(Duration::from_secs(15)));
    let state = Arc::clone(&shared.state);
    let room = shared.room.clone();
    let tools = Arc::clone(&shared.tools);
    StreamableHttpService::new(
        move || {
            Ok(HarkServer::new(
                Arc::clone(&state),
                room.clone(),
                Arc::clone(&tools),
                None,
            ))
        },
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// A request refused before its body was read leaves that body on the
/// connection, so hyper closes the connection after the answer; a client
/// that sends its next request on it meanwhile sees the connection drop
/// instead of an answer. The refusal therefore says `Connection: close`
/// (HTTP/1 only: HTTP/2 has no such header, and its streams are
/// independent).
fn unread_body_closes(
    request: &Request<Incoming>,
) -> impl FnOnce(Response<Body>) -> Response<Body> + use<> {
    let has_body = request.version() <= http::Version::HTTP_11
        && (request.headers().contains_key(header::TRANSFER_ENCODING)
            || request
                .headers()
                .get(header::CONTENT_LENGTH)
                .is_some_and(|v| v.as_bytes() != b"0"));
    move |mut response: Response<Body>| {
        if has_body && response.status().is_client_error() {
            response.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
        }
        response
    }
}

async fn handle(
    shared: Arc<Shared>,
    mcp: McpServices,
    identity: Arc<ClientIdentity>,
    mut request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    // A whole request head: not one of the silent that make way first.
    identity.slot.spoke();
    if let Err(rejection) = shared.hosts.check(request.uri(), request.headers()) {
        tracing::warn!(%rejection, "refused request");
        return Ok(text_response(StatusCode::FORBIDDEN, rejection.to_string()));
    }
    if let Some(value) = request.headers().get(crate::server::CLIENT_HEADER)
        && let Err(why) = crate::server::check_client_name(value)
    {
        return Ok(text_response(StatusCode::BAD_REQUEST, why));
    }
    // For monitoring: no token, nothing private.
    if request.uri().path() == "/health" {
        return Ok(match *request.method() {
            http::Method::GET | http::Method::HEAD => scripts::health(&shared),
            _ => method_not_allowed("/health", "GET"),
        });
    }
    // The bridge for desktop clients, as a wheel: public code, no token.
    if let Some(name) = request.uri().path().strip_prefix(super::wheel::PREFIX) {
        return Ok(match *request.method() {
            http::Method::GET | http::Method::HEAD if name == super::wheel::file_name() => {
                http::Response::builder()
                    .status(StatusCode::OK)
                    .header(http::header::CONTENT_TYPE, "application/zip")
                    .header(
                        http::header::CONTENT_DISPOSITION,
                        format!("attachment; filename=\"{name}\""),
                    )
                    .body(Full::new(Bytes::from_static(super::wheel::wheel())).boxed())
                    .unwrap_or_else(|_| {
                        text_response(StatusCode::INTERNAL_SERVER_ERROR, "no wheel")
                    })
            }
            http::Method::GET | http::Method::HEAD => text_response(
                StatusCode::NOT_FOUND,
                format!(
                    "the bridge is at {}{}",
                    super::wheel::PREFIX,
                    super::wheel::file_name()
                ),
            ),
            _ => method_not_allowed(request.uri().path(), "GET"),
        });
    }
    let grant = match bearer::authorize(shared.auth(), &identity, request.uri(), request.headers())
    {
        Ok(grant) => grant,
        Err(refused) => return Ok(*refused),
    };
    if grant.paired_name().is_some() {
        // A paired agent's connection leaves the unpaired budget.
        identity.slot.promote();
    }
    let path = request.uri().path();
    match (path, request.method()) {
        ("/events", &http::Method::GET) => {
            if let Err(refused) = bearer::require(&grant, Scope::Listen, "the event stream") {
                return Ok(*refused);
            }
            return Ok(scripts::events(&shared));
        }
        ("/speak", &http::Method::POST) => {
            if let Err(refused) = bearer::require(&grant, Scope::Speak, "POST /speak") {
                return Ok(*refused);
            }
            return Ok(scripts::speak(shared, &grant, request).await);
        }
        ("/transcribe", &http::Method::POST) => {
            if let Err(refused) = bearer::require(&grant, Scope::Files, "POST /transcribe") {
                return Ok(*refused);
            }
            return Ok(scripts::transcribe(shared, request).await);
        }
        (path, &http::Method::GET) if path.starts_with("/speak/") => {
            if let Err(refused) = bearer::require(&grant, Scope::Speak, "GET /speak/ID") {
                return Ok(*refused);
            }
            return Ok(scripts::speech(&shared, &path["/speak/".len()..]));
        }
        ("/events", _) | ("/speak", _) | ("/transcribe", _) => {
            let allowed = if path == "/events" { "GET" } else { "POST" };
            return Ok(method_not_allowed(path, allowed));
        }
        (path, _) if page::serves(path) => {
            return Ok(page::handle(shared, identity, grant, request).await);
        }
        _ => {}
    }
    if path != MCP_PATH && path != "/mcp/" {
        return Ok(text_response(
            StatusCode::NOT_FOUND,
            format!(
                "Hark serves MCP at {MCP_PATH} (Streamable HTTP and WebSocket), the event stream at GET /events, speech at POST /speak (and GET /speak/ID), transcription at POST /transcribe and GET /health"
            ),
        ));
    }
    request.extensions_mut().insert(identity);
    request.extensions_mut().insert(grant);
    if ws::is_upgrade(&request) {
        return Ok(ws::upgrade(shared, request));
    }
    if request.method() == http::Method::DELETE {
        // rmcp says 202 to a session's end; the Python SDK takes only 200
        // and 204 as done and warns "Session termination failed: 202" on
        // every close. Nothing follows a DELETE, so 204.
        let mut response = mcp.session.handle(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        return Ok(response);
    }
    if request.method() != http::Method::POST {
        return Ok(mcp.session.handle(request).await);
    }
    // rmcp answers a body that is not a JSON-RPC message with a plain-text
    // 415; JSON-RPC clients expect -32700 / -32600 in a JSON-RPC error. Check
    // the body with the same rules as every other transport, then hand the
    // untouched bytes to rmcp.
    let (mut parts, body) = request.into_parts();
    let limit = shared.config.max_message_bytes;
    let mut bytes = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Ok(text_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body exceeds the {limit}-byte limit (mcp.max_message_bytes)"),
            ));
        }
        Err(e) => {
            tracing::debug!(error = %e, "cannot read request body");
            return Ok(text_response(
                StatusCode::BAD_REQUEST,
                "cannot read the request body",
            ));
        }
    };
    let mut initialize = false;
    match framing::decode(&bytes) {
        Decoded::Reply(reply) => {
            // A well-formed request whose params do not fit is still first
            // of all a method this version does not serve.
            let params = matches!(&*reply, ServerJsonRpcMessage::Error(e) if e.error.code == ErrorCode::INVALID_PARAMS);
            if params && let Some(reply) = unserved_2026_method(&parts.headers, &bytes) {
                return Ok(json_response(StatusCode::NOT_FOUND, &reply));
            }
            return Ok(json_response(StatusCode::BAD_REQUEST, &reply));
        }
        Decoded::Message(message) => {
            if let ClientJsonRpcMessage::Request(request) = &*message {
                tracing::debug!(method = request.request.method(), id = %request.id, "request");
                // Under 2026-07-28 `initialize` is gone: rmcp refuses it.
                if matches!(request.request, ClientRequest::InitializeRequest(_))
                    && !speaks_2026(&parts.headers)
                {
                    initialize = true;
                    // An `initialize` with empty params (VoxCtrl's) was
                    // completed: rmcp reads the completed one.
                    let as_sent = serde_json::from_slice::<ClientJsonRpcMessage>(&bytes);
                    let complete = matches!(as_sent, Ok(ClientJsonRpcMessage::Request(r))
                        if matches!(r.request, ClientRequest::InitializeRequest(_)));
                    if !complete && let Ok(completed) = serde_json::to_vec(&*message) {
                        bytes = Bytes::from(completed);
                    }
                }
            }
            if let Some(reply) = unserved_2026_method(&parts.headers, &bytes) {
                return Ok(json_response(StatusCode::NOT_FOUND, &reply));
            }
        }
        Decoded::Ignore => {}
    }
    // The simplest clients (super::plain): JSON for `initialize` and for a
    // client that takes no event stream, and no session needed.
    let streams = plain::accepts(&parts.headers, "text/event-stream");
    if !streams {
        plain::accept_both(&mut parts.headers);
    }
    let service = if initialize || parts.headers.contains_key("mcp-session-id") {
        &mcp.session
    } else {
        &mcp.stateless
    };
    let response = service
        .handle(Request::from_parts(parts, Full::new(bytes)))
        .await;
    Ok(if initialize || !streams {
        plain::to_json(response).await
    } else {
        response
    })
}

/// Whether the request says it speaks 2026-07-28 or later.
fn speaks_2026(headers: &http::HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Under 2026-07-28 a method the server does not serve is a 404 with -32601,
/// and that takes precedence over the per-request metadata checks. rmcp
/// checks the metadata first for the methods 2026-07-28 removed
/// (`logging/setLevel`, `resources/subscribe`, …), so answer those here.
fn unserved_2026_method(headers: &http::HeaderMap, body: &[u8]) -> Option<ServerJsonRpcMessage> {
    if !speaks_2026(headers) {
        return None;
    }
    let version = headers.get("mcp-protocol-version")?.to_str().ok()?;
    /// Just what a request is called and its id (a notification has none).
    #[derive(serde::Deserialize)]
    struct Head {
        method: String,
        id: rmcp::model::RequestId,
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    let method = head.method.as_str();
    // rmcp answers the removed `initialize` and `ping` as it should; the
    // removed resource subscriptions it would check for `_meta` first.
    if METHODS.contains(&method)
        && !matches!(method, "resources/subscribe" | "resources/unsubscribe")
    {
        return None;
    }
    Some(ServerJsonRpcMessage::error(
        ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: `{method}` is not served under MCP {version}"),
            None,
        ),
        Some(head.id),
    ))
}

fn method_not_allowed(path: &str, allowed: &'static str) -> Response<Body> {
    let mut response = text_response(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{path} takes {allowed}"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allowed));
    response
}

fn json_response(status: StatusCode, message: &impl serde::Serialize) -> Response<Body> {
    let body = serde_json::to_vec(message).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// Tells an HTTP client over the connection limit to come back later. Written
/// by hand because the connection is not served at all.
async fn refuse_busy(mut stream: tokio::net::TcpStream, refusal: crate::budget::Refusal) {
    let body = format!("{refusal}\n");
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    serve(shared, listener, None).await;
}

/// HTTPS (`[mcp.https]`): the same service over TLS.
pub async fn run_tls(shared: Arc<Shared>, listener: TcpListener, tls: tokio_rustls::TlsAcceptor) {
    serve(shared, listener, Some(tls)).await;
}

async fn serve(shared: Arc<Shared>, listener: TcpListener, tls: Option<tokio_rustls::TlsAcceptor>) {
    let kind = if tls.is_some() {
        TransportKind::Https
    } else {
        TransportKind::Http
    };
    let mcp = mcp_services(&shared);
    while let Some((stream, addr)) = accept_next(&shared, kind, || listener.accept()).await {
        let _ = stream.set_nodelay(true);
        keepalive(&stream);
        // A fixed send buffer instead of one the kernel grows to megabytes:
        // an event-stream client that stops reading is noticed (and
        // dropped) after a bounded amount, not after 4 MB. Ample for a LAN.
        if let Err(e) = socket2::SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER) {
            tracing::debug!(error = %e, "cannot set the send buffer");
        }
        let admitted = match shared.admit(kind, Some(addr.ip()), false) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                tracing::warn!(peer = %addr, %refusal, "refusing {kind} client");
                match &tls {
                    None => {
                        tokio::spawn(refuse_busy(stream, refusal));
                    }
                    // No plain-text answer on a TLS port: the client sees
                    // the connection closed.
                    Some(_) => drop(stream),
                }
                continue;
            }
        };
        // Unpaired connections get the short deadline for their requests.
        let unpaired = admitted.unpaired();
        let guard = shared.connect(kind, peer_of(addr), admitted);
        let identity = Arc::clone(guard.identity());
        let close = identity.close.clone();
        let span = tracing::info_span!("connection", transport = %kind, peer = %addr, client_id = identity.id);
        let service = {
            let shared = Arc::clone(&shared);
            let mcp = mcp.clone();
            service_fn(move |request: Request<Incoming>| {
                let span = tracing::info_span!(
                    "request",
                    http_method = %request.method(),
                    session = request
                        .headers()
                        .get("mcp-session-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or(""),
                );
                let closes = unread_body_closes(&request);
                let response = handle(
                    Arc::clone(&shared),
                    mcp.clone(),
                    Arc::clone(&identity),
                    request,
                );
                async move { response.await.map(closes) }.instrument(span)
            })
        };
        let shared2 = Arc::clone(&shared);
        let tls = tls.clone();
        shared.tasks.spawn(
            async move {
                // A connection must start a request, and a keep-alive
                // connection its next one, within this time; otherwise it is
                // closed and its slot freed. HTTP clients reconnect without
                // fuss, and event streams are responses, not affected.
                let mut request_wait = shared2
                    .config
                    .idle_timeout()
                    .map_or(HTTP_REQUEST_WAIT, |idle| idle.min(HTTP_REQUEST_WAIT));
                if unpaired {
                    request_wait = request_wait.min(shared2.unpaired_deadline());
                }
                match tls {
                    None => {
                        // hyper's timer only starts once it knows the HTTP
                        // version, so wait for the first bytes here.
                        let mut first = [0u8; 1];
                        let peeked = tokio::select! {
                            peeked = tokio::time::timeout(request_wait, stream.peek(&mut first)) => peeked,
                            () = close.cancelled() => {
                                tracing::debug!("made way before its first request");
                                return;
                            }
                        };
                        if !matches!(peeked, Ok(Ok(1))) {
                            tracing::debug!("no request arrived (or the client left); closing");
                            drop(guard);
                            return;
                        }
                        serve_connection(&shared2, guard, stream, service, request_wait).await;
                    }
                    Some(tls) => {
                        // The handshake within the same wait: a client that
                        // opens a TLS connection and stalls holds nothing long.
                        let handshake = tokio::select! {
                            handshake = tokio::time::timeout(request_wait, tls.accept(stream)) => handshake,
                            () = close.cancelled() => {
                                tracing::debug!("made way before its handshake ended");
                                return;
                            }
                        };
                        match handshake {
                            Ok(Ok(stream)) => {
                                serve_connection(&shared2, guard, stream, service, request_wait)
                                    .await;
                            }
                            Ok(Err(e)) => {
                                tracing::info!(error = %e, "TLS handshake failed");
                            }
                            Err(_) => tracing::debug!("no TLS handshake in time; closing"),
                        }
                    }
                }
            }
            .instrument(span),
        );
    }
}

/// Serves one HTTP connection (plain or TLS) until it ends, the daemon
/// shuts down, or it must make way.
async fn serve_connection<I, S>(
    shared: &Shared,
    guard: crate::connections::ConnectionGuard,
    io: I,
    service: S,
    request_wait: Duration,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    let mut http1 = builder.http1();
    http1.timer(TokioTimer::new());
    http1.header_read_timeout(request_wait);
    // Not `half_close`: reading the end of a client's input must end the
    // connection, because that is how an agent that went away is noticed
    // (its listen stops and the microphone is free at once). TCP cannot tell
    // that from a client that only shut its sending side (`nc -N`), which
    // may therefore lose an answer still being made (docs/reliability.md).
    // What one connection may have waiting to be written: a GET /events
    // client that stops reading fills this, then its own queue, and is
    // dropped, instead of holding megabytes of events.
    http1.max_buf_size(HTTP_WRITE_BUFFER);
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(connection);
    let close = guard.identity().close.clone();
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "http connection ended with an error");
            }
        }
        () = close.cancelled() => {
            tracing::info!("closing a connection to make way for a newer one");
        }
        _ = shared.shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(shared.shutdown_timeout, connection).await;
        }
    }
    // Calls this connection was waiting on (an event stream included) have
    // no one to answer: long-running tools stop.
    guard.identity().gone.cancel();
    drop(guard);
}
