"""The audio engine inside the daemon, on the virtual sound card."""

import subprocess
import time

from harness import HARK, LineClient, status_of


def audio_state(daemon) -> str:
    c = LineClient.tcp(daemon)
    c.initialize()
    state = status_of(c)["subsystems"]["audio"]
    c.close()
    return state


def test_capturing_on_the_virtual_card(daemon):
    assert audio_state(daemon) == "capturing; speaker ready"


def test_missing_capture_device_is_a_state(start_daemon):
    d = start_daemon(
        {
            "audio.capture": {"device": "hw:CARD=NoSuchCard"},
            "audio.playback": {"device": "hw:CARD=NoSuchCard"},
            "audio.virtual_card": {"enabled": False},
        }
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "starting" in audio_state(d):
        time.sleep(0.1)
    assert audio_state(d) == "capture device missing; speaker missing"
    # Everything else keeps working, and the daemon does not spin.
    time.sleep(1)
    assert d.proc.poll() is None
    assert "ALSA lib" not in d.log(), "alsa-lib's own stderr lines are routed to the log"


def test_disabled_audio(start_daemon):
    d = start_daemon({"audio": {"enabled": False}})
    assert audio_state(d) == "disabled"


def test_inject(daemon, tmp_path):
    wav = tmp_path / "hello.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), "hello from the kitchen"], check=True)
    out = subprocess.run(
        [str(HARK), "--config", str(daemon.config_path), "inject", str(wav)],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert "injected" in out.stdout


def test_inject_without_daemon(tmp_path):
    cfg = tmp_path / "hark.toml"
    cfg.write_text(f'[audio.virtual_card]\nenabled = true\ninject_fifo = "{tmp_path / "nothing.fifo"}"\n')
    wav = tmp_path / "x.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), "x"], check=True)
    out = subprocess.run([str(HARK), "--config", str(cfg), "inject", str(wav)], capture_output=True, text=True)
    assert out.returncode == 1 and "nothing reads" in out.stderr
    out = subprocess.run([str(HARK), "--config", str(cfg), "inject", str(tmp_path / "missing.wav")], capture_output=True, text=True)
    assert out.returncode == 1 and "missing.wav" in out.stderr


def test_set_volume(daemon):
    c = LineClient.tcp(daemon)
    c.initialize()
    r = c.call_tool("set_volume", {"volume": 30}, id=1)["result"]
    assert r["structuredContent"] == {"volume": 30, "hardware_control": None}
    assert status_of(c, id=2)["volume"] == 30
    r = c.call_tool("set_volume", {"volume": 150}, id=3)["result"]
    assert r["isError"] is True and "0–100" in r["content"][0]["text"]
    assert status_of(c, id=4)["volume"] == 30
    r = c.call_tool("set_volume", {"volume": "loud"}, id=5)["result"]
    assert r["isError"] is True and "loud" in r["content"][0]["text"]
    r = c.call_tool("set_volume", {}, id=6)["result"]
    assert r["isError"] is True and "volume" in r["content"][0]["text"]
    c.call_tool("set_volume", {"volume": 80}, id=7)


def test_set_volume_without_speaker(start_daemon):
    d = start_daemon({"audio": {"enabled": False}})
    c = LineClient.tcp(d)
    c.initialize()
    r = c.call_tool("set_volume", {"volume": 10}, id=1)["result"]
    assert r["isError"] is True and "no speaker" in r["content"][0]["text"]
    assert status_of(c)["volume"] is None
