"""MCP over plain HTTP, as the simplest clients use it: EdgeSpeak's curl + jq
recipe (one POST, one JSON answer, no session id kept) on every protocol
revision, a script that accepts only `application/json`, and VoxCtrl's
`initialize` with empty params over HTTP (docs/mcp.md, "Plain HTTP")."""

import json
import subprocess

import httpx
import pytest

BOTH = "application/json, text/event-stream"


def sh(script: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", **env})


# EdgeSpeak's recipe as its documentation gives it, with Hark's URL and tool.
RECIPE = r"""
curl --fail-with-body -s "$MCP_URL" \
  -H "Content-Type: application/json" \
  -H "Accept: application/json, text/event-stream" \
  -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"'"$VERSION"'","capabilities":{},"clientInfo":{"name":"docs-example","version":"1.0"}}}' \
  -o mcp-init.json
jq -c '{id, server: .result.serverInfo.name, protocolVersion: .result.protocolVersion}' mcp-init.json
MCP_PROTOCOL=$(jq -er '.result.protocolVersion' mcp-init.json)

curl --fail-with-body -s -o /dev/null -w '%{http_code}\n' "$MCP_URL" \
  -H "Content-Type: application/json" \
  -H "Accept: application/json, text/event-stream" \
  -H "MCP-Protocol-Version: $MCP_PROTOCOL" \
  -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'

curl --fail-with-body -s "$MCP_URL" \
  -H "Content-Type: application/json" \
  -H "Accept: application/json, text/event-stream" \
  -H "MCP-Protocol-Version: $MCP_PROTOCOL" \
  -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_status","arguments":{}}}' \
  -o mcp-result.json
jq -c '.result.structuredContent | {version, recording}' mcp-result.json
"""


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_edgespeaks_curl_and_jq_recipe_works_on_every_revision(daemon, tmp_path, version):
    done = sh(f"cd {tmp_path}\n" + RECIPE, MCP_URL=daemon.url, VERSION=version)
    assert done.returncode == 0, done.stderr + done.stdout
    init, notified, result = done.stdout.splitlines()
    assert json.loads(init) == {"id": 1, "server": "hark", "protocolVersion": version}
    assert notified == "202"
    assert json.loads(result) == {"version": "0.1.0", "recording": False}, result


def test_the_2026_revision_needs_no_initialize_and_answers_json(daemon):
    # 2026-07-28 has no initialize: a request says its version, method and
    # client itself.
    r = httpx.post(daemon.url, timeout=30, headers={
        "content-type": "application/json", "accept": BOTH, "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call", "mcp-name": "get_status",
    }, json={"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "get_status", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "curl-script", "version": "1"}}}})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", (r.status_code, r.text)
    assert r.json()["result"]["structuredContent"]["recording"] is False


def test_a_client_that_accepts_only_json_gets_json(daemon):
    headers = {"content-type": "application/json", "accept": "application/json"}
    with httpx.Client(timeout=60) as http:
        init = http.post(daemon.url, headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "json-only", "version": "1"}}})
        assert init.status_code == 200 and init.headers["content-type"] == "application/json", init.text
        session = init.headers["mcp-session-id"]
        # In its session: a call that reports progress (speech said
        # sentence by sentence) answers with the result alone.
        h = dict(headers, **{"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"})
        assert http.post(daemon.url, headers=h, json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
        r = http.post(daemon.url, headers=h, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "speak_text", "arguments": {"text": "One. Two.", "wait": True},
            "_meta": {"progressToken": "p1"}}})
        assert r.status_code == 200 and r.headers["content-type"] == "application/json", (r.status_code, r.text)
        spoken = r.json()["result"]["structuredContent"]
        assert spoken["status"] == "spoken" and spoken["sentences"] == 2, spoken
        # Without a session too.
        r = http.post(daemon.url, headers=headers, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
        assert "speak_text" in {t["name"] for t in r.json()["result"]["tools"]}


def test_voxctrls_empty_initialize_works_over_http_too(daemon):
    headers = {"content-type": "application/json", "accept": BOTH}
    for params in ({}, None):
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
        if params is not None:
            body["params"] = params
        r = httpx.post(daemon.url, headers=headers, json=body, timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["result"]["protocolVersion"] == "2024-11-05"
        assert r.headers["mcp-session-id"]


def test_a_call_without_a_session_is_named_by_its_header(daemon):
    headers = {"content-type": "application/json", "accept": BOTH, "x-hark-client": "kitchen-script"}
    r = httpx.post(daemon.url, headers=headers, timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "speak_text", "arguments": {"text": "Dinner is ready.", "wait": True}}})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["structuredContent"]["status"] == "spoken"
    rows = httpx.post(daemon.url, headers=headers, timeout=30, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "list_captures", "arguments": {"kind": "spoken", "limit": 5}}}).json()
    said = [(c["agent"], c["text"]) for c in rows["result"]["structuredContent"]["captures"]]
    assert ("kitchen-script", "Dinner is ready.") in said, said
    assert not any(agent == "rmcp" for agent, _ in said), said
