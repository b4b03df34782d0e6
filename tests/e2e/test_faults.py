"""Faults injected into a running appliance, and what the person and the
agents see: sound devices that vanish, stall and come back (a real sound
server behind ALSA, see sound_server.py), signals mid-call, and the watchdog
restarting a stuck daemon under a real systemd."""

import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness import (HARK, REPO, SPEECH, Daemon, LineClient, after_the_chime, call, clip, client, heard,
                     in_thread, render_config, response, start_listening, status, status_of, wait_for, words)
from harness import MODELS, VOICES
from harness import speak as speak_message
from test_conversation import person_says
from sound_server import AVAILABLE, WHY_NOT, SoundServer

needs_sound_server = pytest.mark.skipif(not AVAILABLE, reason=f"needs {WHY_NOT}")


@pytest.fixture
def sound(tmp_path):
    server = SoundServer(tmp_path / "pulse").start()
    yield server
    server.stop()


def on_the_sound_server(start_daemon, sound, overrides=None):
    """A daemon whose microphone and speaker are the sound server's."""
    return start_daemon(
        {
            "audio.capture": {"device": "room_mic", "rate": 16000, "channels": 1},
            "audio.playback": {"device": "room_speaker", "rate": 16000, "channels": 1},
            "audio.virtual_card": {"enabled": False},
            **(overrides or {}),
        },
        env=sound.env(),
    )


def audio(d):
    return status(d)["subsystems"]["audio"]


def listen_to(d, sound, wav, id):
    """The person says `wav` once the microphone is open; the result."""
    c, watcher = start_listening(d, id, {"timeout_seconds": 20})
    after_the_chime(d)
    sound.say(wav)
    r, _ = response(c, id)
    c.close()
    watcher.close()
    return r["result"]


def unplugged_during(sound, c, id):
    """Unplugs the sound device while call `id` runs: its result, and how
    long after the unplugging it came."""
    sound.unplug()
    unplugged = time.monotonic()
    r, _ = response(c, id)
    return r["result"], time.monotonic() - unplugged


def failed_saying(result, words_):
    assert result["isError"] is True, result
    assert words_ in result["content"][0]["text"], result


def send_call(c, id, tool, arguments):
    c.send({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})


@needs_sound_server
def test_the_microphone_gone_mid_listen_and_back(start_daemon, sound):
    d = on_the_sound_server(start_daemon, sound)
    assert wait_for(lambda: audio(d) == "capturing; speaker ready", 10), audio(d)
    c, watcher = start_listening(d, 1, {"timeout_seconds": 30})
    result, took = unplugged_during(sound, c, 1)
    # The agent is told at once what happened, not left waiting out its
    # timeout or handed an empty transcript.
    failed_saying(result, "microphone stopped delivering audio")
    assert took < 6, took
    state = audio(d)
    assert state.startswith("capture device"), state
    # Plugged back in: capture comes back by itself and hears the person.
    sound.start()
    assert wait_for(lambda: audio(d) == "capturing; speaker ready", 15), audio(d)
    wav, text = clip("ps-librivox-0880")
    result = listen_to(d, sound, wav, 2)
    assert result["isError"] is False, result
    assert heard(result["structuredContent"]["text"], words(text)), result
    c.close()
    watcher.close()


LONG = ("The kitchen timer went off a minute ago. The bread should come out of the oven now, "
        "and the tray goes on the rack by the window to cool. After that, the soup needs stirring, "
        "and the heat can go down to low until everyone sits down to eat.")


@needs_sound_server
def test_the_speaker_gone_mid_speech_and_back(start_daemon, sound):
    d = on_the_sound_server(start_daemon, sound)
    assert wait_for(lambda: audio(d) == "capturing; speaker ready", 10), audio(d)
    c = LineClient.tcp(d, timeout=60)
    c.initialize()
    send_call(c, 1, "speak_text", {"text": LONG, "wait": True})
    assert wait_for(lambda: status(d)["speaking"], 20), "speech started"
    time.sleep(1)
    result, took = unplugged_during(sound, c, 1)
    # The agent hears at once that its speech did not reach the room.
    failed_saying(result, "the speaker failed while playing")
    assert took < 3, took
    assert "speaker error" in audio(d) or "speaker missing" in audio(d), audio(d)
    # Plugged back in: the next speech plays.
    sound.start()
    assert wait_for(lambda: audio(d) == "capturing; speaker ready", 15), audio(d)
    send_call(c, 2, "speak_text", {"text": "The speaker is back.", "wait": True})
    r, _ = response(c, 2)
    assert r["result"]["structuredContent"]["status"] == "spoken", r
    # The history keeps both, the cut-off one as not spoken.
    send_call(c, 3, "list_captures", {"kind": "spoken"})
    rows = response(c, 3)[0]["result"]["structuredContent"]["captures"]
    assert [(r["text"], r["end_reason"]) for r in rows][:2] == [("The speaker is back.", "spoken"), (LONG, "failed")], rows
    c.close()


# ---- the watchdog, under a real systemd ---------------------------------------

SYSTEMD = Path("/usr/lib/systemd/systemd")
UNIT = REPO / "systemd" / "hark.service"


def unit_setting(key):
    """The last value of `key` in the shipped unit."""
    values = [line.partition("=")[2].strip() for line in UNIT.read_text().splitlines()
              if line.partition("=")[0].strip() == key]
    return values[-1]


def socket_unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    return s


def cgroup2_root() -> Path:
    """Where this machine mounts the unified (v2) cgroup hierarchy."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return Path(fields[4])
    raise RuntimeError("no cgroup2 hierarchy mounted")


class UserManager:
    """systemd's own service manager (a user instance), so a unit's watchdog
    and restarts are systemd's real ones. It is kept off this machine's own
    processes and control groups: new mount and cgroup namespaces, its
    cgroup root a fresh group of the v2 hierarchy (the v1 controllers are not
    mounted in its view; /run/systemd/system exists there, as on a machine
    booted with systemd). Without this it moves the machine's PID 1 into an
    `init.scope` of the v1 `cpu` controller, where SCHED_FIFO is refused to
    every process from then on. (Not a PID namespace: systemctl from outside
    could not then reach its bus.)"""

    def __init__(self, tmp: Path):
        self.runtime = tmp / "xdg"
        self.runtime.mkdir(mode=0o700, parents=True)
        self.group = cgroup2_root() / f"hark-test-{os.getpid()}-{tmp.name}"
        self.group.mkdir()
        script = (
            "mount -t cgroup2 none /sys/fs/cgroup\n"
            "mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd\n"
            "mkdir -p /run/systemd/system\n"
            f"{SYSTEMD} --user &\n"
            "wait\n"
        )
        procs = self.group / "cgroup.procs"

        def into_group():
            procs.write_text("0")

        self.log = open(tmp / "systemd.log", "wb")
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "--cgroup", "--propagation", "private", "sh", "-c", script],
            env=self.env(), stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, preexec_fn=into_group,
        )
        assert wait_for(lambda: (self.runtime / "systemd" / "private").exists(), 20), \
            (tmp / "systemd.log").read_text()

    def env(self):
        return {**os.environ, "XDG_RUNTIME_DIR": str(self.runtime)}

    def run(self, *args):
        return subprocess.run(args, env=self.env(), capture_output=True, text=True, timeout=30)

    def show(self, unit, prop):
        return self.run("systemctl", "--user", "show", "-p", prop, "--value", unit).stdout.strip()

    def stop(self):
        self.run("systemctl", "--user", "exit")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # Its groups, deepest first, once their processes are gone.
        for group in sorted(self.group.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if group.is_dir():
                wait_for(lambda: not (group / "cgroup.procs").read_text().strip(), 5)
                group.rmdir()
        wait_for(lambda: not procs_of(self.group), 5)
        self.group.rmdir()


def procs_of(group: Path) -> str:
    return (group / "cgroup.procs").read_text().strip()


needs_systemd = pytest.mark.skipif(not SYSTEMD.exists() or not shutil.which("unshare"),
                                   reason="needs systemd (Debian's systemd package) and unshare")


@needs_sound_server
@needs_systemd
def test_a_stalled_audio_thread_stops_the_watchdog_and_systemd_restarts_the_daemon(sound, tmp_path):
    machine = Path("/proc/1/cgroup").read_text()
    manager = UserManager(tmp_path / "systemd")
    try:
        d = Daemon(tmp_path / "hark", {
            "audio.capture": {"device": "room_mic", "rate": 16000, "channels": 1},
            "audio.playback": {"device": "room_speaker", "rate": 16000, "channels": 1},
            "audio.virtual_card": {"enabled": False},
        })
        d.tmp.mkdir(parents=True)
        config = d.tmp / "hark.toml"
        config.write_text(render_config(d.config()))
        log = d.tmp / "hark.log"
        started = manager.run(
            "systemd-run", "--user", "--unit=hark-watchdog",
            # The shipped unit's lifecycle; a short watchdog so the test
            # need not wait out 30 s.
            "-p", f"Type={unit_setting('Type')}", "-p", f"NotifyAccess={unit_setting('NotifyAccess')}",
            "-p", f"Restart={unit_setting('Restart')}", "-p", f"RestartSec={unit_setting('RestartSec')}",
            "-p", "WatchdogSec=3", "-p", "LimitCORE=0",
            "-p", f"StandardOutput=append:{log}", "-p", f"StandardError=append:{log}",
            *[f"--setenv={k}={v}" for k, v in sound.env().items()],
            str(HARK), "--config", str(config), "run",
        )
        assert started.returncode == 0, started.stderr
        socket_path = d.tmp / "run" / "mcp.sock"

        def served():
            try:
                c = LineClient(socket_unix(socket_path), timeout=5)
                c.initialize()
                state = status_of(c)["subsystems"]["audio"]
                c.close()
                return state
            except OSError:
                return None

        assert wait_for(lambda: served() == "capturing; speaker ready", 30), (served(), log.read_text()[-3000:])
        first = manager.show("hark-watchdog", "MainPID")
        assert manager.show("hark-watchdog", "NRestarts") == "0"
        # The sound server stops answering: the capture thread blocks inside
        # ALSA and never comes back by itself.
        sound.hang()
        hung = time.monotonic()
        assert wait_for(lambda: manager.show("hark-watchdog", "NRestarts") != "0", 30), log.read_text()[-3000:]
        took = time.monotonic() - hung
        text = log.read_text()
        assert "health check failed; not feeding the watchdog" in text, text[-3000:]
        assert re.search(r"the (capture|playback) thread has not run for \d+ s", text), text[-3000:]
        # 5 s to call the thread stuck, then up to WatchdogSec without a ping.
        assert took < 15, took
        # The device answers again: the restarted daemon serves and captures.
        sound.resume()
        assert wait_for(lambda: served() == "capturing; speaker ready", 40), (served(), log.read_text()[-3000:])
        assert manager.show("hark-watchdog", "MainPID") != first
        assert manager.show("hark-watchdog", "ActiveState") == "active"
    finally:
        manager.run("systemctl", "--user", "stop", "hark-watchdog")
        manager.stop()
    assert Path("/proc/1/cgroup").read_text() == machine, "the machine's own processes were left where they were"


# ---- stopping mid-call ---------------------------------------------------------

def shutting_down(r):
    """The call ended with the error an agent can act on: call again later."""
    result = r["result"]
    assert result["isError"] is True, r
    assert result["structuredContent"]["error"]["type"] == "ShuttingDownError", r
    assert result["content"][0]["text"].startswith("the appliance is shutting down"), r
    assert "call again once it is back" in result["content"][0]["text"], r


def test_sigterm_mid_listen_tells_the_agent_and_keeps_nothing_half_done(start_daemon):
    d = start_daemon()
    c, watcher = start_listening(d, 1, {"timeout_seconds": 30})
    watcher.close()
    d.send_signal(signal.SIGTERM)
    r, _ = response(c, 1)
    shutting_down(r)
    assert "listening was cancelled" in r["result"]["content"][0]["text"], r
    assert d.proc.wait(5) == 0


def test_sigterm_mid_speech_tells_the_agent(start_daemon):
    d = start_daemon()
    c = LineClient.tcp(d, timeout=60)
    c.initialize()
    send_call(c, 1, "speak_text", {"text": LONG, "wait": True})
    assert wait_for(lambda: status(d)["speaking"], 20), "speech started"
    d.send_signal(signal.SIGTERM)
    r, _ = response(c, 1)
    shutting_down(r)
    assert "its speech was stopped" in r["result"]["content"][0]["text"], r
    assert d.proc.wait(5) == 0
    # The history says the speech was cut off, not spoken.
    again = Daemon(d.tmp).start()
    try:
        c = LineClient.tcp(again)
        c.initialize()
        rows = c.call_tool("list_captures", {"kind": "spoken"})["result"]["structuredContent"]["captures"]
        assert [(r["text"], r["end_reason"]) for r in rows] == [(LONG, "stopped")], rows
    finally:
        again.stop()


# ---- kill -9 in the middle of writes --------------------------------------------

STORES = ("tokens", "schedule", "history", "inbox")


def whole(state):
    """Every database in the state directory passes SQLite's own check."""
    for name in STORES:
        db = state / f"{name}.sqlite3"
        with sqlite3.connect(db) as con:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",), db


def hark_cli(d, *args):
    r = subprocess.run([str(HARK), "--config", str(d.config_path), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout


def scheduled(d):
    c = client(d, "lister", 30)
    try:
        return call(c, "list_scheduled", {}, 1)["structuredContent"]["scheduled"]
    finally:
        c.close()


def captures(d):
    c = client(d, "historian", 30)
    try:
        return call(c, "list_captures", {"kind": "spoken", "limit": 500}, 1)["structuredContent"]["captures"]
    finally:
        c.close()


def killed(d):
    d.proc.kill()
    d.proc.wait()


def test_kill_9_in_the_middle_of_writes_loses_nothing_acknowledged(start_daemon):
    """Tokens made, speech kept for later and speech said, all at once, then
    the power cut (SIGKILL) at a random moment, four times over: after each
    restart every database is whole, every token and every kept speech whose
    call had answered is there, and the history holds what it had shown."""
    d = start_daemon()
    tokens, kept, shown = [], [], []
    rounds = 4
    try:
        for n in range(rounds):
            stop = threading.Event()

            def make_tokens():
                i = 0
                while not stop.is_set():
                    r = subprocess.run([str(HARK), "--config", str(d.config_path), "token", "create",
                                        f"agent-{n}-{i}", "--scopes", "listen", "--json"],
                                       capture_output=True, text=True, timeout=30)
                    if r.returncode == 0:
                        tokens.append(f"agent-{n}-{i}")
                    i += 1

            def keep_speech():
                try:
                    c = client(d, "keeper", 30)
                    i = 0
                    while not stop.is_set():
                        r = call(c, "speak_text", {"text": f"Later {n} {i}.", "delay_seconds": 3600}, i + 1)
                        if not r["isError"]:
                            kept.append(r["structuredContent"]["scheduled"]["id"])
                        i += 1
                except (OSError, ValueError):
                    pass  # the daemon is gone

            def speak_and_look():
                try:
                    c = client(d, "speaker", 30)
                    i = 0
                    while not stop.is_set():
                        call(c, "speak_text", {"text": f"Row {n} {i}.", "wait": True}, 2 * i + 1)
                        rows = call(c, "list_captures", {"kind": "spoken", "limit": 500}, 2 * i + 2)
                        shown[:] = [r["id"] for r in rows["structuredContent"]["captures"]]
                        i += 1
                except (OSError, ValueError):
                    pass

            threads = [threading.Thread(target=f, daemon=True) for f in (make_tokens, keep_speech, speak_and_look)]
            for t in threads:
                t.start()
            time.sleep(random.uniform(1.5, 4.0))
            killed(d)
            stop.set()
            for t in threads:
                t.join(30)
            whole(d.tmp / "state")
            d = Daemon(d.tmp).start()
            listed = {t["name"] for t in json.loads(hark_cli(d, "token", "list", "--json"))["tokens"]}
            assert set(tokens) <= listed, set(tokens) - listed
            ids = {x["id"] for x in scheduled(d)}
            assert set(kept) <= ids, set(kept) - ids
            rows = captures(d)
            assert set(shown) <= {r["id"] for r in rows}, (shown, rows)
            assert all(re.fullmatch(r"Row \d+ \d+\.", r["text"]) for r in rows), rows
        assert len(tokens) > rounds and len(kept) > rounds and shown, (tokens, kept, shown)
    finally:
        d.stop()


def test_kill_9_while_a_message_is_being_kept_loses_none_kept_before(start_daemon, tmp_path):
    """The person leaves a message nobody takes, then another, and the power
    is cut while the second is heard, transcribed or stored: after the
    restart the inbox is whole, the first message is delivered once, and the
    second is there whole or not at all."""
    first = speak_message(tmp_path, "first", "Remind me to call the plumber.")
    second = speak_message(tmp_path, "second", "The parcel has arrived at the front door.")
    d = start_daemon()
    person_says(d, first)
    assert wait_for(lambda: status(d)["messages_waiting"] == 1, 30), d.log()[-3000:]
    # Hark says it kept the message; the person waits for it to finish.
    assert wait_for(lambda: "speech ended" in d.log(), 30)
    person_says(d, second)
    time.sleep(random.uniform(0.5, 3.5))
    killed(d)
    whole(d.tmp / "state")
    again = Daemon(d.tmp).start()
    try:
        waiting = status(again)["messages_waiting"]
        assert waiting in (1, 2), waiting
        c = client(again, "first-to-ask", 30)
        got = [call(c, "wait_for_person", {"timeout_seconds": 0}, i)["structuredContent"] for i in range(1, 4)]
        c.close()
        assert got[0]["received"] and heard(got[0]["text"], {"remind", "call", "plumber"}), got
        if waiting == 2:
            assert got[1]["received"] and heard(got[1]["text"], {"parcel", "arrived", "front", "door"}), got
        assert [g["received"] for g in got] == [True] * waiting + [False] * (3 - waiting), "each once"
    finally:
        again.stop()


# ---- a read-only state directory --------------------------------------------------

@pytest.fixture
def state_mount(tmp_path):
    """A state directory on an ext4 file system of its own (a loop device),
    mounted as the appliance's data partition is: errors=remount-ro."""
    image, state = tmp_path / "state.img", tmp_path / "mounted-state"
    state.mkdir()
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", str(image)], check=True)
    if subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(state)]).returncode != 0:
        pytest.fail("this test needs to mount a loop device (run as root)")
    yield state
    subprocess.run(["umount", "-l", str(state)])


def read_only(state):
    """What the kernel does when the card under the file system fails: an
    ext4 error (raised through ext4's own sysfs trigger) remounts it
    read-only, with the appliance's files still open."""
    device = Path(subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(state)], capture_output=True,
                                 text=True, check=True).stdout.strip())
    (Path("/sys/fs/ext4") / device.name / "trigger_fs_error").write_text("1")
    options = lambda: subprocess.run(["findmnt", "-n", "-o", "OPTIONS", str(state)],  # noqa: E731
                                     capture_output=True, text=True).stdout.strip().split(",")
    assert wait_for(lambda: {"ro", "emergency_ro"} & set(options()), 5), options()


def test_a_read_only_state_directory_at_start(start_daemon, state_mount):
    """The appliance serves the room from memory, and says where each store
    is not kept; the token store, which must not forget a revocation, is
    refused rather than kept in memory."""
    read_only(state_mount)
    d = start_daemon({"service": {"state_dir": str(state_mount)}})
    subsystems = status(d)["subsystems"]
    for store in ("inbox", "history", "schedule"):
        assert "in memory only: " in subsystems[store] and "unable to open database file" in subsystems[store], \
            (store, subsystems[store])
    assert subsystems["audio"] == "capturing; speaker ready"
    c = client(d, "alpha", 30)
    assert call(c, "speak_text", {"text": "Still here.", "wait": True}, 1)["structuredContent"]["status"] == "spoken"
    rows = call(c, "list_captures", {}, 2)["structuredContent"]["captures"]
    assert [(r["kind"], r["text"]) for r in rows] == [("spoken", "Still here.")], rows
    later = call(c, "speak_text", {"text": "Later.", "delay_seconds": 600}, 3)["structuredContent"]["scheduled"]
    assert [x["id"] for x in scheduled(d)] == [later["id"]]
    c.close()
    # Tokens: a clear refusal naming the database, on the CLI and in get_status.
    r = subprocess.run([str(HARK), "--config", str(d.config_path), "token", "create", "beta", "--json"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "the token store is unavailable" in r.stderr and "tokens.sqlite3" in r.stderr, r
    assert "tokens cannot be checked" in status(d)["auth"]["warning"]
    # Agents' settings changed now last until a restart, and say so.
    admin = client(d, "admin", 30)
    kept = call(admin, "agent_settings", {}, 4)["structuredContent"]["kept"]
    assert kept.startswith("in memory only: ") and "agents.sqlite3" in kept, kept
    admin.close()
    assert d.log().count("cannot be kept on disk") == 4, "each store said so once"


def test_the_state_directory_turning_read_only_while_running(start_daemon, state_mount, tmp_path):
    """As a failing SD card is remounted read-only by the kernel: writes fail
    and get_status says so, the room keeps working, and a message for a
    waiting agent still reaches it."""
    d = start_daemon({"service": {"state_dir": str(state_mount)}})
    c = client(d, "alpha", 60)
    assert call(c, "speak_text", {"text": "Before.", "wait": True}, 1)["structuredContent"]["status"] == "spoken"
    assert wait_for(lambda: len(captures(d)) == 1, 10)
    read_only(state_mount)
    assert call(c, "speak_text", {"text": "After.", "wait": True}, 2)["structuredContent"]["status"] == "spoken"
    assert wait_for(lambda: "write(s) failed" in status(d)["subsystems"]["history"], 10), status(d)["subsystems"]
    # Speech for later is refused, not kept where it would be lost.
    later = call(c, "speak_text", {"text": "Later.", "delay_seconds": 600}, 3)
    assert later["structuredContent"]["error"]["type"] == "ScheduleError", later
    assert "schedule.sqlite3" in later["content"][0]["text"], later
    t, out = in_thread(call, c, "wait_for_person", {"timeout_seconds": 60}, 4)
    assert wait_for(lambda: "1 agent(s) waiting" in status(d)["subsystems"]["inbox"], 10)
    person_says(d, speak_message(tmp_path, "ro", "Remind me to call the plumber."))
    t.join(60)
    got = out["value"]["structuredContent"]
    assert got["received"] and heard(got["text"], {"remind", "call", "plumber"}), got
    c.close()
    assert "handed to the waiting agent from memory" in d.log()


# ---- models broken at start and under a running daemon ------------------------------

@pytest.fixture
def models(tmp_path):
    """A copy of the model store a test may break."""
    copy = tmp_path / "models"
    shutil.copytree(MODELS, copy)
    return copy


def truncate(path):
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)


def transcribed(d, wav, id=1):
    c = client(d, "transcriber", 120)
    try:
        return call(c, "transcribe_audio", {"audio_path": str(wav)}, id)
    finally:
        c.close()


@pytest.fixture
def voices(tmp_path):
    copy = tmp_path / "voices"
    shutil.copytree(VOICES, copy)
    return copy


LIVE = {"audio.vad": {"end_of_turn": "smart-turn"}}


def with_models(models, voices=None):
    """The shipped configuration's engines (appliance/run): whisper, the
    Moonshine live engine and Smart Turn, from `models`."""
    return {"stt": {"models_dir": str(models), "live_model": "moonshine-tiny-en", "audio_dirs": [str(SPEECH)]},
            **LIVE, **({"tts": {"voices_dir": str(voices)}} if voices else {})}


def heard_in_the_room(d, wav, id=1):
    """The person says `wav` to a listening agent; its result."""
    c, watcher = start_listening(d, id, {"timeout_seconds": 20})
    after_the_chime(d)
    hark_cli(d, "inject", str(wav))
    r, _ = response(c, id)
    c.close()
    watcher.close()
    return r["result"]


def test_models_damaged_before_start(start_daemon, models):
    """Files cut short while the appliance was off (a full card, an update
    pulled out halfway): it starts, says which model cannot be used and why,
    the live engine and the end of turn fall back, transcription names the
    file and how to check it, and putting the file right needs no restart."""
    whisper = models / "ggml-tiny.en-q8_0.bin"
    good = whisper.read_bytes()
    for f in (whisper, models / "moonshine-tiny-en" / "encoder_model.ort", models / "smart-turn-v3.2.onnx"):
        truncate(f)
    d = start_daemon(with_models(models))
    stt = status(d)["subsystems"]["stt"]
    assert "live engine unavailable" in stt and "encoder_model.ort is not a usable Moonshine model" in stt, stt
    assert "end of turn by silence" in stt and "smart-turn-v3.2.onnx is not a usable end-of-turn model" in stt, stt
    wav, text = clip("ps-librivox-0880")
    r = transcribed(d, wav)
    assert r["structuredContent"]["error"]["type"] == "ModelNotLoadedError", r
    assert str(whisper) in r["content"][0]["text"] and "hark models verify" in r["content"][0]["text"], r
    stt = status(d)["subsystems"]["stt"]
    assert stt.startswith("unavailable: whisper.cpp cannot load the model") and str(whisper) in stt, stt
    # `hark models verify` names each damaged file.
    check = subprocess.run([str(HARK), "--config", str(d.config_path), "models", "verify"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode != 0, check
    for name in ("ggml-tiny.en-q8_0.bin", "encoder_model.ort", "smart-turn-v3.2.onnx"):
        assert name in check.stdout + check.stderr, (name, check.stdout, check.stderr)
    # Put right: the next request loads it.
    whisper.write_bytes(good)
    r = transcribed(d, wav, 2)
    assert heard(r["structuredContent"]["text"], words(text)), r
    assert status(d)["subsystems"]["stt"].startswith("ready; model tiny.en-q8_0")


def test_models_damaged_under_a_running_daemon(start_daemon, models, voices):
    """Every model file cut short while the appliance runs: what is loaded
    keeps working (the person is heard, transcribed and answered), and a
    model first needed afterwards fails by name without harming the rest."""
    d = start_daemon(with_models(models, voices))
    wav, text = clip("ps-librivox-0880")
    assert heard(transcribed(d, wav)["structuredContent"]["text"], words(text))
    damaged = [models / "ggml-tiny.en-q8_0.bin", models / "ggml-base-q8_0.bin",
               models / "moonshine-tiny-en" / "encoder_model.ort",
               models / "moonshine-tiny-en" / "decoder_model_merged.ort",
               models / "smart-turn-v3.2.onnx", voices / "en_US-joe-medium.onnx"]
    for f in damaged:
        truncate(f)
    result = heard_in_the_room(d, wav)
    assert not result["isError"] and heard(result["structuredContent"]["text"], words(text)), result
    assert heard(transcribed(d, wav, 2)["structuredContent"]["text"], words(text))
    c = client(d, "speaker", 60)
    assert call(c, "speak_text", {"text": "Still talking.", "wait": True}, 1)["structuredContent"]["engine"] == "piper"
    # The multilingual model was never loaded: it fails by name.
    r = call(c, "transcribe_audio", {"audio_path": str(wav), "language": "de"}, 2)
    assert r["structuredContent"]["error"]["type"] == "ModelNotLoadedError", r
    assert "ggml-base-q8_0.bin" in r["content"][0]["text"], r
    stt = status(d)["subsystems"]["stt"]
    assert stt.startswith("ready; model tiny.en-q8_0") and "; base-q8_0 cannot load: " in stt, stt
    # English is still served.
    assert call(c, "speak_text", {"text": "And still talking.", "wait": True}, 3)["structuredContent"]["status"] == "spoken"
    c.close()
    assert d.proc.poll() is None


def test_onnx_runtime_missing(start_daemon, tmp_path):
    """Without ONNX Runtime's library every engine on it says so, naming the
    path and how to install it, and the appliance still hears (whisper) and
    speaks (espeak-ng)."""
    missing = tmp_path / "nowhere" / "libonnxruntime.so"
    d = start_daemon({**with_models(MODELS), "tts": {"onnxruntime": str(missing)}})
    subsystems = status(d)["subsystems"]
    for engine, says in (("stt", "live engine unavailable (ONNX Runtime library"),
                         ("stt", "end of turn by silence: the end-of-turn model is unavailable (ONNX Runtime library"),
                         ("tts", "espeak-ng (piper unavailable: ONNX Runtime library")):
        assert says in subsystems[engine] and str(missing) in subsystems[engine], (engine, subsystems[engine])
        assert "appliance/setup-voices" in subsystems[engine]
    wav, text = clip("ps-librivox-0880")
    result = heard_in_the_room(d, wav)
    assert not result["isError"] and heard(result["structuredContent"]["text"], words(text)), result
    c = client(d, "speaker", 60)
    spoken = call(c, "speak_text", {"text": "Still talking.", "wait": True}, 1)["structuredContent"]
    assert spoken["engine"] == "espeak" and str(missing) in spoken["fallback_reason"], spoken
    c.close()
