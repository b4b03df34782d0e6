"""Speech and timers kept for later, end to end: `speak_text` with
`delay_seconds` or `at` (and `POST /speak`), `list_scheduled`,
`cancel_scheduled`, a timer ringing until the button, the wake word or its
time ends it, and what is kept outlasting a restart."""

import re
import time

import httpx

from harness import Daemon, call, client, hark, status, wait_for
from test_wake import clip, wake_status


def scheduled(daemon):
    c = client(daemon, "lister", 30)
    try:
        return call(c, "list_scheduled", {}, 3)["structuredContent"]["scheduled"]
    finally:
        c.close()


def ringing(daemon):
    return any(s["ringing"] for s in status(daemon)["scheduled"])


def board(daemon):
    return status(daemon)["subsystems"]["board"]


COUNTDOWN = re.compile(r"lights: timer; mute off; timer: (\d+) s of (\d+) s left, (\d+) of (\d+) LEDs lit")


def countdown(daemon):
    """(left, total, LEDs lit, LEDs) of the countdown on the simulated ring,
    read back from what its LEDs were given; None when it shows none."""
    m = COUNTDOWN.search(board(daemon))
    return tuple(int(g) for g in m.groups()) if m else None


def test_a_timer_counts_down_on_the_lights_and_flashes_when_it_rings(start_daemon):
    d = start_daemon()
    c = client(d, "cook", 30)
    assert "lights: idle;" in board(d)
    long = call(c, "speak_text", {"text": "Bread.", "delay_seconds": 120, "ring": True}, 1)
    # The LED thread draws it a moment after the light is set.
    assert wait_for(lambda: (countdown(d) or (0,) * 4)[2:] == (12, 12), 5), board(d)
    left, total, _, _ = countdown(d)
    assert total == 120 and 110 <= left <= 120, board(d)
    # Speech for later is not a timer: the countdown stays the bread's.
    call(c, "speak_text", {"text": "Stretch.", "delay_seconds": 5}, 2)
    assert countdown(d)[1] == 120, board(d)
    # A sooner timer takes the ring, and its arc shrinks as it runs.
    call(c, "speak_text", {"text": "Tea.", "delay_seconds": 8, "ring": True, "ring_seconds": 60}, 3)
    assert wait_for(lambda: (countdown(d) or (0,) * 4)[1:3] == (8, 12), 5), board(d)
    assert wait_for(lambda: 0 < (countdown(d) or (0, 0, 99))[2] <= 6, 10), board(d)
    # Its time is up: the ring flashes until the button.
    assert wait_for(lambda: "lights: ringing;" in board(d), 15), board(d)
    assert wait_for(lambda: ringing(d), 5)
    hark(d, "button", "press")
    hark(d, "button", "release")
    assert wait_for(lambda: not ringing(d), 5)
    # Back to the bread's countdown, then dark once it is cancelled.
    assert wait_for(lambda: (countdown(d) or (0, 0))[1] == 120, 5), board(d)
    call(c, "cancel_scheduled", {"id": long["structuredContent"]["scheduled"]["id"]}, 4)
    assert wait_for(lambda: "lights: idle;" in board(d), 10), board(d)
    c.close()


def test_speech_is_said_at_its_time_listed_and_cancelled(start_daemon):
    d = start_daemon()
    c = client(d, "cook", 30)
    soon = call(c, "speak_text", {"text": "The oven is hot now.", "delay_seconds": 1.5}, 1)
    later = call(c, "speak_text", {"text": "Take the bread out.", "delay_seconds": 600}, 2)
    assert not soon.get("isError") and not later.get("isError"), (soon, later)
    s = later["structuredContent"]
    assert s["status"] == "scheduled" and s["scheduled"]["kind"] == "speech", s
    assert s["scheduled"]["agent"] == "cook" and 590 < s["scheduled"]["due_in_seconds"] <= 600, s
    assert s["scheduled"]["due_at"].endswith("Z"), s
    assert [x["text"] for x in scheduled(d)] == ["The oven is hot now.", "Take the bread out."]
    # Said at its time, and gone from the list.
    assert wait_for(lambda: "speech kept for later is due" in d.log(), 10)
    assert wait_for(lambda: len(scheduled(d)) == 1, 10)
    assert [x["id"] for x in status(d)["scheduled"]] == [s["scheduled"]["id"]]
    cancelled = call(c, "cancel_scheduled", {"id": s["scheduled"]["id"]}, 4)
    assert cancelled["structuredContent"]["cancelled"]["text"] == "Take the bread out."
    assert scheduled(d) == []
    again = call(c, "cancel_scheduled", {"id": s["scheduled"]["id"]}, 5)
    assert again["isError"] and again["structuredContent"]["error"]["type"] == "NotScheduledError", again
    c.close()


def test_bad_times_are_clear_errors(start_daemon):
    d = start_daemon()
    c = client(d, "cook", 30)
    cases = [
        ({"delay_seconds": 5, "at": "2030-01-01T00:00:00Z"}, "not both"),
        ({"at": "tomorrow at six"}, "RFC 3339"),
        ({"delay_seconds": -1}, "delay_seconds must be"),
        ({"delay_seconds": 10 * 24 * 3600}, "delay_seconds must be"),
        ({"ring": True}, "need delay_seconds or at"),
        ({"delay_seconds": 5, "ring_seconds": 10}, "ring_seconds needs ring"),
        ({"delay_seconds": 5, "ring": True, "ring_seconds": 5000}, "ring_seconds must be"),
        ({"delay_seconds": 5, "voice": "nobody"}, "not installed"),
        ({"delay_seconds": 5, "wait": True}, "wait cannot go with"),
    ]
    for i, (args, why) in enumerate(cases):
        r = call(c, "speak_text", {"text": "Tea.", **args}, 10 + i)
        assert r.get("isError") and why in r["content"][0]["text"], (args, r)
    assert scheduled(d) == []
    # POST /speak takes the same.
    url = f"http://127.0.0.1:{d.http[1]}/speak"
    ok = httpx.post(url, json={"text": "Stretch.", "delay_seconds": 300}, timeout=10)
    assert ok.status_code == 202 and ok.json()["status"] == "scheduled", ok.text
    bad = httpx.post(url, json={"text": "Stretch.", "ring": True}, timeout=10)
    assert bad.status_code == 400 and "need delay_seconds or at" in bad.text, bad.text
    assert [x["text"] for x in scheduled(d)] == ["Stretch."]
    c.close()


def test_a_timer_rings_until_the_button_or_its_time(start_daemon):
    d = start_daemon()
    c = client(d, "cook", 30)
    r = call(c, "speak_text", {"text": "Pasta.", "delay_seconds": 0.5, "ring": True, "ring_seconds": 60}, 1)
    assert r["structuredContent"]["scheduled"]["kind"] == "timer", r
    assert wait_for(lambda: ringing(d), 10), status(d)["scheduled"]
    time.sleep(1.5)
    assert ringing(d), "it rings on"
    hark(d, "button", "press")
    assert wait_for(lambda: not ringing(d), 5)
    hark(d, "button", "release")
    assert "button pressed: the timer stopped" in d.log()
    assert "the timer stopped ringing id=" in d.log() and 'how="stopped"' in d.log()
    assert status(d)["messages_waiting"] == 0 and not status(d)["recording"], "the press started nothing else"
    # Left alone, it stops after ring_seconds.
    call(c, "speak_text", {"text": "Tea.", "delay_seconds": 0.2, "ring": True, "ring_seconds": 2}, 2)
    assert wait_for(lambda: ringing(d), 10)
    assert wait_for(lambda: not ringing(d), 10)
    assert 'how="timed out"' in d.log()
    # cancel_scheduled stops a ringing one too.
    r = call(c, "speak_text", {"text": "Eggs.", "delay_seconds": 0.2, "ring": True}, 3)
    assert wait_for(lambda: ringing(d), 10)
    call(c, "cancel_scheduled", {"id": r["structuredContent"]["scheduled"]["id"]}, 4)
    assert wait_for(lambda: not ringing(d), 5)
    c.close()


def test_the_wake_word_stops_a_ringing_timer(start_daemon, tmp_path):
    d = start_daemon({"wake": {"enabled": True}})
    c = client(d, "cook", 30)
    call(c, "speak_text", {"text": "Pasta.", "delay_seconds": 0.2, "ring": True, "ring_seconds": 60}, 1)
    c.close()
    assert wait_for(lambda: ringing(d), 10)
    # Said between two rings: with half duplex the microphone hears nothing
    # while the chime plays. A person whose word a ring cut says it again.
    word = clip(tmp_path, "stop", 0.1, "Okay Nabu.", 0.3)
    for _ in range(3):
        assert wait_for(lambda: status(d)["speaking"], 5)
        assert wait_for(lambda: not status(d)["speaking"], 5)
        hark(d, "inject", str(word))
        if wait_for(lambda: not ringing(d), 3):
            break
    assert not ringing(d), wake_status(d)
    assert "wake word heard: the timer stopped" in d.log()
    assert not status(d)["recording"], "the stop word starts no turn"


def test_what_is_kept_outlasts_a_restart(start_daemon):
    d = start_daemon()
    c = client(d, "cook", 30)
    far = call(c, "speak_text", {"text": "Call mum.", "delay_seconds": 3600}, 1)["structuredContent"]["scheduled"]
    timer = call(c, "speak_text", {"text": "Oven.", "delay_seconds": 1800, "ring": True}, 3)["structuredContent"]["scheduled"]
    near = call(c, "speak_text", {"text": "Water the plants.", "delay_seconds": 8}, 2)["structuredContent"]["scheduled"]
    c.close()
    assert d.stop() == 0
    assert "speech kept for later is due" not in d.log()
    again = Daemon(d.tmp, {}).start()
    try:
        kept = scheduled(again)
        assert [(x["id"], x["text"]) for x in kept] == [
            (near["id"], near["text"]), (timer["id"], timer["text"]), (far["id"], far["text"])], kept
        assert far["due_at"] == kept[-1]["due_at"]
        # The timer's countdown is the whole timer's, as it was set.
        assert countdown(again)[1] == 1800, board(again)
        # The near one is said after the restart, at its time.
        assert wait_for(lambda: [x["id"] for x in scheduled(again)] == [timer["id"], far["id"]], 20)
        assert "speech kept for later, from before the restart" in again.log()
        # It leaves the list as it falls due, a moment before it is said
        # (and logged as said): on a busy machine the test can look between.
        assert wait_for(lambda: "speech kept for later is due" in again.log(), 10), again.log()[-3000:]
    finally:
        assert again.stop() == 0
