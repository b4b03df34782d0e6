"""HTTPS and WSS, end to end: with `[mcp.https]` on, the appliance makes its
own certificate authority at first start (kept across restarts) and issues
itself a certificate for its names and addresses; the official Python SDK
trusting that CA calls tools over https://…/mcp with a token, WebSocket
clients use wss://, untrusting clients and wrong host names are refused,
and `hark pair` hands out the CA with its fingerprint. Loopback only, with
`trust_loopback = false` so the token is what lets the agent in."""

import hashlib
import json
import os
import socket
import ssl
import subprocess

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from websockets.sync.client import connect

from harness import HARK, Daemon, hark, new_token
from test_pairing import asking

HTTPS = {"auth": {"trust_loopback": False}, "mcp.https": {"enabled": True, "listen": "127.0.0.1:0"}}


def fingerprint(pem_path):
    der = ssl.PEM_cert_to_DER_cert(pem_path.read_text())
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def sdk_status(url, token, verify):
    async def main():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, verify=verify, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http), cache=None) as client:
            return (await client.call_tool("get_status", {})).structured_content
    return anyio.run(main)


def test_the_sdk_trusting_the_appliances_ca_talks_https(start_daemon, tmp_path):
    d = start_daemon(dict(HTTPS))
    ca = d.tmp / "state" / "tls" / "ca.pem"
    assert ca.is_file() and (os.stat(d.tmp / "state" / "tls" / "ca.key").st_mode & 0o777) == 0o600
    token = new_token(d, "secure-agent")
    port = d.https[1]
    trusted = ssl.create_default_context(cafile=str(ca))
    status = sdk_status(f"https://127.0.0.1:{port}/mcp", token, trusted)
    assert status["auth"]["as"] == "secure-agent"
    assert status["auth"]["https_ca_sha256"] == fingerprint(ca), "the fingerprint of the CA served"
    assert any(t["transport"] == "https" and t["address"].endswith(f":{port}") for t in status["transports"])
    # Without a token, over HTTPS as over HTTP: looking only.
    async def unpaired():
        http = httpx2.AsyncClient(verify=trusted, timeout=30)
        async with http, Client(streamable_http_client(f"https://127.0.0.1:{port}/mcp", http_client=http),
                                cache=None) as client:
            r = await client.call_tool("stop_speaking", {})
            return r.structured_content["error"]["type"]
    assert anyio.run(unpaired) == "NotPairedError"
    # The status page is served over HTTPS too, its cookie then Secure.
    page = httpx.get(f"https://127.0.0.1:{port}/", verify=trusted, timeout=10)
    assert page.status_code == 200 and "<title>Hark</title>" in page.text
    # localhost is one of its names too.
    assert sdk_status(f"https://localhost:{port}/mcp", token, trusted)["auth"]["as"] == "secure-agent"

    # A client that does not trust the CA is refused by its own TLS check.
    with pytest.raises(Exception) as refused:
        sdk_status(f"https://127.0.0.1:{port}/mcp", token, ssl.create_default_context())
    assert "CERTIFICATE_VERIFY_FAILED" in repr(refused.value) or "certificate" in repr(refused.value).lower()
    # A name the certificate is not for.
    raw = socket.create_connection(("127.0.0.1", port))
    with pytest.raises(ssl.SSLCertVerificationError):
        trusted.wrap_socket(raw, server_hostname="evil.example")
    # Plain HTTP on the TLS port gets nothing and harms nothing.
    plain = socket.create_connection(("127.0.0.1", port), timeout=5)
    plain.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert plain.recv(100)[:4] != b"HTTP"
    plain.close()

    # WSS: the same token on the upgrade.
    with connect(f"wss://127.0.0.1:{port}/mcp", ssl=trusted, subprotocols=["mcp"],
                 additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "ws", "version": "1"}}}))
        assert json.loads(ws.recv(timeout=10))["result"]["serverInfo"]["name"] == "hark"
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "get_status", "arguments": {}}}))
        reply = json.loads(ws.recv(timeout=10))
        assert reply["result"]["structuredContent"]["auth"]["as"] == "secure-agent"

    # The CA is kept across a restart; the new certificate chains to it.
    before = fingerprint(ca)
    assert d.stop() == 0
    again = Daemon(d.tmp, dict(HTTPS)).start()
    try:
        assert fingerprint(ca) == before
        status = sdk_status(f"https://127.0.0.1:{again.https[1]}/mcp", token, trusted)
        assert status["auth"]["https_ca_sha256"] == before
    finally:
        again.stop()


def test_pairing_hands_out_the_ca_and_its_fingerprint(start_daemon, tmp_path):
    d = start_daemon(dict(HTTPS))
    ca = d.tmp / "state" / "tls" / "ca.pem"
    home = tmp_path / "home"
    home.mkdir()
    p = subprocess.Popen([str(HARK), "pair", f"127.0.0.1:{d.tcp[1]}", "--name", "tls-agent"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=""))
    assert asking(d)
    hark(d, "button", "press")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    kept = home / ".config" / "hark" / f"127.0.0.1_{d.tcp[1]}-ca.pem"
    assert kept.read_text() == ca.read_text()
    assert fingerprint(ca) in out
    assert f"https://127.0.0.1:{d.https[1]}/mcp" in out and f"NODE_EXTRA_CA_CERTS={kept}" in out, out
    saved = json.loads((home / ".config" / "hark" / "tokens.json").read_text())["appliances"][f"127.0.0.1:{d.tcp[1]}"]
    assert saved["https_port"] == d.https[1] and saved["ca_sha256"] == fingerprint(ca)
    # What it printed works: the SDK trusting the kept file.
    token = saved["token"]
    status = sdk_status(f"https://127.0.0.1:{d.https[1]}/mcp", token,
                        ssl.create_default_context(cafile=str(kept)))
    assert status["auth"]["as"] == "tls-agent"


def test_a_broken_ca_key_leaves_https_off_and_the_rest_serving(start_daemon, tmp_path):
    d = start_daemon(dict(HTTPS))
    tmp = d.tmp
    assert d.stop() == 0
    (tmp / "state" / "tls" / "ca.key").write_text("not a key")
    again = Daemon(tmp, dict(HTTPS)).start()
    try:
        assert again.https is None
        assert "HTTPS is off" in again.log() and "move the tls directory aside" in again.log()
        out = subprocess.run([str(HARK), "--config", str(again.config_path), "status", "--json", "--host",
                              f"127.0.0.1:{again.tcp[1]}"], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
    finally:
        again.stop()
