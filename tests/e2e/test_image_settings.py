"""The SD image's first-boot settings (image/rootfs/usr/lib/hark-image/settings):
hark-settings.txt and hark.toml on the FAT partition are applied once to the
data partition and renamed, with secrets blanked and problems listed, and the
first boot's machine id is kept on the kernel command line.

The script runs for real in its test mode (HARK_SETTINGS_TEST=yes: no
remounts, no host name change) on temporary directories standing in for the
FAT partition (HARK_BOOT_DIR), the kept settings (HARK_SETTINGS_DIR),
/proc/cmdline (HARK_CMDLINE) and /etc/machine-id (HARK_MACHINE_ID), with the
real wpa_passphrase, ssh-keygen and `hark config check`. Whatever the
settings, it must exit 0: a bad setting never stops the boot."""

import os
import stat
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import HARK, REPO

SCRIPT = REPO / "image" / "rootfs" / "usr" / "lib" / "hark-image" / "settings"
CMDLINE = "console=tty1 root=LABEL=hark-root ro rootwait\n"
BLANKED = "wifi_passphrase=(applied, not kept here)"


@dataclass
class Card:
    """An SD card: the FAT partition, the data partition's settings
    directory, and the running system's /proc/cmdline and /etc/machine-id."""

    boot: Path
    state: Path
    proc_cmdline: Path
    machine_id: str
    machine_id_file: Path

    def run(self, settings: str | bytes | None = None, config: str | None = None) -> subprocess.CompletedProcess:
        if settings is not None:
            data = settings.encode() if isinstance(settings, str) else settings
            (self.boot / "hark-settings.txt").write_bytes(data)
        if config is not None:
            (self.boot / "hark.toml").write_text(config)
        env = dict(
            os.environ,
            HARK_SETTINGS_TEST="yes",
            HARK_BOOT_DIR=str(self.boot),
            HARK_SETTINGS_DIR=str(self.state),
            HARK_BIN=str(HARK),
            HARK_CMDLINE=str(self.proc_cmdline),
            HARK_MACHINE_ID=str(self.machine_id_file),
        )
        done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"exit {done.returncode}: a bad setting must not stop the boot\n{done.stderr}"
        return done

    def reboot(self):
        """The next boot: the kernel runs with what cmdline.txt now says."""
        self.proc_cmdline.write_text((self.boot / "cmdline.txt").read_text())

    @property
    def applied(self) -> str:
        return (self.boot / "hark-settings.applied.txt").read_text()

    def problems(self) -> list[str]:
        return [line.removeprefix("# PROBLEM: ") for line in self.applied.splitlines() if line.startswith("# PROBLEM: ")]


@pytest.fixture
def card(tmp_path):
    boot = tmp_path / "boot"
    boot.mkdir()
    (boot / "cmdline.txt").write_text(CMDLINE)
    proc_cmdline = tmp_path / "proc-cmdline"
    proc_cmdline.write_text(CMDLINE)
    machine_id = uuid.uuid4().hex
    machine_id_file = tmp_path / "machine-id"
    machine_id_file.write_text(machine_id + "\n")
    return Card(boot, tmp_path / "state", proc_cmdline, machine_id, machine_id_file)


@pytest.fixture
def ssh_key(tmp_path):
    key = tmp_path / "laptop_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "me@laptop", "-f", str(key)], check=True)
    return key.with_suffix(".pub").read_text().strip()


def psk(ssid: str, passphrase: str) -> str:
    """The PSK wpa_supplicant derives, as wpa_passphrase computes it."""
    out = subprocess.run(["wpa_passphrase", ssid, passphrase], capture_output=True, text=True, check=True).stdout
    (line,) = [line for line in out.splitlines() if line.strip().startswith("psk=")]
    return line.strip().removeprefix("psk=")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def snapshot(*dirs: Path) -> dict:
    """Every file, link and directory under the dirs: content, target, mode."""
    seen = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_symlink():
                seen[p] = ("link", os.readlink(p))
            elif p.is_dir():
                seen[p] = ("dir", mode(p))
            else:
                seen[p] = ("file", mode(p), p.read_bytes())
    return seen


SSID = "Kitchen \"Guest\" Joe's Wi-Fi"
PASSPHRASE = "correct horse battery staple"


def full_settings(key: str) -> bytes:
    lines = [
        "# Written on a laptop with CRLF line ends",
        "hostname=Kitchen-Hark",
        "timezone=Europe/London",
        f"wifi_ssid={SSID}",
        f"wifi_passphrase={PASSPHRASE}",
        "wifi_country=gb",
        f"ssh_authorized_key={key}",
    ]
    return "\r\n".join(lines).encode() + b"\r\n"


# --- valid settings -------------------------------------------------------------

def test_full_settings_are_applied_and_the_file_renamed(card, ssh_key):
    """A complete settings file written on Windows (CRLF) is applied: the
    host name lowercased, the time zone linked, Wi-Fi as a hex SSID and a
    hashed PSK with the upper-cased country, the SSH key installed with
    private modes and a host key made; the file is renamed with the
    passphrase blanked, and the machine id is appended to cmdline.txt once."""
    card.run(full_settings(ssh_key))
    state = card.state

    assert (state / "hostname").read_text() == "kitchen-hark\n"
    assert os.readlink(state / "localtime") == "/usr/share/zoneinfo/Europe/London"

    wpa = state / "wpa_supplicant-wlan0.conf"
    conf = [line.strip() for line in wpa.read_text().splitlines()]
    assert "country=GB" in conf, conf
    assert f"ssid={SSID.encode().hex()}" in conf, conf
    psks = [line for line in conf if line.startswith("psk=")]
    assert psks == [f"psk={psk(SSID, PASSPHRASE)}"], conf
    assert len(psks[0]) == len("psk=") + 64
    assert mode(wpa) == 0o600

    ssh = state / "ssh"
    assert (ssh / "authorized_keys").read_text() == ssh_key + "\n"
    assert mode(ssh) == 0o700 and mode(ssh / "authorized_keys") == 0o600
    host_key = ssh / "ssh_host_ed25519_key"
    assert host_key.is_file() and mode(host_key) == 0o600
    assert (ssh / "ssh_host_ed25519_key.pub").read_text().startswith("ssh-ed25519 ")

    assert not (card.boot / "hark-settings.txt").exists()
    applied = card.applied
    assert BLANKED in applied.splitlines() or BLANKED + "\r" in applied.splitlines(), applied
    assert "hostname=Kitchen-Hark" in applied
    assert card.problems() == [], applied
    for p, entry in snapshot(card.boot, state).items():
        if entry[0] == "file":
            assert PASSPHRASE.encode() not in entry[2], f"the passphrase is in {p}"

    cmdline = (card.boot / "cmdline.txt").read_text()
    assert cmdline == CMDLINE.rstrip("\n") + f" systemd.machine_id={card.machine_id}\n"


def test_second_boot_without_settings_changes_nothing(card, ssh_key):
    """After the first boot applied everything, the next one (the machine id
    now on the kernel command line, no new settings) leaves the FAT
    partition and the kept settings exactly as they were, host key included."""
    card.run(full_settings(ssh_key))
    card.reboot()
    assert f"systemd.machine_id={card.machine_id}" in card.proc_cmdline.read_text()
    before = snapshot(card.boot, card.state)
    card.run()
    assert snapshot(card.boot, card.state) == before
    assert (card.boot / "cmdline.txt").read_text().count("systemd.machine_id=") == 1


def test_ssh_off_removes_the_authorized_keys(card, ssh_key):
    """ssh=off in a later settings file removes the installed keys, so SSH
    accepts no one."""
    card.run(f"ssh_authorized_key={ssh_key}\n")
    assert (card.state / "ssh" / "authorized_keys").is_file()
    card.reboot()
    card.run("ssh=off\n")
    assert not (card.state / "ssh" / "authorized_keys").exists()
    assert card.problems() == [], card.applied


# --- bad values ---------------------------------------------------------------------

def test_bad_values_are_listed_as_problems_and_old_values_stay(card):
    """Each bad line is named in the applied file's PROBLEM list; the kept
    host name, time zone and Wi-Fi stay as they were, and a too-short
    passphrase changes no Wi-Fi."""
    card.state.mkdir()
    (card.state / "hostname").write_text("hark\n")
    (card.state / "localtime").symlink_to("/usr/share/zoneinfo/UTC")
    old_wifi = "network={\n\tssid=4f6c64\n\tpsk=" + "0" * 64 + "\n}\n"
    (card.state / "wpa_supplicant-wlan0.conf").write_text(old_wifi)
    card.run(
        "hostname=-bad-\n"
        "timezone=../../etc/passwd\n"
        "wifi_country=GBR\n"
        "this line has no equals sign\n"
        "colour=blue\n"
        "wifi_ssid=Cafe\n"
        "wifi_passphrase=short\n"
    )
    problems = card.problems()
    expected = [
        ("hostname '-bad-'",),
        ("timezone '../../etc/passwd'",),
        ("wifi_country 'GBR'",),
        ("without '='", "this line has no equals sign"),
        ("unknown setting 'colour'",),
        ("wifi_passphrase", "8 to 63", "has 5"),
    ]
    for words in expected:
        assert any(all(w in p for w in words) for p in problems), (words, problems)
    assert len(problems) == len(expected), problems

    assert (card.state / "hostname").read_text() == "hark\n"
    assert os.readlink(card.state / "localtime") == "/usr/share/zoneinfo/UTC"
    assert (card.state / "wpa_supplicant-wlan0.conf").read_text() == old_wifi
    assert "wifi_passphrase=short" not in card.applied
    assert not (card.boot / "hark-settings.txt").exists()


def test_open_network_without_passphrase(card):
    """wifi_ssid without wifi_passphrase is an open network: key_mgmt=NONE,
    no PSK."""
    card.run("wifi_ssid=Cafe Libre\nwifi_country=FR\n")
    conf = [line.strip() for line in (card.state / "wpa_supplicant-wlan0.conf").read_text().splitlines()]
    assert f"ssid={b'Cafe Libre'.hex()}" in conf and "key_mgmt=NONE" in conf, conf
    assert not any(line.startswith("psk=") for line in conf), conf
    assert card.problems() == []


def test_passphrase_written_with_spaces_is_blanked(card):
    """The passphrase never stays on the FAT partition, however the line is
    spaced."""
    card.run("wifi_ssid=Home\nwifi_passphrase = correct horse battery\nwifi_country=GB\n")
    assert (card.state / "wpa_supplicant-wlan0.conf").is_file(), "the line was applied"
    assert "correct horse battery" not in card.applied, card.applied


# --- hark.toml -----------------------------------------------------------------------

def test_valid_hark_toml_is_kept_and_renamed(card):
    """A hark.toml that passes `hark config check` becomes the kept
    configuration, is renamed hark.applied.toml, and clears an earlier
    rejection's problem note."""
    (card.boot / "hark.toml.problem.txt").write_text("an earlier rejection\n")
    config = "[audio.playback]\nvolume = 55\n"
    card.run(config=config)
    assert (card.state / "hark.toml").read_text() == config
    assert (card.boot / "hark.applied.toml").read_text() == config
    assert not (card.boot / "hark.toml").exists()
    assert not (card.boot / "hark.toml.problem.txt").exists()
    assert not (card.state / "hark.toml.check").exists()


def test_invalid_hark_toml_is_rejected_and_the_old_one_stays(card):
    """A hark.toml that fails `hark config check` leaves the kept
    configuration untouched, is renamed hark.rejected.toml, and
    hark.toml.problem.txt says what is wrong with it."""
    card.state.mkdir()
    old = "[audio.playback]\nvolume = 40\n"
    (card.state / "hark.toml").write_text(old)
    bad = "[audio.playback]\nvolume = 'loud'\n"
    card.run(config=bad)
    assert (card.state / "hark.toml").read_text() == old
    assert (card.boot / "hark.rejected.toml").read_text() == bad
    assert not (card.boot / "hark.toml").exists()
    assert not (card.boot / "hark.applied.toml").exists()
    problem = (card.boot / "hark.toml.problem.txt").read_text()
    assert "volume" in problem and "loud" in problem, problem
    assert not (card.state / "hark.toml.check").exists()
