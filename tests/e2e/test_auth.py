"""Trust on the LAN, end to end: unpaired clients may look but not listen or
speak; tokens (made with `hark token`) grant their scopes over raw TCP,
Streamable HTTP (the official SDK sending the header), WebSocket and the
script endpoints; revoking one ends its access everywhere, calls in flight
included; failed attempts lock an address out; open mode says so. Most of
it runs on loopback with `auth.trust_loopback = false`; the last test puts
the agent on another host: a network namespace joined by a veth pair."""

import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from harness import (HARK, TOOLS, Daemon, LineClient, call, hark, in_thread, new_token, response,
                     status_of, wait_for)

HERE = os.path.dirname(os.path.abspath(__file__))
UNTRUSTED = {"auth": {"trust_loopback": False}}
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "Claude Desktop", "version": "1"}}


@pytest.fixture(scope="module")
def lan(tmp_path_factory):
    """A daemon that trusts no one but its Unix socket: loopback clients
    stand for hosts on the LAN."""
    d = Daemon(tmp_path_factory.mktemp("hark-auth"), dict(UNTRUSTED)).start()
    yield d
    code = d.stop(timeout=15)
    assert code == 0, d.log()


def error_of(result):
    assert result["isError"] is True, result
    return result["structuredContent"]["error"]


def tcp(daemon, token=None, name="Claude Desktop"):
    c = LineClient.tcp(daemon, timeout=30)
    if token:
        reply = c.request("hark/auth", {"token": token}, id="auth")
        assert "result" in reply, reply
    c.initialize(name)
    return c


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def post(daemon, message, headers=None, **kw):
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    h.update(headers or {})
    return httpx.post(daemon.url, json=message, headers=h, timeout=10, **kw)


INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}

# One call per scope, cheap and harmless when allowed.
PROBES = [
    ("wait_for_person", {"timeout_seconds": 0}, "listen"),
    ("stop_speaking", {}, "speak"),
    ("transcribe_audio", {"audio_path": "/nonexistent/a.wav"}, "files"),
    ("list_captures", {"limit": 1}, "admin"),
]


def refused(result):
    return result.get("isError") is True and result["structuredContent"]["error"]["type"] in (
        "NotPairedError", "PermissionDeniedError")


def test_an_unpaired_client_may_look_but_not_listen_or_speak(lan):
    c = tcp(lan)
    try:
        tools = c.request("tools/list", {}, id=2)["result"]["tools"]
        assert [t["name"] for t in tools] == TOOLS
        s = status_of(c)
        assert s["auth"]["mode"] == "paired"
        assert s["auth"]["access"] == "unpaired"
        assert s["auth"]["scopes"] == []
        assert "hark token create" in s["auth"]["how_to_pair"]
        assert [x["access"] for x in s["clients"] if x["name"] == "Claude Desktop"] == ["unpaired"]
        for i, (tool, args, scope) in enumerate(PROBES + [("speak_text", {"text": "Hello"}, "speak"),
                                                          ("set_volume", {"volume": 5}, "admin")]):
            e = error_of(call(c, tool, args, id=10 + i))
            assert e["type"] == "NotPairedError", (tool, e)
            assert e["context"] == {"tool": tool, "scope": scope}
            assert "not paired" in e["message"] and "Authorization: Bearer" in e["message"], e
        # The inbox resource is the microphone's too.
        r = c.request("resources/read", {"uri": "hark://inbox"}, id=30)
        assert r["error"]["code"] == -32001 and "not paired" in r["error"]["message"], r
        # Nothing was said or heard, and the volume is as it was.
        s = status_of(c, id=31)
        assert not s["speaking"] and not s["recording"]
        assert s["volume"] != 5
    finally:
        c.close()


def test_a_token_over_raw_tcp_grants_its_scopes_and_names_the_agent(lan):
    token = new_token(lan, "claude")
    c = tcp(lan, token)  # hark/auth before initialize
    try:
        s = status_of(c)
        assert (s["auth"]["access"], s["auth"]["as"], s["auth"]["scopes"]) == ("paired", "claude", ["listen", "speak"])
        # The token's name, not the clientInfo name it initialized with.
        assert "claude" in [x["name"] for x in s["clients"]]
        assert "Claude Desktop" not in [x["name"] for x in s["clients"]]
        results = {tool: call(c, tool, args, id=40 + i) for i, (tool, args, _) in enumerate(PROBES)}
        assert not refused(results["wait_for_person"]), results
        assert results["wait_for_person"]["structuredContent"]["received"] is False
        assert not refused(results["stop_speaking"]), results
        files = error_of(results["transcribe_audio"])
        assert files["type"] == "PermissionDeniedError", files
        assert "--scopes listen,speak,files" in files["message"], files
        assert error_of(results["list_captures"])["type"] == "PermissionDeniedError"
    finally:
        c.close()

    # The token in initialize's _meta does the same, for socat-style clients.
    c = LineClient.tcp(lan, timeout=10)
    try:
        reply = c.request("initialize", dict(INIT, _meta={"hark/token": token}), id=0)
        assert reply["result"]["serverInfo"]["name"] == "hark"
        assert status_of(c)["auth"]["as"] == "claude"
    finally:
        c.close()


def test_bad_tokens_on_raw_tcp_are_refused_and_the_connection_carries_on(lan):
    c = LineClient.tcp(lan, timeout=10)
    try:
        cases = [("hark_" + "A" * 43, "not one this appliance issued"),
                 ("sk-proj-123", "malformed"),
                 ("", "malformed")]
        for i, (bad, why) in enumerate(cases):
            r = c.request("hark/auth", {"token": bad}, id=i)
            assert r["error"]["code"] == -32001 and why in r["error"]["message"], r
            assert "hark_" + "A" * 43 not in r["error"]["message"]
        r = c.request("hark/auth", {"tok": "x"}, id=9)
        assert r["error"]["code"] == -32602 and "token" in r["error"]["message"], r
        # A request carrying a bad token is not carried out; the next one is.
        c.send({"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": dict(INIT, _meta={"hark/token": "hark_x"})})
        r, _ = response(c, 10)
        assert r["error"]["code"] == -32001, r
        c.initialize()
        assert status_of(c)["auth"]["access"] == "unpaired"
    finally:
        c.close()


def test_the_sdk_over_http_sends_the_header(lan):
    token = new_token(lan, "cursor", scopes="listen,speak,files")

    async def main(mode, headers):
        http = httpx2.AsyncClient(headers=headers, timeout=30)
        async with http, Client(streamable_http_client(lan.url, http_client=http), mode=mode, cache=None) as client:
            status = (await client.call_tool("get_status", {})).structured_content
            results = {}
            for tool, args, _ in PROBES:
                r = await client.call_tool(tool, args)
                results[tool] = (r.is_error, (r.structured_content or {}).get("error", {}).get("type"))
            return status, results

    for mode in ["legacy", "2026-07-28"]:
        status, results = anyio.run(main, mode, bearer(token))
        assert (status["auth"]["access"], status["auth"]["as"]) == ("paired", "cursor"), status
        assert results["wait_for_person"][0] is not True, results
        assert results["stop_speaking"][0] is not True, results
        # files is granted: the call gets as far as checking the path.
        assert results["transcribe_audio"] == (True, "PathNotAllowedError"), results
        assert results["list_captures"] == (True, "PermissionDeniedError"), results
        status, results = anyio.run(main, mode, {})
        assert status["auth"]["access"] == "unpaired"
        assert set(results.values()) == {(True, "NotPairedError")}, results


def test_http_refuses_bad_credentials_with_401_and_no_oauth(lan):
    token = new_token(lan, "http-agent")
    cases = [
        (bearer("hark_" + "B" * 43), "invalid_token", "not one this appliance issued"),
        (bearer("not-a-token"), "invalid_token", "malformed"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "invalid_request", "`Basic`"),
    ]
    for headers, error, why in cases:
        r = post(lan, INITIALIZE, headers)
        assert r.status_code == 401, (headers, r.status_code, r.text)
        challenge = r.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and f'error="{error}"' in challenge, challenge
        assert why in r.text, r.text
    # Two Authorization headers are refused too.
    r = httpx.post(lan.url, json=INITIALIZE, timeout=10, headers=[
        ("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
        ("authorization", f"Bearer {token}"), ("authorization", f"Bearer {token}")])
    assert r.status_code == 401 and "one Authorization header" in r.text
    # A token in a URL is refused before anything else looks at it.
    host, port = lan.http
    for url in [f"{lan.url}?token={token}", f"http://{host}:{port}/events?t={token}"]:
        r = httpx.get(url, timeout=10)
        assert r.status_code == 400 and "not take tokens in URLs" in r.text, (url, r.text)
        assert token not in r.text
    # No OAuth metadata: a client keeps the header it was given.
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server",
                 "/.well-known/oauth-protected-resource/mcp"]:
        assert httpx.get(f"http://{host}:{port}{path}", timeout=10).status_code == 404
    # The good token is accepted on the same endpoint.
    r = post(lan, INITIALIZE, bearer(token))
    assert r.status_code == 200, r.text


def test_script_endpoints_need_their_scope(lan):
    host, port = lan.http
    base = f"http://{host}:{port}"
    listener = new_token(lan, "listener", scopes="listen")
    speaker = new_token(lan, "speaker", scopes="speak")
    with httpx.Client(timeout=10) as h:
        r = h.get(f"{base}/events")
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer"), r.text
        assert "not paired" in r.text
        r = h.post(f"{base}/speak", json={"text": "Hello"})
        assert r.status_code == 401
        r = h.post(f"{base}/speak", json={"text": "Hello"}, headers=bearer(listener))
        assert r.status_code == 403 and "`listener` may listen, not POST /speak" in r.text, r.text
        r = h.get(f"{base}/events", headers=bearer(speaker))
        assert r.status_code == 403, r.text
        with h.stream("GET", f"{base}/events", headers=bearer(listener)) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
        # The speaker is the token's name, whatever X-Hark-Client says.
        r = h.post(f"{base}/speak", json={"text": "The kettle has boiled."},
                   headers={**bearer(speaker), "X-Hark-Client": "impostor"})
        assert r.status_code == 202, r.text
    local = LineClient.unix(lan, timeout=30)
    try:
        local.initialize("owner")

        def spoken():
            rows = call(local, "list_captures", {"limit": 20})["structuredContent"]["captures"]
            return [(row["agent"], row["text"]) for row in rows if row["kind"] == "spoken"]

        assert wait_for(lambda: ("speaker", "The kettle has boiled.") in spoken(), 30), spoken()
        assert "impostor" not in [agent for agent, _ in spoken()]
    finally:
        local.close()


def test_websocket_takes_the_token_on_the_upgrade_or_in_a_message(lan):
    token = new_token(lan, "ws-agent")

    def rpc(sock, id, method, params):
        sock.send(json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        while True:
            m = json.loads(sock.recv(timeout=10))
            if m.get("id") == id:
                return m

    def probe(sock):
        rpc(sock, 0, "initialize", INIT)
        s = rpc(sock, 1, "tools/call", {"name": "get_status", "arguments": {}})["result"]["structuredContent"]
        r = rpc(sock, 2, "tools/call", {"name": "stop_speaking", "arguments": {}})["result"]
        return s["auth"], r

    with connect(lan.ws_url, subprotocols=["mcp"], additional_headers=bearer(token)) as sock:
        auth, r = probe(sock)
        assert (auth["access"], auth["as"]) == ("paired", "ws-agent")
        assert not refused(r), r
    with connect(lan.ws_url, subprotocols=["mcp"]) as sock:
        auth, r = probe(sock)
        assert auth["access"] == "unpaired" and error_of(r)["type"] == "NotPairedError"
        assert "result" in rpc(sock, 3, "hark/auth", {"token": token})
        r = rpc(sock, 4, "tools/call", {"name": "stop_speaking", "arguments": {}})["result"]
        assert not refused(r), r
    with pytest.raises(InvalidStatus) as refused_upgrade:
        connect(lan.ws_url, subprotocols=["mcp"], additional_headers=bearer("hark_" + "C" * 43))
    assert refused_upgrade.value.response.status_code == 401


def test_revoking_a_token_ends_its_access_everywhere(lan):
    token = new_token(lan, "revokee")
    stack = contextlib.ExitStack()
    stream = tcp(lan, token)
    waiting = tcp(lan, token)
    try:
        ws = stack.enter_context(connect(lan.ws_url, subprotocols=["mcp"], additional_headers=bearer(token)))
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}))
        json.loads(ws.recv(timeout=10))
        t, out = in_thread(call, waiting, "wait_for_person", {"timeout_seconds": 120}, 7)
        assert wait_for(lambda: any(x["name"] == "revokee" and "waiting for the person" in x["doing"]
                                    for x in status_of(stream, id=70)["clients"]), 10)
        listed = json.loads(hark(lan, "token", "list", "--json").stdout)["tokens"]
        assert "revokee" in [x["name"] for x in listed]
        out_text = hark(lan, "token", "revoke", "revokee").stdout
        assert "revoked `revokee`" in out_text
        # The call in flight ends, saying why.
        t.join(10)
        assert not t.is_alive() and "error" not in out, out
        e = error_of(out["value"])
        assert e["type"] == "NotPairedError" and "revoked during this call" in e["message"], e
        # Every transport refuses it from the next request on.
        assert error_of(call(stream, "stop_speaking", {}, id=71))["type"] == "NotPairedError"
        assert status_of(stream, id=72)["auth"]["access"] == "unpaired"
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": "stop_speaking", "arguments": {}}}))
        assert json.loads(ws.recv(timeout=10))["result"]["structuredContent"]["error"]["type"] == "NotPairedError"
        r = post(lan, INITIALIZE, bearer(token))
        assert r.status_code == 401 and "`revokee` was revoked on" in r.text, r.text
        r = stream.request("hark/auth", {"token": token}, id=73)
        assert "was revoked" in r["error"]["message"], r
        listed = json.loads(hark(lan, "token", "list", "--json").stdout)["tokens"]
        assert "revokee" not in [x["name"] for x in listed]
        # Revoking it again names the problem.
        again = subprocess.run([str(HARK), "--config", str(lan.config_path), "token", "revoke", "revokee"],
                               capture_output=True, text=True, timeout=30)
        assert again.returncode != 0 and "no token called `revokee`" in again.stderr, again.stderr
    finally:
        stack.close()
        stream.close()
        waiting.close()


def test_token_commands_check_what_they_are_given(lan):
    def fails(*args):
        r = subprocess.run([str(HARK), "--config", str(lan.config_path), "token", *args],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0, (args, r.stdout)
        return r.stderr

    new_token(lan, "twice")
    assert "a token called `twice` exists" in fails("create", "twice")
    assert "unknown scope `root`" in fails("create", "x", "--scopes", "listen,root")
    assert "a token name is" in fails("create", "../etc")
    # --replace revokes the old one in the same step.
    old = json.loads(hark(lan, "token", "list", "--json").stdout)["tokens"]
    new = new_token(lan, "twice", scopes="all", replace=True)
    c = tcp(lan, new)
    try:
        assert status_of(c)["auth"]["scopes"] == ["listen", "speak", "files", "admin"]
        # admin: the volume, and the tokens themselves over the network.
        assert not refused(call(c, "set_volume", {"volume": 80}, id=3))
        r = c.request("hark/tokens", {"action": "list"}, id=4)
        assert "twice" in [x["name"] for x in r["result"]["tokens"]]
    finally:
        c.close()
    assert len(json.loads(hark(lan, "token", "list", "--json").stdout)["tokens"]) == len(old)
    # Without admin, the tokens are out of reach.
    c = tcp(lan, new_token(lan, "plain"))
    try:
        r = c.request("hark/tokens", {"action": "create", "name": "sneaky"}, id=5)
        assert r["error"]["code"] == -32001 and "admin" in r["error"]["message"], r
    finally:
        c.close()
    # The table a person reads.
    table = hark(lan, "token", "list").stdout
    assert table.splitlines()[0].split() == ["NAME", "SCOPES", "CREATED", "LAST", "USED"]
    assert any(line.startswith("twice ") and "listen,speak,files,admin" in line for line in table.splitlines())


def test_tokens_last_across_restarts_and_are_kept_only_as_hashes(start_daemon):
    d = start_daemon(dict(UNTRUSTED))
    token = new_token(d, "keeper")
    c = tcp(d, token)
    c.close()
    assert d.stop() == 0
    db = d.tmp / "state" / "tokens.sqlite3"
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT name, hash, scopes FROM tokens").fetchall()
    assert rows == [("keeper", hashlib.sha256(token.encode()).hexdigest(), "listen,speak")]
    assert token[5:].encode() not in db.read_bytes()
    again = Daemon(d.tmp, dict(UNTRUSTED)).start()
    try:
        c = tcp(again, token)
        assert status_of(c)["auth"]["as"] == "keeper"
        c.close()
        listed = json.loads(hark(again, "token", "list", "--json").stdout)["tokens"]
        assert listed[0]["last_address"] == "127.0.0.1" and listed[0]["last_used"], listed
    finally:
        assert again.stop() == 0


def test_failed_attempts_lock_out_one_address_not_the_others(start_daemon):
    d = start_daemon({"auth": {"trust_loopback": False, "max_failures": 3}})
    token = new_token(d, "good")
    # Loopback has many addresses: 127.0.0.3 plays the guesser.
    guesser = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3"), timeout=10)
    with guesser:
        for i in range(3):
            r = guesser.post(d.url, json=INITIALIZE, headers={
                "content-type": "application/json", "accept": "application/json, text/event-stream",
                **bearer("hark_" + chr(ord("a") + i) * 43)})
            assert r.status_code == 401, r.text
        r = guesser.post(d.url, json=INITIALIZE, headers={
            "content-type": "application/json", "accept": "application/json, text/event-stream", **bearer(token)})
        assert r.status_code == 429 and "too many failed token attempts" in r.text, r.text
        assert 1 <= int(r.headers["retry-after"]) <= 60
    # Raw TCP from the same address is locked out too.
    s = socket.create_connection(d.tcp, source_address=("127.0.0.3", 0))
    c = LineClient(s, timeout=10)
    r = c.request("hark/auth", {"token": token}, id=1)
    assert "too many failed token attempts" in r["error"]["message"], r
    c.close()
    # Everyone else is served as usual.
    assert post(d, INITIALIZE, bearer(token)).status_code == 200
    c = tcp(d, token)
    assert status_of(c)["auth"]["as"] == "good"
    c.close()


def test_open_mode_trusts_everyone_and_says_so(start_daemon):
    d = start_daemon({"auth": {"mode": "open", "trust_loopback": False}})
    c = tcp(d)
    try:
        s = status_of(c)
        assert s["auth"]["mode"] == "open" and s["auth"]["access"] == "trusted"
        assert "every host on the network" in s["auth"]["warning"]
        assert not refused(call(c, "stop_speaking", {}, id=3))
    finally:
        c.close()
    assert "every host on the network may use the microphone" in d.log()


# ---- another host on the LAN ----------------------------------------------------

LAN_CLIENT = textwrap.dedent("""
    import json, socket, sys
    sys.path.insert(0, sys.argv[1])
    from harness import LineClient
    host, port, token = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    c = LineClient(socket.create_connection((host, port)), timeout=30)
    if token:
        c.request("hark/auth", {"token": token}, id="auth")
    c.initialize("lan-agent")
    status = c.call_tool("get_status", id=2)["result"]["structuredContent"]
    stop = c.call_tool("stop_speaking", id=3)["result"]
    print(json.dumps({"auth": status["auth"], "stop": stop}))
""")


def veth_names():
    """The veth pair `other_host` makes: this side, the other host's side."""
    n = os.getpid() % 10000
    return f"hkl{n}a", f"hkl{n}b"


@pytest.fixture
def other_host():
    """A network namespace joined to this one by a veth pair: a second host
    on a private /24 made for the test and removed after it."""
    n = os.getpid() % 10000
    ns, here, there = f"hark-lan-{n}", *veth_names()
    # One subnet per process (the end-to-end tests run in two at once).
    subnet = f"10.{200 + n // 250 % 50}.{n % 250}"
    steps = [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", here, "type", "veth", "peer", "name", there],
        ["ip", "link", "set", there, "netns", ns],
        ["ip", "addr", "add", f"{subnet}.1/24", "dev", here],
        ["ip", "link", "set", here, "up"],
        ["ip", "netns", "exec", ns, "ip", "addr", "add", f"{subnet}.2/24", "dev", there],
        ["ip", "netns", "exec", ns, "ip", "link", "set", there, "up"],
        ["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"],
    ]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True, text=True)
        yield ns, f"{subnet}.1"
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_a_host_on_the_lan_needs_a_token_while_the_appliance_itself_is_trusted(start_daemon, other_host):
    ns, address = other_host
    # The defaults: loopback trusted. Listening on every interface.
    d = start_daemon({"mcp.tcp": {"listen": "0.0.0.0:0"}, "mcp.http": {"listen": "0.0.0.0:0"}})
    tcp_port, http_port = d.tcp[1], d.http[1]

    def from_lan(token=""):
        r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", LAN_CLIENT, HERE, address,
                            str(tcp_port), token], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    seen = from_lan()
    assert seen["auth"]["access"] == "unpaired"
    assert seen["stop"]["structuredContent"]["error"]["type"] == "NotPairedError"
    # On the appliance itself, loopback is trusted.
    c = LineClient(socket.create_connection(("127.0.0.1", tcp_port)), timeout=10)
    c.initialize()
    assert status_of(c)["auth"]["as"] == "loopback"
    c.close()

    token = new_token(d, "lan-agent")
    seen = from_lan(token)
    assert (seen["auth"]["access"], seen["auth"]["as"]) == ("paired", "lan-agent")
    assert seen["stop"].get("isError") is not True, seen

    # `hark connect` and `hark status` from the other host, with the token.
    bridge = subprocess.Popen(
        ["ip", "netns", "exec", ns, str(HARK), "connect", f"{address}:{tcp_port}", "--token", token],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for m in [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                  {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_status", "arguments": {}}}]:
            bridge.stdin.write(json.dumps(m) + "\n")
        bridge.stdin.flush()
        replies = [json.loads(bridge.stdout.readline()) for _ in range(2)]
    finally:
        bridge.stdin.close()
        bridge.wait(10)
    status = next(r for r in replies if r.get("id") == 1)["result"]["structuredContent"]
    assert status["auth"]["as"] == "lan-agent", replies
    out = subprocess.run(["ip", "netns", "exec", ns, str(HARK), "status", "--json", "--host",
                          f"{address}:{tcp_port}"], capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, HARK_TOKEN=token))
    assert out.returncode == 0 and json.loads(out.stdout)["auth"]["as"] == "lan-agent", out.stderr
    bad = subprocess.run(["ip", "netns", "exec", ns, str(HARK), "status", "--host", f"{address}:{tcp_port}",
                          "--token", "hark_" + "D" * 43], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "the token was refused" in bad.stderr, bad.stderr

    # The SDK over HTTP from the other host, with and without the header.
    sdk = textwrap.dedent("""
        import sys, anyio, httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        async def main():
            headers = {"Authorization": "Bearer " + sys.argv[2]} if sys.argv[2] else {}
            http = httpx2.AsyncClient(headers=headers, timeout=30)
            async with http, Client(streamable_http_client(sys.argv[1], http_client=http), cache=None) as c:
                r = await c.call_tool("stop_speaking", {})
                print("refused" if r.is_error else "allowed")
        anyio.run(main)
    """)
    url = f"http://{address}:{http_port}/mcp"
    for token_given, expected in [(token, "allowed"), ("", "refused")]:
        r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", sdk, url, token_given],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == expected, (token_given, r.stdout, r.stderr)
