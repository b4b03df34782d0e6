"""WebSocket at /mcp: the official SDK's client (mcp[ws] 1.x) and raw frames."""

import json
import subprocess

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from harness import TOOLS, VENV_WS_PYTHON

HERE = __import__("pathlib").Path(__file__).parent
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw-ws", "version": "1"}},
}


def ws(daemon, **kw):
    return connect(daemon.ws_url, subprotocols=["mcp"], open_timeout=5, **kw)


def rpc(sock, message):
    sock.send(json.dumps(message))
    return json.loads(sock.recv(timeout=5))


def test_sdk_websocket_client(daemon):
    if not VENV_WS_PYTHON.exists():
        pytest.fail("tests/.venv-ws is missing; run tests/setup.sh")
    out = subprocess.run(
        [str(VENV_WS_PYTHON), str(HERE / "clients" / "ws_sdk_client.py"), daemon.ws_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["server"] == "hark"
    assert seen["tools"] == TOOLS
    assert seen["is_error"] in (False, None)
    assert json.loads(seen["text"]) == seen["structured"]
    assert seen["structured"]["recording"] is False


def test_subprotocol_and_status_counts(daemon):
    with ws(daemon) as sock:
        assert sock.subprotocol == "mcp"
        assert rpc(sock, INIT)["result"]["serverInfo"]["name"] == "hark"
        sock.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        r = rpc(sock, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_status", "arguments": {}}})
        counts = {t["transport"]: t["clients"] for t in r["result"]["structuredContent"]["transports"]}
        assert counts["websocket"] >= 1


def test_malformed_text_keeps_connection(daemon):
    with ws(daemon) as sock:
        rpc(sock, INIT)
        sock.send("{oops")
        assert json.loads(sock.recv(timeout=5))["error"]["code"] == -32700
        sock.send('[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
        assert json.loads(sock.recv(timeout=5))["error"]["code"] == -32600
        assert rpc(sock, {"jsonrpc": "2.0", "id": 2, "method": "ping"})["result"] == {}


def test_binary_frame_closes_with_1003(daemon):
    with ws(daemon) as sock:
        rpc(sock, INIT)
        sock.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        with pytest.raises(ConnectionClosed) as closed:
            sock.recv(timeout=5)
        assert closed.value.rcvd.code == 1003


def test_oversized_message_closes_with_1009(start_daemon):
    d = start_daemon({"mcp": {"max_message_bytes": 4096}})
    with ws(d, max_size=None) as sock:
        rpc(sock, INIT)
        sock.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 10000}}))
        with pytest.raises(ConnectionClosed) as closed:
            sock.recv(timeout=5)
        assert closed.value.rcvd.code == 1009
    with ws(d) as sock:  # the daemon still serves
        assert rpc(sock, INIT)["result"]["serverInfo"]["name"] == "hark"


def test_foreign_origin_and_host_are_refused(daemon):
    with pytest.raises(InvalidStatus) as refused:
        ws(daemon, origin="http://evil.example.com")
    assert refused.value.response.status_code == 403
    # The websockets client always sends its own Host; send the upgrade by hand.
    upgrade = {
        "host": "evil.example.com",
        "connection": "Upgrade",
        "upgrade": "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-protocol": "mcp",
    }
    r = httpx.get(daemon.url, headers=upgrade, timeout=5)
    assert r.status_code == 403 and "evil.example.com" in r.text
    r = httpx.get(daemon.url, headers=dict(upgrade, host="localhost"), timeout=5)
    assert r.status_code == 101


def test_wrong_subprotocol_is_refused(daemon):
    with pytest.raises(InvalidStatus) as refused:
        connect(daemon.ws_url, subprotocols=["graphql-ws"], open_timeout=5)
    assert refused.value.response.status_code == 400
