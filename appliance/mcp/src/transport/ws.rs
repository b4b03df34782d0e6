//! WebSocket at `/mcp`: subprotocol `mcp`, one JSON-RPC message per text
//! message. Binary messages are refused by closing with 1003, messages over
//! the size limit with 1009, invalid UTF-8 with 1007.
//!
//! The handshake is answered here (hyper hands over the upgraded socket);
//! framing, masking, ping/pong and close are tokio-tungstenite's.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_tungstenite::{
    WebSocketStream,
    tungstenite::{
        Message,
        handshake::derive_accept_key,
        protocol::{CloseFrame, Role, WebSocketConfig, frame::coding::CloseCode},
    },
};
use tracing::Instrument;

use super::{
    body::{Body, text_response},
    framed::{self, Frame, OUTBOUND_QUEUE, Outbound},
    shared::Shared,
};
use crate::connections::TransportKind;

/// The subprotocol MCP over WebSocket uses.
pub const SUBPROTOCOL: &str = "mcp";

fn header_has_token(request: &Request<Incoming>, name: header::HeaderName, token: &str) -> bool {
    request.headers().get_all(name).iter().any(|value| {
        value
            .to_str()
            .map(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
            .unwrap_or(false)
    })
}

pub fn is_upgrade(request: &Request<Incoming>) -> bool {
    header_has_token(request, header::UPGRADE, "websocket")
}

/// Answers the upgrade request and, once hyper hands over the socket, serves
/// MCP on it.
pub fn upgrade(shared: Arc<Shared>, mut request: Request<Incoming>) -> Response<Body> {
    if request.method() != http::Method::GET
        || !header_has_token(&request, header::CONNECTION, "upgrade")
    {
        return text_response(
            StatusCode::BAD_REQUEST,
            "a WebSocket upgrade is a GET with `Connection: Upgrade`",
        );
    }
    if request
        .headers()
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v != "13")
    {
        let mut response = text_response(
            StatusCode::UPGRADE_REQUIRED,
            "unsupported Sec-WebSocket-Version; Hark speaks version 13",
        );
        response.headers_mut().insert(
            header::SEC_WEBSOCKET_VERSION,
            header::HeaderValue::from_static("13"),
        );
        return response;
    }
    let Some(key) = request.headers().get(header::SEC_WEBSOCKET_KEY) else {
        return text_response(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key");
    };
    let accept = derive_accept_key(key.as_bytes());
    // Clients that offer subprotocols must offer `mcp`; a client that offers
    // none is served too (the messages are the same).
    let offered = request
        .headers()
        .contains_key(header::SEC_WEBSOCKET_PROTOCOL);
    if offered && !header_has_token(&request, header::SEC_WEBSOCKET_PROTOCOL, SUBPROTOCOL) {
        return text_response(
            StatusCode::BAD_REQUEST,
            "Hark's WebSocket subprotocol is `mcp`; offer it in Sec-WebSocket-Protocol",
        );
    }
    let peer = request
        .extensions()
        .get::<Arc<crate::connections::ClientIdentity>>()
        .map(|i| i.peer.clone())
        .unwrap_or_default();
    // The upgrade request's token (checked by the HTTP handler) holds for
    // the whole connection.
    let grant = request
        .extensions()
        .get::<Arc<crate::auth::Grant>>()
        .cloned();
    let address = request
        .extensions()
        .get::<Arc<crate::connections::ClientIdentity>>()
        .and_then(|i| i.address);
    let paired = grant.as_ref().is_some_and(|g| g.paired_name().is_some());
    let admitted = match shared.admit(TransportKind::Websocket, address, paired) {
        Ok(admitted) => admitted,
        Err(refusal) => return text_response(StatusCode::SERVICE_UNAVAILABLE, refusal.to_string()),
    };
    // Checked by the HTTP handler before the upgrade.
    let declared = request
        .headers()
        .get(crate::server::CLIENT_HEADER)
        .and_then(|v| crate::server::check_client_name(v).ok());
    let on_upgrade = hyper::upgrade::on(&mut request);
    let shared2 = Arc::clone(&shared);
    shared.tasks.spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::info!(error = %e, "websocket upgrade failed");
                return;
            }
        };
        let limit = shared2.config.max_message_bytes;
        let config = WebSocketConfig::default()
            .max_message_size(Some(limit))
            .max_frame_size(Some(limit));
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config))
                .await;
        let guard = shared2.connect(TransportKind::Websocket, peer, admitted);
        if let Some(name) = declared {
            let _ = guard.identity().declared.set(name.clone());
            guard.identity().set_client_name(&name);
        }
        // After the declared name: a token's name wins.
        if let Some(grant) = grant {
            guard.identity().set_grant((*grant).clone());
        }
        serve_socket(Arc::clone(&shared2), guard, socket).await;
    });

    let mut response = Response::new(Empty::new().boxed());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(
        header::UPGRADE,
        header::HeaderValue::from_static("websocket"),
    );
    headers.insert(
        header::CONNECTION,
        header::HeaderValue::from_static("Upgrade"),
    );
    if let Ok(value) = header::HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, value);
    }
    if offered {
        headers.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            header::HeaderValue::from_static(SUBPROTOCOL),
        );
    }
    response
}

async fn serve_socket<S>(
    shared: Arc<Shared>,
    guard: crate::connections::ConnectionGuard,
    socket: WebSocketStream<S>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tokio_tungstenite::tungstenite::Error as WsError;
    let (mut sink, stream) = socket.split();
    let (tx, mut rx) = mpsc::channel::<Outbound>(OUTBOUND_QUEUE);
    let writer = tokio::spawn(
        async move {
            while let Some(item) = rx.recv().await {
                match item {
                    Outbound::Message(message) => {
                        let text = match serde_json::to_string(&message) {
                            Ok(text) => text,
                            Err(e) => {
                                tracing::error!(error = %e, "cannot serialise a response");
                                continue;
                            }
                        };
                        if sink.send(Message::text(text)).await.is_err() {
                            return;
                        }
                    }
                    Outbound::Close { code, reason } => {
                        let frame = CloseFrame {
                            code: CloseCode::from(code),
                            reason: reason.into(),
                        };
                        let _ = sink.send(Message::Close(Some(frame))).await;
                        break;
                    }
                }
            }
            let _ = sink.close().await;
        }
        .in_current_span(),
    );
    // A read error ends the connection: stop at the first one.
    let frames = stream
        .map(|message| match message {
            Ok(Message::Text(text)) => Some(Some(Frame::Data(text.into()))),
            Ok(Message::Binary(_)) => Some(Some(Frame::Refuse {
                code: 1003,
                reason: "binary messages are not supported; send JSON-RPC as text",
            })),
            // Ping, pong and close frames are tungstenite's business.
            Ok(_) => Some(None),
            Err(WsError::Capacity(_)) => Some(Some(Frame::TooLarge { fatal: true })),
            Err(WsError::Utf8(_)) => Some(Some(Frame::Refuse {
                code: 1007,
                reason: "text message is not valid UTF-8",
            })),
            Err(e) => {
                tracing::debug!(error = %e, "websocket read ended");
                None
            }
        })
        .take_while(|step| std::future::ready(step.is_some()))
        .filter_map(|step| std::future::ready(step.flatten()));
    framed::serve(shared, guard, Box::pin(frames), tx, writer).await;
}
