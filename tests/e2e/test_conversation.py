"""The person starts and agents ask, end to end: the real binary, the
simulated board's button (`hark button`), speech injected into the virtual
sound card, whisper tiny.en, and real MCP clients (the official Python SDK
over Streamable HTTP in both protocol eras, raw JSON-RPC over TCP as VoxCtrl's
clients speak it)."""

import json
import subprocess
import threading
import time
import wave

import anyio
import pytest
from mcp import Client
from mcp.types import Implementation

from harness import (Daemon, LineClient, after_the_chime, answered, ask, call, client, hark, heard,
                     in_thread, response, seconds, speak, status, status_of, wait_for, words)

ALIASES = {"agents.cursor": {"aliases": ["curser", "cursor"]},
           "agents.claude-code": {"aliases": ["claude", "clod", "cloud"]}}












def lights(daemon):
    board = status(daemon)["subsystems"]["board"]
    return board.split("lights: ")[1].split(";")[0]


def wait_lights(daemon, wanted, timeout=20):
    assert wait_for(lambda: lights(daemon) == wanted, timeout), (wanted, status(daemon)["subsystems"])








def drain(daemon, name):
    """Takes every message waiting for `name`, so a test starts clean."""
    c = client(daemon, name)
    try:
        for i in range(50):
            r = call(c, "wait_for_person", {"timeout_seconds": 0}, 100 + i)
            if not r["structuredContent"]["received"]:
                return
    finally:
        c.close()




def person_says(daemon, wav, hold=False):
    """The person presses the button (a tap, or held as push-to-talk) and
    speaks the clip."""
    if hold:
        hark(daemon, "button", "hold")
    else:
        hark(daemon, "button", "press")
    wait_lights(daemon, "listening")
    after_the_chime(daemon)
    # `hark inject` hands the clip over and returns; it plays in real time.
    hark(daemon, "inject", str(wav))
    if hold:
        # Held past the end of the speech and the detector's hang-over:
        # only the release ends it.
        time.sleep(seconds(wav) + 1.5)
        assert lights(daemon) == "listening", "held open past the end of speech"
        hark(daemon, "button", "release")


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("hark-room"), dict(ALIASES)).start()
    yield d
    code = d.stop(timeout=15)
    assert code == 0, d.log()


# ---- the voice inbox ---------------------------------------------------------


def test_a_waiting_agent_gets_what_the_person_says_after_a_press(room, tmp_path):
    drain(room, "sdk-agent")
    wav = speak(tmp_path, "calendar", "What is on my calendar for tomorrow morning?")

    async def main():
        async with Client(room.url, mode="legacy", cache=None,
                          client_info=Implementation(name="sdk-agent", version="1")) as agent:
            async with anyio.create_task_group() as tg:
                async def person():
                    await anyio.to_thread.run_sync(lambda: wait_for(
                        lambda: "1 agent(s) waiting" in status(room)["subsystems"]["inbox"]))
                    assert lights(room) == "idle", "waiting for the person opens no microphone"
                    assert not status(room)["recording"]
                    await anyio.to_thread.run_sync(person_says, room, wav)
                tg.start_soon(person)
                result = await agent.call_tool("wait_for_person", {"timeout_seconds": 60})
            assert result.is_error is not True, result
            s = result.structured_content
            assert s["received"] is True and heard(s["text"], {"calendar", "tomorrow", "morning"}), s
            m = s["message"]
            assert m["text"] == s["text"] and m["addressed_to"] is None and m["addressed_by"] == "anyone"
            assert 1.0 < m["duration"] < 6.0 and 0 < m["confidence"] <= 1 and isinstance(m["id"], int)
            assert m["at"].endswith("Z") and m["at"] < m["transcribed_at"], m
            assert s["waiting"] == 0
            # Taken once: nothing is left for anyone.
            again = await agent.call_tool("wait_for_person", {"timeout_seconds": 0})
            assert again.structured_content["received"] is False
            assert again.content[0].text == "(no message)"

    anyio.run(main)
    assert "button pressed with nobody listening: recording a message for the agents" in room.log()
    assert "message delivered to a waiting agent" in room.log()
    wait_lights(room, "idle")


def test_push_to_talk_to_a_raw_tcp_client(room, tmp_path):
    """VoxCtrl-style: no handshake, one line in, one line out."""
    drain(room, "unnamed client")
    wav = speak(tmp_path, "ptt", "The meeting has been moved to Thursday afternoon.")
    c = LineClient.tcp(room, timeout=90)
    c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "wait_for_person", "arguments": {"timeout_seconds": 60}}})
    assert wait_for(lambda: "1 agent(s) waiting" in status(room)["subsystems"]["inbox"])
    person_says(room, wav, hold=True)
    result = c.recv()["result"]
    c.close()
    s = result["structuredContent"]
    assert s["received"] and heard(s["text"], {"meeting", "thursday", "afternoon"}), s
    assert "push-to-talk released: utterance ended" in room.log()


def test_an_addressed_message_reaches_only_the_named_agent_once(room, tmp_path):
    drain(room, "cursor")
    drain(room, "claude-code")
    cursor, claude = client(room, "cursor", 90), client(room, "claude-code", 90)
    try:
        t_cursor, got_cursor = in_thread(call, cursor, "wait_for_person", {"timeout_seconds": 60}, 1)
        t_claude, got_claude = in_thread(call, claude, "wait_for_person", {"timeout_seconds": 25}, 1)
        assert wait_for(lambda: "2 agent(s) waiting" in status(room)["subsystems"]["inbox"])
        # "Hey Cursor, …": espeak's bare "Cursor," at the start is heard by
        # whisper tiny.en as "Cus," in about half the takes (the same clip,
        # recorded at a slightly different offset); after "hey", 3 of 3.
        person_says(room, speak(tmp_path, "cursor", "Hey Cursor, open the garage door."))
        t_cursor.join(60)
        s = got_cursor["value"]["structuredContent"]
        assert s["received"] and heard(s["text"], {"open", "door"}), s
        assert s["message"]["addressed_to"] == "cursor" and s["message"]["addressed_by"] == "name", s
        t_claude.join(60)
        assert got_claude["value"]["structuredContent"]["received"] is False, "not Claude's"
        # Never twice: Cursor has nothing more.
        r = call(cursor, "wait_for_person", {"timeout_seconds": 0}, 2)
        assert r["structuredContent"]["received"] is False
    finally:
        cursor.close()
        claude.close()


def test_kept_with_no_agent_connected_then_delivered_after_a_restart(start_daemon, tmp_path):
    d = start_daemon(dict(ALIASES))
    wav = speak(tmp_path, "later", "Remind me to call the plumber.")
    person_says(d, wav)
    # Nobody can take it: Hark says so, keeps it, and the message light shows.
    assert wait_for(lambda: "No agent is listening; I'll keep that." in d.log(), 30), d.log()[-3000:]
    assert wait_for(lambda: status(d)["messages_waiting"] == 1)
    wait_lights(d, "message", 30)
    inbox = status(d)["subsystems"]["inbox"]
    assert inbox.startswith("1 waiting;"), inbox
    # Restarted on the same state directory: still there, still lit.
    assert d.stop() == 0
    again = Daemon(d.tmp, dict(ALIASES)).start()
    try:
        assert status(again)["messages_waiting"] == 1
        wait_lights(again, "message")
        c = client(again, "first-to-ask")
        r = call(c, "wait_for_person", {"timeout_seconds": 5}, 1)["structuredContent"]
        assert r["received"] and heard(r["text"], {"remind", "call", "plumber"}), r
        r = call(c, "wait_for_person", {"timeout_seconds": 0}, 2)["structuredContent"]
        assert r["received"] is False, "delivered once"
        c.close()
        wait_lights(again, "idle")
        assert status(again)["messages_waiting"] == 0
    finally:
        again.stop()


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_subscribed_agent_is_woken(room, tmp_path, mode):
    """resources/subscribe for clients that initialize; subscriptions/listen
    for 2026-07-28 clients: either way a real SDK client is told when the
    person leaves a message, reads it from hark://inbox, and takes it."""
    name = f"subscriber-{mode}"
    drain(room, name)
    wav = speak(tmp_path, "sub", "The parcel has arrived at the front door.")

    async def main():
        woken = anyio.Event()
        updated = []

        async def on_message(message):
            if getattr(message, "method", None) == "notifications/resources/updated":
                updated.append(message.params.uri)
                woken.set()

        async with Client(room.url, mode=mode, cache=None, message_handler=on_message,
                          client_info=Implementation(name=name, version="1")) as agent:
            resources = await agent.list_resources()
            assert [r.uri for r in resources.resources] == ["hark://inbox"]
            before = json.loads((await agent.read_resource("hark://inbox")).contents[0].text)
            assert before["waiting"] == 0 and before["messages"] == []
            if mode == "legacy":
                await agent.subscribe_resource("hark://inbox")
                await anyio.to_thread.run_sync(person_says, room, wav)
                with anyio.fail_after(30):
                    await woken.wait()
                assert updated[0] == "hark://inbox"
            else:
                async with agent.listen(resource_subscriptions=["hark://inbox"]) as sub:
                    assert sub.honored.resource_subscriptions == ["hark://inbox"]
                    await anyio.to_thread.run_sync(person_says, room, wav)
                    with anyio.fail_after(30):
                        event = await sub.__anext__()
                    assert getattr(event, "uri", "hark://inbox") == "hark://inbox", event
            after = json.loads((await agent.read_resource("hark://inbox")).contents[0].text)
            assert after["waiting"] == 1, after
            assert heard(after["messages"][0]["text"], {"parcel", "front", "door"}), after
            taken = await agent.call_tool("wait_for_person", {"timeout_seconds": 0})
            assert taken.structured_content["received"] is True

    anyio.run(main)
    # Subscribed, so reachable: Hark did not tell the person nobody listens.
    kept = [line for line in room.log().splitlines() if "message kept in the inbox" in line]
    assert kept and "reachable=true" in kept[-1], kept


# ---- agents ask ----------------------------------------------------------------

QUESTION = "Shall I delete the three old backups?"


def answer_by_voice(daemon, wav):
    """Once the question has been asked and the microphone is open for the
    answer (the lights show "asking"), the person speaks."""
    wait_lights(daemon, "asking", 30)
    assert wait_for(lambda: not status(daemon)["speaking"], 5)
    hark(daemon, "inject", str(wav))


def test_confirm_by_the_button(room):
    # A short press: yes.
    c, t, out = ask(room, "confirmer", "confirm", {"question": QUESTION, "timeout_seconds": 20})
    wait_lights(room, "asking", 30)
    assert status(room)["recording"], "the microphone is open for the answer"
    hark(room, "button", "press")
    r = answered(c, t, out)
    assert r["structuredContent"] == {"answer": "yes", "by": "button", "transcript": None, "confidence": 1.0}, r
    assert r["content"][0]["text"] == "yes"
    wait_lights(room, "idle")
    # A long press: no, as soon as the press is long.
    c, t, out = ask(room, "confirmer", "confirm", {"question": QUESTION, "timeout_seconds": 20})
    wait_lights(room, "asking", 30)
    hark(room, "button", "hold")
    t.join(10)
    assert not t.is_alive(), "a long press answers while the button is still down"
    hark(room, "button", "release")
    r = answered(c, t, out)
    assert r["structuredContent"]["answer"] == "no" and r["structuredContent"]["by"] == "button", r


def test_a_press_during_the_question_answers_it(room):
    c, t, out = ask(room, "confirmer", "confirm", {"question": QUESTION * 3, "timeout_seconds": 20})
    assert wait_for(lambda: status(room)["speaking"], 30)
    hark(room, "button", "press")
    r = answered(c, t, out)
    assert r["structuredContent"]["answer"] == "yes" and r["structuredContent"]["by"] == "button", r
    assert wait_for(lambda: not status(room)["speaking"], 5), "the question stopped"


@pytest.mark.parametrize("said, answer", [
    ("Yes.", "yes"),
    ("No, not now.", "no"),
    ("Maybe later, I am not sure.", "unclear"),
])
def test_confirm_by_voice(room, tmp_path, said, answer):
    c, t, out = ask(room, "confirmer", "confirm", {"question": QUESTION, "timeout_seconds": 20})
    answer_by_voice(room, speak(tmp_path, "answer", said))
    s = answered(c, t, out)["structuredContent"]
    assert s["answer"] == answer and s["by"] == "voice", s
    assert s["transcript"] and 0 < s["confidence"] <= 1, s
    if answer == "unclear":
        assert heard(s["transcript"], {"maybe", "later"}), s


def test_confirm_unanswered(room):
    c, t, out = ask(room, "confirmer", "confirm", {"question": QUESTION, "timeout_seconds": 2})
    s = answered(c, t, out)["structuredContent"]
    assert s == {"answer": "no_answer", "by": None, "transcript": None, "confidence": None}, s
    assert 'AnswerEnded' in room.log() and 'answer: "no_answer"' in room.log()


@pytest.mark.parametrize("said, index, matched_by", [
    ("Sushi, please.", 1, "words"),
    ("The third one.", 2, "ordinal"),
])
def test_choose(room, tmp_path, said, index, matched_by):
    options = ["pizza", "sushi", "tacos"]
    c, t, out = ask(room, "chooser", "choose", {"question": "What shall we have for dinner?",
                                                 "options": options, "timeout_seconds": 20})
    wait_lights(room, "asking", 40)
    assert wait_for(lambda: not status(room)["speaking"], 5)
    hark(room, "inject", str(speak(tmp_path, "choice", said)))
    r = answered(c, t, out)
    s = r["structuredContent"]
    assert (s["index"], s["choice"], s["outcome"], s["by"], s["matched_by"]) == \
        (index, options[index], "chosen", "voice", matched_by), s
    assert r["content"][0]["text"] == options[index]
    # The options were read out numbered, after the question.
    spoken = [line for line in room.log().splitlines() if "SpeakingStarted" in line][-1]
    assert "What shall we have for dinner? One: pizza. Two: sushi. Three: tacos." in spoken, spoken


def test_converse_speaks_then_listens(room, tmp_path):
    wav = speak(tmp_path, "reply", "What is the weather going to be like tomorrow morning?")
    c, t, out = ask(room, "conversant", "converse", {"text": "Good morning. What can I do for you?",
                                                       "timeout_seconds": 20})
    assert wait_for(lambda: status(room)["speaking"], 30), "it speaks first"
    assert not status(room)["recording"], "and listens only after"
    wait_lights(room, "listening", 30)
    assert wait_for(lambda: not status(room)["speaking"], 5)
    hark(room, "inject", str(wav))
    s = answered(c, t, out)["structuredContent"]
    assert s["spoken"] == "Good morning. What can I do for you?" and s["speech_status"] == "spoken", s
    assert s["speech_seconds"] > 1 and s["end_reason"] == "end_of_speech", s
    assert heard(s["text"], {"weather", "tomorrow", "morning"}), s


def test_a_press_while_converse_speaks_barges_in(room, tmp_path):
    long = " ".join(["Here is the whole forecast for the week, day by day, with every detail."] * 4)
    wav = speak(tmp_path, "barge", "Stop, just tell me about tomorrow morning.")
    c, t, out = ask(room, "conversant", "converse", {"text": long, "timeout_seconds": 20})
    assert wait_for(lambda: status(room)["speaking"], 30)
    time.sleep(1)
    hark(room, "button", "hold")
    # The speech stops and the microphone opens at once, without a chime.
    wait_lights(room, "listening", 5)
    assert not status(room)["speaking"]
    hark(room, "inject", str(wav))
    time.sleep(seconds(wav) + 0.5)
    hark(room, "button", "release")
    s = answered(c, t, out)["structuredContent"]
    assert s["speech_status"] == "interrupted", s
    assert s["speech_seconds"] < 20 and s["end_reason"] == "stopped", s
    assert heard(s["text"], {"tomorrow", "morning"}), s


def test_converse_without_listening_only_speaks(room):
    c, t, out = ask(room, "conversant", "converse", {"text": "The oven is hot now.", "listen": False})
    s = answered(c, t, out)["structuredContent"]
    assert s["speech_status"] == "spoken" and "text" not in s and "end_reason" not in s, s
    assert not status(room)["recording"]


# ---- bad input and faults ---------------------------------------------------------


def tool_error(c, tool, arguments, id):
    r = call(c, tool, arguments, id)
    assert r["isError"] is True, (tool, arguments, r)
    return r["structuredContent"]["error"]["type"], r["content"][0]["text"]


def test_bad_arguments_are_clear_errors_and_disturb_nothing(room):
    c = client(room, "careless")
    try:
        cases = [
            ("wait_for_person", {"timeout_seconds": 5000}, "InvalidArgumentError", "0–3600"),
            ("wait_for_person", {"timeout_seconds": -1}, "InvalidArgumentError", "timeout_seconds"),
            ("confirm", {"question": "Go?", "timeout_seconds": 0.1}, "InvalidArgumentError", "0.5–300"),
            ("converse", {"text": "Hi", "timeout_seconds": 301}, "InvalidArgumentError", "0.5–300"),
            ("confirm", {"question": "   "}, "InvalidArgumentError", "question is empty"),
            ("confirm", {"question": "x" * 20000}, "InvalidArgumentError", "at most 1000"),
            ("choose", {"question": "Which?", "options": ["only"]}, "InvalidArgumentError", "2 to 8 options, got 1"),
            ("choose", {"question": "Which?", "options": [f"option {i}" for i in range(50)]},
             "InvalidArgumentError", "got 50"),
            ("choose", {"question": "Which?", "options": ["Pizza", "sushi", "pizza!"]},
             "InvalidArgumentError", "the same"),
            ("converse", {"text": ""}, "InvalidArgumentError", "text is empty"),
        ]
        for i, (tool, arguments, kind, says) in enumerate(cases):
            got_kind, text = tool_error(c, tool, arguments, 10 + i)
            assert got_kind == kind and says in text, (tool, arguments, got_kind, text)
        # Nothing was spoken or opened by any of them, and the appliance serves on.
        assert not status(room)["recording"] and lights(room) == "idle"
        assert status_of(c, id=99)["version"]
    finally:
        c.close()


def test_every_listening_tool_refuses_while_muted(room):
    drain(room, "muted-agent")
    hark(room, "mute", "on")
    c = client(room, "muted-agent")
    try:
        for i, (tool, arguments) in enumerate([
            ("transcribe_voice", {"timeout_seconds": 2}),
            ("converse", {"text": "Are you there?"}),
            ("confirm", {"question": QUESTION}),
            ("choose", {"question": "Which?", "options": ["red", "blue"]}),
            ("wait_for_person", {"timeout_seconds": 5}),
        ]):
            kind, text = tool_error(c, tool, arguments, 20 + i)
            assert kind == "MicrophoneMutedError" and "muted" in text, (tool, kind, text)
        assert not status(room)["speaking"], "nothing was said into a muted room"
        # A press while muted records nothing.
        before = room.log()
        hark(room, "button", "press")
        assert wait_for(lambda: "button pressed while muted: nothing is recorded" in room.log()[len(before):], 5)
        assert not status(room)["recording"]
    finally:
        hark(room, "mute", "off")
        c.close()
    wait_lights(room, "idle")


def test_an_agent_that_leaves_while_waiting_loses_nothing(room, tmp_path):
    drain(room, "leaver")
    drain(room, "stayer")
    c = client(room, "leaver")
    c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "wait_for_person", "arguments": {"timeout_seconds": 60}}})
    assert wait_for(lambda: "1 agent(s) waiting" in status(room)["subsystems"]["inbox"])
    c.close()
    assert wait_for(lambda: "0 agent(s) waiting" in status(room)["subsystems"]["inbox"], 5), \
        "the queue lets go of an agent that left"
    person_says(room, speak(tmp_path, "left", "The meeting has been moved to Thursday afternoon."))
    assert wait_for(lambda: status(room)["messages_waiting"] == 1, 30)
    s = call(client(room, "stayer"), "wait_for_person", {"timeout_seconds": 5}, 2)["structuredContent"]
    assert s["received"] and heard(s["text"], {"meeting", "moved", "thursday", "afternoon"}), s


def test_an_agent_that_leaves_mid_confirm_releases_the_microphone(room):
    c = client(room, "quitter")
    c.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "confirm", "arguments": {"question": QUESTION, "timeout_seconds": 30}}})
    wait_lights(room, "asking", 30)
    c.close()
    assert wait_for(lambda: not status(room)["recording"], 2), "the microphone closed at once"
    wait_lights(room, "idle", 5)


def test_a_press_with_the_inbox_off_records_nothing(start_daemon):
    d = start_daemon({"inbox": {"enabled": False}})
    assert status(d)["subsystems"]["inbox"] == "disabled"
    hark(d, "button", "press")
    assert wait_for(lambda: "the voice inbox is off (inbox.enabled = false)" in d.log(), 5)
    assert not status(d)["recording"] and lights(d) == "idle"
    c = client(d, "agent")
    kind, text = tool_error(c, "wait_for_person", {"timeout_seconds": 1}, 1)
    c.close()
    assert kind == "InboxError" and "inbox.enabled = false" in text, text
