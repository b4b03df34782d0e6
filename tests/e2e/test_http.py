"""Streamable HTTP at /mcp: the official Python SDK (mcp 2.x) and raw HTTP."""

from harness import TOOLS
import json

import anyio
import httpx
import pytest
from mcp import Client

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-http", "version": "1"},
    },
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def sse_messages(body: str) -> list[dict]:
    out = []
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip():
            out.append(json.loads(line[5:]))
    return out


@pytest.mark.parametrize("mode", ["legacy", "auto", "2026-07-28"])
def test_python_sdk(daemon, mode):
    async def main():
        async with Client(daemon.url, mode=mode, cache=None) as client:
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == TOOLS
            result = await client.call_tool("get_status", {})
            assert result.is_error is not True
            assert result.structured_content["recording"] is False
            assert json.loads(result.content[0].text) == result.structured_content
            return client.protocol_version

    version = anyio.run(main)
    if mode == "legacy":
        assert version == "2025-11-25"
    else:
        # auto probes server/discover and keeps the 2026-07-28 era.
        assert version == "2026-07-28"


def test_session_lifecycle_and_counts(daemon):
    with httpx.Client(timeout=10) as http:
        r = http.post(daemon.url, json=INIT, headers=HEADERS)
        assert r.status_code == 200
        session = r.headers["mcp-session-id"]
        # initialize is answered with JSON (the simplest clients read it with
        # jq), the session in its header.
        assert r.headers["content-type"] == "application/json", r.headers
        assert r.json()["result"]["serverInfo"]["name"] == "hark"
        h = dict(HEADERS, **{"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"})
        r = http.post(daemon.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h)
        assert r.status_code == 202
        r = http.post(
            daemon.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_status", "arguments": {}}},
            headers=h,
        )
        status = sse_messages(r.text)[0]["result"]["structuredContent"]
        counts = {t["transport"]: t["clients"] for t in status["transports"]}
        assert counts["http"] >= 1
        # A protocol version the server does not speak is refused.
        bad = dict(h, **{"mcp-protocol-version": "1999-01-01"})
        r = http.post(daemon.url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=bad)
        assert r.status_code == 400
        # DELETE ends the session; it is then unknown.
        r = http.delete(daemon.url, headers=h)
        assert r.status_code == 204, r.status_code
        r = http.post(daemon.url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=h)
        assert r.status_code == 404


def test_host_and_origin_are_validated(daemon):
    with httpx.Client(timeout=10) as http:
        r = http.post(daemon.url, json=INIT, headers=dict(HEADERS, host="evil.example.com"))
        assert r.status_code == 403 and "evil.example.com" in r.text
        r = http.post(daemon.url, json=INIT, headers=dict(HEADERS, origin="http://evil.example.com"))
        assert r.status_code == 403 and "Origin" in r.text
        for host in ("localhost", "hark.local", f"127.0.0.1:{daemon.http[1]}"):
            r = http.post(daemon.url, json=INIT, headers=dict(HEADERS, host=host))
            assert r.status_code == 200, host
        r = http.post(daemon.url, json=INIT, headers=dict(HEADERS, origin="http://localhost:6274"))
        assert r.status_code == 200


def test_configured_host_is_allowed(start_daemon):
    d = start_daemon({"service": {"hostname": "kitchen"}, "mcp": {"allowed_hosts": ["voice.example.lan"]}})
    with httpx.Client(timeout=10) as http:
        for host in ("kitchen.local", "kitchen", "voice.example.lan:7341"):
            assert http.post(d.url, json=INIT, headers=dict(HEADERS, host=host)).status_code == 200
        assert http.post(d.url, json=INIT, headers=dict(HEADERS, host="other.lan")).status_code == 403


def test_bad_requests(start_daemon):
    d = start_daemon({"mcp": {"max_message_bytes": 4096}})
    with httpx.Client(timeout=10) as http:
        r = http.post(d.url, content=b"{not json", headers=HEADERS)
        assert r.status_code == 400
        assert json.loads(r.text)["error"]["code"] == -32700
        r = http.post(d.url, content=json.dumps(dict(INIT, params={"pad": "x" * 10000})), headers=HEADERS)
        assert r.status_code == 413
        r = http.get(d.url.replace("/mcp", "/elsewhere"))
        assert r.status_code == 404 and "/mcp" in r.text
        # The daemon still serves.
        assert http.post(d.url, json=INIT, headers=HEADERS).status_code == 200


def test_connection_limit_http(start_daemon):
    d = start_daemon({"mcp": {"max_connections": 2}})
    c1, c2 = httpx.Client(timeout=5), httpx.Client(timeout=5)
    assert c1.post(d.url, json=INIT, headers=HEADERS).status_code == 200
    assert c2.post(d.url, json=INIT, headers=HEADERS).status_code == 200
    with httpx.Client(timeout=5) as c3:
        r = c3.post(d.url, json=INIT, headers=HEADERS)
        assert r.status_code == 503 and "maximum of 2" in r.text
    c1.close()
    c2.close()


def test_silent_and_idle_http_connections_are_closed(start_daemon):
    import socket
    import time

    d = start_daemon({"mcp": {"idle_timeout_secs": 1}})
    silent = socket.create_connection(d.http)
    silent.settimeout(4)
    started = time.monotonic()
    assert silent.recv(10) == b""  # closed without a request ever arriving
    assert time.monotonic() - started < 3

    keepalive = socket.create_connection(d.http)
    keepalive.settimeout(4)
    keepalive.sendall(b"GET /elsewhere HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert keepalive.recv(4096).startswith(b"HTTP/1.1 404")
    assert keepalive.recv(10) == b""  # no next request: closed
    with httpx.Client(timeout=5) as http:  # and the daemon still serves
        assert http.post(d.url, json=INIT, headers=HEADERS).status_code == 200
