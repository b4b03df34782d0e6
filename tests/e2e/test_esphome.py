"""Hark as a Home Assistant satellite: the ESPHome native API, checked with
the client Home Assistant itself uses (aioesphomeapi): hello, device info,
entities, keep-alive, the voice assistant's wake words, announcements,
timers, and the runs of Home Assistant's pipeline that the wake word
starts (the test plays Home Assistant's side of a run, as its ESPHome
integration does)."""

from __future__ import annotations

import array
import functools
import http.server
import re
import shutil
import socket
import threading
import wave

import anyio
import pytest
from aioesphomeapi import APIClient, APIConnectionError, VoiceAssistantEventType as Event
from aioesphomeapi import VoiceAssistantTimerEventType as Timer

from harness import REPO, LineClient, call, hark, speak, status, wait_for


def esphome(start_daemon, **section):
    return start_daemon({"esphome": {"enabled": True, "listen": "127.0.0.1:0", **section}})


def test_home_assistants_client_meets_a_voice_satellite(start_daemon):
    d = esphome(start_daemon)
    host, port = d.esphome

    async def main():
        # It pings every second here (Home Assistant: 20 s), and drops a
        # device that does not answer.
        client = APIClient(host, port, None, client_info="Home Assistant test", keepalive=1)
        await client.connect(login=True)
        info = await client.device_info()
        entities, services = await client.list_entities_services()
        config = await client.get_voice_assistant_configuration(timeout=5)
        await client.set_voice_assistant_configuration(["hey_jarvis"])
        chosen = await client.get_voice_assistant_configuration(timeout=5)
        await anyio.sleep(3.5)
        assert (await client.device_info()).name == info.name, "still connected"
        await client.disconnect()
        return info, entities, services, config, chosen

    info, entities, services, config, chosen = anyio.run(main)
    host_name = socket.gethostname().split(".")[0].lower()
    assert info.name == host_name, info
    assert info.friendly_name == f"Hark on {host_name}", info
    assert info.manufacturer == "Hark"
    assert info.mac_address.startswith("02:") and len(info.mac_address) == 17, info.mac_address
    assert not info.uses_password
    # What Home Assistant needs to make it an Assist satellite.
    flags = info.voice_assistant_feature_flags
    assert flags & 1 and flags & 2 and flags & 4, flags
    # And that it takes announcements, keeps timers, and asks questions
    # (`ask_question`: an announcement that listens after it).
    assert flags & 16 and flags & 8 and flags & 32, flags
    assert entities == [] and services == []
    words = {w.id: w for w in config.available_wake_words}
    assert {"okay_nabu", "hey_jarvis"} <= set(words), words
    assert words["okay_nabu"].wake_word == "Okay Nabu"
    assert "en" in words["okay_nabu"].trained_languages
    assert config.max_active_wake_words == 1 and len(config.active_wake_words) == 1
    assert chosen.active_wake_words == ["hey_jarvis"]
    log = d.log()
    assert "ESPHome API client said hello" in log
    assert "Home Assistant chose the wake word" in log
    # The identifier stays across restarts (it is the device's key in
    # Home Assistant).
    d.stop()
    again = esphome(start_daemon, listen=f"{host}:{port}")

    async def mac():
        client = APIClient(host, port, None)
        await client.connect(login=True)
        info = await client.device_info()
        await client.disconnect()
        return info.mac_address

    assert anyio.run(mac) == info.mac_address
    again.stop()


def test_who_may_connect_and_an_encrypted_client(start_daemon):
    d = esphome(start_daemon, allow=["10.9.9.9"])
    host, port = d.esphome

    async def attempt(**kw):
        client = APIClient(host, port, None, **kw)
        try:
            await client.connect(login=True)
        finally:
            await client.disconnect(force=True)

    with pytest.raises(APIConnectionError):
        anyio.run(attempt)
    wait_for(lambda: "not in esphome.allow" in d.log(), 5)

    d2 = esphome(start_daemon)
    host, port = d2.esphome
    with pytest.raises(APIConnectionError):
        anyio.run(lambda: attempt(noise_psk="x" * 43 + "="))
    wait_for(lambda: "asked for an encrypted connection" in d2.log(), 5)


def spoken_by(daemon, agent):
    """What the history says `agent`'s speech was, newest first."""
    c = LineClient.unix(daemon, timeout=10)
    try:
        c.initialize("historian")
        rows = call(c, "list_captures", {"kind": "spoken", "limit": 50})["structuredContent"]["captures"]
        return [r["text"] for r in rows if r["agent"] == agent]
    finally:
        c.close()


def test_home_assistants_announcement_is_said_in_harks_voice(start_daemon):
    d = esphome(start_daemon)
    host, port = d.esphome
    text = "The washing machine has finished."

    async def main():
        client = APIClient(host, port, None, keepalive=2)
        await client.connect(login=True)
        said = await client.send_voice_assistant_announcement_await_response(
            media_id="http://homeassistant.local:8123/api/tts_proxy/x.mp3", timeout=60, text=text)
        await client.disconnect()
        return said

    said = anyio.run(main)
    assert said.success is True
    assert spoken_by(d, "Home Assistant") == [text]


@pytest.fixture
def home_assistants_media(tmp_path):
    """Home Assistant's web server as far as media goes: a recorded person
    (LibriVox) as a WAV, and a page that is not audio."""
    www = tmp_path / "www"
    www.mkdir()
    shutil.copy(CLIP, www / "doorbell.wav")
    (www / "page.wav").write_text("<html>not audio</html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_home_assistants_own_audio_is_played_on_hark(start_daemon, home_assistants_media):
    d = esphome(start_daemon)
    host, port = d.esphome
    base = home_assistants_media

    async def main():
        client = APIClient(host, port, None, keepalive=2)
        await client.connect(login=True)
        ask = client.send_voice_assistant_announcement_await_response
        # Audio without words (a recording Home Assistant was asked to
        # announce): played as it is.
        played = await ask(media_id=f"{base}/doorbell.wav", timeout=60, text="")
        # Audio that is not audio: its words are said instead.
        fallback = await ask(media_id=f"{base}/page.wav", timeout=60, text="The post came.")
        # Neither audio nor words.
        missing = await ask(media_id=f"{base}/gone.wav", timeout=10, text="")
        await client.disconnect()
        return played, fallback, missing

    played, fallback, missing = anyio.run(main)
    assert (played.success, fallback.success, missing.success) == (True, True, False)
    c = LineClient.unix(d, timeout=10)
    try:
        c.initialize("historian")
        rows = call(c, "list_captures", {"kind": "spoken", "agent": "Home Assistant"})["structuredContent"]["captures"]
    finally:
        c.close()
    assert [r["text"] for r in rows] == ["The post came.", "(Home Assistant's audio)"], rows
    with wave.open(str(CLIP)) as w:
        seconds = w.getnframes() / w.getframerate()
    assert rows[1]["end_reason"] == "spoken" and abs(rows[1]["duration"] - seconds) < 0.3, (rows[1], seconds)
    log = d.log()
    assert "page.wav" in log and "answered HTTP 404" in log, log[-3000:]


def test_home_assistants_timers_ring_on_hark(start_daemon):
    d = esphome(start_daemon)
    host, port = d.esphome

    def kept():
        return status(d)["scheduled"]

    def board():
        return status(d)["subsystems"]["board"]

    async def main():
        client = APIClient(host, port, None, keepalive=2)
        await client.connect(login=True)
        # A timer set 150 s ago: its countdown on the ring is the whole
        # timer, 450 s of 600 s left, three quarters of the ring.
        client.send_voice_assistant_timer_event(Timer.VOICE_ASSISTANT_TIMER_STARTED, "t2", "", 600, 450, True)
        drawn = await anyio.to_thread.run_sync(lambda: wait_for(
            lambda: re.search(r"lights: timer; mute off; timer: 4[45]\d s of 600 s left, 9 of 12 LEDs lit",
                              board()), 5))
        client.send_voice_assistant_timer_event(Timer.VOICE_ASSISTANT_TIMER_STARTED, "t1", "pasta", 2, 2, True)
        await anyio.to_thread.run_sync(lambda: wait_for(lambda: len(kept()) == 2, 5))
        client.send_voice_assistant_timer_event(Timer.VOICE_ASSISTANT_TIMER_CANCELLED, "t2", "", 600, 590, False)
        await anyio.to_thread.run_sync(lambda: wait_for(lambda: len(kept()) == 1, 5))
        # The pasta timer's end: said and ringing, until the button.
        ringing = await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: any(s["ringing"] for s in kept()), 15))
        flashing = await anyio.to_thread.run_sync(lambda: wait_for(lambda: "lights: ringing;" in board(), 5))
        client.send_voice_assistant_timer_event(Timer.VOICE_ASSISTANT_TIMER_FINISHED, "t1", "pasta", 2, 0, False)
        await anyio.sleep(1)
        still = any(s["ringing"] for s in kept())
        await client.disconnect()
        return drawn, ringing, flashing, still

    drawn, ringing, flashing, still = anyio.run(main)
    assert drawn, "the countdown drawn on the lights from Home Assistant's times"
    assert ringing, "Home Assistant's timer rang on Hark"
    assert flashing, "and flashed on its lights"
    assert still, "Home Assistant's own end leaves it ringing until the person stops it"
    assert kept()[0]["text"] == "The pasta timer is done."
    hark(d, "button", "press")
    assert wait_for(lambda: not kept(), 10), kept()
    assert wait_for(lambda: "lights: idle;" in board(), 5), board()
    assert spoken_by(d, "Home Assistant")[0] == "The pasta timer is done."


CLIP = REPO / "tests" / ".speech" / "clips" / "ps-librivox-0880.wav"  # "he was not an ill disposed young man"


class PipelineSide:
    """Home Assistant's side of the satellite's runs, as its ESPHome
    integration subscribes: each start answered with port 0 (the audio over
    the API), the audio kept, the end noted. `on_start` runs before the
    answer (the person speaking once the microphone opens)."""

    def __init__(self, client, on_start=None):
        self.started, self.ended = anyio.Event(), anyio.Event()
        self.audio, self.phrase, self.conversation, self.abort = bytearray(), None, None, None
        self.on_start = on_start
        self.unsubscribe = client.subscribe_voice_assistant(
            handle_start=self._start, handle_stop=self._stop, handle_audio=self._audio)

    async def _start(self, conversation_id, flags, audio_settings, wake_word_phrase):
        self.conversation, self.phrase = conversation_id, wake_word_phrase
        self.started.set()
        if self.on_start:
            await self.on_start()
        return 0

    async def _stop(self, abort):
        self.abort = abort
        self.ended.set()

    async def _audio(self, data, *_):  # (and a second channel, unused)
        self.audio += data

    async def heard(self):
        """Waits for the run's start, then for the end of its audio."""
        with anyio.fail_after(20):
            await self.started.wait()
        with anyio.fail_after(30):
            await self.ended.wait()

    def seconds(self):
        return len(self.audio) / 2 / 16000


def test_the_wake_word_runs_home_assistants_pipeline_and_hark_says_the_reply(start_daemon, tmp_path):
    d = start_daemon({"esphome": {"enabled": True, "listen": "127.0.0.1:0"}, "wake": {"enabled": True}})
    assert wait_for(lambda: status(d)["wake"]["state"] == "listening", 10)
    host, port = d.esphome
    wake = speak(tmp_path, "wake", "Okay Nabu.")
    with wave.open(str(CLIP)) as w:
        clip_seconds = w.getnframes() / w.getframerate()

    async def main():
        client = APIClient(host, port, None, client_info="Home Assistant test")
        await client.connect(login=True)
        run = PipelineSide(client)
        await anyio.sleep(0.5)
        # The person: the wake word, then a recorded voice.
        await anyio.to_thread.run_sync(lambda: hark(d, "inject", str(wake)))
        await anyio.to_thread.run_sync(lambda: hark(d, "inject", str(CLIP)))
        await run.heard()
        # Home Assistant's pipeline: what it heard, its answer, its speech.
        for event, data in [
            (Event.VOICE_ASSISTANT_RUN_START, {}),
            (Event.VOICE_ASSISTANT_STT_END, {"text": "He was not an ill disposed young man."}),
            (Event.VOICE_ASSISTANT_INTENT_END, {"conversation_id": "c1", "continue_conversation": "0"}),
            (Event.VOICE_ASSISTANT_TTS_START, {"text": "Indeed he was not."}),
            (Event.VOICE_ASSISTANT_TTS_END, {"url": "http://127.0.0.1:1/tts.flac"}),
            (Event.VOICE_ASSISTANT_RUN_END, {}),
        ]:
            client.send_voice_assistant_event(event, data)
        # Said to its end (the run, and what it says, end with the
        # connection), as Home Assistant's speech.
        with anyio.fail_after(30):
            while "Indeed he was not." not in await anyio.to_thread.run_sync(
                    lambda: spoken_by(d, "Home Assistant")):
                await anyio.sleep(0.2)
        run.unsubscribe()
        await client.disconnect()
        return run

    run = anyio.run(main)
    assert run.phrase == "Okay Nabu" and run.conversation == "", (run.phrase, run.conversation)
    assert run.abort is False, "the audio ended, not the run aborted"
    samples = array.array("h", bytes(run.audio))
    seconds = run.seconds()
    # The person's turn from the word's end to the end of their turn: the
    # clip and the pause that ended it, not the wake word before it.
    assert clip_seconds - 0.5 < seconds < clip_seconds + 3.5, seconds
    loud = max(abs(v) for v in samples)
    assert loud > 3000, loud
    log = d.log()
    assert "Home Assistant's pipeline runs" in log
    assert "recording a message for the agents" not in log


def test_home_assistants_question_is_asked_and_the_answer_runs_its_pipeline(start_daemon):
    d = esphome(start_daemon)
    host, port = d.esphome

    async def main():
        client = APIClient(host, port, None, client_info="Home Assistant test")
        await client.connect(login=True)
        # The person answers once the microphone is open.
        run = PipelineSide(client, on_start=lambda: anyio.to_thread.run_sync(
            lambda: hark(d, "inject", str(CLIP))))
        finished = await client.send_voice_assistant_announcement_await_response(
            "", 30, text="Who was not an ill disposed young man?", start_conversation=True)
        await run.heard()
        client.send_voice_assistant_event(Event.VOICE_ASSISTANT_RUN_END, {})
        await anyio.sleep(0.5)
        run.unsubscribe()
        await client.disconnect()
        return finished, run

    finished, run = anyio.run(main)
    assert finished.success is True
    assert not run.phrase and run.abort is False, (run.phrase, run.abort)
    seconds = run.seconds()
    assert 2.0 < seconds < 8.0, seconds
    assert "Who was not an ill disposed young man?" in spoken_by(d, "Home Assistant")
