//! The status page: `GET /` (HTML, CSS and a little JavaScript, served
//! from the binary, no build step) and its `/api/` endpoints: what Hark is
//! doing now (live, from the event stream), the agents connected and
//! paired (revoke), a pending pairing (approve or refuse), recent history,
//! volume, the wake word (on or off, its sensitivity, its latest
//! detections), speech and timers kept for later (cancel, stop), voices and
//! models, the last log lines, and the simulated
//! board's button.
//!
//! Who may see it: a browser the person allowed by the button (`POST
//! /api/pair`: a pairing like `hark pair`, whose token goes into an
//! `HttpOnly`, `SameSite=Strict` cookie), a browser given an admin token
//! (`POST /api/login`), or a trusted client (loopback by default). Every
//! state-changing request must come from the page's own origin (`Origin`
//! equal to the request's own scheme and `Host`): a page elsewhere cannot
//! drive it with the browser's cookie.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{body::Body, scripts, shared::Shared};
use crate::{
    auth::{BROWSER_PREFIX, Grant, Principal, Scope},
    connections::{ClientIdentity, TransportKind},
};

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/page.js");
const STYLE: &str = include_str!("page/page.css");

/// The session cookie's name.
pub const COOKIE: &str = "hark_session";
/// Largest body an `/api/` request may send.
const MAX_BODY: usize = 16 * 1024;

/// Whether `path` is the page's.
pub fn serves(path: &str) -> bool {
    matches!(path, "/" | "/page.js" | "/page.css") || path.starts_with("/api/")
}

/// A response with `body` and these headers.
fn respond(
    status: StatusCode,
    body: Bytes,
    headers: &[(header::HeaderName, &'static str)],
) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    for (name, value) in headers {
        response
            .headers_mut()
            .insert(name, header::HeaderValue::from_static(value));
    }
    response
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    respond(
        status,
        Bytes::from(body.to_string()),
        &[
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
    )
}

fn error(status: StatusCode, kind: &str, message: impl Into<String>) -> Response<Body> {
    json_response(
        status,
        &json!({ "error": { "type": kind, "message": message.into() } }),
    )
}

fn asset(content_type: &'static str, text: &'static str) -> Response<Body> {
    respond(
        StatusCode::OK,
        Bytes::from_static(text.as_bytes()),
        &[
            (header::CONTENT_TYPE, content_type),
            // Only its own script and style; no framing by other sites.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
    )
}

/// The session token from the request's cookies.
fn session(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
}

fn set_cookie(response: &mut Response<Body>, token: &str, secure: bool, max_age: u64) {
    let cookie = format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    );
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

/// The page's own origin for this request: its scheme and `Host`.
fn own_origin(identity: &ClientIdentity, headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let scheme = if identity.transport == TransportKind::Https {
        "https"
    } else {
        "http"
    };
    Some(format!("{scheme}://{}", host.to_ascii_lowercase()))
}

/// State-changing requests come from the page itself: `Origin` present and
/// the request's own.
fn same_origin(identity: &ClientIdentity, headers: &HeaderMap) -> Result<(), Box<Response<Body>>> {
    let origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_end_matches('/').to_ascii_lowercase());
    match (origin, own_origin(identity, headers)) {
        (Some(origin), Some(own)) if origin == own => Ok(()),
        (Some(origin), own) => Err(Box::new(error(
            StatusCode::FORBIDDEN,
            "OriginError",
            format!(
                "this request comes from {origin}, not from the status page ({}); it was not carried out",
                own.unwrap_or_default()
            ),
        ))),
        (None, _) => Err(Box::new(error(
            StatusCode::FORBIDDEN,
            "OriginError",
            "a state-changing request must carry the status page's Origin header",
        ))),
    }
}

/// The request's grant: its bearer token or its connection's trust, else
/// the session cookie's token.
fn page_grant(
    shared: &Shared,
    identity: &ClientIdentity,
    grant: Arc<Grant>,
    headers: &HeaderMap,
) -> Arc<Grant> {
    if grant.principal != Principal::Unpaired {
        return grant;
    }
    match session(headers).map(|token| shared.auth().present(&token, identity.address)) {
        Some(Ok(paired)) => {
            // As for a bearer token: a paired browser's connection leaves
            // the unpaired budget (a browser opens several).
            identity.slot.promote();
            Arc::new(paired)
        }
        _ => grant,
    }
}

async fn body<T: for<'de> Deserialize<'de>>(
    request: Request<Incoming>,
) -> Result<T, Box<Response<Body>>> {
    let bytes = Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|_| {
            Box::new(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "InvalidArgumentError",
                format!("the request body is over {MAX_BODY} bytes"),
            ))
        })?
        .to_bytes();
    let bytes = if bytes.is_empty() {
        Bytes::from_static(b"{}")
    } else {
        bytes
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            "InvalidArgumentError",
            format!("the request body is not what this endpoint takes: {e}"),
        ))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// `POST /api/add-agent`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddAgent {
    name: String,
    /// Comma-separated; default `listen,speak`.
    scopes: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    token: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Revoke {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Volume {
    volume: i64,
}

/// `POST /api/cancel`: speech or a timer kept for later.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cancel {
    id: i64,
}

/// `POST /api/wake`: either or both.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetWake {
    enabled: Option<bool>,
    sensitivity: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    approve: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Press {
    action: hark_core::room::ButtonAction,
}

/// Serves the page's paths.
pub async fn handle(
    shared: Arc<Shared>,
    identity: Arc<ClientIdentity>,
    grant: Arc<Grant>,
    request: Request<Incoming>,
) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    match (path.as_str(), &method) {
        ("/", &http::Method::GET) => return asset("text/html; charset=utf-8", INDEX),
        ("/page.js", &http::Method::GET) => return asset("text/javascript; charset=utf-8", SCRIPT),
        ("/page.css", &http::Method::GET) => return asset("text/css; charset=utf-8", STYLE),
        ("/", _) | ("/page.js", _) | ("/page.css", _) => {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodError",
                format!("{path} takes GET"),
            );
        }
        _ => {}
    }
    let grant = page_grant(&shared, &identity, grant, request.headers());
    let secure = identity.transport == TransportKind::Https;
    if method == http::Method::POST
        && let Err(refused) = same_origin(&identity, request.headers())
    {
        tracing::warn!(%path, "status page: a request from another origin refused");
        return *refused;
    }
    // Open to anyone: asking to be let in.
    match (path.as_str(), &method) {
        ("/api/pair", &http::Method::POST) => {
            return pair(&shared, &identity, request, secure).await;
        }
        ("/api/add-agent", &http::Method::POST) => {
            return add_agent(&shared, &identity, request).await;
        }
        ("/api/login", &http::Method::POST) => {
            let login: Login = match body(request).await {
                Ok(l) => l,
                Err(r) => return *r,
            };
            return match shared.auth().present(login.token.trim(), identity.address) {
                Ok(g) if g.scopes.contains(Scope::Admin) => {
                    let mut r = json_response(StatusCode::OK, &json!({ "as": g.paired_name() }));
                    set_cookie(&mut r, login.token.trim(), secure, 31_536_000);
                    r
                }
                Ok(g) => error(
                    StatusCode::FORBIDDEN,
                    "PermissionDeniedError",
                    format!(
                        "the token `{}` has no admin scope; the status page needs admin",
                        g.paired_name().unwrap_or("?")
                    ),
                ),
                Err(e) => error(StatusCode::UNAUTHORIZED, "NotPairedError", e.to_string()),
            };
        }
        ("/api/logout", &http::Method::POST) => {
            // A browser's own token goes with it; an admin token pasted in
            // stays (it belongs to someone else too).
            if let Some(name) = grant
                .paired_name()
                .filter(|n| n.starts_with(BROWSER_PREFIX))
                && let Err(e) = crate::auth::manage::manage(
                    &shared.state,
                    Some(json!({ "action": "revoke", "name": name })),
                )
                .await
            {
                tracing::warn!(error = %e.message, "the browser's token was not revoked at logout");
            }
            let mut r = json_response(StatusCode::OK, &json!({ "logged_out": true }));
            set_cookie(&mut r, "", secure, 0);
            return r;
        }
        _ => {}
    }
    if let Err(denied) = grant.allows(Scope::Admin, "the status page") {
        return error(
            StatusCode::UNAUTHORIZED,
            denied.kind().name(),
            denied.to_string(),
        );
    }
    match (path.as_str(), &method) {
        ("/api/state", &http::Method::GET) => {
            json_response(StatusCode::OK, &page_state(&shared, &grant).await)
        }
        ("/api/events", &http::Method::GET) => scripts::events(&shared),
        ("/api/revoke", &http::Method::POST) => {
            let revoke: Revoke = match body(request).await {
                Ok(r) => r,
                Err(r) => return *r,
            };
            match crate::auth::manage::manage(
                &shared.state,
                Some(json!({ "action": "revoke", "name": revoke.name })),
            )
            .await
            {
                Ok(result) => json_response(StatusCode::OK, &result),
                Err(e) => error(StatusCode::BAD_REQUEST, "TokenError", e.message.to_string()),
            }
        }
        ("/api/volume", &http::Method::POST) => {
            let volume: Volume = match body(request).await {
                Ok(v) => v,
                Err(r) => return *r,
            };
            match shared.room.volume.set_volume(volume.volume).await {
                Ok(set) => json_response(StatusCode::OK, &json!(set)),
                Err(e) => error(StatusCode::BAD_REQUEST, e.kind.name(), e.message),
            }
        }
        ("/api/pairing", &http::Method::POST) => {
            let decision: Decision = match body(request).await {
                Ok(d) => d,
                Err(r) => return *r,
            };
            match shared.auth().pairings.decide(decision.approve) {
                Some(agent) => json_response(
                    StatusCode::OK,
                    &json!({ "agent": agent, "approved": decision.approve }),
                ),
                None => error(
                    StatusCode::CONFLICT,
                    "NoPairingError",
                    "no pairing is waiting for an answer",
                ),
            }
        }
        ("/api/cancel", &http::Method::POST) => {
            let cancel: Cancel = match body(request).await {
                Ok(c) => c,
                Err(r) => return *r,
            };
            match shared.room.schedule.cancel(cancel.id).await {
                Ok(cancelled) => json_response(StatusCode::OK, &json!(cancelled)),
                Err(e) => error(StatusCode::NOT_FOUND, e.kind.name(), e.message),
            }
        }
        ("/api/wake", &http::Method::POST) => {
            let set: SetWake = match body(request).await {
                Ok(s) => s,
                Err(r) => return *r,
            };
            let sensitivity = match set.sensitivity.as_deref().map(|s| {
                hark_core::room::Sensitivity::parse(s)
                    .ok_or_else(|| format!("sensitivity `{s}` is not one of low, default, high"))
            }) {
                None => None,
                Some(Ok(level)) => Some(level),
                Some(Err(why)) => {
                    return error(StatusCode::BAD_REQUEST, "InvalidArgumentError", why);
                }
            };
            match shared.room.wake.set_wake(set.enabled, sensitivity) {
                Ok(status) => json_response(StatusCode::OK, &json!(status)),
                Err(e) => error(StatusCode::CONFLICT, e.kind.name(), e.message),
            }
        }
        ("/api/agent-settings", &http::Method::POST) => {
            let args: crate::tools::agent_settings::AgentSettingsArgs = match body(request).await {
                Ok(a) => a,
                Err(r) => return *r,
            };
            match crate::tools::agent_settings::apply(&shared.state, &shared.room, args).await {
                Ok(list) => json_response(StatusCode::OK, &json!(list)),
                Err(e) => {
                    let status = match e.kind {
                        hark_core::room::Kind::Settings => StatusCode::SERVICE_UNAVAILABLE,
                        hark_core::room::Kind::VoiceNotFound => StatusCode::NOT_FOUND,
                        _ => StatusCode::BAD_REQUEST,
                    };
                    error(status, e.kind.name(), e.message.to_string())
                }
            }
        }
        ("/api/button", &http::Method::POST) => {
            let press: Press = match body(request).await {
                Ok(p) => p,
                Err(r) => return *r,
            };
            let control = hark_core::room::BoardControl {
                button: Some(press.action),
                mute: None,
            };
            match shared.room.hands.control(control).await {
                Ok(result) => json_response(StatusCode::OK, &result),
                Err(e) => error(StatusCode::CONFLICT, "BoardError", e.to_string()),
            }
        }
        _ => error(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            format!("{method} {path} is not one of the status page's endpoints"),
        ),
    }
}

/// `POST /api/pair`: asks the person, by voice and the pairing light, to
/// allow this browser; the answer sets the session cookie.
async fn pair(
    shared: &Arc<Shared>,
    identity: &Arc<ClientIdentity>,
    request: Request<Incoming>,
    secure: bool,
) -> Response<Body> {
    if let Err(r) = body::<Empty>(request).await {
        return *r;
    }
    // A name of its own: pairing under a name that exists replaces that
    // token, which must never be another browser's.
    let name = match crate::auth::tokens::random_bytes::<4>() {
        Ok(bytes) => format!("{BROWSER_PREFIX}{:08x}", u32::from_le_bytes(bytes)),
        Err(e) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "PairingError",
                format!("no random name for this browser: {e}"),
            );
        }
    };
    let pair = crate::auth::pairing::PairRequest {
        name,
        scopes: Some("all".into()),
        browser: true,
    };
    match ask(shared, identity, pair).await {
        Ok(paired) => {
            let mut r = json_response(StatusCode::OK, &json!({ "as": paired.name }));
            set_cookie(&mut r, &paired.token, secure, 31_536_000);
            r
        }
        Err(refused) => *refused,
    }
}

/// Asks the person to allow `pair` (the button decides); the refusal as
/// the page's answer.
async fn ask(
    shared: &Arc<Shared>,
    identity: &Arc<ClientIdentity>,
    pair: crate::auth::pairing::PairRequest,
) -> Result<crate::auth::pairing::Paired, Box<Response<Body>>> {
    shared
        .auth()
        .pairings
        .pair(
            shared.room.pair.as_ref(),
            shared.auth().store(),
            pair,
            identity.address,
            identity.gone.clone(),
        )
        .await
        .map_err(|e| {
            let status = match e.reason() {
                "pending" | "too_many" | "busy" => StatusCode::TOO_MANY_REQUESTS,
                "no_button" | "tokens_unavailable" => StatusCode::SERVICE_UNAVAILABLE,
                "invalid" => StatusCode::BAD_REQUEST,
                _ => StatusCode::FORBIDDEN,
            };
            Box::new(error(status, "PairingError", e.to_string()))
        })
}

/// "Add an agent" from any browser: the person allows it with the button
/// (as `hark pair` asks), and the page is given the token once, with the
/// lines each agent client takes it in. Open to anyone, as asking to pair
/// is: the button decides.
async fn add_agent(
    shared: &Arc<Shared>,
    identity: &Arc<ClientIdentity>,
    request: Request<Incoming>,
) -> Response<Body> {
    let page_url = page_url(&identity.transport, request.headers());
    let add: AddAgent = match body(request).await {
        Ok(add) => add,
        Err(r) => return *r,
    };
    let name = add.name.trim().to_owned();
    if name.starts_with(BROWSER_PREFIX) {
        return error(
            StatusCode::BAD_REQUEST,
            "InvalidArgumentError",
            format!(
                "names starting with `{BROWSER_PREFIX}` are the status page's own; choose another"
            ),
        );
    }
    let pair = crate::auth::pairing::PairRequest {
        name,
        scopes: add.scopes,
        browser: false,
    };
    match ask(shared, identity, pair).await {
        Ok(paired) => {
            // The stdio bridge reaches the raw TCP port on the same host.
            let tcp_port = shared
                .state
                .connections
                .listeners()
                .iter()
                .find(|l| l.transport == TransportKind::Tcp)
                .and_then(|l| l.socket_addr())
                .map_or(7340, |a| a.port());
            let host = page_url
                .split("://")
                .nth(1)
                .map(|authority| match authority.rsplit_once(':') {
                    Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
                    _ => authority,
                })
                .unwrap_or("hark.local");
            let lines = hark_core::clients::lines(
                &format!("{page_url}/mcp"),
                &format!("{host}:{tcp_port}"),
                &format!(
                    "{page_url}{}{}",
                    super::wheel::PREFIX,
                    super::wheel::file_name()
                ),
                &paired.token,
            );
            json_response(
                StatusCode::OK,
                &json!({
                    "name": paired.name,
                    "token": paired.token,
                    "scopes": paired.scopes,
                    "replaced": paired.replaced,
                    "lines": lines,
                }),
            )
        }
        Err(refused) => *refused,
    }
}

/// The appliance as the browser reached it (`http://hark.local:7341`),
/// the base of the MCP URL the agents are given.
fn page_url(transport: &TransportKind, headers: &HeaderMap) -> String {
    let scheme = if *transport == TransportKind::Https {
        "https"
    } else {
        "http"
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or("hark.local:7341");
    format!("{scheme}://{host}")
}

/// What the page shows.
async fn page_state(shared: &Arc<Shared>, grant: &Grant) -> Value {
    let state = &shared.state;
    let room = shared.room.observe.status();
    let status =
        crate::tools::get_status::Status::for_grant(state, shared.room.observe.as_ref(), grant);
    let tokens = shared
        .auth()
        .store()
        .map(|store| store.list())
        .unwrap_or_default();
    let history = match state.history.as_ref() {
        Some(history) => history
            .list(hark_store::history::Query {
                limit: 10,
                before: None,
                agent: None,
                kind: None,
            })
            .await
            .map(|(rows, _)| rows)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let agents = crate::tools::agent_settings::apply(
        state,
        &shared.room,
        crate::tools::agent_settings::AgentSettingsArgs::default(),
    )
    .await
    .ok();
    // The voices an agent may be given: those installed.
    let voices: Vec<String> = match shared.room.files.voices(None, 1000).await {
        Ok(listing) => listing
            .voices
            .into_iter()
            .filter(|v| v.installed)
            .map(|v| v.id)
            .collect(),
        Err(_) => Vec::new(),
    };
    json!({
        "status": status,
        "agents": agents,
        "voices": voices,
        "lights": room.lights,
        "tokens": tokens,
        "pairing": shared.auth().pairings.pending(),
        "history": history,
        "log": hark_core::logging::recent(40),
        "simulated_board": room.simulated_board,
    })
}
