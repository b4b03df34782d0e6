//! The lines each agent client takes Hark in, with a token: what the
//! status page shows once a pairing is allowed ("add an agent").
//!
//! Each is what that client's documentation asks for: a command to run or a
//! file's contents, with where it goes.

use serde::Serialize;

/// One client's way in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientLines {
    /// A short id: `claude-code`, `claude-desktop`, `cursor`, `windsurf`,
    /// `vscode`, `codex`, `python`.
    pub client: &'static str,
    /// Its name as people say it.
    pub label: &'static str,
    /// Where it goes: a terminal, or the file to put it in.
    pub place: &'static str,
    /// `command`, `json`, `toml` or `python`: how to read `text`.
    pub kind: &'static str,
    pub text: String,
}

/// The lines for an agent with `token`, reaching MCP at `url`
/// (`http://hark.local:7341/mcp`) and, for stdio-only clients, the raw TCP
/// transport at `tcp` (`hark.local:7340`) through the `hark-connect`
/// bridge, installed from `bridge` (the wheel the appliance serves).
pub fn lines(url: &str, tcp: &str, bridge: &str, token: &str) -> Vec<ClientLines> {
    let bearer = format!("Bearer {token}");
    let http = |key: &str| serde_json::json!({ "mcpServers": { "hark": { key: url, "headers": { "Authorization": bearer } } } });
    let pretty =
        |value: serde_json::Value| serde_json::to_string_pretty(&value).unwrap_or_default();
    vec![
        ClientLines {
            client: "claude-code",
            label: "Claude Code",
            place: "a terminal",
            kind: "command",
            text: format!(
                "claude mcp add --transport http hark {url} --header \"Authorization: {bearer}\""
            ),
        },
        ClientLines {
            client: "hark-connect",
            label: "The hark-connect bridge, for Claude Desktop",
            place: "a terminal on the computer, once (Python 3.9 or newer; or pip install)",
            kind: "command",
            text: format!("pipx install {bridge}"),
        },
        ClientLines {
            client: "claude-desktop",
            label: "Claude Desktop",
            place: "claude_desktop_config.json (Settings → Developer → Edit Config), with the hark-connect bridge installed (the line above)",
            kind: "json",
            text: pretty(serde_json::json!({ "mcpServers": { "hark": {
                "command": "hark-connect", "args": [tcp, "--token", token] } } })),
        },
        ClientLines {
            client: "cursor",
            label: "Cursor",
            place: "~/.cursor/mcp.json",
            kind: "json",
            text: pretty(http("url")),
        },
        ClientLines {
            client: "windsurf",
            label: "Windsurf",
            place: "~/.codeium/windsurf/mcp_config.json",
            kind: "json",
            text: pretty(http("serverUrl")),
        },
        ClientLines {
            client: "vscode",
            label: "VS Code",
            place: ".vscode/mcp.json in the workspace (or the user's mcp.json)",
            kind: "json",
            text: pretty(serde_json::json!({ "servers": { "hark": {
                "type": "http", "url": url, "headers": { "Authorization": bearer } } } })),
        },
        ClientLines {
            client: "codex",
            label: "Codex",
            place: "~/.codex/config.toml, with HARK_TOKEN set where Codex runs",
            kind: "toml",
            text: format!(
                "# export HARK_TOKEN={token}\n[mcp_servers.hark]\nurl = \"{url}\"\nbearer_token_env_var = \"HARK_TOKEN\"\n# A person takes longer than Codex's default 60 s a call.\ntool_timeout_sec = 600\n"
            ),
        },
        ClientLines {
            client: "python",
            label: "Python (the official MCP SDK, pip install mcp)",
            place: "a Python file",
            kind: "python",
            text: format!(
                "import anyio, httpx2\nfrom mcp import Client\nfrom mcp.client.streamable_http import streamable_http_client\n\n\
                 async def main():\n    http = httpx2.AsyncClient(headers={{\"Authorization\": \"{bearer}\"}})\n    \
                 async with http, Client(streamable_http_client(\"{url}\", http_client=http)) as hark:\n        \
                 status = await hark.call_tool(\"get_status\", {{}})\n        print(status.structured_content)\n\n\
                 anyio.run(main)\n"
            ),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_gets_the_url_and_the_token_in_its_own_shape() {
        let wheel = "http://hark.local:7341/hark-connect/hark_connect-0.1.0-py3-none-any.whl";
        let all = lines(
            "http://hark.local:7341/mcp",
            "hark.local:7340",
            wheel,
            "hark_abc",
        );
        let ids: Vec<_> = all.iter().map(|l| l.client).collect();
        assert_eq!(
            ids,
            [
                "claude-code",
                "hark-connect",
                "claude-desktop",
                "cursor",
                "windsurf",
                "vscode",
                "codex",
                "python"
            ]
        );
        // The bridge is installed from the appliance, with no token.
        assert_eq!(all[1].text, format!("pipx install {wheel}"));
        for l in all.iter().filter(|l| l.client != "hark-connect") {
            assert!(l.text.contains("hark_abc"), "{}", l.client);
            if l.kind == "json" {
                let v: serde_json::Value = serde_json::from_str(&l.text).expect("json");
                let text = v.to_string();
                assert!(
                    text.contains("http://hark.local:7341/mcp") || text.contains("hark.local:7340"),
                    "{}",
                    l.client
                );
            }
        }
        let windsurf: serde_json::Value =
            serde_json::from_str(&all[4].text).expect("windsurf json");
        assert_eq!(
            windsurf["mcpServers"]["hark"]["serverUrl"],
            "http://hark.local:7341/mcp"
        );
        let desktop: serde_json::Value = serde_json::from_str(&all[2].text).expect("json");
        assert_eq!(
            desktop["mcpServers"]["hark"]["args"],
            serde_json::json!(["hark.local:7340", "--token", "hark_abc"])
        );
    }
}
