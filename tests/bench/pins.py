"""The pinned packages of a benchmark's peers, checked: shared by the
peers' scripts (stt_peers.py, tts_peers.py, wyoming_peers.py), which the
bench runs with their venv's Python."""

import importlib.metadata


def installed(requirements):
    """0 when every `name==version` in `requirements` is installed at that
    version, else 1 (an exit status: the bench then pip-installs them)."""
    for requirement in requirements:
        package, version = requirement.split("==")
        try:
            if importlib.metadata.version(package) != version:
                return 1
        except importlib.metadata.PackageNotFoundError:
            return 1
    return 0
