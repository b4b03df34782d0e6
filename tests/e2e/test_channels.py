"""The person's messages pushed into agents' sessions as Claude Code channel
events (notifications/claude/channel), for the sessions that ask: over HTTP
with the X-Hark-Channel header (the TypeScript SDK, as Claude Code sends
its configured headers), and through `hark connect --channel` for stdio
clients. The person is a recorded LibriVox reading, spoken after a press
of the button."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time

from harness import (HARK, NODE_BIN, REPO, call, clip, client, heard, wait_for, words)
from test_conversation import person_says

SCRIPT = REPO / "tests" / "node" / "channel_client.mjs"


def session(daemon, name, seconds, header=None):
    args = [str(NODE_BIN / "node"), str(SCRIPT), daemon.url, name, str(seconds)]
    if header:
        args.append(header)
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=SCRIPT.parent)


def lines_of(proc):
    """Each JSON line the process prints, on a queue, as it prints it."""
    out = queue.Queue()

    def read():
        for line in proc.stdout:
            if line.strip():
                out.put(json.loads(line))
    threading.Thread(target=read, daemon=True).start()
    return out


def next_line(lines, timeout=30):
    return lines.get(timeout=timeout)


def test_the_persons_message_is_pushed_to_the_sessions_that_asked(start_daemon):
    d = start_daemon()
    wav, text = clip("ps-librivox-0880")
    asking = session(d, "claude-code", 30, "claude")
    plain = session(d, "plain-agent", 30)
    host, port = d.tcp
    bridge = subprocess.Popen([str(HARK), "connect", "--channel", "--name", "stdio-agent", f"{host}:{port}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bridged = lines_of(bridge)
    bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "some-stdio-client", "version": "1"}}}) + "\n")
    bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    bridge.stdin.flush()
    init = next_line(bridged)
    assert init["id"] == 0
    assert init["result"]["capabilities"]["experimental"]["claude/channel"] == {}, init
    asked, unasked = lines_of(asking), lines_of(plain)
    assert next_line(asked) == {"ready": True}
    assert next_line(unasked) == {"ready": True}
    wait_for(lambda: d.log().count("the person's messages will be pushed to this session") == 2, 10)

    person_says(d, wav)

    pushed = next_line(asked)
    assert pushed["notification"]["method"] == "notifications/claude/channel", pushed
    params = pushed["notification"]["params"]
    assert heard(params["content"], words(text)), params
    meta = params["meta"]
    assert meta["addressed_by"] == "anyone" and "addressed_to" not in meta, meta
    assert all(isinstance(v, str) for v in meta.values()), meta
    message_id = int(meta["message_id"])
    # The stdio client gets the same push, through the bridge.
    through_bridge = next_line(bridged)
    assert through_bridge["method"] == "notifications/claude/channel", through_bridge
    assert through_bridge["params"] == params

    # A push is not a delivery: the message waits in the inbox until an
    # agent takes it, and the one that takes it gets that very message.
    c = client(d, "claude-code")
    taken = call(c, "wait_for_person", {"timeout_seconds": 0})["structuredContent"]
    c.close()
    assert taken["received"] is True and taken["message"]["id"] == message_id, taken

    # The session that did not ask was sent nothing it does not know, and
    # was told, as every session is, that Hark offers the pushes.
    plain.wait(timeout=60)
    rest = next_line(unasked)
    assert "capabilities" in rest, rest
    assert rest["capabilities"]["experimental"]["claude/channel"] == {}, rest
    asking.wait(timeout=60)
    bridge.stdin.close()
    bridge.wait(timeout=10)


def test_a_session_without_the_listen_scope_gets_no_pushes(start_daemon):
    d = start_daemon()
    token = json.loads(subprocess.run(
        [str(HARK), "--config", str(d.config_path), "token", "create", "speaker-only", "--scopes", "speak",
         "--json"], capture_output=True, text=True, check=True).stdout)["token"]
    host, port = d.tcp
    # Over TCP from loopback the bridge is trusted; the token narrows it.
    bridge = subprocess.Popen([str(HARK), "connect", "--channel", "--token", token, f"{host}:{port}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "x", "version": "1"}}}) + "\n")
    bridge.stdin.flush()
    assert json.loads(bridge.stdout.readline())["id"] == 0
    wait_for(lambda: "channel pushes refused" in d.log(), 10)
    assert "will be pushed to this session" not in d.log()
    bridge.stdin.close()
    bridge.wait(timeout=10)
