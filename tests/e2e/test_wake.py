"""The wake word end to end: the real binary, microWakeWord's okay_nabu on
TensorFlow Lite, espeak-ng saying it into the virtual sound card, and an
agent waiting for the person over raw TCP. A synthetic voice here checks the
plumbing; how often the word is missed or heard where nobody said it is
measured on recorded people by `hark-bench wake` (docs/benchmarks.md)."""

import subprocess
import threading
import time
import wave

import pytest

from harness import LineClient, call, client, hark, heard, status, wait_for, words, write_wav

WAKE = {"wake": {"enabled": True}}
ASK = "What is on my calendar for tomorrow morning?"


def espeak(path, text):
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True)
    with wave.open(str(path)) as w:
        return w.getframerate(), w.readframes(w.getnframes())


def clip(tmp_path, name, *parts):
    """One WAV of espeak-ng's words and silences (numbers: seconds)."""
    rate, audio = None, b""
    for i, part in enumerate(parts):
        if isinstance(part, str):
            rate, said = espeak(tmp_path / f"{name}-{i}.wav", part)
            audio += said
        else:
            audio += b"\0\0" * int((rate or 22050) * part)
    return write_wav(tmp_path / f"{name}.wav", rate, audio)


def wake_status(daemon):
    return status(daemon)["wake"]


def lights(daemon):
    return status(daemon)["subsystems"]["board"].split("lights: ")[1].split(";")[0]


def waiting_agent(daemon, name="wake-agent", timeout=40):
    """An agent waiting for the person; the result lands in `out`."""
    c = client(daemon, name)
    out = {}

    def wait():
        out["result"] = call(c, "wait_for_person", {"timeout_seconds": timeout}, 5)

    t = threading.Thread(target=wait)
    t.start()
    assert wait_for(lambda: "1 agent(s) waiting" in status(daemon)["subsystems"]["inbox"], 10)
    return c, t, out


@pytest.mark.parametrize("pause", [1.5, 0.3])
def test_the_wake_word_starts_the_persons_turn_and_is_not_kept(start_daemon, tmp_path, pause):
    """The person says the word, waits for the chime (or does not: a
    breath's pause), and speaks."""
    d = start_daemon(WAKE)
    assert wait_for(lambda: wake_status(d)["state"] == "listening", 10), wake_status(d)
    w = wake_status(d)
    assert w["words"] == ["okay_nabu"] and w["sensitivity"] == "default" and w["detections"] == []
    c, t, out = waiting_agent(d)
    hark(d, "inject", str(clip(tmp_path, "wake", 0.5, "Okay Nabu.", pause, ASK, 1.0)))
    t.join(60)
    c.close()
    s = out["result"]["structuredContent"]
    assert s["received"] is True, s
    said = words(s["text"])
    assert heard(s["text"], {"calendar", "tomorrow", "morning"}), s["text"]
    # The recording starts where the word ended: neither it nor anything
    # before it is in the message.
    assert not said & {"okay", "nabu", "ok"}, s["text"]
    w = wake_status(d)
    [detection] = w["detections"]
    assert detection["word"] == "okay_nabu" and detection["started"] is True, detection
    # A detection is reported only when its window mean passes the model's
    # cutoff (0.85), so comparing with the cutoff checks nothing; the score
    # reported is that mean, a probability.
    assert 0 < detection["score"] <= 1 and detection["at"].endswith("Z"), detection
    log = d.log()
    assert "wake word heard with nobody listening: recording a message for the agents" in log
    assert "last heard okay_nabu" in status(d)["subsystems"]["wake"]


def test_the_wake_word_alone_listens_then_keeps_nothing(start_daemon, tmp_path):
    d = start_daemon({**WAKE, "inbox": {"listen_seconds": 2}})
    assert wait_for(lambda: wake_status(d)["state"] == "listening", 10)
    hark(d, "inject", str(clip(tmp_path, "alone", 0.5, "Okay Nabu.", 0.5)))
    assert wait_for(lambda: lights(d) == "listening", 10), "the listening light"
    assert wait_for(lambda: lights(d) == "idle", 15)
    # Logged just after the light goes back to idle.
    assert wait_for(lambda: "no speech after the press; nothing kept" in d.log(), 5)
    assert status(d)["messages_waiting"] == 0
    assert [x["started"] for x in wake_status(d)["detections"]] == [True]


def test_nothing_wakes_while_muted_and_the_detector_does_not_run(start_daemon, tmp_path):
    d = start_daemon(WAKE)
    assert wait_for(lambda: wake_status(d)["state"] == "listening", 10)
    wav = clip(tmp_path, "muted", 0.5, "Okay Nabu.", 0.5)
    hark(d, "mute", "on")
    assert wait_for(lambda: wake_status(d)["state"] == "muted", 5), wake_status(d)
    hark(d, "inject", str(wav))
    # The clip lasts under 2 s; nothing was heard, nothing opened.
    assert not wait_for(lambda: wake_status(d)["detections"] or status(d)["recording"], 4)
    hark(d, "mute", "off")
    assert wait_for(lambda: wake_status(d)["state"] == "listening", 5)
    hark(d, "inject", str(wav))
    assert wait_for(lambda: wake_status(d)["detections"], 10), "heard once unmuted"


def test_off_by_default_and_a_missing_model_is_a_clear_state(start_daemon, tmp_path):
    d = start_daemon()
    assert wake_status(d)["state"] == "off"
    assert status(d)["subsystems"]["wake"].startswith("off for okay_nabu"), status(d)["subsystems"]
    hark(d, "inject", str(clip(tmp_path, "off", 0.3, "Okay Nabu.", 0.5)))
    assert not wait_for(lambda: wake_status(d)["detections"] or status(d)["recording"], 4)
    d = start_daemon({"wake": {"enabled": True, "words": ["hey_computer"]}})
    text = status(d)["subsystems"]["wake"]
    assert text.startswith("unavailable: wake word `hey_computer` has no model in"), text
    assert "alexa, hey_jarvis, hey_mycroft, okay_nabu" in text, text
    assert wake_status(d)["state"] == "unavailable"
    d = start_daemon({"wake": {"enabled": True, "runtime": str(tmp_path / "nowhere.so")}})
    text = status(d)["subsystems"]["wake"]
    assert "nowhere.so (wake.runtime) is missing" in text, text
    # The rest of the appliance serves.
    c = LineClient.tcp(d, timeout=30)
    c.initialize()
    assert c.call_tool("get_status")["result"]["structuredContent"]["muted"] is False
    c.close()


# ---- the follow-up -----------------------------------------------------------


def answered_by(daemon, tmp_path, agent="helper"):
    """The person wakes Hark and asks; `agent` takes the message and answers
    aloud. Returns the agent's connection, still open."""
    c, t, out = waiting_agent(daemon, agent)
    hark(daemon, "inject", str(clip(tmp_path, "ask", 0.3, "Okay Nabu.", 1.0, ASK, 0.5)))
    t.join(60)
    assert out["result"]["structuredContent"]["received"] is True, out
    spoken = call(c, "speak_text", {"text": "You have a dentist at nine.", "wait": True}, 6)
    assert not spoken.get("isError"), spoken
    return c


def test_after_an_answer_hark_listens_again_without_the_wake_word(start_daemon, tmp_path):
    d = start_daemon({"wake": {"enabled": True, "follow_up_seconds": 4}})
    assert wait_for(lambda: wake_status(d)["state"] == "listening", 10)
    c = answered_by(d, tmp_path)
    # The microphone opens again at once, the light showing it, no chime.
    assert wait_for(lambda: lights(d) == "listening", 3), status(d)["subsystems"]
    hark(d, "inject", str(clip(tmp_path, "more", 0.2, "And what about tomorrow afternoon?", 0.5)))
    r = call(c, "wait_for_person", {"timeout_seconds": 30}, 7)
    c.close()
    s = r["structuredContent"]
    assert s["received"] is True and heard(s["text"], {"tomorrow", "afternoon"}), s
    assert s["message"]["addressed_to"] == "helper" and s["message"]["addressed_by"] == "follow_up", s
    assert len(wake_status(d)["detections"]) == 1, "no wake word the second time"
    log = d.log()
    assert "the agent answered the person: following up" in log
    assert "follow-up with nobody listening: recording a message for the agents" in log


def test_the_follow_up_closes_after_its_window_and_gives_way_to_an_agent(start_daemon, tmp_path):
    d = start_daemon({"wake": {"enabled": True, "follow_up_seconds": 3}})
    assert wait_for(lambda: wake_status(d)["state"] == "listening", 10)
    c = answered_by(d, tmp_path)
    assert wait_for(lambda: lights(d) == "listening", 3)
    # Nothing said: it closes after its 3 s and keeps nothing.
    assert wait_for(lambda: lights(d) == "idle", 8)
    assert status(d)["messages_waiting"] == 0
    # Answered again; this time the agent speaks on at once: the follow-up
    # gives way instead of holding its speech back for 3 s.
    c.close()
    c = answered_by(d, tmp_path, "helper2")
    assert wait_for(lambda: lights(d) == "listening", 3)
    started = time.monotonic()
    spoken = call(c, "speak_text", {"text": "One more thing.", "wait": True}, 8)
    c.close()
    assert not spoken.get("isError"), spoken
    assert time.monotonic() - started < 2.5, "the follow-up held the agent's speech back"
    assert "the follow-up gave way to an agent before the person spoke" in d.log()


def test_no_follow_up_without_the_wake_word(start_daemon, tmp_path):
    d = start_daemon({"wake": {"follow_up_seconds": 3}})
    c, t, out = waiting_agent(d, "plain")
    hark(d, "button", "press")
    assert wait_for(lambda: lights(d) == "listening", 5)
    time.sleep(0.4)
    hark(d, "inject", str(clip(tmp_path, "pressed", 0.2, ASK, 0.5)))
    t.join(60)
    assert out["result"]["structuredContent"]["received"] is True
    call(c, "speak_text", {"text": "Noted.", "wait": True}, 6)
    c.close()
    assert not wait_for(lambda: lights(d) == "listening", 2)
    assert "following up" not in d.log()
