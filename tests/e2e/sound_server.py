"""A real sound device that can vanish, stall and come back: a PulseAudio
server of the test's own (one null sink, "room", whose monitor is the
microphone), reached through ALSA's pulse plugin, the path a USB or
Bluetooth headset takes on a desktop. Killing the server is the device
unplugged mid-stream (ALSA answers reads and writes with EIO and opens with
an error); stopping it (SIGSTOP) is a device that stops answering, so the
thread inside it blocks; starting it again is the device plugged back in.

Speech is played into the room with paplay, a real client of the server,
as a person would talk into the microphone."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

PULSEAUDIO = shutil.which("pulseaudio")
PAPLAY = shutil.which("paplay")
AVAILABLE = bool(PULSEAUDIO and PAPLAY and list(Path("/usr/lib").glob("*/alsa-lib/libasound_module_pcm_pulse.so")))
WHY_NOT = "pulseaudio, pulseaudio-utils and libasound2-plugins (tests/setup.sh installs them)"


class SoundServer:
    def __init__(self, tmp: Path):
        self.dir = tmp
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket = self.dir / "native"
        (self.dir / "default.pa").write_text(
            f"load-module module-native-protocol-unix socket={self.socket} auth-anonymous=1\n"
            "load-module module-null-sink sink_name=room rate=16000 channels=1\n"
        )
        self.alsa_conf = self.dir / "asound.conf"
        self.alsa_conf.write_text(
            f'pcm.room_mic {{ type pulse; server "unix:{self.socket}"; device "room.monitor" }}\n'
            f'pcm.room_speaker {{ type pulse; server "unix:{self.socket}"; device "room" }}\n'
        )
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict:
        """What a process needs to find the devices `room_mic` and
        `room_speaker`."""
        return {"ALSA_CONFIG_PATH": f"/usr/share/alsa/alsa.conf:{self.alsa_conf}"}

    def client_env(self) -> dict:
        return {**os.environ, "PULSE_SERVER": f"unix:{self.socket}", "HOME": str(self.dir)}

    def start(self):
        if self.socket.exists():
            self.socket.unlink()
        env = {**os.environ, "HOME": str(self.dir), "XDG_RUNTIME_DIR": str(self.dir)}
        self.log = open(self.dir / "pulseaudio.log", "ab")
        self.proc = subprocess.Popen(
            [PULSEAUDIO, "-n", "-F", str(self.dir / "default.pa"), "--daemonize=no",
             "--exit-idle-time=-1", "--use-pid-file=no", "--disallow-exit"],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pulseaudio exited: {(self.dir / 'pulseaudio.log').read_text()}")
            if self.socket.exists():
                return self
            time.sleep(0.05)
        raise RuntimeError("pulseaudio did not make its socket")

    def unplug(self):
        """The device vanishes mid-stream."""
        self.proc.kill()
        self.proc.wait()

    def hang(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def say(self, wav: Path):
        """Plays a recording into the room (to its end)."""
        subprocess.run([PAPLAY, "--device=room", str(wav)], env=self.client_env(), check=True, timeout=60)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
