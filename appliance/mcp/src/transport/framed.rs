//! The rmcp transport shared by the message-framed transports (TCP and Unix
//! lines, WebSocket messages), and the connection loop around it.
//!
//! Reading is a stream of [`Frame`]s produced by the transport's own framing;
//! writing goes through one bounded queue to one writer task, so rmcp's
//! concurrent responses and this module's error replies never interleave
//! bytes, and a client that stops reading slows only its own connection.

use std::{
    collections::VecDeque,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use rmcp::{
    RoleServer, ServiceExt,
    model::{
        ClientJsonRpcMessage, ClientNotification, ClientRequest, GetMeta, InitializeRequest,
        InitializeRequestParams, InitializedNotification, RequestId, ServerJsonRpcMessage,
    },
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use tokio::{sync::mpsc, time::Instant};
use tracing::Instrument;

use super::shared::Shared;
use crate::{
    connections::ConnectionGuard,
    {
        framing::{self, Decoded},
        server::HarkServer,
    },
};

/// One unit read from a client.
#[derive(Debug)]
pub enum Frame {
    /// One message's bytes.
    Data(Bytes),
    /// A message over the size limit was discarded. `fatal` when the framing
    /// cannot resynchronise (WebSocket) and the connection must close.
    TooLarge { fatal: bool },
    /// Something the transport does not carry (a binary WebSocket message):
    /// close with this code and reason.
    Refuse { code: u16, reason: &'static str },
}

/// What the writer task is asked to do.
#[derive(Debug)]
pub enum Outbound {
    Message(Box<ServerJsonRpcMessage>),
    Close { code: u16, reason: &'static str },
}

/// Depth of a connection's outgoing queue. rmcp waits when it is full, which
/// slows only this client.
pub const OUTBOUND_QUEUE: usize = 64;

/// Last traffic time and calls in flight on one connection, for the idle
/// timeout and for letting in-flight calls finish at shutdown.
#[derive(Debug)]
pub struct Activity {
    base: Instant,
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            last_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        })
    }

    fn touch(&self) {
        let ms = Instant::now().duration_since(self.base).as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    fn idle_since(&self) -> Instant {
        self.base + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }

    /// Resolves once the connection has had no traffic and no call in flight
    /// for `timeout`.
    pub async fn idle_for(&self, timeout: Duration) {
        loop {
            let deadline = self.idle_since() + timeout;
            tokio::time::sleep_until(deadline).await;
            if self.in_flight() == 0 && Instant::now() >= self.idle_since() + timeout {
                return;
            }
            // Traffic moved the deadline, or a call is running: look again
            // later rather than spinning.
            if self.in_flight() > 0 {
                tokio::time::sleep(timeout.min(Duration::from_secs(1))).await;
            }
        }
    }

    /// Resolves once no call is in flight (checked every 20 ms; only used
    /// while shutting down).
    pub async fn drained(&self) {
        while self.in_flight() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Id of the `initialize` Hark sends on behalf of a client that skipped it.
const IMPLICIT_INITIALIZE_ID: &str = "hark-implicit-initialize";

pub struct FramedTransport<S> {
    frames: S,
    out: mpsc::Sender<Outbound>,
    activity: Arc<Activity>,
    /// The size limit, quoted in the error for an oversized message.
    limit: usize,
    /// Messages to hand to rmcp before reading more.
    pending: VecDeque<ClientJsonRpcMessage>,
    /// An error reply decoded but not yet queued (kept across cancellation:
    /// rmcp polls `receive` inside `select!`).
    reply: Option<ServerJsonRpcMessage>,
    /// Whether the first request has been seen (for the implicit session).
    started: bool,
    /// Cancelled when the client's side of the connection ends, so
    /// long-running tools (listening, transcribing) stop at once rather
    /// than after rmcp's drain period.
    gone: Option<tokio_util::sync::CancellationToken>,
    /// Checks tokens presented on the connection (`hark/auth`, or
    /// `_meta["hark/token"]` on any request) and keeps the grant.
    auth: Option<(
        Arc<crate::auth::Auth>,
        Arc<crate::connections::ClientIdentity>,
    )>,
    closed: bool,
}

impl<S> FramedTransport<S>
where
    S: Stream<Item = Frame> + Send + Unpin,
{
    pub fn new(
        frames: S,
        out: mpsc::Sender<Outbound>,
        activity: Arc<Activity>,
        limit: usize,
    ) -> Self {
        Self {
            frames,
            out,
            activity,
            limit,
            pending: VecDeque::new(),
            gone: None,
            auth: None,
            reply: None,
            started: false,
            closed: false,
        }
    }

    /// Cancels `token` when the client's side of the connection ends (a
    /// client that half-closes is taken as gone too: it cannot cancel).
    pub fn cancel_on_end(mut self, token: tokio_util::sync::CancellationToken) -> Self {
        self.gone = Some(token);
        self
    }

    /// Lets the client present a token, kept in `identity`'s grant.
    pub fn authenticate(
        mut self,
        auth: Arc<crate::auth::Auth>,
        identity: Arc<crate::connections::ClientIdentity>,
    ) -> Self {
        self.auth = Some((auth, identity));
        self
    }

    /// Takes a token out of `message` and checks it. `None` when the
    /// message has been answered here: a `hark/auth` request, or a request
    /// whose token was refused (it is not carried out).
    fn check_token(&mut self, mut message: ClientJsonRpcMessage) -> Option<ClientJsonRpcMessage> {
        let Some((auth, identity)) = &self.auth else {
            return Some(message);
        };
        let ClientJsonRpcMessage::Request(request) = &mut message else {
            return Some(message);
        };
        let id = request.id.clone();
        let (token, answer_here) = match &mut request.request {
            ClientRequest::CustomRequest(custom) if custom.method == hark_core::methods::AUTH => {
                let token = custom
                    .params
                    .as_ref()
                    .and_then(|p| p.get("token"))
                    .and_then(|t| t.as_str())
                    .map(str::to_owned);
                match token {
                    Some(token) => (token, true),
                    None => {
                        self.reply = Some(ServerJsonRpcMessage::error(
                            rmcp::model::ErrorData::invalid_params(
                                format!(
                                    "{} takes {{\"token\": \"hark_…\"}}",
                                    hark_core::methods::AUTH
                                ),
                                None,
                            ),
                            Some(id),
                        ));
                        return None;
                    }
                }
            }
            other => match take_token(other) {
                Some(token) => (token, false),
                None => return Some(message),
            },
        };
        match auth.present(&token, identity.address) {
            Ok(grant) => {
                tracing::info!(token = grant.paired_name().unwrap_or(""), "token accepted");
                let answer = serde_json::json!({
                    "name": grant.paired_name(),
                    "scopes": grant.scopes.names(),
                });
                identity.set_grant(grant);
                if answer_here {
                    self.reply = Some(ServerJsonRpcMessage::response(
                        rmcp::model::ServerResult::CustomResult(rmcp::model::CustomResult(answer)),
                        id,
                    ));
                    return None;
                }
                Some(message)
            }
            Err(e) => {
                self.reply = Some(ServerJsonRpcMessage::error(
                    rmcp::model::ErrorData::new(
                        rmcp::model::ErrorCode(crate::server::AUTH_ERROR),
                        e.to_string(),
                        None,
                    ),
                    Some(id),
                ));
                None
            }
        }
    }

    /// VoxCtrl's one-shot examples send `tools/list` or `tools/call` straight
    /// away, with no `initialize` and none of the 2026-07-28 per-request
    /// metadata. rmcp would refuse them; instead open a 2024-11-05 session on
    /// their behalf (its `initialize` response is not forwarded) and then pass
    /// the request on.
    fn start(&mut self, message: ClientJsonRpcMessage) -> ClientJsonRpcMessage {
        if self.started {
            return message;
        }
        let ClientJsonRpcMessage::Request(request) = &message else {
            return message;
        };
        self.started = true;
        let opens_session = matches!(
            request.request,
            ClientRequest::InitializeRequest(_)
                | ClientRequest::DiscoverRequest(_)
                | ClientRequest::PingRequest(_)
        );
        if opens_session || request.request.get_meta().protocol_version().is_some() {
            if matches!(request.request, ClientRequest::PingRequest(_)) {
                // A ping does not choose a lifecycle; look again next time.
                self.started = false;
            }
            return message;
        }
        tracing::debug!("client skipped initialize; opening a 2024-11-05 session for it");
        let params = InitializeRequestParams::new(
            Default::default(),
            rmcp::model::Implementation::new("unnamed client", "0"),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::V_2024_11_05);
        self.pending.push_back(ClientJsonRpcMessage::notification(
            ClientNotification::InitializedNotification(InitializedNotification::default()),
        ));
        self.pending.push_back(message);
        ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(InitializeRequest::new(params)),
            RequestId::String(IMPLICIT_INITIALIZE_ID.into()),
        )
    }

    fn accept(&mut self, message: ClientJsonRpcMessage) -> ClientJsonRpcMessage {
        let message = self.start(message);
        if let ClientJsonRpcMessage::Request(request) = &message {
            tracing::debug!(method = request.request.method(), id = %request.id, "request");
            self.activity.in_flight.fetch_add(1, Ordering::Relaxed);
        }
        message
    }
}

#[derive(Debug, thiserror::Error)]
#[error("connection closed")]
pub struct Closed;

impl<S> Transport<RoleServer> for FramedTransport<S>
where
    S: Stream<Item = Frame> + Send + Unpin,
{
    type Error = Closed;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        let activity = Arc::clone(&self.activity);
        async move {
            let answers = match &item {
                ServerJsonRpcMessage::Response(r) => Some(&r.id),
                ServerJsonRpcMessage::Error(e) => e.id.as_ref(),
                _ => None,
            };
            if let Some(id) = answers {
                let _ =
                    activity
                        .in_flight
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
                if matches!(id, RequestId::String(s) if &**s == IMPLICIT_INITIALIZE_ID) {
                    return Ok(());
                }
            }
            activity.touch();
            out.send(Outbound::Message(Box::new(item)))
                .await
                .map_err(|_| Closed)
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(message) = self.pending.pop_front() {
                return Some(message);
            }
            if let Some(reply) = self.reply.take() {
                match self.out.reserve().await {
                    Ok(permit) => permit.send(Outbound::Message(Box::new(reply))),
                    Err(_) => return None,
                }
            }
            if self.closed {
                return None;
            }
            let Some(frame) = self.frames.next().await else {
                if let Some(gone) = &self.gone {
                    gone.cancel();
                }
                return None;
            };
            self.activity.touch();
            match frame {
                Frame::Data(bytes) => match framing::decode(&bytes) {
                    Decoded::Message(message) => {
                        if let Some((_, identity)) = &self.auth {
                            identity.slot.spoke();
                        }
                        if let Some(message) = self.check_token(*message) {
                            return Some(self.accept(message));
                        }
                    }
                    Decoded::Reply(reply) => {
                        tracing::info!(error = ?reply_text(&reply), "rejected malformed message");
                        self.reply = Some(*reply);
                    }
                    Decoded::Ignore => {}
                },
                Frame::TooLarge { fatal } => {
                    tracing::warn!("discarded an oversized message");
                    if fatal {
                        let _ = self
                            .out
                            .send(Outbound::Close {
                                code: 1009,
                                reason: "message too big (mcp.max_message_bytes)",
                            })
                            .await;
                        return None;
                    }
                    self.reply = Some(framing::too_large(self.limit));
                }
                Frame::Refuse { code, reason } => {
                    tracing::info!(code, reason, "closing connection");
                    let _ = self.out.send(Outbound::Close { code, reason }).await;
                    self.closed = true;
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.closed = true;
        Ok(())
    }
}

/// The `_meta` key a token travels under on stream transports.
pub const TOKEN_META: &str = "hark/token";

/// Removes a token from a request's `_meta` (so it goes no further: not to
/// the tools, not into logs) and returns it.
fn take_token(request: &mut ClientRequest) -> Option<String> {
    let mut found = request
        .get_meta_mut()
        .remove(TOKEN_META)
        .and_then(|v| v.as_str().map(str::to_owned));
    // `initialize` keeps its `_meta` in its params as well.
    if let ClientRequest::InitializeRequest(init) = request
        && let Some(meta) = init.params.meta.as_mut()
        && let Some(token) = meta.remove(TOKEN_META)
    {
        found = found.or_else(|| token.as_str().map(str::to_owned));
    }
    found
}

fn reply_text(reply: &ServerJsonRpcMessage) -> String {
    match reply {
        ServerJsonRpcMessage::Error(e) => e.error.message.to_string(),
        _ => String::new(),
    }
}

/// Serves MCP on one message-framed connection until the client leaves, the
/// idle timeout passes, or the daemon shuts down.
pub async fn serve<S>(
    shared: Arc<Shared>,
    guard: ConnectionGuard,
    frames: S,
    out: mpsc::Sender<Outbound>,
    writer: tokio::task::JoinHandle<()>,
) where
    S: Stream<Item = Frame> + Send + Unpin + 'static,
{
    let identity = Arc::clone(guard.identity());
    let span = tracing::info_span!(
        "connection",
        transport = %identity.transport,
        peer = %identity.peer,
        client_id = identity.id,
    );
    let limit = shared.config.max_message_bytes;
    async move {
        tracing::debug!("connected");
        let activity = Activity::new();
        let transport = FramedTransport::new(frames, out, Arc::clone(&activity), limit)
            .cancel_on_end(identity.gone.clone())
            .authenticate(Arc::clone(shared.auth()), Arc::clone(&identity));
        let handler = HarkServer::new(
            Arc::clone(&shared.state),
            shared.room.clone(),
            Arc::clone(&shared.tools),
            Some(Arc::clone(&identity)),
        );
        let ct = shared.shutdown.child_token();
        let idle = shared.config.idle_timeout();
        let serving = async {
            match handler.serve_with_ct(transport, ct.clone()).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::info!(error = %e, "session ended before it started"),
            }
        };
        let serving = futures::FutureExt::fuse(serving);
        tokio::pin!(serving);
        // An unpaired connection may sit idle only for the short deadline
        // (`mcp.unpaired.deadline_secs`); once it presents a token, the
        // usual idle timeout.
        let unpaired_deadline = shared.unpaired_deadline();
        let idle_watch = async {
            loop {
                let unpaired = identity.grant().principal == crate::auth::Principal::Unpaired;
                let timeout = if unpaired {
                    Some(idle.map_or(unpaired_deadline, |i| i.min(unpaired_deadline)))
                } else {
                    idle
                };
                match timeout {
                    Some(timeout) => activity.idle_for(timeout).await,
                    None => std::future::pending().await,
                }
                // It paired while the short deadline ran: wait the long one.
                if !unpaired || identity.grant().principal == crate::auth::Principal::Unpaired {
                    return unpaired;
                }
            }
        };
        tokio::select! {
            _ = &mut serving => {}
            unpaired = idle_watch => {
                if unpaired {
                    tracing::info!(seconds = unpaired_deadline.as_secs(), "closing an unpaired connection with nothing in flight");
                } else {
                    tracing::info!("closing idle connection");
                }
                ct.cancel();
            }
            () = identity.close.cancelled() => {
                tracing::info!("closing a connection to make way for a newer one");
                ct.cancel();
            }
            _ = shared.shutdown.cancelled() => {
                // Let calls in flight finish within the shutdown budget;
                // the daemon cancels whatever is left.
                let _ = tokio::time::timeout(shared.shutdown_timeout, activity.drained()).await;
            }
        }
        ct.cancel();
        if !futures::future::FusedFuture::is_terminated(&serving) {
            let _ = tokio::time::timeout(Duration::from_millis(200), &mut serving).await;
        }
        // The writer ends once every sender is gone; give it a moment to
        // flush the last replies.
        let _ = tokio::time::timeout(Duration::from_millis(200), writer).await;
        drop(guard);
        tracing::debug!(client = identity.client_name().unwrap_or_default(), "disconnected");
    }
    .instrument(span)
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> ClientRequest {
        match framing::decode(text.as_bytes()) {
            Decoded::Message(message) => match *message {
                ClientJsonRpcMessage::Request(r) => r.request,
                other => panic!("not a request: {other:?}"),
            },
            _ => panic!("not decoded: {text}"),
        }
    }

    #[test]
    fn a_token_is_taken_out_of_any_request() {
        let mut init = request(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"_meta":{"hark/token":"hark_abc"},"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
        );
        assert_eq!(take_token(&mut init).as_deref(), Some("hark_abc"));
        assert_eq!(take_token(&mut init), None, "gone once taken");
        let text = serde_json::to_string(&init).expect("serialises");
        assert!(!text.contains("hark_abc"), "{text}");

        let mut call = request(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_status","_meta":{"hark/token":"hark_def","progressToken":3}}}"#,
        );
        assert_eq!(take_token(&mut call).as_deref(), Some("hark_def"));
        assert!(
            call.get_meta().get_progress_token().is_some(),
            "the rest of _meta stays"
        );
        let mut plain = request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#);
        assert_eq!(take_token(&mut plain), None);
    }
}
