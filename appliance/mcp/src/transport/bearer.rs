//! Tokens on HTTP: `Authorization: Bearer <token>` on each request and on
//! the WebSocket upgrade. No header: the connection's own grant (trusted on
//! loopback, else unpaired: `initialize`, `tools/list` and `get_status`
//! only). A header that is wrong in any way is a 401 with
//! `WWW-Authenticate: Bearer` and no OAuth metadata anywhere, so a client
//! keeps using the header it was given instead of starting an OAuth dance.

use std::sync::Arc;

use http::{HeaderMap, Response, StatusCode, Uri, header};

use super::body::{Body, text_response};
use crate::{
    auth::{Auth, AuthError, Denied, Grant, Scope},
    connections::ClientIdentity,
};

/// The request's grant, or the response refusing it.
pub fn authorize(
    auth: &Auth,
    identity: &ClientIdentity,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Arc<Grant>, Box<Response<Body>>> {
    if token_in_url(uri) {
        return Err(Box::new(text_response(
            StatusCode::BAD_REQUEST,
            "Hark does not take tokens in URLs (they end up in logs and browser history); \
             send the token as `Authorization: Bearer <token>`, and pair again if this URL was shared",
        )));
    }
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(identity.grant());
    };
    if values.next().is_some() {
        return Err(unauthorized(
            "invalid_request",
            "send one Authorization header, not several",
        ));
    }
    let Ok(value) = value.to_str() else {
        return Err(unauthorized(
            "invalid_request",
            "the Authorization header is not plain text",
        ));
    };
    let (scheme, credentials) = value.trim().split_once(' ').unwrap_or((value.trim(), ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(unauthorized(
            "invalid_request",
            &format!(
                "Hark takes `Authorization: Bearer <token>`; this request sent a `{}` credential",
                scheme.chars().take(20).collect::<String>()
            ),
        ));
    }
    match auth.present(credentials.trim(), identity.address) {
        Ok(grant) => Ok(Arc::new(grant)),
        Err(AuthError::TooMany { retry_after, .. }) => {
            let message = format!(
                "too many failed token attempts from this address; try again in {} s",
                retry_after.as_secs().max(1)
            );
            let mut response = text_response(StatusCode::TOO_MANY_REQUESTS, message);
            if let Ok(value) =
                header::HeaderValue::from_str(&retry_after.as_secs().max(1).to_string())
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            Err(Box::new(response))
        }
        Err(AuthError::Unavailable(why)) => Err(Box::new(text_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("tokens cannot be checked: {why}"),
        ))),
        Err(AuthError::Rejected(why)) => Err(unauthorized("invalid_token", &why.to_string())),
    }
}

/// Refuses a request the grant does not cover: 401 when unpaired (a token
/// would help), 403 when the token lacks the scope.
pub fn require(grant: &Grant, scope: Scope, what: &str) -> Result<(), Box<Response<Body>>> {
    match grant.allows(scope, what) {
        Ok(()) => Ok(()),
        Err(denied @ Denied::NotPaired { .. }) => {
            let mut response = text_response(StatusCode::UNAUTHORIZED, denied.to_string());
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"hark\""),
            );
            Err(Box::new(response))
        }
        Err(denied) => Err(Box::new(text_response(
            StatusCode::FORBIDDEN,
            denied.to_string(),
        ))),
    }
}

fn unauthorized(error: &'static str, description: &str) -> Box<Response<Body>> {
    let mut response = text_response(StatusCode::UNAUTHORIZED, description);
    // The description is ours and plain; quotes and backslashes would end
    // the quoted string early, so leave them out of the header.
    let quoted: String = description
        .chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect();
    if let Ok(value) = header::HeaderValue::from_str(&format!(
        "Bearer realm=\"hark\", error=\"{error}\", error_description=\"{quoted}\""
    )) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    Box::new(response)
}

/// A query that carries what looks like a token, or a parameter clients
/// use for one.
fn token_in_url(uri: &Uri) -> bool {
    let Some(query) = uri.query() else {
        return false;
    };
    query.split('&').any(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = key.to_ascii_lowercase();
        matches!(key.as_str(), "token" | "access_token" | "auth" | "bearer")
            || value.contains(crate::auth::tokens::PREFIX)
            || key.contains(crate::auth::tokens::PREFIX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_in_urls_are_spotted() {
        for uri in [
            "/mcp?token=abc",
            "/mcp?access_token=abc",
            "/events?x=1&Auth=2",
            "/mcp?t=hark_0123",
            "/mcp?hark_abc",
        ] {
            assert!(token_in_url(&uri.parse().expect("uri")), "{uri}");
        }
        for uri in ["/mcp", "/mcp?session=1", "/events?since=5"] {
            assert!(!token_in_url(&uri.parse().expect("uri")), "{uri}");
        }
    }
}
