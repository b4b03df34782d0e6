//! The client side of the CLI: `hark status` (a real MCP client over TCP) and
//! `hark connect` (a stdio bridge).

use std::{collections::HashSet, path::PathBuf, time::Duration};

use hark_core::methods::TokenRequest;

use crate::target::{DEFAULT_PORT, with_default_port};
use rmcp::{
    ServiceExt,
    model::{CallToolRequestParams, ClientRequest, CustomRequest, CustomResult, ServerResult},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader},
    net::TcpStream,
};

/// Gives the agent `name` in an `initialize` (`clientInfo.name`) or a
/// 2026-07-28 request's `_meta` client info. Returns whether it changed
/// anything.
fn rename(message: &mut Value, name: &str) -> bool {
    let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
    let Some(params) = message.get_mut("params") else {
        return false;
    };
    let info = if initialize {
        params.get_mut("clientInfo")
    } else {
        params
            .get_mut("_meta")
            .and_then(|meta| meta.get_mut("io.modelcontextprotocol/clientInfo"))
    };
    match info.and_then(Value::as_object_mut) {
        Some(info) => {
            info.insert("name".into(), Value::String(name.to_owned()));
            true
        }
        None => false,
    }
}

/// Asks for the person's messages as Claude Code channel pushes in an
/// `initialize` (`capabilities.experimental["claude/channel"]`). Returns
/// whether it changed anything.
fn ask_for_channel(message: &mut Value) -> bool {
    if message.get("method").and_then(Value::as_str) != Some("initialize") {
        return false;
    }
    let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
        return false;
    };
    let capabilities = params.entry("capabilities").or_insert_with(|| json!({}));
    let Some(capabilities) = capabilities.as_object_mut() else {
        return false;
    };
    let experimental = capabilities
        .entry("experimental")
        .or_insert_with(|| json!({}));
    match experimental.as_object_mut() {
        Some(experimental) => {
            experimental.insert("claude/channel".into(), json!({}));
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod channel_tests {
    use serde_json::json;

    use super::ask_for_channel;

    #[test]
    fn an_initialize_asks_for_the_pushes_and_nothing_else_changes() {
        let mut init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "clientInfo": {"name": "claude-code", "version": "2"},
            "capabilities": {"roots": {}}}});
        assert!(ask_for_channel(&mut init));
        assert_eq!(
            init["params"]["capabilities"]["experimental"]["claude/channel"],
            json!({})
        );
        assert_eq!(init["params"]["capabilities"]["roots"], json!({}));
        let mut bare = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}});
        assert!(ask_for_channel(&mut bare));
        assert_eq!(
            bare["params"]["capabilities"]["experimental"]["claude/channel"],
            json!({})
        );
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}});
        assert!(!ask_for_channel(&mut call));
        assert_eq!(call["params"], json!({}));
    }
}

#[cfg(test)]
mod rename_tests {
    use serde_json::json;

    use super::rename;

    #[test]
    fn the_name_replaces_client_info_in_either_era() {
        let mut init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"clientInfo": {"name": "Claude Desktop", "version": "1"}}});
        assert!(rename(&mut init, "claude"));
        assert_eq!(init["params"]["clientInfo"]["name"], "claude");
        assert_eq!(init["params"]["clientInfo"]["version"], "1");
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_status", "_meta": {"io.modelcontextprotocol/clientInfo": {"name": "x"}}}});
        assert!(rename(&mut call, "claude"));
        assert_eq!(
            call["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]["name"],
            "claude"
        );
        for mut other in [
            json!([1, 2]),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"id": 2, "method": "tools/list", "params": {}}),
        ] {
            let before = other.clone();
            assert!(!rename(&mut other, "claude"));
            assert_eq!(other, before, "left alone");
        }
    }
}

/// How the `hark` CLI introduces itself: a name no person calls an agent,
/// so the voice inbox never takes it for one.
pub(crate) fn cli_info() -> rmcp::model::ClientConfig {
    rmcp::model::ClientConfig::new(
        Default::default(),
        rmcp::model::Implementation::new("hark-cli", env!("CARGO_PKG_VERSION")),
    )
}

/// A token to present to the appliance, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// `--token` or `HARK_TOKEN`: asked for, so a refusal is an error.
    Given(String),
    /// The one `hark pair` kept for this appliance in `file`. A refusal is
    /// said and the call goes on without it: the file may be older than
    /// the appliance's token store (a reset, another Hark now at that
    /// address), and an appliance that needs no token still answers, while
    /// one that does refuses the call itself, naming why.
    Saved { token: String, file: PathBuf },
}

impl Token {
    fn secret(&self) -> &str {
        match self {
            Token::Given(token) | Token::Saved { token, .. } => token,
        }
    }

    /// What a refusal of this token means: an error for a given one, a
    /// warning (and no token) for a kept one.
    fn refused(&self, target: &str, reason: &str) -> Result<(), ClientError> {
        match self {
            Token::Given(_) => Err(ClientError::Mcp {
                target: target.to_owned(),
                reason: format!("the token was refused: {reason}"),
            }),
            Token::Saved { file, .. } => {
                tracing::warn!(
                    "Hark at {target} refused the token kept for it in {} ({reason}); going on without one (`hark pair` again if it needs one)",
                    file.display()
                );
                Ok(())
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach Hark at {target}: {source}")]
    Connect {
        target: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Hark at {target} did not answer within {seconds} s")]
    Timeout { target: String, seconds: u64 },
    #[error("MCP session with {target} failed: {reason}")]
    Mcp { target: String, reason: String },
    #[error("Hark at {target} refused: {reason}")]
    Refused { target: String, reason: String },
    #[error("stdio: {0}")]
    Stdio(#[from] std::io::Error),
}

const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects over TCP, calls one tool and returns the result's structured
/// content; a tool error becomes an error carrying the tool's message.
async fn call_one(
    target: &str,
    token: Option<&Token>,
    tool: &'static str,
    arguments: serde_json::Map<String, Value>,
) -> Result<Value, ClientError> {
    let stream = TcpStream::connect(target)
        .await
        .map_err(|source| ClientError::Connect {
            target: target.to_owned(),
            source,
        })?;
    let mcp_err = |reason: String| ClientError::Mcp {
        target: target.to_owned(),
        reason,
    };
    let client = cli_info()
        .serve(stream)
        .await
        .map_err(|e| mcp_err(e.to_string()))?;
    if let Some(token) = token {
        let reply = client
            .send_request(ClientRequest::CustomRequest(CustomRequest::new(
                hark_core::methods::AUTH,
                Some(json!({ "token": token.secret() })),
            )))
            .await;
        if let Err(e) = reply
            && let Err(e) = token.refused(target, &service_error_text(e))
        {
            let _ = client.cancel().await;
            return Err(e);
        }
    }
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .map_err(|e| mcp_err(e.to_string()))?;
    let _ = client.cancel().await;
    let structured = result
        .structured_content
        .ok_or_else(|| mcp_err(format!("{tool} returned no structured content")))?;
    if result.is_error == Some(true) {
        let message = structured["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{tool} failed"));
        return Err(mcp_err(message));
    }
    Ok(structured)
}

/// Calls `transcribe_voice` on the appliance (no time limit of its own: the
/// tool ends on end of speech or its timeout).
pub async fn listen(
    target: &str,
    token: Option<&Token>,
    timeout: Option<f64>,
) -> Result<Value, ClientError> {
    let mut arguments = serde_json::Map::new();
    if let Some(t) = timeout {
        arguments.insert("timeout_seconds".into(), json!(t));
    }
    call_one(
        &with_default_port(target),
        token,
        "transcribe_voice",
        arguments,
    )
    .await
}

/// Calls `speak_text` and waits until the appliance has said it, or with
/// `out` calls `synthesize_speech` and writes the WAV file it returns.
pub async fn say(
    target: &str,
    token: Option<&Token>,
    text: &str,
    voice: Option<&str>,
    rate: Option<f64>,
    out: Option<&std::path::Path>,
) -> Result<Value, ClientError> {
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), json!(text));
    if let Some(voice) = voice {
        arguments.insert("voice".into(), json!(voice));
    }
    if let Some(rate) = rate {
        arguments.insert("rate".into(), json!(rate));
    }
    let target = with_default_port(target);
    let Some(out) = out else {
        arguments.insert("wait".into(), json!(true));
        return call_one(&target, token, "speak_text", arguments).await;
    };
    let mut result = call_one(&target, token, "synthesize_speech", arguments).await?;
    let bad = |reason: String| ClientError::Mcp {
        target: target.clone(),
        reason,
    };
    let encoded = result["audio_base64"]
        .as_str()
        .ok_or_else(|| bad("synthesize_speech returned no audio".into()))?;
    let wav = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
        .map_err(|e| bad(format!("synthesize_speech returned bad base64: {e}")))?;
    std::fs::write(out, &wav).map_err(|e| bad(format!("cannot write {}: {e}", out.display())))?;
    // The file is the answer; the JSON need not carry it twice.
    result["audio_base64"] = Value::Null;
    result["output_path"] = json!(out.display().to_string());
    Ok(result)
}

/// Calls `get_status` and returns its structured content.
pub async fn status(target: &str, token: Option<&Token>) -> Result<Value, ClientError> {
    let target = with_default_port(target);
    tokio::time::timeout(
        STATUS_TIMEOUT,
        call_one(&target, token, "get_status", serde_json::Map::new()),
    )
    .await
    .map_err(|_| ClientError::Timeout {
        target: target.clone(),
        seconds: STATUS_TIMEOUT.as_secs(),
    })?
}

/// Asks the appliance at `target` to pair (`hark pair`): waits while the
/// person decides at the button, and returns `hark/pair`'s result.
pub async fn pair(target: &str, name: &str, scopes: Option<&str>) -> Result<Value, ClientError> {
    let target = with_default_port(target);
    let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(&target))
        .await
        .map_err(|_| ClientError::Timeout {
            target: target.clone(),
            seconds: 10,
        })?
        .map_err(|source| ClientError::Connect {
            target: target.clone(),
            source,
        })?;
    let mut params = json!({ "name": name });
    if let Some(scopes) = scopes {
        params["scopes"] = json!(scopes);
    }
    custom_request(stream, &target, hark_core::methods::PAIR, params).await
}

/// What `hark pair` prints once paired: the token, and how to use it in
/// the usual clients.
pub fn format_paired(
    host: &str,
    result: &Value,
    saved_to: Option<&std::path::Path>,
    ca_file: Option<&std::path::Path>,
) -> String {
    let token = result["token"].as_str().unwrap_or("?");
    let name = result["name"].as_str().unwrap_or("?");
    let scopes: Vec<&str> = result["scopes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let http = result["http_port"].as_u64().unwrap_or(7341);
    let tcp = result["tcp_port"].as_u64().unwrap_or(DEFAULT_PORT.into());
    let host = crate::target::host_key(host);
    let url_host = crate::target::bracketed(&host);
    let url = format!("http://{url_host}:{http}/mcp");
    let stdio_target = if tcp == u64::from(DEFAULT_PORT) {
        host.clone()
    } else {
        format!("{url_host}:{tcp}")
    };
    let mut out = format!(
        "Paired with Hark at {host} as `{name}` ({}){}.

The token, shown only now (Hark keeps only its hash):

  {token}

",
        scopes.join(", "),
        if result["replaced"].as_bool() == Some(true) {
            "; the earlier token of that name no longer works"
        } else {
            ""
        }
    );
    if let Some(path) = saved_to {
        out.push_str(&format!(
            "Kept in {} for `hark connect {stdio_target}`, `hark status --host {stdio_target}` and the others.

",
            path.display()
        ));
    }
    if let (Some(port), Some(sha)) = (result["https_port"].as_u64(), result["ca_sha256"].as_str()) {
        let https = format!("https://{url_host}:{port}/mcp");
        let ca = ca_file.map_or_else(|| "hark-ca.pem".to_owned(), |p| p.display().to_string());
        out.push_str(&format!(
            "HTTPS: {https}, with the appliance's own certificate authority, kept in {ca}.\n\
             Its SHA-256 fingerprint (the appliance's log and `get_status` show it too):\n  {sha}\n\
             Trust it: Node-based clients (Claude Code, Cursor) with NODE_EXTRA_CA_CERTS={ca} in their\n\
             environment; the Python SDK with httpx2.AsyncClient(verify=ssl.create_default_context(cafile=\"{ca}\"));\n\
             then use {https} in place of {url} below.\n\n"
        ));
    }
    out.push_str(&format!(
        "Claude Code (the person's words pushed into the session: start it with\n\
         `claude --dangerously-load-development-channels server:hark`):
  claude mcp add --transport http hark {url} --header \"Authorization: Bearer {token}\" --header \"X-Hark-Channel: claude\"\n\n\
         Cursor (~/.cursor/mcp.json):\n  {{\"mcpServers\": {{\"hark\": {{\"url\": \"{url}\", \"headers\": {{\"Authorization\": \"Bearer {token}\"}}}}}}}}\n\n\
         Codex (~/.codex/config.toml; export HARK_TOKEN={token} where Codex runs):\n  [mcp_servers.hark]\n  url = \"{url}\"\n  bearer_token_env_var = \"HARK_TOKEN\"\n  tool_timeout_sec = 600\n\n\
         Claude Desktop and other stdio clients (uses the kept token):\n  {{\"mcpServers\": {{\"hark\": {{\"command\": \"hark\", \"args\": [\"connect\", \"{stdio_target}\"]}}}}}}\n\n\
         Python (the official MCP SDK, `pip install mcp`):\n  import httpx2\n  from mcp import Client\n  from mcp.client.streamable_http import streamable_http_client\n  http = httpx2.AsyncClient(headers={{\"Authorization\": \"Bearer {token}\"}})\n  async with http, Client(streamable_http_client(\"{url}\", http_client=http)) as hark:\n      print(await hark.call_tool(\"get_status\", {{}}))\n"
    ));
    out
}

/// The status as a person reads it.
pub fn format_status(target: &str, status: &Value) -> String {
    let mut out = String::new();
    let version = status["version"].as_str().unwrap_or("?");
    let uptime = status["uptime_seconds"].as_f64().unwrap_or(0.0) as u64;
    out.push_str(&format!(
        "Hark {version} at {}, up {}h {:02}m {:02}s\n",
        with_default_port(target),
        uptime / 3600,
        uptime / 60 % 60,
        uptime % 60
    ));
    let flag = |v: &Value, yes: &str, no: &str| {
        if v.as_bool().unwrap_or(false) {
            yes
        } else {
            no
        }
        .to_owned()
    };
    out.push_str(&format!(
        "microphone: {}    speaker: {}\n",
        flag(&status["recording"], "OPEN", "closed"),
        flag(&status["speaking"], "speaking", "idle")
    ));
    out.push_str("transports:\n");
    for t in status["transports"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {:<10} {:<28} {} client(s)\n",
            t["transport"].as_str().unwrap_or("?"),
            t["address"].as_str().unwrap_or("?"),
            t["clients"]
        ));
    }
    out.push_str("subsystems:\n");
    if let Some(subsystems) = status["subsystems"].as_object() {
        for (name, state) in subsystems {
            out.push_str(&format!(
                "  {:<10} {}\n",
                name,
                state.as_str().unwrap_or("?")
            ));
        }
    }
    out
}

/// What `hark token …` prints for `request`'s `result`.
pub fn format_tokens(request: &TokenRequest, result: &Value) -> String {
    let scopes = |v: &Value| {
        v["scopes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    match request {
        TokenRequest::Create { .. } => {
            let info = &result["info"];
            let token = result["token"].as_str().unwrap_or("?");
            let name = info["name"].as_str().unwrap_or("?");
            let host = format!(
                "{}.local",
                gethostname::gethostname()
                    .to_string_lossy()
                    .split('.')
                    .next()
                    .unwrap_or("hark")
            );
            format!(
                "Token for `{name}` ({}). It is shown only now; Hark keeps only its hash.\n\n  {token}\n\n\
                 Use it from the agent's machine:\n\
                 \x20 claude mcp add --transport http hark http://{host}:7341/mcp --header \"Authorization: Bearer {token}\"\n\
                 \x20 hark connect {host} --token {token}    (stdio clients, over raw TCP)\n",
                scopes(info)
            )
        }
        TokenRequest::List => {
            let tokens = result["tokens"].as_array().cloned().unwrap_or_default();
            if tokens.is_empty() {
                return "no tokens; `hark token create NAME` makes one\n".to_owned();
            }
            let mut out = format!(
                "{:<24} {:<26} {:<21} {}\n",
                "NAME", "SCOPES", "CREATED", "LAST USED"
            );
            for t in tokens {
                let last = match (t["last_used"].as_str(), t["last_address"].as_str()) {
                    (Some(when), Some(from)) => format!("{when} from {from}"),
                    (Some(when), None) => when.to_owned(),
                    _ => "never".to_owned(),
                };
                out.push_str(&format!(
                    "{:<24} {:<26} {:<21} {last}\n",
                    t["name"].as_str().unwrap_or("?"),
                    scopes(&t),
                    t["created"].as_str().unwrap_or("?"),
                ));
            }
            out
        }
        TokenRequest::Revoke { .. } => format!(
            "revoked `{}`: its agent is refused from its next request on\n",
            result["revoked"]["name"].as_str().unwrap_or("?")
        ),
    }
}

/// JSON-RPC error code the bridge uses for "the appliance is not there".
pub const UNREACHABLE: i64 = -32000;
/// Id of the `initialize` the bridge replays after reconnecting.
const REPLAY_ID: &str = "hark-connect-replay";
/// Id of the `hark/auth` the bridge sends on each connection.
const AUTH_ID: &str = "hark-connect-auth";

struct Upstream {
    write: tokio::net::tcp::OwnedWriteHalf,
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
}

/// Bridges stdin/stdout to the appliance's raw TCP transport.
///
/// The bridge keeps the client's `initialize` and `notifications/initialized`;
/// if the appliance drops the connection (restart, idle timeout, network),
/// requests that were waiting get a JSON-RPC error at once, and the next
/// message reconnects and replays the handshake so the client's session
/// carries on.
pub async fn connect(
    target: &str,
    name: Option<&str>,
    token: Option<&Token>,
    channel: bool,
) -> Result<(), ClientError> {
    let target = with_default_port(target);
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    let mut upstream: Option<Upstream> = None;
    let mut handshake: Vec<String> = Vec::new();
    let mut pending: HashSet<String> = HashSet::new();

    loop {
        tokio::select! {
            line = stdin.next_line() => {
                let Some(line) = line? else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let mut message: Option<Value> = serde_json::from_str(&line).ok();
                let line = match message.as_mut() {
                    Some(message) => {
                        let renamed = name.is_some_and(|name| rename(message, name));
                        let asked = channel && ask_for_channel(message);
                        if renamed || asked { message.to_string() } else { line }
                    }
                    None => line,
                };
                let method = message.as_ref().and_then(|m| m["method"].as_str().map(str::to_owned));
                let id = message.as_ref().and_then(|m| m.get("id").cloned());
                let is_handshake = matches!(method.as_deref(), Some("initialize" | "notifications/initialized"));
                if method.as_deref() == Some("initialize") {
                    handshake.clear();
                }
                if upstream.is_none() {
                    let replay = if is_handshake { &[][..] } else { &handshake[..] };
                    match open(&target, replay, token).await {
                        Ok(u) => upstream = Some(u),
                        Err(e) => {
                            tracing::warn!(error = %e, "appliance unreachable");
                            if let (Some(id), Some(_)) = (id, method) {
                                write_error(&mut stdout, id, &e.to_string()).await?;
                            }
                            continue;
                        }
                    }
                }
                if is_handshake {
                    handshake.push(line.clone());
                }
                if let (Some(id), Some(_)) = (&id, &method) {
                    pending.insert(id.to_string());
                }
                let Some(up) = upstream.as_mut() else { continue };
                let mut bytes = line.into_bytes();
                bytes.push(b'\n');
                if up.write.write_all(&bytes).await.is_err() {
                    upstream = None;
                    fail_pending(&mut stdout, &mut pending, &target).await?;
                }
            }
            line = next_upstream(&mut upstream) => {
                match line {
                    Some(line) => {
                        if let Ok(message) = serde_json::from_str::<Value>(&line)
                            && message.get("method").is_none()
                            && let Some(id) = message.get("id")
                        {
                            pending.remove(&id.to_string());
                        }
                        stdout.write_all(line.as_bytes()).await?;
                        stdout.write_all(b"\n").await?;
                        stdout.flush().await?;
                    }
                    None => {
                        tracing::warn!("appliance closed the connection");
                        upstream = None;
                        fail_pending(&mut stdout, &mut pending, &target).await?;
                    }
                }
            }
        }
    }
    Ok(())
}

async fn next_upstream(upstream: &mut Option<Upstream>) -> Option<String> {
    match upstream {
        Some(up) => up.lines.next_line().await.ok().flatten(),
        None => std::future::pending().await,
    }
}

/// Connects, presents the token, and replays the client's handshake,
/// swallowing the answers.
async fn open(
    target: &str,
    replay: &[String],
    token: Option<&Token>,
) -> Result<Upstream, ClientError> {
    let stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(target))
        .await
        .map_err(|_| ClientError::Timeout {
            target: target.to_owned(),
            seconds: 5,
        })?
        .map_err(|source| ClientError::Connect {
            target: target.to_owned(),
            source,
        })?;
    let _ = stream.set_nodelay(true);
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    if let Some(token) = token {
        let auth = json!({"jsonrpc": "2.0", "id": AUTH_ID, "method": hark_core::methods::AUTH,
            "params": {"token": token.secret()}});
        let mut bytes = auth.to_string().into_bytes();
        bytes.push(b'\n');
        write.write_all(&bytes).await?;
        let answer = tokio::time::timeout(Duration::from_secs(5), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(message) = serde_json::from_str::<Value>(&line)
                    && message["id"] == AUTH_ID
                {
                    return Some(message);
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        match answer {
            Some(message) if message.get("result").is_some() => {}
            Some(message) => token.refused(
                target,
                message["error"]["message"]
                    .as_str()
                    .unwrap_or("no reason given"),
            )?,
            None => {
                return Err(ClientError::Mcp {
                    target: target.to_owned(),
                    reason: "the appliance did not answer the token".into(),
                });
            }
        }
    }
    for line in replay {
        let mut message: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        let is_request = message.get("id").is_some();
        if is_request {
            message["id"] = json!(REPLAY_ID);
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(b'\n');
        write.write_all(&bytes).await?;
        if is_request {
            // Wait for (and drop) the answer to the replayed initialize.
            let answered = tokio::time::timeout(Duration::from_secs(5), async {
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.contains(REPLAY_ID) {
                        return true;
                    }
                }
                false
            })
            .await;
            if !matches!(answered, Ok(true)) {
                return Err(ClientError::Mcp {
                    target: target.to_owned(),
                    reason: "the appliance did not answer the replayed initialize".into(),
                });
            }
        }
    }
    tracing::info!(%target, replayed = replay.len(), "connected");
    Ok(Upstream { write, lines })
}

async fn fail_pending<W: AsyncWrite + Unpin>(
    out: &mut W,
    pending: &mut HashSet<String>,
    target: &str,
) -> Result<(), ClientError> {
    for id in pending.drain() {
        let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
        write_error(
            out,
            id,
            &format!("connection to Hark at {target} was lost before it answered; the call may not have completed"),
        )
        .await?;
    }
    Ok(())
}

async fn write_error<W: AsyncWrite + Unpin>(
    out: &mut W,
    id: Value,
    message: &str,
) -> Result<(), ClientError> {
    let error = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": UNREACHABLE, "message": message},
    });
    let mut bytes = error.to_string().into_bytes();
    bytes.push(b'\n');
    out.write_all(&bytes).await?;
    out.flush().await?;
    Ok(())
}

/// Sends one `hark/board` request (`hark button`, `hark mute`) over the
/// daemon's Unix socket and returns its result.
pub async fn board(
    socket: &std::path::Path,
    control: &hark_core::room::BoardControl,
) -> Result<Value, ClientError> {
    let params = serde_json::to_value(control).map_err(|e| ClientError::Mcp {
        target: socket.display().to_string(),
        reason: e.to_string(),
    })?;
    local_request(socket, hark_core::methods::BOARD, params).await
}

/// Sends one `hark/tokens` request (`hark token …`) over the daemon's Unix
/// socket and returns its result.
pub async fn tokens(
    socket: &std::path::Path,
    request: &TokenRequest,
) -> Result<Value, ClientError> {
    let params = serde_json::to_value(request).unwrap_or(Value::Null);
    local_request(socket, hark_core::methods::TOKENS, params).await
}

/// One custom request over the daemon's Unix socket, as an MCP client (the
/// handshake, then the request).
async fn local_request(
    socket: &std::path::Path,
    method: &'static str,
    params: Value,
) -> Result<Value, ClientError> {
    let target = socket.display().to_string();
    let exchange = async {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|source| ClientError::Connect {
                target: target.clone(),
                source,
            })?;
        custom_request(stream, &target, method, params).await
    };
    tokio::time::timeout(STATUS_TIMEOUT, exchange)
        .await
        .map_err(|_| ClientError::Timeout {
            target: target.clone(),
            seconds: STATUS_TIMEOUT.as_secs(),
        })?
}

/// The handshake on `stream`, then one custom request; its result. An
/// error answer is [`ClientError::Refused`] with the appliance's words.
async fn custom_request<S>(
    stream: S,
    target: &str,
    method: &'static str,
    params: Value,
) -> Result<Value, ClientError>
where
    S: tokio::io::AsyncRead + AsyncWrite + Send + 'static,
{
    let mcp_err = |reason: String| ClientError::Mcp {
        target: target.to_owned(),
        reason,
    };
    let client = cli_info()
        .serve(stream)
        .await
        .map_err(|e| mcp_err(e.to_string()))?;
    let reply = client
        .send_request(ClientRequest::CustomRequest(CustomRequest::new(
            method,
            Some(params),
        )))
        .await;
    let _ = client.cancel().await;
    match reply {
        Ok(ServerResult::CustomResult(CustomResult(value))) => Ok(value),
        Ok(other) => Err(mcp_err(format!("unexpected answer to {method}: {other:?}"))),
        Err(e) => Err(ClientError::Refused {
            target: target.to_owned(),
            reason: service_error_text(e),
        }),
    }
}

/// An rmcp error as a person reads it: the server's own message when it
/// sent one.
fn service_error_text(e: rmcp::ServiceError) -> String {
    match e {
        rmcp::ServiceError::McpError(data) => data.message.to_string(),
        other => other.to_string(),
    }
}
