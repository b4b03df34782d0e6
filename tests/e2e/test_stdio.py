"""Stdio-only clients: through `socat STDIO TCP:…` and through `hark connect`."""

import json
import socket
import subprocess
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters

from harness import TOOLS, HARK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_sdk(params: StdioServerParameters, mode: str):
    async def main():
        async with Client(params, mode=mode, cache=None) as client:
            tools = await client.list_tools()
            result = await client.call_tool("get_status", {})
            return [t.name for t in tools.tools], result.structured_content, client.protocol_version

    return anyio.run(main)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_python_sdk_over_socat(daemon, mode):
    host, port = daemon.tcp
    names, status, version = run_sdk(
        StdioServerParameters(command="socat", args=["STDIO", f"TCP:{host}:{port}"]), mode
    )
    assert names == TOOLS
    assert status["speaking"] is False
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_python_sdk_over_hark_connect(daemon, mode):
    host, port = daemon.tcp
    names, status, _ = run_sdk(StdioServerParameters(command=str(HARK), args=["connect", f"{host}:{port}"]), mode)
    assert names == TOOLS
    assert status["recording"] is False


class Bridge:
    """`hark connect` (or another bridge's `command`) driven line by line."""

    def __init__(self, target: str, command: list[str] | None = None, args: list[str] = ()):
        self.proc = subprocess.Popen(
            [*(command or [str(HARK), "connect"]), target, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def send(self, message: dict):
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = 10.0) -> dict:
        # A hang is the failure this guards against: bound every read.
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        assert sel.select(timeout), "hark connect gave no answer"
        return json.loads(self.proc.stdout.readline())

    def close(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(5)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bridge-test", "version": "1"}},
}


def test_connect_to_unreachable_appliance_answers_with_error():
    unreachable_is_an_error_not_a_hang()


def unreachable_is_an_error_not_a_hang(command=None):
    port = free_port()  # nothing listens here
    bridge = Bridge(f"127.0.0.1:{port}", command)
    started = time.monotonic()
    bridge.send(INIT)
    reply = bridge.recv()
    assert time.monotonic() - started < 6
    assert reply["id"] == 1
    assert reply["error"]["code"] == -32000
    assert f"127.0.0.1:{port}" in reply["error"]["message"]
    assert bridge.close() == 0


def test_connect_survives_appliance_restart(start_daemon):
    a_restart_is_survived(start_daemon)


def a_restart_is_survived(start_daemon, command=None):
    port = free_port()
    cfg = {"mcp.tcp": {"listen": f"127.0.0.1:{port}"}}
    first = start_daemon(cfg)
    bridge = Bridge(f"127.0.0.1:{port}", command)
    bridge.send(INIT)
    assert bridge.recv()["result"]["serverInfo"]["name"] == "hark"
    bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    bridge.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_status", "arguments": {}}})
    assert bridge.recv()["result"]["structuredContent"]["recording"] is False

    # The appliance goes away: a request gets an error, not silence.
    assert first.stop() == 0
    bridge.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    reply = bridge.recv()
    assert reply["id"] == 3 and reply["error"]["code"] == -32000

    # It comes back: the bridge reconnects and replays the handshake, so the
    # client's session carries on without a new initialize.
    start_daemon(cfg)
    bridge.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_status", "arguments": {}}})
    reply = bridge.recv()
    assert reply["id"] == 4, reply
    assert reply["result"]["structuredContent"]["uptime_seconds"] < 30
    assert bridge.close() == 0


def test_connect_answers_calls_in_flight_when_the_appliance_drops():
    a_call_in_flight_is_answered_when_the_appliance_drops()


def a_call_in_flight_is_answered_when_the_appliance_drops(command=None):
    """A stand-in appliance that accepts the call and then drops the
    connection: the client must get an error for that call, not a hang."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    bridge = Bridge(f"127.0.0.1:{port}", command)
    bridge.send({"jsonrpc": "2.0", "id": "call-7", "method": "tools/call", "params": {"name": "get_status", "arguments": {}}})
    conn, _ = server.accept()
    conn.settimeout(5)
    assert b"call-7" in conn.recv(4096)
    conn.close()
    server.close()
    reply = bridge.recv()
    assert reply["id"] == "call-7"
    assert reply["error"]["code"] == -32000 and "lost" in reply["error"]["message"]
    assert bridge.close() == 0
