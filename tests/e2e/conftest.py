import atexit
import itertools
import json
import os
import shutil
import subprocess
import tempfile

import pytest

# The tests never read the person's own settings: a token `hark pair` kept
# for the Hark in their kitchen (~/.config/hark/tokens.json), their
# HARK_TOKEN or HARK_CONFIG. Every program the tests start gets a home of
# its own, set before any of them starts.
for _name in ("HARK_TOKEN", "HARK_CONFIG"):
    os.environ.pop(_name, None)
OWN_HOME = tempfile.mkdtemp(prefix="hark-e2e-home-")
atexit.register(shutil.rmtree, OWN_HOME, ignore_errors=True)
os.environ["HOME"] = OWN_HOME
for _name, _sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"),
                    ("XDG_DATA_HOME", ".local/share"), ("XDG_STATE_HOME", ".local/state")):
    os.environ[_name] = os.path.join(OWN_HOME, _sub)

from harness import HARK, VOICES, Daemon

_counter = itertools.count()


@pytest.fixture(scope="session", autouse=True)
def _binary_exists():
    if not HARK.exists():
        pytest.exit(f"{HARK} does not exist; build it first (cargo build -p hark)", returncode=2)
    # appliance/setup-voices leaves the voice's files; the store adopts them
    # (manifest.json) when first opened. Tests that copy the store need it
    # adopted whichever file runs first, so it is opened once here.
    if not (VOICES / "manifest.json").exists():
        subprocess.run([str(HARK), "voices", "list", "--dir", str(VOICES)], check=True,
                       capture_output=True, timeout=60)


@pytest.fixture
def start_daemon(tmp_path_factory):
    """Starts a daemon with config overrides; stops every one at the end."""
    started = []

    def start(overrides: dict | None = None, env: dict | None = None) -> Daemon:
        tmp = tmp_path_factory.mktemp(f"hark{next(_counter)}")
        daemon = Daemon(tmp, overrides or {}, env or {}).start()
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One daemon with the default limits, shared by a module's tests."""
    d = Daemon(tmp_path_factory.mktemp("hark-shared")).start()
    yield d
    code = d.stop()
    assert code == 0, d.log()


@pytest.fixture(scope="session")
def steady_voices(tmp_path_factory):
    """A voices directory with the default voice made steady: piper's noise
    scales at 0, so the same words give the same audio every run. For tests
    whose outcome turns on how a sentence ends (the end-of-turn model's
    answer moves with piper's random variation; that spread is the
    benchmark's to measure, not a test's to trip on)."""
    out = tmp_path_factory.mktemp("steady-voices")
    for model in VOICES.glob("*.onnx"):
        os.symlink(model, out / model.name)
        config = json.loads(model.with_name(model.name + ".json").read_text())
        config["inference"] = {**config.get("inference", {}), "noise_scale": 0.0, "noise_w": 0.0}
        (out / (model.name + ".json")).write_text(json.dumps(config))
    return out


# The files that took longest (their slowest tests' seconds summed, a
# clean-clone run of 2026-12-07, two at a time on two cores), handed out
# first: xdist gives each worker the next file in collection order, so a
# long file started last would keep one worker busy after the other ran out.
LONGEST_FIRST = [
    "test_faults.py", "test_room.py", "test_languages.py", "test_early.py", "test_tasks.py",
    "test_wake.py", "test_file_outputs.py", "test_tts.py", "test_soak.py", "test_conversation.py",
    "test_timers.py", "test_models.py", "test_pairing.py", "test_turn.py", "test_wyoming.py",
    "test_channels.py", "test_selftest.py", "test_discovery.py", "test_esphome.py", "test_load.py",
]


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # Stable: a file's tests keep their order.
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))


# Where the end-to-end time goes: each file's tests' seconds (set-up, call
# and tear-down, the module's shared daemon included), summed on the
# controller from the workers' reports and printed at the end of the run,
# the longest first, so LONGEST_FIRST and the CI time can be kept honest.
_file_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    name = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _file_seconds[name] = _file_seconds.get(name, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _file_seconds:
        return
    ranked = sorted(_file_seconds.items(), key=lambda kv: kv[1], reverse=True)
    terminalreporter.write_sep("-", "seconds per file (set-up, tests and tear-down)")
    for name, seconds in ranked:
        terminalreporter.write_line(f"{seconds:8.1f}  {name}")
    terminalreporter.write_line(f"{sum(_file_seconds.values()):8.1f}  all files")
