"""Speech to text end to end: the real binary, the real tiny.en (q8_0), the
virtual sound card through ALSA, and MCP over real sockets."""

import base64
import json
import socket
import subprocess
import threading
import time

import pytest

from harness import HARK, LineClient, response, status_of, wait_for

# The sentence tiny.en got right in every configuration measured
# (docs/benchmarks.md): the tests check the plumbing, not the model.
SENTENCE = "What is the weather going to be like tomorrow morning?"
KEY_WORDS = {"weather", "tomorrow", "morning"}


def speak(path, text=SENTENCE):
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True)
    return path


def words(text):
    return "".join(c.lower() if c.isalnum() else " " for c in text).split()


def inject(daemon, wav):
    r = subprocess.run([str(HARK), "--config", str(daemon.config_path), "inject", str(wav)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def audio_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("audio")


@pytest.fixture
def stt_daemon(start_daemon, audio_dir):
    return start_daemon({"stt": {"audio_dirs": [str(audio_dir)], "max_audio_bytes": 2_000_000}})


def test_transcribe_voice_hears_the_room(stt_daemon, tmp_path):
    wav = speak(tmp_path / "kitchen.wav")
    c = LineClient.tcp(stt_daemon, timeout=60)
    c.initialize()
    c.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "transcribe_voice", "arguments": {"timeout_seconds": 10},
                       "_meta": {"progressToken": "p1"}}})
    watcher = LineClient.tcp(stt_daemon)
    watcher.initialize()
    assert wait_for(lambda: status_of(watcher)["recording"]), "the microphone shows open"
    inject(stt_daemon, wav)
    reply, notes = response(c, 7)
    result = reply["result"]
    assert not result.get("isError"), result
    text = result["content"][0]["text"]
    assert KEY_WORDS <= set(words(text)), text
    s = result["structuredContent"]
    assert s["text"] == text and s["language"] == "en" and s["end_reason"] == "end_of_speech"
    assert 0 <= s["speech_start"] < s["speech_end"] <= s["duration"]
    assert s["segments"] and 0 < s["confidence"] <= 1
    steps = [n["params"]["message"] for n in notes if n.get("method") == "notifications/progress"]
    assert steps == ["listening", "speech detected", "transcribing"], steps
    assert not status_of(watcher)["recording"], "the microphone is closed again"
    assert "ready; model tiny.en-q8_0" in status_of(watcher)["subsystems"]["stt"]


def test_silence_times_out_with_seed_answer(stt_daemon):
    c = LineClient.tcp(stt_daemon, timeout=30)
    c.initialize()
    started = time.monotonic()
    reply = c.call_tool("transcribe_voice", {"timeout_seconds": 1.0}, id=3)
    assert reply["result"]["content"] == [{"type": "text", "text": "(no speech detected)"}]
    assert reply["result"]["structuredContent"]["end_reason"] == "timeout"
    assert time.monotonic() - started < 5
    assert not status_of(c)["recording"]


def test_bad_timeout_is_a_tool_error(stt_daemon):
    c = LineClient.tcp(stt_daemon)
    c.initialize()
    for bad in (0, -1, 301):
        r = c.call_tool("transcribe_voice", {"timeout_seconds": bad}, id=4)["result"]
        assert r["isError"] and "timeout_seconds" in r["content"][0]["text"]
        assert r["structuredContent"]["error"]["type"] == "InvalidArgumentError"


def test_cancel_mid_utterance_releases_the_microphone(stt_daemon, tmp_path):
    long = speak(tmp_path / "long.wav", " ".join([SENTENCE] * 4))
    c = LineClient.tcp(stt_daemon, timeout=30)
    c.initialize()
    c.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "transcribe_voice", "arguments": {"timeout_seconds": 10},
                       "_meta": {"progressToken": 5}}})
    threading.Thread(target=inject, args=(stt_daemon, long), daemon=True).start()
    while True:
        m = c.recv()
        if m.get("method") == "notifications/progress" and m["params"]["message"] == "speech detected":
            break
    c.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9, "reason": "user"}})
    watcher = LineClient.tcp(stt_daemon)
    watcher.initialize()
    assert wait_for(lambda: not status_of(watcher)["recording"], timeout=1.0), "released at once"
    assert wait_for(lambda: "listening cancelled by the client" in stt_daemon.log(), timeout=2.0)
    # The connection carries on.
    assert status_of(c, id=10)["recording"] is False


def test_disconnect_releases_the_microphone(stt_daemon):
    c = LineClient.tcp(stt_daemon, timeout=30)
    c.initialize()
    c.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "transcribe_voice", "arguments": {"timeout_seconds": 30}}})
    watcher = LineClient.tcp(stt_daemon)
    watcher.initialize()
    assert wait_for(lambda: status_of(watcher)["recording"])
    c.close()
    assert wait_for(lambda: not status_of(watcher)["recording"], timeout=2.0)


def call(daemon, name, arguments, id=1, timeout=60):
    c = LineClient.tcp(daemon, timeout=timeout)
    c.initialize()
    reply = c.call_tool(name, arguments, id=id)
    c.close()
    return reply["result"]


def error_of(result):
    assert result.get("isError"), result
    return result["structuredContent"]["error"]["type"], result["content"][0]["text"]


def test_transcribe_audio_inline_and_by_path(stt_daemon, audio_dir, tmp_path):
    wav = speak(audio_dir / "kitchen.wav")
    b64 = base64.b64encode(wav.read_bytes()).decode()
    r = call(stt_daemon, "transcribe_audio", {"audio_base64": b64})
    assert KEY_WORDS <= set(words(r["content"][0]["text"])), r
    s = r["structuredContent"]
    assert s["format"] == "wav" and s["source_rate"] == 22050 and s["language"] == "en"
    assert s["segments"][0]["start"] >= 0 and s["segments"][-1]["end"] <= s["duration"] + 0.01

    flac = audio_dir / "kitchen.flac"
    subprocess.run(["sox", str(wav), str(flac)], check=True)
    r = call(stt_daemon, "transcribe_audio", {"audio_path": str(flac), "output_format": "srt", "word_timestamps": True})
    srt = r["content"][0]["text"]
    assert srt.startswith("1\n00:00:0") and "-->" in srt and "weather" in srt.lower(), srt
    assert r["structuredContent"]["format"] == "flac"
    words_ = [w for s in r["structuredContent"]["segments"] for w in s["words"]]
    assert any("weather" in w["word"].lower() for w in words_)
    assert all(a["start"] <= b["start"] for a, b in zip(words_, words_[1:]))

    r = call(stt_daemon, "transcribe_audio", {"audio_path": str(wav), "output_format": "vtt"})
    assert r["content"][0]["text"].startswith("WEBVTT")


def test_transcribe_audio_bad_inputs(stt_daemon, audio_dir, tmp_path):
    wav = speak(audio_dir / "ok.wav")
    b64 = base64.b64encode(wav.read_bytes()).decode()
    cases = [
        ({"audio_base64": b64, "audio_path": str(wav)}, "InvalidArgumentError", "not both"),
        ({}, "InvalidArgumentError", "audio_base64"),
        ({"audio_base64": "!!not base64!!"}, "InvalidArgumentError", "not valid base64"),
        ({"audio_base64": base64.b64encode(b"hello, I am text").decode()}, "AudioFormatError", "not a recognised audio file"),
        ({"audio_base64": ""}, "AudioFormatError", "empty"),
        ({"audio_base64": base64.b64encode(bytes(3_000_000)).decode()}, "FileTooLargeError", "limit"),
        ({"audio_path": str(tmp_path / "outside.wav")}, "PathNotAllowedError", str(audio_dir)),
        ({"audio_path": str(audio_dir / "missing.wav")}, "FileNotFoundError", "missing.wav"),
        ({"audio_path": str(audio_dir / ".." / "escape.wav")}, "PathNotAllowedError", ".."),
    ]
    (audio_dir / "notes.wav").write_text("shopping list: eggs, milk")
    (audio_dir / "empty.wav").write_bytes(b"")
    outside = speak(tmp_path / "secret.wav")
    (audio_dir / "link.wav").symlink_to(outside)
    cases += [
        ({"audio_path": str(audio_dir / "notes.wav")}, "AudioFormatError", "not a recognised audio file"),
        ({"audio_path": str(audio_dir / "empty.wav")}, "AudioFormatError", "empty"),
        ({"audio_path": str(audio_dir / "link.wav")}, "PathNotAllowedError", str(audio_dir)),
    ]
    for arguments, kind, needle in cases:
        got_kind, message = error_of(call(stt_daemon, "transcribe_audio", arguments))
        assert (got_kind, needle in message) == (kind, True), (arguments.keys(), got_kind, message)
    # And the appliance still serves everyone.
    r = call(stt_daemon, "transcribe_audio", {"audio_path": str(wav)})
    assert KEY_WORDS <= set(words(r["content"][0]["text"]))


def test_other_languages_need_a_multilingual_model(start_daemon, audio_dir):
    d = start_daemon({"stt": {"audio_dirs": [str(audio_dir)], "multilingual_model": ""}})
    wav = speak(audio_dir / "lang.wav")
    kind, message = error_of(call(d, "detect_language", {"audio_path": str(wav)}))
    assert kind == "LanguageError" and "tiny.en-q8_0" in message and "English only" in message
    for language in ("de", "auto"):
        kind, message = error_of(call(d, "transcribe_audio", {"audio_path": str(wav), "language": language}))
        assert kind == "LanguageError" and "English only" in message and f"`{language}`" in message
    # English is still heard.
    r = call(d, "transcribe_audio", {"audio_path": str(wav)})
    assert KEY_WORDS <= set(words(r["content"][0]["text"]))


def test_transcribe_batch_one_result_or_error_per_file(stt_daemon, audio_dir):
    good = speak(audio_dir / "batch1.wav", "Remind me to call my sister after dinner.")
    r = call(stt_daemon, "transcribe_batch", {"audio_paths": [str(good), str(audio_dir / "nope.wav"), "/etc/passwd"]})
    s = r["structuredContent"]
    assert (s["processed"], s["failed"]) == (1, 2), s
    assert {"sister", "dinner"} <= set(words(s["results"][0]["text"]))
    assert s["results"][1]["error"]["type"] == "FileNotFoundError"
    assert s["results"][2]["error"]["type"] == "PathNotAllowedError"
    kind, _ = error_of(call(stt_daemon, "transcribe_batch", {"audio_paths": []}))
    assert kind == "InvalidArgumentError"


def test_missing_model_is_a_state_and_a_clear_tool_error(start_daemon, tmp_path):
    d = start_daemon({"stt": {"model": str(tmp_path / "nowhere.bin")}})
    c = LineClient.tcp(d)
    c.initialize()
    assert status_of(c)["subsystems"]["stt"].startswith("unavailable: no speech-to-text model")
    r = c.call_tool("transcribe_voice", {}, id=2)["result"]
    assert r["isError"] and r["structuredContent"]["error"]["type"] == "ModelNotLoadedError"
    assert "hark models import" in r["content"][0]["text"]


def test_cli_transcribe_and_listen(stt_daemon, tmp_path):
    wav = speak(tmp_path / "cli.wav")
    r = subprocess.run([str(HARK), "--config", str(stt_daemon.config_path), "transcribe", str(wav)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert KEY_WORDS <= set(words(r.stdout))
    host = "%s:%d" % stt_daemon.tcp
    listener = subprocess.Popen([str(HARK), "listen", "--host", host, "--timeout", "10", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watcher = LineClient.tcp(stt_daemon)
    watcher.initialize()
    assert wait_for(lambda: status_of(watcher)["recording"])
    inject(stt_daemon, wav)
    out, err = listener.communicate(timeout=60)
    assert listener.returncode == 0, err
    assert KEY_WORDS <= set(words(json.loads(out)["text"]))


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_python_sdk_over_http(stt_daemon, audio_dir, tmp_path, mode):
    """The official SDK validates every successful result against the tool's
    output schema, and receives the progress notifications."""
    import anyio
    from mcp import Client

    wav = speak(audio_dir / f"sdk-{mode}.wav")

    async def main():
        async with Client(stt_daemon.url, mode=mode, cache=None) as client:
            steps = []

            async def on_progress(progress, total, message):
                steps.append((progress, total, message))

            async def speak_later():
                watcher = LineClient.tcp(stt_daemon)
                watcher.initialize()
                await anyio.to_thread.run_sync(lambda: wait_for(lambda: status_of(watcher)["recording"]))
                await anyio.to_thread.run_sync(inject, stt_daemon, wav)

            async with anyio.create_task_group() as tg:
                tg.start_soon(speak_later)
                heard = await client.call_tool("transcribe_voice", {"timeout_seconds": 10},
                                               progress_callback=on_progress)
            assert heard.is_error is not True, heard
            assert KEY_WORDS <= set(words(heard.content[0].text))
            assert [m for _, _, m in steps] == ["listening", "speech detected", "transcribing"]
            assert all(t == 3 for _, t, _ in steps)

            r = await client.call_tool("transcribe_audio", {
                "audio_base64": base64.b64encode(wav.read_bytes()).decode(),
                "output_format": "json", "word_timestamps": True})
            assert r.is_error is not True and KEY_WORDS <= set(words(r.structured_content["text"]))
            r = await client.call_tool("transcribe_batch", {"audio_paths": [str(wav), str(tmp_path / "x.wav")]})
            assert (r.structured_content["processed"], r.structured_content["failed"]) == (1, 1)
            r = await client.call_tool("transcribe_audio", {})
            assert r.is_error is True
            assert r.structured_content["error"]["type"] == "InvalidArgumentError"

    anyio.run(main)


def test_http_client_leaving_releases_the_microphone(stt_daemon):
    """A Streamable HTTP client that drops its connection while waiting for
    transcribe_voice: the microphone closes at once, not at the timeout."""
    import httpx

    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "leaver", "version": "1"}}}
    with httpx.Client(timeout=10) as http:
        r = http.post(stt_daemon.url, json=init, headers=headers)
        headers = dict(headers, **{"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"})
        http.post(stt_daemon.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    watcher = LineClient.tcp(stt_daemon)
    watcher.initialize()
    client = httpx.Client(timeout=30)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "transcribe_voice", "arguments": {"timeout_seconds": 30}}}
    response = client.send(client.build_request("POST", stt_daemon.url, json=call, headers=headers), stream=True)
    assert wait_for(lambda: status_of(watcher)["recording"])
    response.close()
    client.close()
    assert wait_for(lambda: not status_of(watcher)["recording"], timeout=2.0)
