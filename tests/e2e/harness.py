"""Starts the real `hark` binary on port 0 and talks to it over real sockets.

The daemon reports READY=1 and the addresses it bound (STATUS=serving tcp=…
http=… unix=…) through a real sd-notify datagram socket, which is how tests
learn the ports and also how the sd-notify protocol itself is checked.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal as sig_mod
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARK = Path(os.environ.get("HARK_BIN", REPO / "target" / "debug" / "hark"))
MODELS = REPO / "tests" / ".models" / "store"
# ONNX Runtime and the default voice, installed by appliance/setup-voices in tests/run.
VOICES = REPO / "tests" / ".voices" / "voices"
ONNXRUNTIME = REPO / "tests" / ".voices" / "lib" / "libonnxruntime.so"
# The wake word models and TensorFlow Lite, installed by appliance/setup-models.
WAKE = REPO / "tests" / ".models" / "wake"
# The tools the daemon serves, in tools/list order.
TOOLS = [
    "agent_settings",
    "cancel_scheduled",
    "choose",
    "confirm",
    "converse",
    "detect_language",
    "get_status",
    "install_voice",
    "list_captures",
    "list_models",
    "list_scheduled",
    "list_voices",
    "remove_voice",
    "segment_sentences",
    "set_volume",
    "speak_text",
    "stop_speaking",
    "synthesize_speech",
    "transcribe_audio",
    "transcribe_batch",
    "transcribe_voice",
    "wait_for_person",
]
VENV_WS_PYTHON = REPO / "tests" / ".venv-ws" / "bin" / "python"
NODE_BIN = REPO / "tests" / "node" / "node_modules" / ".bin"


SPEECH = REPO / "tests" / ".speech"


def clip(clip_id):
    """A recording from the real-speech set (tests/speech) and its transcript."""
    with open(SPEECH / "manifest.json", encoding="utf-8") as f:
        for line in f:
            entry = json.loads(line)
            if entry["id"] == clip_id:
                return SPEECH / entry["file"], entry["text"]
    raise KeyError(clip_id)


def die_with_parent():
    """In the child: get SIGTERM when the test process dies, so no daemon
    outlives an interrupted or timed-out test run."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, sig_mod.SIGTERM)


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def render_config(sections: dict) -> str:
    lines = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


@dataclass
class Daemon:
    tmp: Path
    overrides: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    notifications: list[str] = field(default_factory=list)
    tcp: tuple[str, int] | None = None
    http: tuple[str, int] | None = None
    https: tuple[str, int] | None = None
    wyoming: tuple[str, int] | None = None
    esphome: tuple[str, int] | None = None
    unix: str | None = None

    def config(self) -> dict:
        sections = {
            "service": {"log_level": "debug,rmcp=warn", "state_dir": str(self.tmp / "state")},
            "mcp": {},
            "mcp.tcp": {"listen": "127.0.0.1:0"},
            "mcp.http": {"listen": "127.0.0.1:0"},
            "mcp.unix": {"path": str(self.tmp / "run" / "mcp.sock")},
            # No multicast onto this machine's real network from a test;
            # the discovery tests turn it on for an interface they made.
            "discovery": {"enabled": False},
            # The default model, made by appliance/setup-models in tests/run.
            "stt": {"models_dir": str(MODELS)},
            "tts": {"voices_dir": str(VOICES), "onnxruntime": str(ONNXRUNTIME)},
            # Off unless a test turns it on (as in the shipped configuration
            # until docs/benchmarks.md says otherwise).
            "wake": {"models_dir": str(WAKE / "models"),
                     "runtime": str(WAKE / "lib" / "libtensorflowlite_c.so")},
            # This machine has no sound card: the virtual one, through ALSA.
            "audio.capture": {"device": "hark_virtual_mic"},
            "audio.playback": {"device": "hark_virtual_speaker", "rate": 22050, "channels": 1},
            "audio.virtual_card": {
                "enabled": True,
                "mic_fifo": str(self.tmp / "run" / "virtual-mic.fifo"),
                "inject_fifo": str(self.tmp / "run" / "inject.fifo"),
                "speaker_wav": str(self.tmp / "speaker.wav"),
            },
        }
        for section, values in self.overrides.items():
            sections.setdefault(section, {}).update(values)
        return sections

    def start(self, timeout: float = 20.0) -> "Daemon":
        self.tmp.mkdir(parents=True, exist_ok=True)
        config_path = self.config_path = self.tmp / "hark.toml"
        config_path.write_text(render_config(self.config()))
        notify_path = self.tmp / "notify.sock"
        if notify_path.exists():
            notify_path.unlink()
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(notify_path))
        self.notify.setblocking(False)
        env = {k: v for k, v in os.environ.items() if k not in ("RUST_LOG", "JOURNAL_STREAM", "ALSA_CONFIG_PATH")}
        env.update({"NOTIFY_SOCKET": str(notify_path)})
        env.update(self.env)
        self.log_path = self.tmp / "hark.log"
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(HARK), "--config", str(config_path), "run"],
            stdin=subprocess.DEVNULL,
            stdout=self.log_file,
            stderr=self.log_file,
            env=env,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hark exited with {self.proc.returncode}:\n{self.log()}")
            self.drain_notifications()
            if any("READY=1" in n for n in self.notifications):
                break
            time.sleep(0.02)
        else:
            raise RuntimeError(f"hark did not report READY=1:\n{self.log()}")
        status = next(n for n in self.notifications if "READY=1" in n)
        serving = re.search(r"STATUS=serving (.*)", status)
        assert serving, status
        for item in serving.group(1).split():
            kind, _, addr = item.partition("=")
            if kind in ("tcp", "http", "https", "wyoming", "esphome"):
                host, _, port = addr.rpartition(":")
                setattr(self, kind, (host, int(port)))
            elif kind == "unix":
                self.unix = addr
        return self

    def drain_notifications(self) -> list[str]:
        new = []
        while self.notify.fileno() != -1:
            try:
                data = self.notify.recv(4096)
            except (socket.timeout, BlockingIOError):
                break
            new.append(data.decode())
        self.notifications.extend(new)
        return new

    @property
    def url(self) -> str:
        host, port = self.http
        return f"http://{host}:{port}/mcp"

    @property
    def ws_url(self) -> str:
        host, port = self.http
        return f"ws://{host}:{port}/mcp"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def send_signal(self, sig=sig_mod.SIGTERM):
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, sig=sig_mod.SIGTERM, timeout: float = 5.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"hark did not stop within {timeout}s:\n{self.log()}")
        finally:
            self.log_file.close()
            self.drain_notifications()
            self.notify.close()


class LineClient:
    """A newline-delimited JSON-RPC client over TCP or a Unix socket."""

    # How long an answer may take: a call doing model work (whisper on an
    # 11 s recording) took over 10 s on two busy cores with two test files
    # running at once; a hung call still fails within the minute.
    def __init__(self, sock: socket.socket, timeout: float = 60.0):
        self.sock = sock
        self.sock.settimeout(timeout)
        self.buf = b""

    @classmethod
    def tcp(cls, daemon: Daemon, **kw) -> "LineClient":
        return cls(socket.create_connection(daemon.tcp), **kw)

    @classmethod
    def unix(cls, daemon: Daemon, **kw) -> "LineClient":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(daemon.unix)
        return cls(s, **kw)

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def send(self, message: dict):
        self.send_raw(json.dumps(message).encode() + b"\n")

    def recv(self) -> dict:
        line = self.recv_line()
        return json.loads(line)

    def recv_line(self) -> bytes:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by hark")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def request(self, method: str, params: dict | None = None, id=1) -> dict:
        self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}})
        return self.recv()

    def initialize(self, name: str = "e2e") -> dict:
        reply = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": name, "version": "1"},
            },
            id=0,
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def call_tool(self, name: str, arguments: dict | None = None, id=1) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments or {}}, id=id)

    def closed(self, timeout: float = 5.0) -> bool:
        """True once the server has closed the connection."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True

    def close(self):
        # Shut down first: a thread still blocked reading this socket keeps
        # it open past close() (no FIN is sent), and the daemon would go on
        # serving a call nobody reads, a wait_for_person taking the next
        # message among them.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed by the daemon
        self.sock.close()


def response(c, id):
    """Reads messages until the response to `id`; returns it and the
    notifications seen on the way."""
    notes = []
    while True:
        m = c.recv()
        if m.get("id") == id and "method" not in m:
            return m, notes
        notes.append(m)


def start_listening(daemon, id, arguments=None, meta=None, timeout=120):
    """Sends transcribe_voice over TCP and waits until the microphone is
    open; the caller's client and a second one for status."""
    c = LineClient.tcp(daemon, timeout=timeout)
    c.initialize()
    params = {"name": "transcribe_voice", "arguments": {"timeout_seconds": 10, **(arguments or {})}}
    if meta:
        params["_meta"] = meta
    c.send({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    watcher = LineClient.tcp(daemon)
    watcher.initialize()
    assert wait_for(lambda: status_of(watcher)["recording"], 10)
    return c, watcher


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def after_the_chime(daemon, within=1.0):
    """Waits as a person does for the listening chime to end: with half
    duplex the speaker mutes the microphone while it plays, so words said
    over it are not heard. The light shows before the chime starts, so the
    chime is first seen playing (or `within` seconds pass: it lasts 175 ms
    and a poll can miss it), then seen over."""
    wait_for(lambda: status(daemon)["speaking"], within)
    assert wait_for(lambda: not status(daemon)["speaking"], 5), "the chime ended"


def status_of(client: LineClient, id=99) -> dict:
    reply = client.call_tool("get_status", id=id)
    return reply["result"]["structuredContent"]


# ---- shared by the conversation and room tests -------------------------------


def words(text):
    return set("".join(c.lower() if c.isalnum() else " " for c in text).split())


def heard(text, expected):
    """At least half of the sentence's key words (rounded up) came through:
    one of two, two of three or four, four of eight. These tests check what
    reaches whom, not a model's accuracy (docs/benchmarks.md measures that).
    A model's words differ from machine to machine (ONNX Runtime's and
    whisper.cpp's kernels differ by CPU features and architecture) and
    piper's default voice differs every run, so up to half of the words
    misheard must pass; an empty transcript or one in another language
    still fails."""
    got = words(text)
    return len(expected & got) >= max(1, (len(expected) + 1) // 2)


def edit_distance(ref, hyp):
    """Word errors (substitutions, deletions and insertions) between two
    lists of words: the Levenshtein distance over words."""
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[len(hyp)]


def ask(daemon, name, tool, arguments, timeout=90):
    """An agent's call made in a thread; `answered` waits for its result."""
    c = client(daemon, name, timeout)
    t, out = in_thread(call, c, tool, arguments, 1)
    return c, t, out


def answered(c, t, out, timeout=90):
    t.join(timeout)
    c.close()
    assert not t.is_alive(), "the call returned"
    assert "error" not in out, out
    return out["value"]


def speak(tmp_path, name, text):
    """`text` spoken by espeak-ng, as a WAV file to inject."""
    path = tmp_path / f"{name}.wav"
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True)
    return path


def write_wav(path, rate, frames):
    """16-bit mono PCM `frames` (bytes) as a WAV file; its path."""
    import wave

    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames)
    return path


def seconds(wav):
    import wave

    with wave.open(str(wav)) as w:
        return w.getnframes() / w.getframerate()


def hark(daemon, *args, timeout=60):
    """Runs the `hark` CLI against `daemon`; it must succeed."""
    r = subprocess.run([str(HARK), "--config", str(daemon.config_path), *args],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def new_token(daemon, name, scopes="listen,speak", replace=False):
    """A token made on the appliance (`hark token create`, over the Unix socket)."""
    args = ["token", "create", name, "--scopes", scopes, "--json"] + (["--replace"] if replace else [])
    made = json.loads(hark(daemon, *args).stdout)
    assert made["info"]["name"] == name
    return made["token"]


def status(daemon):
    """get_status over a connection of its own."""
    c = LineClient.tcp(daemon, timeout=10)
    c.initialize("watcher")
    try:
        return status_of(c)
    finally:
        c.close()


def client(daemon, name, timeout=90.0):
    c = LineClient.tcp(daemon, timeout=timeout)
    c.initialize(name)
    return c


def call(c, tool, arguments, id=1):
    """tools/call on a line client; the result."""
    c.send({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}})
    reply, _ = response(c, id)
    return reply["result"]


def in_thread(fn, *args):
    """Runs `fn` on a thread; its value (or error) lands in the dict."""
    import threading

    out = {}

    def run():
        try:
            out["value"] = fn(*args)
        except Exception as e:  # reported by the test through `out`
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out
