"""Writes the fuzz targets' seed corpora into tests/fuzz/corpus/<target>/
from what the tests and the docs already use: the JSON-RPC lines agents
send, sound files in every format `transcribe_audio` accepts, and the
configuration files the package, `appliance/run` and the README show.
Run with the tests' venv (it has soundfile): the files are committed, so
this is only needed to remake them.

    tests/.venv/bin/python tests/fuzz/seeds/make.py
"""

import io
import json
import math
import pathlib
import re
import struct

import soundfile

ROOT = pathlib.Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def ndjson():
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}
    lines = [
        init,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_status", "arguments": {}}},
        {"jsonrpc": "2.0", "id": "a", "method": "hark/auth", "params": {"token": "hark_" + "A" * 43}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "speak_text", "arguments": {"text": "Hello there", "_meta": {"hark/token": "x"}}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "transcribe_voice", "arguments": {"timeout_seconds": 5}}},
        {"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": "hark://inbox"}},
        [{"jsonrpc": "2.0", "id": 6, "method": "ping"}],
    ]
    text = b"\n".join(json.dumps(m).encode() for m in lines) + b"\n"
    put("ndjson", "session", b"\xff\x10" + text)
    put("ndjson", "small-limit", b"\x04\x01" + text)
    put("ndjson", "malformed", b"\x40\x05" + b'{"jsonrpc": "2.0", "id": 1,\n\xef\xbb\xbf{}\n\n[]\n{"id":null}\n\xc3\x28\n')


def audio():
    rate = 16000
    tone = [0.3 * math.sin(2 * math.pi * 440 * i / rate) for i in range(rate // 10)]
    for fmt, subtype, ext in [("WAV", "PCM_16", "wav"), ("WAV", "PCM_U8", "u8.wav"),
                              ("WAV", "FLOAT", "f32.wav"), ("WAV", "PCM_24", "s24.wav"),
                              ("FLAC", "PCM_16", "flac"), ("OGG", "VORBIS", "ogg"),
                              ("OGG", "OPUS", "opus"), ("MP3", "MPEG_LAYER_III", "mp3")]:
        buf = io.BytesIO()
        r = 48000 if subtype == "OPUS" else rate
        samples = tone if r == rate else [0.3 * math.sin(2 * math.pi * 440 * i / r) for i in range(r // 10)]
        soundfile.write(buf, samples, r, format=fmt, subtype=subtype)
        put("audio", ext, buf.getvalue())
    # A stereo WAV and one whose header lies about its length.
    buf = io.BytesIO()
    soundfile.write(buf, [[s, -s] for s in tone], rate, format="WAV", subtype="PCM_16")
    put("audio", "stereo.wav", buf.getvalue())
    wav = bytearray(buf.getvalue())
    wav[40:44] = struct.pack("<I", 0x7FFFFFF0)
    put("audio", "long-header.wav", bytes(wav))


def config():
    put("config", "package.toml", (ROOT / "image" / "deb" / "hark.toml").read_bytes())
    readme = (ROOT / "README.md").read_text()
    for i, block in enumerate(re.findall(r"```toml\n(.*?)```", readme, re.S)):
        put("config", f"readme-{i}.toml", block.encode())
    run = (ROOT / "appliance" / "run").read_text()
    blocks = re.findall(r"<<TOML\n(.*?)\nTOML", run, re.S)
    written = "\n".join(blocks).replace("$PWD", "/srv/hark").replace("$rundir", "/run/hark").replace("\\`", "`")
    put("config", "appliance-run.toml", written.encode())
    put("config", "ranges.toml", b'[mcp]\nmax_connections = 8\n[mcp.unpaired]\nper_address = 2\n'
        b'[service]\nhostname = "kitchen"\n[wake]\nenabled = true\n')


def wyoming():
    """Events as Home Assistant's client writes them (header line, data,
    payload), two bytes in front: the limits and the size of each read."""
    def event(kind, data=None, payload=b""):
        header = {"type": kind, "version": "1.10.2"}
        body = json.dumps(data).encode() if data else b""
        if body:
            header["data_length"] = len(body)
        if payload:
            header["payload_length"] = len(payload)
        return json.dumps(header).encode() + b"\n" + body + payload

    fmt = {"rate": 16000, "width": 2, "channels": 1, "timestamp": 0}
    tone = b"".join(struct.pack("<h", int(8000 * math.sin(i / 8))) for i in range(512))
    put("wyoming", "describe", b"\xff\x07" + event("describe"))
    put("wyoming", "transcribe", b"\xff\x10" + event("transcribe", {"language": "en"})
        + event("audio-start", fmt) + event("audio-chunk", fmt, tone) + event("audio-chunk", fmt, tone)
        + event("audio-stop", {"timestamp": 64}))
    stereo = {"rate": 48000, "width": 4, "channels": 2}
    put("wyoming", "transcribe-48k-stereo", b"\xff\x03" + event("transcribe") + event("audio-start", stereo)
        + event("audio-chunk", stereo, tone * 2) + event("audio-stop"))
    put("wyoming", "synthesize", b"\x40\x20" + event("synthesize", {
        "text": "The kitchen lights are off.", "voice": {"name": "en_US-joe-medium"}}) + event("ping"))
    put("wyoming", "synthesize-stream", b"\x80\x05" + event("synthesize-start", {"voice": {"name": "joe"}})
        + event("synthesize-chunk", {"text": "Grüße. Das Brot"}) + event("synthesize-chunk", {"text": " ist fertig!\n"})
        + event("synthesize", {"text": "Grüße. Das Brot ist fertig!"}) + event("synthesize-stop"))
    put("wyoming", "inline-data", b"\xff\x01" + b'{"type": "synthesize", "data": {"text": "fail now"}}\n'
        + b'{"type": "audio-chunk", "data": {"rate": 16000, "width": 2, "channels": 1}, "payload_length": 3}\nabc')
    loud = tone[:100] + struct.pack("<h", 30000) + tone[102:]
    put("wyoming", "detect", b"\xff\x09" + event("detect", {"names": ["loud"]}) + event("audio-start", fmt)
        + event("audio-chunk", fmt, tone) + event("audio-chunk", fmt, loud) + event("audio-stop")
        + event("detect", {"names": ["nope"]}) + event("audio-start", fmt) + event("audio-stop"))
    put("wyoming", "broken", b"\x02\x02" + b'{"type": "x", "payload_length": 999999}\n' + b"[]\n")


def esphome():
    """Home Assistant's side of the ESPHome API as aioesphomeapi frames it
    (a zero byte, varint length and type, a protobuf message), one byte in
    front: the size of each read."""
    def varint(n):
        out = b""
        while n >= 0x80:
            out += bytes([(n & 0x7F) | 0x80])
            n >>= 7
        return out + bytes([n])

    def field(number, value):
        if isinstance(value, bool) or isinstance(value, int):
            return varint(number << 3) + varint(int(value))
        value = value.encode() if isinstance(value, str) else value
        return varint(number << 3 | 2) + varint(len(value)) + value

    def frame(kind, *fields):
        body = b"".join(fields)
        return b"\x00" + varint(len(body)) + varint(kind) + body

    hello = frame(1, field(1, "Home Assistant 2026.12.0"), field(2, 1), field(3, 14))
    put("esphome", "connect", b"\x07" + hello + frame(9) + frame(11) + frame(20) + frame(34) + frame(38)
        + frame(89, field(1, True), field(2, 1)) + frame(7) + frame(5))
    put("esphome", "wake-words", b"\x3c" + hello + frame(121) + frame(123, field(1, "hey_jarvis"), field(1, "nope"))
        + frame(121))
    put("esphome", "announce", b"\x10" + hello + frame(119, field(1, "http://ha.local/x.mp3"),
        field(2, "The washing is done."), field(4, True)) + frame(119, field(1, "http://ha.local/y.mp3")) + frame(7))
    put("esphome", "timers", b"\x05" + hello
        + frame(115, field(1, 0), field(2, "t1"), field(3, "pasta"), field(4, 600), field(5, 600), field(6, True))
        + frame(115, field(1, 1), field(2, "t1"), field(3, "pasta"), field(4, 600), field(5, 500), field(6, False))
        + frame(115, field(1, 2), field(2, "t1"), field(3, "pasta"), field(4, 600), field(5, 0), field(6, False)))
    put("esphome", "encrypted", b"\x01" + b"\x01\x00\x00")
    put("esphome", "no-hello", b"\x02" + frame(9))
    put("esphome", "bad-payload", b"\x03" + hello + frame(123, b"\x0a\xff\xff"))


if __name__ == "__main__":
    esphome()
    wyoming()
    ndjson()
    audio()
    config()
    for d in sorted(CORPUS.iterdir()):
        print(d.name, len(list(d.iterdir())))
