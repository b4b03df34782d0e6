"""Fair connection limits, end to end: connections that have presented no
token live in a small budget of their own (a few per address, a few more
in total) with a short deadline, so however many idle or slow connections
one host opens — raw TCP or HTTP that never finishes its headers — a
paired agent on another host, and the trusted Unix socket, still get in.
Loopback addresses 127.0.0.x stand for hosts on the LAN
(`auth.trust_loopback = false`)."""

import json
import socket
import subprocess

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from harness import HARK, LineClient, call, new_token

LIMITS = {"auth": {"trust_loopback": False}, "mcp.unpaired": {"deadline_secs": 3}}


def connect_from(address, port):
    return socket.create_connection(("127.0.0.1", port), source_address=(address, 0), timeout=10)


def refused_line(sock):
    """The one line a refused TCP client gets before it is closed, or None
    when the connection was let in (nothing arrives within a moment)."""
    sock.settimeout(0.5)
    try:
        data = sock.recv(65536)
    except socket.timeout:
        return None
    return json.loads(data.split(b"\n", 1)[0]) if data else {"closed": True}


def closed_within(sock, seconds):
    sock.settimeout(seconds)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (socket.timeout, TimeoutError):
        return False
    except ConnectionResetError:
        return True


def test_one_host_cannot_lock_out_a_paired_agent(start_daemon):
    d = start_daemon(LIMITS)
    token = new_token(d, "agent")
    tcp_port, http_port = d.tcp[1], d.http[1]

    # 40 idle TCP connections from one host: 4 let in, 36 told why.
    idle = [connect_from("127.0.0.2", tcp_port) for _ in range(40)]
    answers = [refused_line(s) for s in idle]
    let_in = [s for s, a in zip(idle, answers) if a is None]
    refusals = [a for a in answers if a is not None]
    assert len(let_in) == 4 and len(refusals) == 36, answers
    assert refusals[0]["error"]["code"] == -32000
    assert "4 unpaired connections from 127.0.0.2 (mcp.unpaired.per_address)" in refusals[0]["error"]["message"]

    # 40 HTTP connections from another host that never finish their headers.
    slow = [connect_from("127.0.0.3", http_port) for _ in range(40)]
    for s in slow:
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
    busy = 0
    for s in slow:
        s.settimeout(0.5)
        try:
            if s.recv(65536).startswith(b"HTTP/1.1 503"):
                busy += 1
        except socket.timeout:
            pass
    assert busy == 36, busy

    # Meanwhile a paired agent on a third host: raw TCP and the SDK over HTTP.
    c = LineClient(connect_from("127.0.0.4", tcp_port), timeout=10)
    assert "result" in c.request("hark/auth", {"token": token}, id="a")
    c.initialize("agent")
    assert call(c, "get_status", {})["structuredContent"]["auth"]["as"] == "agent"

    async def sdk():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        url = f"http://127.0.0.1:{http_port}/mcp"
        async with http, Client(streamable_http_client(url, http_client=http), cache=None) as client:
            r = await client.call_tool("stop_speaking", {})
            return r.is_error

    assert anyio.run(sdk) is not True
    # And the appliance's own administrators.
    local = LineClient.unix(d)
    local.initialize("admin")
    assert call(local, "get_status", {})["structuredContent"]["auth"]["access"] == "trusted"
    local.close()

    # The idle and the slow ones are closed after the short deadline; the
    # paired agent, idle as long, is not.
    assert all(closed_within(s, 8) for s in let_in)
    assert all(closed_within(s, 8) for s in slow)
    assert call(c, "get_status", {}, id=5)["structuredContent"]["auth"]["as"] == "agent"
    c.close()
    # That host may connect again.
    again = connect_from("127.0.0.2", tcp_port)
    assert refused_line(again) is None
    for s in idle + slow + [again]:
        s.close()


def test_a_token_moves_a_connection_out_of_the_unpaired_budget(start_daemon):
    d = start_daemon(LIMITS)
    token = new_token(d, "busy-agent")
    paired = []
    for _ in range(6):
        c = LineClient(connect_from("127.0.0.5", d.tcp[1]), timeout=10)
        assert "result" in c.request("hark/auth", {"token": token}, id="a"), "let in and paired"
        paired.append(c)
    # Six paired connections from one address, and room for unpaired ones.
    extra = connect_from("127.0.0.5", d.tcp[1])
    assert refused_line(extra) is None
    extra.close()
    for c in paired:
        c.close()


def test_when_many_hosts_fill_the_budget_the_oldest_makes_way(start_daemon):
    d = start_daemon(dict(LIMITS, **{"mcp.unpaired": {"deadline_secs": 60, "max_connections": 6}}))
    first = connect_from("127.0.0.6", d.tcp[1])
    assert refused_line(first) is None
    rest = []
    for address in ["127.0.0.7", "127.0.0.8", "127.0.0.9"]:
        for _ in range(2):
            s = connect_from(address, d.tcp[1])
            rest.append(s)
    # The sixth filled the budget, the seventh made the oldest go.
    assert closed_within(first, 5)
    assert all(refused_line(s) is None for s in rest)
    for s in rest:
        s.close()


@pytest.mark.parametrize("key,value", [("per_address", 0), ("max_connections", 5000), ("deadline_secs", 0)])
def test_the_limits_are_checked(tmp_path, key, value):
    f = tmp_path / "hark.toml"
    f.write_text(f"[mcp.unpaired]\n{key} = {value}\n")
    r = subprocess.run([str(HARK), "config", "check", str(f)], capture_output=True, text=True)
    assert r.returncode != 0 and f"mcp.unpaired.{key}" in r.stderr, r.stderr
