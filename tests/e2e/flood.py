"""A flood of connections that never present a token, and a paired agent
that must still be served: the pieces of `test_budget.py`, usable in the
test's process and, as a script, from another network namespace.

    python flood.py flood HOST TCP HTTP HTTPS SOURCE
        opens the flood from SOURCE, prints "ready", holds it until stdin
        closes, then prints how many of its connections were closed
    python flood.py agent TRANSPORT HOST PORT TOKEN CA SOURCE
        one paired agent's get_status from SOURCE; prints
        {"seconds": …, "as": …}
"""

import json
import socket
import ssl
import sys
import time

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from websockets.sync.client import connect as ws_connect

from harness import LineClient

EACH = 40
# The start of a request head that never ends, and of a TLS ClientHello
# whose record claims 512 bytes and never delivers them.
SLOW_HTTP = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
SLOW_TLS = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"


def connect_from(source, host, port, timeout=10):
    return socket.create_connection((host, port), source_address=(source, 0), timeout=timeout)


def flood(host, tcp, http, https, source):
    """EACH idle TCP connections, EACH HTTP requests that never finish their
    head and EACH TLS handshakes that never finish, all from `source`."""
    socks = [connect_from(source, host, tcp) for _ in range(EACH)]
    for port, start in [(http, SLOW_HTTP), (https, SLOW_TLS)]:
        for _ in range(EACH):
            s = connect_from(source, host, port)
            s.sendall(start)
            socks.append(s)
    return socks


def closed(sock):
    """Whether the appliance closed `sock` (a 503 or an error line counts
    as not closed: those are refusals, which fair admission never gives)."""
    sock.settimeout(0.2)
    try:
        return sock.recv(65536) == b""
    except (socket.timeout, TimeoutError):
        return False
    except ConnectionResetError:
        return True


def tls_context(ca):
    context = ssl.create_default_context(cafile=ca)
    # The appliance's certificate names its own addresses as it saw them at
    # start; a namespace's address may not be among them. The chain is
    # still checked.
    context.check_hostname = False
    return context


def agent(transport, host, port, token, ca, source):
    """A paired agent's get_status over `transport` from `source`: what it
    saw and how long it took from its first connection."""
    bearer = {"Authorization": f"Bearer {token}"}
    started = time.monotonic()
    if transport == "tcp":
        c = LineClient(connect_from(source, host, port), timeout=10)
        c.request("hark/auth", {"token": token}, id="a")
        c.initialize("agent")
        status = c.call_tool("get_status", id=2)["result"]["structuredContent"]
        c.close()
    elif transport in ("http", "https"):
        verify = tls_context(ca) if transport == "https" else True
        scheme = transport

        async def sdk():
            wire = httpx2.AsyncHTTPTransport(local_address=source, verify=verify)
            http = httpx2.AsyncClient(headers=bearer, transport=wire, timeout=10)
            url = f"{scheme}://{host}:{port}/mcp"
            async with http, Client(streamable_http_client(url, http_client=http), cache=None) as client:
                return (await client.call_tool("get_status", {})).structured_content

        status = anyio.run(sdk)
    else:
        secure = transport == "wss"
        with ws_connect(f"{transport}://{host}:{port}/mcp", sock=connect_from(source, host, port),
                        ssl=tls_context(ca) if secure else None, subprotocols=["mcp"],
                        additional_headers=bearer, open_timeout=10) as ws:
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "agent", "version": "1"}}}))
            ws.recv(timeout=10)
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                "params": {"name": "get_status", "arguments": {}}}))
            status = json.loads(ws.recv(timeout=10))["result"]["structuredContent"]
    return {"seconds": time.monotonic() - started, "as": status["auth"]["as"]}


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "flood":
        host, tcp, http, https, source = rest
        socks = flood(host, int(tcp), int(http), int(https), source)
        print("ready", flush=True)
        sys.stdin.read()
        print(sum(closed(s) for s in socks), flush=True)
    else:
        transport, host, port, token, ca, source = rest
        print(json.dumps(agent(transport, host, int(port), token, ca, source)), flush=True)
