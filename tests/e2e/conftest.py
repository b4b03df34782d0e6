import itertools

import pytest

from harness import HARK, Daemon

_counter = itertools.count()


@pytest.fixture(scope="session", autouse=True)
def _binary_exists():
    if not HARK.exists():
        pytest.exit(f"{HARK} does not exist; build it first (cargo build -p hark)", returncode=2)


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
