"""Hark's Wyoming services, driven by Home Assistant's own client library
(the `wyoming` package from PyPI): describe, transcribe a recording of a
real person, synthesize (whole and streamed), the wake word in a stream,
the allow-list, and a flood of idle connections that cannot keep a client
out."""

import asyncio
import json
import re
import socket
import subprocess
import time
import wave

import numpy as np
import pytest
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.info import Describe, Info
from wyoming.wake import Detect, Detection, NotDetected
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped, SynthesizeVoice

from harness import REPO, heard, words
from test_live import MOONSHINE

SPEECH = REPO / "tests" / ".speech"
ON = {"wyoming": {"enabled": True, "listen": "127.0.0.1:0"}}


def clip(clip_id):
    """A recording from the real-speech set: 16 kHz mono samples and the
    words said."""
    with open(SPEECH / "manifest.json", encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            if entry["id"] == clip_id:
                with wave.open(str(SPEECH / entry["file"])) as w:
                    assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
                    pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
                return pcm.astype(np.float32) / 32768, entry["text"]
    raise KeyError(clip_id)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


async def read_until(client, *types):
    """Events until one of `types` (or an error) arrives; all of them."""
    events = []
    while True:
        event = await client.read_event()
        assert event is not None, f"the connection closed after {[e.type for e in events]}"
        events.append(event)
        if event.type in types or Error.is_type(event.type):
            return events


async def transcribe(address, samples, rate, channels=1, language="en"):
    """What Hark heard in `samples` (one channel, or the same on each)."""
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    pcm = np.repeat(pcm, channels)
    async with AsyncTcpClient(*address) as client:
        await client.write_event(Transcribe(language=language).event())
        await client.write_event(AudioStart(rate=rate, width=2, channels=channels).event())
        step = 1024 * channels
        for at in range(0, len(pcm), step):
            chunk = AudioChunk(rate=rate, width=2, channels=channels, audio=pcm[at:at + step].tobytes())
            await client.write_event(chunk.event())
        await client.write_event(AudioStop().event())
        events = await read_until(client, "transcript")
    last = events[-1]
    assert Transcript.is_type(last.type), last
    return Transcript.from_event(last)


async def synthesized(client):
    """One audio stream: its rate and samples."""
    events = await read_until(client, "audio-stop")
    assert AudioStart.is_type(events[0].type), [e.type for e in events]
    start = AudioStart.from_event(events[0])
    assert (start.width, start.channels) == (2, 1)
    pcm = b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))
    return start.rate, np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768


def resample(samples, rate, to):
    """Linear resampling, enough to hand Hark audio at another rate."""
    n = int(len(samples) * to / rate)
    return np.interp(np.arange(n) * rate / to, np.arange(len(samples)), samples).astype(np.float32)


def test_describe_lists_the_model_and_voices(start_daemon):
    d = start_daemon(ON)

    async def describe():
        async with AsyncTcpClient(*d.wyoming) as client:
            await client.write_event(Describe().event())
            return Info.from_event((await read_until(client, "info"))[-1])

    info = run(describe())
    (asr,) = info.asr
    assert asr.models and "en" in asr.models[0].languages, asr
    (tts,) = info.tts
    assert "en_US-joe-medium" in [v.name for v in tts.voices], tts
    assert tts.supports_synthesize_streaming
    # Every installed wake word, whether or not the room listens for one.
    (wake,) = info.wake
    assert sorted(m.name for m in wake.models) == ["alexa", "hey_jarvis", "hey_mycroft", "okay_nabu"]
    nabu = next(m for m in wake.models if m.name == "okay_nabu")
    assert nabu.phrase == "Okay Nabu" and "en" in nabu.languages, nabu


def test_a_real_person_is_transcribed_at_any_rate_and_channel_count(start_daemon):
    d = start_daemon(ON)
    samples, text = clip("ps-librivox-0880")
    got = run(transcribe(d.wyoming, samples, 16000))
    assert heard(got.text, words(text)), (got.text, text)
    assert got.language == "en"
    # Home Assistant's microphones differ: 48 kHz stereo reads the same.
    stereo = run(transcribe(d.wyoming, resample(samples, 16000, 48000), 48000, channels=2))
    assert heard(stereo.text, words(text)), (stereo.text, text)


def test_a_transcript_streams_while_the_person_is_still_speaking(start_daemon):
    """With the live engine on, a recording streamed as a microphone sends
    it (in real time) is answered with words before it has ended; the final
    transcript is whole, and the live engine's too (English, short, nothing
    waiting for it: `stt.live_wyoming_seconds`; however sure it is, with
    `stt.live_unsure_below` 0, as its sureness differs by machine)."""
    d = start_daemon({**ON, "stt": {"live_model": str(MOONSHINE), "live_unsure_below": 0}})
    samples, text = clip("ps-librivox-0870")
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")

    async def stream():
        async with AsyncTcpClient(*d.wyoming) as client:
            await client.write_event(Transcribe(language="en").event())
            await client.write_event(AudioStart(rate=16000, width=2, channels=1).event())
            got = []

            async def read():
                while True:
                    event = await client.read_event()
                    assert event is not None, [e.type for e, _ in got]
                    got.append((event, time.monotonic()))
                    if event.type == "transcript-stop":
                        return

            reading = asyncio.create_task(read())
            begun = time.monotonic()
            for n, at in enumerate(range(0, len(pcm), 1024)):
                chunk = AudioChunk(rate=16000, width=2, channels=1, audio=pcm[at:at + 1024].tobytes())
                await client.write_event(chunk.event())
                await asyncio.sleep(max(0, begun + (n + 1) * 1024 / 16000 - time.monotonic()))
            stopped = time.monotonic()
            await client.write_event(AudioStop().event())
            await reading
            return [e for e, t in got if t < stopped], [e for e, t in got if t >= stopped]

    early, late = run(stream())
    assert [e.type for e in early][:2] == ["transcript-start", "transcript-chunk"], [e.type for e in early]
    assert all(e.type == "transcript-chunk" for e in early[1:]), [e.type for e in early]
    assert [e.type for e in late][-2:] == ["transcript", "transcript-stop"], [e.type for e in late]
    chunks = "".join(e.data["text"] for e in early + late if e.type == "transcript-chunk")
    final = Transcript.from_event(late[-2])
    assert heard(final.text, words(text)), (final.text, text)
    # What streamed early is the person's words, at least half of them: a
    # partial is read from speech cut off mid-word, and the live engine's
    # words differ by machine; words made up from noise or in another
    # language would share next to none of his.
    said = words(" ".join(e.data["text"] for e in early[1:]))
    assert len(said & words(text)) >= 0.5 * len(said), (said, text)
    # The stream adds up: when the final text begins with the words sent
    # early, the last chunk is the rest of it; when it does not, nothing
    # more is sent and the transcript carries the final text alone.
    plain = lambda t: [w for w in (re.sub(r"[^\w]", "", x).lower() for x in t.split()) if w]
    sent, final_words = plain(" ".join(e.data["text"] for e in early[1:])), plain(final.text)
    if final_words[: len(sent)] == sent:
        assert plain(chunks) == final_words, (chunks, final.text)
    else:
        assert plain(chunks) == sent, (chunks, final.text)
    assert re.search(r"samples handed over transcribed.*model=tiny-en", d.log()), d.log()[-3000:]


def test_an_unsure_live_reading_is_heard_again_by_whisper(start_daemon):
    """Home Assistant's audio the live engine heard less surely than
    `stt.live_unsure_below` is heard again by whisper, and whisper's words
    are the answer (1: every reading is unsure)."""
    d = start_daemon({**ON, "stt": {"live_model": str(MOONSHINE), "live_unsure_below": 1}})
    samples, text = clip("ps-librivox-0870")
    got = run(transcribe(d.wyoming, samples, 16000))
    assert heard(got.text, words(text)), (got.text, text)
    log = d.log()
    assert "the live engine was unsure of audio handed over: whisper heard it again" in log, log[-3000:]
    assert re.search(r"samples handed over transcribed.*model=tiny\.en-q8_0", log), log[-3000:]


def test_speech_made_for_home_assistant_says_the_text(start_daemon):
    d = start_daemon(ON)
    text = "The kitchen lights are off and the oven timer is set."

    async def synthesize():
        async with AsyncTcpClient(*d.wyoming) as client:
            voice = SynthesizeVoice(name="en_US-joe-medium")
            await client.write_event(Synthesize(text=text, voice=voice).event())
            return await synthesized(client)

    rate, samples = run(synthesize())
    assert rate == 22050 and len(samples) > rate, (rate, len(samples))
    # Heard back through Hark's own speech to text.
    back = run(transcribe(d.wyoming, resample(samples, rate, 16000), 16000))
    assert heard(back.text, {"kitchen", "lights", "oven", "timer"}), back.text
    # Nothing was played in the room.
    speaker = d.tmp / "speaker.wav"
    assert not speaker.exists() or speaker.stat().st_size < 22050 * 2, "the speech was played"


def test_a_streamed_text_is_spoken_sentence_by_sentence(start_daemon):
    d = start_daemon(ON)

    async def stream():
        async with AsyncTcpClient(*d.wyoming) as client:
            await client.write_event(SynthesizeStart().event())
            for part in ("The bread is", " ready. The soup", " needs salt."):
                await client.write_event(SynthesizeChunk(text=part).event())
            # Home Assistant also sends the whole text for older servers.
            await client.write_event(Synthesize(text="The bread is ready. The soup needs salt.").event())
            await client.write_event(SynthesizeStop().event())
            streams = []
            while True:
                event = await client.read_event()
                assert event is not None and not Error.is_type(event.type), event
                if SynthesizeStopped.is_type(event.type):
                    return streams
                if AudioStart.is_type(event.type):
                    streams.append(b"")
                elif AudioChunk.is_type(event.type):
                    streams[-1] += AudioChunk.from_event(event).audio

    streams = run(stream())
    assert len(streams) == 2, [len(s) for s in streams]
    first = np.frombuffer(streams[0], dtype="<i2").astype(np.float32) / 32768
    back = run(transcribe(d.wyoming, resample(first, 22050, 16000), 16000))
    assert heard(back.text, {"bread", "ready"}), back.text


def espeak(tmp_path, text):
    """espeak-ng saying `text`, at 16 kHz (a smoke test of the plumbing:
    how well the word is heard is measured by `hark-bench wake`)."""
    path = tmp_path / "said.wav"
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True)
    with wave.open(str(path)) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return resample(pcm.astype(np.float32) / 32768, rate, 16000)


async def detect(address, samples, names=None):
    """Streams `samples` (16 kHz) after `detect`, as a satellite's
    microphone would, reading what comes back meanwhile; then the stream's
    end and its answer."""
    pcm = (np.clip(samples, -1, 1) * 32767).astype("<i2")
    async with AsyncTcpClient(*address) as client:
        await client.write_event(Detect(names=names).event())
        await client.write_event(AudioStart(rate=16000, width=2, channels=1).event())
        for at in range(0, len(pcm), 1024):
            chunk = AudioChunk(rate=16000, width=2, channels=1, audio=pcm[at:at + 1024].tobytes())
            await client.write_event(chunk.event())
        await client.write_event(AudioStop().event())
        await client.write_event(Describe().event())
        return await read_until(client, "info")


def test_a_wake_word_is_found_in_a_stream_and_speech_without_it_is_not(start_daemon, tmp_path):
    # The room does not listen for the word (wake.enabled is off): the
    # Wyoming service searches Home Assistant's streams all the same.
    d = start_daemon(ON)
    word = espeak(tmp_path, "Okay Nabu.")
    silence = np.zeros(8000, dtype=np.float32)
    stream = np.concatenate([silence, word, silence, silence])
    events = run(detect(d.wyoming, stream, names=["okay_nabu"]))
    types = [e.type for e in events]
    assert types == ["detection", "info"], types
    found = Detection.from_event(events[0])
    assert found.name == "okay_nabu", found
    # Heard while the word was said or just after it.
    assert 500 <= found.timestamp <= 500 + len(word) / 16 + 500, (found.timestamp, len(word))
    # A person reading aloud, searched for every word: nothing.
    samples, _ = clip("ps-librivox-0880")
    events = run(detect(d.wyoming, samples))
    assert [e.type for e in events] == ["not-detected", "info"], [e.type for e in events]
    assert NotDetected.is_type(events[0].type)
    # A word that is not installed is named in the error.
    events = run(detect(d.wyoming, silence, names=["hey_computer"]))
    assert Error.is_type(events[0].type), events[0]
    error = Error.from_event(events[0])
    assert error.code == "WakeWordError" and "hey_computer" in error.text, error


def test_an_address_outside_the_allow_list_is_told_and_closed(start_daemon):
    d = start_daemon({"wyoming": {**ON["wyoming"], "allow": ["10.0.0.0/8"]}})

    async def describe():
        async with AsyncTcpClient(*d.wyoming) as client:
            await client.write_event(Describe().event())
            first = await client.read_event()
            return first, await client.read_event()

    refused, after = run(describe())
    assert Error.is_type(refused.type), refused
    assert "127.0.0.1" in refused.data["text"] and "wyoming.allow" in refused.data["text"]
    assert after is None, "closed"


def test_idle_connections_cannot_keep_home_assistant_out(start_daemon):
    d = start_daemon({"wyoming": {**ON["wyoming"], "per_address": 4, "max_connections": 8}})
    idle = [socket.create_connection(d.wyoming) for _ in range(40)]
    try:
        started = time.monotonic()

        async def describe():
            async with AsyncTcpClient(*d.wyoming) as client:
                await client.write_event(Describe().event())
                return (await read_until(client, "info"))[-1]

        info = run(describe())
        assert Info.is_type(info.type) and time.monotonic() - started < 1, time.monotonic() - started
        # The flood was cut down to the budget: the rest were closed.
        closed = 0
        for s in idle:
            s.settimeout(2)
            try:
                closed += s.recv(1) == b""
            except (socket.timeout, ConnectionResetError):
                pass
        assert closed >= 40 - 4, closed
    finally:
        for s in idle:
            s.close()


def test_bad_events_are_named_and_the_daemon_serves_on(start_daemon):
    d = start_daemon(ON)
    with socket.create_connection(d.wyoming, timeout=10) as s:
        s.sendall(b'{"type": "audio-chunk", "payload_length": 99999999}\n')
        answer = s.makefile("rb").readline()
    error = json.loads(answer)
    assert error["type"] == "error", error

    async def ping():
        async with AsyncTcpClient(*d.wyoming) as client:
            await client.write_event(Describe().event())
            return (await read_until(client, "info"))[-1]

    assert Info.is_type(run(ping()).type)


def test_off_unless_turned_on(start_daemon):
    d = start_daemon()
    assert d.wyoming is None
    assert "wyoming=" not in next(n for n in d.notifications if "READY=1" in n)
