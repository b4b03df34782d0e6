"""Raw newline-delimited JSON-RPC over TCP and the Unix socket."""

import json
import socket
import subprocess
import threading
import time

import pytest

from harness import TOOLS, LineClient, status_of

TRANSPORTS = ["tcp", "unix"]


def connect(daemon, transport) -> LineClient:
    return getattr(LineClient, transport)(daemon)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_handshake_list_and_status(daemon, transport):
    c = connect(daemon, transport)
    init = c.initialize("pytest-" + transport)
    assert init["id"] == 0
    assert init["result"]["serverInfo"]["name"] == "hark"
    assert init["result"]["protocolVersion"] == "2025-06-18"
    assert "tools" in init["result"]["capabilities"]

    tools = c.request("tools/list", id=2)["result"]["tools"]
    names = [t["name"] for t in tools]
    assert names == TOOLS
    by_name = {t["name"]: t for t in tools}
    tool = by_name["get_status"]
    assert tool["inputSchema"]["type"] == "object"
    assert "volume" in by_name["set_volume"]["inputSchema"]["properties"]
    assert {"recording", "speaking", "volume", "version", "uptime_seconds", "transports", "subsystems"} <= set(
        tool["outputSchema"]["properties"]
    )

    result = c.call_tool("get_status", id=3)["result"]
    structured = result["structuredContent"]
    # VoxCtrl's contract: the text is a JSON object with recording/speaking.
    text = json.loads(result["content"][0]["text"])
    assert text == structured
    assert structured["recording"] is False
    assert structured["speaking"] is False
    counts = {t["transport"]: t["clients"] for t in structured["transports"]}
    assert counts[transport] >= 1
    board = structured["subsystems"].pop("board")
    inbox = structured["subsystems"].pop("inbox")
    history = structured["subsystems"].pop("history")
    schedule = structured["subsystems"].pop("schedule")
    assert schedule.startswith("0 waiting; kept in ") and schedule.endswith("schedule.sqlite3"), schedule
    assert history.startswith("0 rows; kept in ") and history.endswith("history.sqlite3"), history
    assert inbox.startswith("0 waiting; 0 agent(s) waiting for the person; kept in ") and \
        inbox.endswith("inbox.sqlite3"), inbox
    assert structured["subsystems"] == {
        "audio": "capturing; speaker ready",
        "stt": "ready; model tiny.en-q8_0 (tiny q8_0, English; other languages: base-q8_0)",
        "tts": "ready; piper, voice en_US-joe-medium; loaded: en_US-joe-medium; 0 queued",
        # Loaded, switched off (the daemon's own default).
        "wake": "off for okay_nabu at default sensitivity",
    }
    # No GPIO on this machine: the simulated board, idle.
    assert board.startswith("simulated (") and board.endswith("; lights: idle; mute off"), board
    c.close()


def test_client_counts_follow_connections(daemon):
    observer = LineClient.tcp(daemon)
    observer.initialize()
    before = {t["transport"]: t["clients"] for t in status_of(observer)["transports"]}
    extra = [LineClient.unix(daemon) for _ in range(3)]
    for e in extra:
        e.initialize()
    during = {t["transport"]: t["clients"] for t in status_of(observer, id=5)["transports"]}
    assert during["unix"] == before["unix"] + 3
    for e in extra:
        e.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        after = {t["transport"]: t["clients"] for t in status_of(observer, id=6)["transports"]}
        if after["unix"] == before["unix"]:
            break
        time.sleep(0.05)
    assert after["unix"] == before["unix"]
    uptime1 = status_of(observer, id=7)["uptime_seconds"]
    time.sleep(0.3)
    assert status_of(observer, id=8)["uptime_seconds"] > uptime1


def test_voxctrl_raw_socket_example(daemon):
    """Seed 000's Python raw-socket client, as documented: `initialize` with
    empty params, then `notifications/initialized`, then tool calls, each
    reply read as the first line of what arrives."""

    def rpc(sock, method, params=None, rpc_id=1):
        req = {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params or {}}
        sock.sendall((json.dumps(req) + "\n").encode())
        data = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
            if b"\n" in data:
                break
        return json.loads(data.split(b"\n")[0])

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(daemon.unix)
        init = rpc(s, "initialize")
        assert init["result"]["serverInfo"]["name"] == "hark"
        s.sendall(
            (json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}) + "\n").encode()
        )
        status = rpc(s, "tools/call", {"name": "get_status", "arguments": {}}, rpc_id=5)
        text = json.loads(status["result"]["content"][0]["text"])
        assert text["recording"] is False and text["speaking"] is False
        # The example's speak_text: "spoken" at once, as VoxCtrl answers.
        resp = rpc(s, "tools/call", {"name": "speak_text", "arguments": {"text": "hi"}}, rpc_id=2)
        assert resp["result"]["content"] == [{"type": "text", "text": "spoken"}]
        # Without text: VoxCtrl's own error.
        resp = rpc(s, "tools/call", {"name": "speak_text", "arguments": {}}, rpc_id=3)
        assert resp["error"] == {"code": -32603, "message": "speak_text requires 'text' argument"}
        # Leave the shared daemon silent for the tests after this one.
        resp = rpc(s, "tools/call", {"name": "stop_speaking", "arguments": {}}, rpc_id=4)
        assert not resp["result"]["isError"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_one_shot_without_initialize(daemon, transport):
    """Seed 000's shell example pipes a lone tools/list through socat."""
    target = (
        f"TCP:{daemon.tcp[0]}:{daemon.tcp[1]}" if transport == "tcp" else f"UNIX-CONNECT:{daemon.unix}"
    )
    out = subprocess.run(
        ["socat", "-t", "2", "-", target],
        input=b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}\n',
        capture_output=True,
        timeout=10,
    )
    first = json.loads(out.stdout.split(b"\n")[0])
    assert first["id"] == 1
    assert [t["name"] for t in first["result"]["tools"]] == TOOLS


def test_malformed_input_gets_errors_and_connection_keeps_working(daemon):
    c = LineClient.tcp(daemon)
    c.initialize()

    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":\n')
    r = c.recv()
    assert r["error"]["code"] == -32700 and "Parse error" in r["error"]["message"]

    c.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"ping","x":"\xff\xfe"}\n')
    r = c.recv()
    assert r["error"]["code"] == -32700 and "UTF-8" in r["error"]["message"]

    c.send_raw(b'[{"jsonrpc":"2.0","id":3,"method":"ping"}]\n')
    r = c.recv()
    assert r["error"]["code"] == -32600 and "batch" in r["error"]["message"]

    c.send({"id": 4, "method": "ping"})
    r = c.recv()
    assert r["error"]["code"] == -32600 and "jsonrpc" in r["error"]["message"] and r["id"] == 4

    c.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": 7}})
    r = c.recv()
    assert r["error"]["code"] == -32602 and r["id"] == 5 and "tools/call" in r["error"]["message"]

    r = c.call_tool("no_such_tool", id=6)
    assert r["error"]["code"] == -32602 and "no_such_tool" in r["error"]["message"]

    r = c.call_tool("get_status", {"unexpected": 1}, id=7)
    assert "result" in r  # get_status takes no arguments; extras are ignored

    started = time.monotonic()
    r = c.request("server/frobnicate", id=8)
    assert r["error"]["code"] == -32601 and "server/frobnicate" in r["error"]["message"]
    assert time.monotonic() - started < 2  # answered at once, not on a timeout

    # Still fully working.
    assert c.request("ping", id=9) == {"jsonrpc": "2.0", "id": 9, "result": {}}
    assert status_of(c, id=10)["recording"] is False


def test_wrong_argument_types(daemon):
    c = LineClient.tcp(daemon)
    c.initialize()
    r = c.request("tools/call", {"name": "get_status", "arguments": "not an object"}, id=1)
    assert r["error"]["code"] == -32602
    r = c.request("tools/call", {"name": ["get_status"]}, id=2)
    assert r["error"]["code"] == -32602 and "name" in r["error"]["message"]
    fresh = LineClient.tcp(daemon)
    r = fresh.request("initialize", {"protocolVersion": 2025, "capabilities": {}}, id=1)
    assert r["error"]["code"] == -32602 and "initialize" in r["error"]["message"]
    assert c.request("ping", id=3)["result"] == {}


def test_oversized_line_is_refused_and_connection_survives(start_daemon):
    d = start_daemon({"mcp": {"max_message_bytes": 4096}})
    c = LineClient.tcp(d)
    c.initialize()
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 10000}})
    c.send_raw(big.encode() + b"\n")
    r = c.recv()
    assert r["error"]["code"] == -32600 and "4096" in r["error"]["message"]
    assert c.request("ping", id=2)["result"] == {}
    # A line that never ends is not buffered without bound either.
    c.send_raw(b"y" * 50_000)
    r = c.recv()
    assert r["error"]["code"] == -32600
    c.send_raw(b"\n")
    assert c.request("ping", id=3)["result"] == {}
    # Others are unaffected.
    other = LineClient.unix(d)
    other.initialize()
    assert status_of(other)["recording"] is False


def test_client_disconnecting_mid_call_does_not_disturb_others(daemon):
    watcher = LineClient.tcp(daemon)
    watcher.initialize()
    for i in range(20):
        s = socket.create_connection(daemon.tcp)
        s.sendall(
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}\n'
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_status","arguments":{}}}\n'
        )
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
        s.close()
    assert status_of(watcher)["speaking"] is False
    assert daemon.proc.poll() is None


def test_concurrent_clients(daemon):
    errors = []

    def worker(n):
        try:
            c = LineClient.tcp(daemon) if n % 2 else LineClient.unix(daemon)
            c.initialize(f"worker{n}")
            for i in range(20):
                r = c.call_tool("get_status", id=i + 1)
                assert r["id"] == i + 1 and r["result"]["structuredContent"]["version"]
            c.close()
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []


def test_connection_limit(start_daemon):
    d = start_daemon({"mcp": {"max_connections": 3}})
    held = [LineClient.tcp(d), LineClient.unix(d), LineClient.tcp(d)]
    for h in held:
        h.initialize()
    refused = LineClient.tcp(d)
    r = refused.recv()
    assert r["error"]["code"] == -32000
    assert "maximum of 3 connections" in r["error"]["message"]
    assert refused.closed()
    # Existing clients keep working; a slot frees when one leaves.
    assert status_of(held[0])["recording"] is False
    held[1].close()
    time.sleep(0.3)
    again = LineClient.tcp(d)
    again.initialize()
    assert status_of(again)["speaking"] is False


def test_idle_connection_is_closed(start_daemon):
    d = start_daemon({"mcp": {"idle_timeout_secs": 1}})
    idle = LineClient.tcp(d)
    idle.initialize()
    busy = LineClient.tcp(d)
    busy.initialize()
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert busy.request("ping", id=1)["result"] == {}
        time.sleep(0.3)
    assert idle.closed(timeout=3)
    assert busy.request("ping", id=2)["result"] == {}
