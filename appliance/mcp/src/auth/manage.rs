//! `hark/tokens`: tokens made, listed and revoked from the Unix socket
//! and the status page, above the trust they change ([`super`]) and the
//! connections that hold it.

use hark_core::methods::TokenRequest;
use rmcp::model::ErrorData;
use serde_json::{Value, json};

use super::Scopes;
use crate::state::ServerState;

/// Serves a `hark/tokens` request.
pub async fn manage(state: &ServerState, params: Option<Value>) -> Result<Value, ErrorData> {
    let invalid = |message: String| ErrorData::invalid_params(message, None);
    let command: TokenRequest = serde_json::from_value(params.unwrap_or(Value::Null))
        .map_err(|e| invalid(format!("hark/tokens: {e}")))?;
    let auth = &state.auth;
    let store = auth.store().map_err(|e| invalid(e.to_string()))?;
    match command {
        TokenRequest::Create {
            name,
            scopes,
            replace,
        } => {
            let scopes = match scopes {
                Some(text) => Scopes::parse(&text).map_err(|e| invalid(e.to_string()))?,
                None => Scopes::DEFAULT,
            };
            let (token, info) = store
                .create(&name, scopes, replace)
                .await
                .map_err(|e| invalid(e.to_string()))?;
            if replace {
                withdraw(state, &info.name);
            }
            tracing::info!(token = %info.name, scopes = %scopes, "token created");
            Ok(json!({ "token": token, "info": info }))
        }
        TokenRequest::List => Ok(json!({ "tokens": store.list() })),
        TokenRequest::Revoke { name } => {
            let info = store
                .revoke(&name)
                .await
                .map_err(|e| invalid(e.to_string()))?;
            withdraw(state, &info.name);
            tracing::info!(token = %info.name, "token revoked");
            Ok(json!({ "revoked": info }))
        }
    }
}

/// Ends what the token `name` was allowed: its calls in flight stop, and
/// its connections fall back to what they would be without it.
fn withdraw(state: &ServerState, name: &str) {
    let auth = &state.auth;
    auth.stop_calls_of(name);
    for connection in state.connections.connections() {
        if connection
            .grant()
            .paired_name()
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
        {
            connection.set_grant(auth.base(connection.transport, connection.address));
            tracing::info!(token = name, peer = %connection.peer, "connection's token revoked");
        }
    }
}
