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


if __name__ == "__main__":
    ndjson()
    audio()
    config()
    for d in sorted(CORPUS.iterdir()):
        print(d.name, len(list(d.iterdir())))
