"""The board end to end on this machine, which has no GPIO: `board = "auto"`
picks the simulated board, `hark button` and `hark mute` move its button and
switch through the running daemon, and the lights follow the appliance's
state (get_status shows them)."""

import subprocess
import threading
import time

import pytest

from harness import HARK, REPO, Daemon, LineClient, status_of, wait_for

LONG = " ".join([
    "Once upon a time there was a small house at the edge of a quiet forest.",
    "Every morning the old baker opened his shutters and lit the oven.",
    "The smell of fresh bread drifted across the fields to the village.",
    "Children stopped on their way to school to press their noses to the glass.",
])


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("hark-board")).start()
    yield d
    code = d.stop(timeout=15)
    assert code == 0, d.log()


def client(daemon, timeout=60.0):
    c = LineClient.tcp(daemon, timeout=timeout)
    c.initialize()
    return c


def board_status(daemon) -> str:
    c = client(daemon, 10)
    try:
        return status_of(c)["subsystems"]["board"]
    finally:
        c.close()


def hark(daemon, *args, timeout=30):
    return subprocess.run([str(HARK), "--config", str(daemon.config_path), *args],
                          capture_output=True, text=True, timeout=timeout)


def wait_lights(daemon, status, timeout=10):
    assert wait_for(lambda: f"lights: {status};" in board_status(daemon), timeout), board_status(daemon)


def test_auto_picks_the_simulated_board_here(board):
    text = board_status(board)
    assert text.startswith("simulated ("), text
    assert "lights: idle" in text and "mute off" in text, text
    assert "using the simulated board" in board.log()


def test_mute_closes_the_microphone(board):
    r = hark(board, "mute", "on")
    assert r.returncode == 0 and r.stdout.strip() == "mute on", (r.returncode, r.stdout, r.stderr)
    wait_lights(board, "muted")
    assert "mute on" in board_status(board)
    c = client(board)
    try:
        reply = c.call_tool("transcribe_voice", {"timeout_seconds": 2})["result"]
    finally:
        c.close()
    assert reply["isError"] is True, reply
    assert "muted" in reply["content"][0]["text"], reply
    r = hark(board, "mute", "off")
    assert r.returncode == 0 and r.stdout.strip() == "mute off", r.stderr
    wait_lights(board, "idle")


def test_the_listening_light_is_on_while_the_microphone_is_open(board):
    c = client(board)
    result = {}

    def listen():
        result["reply"] = c.call_tool("transcribe_voice", {"timeout_seconds": 3}, id=7)

    t = threading.Thread(target=listen)
    t.start()
    try:
        wait_lights(board, "listening")
    finally:
        t.join(30)
        c.close()
    assert result["reply"]["result"]["structuredContent"]["end_reason"] == "timeout", result
    wait_lights(board, "idle")


def test_muting_mid_recording_ends_it_with_the_muted_error(board):
    c = client(board)
    result = {}

    def listen():
        result["reply"] = c.call_tool("transcribe_voice", {"timeout_seconds": 20}, id=8)

    t = threading.Thread(target=listen)
    t.start()
    try:
        wait_lights(board, "listening")
        assert hark(board, "mute", "on").returncode == 0
        t.join(10)
        assert not t.is_alive(), "the recording ended when the mute went on"
        reply = result["reply"]["result"]
        assert reply["isError"] is True and "muted" in reply["content"][0]["text"], reply
        wait_lights(board, "muted")
    finally:
        hark(board, "mute", "off")
        t.join(30)
        c.close()
    wait_lights(board, "idle")


def test_a_press_while_speaking_stops_the_speech(board):
    c = client(board)
    try:
        reply = c.call_tool("speak_text", {"text": LONG})["result"]
        assert reply.get("isError") is not True, reply
        assert wait_for(lambda: status_of(c)["speaking"], 30), "it speaks"
        wait_lights(board, "speaking")
        r = hark(board, "button", "press")
        assert r.returncode == 0, r.stderr
        assert wait_for(lambda: not status_of(c)["speaking"], 5), "the press silenced the speaker"
        # The sentence being made when the press came is finished, then
        # dropped: nothing more is said.
        assert wait_for(lambda: " 0 queued" in status_of(c)["subsystems"]["tts"], 20), status_of(c)
        assert not status_of(c)["speaking"]
    finally:
        c.close()
    assert "button pressed: speech stopped" in board.log()
    wait_lights(board, "idle")


def speak_wav(path, text):
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True)
    return path


def test_push_to_talk_holds_the_recording_until_release(board, tmp_path):
    wav = speak_wav(tmp_path / "ptt.wav", "What is the weather going to be like tomorrow morning?")
    c = client(board)
    result = {}

    def listen():
        result["reply"] = c.call_tool("transcribe_voice", {"timeout_seconds": 2}, id=21)

    t = threading.Thread(target=listen)
    t.start()
    try:
        wait_lights(board, "listening")
        assert hark(board, "button", "hold").returncode == 0
        r = hark(board, "inject", str(wav), timeout=60)
        assert r.returncode == 0, r.stderr
        # The sentence (about 3 s), the detector's hang-over (0.8 s) and
        # the 2 s timeout are all over: held, the microphone stays open.
        time.sleep(5)
        assert t.is_alive(), "the held recording outlasts the end of speech and the timeout"
        assert "lights: listening;" in board_status(board)
        assert hark(board, "button", "release").returncode == 0
        t.join(60)
        assert not t.is_alive(), "releasing the button ends the utterance"
    finally:
        hark(board, "button", "release")
        t.join(60)
        c.close()
    reply = result["reply"]["result"]
    assert not reply.get("isError"), reply
    s = reply["structuredContent"]
    assert s["end_reason"] == "stopped" and s["speech"] is True, s
    said = set("".join(ch.lower() if ch.isalnum() else " " for ch in s["text"]).split())
    assert {"weather", "tomorrow", "morning"} <= said, s["text"]
    assert "push-to-talk released: utterance ended" in board.log()
    wait_lights(board, "idle")


def test_a_press_when_quiet_opens_the_microphone_for_the_person(start_daemon):
    """Nobody listens and Hark is quiet: a tap opens the microphone for a
    message to the agents (the voice inbox, tests/e2e/test_conversation.py).
    With nothing said it closes again after inbox.listen_seconds and keeps
    nothing; it stopped nothing and held nothing."""
    d = start_daemon({"inbox": {"listen_seconds": 1}})
    r = hark(d, "button", "press")
    assert r.returncode == 0, r.stderr
    wait_lights(d, "listening", 5)
    wait_lights(d, "idle", 10)
    # The lights go idle as the microphone closes, a moment before the
    # listener's verdict is logged.
    assert wait_for(lambda: "no speech after the press; nothing kept" in d.log(), 10), d.log()[-3000:]
    log = d.log()
    assert "button pressed with nobody listening: recording a message for the agents" in log
    assert "speech stopped" not in log and "push-to-talk released" not in log
    c = client(d)
    try:
        assert status_of(c)["messages_waiting"] == 0
    finally:
        c.close()


def test_the_error_light_shows_when_speech_to_text_is_unavailable(start_daemon, tmp_path):
    d = start_daemon({"stt": {"model": str(tmp_path / "nowhere.bin")}})
    wait_lights(d, "error")
    # Disabled on purpose is no error.
    d = start_daemon({"stt": {"enabled": False}})
    wait_lights(d, "idle")


def test_the_board_is_not_reachable_over_the_network(board):
    """No agent may press the button or unmute the microphone: the board's
    controls are served on the Unix socket only, and are no tool."""
    c = client(board)
    try:
        reply = c.request("hark/board", {"mute": True}, id=9)
        assert reply["error"]["code"] == -32601, reply
        names = [t["name"] for t in c.request("tools/list", {}, id=10)["result"]["tools"]]
    finally:
        c.close()
    assert not any("mute" in n or "button" in n for n in names), names
    assert "mute off" in board_status(board)


def test_bad_board_requests_are_clear_errors(board):
    u = LineClient.unix(board, timeout=10)
    u.initialize()
    try:
        reply = u.request("hark/board", {"button": "smash"}, id=11)
        assert reply["error"]["code"] == -32602 and "press|hold|release" in reply["error"]["message"], reply
        reply = u.request("hark/board", {"button": "press", "mute": True}, id=12)
        assert reply["error"]["code"] == -32602 and "exactly one" in reply["error"]["message"], reply
    finally:
        u.close()


def test_a_pi_profile_here_is_a_clear_error_and_the_appliance_still_serves(start_daemon):
    d = start_daemon({"board": {"board": "respeaker-2mic"}})
    text = board_status(d)
    assert text.startswith("unavailable:") and "not a Raspberry Pi" in text, text
    r = hark(d, "button", "press")
    assert r.returncode != 0 and "no simulated board" in r.stderr and "not a Raspberry Pi" in r.stderr, \
        (r.returncode, r.stderr)


def test_a_profile_on_a_missing_gpio_chip_is_a_clear_error_and_the_appliance_still_serves(start_daemon, tmp_path):
    # Lines on a chip the profile names need no Raspberry Pi, only the chip:
    # this machine has no GPIO chip at all, so the board says so, by name.
    profile = (REPO / "board" / "profiles" / "generic-pi.toml").read_text().replace(
        'name = "generic-pi"', 'name = "on-a-sim-chip"\ngpio_chip = "hark-sim"')
    path = tmp_path / "on-a-sim-chip.toml"
    path.write_text(profile)
    d = start_daemon({"board": {"board": str(path)}})
    text = board_status(d)
    assert text.startswith("unavailable:") and "on-a-sim-chip" in text, text
    assert "not a Raspberry Pi" not in text, text
    assert "there is no GPIO chip" in text, text
    # The rest of the appliance serves: speech out works.
    c = client(d)
    try:
        reply = c.call_tool("speak_text", {"text": "Still here.", "wait": True})
        assert not reply.get("isError"), reply
    finally:
        c.close()


def test_sigterm_turns_the_lights_off(start_daemon):
    d = start_daemon()
    assert hark(d, "mute", "on").returncode == 0
    wait_lights(d, "muted")
    assert d.stop() == 0, d.log()
    log = d.log()
    assert "received SIGTERM" in log and "board stopped: LEDs dark, pins released" in log, log[-2000:]
