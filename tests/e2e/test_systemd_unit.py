"""systemd/hark.service: as hardened as docs/image.md says (systemd's own
exposure score, recorded there), free of settings systemd does not know,
and with the settings the appliance relies on."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import HARK, REPO

UNIT = REPO / "systemd" / "hark.service"
DOC = REPO / "docs" / "image.md"
MAX_EXPOSURE = 2.5

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None,
    reason="systemd-analyze is not installed (Debian's systemd package provides it)",
)


def unit_settings(text: str) -> dict[str, dict[str, list[str]]]:
    """Section -> key -> the values of every assignment, in order. As in
    systemd, an empty assignment resets the list before it."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        header = re.fullmatch(r"\[(.+)\]", line)
        if header:
            current = sections.setdefault(header.group(1), {})
            continue
        assert current is not None, f"setting outside a section: {line}"
        key, _, value = line.partition("=")
        values = current.setdefault(key.strip(), [])
        if value.strip() == "":
            values.clear()
            values.append("")
        else:
            values.append(value.strip())
    return sections


@pytest.fixture(scope="module")
def unit() -> dict[str, dict[str, list[str]]]:
    return unit_settings(UNIT.read_text())


def service(unit, key: str) -> list[str]:
    assert key in unit["Service"], f"hark.service sets no {key}="
    return unit["Service"][key]


def last(unit, key: str) -> str:
    return service(unit, key)[-1]


def documented_exposure() -> float:
    match = re.search(
        r"^Exposure: (\d+\.\d) \(systemd \d+, systemd-analyze security --offline=true\)$",
        DOC.read_text(),
        re.M,
    )
    assert match, f"{DOC} has no `Exposure: X.Y (systemd N, ...)` line"
    return float(match.group(1))


@needs_systemd_analyze
def test_exposure_is_low_and_matches_the_doc():
    out = subprocess.run(
        [SYSTEMD_ANALYZE, "security", "--offline=true", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d)", out.stdout)
    assert match, f"no overall exposure in:\n{out.stdout}\n{out.stderr}"
    exposure = float(match.group(1))
    assert exposure <= MAX_EXPOSURE, f"exposure {exposure} > {MAX_EXPOSURE}:\n{out.stdout}"
    assert exposure == documented_exposure(), (
        f"systemd-analyze says {exposure}, docs/image.md says {documented_exposure()}; "
        "update the doc's Exposure: line and its table"
    )


@needs_systemd_analyze
def test_verify_knows_every_setting(tmp_path: Path):
    # /usr/bin/hark is not installed here: point ExecStart at a binary that
    # exists so verify looks at nothing but the settings.
    true = shutil.which("true")
    assert true, "no `true` binary"
    text = UNIT.read_text()
    assert re.search(r"^ExecStart=/usr/bin/hark run$", text, re.M)
    copy = tmp_path / "hark.service"
    copy.write_text(re.sub(r"^ExecStart=.*$", f"ExecStart={true}", text, flags=re.M))
    out = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = out.stdout + out.stderr
    bad = [
        line
        for line in output.splitlines()
        if any(s in line for s in ("Unknown key", "Unknown lvalue", "Invalid", "Failed to parse"))
    ]
    assert not bad, "systemd-analyze verify:\n" + output


def test_service_lifecycle_settings(unit):
    assert last(unit, "Type") == "notify"
    assert last(unit, "NotifyAccess") == "main"
    assert re.fullmatch(r"\d+s?", last(unit, "WatchdogSec")), last(unit, "WatchdogSec")
    assert int(last(unit, "WatchdogSec").rstrip("s")) > 0
    assert last(unit, "Restart") == "on-failure"
    assert int(unit["Unit"]["StartLimitBurst"][-1]) > 0
    assert last(unit, "StateDirectory") == "hark"
    assert last(unit, "RuntimeDirectory") == "hark"
    assert last(unit, "User") == "hark"
    assert last(unit, "ExecStart") == "/usr/bin/hark run"


def test_sandboxing_settings(unit):
    assert last(unit, "ProtectSystem") == "strict"
    # The only files under /etc it may write: its records for avahi.
    assert service(unit, "ReadWritePaths") == [
        "-/etc/avahi/services/hark.service -/etc/avahi/services/hark-esphome.service"]
    assert last(unit, "ProtectHome") in ("yes", "true", "read-only", "tmpfs")
    assert last(unit, "PrivateTmp") in ("yes", "true")
    assert last(unit, "NoNewPrivileges") in ("yes", "true")
    assert service(unit, "CapabilityBoundingSet") == [""], "no capability at all"
    assert service(unit, "AmbientCapabilities") == [""]
    assert last(unit, "DevicePolicy") == "closed"
    allowed = {v.split()[0]: v.split()[1:] for v in service(unit, "DeviceAllow")}
    assert "char-alsa" in allowed and "rw" in allowed["char-alsa"][0], allowed
    assert "PrivateDevices" not in unit["Service"], "it would hide /dev/snd"
    families = set(" ".join(service(unit, "RestrictAddressFamilies")).split())
    assert families and families <= {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}, families
    assert {"AF_UNIX", "AF_INET", "AF_INET6"} <= families
    allowed_calls, denied_calls = set(), set()
    for value in service(unit, "SystemCallFilter"):
        # A leading ~ turns the whole line into a deny list.
        if value.startswith("~"):
            denied_calls |= set(value[1:].split())
        else:
            allowed_calls |= set(value.split())
    assert "@system-service" in allowed_calls
    # The audio threads call sched_setscheduler, which is in @resources.
    assert not denied_calls & {"@resources", "sched_setscheduler"}, denied_calls


def test_realtime_is_allowed_and_capped(unit):
    rtprio = int(last(unit, "LimitRTPRIO"))
    assert 0 < rtprio <= 99
    # RestrictRealtime=yes would refuse SCHED_FIFO whatever LimitRTPRIO says.
    assert unit["Service"].get("RestrictRealtime", ["no"])[-1] in ("no", "false")
    # The default priority of the audio threads must fit under the cap, or
    # every appliance would log a warning and run them at normal priority.
    out = subprocess.run(
        [str(HARK), "config", "check", "/dev/null"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    default = re.search(r"^realtime_priority = (\d+)$", out.stdout, re.M)
    assert default, "`hark config check` prints no realtime_priority"
    assert 0 < int(default.group(1)) <= rtprio, (default.group(1), rtprio)
