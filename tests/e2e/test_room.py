"""Several agents, one room, end to end: the floor (one listen at a time, a
fair queue, the person first), queued speech with priorities, who is
speaking, the history, and the HTTP surface for scripts (GET /events,
POST /speak). The real binary, the virtual sound card, the simulated board,
real SDK clients."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import wave

import anyio
import httpx
import pytest
from mcp import Client
from mcp.types import Implementation

from harness import (HARK, Daemon, LineClient, after_the_chime, call, client, hark, heard,
                     in_thread, response, seconds, speak, status, status_of, wait_for, words)

AGENTS = {
    "agents.alpha": {"earcon": "high"},
    "agents.beta": {"voice": "espeak:en-us", "earcon": "low"},
    "agents.gamma": {"rate": 2.0},
}


def joined(t, out, timeout=90):
    t.join(timeout)
    assert not t.is_alive(), "the call returned"
    assert "error" not in out, out
    return out["value"]


def hang_up(c):
    """The client leaves: shut the socket down (a plain close would wait for
    the thread blocked reading it)."""
    try:
        c.sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    c.close()


def microphone_open(daemon):
    """The microphone is open and the chime is over: a person would speak."""
    s = status(daemon)
    return s["recording"] and not s["speaking"]


class Events:
    """A GET /events client, collecting the events in a thread."""

    def __init__(self, daemon):
        self.events, self.stop = [], False
        self.response = None
        self.thread = threading.Thread(target=self.read, args=(daemon.http,), daemon=True)
        self.thread.start()
        assert wait_for(lambda: self.response is not None, 10)

    def read(self, http):
        try:
            self.stream(http)
        except httpx.HTTPError:
            # The daemon stopped (or dropped this reader): the stream ends.
            pass

    def stream(self, http):
        host, port = http
        with httpx.Client(timeout=None) as h:
            with h.stream("GET", f"http://{host}:{port}/events") as r:
                self.response = r
                name = None
                for line in r.iter_lines():
                    if self.stop:
                        return
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: "):
                        data = json.loads(line[6:])
                        assert data["event"] == name, (name, data)
                        self.events.append(data)

    def of(self, *names):
        return [e for e in self.events if e["event"] in names]


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("hark-room"), dict(AGENTS)).start()
    yield d
    code = d.stop(timeout=15)
    assert code == 0, d.log()


# ---- the floor -------------------------------------------------------------------


def test_two_sdk_clients_listen_in_turn(room, tmp_path):
    first = speak(tmp_path, "first", "What is the weather going to be like tomorrow morning?")
    second = speak(tmp_path, "second", "The meeting has been moved to Thursday afternoon.")

    async def main():
        async with Client(room.url, mode="legacy", cache=None,
                          client_info=Implementation(name="alpha", version="1")) as alpha, \
                Client(room.url, mode="2026-07-28", cache=None,
                       client_info=Implementation(name="beta", version="1")) as beta:
            results = {}

            async def listen(name, agent):
                results[name] = await agent.call_tool("transcribe_voice", {"timeout_seconds": 60})

            async def person():
                # One holds the microphone, the other waits its turn.
                await anyio.to_thread.run_sync(lambda: wait_for(
                    lambda: len(status(room)["floor"]["queue"]) == 1, 20))
                floor = status(room)["floor"]
                assert floor["holder"]["tool"] == "transcribe_voice"
                assert {floor["holder"]["who"], floor["queue"][0]["who"]} == {"alpha", "beta"}, floor
                clients = [(c["name"], c["doing"]) for c in status(room)["clients"]]
                assert (floor["holder"]["who"], "listening") in clients, clients
                assert (floor["queue"][0]["who"], "waiting for the microphone") in clients, clients
                # A third that will not wait is told at once who has it.
                busy = await anyio.to_thread.run_sync(lambda: call(
                    client(room, "gamma"), "transcribe_voice", {"queue": False}))
                assert busy["isError"] is True
                assert busy["structuredContent"]["error"]["type"] == "BusyError"
                assert floor["holder"]["who"] in busy["content"][0]["text"], busy
                await anyio.to_thread.run_sync(lambda: wait_for(lambda: microphone_open(room), 10))
                await anyio.to_thread.run_sync(hark, room, "inject", str(first))
                # The floor passes on as the first recording ends.
                await anyio.to_thread.run_sync(lambda: wait_for(
                    lambda: status(room)["floor"]["queue"] == [] and microphone_open(room), 30))
                # Handed the floor, the microphone opened with the chime alongside.
                await anyio.to_thread.run_sync(after_the_chime, room)
                await anyio.to_thread.run_sync(hark, room, "inject", str(second))

            async with anyio.create_task_group() as tg:
                tg.start_soon(listen, "alpha", alpha)
                tg.start_soon(listen, "beta", beta)
                tg.start_soon(person)
            texts = {name: r.structured_content["text"] for name, r in results.items()}
            got_first = [n for n, t in texts.items() if heard(t, {"weather", "tomorrow", "morning"})]
            got_second = [n for n, t in texts.items() if heard(t, {"meeting", "thursday", "afternoon"})]
            assert len(got_first) == 1 and len(got_second) == 1 and got_first != got_second, texts

    anyio.run(main)
    # Free once the moment for the person to go on after the last turn
    # (`audio.vad.continue_ms`) has passed (tests/e2e/test_continuation.py).
    assert wait_for(lambda: status(room)["floor"] == {"holder": None, "queue": []}, 10), status(room)["floor"]
    log = room.log()
    assert "FloorQueued" in log and "FloorGranted" in log


def test_the_person_goes_before_waiting_agents(room, tmp_path):
    """While the person records a message, agents that want to listen wait
    behind it, in the order they asked."""
    message = speak(tmp_path, "msg", "Open the garage door and switch on the heating.")
    hark(room, "button", "hold")
    assert wait_for(lambda: (status(room)["floor"]["holder"] or {}).get("who") == "person", 10)
    a, b = client(room, "alpha"), client(room, "beta")
    ta, oa = in_thread(call, a, "transcribe_voice", {"timeout_seconds": 30})
    assert wait_for(lambda: len(status(room)["floor"]["queue"]) == 1, 10)
    tb, ob = in_thread(call, b, "transcribe_voice", {"timeout_seconds": 30})
    assert wait_for(lambda: len(status(room)["floor"]["queue"]) == 2, 10)
    assert [p["who"] for p in status(room)["floor"]["queue"]] == ["alpha", "beta"]
    assert wait_for(lambda: not status(room)["speaking"], 5)
    hark(room, "inject", str(message))
    time.sleep(seconds(message) + 1)
    hark(room, "button", "release")
    # Alpha's turn (the person's message went to the inbox); then beta's.
    assert wait_for(lambda: (status(room)["floor"]["holder"] or {}).get("who") == "alpha", 30)
    hang_up(a)  # leaving while it holds the microphone: released at once
    assert wait_for(lambda: (status(room)["floor"]["holder"] or {}).get("who") == "beta", 3), status(room)["floor"]
    hang_up(b)
    assert wait_for(lambda: status(room)["floor"]["holder"] is None, 3)
    ta.join(10)
    tb.join(10)
    # The person's words, transcribed while the agents had their turns.
    assert wait_for(lambda: status(room)["messages_waiting"] == 1, 20)
    c = client(room, "alpha")
    taken = call(c, "wait_for_person", {"timeout_seconds": 0})["structuredContent"]
    assert taken["received"] and heard(taken["text"], {"garage", "door", "heating"}), taken


def test_a_queue_at_its_bound_and_a_holder_past_its_time(start_daemon):
    d = start_daemon({"floor": {"max_queue": 1, "max_hold_seconds": 10}})
    a, b, c = client(d, "alpha"), client(d, "beta"), client(d, "gamma")
    ta, oa = in_thread(call, a, "transcribe_voice", {"timeout_seconds": 60})
    assert wait_for(lambda: status(d)["floor"]["holder"] is not None, 10)
    tb, ob = in_thread(call, b, "transcribe_voice", {"timeout_seconds": 60})
    assert wait_for(lambda: len(status(d)["floor"]["queue"]) == 1, 10)
    full = call(c, "transcribe_voice", {"timeout_seconds": 5})
    assert full["isError"] and "floor.max_queue" in full["content"][0]["text"], full
    # Alpha holds the button down past floor.max_hold_seconds.
    hark(d, "button", "hold")
    r = joined(ta, oa, 30)
    hark(d, "button", "release")
    assert r["isError"] is True, r
    assert r["structuredContent"]["error"]["type"] == "FloorTimeoutError", r
    assert "floor.max_hold_seconds (10 s)" in r["content"][0]["text"], r
    # … and beta got the floor at once.
    assert wait_for(lambda: 'FloorGranted { turn: 2, agent: Some("beta")' in d.log(), 3), d.log()[-3000:]
    hang_up(b)
    for x in (a, c):
        x.close()


def test_a_waiting_agent_that_leaves_leaves_the_queue(room):
    a, b = client(room, "alpha"), client(room, "beta")
    ta, oa = in_thread(call, a, "transcribe_voice", {"timeout_seconds": 20})
    assert wait_for(lambda: status(room)["floor"]["holder"] is not None, 10)
    tb, ob = in_thread(call, b, "transcribe_voice", {"timeout_seconds": 20})
    assert wait_for(lambda: len(status(room)["floor"]["queue"]) == 1, 10)
    hang_up(b)
    assert wait_for(lambda: status(room)["floor"]["queue"] == [], 2), status(room)["floor"]
    hang_up(a)
    assert wait_for(lambda: status(room)["floor"]["holder"] is None, 2), status(room)["floor"]
    ta.join(10)
    tb.join(10)


# ---- names -------------------------------------------------------------------------


def test_agents_are_named_by_header_client_info_and_hark_connect(room):
    host, port = room.http
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "generic-client", "version": "1"}}}
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "x-hark-client": "kitchen-agent"}
    with httpx.Client(timeout=10) as h:
        r = h.post(room.url, json=init, headers=headers)
        assert r.status_code == 200
        headers = dict(headers, **{"mcp-session-id": r.headers["mcp-session-id"],
                                    "mcp-protocol-version": "2025-06-18"})
        h.post(room.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        r = h.post(room.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                   "params": {"name": "get_status", "arguments": {}}}, headers=headers)
        body = [json.loads(l[5:]) for l in r.text.splitlines() if l.startswith("data:") and l[5:].strip()]
        names = [c["name"] for c in body[-1]["result"]["structuredContent"]["clients"]]
        assert "kitchen-agent" in names and "generic-client" not in names, names
        bad = h.post(room.url, json=init, headers=dict(headers, **{"x-hark-client": "x" * 65}))
        assert bad.status_code == 400 and "X-Hark-Client" in bad.text
    # The WebSocket upgrade's header names the connection.
    from websockets.sync.client import connect
    with connect(room.ws_url, subprotocols=["mcp"], additional_headers={"X-Hark-Client": "ws-agent"}) as ws:
        ws.send(json.dumps(init))
        json.loads(ws.recv())
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "get_status", "arguments": {}}}))
        names = [c["name"] for c in json.loads(ws.recv())["result"]["structuredContent"]["clients"]]
        assert "ws-agent" in names, names
    # hark connect --name, for stdio clients.
    bridge = subprocess.Popen([str(HARK), "connect", "--name", "desk-agent", f"127.0.0.1:{room.tcp[1]}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        bridge.stdin.write(json.dumps(init) + "\n")
        bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        bridge.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                       "params": {"name": "get_status", "arguments": {}}}) + "\n")
        bridge.stdin.flush()
        lines = [json.loads(bridge.stdout.readline()) for _ in range(2)]
        names = [c["name"] for c in lines[-1]["result"]["structuredContent"]["clients"]]
        assert "desk-agent" in names and "generic-client" not in names, names
    finally:
        bridge.kill()
        bridge.wait()
    assert "client=kitchen-agent" in room.log(), "the logs name the agent"


# ---- speech ------------------------------------------------------------------------


def test_speech_waits_its_turn_by_priority_with_the_speaker_announced(room):
    events = Events(room)
    long = "Here is the forecast. It will be sunny in the morning. Clouds come later. Rain by the evening."
    a, b, c = client(room, "alpha"), client(room, "beta"), client(room, "gamma")
    try:
        assert not call(a, "speak_text", {"text": long})["isError"]
        assert wait_for(lambda: status(room)["speaking"], 20)
        for agent, text, priority in [(b, "Low news.", "low"), (c, "Normal news.", "normal"),
                                      (b, "Urgent news.", "urgent")]:
            r = call(agent, "speak_text", {"text": text, "priority": priority})
            assert not r["isError"] and r["structuredContent"]["priority"] == priority, r
        assert wait_for(lambda: len(events.of("speaking_ended")) >= 4, 90), events.events
    finally:
        for x in (a, b, c):
            x.close()
    started = [e["text"] for e in events.of("speaking_started")]
    ended = [e["text"] for e in events.of("speaking_ended")]
    # Urgent went first, after the sentence alpha was speaking (alpha's
    # speech ended after it); then normal, then low.
    assert started == [long, "Urgent news.", "Normal news.", "Low news."], started
    assert ended.index("Urgent news.") < ended.index(long) < ended.index("Normal news.") < ended.index("Low news."), ended
    assert all(e["outcome"] == "spoken" for e in events.of("speaking_ended")), events.of("speaking_ended")
    log = room.log()
    assert "speech paused for another turn" in log
    # Each change of speaker was announced, in the new speaker's voice.
    announced = [line for line in log.splitlines() if "speaker changed: announced" in line]
    assert any("agent=beta" in line for line in announced) and any("agent=gamma" in line for line in announced), announced


def test_each_agent_speaks_in_its_own_voice(room):
    b = client(room, "beta")
    r = call(b, "speak_text", {"text": "Beta here.", "wait": True})["structuredContent"]
    b.close()
    assert r["voice"] == "espeak:en-us" and r["engine"] == "espeak", r
    a = client(room, "alpha")
    r = call(a, "speak_text", {"text": "Alpha here.", "wait": True})["structuredContent"]
    a.close()
    assert r["voice"] == "en_US-joe-medium" and r["engine"] == "piper", r


def test_each_agent_speaks_at_its_own_rate(room):
    same = "The quick brown fox jumps over the lazy dog near the river bank."
    seconds_of = {}
    for name in ("alpha", "gamma"):
        c = client(room, name)
        seconds_of[name] = call(c, "speak_text", {"text": same, "wait": True})["structuredContent"]["seconds"]
        c.close()
    # gamma's rate is 2.0: about half as long.
    assert seconds_of["gamma"] < 0.7 * seconds_of["alpha"], seconds_of


def dominant_hz(samples, rate):
    import numpy as np
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[int(np.argmax(spectrum))])


def first_sound(speaker, offset, rate=22050):
    """The first 60 ms of sound written to the virtual speaker after byte
    `offset` of its WAV file (16-bit mono)."""
    import numpy as np
    data = speaker.read_bytes()[offset:]
    samples = np.frombuffer(data[: len(data) // 2 * 2], dtype="<i2").astype(np.float32) / 32768
    loud = np.flatnonzero(np.abs(samples) > 0.05)
    assert loud.size, "nothing was played"
    start = int(loud[0])
    return samples[start:start + int(rate * 0.06)]


def test_each_agent_has_its_own_listening_chime(room):
    speaker = room.tmp / "speaker.wav"
    pitches = {}
    for name in ("alpha", "beta", "delta"):
        # The virtual card writes what it played a buffer later: let the
        # last chime reach the file first.
        time.sleep(0.6)
        before = speaker.stat().st_size
        c = client(room, name)
        call(c, "transcribe_voice", {"timeout_seconds": 0.5})
        c.close()
        pitches[name] = dominant_hz(first_sound(speaker, before + (before % 2)), 22050)
    # high: 990 Hz first; low: 440 Hz; an agent with no setting: 660 Hz.
    assert abs(pitches["alpha"] - 990) < 40, pitches
    assert abs(pitches["beta"] - 440) < 40, pitches
    assert abs(pitches["delta"] - 660) < 40, pitches


def test_a_converse_is_not_talked_over(room, tmp_path):
    events = Events(room)
    reply = speak(tmp_path, "reply", "What is the weather going to be like tomorrow morning?")
    a, b = client(room, "alpha"), client(room, "beta")
    try:
        ta, oa = in_thread(call, a, "converse", {"text": "Good morning. How can I help?", "timeout_seconds": 20})
        # Alpha's question itself, not a chime the test before left playing.
        assert wait_for(lambda: any(e.get("agent") == "alpha" for e in events.of("speaking_started")), 20)
        assert not call(b, "speak_text", {"text": "The kettle has boiled."})["isError"]
        assert wait_for(lambda: microphone_open(room), 30)
        hark(room, "inject", str(reply))
        r = joined(ta, oa)["structuredContent"]
        assert heard(r["text"], {"weather", "tomorrow", "morning"}), r
        assert wait_for(lambda: any(e["text"] == "The kettle has boiled." for e in events.of("speaking_ended")), 30)
    finally:
        a.close()
        b.close()
    names = [(e["event"], e.get("agent")) for e in events.events]
    listen_ended = names.index(("listening_ended", None))
    beta_started = names.index(("speaking_started", "beta"))
    # Beta spoke only once alpha's listen was over.
    assert listen_ended < beta_started, names


def test_out_of_range_priorities_are_clear_errors(room):
    c = client(room, "careless")
    r = call(c, "speak_text", {"text": "hi", "priority": "asap"})
    c.close()
    assert r.get("isError") is True, r
    assert "asap" in r["content"][0]["text"] and "urgent" in r["content"][0]["text"], r


# ---- for scripts -----------------------------------------------------------------------


def test_events_and_speak_for_scripts(room):
    events = Events(room)
    host, port = room.http
    base = f"http://{host}:{port}"
    with httpx.Client(timeout=10) as h:
        r = h.post(f"{base}/speak", json={"text": "The laundry is done.", "priority": "urgent"},
                   headers={"X-Hark-Client": "washing-machine"})
        assert r.status_code == 202, r.text
        assert r.json()["status"] == "queued" and r.json()["priority"] == "urgent"
        for body, says in [(b"not json", "JSON object"), (b'{"txt": "x"}', "`txt`"),
                           (b'{"text": "x", "priority": "asap"}', "asap"), (b'{"text": "  "}', "empty")]:
            r = h.post(f"{base}/speak", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 400 and says in r.json()["error"]["message"], (body, r.text)
        assert h.get(f"{base}/speak").status_code == 405
        assert h.post(f"{base}/events").status_code == 405
        for headers in [{"Origin": "http://evil.example"}, {"Host": "evil.example"}]:
            assert h.get(f"{base}/events", headers=headers).status_code == 403
            r = h.post(f"{base}/speak", json={"text": "x"}, headers=headers)
            # Refused with its body unread: the connection is not reused
            # (a client sending the next request on it would see it drop).
            assert r.status_code == 403 and r.headers.get("connection") == "close", r.headers
        assert h.post(f"{base}/speak", json={"text": "x"},
                      headers={"X-Hark-Client": "x" * 100}).status_code == 400
    assert wait_for(lambda: any(e.get("agent") == "washing-machine" for e in events.of("speaking_ended")), 30)
    assert status(room)["events"]["clients"] >= 1


def test_an_sse_client_that_never_reads_is_dropped(start_daemon):
    """Its buffer is bounded: it is dropped (counted), and neither the
    other subscribers nor the appliance wait for it."""
    # A 1 ms debounce lets the mute switch make events as fast as it moves.
    d = start_daemon({"board": {"debounce_ms": 1}})
    host, port = d.http
    slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small window, set before connecting: the kernel holds little for it.
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    slow.connect((host, port))
    slow.sendall(f"GET /events HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    reader = Events(d)
    assert wait_for(lambda: status(d)["events"]["clients"] == 2, 5)
    hand = LineClient.unix(d, timeout=10)
    hand.initialize("hand")
    moves = 0
    try:
        while status(d)["events"]["dropped"] == 0 and moves < 6000:
            for _ in range(100):
                hand.request("hark/board", {"mute": moves % 2 == 0}, id=moves)
                moves += 1
                time.sleep(0.003)
    finally:
        hand.request("hark/board", {"mute": False}, id=moves + 1)
        hand.close()
    assert status(d)["events"]["dropped"] == 1, (moves, status(d)["events"])
    assert wait_for(lambda: status(d)["events"]["clients"] == 1, 5), "the slow client is gone"
    # The reader got the moves as they came, and capture never waited.
    mutes = reader.of("mute")
    assert len(mutes) >= moves * 0.9, (len(mutes), moves)
    assert "an event-stream client stopped reading; dropped" in d.log()
    assert status(d)["subsystems"]["audio"].startswith("capturing"), status(d)["subsystems"]["audio"]
    slow.close()


# ---- history ------------------------------------------------------------------------------


def captures(daemon, **args):
    c = client(daemon, "historian")
    try:
        return call(c, "list_captures", args)
    finally:
        c.close()


def test_history_records_and_survives_a_restart(start_daemon, tmp_path):
    d = start_daemon(dict(AGENTS))
    wav = speak(tmp_path, "h", "The meeting has been moved to Thursday afternoon.")
    a = client(d, "alpha")
    t, out = in_thread(call, a, "transcribe_voice", {"timeout_seconds": 20})
    assert wait_for(lambda: microphone_open(d), 20)
    hark(d, "inject", str(wav))
    joined(t, out)
    assert not call(a, "speak_text", {"text": "Noted.", "wait": True}, id=2)["isError"]
    a.close()
    assert wait_for(lambda: len(captures(d)["structuredContent"]["captures"]) == 2, 10)
    rows = captures(d)["structuredContent"]["captures"]
    assert [(r["kind"], r["agent"]) for r in rows] == [("spoken", "alpha"), ("heard", "alpha")], rows
    assert rows[0]["text"] == "Noted." and rows[0]["end_reason"] == "spoken"
    assert heard(rows[1]["text"], {"meeting", "thursday", "afternoon"}) and rows[1]["delivered_to"] == "alpha"
    assert rows[1]["end_reason"] == "end_of_speech" and rows[1]["duration"] > 1 and rows[1]["audio"] is None
    only = captures(d, kind="heard")["structuredContent"]["captures"]
    assert [r["kind"] for r in only] == ["heard"]
    bad = captures(d, limit=0)
    assert bad["isError"] and "limit must be 1–500" in bad["content"][0]["text"]
    assert d.stop() == 0
    again = Daemon(d.tmp, dict(AGENTS)).start()
    try:
        rows2 = captures(again)["structuredContent"]["captures"]
        assert [r["id"] for r in rows2] == [r["id"] for r in rows], "kept across a restart"
    finally:
        again.stop()


def test_history_keeps_audio_when_asked_and_trims_to_its_limit(start_daemon, tmp_path):
    d = start_daemon({"history": {"keep_audio": True, "max_rows": 10}})
    wav = speak(tmp_path, "ka", "What is the weather going to be like tomorrow morning?")
    a = client(d, "alpha")
    t, out = in_thread(call, a, "transcribe_voice", {"timeout_seconds": 20})
    assert wait_for(lambda: microphone_open(d), 20)
    hark(d, "inject", str(wav))
    joined(t, out)
    assert wait_for(lambda: captures(d)["structuredContent"]["captures"], 10)
    row = captures(d)["structuredContent"]["captures"][0]
    audio = d.tmp / "state" / "history-audio" / row["audio"]
    assert audio.is_file()
    with wave.open(str(audio)) as w:
        assert w.getframerate() == 16000 and w.getnframes() > 16000
    for i in range(11):
        assert not call(a, "speak_text", {"text": f"Number {i}.", "wait": True}, id=10 + i)["isError"]
    a.close()
    assert wait_for(lambda: len(captures(d, limit=50)["structuredContent"]["captures"]) == 10, 10)
    rows = captures(d, limit=50)["structuredContent"]["captures"]
    assert rows[0]["text"] == "Number 10." and all(r["kind"] == "spoken" for r in rows), rows
    assert not audio.exists(), "the trimmed row's audio went with it"


def test_history_after_kill_9_and_a_corrupt_file(start_daemon, tmp_path):
    d = start_daemon()
    events = Events(d)
    a = client(d, "alpha")
    for i in range(6):
        assert not call(a, "speak_text", {"text": f"Row {i}."}, id=i)["isError"]
    assert wait_for(lambda: len(events.of("speaking_ended")) >= 3, 30)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    seen = len(events.of("speaking_ended"))
    db = d.tmp / "state" / "history.sqlite3"
    again = Daemon(d.tmp, {}).start()
    try:
        rows = captures(again, limit=50)["structuredContent"]["captures"]
        # Every row written before the kill is there and whole; at most the
        # one being written was lost.
        assert seen - 1 <= len(rows) <= seen, (seen, rows)
        assert all(r["text"].startswith("Row ") and r["text"].endswith(".") for r in rows), rows
        with sqlite3.connect(db) as con:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        again.stop()
    # A file that is not a database: moved aside, a new one, never a crash.
    for side in ("-wal", "-shm"):
        (d.tmp / "state" / f"history.sqlite3{side}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database " * 200)
    third = Daemon(d.tmp, {}).start()
    try:
        assert "moved to" in third.log() and "history.sqlite3.corrupt-" in third.log()
        assert status(third)["subsystems"]["history"].startswith("0 rows; kept in ")
    finally:
        third.stop()


def test_a_full_disk_under_history_is_reported_and_tools_still_answer(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("full")
    message = speak(tmp, "full", "What is the weather going to be like tomorrow morning?")
    state = tmp / "state"
    state.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(state)]).returncode != 0:
        pytest.fail("this test needs to mount a small tmpfs (run as root)")
    d = None
    try:
        d = Daemon(tmp, {"service": {"state_dir": str(state)}}).start()
        filler = state / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k", "count=64"],
                       capture_output=True)
        a = client(d, "alpha")
        for i in range(4):
            r = call(a, "speak_text", {"text": f"Still speaking {i}.", "wait": True}, id=i)
            assert not r["isError"], r
        assert wait_for(lambda: "write(s) failed" in status(d)["subsystems"]["history"], 10), \
            status(d)["subsystems"]["history"]
        assert "full" in status(d)["subsystems"]["history"]
        assert status_of(a, id=50)["version"], "the appliance still answers"
        # Nothing is lost: a message for a waiting agent still reaches it.
        t, out = in_thread(call, a, "wait_for_person", {"timeout_seconds": 60}, 60)
        assert wait_for(lambda: "1 agent(s) waiting" in status(d)["subsystems"]["inbox"], 10)
        hark(d, "button", "press")
        assert wait_for(lambda: microphone_open(d), 10)
        after_the_chime(d)
        hark(d, "inject", str(message))
        got = joined(t, out)["structuredContent"]
        assert got["received"] and heard(got["text"], {"weather", "tomorrow", "morning"}), got
        a.close()
        assert "history: cannot write" in d.log()
        assert "handed to the waiting agent from memory" in d.log()
    finally:
        if d:
            d.stop()
        subprocess.run(["umount", str(state)])
