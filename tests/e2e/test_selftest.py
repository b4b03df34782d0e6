"""`hark selftest` end to end (the module's tests share one daemon, the
conftest's `daemon`), against the real daemon on the simulated
board and the virtual sound card: it runs without anybody (the daemon moves
the simulated button and switch itself, and the test checks their events
came back through the classifier), measures what the virtual microphone
hears, and fails the steps that find something wrong — with the rest still
run and a non-zero exit code."""

import json
import math
import os
import struct
import subprocess

from harness import HARK, LineClient, write_wav

# A 440 Hz tone at amplitude 0.1: RMS 0.0707, −23.0 dBFS; peak −20 dBFS.
TONE_AMPLITUDE = 0.1
TONE_DBFS = 20 * math.log10(TONE_AMPLITUDE / math.sqrt(2))


def selftest(daemon, *args, timeout=120):
    return subprocess.run([str(HARK), "--config", str(daemon.config_path), "selftest", *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def tone_wav(path, seconds=4.5, rate=16000):
    frames = b"".join(
        struct.pack("<h", round(32767 * TONE_AMPLITUDE * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(int(seconds * rate)))
    return write_wav(path, rate, frames)


def steps_of(report):
    return {s["step"]: s for s in report["steps"]}


def test_every_step_passes_on_the_simulated_board(daemon, tmp_path):
    r = selftest(daemon, "--json", "--speech", str(tone_wav(tmp_path / "speech.wav")))
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    report = json.loads(r.stdout)
    assert report["passed"] is True, report
    assert report["board"].startswith("simulated ("), report
    steps = steps_of(report)
    assert list(steps) == ["board", "tone", "speech", "noise_floor", "level", "playback",
                           "press", "long_press", "mute", "lights", "link"]
    for name, step in steps.items():
        expected = "skipped" if name == "link" else "pass"
        assert step["result"] == expected, step

    info = steps["board"]["values"]
    assert info["simulated"] is True and info["profile"] is None, info
    assert info["button"] == "the simulated push-to-talk button", info
    assert info["mute"] == "the simulated mute switch" and info["lights"] == "12 simulated LEDs", info
    assert steps["tone"]["values"] == {"hz": 440.0, "seconds": 1.0}
    assert steps["speech"]["values"]["seconds"] > 1.0, steps["speech"]

    # The virtual microphone hears zeros when nothing is injected; the tone
    # injected as the person's speech reads at its own level.
    assert steps["noise_floor"]["values"]["noise_floor_dbfs"] == -120.0, steps["noise_floor"]
    level = steps["level"]["values"]
    assert abs(level["level_dbfs"] - TONE_DBFS) < 1.5, level
    assert abs(level["peak_dbfs"] + 20.0) < 1.5, level
    assert level["clipped"] == 0 and level["verdict"] == "good", level
    assert level["snr_db"] > 90, level
    assert steps["playback"]["values"]["seconds"] == 3.0, steps["playback"]

    # The simulated hand's moves came back classified, with plausible times:
    # a press after the 30 ms debounce, a long press after 800 ms held.
    press = [(e["event"], e["at_ms"]) for e in steps["press"]["values"]["events"]]
    assert [e for e, _ in press] == ["press", "release"], press
    assert 25 <= press[0][1] < 100 and 140 <= press[1][1] < 800, press
    long = [(e["event"], e["at_ms"]) for e in steps["long_press"]["values"]["events"]]
    assert [e for e, _ in long] == ["press", "long_press", "release"], long
    assert 25 <= long[0][1] < 100 and long[1][1] - long[0][1] >= 750, long
    mute = [e["event"] for e in steps["mute"]["values"]["events"]]
    assert mute == ["mute_on", "mute_off"], steps["mute"]

    lights = steps["lights"]["values"]
    assert lights["leds"] == 12
    shown = {s["status"]: s for s in lights["statuses"]}
    assert list(shown) == ["muted", "asking", "listening", "ringing", "error", "speaking", "transcribing",
                           "pairing", "timer", "message", "idle"], lights
    for status, seen in shown.items():
        if status == "idle":
            assert seen["lit"] == 0 and not seen["expected"], seen
        else:
            assert seen["expected"] and seen["lit"] >= 1 and seen["peak"] >= 64, seen
    assert steps["link"]["detail"] == "no microcontroller link in this board's profile"

    # The presses were the test's: no message for the agents was recorded,
    # and the board is back to idle, unmuted.
    log = daemon.log()
    assert "button pressed: the self-test takes it" in log
    assert "recording a message for the agents" not in log
    c = LineClient.tcp(daemon)
    c.initialize()
    try:
        status = c.call_tool("get_status", {})["result"]["structuredContent"]
    finally:
        c.close()
    assert "lights: idle; mute off" in status["subsystems"]["board"], status


def test_on_the_virtual_card_with_nobody_speaking_the_level_step_says_what_it_needs(daemon):
    # As after `appliance/run` on a machine without a sound card: nothing
    # plays into the virtual microphone, which is not a fault.
    r = selftest(daemon, "--json")
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    steps = steps_of(json.loads(r.stdout))
    assert steps["level"]["result"] == "skipped", steps["level"]
    assert "pass --speech FILE.wav" in steps["level"]["detail"], steps["level"]
    assert steps["playback"]["result"] == "skipped", steps["playback"]
    assert steps["noise_floor"]["result"] == "pass", steps["noise_floor"]
    assert all(s["result"] != "fail" for s in steps.values()), steps


def test_silence_fails_the_level_step_and_the_rest_still_run(daemon, tmp_path):
    # A microphone that hears nothing at all (here: zeros played into it).
    silent = write_wav(tmp_path / "silence.wav", 16000, b"\0\0" * 16000 * 4)
    r = selftest(daemon, "--skip", "tone,speech,lights", "--speech", str(silent))
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Hark self-test: simulated ("), r.stdout
    by_step = {line.split()[1]: line for line in lines if line.startswith("  ")}
    assert by_step["level"].split()[0] == "fail", r.stdout
    assert "speech at -120.0 dBFS: too low" in by_step["level"], r.stdout
    for name in ["board", "noise_floor", "playback", "press", "long_press", "mute"]:
        assert by_step[name].split()[0] == "pass", (name, r.stdout)
    for name in ["tone", "speech", "lights", "link"]:
        assert by_step[name].split()[0] == "skipped", (name, r.stdout)
    assert "left out (--skip)" in by_step["tone"]
    assert "the simulated hand pressed it; classified: press at" in by_step["press"], r.stdout
    assert lines[-1] == "6 passed, 1 failed, 4 skipped: see the failed steps above.", r.stdout
    # The prompts go to stderr, the report to stdout.
    assert "Level: after the chime, speak" in r.stderr, r.stderr


def link_profile(tmp_path, name, what, device):
    """A board profile whose only part is a microcontroller on `device`."""
    profile = tmp_path / f"{name}.toml"
    profile.write_text(f"""
name = "{name}"
description = "a test board: {what}"
mics = [[0.0, 0.0, 0.0]]

[audio]
cards = []
capture_channels = 1
playback_channels = 1
rate = 16000

[link]
device = "{device}"
baud = 115200
""")
    return profile


def test_a_missing_microcontroller_fails_its_steps_by_name(start_daemon, tmp_path):
    """A board whose only inputs are a microcontroller's, on a device that is
    not there: the link step says so, the press steps wait for a person and
    time out naming the button, and the steps that need neither pass."""
    device = tmp_path / "ttyHARK-nowhere"
    profile = link_profile(tmp_path, "link-board", "a microcontroller on a serial link, nothing else", device)
    d = start_daemon({"board": {"board": str(profile)}})
    r = selftest(d, "--json", "--timeout", "1",
                 "--skip", "speech,noise-floor,level,playback,long-press,mute")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    report = json.loads(r.stdout)
    assert report["passed"] is False
    steps = steps_of(report)
    assert steps["board"]["result"] == "pass" and steps["board"]["values"]["profile"] == "link-board"
    assert steps["tone"]["result"] == "pass", steps["tone"]
    link = steps["link"]
    assert link["result"] == "fail", link
    assert f"device {device} does not exist (board profile link-board" in link["detail"], link
    press = steps["press"]
    assert press["result"] == "fail", press
    assert press["detail"] == (
        f"no press seen within 1 s on the push-to-talk button on the microcontroller at {device} (link-board)"
    ), press
    # Nobody can see the microcontroller's own ring for Hark.
    assert steps["lights"]["result"] == "skipped", steps["lights"]
    assert report["counts"] == {"pass": 2, "fail": 2, "skipped": 7}, report["counts"]


def test_a_silent_microcontroller_fails_the_link_step(start_daemon, tmp_path):
    """The link's device is there (a pseudo-terminal) but nothing on it
    answers the handshake: the link step fails saying so."""
    master, slave = os.openpty()
    try:
        device = os.ttyname(slave)
        profile = link_profile(tmp_path, "silent-board", "a microcontroller that never answers", device)
        d = start_daemon({"board": {"board": str(profile)}})
        r = selftest(d, "--json", "--timeout", "1",
                     "--skip", "tone,speech,noise-floor,level,playback,press,long-press,mute,lights")
        assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
        link = steps_of(json.loads(r.stdout))["link"]
        assert link["result"] == "fail", link
        assert link["values"] == {"device": device, "present": True, "connected": False}, link
        assert "has not answered its hello" in link["detail"], link
    finally:
        os.close(master)
        os.close(slave)


def test_without_a_daemon_the_error_names_the_socket(tmp_path):
    socket = tmp_path / "run" / "nothing.sock"
    config = tmp_path / "hark.toml"
    config.write_text(f'[mcp.unix]\npath = "{socket}"\n')
    r = subprocess.run([str(HARK), "--config", str(config), "selftest"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    assert f"cannot reach the Hark daemon at {socket}" in r.stderr, r.stderr
    assert "is it running" in r.stderr, r.stderr
    assert r.stdout == ""


def test_the_self_test_is_not_reachable_over_the_network(daemon):
    c = LineClient.tcp(daemon)
    c.initialize()
    try:
        reply = c.request("hark/selftest", {"step": "board"}, id=5)
    finally:
        c.close()
    assert reply["error"]["code"] == -32601, reply


def test_bad_steps_are_clear_errors(daemon):
    u = LineClient.unix(daemon, timeout=10)
    u.initialize()
    try:
        reply = u.request("hark/selftest", {"step": "record", "ms": 60000}, id=6)
        assert reply["error"]["code"] == -32602 and "200–10000" in reply["error"]["message"], reply
        reply = u.request("hark/selftest", {"step": "dance"}, id=7)
        assert reply["error"]["code"] == -32602 and "dance" in reply["error"]["message"], reply
        reply = u.request("hark/selftest", {"step": "play", "clip": 999}, id=8)
        assert reply["error"]["code"] == -32010 and "recording is gone" in reply["error"]["message"], reply
    finally:
        u.close()
