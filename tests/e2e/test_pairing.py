"""Pairing by the button, end to end: `hark pair` on an agent's machine asks
the appliance, which says aloud who asks and from where while the pairing
light spins; a short press of the (simulated) button makes a token, which
`hark pair` keeps for `hark connect` and prints with the lines for the
usual clients (the Python one is run here with the official SDK). A long
press, or none, refuses; one pairing waits at a time; requests are counted
per address. The first test runs the agent in its own network namespace,
a host on the LAN; the others use loopback with `trust_loopback = false`."""

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from harness import HARK, Daemon, LineClient, call, hark, response, wait_for
from test_auth import other_host  # noqa: F401  (the fixture)

UNTRUSTED = {"auth": {"trust_loopback": False, "pair_timeout_secs": 5, "max_pair_requests": 4}}


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("hark-pair"), dict(UNTRUSTED)).start()
    yield d
    code = d.stop(timeout=15)
    assert code == 0, d.log()


def local_status(daemon):
    c = LineClient.unix(daemon, timeout=10)
    try:
        c.initialize("tester")
        return c.call_tool("get_status", id=2)["result"]["structuredContent"]
    finally:
        c.close()


def lights(daemon):
    board = local_status(daemon)["subsystems"]["board"]
    return board.split("lights: ", 1)[1].split(";", 1)[0]


def hark_said(daemon):
    """What Hark said in its own voice (agent null), newest first."""
    c = LineClient.unix(daemon, timeout=10)
    try:
        c.initialize("historian")
        rows = call(c, "list_captures", {"kind": "spoken", "limit": 50})["structuredContent"]["captures"]
        return [r["text"] for r in rows if r["agent"] is None]
    finally:
        c.close()


def tokens(daemon):
    return {t["name"]: t for t in json.loads(hark(daemon, "token", "list", "--json").stdout)["tokens"]}


def pair(daemon, *args, home, source=None, prefix=()):
    """Starts `hark pair` (in the background: it waits for the button)."""
    target = f"{source or '127.0.0.1'}:{daemon.tcp[1]}"
    return subprocess.Popen([*prefix, str(HARK), "pair", target, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=""))


def asking(daemon, timeout=20):
    return wait_for(lambda: lights(daemon) == "pairing"
                    and local_status(daemon)["floor"]["holder"] is not None, timeout)


def finished(proc, timeout=30):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def raw_pair(daemon, params, source="127.0.0.1"):
    """A pairing request over raw TCP from `source`; the connection, with the
    request sent."""
    s = socket.create_connection(daemon.tcp, source_address=(source, 0))
    c = LineClient(s, timeout=30)
    c.initialize("raw")
    c.send({"jsonrpc": "2.0", "id": "pair", "method": "hark/pair", "params": params})
    return c


def test_a_short_press_pairs_an_agent_on_another_host(start_daemon, other_host, tmp_path):  # noqa: F811
    ns, address = other_host
    d = start_daemon({"mcp.tcp": {"listen": "0.0.0.0:0"}, "mcp.http": {"listen": "0.0.0.0:0"}})
    in_ns = ["ip", "netns", "exec", ns]
    home = tmp_path / "laptop-home"
    home.mkdir()
    p = pair(d, "--name", "laptop", home=home, source=address, prefix=in_ns)
    assert asking(d), (lights(d), d.log())
    holder = local_status(d)["floor"]["holder"]
    assert (holder["who"], holder["tool"]) == ("hark", "pair"), holder
    # The agent's own address, said aloud: the namespace's end of the pair.
    spoken_address = (address.rsplit(".", 1)[0] + ".2").replace(".", " dot ")
    assert wait_for(lambda: any(f"An agent called laptop at {spoken_address} wants to use Hark" in t
                                for t in hark_said(d)), 30), hark_said(d)
    # A press answers the pairing; it records nothing for the inbox.
    hark(d, "button", "press")
    code, printed, err = finished(p)
    assert code == 0, (printed, err)
    assert "press its button" in err
    out = printed
    token = next(line.strip() for line in out.splitlines() if line.strip().startswith("hark_"))
    assert f"claude mcp add --transport http hark http://{address}:{d.http[1]}/mcp --header " \
           f"\"Authorization: Bearer {token}\"" in out, out
    assert "--header \"X-Hark-Channel: claude\"" in out, out
    assert "bearer_token_env_var = \"HARK_TOKEN\"" in out and "[mcp_servers.hark]" in out
    assert "tool_timeout_sec = 600" in out, out
    assert tokens(d)["laptop"]["scopes"] == ["listen", "speak"]
    assert wait_for(lambda: lights(d) == "idle", 10)
    status = local_status(d)
    assert status["floor"]["holder"] is None and status["messages_waiting"] == 0
    assert status["recording"] is False
    assert wait_for(lambda: "laptop is paired." in hark_said(d), 20), hark_said(d)

    # Kept for the hark commands, readable only by its owner.
    kept = home / ".config" / "hark" / "tokens.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert json.loads(kept.read_text())["appliances"][f"{address}:{d.tcp[1]}"]["token"] == token
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME="")
    env.pop("HARK_TOKEN", None)
    out = subprocess.run([*in_ns, str(HARK), "status", "--json", "--host", f"{address}:{d.tcp[1]}"],
                         capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["auth"]["as"] == "laptop"
    bridge = subprocess.Popen([*in_ns, str(HARK), "connect", f"{address}:{d.tcp[1]}"], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for m in [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                      "protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "Claude Desktop", "version": "1"}}},
                  {"jsonrpc": "2.0", "method": "notifications/initialized"},
                  {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "stop_speaking", "arguments": {}}}]:
            bridge.stdin.write(json.dumps(m) + "\n")
        bridge.stdin.flush()
        replies = {r["id"]: r for r in (json.loads(bridge.stdout.readline()) for _ in range(2))}
    finally:
        bridge.stdin.close()
        bridge.wait(10)
    assert replies[1]["result"].get("isError") is not True, replies

    # The printed Python lines, run as printed, with the official SDK.
    section = next(s for s in printed.split("\n\n") if s.startswith("Python"))
    snippet = textwrap.dedent("\n".join(section.splitlines()[1:]))
    program = "import anyio\nasync def main():\n" + textwrap.indent(snippet, "    ") + "\nanyio.run(main)\n"
    r = subprocess.run([*in_ns, sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (program, r.stderr)
    assert "'as': 'laptop'" in r.stdout and "'access': 'paired'" in r.stdout, r.stdout


def test_a_long_press_or_no_press_refuses(room, tmp_path):
    p = pair(room, "--name", "stranger", home=tmp_path)
    assert asking(room)
    hark(room, "button", "hold")
    time.sleep(1.2)
    hark(room, "button", "release")
    code, out, err = finished(p)
    assert code != 0 and "refused the pairing (a long press" in err, (out, err)
    assert "hark_" not in out
    assert "stranger" not in tokens(room)
    assert wait_for(lambda: lights(room) == "idle", 10)
    assert not (tmp_path / ".config" / "hark" / "tokens.json").exists()

    started = time.monotonic()
    p = pair(room, "--name", "nobody-home", home=tmp_path)
    code, out, err = finished(p, timeout=60)
    assert code != 0 and "nobody pressed the button within 5 s" in err, (out, err)
    assert time.monotonic() - started >= 5
    assert "nobody-home" not in tokens(room)
    assert wait_for(lambda: lights(room) == "idle", 10)


def test_one_pairing_waits_at_a_time_and_floods_are_limited(room, tmp_path):
    first = raw_pair(room, {"name": "first", "scopes": "listen,admin"}, source="127.0.0.2")
    assert asking(room)
    assert wait_for(lambda: any("An agent called first at this appliance" in t and "admin access" in t
                                for t in hark_said(room)), 30), hark_said(room)
    # While it waits: others are told who waits, and how long to wait.
    for i in range(4):
        c = raw_pair(room, {"name": f"second{i}"}, source="127.0.0.3")
        reply, _ = response(c, "pair")
        c.close()
        assert reply["error"]["code"] == -32001 and reply["error"]["data"]["reason"] == "pending", reply
        assert "`first` from 127.0.0.2" in reply["error"]["message"], reply
    # The fifth from that address in ten minutes: refused outright.
    c = raw_pair(room, {"name": "second4"}, source="127.0.0.3")
    reply, _ = response(c, "pair")
    c.close()
    assert reply["error"]["data"]["reason"] == "too_many", reply
    assert "at most 4 in 10 minutes" in reply["error"]["message"] and reply["error"]["data"]["retry_after_secs"] > 0
    # Another address is not held back by that flood.
    c = raw_pair(room, {"name": "third"}, source="127.0.0.4")
    reply, _ = response(c, "pair")
    c.close()
    assert reply["error"]["data"]["reason"] == "pending", reply

    # The asking agent leaves: the pairing ends, the light with it.
    first.close()
    assert wait_for(lambda: lights(room) == "idle", 10), lights(room)
    assert local_status(room)["floor"]["holder"] is None

    # Admin asked for and granted by a press.
    c = raw_pair(room, {"name": "ops", "scopes": "listen,speak,admin"}, source="127.0.0.4")
    assert asking(room)
    hark(room, "button", "press")
    reply, _ = response(c, "pair")
    c.close()
    result = reply["result"]
    assert result["name"] == "ops" and result["scopes"] == ["listen", "speak", "admin"]
    assert result["token"].startswith("hark_") and result["tcp_port"] == room.tcp[1]
    assert result["http_port"] == room.http[1] and result["replaced"] is False
    t = LineClient.tcp(room, timeout=10)
    t.request("hark/auth", {"token": result["token"]}, id="a")
    t.initialize("ops")
    assert not call(t, "list_captures", {"limit": 1})["isError"], "admin works"
    t.close()


def test_bad_pairing_requests_are_refused_clearly(room):
    for params, words in [
        ({"name": "x. Your bank called. Press the button"}, "cannot be paired"),
        ({"name": "a" * 40}, "1–32 letters"),
        ({"name": "ok", "scopes": "listen,fly"}, "fly"),
        ({"name": "ok", "colour": "red"}, "colour"),
        ({}, "name"),
    ]:
        c = raw_pair(room, params, source="127.0.0.5")
        reply, _ = response(c, "pair")
        c.close()
        assert reply["error"]["code"] == -32602 and words in reply["error"]["message"], (params, reply)
    # None of them asked the person.
    assert lights(room) != "pairing" and local_status(room)["floor"]["holder"] is None


def kept_tokens(home, appliances):
    """A tokens.json in `home` as `hark pair` writes it."""
    path = home / ".config" / "hark" / "tokens.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"appliances": {
        key: {"token": token, "name": "laptop", "scopes": ["listen", "speak"],
              "paired_at": "2026-12-01T12:00:00Z", "tcp_port": port, "http_port": 7341}
        for key, (token, port) in appliances.items()}}))
    path.chmod(0o600)
    return path


def cli(home, *args):
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME="")
    env.pop("HARK_TOKEN", None)
    return subprocess.run([str(HARK), *args], capture_output=True, text=True, timeout=60, env=env)


STRANGE = "hark_" + "x" * 43


def test_a_token_kept_for_the_hark_on_the_default_port_is_not_shown_to_another(start_daemon, tmp_path):
    # The person paired with the Hark installed on their laptop (127.0.0.1,
    # port 7340, in a file written before ports were part of the key); a
    # Hark started on another port of the same host never sees that token.
    d = start_daemon()
    home = tmp_path / "home"
    kept_tokens(home, {"127.0.0.1": (STRANGE, 7340)})
    target = f"127.0.0.1:{d.tcp[1]}"
    r = cli(home, "status", "--json", "--host", target)
    assert r.returncode == 0, r.stderr
    assert "refused" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["auth"]["access"] != "paired"
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME="")
    bridge = subprocess.Popen([str(HARK), "connect", target], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bridge", "version": "1"}}}) + "\n")
        bridge.stdin.flush()
        answer = json.loads(bridge.stdout.readline())
    finally:
        bridge.stdin.close()
        bridge.wait(10)
    assert answer["result"]["serverInfo"], answer
    assert "refused" not in bridge.stderr.read()


def test_a_kept_token_the_appliance_refuses_is_said_and_left_out(start_daemon, room, tmp_path):
    d = start_daemon()
    home = tmp_path / "home"
    kept = kept_tokens(home, {f"127.0.0.1:{d.tcp[1]}": (STRANGE, d.tcp[1]),
                              f"127.0.0.1:{room.tcp[1]}": (STRANGE, room.tcp[1])})
    # An appliance that needs no token here answers, and the person is told
    # why their kept token was not used.
    r = cli(home, "status", "--json", "--host", f"127.0.0.1:{d.tcp[1]}")
    assert r.returncode == 0, r.stderr
    assert f"refused the token kept for it in {kept}" in r.stderr, r.stderr
    assert "not one this appliance issued" in r.stderr, r.stderr
    # One that needs a token refuses the call itself, after the same word.
    r = cli(home, "say", "--host", f"127.0.0.1:{room.tcp[1]}", "Hello.")
    assert r.returncode != 0, r.stdout
    assert "refused the token kept for it" in r.stderr, r.stderr
    assert "not paired" in r.stderr, r.stderr
    # A token asked for on the command line must be accepted.
    r = cli(home, "--token", STRANGE, "status", "--json", "--host", f"127.0.0.1:{d.tcp[1]}")
    assert r.returncode != 0 and "the token was refused" in r.stderr, (r.stdout, r.stderr)
