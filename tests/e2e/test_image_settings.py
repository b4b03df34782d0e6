"""The SD image's first-boot settings (image/rootfs/usr/lib/hark-image/settings):
hark-settings.txt and hark.toml on the FAT partition are applied once to the
data partition and renamed, with secrets blanked and problems listed, and the
first boot's machine id is kept on the kernel command line. board= writes the
board's device-tree overlays into config.txt and restarts once.

The script runs for real in its test mode (HARK_SETTINGS_TEST=yes: no
remounts, no host name change) on temporary directories standing in for the
FAT partition (HARK_BOOT_DIR), the kept settings (HARK_SETTINGS_DIR),
/proc/cmdline (HARK_CMDLINE) and /etc/machine-id (HARK_MACHINE_ID), with the
real wpa_passphrase, ssh-keygen and `hark config check`; the restart it asks
for goes to a stand-in program that counts (HARK_REBOOT). Whatever the
settings, it must exit 0: a bad setting never stops the boot."""

import os
import stat
import subprocess
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import HARK, REPO

SCRIPT = REPO / "image" / "rootfs" / "usr" / "lib" / "hark-image" / "settings"
BOARDS = SCRIPT.with_name("boards")
CMDLINE = "console=tty1 root=LABEL=hark-root ro rootwait\n"
# config.txt as Debian's raspi-firmware writes it for the image.
CONFIG_TXT = """# Do not modify this file!
#
# It is automatically generated upon install or update of either the
# firmware or the Linux kernel.
#
# If you need to set boot-time parameters, do so via the
# /etc/default/raspi-firmware, /etc/default/raspi-firmware-custom or
# /etc/default/raspi-extra-cmdline files.

# Switch the CPU from ARMv7 into ARMv8 (aarch64) mode
arm_64bit=1

enable_uart=1
upstream_kernel=1

kernel=vmlinuz-6.12.117+deb13-arm64
# For details on the initramfs directive, see
# https://www.raspberrypi.org/forums/viewtopic.php?f=63&t=10532
initramfs initrd.img-6.12.117+deb13-arm64
"""
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
    reboots_file: Path

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
            HARK_REBOOT=str(self.reboots_file.with_suffix(".sh")),
        )
        done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"exit {done.returncode}: a bad setting must not stop the boot\n{done.stderr}"
        return done

    def reboot(self):
        """The next boot: the kernel runs with what cmdline.txt now says."""
        self.proc_cmdline.write_text((self.boot / "cmdline.txt").read_text())

    @property
    def reboots(self) -> int:
        """How many times the script asked for a restart."""
        return len(self.reboots_file.read_text().splitlines()) if self.reboots_file.exists() else 0

    @property
    def config_txt(self) -> str:
        return (self.boot / "config.txt").read_text()

    def board_config(self) -> dict:
        """The kept hark.toml's [board] table."""
        return tomllib.loads((self.state / "hark.toml").read_text()).get("board", {})

    def notes(self) -> list[str]:
        return [line.removeprefix("# NOTE: ") for line in self.applied.splitlines() if line.startswith("# NOTE: ")]

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
    (boot / "config.txt").write_text(CONFIG_TXT)
    reboots = tmp_path / "reboots"
    stand_in = reboots.with_suffix(".sh")
    stand_in.write_text(f"#!/bin/sh\necho reboot >>'{reboots}'\n")
    stand_in.chmod(0o755)
    return Card(boot, tmp_path / "state", proc_cmdline, machine_id, machine_id_file, reboots)


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


# --- board= ------------------------------------------------------------------------


def board_table() -> dict[str, list[str]]:
    """The boards file: board name -> its overlays."""
    table = {}
    for line in BOARDS.read_text().splitlines():
        words = line.split()
        if words and words[0] == "board":
            table[words[1]] = words[2:]
    return table


def overlay_block(board: str) -> str:
    """The lines board=<board> adds to config.txt."""
    start = f"# --- hark-settings board={board}: its HAT's device-tree overlays (the next board= replaces this block) ---"
    lines = [start, "[all]"]
    lines += [f"dtoverlay={o}" for o in board_table()[board]]
    lines.append("# --- end of hark-settings board= ---")
    return "\n" + "\n".join(lines) + "\n"


@pytest.fixture
def image_config(card):
    """The kept hark.toml as the image has it: the package's, every key
    commented (image/make-image copies it to the data partition)."""
    card.state.mkdir(exist_ok=True)
    packaged = (REPO / "image" / "deb" / "hark.toml").read_text()
    (card.state / "hark.toml").write_text(packaged)
    return packaged


def test_board_table_names_the_profiles_and_their_overlays():
    """The boards board= accepts are Hark's shipped profiles and auto; every
    overlay one names has its source in image/overlays, and every source
    there is named by a board (image/overlays/build compiles them all)."""
    table = board_table()
    profiles = {tomllib.loads(p.read_text())["name"] for p in (REPO / "board" / "profiles").glob("*.toml")}
    assert set(table) == profiles | {"auto"}, table
    named = {o for overlays in table.values() for o in overlays}
    sources = {p.stem for p in (REPO / "image" / "overlays").glob("*.dts")}
    assert named == sources, (named, sources)
    assert table["respeaker-2mic"] == ["hark-respeaker-2mic", "hark-spi0"]
    assert table["respeaker-4mic"] == ["hark-spi0"]
    assert table["auto"] == table["generic-pi"] == table["usb-mic-array"] == []


def test_board_respeaker_2mic_loads_its_overlays_and_sets_the_board(card, image_config):
    """board=respeaker-2mic (written with CRLF) appends the HAT's overlays
    to config.txt in their own block after [all], leaves the firmware's lines
    as they were, sets [board] board = "respeaker-2mic" in the kept hark.toml
    in place of the commented default (nothing else in it changes), and
    restarts once so the firmware loads the overlays."""
    card.run(b"board=respeaker-2mic\r\n")
    assert card.config_txt == CONFIG_TXT + overlay_block("respeaker-2mic")
    assert "dtoverlay=hark-respeaker-2mic\ndtoverlay=hark-spi0\n" in card.config_txt
    assert card.board_config() == {"board": "respeaker-2mic"}
    kept = (card.state / "hark.toml").read_text()
    assert kept == image_config.replace('#board = "auto"', 'board = "respeaker-2mic"'), kept
    assert card.reboots == 1
    assert card.problems() == [], card.applied
    assert any("hark-respeaker-2mic hark-spi0" in n and "restarted" in n for n in card.notes()), card.notes()
    assert not (card.boot / "config.txt.new").exists() and not (card.state / "hark.toml.new").exists()


def test_changing_the_board_replaces_the_block_and_auto_removes_it(card, image_config):
    """A later board= replaces the block instead of adding another: the
    4-mic array loads only the SPI overlay (its microphones need a driver
    Debian lacks, which the applied file says), and auto or generic-pi
    leave config.txt exactly as the firmware package wrote it. Each change
    restarts once."""
    card.run("board=respeaker-2mic\n")
    card.reboot()
    card.run("board=respeaker-4mic\n")
    assert card.config_txt == CONFIG_TXT + overlay_block("respeaker-4mic")
    assert card.config_txt.count("# --- hark-settings board=") == 1
    assert card.board_config() == {"board": "respeaker-4mic"}
    assert any("AC108" in n and "LEDs work" in n for n in card.notes()), card.notes()
    assert card.reboots == 2
    card.reboot()
    card.run("board=auto\n")
    assert card.config_txt == CONFIG_TXT
    assert card.board_config() == {"board": "auto"}
    assert card.reboots == 3
    card.reboot()
    card.run("board = generic-pi\n")
    assert card.config_txt == CONFIG_TXT
    assert card.board_config() == {"board": "generic-pi"}
    assert card.reboots == 3, "config.txt did not change: no restart"
    assert card.problems() == [], card.applied


def test_the_same_board_again_does_not_restart(card, image_config):
    """board= naming the board already set changes nothing in config.txt,
    so the appliance does not restart again."""
    card.run("board=respeaker-2mic\n")
    card.reboot()
    before = card.config_txt
    card.run("board=respeaker-2mic\n")
    assert card.config_txt == before
    assert card.reboots == 1
    assert card.board_config() == {"board": "respeaker-2mic"}


@pytest.mark.parametrize("name", ["respeaker-6mic", "ReSpeaker-2mic", "../../etc/passwd", "simulated", ""])
def test_an_unknown_board_is_a_problem_and_changes_nothing(card, image_config, name):
    """A board the image does not know is listed as a problem naming the
    known ones; config.txt and hark.toml stay as they were, nothing
    restarts, and the other settings of the file still apply."""
    card.run(f"board={name}\nhostname=kitchen\n")
    (problem,) = card.problems()
    assert f"board '{name}'" in problem and "respeaker-2mic" in problem and "not changed" in problem, problem
    assert card.config_txt == CONFIG_TXT
    assert (card.state / "hark.toml").read_text() == image_config
    assert card.reboots == 0
    assert (card.state / "hostname").read_text() == "kitchen\n"


def test_board_in_a_configuration_without_a_board_table(card):
    """A kept hark.toml without [board] (one the user put on the card) gains
    the table; its own settings stay, and it still passes the check."""
    card.run(config="[audio.playback]\nvolume = 40\n")
    card.reboot()
    card.run("board=usb-mic-array\n")
    config = tomllib.loads((card.state / "hark.toml").read_text())
    assert config == {"audio": {"playback": {"volume": 40}}, "board": {"board": "usb-mic-array"}}
    assert card.config_txt == CONFIG_TXT and card.reboots == 0
    assert card.problems() == [], card.applied


def test_board_setting_wins_over_a_hark_toml_given_with_it(card):
    """A hark.toml and board= on the card at the same boot: the file is
    taken first, then board= sets its [board] board."""
    card.run("board=respeaker-2mic\n", config='[board]\nboard = "generic-pi"\ndebounce_ms = 40\n')
    assert card.board_config() == {"board": "respeaker-2mic", "debounce_ms": 40}
    assert card.config_txt == CONFIG_TXT + overlay_block("respeaker-2mic")


def test_board_without_config_txt_is_a_problem(card, image_config):
    """No config.txt on the boot partition (not the image's): nothing to
    write the overlays into, so the board is not set either."""
    (card.boot / "config.txt").unlink()
    card.run("board=respeaker-2mic\n")
    (problem,) = card.problems()
    assert "no config.txt" in problem, problem
    assert (card.state / "hark.toml").read_text() == image_config
    assert not (card.boot / "config.txt").exists() and card.reboots == 0
