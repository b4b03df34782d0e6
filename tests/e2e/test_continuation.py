"""A cut turn is not a lost turn: the person finishes a sentence, pauses
longer than the end of the turn waits, and goes on. The listen has ended
the turn at the pause and answered its agent; what the person adds in the
next `audio.vad.continue_ms` (2 s) reaches the same agent: its next
`transcribe_voice` or `converse` returns it at once (`continuation`),
`wait_for_person` delivers it as a message, and an agent waiting in line
for the microphone does not hear it. Said with the daemon's own steady
voice, so the sentence ends the same way every run."""

import time
import wave

import anyio
import pytest
from aioesphomeapi import APIClient, VoiceAssistantEventType as Event

from harness import LineClient, after_the_chime, call, client, hark, in_thread, status_of, wait_for, words
from test_early import live  # noqa: F401 (a fixture)
from test_esphome import spoken_by
from test_stt import inject
from test_turn import join, say

# Longer than the end of the turn waits after a finished sentence (under a
# second), well inside the window that follows it (2 s from the end).
PAUSE = 1.6
FIRST = {"table", "dinner", "tonight"}
REST = {"four", "people", "eight", "clock"}
KEPT = "the person went on after the turn ended; kept for the agent"
HANDED = "the person went on after the turn ended; handed to Home Assistant's pipeline"


@pytest.fixture
def paused(start_daemon, live, tmp_path):  # noqa: F811
    # Home Assistant's pipeline runs on a press when it is subscribed; the
    # agents' listens are as without it.
    d = start_daemon({**live, "esphome": {"enabled": True, "listen": "127.0.0.1:0", "run_on_press": True},
                      "stt": {**live["stt"], "audio_dirs": [str(tmp_path)]}})
    first = say(d, tmp_path / "a.wav", "Please book a table for dinner tonight.")
    second = say(d, tmp_path / "b.wav", "For four people at eight o'clock.")
    return d, join(tmp_path / "paused.wav", first, PAUSE, second)


def listen_as(d, name, clip, id=1):
    """`name`'s transcribe_voice while `clip` is said; its result."""
    c = client(d, name)
    t, out = in_thread(call, c, "transcribe_voice", {"timeout_seconds": 10}, id)
    watcher = LineClient.tcp(d)
    watcher.initialize("watcher")
    assert wait_for(lambda: status_of(watcher)["recording"], 10)
    watcher.close()
    inject(d, clip)
    t.join(60)
    assert "value" in out, out
    return c, out["value"]["structuredContent"]


def with_one_in_line(d, other_timeout):
    """"booker" listens (its call and result in a thread), and "other" asks
    for the microphone after it and waits in line with `other_timeout`."""
    a = client(d, "booker")
    t, out = in_thread(call, a, "transcribe_voice", {"timeout_seconds": 10}, 1)
    watcher = LineClient.tcp(d)
    watcher.initialize("watcher")
    assert wait_for(lambda: status_of(watcher)["recording"], 10)
    b = client(d, "other")
    tb, out_b = in_thread(call, b, "transcribe_voice", {"timeout_seconds": other_timeout}, 1)
    assert wait_for(lambda: len(status_of(watcher)["floor"]["queue"]) == 1, 10)
    watcher.close()
    return (a, t, out), (b, tb, out_b)


def test_what_the_person_adds_is_the_agents_next_listen(paused):
    d, clip = paused
    c, first = listen_as(d, "booker", clip)
    got = set(words(first["text"]))
    # The turn ended at the pause: the first sentence, none of the rest.
    assert len(FIRST & got) >= 2 and not REST & got, first
    assert "continuation" not in first, first
    assert wait_for(lambda: KEPT in d.log(), 20), d.log()[-3000:]
    # Nothing shows on the lights for the window itself; the person's
    # voice opened a recording of its own, closed again by now.
    assert not status_of(c)["recording"]
    asked = time.monotonic()
    rest = call(c, "transcribe_voice", {"timeout_seconds": 10}, 2)["structuredContent"]
    took = time.monotonic() - asked
    c.close()
    assert rest["continuation"] is True and rest["speech"] is True, rest
    assert len(REST & set(words(rest["text"]))) >= 2 and not FIRST & set(words(rest["text"])), rest
    # Returned at once, without opening the microphone (a listen that
    # waited for speech would take its 10 s timeout): a wide bound.
    assert took < 5, took
    assert "the listen returns what the person went on to say" in d.log()


def test_an_agent_in_line_does_not_hear_the_rest_and_wait_for_person_delivers_it(paused):
    d, clip = paused
    # Another agent asks for the microphone meanwhile and waits in line.
    (a, t, out), (b, tb, out_b) = with_one_in_line(d, 14)
    inject(d, clip)
    t.join(60)
    first = out["value"]["structuredContent"]
    assert len(FIRST & set(words(first["text"]))) >= 2, first
    tb.join(60)
    b.close()
    theirs = out_b["value"]["structuredContent"]
    # The other agent's microphone opened after the person had gone on:
    # it heard none of it.
    assert not REST & set(words(theirs["text"])), theirs
    got = call(a, "wait_for_person", {"timeout_seconds": 10}, 2)["structuredContent"]
    a.close()
    assert got["received"] is True, got
    m = got["message"]
    assert m["addressed_by"] == "continuation" and m["addressed_to"] == "booker", m
    assert len(REST & set(words(got["text"]))) >= 2, got


def test_a_converse_after_the_person_went_on_returns_the_rest_unsaid(paused):
    d, clip = paused
    c, first = listen_as(d, "booker", clip)
    assert len(FIRST & set(words(first["text"]))) >= 2, first
    assert wait_for(lambda: KEPT in d.log(), 20)
    r = call(c, "converse", {"text": "For how many people?", "timeout_seconds": 10}, 2)
    c.close()
    s = r["structuredContent"]
    assert s["speech_status"] == "skipped" and s["spoken"] == "" and "voice" not in s, s
    assert s["continuation"] is True and len(REST & set(words(s["text"]))) >= 2, s
    assert r["content"][0]["text"] == s["text"]


def test_an_agent_that_listens_again_at_once_hears_the_rest_itself(paused):
    """A dictation loop: the agent listens again as soon as it has the first
    sentence. The window gives way to its new listen, which hears the rest
    as any listen does."""
    d, clip = paused
    c, first = listen_as(d, "booker", clip)
    rest = call(c, "transcribe_voice", {"timeout_seconds": 10}, 2)["structuredContent"]
    c.close()
    assert len(FIRST & set(words(first["text"]))) >= 2, first
    assert "continuation" not in rest and len(REST & set(words(rest["text"]))) >= 2, rest
    assert KEPT not in d.log()


def test_nothing_more_said_keeps_nothing_and_the_floor_passes_on(start_daemon, live, tmp_path):  # noqa: F811
    d = start_daemon(live)
    clip = say(d, tmp_path / "a.wav", "Please book a table for dinner tonight.")
    (a, t, out), (b, tb, out_b) = with_one_in_line(d, 12)
    inject(d, clip)
    t.join(60)
    assert out["value"]["structuredContent"]["speech"] is True, out
    # The other agent gets the microphone once the window (2 s) passes,
    # within its own 12 s, and hears nothing.
    tb.join(60)
    assert "value" in out_b and out_b["value"]["structuredContent"]["speech"] is False, out_b
    got = call(a, "wait_for_person", {"timeout_seconds": 0}, 2)["structuredContent"]
    assert got["received"] is False, got
    a.close()
    b.close()
    assert KEPT not in d.log()


class Runs:
    """Home Assistant's side of the satellite's runs, each kept apart: its
    conversation id and its audio."""

    def __init__(self, client):
        self.runs, self.ended = [], 0
        self.unsubscribe = client.subscribe_voice_assistant(
            handle_start=self._start, handle_stop=self._stop, handle_audio=self._audio)

    async def _start(self, conversation_id, flags, audio_settings, wake_word_phrase):
        self.runs.append((conversation_id, bytearray()))
        return 0

    async def _stop(self, abort):
        self.ended += 1

    async def _audio(self, data, *_):
        self.runs[-1][1].extend(data)

    async def audio_of(self, n):
        """Waits for the end of run `n`'s audio (1-based)."""
        with anyio.fail_after(40):
            while self.ended < n:
                await anyio.sleep(0.05)
        return self.runs[n - 1]


def test_home_assistants_pipeline_gets_the_rest_as_the_next_run(paused, tmp_path):
    """The person starts Home Assistant's pipeline with a press, says the
    first sentence, pauses and goes on while Home Assistant works on the
    first part: the rest is the next run of the same conversation, and the
    reply to half the request is not said."""
    d, clip = paused
    host, port = d.esphome

    async def main():
        client = APIClient(host, port, None, client_info="Home Assistant test")
        await client.connect(login=True)
        runs = Runs(client)
        await anyio.sleep(0.5)
        await anyio.to_thread.run_sync(lambda: hark(d, "button", "press"))
        await anyio.to_thread.run_sync(after_the_chime, d)
        await anyio.to_thread.run_sync(lambda: hark(d, "inject", str(clip)))
        first = await runs.audio_of(1)
        # Home Assistant takes its time over the first part; the person
        # goes on meanwhile.
        await anyio.to_thread.run_sync(lambda: wait_for(lambda: HANDED in d.log(), 20))
        for event, data in [
            (Event.VOICE_ASSISTANT_RUN_START, {}),
            (Event.VOICE_ASSISTANT_INTENT_END, {"conversation_id": "c1", "continue_conversation": "0"}),
            (Event.VOICE_ASSISTANT_TTS_START, {"text": "What should I book?"}),
            (Event.VOICE_ASSISTANT_RUN_END, {}),
        ]:
            client.send_voice_assistant_event(event, data)
        second = await runs.audio_of(2)
        for event, data in [
            (Event.VOICE_ASSISTANT_INTENT_END, {"conversation_id": "c1", "continue_conversation": "0"}),
            (Event.VOICE_ASSISTANT_TTS_START, {"text": "Your table for four is booked."}),
            (Event.VOICE_ASSISTANT_RUN_END, {}),
        ]:
            client.send_voice_assistant_event(event, data)
        with anyio.fail_after(30):
            while "Your table for four is booked." not in await anyio.to_thread.run_sync(
                    lambda: spoken_by(d, "Home Assistant")):
                await anyio.sleep(0.2)
        runs.unsubscribe()
        await client.disconnect()
        return first, second

    try:
        (c1, first), (c2, second) = anyio.run(main)
    except Exception:
        print(d.log()[-8000:])
        raise
    assert c1 == "" and c2 == "c1", (c1, c2)
    # Each run's audio is what it says: heard back by Hark's own
    # transcription.
    texts = []
    for n, audio in enumerate((first, second)):
        path = tmp_path / f"run{n}.wav"
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(bytes(audio))
        c = client(d, "checker")
        r = call(c, "transcribe_audio", {"audio_path": str(path)})
        c.close()
        assert not r.get("isError"), r
        texts.append(set(words(r["structuredContent"]["text"])))
    assert len(FIRST & texts[0]) >= 2 and not REST & texts[0], texts
    assert len(REST & texts[1]) >= 2 and not FIRST & texts[1], texts
    assert "What should I book?" not in spoken_by(d, "Home Assistant")


def test_a_press_in_the_window_starts_the_persons_own_message(start_daemon, live, tmp_path):  # noqa: F811
    """Just after an agent's turn ended, the person presses the button to
    leave a message: the window gives way to the press, and what they say
    is their message for whoever waits for one, not the rest of the
    agent's turn."""
    d = start_daemon(live)
    first = say(d, tmp_path / "a.wav", "Please book a table for dinner tonight.")
    message = say(d, tmp_path / "m.wav", "Remind me to water the plants.")
    c, heard = listen_as(d, "booker", first)
    assert len(FIRST & set(words(heard["text"]))) >= 2, heard
    reader = client(d, "reader")
    t, out = in_thread(call, reader, "wait_for_person", {"timeout_seconds": 30}, 1)
    # Inside the 2 s window.
    hark(d, "button", "press")
    assert wait_for(lambda: status_of(c)["recording"], 5), "the press opened the microphone"
    after_the_chime(d)
    hark(d, "inject", str(message))
    t.join(60)
    c.close()
    reader.close()
    got = out["value"]["structuredContent"]
    assert got["received"] is True and got["message"]["addressed_by"] != "continuation", got
    assert len({"water", "plants", "remind"} & set(words(got["text"]))) >= 2, got
    assert KEPT not in d.log()
